package rings

import (
	"testing"
	"time"

	"github.com/ncclhooks/ncclhooks/internal/config"
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
