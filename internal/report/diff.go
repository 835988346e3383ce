package report

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
)

// Stat is a statistic a diff compares. Every statistic is read as a cost:
// higher is worse.
type Stat string

// Statistics a diff can compare. Work items (from records) have them all
// but skew is for function rows only; on-device aggregates have what their
// kind holds: histogram p50/p90/p99 (to their bucket), mean, sum, count; sum
// mean, sum, count; min min, count; max max, count; count count.
//
// Skew is a function's channel skew (slowest channel median less the
// fastest) in units of the same run's median, and its change is a
// difference, not a ratio: a skew that grows from 1% to 7% of the median
// is a change of +6%.
const (
	StatP50   Stat = "p50"
	StatP90   Stat = "p90"
	StatP99   Stat = "p99"
	StatMin   Stat = "min"
	StatMax   Stat = "max"
	StatMean  Stat = "mean"
	StatSum   Stat = "sum"
	StatCount Stat = "count"
	StatSkew  Stat = "skew"
)

// Stats lists the statistics ParseStats accepts.
var Stats = []Stat{StatP50, StatP90, StatP99, StatMin, StatMax, StatMean, StatSum, StatCount, StatSkew}

// ParseStats parses a comma-separated list such as "p50,p99".
func ParseStats(s string) ([]Stat, error) {
	var out []Stat
	for _, f := range strings.Split(s, ",") {
		st := Stat(strings.ToLower(strings.TrimSpace(f)))
		if !slices.Contains(Stats, st) {
			return nil, fmt.Errorf("unknown statistic %q: use a comma-separated list of %s", f, joinStats(Stats))
		}
		if !slices.Contains(out, st) {
			out = append(out, st)
		}
	}
	return out, nil
}

func joinStats(ss []Stat) string {
	parts := make([]string, len(ss))
	for i, s := range ss {
		parts[i] = string(s)
	}
	return strings.Join(parts, ",")
}

// ParseFraction parses a percentage ("5%", "0.5%") or a fraction ("0.05")
// into a fraction (0.05). A bare number of 1 or more is refused: "5" could
// mean 5% or 500%, so it must be written "5%" (or "5.0" as a fraction would
// be 500%: write "500%").
func ParseFraction(s string) (float64, error) {
	t := strings.TrimSpace(s)
	pct := strings.HasSuffix(t, "%")
	v, err := strconv.ParseFloat(strings.TrimSpace(strings.TrimSuffix(t, "%")), 64)
	switch {
	case err != nil || v < 0 || math.IsInf(v, 0) || math.IsNaN(v):
		return 0, fmt.Errorf("%q: give a percentage such as 5%% or a fraction such as 0.05", s)
	case pct:
		return v / 100, nil
	case v >= 1:
		return 0, fmt.Errorf("%q is ambiguous: write %s%% for %s percent (a bare number is a fraction: 0.05 is 5%%)", s, t, t)
	}
	return v, nil
}

// FractionText says how a flag's value was read: "5%" for "5%", and
// "5% (0.05 read as a fraction)" for "0.05".
func FractionText(input string, v float64) string {
	p := strconv.FormatFloat(100*v, 'f', -1, 64) + "%"
	if in := strings.TrimSpace(input); in != "" && !strings.HasSuffix(in, "%") {
		return fmt.Sprintf("%s (%s read as a fraction)", p, in)
	}
	return p
}

// DiffOptions choose what a diff compares and when it fails.
type DiffOptions struct {
	Stats []Stat // default p50
	// MaxRegress is the tolerated slowdown (a fraction): a row fails when
	// its change exceeds it with the confidence.
	MaxRegress float64
	// Confidence is the level of the two-sided interval of every change
	// (default 0.95): a row fails when the whole interval lies above
	// +MaxRegress.
	Confidence float64
	// MinSamples: a row with fewer work items (or aggregated values) in one
	// run gets no verdict.
	MinSamples int
	// MinCapture: a hook whose capture ratio (records / (records + drops))
	// is below it in one run gets no verdict (default 0.99).
	MinCapture float64
	ByChannel  bool // per channel too (work items; aggregates by channelId always are)
	// AllowMixed compares runs whose profiles or device models differ.
	AllowMixed bool
	// MaxRegressText is the flag as given, to say how it was read.
	MaxRegressText string
}

// Defaults of ncclhooks diff, chosen by measurement (examples/ci/README.md).
const (
	DefaultMaxRegress = 0.005
	DefaultConfidence = 0.95
	DefaultMinSamples = 30
	DefaultMinCapture = 0.99
)

// DefaultStats are compared when DiffOptions.Stats is empty.
var DefaultStats = []Stat{StatP50}

// Verdict of one row or one statistic of a row.
type Verdict string

const (
	VerdictOK           Verdict = "ok"
	VerdictRegression   Verdict = "regression"
	VerdictImproved     Verdict = "improved"
	VerdictInsufficient Verdict = "insufficient data"
	// VerdictNotCompared: none of the statistics asked for exists for the
	// row (an aggregate of another kind); it does not hold a verdict back.
	VerdictNotCompared Verdict = "not compared"
)

// Result of a whole diff.
type Result string

const (
	ResultPass         Result = "PASS"
	ResultFail         Result = "FAIL"
	ResultInsufficient Result = "INSUFFICIENT DATA"
)

// num is a float64 that encodes infinities (open histogram buckets) as the
// strings "+Inf" and "-Inf" in JSON.
type num float64

func (n num) MarshalJSON() ([]byte, error) {
	f := float64(n)
	switch {
	case math.IsInf(f, 1):
		return []byte(`"+Inf"`), nil
	case math.IsInf(f, -1):
		return []byte(`"-Inf"`), nil
	case math.IsNaN(f):
		return []byte("null"), nil
	}
	return json.Marshal(f)
}

// Value is one side's value of a statistic: the median over its runs of
// each run's value, which for a histogram quantile is a bucket (Lo, Hi].
type Value struct {
	Lo num `json:"lo"`
	Hi num `json:"hi"`
}

// Change is one statistic of one row in both runs.
type Change struct {
	Stat Stat  `json:"stat"`
	Base Value `json:"base"`
	New  Value `json:"new"`
	// Bucketed: the values are histogram buckets; the change interval
	// spans every value they allow.
	Bucketed bool `json:"bucketed,omitempty"`
	// Additive: the change is a difference (skew, in units of the median),
	// not a ratio.
	Additive bool `json:"additive,omitempty"`
	// Defined is false when no change could be computed (Reason says why).
	Defined bool `json:"defined"`
	// EstLo..EstHi is the estimate of new/base - 1 (a single value unless
	// Bucketed); Lo..Hi its interval at the diff's confidence.
	EstLo   num     `json:"estimate_lo"`
	EstHi   num     `json:"estimate_hi"`
	Lo      num     `json:"lo"`
	Hi      num     `json:"hi"`
	Verdict Verdict `json:"verdict"`
	Reason  string  `json:"reason,omitempty"`
}

// DiffRow compares one row: a hook's work items of one function (and
// channel), or one key of an on-device aggregate.
type DiffRow struct {
	Hook      string `json:"hook"`
	Aggregate string `json:"aggregate,omitempty"` // "" for work items from records
	Kind      string `json:"kind,omitempty"`      // the aggregate's kind
	Func      string `json:"func"`
	Channel   string `json:"channel"`
	BaseRuns  int    `json:"base_runs"` // runs that have the row
	NewRuns   int    `json:"new_runs"`
	// BaseSamples and NewSamples are the fewest work items (or aggregated
	// values) of the row in one run of each side.
	BaseSamples uint64   `json:"base_min_samples"`
	NewSamples  uint64   `json:"new_min_samples"`
	Changes     []Change `json:"changes"`
	Verdict     Verdict  `json:"verdict"`
	Reason      string   `json:"reason,omitempty"`
}

// Diff is the comparison of two sets of runs.
type Diff struct {
	BaseRuns   []string `json:"base_runs"`
	NewRuns    []string `json:"new_runs"`
	Stats      []Stat   `json:"stats"`
	MaxRegress float64  `json:"max_regress"`
	// Threshold says how --max-regress was read.
	Threshold  string    `json:"threshold"`
	Confidence float64   `json:"confidence"`
	MinSamples int       `json:"min_samples"`
	MinCapture float64   `json:"min_capture"`
	ByChannel  bool      `json:"by_channel"`
	Method     string    `json:"method"`
	Notes      []string  `json:"notes,omitempty"`
	Rows       []DiffRow `json:"rows"`
	// Compared counts rows with a verdict; Regressions and Improved are
	// among them. Skipped counts rows with insufficient data, by cause in
	// SkippedBy; NotCompared rows have none of the statistics asked for.
	Compared    int            `json:"compared"`
	Regressions int            `json:"regressions"`
	Improved    int            `json:"improved"`
	Skipped     int            `json:"skipped"`
	SkippedBy   map[string]int `json:"skipped_by,omitempty"`
	NotCompared int            `json:"not_compared"`
	Result      Result         `json:"result"`
	// Pass is true only for ResultPass.
	Pass bool `json:"pass"`
}

// Causes of insufficient data, the keys of Diff.SkippedBy.
const (
	causeSamples  = "below --min-samples"
	causeCapture  = "capture below --min-capture"
	causeFinal    = "run did not finalize"
	causeNoStats  = "no dump_stats (capture unknown)"
	causeRefused  = "hook refused by the plugin"
	causeNothing  = "hook matched nothing"
	causeHookGone = "hook missing from a run"
	causeOnlyBase = "only in base"
	causeOnlyNew  = "only in new"
	causeSomeRuns = "missing from some runs"
	causeRuns     = "too few runs"
	causeValue    = "no relative change (a value is 0 or unbounded)"
)

// MethodText describes the statistics of every verdict.
func MethodText(conf float64) string {
	return fmt.Sprintf("each run gives one value per row and statistic; the change is the Hodges-Lehmann estimate of new/base "+
		"(the median ratio over all base x new run pairs) with its %s distribution-free interval (inverting the Mann-Whitney test; "+
		"at least %d runs per side); a row fails when the whole interval lies above the threshold; "+
		"a histogram quantile is known only to its bucket, so its interval spans every value the buckets allow",
		pctText(conf), minRunsFor(conf))
}

// Compare diffs two sets of runs. It fails (an *InputError) when the runs
// cannot be compared at all: different profiles, backends or device
// models (unless AllowMixed) or no runs.
func Compare(base, cand []*RunData, opts DiffOptions) (*Diff, error) {
	if len(opts.Stats) == 0 {
		opts.Stats = DefaultStats
	}
	if opts.Confidence == 0 {
		opts.Confidence = DefaultConfidence
	}
	if !(opts.Confidence > 0 && opts.Confidence < 1) {
		return nil, fmt.Errorf("confidence %v: give a level between 0 and 1 (0.95)", opts.Confidence)
	}
	if len(base) == 0 || len(cand) == 0 {
		return nil, errors.New("a diff needs at least one run on each side")
	}
	d := &Diff{Stats: opts.Stats, MaxRegress: opts.MaxRegress, Threshold: FractionText(opts.MaxRegressText, opts.MaxRegress),
		Confidence: opts.Confidence, MinSamples: opts.MinSamples, MinCapture: opts.MinCapture, ByChannel: opts.ByChannel,
		Method: MethodText(opts.Confidence), SkippedBy: map[string]int{}}
	for _, r := range base {
		d.BaseRuns = append(d.BaseRuns, r.Input)
	}
	for _, r := range cand {
		d.NewRuns = append(d.NewRuns, r.Input)
	}
	if err := d.checkInputs(base, cand, opts.AllowMixed); err != nil {
		return nil, err
	}
	problems := hookProblems(base, cand, opts)

	keys := map[rowKey]bool{}
	for _, r := range append(slices.Clip(base), cand...) {
		for k := range r.rows {
			keys[k] = true
		}
	}
	// A hook with a problem and no rows still gets a row saying why.
	withRows := map[string]bool{}
	for k := range keys {
		withRows[k.hook] = true
	}
	for h := range problems {
		if !withRows[h] {
			keys[rowKey{hook: h, fn: "-", channel: "-"}] = true
		}
	}
	order := make([]rowKey, 0, len(keys))
	for k := range keys {
		order = append(order, k)
	}
	slices.SortFunc(order, func(a, b rowKey) int {
		for _, c := range [][2]string{{a.hook, b.hook}, {a.aggregate, b.aggregate}, {a.fn, b.fn}} {
			if c[0] != c[1] {
				return compareKeys(c[0], c[1])
			}
		}
		return compareChannels(a.channel, b.channel)
	})
	for _, k := range order {
		row := compareRow(k, base, cand, problems[k.hook], opts)
		switch row.Verdict {
		case VerdictRegression:
			d.Regressions++
			d.Compared++
		case VerdictImproved:
			d.Improved++
			d.Compared++
		case VerdictOK:
			d.Compared++
		case VerdictNotCompared:
			d.NotCompared++
		case VerdictInsufficient:
			d.Skipped++
			d.SkippedBy[row.cause()]++
		}
		d.Rows = append(d.Rows, row)
	}
	switch {
	case d.Regressions > 0:
		d.Result = ResultFail
	case d.Skipped > 0 || d.Compared == 0:
		d.Result = ResultInsufficient
	default:
		d.Result = ResultPass
	}
	d.Pass = d.Result == ResultPass
	return d, nil
}

// "all" first, then channels in numeric order.
func compareChannels(a, b string) int {
	if a == b {
		return 0
	}
	if a == "all" {
		return -1
	}
	if b == "all" {
		return 1
	}
	return compareKeys(a, b)
}

// checkInputs refuses comparisons that mean nothing: runs of different
// profiles, backends or device models.
func (d *Diff) checkInputs(base, cand []*RunData, allowMixed bool) error {
	all := append(slices.Clip(base), cand...)
	first := all[0]
	unknownModels := 0
	for _, r := range all {
		if r.Profile != first.Profile && !allowMixed {
			return &InputError{Path: r.Input, Err: fmt.Errorf("profile %q differs from %q of %s: compare runs of one profile (or pass --allow-mixed)", r.Profile, first.Profile, first.Input)}
		}
		if r.Backend != first.Backend {
			return &InputError{Path: r.Input, Err: fmt.Errorf("backend %q differs from %q of %s: runs on different backends measure different things", r.Backend, first.Backend, first.Input)}
		}
		if len(r.Models) == 0 {
			unknownModels++
		}
	}
	var ref *RunData
	for _, r := range all {
		if len(r.Models) == 0 {
			continue
		}
		if ref == nil {
			ref = r
			continue
		}
		if !slices.Equal(r.Models, ref.Models) && !allowMixed {
			return &InputError{Path: r.Input, Err: fmt.Errorf("device models %s differ from %s of %s: compare runs on the same hardware (or pass --allow-mixed)",
				strings.Join(r.Models, ", "), strings.Join(ref.Models, ", "), ref.Input)}
		}
	}
	if unknownModels > 0 {
		d.Notes = append(d.Notes, fmt.Sprintf("%d of %d runs do not record their device models (written before ncclhooks recorded them): not checked", unknownModels, len(all)))
	}
	return nil
}

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
		if applies(k, st) {
			stats = append(stats, st)
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
		return skip(causeRuns, fmt.Sprintf("%d base and %d new runs; a %s interval needs at least %d runs per side",
			len(bRows), len(cRows), pctText(opts.Confidence), minRunsFor(opts.Confidence)))
	}
	n := map[Verdict]int{}
	var reasons []string
	for _, st := range stats {
		c := compareStat(st, bRows, cRows, opts)
		row.Changes = append(row.Changes, c)
		n[c.Verdict]++
		if c.Verdict == VerdictInsufficient {
			reasons = append(reasons, string(st)+": "+c.Reason)
		}
	}
	row.Reason = strings.Join(reasons, "; ")
	switch {
	case n[VerdictRegression] > 0:
		row.Verdict = VerdictRegression
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
	switch {
	case s.Lo > opts.MaxRegress:
		c.Verdict = VerdictRegression
	case s.Hi < -opts.MaxRegress:
		c.Verdict = VerdictImproved
	default:
		c.Verdict = VerdictOK
	}
	return c
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
