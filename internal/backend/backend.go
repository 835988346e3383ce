// Package backend defines what a loaded hook module offers on one device,
// whichever backend loaded it: the addresses to hand NCCL, host views of the
// record buffers, and access to the module's control and aggregate words.
// backend/cpu (system C compiler + dlopen) and backend/gpu (NVRTC + CUDA
// driver) implement it; the drain in package rings only sees this interface.
package backend

import (
	"errors"

	"github.com/ncclhooks/ncclhooks/internal/hookgen"
)

// ErrShutdown is what a Device's calls fail with once the process is shutting
// the device down under it (the CUDA driver deinitialises at exit): not a
// fault, nothing more can be read.
var ErrShutdown = errors.New("the device's driver is shut down (process exit)")

// Device is one generated module loaded for one device. All methods are safe
// for concurrent use by one drainer goroutine while hooks run.
type Device interface {
	// Ordinal is the device number (CUDA ordinal, or the simulated device).
	Ordinal() int
	// Entry is the address of ncclhooks_entry that NCCL (or the harness)
	// calls: a device address on the GPU, a host function on the CPU.
	Entry() uintptr
	// Ctx is the devCtx of slot 0, made at load: communicator 0's until
	// the first NewComm takes the slot.
	Ctx() uintptr
	// CommCtx returns the devCtx of slot comm, making the blocks up to it:
	// its context block (hookgen.Module.Block), whose header says which
	// communicator it serves and holds the record buffers, which every
	// communicator shares; its pairing table, aggregation cells and
	// function-id sets are its own. A slot made or found free here serves
	// communicator index comm until ReleaseComm (the fixed mapping of
	// NCCL_HOOKS_SHARED_CTX's block 0, the bench and tests); NewComm is
	// how the plugin gives communicators their blocks. The blocks live
	// until Close.
	CommCtx(comm int) (uintptr, error)
	// NewComm gives communicator index (its index on the device, the comm
	// intrinsic: 0, 1, ... in the order they asked, never reused) a context
	// block: the lowest free slot, else a new one (docs/ARCHITECTURE.md,
	// "Context blocks are reused"). A free slot is as a new block is (reset
	// by ReleaseComm); its header names index. It returns the slot and the
	// devCtx to hand out.
	NewComm(index int) (slot int, ctx uintptr, err error)
	// ReleaseComm frees slot once its communicator is finalized and, with
	// work positions, its regions are drained (rings.Drainer.Retire): its
	// aggregation cells are added into the device's running totals, which
	// ReadAgg adds to the live blocks', and the block is reset to what a
	// new one holds. The next NewComm may take it. A slot already free is
	// left alone.
	ReleaseComm(slot int) error
	// CommIndex is the index of the communicator slot's block serves (the
	// one NewComm was given; CommCtx(slot): slot), -1 while it is free or
	// not made.
	CommIndex(slot int) int
	// Comms is how many context blocks the device has made (slots, free
	// ones included): bounded by the communicators alive at once.
	Comms() int
	// Regions is a host-readable view of hook h's regions in slot comm's
	// block, for a module whose hooks take positions from the work
	// counter (hookgen.Module.Work): config.RegionChannels regions of
	// HookInfo.RegionSlots slots of SlotWords words, back to back. It is
	// nil for other modules and for a slot without a block. Read it only
	// with atomic loads. A slot's view stays valid while the device is
	// open (a reused slot's block is the same memory).
	Regions(comm, h int) []uint64
	// Slots is a host-readable view of hook h's N*SlotWords record words.
	// Read it only with atomic loads: the producers write it concurrently.
	Slots(h int) []uint64
	// Holes is a host-readable view of hook h's N hole stamps (drop_newest).
	Holes(h int) []uint32
	// ReadCtl copies ncclhooks_ctl (len Module.CtlWords()) into dst.
	ReadCtl(dst []uint64) error
	// WriteLimit sets hook h's limit word (drop_newest).
	WriteLimit(h int, limit uint64) error
	// ReadAgg adds up the device's running totals (the cells of the
	// communicators released so far, ReleaseComm) and the aggregation cells
	// of every live context block into dst (len Module.AggWords,
	// Module.AddAgg): the device's aggregates over its whole life.
	ReadAgg(dst []uint64) error
	// WriteFuncSets fills the function-id sets of every context block, and
	// of the blocks made later; sets[i] has FuncSetWords words.
	WriteFuncSets(sets [][]uint32) error
	// Clock returns a (host unix ns, device timer ns) pair taken together,
	// used to place device timestamps on the host timeline.
	Clock() (hostUnixNs, deviceNs uint64, err error)
	// Model names the hardware the hooks run on ("NVIDIA H200"; "cpu: <model
	// name>"), for the clock line: diff refuses to compare different models.
	Model() string
	// Identity names the device across processes (each of a job's processes
	// sees its GPU as device 0): its name, UUID and PCI bus id.
	Identity() Identity
	// Close releases the device's memory and unloads the module. The hooks
	// must no longer run.
	Close() error
}

// Identity names the hardware a device's hooks run on.
type Identity struct {
	Name     string // "NVIDIA H200"; "cpu: <model name>" on the cpu backend
	UUID     string // "GPU-8c1e..." as NVML spells it; "" where the driver does not say, and on the cpu backend
	PCIBusID string // "0000:19:00.0"; "" where the driver does not say, and on the cpu backend
}

// Compiled is a module compiled once per process, loadable on any device.
type Compiled interface {
	Module() *hookgen.Module
	// Load loads the module for one device and allocates its buffers.
	Load(ordinal int) (Device, error)
	// Info describes how it was built ("cc 12.2, 41ms", "nvrtc 13.0 sm_90, cache hit").
	Info() string
}

// Switch is the hook a caller keeps across profile reloads
// (NCCL_HOOKS_RELOAD; docs/ARCHITECTURE.md, "Live profile reload"): Entry
// is handed out instead of a module's entry, and each communicator's devCtx
// is a slot of the switch, which names the module entry and context block
// to call. Each call reads its slot once, so it runs wholly in the module
// that was active when it began: a reload takes effect at a work-item
// boundary, with no relaunch and no graph re-capture, since the pointers
// the caller holds never change.
type Switch interface {
	// Entry is the address the caller calls, on every device of the
	// backend (a device address on the GPU: one per device, Entry(ord)).
	Entry(ordinal int) (uintptr, error)
	// NewSlot makes a slot on device ordinal that calls nothing until Set.
	NewSlot(ordinal int) (uintptr, error)
	// Set makes slot call entry(ev, ctx) from its next call on. When it
	// returns, the caller's next read of the slot sees the new pair.
	Set(ordinal int, slot, entry, ctx uintptr) error
}
