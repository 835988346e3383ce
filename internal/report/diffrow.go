package report

// // one row of a diff: which runs have it, what keeps it from a verdict, and each statistic's change with its interval.

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
)

// problem is why a hook's rows get no verdict.
type problem struct{ cause, text string }

// hookProblems finds, per hook, the first reason its numbers cannot be
// trusted: missing from a run, matched nothing, a run that did not
// finalize, or a capture ratio below the minimum.
func hookProblems(base, cand []*RunData, opts DiffOptions) map[string]problem {
	names := map[string]bool{}
	for _, r := range append(slices.Clip(base), cand...) {
		for h := range r.Hooks {
			names[h] = true
		}
	}
	out := map[string]problem{}
	for h := range names {
		for _, side := range []struct {
			name string
			runs []*RunData
		}{{"base", base}, {"new", cand}} {
			for _, r := range side.runs {
				if p, bad := runProblem(r, h, opts); bad {
					p.text += " in " + side.name + " run " + r.Input
					out[h] = p
					break
				}
			}
			if _, bad := out[h]; bad {
				break
			}
		}
	}
	return out
}

func runProblem(r *RunData, hook string, opts DiffOptions) (problem, bool) {
	h := r.Hooks[hook]
	switch {
	case h == nil:
		return problem{causeHookGone, "hook missing"}, true
	case h.refused != "":
		return problem{causeRefused, h.refused}, true
	case !h.hasCapture:
		return problem{causeNoStats, "no dump_stats lines: the capture ratio is unknown (did the run dump?)"}, true
	case !h.capture.Final:
		return problem{causeFinal, "no final dump (the run was cut short)"}, true
	case h.records == 0 && h.aggCount == 0:
		return problem{causeNothing, "hook matched nothing (no records, no aggregated values)"}, true
	case h.capture.Ratio < opts.MinCapture:
		return problem{causeCapture, fmt.Sprintf("capture %s < %s (%d records, %d dropped)",
			pctText(h.capture.Ratio), pctText(opts.MinCapture), h.capture.Records, h.capture.Dropped)}, true
	}
	return problem{}, false
}

// cause is the SkippedBy key of an insufficient row.
func (r *DiffRow) cause() string {
	if i := strings.Index(r.Reason, ": "); i > 0 {
		return r.Reason[:i]
	}
	return r.Reason
}

// resolve turns auto into the row's statistic: the p50 of work items, the
// mean of a histogram or sum aggregate (from its exact sum and count), and
// nothing for the other kinds.
func resolve(k rowKey, st Stat) (Stat, bool) {
	if st != StatAuto {
		return st, applies(k, st)
	}
	switch {
	case k.aggregate == "":
		return StatP50, true
	case k.kind == "histogram" || k.kind == "sum":
		return StatMean, true
	}
	return "", false
}

// applies says whether a row from this source has statistic st.
func applies(k rowKey, st Stat) bool {
	if k.aggregate == "" {
		return st != StatSkew || k.channel == "all"
	}
	switch k.kind {
	case "histogram":
		return slices.Contains([]Stat{StatP50, StatP90, StatP99, StatMean, StatSum, StatCount}, st)
	case "sum":
		return slices.Contains([]Stat{StatMean, StatSum, StatCount}, st)
	case "min":
		return st == StatMin || st == StatCount
	case "max":
		return st == StatMax || st == StatCount
	case "count":
		return st == StatCount
	}
	return false
}

func compareRow(k rowKey, base, cand []*RunData, p problem, opts DiffOptions) DiffRow {
	row := DiffRow{Hook: k.hook, Aggregate: k.aggregate, Kind: k.kind, Func: k.fn, Channel: k.channel}
	bRows, cRows := present(base, k), present(cand, k)
	row.BaseRuns, row.NewRuns = len(bRows), len(cRows)
	row.BaseSamples, row.NewSamples = fewest(bRows), fewest(cRows)
	skip := func(cause, text string) DiffRow {
		row.Verdict, row.Reason = VerdictInsufficient, cause+": "+text
		return row
	}
	var stats []Stat
	for _, st := range opts.Stats {
		if r, ok := resolve(k, st); ok && !slices.Contains(stats, r) {
			stats = append(stats, r)
		}
	}
	switch {
	case p.cause != "":
		return skip(p.cause, p.text)
	case len(stats) == 0:
		row.Verdict = VerdictNotCompared
		row.Reason = fmt.Sprintf("none of --stat %s exists for %s", joinStats(opts.Stats), rowSource(k))
		return row
	case len(cRows) == 0:
		return skip(causeOnlyBase, "the new runs have no such row")
	case len(bRows) == 0:
		return skip(causeOnlyNew, "the base runs have no such row")
	case len(bRows) < len(base) || len(cRows) < len(cand):
		return skip(causeSomeRuns, fmt.Sprintf("in %d of %d base and %d of %d new runs", len(bRows), len(base), len(cRows), len(cand)))
	case row.BaseSamples < uint64(opts.MinSamples) || row.NewSamples < uint64(opts.MinSamples):
		return skip(causeSamples, fmt.Sprintf("a run has %d < %d samples", min(row.BaseSamples, row.NewSamples), opts.MinSamples))
	}
	if _, ok := hlRank(len(bRows), len(cRows), opts.Confidence); !ok {
		need := fmt.Sprintf("a %s interval needs at least %d runs per side", pctText(opts.Confidence), minRunsFor(opts.Confidence))
		if opts.family > 1 {
			need = fmt.Sprintf("%d changes compared together take each interval at %s, which needs at least %d runs per side (or compare fewer rows: --stat, the hooks' functions)",
				opts.family, levelText(opts.Confidence), minRunsFor(opts.Confidence))
		}
		return skip(causeRuns, fmt.Sprintf("%d base and %d new runs; %s", len(bRows), len(cRows), need))
	}
	n := map[Verdict]int{}
	var reasons []string
	for _, st := range stats {
		c := compareStat(st, bRows, cRows, opts)
		row.Changes = append(row.Changes, c)
		n[c.Verdict]++
		if c.Verdict == VerdictInsufficient || c.Verdict == VerdictInconclusive {
			reasons = append(reasons, string(st)+": "+c.Reason)
		}
	}
	row.Reason = strings.Join(reasons, "; ")
	switch {
	case n[VerdictRegression] > 0:
		row.Verdict = VerdictRegression
	case n[VerdictInconclusive] > 0:
		row.Verdict = VerdictInconclusive
	case n[VerdictOK]+n[VerdictImproved] == 0:
		return skip(causeValue, row.Reason)
	case n[VerdictOK] == 0:
		row.Verdict = VerdictImproved
	default:
		row.Verdict = VerdictOK
	}
	return row
}

func rowSource(k rowKey) string {
	if k.aggregate == "" {
		return "work items"
	}
	return fmt.Sprintf("a %s aggregate", k.kind)
}

func present(runs []*RunData, k rowKey) []*runRow {
	var out []*runRow
	for _, r := range runs {
		if rr := r.rows[k]; rr != nil {
			out = append(out, rr)
		}
	}
	return out
}

func fewest(rows []*runRow) uint64 {
	if len(rows) == 0 {
		return 0
	}
	m := rows[0].samples
	for _, r := range rows[1:] {
		m = min(m, r.samples)
	}
	return m
}

// changeTolerance is how far from the threshold a change still counts as at
// it (neither above nor below: no verdict). Ratios are shifts of
// logarithms, and log and expm1 round: an exact +5% came out as
// 5.000000000000016%, a FAIL at --max-regress 5%.
const changeTolerance = 1e-9

// compareStat compares one statistic of a row over the runs.
func compareStat(st Stat, bRows, cRows []*runRow, opts DiffOptions) Change {
	c := Change{Stat: st, Additive: st == StatSkew, Verdict: VerdictInsufficient}
	values := func(rows []*runRow) ([]interval, string) {
		var out []interval
		for _, r := range rows {
			v, ok := r.vals[st]
			if !ok {
				why := r.notes[st]
				if why == "" {
					why = "no value"
				}
				return nil, why
			}
			if _, b := r.bucket[st]; b {
				c.Bucketed = true
			}
			out = append(out, v)
		}
		return out, ""
	}
	bv, why := values(bRows)
	if why != "" {
		c.Reason = why
		return c
	}
	cv, why := values(cRows)
	if why != "" {
		c.Reason = why
		return c
	}
	c.Base, c.New = sideValue(bv), sideValue(cv)
	if !c.Additive {
		for _, v := range append(slices.Clip(bv), cv...) {
			if !(v.Lo > 0) {
				c.Reason = "a value is 0: no relative change"
				if c.Bucketed {
					c.Reason = "a quantile lies in the first histogram bucket, which has no lower bound: no relative change"
				}
				return c
			}
		}
	}
	s, ok := rankShift(bv, cv, opts.Confidence, c.Additive)
	if !ok {
		c.Reason = "too few runs"
		return c
	}
	c.Defined = true
	c.EstLo, c.EstHi, c.Lo, c.Hi = num(s.EstLo), num(s.EstHi), num(s.Lo), num(s.Hi)
	c.Detectable = num(detectable(s, opts.MaxRegress, c.Additive))
	t := opts.MaxRegress
	switch {
	case s.Lo > t+changeTolerance:
		c.Verdict = VerdictRegression
	case s.Hi < -t-changeTolerance:
		c.Verdict = VerdictImproved
	case s.Hi < t-changeTolerance:
		c.Verdict = VerdictOK
	default:
		// The interval reaches the threshold: a slowdown beyond it is as
		// consistent with these runs as none, so this is no PASS.
		c.Verdict = VerdictInconclusive
		c.Reason = fmt.Sprintf("the interval reaches %s; these runs can tell only a change above %s",
			signedPct(t), signedPct(float64(c.Detectable)))
	}
	return c
}

// detectable is the smallest change that would put the interval wholly
// above the threshold t, were the runs to scatter as these did: the
// interval moves with the estimate, so that is t plus the interval's reach
// below the estimate (for a ratio, composed as ratios). For bucketed values
// the reach runs from the estimate's upper end, the resolution included.
func detectable(s shift, t float64, additive bool) float64 {
	if additive {
		return t + max(s.EstHi-s.Lo, 0)
	}
	return (1+t)*max((1+s.EstHi)/(1+s.Lo), 1) - 1
}

// sideValue is the median over runs of the values' lower and upper ends.
func sideValue(vs []interval) Value {
	lo, hi := make([]float64, len(vs)), make([]float64, len(vs))
	for i, v := range vs {
		lo[i], hi[i] = v.Lo, v.Hi
	}
	slices.Sort(lo)
	slices.Sort(hi)
	return Value{num(medianInf(lo)), num(medianInf(hi))}
}

// medianInf is median that keeps infinities (the mean of -Inf and a number
// is -Inf; of -Inf and +Inf, NaN: take the lower middle then).
func medianInf(sorted []float64) float64 {
	m := median(sorted)
	if math.IsNaN(m) {
		return sorted[(len(sorted)-1)/2]
	}
	return m
}

func pctText(f float64) string {
	return strconv.FormatFloat(100*f, 'f', -1, 64) + "%"
}

// levelText is a confidence level or its complement as a percentage, to
// four decimals: 1 - 0.05/23 is 99.7826%, and 1 - 0.95 reads 5%, not the
// 5.000000000000004% of its float.
func levelText(f float64) string {
	return strconv.FormatFloat(math.Round(1e6*f)/1e4, 'f', -1, 64) + "%"
}
