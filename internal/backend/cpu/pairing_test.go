package cpu_test

import (
	"strings"
	"sync"
	"testing"

	"github.com/ncclhooks/ncclhooks/internal/backend/cpu/internal/cdrive"
	"github.com/ncclhooks/ncclhooks/internal/config"
	"github.com/ncclhooks/ncclhooks/internal/hookgen"
	"github.com/ncclhooks/ncclhooks/internal/hookgen/hooktest"
)

// Two communicators use the same channel ids and work counters at the same
// time, one thread per (communicator, channel): every STOP still pairs with
// its own START and gets its exact duration.
func TestDurationPairingConcurrent(t *testing.T) {
	const comms, channels, items = 2, 4, 300
	stops := hooktest.Hook("stops", "funcId", "workCounter", "duration", "paired")
	stops.When = hooktest.MustExpr(t, "phase == STOP")
	stops.Buffer.Slots = 4096
	starts := hooktest.Hook("starts", "duration", "paired")
	starts.When = hooktest.MustExpr(t, "phase == START")
	starts.Buffer.Slots = 4096
	starts.Aggregates = []*config.Aggregate{{Name: "d", Kind: config.AggSum, Value: hooktest.MustExpr(t, "duration")}}
	m, d := load(t, hooktest.Profile(stops, starts), 0)

	// The duration of a work item, known from the thread (funcId) and item.
	dur := func(funcID uint32, wc uint64) uint64 { return 1000*uint64(funcID) + wc*3 + 1 }
	streams := make([][][]cdrive.Event, comms)
	for comm := range comms {
		for ch := range channels {
			funcID := uint32(comm*channels + ch)
			var s []cdrive.Event
			ts := uint64(1 << 40)
			for wc := range uint64(items) {
				s = append(s, cdrive.Event{Timestamp: ts, WorkCounter: wc, FuncID: funcID, ChannelID: uint8(ch), Phase: cdrive.Start})
				ts += dur(funcID, wc)
				s = append(s, cdrive.Event{Timestamp: ts, WorkCounter: wc, FuncID: funcID, ChannelID: uint8(ch), Phase: cdrive.Stop})
				ts += 17
			}
			streams[comm] = append(streams[comm], s)
		}
	}
	// Each communicator through its own context, all at once.
	var wg sync.WaitGroup
	for comm := range comms {
		ctx, err := d.CommCtx(comm)
		if err != nil {
			t.Fatal(err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			cdrive.Run(d.Entry(), ctx, streams[comm])
		}()
	}
	wg.Wait()

	ctl := readCtl(t, m, d)
	if ctl[0] != comms*channels*items || ctl[1] != comms*channels*items {
		t.Fatalf("heads = %d, %d; want %d each", ctl[0], ctl[1], comms*channels*items)
	}
	seen := map[[2]uint64]bool{}
	for pos := range ctl[0] {
		v := unsigned(record(t, d, m.Hooks[0], pos))
		funcID, wc, duration, paired := uint32(v[0]), v[1], v[2], v[3]
		if paired != 1 || duration != dur(funcID, wc) {
			t.Fatalf("STOP of func %d item %d: duration %d paired %d, want %d paired 1", funcID, wc, duration, paired, dur(funcID, wc))
		}
		seen[[2]uint64{uint64(funcID), wc}] = true
	}
	if len(seen) != comms*channels*items {
		t.Fatalf("%d distinct work items paired, want %d", len(seen), comms*channels*items)
	}
	for pos := range ctl[1] {
		if v := unsigned(record(t, d, m.Hooks[1], pos)); v[0] != 0 || v[1] != 0 {
			t.Fatalf("START record %d: duration %d paired %d, want 0 and false", pos, v[0], v[1])
		}
	}
	if agg := readAgg(t, m, d); agg[0] != comms*channels*items || agg[1] != 0 {
		t.Fatalf("sum of duration at START = %v, want count %d and sum 0", agg[:2], comms*channels*items)
	}
}

// A STOP without its START, a STOP on another channel, and a second STOP do
// not pair.
func TestDurationUnpaired(t *testing.T) {
	h := hooktest.Hook("stops", "workCounter", "duration", "paired")
	h.When = hooktest.MustExpr(t, "phase == STOP")
	m, d := load(t, hooktest.Profile(h), 0)
	ev := func(wc uint64, ch, phase uint8, ts uint64) cdrive.Event {
		return cdrive.Event{Timestamp: ts, WorkCounter: wc, ChannelID: ch, Phase: phase}
	}
	cdrive.Run(d.Entry(), d.Ctx(), [][]cdrive.Event{{
		ev(5, 0, cdrive.Stop, 100),  // never started
		ev(6, 1, cdrive.Start, 100), // started on channel 1 ...
		ev(6, 2, cdrive.Stop, 150),  // ... stopped on channel 2
		ev(7, 0, cdrive.Start, 200),
		ev(7, 0, cdrive.Stop, 260), // pairs: 60
		ev(7, 0, cdrive.Stop, 300), // a second STOP
	}})
	want := [][]uint64{{5, 0, 0}, {6, 0, 0}, {7, 60, 1}, {7, 0, 0}}
	for pos, w := range want {
		got := unsigned(record(t, d, m.Hooks[0], uint64(pos)))
		for i := range w {
			if got[i] != w[i] {
				t.Fatalf("STOP %d = %v, want %v", pos, got, w)
			}
		}
	}
}

// A work item's STOP pairs with its START whichever thread (multiprocessor,
// warp slot) runs it: a preempted block may resume elsewhere. And a whole
// batch of 64 work items started before the first stops pairs every item.
func TestDurationPairingFollowsTheWorkItem(t *testing.T) {
	h := hooktest.Hook("stops", "workCounter", "duration", "paired")
	h.When = hooktest.MustExpr(t, "phase == STOP")
	h.Buffer.Slots = 256
	m, d := load(t, hooktest.Profile(h), 0)
	const batch = 64
	var starts, stops []cdrive.Event
	for wc := uint64(1); wc <= batch; wc++ {
		starts = append(starts, cdrive.Event{Timestamp: 1000 + wc, WorkCounter: wc, ChannelID: 3, Phase: cdrive.Start})
		stops = append(stops, cdrive.Event{Timestamp: 5000 + 2*wc, WorkCounter: wc, ChannelID: 3, Phase: cdrive.Stop})
	}
	cdrive.Run(d.Entry(), d.Ctx(), [][]cdrive.Event{starts}) // one thread starts the batch,
	cdrive.Run(d.Entry(), d.Ctx(), [][]cdrive.Event{stops})  // another stops it
	for pos := range uint64(batch) {
		v := unsigned(record(t, d, m.Hooks[0], pos))
		wc := v[0]
		if want := 4000 + wc; v[2] != 1 || v[1] != want {
			t.Fatalf("STOP of item %d: duration %d paired %d, want %d paired 1", wc, v[1], v[2], want)
		}
	}
}

// Each communicator pairs in its own context block: work items of two
// communicators with the same channel and work counter, interleaved (they
// shared a table entry when the table was the device's, and 64 apart lost
// their pairings), each pair with their own START.
func TestDurationPairingKeepsCommunicatorsApart(t *testing.T) {
	h := hooktest.Hook("stops", "comm", "duration", "paired")
	h.When = hooktest.MustExpr(t, "phase == STOP")
	m, d := load(t, hooktest.Profile(h), 0)
	ctx0, err := d.CommCtx(0)
	if err != nil {
		t.Fatal(err)
	}
	ctx64, err := d.CommCtx(64)
	if err != nil {
		t.Fatal(err)
	}
	ev := func(phase uint8, ts uint64) cdrive.Event {
		return cdrive.Event{Timestamp: ts, WorkCounter: 5, ChannelID: 1, Phase: phase}
	}
	cdrive.Call(d.Entry(), ctx0, ev(cdrive.Start, 100))
	cdrive.Call(d.Entry(), ctx64, ev(cdrive.Start, 1000))
	cdrive.Call(d.Entry(), ctx0, ev(cdrive.Stop, 150))
	cdrive.Call(d.Entry(), ctx64, ev(cdrive.Stop, 1070))
	want := [][]uint64{{0, 50, 1}, {64, 70, 1}}
	for pos, w := range want {
		if got := unsigned(record(t, d, m.Hooks[0], uint64(pos))); got[0] != w[0] || got[1] != w[1] || got[2] != w[2] {
			t.Fatalf("STOP %d: comm, duration, paired = %v, want %v", pos, got, w)
		}
	}
}

// Every communicator of a recording profile records through the one set of
// control words, which its hooks find by masking devCtx to the arena: the
// positions of all communicators are one sequence. Past the arena's room a
// communicator gets no context block rather than one the mask would miss.
func TestCommunicatorsShareTheControlWords(t *testing.T) {
	h := hooktest.Hook("all", "comm", "workCounter")
	h.Buffer.Slots = 1024
	m, d := load(t, hooktest.Profile(h), 0)
	n := m.ArenaComms()
	if n < hookgen.MinArenaComms {
		t.Fatalf("the arena holds %d blocks, want at least %d", n, hookgen.MinArenaComms)
	}
	for comm := range 3 {
		ctx, err := d.CommCtx(comm * (n - 1) / 2) // the first, one in the middle and the last
		if err != nil {
			t.Fatal(err)
		}
		cdrive.Call(d.Entry(), ctx, cdrive.Event{WorkCounter: uint64(10 + comm), Phase: cdrive.Start})
	}
	for pos, want := range [][]uint64{{0, 10}, {uint64((n - 1) / 2), 11}, {uint64(n - 1), 12}} {
		if got := unsigned(record(t, d, m.Hooks[0], uint64(pos))); got[0] != want[0] || got[1] != want[1] {
			t.Errorf("position %d: comm, workCounter = %v, want %v", pos, got, want)
		}
	}
	if _, err := d.CommCtx(n); err == nil || !strings.Contains(err.Error(), "arena") {
		t.Errorf("communicator %d past the arena's %d: %v, want an error naming the arena", n, n, err)
	}
}
