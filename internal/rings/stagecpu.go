package rings

// What the poller's passes and the deliverer's deliveries cost in CPU, for
// the bench (Options.StageCPU).

import (
	"runtime"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
)

// stageStart begins a section whose thread CPU time stageDone adds to a
// stage's total (Options.StageCPU; without it both do nothing). The section
// runs on one thread (stageStart locks the goroutine to it until
// stageDone), so the difference of the thread's clock is that section's CPU,
// its system calls included. Between sections (sleeps, wake-ups, the
// scheduler) is not counted: that is the process's CPU less both stages.
func (d *Drainer) stageStart() int64 {
	if !d.opts.StageCPU {
		return 0
	}
	runtime.LockOSThread()
	return threadCPU()
}

func (d *Drainer) stageDone(total *atomic.Int64, t0 int64) {
	if !d.opts.StageCPU {
		return
	}
	total.Add(threadCPU() - t0)
	runtime.UnlockOSThread()
}

func threadCPU() int64 {
	var ts unix.Timespec
	if unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &ts) != nil {
		return 0
	}
	return ts.Nano()
}

// StageCPU is the CPU time the poller's passes and the deliverer's
// deliveries (decoding, the sink's calls) have taken so far, with
// Options.StageCPU; zero without it.
func (d *Drainer) StageCPU() (poll, deliver time.Duration) {
	return time.Duration(d.pollCPU.Load()), time.Duration(d.deliverCPU.Load())
}

// Wakes is how many times the poller has woken the deliverer.
func (d *Drainer) Wakes() int64 { return d.wakes.Load() }
