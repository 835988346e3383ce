package gpuharness

import (
	"encoding/binary"
	"errors"
	"fmt"
	"unsafe"

	"github.com/ncclhooks/ncclhooks/internal/cuda"
)

// Hook is a device hook as NCCL receives it from getDeviceHook.
type Hook struct {
	Name  string
	Entry uint64 // device address of the hook function; 0 means no hook
	Ctx   uint64 // devCtx passed with every call
	// CommCtx, when set, are the communicators' own contexts (one
	// getDeviceHook per communicator): communicator i passes CommCtx[i].
	CommCtx []uint64
}

func (h Hook) ctxOf(comm int) uint64 {
	if comm < len(h.CommCtx) {
		return h.CommCtx[comm]
	}
	return h.Ctx
}

// ModuleHook is a hook compiled from one of this package's own sources (the
// nop floor, the counting hook).
type ModuleHook struct {
	Hook
	dev *cuda.Device
	mod *cuda.Module
}

// Close unloads the hook's module. No kernel may call the hook any more.
func (h *ModuleHook) Close() error { return h.mod.Unload() }

// LoadNopHook compiles and loads the empty hook: the cost of the call and of
// building the event, the floor no plugin can beat.
func LoadNopHook(dev *cuda.Device, cache *cuda.Cache) (*ModuleHook, error) {
	return loadHook(dev, cache, "nop", nopHookSource)
}

// CountingHook counts the events it sees per phase with one device-memory
// atomic per call.
type CountingHook struct {
	ModuleHook
	stream *cuda.Stream
}

// LoadCountingHook compiles and loads the counting hook. Its ctx points to
// its two counters, so it also checks that devCtx reaches the hook intact.
func LoadCountingHook(dev *cuda.Device, cache *cuda.Cache) (*CountingHook, error) {
	h, err := loadHook(dev, cache, "counter", countingHookSource)
	if err != nil {
		return nil, err
	}
	c := &CountingHook{ModuleHook: *h}
	if c.Ctx, err = dev.Alloc(16); err != nil {
		return nil, errors.Join(err, h.Close())
	}
	if c.stream, err = dev.NewStream(); err != nil {
		return nil, errors.Join(err, dev.Free(c.Ctx), h.Close())
	}
	return c, nil
}

// Counts reads the START and STOP counts. Call it when no kernel that calls
// the hook is running.
func (h *CountingHook) Counts() (start, stop uint64, err error) {
	var b [16]byte
	if err := h.dev.CopyDtoH(b[:], h.Ctx, h.stream); err != nil {
		return 0, 0, fmt.Errorf("reading counting hook: %w", err)
	}
	return binary.LittleEndian.Uint64(b[:8]), binary.LittleEndian.Uint64(b[8:]), nil
}

// Reset zeroes both counts.
func (h *CountingHook) Reset() error {
	return h.dev.CopyHtoD(h.Ctx, make([]byte, 16), h.stream)
}

// Close frees the counters and unloads the module.
func (h *CountingHook) Close() error {
	return errors.Join(h.stream.Destroy(), h.dev.Free(h.Ctx), h.ModuleHook.Close())
}

// RegionHook is the bench's hand-written record of the region design
// (regionHookSource), with its regions in host-mapped memory, as the
// plugin's record buffers are.
type RegionHook struct {
	ModuleHook
	host unsafe.Pointer
}

// LoadRegionHook compiles and loads the region hook and allocates its
// regions.
func LoadRegionHook(dev *cuda.Device, cache *cuda.Cache) (*RegionHook, error) {
	h, err := loadHook(dev, cache, "region", regionHookSource)
	if err != nil {
		return nil, err
	}
	r := &RegionHook{ModuleHook: *h}
	if r.host, r.Ctx, err = dev.HostAlloc(regionHookBytes); err != nil {
		return nil, errors.Join(err, h.Close())
	}
	return r, nil
}

// Close unloads the module and frees the regions. No kernel may call the
// hook any more.
func (h *RegionHook) Close() error {
	return errors.Join(h.ModuleHook.Close(), h.dev.FreeHost(h.host))
}

// loadHook compiles src, which must define ncclhooks_entry and
// ncclhooks_entry_ptr (or the resolver kernel ncclhooks_resolve) like a
// generated module, loads it and resolves the entry; ctx is left 0.
func loadHook(dev *cuda.Device, cache *cuda.Cache, name, src string) (*ModuleHook, error) {
	img, err := dev.Compile(src, cuda.CompileOptions{Name: name + "_hook.cu", Cache: cache})
	if err != nil {
		return nil, fmt.Errorf("compiling %s hook: %w", name, err)
	}
	mod, err := dev.Load(img)
	if err != nil {
		return nil, fmt.Errorf("loading %s hook: %w", name, err)
	}
	entry, err := resolveEntry(dev, mod)
	if err != nil {
		return nil, errors.Join(fmt.Errorf("resolving %s hook: %w", name, err), mod.Unload())
	}
	// A module-relative address (whole-program or LTO code) faults when
	// called from the harness module (docs/ARCHITECTURE.md, "Safe for every caller").
	if entry < 1<<32 {
		return nil, errors.Join(fmt.Errorf("%s hook resolved to %#x, a module-relative address: it was not compiled with -rdc=true", name, entry), mod.Unload())
	}
	return &ModuleHook{Hook: Hook{Name: name, Entry: entry}, dev: dev, mod: mod}, nil
}

// Names a hook module publishes its entry address under.
const (
	symEntryPtr    = "ncclhooks_entry_ptr"
	kernelResolver = "ncclhooks_resolve"
)

// resolveEntry reads the module's entry address from ncclhooks_entry_ptr
// and from its resolver kernel, whichever it has; when it has both they must
// agree.
func resolveEntry(dev *cuda.Device, mod *cuda.Module) (uint64, error) {
	viaVar, errVar := mod.ReadPointer(symEntryPtr)
	viaKernel, errKernel := runResolver(dev, mod)
	switch {
	case errVar == nil && errKernel == nil && viaVar != viaKernel:
		return 0, fmt.Errorf("%s = %#x but %s gives %#x", symEntryPtr, viaVar, kernelResolver, viaKernel)
	case errKernel == nil:
		return viaKernel, nil
	case errVar == nil:
		return viaVar, nil
	}
	return 0, errors.Join(errVar, errKernel)
}

// runResolver runs the module's one-thread resolver kernel, which writes
// the entry's address to its argument.
func runResolver(dev *cuda.Device, mod *cuda.Module) (_ uint64, err error) {
	f, err := mod.Function(kernelResolver)
	if err != nil {
		return 0, err
	}
	out, err := dev.Alloc(8)
	if err != nil {
		return 0, err
	}
	defer func() { err = errors.Join(err, dev.Free(out)) }()
	s, err := dev.NewStream()
	if err != nil {
		return 0, err
	}
	defer func() { err = errors.Join(err, s.Destroy()) }()
	if err := dev.Launch(f, [3]uint32{1, 1, 1}, [3]uint32{1, 1, 1}, 0, s, out); err != nil {
		return 0, err
	}
	var b [8]byte
	if err := dev.CopyDtoH(b[:], out, s); err != nil {
		return 0, err
	}
	return binary.LittleEndian.Uint64(b[:]), nil
}
