package harness

import (
	"testing"
	"time"
)

// The barrier between ranks, here three devices of one process (the same
// counters as three processes: shared memory either way): every rank's STOP
// of a work item comes after the last rank's START of it, with the same work
// counter and function on every rank; the planted straggler is the last to
// start (nearly) every item, by about its delay.
func TestCollectivesWaitForTheLastRank(t *testing.T) {
	const ranks, delay = 3, 5 * time.Millisecond
	cfg := Config{Devices: ranks, Ranks: 1, CommsPerDevice: 1, Channels: 2, Items: 12, Batch: 3, WorkFloats: 1, FuncIDs: []uint32{0, 1, 2}, Verify: true,
		Backend: "cpu", Straggler: 1, StragglerDelay: delay}
	cfg.Defaults()
	path, err := CreateBarrier(t.TempDir(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	bar, err := openBarrier(path, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer bar.close()
	var comms []*comm
	for d := range ranks {
		comms = append(comms, &comm{Comm: &Comm{Device: d}, rank: d, nranks: ranks})
	}
	logs, _, _, err := emitCPU(comms, cfg, 0, bar)
	if err != nil {
		t.Fatal(err)
	}
	type item struct {
		ch uint8
		wc uint64
	}
	starts := map[item][ranks]uint64{}
	funcs := map[item]uint32{}
	for d, evs := range logs {
		for _, e := range evs {
			k := item{e.ChannelID, e.WorkCounter}
			if e.Phase == 0 {
				s := starts[k]
				s[d] = e.Timestamp
				starts[k] = s
				if f, ok := funcs[k]; ok && f != e.FuncID {
					t.Errorf("channel %d item %d: function %d on rank %d, %d on another", k.ch, k.wc, e.FuncID, d, f)
				}
				funcs[k] = e.FuncID
			}
		}
	}
	if len(starts) != cfg.Channels*cfg.Items {
		t.Fatalf("%d items started, want %d on every rank", len(starts), cfg.Channels*cfg.Items)
	}
	for d, evs := range logs {
		for _, e := range evs {
			s := starts[item{e.ChannelID, e.WorkCounter}]
			last := max(s[0], s[1], s[2])
			if e.Phase == 1 && e.Timestamp < last {
				t.Errorf("rank %d channel %d item %d: STOP at %d, before the last rank's START at %d", d, e.ChannelID, e.WorkCounter, e.Timestamp, last)
			}
		}
	}
	// Late by at least half its delay, but where another rank lost the core
	// for as long (the first batch, on a loaded machine): most items, not all.
	late := 0
	for _, s := range starts {
		if s[1] >= max(s[0], s[2])+uint64(delay)/2 {
			late++
		}
	}
	if late < len(starts)*3/4 {
		t.Errorf("the straggler started late by half its delay in %d of %d items, want most", late, len(starts))
	}
	if err := checkRanks(Config{Devices: 1, Ranks: 4, Straggler: 4, StragglerDelay: time.Millisecond, Backend: "cpu"}); err == nil {
		t.Error("straggler rank 4 of 4 accepted")
	}
}
