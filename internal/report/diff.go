package report

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
)

// Stat is a statistic a diff compares.
type Stat string

// Statistics a diff can compare. Skew applies to function rows only: its
// change is measured in units of the base function's median, so a skew that
// grows from 1% to 7% of the median is a 6% regression whatever its size in
// nanoseconds.
const (
	StatP50  Stat = "p50"
	StatP90  Stat = "p90"
	StatP99  Stat = "p99"
	StatMax  Stat = "max"
	StatMean Stat = "mean"
	StatSkew Stat = "skew"
)

// Stats lists the statistics ParseStats accepts.
var Stats = []Stat{StatP50, StatP90, StatP99, StatMax, StatMean, StatSkew}

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

// ParseThreshold parses a regression threshold: "5%" or "5" (both five
// percent) into a fraction (0.05).
func ParseThreshold(s string) (float64, error) {
	v, err := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(s), "%"), 64)
	if err != nil || v < 0 || math.IsInf(v, 0) || math.IsNaN(v) {
		return 0, fmt.Errorf("threshold %q: give a percentage such as 5%%", s)
	}
	return v / 100, nil
}

// DiffOptions choose what a diff compares and when it fails.
type DiffOptions struct {
	Stats      []Stat  // default p50, p99
	MaxRegress float64 // fraction; a stat this much slower is a regression
	MinSamples int     // rows with fewer samples on either side get no verdict
	ByChannel  bool    // also compare per channel
}

// Verdict of one diff row.
type Verdict string

const (
	VerdictOK           Verdict = "ok"
	VerdictRegression   Verdict = "regression"
	VerdictImproved     Verdict = "improved"
	VerdictInsufficient Verdict = "insufficient data"
	VerdictOnlyBase     Verdict = "only in base"
	VerdictOnlyNew      Verdict = "only in new"
)

// Change is one statistic of one row in both runs.
type Change struct {
	Stat  Stat    `json:"stat"`
	Base  float64 `json:"base_ns"`
	New   float64 `json:"new_ns"`
	Delta float64 `json:"delta"` // relative change; NaN-free: 0 when undefined
	// Defined is false when the base is 0 (or skew is undefined), so no
	// relative change exists.
	Defined bool `json:"defined"`
}

// DiffRow compares one hook, function and (optionally) channel.
type DiffRow struct {
	Hook        string   `json:"hook"`
	Func        string   `json:"func"`
	Channel     int      `json:"channel"` // -1: all channels
	BaseSamples int      `json:"base_samples"`
	NewSamples  int      `json:"new_samples"`
	Changes     []Change `json:"changes"`
	Verdict     Verdict  `json:"verdict"`
}

// Diff is the comparison of two runs.
type Diff struct {
	Base, New   *Report   `json:"-"`
	BaseInputs  []string  `json:"base"`
	NewInputs   []string  `json:"new"`
	Stats       []Stat    `json:"stats"`
	MaxRegress  float64   `json:"max_regress"`
	MinSamples  int       `json:"min_samples"`
	ByChannel   bool      `json:"by_channel"`
	Rows        []DiffRow `json:"rows"`
	Regressions int       `json:"regressions"`
	Improved    int       `json:"improved"`
	Compared    int       `json:"compared"`
	Skipped     int       `json:"insufficient"`
	// Pass is false when at least one row regressed.
	Pass bool `json:"pass"`
}

// Compare diffs two reports.
func Compare(base, cand *Report, opts DiffOptions) *Diff {
	if len(opts.Stats) == 0 {
		opts.Stats = []Stat{StatP50, StatP99}
	}
	d := &Diff{Base: base, New: cand, BaseInputs: base.Inputs, NewInputs: cand.Inputs,
		Stats: opts.Stats, MaxRegress: opts.MaxRegress, MinSamples: opts.MinSamples, ByChannel: opts.ByChannel}
	type key struct {
		hook, fn string
		ch       int
	}
	type side struct{ base, cand *rowStats }
	rows := map[key]*side{}
	var order []key
	add := func(r *Report, isBase bool) {
		for _, h := range r.Hooks {
			for _, f := range h.Functions {
				put := func(ch int, rs *rowStats) {
					k := key{h.Hook, f.Func, ch}
					s := rows[k]
					if s == nil {
						s = &side{}
						rows[k] = s
						order = append(order, k)
					}
					if isBase {
						s.base = rs
					} else {
						s.cand = rs
					}
				}
				put(-1, &rowStats{dist: f.Dist, skew: f.Skew})
				if opts.ByChannel {
					for _, c := range f.Channels {
						put(c.Channel, &rowStats{dist: c.Dist})
					}
				}
			}
		}
	}
	add(base, true)
	add(cand, false)
	slices.SortFunc(order, func(a, b key) int {
		if c := strings.Compare(a.hook, b.hook); c != 0 {
			return c
		}
		if c := strings.Compare(a.fn, b.fn); c != 0 {
			return c
		}
		return a.ch - b.ch
	})
	for _, k := range order {
		s := rows[k]
		row := DiffRow{Hook: k.hook, Func: k.fn, Channel: k.ch}
		switch {
		case s.cand == nil:
			row.BaseSamples, row.Verdict = s.base.dist.Count, VerdictOnlyBase
		case s.base == nil:
			row.NewSamples, row.Verdict = s.cand.dist.Count, VerdictOnlyNew
		default:
			row.BaseSamples, row.NewSamples = s.base.dist.Count, s.cand.dist.Count
			row.Changes, row.Verdict = compareRow(s.base, s.cand, k.ch, opts)
		}
		switch row.Verdict {
		case VerdictRegression:
			d.Regressions++
			d.Compared++
		case VerdictImproved:
			d.Improved++
			d.Compared++
		case VerdictOK:
			d.Compared++
		case VerdictInsufficient:
			d.Skipped++
		}
		d.Rows = append(d.Rows, row)
	}
	d.Pass = d.Regressions == 0
	return d
}

type rowStats struct {
	dist Dist
	skew *Skew
}

func (r *rowStats) value(s Stat) (float64, bool) {
	switch s {
	case StatP50:
		return r.dist.P50, true
	case StatP90:
		return r.dist.P90, true
	case StatP99:
		return r.dist.P99, true
	case StatMax:
		return r.dist.Max, true
	case StatMean:
		return r.dist.Mean, true
	case StatSkew:
		if r.skew == nil {
			return 0, false
		}
		return r.skew.Ns, true
	}
	return 0, false
}

func compareRow(base, cand *rowStats, channel int, opts DiffOptions) ([]Change, Verdict) {
	var changes []Change
	regressed, improvedAll, any := false, true, false
	for _, st := range opts.Stats {
		if st == StatSkew && channel >= 0 {
			continue // skew is a property of a function, not of one channel
		}
		b, okB := base.value(st)
		n, okN := cand.value(st)
		if !okB || !okN {
			continue
		}
		c := Change{Stat: st, Base: b, New: n}
		scale := b
		if st == StatSkew {
			scale = base.dist.P50 // skew growth in units of the median
		}
		if scale > 0 {
			c.Delta, c.Defined = (n-b)/scale, true
		}
		changes = append(changes, c)
		if !c.Defined {
			improvedAll = false
			continue
		}
		any = true
		if c.Delta > opts.MaxRegress {
			regressed = true
		}
		if c.Delta >= -opts.MaxRegress {
			improvedAll = false
		}
	}
	switch {
	case base.dist.Count < opts.MinSamples || cand.dist.Count < opts.MinSamples:
		return changes, VerdictInsufficient
	case regressed:
		return changes, VerdictRegression
	case any && improvedAll:
		return changes, VerdictImproved
	}
	return changes, VerdictOK
}
