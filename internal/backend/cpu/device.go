package cpu

/*
#include <stdlib.h>
#include <string.h>
#include "dl.h"
*/
import "C"

import (
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/ncclhooks/ncclhooks/internal/backend"
	"github.com/ncclhooks/ncclhooks/internal/config"
	"github.com/ncclhooks/ncclhooks/internal/hookgen"
)

// device is one loaded copy of a module. Its buffers and context blocks live
// in C memory so that C threads may write them while Go reads them, and so
// that no Go pointer is ever kept by C.
type device struct {
	m       *hookgen.Module
	ordinal int
	mod     C.hk_cpu_module
	arena   unsafe.Pointer   // Module.Arena: the control words (Module.CtlWords uint64), then context blocks
	slots   []unsafe.Pointer // per hook, N*SlotWords uint64
	holes   []unsafe.Pointer // per hook, N uint32
	close   sync.Once

	ctxAddrs hookgen.CtxAddrs // what a block's header holds, but for its comm
	blockMu  sync.Mutex
	blocks   []unsafe.Pointer // the context block of slot i (Module.Block)
	index    []int            // the communicator index slot i serves (its header's comm), -1: free
	extra    []unsafe.Pointer // blocks beyond the arena, allocated apart (a profile that records nothing; Work modules' blocks)
	funcSets [][]uint32       // written into every block, also those made later
	aggCells []uint64         // one block's cells, read by ReadAgg
	// folded are the aggregation cells of the communicators released so
	// far (ReleaseComm), in the host's layout: ReadAgg starts from them.
	folded []uint64
	// loadSlot: slot 0, made at load to serve communicator 0 (Ctx), has
	// not been asked for since: the first NewComm takes it.
	loadSlot bool
}

var errClosed = errors.New("cpu backend: device is closed")

func (d *device) allocate() error {
	a := d.m.Arena
	if d.arena = C.aligned_alloc(C.size_t(a.Bytes), C.size_t(a.Bytes)); d.arena == nil {
		return fmt.Errorf("cpu backend: device %d: out of memory for the control words and context blocks (%d bytes)", d.ordinal, a.Bytes)
	}
	C.memset(d.arena, 0, C.size_t(a.Bytes))
	var slotAddrs, holeAddrs []uintptr
	for _, h := range d.m.Hooks {
		// An aggregate-only hook has no record words; keep one so that
		// every hook has a valid, distinct buffer.
		words, holes := h.Slots*max(h.Layout.SlotWords(), 1), h.Slots
		if h.Work {
			// Its records go to its regions, in each communicator's block.
			words, holes = 1, 1
		}
		s := C.calloc(C.size_t(words), 8)
		o := C.calloc(C.size_t(holes), 4)
		d.slots = append(d.slots, s)
		d.holes = append(d.holes, o)
		if s == nil || o == nil {
			return fmt.Errorf("cpu backend: device %d: out of memory for hook %q buffers (%d slots)", d.ordinal, h.Name, h.Slots)
		}
		slotAddrs = append(slotAddrs, uintptr(s))
		holeAddrs = append(holeAddrs, uintptr(o))
	}
	d.ctxAddrs = hookgen.CtxAddrs{
		Device: d.ordinal,
		Slots:  slotAddrs,
		Holes:  holeAddrs,
	}
	// drop_newest: the first N positions may be written before the
	// drainer's first pass publishes a limit.
	for _, h := range d.m.Hooks {
		if h.Overflow == config.DropNewest {
			atomic.StoreUint64(d.ctlWord(len(d.m.Hooks)+h.Index), uint64(h.Slots))
		}
	}
	// Slot 0's block is made at load (Ctx) and serves communicator 0 until
	// the first NewComm takes it.
	_, err := d.CommCtx(0)
	d.loadSlot = true
	return err
}

func (d *device) ctlWord(i int) *uint64 {
	return (*uint64)(unsafe.Add(d.arena, 8*i)) // the arena opens with the control words
}

func (d *device) Ordinal() int   { return d.ordinal }
func (d *device) Entry() uintptr { return uintptr(d.mod.entry) }

// Ctx is the context block of slot 0, made at load.
func (d *device) Ctx() uintptr {
	d.blockMu.Lock()
	defer d.blockMu.Unlock()
	if len(d.blocks) == 0 {
		return 0
	}
	return d.ctxOf(0)
}

// CommCtx returns the context block of slot comm, making the blocks up to
// it; a slot made or found free here serves communicator index comm
// (backend.Device.CommCtx).
func (d *device) CommCtx(comm int) (uintptr, error) {
	if comm < 0 {
		return 0, fmt.Errorf("cpu backend: communicator index %d", comm)
	}
	d.blockMu.Lock()
	defer d.blockMu.Unlock()
	if d.mod.handle == nil {
		return 0, errClosed
	}
	for len(d.blocks) <= comm {
		if err := d.makeBlock(); err != nil {
			return 0, err
		}
	}
	if d.index[comm] < 0 {
		d.claim(comm, comm)
	}
	if comm == 0 {
		d.loadSlot = false // asked for: no NewComm takes it
	}
	return d.ctxOf(comm), nil
}

// NewComm gives communicator index the lowest free slot, else a new one
// (backend.Device.NewComm).
func (d *device) NewComm(index int) (slot int, ctx uintptr, err error) {
	if index < 0 {
		return 0, 0, fmt.Errorf("cpu backend: communicator index %d", index)
	}
	d.blockMu.Lock()
	defer d.blockMu.Unlock()
	if d.mod.handle == nil {
		return 0, 0, errClosed
	}
	slot = slices.Index(d.index, -1)
	if d.loadSlot {
		slot, d.loadSlot = 0, false
	}
	if slot < 0 {
		if err := d.makeBlock(); err != nil {
			return 0, 0, err
		}
		slot = len(d.blocks) - 1
	}
	d.claim(slot, index)
	return slot, d.ctxOf(slot), nil
}

// ReleaseComm adds slot's aggregation cells into the device's running
// totals and resets its block to what a new one holds: zeroed (pairing
// table, cells, regions) with the function-id sets written; the header is
// written when a communicator claims it (backend.Device.ReleaseComm). The
// hooks must no longer run with its devCtx, and its regions must be
// drained.
func (d *device) ReleaseComm(slot int) error {
	d.blockMu.Lock()
	defer d.blockMu.Unlock()
	if d.mod.handle == nil {
		return errClosed
	}
	if slot < 0 || slot >= len(d.blocks) || d.index[slot] < 0 {
		return nil
	}
	b := d.blocks[slot]
	if n := d.m.Block.AggWords; n > 0 {
		if d.folded == nil {
			d.folded = make([]uint64, d.m.AggWords)
		}
		d.m.AddAgg(d.folded, d.index[slot], d.loadCells(b))
	}
	C.memset(b, 0, C.size_t(d.m.Block.Bytes))
	d.writeHeader(slot, slot) // as CommCtx(slot) makes it
	if !d.m.Work {
		d.storeFuncSets(b)
	}
	d.index[slot] = -1
	return nil
}

// CommIndex is the communicator index slot serves, -1 while free.
func (d *device) CommIndex(slot int) int {
	d.blockMu.Lock()
	defer d.blockMu.Unlock()
	if slot < 0 || slot >= len(d.index) {
		return -1
	}
	return d.index[slot]
}

// makeBlock makes the next slot's block, free (blockMu held): zeroed C
// memory with the function-id sets written, in the arena while it has room
// (a recording profile's must be: its hooks find the control words by
// masking devCtx); a Work module's regions, aligned, apart.
func (d *device) makeBlock() error {
	slot := len(d.blocks)
	if d.m.Work {
		p, err := d.newWorkBlock(slot)
		if err != nil {
			return err
		}
		d.blocks, d.index = append(d.blocks, p), append(d.index, -1)
		return nil
	}
	off, inArena, err := d.m.BlockOffset(slot)
	if err != nil {
		return fmt.Errorf("cpu backend: %w", err)
	}
	p := unsafe.Add(d.arena, off) // zeroed with the arena
	if !inArena {
		if p = C.calloc(C.size_t(d.m.Block.Bytes), 1); p == nil {
			return fmt.Errorf("cpu backend: out of memory for context block %d (%d bytes)", slot, d.m.Block.Bytes)
		}
		d.extra = append(d.extra, p)
	}
	d.blocks, d.index = append(d.blocks, p), append(d.index, -1)
	d.writeHeader(slot, slot)
	d.storeFuncSets(p)
	return nil
}

// claim makes free slot serve communicator index (blockMu held): its
// header names it. A Work block has no header: its devCtx names the slot.
func (d *device) claim(slot, index int) {
	d.index[slot] = index
	d.writeHeader(slot, index)
}

// writeHeader writes slot's header, naming communicator index (blockMu
// held); a Work block has none.
func (d *device) writeHeader(slot, index int) {
	if d.m.Work {
		return
	}
	a := d.ctxAddrs
	a.Comm = index
	hdr := d.m.EncodeCtx(a)
	C.memcpy(d.blocks[slot], unsafe.Pointer(&hdr[0]), C.size_t(len(hdr)))
}

// newWorkBlock makes the block of a Work module's slot: its regions,
// zeroed and aligned; devCtx is its address plus the slot
// (hookgen.WorkCtx).
func (d *device) newWorkBlock(slot int) (unsafe.Pointer, error) {
	if err := hookgen.WorkComm(slot); err != nil { // before its memory is taken
		return nil, fmt.Errorf("cpu backend: %w", err)
	}
	n := d.m.Block.Bytes
	p := C.aligned_alloc(hookgen.WorkBlockAlign, C.size_t(n))
	if p == nil {
		return nil, fmt.Errorf("cpu backend: out of memory for the regions of block %d (%d bytes)", slot, n)
	}
	C.memset(p, 0, C.size_t(n))
	if _, err := hookgen.WorkCtx(uintptr(p), slot); err != nil {
		C.free(p)
		return nil, fmt.Errorf("cpu backend: %w", err)
	}
	d.extra = append(d.extra, p)
	return p, nil
}

// ctxOf is the devCtx of slot (blockMu held): its block, plus the slot for
// a Work module (hookgen.WorkCtx).
func (d *device) ctxOf(slot int) uintptr {
	p := uintptr(d.blocks[slot])
	if d.m.Work {
		p += uintptr(slot)
	}
	return p
}

// Comms is how many blocks the device has made (slots, free ones included).
func (d *device) Comms() int {
	d.blockMu.Lock()
	defer d.blockMu.Unlock()
	return len(d.blocks)
}

// Regions is the view of hook h's regions in slot comm's block (Work
// modules; nil otherwise, or before the block is made).
func (d *device) Regions(comm, h int) []uint64 {
	d.blockMu.Lock()
	defer d.blockMu.Unlock()
	if !d.m.Work || comm < 0 || comm >= len(d.blocks) || h < 0 || h >= len(d.m.Hooks) {
		return nil
	}
	return unsafe.Slice((*uint64)(unsafe.Add(d.blocks[comm], d.m.Block.Regions[h])), d.m.RegionWords(h))
}

// storeFuncSets writes the function-id sets into a block.
func (d *device) storeFuncSets(block unsafe.Pointer) {
	for i, set := range d.funcSets {
		base := unsafe.Add(block, d.m.Block.FuncSets+4*hookgen.FuncSetWords*i)
		for j, word := range set {
			atomic.StoreUint32((*uint32)(unsafe.Add(base, 4*j)), word)
		}
	}
}

func (d *device) Slots(h int) []uint64 {
	info := d.m.Hooks[h]
	return unsafe.Slice((*uint64)(d.slots[h]), info.Slots*info.Layout.SlotWords())
}

func (d *device) Holes(h int) []uint32 {
	return unsafe.Slice((*uint32)(d.holes[h]), d.m.Hooks[h].Slots)
}

func (d *device) ReadCtl(dst []uint64) error {
	if d.mod.handle == nil {
		return errClosed
	}
	n := min(len(dst), d.m.CtlWords())
	for i := 0; i < n; i++ {
		dst[i] = atomic.LoadUint64(d.ctlWord(i))
	}
	return nil
}

func (d *device) WriteLimit(h int, limit uint64) error {
	if d.mod.handle == nil {
		return errClosed
	}
	if h < 0 || h >= len(d.m.Hooks) {
		return fmt.Errorf("cpu backend: hook %d out of range (%d hooks)", h, len(d.m.Hooks))
	}
	atomic.StoreUint64(d.ctlWord(len(d.m.Hooks)+h), limit)
	return nil
}

// ReadAgg adds up the running totals of the released communicators and
// the live blocks' aggregation cells (Module.AddAgg).
func (d *device) ReadAgg(dst []uint64) error {
	d.blockMu.Lock()
	defer d.blockMu.Unlock()
	if d.mod.handle == nil {
		return errClosed
	}
	if len(dst) < d.m.AggWords {
		return fmt.Errorf("cpu backend: ReadAgg needs %d words, got %d", d.m.AggWords, len(dst))
	}
	clear(dst[:d.m.AggWords])
	copy(dst, d.folded)
	for slot, b := range d.blocks {
		if d.index[slot] >= 0 {
			d.m.AddAgg(dst, d.index[slot], d.loadCells(b))
		}
	}
	return nil
}

// loadCells copies block b's aggregation cells into d.aggCells (blockMu
// held) and returns them.
func (d *device) loadCells(b unsafe.Pointer) []uint64 {
	n := d.m.Block.AggWords
	if cap(d.aggCells) < n {
		d.aggCells = make([]uint64, n)
	}
	cells := d.aggCells[:n]
	base := unsafe.Add(b, d.m.Block.Agg)
	for i := range cells {
		cells[i] = atomic.LoadUint64((*uint64)(unsafe.Add(base, 8*i)))
	}
	return cells
}

// WriteFuncSets fills the function-id sets of every context block, and of
// the blocks made later.
func (d *device) WriteFuncSets(sets [][]uint32) error {
	d.blockMu.Lock()
	defer d.blockMu.Unlock()
	if d.mod.handle == nil {
		return errClosed
	}
	if len(sets) > len(d.m.FuncSets) {
		return fmt.Errorf("cpu backend: %d function-id sets given, the module has %d", len(sets), len(d.m.FuncSets))
	}
	for i, set := range sets {
		if len(set) > hookgen.FuncSetWords {
			return fmt.Errorf("cpu backend: function-id set %d has %d words, at most %d fit", i, len(set), hookgen.FuncSetWords)
		}
	}
	d.funcSets = sets
	for _, b := range d.blocks {
		d.storeFuncSets(b)
	}
	return nil
}

// Model names the host CPU that runs the hooks ("cpu: AMD EPYC"), from
// /proc/cpuinfo; "cpu" where that does not say.
func (d *device) Model() string { return cpuModel() }

// Identity is the host CPU's model: a simulated device has no UUID or bus.
func (d *device) Identity() backend.Identity { return backend.Identity{Name: cpuModel()} }

var cpuModel = sync.OnceValue(func() string {
	data, err := os.ReadFile("/proc/cpuinfo")
	if err != nil {
		return "cpu"
	}
	for _, line := range strings.Split(string(data), "\n") {
		k, v, ok := strings.Cut(line, ":")
		if ok && strings.TrimSpace(k) == "model name" && strings.TrimSpace(v) != "" {
			return "cpu: " + strings.TrimSpace(v)
		}
	}
	return "cpu"
})

// Clock returns the host clock twice: the CPU hooks' timer is the host's
// CLOCK_REALTIME.
func (d *device) Clock() (hostUnixNs, deviceNs uint64, err error) {
	now := uint64(time.Now().UnixNano())
	return now, now, nil
}

// Close unloads the module and frees the buffers; views returned by Slots
// and Holes must no longer be used.
func (d *device) Close() error {
	d.close.Do(func() {
		C.hk_cpu_close(&d.mod)
		for _, p := range d.slots {
			C.free(p)
		}
		for _, p := range d.holes {
			C.free(p)
		}
		d.blockMu.Lock()
		for _, p := range d.extra {
			C.free(p)
		}
		C.free(d.arena)
		d.blocks, d.index, d.extra, d.arena = nil, nil, nil, nil
		d.blockMu.Unlock()
		d.slots, d.holes = nil, nil
	})
	return nil
}
