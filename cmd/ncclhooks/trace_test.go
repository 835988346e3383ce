package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ncclhooks/ncclhooks/internal/report/reporttest"
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
