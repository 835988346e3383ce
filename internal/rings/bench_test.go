package rings

import (
	"fmt"
	"testing"
	"time"

	"github.com/ncclhooks/ncclhooks/internal/config"
	"github.com/ncclhooks/ncclhooks/internal/hookgen"
	"github.com/ncclhooks/ncclhooks/internal/sinks"
)

type countingSink struct{ n int }

func (c *countingSink) Records(r []sinks.Record) error { c.n += len(r); return nil }
func (c *countingSink) Dump(*sinks.Dump) error         { return nil }
func (c *countingSink) Close() error                   { return nil }

// BenchmarkDrain measures the whole host path for one record (an op): heads
// read, stamps checked, payload copied into the ring, decoded, handed to a
// sink. The device buffer is refilled with the timer stopped.
func BenchmarkDrain(b *testing.B) {
	const slots = 1 << 16
	m := testModule(testHook("all", slots, config.DropNewest))
	dev := newFakeDevice(0, m)
	sink := &countingSink{}
	d := NewDrainer(Options{Sink: sink, FuncName: testFuncName, RingCapacity: slots,
		PollInterval: time.Hour, DumpInterval: time.Hour})
	defer d.Close()
	if err := d.Add(dev, m); err != nil {
		b.Fatal(err)
	}
	payloads := make([][]byte, 64)
	for i := range payloads {
		payloads[i] = testPayload(uint64(i))
	}
	b.ResetTimer()
	for left := b.N; left > 0; {
		n := min(left, slots)
		b.StopTimer()
		for i := 0; i < n; i++ {
			pos, _ := dev.reserve(0)
			dev.write(0, pos, payloads[i%len(payloads)], 6, 0)
		}
		b.StartTimer()
		d.Flush(false)
		left -= n
	}
	b.StopTimer()
	if sink.n != b.N {
		b.Fatalf("delivered %d of %d", sink.n, b.N)
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "records/s")
}

// BenchmarkDrainPaced measures what the poller's pacing keeps (on three free
// cores: the producer spins, the drain's two goroutines run beside it): one producer
// writes records at a fixed rate into a 4096-slot drop_newest buffer (at 4 M
// records/s it fills in 1 ms, about what one poll interval sleeps), and the
// drain runs as in the plugin. An op is one record offered; "dropped%" is the
// share lost, all of it at the buffer (the ring is larger than the run).
func BenchmarkDrainPaced(b *testing.B) {
	for _, rate := range []float64{1e6, 4e6, 1.6e7} {
		b.Run(fmt.Sprintf("rate=%.0e", rate), func(b *testing.B) {
			const slots = 4096
			m := testModule(testHook("all", slots, config.DropNewest))
			dev := newFakeDevice(0, m)
			sink := &countingSink{}
			d := NewDrainer(Options{Sink: sink, FuncName: testFuncName, RingCapacity: 1 << 20, DumpInterval: time.Hour})
			if err := d.Add(dev, m); err != nil {
				b.Fatal(err)
			}
			payload := testPayload(1)
			every := time.Duration(float64(time.Second) / rate)
			b.ResetTimer()
			start := time.Now()
			for i := 0; i < b.N; i++ {
				for time.Since(start) < time.Duration(i)*every {
				}
				if pos, hole := dev.reserve(0); !hole {
					dev.write(0, pos, payload, 6, 0)
				}
			}
			b.StopTimer()
			st := d.Close().Total()
			if st.Matched != uint64(b.N) || st.Records+st.Dropped != st.Matched {
				b.Fatalf("matched %d, records %d, dropped %d of %d offered", st.Matched, st.Records, st.Dropped, b.N)
			}
			b.ReportMetric(100*float64(st.Dropped)/float64(b.N), "dropped%")
		})
	}
}

// BenchmarkEmitRun measures the poller's common case alone (an op is one
// record): a run of complete records read from the slot buffer, stamps
// checked, payloads copied into the ring and published. "warm": one 65536-slot
// buffer, again and again; "cold": 16 of them in turn (48 MiB), so that most
// slots come from memory, as records the device has just written do.
func BenchmarkEmitRun(b *testing.B) {
	for _, bufs := range []int{1, 16} {
		name := map[int]string{1: "warm", 16: "cold"}[bufs]
		b.Run(name, func(b *testing.B) {
			const slots = 1 << 16
			m := testModule(testHook("all", slots, config.OverwriteOldest))
			var ks []*consumer
			for i := 0; i < bufs; i++ {
				dev := newFakeDevice(0, m)
				for p := uint64(0); p < slots; p++ {
					pos, _ := dev.reserve(0)
					dev.write(0, pos, testPayload(p), 6, 0)
				}
				k, err := newConsumer(m.Hooks[0], 0, dev.slots[0], dev.holes[0], 0, slots)
				if err != nil {
					b.Fatal(err)
				}
				ks = append(ks, k)
			}
			b.ResetTimer()
			for done, i := 0, 0; done < b.N; i++ {
				k := ks[i%bufs]
				k.pos = 0
				k.ring.tail.Store(k.ring.head.Load()) // empty: the ring's records are not wanted
				n := k.emitRun(uint64(min(slots, b.N-done)))
				if n == 0 {
					b.Fatal("no records emitted")
				}
				done += int(n)
			}
		})
	}
}

// BenchmarkDrainWork is BenchmarkDrain for a hook with work positions: 4
// communicators x 64 channel regions of 1024 slots, each region refilled
// with the timer stopped in NCCL's order (batches of 4 work items: their
// STARTs, then their STOPs), then drained (an op is one record). "test" is
// the rings tests' layout; "every-event" examples/every-event.yaml's, whose
// slots leave the work counter out (4 words), and "every-event-whole" the
// same record with every chunk stored (6 words), as before that.
func BenchmarkDrainWork(b *testing.B) {
	const regionSlots = 1024
	p, err := config.Load("../../examples/every-event.yaml")
	if err != nil {
		b.Fatal(err)
	}
	p.Hooks[0].Buffer.Slots = config.RegionChannels * regionSlots
	m, err := hookgen.Generate(p)
	if err != nil {
		b.Fatal(err)
	}
	whole := *m.Hooks[0]
	whole.Layout.Implied = nil
	test := testHook("work", config.RegionChannels*regionSlots, config.OverwriteOldest)
	test.Work, test.RegionSlots = true, regionSlots
	for _, c := range []struct {
		name string
		info *hookgen.HookInfo
	}{{"test", test}, {"every-event", m.Hooks[0]}, {"every-event-whole", &whole}} {
		b.Run(c.name, func(b *testing.B) { drainWorkBench(b, c.info) })
	}
}

func drainWorkBench(b *testing.B, info *hookgen.HookInfo) {
	const regionSlots, comms, batch = 1024, 4, 4
	m := testModule(info)
	m.Work = true
	dev := newFakeDevice(0, m)
	for c := range comms {
		dev.CommCtx(c)
	}
	sink := &countingSink{}
	d := NewDrainer(Options{Sink: sink, FuncName: testFuncName, RingCapacity: 1 << 16,
		PollInterval: time.Hour, DumpInterval: time.Hour})
	defer d.Close()
	if err := d.Add(dev, m); err != nil {
		b.Fatal(err)
	}
	c := info.Layout.SlotWords()
	w := regionSlots * c
	var regions [][]uint64
	for comm := range comms {
		for ch := range config.RegionChannels {
			regions = append(regions, dev.Regions(comm, 0)[ch*w:(ch+1)*w])
		}
	}
	wc := uint64(1)
	b.ResetTimer()
	for left := b.N; left > 0; {
		b.StopTimer()
		// Each region gets the same positions: regionSlots of them.
		n := 0
		for k := 0; k < regionSlots/2; k += batch {
			for phase := uint64(0); phase < 2; phase++ {
				for i := uint64(0); i < batch; i++ {
					p := 2*(wc+uint64(k)+i) + phase
					st := uint64(uint32(p+1)) << 32
					for _, r := range regions {
						base := int(p%regionSlots) * c
						for j := range c {
							r[base+j] = st | uint64(j)
						}
					}
					n += len(regions)
				}
			}
		}
		wc += regionSlots / 2
		b.StartTimer()
		d.Flush(false)
		left -= n
	}
	b.StopTimer()
	if sink.n < b.N {
		b.Fatalf("delivered %d of %d", sink.n, b.N)
	}
	b.ReportMetric(float64(sink.n)/b.Elapsed().Seconds(), "records/s")
}

// BenchmarkDrainAggregates is BenchmarkDrainWork for a hook the drain
// aggregates (drainProfile's three aggregates): the cursor pairs each work
// item's records and adds its duration to each; one record an op.
func BenchmarkDrainAggregates(b *testing.B) {
	const regionSlots, comms = 1024, 4
	m := drainProfile(b, regionSlots)
	dev := newFakeDevice(0, m)
	for c := range comms {
		dev.CommCtx(c)
	}
	d := NewDrainer(Options{Sink: &countingSink{}, PollInterval: time.Hour, DumpInterval: time.Hour})
	defer d.Close()
	if err := d.Add(dev, m); err != nil {
		b.Fatal(err)
	}
	c := hookgen.DrainChunks
	w := regionSlots * c
	var regions [][]uint64
	for comm := range comms {
		for ch := range config.RegionChannels {
			regions = append(regions, dev.Regions(comm, 0)[ch*w:(ch+1)*w])
		}
	}
	k := (*d.devices.Load())[0].consumers[0]
	wc := uint64(1)
	b.ResetTimer()
	for left := b.N; left > 0; {
		b.StopTimer()
		for i := uint64(0); i < regionSlots/2; i++ {
			for phase := uint64(0); phase < 2; phase++ {
				p := 2*(wc+i) + phase
				st := uint64(uint32(p+1)) << 32
				ts := (wc + i) * 1000 * (phase + 1)
				for _, r := range regions {
					base := int(p%regionSlots) * c
					r[base] = st | uint64(uint32(ts))
					r[base+1] = st | uint64(uint32(ts>>32)) | uint64((wc+i)%7)<<hookgen.DrainFuncShift
				}
			}
		}
		wc += regionSlots / 2
		b.StartTimer()
		d.Flush(false)
		left -= regionSlots * len(regions)
	}
	b.StopTimer()
	if n := k.regionRecords(); n < uint64(b.N) {
		b.Fatalf("aggregated %d of %d", n, b.N)
	}
	b.ReportMetric(float64(k.regionRecords())/b.Elapsed().Seconds(), "records/s")
}
