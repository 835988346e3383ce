package report_test

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ncclhooks/ncclhooks/internal/report"
)

// Three ranks of one communicator on one GPU, one file each: rank 1 starts
// every collective 500 ns after the others, so their work items wait for it
// and its own are the shortest. By rank, the cross-rank skew names rank 1
// the straggler, though rank 0's p50 duration is the largest; a collective
// rank 2 has no record of is left out as partial, one whose ranks ran
// different functions as mismatched.
func TestCrossRankNamesTheLateRank(t *testing.T) {
	dir := t.TempDir()
	const n = 40
	for rank := range 3 {
		lines := []string{
			fmt.Sprintf(`{"type":"header","format":1,"profile":"all-events","profile_file":"p.yaml","host":"n","pid":%d,"backend":"gpu","start_unix_ns":1}`, 100+rank),
			`{"type":"device","device":0,"time_unix_ns":2,"name":"NVIDIA H200","uuid":"GPU-one"}`,
			`{"type":"clock","device":0,"model":"NVIDIA H200","host_unix_ns":5000,"device_ns":1000}`,
			fmt.Sprintf(`{"type":"comm","device":0,"comm":0,"comm_id":"0xc0","name":"world","rank":%d,"nranks":3,"nnodes":1}`, rank),
		}
		rec := func(wc, ts, phase int, fn string) string {
			return fmt.Sprintf(`{"type":"record","hook":"all","device":0,"seq":%d,"timestamp":%d,"workCounter":%d,"channelId":0,"phase":%d,"comm":0,"func":%q}`, 2*wc+phase, ts, wc, phase, fn)
		}
		for wc := 1; wc <= n+2; wc++ {
			fn := "AllReduce"
			if wc == n+1 && rank == 2 {
				continue // the partial one
			}
			if wc == n+2 && rank == 0 {
				fn = "AllGather" // the mismatched one
			}
			base := wc * 10000
			start := base + 10*rank // ranks 0, 2 early by a little
			if rank == 1 {
				start = base + 500
			}
			stop := base + 500 + 200 // everyone ends after the last START
			if rank == 0 {
				stop += 50 // rank 0 the slowest by duration
			}
			lines = append(lines, rec(wc, start, 0, fn), rec(wc, stop, 1, fn))
		}
		writeLines(t, filepath.Join(dir, fmt.Sprintf("r%d.jsonl", rank)), lines...)
	}
	rep, err := report.LoadBy([]string{dir}, report.Options{}, report.ByRank)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.CrossRank) != 1 {
		t.Fatalf("cross-rank %+v: want the one communicator", rep.CrossRank)
	}
	cr := rep.CrossRank[0]
	s := cr.All.Straggler
	if cr.CommID != "0xc0" || cr.All.Collectives != n || cr.Partial != 1 || cr.Mismatched != 1 || !strings.HasPrefix(cr.Clock, "exact: one GPU") {
		t.Errorf("cross-rank %+v: want %d collectives, one partial, one mismatched, one GPU's clock", cr, n)
	}
	if s == nil || s.Rank != 1 || s.Share != 1 || !s.StandsOut || s.MeanLate != 480 || !s.ShortestP50 || s.SlowestRank != 0 {
		t.Errorf("straggler %+v: want rank 1, last in all, 480 ns after rank 2, the shortest p50, rank 0 the slowest", s)
	}
	if cr.All.SkewP50 != 500 || cr.All.SkewMax != 500 {
		t.Errorf("skew %+v: want 500 ns", cr.All)
	}
	var out strings.Builder
	if err := rep.Write(&out, report.Table); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"straggler: rank 1 of comm 0xc0", "<- straggler", "its own work items are the shortest", "slowest rank by p50 duration (rank 0)", "1 collectives not seen on every rank"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, out.String())
		}
	}
}
