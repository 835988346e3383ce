package report_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ncclhooks/ncclhooks/internal/report"
	"github.com/ncclhooks/ncclhooks/internal/report/reporttest"
)

// loadRuns writes n synthetic runs (scales: a run-wide factor per run, the
// run-to-run noise of a real machine) and loads them as one side.
func loadRuns(t *testing.T, n int, o reporttest.Options, scales ...float64) []*report.RunData {
	t.Helper()
	dir, err := reporttest.WriteRuns(t.TempDir(), n, 2, o, scales...)
	if err != nil {
		t.Fatal(err)
	}
	return loadDir(t, dir, false)
}

func loadDir(t *testing.T, dir string, byChannel bool) []*report.RunData {
	t.Helper()
	paths, err := report.ExpandRuns(dir)
	if err != nil {
		t.Fatal(err)
	}
	var runs []*report.RunData
	for _, p := range paths {
		r, err := report.LoadRun(p, report.Options{}, byChannel)
		if err != nil {
			t.Fatal(err)
		}
		runs = append(runs, r)
	}
	return runs
}

var defaults = report.DiffOptions{MaxRegress: report.DefaultMaxRegress, MinSamples: report.DefaultMinSamples, MinCapture: report.DefaultMinCapture}

// strict is defaults at the old --max-regress of 0.5%, below what +-3% run
// noise lets 10 runs tell.
var strict = report.DiffOptions{MaxRegress: 0.005, MinSamples: report.DefaultMinSamples, MinCapture: report.DefaultMinCapture}

func compare(t *testing.T, base, cand []*report.RunData, opts report.DiffOptions) *report.Diff {
	t.Helper()
	d, err := report.Compare(base, cand, opts)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func verdicts(d *report.Diff) map[string]report.Verdict {
	m := map[string]report.Verdict{}
	for _, r := range d.Rows {
		if r.Channel == "all" {
			m[r.Func] = r.Verdict
		}
	}
	return m
}

// Run-to-run noise of +-3% (a run's every duration scaled alike) is what
// the verdict must see through; a 10% slowdown of one function stands out
// of it, a 1% one does not.
var noise = []float64{1.00, 1.03, 0.98, 1.01, 0.97, 1.02, 0.99, 1.015, 0.985, 1.005}

func TestDiffCatchesPlantedSlowdownNotNoise(t *testing.T) {
	slow := reporttest.DefaultFuncs[1].Name
	base := loadRuns(t, 10, reporttest.Options{Seed: 100}, noise...)
	same := loadRuns(t, 10, reporttest.Options{Seed: 200}, noise[3:]...)
	// At 0.5% the +-3% noise keeps every interval across the threshold:
	// no verdict, never a PASS (issue 34: these were PASS).
	d := compare(t, base, same, strict)
	if d.Result != report.ResultNoVerdict || d.Inconclusive != len(reporttest.DefaultFuncs) || d.Pass ||
		!(d.Detectable > 0.015 && d.Detectable < 0.06) {
		t.Errorf("same workload at 0.5%%: %s; want NO VERDICT with a detectable change of a few %%", d.Summary())
	}
	opts := defaults
	opts.MaxRegress = 0.04
	d = compare(t, base, same, opts)
	if d.Result != report.ResultPass || d.Compared != len(reporttest.DefaultFuncs) || d.Skipped != 0 {
		t.Errorf("same workload, other runs: %s", d.Summary())
	}
	jitter := loadRuns(t, 10, reporttest.Options{Seed: 300, Slowdown: map[string]float64{slow: 1.01}}, noise[5:]...)
	if d := compare(t, base, jitter, opts); d.Result != report.ResultPass {
		t.Errorf("1%% slower: %s", d.Summary())
	}
	slower := loadRuns(t, 10, reporttest.Options{Seed: 400, Slowdown: map[string]float64{slow: 1.10}}, noise[2:]...)
	d = compare(t, base, slower, opts)
	if d.Result != report.ResultFail || d.Regressions != 1 {
		t.Fatalf("10%% slower: %s", d.Summary())
	}
	for fn, v := range verdicts(d) {
		want := report.VerdictOK
		if fn == slow {
			want = report.VerdictRegression
		}
		if v != want {
			t.Errorf("%s: verdict %q, want %q", fn, v, want)
		}
	}
	for _, r := range d.Rows {
		if r.Func != slow {
			continue
		}
		c := r.Changes[0]
		if c.Stat != report.StatP50 || c.EstLo != c.EstHi || c.EstLo < 0.08 || c.EstLo > 0.12 || !(c.Lo > 0.02 && c.Lo < c.EstLo && c.Hi > c.EstHi) {
			t.Errorf("%s: change %+v, want about +10%% inside an interval above +2%%", slow, c)
		}
		if r.BaseRuns != 10 || r.NewRuns != 10 || r.BaseSamples < 100 {
			t.Errorf("%s: runs %d/%d, samples %d", slow, r.BaseRuns, r.NewRuns, r.BaseSamples)
		}
	}
	// The other way round is an improvement, not a failure.
	if d := compare(t, slower, base, opts); d.Result != report.ResultPass || d.Improved != 1 {
		t.Errorf("reverse: %s", d.Summary())
	}
}

// Runs that scatter by 5% each way: the interval is as wide as the noise,
// so the same workload neither fails nor passes at 0.5%: no verdict, and
// the detectable change says what these runs can tell.
func TestDiffNoiseWidensTheInterval(t *testing.T) {
	wide := []float64{1, 1.05, 0.95, 1.04, 0.96, 1.03, 0.97, 1.02, 0.98, 1.01}
	base := loadRuns(t, 10, reporttest.Options{Seed: 1}, wide...)
	cand := loadRuns(t, 10, reporttest.Options{Seed: 2}, wide[1:]...)
	d := compare(t, base, cand, strict)
	if d.Result != report.ResultNoVerdict || d.Regressions != 0 || !strings.Contains(d.Summary(), "detectable change +") {
		t.Fatalf("noise alone: %s", d.Summary())
	}
	for _, r := range d.Rows {
		if c := r.Changes[0]; !(c.Lo < -0.02 && c.Hi > 0.02) {
			t.Errorf("%s: interval [%v, %v] narrower than the +-5%% noise", r.Func, c.Lo, c.Hi)
		}
	}
}

func TestDiffInsufficientData(t *testing.T) {
	base := loadRuns(t, 5, reporttest.Options{Seed: 1})
	cases := []struct {
		name  string
		base  []*report.RunData
		cand  []*report.RunData
		opts  report.DiffOptions
		cause string
	}{
		{"one run per side", base[:1], loadRuns(t, 1, reporttest.Options{Seed: 2}), defaults, "too few runs"},
		{"three runs per side", base[:3], loadRuns(t, 3, reporttest.Options{Seed: 3}), defaults, "too few runs"},
		{"few samples", base, loadRuns(t, 5, reporttest.Options{Seed: 4, Items: 6}), defaults, "below --min-samples"},
		{"low capture", base, loadRuns(t, 5, reporttest.Options{Seed: 5, DropEvery: 50}), defaults, "capture below --min-capture"},
		{"no final dump", base, loadRuns(t, 5, reporttest.Options{Seed: 6, NoFinal: true}), defaults, "run did not finalize"},
		{"a function only in base", base, loadRuns(t, 5, reporttest.Options{Seed: 7, Funcs: reporttest.DefaultFuncs[:2]}), defaults, "only in base"},
	}
	for _, c := range cases {
		d := compare(t, c.base, c.cand, c.opts)
		if d.Result != report.ResultInsufficient || d.SkippedBy[c.cause] == 0 {
			t.Errorf("%s: %s; want INSUFFICIENT DATA for %q (skipped: %v)", c.name, d.Summary(), c.cause, d.SkippedBy)
		}
		if !strings.Contains(d.Summary(), c.cause) {
			t.Errorf("%s: the summary does not say why: %s", c.name, d.Summary())
		}
	}
	// A 2% drop rate passes with --min-capture 95%.
	opts := defaults
	opts.MinCapture = 0.95
	if d := compare(t, base, loadRuns(t, 5, reporttest.Options{Seed: 5, DropEvery: 50}), opts); d.Result != report.ResultPass {
		t.Errorf("--min-capture 95%% with 98%% captured: %s", d.Summary())
	}
	// Insufficient rows do not hide a regression elsewhere: FAIL wins.
	slow := loadRuns(t, 5, reporttest.Options{Seed: 8, Funcs: reporttest.DefaultFuncs[:2], Slowdown: map[string]float64{reporttest.DefaultFuncs[0].Name: 1.3}})
	if d := compare(t, base, slow, defaults); d.Result != report.ResultFail || d.Skipped != 1 {
		t.Errorf("30%% slower with a row only in base: %s", d.Summary())
	}
}

func TestDiffRefusesDifferentModelsAndProfiles(t *testing.T) {
	h200 := loadRuns(t, 4, reporttest.Options{Seed: 1, Model: "NVIDIA H200"})
	h100 := loadRuns(t, 4, reporttest.Options{Seed: 2, Model: "NVIDIA H100 80GB HBM3"})
	if _, err := report.Compare(h200, h100, defaults); err == nil || !strings.Contains(err.Error(), "device models NVIDIA H100 80GB HBM3 differ from NVIDIA H200") {
		t.Errorf("H200 against H100: %v", err)
	}
	// Mixed within one side is refused too.
	if _, err := report.Compare(append(h200[:3:3], h100[0]), h200, defaults); err == nil {
		t.Errorf("a base side with an H100 run among H200 runs was compared")
	}
	opts := defaults
	opts.AllowMixed = true
	if d, err := report.Compare(h200, h100, opts); err != nil {
		t.Errorf("--allow-mixed: %v", err)
	} else if len(d.Warnings) != 1 || !strings.Contains(d.Warnings[0], "different GPU models") {
		t.Errorf("--allow-mixed H200 against H100: warnings %q, want one about the models", d.Warnings)
	}
	latency := loadRuns(t, 4, reporttest.Options{Seed: 3, Profile: "latency", Model: "NVIDIA H200"})
	if _, err := report.Compare(h200, latency, defaults); err == nil || !strings.Contains(err.Error(), `profile "latency" differs from "all-events"`) {
		t.Errorf("all-events against latency: %v", err)
	}
	// Outputs without models are compared, with a note.
	old := loadRuns(t, 4, reporttest.Options{Seed: 4})
	d := compare(t, old, loadRuns(t, 4, reporttest.Options{Seed: 5}), defaults)
	if len(d.Notes) != 1 || !strings.Contains(d.Notes[0], "do not record their device models") {
		t.Errorf("notes %v", d.Notes)
	}
}

// A side whose GPUs had their clocks held down (a power cap, thermal
// slowdown: NVML's clock event reasons in the device lines) gets a warning
// naming the reasons and the runs; an idle GPU's reasons are no slowdown.
func TestDiffWarnsOfThrottledGPUs(t *testing.T) {
	base := loadRuns(t, 4, reporttest.Options{Seed: 1, Model: "NVIDIA H200", ClockEventReasons: 0x1}) // idle only
	capped := loadRuns(t, 4, reporttest.Options{Seed: 2, Model: "NVIDIA H200", ClockEventReasons: 0x1 | 0x4 | 0x40})
	d := compare(t, base, capped, defaults)
	if len(d.Warnings) != 1 || !strings.Contains(d.Warnings[0], "held down (hw_thermal_slowdown, sw_power_cap) in 0 of 4 BASE runs and 4 of 4 NEW runs") {
		t.Errorf("warnings %q", d.Warnings)
	}
	var out strings.Builder
	if err := d.Write(&out, report.Table); err != nil || !strings.Contains(out.String(), "warning: GPU clocks were held down") {
		t.Errorf("table: %v\n%s", err, out.String())
	}
	if d := compare(t, base, base, defaults); len(d.Warnings) != 0 {
		t.Errorf("idle GPUs: warnings %q", d.Warnings)
	}
}

func TestDiffSkewStat(t *testing.T) {
	base := loadRuns(t, 6, reporttest.Options{Seed: 1, Jitter: 0.005}, noise...)
	skewed := loadRuns(t, 6, reporttest.Options{Seed: 2, Jitter: 0.005, ChannelSlowdown: map[int]float64{1: 1.2}}, noise[4:]...)
	// Medians barely move (one channel of four is slower), skew grows by 20% of the median.
	opts := defaults
	opts.Stats = []report.Stat{report.StatP50, report.StatSkew}
	opts.MaxRegress = 0.10
	d := compare(t, base, skewed, opts)
	if d.Result != report.ResultFail || d.Regressions != len(reporttest.DefaultFuncs) {
		t.Errorf("skew growth: %s", d.Summary())
	}
	for _, r := range d.Rows {
		for _, c := range r.Changes {
			if c.Stat == report.StatSkew && (!c.Additive || c.EstLo < 0.15 || c.EstLo > 0.25 || c.Verdict != report.VerdictRegression) {
				t.Errorf("%s skew: %+v, want about +20%% of the median", r.Func, c)
			}
			if c.Stat == report.StatP50 && c.Verdict != report.VerdictOK {
				t.Errorf("%s p50: %+v", r.Func, c)
			}
		}
	}
}

// writeAggRuns writes runs of an aggregate-only output: per run one file
// with a histogram (log2 buckets, the values given), a min and a max.
func writeAggRuns(t *testing.T, values []func(run int) []uint64, runs int) string {
	t.Helper()
	dir := t.TempDir()
	for r := 0; r < runs; r++ {
		var b strings.Builder
		fmt.Fprintf(&b, `{"type":"header","format":1,"profile":"latency","host":"h","pid":%d,"backend":"gpu","start_unix_ns":1}`+"\n", r)
		b.WriteString(`{"type":"clock","device":0,"model":"NVIDIA H200","host_unix_ns":1,"device_ns":1}` + "\n")
		var hist, mins, maxs []string
		for f, gen := range values {
			vs := gen(r)
			buckets := make([]uint64, 65)
			var sum uint64
			lo, hi := vs[0], vs[0]
			for _, v := range vs {
				i := 0
				for x := v; x > 0; x >>= 1 {
					i++
				}
				buckets[i]++
				sum += v
				lo, hi = min(lo, v), max(hi, v)
			}
			var bs []string
			var cum uint64
			for i, c := range buckets {
				cum += c
				le := `"+Inf"`
				if i < 64 {
					le = fmt.Sprint(uint64(1)<<i - 1)
				}
				bs = append(bs, fmt.Sprintf(`{"le":%s,"count":%d}`, le, cum))
			}
			key := fmt.Sprintf(`"funcId":%d,"func":"F%d","count":%d`, f, f, len(vs))
			hist = append(hist, fmt.Sprintf(`{%s,"sum":%d,"buckets":[%s]}`, key, sum, strings.Join(bs, ",")))
			mins = append(mins, fmt.Sprintf(`{%s,"min":%d}`, key, lo))
			maxs = append(maxs, fmt.Sprintf(`{%s,"max":%d}`, key, hi))
		}
		for _, a := range []struct{ name, kind, rows string }{{"duration_ns", "histogram", strings.Join(hist, ",")},
			{"fastest_ns", "min", strings.Join(mins, ",")}, {"slowest_ns", "max", strings.Join(maxs, ",")}} {
			fmt.Fprintf(&b, `{"type":"aggregate","hook":"latency","device":0,"name":%q,"kind":%q,"by":["funcId"],"final":true,"rows":[%s]}`+"\n", a.name, a.kind, a.rows)
		}
		b.WriteString(`{"type":"dump_stats","hook":"latency","device":0,"dump":1,"final":true,"matched_total":0,"records_total":0,"dropped_total":0}` + "\n")
		sub := filepath.Join(dir, fmt.Sprintf("run-%02d", r+1))
		if err := os.MkdirAll(sub, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(sub, "ncclhooks-h-1.jsonl"), []byte(b.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// gen gives n values around center*scale(run), spread +-10%.
func gen(center float64, n int, scale func(run int) float64) func(int) []uint64 {
	return func(run int) []uint64 {
		out := make([]uint64, n)
		for i := range out {
			out[i] = uint64(center * scale(run) * (0.9 + 0.2*float64(i)/float64(n)))
		}
		return out
	}
}

// Aggregate-only outputs: histogram quantiles are compared to their bucket
// and no finer, means (sum/count) and minima exactly; a kind the --stat
// list does not cover is "not compared" and holds nothing back.
func TestDiffOnDeviceAggregates(t *testing.T) {
	runScale := func(f float64) func(int) float64 {
		return func(run int) float64 { return f * noise[run%len(noise)] }
	}
	base := loadDir(t, writeAggRuns(t, []func(int) []uint64{gen(1300, 200, runScale(1)), gen(5000, 200, runScale(1))}, 20), false)
	slower := func(f float64) []*report.RunData {
		return loadDir(t, writeAggRuns(t, []func(int) []uint64{gen(1300, 200, runScale(f)), gen(5000, 200, runScale(1))}, 20), false)
	}
	all := report.DiffOptions{MaxRegress: 0.02, MinSamples: 30, MinCapture: 0.99,
		Stats: []report.Stat{report.StatP50, report.StatMean, report.StatMin}}
	find := func(d *report.Diff, agg, fn string, st report.Stat) report.Change {
		for _, r := range d.Rows {
			if r.Aggregate == agg && r.Func == fn {
				for _, c := range r.Changes {
					if c.Stat == st {
						return c
					}
				}
			}
		}
		t.Fatalf("no %s %s %s in %s", agg, fn, st, d.Summary())
		return report.Change{}
	}

	// 20% slower: the mean and the minimum see it; the p50 stays in
	// (1023, 2047] (1300 -> 1560), so the buckets cannot say more than
	// "somewhere from -50% to +100%".
	d := compare(t, base, slower(1.2), all)
	if d.Result != report.ResultFail {
		t.Fatalf("20%% slower: %s", d.Summary())
	}
	p50 := find(d, "duration_ns", "F0", report.StatP50)
	if !p50.Bucketed || p50.Verdict != report.VerdictInconclusive || float64(p50.Base.Lo) != 1023 || float64(p50.Base.Hi) != 2047 || float64(p50.Lo) > -0.4 || float64(p50.Hi) < 0.9 {
		t.Errorf("p50 from log2 buckets claims more than the buckets hold: %+v", p50)
	}
	for _, c := range []report.Change{find(d, "duration_ns", "F0", report.StatMean), find(d, "fastest_ns", "F0", report.StatMin)} {
		if c.Verdict != report.VerdictRegression || c.Bucketed || float64(c.EstLo) < 0.17 || float64(c.EstLo) > 0.23 {
			t.Errorf("20%% slower, %s: %+v", c.Stat, c)
		}
	}
	// The unchanged function's mean: the +-3% run noise, 20 runs a side and
	// 6 changes together reach 1%, so no verdict there; at 4% it passes.
	tight := all
	tight.MaxRegress = 0.01
	if c := find(compare(t, base, slower(1.2), tight), "duration_ns", "F1", report.StatMean); c.Verdict != report.VerdictInconclusive {
		t.Errorf("unchanged function at 1%%: %+v", c)
	}
	loose := all
	loose.MaxRegress = 0.04
	if c := find(compare(t, base, slower(1.2), loose), "duration_ns", "F1", report.StatMean); c.Verdict != report.VerdictOK {
		t.Errorf("unchanged function at 4%%: %+v", c)
	}
	if d.NotCompared != 2 { // slowest_ns rows: max is not asked for
		t.Errorf("not compared %d, want the 2 max rows: %s", d.NotCompared, d.Summary())
	}
	// 5% slower: the mean and the minimum, not the p50.
	d = compare(t, base, slower(1.05), all)
	if d.Result != report.ResultFail || find(d, "fastest_ns", "F0", report.StatMin).Verdict != report.VerdictRegression ||
		find(d, "duration_ns", "F0", report.StatP50).Verdict != report.VerdictInconclusive {
		t.Errorf("5%% slower: %s", d.Summary())
	}
	// 4x slower: the p50 moves two buckets up (1300 -> 5200 is in
	// (4095, 8191]) and then the buckets alone show it: at least +100%.
	p50only := all
	p50only.Stats = []report.Stat{report.StatP50}
	d = compare(t, base, slower(4), p50only)
	if c := find(d, "duration_ns", "F0", report.StatP50); d.Result != report.ResultFail || c.Verdict != report.VerdictRegression || float64(c.Lo) < 0.99 {
		t.Errorf("4x slower, p50 alone: %+v (%s)", c, d.Summary())
	}
	if d := compare(t, base, slower(2), p50only); d.Result != report.ResultNoVerdict {
		t.Errorf("2x slower, one bucket up: the buckets can exclude neither +0%% nor +2%%, so no verdict: %s", d.Summary())
	}
	// auto is the mean for histograms (and nothing for the min and max rows): it
	// sees the 5% that the bucketed p50 cannot.
	auto := all
	auto.Stats = nil
	d = compare(t, base, slower(1.05), auto)
	if c := find(d, "duration_ns", "F0", report.StatMean); d.Result != report.ResultFail || c.Verdict != report.VerdictRegression || d.NotCompared != 4 {
		t.Errorf("5%% slower, auto: %+v (%s)", c, d.Summary())
	}
	// A statistic no row has: nothing compared is no PASS.
	other := loose
	other.Stats = []report.Stat{report.StatSum}
	if d := compare(t, base, base, other); d.Result != report.ResultPass {
		t.Errorf("sum of an unchanged histogram: %s", d.Summary())
	}
	other.Stats = []report.Stat{report.StatSkew}
	if d := compare(t, base, base, other); d.Result != report.ResultInsufficient || d.Compared != 0 {
		t.Errorf("no row has skew: %s", d.Summary())
	}
}

// A hook that matched nothing gets no PASS.
func TestDiffHookThatMatchedNothing(t *testing.T) {
	dir := t.TempDir()
	for r := 0; r < 4; r++ {
		if _, _, err := reporttest.WriteRun(filepath.Join(dir, fmt.Sprintf("run-%d", r)), 1, reporttest.Options{Seed: uint64(r)}); err != nil {
			t.Fatal(err)
		}
		// A second hook whose when never held: dump_stats, nothing else.
		f, _ := filepath.Glob(filepath.Join(dir, fmt.Sprintf("run-%d", r), "*.jsonl"))
		fh, err := os.OpenFile(f[0], os.O_APPEND|os.O_WRONLY, 0)
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintln(fh, `{"type":"dump_stats","hook":"never","device":0,"dump":9,"final":true,"matched_total":0,"records_total":0,"dropped_total":0}`)
		fh.Close()
	}
	runs := loadDir(t, dir, false)
	d := compare(t, runs, runs, defaults)
	if d.Result != report.ResultInsufficient || d.SkippedBy["hook matched nothing"] != 1 {
		t.Fatalf("%s", d.Summary())
	}
	var buf bytes.Buffer
	if err := d.Write(&buf, report.Table); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(buf.String(), "never") || !strings.Contains(buf.String(), "hook matched nothing (no records, no aggregated values) in base run") {
		t.Errorf("table does not name the hook and why:\n%s", buf.String())
	}
}

func TestExpandRuns(t *testing.T) {
	dir := t.TempDir()
	if _, err := reporttest.WriteRuns(filepath.Join(dir, "set"), 3, 2, reporttest.Options{}); err != nil {
		t.Fatal(err)
	}
	runs, err := report.ExpandRuns(filepath.Join(dir, "set"))
	if err != nil || len(runs) != 3 || filepath.Base(runs[2]) != "run-03" {
		t.Errorf("a directory of runs: %v %v", runs, err)
	}
	one, err := report.ExpandRuns(runs[0])
	if err != nil || len(one) != 1 || one[0] != runs[0] {
		t.Errorf("one run's directory (two ranks): %v %v", one, err)
	}
	files, _ := filepath.Glob(filepath.Join(runs[0], "*.jsonl"))
	if r, err := report.ExpandRuns(files[0]); err != nil || len(r) != 1 {
		t.Errorf("a file: %v %v", r, err)
	}
	rd, err := report.LoadRun(runs[0], report.Options{}, false)
	if err != nil || rd.Files != 2 {
		t.Errorf("a run's ranks are merged: %+v %v", rd, err)
	}
	if _, err := report.ExpandRuns(t.TempDir()); err == nil || !strings.Contains(err.Error(), "holds no *.jsonl files") {
		t.Errorf("an empty directory: %v", err)
	}
}

func TestParseFraction(t *testing.T) {
	for in, want := range map[string]float64{"5%": 0.05, "0.05": 0.05, "0.5%": 0.005, " 10% ": 0.10, "0": 0, "0.5": 0.5, "150%": 1.5} {
		got, err := report.ParseFraction(in)
		if err != nil || got != want {
			t.Errorf("ParseFraction(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "x%", "-3%", "five", "5", "1", "12.5"} {
		if _, err := report.ParseFraction(bad); err == nil {
			t.Errorf("ParseFraction(%q) accepted", bad)
		}
	}
	if _, err := report.ParseFraction("5"); err == nil || !strings.Contains(err.Error(), "write 5% for 5 percent") {
		t.Errorf(`ParseFraction("5"): %v`, err)
	}
	if s := report.FractionText("0.05", 0.05); s != "5% (0.05 read as a fraction)" {
		t.Errorf("FractionText: %q", s)
	}
	if s := report.FractionText("5%", 0.05); s != "5%" {
		t.Errorf("FractionText: %q", s)
	}
	st, err := report.ParseStats("p50, P99,p50,min")
	if err != nil || len(st) != 3 || st[0] != report.StatP50 || st[1] != report.StatP99 || st[2] != report.StatMin {
		t.Errorf("ParseStats: %v %v", st, err)
	}
	if _, err := report.ParseStats("p50,p42"); err == nil || !strings.Contains(err.Error(), `"p42"`) {
		t.Errorf("ParseStats(p42): %v", err)
	}
}

func TestDiffMarkdownAndJSON(t *testing.T) {
	slow := reporttest.DefaultFuncs[0].Name
	base := loadRuns(t, 5, reporttest.Options{Seed: 5}, noise...)
	cand := loadRuns(t, 5, reporttest.Options{Seed: 6, Slowdown: map[string]float64{slow: 1.2}}, noise[2:]...)
	d := compare(t, base, cand, strict)
	if d.Comparisons != 3 || math.Abs(d.RowConfidence-(1-0.05/3)) > 1e-12 {
		t.Errorf("3 rows: %d comparisons, each at %v; want 3, each at 1-0.05/3", d.Comparisons, d.RowConfidence)
	}
	var md bytes.Buffer
	if err := d.Write(&md, report.Markdown); err != nil {
		t.Fatal(err)
	}
	out := md.String()
	first := strings.SplitN(out, "\n", 2)[0]
	if !strings.HasPrefix(first, "### ❌ ncclhooks diff: FAIL: 1 of 3 compared row(s) slower by more than 0.5% with 95% confidence over all 3 changes together (auto); 2 row(s) with no verdict") {
		t.Errorf("summary line %q", first)
	}
	for _, want := range []string{"| all | - | " + slow + " | all | p50 | 5/5 | ", "**regression**", "- base: 5 runs in `", "- threshold: 0.5%", "Hodges-Lehmann"} {
		if !strings.Contains(out, want) {
			t.Errorf("markdown lacks %q:\n%s", want, out)
		}
	}
	var js bytes.Buffer
	if err := d.Write(&js, report.JSON); err != nil {
		t.Fatal(err)
	}
	var back struct {
		Result string `json:"result"`
		Rows   []struct {
			Changes []struct {
				Lo any `json:"lo"`
			} `json:"changes"`
		} `json:"rows"`
	}
	if err := json.Unmarshal(js.Bytes(), &back); err != nil || back.Result != "FAIL" || len(back.Rows) != 3 {
		t.Errorf("JSON %v %+v:\n%s", err, back, js.String())
	}
}
