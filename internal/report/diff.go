package report

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"

	"strings"
)

// Statistics a diff can compare. Work items (from records) have them all
// but skew is for function rows only; on-device aggregates have what their
// kind holds: histogram p50/p90/p99 (to their bucket), mean, sum, count; sum
// mean, sum, count; min min, count; max max, count; count count.
//
// Auto (the default) is the p50 of work items and the mean of histogram and
// sum aggregates: a log2 histogram's p50 is a bucket bound, blind to any
// change inside its bucket, while the mean comes from the exact sum and
// count the device keeps.
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
	StatAuto  Stat = "auto"
)

// Defaults of ncclhooks diff, chosen by measurement (bench/RESULTS.md, "diff
// calibration"): at 2% a 5% slowdown was caught in 20 of 20 trials of 20
// runs per side, with no false FAIL, on records and on aggregates, with
// each row's interval at the confidence; with the confidence for all rows
// together (section "one confidence for the whole diff") and a loaded
// machine, 6 of 20, no false FAIL or PASS.
const (
	DefaultMaxRegress = 0.02
	DefaultConfidence = 0.95
	DefaultMinSamples = 30
	DefaultMinCapture = 0.99
)

// Verdict of one row or one statistic of a row.
type Verdict string

const (
	VerdictOK           Verdict = "ok"
	VerdictRegression   Verdict = "regression"
	VerdictImproved     Verdict = "improved"
	VerdictInsufficient Verdict = "insufficient data"
	// VerdictInconclusive: the interval reaches the threshold, so the runs
	// can neither exclude a slowdown beyond it nor show one: never a PASS.
	VerdictInconclusive Verdict = "no verdict"
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
	// ResultNoVerdict: every row had the data, but some interval reached
	// the threshold (more runs, or a larger --max-regress, decide it).
	ResultNoVerdict Result = "NO VERDICT"
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
	// Detectable is the smallest change these runs could show beyond the
	// threshold at the confidence: the threshold plus the interval's reach
	// below its estimate (as a ratio, or a difference when Additive).
	Detectable num `json:"detectable_change"`
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
	Threshold  string  `json:"threshold"`
	Confidence float64 `json:"confidence"`
	// Comparisons is the number of changes the confidence covers together;
	// RowConfidence the level of each one's interval (Bonferroni).
	Comparisons   int      `json:"comparisons"`
	RowConfidence float64  `json:"row_confidence"`
	MinSamples    int      `json:"min_samples"`
	MinCapture    float64  `json:"min_capture"`
	ByChannel     bool     `json:"by_channel"`
	Method        string   `json:"method"`
	Notes         []string `json:"notes,omitempty"`
	// Warnings say why the runs may measure the machines rather than the
	// change: different GPU models (compared under AllowMixed), GPUs whose
	// clocks were held down while they ran.
	Warnings []string  `json:"warnings,omitempty"`
	Rows     []DiffRow `json:"rows"`
	// Compared counts rows with a verdict; Regressions and Improved are
	// among them. Inconclusive rows had the data but an interval that
	// reaches the threshold. Skipped counts rows with insufficient data, by
	// cause in SkippedBy; NotCompared rows have none of the statistics
	// asked for.
	Compared     int `json:"compared"`
	Inconclusive int `json:"no_verdict"`
	// Detectable is the largest Detectable of the rows' ratio changes: a
	// smaller slowdown of some row could not be told from the runs' noise.
	Detectable  num            `json:"detectable_change"`
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

// familyLevel is the level of each of m intervals that hold together at
// conf (Bonferroni).
func familyLevel(conf float64, m int) float64 {
	if m <= 1 {
		return conf
	}
	return 1 - (1-conf)/float64(m)
}

// MethodText describes the statistics of every verdict.
func MethodText(conf float64) string {
	return fmt.Sprintf("each run gives one value per row and statistic; the change is the Hodges-Lehmann estimate of new/base "+
		"(the median ratio over all base x new run pairs) with its distribution-free interval (inverting the Mann-Whitney test); "+
		"the %s confidence covers every change of the diff together: with m changes compared, each interval is taken at 1 - %s/m "+
		"(Bonferroni; at least %d runs per side for one change, more for many), so that identical builds FAIL in at most %s of diffs "+
		"however many rows they have; a row fails when the whole interval lies above the threshold, passes when it lies below, "+
		"and has no verdict when it reaches the threshold; the detectable change is the threshold plus the widest interval's reach below its estimate "+
		"(a smaller slowdown cannot fail with these runs' spread); auto compares the p50 of work items and the mean (exact sum / count) of aggregates; "+
		"a histogram quantile is known only to its bucket, so its interval spans every value the buckets allow",
		levelText(conf), levelText(1-conf), minRunsFor(conf), levelText((1-conf)/2))
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
	order := rowOrder(base, cand, problems)
	// The confidence is the whole diff's: the job fails if any row does, so
	// every interval is taken at 1 - (1-conf)/m for the m changes compared
	// (Bonferroni), and all of them hold together at conf. Per row at conf,
	// 23 rows of identical builds gave a false FAIL in about one diff of
	// twenty on a loaded machine. m is counted at conf: a change that has
	// too few runs for its row's level still counts, which only widens.
	for _, k := range order {
		for _, c := range compareRow(k, base, cand, problems[k.hook], opts).Changes {
			if c.Defined {
				d.Comparisons++
			}
		}
	}
	rowOpts := opts
	rowOpts.family = max(d.Comparisons, 1)
	rowOpts.Confidence = familyLevel(opts.Confidence, rowOpts.family)
	d.RowConfidence = rowOpts.Confidence
	for _, k := range order {
		row := compareRow(k, base, cand, problems[k.hook], rowOpts)
		switch row.Verdict {
		case VerdictRegression:
			d.Regressions++
			d.Compared++
		case VerdictImproved:
			d.Improved++
			d.Compared++
		case VerdictOK:
			d.Compared++
		case VerdictInconclusive:
			d.Inconclusive++
		case VerdictNotCompared:
			d.NotCompared++
		case VerdictInsufficient:
			d.Skipped++
			d.SkippedBy[row.cause()]++
		}
		for _, c := range row.Changes {
			if c.Defined && !c.Additive && c.Detectable > d.Detectable {
				d.Detectable = c.Detectable
			}
		}
		d.Rows = append(d.Rows, row)
	}
	switch {
	case d.Regressions > 0:
		d.Result = ResultFail
	case d.Skipped > 0 || d.Compared+d.Inconclusive == 0:
		d.Result = ResultInsufficient
	case d.Inconclusive > 0:
		d.Result = ResultNoVerdict
	default:
		d.Result = ResultPass
	}
	d.Pass = d.Result == ResultPass
	return d, nil
}

// rowOrder is every row of either side, sorted by hook, aggregate, function
// and channel; a hook with a problem and no rows still gets a row saying why.
func rowOrder(base, cand []*RunData, problems map[string]problem) []rowKey {
	keys := map[rowKey]bool{}
	for _, r := range append(slices.Clip(base), cand...) {
		for k := range r.rows {
			keys[k] = true
		}
	}
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
	return order
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

// throttleWarning warns when GPUs of either side had their clocks held down
// (NVML's clock event reasons in the device lines) while they ran.
func (d *Diff) throttleWarning(base, cand []*RunData) {
	var reasons []string
	count := func(side []*RunData) int {
		n := 0
		for _, r := range side {
			if len(r.Slowdown) > 0 {
				n++
				for _, s := range r.Slowdown {
					if !slices.Contains(reasons, s) {
						reasons = append(reasons, s)
					}
				}
			}
		}
		return n
	}
	nb, nn := count(base), count(cand)
	if nb+nn == 0 {
		return
	}
	slices.Sort(reasons)
	d.Warnings = append(d.Warnings, fmt.Sprintf("GPU clocks were held down (%s) in %d of %d BASE runs and %d of %d NEW runs: a change may be the machine's, not the code's",
		strings.Join(reasons, ", "), nb, len(base), nn, len(cand)))
}

// firstLine is s up to its first newline (a multi-line reason's summary).
func firstLine(s string) string {
	first, _, _ := strings.Cut(s, "\n")
	return first
}

// checkInputs refuses comparisons that mean nothing: runs the plugin did
// not profile, runs of different profiles (by name or by hash), backends
// or device models.
func (d *Diff) checkInputs(base, cand []*RunData, allowMixed bool) error {
	all := append(slices.Clip(base), cand...)
	first := all[0]
	unknownModels := 0
	var hashed *RunData // the first run with a profile hash
	for _, r := range all {
		if len(r.Inactive) > 0 {
			return &InputError{Path: r.Input, Err: fmt.Errorf("INACTIVE: the plugin recorded nothing in %s (%s): no verdict from a run that was not profiled",
				r.Inactive[0].Path, firstLine(r.Inactive[0].Reason))}
		}
		if r.Profile != first.Profile && !allowMixed {
			return &InputError{Path: r.Input, Err: fmt.Errorf("profile %q differs from %q of %s: compare runs of one profile (or pass --allow-mixed)", r.Profile, first.Profile, first.Input)}
		}
		if r.Backend != first.Backend {
			return &InputError{Path: r.Input, Err: fmt.Errorf("backend %q differs from %q of %s: runs on different backends measure different things", r.Backend, first.Backend, first.Input)}
		}
		switch { // one name, other contents: an edited profile
		case r.ProfileHash == "":
		case hashed == nil:
			hashed = r
		case r.ProfileHash != hashed.ProfileHash && !allowMixed:
			return &InputError{Path: r.Input, Err: fmt.Errorf("profile %s differs from profile %s of %s: the runs come from different versions of profile %q; compare runs of one profile (or pass --allow-mixed)",
				ShortHash(r.ProfileHash), ShortHash(hashed.ProfileHash), hashed.Input, r.Profile)}
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
		if !slices.Equal(r.Models, ref.Models) {
			if !allowMixed {
				return &InputError{Path: r.Input, Err: fmt.Errorf("device models %s differ from %s of %s: compare runs on the same hardware (or pass --allow-mixed)",
					strings.Join(r.Models, ", "), strings.Join(ref.Models, ", "), ref.Input)}
			}
			if len(d.Warnings) == 0 {
				d.Warnings = append(d.Warnings, fmt.Sprintf("runs on different GPU models compared (--allow-mixed): %s (%s) and %s (%s)",
					strings.Join(ref.Models, ", "), ref.Input, strings.Join(r.Models, ", "), r.Input))
			}
		}
	}
	d.throttleWarning(base, cand)
	if unknownModels > 0 {
		d.Notes = append(d.Notes, fmt.Sprintf("%d of %d runs do not record their device models (written before ncclhooks recorded them): not checked", unknownModels, len(all)))
	}
	return nil
}
