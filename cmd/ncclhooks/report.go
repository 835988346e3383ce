package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/ncclhooks/ncclhooks/internal/report"
)

func runReport(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("report", flag.ContinueOnError)
	fs.SetOutput(stderr)
	asJSON := fs.Bool("json", false, "write JSON")
	asMarkdown := fs.Bool("markdown", false, "write markdown (for a pull request or a wiki)")
	summary := fs.Bool("summary", false, "one row per function: leave out the per-channel rows")
	allowMixed := fs.Bool("allow-mixed", false, "merge files written with different profiles")
	htmlOut := fs.String("html", "", "also write the report as one self-contained HTML `FILE` of SVG charts: a histogram per function, a heat map of durations and skew per rank and channel, drops over time")
	by := fs.String("by", "", "per `rank`, `device` (GPU, by UUID) or `comm` across every process, the slowest marked")
	fs.Usage = func() {
		fmt.Fprint(stderr, `usage: ncclhooks report OUTPUT... [--by rank|device|comm] [--html FILE] [flags]

Per hook, function and channel: work items, p50/p90/p99/max of their durations
(START/STOP paired by device, channel and workCounter, or a recorded duration),
channel skew (slowest minus fastest channel median), and the capture ratio
records/(records+drops) from the final dump_stats; then the on-device aggregates,
merged over devices and ranks (histogram quantiles are the upper bounds of the
buckets that hold them). OUTPUT is a JSON lines file
or a dump directory (searched for *.jsonl); several ranks' files are merged.
With --by, each function's work items per rank, GPU or communicator instead
(processes told apart by host and pid, GPUs by UUID from the device lines),
the group with the largest p50 marked slowest, with the clock slowdowns
(power cap, thermal, ...) NVML saw on its GPUs. By rank also the arrival skew
of each collective (comm_id, channel, workCounter) across its ranks: latest
START - earliest, p50/p99/max, and the straggler, the rank the others wait for
(whose own work items are then the shortest: "slowest" blames the waiting).
Exit status: 0 done, 2 usage or input error, or an INACTIVE output (the
plugin recorded nothing in some process: its profile was refused); ncclhooks help has the table.
With --html FILE, also one page of SVG charts (no script, nothing fetched):
per hook and function a histogram of the durations and a heat map of the
median per rank (or device) and channel with each row's channel skew and
each channel's skew across ranks; the on-device histograms; the drops of
each hook over time (a line per process and device, from dump_stats).

`)
		fs.PrintDefaults()
	}
	if err := parseInterspersed(fs, args); err != nil {
		return exitUsage
	}
	if code := needArgs(fs, stderr, 1, -1, "OUTPUT (a JSON lines file or a dump directory)"); code != exitOK {
		return code
	}
	format, err := outputFormat(*asJSON, *asMarkdown)
	if err != nil {
		fmt.Fprintln(stderr, "ncclhooks report:", err)
		return 2
	}
	if *by != "" && *htmlOut != "" {
		fmt.Fprintln(stderr, "ncclhooks report: --html draws the report of every rank together; leave out --by")
		return exitUsage
	}
	if *by != "" {
		b, err := report.ParseBy(*by)
		if err != nil {
			fmt.Fprintln(stderr, "ncclhooks report:", err)
			return 2
		}
		rep, err := report.LoadBy(fs.Args(), readOptions(*allowMixed, stderr), b)
		if err == nil {
			err = rep.Write(stdout, format)
		}
		if err != nil {
			fmt.Fprintln(stderr, "ncclhooks report:", err)
			return 2
		}
		return inactiveExit(stderr, rep.Inactive, rep.Files)
	}
	c, page := report.NewCollector(), report.NewPage()
	add := c.Add
	if *htmlOut != "" {
		add = func(w *report.WorkItem) { c.Add(w); page.Add(w) }
	}
	run, err := report.Read(fs.Args(), readOptions(*allowMixed, stderr), add)
	if err != nil {
		fmt.Fprintln(stderr, "ncclhooks report:", err)
		return 2
	}
	rep := c.Report(run)
	if *htmlOut != "" {
		if err := writeHTML(*htmlOut, page, run, rep, stderr); err != nil {
			fmt.Fprintln(stderr, "ncclhooks report: --html:", err)
			return 2
		}
	}
	if err := rep.Write(stdout, format, *summary); err != nil {
		fmt.Fprintln(stderr, "ncclhooks report:", err)
		return 2
	}
	return inactiveExit(stderr, rep.Inactive, rep.Files)
}

// inactiveExit says INACTIVE and gives exit 2 when the plugin recorded
// nothing in some of the files: a report of them is not a report of the job.
func inactiveExit(stderr io.Writer, inactive []report.InactiveFile, files int) int {
	if len(inactive) == 0 {
		return 0
	}
	fmt.Fprintf(stderr, "ncclhooks report: INACTIVE: the plugin recorded nothing in %d of %d file(s) (%s: %s)\n",
		len(inactive), files, inactive[0].Path, firstLine(inactive[0].Reason))
	return 2
}

// firstLine is s up to its first newline (a reason's summary).
func firstLine(s string) string {
	first, _, _ := strings.Cut(s, "\n")
	return first
}

func outputFormat(asJSON, asMarkdown bool) (report.Format, error) {
	switch {
	case asJSON && asMarkdown:
		return 0, errors.New("--json and --markdown: choose one")
	case asJSON:
		return report.JSON, nil
	case asMarkdown:
		return report.Markdown, nil
	}
	return report.Table, nil
}

// parseInterspersed parses flags given before, between or after the
// positional arguments ("report out/ --json"), as users type them. A "--"
// ends the flags.
// A bad flag is said as "ncclhooks CMD: ..." before the usage (the flag
// package would print it bare).
func parseInterspersed(fs *flag.FlagSet, args []string) error {
	usage, out := fs.Usage, fs.Output()
	fs.Usage = func() {}
	fs.SetOutput(io.Discard)
	defer func() { fs.Usage = usage; fs.SetOutput(out) }()
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			fs.Usage = usage
			fs.SetOutput(out)
			if !errors.Is(err, flag.ErrHelp) {
				fmt.Fprintf(out, "ncclhooks %s: %v\n", fs.Name(), err)
			}
			usage()
			return err
		}
		rest := fs.Args()
		// fs.Parse stops at the first positional argument or after "--".
		consumed := len(args) - len(rest)
		if consumed > 0 && args[consumed-1] == "--" {
			pos = append(pos, rest...)
			break
		}
		if len(rest) == 0 {
			break
		}
		pos = append(pos, rest[0])
		args = rest[1:]
	}
	// Leave the positional arguments where fs.Args finds them.
	return fs.Parse(append([]string{"--"}, pos...))
}

// readOptions sets up reading, with a progress line when stderr is a
// terminal (not with --quiet).
func readOptions(allowMixed bool, stderr io.Writer) report.Options {
	opts := report.Options{AllowMixed: allowMixed, Warn: func(msg string) { fmt.Fprintf(stderr, "ncclhooks %s: warning: %s\n", command, msg) }}
	if f, ok := stderr.(*os.File); ok && isTerminal(f) && !quiet {
		opts.Progress = progressLine(f)
	}
	return opts
}

func isTerminal(f *os.File) bool {
	_, err := unix.IoctlGetTermios(int(f.Fd()), unix.TCGETS)
	return err == nil
}

// progressLine reports reading progress on one rewritten terminal line, at
// most every 200 ms, for inputs large enough to take a while.
func progressLine(w io.Writer) func(done, total int64) {
	start := time.Now()
	var last time.Time
	shown := false
	return func(done, total int64) {
		now := time.Now()
		if done >= total {
			if shown {
				fmt.Fprint(w, "\r\033[K")
			}
			return
		}
		if now.Sub(start) < 500*time.Millisecond || now.Sub(last) < 200*time.Millisecond {
			return
		}
		last, shown = now, true
		pct := 100 * float64(done) / float64(max(total, 1))
		rate := float64(done) / now.Sub(start).Seconds() / 1e6
		fmt.Fprintf(w, "\rreading %s of %s (%.0f%%, %.0f MB/s)\033[K", mib(done), mib(total), pct, rate)
	}
}

func mib(n int64) string {
	return strings.TrimSuffix(fmt.Sprintf("%.1f", float64(n)/(1<<20)), ".0") + " MiB"
}

// writeHTML writes the page next to its target and renames it, so that a
// browser never opens half a page.
func writeHTML(path string, page *report.Page, run *report.Run, rep *report.Report, stderr io.Writer) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	sum, err := page.Write(tmp, run, rep)
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Chmod(tmp.Name(), 0o644)
	}
	if err == nil {
		err = os.Rename(tmp.Name(), path)
	}
	if err != nil {
		return err
	}
	if !quiet {
		fmt.Fprintf(stderr, "ncclhooks report: wrote %s: %d histograms, %d heat maps, %d on-device histograms, %d drops charts\n",
			path, sum.Histograms, sum.HeatMaps, sum.AggCharts, sum.DropCharts)
	}
	return nil
}
