package main

import "testing"

// FuzzHostDescriptors: any sequence of starts (every event type, any
// strings of NCCL's spelling or not, parents that are handles, stale
// handles or raw values), states (KernelChStop or any id, with or without
// arguments), stops of live, stale, tagged or NULL handles: no crash, no
// double free (glibc's checks abort on one), every event fed to the hooks
// has a known phase, function id and work counter, no work counter of a
// channel starts twice, and every STOP follows its own START, once. (Go's
// fuzzer sees no coverage of C: this is random mutation of the ops.)
func FuzzHostDescriptors(f *testing.F) {
	f.Add([]byte{0, 1, 0, 0, 0, 6, 0, 1, 1, 1, 7, 1, 3, 1, 0, 0})
	f.Add([]byte{0, 6, 0x81, 3, 1, 3, 9, 1, 1, 3, 9, 1, 2, 3, 4, 1, 3, 3, 0, 0, 4, 1, 5, 0})
	f.Add([]byte{0, 2, 2, 7, 0, 6, 7, 0, 0, 6, 7, 1, 1, 0, 1, 1, 1, 1, 1, 1})
	f.Fuzz(func(t *testing.T, ops []byte) {
		if len(ops) > 4096 { // 1024 ops
			return
		}
		if bad := hostDescriptorRun(ops); bad != 0 {
			t.Fatalf("ops %v: the hooks were fed a bad event (%#x)", ops, bad)
		}
	})
}
