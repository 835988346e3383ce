package main

import (
	"strings"
	"testing"
)

// Issue 34's repro through the real plugin and CLI: 10 runs of the README's
// latency profile against 10 with every work item 50% longer. (6 is the
// least that gives 23 rows' intervals that hold together at 95%, but then
// each interval ends at the most extreme pair of runs, so one preempted
// run's mean leaves its row no verdict: with 6, a loaded clean-clone run
// failed the "most means regressed" check below.) The default
// statistic of a histogram is its mean, which shows the slowdown (FAIL);
// its log2 p50 cannot tell a change inside its bucket from none, so under
// --stat p50 it is no verdict, never the PASS it was; and 10 identical runs
// against 10 cannot exclude 0.5%, so they are no verdict too.
func TestDiffNoFalsePassOnTheLatencyExample(t *testing.T) {
	const prof = "../../examples/latency.yaml"
	dirs := harnessRuns(t, prof, 10, nil, []string{"--slowdown", "1.5"}, nil)
	base, slow, same := dirs[0], dirs[1], dirs[2]

	// A run whose mean a preemption took far up can leave a row's interval
	// reaching the threshold (no verdict); none may pass.
	d, code, out := diffJSON(t, base, slow)
	if code != 1 || d.Result != "FAIL" || d.Regressions < 12 || d.Compared != d.Regressions {
		t.Errorf("50%% slower, defaults: exit %d, %s, %d regressions of %d compared (%d no verdict), want 1 (FAIL), most means regressed and none ok:\n%.3000s",
			code, d.Result, d.Regressions, d.Compared, d.NoVerdict, out)
	}
	for _, r := range d.Rows {
		if len(r.Changes) > 0 && (r.Changes[0].Stat != "mean" || asFloat(r.Changes[0].EstLo) < 0.25) {
			t.Errorf("%s: %+v, want the mean, about +50%%", r.Func, r.Changes[0])
		}
	}
	d, code, out = diffJSON(t, base, slow, "--stat", "p50")
	if code != 2 || d.Result != "NO VERDICT" || d.Compared != 0 {
		t.Errorf("50%% slower, p50 of log2 buckets: exit %d, want 2 (NO VERDICT):\n%.3000s", code, out)
	}
	text, code := cli(t, "diff", base, same, "--max-regress", "0.5%")
	if code != 2 || !strings.HasPrefix(text, "NO VERDICT (auto): ") || !strings.Contains(text, "; detectable change +") {
		t.Errorf("identical runs at 0.5%%: exit %d, want 2 (NO VERDICT) with the detectable change:\n%.3000s", code, text)
	}
}
