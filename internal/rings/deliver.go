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
		k.newBatch(d.opts.Batch)
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
			d.decode(k, k.recs[n:n+len(seqs)], seqs, payloads)
			k.ring.Release(len(seqs))
			n += len(seqs)
		}
		if n == 0 {
			return
		}
		k.popped += uint64(n)
		d.sinkDo("records", d.opts.Sink.Records(k.recs[:n]))
	}
}

// newBatch makes k's decoder and the records of a batch, each with its
// hook, device and values (typed by the decoder) filled in once: records and
// their values are reused batch after batch (the Sink contract).
func (k *consumer) newBatch(size int) {
	nf := len(k.info.Layout.Fields)
	k.decoder = k.info.Layout.NewDecoder()
	values := k.decoder.Values(size)
	k.recs = make([]sinks.Record, size)
	for i := range k.recs {
		k.recs[i] = sinks.Record{Hook: k.info, Device: k.device, Values: values[i*nf : (i+1)*nf : (i+1)*nf]}
	}
}

// decode fills the positions, values and function names of recs from k's
// ring records. Decoding writes only the numbers.
func (d *Drainer) decode(k *consumer, recs []sinks.Record, seqs []uint64, payloads []byte) {
	stride := k.ring.stride
	seqs = seqs[:len(recs)]
	for i := range recs {
		r := &recs[i]
		r.Seq = seqs[i]
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
