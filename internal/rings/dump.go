package rings

// Dumps (statistics and aggregate snapshots), Flush, Close and Settle, and
// the Summary they return.

import (
	"fmt"
	"strings"
	"time"

	"github.com/ncclhooks/ncclhooks/internal/sinks"
)

// dump snapshots every consumer's statistics and every aggregate under
// passMu, delivers exactly the records the snapshot counts, then calls
// Sink.Dump, so a dump always follows the records it covers (deliverMu held).
func (d *Drainer) dump(final bool) *sinks.Dump {
	now := time.Now().UnixNano()
	out := &sinks.Dump{Final: final}
	type pending struct {
		k  *consumer
		st sinks.Stats
	}
	var ps []pending
	d.passMu.Lock()
	devs := *d.devices.Load()
	for _, dv := range devs {
		first := len(ps)
		for _, k := range dv.consumers {
			ps = append(ps, pending{k, k.statsReading(!d.quiet.Load())})
		}
		out.Aggs = append(out.Aggs, d.aggSnapshots(dv, now, final)...)
		// A hook that only aggregates (config.Hook.AggregatesOnly: its
		// record has no field, it is not drained) reserves no position:
		// what it matched is what its aggregates counted.
		for i := first; i < len(ps); i++ {
			if k := ps[i].k; len(k.info.Layout.Fields) == 0 && !k.work {
				if n, ok := dv.aggCount(k.info.Name); ok {
					ps[i].st.Matched = n
				}
			}
		}
	}
	d.passMu.Unlock()
	if d.opts.DeviceState != nil {
		for _, dv := range devs {
			st := d.opts.DeviceState(dv.dev)
			st.Device, st.TimeUnixNs = dv.ordinal, now
			out.Devices = append(out.Devices, st)
		}
	}

	d.dumps++
	for _, p := range ps {
		d.deliver(p.k, p.st.Records)
		st := p.st
		st.Dump, st.Final, st.TimeUnixNs = d.dumps, final, now
		st.RecordsSinceLastDump = st.Records - p.k.lastRecords
		st.DroppedSinceLastDump = st.Dropped - p.k.lastDropped
		p.k.lastRecords, p.k.lastDropped = st.Records, st.Dropped
		out.Stats = append(out.Stats, st)
	}
	d.sinkDo("dump", d.opts.Sink.Dump(out))
	return out
}

// aggSnapshots reads and decodes one device's aggregates (passMu held).
func (d *Drainer) aggSnapshots(dv *device, now int64, final bool) []sinks.AggSnapshot {
	if len(dv.mod.Aggs) == 0 {
		return nil
	}
	if err := d.readAgg(dv); err != nil {
		if !dv.aggErr {
			dv.aggErr = true
			d.logReadFailure(dv, err, "reading aggregates failed, their snapshots are left out")
		}
		return nil
	}
	var out []sinks.AggSnapshot
	for _, a := range dv.mod.Aggs {
		rows, err := decodeAgg(a, dv.agg, d.opts.FuncName)
		if err != nil {
			if !dv.aggErr {
				dv.aggErr = true
				d.log(LogWarn, "ncclhooks: device "+fmt.Sprint(dv.ordinal)+": "+err.Error())
			}
			continue
		}
		out = append(out, sinks.AggSnapshot{Info: a, Device: dv.ordinal, TimeUnixNs: now, Final: final, Rows: rows})
	}
	return out
}

// aggCount is the count of hook's first aggregate over all its rows, as last
// read into dv.agg: every aggregate of a hook counts each event it matched
// (word 0 of a row is its count, whatever the kind).
// ok is false for a hook without aggregates.
func (dv *device) aggCount(hook string) (n uint64, ok bool) {
	for _, a := range dv.mod.Aggs {
		if a.Hook != hook {
			continue
		}
		for r := range a.Keys {
			n += dv.agg[a.Offset+r*a.RowWords]
		}
		return n, true
	}
	return 0, false
}

// readAgg reads the device's aggregates into dv.agg, but for a Work module,
// whose aggregates the drain keeps there itself, and for a quiesced drainer.
func (d *Drainer) readAgg(dv *device) error {
	if dv.mod.Work || d.quiet.Load() {
		return nil // a quiesced drainer's snapshots are the last it read
	}
	return dv.dev.ReadAgg(dv.agg)
}

// Flush drains every device now, delivers what it found and writes a dump.
// Flush(true) is Close.
func (d *Drainer) Flush(final bool) {
	if final {
		d.Close()
		return
	}
	d.deliverMu.Lock()
	defer d.deliverMu.Unlock()
	d.passMu.Lock()
	closed := d.closed
	if !closed {
		// deliverMu is held, so the deliverer cannot empty a ring this
		// pass fills: a full one is delivered here rather than its records
		// refused (ring_full), as at Close.
		d.passAll(false, d.deliverAll)
	}
	d.passMu.Unlock()
	if !closed {
		d.dump(false)
	}
}

// Close stops polling, drains every device one last time (positions still
// unwritten are counted torn: the hooks must no longer run), delivers every
// record and writes the final dump (Final, Pending 0). It does not close the
// sink. It returns the final statistics; later calls return them again.
func (d *Drainer) Close() Summary {
	d.closing.Do(func() {
		close(d.stop)
		d.done.Wait()
		d.deliverMu.Lock()
		defer d.deliverMu.Unlock()
		d.passMu.Lock()
		d.closed = true
		// The deliverer is gone and deliverMu is held: empty a full ring
		// into the sink instead of refusing records at teardown.
		d.passAll(true, d.deliverAll)
		d.passMu.Unlock()
		d.summary = Summary{Stats: d.dump(true).Stats}
	})
	return d.summary
}

// Settle drains every device as Close does (positions still unwritten are
// counted torn, so no hook may be running), delivers every record and writes
// a final dump (Final, Pending 0), but keeps the Drainer running with its
// totals: the plugin settles when its last communicator is finalized, and a
// later communicator in the same process may start the hooks again.
func (d *Drainer) Settle() Summary { return d.settle(false, 0) }

// SettleQuiet is Settle, and then Quiesce once its final dump has read the
// aggregates: the last finalize's, after which no hook runs and the driver
// may unmap the devices' memory at any moment (process exit). A Resume
// between the call and that pass (a communicator initialized meanwhile, the
// settle having waited on slow storage) wins: the drainer goes on reading.
func (d *Drainer) SettleQuiet() Summary { return d.settle(true, d.resumes.Load()) }

func (d *Drainer) settle(quiesce bool, resumes uint64) Summary {
	d.deliverMu.Lock()
	defer d.deliverMu.Unlock()
	d.passMu.Lock()
	if d.closed {
		d.passMu.Unlock()
		return d.summary
	}
	d.passAll(true, d.deliverAll)
	d.passMu.Unlock()
	sum := Summary{Stats: d.dump(true).Stats} // reads the aggregates: before the quiet
	if quiesce {
		d.passMu.Lock()
		if d.resumes.Load() == resumes {
			d.quiet.Store(true)
		}
		d.passMu.Unlock()
	}
	return sum
}

// deliverAll empties k's ring into the sink: the makeRoom of the passes
// that run with deliverMu held (Flush, Close, Settle), during which the
// deliverer cannot.
func (d *Drainer) deliverAll(k *consumer) { d.deliver(k, ^uint64(0)) }

// Summary is the final statistics of a drainer, one entry per hook per device.
type Summary struct {
	Stats []sinks.Stats
}

// Total sums the statistics of every hook on every device.
func (s Summary) Total() sinks.Stats {
	var t sinks.Stats
	for _, st := range s.Stats {
		t.Matched += st.Matched
		t.Records += st.Records
		t.Dropped += st.Dropped
		t.DroppedBufferFull += st.DroppedBufferFull
		t.DroppedOverwritten += st.DroppedOverwritten
		t.DroppedTorn += st.DroppedTorn
		t.DroppedRingFull += st.DroppedRingFull
		t.Pending += st.Pending
	}
	return t
}

// String is a one-line account: "matched 10, records 8, dropped 2 (buffer_full 2) over 1 hook(s) x 1 device(s)".
func (s Summary) String() string {
	t := s.Total()
	hooks, devs := map[string]bool{}, map[int]bool{}
	for _, st := range s.Stats {
		hooks[st.Hook], devs[st.Device] = true, true
	}
	var why []string
	for _, p := range []struct {
		name string
		n    uint64
	}{{"buffer_full", t.DroppedBufferFull}, {"overwritten", t.DroppedOverwritten}, {"torn", t.DroppedTorn}, {"ring_full", t.DroppedRingFull}} {
		if p.n > 0 {
			why = append(why, fmt.Sprintf("%s %d", p.name, p.n))
		}
	}
	drops := fmt.Sprint(t.Dropped)
	if len(why) > 0 {
		drops += " (" + strings.Join(why, ", ") + ")"
	}
	return fmt.Sprintf("matched %d, records %d, dropped %s over %d hook(s) x %d device(s)", t.Matched, t.Records, drops, len(hooks), len(devs))
}
