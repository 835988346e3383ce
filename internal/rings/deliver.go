package rings

// The deliverer: records from the rings to the sink, with their function names.

import (
	"time"

	"github.com/ncclhooks/ncclhooks/internal/hookgen"
	"github.com/ncclhooks/ncclhooks/internal/sinks"
)

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
	nf := len(k.info.Layout.Fields)
	if k.decoder == nil {
		k.decoder = k.info.Layout.NewDecoder()
		k.values = k.decoder.Values(d.opts.Batch)
	}
	for k.popped < upTo {
		want := min(uint64(d.opts.Batch), upTo-k.popped)
		d.recs = d.recs[:0]
		n := k.ring.Consume(int(want), func(seq uint64, payload []byte) {
			// Records and their values are reused batch after batch (the
			// Sink contract): fill them in place. A consumer's values keep
			// their types, so decoding writes only the numbers.
			i := len(d.recs)
			if i < cap(d.recs) {
				d.recs = d.recs[:i+1]
			} else {
				d.recs = append(d.recs, sinks.Record{})
			}
			r := &d.recs[i]
			r.Hook, r.Device, r.Seq, r.FuncName = k.info, k.device, seq, ""
			r.Values = k.values[i*nf : (i+1)*nf : (i+1)*nf]
			k.decoder.Decode(payload, r.Values)
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
