package rings

import (
	"encoding/binary"
	"fmt"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/ncclhooks/ncclhooks/internal/config"
	"github.com/ncclhooks/ncclhooks/internal/hookgen"
	"github.com/ncclhooks/ncclhooks/internal/sinks"
)

// Drop stages, in the words of the one-time warning.
type stage int

const (
	stageBufferFull stage = iota
	stageOverwritten
	stageTorn
	stageRingFull
)

// consumer is the private consumer of one hook's slot buffer on one device,
// plus the Go ring its records go to. The producer side (pass, counters,
// ring producer) is guarded by Drainer.passMu; the delivery side (popped,
// lastRecords, lastDropped, ring consumer) by Drainer.deliverMu.
type consumer struct {
	info   *hookgen.HookInfo
	device int
	slots  []uint64 // N*C words, loaded atomically only
	holes  []uint32 // N stamps (drop_newest), loaded atomically only
	n      uint64   // slots, a power of two
	chunks int      // C
	// dropNewest selects holes + limits (with work positions: the drain's
	// own decisions, work.go); otherwise the buffer is
	// overwrite_oldest and is lapped.
	dropNewest bool
	// work: positions from the work counter (work.go). The records are in
	// each communicator's regions (regionsOf, of n slots each; comms says
	// how many communicators have them), decided by regions, a cursor per
	// (communicator, channel); slots, holes and the head go unused.
	work      bool
	regions   []*regionCursor
	regionsOf func(comm int) []uint64
	comms     func() int
	// pendingSeen is the work positions pending at the last stats that
	// read the regions (statsReading).
	pendingSeen uint64
	// drainAggs: the hook's aggregates, which the drain computes from its
	// records (drainagg.go); its records go to them, not to the ring.
	drainAggs *drainAggs
	// retirements are the device's finalized communicators, queued for
	// this consumer under retireID until it takes them; retiring those it
	// took whose regions are
	// still to settle. A retired region's cursor is nil in regions, its
	// records in retiredRecords.
	retirements    *retirements
	retireID       int
	retiring       []int
	retiredRecords uint64
	// Reused blocks (backend.Device.NewComm): commIndex is the
	// communicator a slot's block serves (-1: free); released counts the
	// device's ReleaseComm calls by slot, made by settled once every
	// consumer of the device settled the slot's regions (a consumer makes
	// a slot's cursors again only after the block was reset); bornAt is
	// released's count when this consumer made the slot's cursors.
	commIndex func(slot int) int
	released  *[]uint64
	bornAt    []uint64
	settled   func(slot int)
	// commPatch are the ring payload bytes that hold the hook's comm field
	// (work positions: the device writes the slot, devCtx's low bits, and
	// the drain writes the communicator's index over it).
	commPatch []commByte

	start uint64 // head when the device was added: positions before it belong to an earlier drainer
	pos   uint64 // next undecided position
	head  uint64 // head at the last pass
	limit uint64 // last published limit (drop_newest)

	// Positions below seenUntil were already reserved and undecided at
	// seenAt: their wait for a late writer counts from then.
	seenUntil uint64
	seenAt    time.Time

	bufferFull, overwritten, torn uint64

	ring  *Ring
	words []uint64 // one slot's words as loaded
	// stage holds the slot words of positions [stageFrom, stageTo), loaded
	// ahead of the ordered decisions by several goroutines at once (see
	// fill); a stale staged word reads as "not written yet", as a slow
	// load would.
	stage              []uint64
	stageFrom, stageTo uint64
	setLimit           func(limit uint64) error // writes this hook's limit word on its device
	// readHead reads this hook's head on its device now (drop_newest: see
	// skipHoles); nil: the head read at the start of the pass is used.
	readHead func() (uint64, error)
	// limitTried is the largest limit ever handed to setLimit, written or
	// not: no producer can have seen a larger one.
	limitTried uint64

	// Delivery side.
	popped                   uint64
	lastRecords, lastDropped uint64
	funcField                int      // index of the funcId-sourced field, -1 if none
	funcMember               idMember // the member of its values that holds the id
	decoder                  *hookgen.Decoder
	values                   []hookgen.Value // the batch's values, record after record (newBatch)
	recs                     []sinks.Record  // a batch, with hook, device and values set (newBatch)
}

func newConsumer(info *hookgen.HookInfo, device int, slots []uint64, holes []uint32, head uint64, ringCap int) (*consumer, error) {
	n := uint64(info.Slots)
	c := info.Layout.SlotWords()
	if info.Layout.Chunks == 0 {
		// An aggregate-only hook: no record buffer, no positions.
		return &consumer{info: info, device: device, start: head, pos: head, head: head,
			ring: NewRing(2, 0), funcField: -1}, nil
	}
	if info.Work {
		n = uint64(info.RegionSlots) // each region's; the regions come with the communicators
	}
	if n == 0 || n&(n-1) != 0 {
		return nil, fmt.Errorf("hook %q: %d slots is not a power of two", info.Name, n)
	}
	if !info.Work && uint64(len(slots)) != n*uint64(c) {
		return nil, fmt.Errorf("hook %q on device %d: slot view has %d words, want %d slots x %d words", info.Name, device, len(slots), n, c)
	}
	k := &consumer{
		info:       info,
		device:     device,
		slots:      slots,
		holes:      holes,
		n:          n,
		chunks:     c,
		dropNewest: info.Overflow == config.DropNewest,
		work:       info.Work,
		start:      head,
		pos:        head,
		head:       head,
		ring:       NewRing(ringCapOf(info, ringCap), 4*c), // a slot's chunks (deliver decodes the rest from positions)
		words:      make([]uint64, c),
		funcField:  -1,
	}
	if k.dropNewest && !k.work && uint64(len(holes)) != n {
		return nil, fmt.Errorf("hook %q on device %d: hole view has %d stamps, want %d", info.Name, device, len(holes), n)
	}
	for i, f := range info.Layout.Fields {
		if f.Source == "funcId" {
			k.funcField, k.funcMember = i, idMemberOf(f.Type)
			break
		}
	}
	if k.work {
		k.commPatch = commBytes(&info.Layout)
	}
	return k, nil
}

// ringCapOf is the ring capacity of hook info's consumer: none to speak
// of for a hook the drain aggregates, whose records go to its aggregates.
func ringCapOf(info *hookgen.HookInfo, ringCap int) int {
	if info.Hook != nil && info.Hook.DrainAggregates() {
		return 2
	}
	return ringCap
}

// newer reports whether stamp x was written by a later position of the same
// slot than the one whose stamp is s: (x - s) mod 2^32 is a positive
// multiple of n below 2^31. A stamp of 0 is never newer: 0 is what a word
// or hole cell holds before any write (hole cells of a buffer that never
// overflowed stay 0), and taken for a later hole it decided positions, even
// ones not reserved yet, as buffer_full. The one real stamp 0, of the
// positions 2^32-1 mod 2^32, is then taken for a cell not written yet (see
// written).
func newer(x, s uint32, n uint64) bool {
	d := x - s
	return x != 0 && d != 0 && d < 1<<31 && uint64(d)%n == 0
}

// written reports whether a hole cell (or, for a look, a word) holding stamp
// x was written for the position whose stamp is s: never when s is 0 (the
// positions 2^32-1 mod 2^32), whose stamp is what an unwritten cell holds.
// Such a position's hole is waited for like a record still being written,
// and decided torn after the torn timeout. Its record is emitted as any
// other: slot words are compared with s itself, as past the first lap no
// slot is unwritten.
func written(x, s uint32) bool { return x == s && s != 0 }

// passResult says what one pass over one hook did.
type passResult struct {
	decided  uint64  // positions decided
	fill     float64 // the largest share of one hook's buffer decided (passResult.add)
	advanced bool    // some position was decided
	pushed   bool    // some record went into the ring
	pending  bool    // positions remain undecided
}

// pass holds what one drain pass needs besides the head.
type pass struct {
	now time.Time
	// tornTimeout: how long a position may stay reserved but unwritten.
	// holeGrace: the same for a position that shows no word of its own while
	// a later position's hole stamp sits in its hole cell (see drain).
	tornTimeout, holeGrace time.Duration
	final                  bool // decide every position now (hooks no longer run)
	// makeRoom, when set, empties a full ring instead of refusing a record
	// (the final drain, when nobody else consumes the rings).
	makeRoom func(*consumer)
	drop     func(k *consumer, s stage, n uint64)
	// wake, when set, tells the deliverer that records are in a ring: a
	// long pass (a backlog) does not keep them from it until it ends.
	wake func()
}

// drain decides positions [pos, head) in order (docs/ARCHITECTURE.md,
// "Record slots"): all stamps equal -> emitted; a newer stamp -> overwritten;
// its own hole stamp -> buffer_full; otherwise the pass stops there until the
// position has waited long enough, and then it is torn.
//
// A position's hole cell is shared with the later positions of its slot,
// so under sustained overflow a hole's stamp is often replaced by a later
// hole's before the consumer reads it. A position with no word of its own
// and a later hole stamp is therefore taken for a hole after holeGrace (a
// writer that saw a newer limit could still be on its way: if so its record
// is lost, and counted, as buffer_full). Waits are measured per run of
// positions, not per position, so a burst of such positions costs one wait.
func (k *consumer) drain(head uint64, ps *pass) passResult {
	var res passResult
	if k.chunks == 0 {
		return res
	}
	if k.work {
		return k.drainWork(ps)
	}
	if head < k.pos {
		// The head never goes back; a smaller value is a read of memory
		// that was reset under us. Ignore it rather than re-emit positions.
		return passResult{pending: k.head > k.pos}
	}
	k.head = head
	k.stageTo = 0 // staged words are only good for the pass that loaded them
	from := k.pos
	k.lap(head, ps)
	for k.pos < head {
		if k.dropNewest && k.pos >= k.limitTried {
			// Past every limit a producer can have seen: holes, all of them.
			k.skipHoles(head, ps)
			break
		}
		if n, pushed := k.takeRuns(head, ps); n > 0 {
			res.pushed = res.pushed || pushed
			continue
		}
		switch k.decide(head, ps, &res) {
		case stepAgain:
			continue
		case stepStop:
			res.pending = true
			res.advanced = k.pos != from
			res.decided = k.pos - from
			k.publishLimit()
			return res
		}
		k.pos++
	}
	k.skipToLiveHead(ps)
	k.publishLimit()
	res.advanced = k.pos != from
	res.decided = k.pos - from
	return res
}

// drainLight decides, without the head, what the stamps alone decide: the
// runs of complete records and of holes from pos (emitRun, holeRun), at most
// one buffer ahead, stopping at the first other position and at drop_newest's
// limit. A stamp names the position that wrote it, so a complete record or a
// hole stamp past the head read last is one a producer reserved since; the
// head is moved up to the positions decided. Positions still being written,
// and the holes past the limit, wait for a pass with the head (drain).
func (k *consumer) drainLight(ps *pass) passResult {
	var res passResult
	if k.chunks == 0 {
		return res
	}
	if k.work {
		return k.drainWork(ps)
	}
	res.decided, res.pushed = k.takeRuns(k.pos+k.n, ps)
	res.advanced = res.decided > 0
	k.head = max(k.head, k.pos)
	k.publishLimit()
	return res
}

// takeRuns decides the runs of complete records and of holes that start at
// pos, up to end and drop_newest's limit (emitRun, holeRun): the positions
// the drain's common cases decide in bulk. It returns how many it decided
// and whether records went into the ring.
func (k *consumer) takeRuns(end uint64, ps *pass) (decided uint64, pushed bool) {
	from := k.pos
	for !k.dropNewest || k.pos < k.limitTried {
		if n := k.emitRun(end); n > 0 {
			k.pos += n
			pushed = true
			if ps.wake != nil {
				ps.wake()
			}
			continue
		}
		n := k.holeRun(end, ps)
		if n == 0 {
			break
		}
		k.pos += n
	}
	return k.pos - from, pushed
}

// step says what decide did with position pos.
type step int

const (
	stepDecided step = iota // pos is decided: go on to the next position
	stepAgain               // its record landed while decide waited: decide pos again
	stepStop                // pos is not written yet and has not waited long enough: end the pass
)

// nextWritten reports whether the first word of pos's slot, or drop_newest's
// hole cell, holds pos's stamp or a later position's: a producer has
// reached pos.
func (k *consumer) nextWritten() bool {
	if k.chunks == 0 {
		return false
	}
	if k.work {
		return k.workNextWritten()
	}
	j, s := k.pos&(k.n-1), uint32(k.pos+1)
	if x := uint32(atomic.LoadUint64(&k.slots[int(j)*k.chunks]) >> 32); written(x, s) || newer(x, s, k.n) {
		return true
	}
	if !k.dropNewest {
		return false
	}
	x := atomic.LoadUint32(&k.holes[j])
	return written(x, s) || newer(x, s, k.n)
}

// lap decides the positions [pos, head-N) of an overwrite_oldest buffer as
// overwritten at once.
func (k *consumer) lap(head uint64, ps *pass) {
	if !k.dropNewest && head-k.pos > k.n {
		// Lapped: the slots of [pos, head-N) already hold later positions.
		lapped := head - k.n - k.pos
		k.overwritten += lapped
		k.pos = head - k.n
		ps.drop(k, stageOverwritten, lapped)
	}
}

// decide decides position pos by the rules of drain's comment, from its
// slot's words and, for drop_newest, its hole cell. The ring slot is
// reserved before the words are loaded.
func (k *consumer) decide(head uint64, ps *pass, res *passResult) step {
	p := k.pos
	s := uint32(p + 1)
	j := p & (k.n - 1)
	buf := k.reserve(ps)
	equal, isNewer := k.load(p, head, s)
	var hole uint32
	if k.dropNewest && equal != k.chunks {
		hole = atomic.LoadUint32(&k.holes[j])
	}
	switch {
	case equal == k.chunks:
		if k.emit(p, buf, ps) {
			res.pushed = true
		}
	case isNewer:
		k.overwritten++
		ps.drop(k, stageOverwritten, 1)
	case k.dropNewest && written(hole, s):
		k.bufferFull++
		ps.drop(k, stageBufferFull, 1)
	default:
		// Reserved, not (completely) written yet.
		holeTaken := equal == 0 && k.dropNewest && newer(hole, s, k.n)
		return k.unwritten(p, head, s, holeTaken, ps)
	}
	return stepDecided
}

// emitRun emits the run of complete records that starts at pos, as far as
// the head and the ring's free room go, reading each slot's words straight
// from the device buffer into the ring, and publishes them with one store
// of the ring's head. It returns how many it emitted; decide handles the
// position that ends the run. This is the drain's common case, taken
// without decide's per-position steps. It does not go through the stage:
// on the H200 the stage's goroutines made every slot a transfer between
// cores, and reading the run in order cost 10-15% less CPU and kept
// all-events lossless at 20 M events/s in 3 of 3 runs (bench/RESULTS.md).
// Nor is a long run split between goroutines: on the H200 four of them
// recorded less at 40-50 M events/s than one did (bench/RESULTS.md).
func (k *consumer) emitRun(head uint64) uint64 {
	r := k.ring
	room := r.Free()
	if room == 0 {
		return 0
	}
	end := min(head, k.pos+room)
	if k.dropNewest {
		end = min(end, k.limitTried)
	}
	c, stride := k.chunks, r.stride
	n := uint64(0)
	for k.pos+n < end {
		// A stretch that wraps neither the slot buffer nor the ring: its
		// slots, and its records in the ring, lie back to back.
		p := k.pos + n
		j := p & (k.n - 1)
		i := (r.head.Load() + n) & r.mask
		want := min(end-p, k.n-j, r.mask+1-i)
		got := copyRecords(r.seqs[i:i+want], r.payloads[int(i)*stride:int(i+want)*stride],
			k.slots[int(j)*c:int(j+want)*c], p, c)
		n += got
		if got < want {
			break
		}
	}
	if n > 0 {
		r.Publish(n)
	}
	return n
}

// copyRecords copies the complete records of positions p, p+1, ... from
// their slots' words (src, c words each) into ring records (dst, 4c bytes
// each) and their positions into seqs, up to the first slot whose stamps are
// not all its position's; it returns how many it copied. One load per word:
// a word's stamp and chunk come from the same single-copy-atomic load. The
// chunks go straight into the ring record: one with a wrong stamp is left
// there unpublished.
func copyRecords(seqs []uint64, dst []byte, src []uint64, p uint64, c int) uint64 {
	if len(src) < len(seqs)*c || len(dst) < len(seqs)*4*c {
		panic("rings: copyRecords: short slot or ring view")
	}
	// The words are reached through pointers, the lengths checked once
	// above: indexed, with a bounds check per word, the loop kept more
	// values than the registers hold and took several times what a C loop
	// reading the device's records takes (bench/RESULTS.md).
	ws := unsafe.Pointer(unsafe.SliceData(src))
	ds := unsafe.Pointer(unsafe.SliceData(dst))
	for x := range seqs {
		w, d := unsafe.Add(ws, x*c*8), unsafe.Add(ds, x*c*4)
		// The stamp in the high half of every word, to XOR away.
		st := uint64(uint32(p+uint64(x)+1)) << 32
		var diff uint64
		for j := range c {
			v := atomic.LoadUint64((*uint64)(unsafe.Add(w, j*8)))
			diff |= v ^ st
			binary.LittleEndian.PutUint32((*[4]byte)(unsafe.Add(d, j*4))[:], uint32(v))
		}
		if diff>>32 != 0 {
			return uint64(x)
		}
		seqs[x] = p + uint64(x)
	}
	return uint64(len(seqs))
}

// holeRun decides the run of drop_newest holes that starts at pos as
// buffer_full at once, reading each position's hole cell and, for a hole
// whose stamp a later hole replaced, its slot's stamps: positions with their
// own hole stamp, and positions with no word of their own and a later stamp
// in their hole cell once their run's hole grace is over (decide starts that
// wait and takes the first of them). It returns how many it decided. Under
// overload holes are most positions below the limit, and one at a time
// through decide they cost several times what a record does: the drain fell
// behind on holes and recorded a fraction of what it can (bench/RESULTS.md).
func (k *consumer) holeRun(head uint64, ps *pass) uint64 {
	if !k.dropNewest {
		return 0
	}
	end := min(head, k.limitTried)
	graceOver := ps.now.Sub(k.seenAt) >= ps.holeGrace
	if !graceOver && k.pos < k.seenUntil {
		ps.now = time.Now()
		graceOver = ps.now.Sub(k.seenAt) >= ps.holeGrace
	}
	c, mask := k.chunks, k.n-1
	p := k.pos
	for ; p < end; p++ {
		s := uint32(p + 1)
		j := p & mask
		if h := atomic.LoadUint32(&k.holes[j]); !written(h, s) {
			if !graceOver || p >= k.seenUntil || !newer(h, s, k.n) {
				break
			}
			own := false
			for i := int(j) * c; i < int(j+1)*c; i++ {
				own = own || uint32(atomic.LoadUint64(&k.slots[i])>>32) == s
			}
			if own {
				break
			}
		}
	}
	n := p - k.pos
	if n > 0 {
		k.bufferFull += n
		ps.drop(k, stageBufferFull, n)
	}
	return n
}

// reserve returns the ring slot for the next record, or nil when the ring is
// full; at the final drain (makeRoom) a full ring is emptied first.
func (k *consumer) reserve(ps *pass) []byte {
	buf := k.ring.Reserve()
	if buf == nil && ps.makeRoom != nil {
		ps.makeRoom(k)
		buf = k.ring.Reserve()
	}
	return buf
}

// emit commits the record of position p, whose words load left in k.words,
// into the ring slot buf (true), or counts it ring_full when buf is nil.
func (k *consumer) emit(p uint64, buf []byte, ps *pass) bool {
	if buf == nil {
		k.ring.Refuse()
		ps.drop(k, stageRingFull, 1)
		return false
	}
	for i, w := range k.words {
		binary.LittleEndian.PutUint32(buf[4*i:], uint32(w))
	}
	k.ring.Commit(p)
	return true
}

// unwritten handles position p (stamp s), reserved but not (completely)
// written yet: outside a final pass it waits for a late writer as drain's
// comment says, or stops the pass (stepStop) until p has waited for
// tornTimeout; then p is decided, buffer_full if holeTaken (no word of its
// own, a later position's stamp in its hole cell), torn otherwise.
func (k *consumer) unwritten(p, head uint64, s uint32, holeTaken bool, ps *pass) step {
	if !ps.final {
		if p >= k.seenUntil {
			// Every position up to the head is pending from now on.
			k.seenUntil, k.seenAt = head, ps.now
		}
		if holeTaken {
			// Under overload most positions look like this. A writer
			// that saw a newer limit lands within microseconds, so
			// wait for it here, once per run of positions, rather
			// than stop the pass: stopping for a poll interval while
			// the device keeps producing is how a drain falls behind
			// for good.
			if k.spin(p&(k.n-1), s, ps) {
				k.stageTo = 0    // the staged words are stale
				return stepAgain // its record landed: decide p again
			}
			k.bufferFull++
			ps.drop(k, stageBufferFull, 1)
			return stepDecided
		}
		if ps.now.Sub(k.seenAt) < ps.tornTimeout {
			return stepStop
		}
	}
	if holeTaken {
		k.bufferFull++
		ps.drop(k, stageBufferFull, 1)
	} else {
		k.torn++
		ps.drop(k, stageTorn, 1)
	}
	return stepDecided
}

// stats returns the cumulative statistics (delivery deltas not filled in).
func (k *consumer) stats() sinks.Stats { return k.statsReading(true) }

// statsReading is stats; a work consumer's pending positions are what its
// regions' stamps show, read from the device's memory only where read is
// true: a quiesced drainer's memory may be unmapped (Drainer.Quiesce), and
// its count is the last one read.
func (k *consumer) statsReading(read bool) sinks.Stats {
	ringFull := k.ring.Refused()
	dropped := k.bufferFull + k.overwritten + k.torn + ringFull
	matched, pending := k.head-k.start, k.head-k.pos
	records := k.ring.Pushed()
	if k.work {
		// No head: what is decided, and what the stamps show written
		// beyond it.
		if read {
			k.pendingSeen = k.workPending()
		}
		pending = k.pendingSeen
		records = k.regionRecords()
		matched = records + dropped + pending
	}
	return sinks.Stats{
		Hook:               k.info.Name,
		Device:             k.device,
		Matched:            matched,
		Records:            records,
		Dropped:            dropped,
		DroppedBufferFull:  k.bufferFull,
		DroppedOverwritten: k.overwritten,
		DroppedTorn:        k.torn,
		DroppedRingFull:    ringFull,
		Pending:            pending,
	}
}
