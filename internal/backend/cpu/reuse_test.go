package cpu_test

import (
	"testing"

	"github.com/ncclhooks/ncclhooks/internal/backend/cpu/internal/cdrive"
	"github.com/ncclhooks/ncclhooks/internal/config"
	"github.com/ncclhooks/ncclhooks/internal/hookgen/hooktest"
)

// A finalized communicator's block, released and taken by the next one
// (NewComm, ReleaseComm), through the compiled hooks: the new communicator's
// records name its own index, a START the old one left in the pairing table
// pairs with no STOP of the new one, the aggregates count every work item of
// every communicator (the released ones' folded into the device's totals),
// and the device has no more blocks than communicators alive at once.
func TestBlocksReusedByTheHooks(t *testing.T) {
	rec := hooktest.Hook("rec", "comm", "workCounter", "duration", "paired")
	rec.When = hooktest.MustExpr(t, "phase == STOP")
	rec.Buffer.Slots = 4096
	rec.Aggregates = []*config.Aggregate{
		{Name: "n", Kind: config.AggCount, By: []string{"comm"}},
		{Name: "d", Kind: config.AggSum, Value: hooktest.MustExpr(t, "duration")},
	}
	m, d := load(t, hooktest.Profile(rec), 0)
	const cycles, alive = 30, 2
	var pos, index uint64
	for cycle := range cycles {
		var slots []int
		for range alive {
			slot, ctx, err := d.NewComm(int(index))
			if err != nil {
				t.Fatal(err)
			}
			slots = append(slots, slot)
			// Work item 1 paired (duration 5), then a START the
			// communicator never stops: left in its pairing table.
			cdrive.Run(d.Entry(), ctx, [][]cdrive.Event{{
				{Timestamp: 100, WorkCounter: 1, Phase: cdrive.Start},
				{Timestamp: 105, WorkCounter: 1, Phase: cdrive.Stop},
				{Timestamp: 200, WorkCounter: 2, Phase: cdrive.Start},
			}})
			if cycle > 0 {
				// The previous occupant's START of work item 2 is gone.
				cdrive.Run(d.Entry(), ctx, [][]cdrive.Event{{{Timestamp: 900, WorkCounter: 3, Phase: cdrive.Stop}}})
			}
			index++
		}
		for _, slot := range slots {
			// A STOP of work item 2 after the release would find a
			// zeroed table: the next occupant's first STOP checks it.
			if err := d.ReleaseComm(slot); err != nil {
				t.Fatal(err)
			}
		}
		for _, slot := range slots {
			ctx, err := d.CommCtx(slot) // claims the free slot with index = slot: the fixed mapping
			if err != nil {
				t.Fatal(err)
			}
			cdrive.Run(d.Entry(), ctx, [][]cdrive.Event{{{Timestamp: 300, WorkCounter: 2, Phase: cdrive.Stop}}})
			if err := d.ReleaseComm(slot); err != nil {
				t.Fatal(err)
			}
		}
	}
	if d.Comms() != alive {
		t.Errorf("%d blocks for %d communicators, %d alive at once", d.Comms(), index, alive)
	}
	// Records: per NewComm'd communicator one paired STOP (item 1) and,
	// from the second cycle, an unpaired one (item 3); per CommCtx
	// claim one unpaired STOP of item 2: never paired with the START the
	// previous occupant left.
	ctl := readCtl(t, m, d)
	byComm := map[uint64][]uint64{}
	for ; pos < ctl[0]; pos++ {
		v := unsigned(record(t, d, m.Hooks[0], pos))
		comm, wc, dur, paired := v[0], v[1], v[2], v[3]
		if (wc == 1) != (paired == 1) || wc == 1 && dur != 5 {
			t.Fatalf("position %d: comm %d item %d duration %d paired %d", pos, comm, wc, dur, paired)
		}
		if wc != 2 {
			byComm[comm] = append(byComm[comm], wc)
		}
	}
	for c := range index {
		want := 2
		if c < alive {
			want = 1
		}
		if len(byComm[c]) != want {
			t.Errorf("communicator %d: records of items %v, want %d records (its index in every one)", c, byComm[c], want)
		}
	}
	agg := readAgg(t, m, d)
	n, sum := m.Aggs[0], m.Aggs[1]
	var count uint64
	for k := range config.MaxCommKeys + 1 {
		count += agg[n.Offset+k*n.RowWords]
	}
	stops := 2*index - alive + index // NewComm'd: 2 STOPs (1 in the first cycle); claims: 1 each
	if count != stops || agg[sum.Offset] != stops || agg[sum.Offset+1] != 5*index {
		t.Errorf("aggregates: %d counted by comm, sum %d of %d, want %d work items and a duration sum of %d", count, agg[sum.Offset+1], agg[sum.Offset], stops, 5*index)
	}
	if agg[n.Offset+1*n.RowWords] != 1+cycles { // index 1 (cycle 0): 1 STOP, and slot 1's claims (index 1) every cycle
		t.Errorf("by comm: communicator 1 counts %d, want %d", agg[n.Offset+1*n.RowWords], 1+cycles)
	}
}
