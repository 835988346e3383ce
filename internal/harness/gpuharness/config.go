package gpuharness

import (
	"errors"
	"fmt"
)

// Config shapes one harness run: what NCCL's kernels would do on one device.
type Config struct {
	// Comms is the number of communicators: one non-blocking stream each,
	// launched concurrently with the same channel ids, as NCCL does when
	// several communicators share a device.
	Comms int
	// Channels is the number of blocks of each kernel (channel ids
	// 0..Channels-1).
	Channels int
	// Launches is the number of kernel launches per communicator per
	// replay (the kernels captured in each graph in Graph mode).
	Launches int
	// Batches is the number of batches of work items per launch.
	Batches int
	// ItemsPerBatch is the number of work items per batch; the hook sees
	// START for each of them, then the work, then STOP for each.
	ItemsPerBatch int
	// BytesPerItem is the size each work item sum-reduces from its source to
	// its destination region (a multiple of 16).
	BytesPerItem int
	// FuncIDs are the function ids of the batches, cycled (see FuncID).
	FuncIDs []uint32
	// Graph captures each communicator's launches into a CUDA graph and
	// replays it Replays times; otherwise the launches are repeated Replays
	// times.
	Graph   bool
	Replays int
	// LogEvents keeps a device copy of every event passed to the hook so
	// that the host can check them (Result.Events). Off for benchmarks.
	LogEvents bool
	// CounterStride starts communicator i's work counters at
	// i*CounterStride + 1 (FirstCounter; 0: every communicator counts from
	// 1, as NCCL's do). A stride keeps the communicators' (channel,
	// workCounter) pairs apart, so a record can be traced back to the one
	// event that produced it.
	CounterStride uint64
	// EventRate paces the kernels to about this many events per second on
	// the device, all communicators together (0: as fast as the work goes).
	EventRate float64
	// MidRun, when set, is called once the first half of the replays
	// (Replays/2, at least one) is enqueued, while those kernels run; the
	// rest are enqueued when it returns. A live reload test swaps the
	// profile there: a graph captured before it is replayed after it.
	MidRun func() error
}

// Limits of a Config.
const (
	MaxChannels = 64 // NCCL's MAXCHANNELS; channel ids fit the event's u8
	MaxComms    = 64
	// maxBlocksPerSM bounds Comms*Channels per multiprocessor so that every
	// communicator's blocks are resident at once and really overlap. The
	// registers decide it: a block is 256 threads, each allocated at least
	// hookRegisters (96) so that any hook the plugin accepts fits
	// (reserveHookRegisters in kernel.go), and a multiprocessor has 65536
	// (sm_50 to sm_90): 2 blocks while the harness kernel stays at or below
	// 128 (TestHookKernelsReserveTheBudget checks both bounds). A 132-SM
	// H200 runs 264 blocks at once (the bench's 4 comms x 16 channels: 64).
	maxBlocksPerSM = 2
)

// DefaultConfig is a small run that moves real data on every channel of four
// concurrent communicators.
func DefaultConfig() Config {
	return Config{
		Comms:         4,
		Channels:      16,
		Launches:      1,
		Batches:       32,
		ItemsPerBatch: 4,
		BytesPerItem:  64 << 10,
		FuncIDs:       []uint32{0},
		Replays:       1,
	}
}

// Validate checks every knob and names the one that is wrong.
func (c *Config) Validate() error {
	var errs []error
	check := func(name string, v, lo, hi int) {
		if v < lo || v > hi {
			errs = append(errs, fmt.Errorf("harness: %s = %d: want %d..%d", name, v, lo, hi))
		}
	}
	check("Comms", c.Comms, 1, MaxComms)
	check("Channels", c.Channels, 1, MaxChannels)
	check("Launches", c.Launches, 1, 1<<16)
	check("Batches", c.Batches, 1, 1<<30)
	check("ItemsPerBatch", c.ItemsPerBatch, 1, 1<<10)
	check("BytesPerItem", c.BytesPerItem, 16, 1<<30)
	check("Replays", c.Replays, 1, 1<<20)
	if c.BytesPerItem%16 != 0 {
		errs = append(errs, fmt.Errorf("harness: BytesPerItem = %d: must be a multiple of 16 (the kernel moves 16-byte vectors)", c.BytesPerItem))
	}
	if len(c.FuncIDs) == 0 {
		errs = append(errs, errors.New("harness: FuncIDs is empty: give at least one function id"))
	}
	if c.EventRate < 0 {
		errs = append(errs, fmt.Errorf("harness: EventRate = %g: want 0 (unpaced) or a positive rate in events per second", c.EventRate))
	}
	return errors.Join(errs...)
}

// FuncID is the function id of batch b of launch l of communicator comm, the
// same for every replay: communicators start at different offsets so that
// concurrent kernels report different functions.
func (c *Config) FuncID(comm, launch, batch int) uint32 {
	n := len(c.FuncIDs)
	return c.FuncIDs[(c.funcOffset(comm, launch)+batch%n)%n]
}

// funcOffset is the kernel's funcOffset argument, reduced so that the
// kernel's (funcOffset + b) % nFuncIds never overflows.
func (c *Config) funcOffset(comm, launch int) int {
	return (comm + launch*c.Batches) % len(c.FuncIDs)
}

// FirstCounter is the work counter of communicator comm's first work item
// on every channel. NCCL's per-(communicator, channel) workCounter starts at
// 1, and a record mode that takes positions from it (2*workCounter + phase)
// drains from position 2: an item at 0 would never be drained.
func (c *Config) FirstCounter(comm int) uint64 { return uint64(comm)*c.CounterStride + 1 }

// ItemsPerComm is the number of work items each communicator runs.
func (c *Config) ItemsPerComm() uint64 {
	return uint64(c.Channels) * uint64(c.Launches) * uint64(c.Batches) * uint64(c.ItemsPerBatch) * uint64(c.Replays)
}

// EventsPerComm is the number of events each communicator passes to a
// (non-null) hook: START and STOP per work item.
func (c *Config) EventsPerComm() uint64 { return 2 * c.ItemsPerComm() }

// Events is the number of events of the whole run.
func (c *Config) Events() uint64 { return uint64(c.Comms) * c.EventsPerComm() }

// logCap is the number of events the log holds per channel: all of them.
func (c *Config) logCap() uint64 { return c.EventsPerComm() / uint64(c.Channels) }

// batchPeriodNs paces each block so that the device emits about EventRate
// events per second: every batch of every block of every communicator emits
// 2*ItemsPerBatch events.
func (c *Config) batchPeriodNs() uint64 {
	if c.EventRate == 0 {
		return 0
	}
	perBatch := float64(2 * c.ItemsPerBatch * c.Channels * c.Comms)
	return uint64(perBatch / c.EventRate * 1e9)
}

// executionsPerItem is how often each item region is reduced in a run.
func (c *Config) executionsPerItem() uint32 {
	return uint32(c.Launches * c.Replays * c.Batches)
}
