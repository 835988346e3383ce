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
	if k.decoder == nil {
		k.decoder = k.info.Layout.NewDecoder()
		k.values = k.decoder.Values(d.opts.Batch)
	}
	if len(d.recs) < d.opts.Batch {
		d.recs = make([]sinks.Record, d.opts.Batch)
	}
	for k.popped < upTo {
		want := int(min(uint64(d.opts.Batch), upTo-k.popped))
		n := 0
		for n < want {
			// The ring's records straight from its memory, without a
			// call per record; at most two runs when they wrap.
			seqs, payloads := k.ring.Peek(want - n)
			if len(seqs) == 0 {
				break
			}
			d.decode(k, d.recs[n:n+len(seqs)], n, seqs, payloads)
			k.ring.Release(len(seqs))
			n += len(seqs)
		}
		if n == 0 {
			return
		}
		k.popped += uint64(n)
		d.sinkDo("records", d.opts.Sink.Records(d.recs[:n]))
	}
}

// decode fills recs, the batch's records from the first'th on, from the
// positions and payloads of k's ring records.
func (d *Drainer) decode(k *consumer, recs []sinks.Record, first int, seqs []uint64, payloads []byte) {
	// Records and their values are reused batch after batch (the Sink
	// contract): fill them in place. A consumer's values keep their
	// types, so decoding writes only the numbers.
	nf, stride := len(k.info.Layout.Fields), k.ring.stride
	values := k.values[first*nf : (first+len(recs))*nf]
	seqs = seqs[:len(recs)]
	for i := range recs {
		r := &recs[i]
		r.Hook, r.Device, r.Seq, r.FuncName = k.info, k.device, seqs[i], ""
		r.Values = values[i*nf : (i+1)*nf : (i+1)*nf]
		k.decoder.Decode(payloads[i*stride:(i+1)*stride], r.Values)
		if k.funcField >= 0 {
			r.FuncName = d.funcName(funcID(r.Values[k.funcField]))
		}
	}
}

// funcID is the function id a funcId-sourced field holds.
func funcID(v hookgen.Value) uint32 {
	switch {
	case v.Type.IsFloat():
		return uint32(v.F)
	case v.Type.IsSigned():
		return uint32(v.I)
	}
	return uint32(v.U)
}

// funcName resolves a function id. NCCL's function table has a few hundred
// entries: a slice lookup keeps the resolver (a cgo call in the plugin) off
// the per-record path.
func (d *Drainer) funcName(id uint32) string {
	if id < uint32(len(d.nameCache)) {
		if p := d.nameCache[id]; p != nil {
			return *p
		}
	}
	return d.resolve(id)
}

// resolve calls the resolver for an id not in nameCache and caches its name.
func (d *Drainer) resolve(id uint32) string {
	if name, ok := d.names[id]; ok {
		return name
	}
	name := ""
	if d.opts.FuncName != nil {
		name = d.opts.FuncName(id)
	}
	if id >= funcCacheSize {
		d.names[id] = name
		return name
	}
	if d.nameCache == nil {
		d.nameCache = make([]*string, funcCacheSize)
	}
	d.nameCache[id] = &name
	return name
}
