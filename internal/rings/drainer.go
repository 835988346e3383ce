package rings

// The Drainer, its options and their defaults, and starting one.

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/ncclhooks/ncclhooks/internal/abi"
	"github.com/ncclhooks/ncclhooks/internal/backend"
	"github.com/ncclhooks/ncclhooks/internal/sinks"
)

// Log levels of Options.Log (NCCL's, from package abi).
const (
	LogWarn = abi.LogWarn
	LogInfo = abi.LogInfo
)

// Defaults of Options.
const (
	DefaultPollInterval     = time.Millisecond
	DefaultIdlePollInterval = 2 * time.Millisecond
	DefaultDumpInterval     = time.Second
	DefaultRingCapacity     = 1 << 16
	// DefaultTornTimeout is how long a reserved position may stay unwritten
	// before it is counted torn. A GPU writer completes in microseconds; the
	// margin covers a cpu-backend thread preempted between its stores.
	DefaultTornTimeout = 50 * time.Millisecond
	// DefaultHoleGrace is how long a position that looks like a hole whose
	// stamp a later hole replaced waits for a late writer.
	DefaultHoleGrace = 20 * time.Microsecond
	DefaultBatch     = 1024
)

// The poller is busy for a poll interval after a pass at whose rate some
// buffer would fill by busyFill or more before the next pass; a busy poller
// pauses busyPollInterval between passes instead of the poll interval.
const (
	busyFill         = 0.25
	busyPollInterval = 20 * time.Microsecond
	// minWatchInterval bounds how often an idle poller looks for a burst
	// (watchInterval): a 65536-slot buffer at 50 M events/s fills in
	// 1.3 ms, and each look wakes a thread (a few microseconds of CPU).
	minWatchInterval = 250 * time.Microsecond
	// watchSpell is how long after the last position decided an idle
	// poller keeps looking for bursts (watchInterval).
	watchSpell = time.Second
)

// Options configure a Drainer. Zero values take the defaults.
type Options struct {
	// Sink receives records and dumps (sinks.Multi fans out to several).
	// Calls never overlap. nil discards everything (counting still happens).
	Sink sinks.Sink
	// FuncName resolves a funcId to NCCL's function name.
	FuncName func(funcID uint32) string
	// Log receives the one-time drop warning and sink/device errors (each
	// logged once). level is LogWarn or LogInfo.
	Log func(level int, msg string)
	// DeviceState, when set, gives each device's identity and state for the
	// device lines of every dump (it reads NVML: called outside the drain's
	// device lock, once per device per dump).
	DeviceState func(d backend.Device) sinks.DeviceState

	PollInterval     time.Duration // device polling while busy (1ms)
	IdlePollInterval time.Duration // polling backs off to this when idle (2ms)
	DumpInterval     time.Duration // dump_stats and aggregate snapshots (1s)
	// RingCapacity is the Go ring per hook per device, in records
	// (output.ring_capacity; 65536).
	RingCapacity int
	TornTimeout  time.Duration // see DefaultTornTimeout
	HoleGrace    time.Duration // see DefaultHoleGrace
	Batch        int           // records per Sink.Records call (1024)
	// StageCPU measures the CPU time of the poller's passes and of the
	// deliverer's deliveries (StageCPU), at two thread-clock reads per
	// pass and per delivery: for the bench.
	StageCPU bool
}

const funcCacheSize = 4096

// Drainer moves records from every added device's slot buffers into the Go
// rings and from the rings to the sink, and dumps statistics and aggregate
// snapshots every DumpInterval.
//
// Two goroutines do the work: the poller (the rings' producer) and the
// deliverer (their consumer), so a slow sink costs ring_full drops, never a
// stalled device buffer. Sink calls (deliverer, Flush, Close) never overlap.
type Drainer struct {
	opts Options

	// deliverMu serialises sink calls, ring consumption and dumps. passMu
	// serialises device access, passes and the rings' producer side. Lock
	// order: deliverMu, then passMu.
	deliverMu sync.Mutex
	passMu    sync.Mutex

	devices atomic.Pointer[[]*device] // copy on write under passMu
	closed  bool                      // under passMu
	// quiet stops every read of the devices' memory (Quiesce): passes,
	// bursts and aggregate reads find nothing until Resume. Written under
	// passMu, read by those under passMu.
	quiet   atomic.Bool
	resumes atomic.Uint64 // Resume calls (SettleQuiet)

	wake chan struct{}
	stop chan struct{}
	// pollCPU, deliverCPU: the stages' CPU in ns (Options.StageCPU).
	pollCPU, deliverCPU atomic.Int64
	wakes               atomic.Int64 // the deliverer woken by the poller (Wakes)
	done                sync.WaitGroup
	closing             sync.Once
	summary             Summary

	// Delivery side, under deliverMu.
	dumps int
	names map[uint32]string // resolved names of ids >= funcCacheSize
	// nameCache: resolved names of ids < funcCacheSize, an array so that
	// its lookup needs no bounds check.
	nameCache *[funcCacheSize]*string
	sinkErr   bool
}

// NewDrainer starts a drainer with no devices.
func NewDrainer(opts Options) *Drainer {
	if opts.PollInterval <= 0 {
		opts.PollInterval = DefaultPollInterval
	}
	if opts.IdlePollInterval < opts.PollInterval {
		opts.IdlePollInterval = max(DefaultIdlePollInterval, opts.PollInterval)
	}
	if opts.DumpInterval <= 0 {
		opts.DumpInterval = DefaultDumpInterval
	}
	if opts.TornTimeout <= 0 {
		opts.TornTimeout = DefaultTornTimeout
	}
	if opts.HoleGrace <= 0 {
		opts.HoleGrace = DefaultHoleGrace
	}
	if opts.Batch <= 0 {
		opts.Batch = DefaultBatch
	}
	if opts.Sink == nil {
		opts.Sink = discard{}
	}
	d := &Drainer{
		opts:      opts,
		wake:      make(chan struct{}, 1),
		stop:      make(chan struct{}),
		names:     map[uint32]string{},
		nameCache: new([funcCacheSize]*string),
	}
	d.devices.Store(&[]*device{})
	d.done.Add(2)
	go d.pollLoop()
	go d.deliverLoop()
	return d
}

// Quiesce makes the drainer read the devices' memory no more: no pass, no
// look for a burst, no aggregate read, until Resume. The poller, the
// deliverer and the dumps go on with what was already read. It is for
// when no hook runs and the memory may go: after the last finalize's
// Settle, and at process exit, where the CUDA driver's teardown unmaps the
// host memory the slots lie in and a read of it faults the process. It
// waits at most wait for a pass in progress to end, and reports whether
// one did: after a false, one pass may still be reading.
func (d *Drainer) Quiesce(wait time.Duration) bool {
	d.quiet.Store(true)
	deadline := time.Now().Add(wait)
	for !d.passMu.TryLock() {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(100 * time.Microsecond)
	}
	d.passMu.Unlock()
	return true
}

// Resume undoes Quiesce: a communicator is about to run the hooks again.
func (d *Drainer) Resume() {
	d.passMu.Lock()
	d.resumes.Add(1)
	d.quiet.Store(false)
	d.passMu.Unlock()
}

// discard is the sink of an Options without one.
type discard struct{}

func (discard) Records([]sinks.Record) error { return nil }
func (discard) Dump(*sinks.Dump) error       { return nil }
func (discard) Close() error                 { return nil }
