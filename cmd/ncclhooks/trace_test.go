package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ncclhooks/ncclhooks/internal/report/reporttest"
	"github.com/ncclhooks/ncclhooks/internal/trace/perfettotest"
)

func TestTraceCommand(t *testing.T) {
	dir := outputsRun(t, 2, reporttest.Options{Seed: 4, Items: 20})
	out := filepath.Join(t.TempDir(), "trace.json")
	code, _, stderr := outputsCmd(runTrace, dir, "-o", out)
	if code != 0 || !strings.Contains(stderr, "wrote "+out+": 160 slices") {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	data, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	var tr struct {
		TraceEvents []struct {
			Ph string `json:"ph"`
		} `json:"traceEvents"`
	}
	if err := json.Unmarshal(data, &tr); err != nil {
		t.Fatal(err)
	}
	slices := 0
	for _, e := range tr.TraceEvents {
		if e.Ph == "X" {
			slices++
		}
	}
	if slices != 160 {
		t.Errorf("%d slices in the file, want 160", slices)
	}
	if st, _ := os.Stat(out); st.Mode().Perm() != 0o644 {
		t.Errorf("mode %v", st.Mode())
	}
	code, stdout, _ := outputsCmd(runTrace, "-o", "-", dir)
	if code != 0 || !json.Valid([]byte(stdout)) {
		t.Errorf("-o -: exit %d", code)
	}
	if code, _, stderr := outputsCmd(runTrace, t.TempDir(), "-o", out); code != 2 || !strings.Contains(stderr, "no *.jsonl files") {
		t.Errorf("empty dir: exit %d %s", code, stderr)
	}
	if entries, _ := os.ReadDir(filepath.Dir(out)); len(entries) != 1 {
		t.Errorf("leftover temporary files: %v", entries)
	}
}

// An aggregate-only profile has no slices: trace says so and draws each
// aggregate as a counter track per device, a series per key, whose last
// sample is the final snapshot.
func TestTraceOfAggregateOnlyProfile(t *testing.T) {
	dir := t.TempDir()
	prof := writeFile(t, dir, "aggs.yaml", `version: 1
name: aggs
output: {dump_interval: 10ms}
hooks:
  - name: h
    aggregate:
      - {name: events, kind: count, by: [channelId]}
  - name: d
    when: phase == STOP && paired
    aggregate:
      - {name: dur_ns, kind: histogram, value: duration, buckets: log2}
`)
	out := filepath.Join(dir, "out")
	if text, code := cli(t, "run", prof, "--backend", "cpu", "--out", out, "--items", "3000"); code != 0 {
		t.Fatalf("run: exit %d:\n%s", code, text)
	}
	tf := filepath.Join(dir, "t.json")
	text, code := cli(t, "trace", out, "-o", tf)
	if code != 0 || !strings.Contains(text, "no slices") || !strings.Contains(text, "4 aggregate counter tracks") {
		t.Fatalf("trace: exit %d:\n%s", code, text)
	}
	var tr struct {
		TraceEvents []struct {
			Name string          `json:"name"`
			Cat  string          `json:"cat"`
			Ph   string          `json:"ph"`
			Pid  int             `json:"pid"`
			Ts   float64         `json:"ts"`
			Args json.RawMessage `json:"args"`
		} `json:"traceEvents"`
	}
	data, _ := os.ReadFile(tf)
	if err := json.Unmarshal(data, &tr); err != nil {
		t.Fatal(err)
	}
	last := map[string]map[string]float64{} // "pid name" -> last args
	samples := map[string]int{}
	for _, e := range tr.TraceEvents {
		if e.Ph == "X" {
			t.Fatalf("a slice in the trace of an aggregate-only profile: %+v", e)
		}
		if e.Cat != "aggregate" || e.Ph != "C" {
			continue
		}
		k := fmt.Sprint(e.Pid, " ", e.Name)
		var args map[string]float64
		if err := json.Unmarshal(e.Args, &args); err != nil {
			t.Fatalf("%s: args %s: %v", k, e.Args, err)
		}
		last[k] = args
		samples[k]++
	}
	// One process of two devices: a counter track per aggregate and device.
	for dev := 0; dev < 2; dev++ {
		k := fmt.Sprintf("0 h events (count), device %d", dev)
		if len(last[k]) != 4 {
			t.Fatalf("%s: want a series per channel, got %v", k, last[k])
		}
		for ch := 0; ch < 4; ch++ {
			if v := last[k][fmt.Sprint("ch ", ch)]; v != 2*3000*2 {
				t.Errorf("%s ch %d: last sample %v, want the final count %d", k, ch, v, 2*3000*2)
			}
		}
		if mean := last[fmt.Sprintf("0 d dur_ns (mean), device %d", dev)]["all"]; mean <= 0 {
			t.Errorf("device %d: histogram mean %v", dev, mean)
		}
	}
	if samples["0 h events (count), device 0"] < 2 {
		t.Errorf("want the aggregate over time (a sample per dump), got %d samples", samples["0 h events (count), device 0"])
	}
}

// trace --format perfetto through the real plugin on the cpu backend:
// protoc, with Perfetto's own protos, decodes what it writes, and it holds
// the slices of trace --format json (count, tracks, names, start and
// duration to the nanosecond), with the drops and buffer fill counters.
func TestTracePerfettoFormat(t *testing.T) {
	perfettotest.Require(t)
	dir := t.TempDir()
	out := filepath.Join(dir, "out")
	if text, code := cli(t, "run", "../../examples/all-events.yaml", "--backend", "cpu", "--out", out, "--devices", "2", "--comms", "2", "--channels", "2", "--items", "40"); code != 0 {
		t.Fatalf("run: exit %d:\n%s", code, text)
	}
	pf, js := filepath.Join(dir, "t.pftrace"), filepath.Join(dir, "t.json")
	text, code := cli(t, "trace", out, "--format", "perfetto", "-o", pf)
	if code != 0 || !strings.Contains(text, "wrote "+pf+": 320 slices") || !strings.Contains(text, "buffer fill samples") {
		t.Fatalf("trace --format perfetto: exit %d:\n%s", code, text)
	}
	if text, code := cli(t, "trace", out, "--format", "json", "-o", js); code != 0 {
		t.Fatalf("trace --format json: exit %d:\n%s", code, text)
	}
	pdata, _ := os.ReadFile(pf)
	jdata, _ := os.ReadFile(js)
	tr := perfettotest.Decode(t, pdata)
	if n := perfettotest.CompareJSON(t, jdata, tr); n != 320 {
		t.Errorf("%d slices compared, want 2 devices x 2 comms x 2 channels x 40 items", n)
	}
	var drops, fill int
	for _, c := range tr.Counters {
		switch {
		case strings.HasPrefix(c.Track, "dropped records (cumulative), hook all, device "):
			drops++
		case strings.HasPrefix(c.Track, "pending in device buffer (reserved, not drained), hook all, device "):
			fill++
			if c.Values[len(c.Values)-1] != 0 {
				t.Errorf("%s: the final dump's pending is %v, want 0", c.Track, c.Values)
			}
		}
	}
	if drops != 2 || fill != 2 {
		t.Errorf("%d drop and %d fill counter tracks, want one per device (2); counters %v", drops, fill, tr.Counters)
	}
	for _, s := range tr.Slices {
		comm, ok := s.Args["comm"].(map[string]any)
		if !ok || comm["comm_id"] == nil || comm["nranks"] != int64(2) {
			t.Fatalf("slice %+v: want its communicator in its args", s)
		}
	}
	if text, code := cli(t, "trace", out, "--format", "svg"); code != 2 || !strings.Contains(text, "want json or perfetto") {
		t.Errorf("--format svg: exit %d:\n%s", code, text)
	}
}
