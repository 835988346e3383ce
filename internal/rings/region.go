package rings

import (
	"sync/atomic"

	"github.com/ncclhooks/ncclhooks/internal/config"
)

// Work-counter positions (buffer.positions: work; work.go runs a cursor per
// region; docs/ARCHITECTURE.md, "Work positions"). A hook that takes a
// record's position from the event itself, 2 x workCounter + phase, writes
// it into the region of its (communicator, channel), at slot position mod
// n, with no counter to reserve it and no load: NCCL runs a (communicator, channel) on one block at a time, so a
// region has one writer, and every work item reports START and STOP once,
// so the positions of a region follow each other from the first one,
// regionFirst. A STOP is written when its work item ends, after the STARTs
// of the items batched with it, so positions land out of order within a
// batch (at most 64 items, 128 positions), and a STOP can come seconds after
// the START that follows it.
//
// Without a head there is nothing to say that a position was reserved and
// not written, so no torn timeout applies: a position is decided when its
// record is complete (emitted), when a later lap's stamp is in its slot
// (overwritten), or when the hooks no longer run (settle: torn if a later
// position of the region was written, else it never happened).

// regionFirst is a region's first position: NCCL's work counter starts at
// 1 in every (communicator, channel), and its START comes first.
const regionFirst = 2

// regionReorder bounds how far before a written position a region's writer
// can have left one unwritten: NCCL starts a batch's work items, at most 64,
// before it stops the first, so a STOP lands after up to 63 later STARTs.
const regionReorder = 128

// regionChannels is the number of regions per communicator and hook.
const regionChannels = config.RegionChannels

// regionCursor decides the positions of one region in order.
type regionCursor struct {
	slots []uint64 // n slots of c words
	n     uint64   // slots, a power of two
	c     int      // words per slot
	pos   uint64   // the next undecided position

	records, overwritten, torn uint64
	// refused: complete records a full ring did not take (drop_newest:
	// refuseRun), counted ring_full.
	refused uint64

	// A hook whose aggregates the drain computes (drainagg.go): its
	// records go to agg, paired, not to a ring. channel and comm are the
	// region's keys; startedAt is the STOP position the last START seen
	// waits for (0: none), startTime its timestamp.
	agg                  *drainAggs
	channel, comm        int
	startedAt, startTime uint64
	// slot is the block the region lies in; comm the communicator it
	// serves (consumer.resolveComm), whose index patch writes over the
	// slot the device wrote in the records' comm field.
	slot  int
	patch []commByte
}

func newRegionCursor(slots []uint64, n uint64, c int) *regionCursor {
	return &regionCursor{slots: slots, n: n, c: c, pos: regionFirst}
}

// decided is how many positions the cursor has decided.
func (r *regionCursor) decided() uint64 { return r.pos - regionFirst }

// take decides what the stamps decide from pos on, in order: runs of
// complete records go into ring (as many as it has room for), positions
// whose slot holds a later lap are overwritten. It stops at the first
// position not completely written, and returns how many it decided.
func (r *regionCursor) take(ring *Ring) uint64 {
	from := r.pos
	for {
		if n := r.run(ring); n > 0 {
			continue
		}
		if n := r.lappedRun(); n > 0 {
			r.overwritten += n
			r.pos += n
			continue
		}
		q, ok := r.lapped()
		if !ok {
			break
		}
		// q, in pos's slot, was written; with it every position before
		// its batch (regionReorder), and so the next lap of each
		// position before that less a region: all overwritten, decided
		// at once rather than slot by slot, or a drain that fell a lap
		// behind would stay behind.
		skip := uint64(1)
		if end := q + 1 - min(q+1, regionReorder+r.n); end > r.pos+1 {
			skip = end - r.pos
		}
		r.overwritten += skip
		r.pos += skip
	}
	return r.pos - from
}

// reached reports whether the first word of pos's slot holds pos's stamp
// or a later lap's: a writer has reached pos. A slot whose first word is
// still older decides nothing now but, rarely, a lap that began in a later
// word, which the next look finds.
func (r *regionCursor) reached() bool { return r.reachedAt(r.pos) }

// reachedAt is reached for position p.
func (r *regionCursor) reachedAt(p uint64) bool {
	s := uint32(p + 1)
	x := uint32(loadWord(r.slots, int(p&(r.n-1))*r.c) >> 32)
	// x == s even for the stamp 0 (positions 2^32-1 mod 2^32): past the
	// first lap no slot holds 0, and those positions lie far past it.
	return x == s || newer(x, s, r.n)
}

// lappedRun counts the positions from pos on whose slot's first word holds
// a later lap's stamp, up to a region's worth: overwritten, decided a run
// at a time with one load each, in order through the region (a drain that
// fell behind finds a run of them after each skip, and slot by slot, with
// every word loaded twice, it stayed behind: bench/RESULTS.md, eighth
// session).
func (r *regionCursor) lappedRun() uint64 {
	var n uint64
	for ; n < r.n; n++ {
		p := r.pos + n
		if x := uint32(loadWord(r.slots, int(p&(r.n-1))*r.c) >> 32); !newer(x, uint32(p+1), r.n) {
			break
		}
	}
	return n
}

// lapped reports whether some word of pos's slot holds a later lap's stamp
// (pos's record, written or not, is gone), and the latest position such a
// stamp names.
func (r *regionCursor) lapped() (uint64, bool) {
	base := int(r.pos&(r.n-1)) * r.c
	s := uint32(r.pos + 1)
	var ahead uint32
	for i := range r.c {
		if x := uint32(loadWord(r.slots, base+i) >> 32); newer(x, s, r.n) {
			ahead = max(ahead, x-s)
		}
	}
	return r.pos + uint64(ahead), ahead > 0
}

func loadWord(w []uint64, i int) uint64 { return atomic.LoadUint64(&w[i]) }

// run decides the run of complete records from pos on: into ring, or, for
// a hook the drain aggregates, into its aggregates.
func (r *regionCursor) run(ring *Ring) uint64 {
	if r.agg != nil {
		return r.pairRun()
	}
	return r.emitRun(ring)
}

// emitRun copies the run of complete records from pos into ring, a stretch
// that wraps neither the region nor the ring at a time (copyRecords), and
// publishes them under their positions.
func (r *regionCursor) emitRun(ring *Ring) uint64 {
	room := ring.Free()
	n := uint64(0)
	for n < room {
		p := r.pos + n
		j := p & (r.n - 1)
		i := (ring.head.Load() + n) & ring.mask
		want := min(room-n, r.n-j, ring.mask+1-i)
		got := copyRecords(ring.seqs[i:i+want], ring.payloads[int(i)*ring.stride:int(i+want)*ring.stride],
			r.slots[int(j)*r.c:int(j+want)*r.c], p, r.c)
		if len(r.patch) > 0 && r.comm != r.slot {
			patchComm(ring.payloads, ring.stride, int(i), int(got), r.patch, r.comm)
		}
		n += got
		if got < want {
			break
		}
	}
	if n > 0 {
		ring.Publish(n)
		r.pos += n
		r.records += n
	}
	return n
}

// refuseRun decides the run of complete records from pos on without
// taking them: drop_newest's ring_full, when the ring is full and no pass
// can empty it. The ring keeps the oldest records, and the region goes on
// being read, where records left in it would be overwritten.
func (r *regionCursor) refuseRun() uint64 {
	var n uint64
run:
	for ; n < r.n; n++ {
		p := r.pos + n
		base := int(p&(r.n-1)) * r.c
		for i := range r.c {
			if uint32(loadWord(r.slots, base+i)>>32) != uint32(p+1) {
				break run
			}
		}
	}
	r.refused += n
	r.pos += n
	return n
}

// last is the latest position written in the region, or false when none
// is at pos or past it: a slot's stamp names its position, which lies in
// [pos, pos + 2^31) when it is one the cursor has not decided.
func (r *regionCursor) last() (uint64, bool) {
	s := uint32(r.pos + 1)
	var ahead uint32
	found := false
	for j := 0; j < int(r.n); j++ {
		for i := range r.c {
			x := uint32(loadWord(r.slots, j*r.c+i) >> 32)
			if d := x - s; x != 0 && d < 1<<31 {
				// Each word: a slot being written shows the new stamp
				// in some words only.
				ahead, found = max(ahead, d), true
			}
		}
	}
	return r.pos + uint64(ahead), found
}

// ahead is how many positions from pos on, up to the last one written
// within limit of it, are undecided: 0 when none is written.
func (r *regionCursor) ahead(limit uint64) uint64 {
	s := uint32(r.pos + 1)
	if !r.reached() && !r.reachedAt(r.pos+1) {
		// Idle (a STOP still to come leaves the START after it
		// written): two loads, not a scan, under the pass lock at every
		// dump, for every region of every communicator.
		return 0
	}
	var n uint64
	for p := r.pos; p < r.pos+min(limit, r.n); p++ {
		base := int(p&(r.n-1)) * r.c
		for i := range r.c {
			x := uint32(loadWord(r.slots, base+i) >> 32)
			if d := x - s; x != 0 && d < 1<<31 {
				n = max(n, uint64(d)+1)
			}
		}
	}
	return n
}

// settle decides every position up to the last one written, once the hooks
// no longer run: complete records are emitted (makeRoom empties a full
// ring; when it cannot, the rest stay undecided), later laps overwritten,
// the rest torn (its writer stopped, or it never came while later positions
// did). Positions past the last written one never happened and stay
// undecided.
func (r *regionCursor) settle(ring *Ring, makeRoom func() bool) bool {
	end, ok := r.last()
	if !ok {
		return true
	}
	for r.pos <= end {
		if r.take(ring) > 0 {
			continue
		}
		if ring.Free() == 0 {
			if !makeRoom() {
				return false
			}
			continue
		}
		r.torn++
		r.pos++
	}
	return true
}
