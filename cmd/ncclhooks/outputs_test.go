package main

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
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
		// One file per device of the process, named by GPU and pid.
		files, _ := filepath.Glob(filepath.Join(prom, fmt.Sprintf("ncclhooks_dev%d_*.prom", d)))
		if len(files) != 1 {
			t.Fatalf("device %d: want one textfile ncclhooks_dev%d_<pid>.prom, got %v", d, d, files)
		}
		path := files[0]
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
	// ts and dur are microseconds with three decimals: compare them as the
	// whole nanoseconds they are written from, since their float64 sum is
	// not exact (41815.683 may come out as 41815.683000000005).
	ns := func(us float64) int64 { return int64(math.Round(us * 1e3)) }
	slices := 0
	last := map[[2]int]int64{}
	for _, e := range tr.TraceEvents {
		if e.Ph != "X" {
			continue
		}
		slices++
		k := [2]int{e.Pid, e.Tid}
		if ns(e.Ts) < last[k] || e.Dur < 0 {
			t.Fatalf("slice %s at %v before the end of the previous one (%v ns) on track %v", e.Name, e.Ts, last[k], k)
		}
		last[k] = ns(e.Ts) + ns(e.Dur)
	}
	// Every work item's START and STOP were recorded: one slice each.
	if want := 2 * 2 * 4 * 1500; slices != want {
		t.Errorf("%d slices, want one per work item (%d)", slices, want)
	}
}

// harnessRuns plays the harness n times per variant, interleaved (variant
// 0 run 1, variant 1 run 1, ..., variant 0 run 2, ...) so that the
// machine's load over the test falls on every variant alike, and returns
// per variant a directory of runs (run-01, run-02, ...), as regress.sh
// writes them. A variant is extra flags for ncclhooks run ("--slowdown
// 1.05" plants a real regression: every work item lasts 5% longer).
func harnessRuns(t *testing.T, profile string, n int, variants ...[]string) []string {
	t.Helper()
	dirs := make([]string, len(variants))
	for v := range dirs {
		dirs[v] = t.TempDir()
	}
	for i := 1; i <= n; i++ {
		for v, extra := range variants {
			out := filepath.Join(dirs[v], fmt.Sprintf("run-%02d", i))
			// 1000 items: the workload diff's defaults were calibrated on
			// (bench/RESULTS.md, "diff calibration").
			args := append([]string{"run", profile, "--backend", "cpu", "--no-verify", "--items", "1000", "--out", out}, extra...)
			if text, code := cli(t, args...); code != 0 {
				t.Fatalf("%v: exit %d:\n%s", args, code, text)
			}
		}
	}
	return dirs
}

// diffJSON runs ncclhooks diff with --json and decodes what the tests check.
type diffOut struct {
	Result      string         `json:"result"`
	Threshold   string         `json:"threshold"`
	Compared    int            `json:"compared"`
	NoVerdict   int            `json:"no_verdict"`
	Detectable  float64        `json:"detectable_change"`
	Regressions int            `json:"regressions"`
	Skipped     int            `json:"skipped"`
	SkippedBy   map[string]int `json:"skipped_by"`
	NotCompared int            `json:"not_compared"`
	Comparisons int            `json:"comparisons"`
	Rows        []struct {
		Hook, Aggregate, Func, Verdict, Reason string
		Changes                                []struct {
			Stat       string               `json:"stat"`
			Bucketed   bool                 `json:"bucketed"`
			EstLo      any                  `json:"estimate_lo"`
			Detectable any                  `json:"detectable_change"`
			Lo         any                  `json:"lo"`
			Verdict    string               `json:"verdict"`
			Base       struct{ Lo, Hi any } `json:"base"`
		} `json:"changes"`
	} `json:"rows"`
}

func diffJSON(t *testing.T, args ...string) (diffOut, int, string) {
	t.Helper()
	out, code := cli(t, append([]string{"diff", "--json"}, args...)...)
	var d diffOut
	if i := strings.Index(out, "{"); i < 0 || json.Unmarshal([]byte(out[i:]), &d) != nil {
		t.Fatalf("diff %v: exit %d, not JSON:\n%s", args, code, out)
	}
	return d, code, out
}

func asFloat(v any) float64 {
	f, _ := v.(float64)
	return f
}

// halves names the runs of a directory of runs as two sides, --base the
// even ones and --new the odd ones: runs of the same build, interleaved
// with everything else the test ran.
func halves(t *testing.T, dir string) []string {
	t.Helper()
	runs, _ := filepath.Glob(filepath.Join(dir, "run-*"))
	var args []string
	for i, r := range runs {
		// Alternate runs, not the first half against the second: a load
		// that changes during the test must not look like a regression.
		side := "--base"
		if i%2 == 1 {
			side = "--new"
		}
		args = append(args, side, r)
	}
	return args
}

// Real runs of the plugin through the cpu harness: the same build never
// fails with the defaults (it passes, or has no verdict where the machine's
// noise reaches the 2% threshold); a planted 20% slowdown fails. The 5%
// detection rate is measured by scripts/diff-calibrate.sh (bench/RESULTS.md),
// not here, where one miss would fail the test.
func TestDiffOfRealRuns(t *testing.T) {
	// Interleaved, so that a busy machine slows both sides alike. The 5%
	// detection rate is a measurement (examples/ci/calibrate.sh, figures in
	// examples/ci/README.md), not a test: on a loaded 2-core machine a 5%
	// timing signal is not reliably there to find.
	dirs := harnessRuns(t, "../../examples/all-events.yaml", 30, nil, []string{"--slowdown", "1.2"})
	base, slow20 := dirs[0], dirs[1]
	// How small a change these runs can show is the machine's noise (0.047
	// on a quiet 2-core machine, 0.093 loaded, above 0.1 in CI): reported,
	// not bounded here. It is the widest row's, beyond the threshold.
	d, code, out := diffJSON(t, halves(t, base)...)
	widest := 0.0
	for _, r := range d.Rows {
		for _, c := range r.Changes {
			widest = max(widest, asFloat(c.Detectable))
		}
	}
	if code == 1 || d.Result == "FAIL" || d.Compared+d.NoVerdict != 23 || d.Skipped != 0 ||
		!(d.Detectable > 0.02) || d.Detectable != widest || d.Comparisons != 23 {
		t.Errorf("the same build, 15 runs against 15: exit %d, %s, %d compared, %d no verdict, %d skipped, %d comparisons, detectable %+.3f (widest row %+.3f):\n%.3000s",
			code, d.Result, d.Compared, d.NoVerdict, d.Skipped, d.Comparisons, d.Detectable, widest, out)
	}
	for _, c := range []struct {
		dir    string
		flags  []string
		lo, hi float64 // what the estimate of every row must lie in
	}{{slow20, nil, 0.10, 0.40}} {
		d, code, out := diffJSON(t, append([]string{base, c.dir}, c.flags...)...)
		if code != 1 || d.Result != "FAIL" || d.Regressions == 0 {
			t.Errorf("%s: exit %d, %d regressions, want 1 (FAIL):\n%.3000s", c.dir, code, d.Regressions, out)
			continue
		}
		for _, r := range d.Rows {
			if len(r.Changes) == 0 {
				t.Fatalf("%s: row %+v has no change", c.dir, r)
			}
			if e := asFloat(r.Changes[0].EstLo); e < c.lo || e > c.hi {
				t.Errorf("%s %s: estimated change %+.3f, want it in [%.2f, %.2f]", c.dir, r.Func, e, c.lo, c.hi)
			}
		}
	}
	// The markdown for a pull request comment says what failed and how.
	out, code = cli(t, "diff", base, slow20, "--markdown")
	if code != 1 || !strings.HasPrefix(out, "### ❌ ncclhooks diff: FAIL: ") || !strings.Contains(out, "**regression**") || !strings.Contains(out, "- method: ") {
		t.Errorf("markdown: exit %d:\n%.2000s", code, out)
	}
	if out, code := cli(t, "diff", base, t.TempDir()); code != 2 || !strings.Contains(out, "holds no *.jsonl files") {
		t.Errorf("an empty directory: exit %d, want 2:\n%s", code, out)
	}
}

// An aggregate-only profile, run for real: the default statistic is the
// histogram's mean (exact sum / count), which shows 20%, as does the
// minimum; the log2 histogram's p50 is compared to its bucket only, so a 5%
// or 20% slowdown inside it has no verdict (issue 34: it was a PASS), and 8x
// moves the p50 at least two buckets up (three from 1-2 us), which the
// buckets alone show. Whether the mean shows 5% is a measurement
// (scripts/diff-calibrate.sh, bench/RESULTS.md), not a test.
func TestDiffOfRealAggregateOnlyRuns(t *testing.T) {
	// Interleaved, so that a machine whose load changes during the test
	// slows every set alike (10 runs of the 20% set taken after the others
	// once showed no regression on a loaded CI machine).
	dirs := harnessRuns(t, "testdata/agg-only.yaml", 30, nil, []string{"--slowdown", "1.05"}, []string{"--slowdown", "1.2"})
	base, slow5, slow20 := dirs[0], dirs[1], dirs[2]
	d, code, out := diffJSON(t, halves(t, base)...)
	if code == 1 || d.Compared+d.NoVerdict != 23 || d.NotCompared != 2*23 {
		t.Errorf("the same build: exit %d (%d compared, %d no verdict, %d not compared: the min and max rows):\n%.3000s", code, d.Compared, d.NoVerdict, d.NotCompared, out)
	}
	// 20% slower. The minimum is steady and regresses on nearly every row.
	// The mean follows the preemptions of a loaded machine, so how many of
	// its rows a 2% threshold can decide is the machine's noise (14 of 23
	// under load, with 46 changes compared together): it must never pass,
	// and its estimate must show the slowdown.
	d, code, out = diffJSON(t, base, slow20, "--stat", "auto,min")
	if code != 1 || d.Comparisons != 2*23 {
		t.Errorf("20%% slower: exit %d, %d comparisons, want 1 (FAIL) and 46:\n%.3000s", code, d.Comparisons, out)
	}
	minFailed := 0
	var means []float64
	for _, r := range d.Rows {
		for _, ch := range r.Changes {
			switch {
			case ch.Stat == "min" && ch.Verdict == "regression":
				minFailed++
			case ch.Stat == "mean" && (ch.Verdict == "ok" || ch.Verdict == "improved"):
				t.Errorf("20%% slower %s: the mean is %s: %+v", r.Func, ch.Verdict, ch)
			case ch.Stat == "mean":
				means = append(means, asFloat(ch.EstLo))
			}
		}
	}
	slices.Sort(means)
	if minFailed < 20 || len(means) != 23 || means[len(means)/2] < 0.10 {
		t.Errorf("20%% slower: %d minima of 23 regressed, want at least 20; the means' estimates %.3f, want their median above +10%%:\n%.3000s", minFailed, means, out)
	}
	// The p50 of log2 buckets claims no more than its bucket holds.
	d, _, out = diffJSON(t, base, slow20, "--stat", "p50")
	for _, r := range d.Rows {
		for _, ch := range r.Changes {
			if !ch.Bucketed || asFloat(ch.Lo) > 0 || ch.Verdict != "no verdict" {
				t.Errorf("20%% slower %s p50 claims more than its log2 bucket holds: %+v\n%.2000s", r.Func, ch, out)
			}
		}
	}
	// The p50 alone: 5% is within the bucket, so the buckets can neither
	// show it nor exclude it: no verdict, exit 2, never PASS; 8x is two
	// buckets or more, at least +100%.
	if d, code, out := diffJSON(t, base, slow5, "--stat", "p50"); code != 2 || d.Result != "NO VERDICT" || d.NoVerdict != 23 {
		t.Errorf("5%% slower, p50 from log2 buckets: exit %d:\n%.2000s", code, out)
	}
	x8 := harnessRuns(t, "testdata/agg-only.yaml", 5, []string{"--slowdown", "8"})[0]
	d, code, out = diffJSON(t, base, x8, "--stat", "p50")
	if code != 1 || d.Regressions != 23 {
		t.Errorf("8x slower, p50 from log2 buckets: exit %d:\n%.3000s", code, out)
	}
	for _, r := range d.Rows {
		if len(r.Changes) == 0 {
			continue // the max rows: not compared
		}
		if c := r.Changes[0]; asFloat(c.Lo) < 0.99 {
			t.Errorf("8x slower %s: the lower end of the change is %v, want at least the two buckets' +100%%", r.Func, c.Lo)
		}
	}
}

// No false PASS from runs that cannot be trusted: a capture ratio under 99%,
// a hook that matched nothing: exit 2, and the output says why.
func TestDiffOfRealRunsRefusesUntrustworthyInputs(t *testing.T) {
	low := harnessRuns(t, "testdata/low-capture.yaml", 4, nil, nil)
	d, code, out := diffJSON(t, low[0], low[1])
	if code != 2 || d.Result != "INSUFFICIENT DATA" || d.SkippedBy["capture below --min-capture"] == 0 || !strings.Contains(out, "capture ") {
		t.Errorf("capture under 99%%: exit %d:\n%.2000s", code, out)
	}
	// A bound under any capture these runs can have: drop_newest keeps at
	// least the 64 slots of each run's 32000 events (0.2%); what the drain
	// keeps above that depends on the machine's load (0.79% seen loaded).
	if text, code := cli(t, "diff", low[0], low[1], "--min-capture", "0.1%"); code == 2 && strings.Contains(text, "capture below") {
		t.Errorf("--min-capture 0.1%%: still refused:\n%.2000s", text)
	}
	// 6 runs a side: the 23 other rows' intervals, together at 95%, need them.
	none := harnessRuns(t, "testdata/no-match.yaml", 6, nil, nil)
	d, code, out = diffJSON(t, none[0], none[1])
	// The other rows are there (compared, or no verdict where 6 identical
	// runs a side cannot exclude the threshold: which, noise decides).
	if code != 2 || d.SkippedBy["hook matched nothing"] != 1 || len(d.Rows) < 2 {
		t.Errorf("a hook that matched nothing: exit %d:\n%.2000s", code, out)
	}
	text, _ := cli(t, "diff", none[0], none[1])
	if !strings.HasPrefix(text, "INSUFFICIENT DATA (auto): no verdict for 1 of ") || !strings.Contains(text, "typo") {
		t.Errorf("text output:\n%.2000s", text)
	}
	// Different profiles are an input error.
	if out, code := cli(t, "diff", low[0], none[0]); code != 2 || !strings.Contains(out, `profile "no-match" differs from "low-capture"`) {
		t.Errorf("different profiles: exit %d:\n%s", code, out)
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
				Func  string          `json:"func"`
				Count uint64          `json:"count"`
				P50   json.RawMessage `json:"p50_le"`
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
			if r.Func == "" || len(r.P50) == 0 {
				t.Errorf("row %+v lacks its function or p50", r)
			}
			// --json numbers are numbers; only the +Inf bucket is a string.
			if r.P50[0] == '"' && string(r.P50) != `"+Inf"` {
				t.Errorf("p50_le %s is a string", r.P50)
			}
		}
		if want := uint64(2 * 2 * 4 * 1000); n != want {
			t.Errorf("histogram counts %d work items, want every STOP (%d)", n, want)
		}
		return
	}
	t.Fatalf("no duration_ns aggregate in:\n%.3000s", out)
}

// NCCL_HOOKS_COMPRESS: run's own check, check, report, trace and diff read
// compressed outputs as they read plain ones, with the same results; a
// compressed file cut short reads up to its last complete line.
func TestCompressedOutputsReadByEveryCommand(t *testing.T) {
	const prof = "../../examples/all-events.yaml"
	run := func(compress string) string {
		dir := t.TempDir()
		out, code := cliEnv(t, []string{"NCCL_HOOKS_COMPRESS=" + compress}, "run", prof, "--backend", "cpu", "--out", dir, "--items", "300")
		if code != 0 || !strings.Contains(out, "result: exact") {
			t.Fatalf("run with %s: exit %d:\n%s", compress, code, out)
		}
		return dir
	}
	report := func(dir string) map[string]any {
		out, code := cli(t, "report", dir, "--json")
		if code != 0 {
			t.Fatalf("report %s: exit %d:\n%s", dir, code, out)
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(out), &m); err != nil {
			t.Fatalf("report --json: %v\n%.500s", err, out)
		}
		return m
	}
	hooks := func(m map[string]any) string { b, _ := json.Marshal(m["hooks"]); return string(b) }
	plain := report(run("none"))
	for _, c := range []string{"zstd", "gzip"} {
		t.Run(c, func(t *testing.T) {
			dir := run(c)
			files, _ := filepath.Glob(filepath.Join(dir, "ncclhooks-*.jsonl"+map[string]string{"zstd": ".zst", "gzip": ".gz"}[c]))
			if len(files) != 1 {
				all, _ := filepath.Glob(filepath.Join(dir, "*"))
				t.Fatalf("want one compressed output, got %v", all)
			}
			m := report(dir)
			// Same harness, same counts per hook: timings differ, counts do not.
			var a, b []map[string]any
			json.Unmarshal([]byte(hooks(m)), &a)
			json.Unmarshal([]byte(hooks(plain)), &b)
			if len(a) == 0 || len(a) != len(b) || a[0]["records"] == nil || a[0]["records"] != b[0]["records"] {
				t.Errorf("report of the %s output differs in its counts from the plain one:\n%.600s\n%.600s", c, hooks(m), hooks(plain))
			}
			if out, code := cli(t, "check", dir, "--profile", prof, "--comms", "2"); code != 0 || !strings.Contains(out, "result: exact") {
				t.Errorf("check: exit %d:\n%s", code, out)
			}
			tf := filepath.Join(t.TempDir(), "t.json")
			if out, code := cli(t, "trace", dir, "-o", tf); code != 0 || !strings.Contains(out, "4800 slices") {
				t.Errorf("trace: exit %d:\n%s", code, out)
			}
			if out, code := cli(t, "diff", dir, dir); code == 2 && strings.Contains(out, "no *.jsonl") || code > 2 {
				t.Errorf("diff did not read the compressed runs: exit %d:\n%s", code, out)
			}
			// Cut short, as by a kill: the report reads what is whole and says so.
			data, _ := os.ReadFile(files[0])
			cut := t.TempDir()
			if err := os.WriteFile(filepath.Join(cut, filepath.Base(files[0])), data[:len(data)*2/3], 0o644); err != nil {
				t.Fatal(err)
			}
			if out, code := cli(t, "report", cut); code != 0 || !strings.Contains(out, "ends inside a frame") {
				t.Errorf("report of a cut file: exit %d:\n%s", code, out)
			}
		})
	}
}
