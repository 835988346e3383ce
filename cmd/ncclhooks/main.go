// Command ncclhooks validates hook profiles, shows the code generated from
// them, runs them against the built-in NCCL-contract harness, and turns the
// plugin's output into reports, regression verdicts and traces.
package main

import (
	"fmt"
	"io"
	"os"
)

const usage = `ncclhooks: NCCL device-hook profiles

usage:
  ncclhooks validate PROFILE...        check profiles; every problem with file:line:col
  ncclhooks gen PROFILE                print the generated CUDA/C source
  ncclhooks run PROFILE [flags]        play NCCL against the plugin with PROFILE and check the output
  ncclhooks check OUTPUT --profile P   check the output of a job the harness did not play (real NCCL)
  ncclhooks report OUTPUT... [flags]   durations, skew and capture ratio per hook, function and channel
  ncclhooks diff BASE NEW [flags]      regression verdict between two sets of runs (exit 0 pass, 1 regression, 2 no verdict or error)
  ncclhooks trace OUTPUT... -o FILE    Perfetto / Chrome trace of the work items
  ncclhooks bench [flags]              GPU hook cost against the nop hook (needs a GPU)

Run "ncclhooks COMMAND -h" for a command's flags.
`

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return 2
	}
	cmds := map[string]func([]string, io.Writer, io.Writer) int{
		"validate": runValidate,
		"gen":      runGen,
		"run":      runRun,
		"check":    runCheck,
		"report":   runReport,
		"diff":     runDiff,
		"trace":    runTrace,
		"bench":    runBench,
	}
	switch args[0] {
	case "-h", "-help", "--help", "help":
		fmt.Fprint(stdout, usage)
		return 0
	}
	f, ok := cmds[args[0]]
	if !ok {
		fmt.Fprintf(stderr, "ncclhooks: unknown command %q\n\n%s", args[0], usage)
		return 2
	}
	return f(args[1:], stdout, stderr)
}
