package report_test

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/ncclhooks/ncclhooks/internal/report"
	"github.com/ncclhooks/ncclhooks/internal/report/reporttest"
)

// Two processes, each on its GPU 0; the second GPU power capped and its
// work items 1.5x as long: by device, the GPUs are told apart by UUID, the
// capped one is the slowest of every function and carries its reason.
func TestReportByDeviceMarksTheSlowGPU(t *testing.T) {
	dir := t.TempDir()
	if _, err := reporttest.Write(filepath.Join(dir, "a.jsonl"), reporttest.Options{Seed: 1, PID: 10, Model: "NVIDIA H200", ClockEventReasons: 0x1}); err != nil {
		t.Fatal(err)
	}
	if _, err := reporttest.Write(filepath.Join(dir, "b.jsonl"), reporttest.Options{Seed: 2, PID: 11, Model: "NVIDIA H200", ClockEventReasons: 0x4, Scale: 1.5}); err != nil {
		t.Fatal(err)
	}
	rep, err := report.LoadBy([]string{dir}, report.Options{}, report.ByDevice)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Funcs) != len(reporttest.DefaultFuncs) {
		t.Fatalf("%d functions, want %d", len(rep.Funcs), len(reporttest.DefaultFuncs))
	}
	for _, f := range rep.Funcs {
		if len(f.Groups) != 2 {
			t.Fatalf("%s: groups %+v, want two GPUs", f.Func, f.Groups)
		}
		for _, g := range f.Groups {
			capped := strings.HasPrefix(g.Key, "GPU-0000000b")
			if !strings.HasPrefix(g.Key, "GPU-") || g.Slowest != capped || capped != slices.Equal(g.Slowdown, []string{"sw_power_cap"}) {
				t.Errorf("%s: group %+v: want the capped GPU (pid 11) slowest, with its reason", f.Func, g)
			}
			if !strings.Contains(g.Label, "NVIDIA H200") {
				t.Errorf("label %q does not name the model", g.Label)
			}
		}
		if f.SlowestVsMedian < 1.1 || f.SlowestVsMedian > 1.5 {
			t.Errorf("%s: slowest %.2fx the median of two, want about 1.2", f.Func, f.SlowestVsMedian)
		}
	}
	// Without comm lines no work item has a rank.
	byRank, err := report.LoadBy([]string{dir}, report.Options{}, report.ByRank)
	if err != nil {
		t.Fatal(err)
	}
	if len(byRank.Funcs) != 0 || byRank.Unattributed == 0 {
		t.Errorf("by rank without comm lines: %d functions, %d unattributed", len(byRank.Funcs), byRank.Unattributed)
	}
	if _, err := report.ParseBy("host"); err == nil {
		t.Error("--by host accepted")
	}
}

// writeLines writes a JSON lines file of the given lines.
func writeLines(t *testing.T, path string, lines ...string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
}

// Aggregates are per device: by device every process's GPU is a group; by
// rank a device with one communicator is its rank, and a device with two
// is left out and counted. The slowest group of a histogram is the one with
// the largest mean, of a max aggregate the largest maximum.
func TestReportByAggregates(t *testing.T) {
	dir := t.TempDir()
	header := func(pid int) string {
		return fmt.Sprintf(`{"type":"header","format":1,"profile":"latency","profile_file":"latency.yaml","host":"n","pid":%d,"backend":"gpu","start_unix_ns":1}`, pid)
	}
	agg := func(count, sum, max int) []string {
		return []string{
			fmt.Sprintf(`{"type":"aggregate","hook":"latency","device":0,"name":"duration_ns","kind":"histogram","by":["funcId"],"time_unix_ns":2,"final":true,"rows":[{"funcId":5,"func":"AllReduce","count":%d,"sum":%d,"buckets":[{"le":1024,"count":%d},{"le":"+Inf","count":%d}]}]}`, count, sum, count/2, count),
			fmt.Sprintf(`{"type":"aggregate","hook":"latency","device":0,"name":"slowest_ns","kind":"max","by":["funcId"],"time_unix_ns":2,"final":true,"rows":[{"funcId":5,"func":"AllReduce","count":%d,"max":%d}]}`, count, max),
		}
	}
	comm := func(idx, rank int) string {
		return fmt.Sprintf(`{"type":"comm","device":0,"comm":%d,"comm_id":"0x%x","name":"c","rank":%d,"nranks":2,"nnodes":1}`, idx, 0xc0+idx, rank)
	}
	dev := func(uuid string, reasons int) string {
		return fmt.Sprintf(`{"type":"device","device":0,"time_unix_ns":2,"name":"NVIDIA H200","uuid":"%s","clock_event_reasons":%d,"slowdown":%v}`, uuid, reasons, reasons&0x44 != 0)
	}
	writeLines(t, filepath.Join(dir, "a.jsonl"), append([]string{header(1), dev("GPU-a", 0), comm(0, 0)}, agg(10, 1000, 300)...)...)
	writeLines(t, filepath.Join(dir, "b.jsonl"), append([]string{header(2), dev("GPU-b", 0x40), comm(0, 1)}, agg(10, 3000, 900)...)...)
	// c's device has two communicators: its aggregates are by device only,
	// but for one keyed by comm.
	perComm := `{"type":"aggregate","hook":"latency","device":0,"name":"per_comm","kind":"count","by":["comm"],"time_unix_ns":2,"final":true,"rows":[{"comm":0,"count":4},{"comm":1,"count":6}]}`
	writeLines(t, filepath.Join(dir, "c.jsonl"), append([]string{header(3), dev("GPU-c", 0), comm(0, 0), comm(1, 0), perComm}, agg(10, 2000, 200)...)...)

	byDev, err := report.LoadBy([]string{dir}, report.Options{}, report.ByDevice)
	if err != nil {
		t.Fatal(err)
	}
	if len(byDev.Aggregates) != 3 || byDev.UnattributedAggs != 0 {
		t.Fatalf("by device: %+v", byDev)
	}
	for _, a := range byDev.Aggregates {
		if a.Name == "per_comm" {
			if len(a.Groups) != 1 || a.Groups[0].Key != "GPU-c" || a.Groups[0].Stat.Count != 10 {
				t.Errorf("per_comm by device: %+v: want GPU-c's 10", a.Groups)
			}
			continue
		}
		var keys, slowest []string
		for _, g := range a.Groups {
			keys = append(keys, g.Key)
			if g.Slowest {
				slowest = append(slowest, g.Key)
			}
		}
		if !slices.Equal(keys, []string{"GPU-a", "GPU-b", "GPU-c"}) || !slices.Equal(slowest, []string{"GPU-b"}) {
			t.Errorf("%s: groups %v, slowest %v: want the three GPUs, GPU-b slowest", a.Name, keys, slowest)
		}
		b := a.Groups[1]
		if !slices.Equal(b.Slowdown, []string{"hw_thermal_slowdown"}) {
			t.Errorf("%s: GPU-b's slowdown %v", a.Name, b.Slowdown)
		}
		switch a.Name {
		case "duration_ns":
			if b.Mean != 300 || b.Stat.P50 != "1024" || b.Stat.P99 != "+Inf" || a.SlowestVsMedian != 1.5 {
				t.Errorf("histogram GPU-b: %+v, %.2fx: want mean 300, p50 le 1024, p99 +Inf, 1.5x the median (200)", b, a.SlowestVsMedian)
			}
		case "slowest_ns":
			if b.Stat.Max != 900 || a.SlowestVsMedian != 3 {
				t.Errorf("max GPU-b: %+v, %.2fx: want 900, 3x the median (300)", b.Stat, a.SlowestVsMedian)
			}
		}
	}
	// By rank a device is its ranks, whatever communicators its aggregates
	// add up: c (rank 0 of both its communicators) is a group of its own.
	byRank, err := report.LoadBy([]string{dir}, report.Options{}, report.ByRank)
	if err != nil {
		t.Fatal(err)
	}
	if byRank.UnattributedAggs != 0 || len(byRank.Aggregates) != 3 {
		t.Fatalf("by rank: %d unattributed rows, %+v: want none left out", byRank.UnattributedAggs, byRank.Aggregates)
	}
	for _, a := range byRank.Aggregates {
		var keys []string
		for _, g := range a.Groups {
			keys = append(keys, g.Key)
		}
		want := []string{"0xc0 rank 0", "0xc0,0xc1 rank 0", "0xc0 rank 1"}
		if a.Name == "per_comm" {
			want = want[1:2]
		}
		if !slices.Equal(keys, want) {
			t.Errorf("%s by rank: groups %v, want %v", a.Name, keys, want)
		}
		if a.Name == "per_comm" && a.Groups[0].Stat.Count != 10 {
			t.Errorf("per_comm by rank: %+v: want c's 10", a.Groups)
		}
	}
	var out strings.Builder
	if err := byRank.Write(&out, report.Table); err != nil || strings.Contains(out.String(), "left out") ||
		!strings.Contains(out.String(), "<- slowest (1.50x the median)") || !strings.Contains(out.String(), "rank 0/2 of comms 0xc0,0xc1") {
		t.Errorf("table: %v\n%s", err, out.String())
	}

	// By comm an aggregate not keyed by comm is left out on c's device; one
	// keyed by comm gives each communicator its rows.
	byComm, err := report.LoadBy([]string{dir}, report.Options{}, report.ByComm)
	if err != nil {
		t.Fatal(err)
	}
	if byComm.UnattributedAggs != 2 {
		t.Errorf("by comm: %d unattributed rows, want c's two", byComm.UnattributedAggs)
	}
	for _, a := range byComm.Aggregates {
		if a.Name != "per_comm" {
			continue
		}
		if len(a.Groups) != 2 || a.Groups[0].Key != "0xc0" || a.Groups[0].Stat.Count != 4 || a.Groups[1].Key != "0xc1" || a.Groups[1].Stat.Count != 6 {
			t.Errorf("per_comm by comm: %+v: want each communicator of c's device its own row", a.Groups)
		}
	}
	out.Reset()
	if err := byComm.Write(&out, report.Table); err != nil || !strings.Contains(out.String(), "2 aggregate rows left out") {
		t.Errorf("table: %v\n%s", err, out.String())
	}

	// The note stands when every row is left out: no table to hang it on.
	only := t.TempDir()
	writeLines(t, filepath.Join(only, "c.jsonl"), append([]string{header(3), dev("GPU-c", 0), comm(0, 0), comm(1, 0)}, agg(10, 2000, 200)...)...)
	byComm, err = report.LoadBy([]string{only}, report.Options{}, report.ByComm)
	out.Reset()
	if err != nil || byComm.Write(&out, report.Table) != nil || !strings.Contains(out.String(), "2 aggregate rows left out") {
		t.Errorf("by comm, every row left out: %v\n%s", err, out.String())
	}
}
