package cuda

// Device memory and host-mapped pinned memory, and the copies between them.

/*
#include "hk_cuda.h"
*/
import "C"

import (
	"fmt"
	"unsafe"
)

// Alloc allocates n bytes of device memory, zeroed on the private stream
// before it returns (so later copies on any stream land after the zeroing).
func (d *Device) Alloc(n int) (uint64, error) {
	h, err := d.stream(nil)
	if err != nil {
		return 0, err
	}
	var p C.ulonglong
	if r := C.hk_cuMemAllocZero(d.ctx, &p, C.size_t(n), h); r != 0 {
		return 0, fmt.Errorf("allocating %d bytes: %w", n, cuErr("cuMemAlloc", r))
	}
	return uint64(p), nil
}

// Free frees memory from Alloc.
func (d *Device) Free(p uint64) error {
	return cuErr("cuMemFree", C.hk_cuMemFree(d.ctx, C.ulonglong(p)))
}

// HostAlloc allocates n bytes of zeroed, pinned, portable host memory mapped
// into the device's address space: the device writes it, the host reads it
// directly. host is C memory (not Go's); free it with FreeHost.
func (d *Device) HostAlloc(n int) (host unsafe.Pointer, dev uint64, err error) {
	if !d.CanMapHost {
		return nil, 0, fmt.Errorf("cuda: %v cannot map host memory", d)
	}
	var h unsafe.Pointer
	var p C.ulonglong
	if r := C.hk_cuMemHostAllocMapped(d.ctx, &h, &p, C.size_t(n)); r != 0 {
		return nil, 0, fmt.Errorf("allocating %d bytes of mapped host memory: %w", n, cuErr("cuMemHostAlloc", r))
	}
	return h, uint64(p), nil
}

// FreeHost frees memory from HostAlloc.
func (d *Device) FreeHost(host unsafe.Pointer) error {
	return cuErr("cuMemFreeHost", C.hk_cuMemFreeHost(d.ctx, host))
}

// CopyHtoD copies src to device address dst on s (nil: the private stream)
// and waits for s. Copying and waiting happen in one C call, so src may be
// Go memory.
func (d *Device) CopyHtoD(dst uint64, src []byte, s *Stream) error {
	if len(src) == 0 {
		return nil
	}
	h, err := d.stream(s)
	if err != nil {
		return err
	}
	return cuErr("cuMemcpyHtoDAsync", C.hk_cuCopyHtoD(d.ctx, C.ulonglong(dst), unsafe.Pointer(&src[0]), C.size_t(len(src)), h))
}

// CopyDtoH copies len(dst) bytes from device address src on s (nil: the
// private stream) and waits for s.
func (d *Device) CopyDtoH(dst []byte, src uint64, s *Stream) error {
	if len(dst) == 0 {
		return nil
	}
	h, err := d.stream(s)
	if err != nil {
		return err
	}
	return cuErr("cuMemcpyDtoHAsync", C.hk_cuCopyDtoH(d.ctx, unsafe.Pointer(&dst[0]), C.ulonglong(src), C.size_t(len(dst)), h))
}

// Memset sets n bytes at dst to v on s (nil: the private stream) and waits.
func (d *Device) Memset(dst uint64, v byte, n int, s *Stream) error {
	h, err := d.stream(s)
	if err != nil {
		return err
	}
	return cuErr("cuMemsetD8Async", C.hk_cuMemset(d.ctx, C.ulonglong(dst), C.uchar(v), C.size_t(n), h))
}
