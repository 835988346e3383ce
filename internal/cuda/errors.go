package cuda

/*
#include "hk_cuda.h"
*/
import "C"

import (
	"errors"
	"fmt"

	"github.com/ncclhooks/ncclhooks/internal/gpuerr"
)

// Error is a failed CUDA driver, NVRTC or nvJitLink call.
type Error struct {
	Op   string // the API function, e.g. "cuModuleLoadData"
	Code int    // its result code
	Name string // e.g. "CUDA_ERROR_INVALID_IMAGE" (driver only)
	Desc string // the library's description of Code

	isDriver bool // a CUDA driver call (not NVRTC or nvJitLink)
}

// Sentinel errors, for errors.Is.
var (
	ErrNoDriver = gpuerr.ErrNoDriver // no libcuda could be loaded
	ErrNoDevice = gpuerr.ErrNoDevice // the driver sees no CUDA device (CUDA_ERROR_NO_DEVICE)
	ErrClosed   = errors.New("cuda: use of a closed device, stream or module")
)

// ErrDeinitialized is CUDA_ERROR_DEINITIALIZED: the driver is shutting down,
// as it does at process exit. Calls fail with an *Error that Is it.
var ErrDeinitialized = errors.New("the CUDA driver is shutting down")

// The driver result codes the sentinels stand for.
const (
	cudaErrorDeinitialized = 4   // CUDA_ERROR_DEINITIALIZED
	cudaErrorNoDevice      = 100 // CUDA_ERROR_NO_DEVICE
)

// Is makes errors.Is(err, ErrDeinitialized) true for a driver call that
// failed because the driver is shutting down, and errors.Is(err,
// ErrNoDevice) for one that found no device.
func (e *Error) Is(target error) bool {
	if !e.isDriver {
		return false
	}
	return target == ErrDeinitialized && e.Code == cudaErrorDeinitialized ||
		target == ErrNoDevice && e.Code == cudaErrorNoDevice
}

func (e *Error) Error() string {
	switch {
	case e.Name != "" && e.Desc != "":
		return fmt.Sprintf("cuda: %s: %s: %s", e.Op, e.Name, e.Desc)
	case e.Desc != "":
		return fmt.Sprintf("cuda: %s: %s", e.Op, e.Desc)
	}
	return fmt.Sprintf("cuda: %s: error %d", e.Op, e.Code)
}

// missing is the wrappers' code for a function the loaded library lacks.
const missing = C.HK_MISSING

func cuErr(op string, r C.int) error {
	if r == 0 {
		return nil
	}
	if r == missing {
		return &Error{Op: op, Code: int(r), Desc: "not exported by the loaded CUDA driver: update the NVIDIA driver"}
	}
	e := &Error{Op: op, Code: int(r), isDriver: true}
	if s := C.hk_cuErrorName(r); s != nil {
		e.Name = C.GoString(s)
	}
	if s := C.hk_cuErrorString(r); s != nil {
		e.Desc = C.GoString(s)
	}
	return e
}

func nvrtcErr(op string, r C.int) error {
	if r == 0 {
		return nil
	}
	if r == missing {
		return &Error{Op: op, Code: int(r), Desc: "not exported by the loaded NVRTC"}
	}
	e := &Error{Op: op, Code: int(r)}
	if s := C.hk_nvrtcErrorString(r); s != nil {
		e.Desc = C.GoString(s)
	}
	return e
}

// jitLinkErr names nvJitLink's result codes (nvJitLink has no error-string API).
func jitLinkErr(op string, r C.int, log string) error {
	if r == 0 {
		return nil
	}
	names := map[C.int]string{
		1: "NVJITLINK_ERROR_UNRECOGNIZED_OPTION", 2: "NVJITLINK_ERROR_MISSING_ARCH",
		3: "NVJITLINK_ERROR_INVALID_INPUT", 4: "NVJITLINK_ERROR_PTX_COMPILE", 5: "NVJITLINK_ERROR_NVVM_COMPILE",
		6: "NVJITLINK_ERROR_INTERNAL", 7: "NVJITLINK_ERROR_THREADPOOL", 8: "NVJITLINK_ERROR_UNRECOGNIZED_INPUT",
		9: "NVJITLINK_ERROR_FINALIZE",
	}
	e := &Error{Op: op, Code: int(r), Name: names[r], Desc: log}
	if r == missing {
		e.Desc = "not exported by the loaded nvJitLink"
	}
	return e
}
