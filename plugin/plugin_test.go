package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/ncclhooks/ncclhooks/internal/schema"
	"github.com/ncclhooks/ncclhooks/internal/testbuild"
)

// The plugin is tested as NCCL uses it: built as a c-shared library, loaded
// with dlopen by a C program (testdata/cdriver.c) in a process of its own.

var pluginPath string

func TestMain(m *testing.M) {
	os.Exit(testbuild.Main(m, func(dir string) (err error) {
		pluginPath, err = testbuild.Plugin(dir)
		return err
	}))
}

// buildDriver builds testdata/cdriver.c with extra compiler flags
// (-DCDRIVER_NO_MARKER: a driver without the harness marker).
func buildDriver(t *testing.T, flags ...string) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "cdriver")
	args := append([]string{"-O2", "-pthread", "-rdynamic", "-I../internal/abi", "-o", bin}, flags...)
	out, err := exec.Command("cc", append(args, "testdata/cdriver.c", "-ldl")...).CombinedOutput()
	if err != nil {
		t.Fatalf("building cdriver: %v\n%s", err, out)
	}
	return bin
}

type driverRun struct {
	out     string
	warns   []string
	hooks   map[string]bool // "cycle dev" -> hook returned
	emitted map[int]uint64  // device -> events over all cycles
}

// driverTimeout bounds every cdriver run: a plugin that blocks NCCL fails
// the test instead of hanging it.
const driverTimeout = 2 * time.Minute

func runDriver(t *testing.T, env []string, devs, comms, chans, items, cycles int) *driverRun {
	t.Helper()
	r, err := startDriver(t, env, devs, comms, chans, items, cycles)
	if err != nil {
		t.Fatalf("cdriver: %v\n%s", err, r.out)
	}
	if !strings.Contains(r.out, "DONE") {
		t.Fatalf("cdriver did not finish:\n%s", r.out)
	}
	return r
}

// startDriver runs the cdriver and parses its output whatever its exit.
func startDriver(t *testing.T, env []string, devs, comms, chans, items, cycles int) (*driverRun, error) {
	t.Helper()
	return startDriverBin(t, buildDriver(t), env, devs, comms, chans, items, cycles)
}

// startDriverBin is startDriver with a driver built by buildDriver.
func startDriverBin(t *testing.T, bin string, env []string, devs, comms, chans, items, cycles int) (*driverRun, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), driverTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, pluginPath, fmt.Sprint(devs), fmt.Sprint(comms), fmt.Sprint(chans), fmt.Sprint(items), fmt.Sprint(cycles))
	cmd.Env = append(filteredEnv(), env...)
	// A child the driver forked and left behind must not keep the test
	// waiting on the output pipe it inherited.
	cmd.WaitDelay = 10 * time.Second
	out, err := cmd.CombinedOutput()
	if ctx.Err() != nil {
		err = fmt.Errorf("still running after %v (blocked?): %w", driverTimeout, err)
	}
	r := &driverRun{out: string(out), hooks: map[string]bool{}, emitted: map[int]uint64{}}
	for _, l := range strings.Split(r.out, "\n") {
		var cy, d int
		var n uint64
		switch {
		case strings.HasPrefix(l, "LOG 2 "):
			r.warns = append(r.warns, strings.TrimPrefix(l, "LOG 2 "))
		case strings.HasPrefix(l, "HOOK "):
			var on int
			fmt.Sscanf(l, "HOOK %d %d %d", &cy, &d, &on)
			r.hooks[fmt.Sprint(cy, d)] = on == 1
		case strings.HasPrefix(l, "EMITTED "):
			fmt.Sscanf(l, "EMITTED %d %d %d", &cy, &d, &n)
			r.emitted[d] += n
		}
	}
	return r, err
}

// filteredEnv is the test's environment without NCCL_HOOKS_* knobs.
func filteredEnv() []string {
	var env []string
	for _, e := range os.Environ() {
		if !strings.HasPrefix(e, "NCCL_HOOKS_") {
			env = append(env, e)
		}
	}
	return env
}

func writeProfile(t *testing.T, dir, body string) string {
	t.Helper()
	p := filepath.Join(dir, "profile.yaml")
	if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

type stats = schema.DumpStats

// dumpDelta is what one dump_stats line says happened since the previous one.
type dumpDelta struct{ matchedDelta, records uint64 }

// commLine is what a comm line says of one communicator.
type commLine struct {
	Device int    `json:"device"`
	Index  int    `json:"comm"`
	Name   string `json:"name"`
}

type output struct {
	path     string
	finals   map[string]int // "hook dev" -> final dumps
	dumps    map[string][]dumpDelta
	final    map[string]stats    // "hook dev" -> last final dump
	cycles   map[string][]stats  // "hook dev" -> every final dump (one per init/finalize cycle), in order
	comms    map[string]commLine // communicator name -> its comm line
	sumDelta map[string]uint64
	records  map[string]int
	keys     map[string]map[string]bool
}

func readOutput(t *testing.T, dir string) *output {
	t.Helper()
	return readOutputFile(t, outputFile(t, dir))
}

// countWarns is how many of warns contain s.
func countWarns(warns []string, s string) int {
	n := 0
	for _, w := range warns {
		if strings.Contains(w, s) {
			n++
		}
	}
	return n
}

// outputFile is the one JSON lines output in dir, in any compression.
func outputFile(t *testing.T, dir string) string {
	t.Helper()
	var files []string
	for _, suffix := range schema.OutputSuffixes {
		m, _ := filepath.Glob(filepath.Join(dir, "ncclhooks-*"+suffix))
		files = append(files, m...)
	}
	if len(files) != 1 {
		t.Fatalf("want one output file in %s, got %v", dir, files)
	}
	return files[0]
}

// readKilledOutput is readOutput for a process killed without a final
// dump: its last line may have been cut mid-write (the readers warn and
// read past it), and is then left out. Every complete line must be JSON.
func readKilledOutput(t *testing.T, dir string) *output {
	t.Helper()
	path := outputFile(t, dir)
	f, err := schema.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	b, err := io.ReadAll(f)
	if err != nil {
		t.Fatal(err)
	}
	return parseOutput(t, path, bytes.NewReader(b[:bytes.LastIndexByte(b, '\n')+1]))
}

// readOutputFile reads a JSON lines output; a line that is not JSON fails
// the test.
func readOutputFile(t *testing.T, path string) *output {
	t.Helper()
	f, err := schema.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	return parseOutput(t, path, f)
}

// parseOutput reads the JSON lines of path from r; a line that is not JSON
// fails the test.
func parseOutput(t *testing.T, path string, r io.Reader) *output {
	t.Helper()
	o := &output{path: path, finals: map[string]int{}, dumps: map[string][]dumpDelta{}, final: map[string]stats{}, cycles: map[string][]stats{}, comms: map[string]commLine{}, sumDelta: map[string]uint64{}, records: map[string]int{}, keys: map[string]map[string]bool{}}
	lastMatched := map[string]uint64{}
	sc := bufio.NewScanner(r)
	sc.Buffer(nil, 1<<24)
	for sc.Scan() {
		var line struct {
			Type string `json:"type"`
			stats
			Channel *uint64 `json:"channelId"`
			WC      *uint64 `json:"workCounter"`
			Phase   *uint64 `json:"phase"`
		}
		if err := json.Unmarshal(sc.Bytes(), &line); err != nil {
			t.Fatalf("bad JSON line %q: %v", sc.Text(), err)
		}
		k := fmt.Sprint(line.Hook, " ", line.Device)
		switch line.Type {
		case "dump_stats":
			o.sumDelta[k] += line.DroppedSinceLastDump
			prev := uint64(0)
			if ds := o.dumps[k]; len(ds) > 0 {
				prev = lastMatched[k]
			}
			o.dumps[k] = append(o.dumps[k], dumpDelta{line.Matched - prev, line.RecordsSinceLastDump})
			lastMatched[k] = line.Matched
			if line.Final {
				o.finals[k]++
				o.final[k] = line.stats
				o.cycles[k] = append(o.cycles[k], line.stats)
			}
		case "comm":
			var c commLine
			if err := json.Unmarshal(sc.Bytes(), &c); err != nil {
				t.Fatalf("bad comm line %q: %v", sc.Text(), err)
			}
			o.comms[c.Name] = c
		case "record":
			o.records[k]++
			if line.Channel == nil || line.WC == nil || line.Phase == nil {
				t.Fatalf("record without event fields: %s", sc.Text())
			}
			if o.keys[k] == nil {
				o.keys[k] = map[string]bool{}
			}
			key := fmt.Sprint(*line.Channel, *line.WC, *line.Phase)
			if o.keys[k][key] {
				t.Fatalf("record emitted twice: %s", sc.Text())
			}
			o.keys[k][key] = true
		}
	}
	return o
}

func TestCDriverExactAccounting(t *testing.T) {
	for _, policy := range []string{"drop_newest", "overwrite_oldest"} {
		t.Run(policy, func(t *testing.T) {
			dir := t.TempDir()
			prof := writeProfile(t, dir, fmt.Sprintf(`version: 1
name: exact-%s
output: {dump_interval: 20ms}
hooks:
  - name: all
    fields: [timestamp, workCounter, funcId, channelId, phase]
    buffer: {slots: 16, overflow: %s}
  - name: stops
    when: phase == STOP
    fields: [workCounter, channelId, phase]
    buffer: {slots: 65536, overflow: %s}
`, policy, policy, policy))
			out := filepath.Join(dir, "out")
			r := runDriver(t, []string{"NCCL_HOOKS_PROFILE=" + prof, "NCCL_HOOKS_BACKEND=cpu", "NCCL_HOOKS_DUMP_DIR=" + out}, 2, 2, 4, 3000, 2)
			for k, on := range r.hooks {
				if !on {
					t.Fatalf("no hook for cycle/device %s:\n%s", k, r.out)
				}
			}
			// The first drop's WARN, and the last finalize's count of
			// the losses (TestLostEventsWarnedAtLastFinalize).
			if other, lost := splitLost(r.warns); len(other) != 1 || !strings.Contains(other[0], "all") || len(lost) == 0 {
				t.Errorf("want exactly one drop WARN naming hook all and the lost WARN, got %q", r.warns)
			}
			o := readOutput(t, out)
			// Every communicator asked for the hook in its init and got a
			// context of its own: a comm line each, with the index it
			// holds on its device (indexes go on counting over cycles).
			for cy := 0; cy < 2; cy++ {
				for i := 0; i < 4; i++ {
					name := fmt.Sprintf("cdriver-%d-%d", cy, i)
					if c, ok := o.comms[name]; !ok || c.Device != i/2 || c.Index != 2*cy+i%2 {
						t.Errorf("comm line of %s: %+v (found %v), want device %d index %d", name, c, ok, i/2, 2*cy+i%2)
					}
				}
			}
			for d := 0; d < 2; d++ {
				for _, h := range []string{"all", "stops"} {
					k := fmt.Sprint(h, " ", d)
					st, ok := o.final[k]
					if !ok {
						t.Fatalf("no final dump_stats for %s", k)
					}
					want := r.emitted[d]
					if h == "stops" {
						want /= 2
					}
					if st.Matched != want {
						t.Errorf("%s: matched %d, emitted matching %d", k, st.Matched, want)
					}
					if st.Records+st.Dropped != st.Matched {
						t.Errorf("%s: records %d + dropped %d != matched %d", k, st.Records, st.Dropped, st.Matched)
					}
					if st.DroppedBufferFull+st.DroppedOverwritten+st.DroppedTorn+st.DroppedRingFull+st.DroppedWriteFailed != st.Dropped || st.Pending != 0 {
						t.Errorf("%s: stages do not add up: %+v", k, st)
					}
					if uint64(o.records[k]) != st.Records {
						t.Errorf("%s: %d record lines, records_total %d", k, o.records[k], st.Records)
					}
					if o.sumDelta[k] != st.Dropped {
						t.Errorf("%s: dropped_since_last_dump sums to %d, dropped_total %d", k, o.sumDelta[k], st.Dropped)
					}
				}
				if st := o.final[fmt.Sprint("all ", d)]; st.Dropped == 0 {
					t.Errorf("device %d: a 16-slot buffer under %d events dropped nothing", d, st.Matched)
				}
				if st := o.final[fmt.Sprint("stops ", d)]; st.Dropped != 0 {
					t.Errorf("device %d: the large buffer dropped %d", d, st.Dropped)
				}
			}
		})
	}
}

var posRE = regexp.MustCompile(`profile\.yaml:\d+:\d+`)

func TestInactiveWithoutCrash(t *testing.T) {
	dir := t.TempDir()
	broken := writeProfile(t, dir, "version: 1\nname: broken\nhooks:\n  - name: x\n    fields: [bogus]\n")
	cases := []struct {
		name  string
		env   []string
		warns int
		want  string
	}{
		{"unset", nil, 1, "NCCL_HOOKS_PROFILE is not set"},
		{"missing", []string{"NCCL_HOOKS_PROFILE=" + filepath.Join(dir, "nope.yaml")}, 1, "nope.yaml"},
		{"broken", []string{"NCCL_HOOKS_PROFILE=" + broken}, 1, "bogus"},
		{"bad knob", []string{"NCCL_HOOKS_PROFILE=" + broken, "NCCL_HOOKS_BACKEND=tpu"}, 1, "NCCL_HOOKS_BACKEND"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := runDriver(t, append(c.env, "NCCL_HOOKS_DUMP_DIR="+filepath.Join(dir, "out-"+c.name)), 2, 2, 2, 100, 3)
			for k, on := range r.hooks {
				if on {
					t.Errorf("hook returned for %s while inactive", k)
				}
			}
			if len(r.warns) != c.warns {
				t.Fatalf("want %d WARN, got %d: %q", c.warns, len(r.warns), r.warns)
			}
			if c.warns > 0 && !strings.Contains(r.warns[0], c.want) {
				t.Errorf("WARN %q does not mention %q", r.warns[0], c.want)
			}
			if c.name == "broken" && !posRE.MatchString(r.warns[0]) {
				t.Errorf("WARN %q has no file:line:col", r.warns[0])
			}
		})
	}
}
