package rings

import (
	"math/bits"

	"github.com/ncclhooks/ncclhooks/internal/config"
	"github.com/ncclhooks/ncclhooks/internal/hookgen"
)

// Aggregates the drain computes (config.Hook.DrainAggregates). Such a hook
// records each event's timestamp and funcId (hookgen.DrainRecord) at its
// work position, so a work item's START and STOP are positions 2wc and
// 2wc+1 of one region: the cursor pairs them as it decides them, in order,
// with nothing to look up, and adds the work item's duration to the
// device's aggregate cells, in the layout the device's own aggregates have
// (decodeAgg reads both). A work item counts when both of its records
// reached the drain; one whose START or STOP was overwritten or torn does
// not (that record is counted dropped, the other one a record), as phase ==
// STOP && paired leaves out a STOP whose START the device's pairing lost.

// drainAggs are one hook's aggregates on one device.
type drainAggs struct {
	aggs    []*hookgen.AggInfo
	strides []config.RowStrides // each aggregate's, RowOf as arithmetic
	cells   []uint64            // the device's aggregate cells (device.agg), guarded by passMu
}

// newDrainAggs are hook's aggregates among m's, adding into cells.
func newDrainAggs(m *hookgen.Module, hook string, cells []uint64) *drainAggs {
	a := &drainAggs{cells: cells}
	for _, ag := range m.Aggs {
		if ag.Hook == hook {
			a.aggs = append(a.aggs, ag)
			a.strides = append(a.strides, ag.Agg.Strides())
		}
	}
	return a
}

// durationMask keeps a difference of two drain timestamps.
const durationMask = 1<<hookgen.DrainTimeBits - 1

// duration is the work item's duration from its START and STOP timestamps
// (their low DrainTimeBits bits): exact below 2^52 ns, and 0 when STOP is
// the earlier, as the device's pairing has it.
func duration(start, stop uint64) int64 {
	d := (stop - start) & durationMask
	if d >= 1<<(hookgen.DrainTimeBits-1) {
		return 0
	}
	return int64(d)
}

// add counts one work item of function funcID (its key, config.MaxFuncIDs
// for the overflow row) on channel of communicator comm.
func (a *drainAggs) add(funcID uint32, channel, comm int, v int64) {
	for i, ag := range a.aggs {
		// RowOf walks the key names: here, a fifth of the drain's time.
		row := a.strides[i].Row(funcID, uint32(channel), uint32(comm))
		c := a.cells[ag.Offset+row*ag.RowWords : ag.Offset+(row+1)*ag.RowWords]
		c[0]++
		switch ag.Agg.Kind {
		case config.AggSum:
			c[1] += uint64(v)
		case config.AggMin:
			c[1] = max(c[1], ^(uint64(v) ^ 1<<63))
		case config.AggMax:
			c[1] = max(c[1], uint64(v)^1<<63)
		case config.AggHistogram:
			c[1] += uint64(v)
			c[2+bucket(ag.Agg.Buckets, v)]++
		}
	}
}

// bucket is the histogram bucket of v, as the device's hk_bucket has it:
// log2 bucket 0 holds v <= 0 and bucket i holds [2^(i-1), 2^i); with
// bounds, the first bound v is at most, else the +Inf bucket.
func bucket(b config.Buckets, v int64) int {
	if b.Log2 {
		if v <= 0 {
			return 0
		}
		return bits.Len64(uint64(v))
	}
	for i, le := range b.Bounds {
		if uint64(v) <= le {
			return i
		}
	}
	return len(b.Bounds)
}

// pairRun decides the run of complete drain records from pos on, up to a
// region's worth, pairing each STOP with the START just before it.
func (r *regionCursor) pairRun() uint64 {
	var n uint64
	for ; n < r.n; n++ {
		p := r.pos + n
		base := int(p&(r.n-1)) * r.c
		stamp := uint64(uint32(p+1)) << 32
		w0, w1 := loadWord(r.slots, base), loadWord(r.slots, base+1)
		if w0&^0xffffffff != stamp || w1&^0xffffffff != stamp {
			break
		}
		ts, funcID := hookgen.DrainRecord(uint32(w0), uint32(w1))
		if p&1 == 0 { // a START: its STOP is the next position
			r.startedAt, r.startTime = p+1, ts
			continue
		}
		if r.startedAt == p {
			r.agg.add(funcID, r.channel, r.comm, duration(r.startTime, ts))
		}
	}
	r.pos += n
	r.records += n
	return n
}
