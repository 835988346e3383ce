package rings

import (
	"bytes"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ncclhooks/ncclhooks/internal/config"
	"github.com/ncclhooks/ncclhooks/internal/hookgen"
)

// consumerFor builds a consumer over hook 0 of dev, as Drainer.Add does.
func consumerFor(t *testing.T, dev *fakeDevice, ringCap int) *consumer {
	t.Helper()
	k, err := newConsumer(dev.m.Hooks[0], dev.ord, dev.Slots(0), dev.Holes(0), 0, ringCap)
	if err != nil {
		t.Fatal(err)
	}
	k.setLimit = func(l uint64) error { return dev.WriteLimit(0, l) }
	k.publishLimit()
	return k
}

type drops map[stage]uint64

func (d drops) note(_ *consumer, s stage, n uint64) { d[s] += n }

func (k *consumer) drainAt(dev *fakeDevice, now time.Time, final bool, d drops) passResult {
	return k.drainGrace(dev, now, final, d, 100*time.Millisecond)
}

// drainGrace is drainAt with the hole grace given.
func (k *consumer) drainGrace(dev *fakeDevice, now time.Time, final bool, d drops, grace time.Duration) passResult {
	return k.drain(dev.ctl[0], &pass{now: now, tornTimeout: time.Second, holeGrace: grace, final: final, drop: d.note})
}

func TestClassifyEachCase(t *testing.T) {
	m := testModule(testHook("h", 16, config.DropNewest))
	dev := newFakeDevice(0, m)
	k := consumerFor(t, dev, 64)
	if got := dev.ctl[1]; got != 16 {
		t.Fatalf("initial limit %d, want 16", got)
	}
	d := drops{}
	t0 := time.Now()

	// 0: complete. 1: partly written. 2: complete.
	p, _ := dev.reserve(0)
	dev.write(0, p, testPayload(1), 6, 0)
	p1, _ := dev.reserve(0)
	dev.write(0, p1, testPayload(2), 5, 0)
	p, _ = dev.reserve(0)
	dev.write(0, p, testPayload(3), 6, 0)
	r := k.drainAt(dev, t0, false, d)
	if k.pos != 1 || !r.pending || !r.pushed || k.ring.Len() != 1 {
		t.Fatalf("pass 1: pos %d, %+v, ring %d", k.pos, r, k.ring.Len())
	}
	if dev.ctl[1] != 17 {
		t.Errorf("limit %d after consuming 1, want 17", dev.ctl[1])
	}
	// Still inside the torn timeout: nothing more decided.
	k.drainAt(dev, t0.Add(999*time.Millisecond), false, d)
	if k.pos != 1 || k.torn != 0 {
		t.Fatalf("decided before the torn timeout: pos %d torn %d", k.pos, k.torn)
	}
	// The last word lands: emitted after all.
	dev.write(0, p1, testPayload(2), 6, 0)
	k.drainAt(dev, t0.Add(999*time.Millisecond), false, d)
	if k.pos != 3 || k.ring.Len() != 3 || k.torn != 0 {
		t.Fatalf("slow write not emitted: pos %d ring %d torn %d", k.pos, k.ring.Len(), k.torn)
	}

	// 3: partly written past the timeout -> torn.
	p, _ = dev.reserve(0)
	dev.write(0, p, testPayload(4), 1, 0)
	k.drainAt(dev, t0.Add(2*time.Second), false, d)
	k.drainAt(dev, t0.Add(4*time.Second), false, d)
	if k.pos != 4 || k.torn != 1 || d[stageTorn] != 1 {
		t.Fatalf("torn: pos %d torn %d %v", k.pos, k.torn, d)
	}

	// Fill to the limit (4+16 = 20), then 5 more: holes.
	for k.head < 25 {
		p, hole := dev.reserve(0)
		if hole != (p >= 20) {
			t.Fatalf("position %d: hole=%v with limit 20", p, hole)
		}
		if !hole {
			dev.write(0, p, testPayload(p), 6, 0)
		}
		k.head = dev.ctl[0]
	}
	k.drainAt(dev, t0.Add(5*time.Second), false, d)
	if k.pos != 25 || k.bufferFull != 5 || k.ring.Pushed() != 19 || k.ring.Refused() != 0 {
		t.Fatalf("after overflow: pos %d bufferFull %d pushed %d refused %d", k.pos, k.bufferFull, k.ring.Pushed(), k.ring.Refused())
	}
	st := k.stats()
	if st.Matched != 25 || st.Records+st.Dropped != 25 || st.Pending != 0 {
		t.Fatalf("stats %+v", st)
	}
}

// A hole whose stamp a later hole overwrote (its producer saw an older
// limit) is counted buffer_full, not torn, after the consumer has waited one
// hole grace, in the same pass, for the whole run of such positions.
func TestStaleLimitHolesCountedBufferFull(t *testing.T) {
	m := testModule(testHook("h", 16, config.DropNewest))
	dev := newFakeDevice(0, m)
	k := consumerFor(t, dev, 64)
	d := drops{}
	dev.WriteLimit(0, 0) // producers see a stale limit of 0: everything is a hole
	for range 40 {
		if _, hole := dev.reserve(0); !hole {
			t.Fatal("not a hole")
		}
	}
	// Positions 0..7 lost their stamps to 32..39; 8..23 to 24..39.
	t0 := time.Now()
	k.drainAt(dev, t0, false, d)
	if waited := time.Since(t0); waited < 100*time.Millisecond || waited > 2*time.Second {
		t.Errorf("waited %v for late writers, want one hole grace (100ms) for the run", waited)
	}
	if k.pos != 40 || k.bufferFull != 40 || k.torn != 0 || d[stageBufferFull] != 40 {
		t.Fatalf("after the grace: pos %d bufferFull %d torn %d", k.pos, k.bufferFull, k.torn)
	}
}

// A writer that read an older limit and lands during the hole grace is
// emitted, not dropped.
func TestLateWriterDuringHoleGraceIsEmitted(t *testing.T) {
	m := testModule(testHook("h", 16, config.DropNewest))
	dev := newFakeDevice(0, m)
	k := consumerFor(t, dev, 64)
	d := drops{}
	p, hole := dev.reserve(0) // position 0: a data writer, not yet written
	if hole {
		t.Fatal("position 0 is a hole")
	}
	dev.WriteLimit(0, 0)
	for range 16 { // 1..16 burn; 16 replaces position 0's hole cell
		dev.reserve(0)
	}
	done := make(chan struct{})
	go func() {
		time.Sleep(10 * time.Millisecond)
		dev.write(0, p, testPayload(p), 6, 0)
		close(done)
	}()
	// The grace is far longer than the writer's 10 ms, so that a loaded
	// machine scheduling the writer late cannot fail the test; a writer that
	// lands returns the wait at once.
	k.drainGrace(dev, time.Now(), false, d, 5*time.Second)
	<-done
	if k.ring.Pushed() != 1 || k.bufferFull != 16 || k.pos != 17 {
		t.Fatalf("pushed %d bufferFull %d pos %d, want the late record emitted and 16 holes", k.ring.Pushed(), k.bufferFull, k.pos)
	}
}

// Holes are decided a run at a time (holeRun), but a position that has
// words of its own is a record on its way, even with a later hole's stamp in
// its hole cell and its run's hole grace over: it waits for its writer (or
// the torn timeout) and is emitted, and the holes behind it follow.
func TestHoleRunLeavesPartlyWrittenRecords(t *testing.T) {
	m := testModule(testHook("h", 16, config.DropNewest))
	dev := newFakeDevice(0, m)
	k := consumerFor(t, dev, 64)
	d := drops{}
	p, hole := dev.reserve(0)
	if hole {
		t.Fatal("position 0 is a hole")
	}
	dev.write(0, p, testPayload(p), 2, 0) // 2 of its 6 words
	dev.WriteLimit(0, 0)
	for range 16 { // holes 1..16; 16 replaces position 0's hole cell
		if _, hole := dev.reserve(0); !hole {
			t.Fatal("not a hole")
		}
	}
	t0 := time.Now()
	k.drainAt(dev, t0, false, d) // position 0 starts its wait
	k.drainAt(dev, t0.Add(time.Hour/4096), false, d)
	if k.pos != 0 || k.bufferFull != 0 || k.torn != 0 {
		t.Fatalf("with its grace over, the partly written position 0: pos %d bufferFull %d torn %d, want it still waiting", k.pos, k.bufferFull, k.torn)
	}
	dev.write(0, p, testPayload(p), 6, 0)
	k.drainAt(dev, t0.Add(time.Hour/2048), false, d)
	if k.ring.Pushed() != 1 || k.pos != 17 || k.bufferFull != 16 || d[stageBufferFull] != 16 {
		t.Fatalf("pushed %d pos %d bufferFull %d (noted %d), want the record emitted and 16 holes", k.ring.Pushed(), k.pos, k.bufferFull, d[stageBufferFull])
	}
}

// A pass without the head (drainLight) decides the complete records and the
// holes that the stamps alone decide, past the head read last, and stops at
// a position still being written; a pass with the head then goes on from
// there, and every position is decided once.
func TestLightPassDecidesByStampsAlone(t *testing.T) {
	m := testModule(testHook("h", 16, config.DropNewest))
	dev := newFakeDevice(0, m)
	k := consumerFor(t, dev, 64)
	d := drops{}
	ps := &pass{now: time.Now(), tornTimeout: time.Second, holeGrace: time.Hour, drop: d.note, wake: func() {}}
	for range 5 { // records 0..4
		p, _ := dev.reserve(0)
		dev.write(0, p, testPayload(p), 6, 0)
	}
	slow, _ := dev.reserve(0) // position 5: 3 of its 6 words
	dev.write(0, slow, testPayload(slow), 3, 0)
	p, _ := dev.reserve(0) // 6: complete, behind the slow one
	dev.write(0, p, testPayload(p), 6, 0)
	if r := k.drainLight(ps); r.decided != 5 || k.pos != 5 || k.head != 5 || k.ring.Pushed() != 5 {
		t.Fatalf("light pass: decided %d, pos %d, head %d, pushed %d; want the 5 complete records before the slow one", r.decided, k.pos, k.head, k.ring.Pushed())
	}
	if r := k.drainLight(ps); r.advanced {
		t.Fatalf("light pass past a position being written: decided %d", r.decided)
	}
	dev.write(0, slow, testPayload(slow), 6, 0)
	dev.WriteLimit(0, 0) // stale: 7..9 are holes
	for range 3 {
		if _, hole := dev.reserve(0); !hole {
			t.Fatal("not a hole")
		}
	}
	if r := k.drainLight(ps); r.decided != 5 || k.pos != 10 || k.ring.Pushed() != 7 || k.bufferFull != 3 || d[stageBufferFull] != 3 {
		t.Fatalf("light pass: decided %d, pos %d, pushed %d, bufferFull %d; want 5, 6 and 3 holes", r.decided, k.pos, k.ring.Pushed(), k.bufferFull)
	}
	k.drainAt(dev, time.Now(), true, d)
	if st := k.stats(); st.Matched != 10 || st.Records != 7 || st.Dropped != 3 || st.Pending != 0 {
		t.Fatalf("after a final pass: %+v", st)
	}
}

func TestOverwrittenAndLapped(t *testing.T) {
	m := testModule(testHook("h", 16, config.OverwriteOldest))
	dev := newFakeDevice(0, m)
	k := consumerFor(t, dev, 64)
	d := drops{}
	// 50 complete records into 16 slots: [0, 34) lapped, [34, 50) emitted.
	for range 50 {
		p, _ := dev.reserve(0)
		dev.write(0, p, testPayload(p), 6, 0)
	}
	k.drainAt(dev, time.Now(), false, d)
	if k.overwritten != 34 || k.ring.Pushed() != 16 || k.pos != 50 {
		t.Fatalf("lapped: overwritten %d pushed %d pos %d", k.overwritten, k.ring.Pushed(), k.pos)
	}
	// Position 50 reserved; 66 (same slot) overwrites part of it before
	// the consumer reads 50: one newer word is enough.
	p50, _ := dev.reserve(0)
	dev.write(0, p50, testPayload(50), 6, 0)
	for range 15 {
		dev.reserve(0) // 51..65 reserved, not written yet
	}
	p66, _ := dev.reserve(0)
	dev.write(0, p66, testPayload(66), 1, 0)
	k.drainAt(dev, time.Now(), false, d)
	if k.overwritten != 35 || k.pos != 51 {
		t.Fatalf("overwritten %d pos %d", k.overwritten, k.pos)
	}
	k.drainAt(dev, time.Now(), true, d)
	if k.torn != 16 || k.pos != 67 || d[stageOverwritten] != 35 {
		t.Fatalf("final: torn %d pos %d drops %v", k.torn, k.pos, d)
	}
}

// TestFullRingCountsCompleteRecordsRingFull: complete records past the Go
// ring's room are decided one at a time (decide, from the staged words),
// each ring_full in the same pass, never left pending or torn; the ones
// the ring took are the first positions, in order. (A staged load of the
// wrong slot takes them for records still being written.)
func TestFullRingCountsCompleteRecordsRingFull(t *testing.T) {
	m := testModule(testHook("h", 16, config.OverwriteOldest))
	dev := newFakeDevice(0, m)
	k := consumerFor(t, dev, 4)
	d := drops{}
	for range 10 {
		p, _ := dev.reserve(0)
		dev.write(0, p, testPayload(p), 6, 0)
	}
	r := k.drainAt(dev, time.Now(), false, d)
	if k.pos != 10 || r.pending || k.ring.Pushed() != 4 || k.ring.Refused() != 6 || d[stageRingFull] != 6 || k.torn != 0 {
		t.Fatalf("pos %d pending %v pushed %d refused %d drops %v torn %d; want pos 10, 4 pushed, 6 ring_full",
			k.pos, r.pending, k.ring.Pushed(), k.ring.Refused(), d, k.torn)
	}
	st := k.stats()
	if st.Matched != 10 || st.Records != 4 || st.DroppedRingFull != 6 || st.Dropped != 6 || st.Pending != 0 {
		t.Fatalf("stats %+v", st)
	}
	seqs, payloads := k.ring.Peek(4)
	stride := len(payloads) / max(len(seqs), 1)
	for i := range uint64(4) {
		if int(i) >= len(seqs) || seqs[i] != i {
			t.Fatalf("ring positions %v, want 0 1 2 3", seqs)
		}
		want := testPayload(i)
		if got := payloads[int(i)*stride : int(i)*stride+len(want)]; !bytes.Equal(got, want) {
			t.Fatalf("ring record %d: payload %x, want position %d's %x", i, got, i, want)
		}
	}
}

func TestNewerStampArithmetic(t *testing.T) {
	for _, c := range []struct {
		x, s uint32
		n    uint64
		want bool
	}{
		{17, 1, 16, true},
		{1, 1, 16, false},
		{1, 17, 16, false},         // older
		{0, 5, 16, false},          // never written
		{3, 0xfffffff3, 16, true},  // across the 2^32 wrap
		{0xfffffff3, 3, 16, false}, // older across the wrap
		{18, 1, 16, false},         // not a position of this slot
		{1<<31 + 1, 1, 16, false},  // half the stamp space away: older
		{0, 0xfffffff0, 16, false}, // never written, not a later position's 0
	} {
		if got := newer(c.x, c.s, c.n); got != c.want {
			t.Errorf("newer(%#x, %#x, %d) = %v", c.x, c.s, c.n, got)
		}
	}
}

func TestRingSPSC(t *testing.T) {
	r := NewRing(5, 8)
	if r.Cap() != 8 {
		t.Fatalf("cap %d", r.Cap())
	}
	const total = 200000
	var finished atomic.Bool
	var refused uint64
	go func() {
		b := make([]byte, 8)
		for i := uint64(0); i < total; i++ {
			for j := range b {
				b[j] = byte(i >> (8 * j))
			}
			if !r.Push(i, b) {
				refused++
			}
		}
		finished.Store(true)
	}()
	var got, last uint64
	first := true
	for {
		fin := finished.Load()
		n := r.Consume(3, func(seq uint64, p []byte) {
			for j := range p {
				if p[j] != byte(seq>>(8*j)) {
					t.Errorf("seq %d: payload %v", seq, p)
				}
			}
			if !first && seq <= last {
				t.Errorf("seq %d after %d", seq, last)
			}
			first, last = false, seq
			got++
		})
		if n == 0 && fin {
			break
		}
	}
	if got+refused != total || r.Pushed() != got || r.Refused() != refused || refused == 0 {
		t.Fatalf("got %d + refused %d != %d (pushed %d)", got, refused, total, r.Pushed())
	}
}

func TestDecodeAggregates(t *testing.T) {
	i64 := &config.Expr{Type: config.I64}
	f64 := &config.Expr{Type: config.F64}
	aggs := []*hookgen.AggInfo{
		{Hook: "h", Agg: &config.Aggregate{Name: "n", Kind: config.AggCount}, Keys: 1, RowWords: 1},
		{Hook: "h", Agg: &config.Aggregate{Name: "s", Kind: config.AggSum, Value: f64, By: []string{"channelId"}}, Keys: config.MaxChannels + 1, RowWords: 2},
		{Hook: "h", Agg: &config.Aggregate{Name: "lo", Kind: config.AggMin, Value: i64, By: []string{"funcId", "channelId"}}, Keys: (config.MaxFuncIDs + 1) * (config.MaxChannels + 1), RowWords: 2},
		{Hook: "h", Agg: &config.Aggregate{Name: "hi", Kind: config.AggMax, Value: i64}, Keys: 1, RowWords: 2},
		{Hook: "h", Agg: &config.Aggregate{Name: "lat", Kind: config.AggHistogram, Value: i64, By: []string{"funcId"},
			Buckets: config.Buckets{Bounds: []uint64{10, 100}}}, Keys: config.MaxFuncIDs + 1, RowWords: 2 + 3},
		{Hook: "h", Agg: &config.Aggregate{Name: "log", Kind: config.AggHistogram, Value: i64, Buckets: config.Buckets{Log2: true}}, Keys: 1, RowWords: 2 + config.Log2Buckets},
	}
	off := 0
	for _, a := range aggs {
		a.Offset = off
		off += a.Keys * a.RowWords
	}
	w := make([]uint64, off)
	enc := func(v int64) uint64 { return uint64(v) ^ 1<<63 }
	w[aggs[0].Offset] = 7
	s := aggs[1].Offset + aggs[1].Row(0, 200)*2 // channel 200 -> overflow key
	w[s], w[s+1] = 2, 0x4004000000000000        // 2.5
	lo := aggs[2].Offset + aggs[2].Row(5, 3)*2
	w[lo], w[lo+1] = 3, ^enc(-42)
	w[aggs[3].Offset], w[aggs[3].Offset+1] = 1, enc(-7)
	hi := aggs[4].Offset + aggs[4].Row(9, 0)*5
	copy(w[hi:], []uint64{4, 1234, 1, 2, 1})
	lg := aggs[5].Offset
	w[lg], w[lg+1], w[lg+2], w[lg+2+3] = 2, 5, 1, 1 // values 0 and 5 (bucket 3: [4,8))

	snap := func(i int) []rowView {
		rows, err := decodeAgg(aggs[i], w, testFuncName)
		if err != nil {
			t.Fatal(err)
		}
		var out []rowView
		for _, r := range rows {
			out = append(out, rowView{r.FuncID, r.FuncName, r.ChannelID, r.Count, r.SumInt, r.SumFloat, r.Min, r.Max, len(r.Buckets)})
		}
		return out
	}
	check := func(i int, want ...rowView) {
		t.Helper()
		got := snap(i)
		if len(got) != len(want) {
			t.Fatalf("%s: rows %+v, want %+v", aggs[i].Agg.Name, got, want)
		}
		for j := range got {
			if got[j] != want[j] {
				t.Errorf("%s row %d: %+v, want %+v", aggs[i].Agg.Name, j, got[j], want[j])
			}
		}
	}
	check(0, rowView{-1, "", -1, 7, 0, 0, 0, 0, 0})
	check(1, rowView{-1, "", -2, 2, 0, 2.5, 0, 0, 0})
	check(2, rowView{5, "F5", 3, 3, 0, 0, -42, 0, 0})
	check(3, rowView{-1, "", -1, 1, 0, 0, 0, -7, 0})
	check(4, rowView{9, "F9", -1, 4, 1234, 0, 0, 0, 3})
	check(5, rowView{-1, "", -1, 2, 5, 0, 0, 0, config.Log2Buckets})

	rows, _ := decodeAgg(aggs[4], w, nil)
	b := rows[0].Buckets
	if *b[0].LE != 10 || *b[1].LE != 100 || b[2].LE != nil || b[0].Count != 1 || b[1].Count != 3 || b[2].Count != 4 {
		t.Errorf("explicit buckets not cumulative with their bounds: %+v", b)
	}
	rows, _ = decodeAgg(aggs[5], w, nil)
	b = rows[0].Buckets
	if *b[0].LE != 0 || *b[3].LE != 7 || b[2].Count != 1 || b[3].Count != 2 || b[64].LE != nil || b[64].Count != 2 || *b[63].LE != 1<<63-1 {
		t.Errorf("log2 buckets: b0 %+v b3 %+v b63 %+v b64 %+v", b[0], b[3], b[63], b[64])
	}
	if _, err := decodeAgg(&hookgen.AggInfo{Hook: "h", Agg: aggs[0].Agg, Offset: off, Keys: 1, RowWords: 1}, w, nil); err == nil {
		t.Errorf("cells outside the aggregate words were accepted")
	}
}

type rowView struct {
	f        int
	name     string
	c        int
	count    uint64
	sumI     int64
	sumF     float64
	min, max int64
	buckets  int
}

// Issue 13 item 7: under sustained overload, drop_newest stopped recording
// for good after the buffer first filled (records stayed at exactly the
// slot count). The consumer published limit = pos + N with pos the head it
// read at the start of the pass, and decided every hole one position at a
// time; producers that keep reserving while the pass runs (cheap: a hole is
// one store) carry the head more than N past that before the limit lands,
// so every window [pos, pos+N) was already all holes and no record was ever
// written again, while overwrite_oldest skips lapped positions at once.
//
// The model, deterministic: in every pass, at the first drop it decides
// (while the pass is running) the producers reserve 3N positions under the
// limit they see; between passes they reserve N/2 more. Every pass after the
// overload began must capture records.
func TestDropNewestKeepsRecordingUnderOverload(t *testing.T) {
	const n = 64
	m := testModule(testHook("h", n, config.DropNewest))
	dev := newFakeDevice(0, m)
	k := consumerFor(t, dev, 1<<20)
	k.readHead = func() (uint64, error) { return atomic.LoadUint64(&dev.ctl[0]), nil }
	produce := func(count int) {
		for range count {
			if p, hole := dev.reserve(0); !hole {
				dev.write(0, p, testPayload(p), 6, 0)
			}
		}
	}
	d := drops{}
	now := time.Now()
	produce(2 * n) // the buffer fills: N records, N holes
	var perPass []uint64
	for range 20 {
		during := true
		ps := &pass{now: now, tornTimeout: time.Second, holeGrace: time.Nanosecond, drop: func(c *consumer, s stage, x uint64) {
			d.note(c, s, x)
			if during {
				during = false
				produce(3 * n) // the producers run while the consumer works
			}
		}}
		before := k.ring.Pushed()
		k.drain(atomic.LoadUint64(&dev.ctl[0]), ps)
		perPass = append(perPass, k.ring.Pushed()-before)
		produce(n / 2)
	}
	for i, r := range perPass[1:] {
		if r == 0 {
			t.Fatalf("pass %d captured no record (records per pass %v): drop_newest stopped recording", i+2, perPass)
		}
	}
	st := k.stats()
	if st.Records+st.Dropped+st.Pending != st.Matched || st.DroppedBufferFull != d[stageBufferFull] {
		t.Errorf("accounting: %+v, drops %v", st, d)
	}
}

// A run of complete records is emitted straight into the ring as far as the
// ring has room; the records that do not fit are ring_full drops, and a
// partly written position ends the run without being emitted.
func TestRunStopsAtRingRoomAndAtPartialRecords(t *testing.T) {
	m := testModule(testHook("h", 64, config.OverwriteOldest))
	dev := newFakeDevice(0, m)
	k := consumerFor(t, dev, 4)
	d := drops{}
	t0 := time.Now()
	for i := uint64(0); i < 6; i++ {
		p, _ := dev.reserve(0)
		dev.write(0, p, testPayload(100+i), 6, 0)
	}
	k.drainAt(dev, t0, false, d)
	if k.pos != 6 || k.ring.Pushed() != 4 || d[stageRingFull] != 2 {
		t.Fatalf("pos %d, pushed %d, drops %v; want 6, 4 and 2 ring_full", k.pos, k.ring.Pushed(), d)
	}
	var seqs []uint64
	k.ring.Consume(8, func(seq uint64, payload []byte) {
		seqs = append(seqs, seq)
		if want := testPayload(100 + seq); string(payload[:len(want)]) != string(want) {
			t.Errorf("position %d: payload %x, want %x", seq, payload[:len(want)], want)
		}
	})
	if len(seqs) != 4 || seqs[0] != 0 || seqs[3] != 3 {
		t.Fatalf("ring held positions %v, want 0..3", seqs)
	}

	// 6 complete, 7 partly written, 8 complete: the run ends at 7.
	for i, words := range []int{6, 3, 6} {
		p, _ := dev.reserve(0)
		dev.write(0, p, testPayload(200+uint64(i)), words, 0)
	}
	r := k.drainAt(dev, t0, false, d)
	if k.pos != 7 || !r.pending || k.ring.Len() != 1 {
		t.Fatalf("pos %d, %+v, ring %d: want the run to end at the partial position 7", k.pos, r, k.ring.Len())
	}
}

// Consume (a test helper) hands up to max waiting records, oldest first, to fn and then
// frees them. payload is only valid during the call. It returns the number
// of records consumed.
func (r *Ring) Consume(max int, fn func(seq uint64, payload []byte)) int {
	done := 0
	for done < max {
		seqs, payloads := r.Peek(max - done)
		if len(seqs) == 0 {
			break
		}
		for j, seq := range seqs {
			fn(seq, payloads[j*r.stride:(j+1)*r.stride])
		}
		r.Release(len(seqs))
		done += len(seqs)
	}
	return done
}

// A long run (emitRun) is copied stretch by stretch, each wrapping neither
// the slot buffer nor the ring, and published only up to its first record
// that is not complete, wherever that record lies: in the first stretch, a
// later one, or none; the run wraps the slot buffer and the ring at
// different places. Every record published is its own position's, in order,
// and the rest are emitted once complete.
func TestLongRunPublishesUpToTheFirstPartialRecord(t *testing.T) {
	const slots, ringCap, run = 1 << 15, 1 << 16, 20000
	for _, partial := range []uint64{0, 17, 999, 1000, 2999, 3000, 12345, run - 1, run} {
		m := testModule(testHook("h", slots, config.OverwriteOldest))
		dev := newFakeDevice(0, m)
		k := consumerFor(t, dev, ringCap)
		d := drops{}
		t0 := time.Now()
		// Start both the buffer and the ring part way, so the run wraps
		// each, at different positions.
		const start = slots - 1000
		atomic.StoreUint64(&dev.ctl[0], start)
		k.pos, k.head = start, start
		k.ring.head.Store(ringCap - 3000)
		k.ring.tail.Store(ringCap - 3000)
		for i := uint64(0); i < run; i++ {
			p, _ := dev.reserve(0)
			words := 6
			if i == partial {
				words = 2
			}
			dev.write(0, p, testPayload(p), words, 0)
		}
		k.drainAt(dev, t0, false, d)
		if k.pos != start+partial || k.ring.Len() != int(partial) {
			t.Fatalf("partial record at %d: pos %d, %d in the ring; want the run to end there", partial, k.pos-start, k.ring.Len())
		}
		if partial < run {
			dev.write(0, start+partial, testPayload(start+partial), 6, 0)
			k.drainAt(dev, t0, false, d)
		}
		want := uint64(start)
		k.ring.Consume(run, func(seq uint64, payload []byte) {
			if seq != want {
				t.Fatalf("partial record at %d: position %d where %d was due", partial, seq, want)
			}
			if p := testPayload(seq); string(payload[:len(p)]) != string(p) {
				t.Fatalf("position %d: payload %x, want %x", seq, payload[:len(p)], p)
			}
			want++
		})
		if want != start+run || len(d) != 0 {
			t.Fatalf("partial record at %d: emitted up to %d of %d, drops %v", partial, want-start, run, d)
		}
	}
}

// Position 2^32-1's stamp is 0, what a hole cell that never held a hole
// holds: a pass that reads no head (drainLight) must stop there until a
// producer has written it, not decide it as its own hole, before it is even
// reserved. Its record, once written, is emitted.
func TestZeroStampIsNotAHole(t *testing.T) {
	const slots = 64
	const start = 1<<32 - slots
	m := testModule(testHook("h", slots, config.DropNewest))
	dev := newFakeDevice(0, m)
	dev.ctl[0] = start
	k, err := newConsumer(m.Hooks[0], 0, dev.Slots(0), dev.Holes(0), start, 1024)
	if err != nil {
		t.Fatal(err)
	}
	k.setLimit = func(l uint64) error { return dev.WriteLimit(0, l) }
	k.publishLimit()
	// The lap before, as every slot holds long before 2^32; no hole ever.
	for p := uint64(start - slots); p < start; p++ {
		dev.write(0, p, testPayload(p), 6, 0)
	}
	for range slots - 1 {
		p, _ := dev.reserve(0)
		dev.write(0, p, testPayload(p), 6, 0)
	}
	d := drops{}
	ps := &pass{now: time.Now(), tornTimeout: time.Second, holeGrace: time.Millisecond, drop: d.note}
	k.drainLight(ps)
	if k.pos != 1<<32-1 || len(d) != 0 {
		t.Fatalf("a pass without the head decided up to %d (drops %v); want it to stop at 2^32-1, not reserved yet", k.pos, d)
	}
	p, _ := dev.reserve(0)
	dev.write(0, p, testPayload(p), 6, 0)
	k.drainAt(dev, time.Now(), false, d)
	if k.pos != 1<<32 || k.ring.Len() != slots || len(d) != 0 {
		t.Fatalf("after its record: pos %d, %d in the ring, drops %v; want all %d emitted", k.pos, k.ring.Len(), d, slots)
	}
}
