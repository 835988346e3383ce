// Command ncclhooks validates hook profiles, shows the code generated from
// them, runs them against the built-in NCCL-contract harness, and turns the
// plugin's output into reports, regression verdicts and traces.
package main

import (
	"fmt"
	"io"
	"os"
	"runtime/debug"
)

const usage = `ncclhooks: NCCL device-hook profiles

usage:
  ncclhooks validate PROFILE...        check profiles; every problem with file:line:col
  ncclhooks gen PROFILE [-o FILE]      print the generated CUDA/C source (--hooks: without the prelude)
  ncclhooks run PROFILE [flags]        play NCCL against the plugin with PROFILE and check the output
  ncclhooks check OUTPUT --profile P   check the output of a job the harness did not play (real NCCL)
  ncclhooks report OUTPUT... [flags]   durations, skew and capture ratio per hook, function and channel
  ncclhooks diff BASE NEW [flags]      regression verdict between two sets of runs (exit 0 pass, 1 regression, 2 no verdict or error)
  ncclhooks trace OUTPUT... -o FILE    Perfetto / Chrome trace of the work items
  ncclhooks funcs [OUTPUT]             NCCL's function names by id (OUTPUT's header, else the harness's table)
  ncclhooks bench [flags]              GPU hook cost against the nop hook (needs a GPU)
  ncclhooks reload PID [PROFILE]       live reload: write PROFILE over the profile a job watches (NCCL_HOOKS_RELOAD)
  ncclhooks soak-verdict SAMPLES       flat or not: slopes of a soak's samples (scripts/soak.sh), PASS or FAIL
  ncclhooks help [COMMAND]             this text, or a command's flags

options, before or after the command:
  -h, --help      help (exit 0)
  -q, --quiet     only results and errors: no plugin INFO lines, progress or hints
  --version       the version, from the build information

Run "ncclhooks help COMMAND" or "ncclhooks COMMAND -h" for a command's flags.

` + exitTable

// quiet is --quiet: commands leave out what is not a result or an error.
var quiet bool

// command is the command running, for messages of helpers that several
// commands share ("ncclhooks report: warning: ...").
var command string

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func commands() map[string]func([]string, io.Writer, io.Writer) int {
	return map[string]func([]string, io.Writer, io.Writer) int{
		"validate":     runValidate,
		"gen":          runGen,
		"run":          runRun,
		"check":        runCheck,
		"report":       runReport,
		"diff":         runDiff,
		"trace":        runTrace,
		"funcs":        runFuncs,
		"bench":        runBench,
		"reload":       runReload,
		"soak-verdict": runSoakVerdict,
	}
}

func run(args []string, stdout, stderr io.Writer) int {
	args, help, version := globalOptions(args)
	if version {
		fmt.Fprintln(stdout, versionString())
		return 0
	}
	if len(args) > 0 && args[0] == "help" {
		args, help = args[1:], true
	}
	if len(args) == 0 {
		if help {
			fmt.Fprint(stdout, usage)
			return 0
		}
		fmt.Fprint(stderr, usage)
		return exitUsage
	}
	if help && args[0] == "help" { // help help
		fmt.Fprint(stdout, usage)
		return exitOK
	}
	f, ok := commands()[args[0]]
	if !ok {
		fmt.Fprintf(stderr, "ncclhooks: unknown command %q\n\n%s", args[0], usage)
		return exitUsage
	}
	if help {
		// The command prints its usage for -h; asked for, it goes to
		// stdout, and asking is no error.
		if rc := f([]string{"-h"}, stdout, stdout); rc != 2 {
			return rc
		}
		return 0
	}
	command = args[0]
	return f(args[1:], stdout, stderr)
}

// globalOptions takes -h/--help (before a command's other arguments: a
// command given -h among them prints the same), --version and -q/--quiet out
// of args, anywhere before a "--".
func globalOptions(args []string) (rest []string, help, version bool) {
	for i, a := range args {
		switch a {
		case "--":
			return append(rest, args[i:]...), help, version
		case "-q", "-quiet", "--quiet":
			quiet = true
		case "--version", "-version":
			version = true
		case "-h", "-help", "--help":
			help = true
		default:
			rest = append(rest, a)
		}
	}
	return rest, help, version
}

// versionString is the module version and VCS state the binary was built
// from (runtime/debug's build information).
func versionString() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "ncclhooks (no build information)"
	}
	v := bi.Main.Version
	if v == "" {
		v = "(devel)"
	}
	var rev, at, dirty string
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.time":
			at = s.Value
		case "vcs.modified":
			if s.Value == "true" {
				dirty = "+dirty"
			}
		}
	}
	out := "ncclhooks " + v
	switch {
	case rev != "":
		out += fmt.Sprintf(" (%.12s%s, %s)", rev, dirty, at)
	case gitDescribe != "":
		out += " (" + gitDescribe + ")"
	}
	return out + " " + bi.GoVersion
}

// gitDescribe is set by make build (git describe) for builds that carry no
// VCS stamp.
var gitDescribe string
