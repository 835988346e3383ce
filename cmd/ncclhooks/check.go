package main

import (
	"flag"
	"fmt"
	"io"

	"github.com/ncclhooks/ncclhooks/internal/config"
	"github.com/ncclhooks/ncclhooks/internal/harness"
)

// runCheck checks outputs the plugin wrote inside a job the harness did not
// play (real NCCL, or a caller built elsewhere): records + drops = matched
// for every hook and device, aggregates and records against the caller's
// event logs when there are some, one comm line per communicator, and for
// hooks that record comm, channelId, workCounter and phase one START and one
// STOP per work item, with function names from NCCL.
func runCheck(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("check", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var profPaths stringList
	fs.Var(&profPaths, "profile", "the profile the job ran (required); again for each profile a live reload made active (NCCL_HOOKS_RELOAD): each profile epoch of the output is checked against the one of its hash, an epoch of none by its accounting alone")
	events := fs.String("events", "", "directory of the caller's event logs (events-dev<d>-comm<k>.bin), if it wrote any")
	comms := fs.Int("comms", 0, "communicators each device must have a comm line for (0: do not check)")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: ncclhooks check OUTPUT_DIR --profile PROFILE [--events DIR] [--comms N]")
		fs.PrintDefaults()
	}
	if err := parseInterspersed(fs, args); err != nil {
		return exitUsage
	}
	if code := needArgs(fs, stderr, 1, 1, "OUTPUT_DIR"); code != exitOK {
		return code
	}
	if len(profPaths) == 0 {
		fmt.Fprintln(stderr, "ncclhooks check: missing --profile PROFILE: the profile the job ran, to check its output against")
		fs.Usage()
		return exitUsage
	}
	var profs []*config.Profile
	for _, pp := range profPaths {
		p, err := config.Load(pp)
		if err != nil {
			return profileError("check", err, stderr)
		}
		profs = append(profs, p)
	}
	prof := profs[0]
	fail := func(err error) int {
		fmt.Fprintln(stderr, "ncclhooks check:", err)
		return exitNoVerdict
	}
	files, err := harness.OutputFiles(fs.Arg(0))
	if err != nil {
		return fail(err)
	}
	// Checked against another profile, every count would be wrong: refuse
	// before checking anything.
	for _, file := range files {
		h, err := harness.ReadHeader(file)
		if err != nil {
			return fail(err)
		}
		if err := harness.SameProfile(prof, h); err != nil {
			return fail(fmt.Errorf("%s: %w: give --profile the profile the job ran", file, err))
		}
	}
	var logs map[int][]harness.Event
	var emitted map[int]uint64
	if *events != "" {
		if logs, emitted, err = harness.ReadEventLogs(*events); err != nil {
			return fail(err)
		}
	}
	ok := true
	for _, file := range files {
		s, err := harness.CheckFile(prof, file, 0, logs, emitted, profs[1:]...)
		if err != nil {
			return fail(err)
		}
		fmt.Fprintf(stdout, "%s: %d device(s), comm lines per device %v\n", file, s.Config.Devices, s.CommLines)
		s.Print(stdout)
		s.PrintAggs(stdout)
		s.PrintPairs(stdout)
		if len(s.Rows) == 0 {
			s.PrintAcross(stdout)
		}
		ok = ok && (s.OK() || len(s.Rows)+len(s.Aggs) == 0 && len(s.Problems) == 0) && len(s.Refused) == 0
		for d := range s.Config.Devices {
			if *comms > 0 && s.CommLines[d] != *comms {
				fmt.Fprintf(stdout, "MISMATCH device %d: %d comm lines, want %d\n", d, s.CommLines[d], *comms)
				ok = false
			}
		}
	}
	if !ok {
		fmt.Fprintln(stdout, "result: MISMATCH")
		return exitVerdict
	}
	fmt.Fprintln(stdout, "result: exact")
	return exitOK
}
