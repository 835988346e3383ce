package main

import (
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"text/tabwriter"

	"github.com/ncclhooks/ncclhooks/internal/soak"
)

// runSoakVerdict judges a soak's samples (scripts/soak.sh): per process and
// metric the first, last and highest value, the least-squares slope per
// hour over the whole run and after warm-up, and PASS when every metric
// stays within its bound (soak.Rules). Samples taken after the duration
// (phase "after": finalize and the last dumps) are shown, not judged.
func runSoakVerdict(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("soak-verdict", flag.ContinueOnError)
	fs.SetOutput(stderr)
	rssSlope := fs.Float64("rss-slope", 1024, "RSS growth allowed after warm-up, KiB per hour")
	level := fs.Bool("level", true, "fail a count (threads, open files, goroutines, device memory) whose level rises after warm-up (the last quarter's 10th percentile above the third quarter's)")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: ncclhooks soak-verdict SAMPLES.tsv [flags]")
		fs.PrintDefaults()
	}
	if err := parseInterspersed(fs, args); err != nil {
		return exitUsage
	}
	if code := needArgs(fs, stderr, 1, 1, "SAMPLES"); code != exitOK {
		return code
	}
	f, err := os.Open(fs.Arg(0))
	if err != nil {
		fmt.Fprintf(stderr, "ncclhooks soak-verdict: %v\n", err)
		return exitNoVerdict
	}
	defer f.Close()
	series, err := soak.Read(f)
	if err != nil {
		fmt.Fprintf(stderr, "ncclhooks soak-verdict: %s: %v\n", fs.Arg(0), err)
		return exitNoVerdict
	}
	rules := append([]soak.Rule(nil), soak.Rules...)
	for i := range rules {
		if rules[i].Metric == "rss_kib" {
			rules[i].MaxSlope = *rssSlope
		}
		rules[i].Level = rules[i].Level && *level
	}
	results, err := soak.JudgeAll(series, rules)
	if err != nil {
		fmt.Fprintf(stderr, "ncclhooks soak-verdict: %s: %v\n", fs.Arg(0), err)
		return exitNoVerdict
	}
	if len(results) == 0 {
		fmt.Fprintf(stderr, "ncclhooks soak-verdict: %s: no metric to judge\n", fs.Arg(0))
		return exitNoVerdict
	}
	tw := tabwriter.NewWriter(stdout, 2, 8, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "process\tmetric\tsamples\tfirst\tlast\tmax\tslope/h\tslope/h after warm-up\tbound after warm-up\tresult\tmax after the duration\t")
	pass := true
	for _, r := range results {
		res := "PASS"
		if !r.Pass {
			res, pass = "FAIL", false
		}
		bound := "level"
		if !math.IsInf(r.Rule.MaxSlope, 1) {
			bound = fmt.Sprintf("%g %s/h", r.Rule.MaxSlope, r.Unit)
		}
		after := "-"
		if r.AfterN > 0 {
			after = fmt.Sprintf("%g (%d samples)", r.AfterMax, r.AfterN)
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%g\t%g\t%g\t%.4g\t%.4g\t%s\t%s\t%s\t\n", r.Group, r.Metric, r.N, r.First, r.Last, r.Max, r.SlopeAll, r.SlopeLate, bound, res, after)
	}
	tw.Flush()
	for _, r := range results {
		if !r.Pass {
			fmt.Fprintf(stdout, "FAIL %s %s: %s\n", r.Group, r.Metric, r.Why)
		}
	}
	if !pass {
		fmt.Fprintln(stdout, "verdict: FAIL")
		return exitVerdict
	}
	fmt.Fprintln(stdout, "verdict: PASS (after warm-up, the first half: RSS slope within its bound; the levels (10th percentiles) of threads, open files, goroutines and device memory not rising)")
	return exitOK
}
