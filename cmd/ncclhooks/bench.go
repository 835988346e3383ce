package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"runtime"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/ncclhooks/ncclhooks/internal/backend"
	"github.com/ncclhooks/ncclhooks/internal/backend/gpu"
	"github.com/ncclhooks/ncclhooks/internal/config"
	"github.com/ncclhooks/ncclhooks/internal/cuda"
	"github.com/ncclhooks/ncclhooks/internal/harness"
	"github.com/ncclhooks/ncclhooks/internal/harness/gpuharness"
	"github.com/ncclhooks/ncclhooks/internal/hookgen"
	"github.com/ncclhooks/ncclhooks/internal/lifecycle"
	"github.com/ncclhooks/ncclhooks/internal/rings"
	"github.com/ncclhooks/ncclhooks/internal/sinks"
)

// runBench measures, on one GPU: per-call hook cost against the nop hook in
// the same run, the event rates a profile sustains with zero drops and the
// drain's CPU at those rates, and plugin init time with a cold and a warm
// compile cache.
func runBench(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	profiles := fs.String("profiles", "examples/all-events.yaml", "comma-separated profiles to measure")
	rates := fs.String("rates", "5e6,1e7,2e7,4e7,8e7", "event rates (events/s per device) for the zero-drop search")
	ordinal := fs.Int("device", 0, "CUDA device")
	outFile := fs.String("o", "", "also append the results (markdown) to this file")
	cpuProfile := fs.String("cpuprofile", "", "write a CPU profile of the sustained-rate runs (the drain) to this file")
	batches := fs.Int("batches", 2000, "work batches per sustained-rate row (2000: 1,024,000 events)")
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "usage: ncclhooks bench [flags]   (needs a GPU; results in bench/RESULTS.md)")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if *batches <= 0 {
		fmt.Fprintf(stderr, "ncclhooks bench: --batches: %d is not a positive number of work batches\n", *batches)
		return 2
	}
	lib, err := cuda.Open()
	if err == nil {
		var n int
		if n, err = lib.DeviceCount(); err == nil && n == 0 {
			err = fmt.Errorf("no CUDA device")
		}
	}
	if err != nil {
		fmt.Fprintf(stdout, "ncclhooks bench: no GPU (%v): the GPU benchmarks need one; skipped\n", err)
		return 0
	}
	var rateList []float64
	for _, r := range strings.Split(*rates, ",") {
		v, err := strconv.ParseFloat(strings.TrimSpace(r), 64)
		if err != nil || v <= 0 {
			fmt.Fprintf(stderr, "ncclhooks bench: --rates: %q is not a positive number\n", r)
			return 2
		}
		rateList = append(rateList, v)
	}
	var md strings.Builder
	b := &bench{lib: lib, ordinal: *ordinal, md: &md, out: stdout, cpuProfile: *cpuProfile, batches: *batches}
	if err := b.run(strings.Split(*profiles, ","), rateList); err != nil {
		fmt.Fprintf(stderr, "ncclhooks bench: %v\n", err)
		return exitNoVerdict
	}
	if *outFile != "" {
		f, err := os.OpenFile(*outFile, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
		if err != nil {
			fmt.Fprintln(stderr, "ncclhooks bench:", err)
			return exitNoVerdict
		}
		defer f.Close()
		fmt.Fprint(f, md.String())
	}
	return 0
}

type bench struct {
	lib        *cuda.Lib
	ordinal    int
	md         *strings.Builder
	out        io.Writer
	cpuProfile string
	batches    int // work batches per sustained-rate row
}

// emit prints a section to the terminal and to the markdown results.
func (b *bench) emit(title string, header []string, rows [][]string) {
	fmt.Fprintf(b.out, "\n%s\n", title)
	tw := tabwriter.NewWriter(b.out, 2, 8, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, strings.Join(header, "\t")+"\t")
	for _, r := range rows {
		fmt.Fprintln(tw, strings.Join(r, "\t")+"\t")
	}
	tw.Flush()
	fmt.Fprintf(b.md, "\n### %s\n\n| %s |\n|%s\n", title, strings.Join(header, " | "), strings.Repeat(" --- |", len(header)))
	for _, r := range rows {
		fmt.Fprintf(b.md, "| %s |\n", strings.Join(r, " | "))
	}
}

// run measures on the bench device in phases: the device and harness, the
// reference hooks (counting, nop) and the profiles (init time), the hook cost
// per call, then the sustained rates.
func (b *bench) run(profiles []string, rates []float64) error {
	dev, err := b.lib.Device(b.ordinal)
	if err != nil {
		return err
	}
	defer dev.Close()
	b.header(dev)
	h, err := gpuharness.New(dev, nil)
	if err != nil {
		return err
	}
	defer h.Close()
	for _, l := range strings.Split(h.Image.Log, "\n") {
		if strings.Contains(l, "Compiling entry") || strings.Contains(l, "Used ") {
			fmt.Fprintln(b.out, "  harness:", strings.TrimSpace(l))
		}
	}
	counter, err := gpuharness.LoadCountingHook(dev, nil)
	if err != nil {
		return err
	}
	defer counter.Close()
	// The region design's record path, by hand (no load but the event's):
	// the floor that what hookgen generates for positions: work
	// (examples/every-event.yaml) is measured against.
	region, err := gpuharness.LoadRegionHook(dev, nil)
	if err != nil {
		return err
	}
	defer region.Close()

	nop, err := gpuharness.LoadNopHook(dev, nil)
	if err != nil {
		return err
	}
	defer nop.Close()
	loaded, err := b.loadProfiles(profiles)
	defer func() {
		for i := len(loaded) - 1; i >= 0; i-- {
			loaded[i].close()
		}
	}()
	if err != nil {
		return err
	}
	if err := b.hookCost(h, []gpuharness.Hook{counter.Hook, region.Hook}, loaded); err != nil {
		return err
	}
	return b.sustainedRates(h, nop.Hook, loaded, rates)
}

// header names the device, the driver and NVRTC, with the date in the
// markdown results.
func (b *bench) header(dev *cuda.Device) {
	major, minor := b.lib.NVRTCVersion()
	fmt.Fprintf(b.md, "\n## %s: device %d %s (%s), driver %d, NVRTC %d.%d\n",
		time.Now().UTC().Format("2006-01-02 15:04 UTC"), b.ordinal, dev.Name, dev.Arch(), b.lib.DriverVersion(), major, minor)
	fmt.Fprintf(b.out, "device %d: %s (%s), driver %d, NVRTC %d.%d\n", b.ordinal, dev.Name, dev.Arch(), b.lib.DriverVersion(), major, minor)
}

// loadProfiles loads each profile (see load) and emits their init times. The
// profiles loaded are returned even with an error, for the caller to close.
func (b *bench) loadProfiles(profiles []string) ([]*loadedProfile, error) {
	var inits [][]string
	var loaded []*loadedProfile
	for _, path := range profiles {
		lp, initRows, err := b.load(strings.TrimSpace(path))
		if err != nil {
			return loaded, err
		}
		loaded = append(loaded, lp)
		inits = append(inits, initRows...)
	}
	b.emit("Plugin init per device (compile + load + resolve)", []string{"profile", "cache", "compile", "load", "total"}, inits)
	return loaded, nil
}

// hookCost measures the cost per call of the counting hook and the profiles'
// hooks against the nop hook, and prints what the profiles' drains saw.
func (b *bench) hookCost(h *gpuharness.Harness, handWritten []gpuharness.Hook, loaded []*loadedProfile) error {
	hooks := slices.Clone(handWritten)
	for _, lp := range loaded {
		hooks = append(hooks, lp.hook())
	}
	costs, err := h.HookCost(hooks, gpuharness.CostOptions{})
	if err != nil {
		return err
	}
	var rows [][]string
	for _, c := range costs {
		rows = append(rows, []string{c.Hook, fmt.Sprintf("%.1f", c.NsPerCall), fmt.Sprintf("%.0f", c.CyclesPerCall), fmt.Sprintf("%.2fx", c.RatioToNop)})
	}
	b.emit("Hook cost per call on the calling thread (32 blocks x 4000 calls, median of 5 rounds)", []string{"hook", "ns/call", "cycles/call", "vs nop"}, rows)
	for _, lp := range loaded {
		lp.drainer.Flush(false)
		st := lp.sink.last()
		fmt.Fprintf(b.out, "  %s during the cost runs: matched %d, records %d, dropped %d\n", lp.name, st.Matched, st.Records, st.Dropped)
	}
	return nil
}

// sustainedRates runs each profile at each rate (under the CPU profile, if
// one was asked for) and emits the rates achieved, the drops and the drain's
// CPU.
func (b *bench) sustainedRates(h *gpuharness.Harness, nop gpuharness.Hook, loaded []*loadedProfile, rates []float64) error {
	var rows [][]string
	cfg := gpuharness.DefaultConfig()
	cfg.Comms, cfg.Channels, cfg.Batches, cfg.ItemsPerBatch, cfg.BytesPerItem = benchComms, 16, b.batches, 4, 16
	cfg.FuncIDs = nil
	for id := 0; id < harness.FuncCount(); id++ {
		cfg.FuncIDs = append(cfg.FuncIDs, uint32(id))
	}
	if b.cpuProfile != "" {
		f, err := os.Create(b.cpuProfile)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
		defer pprof.StopCPUProfile()
	}
	for _, lp := range loaded {
		for _, rate := range rates {
			cfg.EventRate = rate
			row, err := rateRow(h, nop, lp, cfg)
			if err != nil {
				return err
			}
			rows = append(rows, row)
		}
	}
	b.emit("Sustained event rate (4 comms x 16 channels, paced) and drain CPU, % of one core over the time the events took: "+
		"the process's CPU over the nop run's, and of it the poller's passes (device buffers to the Go rings) and the "+
		"deliverer's deliveries (decoding, the sink); the rest is waking, sleeping and the Go runtime",
		[]string{"profile", "target ev/s", "achieved ev/s", "matched", "records", "dropped", "drain CPU", "poller", "deliverer",
			"deliverer wake-ups/s"}, rows)
	// What the drainers cost between bursts: after these rows each has seen
	// its buffer fill fast, so for a second an idle poller looks for the
	// next burst far more often than its idle interval (rings: idleWait);
	// then it keeps to the interval.
	idle := func(from, to time.Duration) float64 {
		time.Sleep(from)
		cpu, wall, _ := cpuDuring(func() error { time.Sleep(to - from); return nil })
		return 100 * cpu.Seconds() / wall.Seconds()
	}
	watching := idle(100*time.Millisecond, 900*time.Millisecond)
	after := idle(600*time.Millisecond, 1600*time.Millisecond)
	fmt.Fprintf(b.out, "\nIdle after the sustained rows, %d drainers: process CPU %.1f%% of one core 0.1-0.9 s after, %.1f%% 1.5-2.5 s after\n",
		len(loaded), watching, after)
	return nil
}

// rateRow runs the nop hook, then the profile's, at cfg.EventRate: the
// profile's row of what it achieved, its drain's counts over the run and the
// CPU over the nop run's.
func rateRow(h *gpuharness.Harness, nop gpuharness.Hook, lp *loadedProfile, cfg gpuharness.Config) ([]string, error) {
	nopCPU, _, err := cpuDuring(func() error { _, err := h.Throughput(nop, cfg); return err })
	if err != nil {
		return nil, err
	}
	lp.drainer.Flush(false)
	before := lp.sink.last()
	poll0, deliver0 := lp.drainer.StageCPU()
	wakes0 := lp.drainer.Wakes()
	hook, err := lp.freshHook()
	if err != nil {
		return nil, err
	}
	var tp *gpuharness.Throughput
	cpu, _, err := cpuDuring(func() error {
		var err error
		tp, err = h.Throughput(hook, cfg)
		if err == nil {
			time.Sleep(20 * time.Millisecond) // let the drain catch up before the dump
			lp.drainer.Flush(false)
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	after := lp.sink.last()
	poll1, deliver1 := lp.drainer.StageCPU()
	wakes := lp.drainer.Wakes() - wakes0
	// Per second of the events (the harness's run), not of the whole
	// measurement: the pause and the flush after it add wall time but
	// little CPU, and in a 20 ms row they halved the figure.
	perCore := func(d time.Duration) string {
		return fmt.Sprintf("%.0f%%", max(d.Seconds()/tp.Elapsed.Seconds()*100, 0))
	}
	return []string{lp.name, fmt.Sprintf("%.3g", cfg.EventRate), fmt.Sprintf("%.3g", tp.EventsPerSec),
		fmt.Sprint(after.Matched - before.Matched), fmt.Sprint(after.Records - before.Records),
		fmt.Sprintf("%d (full %d, overwritten %d, ring %d)", after.Dropped-before.Dropped, after.DroppedBufferFull-before.DroppedBufferFull,
			after.DroppedOverwritten-before.DroppedOverwritten, after.DroppedRingFull-before.DroppedRingFull), perCore(cpu - nopCPU), perCore(poll1 - poll0), perCore(deliver1 - deliver0),
		fmt.Sprintf("%.0f", float64(wakes)/tp.Elapsed.Seconds())}, nil
}

// loadedProfile is a profile compiled and loaded on the bench device with a
// drainer behind it, as the plugin does it.
type loadedProfile struct {
	name    string
	dev     backend.Device
	drainer *rings.Drainer
	sink    *lastDump
	comms   int // communicators made on dev (freshHook)
}

// benchComms is how many communicators the sustained rows run.
const benchComms = 4

func (lp *loadedProfile) close() {
	lp.drainer.Close()
	lp.dev.Close()
}

// hook is the harness's view of a loaded profile's hook, with communicator
// 0's context.
func (lp *loadedProfile) hook() gpuharness.Hook {
	return gpuharness.Hook{Name: lp.name, Entry: uint64(lp.dev.Entry()), Ctx: uint64(lp.dev.Ctx())}
}

// freshHook is hook with benchComms communicators made for it, each with a
// context of its own, as the plugin hands them out. Every run gets new
// ones: the harness starts each run's work counters at 1, as NCCL does for
// a new communicator, and a profile with work positions places records by
// them, one writer per (communicator, channel): a second run on the same
// contexts would write positions its drain has already decided.
func (lp *loadedProfile) freshHook() (gpuharness.Hook, error) {
	h := lp.hook()
	for range benchComms {
		ctx, err := lp.dev.CommCtx(lp.comms)
		if err != nil {
			return h, err
		}
		lp.comms++
		h.CommCtx = append(h.CommCtx, uint64(ctx))
	}
	return h, nil
}

// load compiles the profile twice, through an empty cache and through the
// same cache again, and keeps the second load with a drainer attached.
func (b *bench) load(path string) (*loadedProfile, [][]string, error) {
	p, err := config.Load(path)
	if err != nil {
		return nil, nil, err
	}
	m, err := hookgen.Generate(p)
	if err != nil {
		return nil, nil, err
	}
	dir, err := os.MkdirTemp("", "ncclhooks-bench-cache")
	if err != nil {
		return nil, nil, err
	}
	defer os.RemoveAll(dir)
	cache, err := cuda.OpenCache(dir)
	if err != nil {
		return nil, nil, err
	}
	var rows [][]string
	var compiled backend.Compiled
	for _, label := range []string{"cold", "warm"} {
		t0 := time.Now()
		c, err := gpu.Compile(m, b.lib, gpu.Options{Cache: cache})
		if err != nil {
			return nil, nil, err
		}
		m = c.Module() // without the hooks the budget refused, if any
		t1 := time.Now()
		d, err := c.Load(b.ordinal)
		if err != nil {
			return nil, nil, err
		}
		t2 := time.Now()
		rows = append(rows, []string{p.Name, label, ms(t1.Sub(t0)), ms(t2.Sub(t1)), ms(t2.Sub(t0))})
		fmt.Fprintf(b.out, "  %s (%s): %s\n", p.Name, label, c.Info())
		d.Close()
		compiled = c
	}
	// The loaded device and its drain, as the plugin has them, with the
	// harness's NCCL-style function names (the plugin's come from
	// ncclProfilerDevFuncName); the resolver is a table, as the plugin's is.
	table := make([]string, harness.FuncCount())
	for id := range table {
		table[id] = harness.FuncName(uint32(id))
	}
	names := func(id uint32) string {
		if int(id) < len(table) {
			return table[id]
		}
		return fmt.Sprint(id)
	}
	sink := &lastDump{}
	dr := rings.NewDrainer(rings.Options{Sink: sink, DumpInterval: time.Hour, RingCapacity: p.Output.RingCapacity,
		FuncName: names, StageCPU: true})
	dev, err := lifecycle.LoadDevice(compiled, m, b.ordinal, table, dr, nil)
	if err != nil {
		dr.Close()
		return nil, nil, err
	}
	// Communicator 0 (the cost runs') exists: the rows' are made after it.
	return &loadedProfile{name: p.Name, dev: dev, drainer: dr, sink: sink, comms: 1}, rows, nil
}

func ms(d time.Duration) string { return fmt.Sprintf("%.1f ms", float64(d.Microseconds())/1000) }

// lastDump is a sink that keeps the totals of the latest dump over all hooks
// and discards records.
type lastDump struct {
	mu sync.Mutex
	st sinks.Stats
}

func (l *lastDump) Records([]sinks.Record) error { return nil }
func (l *lastDump) Close() error                 { return nil }
func (l *lastDump) Dump(d *sinks.Dump) error {
	t := rings.Summary{Stats: d.Stats}.Total()
	l.mu.Lock()
	l.st = t
	l.mu.Unlock()
	return nil
}

func (l *lastDump) last() sinks.Stats {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.st
}

// cpuDuring returns the process CPU time (user + system) and the wall time f took.
func cpuDuring(f func() error) (cpu, wall time.Duration, err error) {
	runtime.GC()
	var a, b syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &a)
	t0 := time.Now()
	err = f()
	wall = time.Since(t0)
	syscall.Getrusage(syscall.RUSAGE_SELF, &b)
	tv := func(r syscall.Rusage) time.Duration {
		return time.Duration(r.Utime.Nano() + r.Stime.Nano())
	}
	return tv(b) - tv(a), wall, err
}
