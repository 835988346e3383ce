package report_test

import (
	"bytes"
	"strings"
	"testing"

	"github.com/ncclhooks/ncclhooks/internal/report"
	"github.com/ncclhooks/ncclhooks/internal/report/reporttest"
)

func loadRun(t *testing.T, ranks int, o reporttest.Options) *report.Report {
	t.Helper()
	dir := t.TempDir()
	if _, _, err := reporttest.WriteRun(dir, ranks, o); err != nil {
		t.Fatal(err)
	}
	rep, err := report.Load([]string{dir}, report.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return rep
}

func verdicts(d *report.Diff) map[string]report.Verdict {
	m := map[string]report.Verdict{}
	for _, r := range d.Rows {
		if r.Channel < 0 {
			m[r.Func] = r.Verdict
		}
	}
	return m
}

func TestDiffCatchesPlantedSlowdownNotJitter(t *testing.T) {
	slow := reporttest.DefaultFuncs[1].Name
	base := loadRun(t, 2, reporttest.Options{Seed: 100})
	opts := report.DiffOptions{MaxRegress: 0.05, MinSamples: 30}

	jitter := loadRun(t, 2, reporttest.Options{Seed: 200, Slowdown: map[string]float64{slow: 1.01}})
	d := report.Compare(base, jitter, opts)
	if !d.Pass || d.Regressions != 0 {
		t.Errorf("1%% jitter failed the diff: %s", d.Summary())
	}
	if d.Compared != len(reporttest.DefaultFuncs) {
		t.Errorf("compared %d rows, want %d", d.Compared, len(reporttest.DefaultFuncs))
	}

	slower := loadRun(t, 2, reporttest.Options{Seed: 300, Slowdown: map[string]float64{slow: 1.10}})
	d = report.Compare(base, slower, opts)
	if d.Pass || d.Regressions != 1 {
		t.Fatalf("10%% slowdown: %s", d.Summary())
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
		for _, c := range r.Changes {
			if c.Delta < 0.08 || c.Delta > 0.12 {
				t.Errorf("%s %s: delta %.3f, want about 0.10", slow, c.Stat, c.Delta)
			}
		}
	}

	// The other direction is an improvement, not a failure.
	d = report.Compare(slower, base, opts)
	if !d.Pass || d.Improved != 1 {
		t.Errorf("reverse diff: %s", d.Summary())
	}
}

func TestDiffInsufficientDataAndOneSidedRows(t *testing.T) {
	base := loadRun(t, 1, reporttest.Options{Seed: 1, Items: 30}) // 10 items per function per channel
	cand := loadRun(t, 1, reporttest.Options{Seed: 2, Items: 30, Slowdown: map[string]float64{reporttest.DefaultFuncs[0].Name: 1.5},
		Funcs: reporttest.DefaultFuncs[:2]})
	d := report.Compare(base, cand, report.DiffOptions{MaxRegress: 0.05, MinSamples: 50, ByChannel: true})
	if !d.Pass {
		t.Errorf("rows below --min-samples gave a verdict: %s", d.Summary())
	}
	v := verdicts(d)
	if v[reporttest.DefaultFuncs[0].Name] != report.VerdictInsufficient {
		t.Errorf("50%% slower with 40 samples: verdict %q, want insufficient data", v[reporttest.DefaultFuncs[0].Name])
	}
	if v[reporttest.DefaultFuncs[2].Name] != report.VerdictOnlyBase {
		t.Errorf("function missing from new: %q", v[reporttest.DefaultFuncs[2].Name])
	}
	channelRows := 0
	for _, r := range d.Rows {
		if r.Channel >= 0 {
			channelRows++
		}
	}
	if channelRows != 4*3 {
		t.Errorf("%d channel rows with ByChannel, want 12", channelRows)
	}
	// With enough samples allowed, the same data is a regression.
	d = report.Compare(base, cand, report.DiffOptions{MaxRegress: 0.05, MinSamples: 10})
	if d.Pass {
		t.Errorf("50%% slowdown with --min-samples 10 passed")
	}
}

func TestDiffSkewStat(t *testing.T) {
	base := loadRun(t, 1, reporttest.Options{Seed: 1, Jitter: 0.005})
	skewed := loadRun(t, 1, reporttest.Options{Seed: 2, Jitter: 0.005, ChannelSlowdown: map[int]float64{1: 1.2}})
	// Medians barely move (one channel of four is slower), skew grows by 20% of the median.
	opts := report.DiffOptions{Stats: []report.Stat{report.StatP50, report.StatSkew}, MaxRegress: 0.10, MinSamples: 30}
	d := report.Compare(base, skewed, opts)
	if d.Pass || d.Regressions != len(reporttest.DefaultFuncs) {
		t.Errorf("skew growth: %s", d.Summary())
	}
	opts.Stats = []report.Stat{report.StatP50}
	if d := report.Compare(base, skewed, opts); !d.Pass {
		t.Errorf("p50 alone should not see a one-channel slowdown: %s", d.Summary())
	}
}

func TestParseFlags(t *testing.T) {
	for in, want := range map[string]float64{"5%": 0.05, "5": 0.05, "0.5%": 0.005, " 10% ": 0.10} {
		got, err := report.ParseThreshold(in)
		if err != nil || got != want {
			t.Errorf("ParseThreshold(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "x%", "-3%", "five"} {
		if _, err := report.ParseThreshold(bad); err == nil {
			t.Errorf("ParseThreshold(%q) accepted", bad)
		}
	}
	st, err := report.ParseStats("p50, P99,p50")
	if err != nil || len(st) != 2 || st[0] != report.StatP50 || st[1] != report.StatP99 {
		t.Errorf("ParseStats: %v %v", st, err)
	}
	if _, err := report.ParseStats("p50,p42"); err == nil || !strings.Contains(err.Error(), `"p42"`) {
		t.Errorf("ParseStats(p42): %v", err)
	}
}

func TestDiffMarkdown(t *testing.T) {
	slow := reporttest.DefaultFuncs[0].Name
	base := loadRun(t, 1, reporttest.Options{Seed: 5})
	cand := loadRun(t, 1, reporttest.Options{Seed: 6, Slowdown: map[string]float64{slow: 1.2}})
	var md bytes.Buffer
	d := report.Compare(base, cand, report.DiffOptions{MaxRegress: 0.05, MinSamples: 30})
	if err := d.Write(&md, report.Markdown); err != nil {
		t.Fatal(err)
	}
	out := md.String()
	first := strings.SplitN(out, "\n", 2)[0]
	if !strings.HasPrefix(first, "### ❌ ncclhooks diff: FAIL: 1 of 3") {
		t.Errorf("summary line %q", first)
	}
	if !strings.Contains(out, "| all | "+slow+" | all | ") || !strings.Contains(out, "**regression**") {
		t.Errorf("markdown table:\n%s", out)
	}
}
