package rings

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ncclhooks/ncclhooks/abi"
	"github.com/ncclhooks/ncclhooks/backend"
	"github.com/ncclhooks/ncclhooks/hookgen"
	"github.com/ncclhooks/ncclhooks/sinks"
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

// A pass that decides busyPass positions or more is followed by the next
// one after busyPollInterval instead of the poll interval.
const (
	busyPass         = 1024
	busyPollInterval = 20 * time.Microsecond
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

	PollInterval     time.Duration // device polling while busy (1ms)
	IdlePollInterval time.Duration // polling backs off to this when idle (2ms)
	DumpInterval     time.Duration // dump_stats and aggregate snapshots (1s)
	// RingCapacity is the Go ring per hook per device, in records
	// (output.ring_capacity; 65536).
	RingCapacity int
	TornTimeout  time.Duration // see DefaultTornTimeout
	HoleGrace    time.Duration // see DefaultHoleGrace
	Batch        int           // records per Sink.Records call (1024)
}

const funcCacheSize = 4096

// warnedDrop makes the first drop in the process log one WARN, whichever
// drainer, hook and device it happens on.
var warnedDrop atomic.Bool

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

	wake    chan struct{}
	stop    chan struct{}
	done    sync.WaitGroup
	closing sync.Once
	summary Summary

	// Delivery side, under deliverMu.
	dumps     int
	names     map[uint32]string // resolved names of ids >= funcCacheSize
	nameCache []*string         // resolved names of ids < funcCacheSize
	recs      []sinks.Record
	values    []hookgen.Value
	sinkErr   bool
}

type device struct {
	dev       backend.Device
	mod       *hookgen.Module
	ordinal   int
	ctl       []uint64
	agg       []uint64
	consumers []*consumer
	ctlErr    bool // a failed ReadCtl was logged
	aggErr    bool // a failed ReadAgg or decode was logged
	// lastHeads are the heads of the last successful read; settledHeads
	// those of the last final pass (nil before one).
	lastHeads, settledHeads []uint64
	shutdownLogged          bool // the driver's shutdown was logged
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
		opts:  opts,
		wake:  make(chan struct{}, 1),
		stop:  make(chan struct{}),
		names: map[uint32]string{},
	}
	d.devices.Store(&[]*device{})
	d.done.Add(2)
	go d.pollLoop()
	go d.deliverLoop()
	return d
}

// Add starts draining one loaded device. Its consumers start at the
// device's current heads: positions reserved before Add were decided by an
// earlier drainer (a previous init/finalize cycle of the same process), so
// Add must come before the hook is handed to NCCL on a fresh device.
// Devices may be added while the drainer runs.
func (d *Drainer) Add(dev backend.Device, m *hookgen.Module) error {
	d.passMu.Lock()
	defer d.passMu.Unlock()
	if d.closed {
		return errors.New("rings: Add after Close")
	}
	for _, x := range *d.devices.Load() {
		if x.dev == dev || x.ordinal == dev.Ordinal() {
			return fmt.Errorf("rings: device %d added twice", dev.Ordinal())
		}
	}
	dv := &device{
		dev:     dev,
		mod:     m,
		ordinal: dev.Ordinal(),
		ctl:     make([]uint64, m.CtlWords()),
		agg:     make([]uint64, m.AggWords),
	}
	if err := dev.ReadCtl(dv.ctl); err != nil {
		return fmt.Errorf("rings: device %d: reading heads: %w", dv.ordinal, err)
	}
	ringCap := d.opts.RingCapacity
	if ringCap <= 0 && m.Profile != nil {
		ringCap = m.Profile.Output.RingCapacity
	}
	if ringCap <= 0 {
		ringCap = DefaultRingCapacity
	}
	for h, info := range m.Hooks {
		k, err := newConsumer(info, dv.ordinal, dev.Slots(h), dev.Holes(h), dv.ctl[h], ringCap)
		if err != nil {
			return fmt.Errorf("rings: %w", err)
		}
		k.setLimit = func(l uint64) error { return dev.WriteLimit(h, l) }
		if k.dropNewest {
			scratch := make([]uint64, len(dv.ctl))
			k.readHead = func() (uint64, error) {
				if err := dev.ReadCtl(scratch); err != nil {
					return 0, err
				}
				return scratch[h], nil
			}
			// Nothing may be written before the first limit: set it now.
			k.limit = dv.ctl[len(m.Hooks)+h]
			k.limitTried = k.limit
			k.publishLimit()
			if k.limit < k.pos+k.n {
				return fmt.Errorf("rings: device %d hook %q: writing the buffer limit failed", dv.ordinal, info.Name)
			}
		}
		dv.consumers = append(dv.consumers, k)
	}
	list := append(append([]*device(nil), *d.devices.Load()...), dv)
	d.devices.Store(&list)
	return nil
}

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

func (d *Drainer) deliverLoop() {
	defer d.done.Done()
	tick := time.NewTicker(d.opts.DumpInterval)
	defer tick.Stop()
	for {
		select {
		case <-d.stop:
			return
		case <-d.wake:
			d.deliverMu.Lock()
			for _, dv := range *d.devices.Load() {
				for _, k := range dv.consumers {
					d.deliver(k, ^uint64(0))
				}
			}
			d.deliverMu.Unlock()
		case <-tick.C:
			d.deliverMu.Lock()
			d.dump(false)
			d.deliverMu.Unlock()
		}
	}
}

// deliver hands k's ring records to the sink until upTo records of k have
// been delivered in all, or the ring is empty (deliverMu held).
func (d *Drainer) deliver(k *consumer, upTo uint64) {
	layout := &k.info.Layout
	nf := len(layout.Fields)
	if need := d.opts.Batch * nf; len(d.values) < need {
		d.values = make([]hookgen.Value, need)
	}
	for k.popped < upTo {
		want := min(uint64(d.opts.Batch), upTo-k.popped)
		d.recs = d.recs[:0]
		n := k.ring.Consume(int(want), func(seq uint64, payload []byte) {
			// Records and their values are reused batch after batch (the
			// Sink contract): fill them in place.
			i := len(d.recs)
			if i < cap(d.recs) {
				d.recs = d.recs[:i+1]
			} else {
				d.recs = append(d.recs, sinks.Record{})
			}
			r := &d.recs[i]
			r.Hook, r.Device, r.Seq, r.FuncName = k.info, k.device, seq, ""
			r.Values = layout.Decode(payload, d.values[i*nf:(i+1)*nf:(i+1)*nf])
			if k.funcField >= 0 {
				r.FuncName = d.funcName(r.Values[k.funcField])
			}
		})
		if n == 0 {
			return
		}
		k.popped += uint64(n)
		d.sinkDo("records", d.opts.Sink.Records(d.recs))
	}
}

func (d *Drainer) funcName(v hookgen.Value) string {
	if d.opts.FuncName == nil {
		return ""
	}
	var id uint32
	switch {
	case v.Type.IsFloat():
		id = uint32(v.F)
	case v.Type.IsSigned():
		id = uint32(v.I)
	default:
		id = uint32(v.U)
	}
	// NCCL's function table has a few hundred entries: a slice lookup
	// keeps the resolver (a cgo call in the plugin) off the per-record path.
	if id < funcCacheSize {
		if d.nameCache == nil {
			d.nameCache = make([]*string, funcCacheSize)
		}
		if p := d.nameCache[id]; p != nil {
			return *p
		}
		name := d.opts.FuncName(id)
		d.nameCache[id] = &name
		return name
	}
	name, ok := d.names[id]
	if !ok {
		name = d.opts.FuncName(id)
		d.names[id] = name
	}
	return name
}

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
		for _, k := range dv.consumers {
			ps = append(ps, pending{k, k.stats()})
		}
		out.Aggs = append(out.Aggs, d.aggSnapshots(dv, now, final)...)
	}
	d.passMu.Unlock()

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
	if err := dv.dev.ReadAgg(dv.agg); err != nil {
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
		d.passAll(false, nil)
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
		d.passAll(true, func(k *consumer) { d.deliver(k, ^uint64(0)) })
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
func (d *Drainer) Settle() Summary {
	d.deliverMu.Lock()
	defer d.deliverMu.Unlock()
	d.passMu.Lock()
	if d.closed {
		d.passMu.Unlock()
		return d.summary
	}
	d.passAll(true, func(k *consumer) { d.deliver(k, ^uint64(0)) })
	d.passMu.Unlock()
	return Summary{Stats: d.dump(true).Stats}
}

// logReadFailure logs, once per device, that it can no longer be read. At
// process exit the CUDA driver shuts down under the drainer: after a final
// dump with nothing new since, that is expected and only worth an INFO line;
// before one, records may be lost, which is worth a WARN.
func (d *Drainer) logReadFailure(dv *device, err error, warning string) {
	if errors.Is(err, backend.ErrShutdown) {
		if dv.shutdownLogged {
			return
		}
		dv.shutdownLogged = true
		if d.settledClean(dv) {
			d.log(LogInfo, fmt.Sprintf("ncclhooks: device %d: the CUDA driver shut down (process exit) after the final dump: draining stopped, nothing was lost", dv.ordinal))
			return
		}
		d.log(LogWarn, fmt.Sprintf("ncclhooks: device %d: the CUDA driver shut down (process exit) before the last communicator was finalized: records since the last dump are not in the output (%v)", dv.ordinal, err))
		return
	}
	d.log(LogWarn, fmt.Sprintf("ncclhooks: device %d: %s: %v", dv.ordinal, warning, err))
}

// settledClean reports whether a final dump covered every position the
// device's hooks had reserved when the drainer last read them.
func (d *Drainer) settledClean(dv *device) bool {
	return dv.settledHeads != nil && slices.Equal(dv.settledHeads, dv.lastHeads)
}

// noteDrop logs the first drop of the process (passMu held).
func (d *Drainer) noteDrop(k *consumer, s stage, n uint64) {
	if n == 0 || warnedDrop.Load() || !warnedDrop.CompareAndSwap(false, true) {
		return
	}
	d.log(LogWarn, dropWarning(k, s, n, d.opts.TornTimeout))
}

func dropWarning(k *consumer, s stage, n uint64, tornTimeout time.Duration) string {
	where := ""
	if h := k.info.Hook; h != nil && h.Buffer.Pos.Line > 0 {
		where = " (" + h.Buffer.Pos.String() + ")"
	}
	slots := fmt.Sprintf("raise buffer.slots of hook %q in the profile%s (now %d)", k.info.Name, where, k.n)
	var what string
	switch s {
	case stageBufferFull:
		what = "device buffer full (drop_newest): the drain did not keep up; " + slots
	case stageOverwritten:
		what = "overwritten in the device buffer (overwrite_oldest) before the drain read it; " + slots
	case stageTorn:
		what = fmt.Sprintf("torn: a writer reserved a slot and did not complete it within %v (preempted or killed); if it repeats, %s", tornTimeout, slots)
	case stageRingFull:
		what = fmt.Sprintf("host ring full: the sinks did not keep up; raise output.ring_capacity in the profile (now %d)", k.ring.Cap())
	}
	return fmt.Sprintf("ncclhooks: hook %q on device %d dropped %d record(s): %s. Every drop is counted in the dump_stats lines (dropped_*_total); this warning is not repeated in this process.",
		k.info.Name, k.device, n, what)
}

func (d *Drainer) log(level int, msg string) {
	if d.opts.Log != nil {
		d.opts.Log(level, msg)
	}
}

// sinkDo logs the first sink error; the drain goes on (deliverMu held).
func (d *Drainer) sinkDo(what string, err error) {
	if err != nil && !d.sinkErr {
		d.sinkErr = true
		d.log(LogWarn, fmt.Sprintf("ncclhooks: output %s failed (every record is still counted, later errors are not logged): %v", what, err))
	}
}

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

type discard struct{}

func (discard) Records([]sinks.Record) error { return nil }
func (discard) Dump(*sinks.Dump) error       { return nil }
func (discard) Close() error                 { return nil }
