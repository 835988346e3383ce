package report

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// The null distribution of U, checked against counting every one of the
// C(m+n, m) equally likely orders of m base and n new values.
func TestMannWhitneyNullDistributionByEnumeration(t *testing.T) {
	for m := 1; m <= 7; m++ {
		for n := 1; n <= 7; n++ {
			counts := make([]float64, m*n+1)
			total := 0.0
			// Every subset of the m+n ranks that the base values take.
			for mask := 0; mask < 1<<(m+n); mask++ {
				if popcount(mask) != m {
					continue
				}
				// U: pairs (base, new) with the new value ranked higher.
				u, basesBelow := 0, 0
				for pos := 0; pos < m+n; pos++ {
					if mask&(1<<pos) != 0 {
						basesBelow++
					} else {
						u += basesBelow
					}
				}
				counts[u]++
				total++
			}
			cdf := mwNullCDF(m, n)
			acc := 0.0
			for u := range counts {
				acc += counts[u]
				if want := acc / total; math.Abs(cdf[u]-want) > 1e-12 {
					t.Fatalf("m=%d n=%d: P(U <= %d) = %v, enumeration gives %v", m, n, u, cdf[u], want)
				}
			}
		}
	}
}

func popcount(x int) int {
	n := 0
	for ; x != 0; x &= x - 1 {
		n++
	}
	return n
}

// refShift is a straightforward Hodges-Lehmann interval: every pairwise log
// ratio, sorted; the interval's rank found by counting orders (the exact
// null distribution by enumeration) rather than by the recurrence.
func refShift(base, cand []float64, conf float64) (est, lo, hi float64, ok bool) {
	m, n := len(base), len(cand)
	var d []float64
	for _, b := range base {
		for _, c := range cand {
			d = append(d, math.Log(c/b))
		}
	}
	slices.Sort(d)
	// P(U <= u) by enumeration.
	counts := make([]float64, m*n+1)
	total := 0.0
	for mask := 0; mask < 1<<(m+n); mask++ {
		if popcount(mask) != m {
			continue
		}
		u, below := 0, 0
		for pos := 0; pos < m+n; pos++ {
			if mask&(1<<pos) != 0 {
				below++
			} else {
				u += below
			}
		}
		counts[u]++
		total++
	}
	k, acc := 0, 0.0
	for u := 0; u <= m*n; u++ {
		acc += counts[u]
		if acc/total > (1-conf)/2+1e-12 {
			break
		}
		k = u + 1
	}
	if k == 0 {
		return 0, 0, 0, false
	}
	var mid float64
	if len(d)%2 == 1 {
		mid = d[len(d)/2]
	} else {
		mid = (d[len(d)/2-1] + d[len(d)/2]) / 2
	}
	return math.Exp(mid) - 1, math.Exp(d[k-1]) - 1, math.Exp(d[len(d)-k]) - 1, true
}

func TestRankShiftMatchesReference(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for trial := 0; trial < 300; trial++ {
		m, n := 2+rng.IntN(7), 2+rng.IntN(7)
		conf := []float64{0.8, 0.9, 0.95, 0.99}[rng.IntN(4)]
		var base, cand []float64
		var bi, ci []interval
		for i := 0; i < m; i++ {
			v := 1000 * (1 + 0.1*rng.NormFloat64()*0.3)
			base = append(base, v)
			bi = append(bi, interval{v, v})
		}
		shift := 1 + 0.1*rng.Float64()
		for i := 0; i < n; i++ {
			v := shift * 1000 * (1 + 0.1*rng.NormFloat64()*0.3)
			cand = append(cand, v)
			ci = append(ci, interval{v, v})
		}
		est, lo, hi, refOK := refShift(base, cand, conf)
		s, ok := rankShift(bi, ci, conf, false)
		if ok != refOK {
			t.Fatalf("m=%d n=%d conf=%v: ok %v, reference %v", m, n, conf, ok, refOK)
		}
		if !ok {
			continue
		}
		for _, c := range [][3]float64{{s.EstLo, est, 0}, {s.EstHi, est, 0}, {s.Lo, lo, 0}, {s.Hi, hi, 0}} {
			if math.Abs(c[0]-c[1]) > 1e-9 {
				t.Fatalf("m=%d n=%d conf=%v: shift %+v, reference est %v [%v, %v]", m, n, conf, s, est, lo, hi)
			}
		}
	}
}

// Over many pairs of samples with a known ratio, the interval holds it at
// least as often as its confidence says (the exact interval is
// conservative: discrete ranks); a broken interval would not.
func TestRankIntervalCoverage(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	for _, c := range []struct {
		m, n int
		conf float64
	}{{10, 10, 0.95}, {5, 8, 0.9}, {20, 20, 0.99}} {
		const trials = 4000
		const ratio = 1.05
		covered, below := 0, 0
		for tr := 0; tr < trials; tr++ {
			var b, n []interval
			// Heavy-tailed run-to-run noise: lognormal with outliers.
			draw := func(scale float64) float64 {
				v := scale * math.Exp(0.05*rng.NormFloat64())
				if rng.IntN(10) == 0 {
					v *= 1.5
				}
				return v
			}
			for i := 0; i < c.m; i++ {
				v := draw(1000)
				b = append(b, interval{v, v})
			}
			for i := 0; i < c.n; i++ {
				v := draw(1000 * ratio)
				n = append(n, interval{v, v})
			}
			s, ok := rankShift(b, n, c.conf, false)
			if !ok {
				t.Fatalf("%+v: no interval", c)
			}
			if s.Lo <= ratio-1 && ratio-1 <= s.Hi {
				covered++
			}
			if s.Lo > ratio-1 {
				below++ // the case that fails a CI job wrongly
			}
		}
		got := float64(covered) / trials
		if got < c.conf-0.01 || got > 1-(1-c.conf)/4 {
			t.Errorf("%+v: the interval held the true change in %.1f%% of %d trials, want about %.0f%% or a little more", c, 100*got, trials, 100*c.conf)
		}
		if f := float64(below) / trials; f > (1-c.conf)/2+0.01 {
			t.Errorf("%+v: lower end above the true change in %.1f%% of trials, want at most %.1f%%", c, 100*f, 100*(1-c.conf)/2)
		}
	}
}

// Bucketed values widen the interval to every value the buckets allow.
func TestRankShiftBuckets(t *testing.T) {
	bucket := func(lo, hi float64, n int) []interval {
		out := make([]interval, n)
		for i := range out {
			out[i] = interval{lo, hi}
		}
		return out
	}
	// Every run's p50 in (1023, 2047] on both sides: anything from -50% to
	// +100% is possible, nothing is shown.
	s, ok := rankShift(bucket(1023, 2047, 5), bucket(1023, 2047, 5), 0.95, false)
	if !ok || math.Abs(s.Lo-(1023.0/2047-1)) > 1e-12 || math.Abs(s.Hi-(2047.0/1023-1)) > 1e-12 || s.EstLo != s.Lo || s.EstHi != s.Hi {
		t.Errorf("same bucket: %+v", s)
	}
	// Two buckets up: at least 4095/2047 - 1, about +100%.
	s, ok = rankShift(bucket(1023, 2047, 5), bucket(4095, 8191, 5), 0.95, false)
	if !ok || math.Abs(s.Lo-(4095.0/2047-1)) > 1e-12 {
		t.Errorf("two buckets up: %+v", s)
	}
	// The neighbouring bucket: the change may be as small as 0.
	s, _ = rankShift(bucket(1023, 2047, 5), bucket(2047, 4095, 5), 0.95, false)
	if s.Lo != 0 {
		t.Errorf("next bucket: lower end %v, want 0", s.Lo)
	}
	// Too few runs for the confidence: no interval.
	if _, ok := rankShift(bucket(1, 2, 3), bucket(1, 2, 3), 0.95, false); ok {
		t.Errorf("3 runs per side gave a 95%% interval (needs C(6,3) = 20 >= 40 orders)")
	}
	if got := minRunsFor(0.95); got != 4 {
		t.Errorf("minRunsFor(95%%) = %d, want 4", got)
	}
}

// A diff fails when any of its rows does, so its confidence must hold for
// all rows together. 2000 simulated diffs of identical builds, 23 rows (the
// harness's functions) of 15 runs a side: with every interval at 95% some
// row's lower end lies above no change in a large share of them; at
// familyLevel, in at most the 2.5% the confidence allows.
func TestFamilyLevelBoundsFalseFailures(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 12))
	const trials, rows, runs, conf = 2000, 23, 15, 0.95
	falseFail := map[float64]int{}
	levels := []float64{conf, familyLevel(conf, rows)}
	for tr := 0; tr < trials; tr++ {
		// A run's load moves every row of it alike: the rows are correlated.
		load := func() []float64 {
			l := make([]float64, runs)
			for i := range l {
				l[i] = math.Exp(0.02 * rng.NormFloat64())
			}
			return l
		}
		bLoad, nLoad := load(), load()
		failed := map[float64]bool{}
		for r := 0; r < rows; r++ {
			var b, n []interval
			for i := 0; i < runs; i++ {
				v := 1000 * bLoad[i] * math.Exp(0.03*rng.NormFloat64())
				w := 1000 * nLoad[i] * math.Exp(0.03*rng.NormFloat64())
				b, n = append(b, interval{v, v}), append(n, interval{w, w})
			}
			for _, lv := range levels {
				s, ok := rankShift(b, n, lv, false)
				if !ok {
					t.Fatalf("%d runs a side: no interval at %v", runs, lv)
				}
				if s.Lo > 0 {
					failed[lv] = true
				}
			}
		}
		for lv := range failed {
			falseFail[lv]++
		}
	}
	perRow, family := float64(falseFail[conf])/trials, float64(falseFail[levels[1]])/trials
	if family > (1-conf)/2+0.01 {
		t.Errorf("intervals at %v for %d rows: a false FAIL in %.1f%% of %d diffs, want at most %.1f%%", levels[1], rows, 100*family, trials, 100*(1-conf)/2)
	}
	// What the correction is for: the rate per row, uncorrected.
	if perRow < 4*(1-conf)/2 {
		t.Errorf("intervals at %v per row: a false FAIL in only %.1f%% of diffs; the simulation no longer shows what the correction corrects", conf, 100*perRow)
	}
	t.Logf("false FAIL of identical builds, %d rows: %.1f%% per-row at %v, %.2f%% at %v", rows, 100*perRow, conf, 100*family, levels[1])
}

func TestFamilyLevel(t *testing.T) {
	for _, c := range []struct {
		conf float64
		m    int
		want float64
	}{{0.95, 0, 0.95}, {0.95, 1, 0.95}, {0.95, 2, 0.975}, {0.95, 23, 1 - 0.05/23}, {0.99, 10, 0.999}} {
		if got := familyLevel(c.conf, c.m); math.Abs(got-c.want) > 1e-12 {
			t.Errorf("familyLevel(%v, %d) = %v, want %v", c.conf, c.m, got, c.want)
		}
	}
	if got := levelText(1 - 0.05/23); got != "99.7826%" {
		t.Errorf("levelText: %q", got)
	}
	if got := levelText(1 - 0.95); got != "5%" {
		t.Errorf("levelText(1-0.95): %q", got)
	}
}
