package report

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// Aggregate snapshots of two devices in two files (ranks) merge per key; the
// latest snapshot of each wins; histogram quantiles are the bucket bounds
// that hold them.
func TestAggregatesMergeAcrossDevicesAndRanks(t *testing.T) {
	dir := t.TempDir()
	header := `{"type":"header","format":1,"profile":"latency","host":"h","pid":%d,"backend":"gpu","start_unix_ns":1}` + "\n"
	snap := func(dev int, count, b1, b2 int) string {
		return `{"type":"aggregate","hook":"latency","device":` + itoa(dev) + `,"name":"d","kind":"histogram","by":["funcId"],"final":true,"rows":[` +
			`{"funcId":3,"func":"AllReduce_x","count":` + itoa(count) + `,"sum":` + itoa(10*count) + `,"buckets":[{"le":7,"count":` + itoa(b1) + `},{"le":15,"count":` + itoa(b2) + `},{"le":"+Inf","count":` + itoa(count) + `}]}]}` + "\n"
	}
	for rank := 0; rank < 2; rank++ {
		body := fmt.Sprintf(header, rank) +
			snap(0, 1, 1, 1) + // an earlier snapshot, replaced by the next one
			snap(0, 10, 5, 9) + snap(1, 10, 5, 10)
		if err := os.WriteFile(filepath.Join(dir, "r"+itoa(rank)+".jsonl"), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	rep, err := Load([]string{dir}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Aggregates) != 1 || len(rep.Aggregates[0].Rows) != 1 {
		t.Fatalf("aggregates %+v", rep.Aggregates)
	}
	r := rep.Aggregates[0].Rows[0]
	// 40 values: 20 <= 7, 38 <= 15, 40 in all.
	if r.Func != "AllReduce_x" || r.Count != 40 || r.Sum != 400 || r.P50 != "7" || r.P90 != "15" || r.P99 != "+Inf" {
		t.Fatalf("row %+v: want count 40, sum 400, p50 <= 7, p90 <= 15, p99 <= +Inf", r)
	}
}

func itoa(i int) string { return fmt.Sprintf("%d", i) }
