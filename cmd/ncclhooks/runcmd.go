package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/ncclhooks/ncclhooks/internal/config"
	"github.com/ncclhooks/ncclhooks/internal/cuda"
	"github.com/ncclhooks/ncclhooks/internal/harness"
	"github.com/ncclhooks/ncclhooks/internal/schema"
)

// runRun runs a profile through the harness: flags, the backend, the
// plugin's environment, the run, then its summary.
func runRun(args []string, stdout, stderr io.Writer) int {
	var cfg harness.Config
	var rf runFlags
	fs := runFlagSet(stderr, &cfg, &rf)
	if err := parseInterspersed(fs, args); err != nil {
		return exitUsage
	}
	if code := needArgs(fs, stderr, 1, 1, "PROFILE"); code != exitOK {
		return code
	}
	profPath, _ := filepath.Abs(fs.Arg(0))
	prof, err := config.Load(fs.Arg(0))
	if err != nil {
		return profileError("run", err, stderr)
	}
	if code := applyRankFlags(&cfg, &rf, stderr); code != 0 {
		return code
	}
	cfg.Verify = !rf.noVerify
	if cfg.EventsDir != "" && !cfg.Verify {
		fmt.Fprintln(stderr, "ncclhooks run: --events-out needs the event log that --no-verify leaves out")
		return exitUsage
	}
	if code := chooseBackend(&cfg, rf.backend, isSet(fs, "devices"), stderr); code != 0 {
		return code
	}
	// The user's values as given: a zero or a value out of range is
	// refused with its range, never replaced by a default.
	if err := cfg.Validate(); err != nil {
		fmt.Fprintf(stderr, "ncclhooks run: %s\n", strings.ReplaceAll(err.Error(), "\n", "\nncclhooks run: "))
		return exitUsage
	}
	if cfg.EventsDir != "" {
		// Before the run, not after it: a run of minutes must not end in
		// "no such file or directory".
		if err := os.MkdirAll(cfg.EventsDir, 0o755); err != nil {
			fmt.Fprintf(stderr, "ncclhooks run: --events-out: %v\n", err)
			return exitUsage
		}
	}
	cfg.OutputDir = rf.out
	if cfg.OutputDir == "" {
		// As inside a job: a relative dump_dir is relative to the
		// process's working directory.
		cfg.OutputDir = prof.Output.DumpDir
	}
	worker := cfg.Ranks > 0 && isSet(fs, "rank")
	if cfg.Ranks > 0 && !worker {
		if cfg.Backend != "cpu" {
			fmt.Fprintln(stderr, "ncclhooks run: --ranks without --rank (a job of processes with collectives between them) runs on the cpu backend: pass --backend cpu")
			return exitUsage
		}
		return runRanks(fs, args, cfg, cfg.OutputDir, stdout, stderr)
	}
	if worker {
		cfg.Barrier = os.Getenv(harness.BarrierEnv)
	}
	var rl *reloadRun
	if len(rf.reloadTo) > 0 {
		if worker || cfg.Ranks > 0 {
			fmt.Fprintln(stderr, "ncclhooks run: --reload-to runs in one process: leave out --ranks")
			return exitUsage
		}
		// The plugin watches a copy beside the profile (its includes
		// resolve alike), which each target is written over in turn.
		data, err := os.ReadFile(profPath)
		if err != nil {
			fmt.Fprintf(stderr, "ncclhooks run: %v\n", err)
			return exitUsage
		}
		watched := filepath.Join(filepath.Dir(profPath), fmt.Sprintf(".ncclhooks-run-%d.yaml", os.Getpid()))
		if err := os.WriteFile(watched, data, 0o644); err != nil {
			fmt.Fprintf(stderr, "ncclhooks run: --reload-to: %v\n", err)
			return exitUsage
		}
		defer os.Remove(watched)
		for _, t := range rf.reloadTo {
			if p, err := config.Load(t); err == nil { // one that does not load is a refusal to see
				cfg.Epochs = append(cfg.Epochs, p)
			}
		}
		rl = &reloadRun{watched: watched, targets: rf.reloadTo, outDir: cfg.OutputDir, stderr: stderr}
		cfg.MidRun = rl.midRun
		profPath = watched
		os.Setenv("NCCL_HOOKS_RELOAD", rf.reloadEvery.String())
	}
	// The plugin reads its knobs when it is loaded, as it does inside NCCL.
	os.Setenv("NCCL_HOOKS_PROFILE", profPath)
	os.Setenv("NCCL_HOOKS_BACKEND", cfg.Backend)
	os.Setenv("NCCL_HOOKS_DUMP_DIR", cfg.OutputDir)
	p, err := harness.Open(rf.plugin)
	if err != nil {
		fmt.Fprintf(stderr, "ncclhooks run: %v (build it with make build, or pass --plugin)\n", err)
		return exitUsage
	}
	earlier := outputsIn(cfg.OutputDir)
	s, err := harness.Run(p, prof, cfg)
	if s != nil && rl != nil {
		s.Log = rl.log.String() + s.Log
	}
	if s != nil {
		// The plugin's log is diagnostics: stderr, so that stdout holds
		// the results alone; --quiet keeps only its WARN lines.
		printLog(stderr, s.Log)
	}
	if err != nil {
		// The run did not finish or its output could not be read: no
		// verdict.
		fmt.Fprintf(stderr, "ncclhooks run: %v\n", err)
		return exitNoVerdict
	}
	rc := printRunSummary(stdout, s, prof, p, cfg)
	if rl != nil {
		printReloads(stdout, s.OutputFile)
	}
	if len(earlier) > 0 && cfg.Barrier == "" { // a job's ranks: its parent says it
		// report, trace and diff merge every output of a directory.
		fmt.Fprintf(stderr, "ncclhooks run: note: %s also holds %d output(s) of earlier runs, which report, trace and diff of the directory merge with this one; give --out a new directory to keep runs apart\n", cfg.OutputDir, len(earlier))
	}
	return rc
}

// outputsIn lists the JSON lines outputs already in dir.
func outputsIn(dir string) []string {
	var files []string
	for _, g := range schema.OutputGlobs(dir) {
		m, _ := filepath.Glob(g)
		files = append(files, m...)
	}
	return files
}

// runFlags are the run command's flags besides the harness's Config.
type runFlags struct {
	backend, plugin, out string
	noVerify             bool
	straggler            int
	reloadTo             stringList
	reloadEvery          time.Duration
}

// stringList is a flag given any number of times.
type stringList []string

func (l *stringList) String() string     { return strings.Join(*l, ",") }
func (l *stringList) Set(v string) error { *l = append(*l, v); return nil }

// runFlagSet defines the run command's flags into cfg and rf.
func runFlagSet(stderr io.Writer, cfg *harness.Config, rf *runFlags) *flag.FlagSet {
	fs := flag.NewFlagSet("run", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&rf.backend, "backend", "auto", "where hooks run: auto (gpu when one is present, else cpu), gpu, cpu")
	fs.StringVar(&rf.plugin, "plugin", defaultPlugin(), "the plugin library to load")
	fs.StringVar(&rf.out, "out", "", "output directory (NCCL_HOOKS_DUMP_DIR; default: the profile's output.dump_dir)")
	fs.IntVar(&cfg.Devices, "devices", 2, "devices, 1..256 (simulated on cpu; on gpu at most the GPUs present)")
	fs.IntVar(&cfg.CommsPerDevice, "comms", 2, "communicators per device, 1..1024, concurrent, with the same channel ids")
	fs.IntVar(&cfg.Channels, "channels", 4, "channels per communicator, 1..64 (NCCL's MAXCHANNELS); on cpu a thread each, at most 4096 in all")
	fs.IntVar(&cfg.Items, "items", 2000, "work items per channel (per launch on gpu), 1..100000000")
	fs.IntVar(&cfg.Batch, "batch", 4, "work items per batch (STARTs, work, STOPs), 1..64")
	fs.IntVar(&cfg.WorkFloats, "work", 256, "cpu: floats reduced per work item")
	fs.Float64Var(&cfg.Slowdown, "slowdown", 1, "cpu: plant a regression: stretch every batch's work (busy wait) so each work item lasts this factor as long (1.05: 5% slower)")
	fs.IntVar(&cfg.BytesPerItem, "bytes", 64<<10, "gpu: bytes moved per work item")
	fs.BoolVar(&cfg.Graph, "graph", false, "gpu: capture the launches in a CUDA graph and replay it")
	fs.IntVar(&cfg.Replays, "replays", 1, "gpu: launches (or graph replays) per communicator")
	fs.Float64Var(&cfg.EventRate, "event-rate", 0, "gpu: pace the kernels to about this many events per second on each device (0: as fast as the work goes)")
	fs.IntVar(&cfg.Ranks, "ranks", 0, "cpu: run a job of this many processes (one device each unless --devices), each a rank of the same communicators, every work item a collective between them; with --rank, play one process of such a job alone")
	fs.IntVar(&cfg.Rank, "rank", 0, "with --ranks: this process's rank (its devices are ranks rank*devices, ...)")
	fs.BoolVar(&rf.noVerify, "no-verify", false, "skip the per-event log and record-by-record check (faster, for rates)")
	fs.DurationVar(&cfg.Duration, "duration", 0, "soak: repeat the run's cycle (init every communicator, emit, finalize) in this one process until this much time has passed (10m), then check every dump of the output; needs --no-verify")
	fs.DurationVar(&cfg.Gap, "gap", 0, "soak: pause between two cycles of --duration, while the plugin dumps idle (200ms)")
	fs.StringVar(&cfg.EventsDir, "events-out", "", "write the events the harness emitted into this directory (events-dev<d>-comm<k>.bin, what check --events reads)")
	fs.Var(&rf.reloadTo, "reload-to", "live reload mid-run: once every channel is half done (gpu: between replays), write this profile over the one the plugin watches and wait for its verdict; repeat for several reloads in turn")
	fs.DurationVar(&rf.reloadEvery, "reload-interval", 250*time.Millisecond, "with --reload-to: how often the plugin looks at its profile (NCCL_HOOKS_RELOAD)")
	rankFlags(fs, cfg, rf)
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: ncclhooks run PROFILE [flags]")
		fs.PrintDefaults()
	}
	return fs
}

// chooseBackend sets cfg.Backend from --backend (auto: gpu when one is
// present) and caps the devices at the GPUs present; it returns the exit
// code of a refusal, or 0.
func chooseBackend(cfg *harness.Config, backend string, devicesSet bool, stderr io.Writer) int {
	cfg.Backend = backend
	switch backend {
	case "auto", "gpu", "cpu":
	default:
		fmt.Fprintf(stderr, "ncclhooks run: --backend %q: use auto (gpu when one is present, else cpu), gpu or cpu\n", backend)
		return exitUsage
	}
	if cfg.Backend == "auto" {
		cfg.Backend = "cpu"
		if n, err := gpuCount(); err == nil && n > 0 {
			cfg.Backend = "gpu"
		}
	}
	if cfg.Backend == "gpu" {
		n, err := gpuCount()
		if err != nil || n == 0 {
			fmt.Fprintf(stderr, "ncclhooks run: --backend gpu needs a GPU: %v\n", orNone(err))
			return exitUsage
		}
		if cfg.Devices > n {
			if devicesSet {
				fmt.Fprintf(stderr, "ncclhooks run: --devices %d: this machine has %d GPU(s)\n", cfg.Devices, n)
				return exitUsage
			}
			cfg.Devices = n // the default, 2, on a machine of one GPU
		}
	}
	return 0
}

// printRunSummary prints what the run emitted and what the plugin accounted
// for; it returns 0 when they agree exactly.
func printRunSummary(stdout io.Writer, s *harness.Summary, prof *config.Profile, p *harness.Plugin, cfg harness.Config) int {
	fmt.Fprintf(stdout, "\nncclhooks run: profile %q on the %s backend, plugin %s (ncclProfiler_v%d)\n", prof.Name, cfg.Backend, p.Path, p.Version)
	cycles := ""
	if s.Cycles > 1 {
		cycles = fmt.Sprintf(", %d cycles in %v", s.Cycles, s.Total.Round(time.Millisecond))
	}
	fmt.Fprintf(stdout, "%d devices x %d communicators x %d channels x %d items%s: %d events in %v (%.2f M events/s)\n\n",
		cfg.Devices, cfg.CommsPerDevice, cfg.Channels, cfg.Items*max(cfg.Replays, 1), cycles, s.Emitted, s.Emit.Round(1e3), s.EventsPerSec()/1e6)
	if !s.HookActive {
		fmt.Fprintln(stdout, "the plugin returned no hook: it is inactive (see its log above)")
		return 1
	}
	if len(s.Rows) > 0 {
		s.Print(stdout)
	}
	if len(s.Aggs) > 0 {
		fmt.Fprintln(stdout)
		s.PrintAggs(stdout)
	}
	if s.Epochs > 1 && len(s.Rows) == 0 {
		s.PrintAcross(stdout)
	}
	fmt.Fprintf(stdout, "\noutput: %s\n", s.OutputFile)
	if !s.OK() {
		fmt.Fprintln(stdout, "result: MISMATCH between what was emitted and what the plugin accounted for")
		return 1
	}
	fmt.Fprintln(stdout, "result: exact (records + drops = matched events for every hook and device; aggregates as computed by the harness)")
	return 0
}

// printLog writes the plugin's log lines ("WARN ...", "INFO ...", and a
// multi-line message's continuation lines); --quiet leaves out the INFO
// messages.
func printLog(w io.Writer, log string) {
	info := false
	for _, l := range strings.Split(strings.TrimSpace(log), "\n") {
		switch {
		case strings.HasPrefix(l, "INFO "):
			info = true
		case strings.HasPrefix(l, "WARN "):
			info = false
		}
		if l != "" && !(quiet && info) {
			fmt.Fprintln(w, "plugin:", l)
		}
	}
}

func gpuCount() (int, error) {
	lib, err := cuda.Open()
	if err != nil {
		return 0, err
	}
	return lib.DeviceCount()
}

func orNone(err error) any {
	if err == nil {
		return "no device found"
	}
	return err
}

// defaultPlugin is the library next to the executable (make build puts both
// in build/).
func defaultPlugin() string {
	exe, err := os.Executable()
	if err != nil {
		return "libnccl-profiler-hooks.so"
	}
	return filepath.Join(filepath.Dir(exe), "libnccl-profiler-hooks.so")
}
