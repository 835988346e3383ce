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

// Reserve returns the payload buffer of the next free record, or nil when the
// ring is full. The producer fills it and calls Commit; a reservation that is
// not committed is simply reused by the next Reserve.
func (r *Ring) Reserve() []byte {
	h := r.head.Load()
	if h-r.tailSeen >= uint64(len(r.seqs)) {
		r.tailSeen = r.tail.Load()
		if h-r.tailSeen >= uint64(len(r.seqs)) {
			return nil
		}
	}
	i := int(h & r.mask)
	return r.payloads[i*r.stride : (i+1)*r.stride : (i+1)*r.stride]
}

// Commit publishes the record last returned by Reserve under position seq.
func (r *Ring) Commit(seq uint64) {
	h := r.head.Load()
	r.seqs[h&r.mask] = seq
	r.pushed++
	r.head.Store(h + 1) // publishes seqs and payload to the consumer
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
