package main

// run --ranks N without --rank: a job of N processes on this host, each
// this CLI again in the worker mode (--rank R, with harness.BarrierEnv
// naming the barrier file they share), each one rank of the same
// communicators loading the real plugin and writing its own output.

import (
	"bytes"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/ncclhooks/ncclhooks/internal/harness"
)

// rankFlags defines the flags of a job's ranks.
func rankFlags(fs *flag.FlagSet, cfg *harness.Config, rf *runFlags) {
	fs.IntVar(&rf.straggler, "straggler", -1, "cpu: plant a straggler: this rank (0 to ranks-1) arrives late at each collective (with --straggler-delay)")
	fs.DurationVar(&cfg.StragglerDelay, "straggler-delay", 0, "cpu: how late the --straggler rank starts each batch of collectives (1ms)")
}

// applyRankFlags checks the flags of a job's ranks into cfg; it returns the
// exit code of a refusal, or 0.
func applyRankFlags(cfg *harness.Config, rf *runFlags, stderr io.Writer) int {
	cfg.Straggler = rf.straggler
	if (rf.straggler >= 0) != (cfg.StragglerDelay > 0) {
		fmt.Fprintln(stderr, "ncclhooks run: --straggler RANK and --straggler-delay DUR go together")
		return 2
	}
	return 0
}

// isSet says whether flag name was given.
func isSet(fs *flag.FlagSet, name string) bool {
	set := false
	fs.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}

// rankProc is one spawned rank.
type rankProc struct {
	cmd            *exec.Cmd
	stdout, stderr bytes.Buffer
	code           int
}

// runRanks runs args (the run command's, with --ranks) as cfg.Ranks
// processes, one per rank, and prints each one's summary; it fails when one
// of them does.
func runRanks(fs *flag.FlagSet, args []string, cfg harness.Config, outDir string, stdout, stderr io.Writer) int {
	exe, err := os.Executable()
	if err != nil {
		fmt.Fprintf(stderr, "ncclhooks run --ranks: %v\n", err)
		return 2
	}
	if !isSet(fs, "devices") {
		cfg.Devices = 1 // a job's process drives one GPU
	}
	bar, err := harness.CreateBarrier("", cfg)
	if err != nil {
		fmt.Fprintf(stderr, "ncclhooks run --ranks: %v\n", err)
		return 2
	}
	defer os.Remove(bar)
	earlier := outputsIn(outDir)
	procs := make([]*rankProc, cfg.Ranks)
	for r := range procs {
		a := append([]string{"run", "--devices", fmt.Sprint(cfg.Devices)}, args...)
		a = append(a, "--rank", fmt.Sprint(r))
		if quiet {
			a = append([]string{"--quiet"}, a...)
		}
		if cfg.EventsDir != "" { // every rank's event logs have the same names
			a = append(a, "--events-out", filepath.Join(cfg.EventsDir, fmt.Sprintf("rank%d", r)))
		}
		p := &rankProc{cmd: exec.Command(exe, a...)}
		p.cmd.Env = append(os.Environ(), harness.BarrierEnv+"="+bar)
		p.cmd.Stdout, p.cmd.Stderr = &p.stdout, &p.stderr
		procs[r] = p
	}
	start := time.Now()
	var once sync.Once
	var wg sync.WaitGroup
	for r, p := range procs {
		if err := p.cmd.Start(); err != nil {
			fmt.Fprintf(stderr, "ncclhooks run --ranks: starting rank %d: %v\n", r, err)
			p.code = 2
			killAll(procs)
			break
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			p.cmd.Wait()
			if p.code = p.cmd.ProcessState.ExitCode(); p.code != 0 {
				// The others would wait for it at the next collective.
				once.Do(func() { killAll(procs) })
			}
		}()
	}
	wg.Wait()
	code := 0
	for r, p := range procs {
		pid := 0
		if p.cmd.Process != nil {
			pid = p.cmd.Process.Pid
		}
		fmt.Fprintf(stdout, "== rank %d of %d (pid %d): exit %d\n", r, cfg.Ranks, pid, p.code)
		stdout.Write(p.stdout.Bytes())
		for _, l := range strings.Split(strings.TrimRight(p.stderr.String(), "\n"), "\n") {
			if l != "" {
				fmt.Fprintf(stderr, "rank %d: %s\n", r, l)
			}
		}
		if p.code > code {
			code = p.code
		} else if p.code < 0 && code == 0 { // killed
			code = 1
		}
	}
	late := ""
	if cfg.StragglerDelay > 0 {
		late = fmt.Sprintf("; rank %d planted %v late at each collective", cfg.Straggler, cfg.StragglerDelay)
	}
	fmt.Fprintf(stdout, "\nncclhooks run: a job of %d ranks (%d processes x %d devices) in %v: each work item a collective between them, its STOP on every rank after the last rank's START%s\n",
		cfg.Ranks*cfg.Devices, cfg.Ranks, cfg.Devices, time.Since(start).Round(time.Millisecond), late)
	if code != 0 {
		fmt.Fprintln(stdout, "result: a rank failed (its output above)")
		return code
	}
	fmt.Fprintf(stdout, "result: exact on every rank\nnext: ncclhooks report %s --by rank\n", outDir)
	if len(earlier) > 0 {
		fmt.Fprintf(stderr, "ncclhooks run: note: %s also holds %d output(s) of earlier runs, which report, trace and diff of the directory merge with this one; give --out a new directory to keep runs apart\n", outDir, len(earlier))
	}
	return 0
}

// killAll ends the ranks still running (those this command started).
func killAll(procs []*rankProc) {
	for _, p := range procs {
		if p != nil && p.cmd.Process != nil {
			p.cmd.Process.Kill() // ErrProcessDone for one that has exited
		}
	}
}
