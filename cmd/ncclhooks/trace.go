package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/ncclhooks/ncclhooks/internal/trace"
)

func runTrace(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("trace", flag.ContinueOnError)
	fs.SetOutput(stderr)
	out := fs.String("o", "", "output file (\"-\": standard output; default trace.json, or trace.pftrace with --format perfetto)")
	format := fs.String("format", "json", "`json` (Chrome trace event format) or `perfetto` (Perfetto's native protobuf TrackEvent)")
	allowMixed := fs.Bool("allow-mixed", false, "merge files written with different profiles")
	fs.Usage = func() {
		fmt.Fprint(stderr, `usage: ncclhooks trace OUTPUT... [-o FILE] [--format json|perfetto]

Writes a Chrome trace event file (JSON) that the Perfetto UI
(https://ui.perfetto.dev) and chrome://tracing open, or with --format perfetto
Perfetto's native protobuf trace (TrackEvent: smaller, exact nanoseconds, and
a buffer fill counter per hook and device beside the drops; the UI and
trace_processor read it): a process per input file (a rank: "rank R (host
pid P)" from its comm lines), a track per communicator and channel, a slice
per work item named after its function (its communicator's comm_id and name
in its args), a counter of drops, and a counter
track per on-device aggregate and device (count, sum, min, max, or a
histogram's mean, a series per function and channel). Device timestamps
are placed on the host timeline with each device's clock line:
host_ns = ts - device_ns + host_unix_ns.
Exit status: 0 done, 2 usage or input error (ncclhooks help: the table).

`)
		fs.PrintDefaults()
	}
	if err := parseInterspersed(fs, args); err != nil {
		return exitUsage
	}
	if code := needArgs(fs, stderr, 1, -1, "OUTPUT (a JSON lines file or a dump directory)"); code != exitOK {
		return code
	}
	fail := func(err error) int {
		fmt.Fprintln(stderr, "ncclhooks trace:", err)
		return 2
	}
	write := trace.Write
	switch *format {
	case "json":
		if *out == "" {
			*out = "trace.json"
		}
	case "perfetto":
		write = trace.WritePerfetto
		if *out == "" {
			*out = "trace.pftrace"
		}
	default:
		fmt.Fprintf(stderr, "ncclhooks trace: --format %q: want json or perfetto\n", *format)
		return exitUsage
	}
	opts := readOptions(*allowMixed, stderr)
	if *out == "-" {
		if _, err := write(stdout, fs.Args(), opts); err != nil {
			return fail(err)
		}
		return 0
	}
	// Write next to the target and rename, so a viewer never opens half a trace.
	tmp, err := os.CreateTemp(filepath.Dir(*out), "."+filepath.Base(*out)+".*")
	if err != nil {
		return fail(err)
	}
	defer os.Remove(tmp.Name())
	sum, err := write(tmp, fs.Args(), opts)
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Chmod(tmp.Name(), 0o644)
	}
	if err != nil {
		return fail(err)
	}
	if err := os.Rename(tmp.Name(), *out); err != nil {
		return fail(err)
	}
	fill := ""
	if *format == "perfetto" {
		fill = fmt.Sprintf(", %d buffer fill samples", sum.FillCounters)
	}
	fmt.Fprintf(stderr, "ncclhooks trace: wrote %s: %d slices on %d tracks of %d process(es), %d drop counter samples%s, %d aggregate counter tracks (%d samples); %d unpaired START, %d unpaired STOP\n",
		*out, sum.Slices, sum.Tracks, sum.Processes, sum.Counters, fill, sum.AggTracks, sum.AggCounters, sum.UnpairedStarts, sum.UnpairedStops)
	if sum.Slices == 0 {
		fmt.Fprintf(stderr, "ncclhooks trace: no slices: no hook records a work item's START and STOP (timestamp, channelId, workCounter, phase) or its duration; the aggregates are drawn as %d counter tracks instead\n", sum.AggTracks)
	}
	if len(sum.NoClock) > 0 {
		fmt.Fprintf(stderr, "ncclhooks trace: warning: no clock line for %s: those slices keep raw device time\n", strings.Join(sum.NoClock, ", "))
	}
	if !quiet {
		fmt.Fprintln(stderr, "ncclhooks trace: open it at https://ui.perfetto.dev (Open trace file)")
	}
	return 0
}
