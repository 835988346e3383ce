package rings

import (
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/ncclhooks/ncclhooks/internal/config"
	"github.com/ncclhooks/ncclhooks/internal/hookgen"
)

// A Work module's hook, drained through the Drainer: producers in NCCL's
// order write every (communicator, channel) region at once, communicators
// are made while the drainer runs, some records are left partial or never
// written, and the small regions are lapped. Every position up to each
// region's last written one is decided once: records + drops = matched =
// those positions, in every dump's arithmetic and at the end, and every
// record delivered is one a region held complete. The overflow policy is
// the drain's: overwrite_oldest counts a lapped position overwritten;
// drop_newest counts it buffer_full and, with a full ring (a slow sink),
// drops the newer complete records at the ring rather than leave them in
// their regions.
func TestWorkPositionsDrainedExactly(t *testing.T) {
	for _, tt := range []struct {
		name     string
		overflow config.Overflow
		ringCap  int
		delay    time.Duration
	}{
		{"overwrite_oldest", config.OverwriteOldest, 0, 0},
		{"drop_newest", config.DropNewest, 0, 0},
		{"drop_newest, a slow sink", config.DropNewest, 64, 2 * time.Millisecond},
	} {
		t.Run(tt.name, func(t *testing.T) { drainWorkExactly(t, tt.overflow, tt.ringCap, tt.delay) })
	}
}

func drainWorkExactly(t *testing.T, overflow config.Overflow, ringCap int, delay time.Duration) {
	const regionSlots, comms, channels, items = 16, 3, 8, 1500
	info := testHook("work", config.RegionChannels*regionSlots, overflow)
	info.Work, info.RegionSlots = true, regionSlots
	m := testModule(info)
	m.Work = true
	dev := newFakeDevice(0, m)
	if _, err := dev.CommCtx(0); err != nil {
		t.Fatal(err)
	}
	sink := newRecordingSink(t)
	sink.delay = delay
	d := NewDrainer(Options{Sink: sink, FuncName: testFuncName, RingCapacity: ringCap,
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
		t.Errorf("matched %d, records %d + dropped %d; the regions' positions up to their last written: %d (%+v)", st.Matched, st.Records, st.Dropped, positions, st)
	}
	lapped := st.DroppedOverwritten
	if overflow == config.DropNewest {
		lapped = st.DroppedBufferFull
		if st.DroppedOverwritten != 0 {
			t.Errorf("drop_newest: %d counted overwritten, want buffer_full (%+v)", st.DroppedOverwritten, st)
		}
	} else if st.DroppedBufferFull != 0 || st.DroppedRingFull != 0 {
		t.Errorf("drop reasons overwrite_oldest's regions cannot have: %+v", st)
	}
	if lapped == 0 {
		t.Errorf("nothing lapped: the test never lapped a region (%+v)", st)
	}
	if (delay > 0) != (st.DroppedRingFull > 0) {
		t.Errorf("ring_full %d with a sink delay of %v (%+v)", st.DroppedRingFull, delay, st)
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

// A communicator retired (finalized) while others run: its regions are
// settled at the next pass, a record left partial counted torn, and then
// no longer polled, while the others' are drained on; records + drops =
// matched holds throughout, for a hook whose records are delivered and one
// the drain aggregates.
func TestRetiredCommunicatorSettledAndLeft(t *testing.T) {
	for _, drained := range []bool{false, true} {
		t.Run(fmt.Sprintf("drained=%v", drained), func(t *testing.T) {
			const regionSlots = 64
			var m *hookgen.Module
			if drained {
				m = drainProfile(t, regionSlots)
			} else {
				info := testHook("lat", config.RegionChannels*regionSlots, config.OverwriteOldest)
				info.Work, info.RegionSlots = true, regionSlots
				m = testModule(info)
				m.Work = true
			}
			dev := newFakeDevice(0, m)
			sink := newRecordingSink(t)
			sink.drained = map[string]bool{"lat": drained}
			d := NewDrainer(Options{Sink: sink, FuncName: testFuncName, PollInterval: time.Hour, DumpInterval: time.Hour})
			if err := d.Add(dev, m); err != nil {
				t.Fatal(err)
			}
			c := m.Hooks[0].Layout.Chunks
			producer := func(comm, ch int) *regionProducer {
				if _, err := dev.CommCtx(comm); err != nil {
					t.Fatal(err)
				}
				w := regionSlots * c
				g := &regionProducer{slots: dev.Regions(comm, 0)[ch*w : (ch+1)*w], n: regionSlots, c: c,
					rng: rand.New(rand.NewPCG(uint64(comm), uint64(ch))), complete: map[uint64]bool{}}
				if drained {
					g.payload = drainPayload(comm, ch)
				}
				return g
			}
			old, alive := producer(0, 3), producer(1, 3)
			old.run(10, 0, 0, func() {})
			old.write(2*11, c-1) // a START its finalize left partial
			alive.run(10, 0, 0, func() {})
			d.Flush(false)
			d.Retire(0, 0)
			d.Retire(5, 0) // a device not added: nothing
			d.Flush(false)
			k := (*d.devices.Load())[0].consumers[0]
			for i := range regionChannels {
				if k.regions[i] != nil {
					t.Fatalf("communicator 0's region %d still polled after its retirement", i)
				}
				if k.regions[regionChannels+i] == nil {
					t.Fatalf("communicator 1's region %d retired with communicator 0", i)
				}
			}
			if st := k.stats(); st.DroppedTorn != 1 || st.Records != 40 || st.Matched != 41 {
				t.Errorf("after the retirement: %+v; want 40 records and communicator 0's partial START torn", st)
			}
			// Written after its finalize (a caller that broke the
			// contract): never drained. The live one goes on.
			old.write(2*12, c)
			for wc := uint64(11); wc <= 15; wc++ {
				alive.write(2*wc, c)
				alive.write(2*wc+1, c)
			}
			d.Close()
			st := checkDumps(t, sink)[key{"lat", 0}]
			if st.Records != 50 || st.Matched != 51 || st.DroppedTorn != 1 {
				t.Errorf("final: %+v; want 50 records (20 + 30), 1 torn", st)
			}
			if drained {
				var n uint64
				for _, r := range finalAggs(t, sink)["n"] {
					n += r.Count
				}
				if n != 25 { // 10 work items of communicator 0, 15 of communicator 1
					t.Errorf("%d work items counted, want 25", n)
				}
			}
		})
	}
}
