package main

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ncclhooks/ncclhooks/internal/report/reporttest"
)

// runsDir writes n synthetic runs of two ranks each, with a run-wide noise.
func runsDir(t *testing.T, n int, o reporttest.Options) string {
	t.Helper()
	dir, err := reporttest.WriteRuns(t.TempDir(), n, 2, o, 1.0, 1.02, 0.99, 1.01, 0.98, 1.015)
	if err != nil {
		t.Fatal(err)
	}
	return dir
}

func TestDiffCommandExitCodes(t *testing.T) {
	slow := reporttest.DefaultFuncs[2].Name
	base := runsDir(t, 6, reporttest.Options{Seed: 10})
	jitter := runsDir(t, 6, reporttest.Options{Seed: 20, Slowdown: map[string]float64{slow: 1.005}})
	slower := runsDir(t, 6, reporttest.Options{Seed: 30, Slowdown: map[string]float64{slow: 1.10}})

	// 6 runs of +-2% noise cannot exclude +2%: no verdict, never PASS, and
	// the summary says what they could tell.
	code, out, stderr := outputsCmd(runDiff, base, jitter)
	if code != diffError || !strings.HasPrefix(out, "NO VERDICT (auto): 3 of 3 row(s) could be slower by more than 2% with 95% confidence") ||
		!strings.Contains(out, "; detectable change +") || !strings.Contains(out, "no verdict (the interval reaches +2.0%") {
		t.Errorf("0.5%% slower: exit %d\n%s%s", code, out, stderr)
	}
	if code, out, stderr := outputsCmd(runDiff, base, jitter, "--max-regress", "5%"); code != diffPass ||
		!strings.HasPrefix(out, "PASS: no row slower by more than 5% with 95% confidence over all 3 changes together in 3 compared row(s) (auto)") {
		t.Errorf("0.5%% slower at 5%%: exit %d\n%s%s", code, out, stderr)
	}
	code, out, stderr = outputsCmd(runDiff, base, slower, "--markdown")
	if code != diffRegression || !strings.HasPrefix(out, "### ❌ ncclhooks diff: FAIL: 1 of 3 compared row(s) slower by more than 2% with 95% confidence over all 3 changes together (auto)") ||
		!strings.Contains(out, "| all | - | "+slow+" | all | p50 | 6/6 |") {
		t.Errorf("10%% slowdown: exit %d\n%s%s", code, out, stderr)
	}
	// A looser threshold lets the same slowdown pass; it is said how the
	// flag was read.
	code, out, _ = outputsCmd(runDiff, "--max-regress", "0.15", base, slower)
	if code != diffPass || !strings.Contains(out, "threshold: 15% (0.15 read as a fraction)") {
		t.Errorf("--max-regress 0.15: exit %d\n%s", code, out)
	}
	if code, out, _ := outputsCmd(runDiff, "--max-regress", "15%", base, slower); code != diffPass || !strings.Contains(out, "threshold: 15%,") {
		t.Errorf("--max-regress 15%%: exit %d\n%s", code, out)
	}
	// Too few samples: no verdict, exit 2, and the JSON says why.
	code, out, _ = outputsCmd(runDiff, base, slower, "--min-samples", "100000", "--json")
	var js struct {
		Result    string         `json:"result"`
		Pass      bool           `json:"pass"`
		Skipped   int            `json:"skipped"`
		SkippedBy map[string]int `json:"skipped_by"`
		Rows      []struct {
			Verdict string `json:"verdict"`
		} `json:"rows"`
	}
	if code != diffError || json.Unmarshal([]byte(out), &js) != nil || js.Pass || js.Result != "INSUFFICIENT DATA" || js.Skipped != 3 ||
		js.SkippedBy["below --min-samples"] != 3 || js.Rows[0].Verdict != "insufficient data" {
		t.Errorf("--min-samples 100000: exit %d\n%s", code, out)
	}
	// Per channel, the slow function regresses on every channel.
	code, out, _ = outputsCmd(runDiff, base, slower, "--by-channel")
	if code != diffRegression || strings.Count(out, " regression") != 1+4 {
		t.Errorf("--by-channel: exit %d\n%s", code, out)
	}
	// Runs named one by one are the same runs.
	runs, _ := filepath.Glob(filepath.Join(slower, "run-*"))
	args := []string{"--base", base}
	for _, r := range runs {
		args = append(args, "--new", r)
	}
	if code, out, _ := outputsCmd(runDiff, args...); code != diffRegression || !strings.Contains(out, "new: 6 runs in") {
		t.Errorf("--new per run: exit %d\n%s", code, out)
	}
	// One run per side: no verdict, however different.
	code, out, _ = outputsCmd(runDiff, runs[0], filepath.Join(base, "run-01"))
	if code != diffError || !strings.Contains(out, "too few runs") || !strings.Contains(out, "needs at least 4 runs per side") {
		t.Errorf("one run per side: exit %d\n%s", code, out)
	}
}

func TestDiffCommandUsageAndInputErrors(t *testing.T) {
	base := runsDir(t, 4, reporttest.Options{})
	other := runsDir(t, 4, reporttest.Options{Profile: "latency"})
	// 5 runs a side: 3 rows compared together need them.
	h100 := runsDir(t, 5, reporttest.Options{Model: "NVIDIA H100"})
	h200 := runsDir(t, 5, reporttest.Options{Model: "NVIDIA H200"})
	cases := []struct {
		args []string
		want string
	}{
		{[]string{base}, "usage: ncclhooks diff BASE NEW"},
		{[]string{base, base, "--new", base}, "usage: ncclhooks diff BASE NEW"},
		{[]string{base, base, "--stat", "p42"}, `--stat: unknown statistic "p42"`},
		{[]string{base, base, "--max-regress", "lots"}, `--max-regress "lots": give a percentage`},
		{[]string{base, base, "--max-regress", "5"}, `--max-regress "5" is ambiguous: write 5% for 5 percent`},
		{[]string{base, base, "--confidence", "40%"}, "--confidence 40%: give a level from 50%"},
		{[]string{base, base, "--min-capture", "120%"}, "--min-capture 120%: at most 100%"},
		{[]string{base, base, "--min-samples", "0"}, "--min-samples 0"},
		{[]string{base, t.TempDir()}, "new: "},
		{[]string{base, other}, `profile "latency" differs from "all-events"`},
		{[]string{h200, h100}, "device models NVIDIA H100 differ from NVIDIA H200"},
	}
	for _, c := range cases {
		code, _, stderr := outputsCmd(runDiff, c.args...)
		if code != diffError || !strings.Contains(stderr, c.want) {
			t.Errorf("diff %v: exit %d, stderr %q; want 2 and %q", c.args, code, stderr, c.want)
		}
	}
	if code, _, stderr := outputsCmd(runDiff, h200, h100, "--allow-mixed", "--max-regress", "50%"); code != diffPass {
		t.Errorf("--allow-mixed: exit %d: %s", code, stderr)
	}
}
