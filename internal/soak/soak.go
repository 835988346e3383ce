package soak

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
)

// ErrTooFewSamples is returned for a series too short to fit a line to.
var ErrTooFewSamples = errors.New("too few samples")

// Slope is the least-squares slope of v over t (units of v per unit of t).
func Slope(t, v []float64) (float64, error) {
	n := len(t)
	if n != len(v) {
		return 0, fmt.Errorf("slope: %d times, %d values", n, len(v))
	}
	if n < 2 {
		return 0, fmt.Errorf("slope of %d samples: %w", n, ErrTooFewSamples)
	}
	var mt, mv float64
	for i := range t {
		mt += t[i]
		mv += v[i]
	}
	mt /= float64(n)
	mv /= float64(n)
	var num, den float64
	for i := range t {
		num += (t[i] - mt) * (v[i] - mv)
		den += (t[i] - mt) * (t[i] - mt)
	}
	if den == 0 {
		return 0, fmt.Errorf("slope: every sample at one time: %w", ErrTooFewSamples)
	}
	return num / den, nil
}

// Rule is what flat means for one metric after warm-up (the first half of
// the samples): the least-squares slope over the second half at most
// MaxSlope per hour (+Inf: not bounded) and, with Level, the level of the
// last quarter not above the level of the third, a level being the 10th
// percentile: the value at rest. A count that comes and goes with the work
// (threads, open files, goroutines: the harness makes a thread per channel
// each cycle, the plugin a goroutine for a while at each dump) is judged by
// its level: a sample's transient, up or down, or a count alternating
// between two values in changing proportions leaves it alone, a leak
// raises it. Its slope over minutes of samples taken at random moments of
// the cycles is noise.
type Rule struct {
	Metric   string
	Unit     string
	MaxSlope float64 // per hour, in Unit
	Level    bool
}

// Rules are the bounds scripts/soak.sh is judged by: RSS grows less than
// 1 MiB per hour after warm-up; the levels of threads, open files,
// goroutines and device memory do not rise after warm-up.
var Rules = []Rule{
	{Metric: "rss_kib", Unit: "KiB", MaxSlope: 1024},
	{Metric: "threads", MaxSlope: math.Inf(1), Level: true},
	{Metric: "fds", MaxSlope: math.Inf(1), Level: true},
	{Metric: "goroutines", MaxSlope: math.Inf(1), Level: true},
	{Metric: "gpu_mib", Unit: "MiB", MaxSlope: math.Inf(1), Level: true},
}

// Series is one metric of one process over time.
type Series struct {
	Group  string    // the process: the example soaked and its pid
	Metric string    // a column of the samples
	T      []float64 // seconds, within the soak's duration
	V      []float64
	// After holds the samples taken once the duration was over, while the
	// process finalized and wrote its last dumps: a one-off that is
	// reported, not fitted (a slope through it would call the teardown a
	// leak).
	AfterT, AfterV []float64
}

// Read parses samples: a header line naming the columns, then one line per
// sample. Columns "example" and "pid" name the process (its group), "t_s"
// is the time in seconds, "phase" (optional) is "run" within the duration
// and "after" once it is over (Series.After); every other column is a
// metric, "NA" or empty where it could not be read (a sample without it).
// Series come in the order first seen.
func Read(r io.Reader) ([]*Series, error) {
	sc := bufio.NewScanner(r)
	if !sc.Scan() {
		if err := sc.Err(); err != nil {
			return nil, fmt.Errorf("samples: %w", err)
		}
		return nil, errors.New("samples: empty: no header line")
	}
	cols := strings.Split(sc.Text(), "\t")
	ti, ex, pid, phase := -1, -1, -1, -1
	for i, c := range cols {
		switch c {
		case "t_s":
			ti = i
		case "example":
			ex = i
		case "pid":
			pid = i
		case "phase":
			phase = i
		}
	}
	if ti < 0 {
		return nil, fmt.Errorf("samples: header %q has no t_s column", sc.Text())
	}
	var out []*Series
	index := map[[2]string]*Series{}
	for line := 2; sc.Scan(); line++ {
		f := strings.Split(sc.Text(), "\t")
		if len(f) != len(cols) {
			return nil, fmt.Errorf("samples:%d: %d columns, the header has %d", line, len(f), len(cols))
		}
		t, err := strconv.ParseFloat(f[ti], 64)
		if err != nil {
			return nil, fmt.Errorf("samples:%d: t_s: %w", line, err)
		}
		var group []string
		for _, i := range []int{ex, pid} {
			if i >= 0 {
				group = append(group, f[i])
			}
		}
		g := strings.Join(group, " pid ")
		after := false
		if phase >= 0 {
			switch f[phase] {
			case "run":
			case "after":
				after = true
			default:
				return nil, fmt.Errorf("samples:%d: phase %q, want run or after", line, f[phase])
			}
		}
		for i, c := range cols {
			if i == ti || i == ex || i == pid || i == phase || f[i] == "" || f[i] == "NA" {
				continue
			}
			v, err := strconv.ParseFloat(f[i], 64)
			if err != nil {
				return nil, fmt.Errorf("samples:%d: %s: %w", line, c, err)
			}
			k := [2]string{g, c}
			s := index[k]
			if s == nil {
				s = &Series{Group: g, Metric: c}
				index[k] = s
				out = append(out, s)
			}
			if after {
				s.AfterT, s.AfterV = append(s.AfterT, t), append(s.AfterV, v)
				continue
			}
			s.T = append(s.T, t)
			s.V = append(s.V, v)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("samples: %w", err)
	}
	return out, nil
}

// Result is one series judged by its rule.
type Result struct {
	Group, Metric, Unit string
	N                   int
	First, Last, Max    float64
	SlopeAll            float64 // per hour, every sample
	SlopeLate           float64 // per hour, the second half (after warm-up)
	LevelQ3, LevelQ4    float64 // the 10th percentile of the third and of the last quarter
	AfterN              int     // samples after the duration (not judged)
	AfterMax            float64 // the highest of them; NaN where there are none
	Rule                Rule
	Pass                bool
	Why                 string // why it failed; "" when it passed
}

// Judge judges one series against rule by its samples within the duration.
// It needs 8 samples at least: two for each quarter.
func Judge(s *Series, rule Rule) (Result, error) {
	r := Result{Group: s.Group, Metric: s.Metric, Unit: rule.Unit, N: len(s.V), Rule: rule}
	if len(s.V) < 8 || len(s.T) != len(s.V) {
		return r, fmt.Errorf("%s %s: %d samples, 8 needed: %w", s.Group, s.Metric, len(s.V), ErrTooFewSamples)
	}
	r.First, r.Last = s.V[0], s.V[len(s.V)-1]
	r.Max = slices.Max(s.V)
	r.AfterN, r.AfterMax = len(s.AfterV), math.NaN()
	if r.AfterN > 0 {
		r.AfterMax = slices.Max(s.AfterV)
	}
	half, q4 := len(s.V)/2, len(s.V)*3/4
	r.LevelQ3, r.LevelQ4 = level(s.V[half:q4]), level(s.V[q4:])
	all, err := Slope(s.T, s.V)
	if err != nil {
		return r, fmt.Errorf("%s %s: %w", s.Group, s.Metric, err)
	}
	late, err := Slope(s.T[half:], s.V[half:])
	if err != nil {
		return r, fmt.Errorf("%s %s: %w", s.Group, s.Metric, err)
	}
	r.SlopeAll, r.SlopeLate = all*3600, late*3600
	var why []string
	if r.SlopeLate > rule.MaxSlope {
		why = append(why, fmt.Sprintf("grows %.4g %s/h after warm-up (bound %g)", r.SlopeLate, rule.Unit, rule.MaxSlope))
	}
	if rule.Level && r.LevelQ4 > r.LevelQ3 {
		why = append(why, fmt.Sprintf("its level (10th percentile) rose from %g (third quarter) to %g (last quarter)", r.LevelQ3, r.LevelQ4))
	}
	r.Why = strings.Join(why, "; ")
	r.Pass = r.Why == ""
	return r, nil
}

// level is the 10th percentile of v (nearest rank).
func level(v []float64) float64 {
	w := slices.Clone(v)
	slices.Sort(w)
	return w[int(math.Ceil(0.1*float64(len(w))))-1]
}

// JudgeAll judges every series whose metric has a rule (the others are
// left out). It fails where a series is too short: a soak too short to
// judge is no PASS.
func JudgeAll(series []*Series, rules []Rule) ([]Result, error) {
	var out []Result
	var errs []error
	for _, s := range series {
		for _, rule := range rules {
			if rule.Metric != s.Metric {
				continue
			}
			r, err := Judge(s, rule)
			if err != nil {
				errs = append(errs, err)
				continue
			}
			out = append(out, r)
		}
	}
	return out, errors.Join(errs...)
}
