package callers

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/ncclhooks/ncclhooks/internal/config"
	"github.com/ncclhooks/ncclhooks/internal/cuda"
	"github.com/ncclhooks/ncclhooks/internal/gputest"
	"github.com/ncclhooks/ncclhooks/internal/harness"
	"github.com/ncclhooks/ncclhooks/internal/hookgen"
	"github.com/ncclhooks/ncclhooks/internal/hookgen/hooktest"
)

// callerConfig is one column of the caller matrix.
type callerConfig struct {
	name   string
	binary string
	args   []string
	// budget: the registers the plugin must read from the caller's
	// .nv_fatbin and build the hooks for (its INFO line says so); 0: not
	// checked. mayRefuse: the budget may be below what some hooks need:
	// those are refused with their reason, the others run exact.
	budget    int
	mayRefuse bool
}

var matrix = []callerConfig{
	{"rdc, 96 registers, 4 comms initialised concurrently, streams", "caller_rdc96", []string{"--comms", "4", "--threads"}, 96, false},
	{"rdc, 96 registers, 2 comms, CUDA graphs", "caller_rdc96", []string{"--comms", "2", "--graph", "--replays", "2"}, 96, false},
	{"rdc, over 96 registers, 1 comm, streams", "caller_rdc255", nil, 0, false},
	{"rdc, over 96 registers, 3 comms, CUDA graphs", "caller_rdc255", []string{"--comms", "3", "--threads", "--graph", "--replays", "2"}, 0, false},
	// The budget is the kernel's own count (56 with nvcc 13.0), though its
	// hook call is compiled out: hooks above it are refused.
	{"whole program (hook call compiled out)", "caller_wp", []string{"--comms", "2"}, 0, true},
	// Loaded with local symbols, as torch loads NCCL: the plugin finds the
	// library through the logger it was given and reads its kernels.
	{".so, local symbols, rdc, 32 registers, 2 comms initialised concurrently, streams", "caller_so32", []string{"--comms", "2", "--threads"}, 32, true},
	{".so, local symbols, rdc, 64 registers, 2 comms, CUDA graphs", "caller_so64", []string{"--comms", "2", "--graph", "--replays", "2"}, 64, true},
}

// Per communicator and run: 8 channels x 32 items x 2 phases x 2 launches
// (x 2 replays with graphs) = 2048 events at most, so 4 comms fit every
// buffer of the generated profiles without drops.
var runArgs = []string{"--channels", "8", "--items", "32", "--batch", "4", "--launches", "2"}

// setup finds what the matrix needs or skips (fails under
// NCCLHOOKS_REQUIRE_GPU=1): a GPU, nvcc, the plugin.
func setup(t *testing.T) (plugin, bin string) {
	t.Helper()
	_, err := cuda.OpenGPU()
	gputest.Open(t, err)
	plugin = os.Getenv("NCCLHOOKS_PLUGIN")
	if plugin == "" {
		gputest.Skip(t, "NCCLHOOKS_PLUGIN is not set (make test sets it)")
	}
	if bin = os.Getenv("NCCLHOOKS_CALLERS"); bin != "" {
		return plugin, bin // built already (scripts/gpu-check.sh)
	}
	nvcc, err := exec.LookPath("nvcc")
	if err != nil {
		if _, err2 := os.Stat("/usr/local/cuda/bin/nvcc"); err2 != nil {
			gputest.Skip(t, "no nvcc to build the callers with: %v", err)
		}
		nvcc = "/usr/local/cuda/bin/nvcc"
	}
	bin = t.TempDir()
	cmd := exec.Command("./build.sh", bin)
	cmd.Env = append(os.Environ(), "NVCC="+nvcc)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("build.sh: %v\n%s", err, out)
	}
	t.Logf("build.sh:\n%s", out)
	return plugin, bin
}

// profileFile is a profile the matrix runs, by path.
type profileFile struct{ name, path string }

func profiles(t *testing.T, n int) []profileFile {
	t.Helper()
	ex, err := filepath.Glob("../../../examples/*.yaml")
	if err != nil || len(ex) == 0 {
		t.Fatalf("no example profiles: %v", err)
	}
	var ps []profileFile
	for _, p := range ex {
		ps = append(ps, profileFile{strings.TrimSuffix(filepath.Base(p), ".yaml"), p})
	}
	dir := t.TempDir()
	r := rand.New(rand.NewSource(20261201))
	for seed := 0; len(ps) < len(ex)+n; seed++ {
		if seed > 20*n {
			t.Fatalf("the generator made only %d valid profiles", len(ps)-len(ex))
		}
		src := randomProfile(r, len(ps)-len(ex))
		path := filepath.Join(dir, fmt.Sprintf("gen%02d.yaml", len(ps)-len(ex)))
		if err := os.WriteFile(path, []byte(src), 0o600); err != nil {
			t.Fatal(err)
		}
		p, err := config.Load(path)
		if err != nil {
			continue // the generator's expressions can be ill-typed; only valid profiles count
		}
		if _, err := hookgen.Generate(p); err != nil {
			t.Fatalf("%s validates but does not generate: %v\n%s", path, err, src)
		}
		ps = append(ps, profileFile{strings.TrimSuffix(filepath.Base(path), ".yaml"), path})
	}
	return ps
}

// randomProfile writes a profile of 1-3 hooks mixing records, predicates,
// name predicates, lets, sampling and aggregates of every kind.
func randomProfile(r *rand.Rand, i int) string {
	var b strings.Builder
	fmt.Fprintf(&b, "version: 1\nname: gen%02d\noutput: {dump_interval: 200ms}\nhooks:\n", i)
	for h := range 1 + r.Intn(3) {
		fmt.Fprintf(&b, "  - name: h%d\n", h)
		switch r.Intn(4) {
		case 0:
			fmt.Fprintf(&b, "    when: %q\n", hooktest.RandomExpr(r, 2, hooktest.BoolExpr))
		case 1:
			fmt.Fprintf(&b, "    when: %q\n", []string{`func startsWith "AllReduce"`, `phase == STOP && paired`,
				`func in ["SendRecv", "AllGather_RING_LL"] || channelId % 2 == 0`, `!(func endsWith "LL")`}[r.Intn(4)])
		}
		if r.Intn(4) == 0 {
			fmt.Fprintf(&b, "    sample: 1/%d\n", 2+r.Intn(6))
		}
		var lets []string
		if r.Intn(2) == 0 {
			b.WriteString("    let:\n")
			for l := range 1 + r.Intn(2) {
				kind := []int{hooktest.IntExpr, hooktest.FloatExpr}[r.Intn(2)]
				e := hooktest.RandomExpr(r, 2, kind)
				if r.Intn(3) == 0 {
					e = "duration / " + fmt.Sprint(1+r.Intn(1000))
				}
				fmt.Fprintf(&b, "      - {name: v%d, expr: %q}\n", l, e)
				lets = append(lets, fmt.Sprintf("v%d", l))
			}
		}
		records := r.Intn(3) != 0
		if records {
			b.WriteString("    fields:\n")
			for _, f := range []string{"timestamp", "workCounter", "channelId", "phase"} {
				if f == "timestamp" && r.Intn(2) == 0 {
					continue
				}
				fmt.Fprintf(&b, "      - %s\n", f)
			}
			extra := []string{"funcId", "{field: comm, type: u8}", "{field: smid, type: u16}", "clock", "globaltimer",
				"{field: cudaDev, type: u8}", "duration", "paired", "{field: funcId, as: fn, type: u16}"}
			for _, k := range r.Perm(len(extra))[:r.Intn(4)] {
				fmt.Fprintf(&b, "      - %s\n", extra[k])
			}
			for _, l := range lets {
				fmt.Fprintf(&b, "      - {field: %s, type: %s}\n", l, []string{"f64", "f32", "i64", "u32"}[r.Intn(4)])
			}
			fmt.Fprintf(&b, "    buffer: {slots: %d, overflow: %s}\n", 16384<<r.Intn(2), []string{"drop_newest", "overwrite_oldest"}[r.Intn(2)])
		}
		if !records || r.Intn(2) == 0 {
			b.WriteString("    aggregate:\n")
			for a := range 1 + r.Intn(3) {
				kind := []string{"count", "sum", "min", "max", "histogram"}[r.Intn(5)]
				fmt.Fprintf(&b, "      - {name: a%d, kind: %s", a, kind)
				if kind != "count" {
					vals := append([]string{"duration", "workCounter % 1000", "channelId * 3 + phase"}, lets...)
					fmt.Fprintf(&b, ", value: %q", vals[r.Intn(len(vals))])
				}
				if by := []string{"", ", by: [funcId]", ", by: [channelId]", ", by: [funcId, channelId]"}[r.Intn(4)]; by != "" {
					b.WriteString(by)
				}
				if kind == "histogram" {
					b.WriteString([]string{", buckets: log2", ", buckets: [100, 1000, 10000, 100000]"}[r.Intn(2)])
				}
				b.WriteString("}\n")
			}
		}
	}
	return b.String()
}

// callerResult is the caller's CALLER line.
type callerResult struct {
	OK       bool   `json:"ok"`
	Error    string `json:"error"`
	Regs     int    `json:"regs"`
	HookCall string `json:"hook_call"`
	Emitted  uint64 `json:"emitted"`
	DataOK   bool   `json:"data_ok"`
	LiveOK   bool   `json:"live_ok"`
	Hooks    []struct {
		Null bool `json:"null"`
	} `json:"hooks"`
}

// cell is one (caller, profile) run.
type cell struct {
	cfg, prof string
	fault     bool   // the kernel faulted or the caller's data was wrong
	exact     bool   // the plugin's output checked exact against the events
	refused   int    // hooks the plugin refused for the caller's budget (every hook: no hook at all)
	whole     bool   // every hook was refused: the plugin handed out none
	emitted   uint64 // events passed to the hooks
	records   uint64
	problems  []string
}

// budgetLine checks the plugin's INFO line of the budget it read from the
// caller's library: "... at PATH: 1 kernel calls the hook, 32 registers
// each, ...: hooks built for at most 32 registers".
func budgetLine(stderr string, c callerConfig) string {
	if c.budget == 0 {
		return ""
	}
	for _, l := range strings.Split(stderr, "\n") {
		if strings.Contains(l, "kernel calls the hook") && strings.Contains(l, fmt.Sprintf("hooks built for at most %d registers", c.budget)) {
			return ""
		}
	}
	return fmt.Sprintf("no INFO line says the hooks are built for the caller's %d registers:\n%s", c.budget, stderr)
}

func runCell(t *testing.T, plugin, bin, cache string, c callerConfig, p profileFile, dir string) cell {
	res := cell{cfg: c.name, prof: p.name}
	fail := func(format string, args ...any) cell {
		res.problems = append(res.problems, fmt.Sprintf(format, args...))
		return res
	}
	prof, err := config.Load(p.path)
	if err != nil {
		return fail("%v", err)
	}
	out, events := filepath.Join(dir, "out"), filepath.Join(dir, "events")
	for _, d := range []string{out, events} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return fail("%v", err)
		}
	}
	args := append(append([]string{"--plugin", plugin, "--events", events,
		"--counter-stride", strconv.FormatUint(harness.CounterStride(prof), 10)}, runArgs...), c.args...)
	cmd := exec.Command(filepath.Join(bin, c.binary), args...)
	cmd.Env = append(os.Environ(), "NCCL_HOOKS_PROFILE="+p.path, "NCCL_HOOKS_DUMP_DIR="+out,
		"NCCL_HOOKS_CACHE_DIR="+cache, "NCCL_HOOKS_BACKEND=gpu")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	runErr := cmd.Run()
	var cr callerResult
	line := ""
	for _, l := range strings.Split(stdout.String(), "\n") {
		if strings.HasPrefix(l, "CALLER ") {
			line = strings.TrimPrefix(l, "CALLER ")
		}
	}
	if err := json.Unmarshal([]byte(line), &cr); err != nil {
		res.fault = true
		return fail("no CALLER line (%v): %v\n%s%s", runErr, err, stdout.String(), stderr.String())
	}
	res.emitted = cr.Emitted
	if !cr.OK || !cr.DataOK || !cr.LiveOK || runErr != nil {
		res.fault = true
		return fail("caller: ok %v (%s), data_ok %v, live_ok %v, exit %v\n%s", cr.OK, cr.Error, cr.DataOK, cr.LiveOK, runErr, stderr.String())
	}
	if p := budgetLine(stderr.String(), c); p != "" {
		return fail("%s", p)
	}
	for _, h := range cr.Hooks {
		if !h.Null {
			continue
		}
		// Every hook over the budget: the plugin refuses the module and
		// stays inactive, with one WARN giving each hook's reason.
		if c.mayRefuse && strings.Contains(stderr.String(), "could fault NCCL's kernels, so it is not handed to NCCL") {
			res.refused, res.whole = len(prof.Hooks), true
			return res
		}
		return fail("a communicator got no hook:\n%s", stderr.String())
	}
	if c.binary == "caller_wp" != strings.Contains(cr.HookCall, "compiled out") {
		return fail("hook_call %q", cr.HookCall)
	}
	// The plugin runs inside other people's jobs: no WARN (drops, refusals,
	// the exit-time driver shutdown) in runs sized to drop nothing.
	for _, l := range strings.Split(stderr.String(), "\n") {
		if strings.Contains(l, "WARN") && !(c.mayRefuse && strings.Contains(l, "of the profile's hooks are left out")) {
			res.problems = append(res.problems, "plugin logged: "+l)
		}
	}
	logs, emitted, err := harness.ReadEventLogs(events)
	if err != nil {
		return fail("%v", err)
	}
	if emitted[0] != cr.Emitted {
		return fail("event logs hold %d events, the caller says it emitted %d", emitted[0], cr.Emitted)
	}
	file, err := harness.OutputFile(out, cmd.Process.Pid)
	if err != nil {
		return fail("%v", err)
	}
	// The caller numbers its communicators 0..N-1 ("caller-comm<k>"); the
	// plugin numbers them in the order they asked for a hook, which with
	// concurrent inits can differ: translate through the comm lines.
	index, err := harness.CommIndex(file)
	if err != nil {
		return fail("%v", err)
	}
	for d, evs := range logs {
		for i := range evs {
			k, ok := index[fmt.Sprintf("caller-comm%d", evs[i].Comm)]
			if !ok {
				return fail("no comm line for caller-comm%d", evs[i].Comm)
			}
			logs[d][i].Comm = k
		}
	}
	s, err := harness.CheckFile(prof, file, 1, logs, emitted)
	if err != nil {
		return fail("%v", err)
	}
	for _, r := range s.Rows {
		res.records += r.Records
	}
	var sb strings.Builder
	s.Print(&sb)
	s.PrintAggs(&sb)
	if len(s.Refused) > 0 {
		res.refused = len(s.Refused)
		if !c.mayRefuse {
			res.problems = append(res.problems, "hooks refused: "+strings.Join(s.Refused, "; "))
		} else {
			t.Logf("%s / %s: %s", c.name, p.name, strings.Join(s.Refused, "; "))
		}
	}
	res.exact = s.OK() || (len(s.Rows)+len(s.Aggs) == 0 && len(s.Problems) == 0)
	if !res.exact {
		res.problems = append(res.problems, "output does not check exact:\n"+sb.String())
	}
	return res
}

// TestCallerMatrix runs every example profile and 50 generated ones through
// every caller of the matrix: no fault, right data and live values in the
// caller, and the plugin's output exact against the caller's event logs.
func TestCallerMatrix(t *testing.T) {
	plugin, bin := setup(t)
	ps := profiles(t, 50)
	cache := t.TempDir()
	type job struct {
		c callerConfig
		p profileFile
		i int
	}
	jobs := make(chan job)
	var mu sync.Mutex
	var cells []cell
	var wg sync.WaitGroup
	root := t.TempDir()
	// The first caller config compiles each profile into the cache; the
	// others then load from it. Several processes share the GPU at once, as
	// the ranks of a job do when oversubscribed.
	parallel := 6
	if v, err := strconv.Atoi(os.Getenv("NCCLHOOKS_MATRIX_PARALLEL")); err == nil && v > 0 {
		parallel = v
	}
	t.Logf("%d caller processes at once (NCCLHOOKS_MATRIX_PARALLEL)", parallel)
	for range parallel {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range jobs {
				c := runCell(t, plugin, bin, cache, j.c, j.p, filepath.Join(root, fmt.Sprint(j.i)))
				mu.Lock()
				cells = append(cells, c)
				mu.Unlock()
			}
		}()
	}
	n := 0
	for _, c := range matrix {
		for _, p := range ps {
			jobs <- job{c, p, n}
			n++
		}
	}
	close(jobs)
	wg.Wait()

	type row struct {
		runs, faults, exact, refused, whole int
		emitted, records                    uint64
	}
	rows := map[string]*row{}
	for _, c := range cells {
		r := rows[c.cfg]
		if r == nil {
			r = &row{}
			rows[c.cfg] = r
		}
		r.runs++
		r.emitted += c.emitted
		r.records += c.records
		if c.fault {
			r.faults++
		}
		if (c.exact || c.whole) && len(c.problems) == 0 {
			r.exact++
		}
		r.refused += c.refused
		if c.whole {
			r.whole++
		}
		for _, p := range c.problems {
			t.Errorf("%s / %s: %s", c.cfg, c.prof, p)
		}
	}
	var tbl strings.Builder
	fmt.Fprintf(&tbl, "| caller | profiles | faults | exact or refused | hooks refused (whole profiles) | events emitted | records checked |\n| --- | --- | --- | --- | --- | --- | --- |\n")
	for _, c := range matrix {
		r := rows[c.name]
		name := c.name
		if r == nil {
			continue
		}
		fmt.Fprintf(&tbl, "| %s | %d | %d | %d/%d | %d (%d) | %d | %d |\n", name, r.runs, r.faults, r.exact, r.runs, r.refused, r.whole, r.emitted, r.records)
	}
	t.Logf("caller matrix (%d example + %d generated profiles):\n%s", len(ps)-50, 50, tbl.String())
	if f := os.Getenv("NCCLHOOKS_MATRIX_OUT"); f != "" {
		os.WriteFile(f, []byte(tbl.String()), 0o644)
	}
}

// TestCallerMemcheck runs a short caller under compute-sanitizer's memcheck.
func TestCallerMemcheck(t *testing.T) {
	plugin, bin := setup(t)
	cs, err := exec.LookPath("compute-sanitizer")
	if err != nil {
		if _, err2 := os.Stat("/usr/local/cuda/bin/compute-sanitizer"); err2 != nil {
			gputest.Skip(t, "no compute-sanitizer: %v", err)
		}
		cs = "/usr/local/cuda/bin/compute-sanitizer"
	}
	for _, prof := range []string{"all-events", "field-capture", "latency", "every-event", "drain-latency"} {
		dir := t.TempDir()
		cmd := exec.Command(cs, "--tool", "memcheck", "--error-exitcode", "9", filepath.Join(bin, "caller_rdc96"),
			"--plugin", plugin, "--comms", "2", "--channels", "4", "--items", "16", "--launches", "1")
		cmd.Env = append(os.Environ(), "NCCL_HOOKS_PROFILE=../../../examples/"+prof+".yaml", "NCCL_HOOKS_DUMP_DIR="+dir,
			"NCCL_HOOKS_CACHE_DIR="+t.TempDir(), "NCCL_HOOKS_BACKEND=gpu")
		out, err := cmd.CombinedOutput()
		if err != nil || !strings.Contains(string(out), "ERROR SUMMARY: 0 errors") {
			t.Errorf("%s under memcheck: %v\n%s", prof, err, out)
			continue
		}
		t.Logf("%s: memcheck: ERROR SUMMARY: 0 errors", prof)
	}
}
