package rings

import (
	"fmt"
	"math/bits"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/ncclhooks/ncclhooks/internal/config"
	"github.com/ncclhooks/ncclhooks/internal/hookgen"
	"github.com/ncclhooks/ncclhooks/internal/sinks"
)

// drainProfile is a hook whose aggregates the drain computes, with regions
// of regionSlots slots.
func drainProfile(t testing.TB, regionSlots int) *hookgen.Module {
	t.Helper()
	src := fmt.Sprintf(`version: 1
name: drained
hooks:
  - name: lat
    aggregate:
      - {name: d, kind: histogram, value: duration, by: [funcId], buckets: log2}
      - {name: top, kind: max, value: duration, by: [funcId, comm]}
      - {name: n, kind: count, by: [channelId]}
    buffer: {slots: %d, overflow: overwrite_oldest, positions: work}
`, config.RegionChannels*regionSlots)
	return generateProfile(t, src)
}

// generateProfile parses a profile's source and generates its module.
func generateProfile(t testing.TB, src string) *hookgen.Module {
	t.Helper()
	p, err := config.Parse("p.yaml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	m, err := hookgen.Generate(p)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// workItem is what the producers of the test give work item wc of channel
// ch of communicator comm: its function (one id past the keys, which goes
// to the overflow row), START's timestamp (the first items cross 2^53,
// where the drain's timestamps wrap) and its duration.
func workItem(comm, ch int, wc uint64) (funcID uint32, start uint64, dur int64) {
	funcID = uint32(wc % 5)
	if wc%97 == 0 {
		funcID = 5000
	}
	start = 1<<hookgen.DrainTimeBits - 3000 + wc*1000 + uint64(ch)
	dur = int64(mix(wc^uint64(ch)<<20^uint64(comm)<<30) % 200000)
	return funcID, start, dur
}

// drainPayload is position p's drain record (hookgen.DrainRecord) for
// work item p/2 of (comm, ch).
func drainPayload(comm, ch int) func(p uint64) []uint32 {
	return func(p uint64) []uint32 {
		fn, ts, dur := workItem(comm, ch, p/2)
		if p&1 == 1 {
			ts += uint64(dur)
		}
		fn = min(fn, config.MaxFuncIDs)
		return []uint32{uint32(ts), uint32(ts>>32)&(1<<hookgen.DrainFuncShift-1) | fn<<hookgen.DrainFuncShift}
	}
}

// wantRow is an aggregate row as the test computes it.
type wantRow struct {
	count, sum uint64
	max        int64
	buckets    [config.Log2Buckets]uint64
}

// A hook the drain aggregates, through the Drainer: producers in NCCL's
// order write drain records into every (communicator, channel) region, some
// left partial or never written. Each work item whose START and STOP were
// both complete counts once, in its function's, communicator's and
// channel's rows, with STOP's timestamp less START's (across the 53-bit
// wrap); the rest are left out, their records counted torn. When the
// regions are lapped, every row holds at most that, and the work items
// left out are at most the records dropped.
func TestDrainAggregatesPairWorkItems(t *testing.T) {
	for _, tt := range []struct {
		name        string
		regionSlots int
		lapped      bool
	}{{"regions never lapped", 4096, false}, {"lapped regions", 16, true}} {
		t.Run(tt.name, func(t *testing.T) {
			const comms, channels, items = 2, 6, 1500
			m := drainProfile(t, tt.regionSlots)
			dev := newFakeDevice(0, m)
			sink := newRecordingSink(t)
			sink.drained = map[string]bool{"lat": true}
			d := NewDrainer(Options{Sink: sink, FuncName: testFuncName,
				PollInterval: 100 * time.Microsecond, DumpInterval: 2 * time.Millisecond})
			if err := d.Add(dev, m); err != nil {
				t.Fatal(err)
			}
			c := hookgen.DrainChunks
			var wg sync.WaitGroup
			type producer struct {
				*regionProducer
				comm, ch int
			}
			var producers []producer
			for comm := range comms {
				if _, err := dev.CommCtx(comm); err != nil {
					t.Fatal(err)
				}
				w := tt.regionSlots * c
				for ch := range channels {
					g := &regionProducer{slots: dev.Regions(comm, 0)[ch*w : (ch+1)*w], n: uint64(tt.regionSlots), c: c,
						rng: rand.New(rand.NewPCG(uint64(comm), uint64(ch))), complete: map[uint64]bool{}, payload: drainPayload(comm, ch)}
					producers = append(producers, producer{g, comm, ch})
					wg.Add(1)
					go func() {
						defer wg.Done()
						g.run(items, 0.01, 0.01, func() {
							if !tt.lapped || g.rng.IntN(4) == 0 {
								time.Sleep(time.Duration(g.rng.IntN(200)) * time.Microsecond)
							}
						})
					}()
				}
			}
			wg.Wait()
			d.Close()

			// What each aggregate holds for the work items both of whose
			// records were complete, by row.
			want := map[string]map[int]*wantRow{"d": {}, "top": {}, "n": {}}
			var positions uint64
			for _, g := range producers {
				positions += g.last - regionFirst + 1
				for wc := uint64(1); 2*wc+1 <= g.last; wc++ {
					if !g.complete[2*wc] || !g.complete[2*wc+1] {
						continue
					}
					fn, _, dur := workItem(g.comm, g.ch, wc)
					for _, a := range m.Aggs {
						row := a.Agg.RowOf(fn, uint32(g.ch), uint32(g.comm))
						r := want[a.Agg.Name][row]
						if r == nil {
							r = &wantRow{max: -1}
							want[a.Agg.Name][row] = r
						}
						r.count++
						r.sum += uint64(dur)
						r.max = max(r.max, dur)
						if dur > 0 {
							r.buckets[bits.Len64(uint64(dur))]++
						} else {
							r.buckets[0]++
						}
					}
				}
			}
			st := checkDumps(t, sink)[key{"lat", 0}]
			if st.Matched != positions || st.Records+st.Dropped != positions {
				t.Errorf("matched %d, records %d + dropped %d; positions written: %d", st.Matched, st.Records, st.Dropped, positions)
			}
			if len(sink.records[key{"lat", 0}]) != 0 {
				t.Errorf("%d records delivered from a hook the drain aggregates", len(sink.records[key{"lat", 0}]))
			}
			if tt.lapped != (st.DroppedOverwritten > 0) {
				t.Fatalf("overwritten %d: the regions were lapped: %v", st.DroppedOverwritten, tt.lapped)
			}
			final := finalAggs(t, sink)
			for _, a := range m.Aggs {
				got := map[int]sinks.AggRow{}
				for _, r := range final[a.Agg.Name] {
					got[rowOf(a.Agg, r)] = r
				}
				var left uint64
				for row, w := range want[a.Agg.Name] {
					g := got[row]
					delete(got, row)
					if !tt.lapped && g.Count != w.count {
						t.Errorf("%s row %d: count %d, want %d", a.Agg.Name, row, g.Count, w.count)
					}
					if g.Count > w.count {
						t.Errorf("%s row %d: count %d, more than the %d work items complete", a.Agg.Name, row, g.Count, w.count)
					}
					left += w.count - min(g.Count, w.count)
					switch a.Agg.Kind {
					case config.AggMax:
						if (!tt.lapped && g.Max != w.max) || g.Max > w.max {
							t.Errorf("%s row %d: max %d, want %d", a.Agg.Name, row, g.Max, w.max)
						}
					case config.AggHistogram:
						if (!tt.lapped && uint64(g.SumInt) != w.sum) || uint64(g.SumInt) > w.sum {
							t.Errorf("%s row %d: sum %d, want %d", a.Agg.Name, row, g.SumInt, w.sum)
						}
						var cum, prev uint64
						for i, b := range g.Buckets {
							cum += w.buckets[i]
							if (!tt.lapped && b.Count != cum) || b.Count-prev > w.buckets[i] {
								t.Errorf("%s row %d: bucket %d holds %d cumulative, want %d", a.Agg.Name, row, i, b.Count, cum)
								break
							}
							prev = b.Count
						}
					}
				}
				for row, r := range got {
					t.Errorf("%s: row %d (%+v) holds work items no producer completed", a.Agg.Name, row, r)
				}
				if left > st.Dropped {
					t.Errorf("%s: %d work items left out, more than the %d records dropped", a.Agg.Name, left, st.Dropped)
				}
				if tt.lapped && left == 0 {
					t.Errorf("%s: nothing left out of regions lapped %d times", a.Agg.Name, st.DroppedOverwritten)
				}
			}
		})
	}
}

// finalAggs is the final dump's aggregate rows by aggregate name.
func finalAggs(t *testing.T, sink *recordingSink) map[string][]sinks.AggRow {
	t.Helper()
	out := map[string][]sinks.AggRow{}
	for _, dp := range sink.dumps {
		if !dp.Final {
			continue
		}
		for _, a := range dp.Aggs {
			out[a.Info.Agg.Name] = a.Rows
		}
		return out
	}
	t.Fatal("no final dump")
	return nil
}

// rowOf is the row index of a decoded row.
func rowOf(a *config.Aggregate, r sinks.AggRow) int {
	key := func(v, bound int) uint32 {
		if v == keyOverflow {
			return uint32(bound)
		}
		return uint32(max(v, 0))
	}
	return a.RowOf(key(r.FuncID, config.MaxFuncIDs), key(r.ChannelID, config.MaxChannels), key(r.Comm, config.MaxCommKeys))
}

// A pass that aggregates a drained hook's records wakes no deliverer: they
// go to its aggregates, and its ring stays empty.
func TestDrainAggregatesWakeNoDeliverer(t *testing.T) {
	m := drainProfile(t, 16)
	dev := newFakeDevice(0, m)
	// The poller waits an hour between passes: this test's pass decides.
	d := NewDrainer(Options{Sink: newRecordingSink(t), PollInterval: time.Hour, DumpInterval: time.Hour})
	if err := d.Add(dev, m); err != nil {
		t.Fatal(err)
	}
	if _, err := dev.CommCtx(0); err != nil {
		t.Fatal(err)
	}
	g := &regionProducer{slots: dev.Regions(0, 0)[:16*hookgen.DrainChunks], n: 16, c: hookgen.DrainChunks,
		rng: rand.New(rand.NewPCG(1, 2)), complete: map[uint64]bool{}, payload: drainPayload(0, 0)}
	g.run(4, 0, 0, func() {})
	k := (*d.devices.Load())[0].consumers[0]
	woken := 0
	d.passMu.Lock() // the poller's
	res := k.drainWork(&pass{wake: func() { woken++ }, drop: func(*consumer, stage, uint64) {}})
	d.passMu.Unlock()
	if res.decided != 8 || res.pushed || woken != 0 || k.ring.Pushed() != 0 {
		t.Errorf("pass decided %d, pushed %v, woke the deliverer %d times, ring %d records; want 8, false, 0, 0",
			res.decided, res.pushed, woken, k.ring.Pushed())
	}
	d.Close()
}
