package report_test

import (
	"math"
	"testing"

	"github.com/ncclhooks/ncclhooks/internal/report"
	"github.com/ncclhooks/ncclhooks/internal/report/reporttest"
)

// TestDiffAtExactlyTheThreshold: runs whose every work item takes 20000 ns
// against runs at 21000 ns (+5% exactly) and 19000 ns (-5% exactly). The
// Hodges-Lehmann estimate and both ends of its interval are then the change
// itself. A row fails only when the whole interval lies above
// --max-regress and passes only when it lies below, so +5% at --max-regress
// 5% has no verdict (it cannot exclude the threshold), and fails at 4.9%;
// -5% is an improvement only below -5%, so at 5% it is ok, and at 4.9%
// improved. (The ratio is computed through logarithms, whose
// rounding put an exact +5% at 5.000000000000016%: a FAIL.)
func TestDiffAtExactlyTheThreshold(t *testing.T) {
	fn := reporttest.Func{ID: 12, Name: "AllReduce_Sum_f32_RING_LL", BaseNs: 20000.5} // floored: 20000, 21000, 19000
	runs := func(seed uint64, factor float64) []*report.RunData {
		o := reporttest.Options{Funcs: []reporttest.Func{fn}, Jitter: 1e-9, Seed: seed, Slowdown: map[string]float64{fn.Name: factor}}
		return loadRuns(t, 5, o)
	}
	base, up, down := runs(1, 1), runs(2, 1.05), runs(3, 0.95)
	for _, tt := range []struct {
		name      string
		cand      []*report.RunData
		threshold string
		change    float64
		want      report.Verdict
	}{
		{"+5% at 5%", up, "5%", 0.05, report.VerdictInconclusive},
		{"+5% at 5.1%", up, "5.1%", 0.05, report.VerdictOK},
		{"+5% at 4.9%", up, "4.9%", 0.05, report.VerdictRegression},
		{"-5% at 5%", down, "5%", -0.05, report.VerdictOK},
		{"-5% at 4.9%", down, "4.9%", -0.05, report.VerdictImproved},
	} {
		opts := defaults
		var err error
		if opts.MaxRegress, err = report.ParseFraction(tt.threshold); err != nil {
			t.Fatal(err)
		}
		d := compare(t, base, tt.cand, opts)
		if len(d.Rows) != 1 || len(d.Rows[0].Changes) != 1 {
			t.Fatalf("%s: rows %+v", tt.name, d.Rows)
		}
		c := d.Rows[0].Changes[0]
		near := func(v float64) bool { return math.Abs(v-tt.change) < 1e-12 }
		if !c.Defined || !near(float64(c.EstLo)) || !near(float64(c.EstHi)) || !near(float64(c.Lo)) || !near(float64(c.Hi)) {
			t.Fatalf("%s: change %+v, want the estimate and the interval at %v", tt.name, c, tt.change)
		}
		if c.Verdict != tt.want || d.Rows[0].Verdict != tt.want {
			t.Errorf("%s: verdict %q (row %q), want %q; %s", tt.name, c.Verdict, d.Rows[0].Verdict, tt.want, d.Summary())
		}
		if wantFail := tt.want == report.VerdictRegression; (d.Result == report.ResultFail) != wantFail {
			t.Errorf("%s: result %q", tt.name, d.Result)
		}
	}
}
