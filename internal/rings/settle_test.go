package rings

import (
	"testing"
	"time"

	"github.com/ncclhooks/ncclhooks/internal/config"
)

// TestNewerStampBranch reaches the consumer's "newer stamp" decision without
// lapping: the head the pass was given is stale (read before a producer
// went on), so head - pos stays within the slots and lap decides nothing,
// yet position 0's slot already holds position 16's words. Position 0 is
// overwritten on the evidence of its words; 1..9 are emitted.
func TestNewerStampBranch(t *testing.T) {
	m := testModule(testHook("h", 16, config.OverwriteOldest))
	dev := newFakeDevice(0, m)
	k := consumerFor(t, dev, 64)
	d := drops{}
	for range 10 {
		p, _ := dev.reserve(0)
		dev.write(0, p, testPayload(p), 6, 0)
	}
	head := dev.ctl[0] // what the pass read: 10
	for range 7 {      // 10..16: 16 takes slot 0, first word only
		p, _ := dev.reserve(0)
		words := 6
		if p == 16 {
			words = 1
		}
		dev.write(0, p, testPayload(p), words, 0)
	}
	r := k.drain(head, &pass{now: time.Now(), tornTimeout: time.Hour, holeGrace: time.Hour, drop: d.note})
	if k.overwritten != 1 || d[stageOverwritten] != 1 || k.ring.Pushed() != 9 || k.pos != 10 || r.pending {
		t.Fatalf("overwritten %d (noted %d), pushed %d, pos %d, %+v; want 0 overwritten by its newer stamp, 1..9 emitted", k.overwritten, d[stageOverwritten], k.ring.Pushed(), k.pos, r)
	}
	if k.torn != 0 || k.bufferFull != 0 {
		t.Errorf("torn %d, buffer_full %d; want none", k.torn, k.bufferFull)
	}
	// The next pass, with the live head: slots 10..15 hold their records,
	// 16 is incomplete: it stays pending, not torn, before the torn timeout.
	r = k.drain(dev.ctl[0], &pass{now: time.Now(), tornTimeout: time.Hour, holeGrace: time.Hour, drop: d.note})
	if k.ring.Pushed() != 15 || k.pos != 16 || !r.pending || k.overwritten != 1 {
		t.Fatalf("second pass: pushed %d pos %d overwritten %d, %+v; want 10..15 emitted and 16 pending", k.ring.Pushed(), k.pos, k.overwritten, r)
	}
}

// TestSettle: Settle drains what was written, counts what is reserved and
// unwritten as torn, delivers every record before a final dump with nothing
// pending, and keeps the drainer going with its totals, so that a second
// cycle of communicators adds to them; after Close it returns Close's
// summary. No poller runs (PollInterval an hour): every pass is Settle's.
func TestSettle(t *testing.T) {
	m := testModule(testHook("h", 16, config.DropNewest))
	dev := newFakeDevice(0, m)
	sink := newRecordingSink(t)
	d := NewDrainer(Options{Sink: sink, FuncName: testFuncName, PollInterval: time.Hour, IdlePollInterval: time.Hour, DumpInterval: time.Hour})
	defer d.Close()
	if err := d.Add(dev, m); err != nil {
		t.Fatal(err)
	}
	write := func(n int) {
		for range n {
			if p, hole := dev.reserve(0); !hole {
				dev.write(0, p, testPayload(p), 6, 0)
			}
		}
	}
	write(5)
	dev.reserve(0) // position 5: reserved, never written
	st := d.Settle().Total()
	if st.Matched != 6 || st.Records != 5 || st.DroppedTorn != 1 || st.Dropped != 1 || st.Pending != 0 {
		t.Fatalf("first settle: %+v; want 6 matched, 5 records, 1 torn, nothing pending", st)
	}
	if n := len(sink.records[key{"h", 0}]); n != 5 {
		t.Fatalf("sink got %d records before the final dump, want 5", n)
	}
	if len(sink.dumps) != 1 || !sink.dumps[0].Final || sink.dumps[0].Stats[0].Pending != 0 {
		t.Fatalf("dumps %+v; want one final dump", sink.dumps)
	}

	// A later communicator runs the hooks again: 20 more events, 16 of
	// them fit below the limit Settle published (6 + 16), 4 are holes.
	write(20)
	st = d.Settle().Total()
	if st.Matched != 26 || st.Records != 21 || st.DroppedTorn != 1 || st.DroppedBufferFull != 4 || st.Pending != 0 {
		t.Fatalf("second settle: %+v; want cumulative 26 matched, 21 records, 1 torn, 4 buffer_full", st)
	}
	if len(sink.dumps) != 2 || !sink.dumps[1].Final || len(sink.records[key{"h", 0}]) != 21 {
		t.Fatalf("after the second settle: %d dumps, %d records", len(sink.dumps), len(sink.records[key{"h", 0}]))
	}
	for _, r := range sink.records[key{"h", 0}] {
		if err := checkRecord(r); err != nil {
			t.Error(err)
		}
	}
	if len(sink.bad) > 0 {
		t.Errorf("dumps disagree with the records before them: %v", sink.bad)
	}

	closed := d.Close().Total()
	if closed != st {
		t.Errorf("Close: %+v, want the settled totals %+v", closed, st)
	}
	write(3) // hooks must not run after Close; if they do, nothing more is drained
	if again := d.Settle().Total(); again != closed {
		t.Errorf("Settle after Close: %+v, want Close's %+v", again, closed)
	}
}
