package cuda

/*
#include "hk_cuda.h"
*/
import "C"

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
)

// Device is one CUDA device with its primary context retained.
type Device struct {
	Ordinal      int
	Major, Minor int // compute capability
	SMs          int
	Name         string
	// UUID ("GPU-8c1e...", as nvidia-smi and NVML spell it) and PCIBusID
	// ("0000:19:00.0") name the GPU across processes, which all see their
	// own GPU as device 0; "" where the driver does not say.
	UUID, PCIBusID string
	CanMapHost     bool // host-mapped pinned memory (HostAlloc) is usable

	lib    *Lib
	dev    C.int
	ctx    C.hk_h
	closed atomic.Bool

	mu      sync.Mutex
	private C.hk_h // lazily created non-blocking stream for nil *Stream arguments
}

// Device opens device ordinal and retains its primary context (the one the
// CUDA runtime, and so NCCL, uses). Release it with Close.
func (l *Lib) Device(ordinal int) (*Device, error) {
	d := &Device{Ordinal: ordinal, lib: l}
	if r := C.hk_cuDeviceGet(&d.dev, C.int(ordinal)); r != 0 {
		return nil, fmt.Errorf("device %d: %w", ordinal, cuErr("cuDeviceGet", r))
	}
	attr := func(a C.int) (int, error) {
		var v C.int
		if r := C.hk_cuDeviceGetAttribute(&v, a, d.dev); r != 0 {
			return 0, fmt.Errorf("device %d: %w", ordinal, cuErr("cuDeviceGetAttribute", r))
		}
		return int(v), nil
	}
	var err error
	if d.Major, err = attr(C.HK_ATTR_CC_MAJOR); err != nil {
		return nil, err
	}
	if d.Minor, err = attr(C.HK_ATTR_CC_MINOR); err != nil {
		return nil, err
	}
	if d.SMs, err = attr(C.HK_ATTR_MULTIPROCESSOR_COUNT); err != nil {
		return nil, err
	}
	canMap, err := attr(C.HK_ATTR_CAN_MAP_HOST_MEMORY)
	if err != nil {
		return nil, err
	}
	uva, err := attr(C.HK_ATTR_UNIFIED_ADDRESSING)
	if err != nil {
		return nil, err
	}
	d.CanMapHost = canMap != 0 && uva != 0
	var name [256]C.char
	if r := C.hk_cuDeviceGetName(&name[0], C.int(len(name)), d.dev); r != 0 {
		return nil, fmt.Errorf("device %d: %w", ordinal, cuErr("cuDeviceGetName", r))
	}
	d.Name = C.GoString(&name[0])
	var uuid [16]C.uchar
	if C.hk_cuDeviceGetUuid(&uuid[0], d.dev) == 0 {
		b := make([]byte, 16)
		for i := range b {
			b[i] = byte(uuid[i])
		}
		d.UUID = FormatUUID(b)
	}
	if C.hk_cuDeviceGetPCIBusId(&name[0], C.int(len(name)), d.dev) == 0 {
		d.PCIBusID = C.GoString(&name[0])
	}
	if r := C.hk_cuPrimaryCtxRetain(&d.ctx, d.dev); r != 0 {
		return nil, fmt.Errorf("device %d: %w", ordinal, cuErr("cuDevicePrimaryCtxRetain", r))
	}
	return d, nil
}

// FormatUUID spells a device's 16-byte UUID as NVML and nvidia-smi do:
// GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx.
func FormatUUID(b []byte) string {
	if len(b) != 16 {
		return ""
	}
	return fmt.Sprintf("GPU-%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}

// DeviceArch is the NVRTC architecture ("sm_90") of device ordinal, found
// without creating a context on it (a context costs device memory).
func (l *Lib) DeviceArch(ordinal int) (string, error) {
	var dev, major, minor C.int
	if r := C.hk_cuDeviceGet(&dev, C.int(ordinal)); r != 0 {
		return "", fmt.Errorf("device %d: %w", ordinal, cuErr("cuDeviceGet", r))
	}
	if r := C.hk_cuDeviceGetAttribute(&major, C.HK_ATTR_CC_MAJOR, dev); r != 0 {
		return "", cuErr("cuDeviceGetAttribute", r)
	}
	if r := C.hk_cuDeviceGetAttribute(&minor, C.HK_ATTR_CC_MINOR, dev); r != 0 {
		return "", cuErr("cuDeviceGetAttribute", r)
	}
	return fmt.Sprintf("sm_%d%d", major, minor), nil
}

// Lib is the library set the device was opened from.
func (d *Device) Lib() *Lib { return d.lib }

// Arch is the NVRTC architecture of the device, e.g. "sm_90".
func (d *Device) Arch() string { return fmt.Sprintf("sm_%d%d", d.Major, d.Minor) }

func (d *Device) String() string {
	return fmt.Sprintf("device %d (%s, %s, %d SMs)", d.Ordinal, d.Name, d.Arch(), d.SMs)
}

// Close destroys the private stream and releases the primary context. The
// caller must have freed what it allocated and unloaded its modules.
func (d *Device) Close() error {
	if d.closed.Swap(true) {
		return nil
	}
	var errs []error
	d.mu.Lock()
	if d.private != 0 {
		errs = append(errs, cuErr("cuStreamDestroy", C.hk_cuStreamDestroy(d.ctx, d.private)))
		d.private = 0
	}
	d.mu.Unlock()
	errs = append(errs, cuErr("cuDevicePrimaryCtxRelease", C.hk_cuPrimaryCtxRelease(d.dev)))
	return errors.Join(errs...)
}

// Synchronize waits for all work in the device's primary context.
func (d *Device) Synchronize() error {
	return cuErr("cuCtxSynchronize", C.hk_cuCtxSynchronize(d.ctx))
}

// stream is the handle for s, or the device's private non-blocking stream
// for nil: never the legacy default stream, which would serialise with
// NCCL's work.
func (d *Device) stream(s *Stream) (C.hk_h, error) {
	if s != nil {
		if s.h == 0 {
			return 0, fmt.Errorf("%w: a destroyed stream", ErrClosed)
		}
		return s.h, nil
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.private == 0 {
		if r := C.hk_cuStreamCreateNonBlocking(d.ctx, &d.private); r != 0 {
			return 0, cuErr("cuStreamCreate", r)
		}
	}
	return d.private, nil
}
