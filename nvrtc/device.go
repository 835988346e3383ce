package nvrtc

/*
#include <stdlib.h>
#include "hk_cuda.h"
*/
import "C"

import (
	"errors"
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"unsafe"
)

// Device is one CUDA device with its primary context retained.
type Device struct {
	Ordinal      int
	Major, Minor int // compute capability
	SMs          int
	Name         string
	CanMapHost   bool // host-mapped pinned memory (HostAlloc) is usable

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
	if r := C.hk_cuPrimaryCtxRetain(&d.ctx, d.dev); r != 0 {
		return nil, fmt.Errorf("device %d: %w", ordinal, cuErr("cuDevicePrimaryCtxRetain", r))
	}
	return d, nil
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
		return nil, 0, fmt.Errorf("nvrtc: %v cannot map host memory", d)
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

// Stream is a non-blocking CUDA stream (it does not synchronise with the
// legacy default stream).
type Stream struct {
	d *Device
	h C.hk_h
}

// NewStream creates a non-blocking stream.
func (d *Device) NewStream() (*Stream, error) {
	s := &Stream{d: d}
	if r := C.hk_cuStreamCreateNonBlocking(d.ctx, &s.h); r != 0 {
		return nil, cuErr("cuStreamCreate", r)
	}
	return s, nil
}

// legacyStream is CUDA's legacy default stream (CU_STREAM_LEGACY), which the
// package itself never uses: its tests queue work there to stand for what
// NCCL or the application has queued on blocking streams.
func (d *Device) legacyStream() *Stream { return &Stream{d: d, h: 1} }

// Sync waits for the work queued on s.
func (s *Stream) Sync() error {
	return cuErr("cuStreamSynchronize", C.hk_cuStreamSynchronize(s.d.ctx, s.h))
}

// Destroy destroys s; queued work still completes.
func (s *Stream) Destroy() error {
	if s.h == 0 {
		return nil
	}
	r := C.hk_cuStreamDestroy(s.d.ctx, s.h)
	s.h = 0
	return cuErr("cuStreamDestroy", r)
}

// BeginCapture starts capturing s into a graph. The capture is relaxed:
// Begin/EndCapture may run on different OS threads (Go moves goroutines),
// and other threads' CUDA calls (the drainer's) are not disturbed.
func (s *Stream) BeginCapture() error {
	return cuErr("cuStreamBeginCapture", C.hk_cuStreamBeginCaptureRelaxed(s.d.ctx, s.h))
}

// EndCapture ends the capture and instantiates the captured graph.
func (s *Stream) EndCapture() (*Graph, error) {
	g := &Graph{d: s.d}
	if r := C.hk_cuStreamEndCapture(s.d.ctx, s.h, &g.graph); r != 0 {
		return nil, cuErr("cuStreamEndCapture", r)
	}
	if r := C.hk_cuGraphInstantiate(s.d.ctx, &g.exec, g.graph); r != 0 {
		C.hk_cuGraphDestroy(s.d.ctx, 0, g.graph)
		return nil, cuErr("cuGraphInstantiateWithFlags", r)
	}
	return g, nil
}

// Graph is an instantiated CUDA graph.
type Graph struct {
	d           *Device
	graph, exec C.hk_h
}

// Launch queues one replay of g on s (nil: the private stream).
func (g *Graph) Launch(s *Stream) error {
	h, err := g.d.stream(s)
	if err != nil {
		return err
	}
	return cuErr("cuGraphLaunch", C.hk_cuGraphLaunch(g.d.ctx, g.exec, h))
}

// Destroy frees the graph and its executable form.
func (g *Graph) Destroy() error {
	r := C.hk_cuGraphDestroy(g.d.ctx, g.exec, g.graph)
	g.exec, g.graph = 0, 0
	return cuErr("cuGraphDestroy", r)
}

// Event is a CUDA event with timing enabled.
type Event struct {
	d *Device
	h C.hk_h
}

// NewEvent creates an event.
func (d *Device) NewEvent() (*Event, error) {
	e := &Event{d: d}
	if r := C.hk_cuEventCreate(d.ctx, &e.h); r != 0 {
		return nil, cuErr("cuEventCreate", r)
	}
	return e, nil
}

// Record records e on s (nil: the private stream).
func (e *Event) Record(s *Stream) error {
	h, err := e.d.stream(s)
	if err != nil {
		return err
	}
	return cuErr("cuEventRecord", C.hk_cuEventRecord(e.d.ctx, e.h, h))
}

// Sync waits for e.
func (e *Event) Sync() error {
	return cuErr("cuEventSynchronize", C.hk_cuEventSynchronize(e.d.ctx, e.h))
}

// Destroy destroys e.
func (e *Event) Destroy() error {
	r := C.hk_cuEventDestroy(e.d.ctx, e.h)
	e.h = 0
	return cuErr("cuEventDestroy", r)
}

// ElapsedMs is the time between two completed events, in milliseconds.
func ElapsedMs(start, end *Event) (float32, error) {
	var ms C.float
	if r := C.hk_cuEventElapsedTime(start.d.ctx, &ms, start.h, end.h); r != 0 {
		return 0, cuErr("cuEventElapsedTime", r)
	}
	return float32(ms), nil
}

// Launch queues f on s (nil: the private stream) with the given kernel
// arguments, each one of uint64, int64, uint32, int32, uint16, int16, uint8,
// int8, uint, int, uintptr, float32, float64, bool or unsafe.Pointer (a
// device-visible address), matching the kernel's parameter types in size.
func (d *Device) Launch(f *Function, grid, block [3]uint32, sharedBytes uint32, s *Stream, args ...any) error {
	h, err := d.stream(s)
	if err != nil {
		return err
	}
	// Parameter values and the pointer array live in C memory: cgo forbids
	// passing C a Go array of Go pointers.
	n := len(args)
	buf := C.calloc(C.size_t(2*n+1), 8)
	defer C.free(buf)
	vals := unsafe.Slice((*uint64)(buf), 2*n+1)
	ptrs := unsafe.Slice((*unsafe.Pointer)(unsafe.Add(buf, 8*n)), n)
	for i, a := range args {
		v, err := argBits(a)
		if err != nil {
			return fmt.Errorf("nvrtc: launch %s: argument %d: %w", f.Name, i, err)
		}
		vals[i] = v // little-endian: a narrower value sits at the cell's start
		ptrs[i] = unsafe.Add(buf, 8*i)
	}
	var params *unsafe.Pointer
	if n > 0 {
		params = &ptrs[0]
	}
	g := [3]C.uint{C.uint(grid[0]), C.uint(grid[1]), C.uint(grid[2])}
	b := [3]C.uint{C.uint(block[0]), C.uint(block[1]), C.uint(block[2])}
	r := C.hk_cuLaunch(d.ctx, f.h, &g[0], &b[0], C.uint(sharedBytes), h, params)
	if r != 0 {
		return fmt.Errorf("launch %s: %w", f.Name, cuErr("cuLaunchKernel", r))
	}
	return nil
}

func argBits(a any) (uint64, error) {
	switch v := a.(type) {
	case uint64:
		return v, nil
	case int64:
		return uint64(v), nil
	case uint32:
		return uint64(v), nil
	case int32:
		return uint64(uint32(v)), nil
	case uint16:
		return uint64(v), nil
	case int16:
		return uint64(uint16(v)), nil
	case uint8:
		return uint64(v), nil
	case int8:
		return uint64(uint8(v)), nil
	case uint:
		return uint64(v), nil
	case int:
		return uint64(v), nil
	case uintptr:
		return uint64(v), nil
	case float32:
		return uint64(math.Float32bits(v)), nil
	case float64:
		return math.Float64bits(v), nil
	case bool:
		if v {
			return 1, nil
		}
		return 0, nil
	case unsafe.Pointer:
		return uint64(uintptr(v)), nil
	}
	return 0, fmt.Errorf("unsupported type %T", a)
}
