package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/ncclhooks/ncclhooks/internal/config"
)

// Exit statuses, one per kind of outcome, the same for every command (the
// table is in the usage text and the README).
const (
	// exitOK: done; for a check, exact; for diff, PASS.
	exitOK = 0
	// exitVerdict: a verdict against the input: an invalid profile, a
	// MISMATCH, a regression (diff FAIL), an inactive plugin.
	exitVerdict = 1
	// exitNoVerdict and exitUsage: no verdict could be given: a usage
	// error (bad flag, missing argument, value out of range), unreadable
	// input, or a run that could not finish.
	exitNoVerdict = 2
	exitUsage     = 2
)

const exitTable = `exit status, every command:
  0  ok: done, exact, PASS
  1  a verdict against the input: invalid profile, MISMATCH, regression (diff FAIL)
  2  no verdict: usage error (bad flag, missing argument, value out of range),
     unreadable input, a run that could not finish, diff without enough data
`

// needArgs refuses fewer than lo or more than hi (-1: any) positional
// arguments, naming what is missing (names: the arguments in order, the
// last one repeatable where hi is -1); it returns exitOK when they fit.
func needArgs(fs *flag.FlagSet, stderr io.Writer, lo, hi int, names ...string) int {
	n := fs.NArg()
	switch {
	case n < lo:
		fmt.Fprintf(stderr, "ncclhooks %s: missing %s\n", fs.Name(), strings.Join(names[n:lo], " and "))
	case hi >= 0 && n > hi:
		fmt.Fprintf(stderr, "ncclhooks %s: %d argument(s) where %d go (%s): %s\n", fs.Name(), n, hi, strings.Join(names, " "), strings.Join(fs.Args(), " "))
	default:
		return exitOK
	}
	fs.Usage()
	return exitUsage
}

// profileError prints why a profile did not load and returns its exit
// status: an invalid profile is a verdict (every problem with
// file:line:col), one that cannot be read is not.
func profileError(cmd string, err error, stderr io.Writer) int {
	fmt.Fprintf(stderr, "ncclhooks %s: %s\n", cmd, strings.ReplaceAll(err.Error(), "\n", "\n"+"ncclhooks "+cmd+": "))
	var list config.ErrorList
	if errors.As(err, &list) {
		return exitVerdict
	}
	return exitNoVerdict
}

// diffArgsError says which of diff's inputs is missing (BASE NEW, or
// --base and --new), then its usage.
func diffArgsError(fs *flag.FlagSet, bases, news int, stderr io.Writer) int {
	n := fs.NArg()
	var why string
	switch {
	case n > 0 && bases+news > 0:
		why = "give BASE NEW or --base and --new, not both"
	case bases > 0:
		why = "missing --new (a new run, or a directory of runs)"
	case news > 0:
		why = "missing --base (a base run, or a directory of runs)"
	case n == 0:
		why = "missing BASE and NEW (each a run, or a directory of runs)"
	case n == 1:
		why = "missing NEW (the new run, or a directory of runs, after BASE " + fs.Arg(0) + ")"
	default:
		why = fmt.Sprintf("%d arguments where 2 go (BASE NEW): %s", n, strings.Join(fs.Args(), " "))
	}
	fmt.Fprintf(stderr, "ncclhooks %s: %s\n", fs.Name(), why)
	fs.Usage()
	return exitUsage
}
