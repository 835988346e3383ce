// Command plugin is libnccl-profiler-hooks.so, the NCCL profiler plugin
// (build with -buildmode=c-shared, linked -z nodelete). It exports
// ncclProfiler_v7 (NCCL pull request 2285: v6 plus getDeviceHook), v6 and v5
// from exports.c and wires the other packages together: it loads the hook
// profile named by NCCL_HOOKS_PROFILE, compiles it once per process, loads it
// once per device, hands NCCL the hook, and drains the device buffers into
// the sinks. Every failure logs one WARN through NCCL's logger and leaves the
// plugin inactive; the job it profiles is never failed.
package main

/*
#cgo CFLAGS: -O2 -Wall -I${SRCDIR}/../abi
#cgo LDFLAGS: -ldl
#include <stdint.h>
#include <stdlib.h>
#include "exports.h"
*/
import "C"

import (
	"fmt"
	"unsafe"
)

func main() {}

//export hooksInit
func hooksInit(commID C.uint64_t, commName *C.char, nNodes, nRanks, rank C.int) (id C.uint64_t) {
	defer guard("init")
	name := ""
	if commName != nil {
		name = C.GoString(commName)
	}
	return C.uint64_t(plugin.init(uint64(commID), name, int(nNodes), int(nRanks), int(rank)))
}

//export hooksFinalize
func hooksFinalize(id C.uint64_t) {
	defer guard("finalize")
	plugin.finalize(uint64(id))
}

//export hooksGetDeviceHook
func hooksGetDeviceHook(cudaDev C.int, comm C.uint64_t, hook, ctx *C.uintptr_t) {
	defer guard("getDeviceHook")
	*hook, *ctx = 0, 0
	h, c := plugin.deviceHook(int(cudaDev), uint64(comm))
	*hook, *ctx = C.uintptr_t(h), C.uintptr_t(c)
}

// guard turns a panic in an entry point into one WARN and an inactive plugin:
// a bug here must never take down the job being profiled.
func guard(where string) {
	if r := recover(); r != nil {
		plugin.disable(fmt.Sprintf("internal error in %s: %v", where, r))
	}
}

// ncclLog logs through NCCL's logger at level abi.LogWarn or abi.LogInfo
// (subsystem NCCL_PROFILE).
func ncclLog(level int, msg string) {
	cs := C.CString(msg)
	defer C.free(unsafe.Pointer(cs))
	C.hooks_log(C.int(level), cs)
}

// funcName resolves a function id through NCCL's ncclProfilerDevFuncName,
// found with dlsym(RTLD_DEFAULT); "" when NCCL does not export it or the id
// is unknown.
func funcName(id uint32) string {
	p := C.hooks_func_name(C.int(id))
	if p == nil {
		return ""
	}
	return C.GoString(p)
}

func haveFuncNames() bool  { return C.hooks_have_func_names() != 0 }
func harnessPresent() bool { return C.hooks_harness_present() != 0 }
