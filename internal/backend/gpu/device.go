package gpu

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/ncclhooks/ncclhooks/internal/backend"
	"github.com/ncclhooks/ncclhooks/internal/cuda"
	"github.com/ncclhooks/ncclhooks/internal/hookgen"
)

var (
	_ backend.Device   = (*Device)(nil)
	_ backend.Compiled = (*Compiled)(nil)
)

// Device is a hook module loaded on one GPU. It implements backend.Device.
type Device struct {
	c        *Compiled
	d        driver // cudaDriver on a GPU
	mod      module
	clockMod module
	clockFn  function
	stream   stream // private, non-blocking: all host<->device traffic

	entry    uint64
	ctxAddrs hookgen.CtxAddrs // what a block's header holds, but for its comm
	blockMu  sync.Mutex
	blocks   []uint64 // the context block of slot i (Module.Block), device memory (a Work module's: the device address of its host-mapped regions)
	index    []int    // the communicator index slot i serves (its header's comm), -1: free
	// workBlocks are the host views of a Work module's blocks, by slot
	// (host-mapped memory, freed with host).
	workBlocks []unsafe.Pointer
	funcSets   []byte // the function-id sets' bytes, written into every block, also those made later
	aggCells   []byte // one block's cells, read by ReadAgg
	// folded are the aggregation cells of the communicators released so
	// far (ReleaseComm), in the host's layout: ReadAgg starts from them.
	folded []uint64
	// loadSlot: slot 0, made at load to serve communicator 0 (Ctx), has
	// not been asked for since: the first NewComm takes it.
	loadSlot bool

	// The arena (Module.Arena) opens with the control words and then holds
	// as many context blocks as fit; a block that does not fit gets an
	// allocation of its own (extra), where the profile records nothing.
	// arenaAlloc is the allocation the arena was aligned in.
	arena, arenaAlloc uint64
	extra             []uint64

	host  []unsafe.Pointer // host-mapped allocations, freed at Close
	slots [][]uint64
	holes [][]uint32

	clockHost *uint64 // host view of the clock kernel's output word
	clockDev  uint64

	mu     sync.Mutex // serialises Clock (one output word)
	closed atomic.Bool

	// LoadTime is the time Load took on this device (module load, buffers,
	// context write, address resolution).
	LoadTime time.Duration
}

// load sets the device up in order: the private stream, the hook module and
// its entry address, the hook buffers, the module's globals and context, then
// the clock kernel. Close frees whatever it got to.
func (d *Device) load(imgs *archImages) error {
	if !d.d.CanMapHost() {
		return fmt.Errorf("%v cannot map host memory, which the hook buffers need", d.d)
	}
	var err error
	if d.stream, err = d.d.NewStream(); err != nil {
		return err
	}
	if d.mod, err = d.d.Load(imgs.hook); err != nil {
		return err
	}
	entry, err := d.mod.ReadPointer(hookgen.SymEntryPtr)
	if err != nil {
		return err
	}
	if err := CheckEntryAddress(entry); err != nil {
		return err
	}
	d.entry = entry
	slotsDev, holesDev, err := d.allocHookBuffers()
	if err != nil {
		return err
	}
	if err := d.makeArena(slotsDev, holesDev); err != nil {
		return err
	}
	return d.loadClock(imgs.clock)
}

// allocHookBuffers allocates each hook's buffers in host-mapped memory: N
// slots of SlotWords words, and N hole stamps. It returns their device
// addresses, by hook.
func (d *Device) allocHookBuffers() (slotsDev, holesDev []uintptr, err error) {
	m := d.c.mod
	slotsDev = make([]uintptr, len(m.Hooks))
	holesDev = make([]uintptr, len(m.Hooks))
	for i, h := range m.Hooks {
		words := h.Slots * h.Layout.SlotWords()
		if h.Work {
			words = 0 // its records go to its regions, in each communicator's block
		}
		// An aggregate-only hook writes no records; it still gets a valid,
		// distinct (one-word) buffer.
		p, dev, err := d.hostAlloc(8 * max(words, 1))
		if err != nil {
			return nil, nil, fmt.Errorf("hook %q buffer: %w", h.Name, err)
		}
		d.slots = append(d.slots, unsafe.Slice((*uint64)(p), words))
		slotsDev[i] = uintptr(dev)
		holes := h.Slots
		if h.Work {
			holes = 1 // overwrite_oldest: no holes
		}
		p, dev, err = d.hostAlloc(4 * holes)
		if err != nil {
			return nil, nil, fmt.Errorf("hook %q holes: %w", h.Name, err)
		}
		d.holes = append(d.holes, unsafe.Slice((*uint32)(p), holes))
		holesDev[i] = uintptr(dev)
	}
	return slotsDev, holesDev, nil
}

// makeArena allocates the arena (the control words, then the context blocks)
// and makes communicator 0's block.
func (d *Device) makeArena(slotsDev, holesDev []uintptr) error {
	if err := d.allocArena(); err != nil {
		return err
	}
	d.ctxAddrs = hookgen.CtxAddrs{
		Device: d.d.Ordinal(),
		Slots:  slotsDev,
		Holes:  holesDev,
	}
	// Slot 0's block is made at load (Ctx) and serves communicator 0 until
	// the first NewComm takes it.
	_, err := d.CommCtx(0)
	d.loadSlot = true
	return err
}

// allocArena allocates the arena, zeroed, aligned to its size: a record hook
// finds the control words by masking devCtx. The driver aligns an
// allocation of 2 MiB or more to 2 MiB; one that comes back less aligned
// than the arena needs is made again twice as large, and the arena aligned in it.
func (d *Device) allocArena() error {
	n := d.c.mod.Arena.Bytes
	p, err := d.d.Alloc(n)
	if err == nil && p%uint64(n) != 0 {
		d.d.Free(p)
		p, err = d.d.Alloc(2 * n)
	}
	if err != nil {
		return fmt.Errorf("gpu backend: the control words and context blocks (%d bytes): %w", n, err)
	}
	d.arenaAlloc = p
	d.arena = (p + uint64(n) - 1) &^ uint64(n-1)
	return nil
}

// loadClock loads the clock kernel and its host-mapped output word.
func (d *Device) loadClock(img *cuda.Image) error {
	var err error
	if d.clockMod, err = d.d.Load(img); err != nil {
		return err
	}
	if d.clockFn, err = d.clockMod.Function("ncclhooks_clock"); err != nil {
		return err
	}
	p, dev, err := d.hostAlloc(8)
	if err != nil {
		return err
	}
	d.clockHost, d.clockDev = (*uint64)(p), dev
	return nil
}

func (d *Device) hostAlloc(n int) (unsafe.Pointer, uint64, error) {
	p, dev, err := d.d.HostAlloc(n)
	if err != nil {
		return nil, 0, err
	}
	d.host = append(d.host, p)
	return p, dev, nil
}

// Ordinal is the CUDA device ordinal.
func (d *Device) Ordinal() int { return d.d.Ordinal() }

// Entry is the absolute device address of ncclhooks_entry.
func (d *Device) Entry() uintptr { return uintptr(d.entry) }

// Ctx is the devCtx of slot 0, made at load.
func (d *Device) Ctx() uintptr {
	d.blockMu.Lock()
	defer d.blockMu.Unlock()
	if len(d.blocks) == 0 {
		return 0
	}
	return d.ctxOf(0)
}

// CommCtx returns the devCtx of slot comm, making the blocks up to it; a
// slot made or found free here serves communicator index comm
// (backend.Device.CommCtx). Every copy is waited for before the address is
// returned (NCCL may launch with it at once).
func (d *Device) CommCtx(comm int) (uintptr, error) {
	if comm < 0 {
		return 0, fmt.Errorf("gpu backend: communicator index %d", comm)
	}
	d.blockMu.Lock()
	defer d.blockMu.Unlock()
	if d.closed.Load() {
		return 0, cuda.ErrClosed
	}
	for len(d.blocks) <= comm {
		if err := d.makeBlock(); err != nil {
			return 0, err
		}
	}
	if d.index[comm] < 0 {
		if err := d.claim(comm, comm); err != nil {
			return 0, err
		}
	}
	if comm == 0 {
		d.loadSlot = false // asked for: no NewComm takes it
	}
	return d.ctxOf(comm), nil
}

// NewComm gives communicator index the lowest free slot, else a new one
// (backend.Device.NewComm); its header is written and waited for before
// the devCtx is returned.
func (d *Device) NewComm(index int) (slot int, ctx uintptr, err error) {
	if index < 0 {
		return 0, 0, fmt.Errorf("gpu backend: communicator index %d", index)
	}
	d.blockMu.Lock()
	defer d.blockMu.Unlock()
	if d.closed.Load() {
		return 0, 0, cuda.ErrClosed
	}
	slot = slices.Index(d.index, -1)
	if d.loadSlot {
		slot = 0
	}
	if slot < 0 {
		if err := d.makeBlock(); err != nil {
			return 0, 0, err
		}
		slot = len(d.blocks) - 1
	}
	if err := d.claim(slot, index); err != nil {
		return 0, 0, err
	}
	if slot == 0 {
		d.loadSlot = false
	}
	return slot, d.ctxOf(slot), nil
}

// ReleaseComm adds slot's aggregation cells (copied from the device) into
// the running totals and resets its block to what a new one holds: zeroed
// by a driver memset (device memory; a Work module's host-mapped regions
// by the host), its header and function-id sets written again, all
// on the private stream and waited for (backend.Device.ReleaseComm). The
// hooks must no longer run with its devCtx: NCCL's kernels of the
// finalized communicator have completed, and the L1, which the pairing's
// STOP load goes through, does not keep lines across kernels.
func (d *Device) ReleaseComm(slot int) error {
	d.blockMu.Lock()
	defer d.blockMu.Unlock()
	if d.closed.Load() {
		return cuda.ErrClosed
	}
	if slot < 0 || slot >= len(d.blocks) || d.index[slot] < 0 {
		return nil
	}
	m := d.c.mod
	if m.Work {
		clear(unsafe.Slice((*byte)(d.workBlocks[slot]), m.Block.Bytes))
		d.index[slot] = -1
		return nil
	}
	p := d.blocks[slot]
	if m.Block.AggWords > 0 {
		cells, err := d.readCells(p)
		if err != nil {
			return shutdown(err)
		}
		if d.folded == nil {
			d.folded = make([]uint64, m.AggWords)
		}
		m.AddAgg(d.folded, d.index[slot], cells)
	}
	err := d.d.Memset(p, 0, m.Block.Bytes, d.stream)
	if err == nil {
		err = d.writeBlock(p, slot)
	}
	if err != nil {
		return fmt.Errorf("gpu backend: resetting context block %d: %w", slot, err)
	}
	d.index[slot] = -1
	return nil
}

// CommIndex is the communicator index slot serves, -1 while free.
func (d *Device) CommIndex(slot int) int {
	d.blockMu.Lock()
	defer d.blockMu.Unlock()
	if slot < 0 || slot >= len(d.index) {
		return -1
	}
	return d.index[slot]
}

// makeBlock makes the next slot's block, free (blockMu held): in the arena
// while it has room, a recording profile's must (its hooks find the
// control words by masking devCtx), so past that there is no block; its
// header (naming the slot) and function-id sets written and waited for.
func (d *Device) makeBlock() error {
	slot := len(d.blocks)
	if d.c.mod.Work {
		p, err := d.newWorkBlock(slot)
		if err != nil {
			return err
		}
		d.blocks, d.index = append(d.blocks, p), append(d.index, -1)
		return nil
	}
	b := d.c.mod.Block
	off, inArena, err := d.c.mod.BlockOffset(slot)
	if err != nil {
		return fmt.Errorf("gpu backend: %w", err)
	}
	p := d.arena + uint64(off) // zeroed with the arena
	if !inArena {
		if p, err = d.d.Alloc(b.Bytes); err != nil {
			return fmt.Errorf("gpu backend: context block %d (%d bytes): %w", slot, b.Bytes, err)
		}
	}
	if err := d.writeBlock(p, slot); err != nil {
		if !inArena {
			d.d.Free(p)
		}
		return fmt.Errorf("gpu backend: writing context block %d: %w", slot, err)
	}
	if !inArena {
		d.extra = append(d.extra, p)
	}
	d.blocks, d.index = append(d.blocks, p), append(d.index, -1)
	return nil
}

// writeBlock writes block p's header, naming communicator comm, and its
// function-id sets, and waits for them.
func (d *Device) writeBlock(p uint64, comm int) error {
	a := d.ctxAddrs
	a.Comm = comm
	err := d.d.CopyHtoD(p, d.c.mod.EncodeCtx(a), d.stream)
	if err == nil && len(d.funcSets) > 0 {
		err = d.d.CopyHtoD(p+uint64(d.c.mod.Block.FuncSets), d.funcSets, d.stream)
	}
	if err == nil {
		err = d.stream.Sync()
	}
	return err
}

// claim makes free slot serve communicator index (blockMu held): its
// header names it, written and waited for. A Work block has no header:
// its devCtx names the slot.
func (d *Device) claim(slot, index int) error {
	if !d.c.mod.Work {
		a := d.ctxAddrs
		a.Comm = index
		err := d.d.CopyHtoD(d.blocks[slot], d.c.mod.EncodeCtx(a), d.stream)
		if err == nil {
			err = d.stream.Sync()
		}
		if err != nil {
			return fmt.Errorf("gpu backend: writing the header of context block %d: %w", slot, err)
		}
	}
	d.index[slot] = index
	return nil
}

// newWorkBlock makes the block of a Work module's slot: its regions in
// zeroed host-mapped memory, which the drain reads where the device writes
// them. It returns the block's device address; devCtx is that plus the
// slot (hookgen.WorkCtx, ctxOf).
func (d *Device) newWorkBlock(slot int) (uint64, error) {
	m := d.c.mod
	if err := hookgen.WorkComm(slot); err != nil { // before its memory is taken
		return 0, fmt.Errorf("gpu backend: %w", err)
	}
	// Page-aligned in practice; aligned here in any case, host and device
	// views by the same offset.
	p, dev, err := d.hostAlloc(m.Block.Bytes + hookgen.WorkBlockAlign)
	if err != nil {
		return 0, fmt.Errorf("gpu backend: the regions of block %d (%d bytes): %w", slot, m.Block.Bytes, err)
	}
	off := (hookgen.WorkBlockAlign - dev%hookgen.WorkBlockAlign) % hookgen.WorkBlockAlign
	p, dev = unsafe.Add(p, off), dev+off
	clear(unsafe.Slice((*byte)(p), m.Block.Bytes))
	if _, err := hookgen.WorkCtx(uintptr(dev), slot); err != nil {
		return 0, fmt.Errorf("gpu backend: %w", err)
	}
	d.workBlocks = append(d.workBlocks, p)
	return dev, nil
}

// ctxOf is the devCtx of slot (blockMu held): its block, plus the slot
// for a Work module (hookgen.WorkCtx).
func (d *Device) ctxOf(slot int) uintptr {
	p := uintptr(d.blocks[slot])
	if d.c.mod.Work {
		p += uintptr(slot)
	}
	return p
}

// Comms is how many blocks the device has made (slots, free ones
// included).
func (d *Device) Comms() int {
	d.blockMu.Lock()
	defer d.blockMu.Unlock()
	return len(d.blocks)
}

// Regions is the host view of hook h's regions in slot comm's block (Work
// modules; nil otherwise, or before the block is made).
func (d *Device) Regions(comm, h int) []uint64 {
	d.blockMu.Lock()
	defer d.blockMu.Unlock()
	m := d.c.mod
	if comm < 0 || comm >= len(d.workBlocks) || h < 0 || h >= len(m.Hooks) {
		return nil
	}
	return unsafe.Slice((*uint64)(unsafe.Add(d.workBlocks[comm], m.Block.Regions[h])), m.RegionWords(h))
}

// Slots is the host view of hook h's record words (host-mapped memory).
func (d *Device) Slots(h int) []uint64 { return d.slots[h] }

// Holes is the host view of hook h's hole stamps (host-mapped memory).
func (d *Device) Holes(h int) []uint32 { return d.holes[h] }

// asBytes views words as bytes (little-endian host, like the device).
func asBytes[T uint64 | uint32](w []T) []byte {
	if len(w) == 0 {
		return nil
	}
	return unsafe.Slice((*byte)(unsafe.Pointer(&w[0])), len(w)*int(unsafe.Sizeof(w[0])))
}

// ReadCtl copies ncclhooks_ctl into dst.
func (d *Device) ReadCtl(dst []uint64) error {
	n := d.c.mod.CtlWords()
	if len(dst) < n {
		return fmt.Errorf("gpu backend: ReadCtl needs %d words, got %d", n, len(dst))
	}
	return shutdown(d.d.CopyDtoH(asBytes(dst[:n]), d.arena, d.stream)) // the arena opens with the control words
}

// shutdown marks an error of a driver that is shutting down (process exit)
// as backend.ErrShutdown.
func shutdown(err error) error {
	if errors.Is(err, cuda.ErrDeinitialized) {
		return fmt.Errorf("%w: %v", backend.ErrShutdown, err)
	}
	return err
}

// WriteLimit sets hook h's limit word (drop_newest).
func (d *Device) WriteLimit(h int, limit uint64) error {
	H := len(d.c.mod.Hooks)
	if h < 0 || h >= H {
		return fmt.Errorf("gpu backend: WriteLimit: hook %d of %d", h, H)
	}
	w := []uint64{limit}
	return d.d.CopyHtoD(d.arena+uint64(8*(H+h)), asBytes(w), d.stream)
}

// ReadAgg adds up the running totals of the released communicators and
// every live block's aggregation cells, copied from the device
// (Module.AddAgg).
func (d *Device) ReadAgg(dst []uint64) error {
	m := d.c.mod
	if len(dst) < m.AggWords {
		return fmt.Errorf("gpu backend: ReadAgg needs %d words, got %d", m.AggWords, len(dst))
	}
	d.blockMu.Lock()
	defer d.blockMu.Unlock()
	clear(dst[:m.AggWords])
	if m.Block.AggWords == 0 {
		return nil
	}
	copy(dst, d.folded)
	for slot, p := range d.blocks {
		if d.index[slot] < 0 {
			continue // free: zeroed
		}
		cells, err := d.readCells(p)
		if err != nil {
			return shutdown(err)
		}
		m.AddAgg(dst, d.index[slot], cells)
	}
	return nil
}

// readCells copies block p's aggregation cells from the device into
// d.aggCells (blockMu held).
func (d *Device) readCells(p uint64) ([]uint64, error) {
	m := d.c.mod
	if cap(d.aggCells) < 8*m.Block.AggWords {
		d.aggCells = make([]byte, 8*m.Block.AggWords)
	}
	cells := unsafe.Slice((*uint64)(unsafe.Pointer(&d.aggCells[0])), m.Block.AggWords)
	return cells, d.d.CopyDtoH(asBytes(cells), p+uint64(m.Block.Agg), d.stream)
}

// WriteFuncSets fills the function-id sets of every context block, and of
// the blocks made later; sets[i] has FuncSetWords words.
func (d *Device) WriteFuncSets(sets [][]uint32) error {
	m := d.c.mod
	if len(sets) > len(m.FuncSets) {
		return fmt.Errorf("gpu backend: %d function sets, the module has %d", len(sets), len(m.FuncSets))
	}
	if len(sets) == 0 {
		return nil
	}
	words := make([]uint32, len(sets)*hookgen.FuncSetWords)
	for i, s := range sets {
		if len(s) != hookgen.FuncSetWords {
			return fmt.Errorf("gpu backend: function set %d has %d words, want %d", i, len(s), hookgen.FuncSetWords)
		}
		copy(words[i*hookgen.FuncSetWords:], s)
	}
	d.blockMu.Lock()
	defer d.blockMu.Unlock()
	d.funcSets = asBytes(words)
	for _, p := range d.blocks {
		if err := d.d.CopyHtoD(p+uint64(m.Block.FuncSets), d.funcSets, d.stream); err != nil {
			return err
		}
	}
	return d.stream.Sync()
}

// Model is the GPU's name as the driver reports it ("NVIDIA H200").
func (d *Device) Model() string { return d.d.Name() }

// Identity is the GPU's name, UUID and PCI bus id from the driver.
func (d *Device) Identity() backend.Identity {
	return backend.Identity{Name: d.d.Name(), UUID: d.d.UUID(), PCIBusID: d.d.PCIBusID()}
}

// Clock pairs the host clock with the device's globaltimer: a one-thread
// kernel stores the timer, bracketed by host readings, and the midpoint is
// taken; of three tries, the tightest bracket wins.
func (d *Device) Clock() (hostUnixNs, deviceNs uint64, err error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	best := time.Duration(1<<63 - 1)
	for range 3 {
		t0 := time.Now()
		if err := d.d.Launch(d.clockFn, [3]uint32{1, 1, 1}, [3]uint32{1, 1, 1}, 0, d.stream, d.clockDev); err != nil {
			return 0, 0, err
		}
		if err := d.stream.Sync(); err != nil {
			return 0, 0, err
		}
		t1 := time.Now()
		if span := t1.Sub(t0); span < best {
			best = span
			hostUnixNs = uint64(t0.UnixNano() + int64(span/2))
			deviceNs = atomic.LoadUint64(d.clockHost)
		}
	}
	return hostUnixNs, deviceNs, nil
}

// Close unloads the modules and frees the buffers. The hooks must no longer
// run: NCCL's kernels calling them must have completed.
func (d *Device) Close() error {
	if d.closed.Swap(true) {
		return nil
	}
	var errs []error
	// Only our own stream is waited for: a context-wide sync would wait for
	// NCCL's work too, and could block finalize behind other communicators.
	if d.stream != nil {
		errs = append(errs, d.stream.Sync())
	}
	for _, m := range []module{d.mod, d.clockMod} {
		if m != nil {
			errs = append(errs, m.Unload())
		}
	}
	for _, p := range d.host {
		errs = append(errs, d.d.FreeHost(p))
	}
	d.blockMu.Lock()
	for _, p := range append(d.extra, d.arenaAlloc) {
		if p != 0 {
			errs = append(errs, d.d.Free(p))
		}
	}
	d.blocks, d.index, d.workBlocks, d.extra, d.arena, d.arenaAlloc = nil, nil, nil, nil, 0, 0
	d.blockMu.Unlock()
	d.host, d.slots, d.holes = nil, nil, nil
	if d.stream != nil {
		errs = append(errs, d.stream.Destroy())
	}
	errs = append(errs, d.d.Close())
	return errors.Join(errs...)
}
