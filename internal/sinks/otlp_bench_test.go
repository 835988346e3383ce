package sinks

import (
	"testing"

	"github.com/ncclhooks/ncclhooks/internal/config"
	"github.com/ncclhooks/ncclhooks/internal/hookgen"
)

// BenchmarkOTLPRequest is what the OTLP export costs a dump on the drain's
// goroutine: building and marshalling the request of examples/latency.yaml's
// metrics (a log2 histogram and a max by function) for 8 devices, 40
// functions each with durations over 2^10..2^20 ns, plus the capture
// statistics; bytes/request is the body posted.
func BenchmarkOTLPRequest(b *testing.B) {
	p, err := NewProm("", PromOptions{Host: "node7", PID: 1, DumpStats: true})
	if err != nil {
		b.Fatal(err)
	}
	hist := &hookgen.AggInfo{Hook: "latency", Agg: &config.Aggregate{Name: "duration_ns", Kind: config.AggHistogram, By: []string{"funcId"},
		Value: &config.Expr{Source: "duration", Type: config.I64}, Buckets: config.Buckets{Log2: true}}}
	slow := &hookgen.AggInfo{Hook: "latency", Agg: &config.Aggregate{Name: "slowest_ns", Kind: config.AggMax, By: []string{"funcId"},
		Value: &config.Expr{Source: "duration", Type: config.I64}}}
	d := &Dump{}
	for dev := 0; dev < 8; dev++ {
		var hr, sr []AggRow
		for f := 0; f < 40; f++ {
			r := AggRow{FuncID: f, FuncName: "AllReduce_Sum_f32_RING_LL", ChannelID: -1, Count: 11 * 1000, SumInt: 1 << 30, Max: 1 << 20}
			var cum uint64
			for i := 0; i < config.Log2Buckets; i++ {
				if i >= 11 && i <= 21 {
					cum += 1000
				}
				bk := Bucket{Count: cum}
				if i < config.Log2Buckets-1 {
					le := uint64(1)<<i - 1
					bk.LE = &le
				}
				r.Buckets = append(r.Buckets, bk)
			}
			hr, sr = append(hr, r), append(sr, r)
		}
		d.Aggs = append(d.Aggs, AggSnapshot{Info: hist, Device: dev, Rows: hr}, AggSnapshot{Info: slow, Device: dev, Rows: sr})
		d.Stats = append(d.Stats, Stats{Hook: "latency", Device: dev, Matched: 1 << 20})
	}
	if err := p.Dump(d); err != nil {
		b.Fatal(err)
	}
	e := &otlpExport{}
	var n int
	b.ReportAllocs()
	for b.Loop() {
		p.mu.Lock()
		n = len(p.otlpRequest(e, 1))
		p.mu.Unlock()
	}
	b.ReportMetric(float64(n), "bytes/request")
}
