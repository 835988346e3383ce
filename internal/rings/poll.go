package rings

// The poller: passes over every device's slot buffers into the rings.

import (
	"time"
)

func (d *Drainer) pollLoop() {
	defer d.done.Done()
	interval := d.opts.PollInterval
	t := time.NewTimer(interval)
	defer t.Stop()
	for {
		select {
		case <-d.stop:
			return
		case <-t.C:
		}
		d.passMu.Lock()
		res := d.passAll(false, nil)
		d.passMu.Unlock()
		if res.pushed {
			select {
			case d.wake <- struct{}{}:
			default:
			}
		}
		switch {
		case res.decided >= busyPass:
			// A busy pass: the device is producing faster than one pass per
			// poll interval drains; come back at once rather than let the
			// buffers fill while sleeping.
			interval = busyPollInterval
		case res.advanced || res.pending:
			interval = d.opts.PollInterval
		default:
			interval = min(2*interval, d.opts.IdlePollInterval)
		}
		t.Reset(interval)
	}
}

// passAll runs one pass over every device (passMu held).
func (d *Drainer) passAll(final bool, makeRoom func(*consumer)) passResult {
	var all passResult
	ps := &pass{now: time.Now(), tornTimeout: d.opts.TornTimeout, holeGrace: d.opts.HoleGrace,
		final: final, makeRoom: makeRoom, drop: d.noteDrop}
	for _, dv := range *d.devices.Load() {
		if err := dv.dev.ReadCtl(dv.ctl); err != nil {
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
			r := k.drain(dv.ctl[h], ps)
			all.decided += r.decided
			all.advanced = all.advanced || r.advanced
			all.pushed = all.pushed || r.pushed
			all.pending = all.pending || r.pending
		}
	}
	return all
}
