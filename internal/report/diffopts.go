package report

// // the diff's statistics, options and threshold flags, and how they read.

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
)

// Stat is a statistic a diff compares. Every statistic is read as a cost:
// higher is worse.
type Stat string

// Stats lists the statistics ParseStats accepts.
var Stats = []Stat{StatAuto, StatP50, StatP90, StatP99, StatMin, StatMax, StatMean, StatSum, StatCount, StatSkew}

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
	Stats []Stat // default auto
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

	// family is the number of changes Confidence covers together (set by
	// Compare, which then holds each row's level in Confidence).
	family int
}

// DefaultStats are compared when DiffOptions.Stats is empty.
var DefaultStats = []Stat{StatAuto}
