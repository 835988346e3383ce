package rings

import (
	"encoding/binary"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
)

// regionProducer plays one (communicator, channel) of NCCL against a region:
// batches of 1-64 work items from work counter 1, every item's START, then
// every item's STOP, each event's record at position 2 x workCounter + phase,
// its words stored one by one (as a 16-byte store is two single-copy-atomic
// halves). Some records are left partial (a writer that stops), a few never
// written (a STOP that never comes).
type regionProducer struct {
	slots []uint64
	n     uint64
	c     int
	rng   *rand.Rand
	// wrote: every position's fate, for the check.
	complete map[uint64]bool
	last     uint64 // the latest position it wrote a word of
	// payload, when set, is position p's record in place of regionPayload.
	payload func(p uint64) []uint32
}

// payload is position p's record: its chunks, derived from p.
func regionPayload(p uint64, c int) []uint32 {
	w := make([]uint32, c)
	for i := range w {
		w[i] = uint32(mix(p)>>(8*i)) ^ uint32(i)
	}
	return w
}

// write stores `words` of p's words, in an order of their own (the GPU's
// 16-byte stores of a record can land in any order).
func (g *regionProducer) write(p uint64, words int) {
	base := int(p&(g.n-1)) * g.c
	st := uint64(uint32(p+1)) << 32
	pl := regionPayload(p, g.c)
	if g.payload != nil {
		pl = g.payload(p)
	}
	for _, i := range g.rng.Perm(g.c)[:words] {
		atomic.StoreUint64(&g.slots[base+i], st|uint64(pl[i]))
	}
	g.complete[p] = words == g.c
	if words > 0 {
		g.last = max(g.last, p)
	}
}

// run plays items work items, pausing (yield) between batches.
func (g *regionProducer) run(items int, partial, missing float64, yield func()) {
	wc := uint64(1)
	for items > 0 {
		k := min(items, 1+g.rng.IntN(64))
		for phase := uint64(0); phase < 2; phase++ {
			for i := uint64(0); i < uint64(k); i++ {
				p := 2*(wc+i) + phase
				switch r := g.rng.Float64(); {
				case r < missing:
					g.complete[p] = false
				case r < missing+partial:
					g.write(p, 1+g.rng.IntN(g.c-1))
				default:
					g.write(p, g.c)
				}
			}
		}
		wc += uint64(k)
		items -= k
		yield()
	}
}

// Every position of a region up to the last one written is decided exactly
// once, in order: complete records emitted with their own payload, the ones
// a later lap overwrote counted overwritten, the rest (partial, never
// written) torn at settle; nothing past the last written position counts.
// The producer runs beside the consumer, laps the region when the consumer
// lags, and leaves partial and missing records.
func TestRegionCursorDecidesEveryPositionOnce(t *testing.T) {
	for seed := range uint64(40) {
		rng := rand.New(rand.NewPCG(seed, 7))
		n := uint64(1) << (4 + rng.IntN(5)) // 16-256 slots
		items := 2000 + rng.IntN(3000)
		if seed%4 == 0 { // a region the run never wraps: no lap
			n, items = 4096, 1000+rng.IntN(1000)
		}
		c := 2 + 2*rng.IntN(3) // 2, 4, 6 words
		slots := make([]uint64, int(n)*c)
		g := &regionProducer{slots: slots, n: n, c: c, rng: rng, complete: map[uint64]bool{}}
		cur := newRegionCursor(slots, n, c)
		ring := NewRing(int(n)*2, 4*c)
		got := map[uint64]bool{}
		drain := func() {
			for {
				seqs, pls := ring.Peek(1 << 20)
				if len(seqs) == 0 {
					return
				}
				for i, p := range seqs {
					if got[p] {
						t.Fatalf("seed %d: position %d emitted twice", seed, p)
					}
					got[p] = true
					want := regionPayload(p, c)
					for w := range c {
						if v := binary.LittleEndian.Uint32(pls[(i*c+w)*4:]); v != want[w] {
							t.Fatalf("seed %d: position %d word %d is %#x, want %#x", seed, p, w, v, want[w])
						}
					}
				}
				ring.Release(len(seqs))
			}
		}
		var mu sync.Mutex // the consumer's side, taken by the producer's yields too
		stop := make(chan struct{})
		done := make(chan struct{})
		go func() { // the poller
			defer close(done)
			for {
				select {
				case <-stop:
					return
				default:
				}
				mu.Lock()
				cur.take(ring)
				drain()
				mu.Unlock()
			}
		}()
		partial, missing := 0.02*rng.Float64(), 0.01*rng.Float64()
		lag := rng.IntN(3) // 0: the consumer keeps up; more: the producer runs ahead and laps
		g.run(items, partial, missing, func() {
			if rng.IntN(1+lag*8) == 0 {
				mu.Lock()
				mu.Unlock()
			}
		})
		close(stop)
		<-done
		cur.settle(ring, func() bool { drain(); return true })
		drain()

		// Every position from the first to the last written one is decided
		// once; nothing past it.
		want := g.last - regionFirst + 1
		if cur.decided() != want {
			t.Fatalf("seed %d: decided %d positions, want %d (last written %d)", seed, cur.decided(), want, g.last)
		}
		if cur.records+cur.overwritten+cur.torn != want {
			t.Fatalf("seed %d: records %d + overwritten %d + torn %d != %d", seed, cur.records, cur.overwritten, cur.torn, want)
		}
		if uint64(len(got)) != cur.records {
			t.Fatalf("seed %d: %d records in the ring, %d counted", seed, len(got), cur.records)
		}
		// An emitted record was written complete; a position whose record
		// was never complete is never emitted.
		for p := range got {
			if !g.complete[p] {
				t.Fatalf("seed %d: position %d emitted but never written complete", seed, p)
			}
		}
		// Without laps every complete record is emitted and only the
		// others are torn.
		if n == 4096 {
			if cur.overwritten != 0 {
				t.Fatalf("seed %d: %d overwritten in a region the run never wrapped", seed, cur.overwritten)
			}
			for p := uint64(regionFirst); p <= g.last; p++ {
				if g.complete[p] != got[p] {
					t.Fatalf("seed %d: position %d complete %v, emitted %v, with no lap", seed, p, g.complete[p], got[p])
				}
			}
		}
	}
}

// The cursor's edge cases, one by one: a slot that a later lap has begun to
// overwrite (some words only) is overwritten, not waited for; at settle, a
// last position written partly, whatever words it got, is torn, and nothing
// past it counts.
func TestRegionCursorEdges(t *testing.T) {
	const n, c = 16, 4
	word := func(p uint64, i int) uint64 { return uint64(uint32(p+1))<<32 | uint64(regionPayload(p, c)[i]) }
	put := func(slots []uint64, p uint64, words ...int) {
		for _, i := range words {
			slots[int(p%n)*c+i] = word(p, i)
		}
	}
	t.Run("lap begun in a later word", func(t *testing.T) {
		slots := make([]uint64, n*c)
		put(slots, 2, 0, 1, 2, 3)
		put(slots, 2+n, 3) // the next lap's first store landed in word 3
		cur := newRegionCursor(slots, n, c)
		ring := NewRing(64, 4*c)
		if d := cur.take(ring); d != 1 || cur.overwritten != 1 || cur.records != 0 {
			t.Fatalf("decided %d: records %d, overwritten %d; want position 2 overwritten", d, cur.records, cur.overwritten)
		}
	})
	t.Run("last position partial", func(t *testing.T) {
		for _, words := range [][]int{{1}, {3}, {1, 2, 3}, {0}} {
			slots := make([]uint64, n*c)
			for p := uint64(2); p < 10; p++ {
				put(slots, p, 0, 1, 2, 3)
			}
			put(slots, 10, words...)
			cur := newRegionCursor(slots, n, c)
			ring := NewRing(64, 4*c)
			if d := cur.take(ring); d != 8 {
				t.Fatalf("words %v: took %d, want the 8 complete records", words, d)
			}
			cur.settle(ring, func() bool { t.Fatal("ring full"); return false })
			if cur.decided() != 9 || cur.torn != 1 || cur.records != 8 {
				t.Fatalf("words %v of position 10: decided %d (records %d, torn %d), want 9 with 10 torn", words, cur.decided(), cur.records, cur.torn)
			}
		}
	})
}
