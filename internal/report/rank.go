package report

import (
	"math"
	"slices"
	"sync"
)

// The rank method of a diff: each run is one observation of a statistic
// (a run's p50, say), and the change between the base and the new runs is
// the shift of their logarithms, estimated by Hodges-Lehmann (the median of
// the m*n differences log(new_j) - log(base_i)) with the distribution-free
// confidence interval that inverts the two-sample Wilcoxon-Mann-Whitney
// test (Hollander, Wolfe and Chicken, Nonparametric Statistical Methods,
// 3rd ed., section 4.3; Bauer, JASA 67, 1972). It assumes only that the runs
// are independent and that a change shifts every run by the same factor;
// nothing about how the run-to-run noise is distributed. It is exact (no
// resampling, no seed) for up to maxExactPairs pairs of runs.

// maxExactPairs bounds m*n for the exact null distribution of U; above it
// the normal approximation is used.
const maxExactPairs = 10000

// mwNullCDF returns cdf[u] = P(U <= u), u = 0..m*n, for the Mann-Whitney
// statistic U = #{(i,j): y_j > x_i} of samples of sizes m and n from one
// continuous distribution. Recurrence on the largest of the m+n values: a y
// (probability n/(m+n)) exceeds all m x's, an x adds nothing:
// p(m,n,u) = n/(m+n) p(m,n-1,u-m) + m/(m+n) p(m-1,n,u).
func mwNullCDF(m, n int) []float64 {
	if m*n > maxExactPairs {
		return mwNormalCDF(m, n)
	}
	// prev[j] is p(i-1, j, .), cur[j] is p(i, j, .).
	prev := make([][]float64, n+1)
	for j := range prev {
		prev[j] = []float64{1} // p(0, j, 0) = 1
	}
	for i := 1; i <= m; i++ {
		cur := make([][]float64, n+1)
		cur[0] = []float64{1} // p(i, 0, 0) = 1
		for j := 1; j <= n; j++ {
			p := make([]float64, i*j+1)
			wy, wx := float64(j)/float64(i+j), float64(i)/float64(i+j)
			for u := range p {
				if u >= i && u-i < len(cur[j-1]) {
					p[u] += wy * cur[j-1][u-i]
				}
				if u < len(prev[j]) {
					p[u] += wx * prev[j][u]
				}
			}
			cur[j] = p
		}
		prev = cur
	}
	pdf := prev[n]
	cdf := make([]float64, len(pdf))
	var s float64
	for u, p := range pdf {
		s += p
		cdf[u] = s
	}
	return cdf
}

var nullCache sync.Map // [2]int{m, n} -> []float64

// nullCDF is mwNullCDF, computed once per pair of sizes.
func nullCDF(m, n int) []float64 {
	if v, ok := nullCache.Load([2]int{m, n}); ok {
		return v.([]float64)
	}
	cdf := mwNullCDF(m, n)
	nullCache.Store([2]int{m, n}, cdf)
	return cdf
}

// mwNormalCDF approximates P(U <= u) with a continuity correction.
func mwNormalCDF(m, n int) []float64 {
	mean := float64(m*n) / 2
	sd := math.Sqrt(float64(m*n*(m+n+1)) / 12)
	cdf := make([]float64, m*n+1)
	for u := range cdf {
		cdf[u] = 0.5 * math.Erfc(-(float64(u)+0.5-mean)/sd/math.Sqrt2)
	}
	return cdf
}

// hlRank returns k, the rank (1-based, among the m*n sorted pairwise
// differences) of the lower end of the two-sided interval at confidence
// level conf: the largest k with P(U <= k-1) <= (1-conf)/2. The interval is
// [d_(k), d_(mn+1-k)]. ok is false when no k exists: too few runs for the
// confidence asked (P(U <= 0) = 1/C(m+n, m) is then above (1-conf)/2).
func hlRank(m, n int, conf float64) (k int, ok bool) {
	alpha := (1 - conf) / 2
	cdf := nullCDF(m, n)
	for k < len(cdf) && cdf[k] <= alpha*(1+1e-9) {
		k++
	}
	return k, k >= 1
}

// minRunsFor returns the least number of runs per side (equal sides) that
// gives an interval at confidence conf.
func minRunsFor(conf float64) int {
	for r := 1; r < 1000; r++ {
		if _, ok := hlRank(r, r, conf); ok {
			return r
		}
	}
	return 1000
}

// interval is a value known to lie in [Lo, Hi]; Lo == Hi when exact
// (a histogram's quantile is known only to its bucket).
type interval struct{ Lo, Hi float64 }

// shift is the estimated change new/base - 1 and its confidence interval.
type shift struct {
	// Est is the Hodges-Lehmann estimate; EstLo < EstHi when the values are
	// bucket intervals (the estimate is then known only to lie between).
	EstLo, EstHi float64
	// Lo, Hi bound the change at the confidence level.
	Lo, Hi float64
}

// rankShift estimates the relative change between base and cand, whose
// values are intervals: the lower end of everything uses the least the new
// values can be and the most the base values can be, the upper end the
// other way round, so bucket resolution widens the interval and never
// narrows it. With additive it estimates the difference cand - base
// instead of the ratio. ok is false when there are too few runs for conf,
// or (for a ratio) a value is not positive.
func rankShift(base, cand []interval, conf float64, additive bool) (s shift, ok bool) {
	m, n := len(base), len(cand)
	if m == 0 || n == 0 {
		return shift{}, false
	}
	k, ok := hlRank(m, n, conf)
	if !ok {
		return shift{}, false
	}
	f, back := math.Log, math.Expm1 // ratios: shifts of the logarithms
	if additive {
		f, back = func(x float64) float64 { return x }, func(x float64) float64 { return x }
	}
	for _, v := range append(slices.Clip(base), cand...) {
		if !(v.Hi >= v.Lo) || !additive && !(v.Lo > 0) {
			return shift{}, false
		}
	}
	low := make([]float64, 0, m*n)  // least possible shifts
	high := make([]float64, 0, m*n) // greatest possible shifts
	for _, b := range base {
		for _, c := range cand {
			low = append(low, f(c.Lo)-f(b.Hi))
			high = append(high, f(c.Hi)-f(b.Lo))
		}
	}
	slices.Sort(low)
	slices.Sort(high)
	rel := back
	s = shift{EstLo: rel(median(low)), EstHi: rel(median(high)), Lo: rel(low[k-1]), Hi: rel(high[len(high)-k])}
	return s, true
}

// median of sorted values (the mean of the middle two for an even count).
func median(sorted []float64) float64 {
	n := len(sorted)
	if n%2 == 1 {
		return sorted[n/2]
	}
	return (sorted[n/2-1] + sorted[n/2]) / 2
}
