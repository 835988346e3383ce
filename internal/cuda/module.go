package cuda

/*
#include <stdlib.h>
#include "hk_cuda.h"
*/
import "C"

import (
	"encoding/binary"
	"fmt"
	"time"
	"unsafe"
)

// Module is a cubin loaded into a device's primary context.
type Module struct {
	d        *Device
	h        C.hk_h
	LoadTime time.Duration // cuModuleLoadData
}

// Function is a __global__ function of a loaded module.
type Function struct {
	m    *Module
	h    C.hk_h
	Name string
}

// Load loads img's cubin into the device's primary context.
func (d *Device) Load(img *Image) (*Module, error) { return d.LoadCubin(img.Cubin) }

// LoadCubin loads a cubin (or any image cuModuleLoadData accepts).
func (d *Device) LoadCubin(cubin []byte) (*Module, error) {
	if len(cubin) == 0 {
		return nil, fmt.Errorf("cuda: load on device %d: empty image", d.Ordinal)
	}
	// The image is copied to C memory: the driver may keep reading it
	// while it loads, and cgo's pointer rules are then easy to honour.
	img := C.CBytes(cubin)
	defer C.free(img)
	m := &Module{d: d}
	t0 := time.Now()
	if r := C.hk_cuModuleLoadData(d.ctx, &m.h, img); r != 0 {
		return nil, cuErr("cuModuleLoadData", r)
	}
	m.LoadTime = time.Since(t0)
	return m, nil
}

// Device is the device the module is loaded on.
func (m *Module) Device() *Device { return m.d }

// Global returns the device address and size of a __device__ or
// __constant__ variable with C linkage.
func (m *Module) Global(name string) (devPtr uint64, size uint64, err error) {
	cs := C.CString(name)
	defer C.free(unsafe.Pointer(cs))
	var p C.ulonglong
	var n C.size_t
	if r := C.hk_cuModuleGetGlobal(m.d.ctx, &p, &n, m.h, cs); r != 0 {
		return 0, 0, fmt.Errorf("symbol %s: %w", name, cuErr("cuModuleGetGlobal", r))
	}
	return uint64(p), uint64(n), nil
}

// Function returns the __global__ function with C linkage called name.
func (m *Module) Function(name string) (*Function, error) {
	cs := C.CString(name)
	defer C.free(unsafe.Pointer(cs))
	f := &Function{m: m, Name: name}
	if r := C.hk_cuModuleGetFunction(m.d.ctx, &f.h, m.h, cs); r != 0 {
		return nil, fmt.Errorf("kernel %s: %w", name, cuErr("cuModuleGetFunction", r))
	}
	return f, nil
}

// ReadPointer reads an 8-byte __device__ variable, such as
// ncclhooks_entry_ptr, which the loader initialises to a function's address.
func (m *Module) ReadPointer(globalName string) (uint64, error) {
	p, n, err := m.Global(globalName)
	if err != nil {
		return 0, err
	}
	if n != 8 {
		return 0, fmt.Errorf("cuda: symbol %s is %d bytes, want an 8-byte pointer", globalName, n)
	}
	var b [8]byte
	if err := m.d.CopyDtoH(b[:], p, nil); err != nil {
		return 0, fmt.Errorf("reading %s: %w", globalName, err)
	}
	return binary.LittleEndian.Uint64(b[:]), nil
}

// Unload unloads the module. Its functions must no longer run.
func (m *Module) Unload() error {
	if m.h == 0 {
		return nil
	}
	r := C.hk_cuModuleUnload(m.d.ctx, m.h)
	m.h = 0
	return cuErr("cuModuleUnload", r)
}
