package rings

// What the poller's passes and the deliverer's deliveries cost in CPU, for
// the bench (Options.StageCPU).

import (
	"runtime"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
)

// stageClock adds up the thread CPU time of the sections it measures. A
// section runs on one thread (start locks the goroutine to it until done),
// so the difference of the thread's clock is that section's CPU, its system
// calls included. Between sections (sleeps, wake-ups, the scheduler) is not
// counted: that is the process's CPU less both stages.
type stageClock struct {
	on bool
	ns atomic.Int64
}

// start begins a section; pass what it returns to done.
func (c *stageClock) start() int64 {
	if !c.on {
		return 0
	}
	runtime.LockOSThread()
	return threadCPU()
}

func (c *stageClock) done(t0 int64) {
	if !c.on {
		return
	}
	c.ns.Add(threadCPU() - t0)
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
	return time.Duration(d.pollCPU.ns.Load()), time.Duration(d.deliverCPU.ns.Load())
}

// Wakes is how many times the poller has woken the deliverer.
func (d *Drainer) Wakes() int64 { return d.wakes.Load() }
