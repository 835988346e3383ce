package main

import (
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/ncclhooks/ncclhooks/internal/report"
)

// Exit codes of ncclhooks diff, for CI.
const (
	diffPass       = 0
	diffRegression = 1
	diffError      = 2 // also: insufficient data, no verdict
)

// pathList is a repeatable flag.
type pathList []string

func (p *pathList) String() string     { return strings.Join(*p, ",") }
func (p *pathList) Set(s string) error { *p = append(*p, s); return nil }

func runDiff(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("diff", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var baseFlags, newFlags pathList
	fs.Var(&baseFlags, "base", "a base run (file or directory), or a directory of runs; repeat for more (instead of BASE NEW)")
	fs.Var(&newFlags, "new", "a new run, or a directory of runs; repeat for more")
	stats := fs.String("stat", "auto", "statistics to compare: "+joinStats()+" (auto: p50 of work items, mean of histogram and sum aggregates from their exact sum and count; skew: growth of a function's channel skew, in % of its median)")
	maxRegress := fs.String("max-regress", pct(report.DefaultMaxRegress), "the slowdown tolerated: a row fails when its change exceeds this with the confidence; 5% or the fraction 0.05 (a bare 5 is refused)")
	confidence := fs.String("confidence", pct(report.DefaultConfidence), "level of every change's two-sided interval")
	minSamples := fs.Int("min-samples", report.DefaultMinSamples, "a row with fewer work items (or aggregated values) in any run gets no verdict (insufficient data)")
	minCapture := fs.String("min-capture", pct(report.DefaultMinCapture), "a hook whose capture ratio (records / (records + drops)) is lower in any run gets no verdict")
	byChannel := fs.Bool("by-channel", false, "also compare every channel of every function (work items)")
	asJSON := fs.Bool("json", false, "write JSON")
	asMarkdown := fs.Bool("markdown", false, "write markdown (a pull request comment)")
	allowMixed := fs.Bool("allow-mixed", false, "compare runs of different profiles or device models, and merge files of different profiles within a run")
	fs.Usage = func() {
		fmt.Fprint(stderr, diffUsage)
		fs.PrintDefaults()
	}
	if err := parseInterspersed(fs, args); err != nil {
		return diffError
	}
	fail := func(err error) int {
		fmt.Fprintln(stderr, "ncclhooks diff:", err)
		return diffError
	}
	var baseArgs, newArgs []string
	switch {
	case fs.NArg() == 2 && len(baseFlags) == 0 && len(newFlags) == 0:
		baseArgs, newArgs = fs.Args()[:1], fs.Args()[1:]
	case fs.NArg() == 0 && len(baseFlags) > 0 && len(newFlags) > 0:
		baseArgs, newArgs = baseFlags, newFlags
	default:
		return diffArgsError(fs, len(baseFlags), len(newFlags), stderr)
	}
	opts, err := diffOptions(diffFlags{stats: *stats, maxRegress: *maxRegress, confidence: *confidence, minCapture: *minCapture,
		minSamples: *minSamples, byChannel: *byChannel, allowMixed: *allowMixed})
	if err != nil {
		return fail(err)
	}
	format, err := outputFormat(*asJSON, *asMarkdown)
	if err != nil {
		return fail(err)
	}
	ropts := readOptions(*allowMixed, stderr)
	base, err := loadRuns("base", baseArgs, ropts, opts.ByChannel)
	if err != nil {
		return fail(err)
	}
	cand, err := loadRuns("new", newArgs, ropts, opts.ByChannel)
	if err != nil {
		return fail(err)
	}
	d, err := report.Compare(base, cand, opts)
	if err != nil {
		return fail(err)
	}
	if err := d.Write(stdout, format); err != nil {
		return fail(err)
	}
	switch d.Result {
	case report.ResultFail:
		return diffRegression
	case report.ResultPass:
		return diffPass
	}
	return diffError
}

// diffUsage is diff's help text, before its flags.
const diffUsage = `usage: ncclhooks diff BASE NEW [flags]
       ncclhooks diff --base RUN... --new RUN... [flags]

Compares the base runs with the new runs per hook, function (and channel),
and per key of every on-device aggregate. A run is a JSON lines file or a
directory of one run's files (its ranks, merged); BASE and NEW may also be a
directory of runs, one per subdirectory (what examples/ci/regress.sh writes).
Every run gives one value per row and statistic (auto: the p50 of work
items, the mean of histogram and sum aggregates), and the verdict of a row
comes from the spread of those values: a row passes only when its whole
interval lies below --max-regress, fails when it lies above, and has no
verdict when it reaches it; the summary prints the detectable change, the
smallest slowdown these runs could show. Give at least 4 runs per side; on a
loaded 2-core machine 20 per side caught a 5% change at the 2% default
(bench/RESULTS.md, "diff calibration").

Exit status: 0 pass; 1 at least one regression; 2 no verdict (an interval
that reaches the threshold, or insufficient data: too few runs or samples,
low capture, a hook that matched nothing, a row on one side only) or a
usage or input error (different profiles or device models).

`

// diffFlags are the flags that become report.DiffOptions.
type diffFlags struct {
	stats, maxRegress, confidence, minCapture string
	minSamples                                int
	byChannel, allowMixed                     bool
}

// diffOptions checks the flags and turns them into report.DiffOptions.
func diffOptions(f diffFlags) (report.DiffOptions, error) {
	var err error
	opts := report.DiffOptions{MinSamples: f.minSamples, ByChannel: f.byChannel, AllowMixed: f.allowMixed, MaxRegressText: f.maxRegress}
	if opts.Stats, err = report.ParseStats(f.stats); err != nil {
		return opts, fmt.Errorf("--stat: %w", err)
	}
	if opts.MaxRegress, err = report.ParseFraction(f.maxRegress); err != nil {
		return opts, fmt.Errorf("--max-regress %w", err)
	}
	if opts.Confidence, err = report.ParseFraction(f.confidence); err != nil {
		return opts, fmt.Errorf("--confidence %w", err)
	}
	if !(opts.Confidence >= 0.5 && opts.Confidence < 1) {
		return opts, fmt.Errorf("--confidence %s: give a level from 50%% to below 100%%, such as 95%%", f.confidence)
	}
	if opts.MinCapture, err = report.ParseFraction(f.minCapture); err != nil {
		return opts, fmt.Errorf("--min-capture %w", err)
	}
	if opts.MinCapture > 1 {
		return opts, fmt.Errorf("--min-capture %s: at most 100%%", f.minCapture)
	}
	if opts.MinSamples < 1 {
		return opts, fmt.Errorf("--min-samples %d: give at least 1", opts.MinSamples)
	}
	return opts, nil
}

// loadRuns reads one side's runs: each argument is a run, or a directory of runs.
func loadRuns(side string, args []string, ropts report.Options, byChannel bool) ([]*report.RunData, error) {
	var runs []*report.RunData
	for _, a := range args {
		paths, err := report.ExpandRuns(a)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", side, err)
		}
		for _, p := range paths {
			r, err := report.LoadRun(p, ropts, byChannel)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", side, err)
			}
			runs = append(runs, r)
		}
	}
	return runs, nil
}

func joinStats() string {
	parts := make([]string, len(report.Stats))
	for i, s := range report.Stats {
		parts[i] = string(s)
	}
	return strings.Join(parts, ",")
}

func pct(f float64) string { return fmt.Sprintf("%g%%", 100*f) }
