package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil/promlint"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// The outputs people use, end to end from a real cpu-backend run of the
// plugin: Prometheus textfiles written by the plugin itself, report, trace,
// and diff against the same run with a planted slowdown.

func runOnce(t *testing.T, extra []string) string {
	t.Helper()
	dir := t.TempDir()
	out, code := cliEnv(t, extra, "run", "../../examples/all-events.yaml", "--backend", "cpu", "--out", dir,
		"--devices", "2", "--comms", "2", "--channels", "4", "--items", "1500", "--work", "1024")
	if code != 0 {
		t.Fatalf("run: exit %d:\n%s", code, out)
	}
	return dir
}

func TestPrometheusTextfilesFromThePlugin(t *testing.T) {
	prom := t.TempDir()
	runOnce(t, []string{"NCCL_HOOKS_PROM_DIR=" + prom, "NCCL_HOOKS_PROM_DUMP_STATS=1"})
	for d := 0; d < 2; d++ {
		path := filepath.Join(prom, fmt.Sprintf("ncclhooks_dev%d.prom", d))
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatalf("device %d: %v", d, err)
		}
		parser := expfmt.NewTextParser(model.LegacyValidation)
		fams, err := parser.TextToMetricFamilies(strings.NewReader(string(data)))
		if err != nil {
			t.Fatalf("%s does not parse: %v\n%s", path, err, data)
		}
		problems, err := promlint.New(strings.NewReader(string(data))).Lint()
		if err != nil || len(problems) > 0 {
			t.Errorf("%s: lint %v %v", path, err, problems)
		}
		value := func(name string) float64 {
			f, ok := fams[name]
			if !ok || len(f.Metric) == 0 {
				t.Fatalf("%s: no %s in\n%s", path, name, data)
			}
			var v float64
			for _, m := range f.Metric {
				v += m.GetCounter().GetValue()
			}
			return v
		}
		matched, records, dropped := value("ncclhooks_matched_total"), value("ncclhooks_records_total"), value("ncclhooks_dropped_total")
		if want := float64(2 * 4 * 1500 * 2); matched != want || records+dropped != matched {
			t.Errorf("device %d: matched %v records %v dropped %v, want %v matched = records + dropped", d, matched, records, dropped, want)
		}
	}
}

func TestReportAndTraceOfARealRun(t *testing.T) {
	dir := runOnce(t, nil)
	out, code := cli(t, "report", dir, "--json")
	if code != 0 {
		t.Fatalf("report: exit %d:\n%s", code, out)
	}
	if !strings.Contains(out, "AllReduce_Sum_f32_RING_LL") || !json.Valid([]byte(out)) {
		t.Errorf("report --json is not JSON naming the functions:\n%.2000s", out)
	}
	traceFile := filepath.Join(t.TempDir(), "trace.json")
	if out, code := cli(t, "trace", dir, "-o", traceFile); code != 0 {
		t.Fatalf("trace: exit %d:\n%s", code, out)
	}
	var tr struct {
		TraceEvents []struct {
			Ph   string  `json:"ph"`
			Name string  `json:"name"`
			Pid  int     `json:"pid"`
			Tid  int     `json:"tid"`
			Ts   float64 `json:"ts"`
			Dur  float64 `json:"dur"`
		} `json:"traceEvents"`
	}
	data, _ := os.ReadFile(traceFile)
	if err := json.Unmarshal(data, &tr); err != nil {
		t.Fatal(err)
	}
	slices := 0
	last := map[[2]int]float64{}
	for _, e := range tr.TraceEvents {
		if e.Ph != "X" {
			continue
		}
		slices++
		k := [2]int{e.Pid, e.Tid}
		if e.Ts < last[k] || e.Dur < 0 {
			t.Fatalf("slice %s at %v before the end of the previous one (%v) on track %v", e.Name, e.Ts, last[k], k)
		}
		last[k] = e.Ts + e.Dur
	}
	// Every work item's START and STOP were recorded: one slice each.
	if want := 2 * 2 * 4 * 1500; slices != want {
		t.Errorf("%d slices, want one per work item (%d)", slices, want)
	}
}

// slowDown rewrites a run's output with every work item's duration scaled by
// factor (STOP moved away from its START), as a real regression would.
func slowDown(t *testing.T, dir string, factor float64) string {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join(dir, "*.jsonl"))
	if len(files) != 1 {
		t.Fatalf("outputs %v", files)
	}
	in, err := os.Open(files[0])
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	outDir := t.TempDir()
	out, err := os.Create(filepath.Join(outDir, filepath.Base(files[0])))
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	type key struct{ dev, ch, wc uint64 }
	starts := map[key]uint64{}
	sc := bufio.NewScanner(in)
	sc.Buffer(nil, 1<<24)
	w := bufio.NewWriter(out)
	defer w.Flush()
	for sc.Scan() {
		var m map[string]any
		dec := json.NewDecoder(strings.NewReader(sc.Text()))
		dec.UseNumber()
		if err := dec.Decode(&m); err != nil {
			t.Fatal(err)
		}
		if m["type"] == "record" {
			num := func(k string) uint64 {
				v, _ := m[k].(json.Number).Int64()
				return uint64(v)
			}
			k := key{num("device"), num("channelId"), num("workCounter")}
			ts := num("timestamp")
			if num("phase") == 0 {
				starts[k] = ts
			} else if t0, ok := starts[k]; ok {
				m["timestamp"] = t0 + uint64(float64(ts-t0)*factor)
			}
		}
		b, _ := json.Marshal(m)
		w.Write(append(b, '\n'))
	}
	return outDir
}

func TestDiffCatchesAPlantedSlowdown(t *testing.T) {
	base := runOnce(t, nil)
	slow, jitter := slowDown(t, base, 1.10), slowDown(t, base, 1.01)
	out, code := cli(t, "diff", base, slow, "--stat", "p50,p99", "--max-regress", "5%", "--markdown")
	if code != 1 || !strings.Contains(out, "|") {
		t.Errorf("a 10%% slowdown: exit %d, want 1 with a markdown table:\n%s", code, out)
	}
	out, code = cli(t, "diff", base, jitter, "--stat", "p50,p99", "--max-regress", "5%")
	if code != 0 {
		t.Errorf("a 1%% jitter: exit %d, want 0:\n%s", code, out)
	}
	if out, code := cli(t, "diff", base, t.TempDir()); code != 2 {
		t.Errorf("an empty directory: exit %d, want 2:\n%s", code, out)
	}
}

// An aggregate-only profile (latency per collective) reports from its
// on-device histograms: every STOP of every device is counted once.
func TestReportOfOnDeviceAggregates(t *testing.T) {
	dir := t.TempDir()
	if out, code := cli(t, "run", "../../examples/latency.yaml", "--backend", "cpu", "--out", dir,
		"--devices", "2", "--comms", "2", "--channels", "4", "--items", "1000"); code != 0 {
		t.Fatalf("run: exit %d:\n%s", code, out)
	}
	out, code := cli(t, "report", dir, "--json")
	if code != 0 {
		t.Fatalf("report: exit %d:\n%s", code, out)
	}
	var rep struct {
		Aggregates []struct {
			Name string `json:"name"`
			Kind string `json:"kind"`
			Rows []struct {
				Func  string `json:"func"`
				Count uint64 `json:"count"`
				P50   string `json:"p50_le"`
			} `json:"rows"`
		} `json:"aggregates"`
	}
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatal(err)
	}
	for _, a := range rep.Aggregates {
		if a.Name != "duration_ns" {
			continue
		}
		var n uint64
		for _, r := range a.Rows {
			n += r.Count
			if r.Func == "" || r.P50 == "" {
				t.Errorf("row %+v lacks its function or p50", r)
			}
		}
		if want := uint64(2 * 2 * 4 * 1000); n != want {
			t.Errorf("histogram counts %d work items, want every STOP (%d)", n, want)
		}
		return
	}
	t.Fatalf("no duration_ns aggregate in:\n%.3000s", out)
}
