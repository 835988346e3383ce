package rings

// The deliverer: records from the rings to the sink, with their function names.

import (
	"time"

	"github.com/ncclhooks/ncclhooks/internal/config"
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
			cpu := d.stageStart()
			d.deliverMu.Lock()
			for _, dv := range *d.devices.Load() {
				for _, k := range dv.consumers {
					// What the ring holds now, not until it is empty:
					// a poller that keeps filling it would keep the
					// dumps waiting for as long as the records come.
					d.deliver(k, k.popped+uint64(k.ring.Len()))
				}
			}
			d.deliverMu.Unlock()
			d.stageDone(&d.deliverCPU, cpu)
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
			d.decode(k, n, seqs, payloads)
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
	k.decoder = k.info.Layout.NewSlotDecoder()
	k.values = k.decoder.Values(size)
	k.recs = make([]sinks.Record, size)
	for i := range k.recs {
		k.recs[i] = sinks.Record{Hook: k.info, Device: k.device, Values: k.values[i*nf : (i+1)*nf : (i+1)*nf]}
	}
}

// decode fills the positions, values and function names of the batch's
// records from index `at` on from k's ring records, a field of every record
// at a time (hookgen.Decoder.DecodeBatch). Decoding writes only the numbers.
func (d *Drainer) decode(k *consumer, at int, seqs []uint64, payloads []byte) {
	nf := len(k.info.Layout.Fields)
	k.decoder.DecodeBatch(payloads, k.ring.stride, seqs, k.values[at*nf:])
	recs := k.recs[at : at+len(seqs)]
	for i := range recs {
		r := &recs[i]
		r.Seq = seqs[i]
		if k.funcField >= 0 {
			// NCCL's function table has a few hundred entries: an
			// array lookup here keeps the resolver (a cgo call in the
			// plugin), and a call, off the per-record path.
			id := k.funcID(&r.Values[k.funcField])
			if id < funcCacheSize && d.nameCache[id] != nil {
				r.FuncName = *d.nameCache[id]
			} else {
				r.FuncName = d.resolve(id)
			}
		}
	}
}

// idMember says which member of a funcId-sourced value holds the id: the
// field's type, looked at once rather than per record.
type idMember uint8

const (
	idU idMember = iota
	idI
	idF
)

func idMemberOf(t config.Type) idMember {
	switch {
	case t.IsFloat():
		return idF
	case t.IsSigned():
		return idI
	}
	return idU
}

// funcID is the function id a funcId-sourced value holds.
func (k *consumer) funcID(v *hookgen.Value) uint32 {
	switch k.funcMember {
	case idF:
		return uint32(v.F)
	case idI:
		return uint32(v.I)
	}
	return uint32(v.U)
}

// resolve calls the resolver for an id not in nameCache and caches its name
// (there, or in names for a large id).
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
	d.nameCache[id] = &name
	return name
}
