package report

import (
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"

	"github.com/ncclhooks/ncclhooks/internal/schema"
)

// A diff compares runs: a run is one job (one execution of the workload),
// whose processes' JSON lines files (its ranks) are merged. Each side of a
// diff is one or more runs, and a run's statistics are one observation each.

// ExpandRuns turns a diff argument into runs: a JSON lines file is one run;
// a directory that holds *.jsonl files itself is one run (its files are the
// run's ranks, and *.jsonl below it are merged in too); a directory that
// holds none itself but has subdirectories that do is a set of runs, one per
// subdirectory (what examples/ci/regress.sh writes: base/run-01, ...).
func ExpandRuns(path string) ([]string, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, &InputError{Path: path, Err: errors.Unwrap(err)}
	}
	if !st.IsDir() {
		return []string{path}, nil
	}
	for _, g := range schema.OutputGlobs(glob(path)) {
		if own, _ := filepath.Glob(g); len(own) > 0 {
			return []string{path}, nil
		}
	}
	entries, err := os.ReadDir(path)
	if err != nil {
		return nil, &InputError{Path: path, Err: err}
	}
	var runs []string
	for _, e := range entries {
		if !e.IsDir() {
			continue
		}
		sub := filepath.Join(path, e.Name())
		if files, err := Expand([]string{sub}); err == nil && len(files) > 0 {
			runs = append(runs, sub)
		}
	}
	if len(runs) == 0 {
		return nil, &InputError{Path: path, Err: errors.New("holds no *.jsonl files, neither itself nor in subdirectories (one per run): is it the dump directory of a finished run?")}
	}
	slices.Sort(runs)
	return runs, nil
}

// glob escapes the pattern characters of a literal path.
func glob(p string) string {
	var b []byte
	for i := 0; i < len(p); i++ {
		switch p[i] {
		case '*', '?', '[', '\\':
			b = append(b, '\\')
		}
		b = append(b, p[i])
	}
	return string(b)
}

// RunData is what a diff needs of one run: per row, the run's value of
// every statistic, and per hook what says whether the run can be trusted.
type RunData struct {
	Input   string
	Files   int
	Profile string
	// ProfileHash is the run's profile_hash ("" in older outputs).
	ProfileHash string
	// Inactive are its processes in which the plugin recorded nothing.
	Inactive []InactiveFile
	Backend  string
	// Models are the distinct device models of the run's clock lines,
	// sorted; empty when the output does not record them.
	Models []string
	// Slowdown names the clock event reasons that held a GPU's clocks down
	// in some device line of the run (NVML: power cap, thermal, ...), sorted.
	Slowdown []string
	Hooks    map[string]*runHook
	rows     map[rowKey]*runRow
}

// runHook is one hook in one run.
type runHook struct {
	capture    Capture
	hasCapture bool
	records    uint64
	items      uint64
	aggCount   uint64 // values counted by its aggregates
	refused    string // why the plugin left it out, if it did
}

// rowKey names a row of a diff.
type rowKey struct {
	hook      string
	aggregate string // "" for work items measured from records
	kind      string // the aggregate's kind
	fn        string
	channel   string // "all", or the channel id
}

// runRow is one row's values in one run.
type runRow struct {
	samples uint64              // work items, or values aggregated
	vals    map[Stat]interval   // the run's value of each statistic
	notes   map[Stat]string     // why a statistic has no value
	bucket  map[Stat][2]float64 // histogram quantiles: the bucket (lo, hi]
}

// LoadRun reads one run (a file or a directory of its ranks' files).
func LoadRun(input string, opts Options, byChannel bool) (*RunData, error) {
	c := NewCollector()
	run, err := Read([]string{input}, opts, c.Add)
	if err != nil {
		return nil, err
	}
	rd := &RunData{Input: input, Files: len(run.Files), Profile: run.Profile, ProfileHash: run.ProfileHash, Inactive: run.Inactive(),
		Hooks: map[string]*runHook{}, rows: map[rowKey]*runRow{}}
	models := map[string]bool{}
	for _, f := range run.Files {
		if rd.Backend == "" {
			rd.Backend = f.Header.Backend
		} else if f.Header.Backend != rd.Backend {
			return nil, &InputError{Path: f.Path, Err: fmt.Errorf("backend %q differs from %q of %s: one run's files come from one backend", f.Header.Backend, rd.Backend, run.Files[0].Path)}
		}
		for _, cl := range f.Clocks {
			if cl.Model != "" {
				models[cl.Model] = true
			}
		}
		for _, dv := range f.Devices {
			if dv.Name != "" {
				models[dv.Name] = true
			}
			for _, s := range dv.Slowdown {
				if !slices.Contains(rd.Slowdown, s) {
					rd.Slowdown = append(rd.Slowdown, s)
				}
			}
		}
	}
	slices.Sort(rd.Slowdown)
	for m := range models {
		rd.Models = append(rd.Models, m)
	}
	slices.Sort(rd.Models)
	hook := func(name string) *runHook {
		h := rd.Hooks[name]
		if h == nil {
			h = &runHook{}
			rd.Hooks[name] = h
		}
		return h
	}
	for _, f := range run.Files {
		for name := range f.Header.Fields { // hooks that record, even if no line says so
			hook(name)
		}
	}
	for name, why := range run.Refused {
		hook(name).refused = why
	}
	for name, hc := range run.Hooks {
		h := hook(name)
		h.records, h.items = hc.Records, hc.Items
	}
	for name, h := range rd.Hooks {
		h.capture, h.hasCapture = run.Capture(name)
	}
	rd.recordRows(c, byChannel)
	for _, a := range aggReports(run) {
		h := hook(a.Hook)
		for _, r := range a.Rows {
			h.aggCount += r.Count
			rd.rows[rowKey{a.Hook, a.Name, a.Kind, orAll(r.Func), orAll(r.Channel)}] = aggRow(a.Kind, &r)
		}
	}
	return rd, nil
}

// recordRows computes the rows of work items: per hook and function over
// all channels, and with byChannel per channel.
func (rd *RunData) recordRows(c *Collector, byChannel bool) {
	type fk struct{ hook, fn string }
	byFunc := map[fk][]int{}
	for k := range c.groups {
		byFunc[fk{k.hook, k.fn}] = append(byFunc[fk{k.hook, k.fn}], k.channel)
	}
	for f, chans := range byFunc {
		slices.Sort(chans)
		var all []uint64
		var medians []float64
		for _, ch := range chans {
			ds := slices.Clone(c.groups[groupKey{f.hook, f.fn, ch}])
			slices.Sort(ds)
			all = append(all, ds...)
			if ch < 0 {
				continue
			}
			medians = append(medians, float64(percentile(ds, 50)))
			if byChannel {
				rd.rows[rowKey{hook: f.hook, fn: f.fn, channel: strconv.Itoa(ch)}] = itemRow(ds)
			}
		}
		slices.Sort(all)
		row := itemRow(all)
		// Skew: the slowest channel median less the fastest, in units of
		// this run's median, so that it compares across runs additively.
		switch p50 := float64(percentile(all, 50)); {
		case len(medians) < 2:
			row.notes[StatSkew] = "fewer than two channels"
		case p50 <= 0:
			row.notes[StatSkew] = "median 0"
		default:
			v := (slices.Max(medians) - slices.Min(medians)) / p50
			row.vals[StatSkew] = interval{v, v}
		}
		rd.rows[rowKey{hook: f.hook, fn: f.fn, channel: "all"}] = row
	}
}

// itemRow computes the statistics of sorted work-item durations.
func itemRow(ds []uint64) *runRow {
	r := &runRow{samples: uint64(len(ds)), vals: map[Stat]interval{}, notes: map[Stat]string{}}
	if len(ds) == 0 {
		return r
	}
	exact := func(s Stat, v float64) { r.vals[s] = interval{v, v} }
	var sum float64
	for _, d := range ds {
		sum += float64(d)
	}
	exact(StatP50, float64(percentile(ds, 50)))
	exact(StatP90, float64(percentile(ds, 90)))
	exact(StatP99, float64(percentile(ds, 99)))
	exact(StatMin, float64(ds[0]))
	exact(StatMax, float64(ds[len(ds)-1]))
	exact(StatMean, sum/float64(len(ds)))
	exact(StatSum, sum)
	exact(StatCount, float64(len(ds)))
	return r
}

// aggRow computes the statistics an aggregate row of one run holds.
func aggRow(kind string, a *AggRowStat) *runRow {
	r := &runRow{samples: a.Count, vals: map[Stat]interval{}, notes: map[Stat]string{}, bucket: map[Stat][2]float64{}}
	exact := func(s Stat, v float64) { r.vals[s] = interval{v, v} }
	exact(StatCount, float64(a.Count))
	switch kind {
	case "sum", "histogram":
		exact(StatSum, a.Sum)
		if a.Count > 0 {
			exact(StatMean, a.Sum/float64(a.Count))
		}
	case "min":
		exact(StatMin, a.Min)
	case "max":
		exact(StatMax, a.Max)
	}
	if kind == "histogram" {
		for _, q := range []struct {
			s Stat
			q float64
		}{{StatP50, 0.50}, {StatP90, 0.90}, {StatP99, 0.99}} {
			lo, hi, ok := a.quantileBucket(q.q)
			if !ok {
				r.notes[q.s] = "no buckets"
				continue
			}
			r.bucket[q.s] = [2]float64{lo, hi}
			r.vals[q.s] = interval{lo, hi}
		}
	}
	return r
}

// quantileBucket returns the bucket (lo, hi] that holds quantile q
// (nearest rank, as for work items): the quantile is known to lie in it and
// nowhere more precisely. lo is the previous bucket's bound (-Inf for the
// first bucket), hi may be +Inf.
func (s *AggRowStat) quantileBucket(q float64) (lo, hi float64, ok bool) {
	if len(s.buckets) == 0 || s.Count == 0 {
		return 0, 0, false
	}
	want := uint64(math.Ceil(q * float64(s.Count)))
	lo = math.Inf(-1)
	for i, c := range s.buckets {
		le := leValue(s.les[i])
		if c >= want {
			return lo, le, true
		}
		lo = le
	}
	return lo, math.Inf(1), true
}

// leValue parses a bucket bound as written: a number or "+Inf".
func leValue(raw string) float64 {
	if u, err := strconv.Unquote(raw); err == nil {
		raw = u
	}
	v, err := strconv.ParseFloat(raw, 64)
	if err != nil {
		return math.Inf(1)
	}
	return v
}
