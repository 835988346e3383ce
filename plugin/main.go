// Command plugin is libnccl-profiler-hooks.so, the NCCL profiler plugin
// (build with -buildmode=c-shared, linked -z nodelete). It exports
// ncclProfiler_v7 (NCCL pull request 2285: v6 plus getDeviceHook; its first
// six members are NCCL 2.31's official v7), v6 and v5 from exports.c, turns
// NCCL's host events into hook events in C (hostsrc.c, NCCL_HOOKS_SOURCE=host),
// reads the NCCL_HOOKS_* knobs, and hands each call to the process's
// lifecycle.Session (profile, compilation, devices, drain, sinks).
// Every failure logs one WARN through NCCL's logger and leaves the plugin
// inactive; the job it profiles is never failed.
package main

/*
#cgo CFLAGS: -O2 -Wall -I${SRCDIR}/../internal/abi
#cgo LDFLAGS: -ldl
#include <stdint.h>
#include <stdlib.h>
#include "exports.h"
*/
import "C"

import (
	"fmt"
	"runtime/debug"
	"sync"
	"syscall"
	"unsafe"

	"github.com/ncclhooks/ncclhooks/internal/lifecycle"
)

func main() {}

// plugin is the process's one session: the Go image stays resident (-z
// nodelete), so it outlives every dlclose and reload by NCCL.
var plugin = lifecycle.New(lifecycle.Env{Log: ncclLog, FuncName: funcName, HostFuncName: hostFuncName, Knobs: readKnobs,
	HarnessPresent: harnessPresent, DeviceHookNCCL: deviceHookNCCL, NCCLVersion: ncclVersion, NCCLLibrary: ncclLibrary, PluginVersion: version()})

// gitDescribe is set by make build (-X main.gitDescribe, git describe), as
// for the CLI: a worktree's build carries no VCS stamp.
var gitDescribe string

// version names this build in the output's header: git describe, else the
// VCS revision the go command stamped, else "" (unknown).
func version() string {
	if gitDescribe != "" {
		return gitDescribe
	}
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return ""
	}
	var rev, dirty string
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			if s.Value == "true" {
				dirty = "-dirty"
			}
		}
	}
	if len(rev) > 12 {
		rev = rev[:12]
	}
	if rev == "" {
		return ""
	}
	return rev + dirty
}

//export hooksInit
func hooksInit(commID C.uint64_t, commName *C.char, nNodes, nRanks, rank, version, cudaDev C.int,
	host *C.int, entry, ctx *C.uintptr_t) (id C.uint64_t) {
	defer guard("init")
	*host, *entry, *ctx = 0, 0, 0
	name := ""
	if commName != nil {
		name = C.GoString(commName)
	}
	i := plugin.Init(uint64(commID), name, int(nNodes), int(nRanks), int(rank), int(version))
	if hh, ok := plugin.HostHook(i, int(cudaDev)); ok {
		*host = 1
		*entry, *ctx = C.uintptr_t(hh.Entry), C.uintptr_t(hh.Ctx)
	}
	installTerm()
	installExit()
	return C.uint64_t(i)
}

var exitOnce sync.Once

// installExit registers the plugin's exit handler (exit.c) at the first
// init, after the job's first CUDA call registered the CUDA runtime's, so
// that it runs first: the drain stops reading the buffers before the
// driver's teardown unmaps them.
func installExit() {
	exitOnce.Do(func() {
		if rc := C.hooks_exit_install(); rc != 0 {
			ncclLog(lifecycle.LogWarn, "ncclhooks: cannot register an exit handler (atexit failed): a process that exits without finalizing its communicators leaves no final dump_stats, and may fault at exit")
		}
	})
}

// hooksExit is the process's exit (exit.c): see lifecycle.Session.Exit.
//
//export hooksExit
func hooksExit() {
	defer guard("exit")
	plugin.Exit()
}

var termOnce sync.Once

// installTerm catches SIGTERM once the outputs are open, so that a job
// killed by its launcher still leaves a final dump (sigterm.c says how the
// job's own handling of SIGTERM is kept).
func installTerm() {
	termOnce.Do(func() {
		d := plugin.TermDump()
		if d <= 0 {
			return
		}
		if rc := C.hooks_term_install(C.int(d.Milliseconds())); rc != 0 {
			ncclLog(lifecycle.LogWarn, fmt.Sprintf("ncclhooks: cannot catch SIGTERM for a final dump (%v): a job killed by SIGTERM leaves no final dump_stats", syscall.Errno(rc)))
		}
	})
}

// hooksTerminate starts the final dump of a process that got SIGTERM and
// returns: sigterm.c waits for hooks_term_done, at most NCCL_HOOKS_SIGTERM_DUMP.
//
//export hooksTerminate
func hooksTerminate() {
	go func() {
		defer C.hooks_term_done()
		defer guard("SIGTERM dump")
		plugin.Terminate()
	}()
}

//export hooksFinalize
func hooksFinalize(id C.uint64_t) {
	defer guard("finalize")
	plugin.Finalize(uint64(id))
}

//export hooksGetDeviceHook
func hooksGetDeviceHook(cudaDev C.int, comm C.uint64_t, hook, ctx *C.uintptr_t) {
	defer guard("getDeviceHook")
	*hook, *ctx = 0, 0
	h, c := plugin.DeviceHook(int(cudaDev), uint64(comm))
	*hook, *ctx = C.uintptr_t(h), C.uintptr_t(c)
}

// guard turns a panic in an entry point into one WARN and an inactive plugin:
// a bug here must never take down the job being profiled.
func guard(where string) {
	if r := recover(); r != nil {
		plugin.Disable(fmt.Sprintf("internal error in %s: %v", where, r))
	}
}

// ncclLog logs through NCCL's logger at level abi.LogWarn or abi.LogInfo
// (subsystem NCCL_PROFILE).
func ncclLog(level int, msg string) {
	cs := C.CString(msg)
	defer C.free(unsafe.Pointer(cs))
	C.hooks_log(C.int(level), cs)
}

// funcName resolves a function id through NCCL's ncclProfilerDevFuncName
// (found in the global scope, else in the library that called init, else in
// any loaded library: exports.c); "" when none exports it or the id is
// unknown.
func funcName(id uint32) string {
	p := C.hooks_func_name(C.int(id))
	if p == nil {
		return ""
	}
	return C.GoString(p)
}

func harnessPresent() bool { return C.hooks_harness_present() != 0 }

// hostFuncName names the host-event source's function ids (hostsrc.c's
// table); "" past its end.
func hostFuncName(id uint32) string {
	p := C.hooks_host_func_name(C.int(id))
	if p == nil {
		return ""
	}
	return C.GoString(p)
}

func deviceHookNCCL() bool { return C.hooks_nccl_has_device_hook() != 0 }

func ncclVersion() int { return int(C.hooks_nccl_version()) }

// ncclLibrary is where the NCCL that called init lives (exports.c,
// findNCCL) and which library's kernels call the device hook.
func ncclLibrary() lifecycle.NCCLLibrary {
	return lifecycle.NCCLLibrary{Path: C.GoString(C.hooks_nccl_path()), Why: C.GoString(C.hooks_nccl_why()),
		HookPath: C.GoString(C.hooks_hook_lib())}
}
