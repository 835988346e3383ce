package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/expr-lang/expr/builtin"

	"github.com/ncclhooks/ncclhooks/internal/config"
	"github.com/ncclhooks/ncclhooks/internal/testbuild"
)

// These tests drive the built CLI and plugin end to end: ncclhooks run
// dlopens the real libnccl-profiler-hooks.so in a process of its own (the
// plugin keeps process-wide state, as it does inside NCCL).

var cliPath string

func TestMain(m *testing.M) {
	os.Exit(testbuild.Main(m, func(dir string) (err error) {
		cliPath, err = testbuild.CLI(dir)
		return err
	}))
}

func cli(t *testing.T, args ...string) (string, int) {
	t.Helper()
	return cliEnv(t, nil, args...)
}

// cliEnv runs the CLI with the test's environment less every NCCL_HOOKS_*
// knob, plus extra.
func cliEnv(t *testing.T, extra []string, args ...string) (string, int) {
	t.Helper()
	cmd := exec.Command(cliPath, args...)
	var env []string
	for _, e := range os.Environ() {
		if !strings.HasPrefix(e, "NCCL_HOOKS_") {
			env = append(env, e)
		}
	}
	cmd.Env = append(env, extra...)
	out, err := cmd.CombinedOutput()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return string(out), code
}

func writeFile(t *testing.T, dir, name, body string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

var rowRE = regexp.MustCompile(`(?m)^\s*(\S+)\s+(\d+)\s+(\d+)\s+(\d+|n/a)\s+(\d+)\s+(\d+)\s+(\d+)\s+full (\d+), overwritten (\d+), torn (\d+), ring (\d+)\s+(\d+)\s+(\d+)\s+(exact|MISMATCH)`)

type row struct {
	hook                                      string
	emitted, matched, records, dropped, lines int
	expected                                  string
	full, overwritten, torn, ring, checked    int
	result                                    string
}

func parseRows(t *testing.T, out string) map[string]row {
	t.Helper()
	rows := map[string]row{}
	for _, m := range rowRE.FindAllStringSubmatch(out, -1) {
		n := func(i int) int {
			var v int
			fmt.Sscan(m[i], &v)
			return v
		}
		rows[m[1]+"/"+m[2]] = row{hook: m[1], emitted: n(3), expected: m[4], matched: n(5), records: n(6), dropped: n(7),
			full: n(8), overwritten: n(9), torn: n(10), ring: n(11), lines: n(12), checked: n(13), result: m[14]}
	}
	if len(rows) == 0 {
		t.Fatalf("no summary rows in:\n%s", out)
	}
	return rows
}

func TestRunAllEventsExact(t *testing.T) {
	dir := t.TempDir()
	out, code := cli(t, "run", "../../examples/all-events.yaml", "--backend", "cpu", "--out", dir,
		"--devices", "2", "--comms", "3", "--channels", "4", "--items", "3000")
	if code != 0 {
		t.Fatalf("exit %d:\n%s", code, out)
	}
	rows := parseRows(t, out)
	for d := 0; d < 2; d++ {
		r := rows[fmt.Sprint("all/", d)]
		want := 3 * 4 * 3000 * 2
		if r.emitted != want || r.matched != want || r.expected != fmt.Sprint(want) {
			t.Errorf("device %d: %+v, want %d emitted and matched", d, r, want)
		}
		if r.records+r.dropped != r.matched || r.lines != r.records || r.checked != r.records || r.result != "exact" {
			t.Errorf("device %d: %+v", d, r)
		}
		// Accounting alone would call a run that dropped everything exact:
		// the 65536-slot drop_newest ring keeps its first 65536 events even
		// if the drain never ran.
		if r.records < 65536 {
			t.Errorf("device %d: %d of %d events recorded, want 65536 at least (the ring's slots)", d, r.records, want)
		}
	}
	if !strings.Contains(out, "result: exact") {
		t.Errorf("no exact verdict:\n%s", out)
	}
}

// Several communicators race on the same channel ids into tiny buffers under
// both policies: everything that matched is recorded or counted as dropped,
// exactly, and every record is the event the harness passed.
func TestRunOverflowPolicies(t *testing.T) {
	for _, policy := range []string{"drop_newest", "overwrite_oldest"} {
		t.Run(policy, func(t *testing.T) {
			dir := t.TempDir()
			prof := writeFile(t, dir, "p.yaml", fmt.Sprintf(`version: 1
name: overflow
hooks:
  - name: tiny
    when: func startsWith "AllReduce" || (phase == STOP && channelId %% 2 == 1)
    fields: [timestamp, workCounter, funcId, channelId, {field: phase, as: ph}]
    buffer: {slots: 16, overflow: %[1]s}
  - name: sampled
    sample: 1/4
    fields: [workCounter, channelId, phase, {field: funcId, type: u16}]
    buffer: {slots: 65536, overflow: %[1]s}
`, policy))
			out, code := cli(t, "run", prof, "--backend", "cpu", "--out", filepath.Join(dir, "out"),
				"--devices", "2", "--comms", "4", "--channels", "4", "--items", "4000", "--work", "16")
			if code != 0 {
				t.Fatalf("exit %d:\n%s", code, out)
			}
			rows := parseRows(t, out)
			dropped := 0
			for k, r := range rows {
				if r.result != "exact" || r.records+r.dropped != r.matched || fmt.Sprint(r.matched) != r.expected {
					t.Errorf("%s: %+v", k, r)
				}
				if r.full+r.overwritten+r.torn+r.ring != r.dropped {
					t.Errorf("%s: stages do not add up: %+v", k, r)
				}
				if strings.HasPrefix(k, "tiny/") {
					dropped += r.dropped
					if policy == "drop_newest" && r.overwritten != 0 || policy == "overwrite_oldest" && r.full != 0 {
						t.Errorf("%s: drops in the wrong stage for %s: %+v", k, policy, r)
					}
				}
				if strings.HasPrefix(k, "sampled/") && (r.matched != r.emitted/4 || r.dropped != 0) {
					t.Errorf("%s: sample 1/4 of %d events: %+v", k, r.emitted, r)
				}
			}
			if dropped == 0 {
				t.Errorf("16-slot buffers under 4 racing communicators dropped nothing:\n%s", out)
			}
			// The first drop's WARN, and the last finalize's of what was lost.
			if n := strings.Count(out, "WARN"); n != 2 || !strings.Contains(out, fmt.Sprintf("WARN ncclhooks: lost %d events of ", dropped)) {
				t.Errorf("want two WARNs (the first drop; lost %d events at the last finalize), got %d:\n%s", dropped, n, out)
			}
		})
	}
}

func TestRunRecordsRoundTrip(t *testing.T) {
	dir := t.TempDir()
	out, code := cli(t, "run", "../../examples/all-events.yaml", "--backend", "cpu", "--out", dir, "--items", "500")
	if code != 0 {
		t.Fatalf("exit %d:\n%s", code, out)
	}
	files, _ := filepath.Glob(filepath.Join(dir, "*.jsonl"))
	if len(files) != 1 {
		t.Fatalf("output files: %v", files)
	}
	f, _ := os.Open(files[0])
	defer f.Close()
	sc := bufio.NewScanner(f)
	types := map[string]int{}
	for sc.Scan() {
		var m map[string]any
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatalf("bad line %q: %v", sc.Text(), err)
		}
		types[m["type"].(string)]++
		if m["type"] == "record" {
			for _, k := range []string{"hook", "device", "seq", "timestamp", "workCounter", "funcId", "func", "channelId", "phase"} {
				if _, ok := m[k]; !ok {
					t.Fatalf("record without %q: %s", k, sc.Text())
				}
			}
		}
	}
	// The harness compared every record with the event it emitted.
	records := 0
	for k, r := range parseRows(t, out) {
		if r.checked != r.records || r.records == 0 {
			t.Errorf("%s: checked %d of %d records", k, r.checked, r.records)
		}
		records += r.records
	}
	if types["header"] != 1 || types["clock"] != 2 || types["record"] != records || types["dump_stats"] < 2 {
		t.Errorf("line types %v, want 1 header, 2 clock, %d record lines", types, records)
	}
}

// An invalid profile is a verdict against the input: exit 1 from run as
// from validate (issue 34.8).
func TestRunBadProfileExit1(t *testing.T) {
	dir := t.TempDir()
	prof := writeFile(t, dir, "bad.yaml", "version: 1\nname: bad\nhooks:\n  - name: h\n    when: phase ==\n    fields: [phase]\n")
	out, code := cli(t, "run", prof, "--backend", "cpu")
	if code != 1 || !regexp.MustCompile(`bad\.yaml:5:\d+`).MatchString(out) {
		t.Fatalf("exit %d, want 1 with bad.yaml:5:col:\n%s", code, out)
	}
	out, code = cli(t, "validate", prof, "../../examples/all-events.yaml")
	if code != 1 || !strings.Contains(out, "bad.yaml:5:") || !strings.Contains(out, "all-events.yaml: ok") {
		t.Fatalf("validate: exit %d:\n%s", code, out)
	}
}

func TestGenPrintsReadableSource(t *testing.T) {
	out, code := cli(t, "gen", "../../examples/all-events.yaml")
	if code != 0 {
		t.Fatalf("exit %d:\n%s", code, out)
	}
	for _, want := range []string{"ncclhooks_entry", `hook "all"`, "all-events.yaml:"} {
		if !strings.Contains(out, want) {
			t.Errorf("generated source lacks %q", want)
		}
	}
}

// Every example runs end to end on the cpu backend, and its records and
// aggregates are what the harness computes from the events it emitted.
func TestRunExamplesExact(t *testing.T) {
	files, _ := filepath.Glob("../../examples/*.yaml")
	if len(files) < 5 {
		t.Fatalf("examples: %v", files)
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			out, code := cli(t, "run", f, "--backend", "cpu", "--out", t.TempDir(), "--items", "1000")
			if code != 0 || !strings.Contains(out, "result: exact") || strings.Contains(out, "MISMATCH") {
				t.Fatalf("exit %d:\n%s", code, out)
			}
			if strings.Contains(out, "aggregate") && !regexp.MustCompile(`(?m)\s\d+\s+\d+\s+exact$`).MatchString(out) {
				t.Errorf("no aggregate checked exactly:\n%s", out)
			}
		})
	}
}

// The harness checks aggregates over lets that use duration, a name expr-lang
// also has as a builtin function (duration("1s")): the catalogue's value wins.
func TestRunChecksLetsOverDuration(t *testing.T) {
	dir := t.TempDir()
	prof := writeFile(t, dir, "p.yaml", `version: 1
name: durlet
hooks:
  - name: h
    when: "phase == STOP && paired"
    let:
      - {name: us, expr: "duration / 368"}
    aggregate:
      - {name: t, kind: sum, value: "us", by: [channelId]}
      - {name: m, kind: max, value: "duration % 7 + channelId", by: [funcId]}
`)
	out, code := cli(t, "run", prof, "--backend", "cpu", "--out", filepath.Join(dir, "out"), "--items", "500")
	if code != 0 || !strings.Contains(out, "result: exact") || strings.Contains(out, "MISMATCH") {
		t.Fatalf("exit %d:\n%s", code, out)
	}
	if n := len(regexp.MustCompile(`(?m)^\s+h\s+\S+\s+(sum|max)\s+\d+\s+\d+\s+\d+\s+exact$`).FindAllString(out, -1)); n != 4 {
		t.Errorf("%d aggregate rows checked exact, want 4 (2 aggregates x 2 devices):\n%s", n, out)
	}
}

// A float sum that overflows is written as "+Inf" (JSON has no infinity);
// the project's own readers (run's check, report) must accept what the
// plugin writes (issue 13 item 4).
func TestOverflowingFloatSumIsReadBack(t *testing.T) {
	dir := t.TempDir()
	prof := writeFile(t, dir, "inf.yaml", `version: 1
name: inf
hooks:
  - name: big
    aggregate:
      - {name: huge, kind: sum, value: "timestamp * 1.0e300"}
`)
	out, code := cli(t, "run", prof, "--backend", "cpu", "--out", filepath.Join(dir, "out"), "--devices", "1", "--comms", "1", "--channels", "2", "--items", "100")
	if code != 0 || !strings.Contains(out, "result: exact") {
		t.Fatalf("run: exit %d:\n%s", code, out)
	}
	files, _ := filepath.Glob(filepath.Join(dir, "out", "*.jsonl"))
	if data, _ := os.ReadFile(files[0]); !strings.Contains(string(data), `"sum":"+Inf"`) {
		t.Fatalf("the sum did not overflow to +Inf:\n%s", data)
	}
	if out, code := cli(t, "report", filepath.Join(dir, "out")); code != 0 {
		t.Errorf("report: exit %d:\n%s", code, out)
	}
}

// A planted slowdown is real work for the harness: every record still is
// the event it passed (the run verifies each one), and the work items last
// longer by the factor. Factors that are no slowdown are refused.
func TestRunPlantedSlowdown(t *testing.T) {
	dir := t.TempDir()
	out, code := cli(t, "run", "../../examples/all-events.yaml", "--backend", "cpu", "--out", dir, "--items", "400", "--slowdown", "3")
	if code != 0 || !strings.Contains(out, "result: exact") {
		t.Fatalf("--slowdown 3: exit %d:\n%s", code, out)
	}
	plain := t.TempDir()
	if out, code := cli(t, "run", "../../examples/all-events.yaml", "--backend", "cpu", "--out", plain, "--items", "400"); code != 0 {
		t.Fatalf("exit %d:\n%s", code, out)
	}
	median := func(dir string) float64 {
		out, code := cli(t, "report", dir, "--json")
		var rep struct {
			Hooks []struct {
				Functions []struct {
					Dist struct {
						P50 float64 `json:"p50_ns"`
					} `json:"all_channels"`
				} `json:"functions"`
			} `json:"hooks"`
		}
		if code != 0 || json.Unmarshal([]byte(out), &rep) != nil || len(rep.Hooks) == 0 {
			t.Fatalf("report: exit %d:\n%.2000s", code, out)
		}
		var ps []float64
		for _, f := range rep.Hooks[0].Functions {
			ps = append(ps, f.Dist.P50)
		}
		slices.Sort(ps)
		return ps[len(ps)/2]
	}
	// 3x, with room for a busy machine (one run each: load stretches both
	// runs, and a loaded run without the slowdown can look up to half as fast).
	if r := median(dir) / median(plain); r < 1.5 || r > 6 {
		t.Errorf("--slowdown 3: work items %.2fx as long as without", r)
	}
	// Refused before the run, with the range: a usage error (issue 34.3).
	for _, bad := range []string{"0.5", "1000"} {
		if out, code := cli(t, "run", "../../examples/all-events.yaml", "--backend", "cpu", "--out", t.TempDir(), "--items", "10", "--slowdown", bad); code != 2 || !strings.Contains(out, "ncclhooks run: slowdown "+bad+": allowed 1 to 100") {
			t.Errorf("--slowdown %s: exit %d:\n%s", bad, code, out)
		}
	}
}

// validate --source host refuses, up front and at their positions, the
// values NCCL's host events do not carry; the same profile is fine for the
// device, and a profile without them is fine for both.
func TestValidateSourceHost(t *testing.T) {
	dir := t.TempDir()
	prof := writeFile(t, dir, "dev.yaml", `version: 1
name: dev
hooks:
  - name: h
    let: [{name: c, expr: clock + 1}]
    when: phase == STOP && smid < 4
    fields: [timestamp, smid, c]
`)
	out, code := cli(t, "validate", "--source", "host", prof, "../../examples/latency.yaml")
	for _, want := range []string{
		`dev.yaml:5:27: clock (in hook "h" let c) is not available from NCCL's host events`,
		`dev.yaml:6:28: smid (in hook "h" when) is not available`,
		`dev.yaml:7:25: smid (in hook "h" fields) is not available`,
		"latency.yaml: ok",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("validate --source host lacks %q:\n%s", want, out)
		}
	}
	if code != 1 {
		t.Errorf("exit %d, want 1", code)
	}
	if out, code := cli(t, "validate", "--no-gpu-check", prof); code != 0 {
		t.Errorf("validate for the device: exit %d:\n%s", code, out)
	}
	// Latency paired by the drain needs nothing the host events lack.
	out, code = cli(t, "validate", "--no-gpu-check", "--source", "host", "../../examples/drain-latency.yaml")
	if code != 0 || !strings.Contains(out, "latency              record  8 B (timestamp, funcId), 65536 slots, overwrite_oldest, positions: work, 2 aggregates by the drain") {
		t.Errorf("validate --source host examples/drain-latency.yaml: exit %d:\n%s", code, out)
	}
	// every-event's slots leave its work counter out: 4 words, not 6.
	out, code = cli(t, "validate", "--no-gpu-check", "../../examples/every-event.yaml")
	if code != 0 || !strings.Contains(out, "all                  record 23 B (6 fields), 65536 slots of 32 B (workCounter from the position, not stored), overwrite_oldest, positions: work, 0 aggregates") {
		t.Errorf("validate examples/every-event.yaml: exit %d:\n%s", code, out)
	}
}

// Every catalogue name that is also an expr-lang builtin (duration is both)
// means the catalogue's value in the harness's own evaluation: in when, in
// lets and in aggregate values, alone and inside calls of builtins. Each
// aggregate here is checked against the harness's computation; a name taken
// for the builtin function fails to compile there or computes something
// else, and run reports a MISMATCH.
func TestRunCheckedNamesThatAreBuiltins(t *testing.T) {
	var names []string
	for _, n := range builtin.Names {
		if _, ok := config.Lookup(n); ok {
			names = append(names, n)
		}
	}
	if !slices.Contains(names, "duration") {
		t.Fatalf("expr-lang's builtins %v no longer include duration: the names that collide are %v", builtin.Names, names)
	}
	for _, n := range names {
		t.Run(n, func(t *testing.T) {
			dir := t.TempDir()
			prof := writeFile(t, dir, "p.yaml", strings.ReplaceAll(`version: 1
name: builtin-names
hooks:
  - name: h
    when: "phase == STOP && paired && N * 2 >= N"
    let:
      - {name: k, expr: "N / 1000"}
    aggregate:
      - {name: div, kind: sum, value: "N / 1000", by: [channelId]}
      - {name: mul, kind: max, value: "N * 2", by: [funcId]}
      - {name: call, kind: min, value: "max(N, 1)", by: [funcId, channelId]}
      - {name: let, kind: sum, value: "k"}
      - {name: hist, kind: histogram, value: "N", buckets: log2}
      - {name: abs, kind: count, by: [channelId]}
`, "N", n))
			out, code := cli(t, "run", prof, "--backend", "cpu", "--out", filepath.Join(dir, "out"), "--devices", "1", "--items", "300")
			if code != 0 || !strings.Contains(out, "result: exact") || strings.Contains(out, "MISMATCH") {
				t.Fatalf("exit %d:\n%s", code, out)
			}
			if got := len(regexp.MustCompile(`(?m)^\s+h\s+\S+\s+(sum|max|min|histogram|count)\s+0\s+\d+\s+[1-9]\d*\s+exact$`).FindAllString(out, -1)); got != 6 {
				t.Errorf("%d aggregates checked exact with values, want 6:\n%s", got, out)
			}
		})
	}
}

// TestRunWorkPositionsLoseNothingWithinARegion: with positions from the
// work counter, every record of a run whose positions fit in their regions
// (400 items a channel: positions 2..801 in 1024 slots) stays in its slot
// until the drain takes it: nothing can be overwritten, and every writer
// finished before the last finalize, so nothing is torn either. Each
// record is the harness's own event (checked), on every device. An
// "exact" that accounts for every event as a drop is not enough here: a
// hook that writes a position into the wrong slot of its region loses
// them all, counted torn.
func TestRunWorkPositionsLoseNothingWithinARegion(t *testing.T) {
	out, code := cli(t, "run", "../../examples/every-event.yaml", "--backend", "cpu", "--out", t.TempDir(),
		"--devices", "2", "--comms", "2", "--channels", "4", "--items", "400")
	if code != 0 || !strings.Contains(out, "result: exact") {
		t.Fatalf("exit %d:\n%s", code, out)
	}
	rows := parseRows(t, out)
	for d := 0; d < 2; d++ {
		r := rows[fmt.Sprint("all/", d)]
		want := 2 * 4 * 400 * 2
		if r.matched != want || r.records != want || r.dropped != 0 || r.lines != want || r.checked != want {
			t.Errorf("device %d: %+v, want all %d events recorded, written and checked, none dropped", d, r, want)
		}
	}
}
