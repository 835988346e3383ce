package sinks

import (
	"testing"

	"github.com/ncclhooks/ncclhooks/internal/config"
	"github.com/ncclhooks/ncclhooks/internal/hookgen"
)

// BenchmarkJSONLRecords is the JSON lines sink's cost per all-events record
// (five fields and the function name), written to a file, plain and
// compressed; bytes/record is what reaches the file.
func BenchmarkJSONLRecords(b *testing.B) {
	for _, c := range []string{"none", "zstd", "gzip"} {
		b.Run(c, func(b *testing.B) { benchmarkJSONLRecords(b, c) })
	}
}

// benchRecords are the benchmark's batch: all-events records of one run.
func benchRecords() []Record {
	l := hookgen.Layout{}
	for _, f := range []struct {
		name string
		t    config.Type
	}{{"timestamp", config.U64}, {"workCounter", config.U64}, {"funcId", config.U32}, {"channelId", config.U8}, {"phase", config.U8}} {
		l.Fields = append(l.Fields, hookgen.FieldLayout{Name: f.name, Source: f.name, Type: f.t, Offset: l.Bytes})
		l.Bytes += f.t.Bytes()
	}
	h := &hookgen.HookInfo{Name: "all", Layout: l}
	const batch = 1024
	recs := make([]Record, batch)
	for i := range recs {
		recs[i] = Record{Hook: h, Device: 0, Seq: uint64(i), FuncName: "AllReduce_Sum_f32_RING_LL",
			Values: []hookgen.Value{{Type: config.U64, U: 1796013248705606042 + uint64(i)}, {Type: config.U64, U: uint64(i)},
				{Type: config.U32, U: 3}, {Type: config.U8, U: 7}, {Type: config.U8, U: uint64(i & 1)}}}
	}
	return recs
}

func benchmarkJSONLRecords(b *testing.B, compress string) {
	j, err := OpenJSONL(b.TempDir(), Header{Profile: "bench", Host: "h", PID: 1}, JSONLOptions{Compress: compress})
	if err != nil {
		b.Fatal(err)
	}
	defer j.Close()
	recs := benchRecords()
	batch := len(recs)
	b.ResetTimer()
	for i := 0; i < b.N; i += batch {
		if err := j.Records(recs); err != nil {
			b.Fatal(err)
		}
	}
	if err := j.Close(); err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "records/s")
	b.ReportMetric(float64(j.size)/float64(b.N), "bytes/record")
}

// BenchmarkRecordLine is the formatting alone of BenchmarkJSONLRecords'
// lines, into a buffer reused every 1 MiB: no write(2), whose cost varies
// with the machine's load and its storage.
func BenchmarkRecordLine(b *testing.B) {
	recs := benchRecords()
	j := &JSONL{hooks: map[hookDevice]*recordKeys{}}
	k := j.keys(recs[0].Hook, recs[0].Device)
	var buf []byte
	for i := 0; b.Loop(); i++ {
		buf = k.appendRecord(buf, &recs[i%len(recs)])
		if len(buf) >= flushAt {
			buf = buf[:0]
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "records/s")
}
