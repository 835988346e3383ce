package rings

import (
	"slices"
	"sync"

	"github.com/ncclhooks/ncclhooks/internal/hookgen"
)

// The drain of hooks with work positions (hookgen.HookInfo.Work): one
// regionCursor per (communicator, channel), over the regions in each
// communicator's block. There is no head: the stamps alone decide.

// workLookahead is how far past a cursor a dump's pending count looks for
// positions already written: NCCL starts a batch's work items (at most 64)
// before it stops the first, so the positions written ahead of an
// undecided one lie within 128 of it.
const workLookahead = 256

// addRegions adds the cursors of the slots whose blocks were made since
// the last pass, RegionChannels of them each, and makes again those of a
// slot whose block was reset for reuse since this consumer retired its
// cursors (settled, backend.Device.ReleaseComm).
func (k *consumer) addRegions() {
	for c := range len(k.regions) / regionChannels {
		if k.regions[c*regionChannels] == nil && k.releasedOf(c) > k.bornAt[c] {
			if !k.makeRegions(c) {
				return
			}
		}
	}
	for c := len(k.regions) / regionChannels; c < k.comms(); c++ {
		if !k.makeRegions(c) {
			return
		}
	}
}

// makeRegions makes slot c's cursors, appended or in place of retired
// ones; false when its block is not made yet, or the device is closing.
func (k *consumer) makeRegions(c int) bool {
	view := k.regionsOf(c)
	if len(view) != regionChannels*int(k.n)*k.chunks {
		return false
	}
	w := int(k.n) * k.chunks
	if len(k.regions) <= c*regionChannels {
		k.regions = append(k.regions, make([]*regionCursor, regionChannels)...)
		k.bornAt = append(k.bornAt, 0)
	}
	k.bornAt[c] = k.releasedOf(c)
	for ch := range regionChannels {
		r := newRegionCursor(view[ch*w:(ch+1)*w:(ch+1)*w], k.n, k.chunks)
		r.agg, r.channel, r.slot, r.comm = k.drainAggs, ch, c, -1
		r.patch = k.commPatch
		k.regions[c*regionChannels+ch] = r
	}
	return true
}

// releasedOf is how many times slot c's block was reset for reuse.
func (k *consumer) releasedOf(c int) uint64 {
	if k.released == nil || c >= len(*k.released) {
		return 0
	}
	return (*k.released)[c]
}

// resolveComm sets r.comm to the communicator its slot's block serves, as
// long as the cursor has decided nothing: a block made at load serves
// communicator 0 until the first NewComm takes it, and no record is
// written before the block is claimed. false: the slot is free, nothing
// is written there.
func (k *consumer) resolveComm(r *regionCursor) bool {
	if r.comm >= 0 && r.pos != regionFirst {
		return true
	}
	r.comm = r.slot // fixed mapping (a device without commIndex: tests)
	if k.commIndex != nil {
		r.comm = k.commIndex(r.slot)
	}
	return r.comm >= 0
}

// drainWork decides, region by region, what the stamps decide
// (regionCursor.take); at the final pass, every position up to the last one
// written (regionCursor.settle). The regions of a retired communicator are
// settled first, and then polled no more (retire).
func (k *consumer) drainWork(ps *pass) passResult {
	k.addRegions()
	var res passResult
	k.retire(ps, &res)
	for _, r := range k.regions {
		if r == nil {
			continue // retired
		}
		if !ps.final && !r.reached() {
			continue // idle: one load, where take costs a ring's bookkeeping
		}
		if !k.resolveComm(r) {
			continue // a free slot
		}
		before := *r
		var n uint64
		if ps.final {
			n, _ = k.settleRegion(r, ps)
		} else {
			for {
				n += r.take(k.ring)
				// A full ring: where a pass may empty it (Flush), it
				// does, rather than leave the region to be lapped;
				// with drop_newest the ring keeps what it holds and the
				// newer records are dropped (ring_full).
				if k.ring.Free() > 0 || !r.reached() {
					break
				}
				if ps.makeRoom != nil {
					ps.makeRoom(k)
					continue
				}
				if !k.dropNewest || r.agg != nil {
					break
				}
				refused := r.refuseRun()
				if refused == 0 {
					break
				}
				n += refused
			}
		}
		k.account(r, &before, n, ps, &res)
	}
	res.advanced = res.decided > 0
	return res
}

// settleRegion settles r (regionCursor.settle), emptying a full ring where
// the pass may; it returns how many positions it decided, and whether it
// decided every one up to the last one written.
func (k *consumer) settleRegion(r *regionCursor, ps *pass) (uint64, bool) {
	from := r.pos
	done := r.settle(k.ring, func() bool {
		if ps.makeRoom == nil {
			return false
		}
		ps.makeRoom(k)
		return true
	})
	return r.pos - from, done
}

// account adds what a pass decided in region r (n positions; before: the
// cursor as it was) to the consumer's counts and the pass's result.
func (k *consumer) account(r, before *regionCursor, n uint64, ps *pass, res *passResult) {
	if n == 0 {
		return
	}
	res.decided += n
	res.fill = max(res.fill, float64(n)/float64(k.n))
	if d := r.overwritten - before.overwritten; d > 0 {
		// Lapped before the drain read them. With drop_newest the drain
		// decides the loss, not the device, which wrote on (it reads no
		// limit): the region was full when those positions' next lap
		// came, so buffer_full.
		if k.dropNewest {
			k.bufferFull += d
			ps.drop(k, stageBufferFull, d)
		} else {
			k.overwritten += d
			ps.drop(k, stageOverwritten, d)
		}
	}
	if d := r.refused - before.refused; d > 0 {
		k.ring.RefuseN(d)
		ps.drop(k, stageRingFull, d)
	}
	if d := r.torn - before.torn; d > 0 {
		k.torn += d
		ps.drop(k, stageTorn, d)
	}
	if r.records > before.records && r.agg == nil { // a drained hook's records go to its aggregates, not to the ring
		res.pushed = true
		if ps.wake != nil {
			ps.wake()
		}
	}
}

// retire settles the regions of the communicators finalized since the last
// pass (Drainer.Retire): their hooks no longer run, so, as at the final
// drain, every position up to the last one written is decided, and the
// cursors are dropped, their records kept in the counts. A region whose
// settle a full ring stopped is taken up again at the next pass.
func (k *consumer) retire(ps *pass, res *passResult) {
	k.retiring = k.retirements.since(k.retireID, k.retiring)
	left := k.retiring[:0]
	for _, c := range k.retiring {
		if (c+1)*regionChannels > len(k.regions) {
			left = append(left, c) // its block is not drained yet
			continue
		}
		done := true
		for i := c * regionChannels; i < (c+1)*regionChannels; i++ {
			r := k.regions[i]
			if r == nil {
				continue
			}
			var n uint64
			settled := true
			if k.resolveComm(r) {
				before := *r
				n, settled = k.settleRegion(r, ps)
				k.account(r, &before, n, ps, res)
			}
			if !settled {
				done = false
				continue
			}
			k.retiredRecords += r.records
			k.regions[i] = nil
		}
		if !done {
			left = append(left, c)
			continue
		}
		if k.settled != nil {
			k.settled(c)
		}
	}
	k.retiring = left
}

// workNextWritten reports whether some region's next position holds its
// record or a later one: the devices are writing again.
func (k *consumer) workNextWritten() bool {
	for _, r := range k.regions {
		if r != nil && r.reached() {
			return true
		}
	}
	// A block made since the last pass, or one reset for reuse.
	if len(k.regions) < regionChannels*k.comms() {
		return true
	}
	for c := range len(k.regions) / regionChannels {
		if k.regions[c*regionChannels] == nil && k.releasedOf(c) > k.bornAt[c] {
			return true
		}
	}
	return false
}

// regionRecords is how many records the cursors took complete, retired
// ones' included: the records of the statistics, delivered through the
// ring or, for a hook the drain aggregates, into its aggregates (none
// written).
func (k *consumer) regionRecords() uint64 {
	n := k.retiredRecords
	for _, r := range k.regions {
		if r != nil {
			n += r.records
		}
	}
	return n
}

// workPending counts the positions written past each region's first
// undecided one, within workLookahead of it: reserved, as far as the
// stamps tell, and not decided yet.
func (k *consumer) workPending() uint64 {
	var n uint64
	for _, r := range k.regions {
		if r != nil {
			n += r.ahead(workLookahead)
		}
	}
	return n
}

// retirements are the communicators of a device finalized so far
// (Drainer.Retire), queued for each work consumer of the device until it
// takes them: what is kept is the communicators not yet taken, not one
// entry per communicator ever finalized (a process that makes and
// finalizes communicators for hours keeps a few), and a count.
type retirements struct {
	mu      sync.Mutex
	pending [][]int // by consumer (subscribe): finalized, not taken yet
	total   int     // finalized so far
	last    int     // the last one finalized (-1: none)
}

func newRetirements() *retirements { return &retirements{last: -1} }

// subscribe adds a consumer, which must then take its communicators
// (since) at each pass; its id is what it passes to since.
func (rt *retirements) subscribe() int {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	rt.pending = append(rt.pending, nil)
	return len(rt.pending) - 1
}

func (rt *retirements) add(comm int) {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	for i := range rt.pending {
		rt.pending[i] = append(rt.pending[i], comm)
	}
	rt.total++
	rt.last = comm
}

// since appends to into the communicators finalized since consumer id last
// took them, in order, and forgets them.
func (rt *retirements) since(id int, into []int) []int {
	if rt == nil {
		return into
	}
	rt.mu.Lock()
	defer rt.mu.Unlock()
	into = append(into, rt.pending[id]...)
	rt.pending[id] = rt.pending[id][:0]
	return into
}

// counts are how many communicators were finalized so far, the last one
// (-1: none), and how many entries the consumers' queues hold (Retired).
func (rt *retirements) counts() (total, last, queued int) {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	for _, p := range rt.pending {
		queued += cap(p)
	}
	return rt.total, rt.last, queued
}

// commByte is one byte of a record's comm field in the ring's payload (a
// slot's stored chunks, 4 bytes each): byte shift/8 of the value.
type commByte struct {
	at    int
	shift uint
}

// commBytes are the ring payload bytes of layout l's comm fields, or nil:
// an integer comm field holds the index's low bytes, as the device writes
// it (a float one is left as written).
func commBytes(l *hookgen.Layout) []commByte {
	stored := l.Stored()
	var out []commByte
	for _, f := range l.Fields {
		if f.Source != "comm" || f.Type.IsFloat() {
			continue
		}
		for b := range f.Type.Bytes() {
			o := f.Offset + b
			i := slices.Index(stored, o/4)
			if i < 0 {
				continue
			}
			out = append(out, commByte{at: 4*i + o%4, shift: uint(8 * b)})
		}
	}
	return out
}

// patchComm writes comm over the comm field of the n records of ring
// payload from index i on (the device wrote the slot).
func patchComm(payloads []byte, stride, i, n int, patch []commByte, comm int) {
	for x := range n {
		rec := payloads[(i+x)*stride:]
		for _, b := range patch {
			rec[b.at] = byte(uint64(comm) >> b.shift)
		}
	}
}
