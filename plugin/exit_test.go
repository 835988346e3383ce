package main

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"
)

// A job that exits after its hooks ran without finalizing its
// communicators (torch without destroy_process_group): the plugin's exit
// handler writes the final dump a last finalize would have, with exact
// totals, logs one INFO and no WARN, and the job's exit status is its own.
func TestExitWithoutFinalizeLeavesAFinalDump(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "out")
	prof := writeProfile(t, dir, "version: 1\nname: exit\noutput: {dump_interval: 1h}\nhooks:\n  - name: all\n    fields: [timestamp, workCounter, funcId, channelId, phase]\n    buffer: {slots: 65536}\n")
	env := []string{"NCCL_HOOKS_PROFILE=" + prof, "NCCL_HOOKS_BACKEND=cpu", "NCCL_HOOKS_DUMP_DIR=" + out, "CDRIVER_EXIT=1"}
	r, err := startDriver(t, env, 2, 2, 2, 3000, 2)
	if got := status(err); got != "exit 0" {
		t.Fatalf("the job ended with %s, want exit 0:\n%s", got, r.out)
	}
	if !strings.Contains(r.out, "EXIT") || strings.Contains(r.out, "FINALIZE_MS") {
		t.Fatalf("the driver did not exit after cycle 0 without finalizing:\n%s", r.out)
	}
	if len(r.warns) != 0 {
		t.Errorf("WARNs: %q", r.warns)
	}
	if n := strings.Count(r.out, "process exit with 4 communicator(s) not finalized: final dump written"); n != 1 {
		t.Errorf("%d INFO lines about the exit, want 1:\n%s", n, r.out)
	}
	o := readOutput(t, out)
	for d := 0; d < 2; d++ {
		k := fmt.Sprint("all ", d)
		st, ok := o.final[k]
		if !ok {
			t.Fatalf("%s: no final dump:\n%s", k, r.out)
		}
		if st.Matched != r.emitted[d] || st.Records+st.Dropped != st.Matched || st.Pending != 0 || uint64(o.records[k]) != st.Records {
			t.Errorf("%s: final %+v, %d record lines, emitted %d", k, st, o.records[k], r.emitted[d])
		}
	}
}
