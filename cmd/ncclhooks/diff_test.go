package main

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/ncclhooks/ncclhooks/internal/report/reporttest"
)

func TestDiffCommandExitCodes(t *testing.T) {
	slow := reporttest.DefaultFuncs[2].Name
	base := outputsRun(t, 2, reporttest.Options{Seed: 10})
	jitter := outputsRun(t, 2, reporttest.Options{Seed: 20, Slowdown: map[string]float64{slow: 1.01}})
	slower := outputsRun(t, 2, reporttest.Options{Seed: 30, Slowdown: map[string]float64{slow: 1.10}})

	code, out, stderr := outputsCmd(runDiff, base, jitter)
	if code != diffPass || !strings.HasPrefix(out, "PASS: no row slower by more than 5% (p50,p99) in 3 compared row(s)") {
		t.Errorf("1%% jitter: exit %d\n%s%s", code, out, stderr)
	}
	code, out, stderr = outputsCmd(runDiff, base, slower, "--markdown")
	if code != diffRegression || !strings.HasPrefix(out, "### ❌ ncclhooks diff: FAIL: 1 of 3 compared row(s) slower by more than 5% (p50,p99)") ||
		!strings.Contains(out, "| all | "+slow+" | all | ") {
		t.Errorf("10%% slowdown: exit %d\n%s%s", code, out, stderr)
	}
	// A looser threshold lets the same slowdown pass.
	if code, out, _ := outputsCmd(runDiff, "--max-regress", "15%", base, slower); code != diffPass {
		t.Errorf("--max-regress 15%%: exit %d\n%s", code, out)
	}
	// Too few samples: no verdict, so no failure.
	code, out, _ = outputsCmd(runDiff, base, slower, "--min-samples", "100000", "--json")
	var js struct {
		Pass bool `json:"pass"`
		Rows []struct {
			Verdict string `json:"verdict"`
		} `json:"rows"`
	}
	if code != diffPass || json.Unmarshal([]byte(out), &js) != nil || !js.Pass || len(js.Rows) != 3 || js.Rows[0].Verdict != "insufficient data" {
		t.Errorf("--min-samples 100000: exit %d\n%s", code, out)
	}
	// Per channel, the slow function regresses on every channel.
	code, out, _ = outputsCmd(runDiff, base, slower, "--by-channel", "--stat", "p50")
	if code != diffRegression || strings.Count(out, "regression") != 1+4 {
		t.Errorf("--by-channel: exit %d\n%s", code, out)
	}
}

func TestDiffCommandUsageAndInputErrors(t *testing.T) {
	base := outputsRun(t, 1, reporttest.Options{})
	other := outputsRun(t, 1, reporttest.Options{Profile: "latency"})
	cases := []struct {
		args []string
		want string
	}{
		{[]string{base}, "usage: ncclhooks diff BASE NEW"},
		{[]string{base, base, "--stat", "p42"}, `--stat: unknown statistic "p42"`},
		{[]string{base, base, "--max-regress", "lots"}, `--max-regress: threshold "lots"`},
		{[]string{base, base, "--min-samples", "0"}, "--min-samples 0"},
		{[]string{base, t.TempDir()}, "new: "},
		{[]string{base, other}, `base profile "all-events" and new profile "latency" differ`},
	}
	for _, c := range cases {
		code, _, stderr := outputsCmd(runDiff, c.args...)
		if code != diffError || !strings.Contains(stderr, c.want) {
			t.Errorf("diff %v: exit %d, stderr %q; want 2 and %q", c.args, code, stderr, c.want)
		}
	}
}
