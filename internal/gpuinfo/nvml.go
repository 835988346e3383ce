package gpuinfo

/*
#cgo LDFLAGS: -ldl
#include <stdlib.h>
#include "hk_nvml.h"
*/
import "C"

import (
	"errors"
	"sync"
	"unsafe"
)

// LibraryName is the NVML library the driver installs (go-nvml opens the same).
const LibraryName = "libnvidia-ml.so.1"

var (
	openOnce sync.Once
	openLib  Interface
	openErr  error
)

// Open loads NVML (LibraryName, found as dlopen finds it) once per process
// and returns it; an error when the library or its nvmlInit is missing (a
// machine without the NVIDIA driver).
func Open() (Interface, error) {
	openOnce.Do(func() { openLib, openErr = OpenLibrary(LibraryName) })
	return openLib, openErr
}

// OpenLibrary loads the NVML library at path (a name dlopen searches for,
// or a path) and binds its functions; the library stays loaded.
func OpenLibrary(path string) (Interface, error) {
	name := C.CString(path)
	defer C.free(unsafe.Pointer(name))
	var buf [512]C.char
	if C.hk_nvml_open(name, &buf[0], C.size_t(len(buf))) != 0 {
		return nil, errors.New(C.GoString(&buf[0]))
	}
	errorStringFunc = func(r Return) string { return C.GoString(C.hk_nvmlErrorString(C.int(r))) }
	return lib{}, nil
}

// lib is the dlopened NVML.
type lib struct{}

func (lib) Init() Return     { return Return(C.hk_nvmlInit()) }
func (lib) Shutdown() Return { return Return(C.hk_nvmlShutdown()) }

func (lib) DeviceGetHandleByUUID(uuid string) (Device, Return) {
	s := C.CString(uuid)
	defer C.free(unsafe.Pointer(s))
	var h C.hk_nvml_dev
	r := Return(C.hk_nvmlDeviceGetHandleByUUID(s, &h))
	return handle(h), r
}

func (lib) DeviceGetHandleByPciBusId(busID string) (Device, Return) {
	s := C.CString(busID)
	defer C.free(unsafe.Pointer(s))
	var h C.hk_nvml_dev
	r := Return(C.hk_nvmlDeviceGetHandleByPciBusId(s, &h))
	return handle(h), r
}

// handle is an nvmlDevice_t.
type handle C.hk_nvml_dev

func (d handle) h() C.hk_nvml_dev { return C.hk_nvml_dev(d) }

func (d handle) GetName() (string, Return) {
	var buf [96]C.char // NVML_DEVICE_NAME_V2_BUFFER_SIZE
	r := Return(C.hk_nvmlDeviceGetName(d.h(), &buf[0], C.uint(len(buf))))
	return C.GoString(&buf[0]), r
}

func (d handle) GetUUID() (string, Return) {
	var buf [96]C.char // NVML_DEVICE_UUID_V2_BUFFER_SIZE
	r := Return(C.hk_nvmlDeviceGetUUID(d.h(), &buf[0], C.uint(len(buf))))
	return C.GoString(&buf[0]), r
}

func (d handle) GetClockInfo(clockType int) (uint32, Return) {
	var v C.uint
	r := Return(C.hk_nvmlDeviceGetClockInfo(d.h(), C.int(clockType), &v))
	return uint32(v), r
}

func (d handle) GetCurrentClocksEventReasons() (uint64, Return) {
	var v C.ulonglong
	r := Return(C.hk_nvmlDeviceGetCurrentClocksEventReasons(d.h(), &v))
	return uint64(v), r
}

func (d handle) GetTemperature(sensor int) (uint32, Return) {
	var v C.uint
	r := Return(C.hk_nvmlDeviceGetTemperature(d.h(), C.int(sensor), &v))
	return uint32(v), r
}

func (d handle) GetPowerUsage() (uint32, Return) {
	var v C.uint
	r := Return(C.hk_nvmlDeviceGetPowerUsage(d.h(), &v))
	return uint32(v), r
}

func (d handle) GetTotalEccErrors(errorType, counterType int) (uint64, Return) {
	var v C.ulonglong
	r := Return(C.hk_nvmlDeviceGetTotalEccErrors(d.h(), C.int(errorType), C.int(counterType), &v))
	return uint64(v), r
}

func (d handle) GetNvLinkState(link int) (int, Return) {
	var v C.int
	r := Return(C.hk_nvmlDeviceGetNvLinkState(d.h(), C.uint(link), &v))
	return int(v), r
}

func (d handle) GetNvLinkErrorCounter(link, counter int) (uint64, Return) {
	var v C.ulonglong
	r := Return(C.hk_nvmlDeviceGetNvLinkErrorCounter(d.h(), C.uint(link), C.int(counter), &v))
	return uint64(v), r
}
