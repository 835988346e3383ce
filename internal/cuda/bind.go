package cuda

// Binding the C entry points (hk_cu, hk_nvrtc, hk_jl) to the symbols of
// the loaded libraries.

/*
#include <stdlib.h>
#include "hk_cuda.h"
*/
import "C"

import (
	"fmt"
	"unsafe"
)

// sym returns the first of names that lib exports, or nil.
func sym(lib C.hk_h, names ...string) unsafe.Pointer {
	for _, n := range names {
		cs := C.CString(n)
		p := C.hk_sym(lib, cs)
		C.free(unsafe.Pointer(cs))
		if p != nil {
			return p
		}
	}
	return nil
}

// bindDriver fills hk_cu. Versioned names are the current ABI where the
// plain name is a legacy one (cuMemAlloc takes 32-bit sizes, ...). It returns
// the required symbols that are missing.
func bindDriver(lib C.hk_h) (missing []string) {
	t := &C.hk_cu
	req := func(dst *unsafe.Pointer, names ...string) {
		if *dst = sym(lib, names...); *dst == nil {
			missing = append(missing, names[0])
		}
	}
	opt := func(dst *unsafe.Pointer, names ...string) { *dst = sym(lib, names...) }
	req(&t.cuInit, "cuInit")
	req(&t.cuDriverGetVersion, "cuDriverGetVersion")
	req(&t.cuGetErrorName, "cuGetErrorName")
	req(&t.cuGetErrorString, "cuGetErrorString")
	req(&t.cuDeviceGetCount, "cuDeviceGetCount")
	req(&t.cuDeviceGet, "cuDeviceGet")
	req(&t.cuDeviceGetAttribute, "cuDeviceGetAttribute")
	req(&t.cuDeviceGetName, "cuDeviceGetName")
	req(&t.cuDevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain")
	req(&t.cuDevicePrimaryCtxRelease, "cuDevicePrimaryCtxRelease_v2")
	req(&t.cuCtxGetCurrent, "cuCtxGetCurrent")
	req(&t.cuCtxSetCurrent, "cuCtxSetCurrent")
	req(&t.cuModuleLoadData, "cuModuleLoadData")
	req(&t.cuModuleUnload, "cuModuleUnload")
	req(&t.cuModuleGetGlobal, "cuModuleGetGlobal_v2")
	req(&t.cuModuleGetFunction, "cuModuleGetFunction")
	req(&t.cuMemAlloc, "cuMemAlloc_v2")
	req(&t.cuMemFree, "cuMemFree_v2")
	req(&t.cuMemHostAlloc, "cuMemHostAlloc")
	req(&t.cuMemHostGetDevicePointer, "cuMemHostGetDevicePointer_v2")
	req(&t.cuMemFreeHost, "cuMemFreeHost")
	req(&t.cuStreamCreate, "cuStreamCreate")
	req(&t.cuStreamSynchronize, "cuStreamSynchronize")
	req(&t.cuStreamDestroy, "cuStreamDestroy_v2")
	req(&t.cuMemcpyHtoDAsync, "cuMemcpyHtoDAsync_v2")
	req(&t.cuMemcpyDtoHAsync, "cuMemcpyDtoHAsync_v2")
	req(&t.cuMemsetD8Async, "cuMemsetD8Async")
	req(&t.cuLaunchKernel, "cuLaunchKernel")
	// Optional: the backend does not need them (the harness does); a
	// wrapper reports a missing one when called.
	// Optional: the device's identity in the outputs (a device without
	// them is named by its ordinal).
	opt(&t.cuDeviceGetUuid, "cuDeviceGetUuid_v2", "cuDeviceGetUuid")
	opt(&t.cuDeviceGetPCIBusId, "cuDeviceGetPCIBusId")
	opt(&t.cuCtxSynchronize, "cuCtxSynchronize")
	opt(&t.cuMemcpyDtoDAsync, "cuMemcpyDtoDAsync_v2")
	opt(&t.cuEventCreate, "cuEventCreate")
	opt(&t.cuEventRecord, "cuEventRecord")
	opt(&t.cuEventSynchronize, "cuEventSynchronize")
	// _v2 (12.8+) fixed the semantics, same signature.
	opt(&t.cuEventElapsedTime, "cuEventElapsedTime_v2", "cuEventElapsedTime")
	opt(&t.cuEventDestroy, "cuEventDestroy_v2")
	opt(&t.cuStreamBeginCapture, "cuStreamBeginCapture_v2")
	opt(&t.cuStreamEndCapture, "cuStreamEndCapture")
	opt(&t.cuGraphInstantiateWithFlags, "cuGraphInstantiateWithFlags")
	opt(&t.cuGraphLaunch, "cuGraphLaunch")
	opt(&t.cuGraphExecDestroy, "cuGraphExecDestroy")
	opt(&t.cuGraphDestroy, "cuGraphDestroy")
	// Optional: Link falls back to nvJitLink or reports the absence.
	t.cuLinkCreate = sym(lib, "cuLinkCreate_v2")
	t.cuLinkAddData = sym(lib, "cuLinkAddData_v2")
	t.cuLinkComplete = sym(lib, "cuLinkComplete")
	t.cuLinkDestroy = sym(lib, "cuLinkDestroy")
	return missing
}

func bindNVRTC(lib C.hk_h) (missing []string) {
	t := &C.hk_nvrtc
	req := func(dst *unsafe.Pointer, name string) {
		if *dst = sym(lib, name); *dst == nil {
			missing = append(missing, name)
		}
	}
	req(&t.nvrtcVersion, "nvrtcVersion")
	req(&t.nvrtcGetErrorString, "nvrtcGetErrorString")
	req(&t.nvrtcCreateProgram, "nvrtcCreateProgram")
	req(&t.nvrtcCompileProgram, "nvrtcCompileProgram")
	req(&t.nvrtcGetProgramLogSize, "nvrtcGetProgramLogSize")
	req(&t.nvrtcGetProgramLog, "nvrtcGetProgramLog")
	req(&t.nvrtcGetCUBINSize, "nvrtcGetCUBINSize")
	req(&t.nvrtcGetCUBIN, "nvrtcGetCUBIN")
	req(&t.nvrtcDestroyProgram, "nvrtcDestroyProgram")
	return missing
}

// bindJitLink fills hk_jl. nvJitLink exports its API under versioned names
// (__nvJitLinkCreate_13_0; the header #defines the plain name to one of
// them), so try the plain name, then each minor of the library's major.
func bindJitLink(lib C.hk_h, major int) bool {
	t := &C.hk_jl
	versioned := func(name string) []string {
		names := []string{name}
		for minor := 9; minor >= 0; minor-- {
			names = append(names, fmt.Sprintf("__%s_%d_%d", name, major, minor))
		}
		return names
	}
	all := true
	bind := func(dst *unsafe.Pointer, name string) {
		if *dst = sym(lib, versioned(name)...); *dst == nil {
			all = false
		}
	}
	bind(&t.create, "nvJitLinkCreate")
	bind(&t.destroy, "nvJitLinkDestroy")
	bind(&t.addData, "nvJitLinkAddData")
	bind(&t.complete, "nvJitLinkComplete")
	bind(&t.getLinkedCubinSize, "nvJitLinkGetLinkedCubinSize")
	bind(&t.getLinkedCubin, "nvJitLinkGetLinkedCubin")
	bind(&t.getErrorLogSize, "nvJitLinkGetErrorLogSize")
	bind(&t.getErrorLog, "nvJitLinkGetErrorLog")
	return all
}
