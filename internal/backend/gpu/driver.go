package gpu

// driver.go is the seam between a Device and the CUDA driver: the calls a
// Device makes, so that a test can stand in for the driver on a machine
// without a GPU and check what the Device lays out in device memory.

import (
	"unsafe"

	"github.com/ncclhooks/ncclhooks/internal/cuda"
)

// driver is what a Device uses of one GPU.
type driver interface {
	Ordinal() int
	Name() string
	// UUID and PCIBusID name the GPU across processes ("" where the driver
	// does not say).
	UUID() string
	PCIBusID() string
	CanMapHost() bool
	NewStream() (stream, error)
	Load(img *cuda.Image) (module, error)
	// HostAlloc allocates n bytes of host-mapped memory: its host view
	// and its device address.
	HostAlloc(n int) (unsafe.Pointer, uint64, error)
	FreeHost(p unsafe.Pointer) error
	Alloc(n int) (uint64, error) // zeroed device memory
	Free(p uint64) error
	CopyHtoD(dst uint64, src []byte, s stream) error
	CopyDtoH(dst []byte, src uint64, s stream) error
	// Memset sets n bytes of device memory at dst to v on s and waits.
	Memset(dst uint64, v byte, n int, s stream) error
	Launch(f function, grid, block [3]uint32, sharedBytes uint32, s stream, args ...any) error
	Close() error
}

type stream interface {
	Sync() error
	Destroy() error
}

type module interface {
	ReadPointer(global string) (uint64, error)
	Global(name string) (devPtr, size uint64, err error)
	Function(name string) (function, error)
	Unload() error
}

type function any // *cuda.Function, or a test's stand-in

// cudaDriver is the driver of the real GPU.
type cudaDriver struct{ d *cuda.Device }

func (c cudaDriver) Ordinal() int     { return c.d.Ordinal }
func (c cudaDriver) Name() string     { return c.d.Name }
func (c cudaDriver) UUID() string     { return c.d.UUID }
func (c cudaDriver) PCIBusID() string { return c.d.PCIBusID }
func (c cudaDriver) CanMapHost() bool { return c.d.CanMapHost }
func (c cudaDriver) NewStream() (stream, error) {
	s, err := c.d.NewStream()
	if err != nil {
		return nil, err
	}
	return s, nil
}
func (c cudaDriver) Load(img *cuda.Image) (module, error) {
	m, err := c.d.Load(img)
	if err != nil {
		return nil, err
	}
	return cudaModule{m}, nil
}
func (c cudaDriver) HostAlloc(n int) (unsafe.Pointer, uint64, error) { return c.d.HostAlloc(n) }
func (c cudaDriver) FreeHost(p unsafe.Pointer) error                 { return c.d.FreeHost(p) }
func (c cudaDriver) Alloc(n int) (uint64, error)                     { return c.d.Alloc(n) }
func (c cudaDriver) Free(p uint64) error                             { return c.d.Free(p) }
func (c cudaDriver) CopyHtoD(dst uint64, src []byte, s stream) error {
	return c.d.CopyHtoD(dst, src, s.(*cuda.Stream))
}
func (c cudaDriver) CopyDtoH(dst []byte, src uint64, s stream) error {
	return c.d.CopyDtoH(dst, src, s.(*cuda.Stream))
}
func (c cudaDriver) Memset(dst uint64, v byte, n int, s stream) error {
	return c.d.Memset(dst, v, n, s.(*cuda.Stream))
}
func (c cudaDriver) Launch(f function, grid, block [3]uint32, sharedBytes uint32, s stream, args ...any) error {
	return c.d.Launch(f.(*cuda.Function), grid, block, sharedBytes, s.(*cuda.Stream), args...)
}
func (c cudaDriver) Close() error { return c.d.Close() }

type cudaModule struct{ m *cuda.Module }

func (c cudaModule) ReadPointer(global string) (uint64, error)  { return c.m.ReadPointer(global) }
func (c cudaModule) Global(name string) (uint64, uint64, error) { return c.m.Global(name) }
func (c cudaModule) Function(name string) (function, error) {
	f, err := c.m.Function(name)
	if err != nil {
		return nil, err
	}
	return f, nil
}
func (c cudaModule) Unload() error { return c.m.Unload() }
