package rings

import "sync/atomic"

// Ring is a fixed-capacity single-producer single-consumer queue of raw
// records (a position and its payload bytes). The drainer is the producer
// and never waits: a full ring refuses the record and counts it as a
// ring_full drop. The sink side is the consumer.
//
// The producer and the consumer may be different goroutines; each side must
// be used by one goroutine at a time.
type Ring struct {
	stride   int // payload bytes per record
	mask     uint64
	seqs     []uint64
	payloads []byte

	// head is written by the producer only, tail by the consumer only; each
	// side reads the other's with an atomic load before touching a record.
	// They sit on cache lines of their own: the producer writes head for
	// every record while the consumer polls it.
	_    [64]byte
	head atomic.Uint64
	// tailSeen is the producer's last read of tail: it reloads tail only
	// when the ring looks full, not for every record.
	tailSeen uint64
	pushed   uint64 // producer-owned: records accepted
	refused  uint64 // producer-owned: records refused because the ring was full
	_        [64]byte
	tail     atomic.Uint64
	_        [64]byte
}

// NewRing returns a ring of capacity records (rounded up to a power of two,
// at least 2) of recordBytes payload bytes each.
func NewRing(capacity, recordBytes int) *Ring {
	c := 2
	for c < capacity {
		c <<= 1
	}
	return &Ring{
		stride:   recordBytes,
		mask:     uint64(c - 1),
		seqs:     make([]uint64, c),
		payloads: make([]byte, c*recordBytes),
	}
}

// Cap is the number of records the ring holds.
func (r *Ring) Cap() int { return len(r.seqs) }

// Len is the number of records waiting for the consumer.
func (r *Ring) Len() int { return int(r.head.Load() - r.tail.Load()) }

// Free is the number of records the producer can write before the consumer
// releases more. It reloads tail only when the last read leaves no room.
func (r *Ring) Free() uint64 {
	h := r.head.Load()
	if free := uint64(len(r.seqs)) - (h - r.tailSeen); free > 0 {
		return free
	}
	r.tailSeen = r.tail.Load()
	return uint64(len(r.seqs)) - (h - r.tailSeen)
}

// Reserve returns the payload buffer of the next free record, or nil when the
// ring is full. The producer fills it and calls Commit; a reservation that is
// not committed is simply reused by the next Reserve.
func (r *Ring) Reserve() []byte {
	if r.Free() == 0 {
		return nil
	}
	return r.payload(r.head.Load() & r.mask)
}

// Commit publishes the record last returned by Reserve under position seq.
func (r *Ring) Commit(seq uint64) {
	r.seqs[r.head.Load()&r.mask] = seq
	r.Publish(1)
}

// Unpublished returns the payload buffer of the n-th record after the
// published ones (n < Free), to go out under position seq with Publish.
// Until then the consumer does not read it, so a producer may fill it and
// leave it.
func (r *Ring) Unpublished(n, seq uint64) []byte {
	i := (r.head.Load() + n) & r.mask
	r.seqs[i] = seq
	return r.payload(i)
}

// Publish hands the next n records to the consumer.
func (r *Ring) Publish(n uint64) {
	r.pushed += n
	r.head.Store(r.head.Load() + n) // publishes seqs and payloads to the consumer
}

func (r *Ring) payload(i uint64) []byte {
	return r.payloads[int(i)*r.stride : int(i+1)*r.stride : int(i+1)*r.stride]
}

// Push copies payload into the ring. It reports false, and counts a ring_full
// drop, when the ring is full.
func (r *Ring) Push(seq uint64, payload []byte) bool {
	buf := r.Reserve()
	if buf == nil {
		r.refused++
		return false
	}
	copy(buf, payload)
	r.Commit(seq)
	return true
}

// Refuse counts one ring_full drop for a record the producer could not place.
func (r *Ring) Refuse() { r.refused++ }

// RefuseN counts n records refused at once.
func (r *Ring) RefuseN(n uint64) { r.refused += n }

// Pushed is the number of records accepted so far (producer side).
func (r *Ring) Pushed() uint64 { return r.pushed }

// Refused is the number of ring_full drops so far (producer side).
func (r *Ring) Refused() uint64 { return r.refused }

// Peek returns up to max waiting records, oldest first, that lie back to
// back in the ring (so fewer when they wrap around its end): their
// positions, and their payloads, stride bytes each. They stay the
// consumer's until Release.
func (r *Ring) Peek(max int) (seqs []uint64, payloads []byte) {
	t := r.tail.Load()
	n := min(r.head.Load()-t, uint64(max))
	i := t & r.mask
	n = min(n, uint64(len(r.seqs))-i)
	return r.seqs[i : i+n], r.payloads[int(i)*r.stride : int(i+n)*r.stride]
}

// Release hands the n oldest waiting records back to the producer.
func (r *Ring) Release(n int) {
	r.tail.Store(r.tail.Load() + uint64(n))
}
