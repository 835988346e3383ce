package trace_test

import (
	"bytes"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ncclhooks/ncclhooks/internal/report"
	"github.com/ncclhooks/ncclhooks/internal/report/reporttest"
	"github.com/ncclhooks/ncclhooks/internal/trace"
	"github.com/ncclhooks/ncclhooks/internal/trace/perfettotest"
)

// The Perfetto trace, decoded by protoc with Perfetto's own protos (not by
// anything of ncclhooks), holds the JSON trace's slices to the nanosecond,
// its processes and tracks, and a drops and a fill counter per hook and
// device with a sample per dump_stats line.
func TestPerfettoTraceMatchesTheJSONTrace(t *testing.T) {
	perfettotest.Require(t)
	dir := t.TempDir()
	_, truths, err := reporttest.WriteRun(dir, 2, reporttest.Options{Seed: 9, DropEvery: 53, Channels: 3})
	if err != nil {
		t.Fatal(err)
	}
	// A third file: two communicators' items overlapping on one channel
	// (lanes), back to back (a slice starts where the previous one ends).
	if _, err := reporttest.Write(filepath.Join(dir, "c.jsonl"), reporttest.Options{Seed: 3, PID: 9, Channels: 2, Items: 50, BackToBack: true}); err != nil {
		t.Fatal(err)
	}
	jsonData, jsum := writeTrace(t, dir)
	var buf bytes.Buffer
	sum, err := trace.WritePerfetto(&buf, []string{dir}, report.Options{})
	if err != nil {
		t.Fatal(err)
	}
	tr := perfettotest.Decode(t, buf.Bytes())
	if n := perfettotest.CompareJSON(t, jsonData, tr); n != jsum.Slices || sum.Slices != n {
		t.Errorf("%d slices compared; summaries: JSON %d, Perfetto %d", n, jsum.Slices, sum.Slices)
	}
	if len(tr.Processes) != 3 || len(tr.Tracks) != jsum.Tracks {
		t.Errorf("%d processes and %d slice tracks, want 3 and %d", len(tr.Processes), len(tr.Tracks), jsum.Tracks)
	}
	p := validate(t, jsonData)
	for u, name := range tr.Processes {
		if p.procNames[int(tr.Pids[u])] != name {
			t.Errorf("process %d: %q, the JSON trace names pid %d %q", u, name, tr.Pids[u], p.procNames[int(tr.Pids[u])])
		}
	}
	for _, s := range tr.Slices[:20] {
		if s.Args["hook"] != "all" || s.Args["funcId"] == nil || s.Args["workCounter"] == nil || len(s.Categories) != 1 || s.Categories[0] != "all" ||
			!strings.HasPrefix(s.Args["comm"].(string), "not known") {
			t.Fatalf("slice %+v", s)
		}
	}
	run, err := report.Read([]string{dir}, report.Options{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	drops, fills := 0, 0
	for _, c := range tr.Counters {
		if c.Unit != "UNIT_COUNT" {
			t.Errorf("counter %q: unit %q", c.Track, c.Unit)
		}
		switch {
		case strings.HasPrefix(c.Track, "dropped records (cumulative), hook all"):
			drops += len(c.Values)
			if c.Process == "node0 pid 4243" && int(c.Values[len(c.Values)-1]) != truths[1].Dropped {
				t.Errorf("%s: last drops %v, want %d", c.Process, c.Values, truths[1].Dropped)
			}
		case strings.HasPrefix(c.Track, "pending in device buffer"):
			fills += len(c.Values)
		}
	}
	if drops != len(run.Stats) || fills != len(run.Stats) || sum.FillCounters != len(run.Stats) {
		t.Errorf("%d drop and %d fill samples (summary %d), want one per dump_stats line (%d)", drops, fills, sum.FillCounters, len(run.Stats))
	}
}
