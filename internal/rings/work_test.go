package rings

import (
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/ncclhooks/ncclhooks/internal/config"
)

// A Work module's hook, drained through the Drainer: producers in NCCL's
// order write every (communicator, channel) region at once, communicators
// are made while the drainer runs, some records are left partial or never
// written, and the small regions are lapped. Every position up to each
// region's last written one is decided once: records + overwritten + torn
// = matched = those positions, in every dump's arithmetic and at the end,
// and every record delivered is one a region held complete.
func TestWorkPositionsDrainedExactly(t *testing.T) {
	const regionSlots, comms, channels, items = 16, 3, 8, 1500
	info := testHook("work", config.RegionChannels*regionSlots, config.OverwriteOldest)
	info.Work, info.RegionSlots = true, regionSlots
	m := testModule(info)
	m.Work = true
	dev := newFakeDevice(0, m)
	if _, err := dev.CommCtx(0); err != nil {
		t.Fatal(err)
	}
	sink := newRecordingSink(t)
	d := NewDrainer(Options{Sink: sink, FuncName: testFuncName,
		PollInterval: 100 * time.Microsecond, DumpInterval: 2 * time.Millisecond, TornTimeout: 20 * time.Millisecond})
	if err := d.Add(dev, m); err != nil {
		t.Fatal(err)
	}
	c := info.Layout.Chunks
	var wg sync.WaitGroup
	producers := make([]*regionProducer, 0, comms*channels)
	for comm := range comms {
		if _, err := dev.CommCtx(comm); err != nil { // made while the drainer runs
			t.Fatal(err)
		}
		w := regionSlots * c
		for ch := range channels {
			g := &regionProducer{slots: dev.Regions(comm, 0)[ch*w : (ch+1)*w], n: regionSlots, c: c,
				rng: rand.New(rand.NewPCG(uint64(comm), uint64(ch))), complete: map[uint64]bool{}}
			producers = append(producers, g)
			wg.Add(1)
			go func() {
				defer wg.Done()
				g.run(items, 0.002, 0.001, func() {
					if g.rng.IntN(4) == 0 {
						time.Sleep(time.Duration(g.rng.IntN(200)) * time.Microsecond)
					}
				})
			}()
		}
	}
	wg.Wait()
	d.Close()

	st := checkDumps(t, sink)[key{"work", 0}]
	var positions, incomplete uint64
	completeAt := map[uint64]int{} // position -> regions that hold it complete at some time
	for _, g := range producers {
		if g.last >= regionFirst {
			positions += g.last - regionFirst + 1
		}
		for p, ok := range g.complete {
			if p > g.last {
				continue
			}
			if ok {
				completeAt[p]++
			} else {
				incomplete++
			}
		}
	}
	if st.Matched != positions || st.Records+st.Dropped != positions {
		t.Errorf("matched %d, records %d + dropped %d; the regions' positions up to their last written: %d", st.Matched, st.Records, st.Dropped, positions)
	}
	if st.DroppedBufferFull != 0 || st.DroppedRingFull != 0 {
		t.Errorf("drop reasons work positions cannot have: %+v", st)
	}
	if st.DroppedOverwritten == 0 {
		t.Errorf("nothing overwritten: the test never lapped a region (%+v)", st)
	}
	if st.DroppedTorn > incomplete {
		t.Errorf("%d torn, only %d positions left partial or unwritten", st.DroppedTorn, incomplete)
	}
	emitted := map[uint64]int{}
	for _, r := range sink.records[key{"work", 0}] {
		emitted[r.Seq]++
		if emitted[r.Seq] > completeAt[r.Seq] {
			t.Fatalf("position %d delivered %d times, complete in %d regions", r.Seq, emitted[r.Seq], completeAt[r.Seq])
		}
		want := regionPayload(r.Seq, c)
		if got := r.Values[0].U; got != uint64(want[0])|uint64(want[1])<<32 {
			t.Fatalf("position %d: first field %#x, want %#x", r.Seq, got, uint64(want[0])|uint64(want[1])<<32)
		}
	}
}
