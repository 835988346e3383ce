package rings

// The poller: passes over every device's slot buffers into the rings.

import (
	"time"

	"golang.org/x/sys/unix"
)

func (d *Drainer) pollLoop() {
	defer d.done.Done()
	interval := d.opts.PollInterval
	busy := false
	var busyUntil, lastFull time.Time
	last := time.Now() // when the previous pass began
	// peakFill is the fastest a buffer was seen to fill, in buffers per
	// second (passResult.fill over the time between passes); lastActive,
	// when a pass last decided a position.
	var peakFill float64
	lastActive := last
	pending := false // the last pass left positions undecided
	t := time.NewTimer(interval)
	defer t.Stop()
	for {
		if busy {
			pause(busyPollInterval)
			select {
			case <-d.stop:
				return
			default:
			}
		} else {
			ok, burst := d.idleWait(t, interval, watchInterval(peakFill, interval, time.Since(lastActive)))
			if !ok {
				return
			}
			if !burst && !pending && time.Since(lastFull) < d.idleHeadsInterval() {
				// Idle, and no producer has reached any consumer's next
				// position: no pass, and no copy of the heads from the
				// device (see idleHeadsInterval); the interval backs off
				// as after an idle pass.
				interval = min(2*interval, d.opts.IdlePollInterval)
				continue
			}
		}
		cpu := d.stageStart()
		d.passMu.Lock()
		began := time.Now()
		var res passResult
		if busy && began.Sub(lastFull) < d.opts.PollInterval {
			// Busy: what the stamps alone decide, without the copy
			// from the device that reading the heads costs.
			res = d.lightPass()
		}
		if !res.advanced {
			res = d.passAll(false, nil)
			lastFull = began
		}
		d.passMu.Unlock()
		d.stageDone(&d.pollCPU, cpu)
		// Busy: at the rate this pass found, some buffer would fill by
		// busyFill or more before a pass that began one poll interval
		// after this one ended; come back at once rather than let it
		// fill while sleeping. The rate, not the count: a short pause
		// finds fewer positions than a long sleep. It stays busy for a
		// poll interval after the last such pass: a drain that has
		// caught up often finds the next position still being written
		// and decides nothing, while the device goes on at full rate.
		now := time.Now()
		elapsed := max(began.Sub(last), time.Microsecond)
		last = began
		peakFill = max(peakFill, res.fill/elapsed.Seconds())
		pending = res.pending
		if res.advanced {
			lastActive = now
		}
		if res.fill*float64(now.Sub(began)+d.opts.PollInterval) >= busyFill*float64(elapsed) {
			busyUntil = now.Add(d.opts.PollInterval)
		}
		busy = now.Before(busyUntil)
		switch {
		case busy:
			continue
		case res.advanced || res.pending:
			interval = d.opts.PollInterval
		default:
			interval = min(2*interval, d.opts.IdlePollInterval)
		}
	}
}

// watchInterval is how often an idle poller looks for a burst: a quarter of
// the time the fastest buffer took to fill when it filled fastest, so that a
// burst at that rate finds a pass before it fills the buffer, at least
// minWatchInterval; the poll interval itself (no watch) before any buffer
// has filled fast enough for it to matter, and once the devices have been
// idle for watchSpell: each look wakes a thread, and on the H200's host the
// bench's process with two drainers looking every 250-330 us took 11-13% of
// a core.
func watchInterval(peakFill float64, interval, idleFor time.Duration) time.Duration {
	if peakFill <= 0 || idleFor > watchSpell {
		return interval
	}
	return max(minWatchInterval, min(interval, time.Duration(float64(time.Second)/(4*peakFill))))
}

// idleWait waits for the next pass of an idle poller: interval, or less
// when, looking every watch, it finds a record or hole written at some
// consumer's next position: a burst of events after an idle spell. With
// 65536 slots at 50 M events/s a buffer fills in 1.3 ms, and the idle
// poller slept 2 ms and more: the bursts' first records were dropped at the
// device (bench/RESULTS.md). A look is a load from host memory per hook,
// where a pass copies the heads from the device. It reports whether the
// drainer still runs, and whether a producer has reached a next position.
func (d *Drainer) idleWait(t *time.Timer, interval, watch time.Duration) (ok, burst bool) {
	if watch >= interval {
		t.Reset(interval)
		select {
		case <-d.stop:
			return false, false
		case <-t.C:
			return true, d.burst()
		}
	}
	until := time.Now().Add(interval)
	for {
		// nanosleep: a Go timer this short sleeps about a millisecond
		// when the process is otherwise idle (see pause).
		pause(watch)
		select {
		case <-d.stop:
			return false, false
		default:
		}
		if d.burst() {
			return true, true
		}
		if time.Now().After(until) {
			return true, false
		}
	}
}

// idleHeadsInterval is how often an idle poller reads the heads when no
// producer has reached a next position: once per torn timeout, or per idle
// interval when that is longer. The heads show positions reserved and
// never written (torn), which stamps do not; everything else an idle
// poller waits for writes a stamp that burst sees. In the bench's CPU
// profile on the H200 the idle drainers' head copies had cost more than
// copying and decoding every record (bench/RESULTS.md).
func (d *Drainer) idleHeadsInterval() time.Duration {
	return max(d.opts.IdlePollInterval, d.opts.TornTimeout)
}

// burst reports whether some consumer's next position holds its record or
// its hole stamp: the devices are writing again.
func (d *Drainer) burst() bool {
	d.passMu.Lock()
	defer d.passMu.Unlock()
	if d.quiet.Load() {
		return false
	}
	for _, dv := range *d.devices.Load() {
		if dv.ctlFailed {
			// Its last head read failed: at process exit the driver may
			// have unmapped the host memory its slots lie in. Its
			// memory is looked at again after a head read succeeds.
			continue
		}
		for _, k := range dv.consumers {
			if k.nextWritten() {
				return true
			}
		}
	}
	return false
}

// pause sleeps for about d, which is shorter than the Go runtime's timers
// keep: a timer or time.Sleep of 20 us waits about 1 ms when the process is
// otherwise idle (the scheduler parks in epoll, whose timeout is in
// milliseconds), which at 50 M events/s is most of a 65536-slot buffer.
// nanosleep blocks only this goroutine's thread and wakes within the
// kernel's timer slack (50 us by default).
func pause(d time.Duration) {
	ts := unix.NsecToTimespec(d.Nanoseconds())
	for unix.Nanosleep(&ts, &ts) == unix.EINTR {
	}
}

// wakeDeliverer has the deliverer look at the rings, without waiting.
func (d *Drainer) wakeDeliverer() {
	select {
	case d.wake <- struct{}{}:
		d.wakes.Add(1)
	default:
	}
}

// lightPass runs a pass that reads no heads (passMu held): each consumer
// decides what its stamps alone decide (consumer.drainLight). A busy poller
// passes about every 100 us, and reading the heads is a copy from the device
// and a wait for it: on the H200 they cost the poller as much CPU as the
// records did.
func (d *Drainer) lightPass() passResult {
	var all passResult
	if d.quiet.Load() {
		return all
	}
	ps := d.newPass(false, nil)
	for _, dv := range *d.devices.Load() {
		if dv.ctlFailed {
			continue // see burst
		}
		for _, k := range dv.consumers {
			all.add(k, k.drainLight(ps))
		}
	}
	return all
}

// add folds one consumer's pass into all.
func (all *passResult) add(k *consumer, r passResult) {
	all.decided += r.decided
	switch {
	case k.work:
		all.fill = max(all.fill, r.fill) // by region
	case k.n > 0:
		all.fill = max(all.fill, float64(r.decided)/float64(k.n))
	}
	all.advanced = all.advanced || r.advanced
	all.pushed = all.pushed || r.pushed
	all.pending = all.pending || r.pending
}

// newPass starts a pass; outside the final one it wakes the deliverer as it
// fills the rings.
func (d *Drainer) newPass(final bool, makeRoom func(*consumer)) *pass {
	ps := &pass{now: time.Now(), tornTimeout: d.opts.TornTimeout, holeGrace: d.opts.HoleGrace,
		final: final, makeRoom: makeRoom, drop: d.noteDrop}
	if !final {
		ps.wake = d.wakeDeliverer
	}
	return ps
}

// passAll runs one pass over every device (passMu held).
func (d *Drainer) passAll(final bool, makeRoom func(*consumer)) passResult {
	var all passResult
	if d.quiet.Load() {
		return all // Quiesce: the devices' memory may be gone
	}
	ps := d.newPass(final, makeRoom)
	for _, dv := range *d.devices.Load() {
		// Work positions have no heads, but the read is kept: it fails
		// once the driver shuts down at process exit, which may unmap
		// the host memory the regions lie in (see burst).
		err := dv.dev.ReadCtl(dv.ctl)
		dv.ctlFailed = err != nil
		if err != nil {
			if !dv.ctlErr {
				dv.ctlErr = true
				d.logReadFailure(dv, err, "reading buffer heads failed, its records are not drained")
			}
			continue
		}
		dv.lastHeads = append(dv.lastHeads[:0], dv.ctl[:len(dv.consumers)]...)
		if final {
			dv.settledHeads = append(dv.settledHeads[:0], dv.lastHeads...)
		}
		for h, k := range dv.consumers {
			all.add(k, k.drain(dv.ctl[h], ps))
		}
	}
	return all
}
