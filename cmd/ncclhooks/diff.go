package main

import (
	"flag"
	"fmt"
	"io"

	"github.com/ncclhooks/ncclhooks/internal/report"
)

// Exit codes of ncclhooks diff, for CI.
const (
	diffPass       = 0
	diffRegression = 1
	diffError      = 2
)

func runDiff(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("diff", flag.ContinueOnError)
	fs.SetOutput(stderr)
	stats := fs.String("stat", "p50,p99", "statistics to compare: p50,p90,p99,max,mean,skew (skew: growth of a function's channel skew, in % of its base median)")
	maxRegress := fs.String("max-regress", "5%", "a statistic this much slower than the base is a regression")
	minSamples := fs.Int("min-samples", 30, "rows with fewer work items on either side are \"insufficient data\", not a verdict")
	byChannel := fs.Bool("by-channel", false, "also compare every channel of every function")
	asJSON := fs.Bool("json", false, "write JSON")
	asMarkdown := fs.Bool("markdown", false, "write markdown (a pull request comment)")
	allowMixed := fs.Bool("allow-mixed", false, "merge files written with different profiles (within one side)")
	fs.Usage = func() {
		fmt.Fprint(stderr, `usage: ncclhooks diff BASE NEW [flags]

Compares two runs (each a JSON lines file or a dump directory) per hook and
function, and with --by-channel per channel. Exit status: 0 pass, 1 at least
one regression, 2 usage or input error.

`)
		fs.PrintDefaults()
	}
	if err := parseInterspersed(fs, args); err != nil {
		return diffError
	}
	if fs.NArg() != 2 {
		fs.Usage()
		return diffError
	}
	fail := func(err error) int {
		fmt.Fprintln(stderr, "ncclhooks diff:", err)
		return diffError
	}
	opts := report.DiffOptions{MinSamples: *minSamples, ByChannel: *byChannel}
	var err error
	if opts.Stats, err = report.ParseStats(*stats); err != nil {
		return fail(fmt.Errorf("--stat: %w", err))
	}
	if opts.MaxRegress, err = report.ParseThreshold(*maxRegress); err != nil {
		return fail(fmt.Errorf("--max-regress: %w", err))
	}
	if opts.MinSamples < 1 {
		return fail(fmt.Errorf("--min-samples %d: give at least 1", opts.MinSamples))
	}
	format, err := outputFormat(*asJSON, *asMarkdown)
	if err != nil {
		return fail(err)
	}
	ropts := readOptions(*allowMixed, stderr)
	base, err := report.Load(fs.Args()[:1], ropts)
	if err != nil {
		return fail(fmt.Errorf("base: %w", err))
	}
	cand, err := report.Load(fs.Args()[1:], ropts)
	if err != nil {
		return fail(fmt.Errorf("new: %w", err))
	}
	if base.Profile != cand.Profile && !*allowMixed {
		return fail(fmt.Errorf("base profile %q and new profile %q differ: compare runs of one profile, or pass --allow-mixed", base.Profile, cand.Profile))
	}
	d := report.Compare(base, cand, opts)
	if err := d.Write(stdout, format); err != nil {
		return fail(err)
	}
	if !d.Pass {
		return diffRegression
	}
	return diffPass
}
