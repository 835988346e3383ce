package main

import (
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// run --duration repeats init/emit/finalize cycles in one process, the
// plugin loaded throughout, and checks every dump of the output, the idle
// dumps between cycles (--gap) included.
func TestRunDurationCyclesExactAtEveryDump(t *testing.T) {
	dir := t.TempDir()
	out, code := cli(t, "run", "../../examples/latency.yaml", "--backend", "cpu", "--out", dir, "--no-verify",
		"--duration", "3s", "--gap", "300ms", "--devices", "1", "--comms", "2", "--channels", "2", "--items", "50")
	if code != 0 {
		t.Fatalf("run --duration: exit %d:\n%s", code, out)
	}
	m := regexp.MustCompile(`, (\d+) cycles in `).FindStringSubmatch(out)
	d := regexp.MustCompile(`dump_stats lines checked: (\d+)`).FindStringSubmatch(out)
	if m == nil || d == nil || !strings.Contains(out, "result: exact") {
		t.Fatalf("want cycles, dump_stats lines checked and result: exact:\n%s", out)
	}
	cycles, _ := strconv.Atoi(m[1])
	dumps, _ := strconv.Atoi(d[1])
	// One final dump a cycle at least, and the idle dumps of 1 s intervals.
	if cycles < 2 || dumps < cycles+2 {
		t.Errorf("%d cycles, %d dump_stats lines checked: want 2 cycles and more, and more dumps than cycles:\n%s", cycles, dumps, out)
	}
	if out, code := cli(t, "check", dir, "--profile", "../../examples/latency.yaml"); code != 0 || !strings.Contains(out, "dump_stats lines checked: ") {
		t.Errorf("check of the soak's output: exit %d:\n%s", code, out)
	}
	out, code = cli(t, "run", "../../examples/latency.yaml", "--backend", "cpu", "--out", t.TempDir(), "--duration", "1s")
	if code != exitUsage || !strings.Contains(out, "no-verify") {
		t.Errorf("--duration with the event log: exit %d, want %d naming --no-verify:\n%s", code, exitUsage, out)
	}
	out, code = cli(t, "run", "../../examples/latency.yaml", "--backend", "cpu", "--out", t.TempDir(), "--gap", "1s", "--no-verify")
	if code != exitUsage || !strings.Contains(out, "gap") {
		t.Errorf("--gap without --duration: exit %d, want %d:\n%s", code, exitUsage, out)
	}
}

// scripts/soak.sh end to end, short: the real .so soaked and sampled, every
// dump exact, samples with every metric the cpu backend has (goroutines
// from the plugin's /metrics), and a verdict. Its bounds are loosened: a
// 12-second run is all warm-up (soak-verdict's own tests judge slopes).
func TestSoakScriptShort(t *testing.T) {
	if _, err := exec.LookPath("bash"); err != nil {
		t.Skip("no bash")
	}
	plugin := os.Getenv("NCCLHOOKS_PLUGIN")
	if plugin == "" {
		plugin = filepath.Join(filepath.Dir(cliPath), "libnccl-profiler-hooks.so")
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	out := filepath.Join(t.TempDir(), "soak")
	cmd := exec.Command("bash", "scripts/soak.sh", "12s", out)
	cmd.Dir = "../.."
	cmd.Env = append(os.Environ(), "CLI="+cliPath, "PLUGIN="+plugin, "EXAMPLES=examples/all-events.yaml", "INTERVAL=1",
		"PROM_PORT="+strconv.Itoa(port), "VERDICT_FLAGS=--rss-slope 1e12 --level=false", "NCCL_HOOKS_CACHE_DIR="+t.TempDir())
	log, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("soak.sh 12s: %v:\n%s", err, log)
	}
	for name, want := range map[string]string{"verdict.txt": "verdict: PASS", "all-events.check.txt": "result: exact", "all-events.run.txt": "result: exact"} {
		b, err := os.ReadFile(filepath.Join(out, name))
		if err != nil || !strings.Contains(string(b), want) {
			t.Errorf("%s: want %q: %v\n%s", name, want, err, b)
		}
	}
	b, err := os.ReadFile(filepath.Join(out, "samples.tsv"))
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(lines) < 5 || lines[0] != "t_s\texample\tpid\tphase\trss_kib\tthreads\tfds\tgoroutines\tgpu_mib" {
		t.Fatalf("samples: want a header and 4 samples at least:\n%s", b)
	}
	phases := map[string]int{}
	for _, l := range lines[1:] {
		f := strings.Split(l, "\t")
		phases[f[3]]++
		for i, c := range f[4:8] { // rss, threads, fds, goroutines: numbers
			if n, err := strconv.Atoi(c); err != nil || n <= 0 {
				t.Errorf("sample %q: column %d is %q, want a positive count", l, i+5, c)
			}
		}
		if f[8] != "NA" {
			t.Errorf("sample %q: device memory on the cpu backend, want NA", l)
		}
	}
	// The run's own samples, then finalize's (the process outlives its
	// duration by its last dumps).
	if phases["run"] < 4 || len(phases) > 2 || (len(phases) == 2 && phases["after"] == 0) {
		t.Errorf("phases %v: want 4 samples within the duration at least, and the rest after it", phases)
	}
}

// A soak makes communicators over and over. field-capture records, and the
// cpu backend's arena holds the context blocks of 125 communicators a
// device; the blocks of finalized communicators are reused, so cycle after
// cycle of 50 gets its hook, and the run is exact. Where more communicators
// than that live at once, the later ones get no hook, and the run must say
// so, not pass on the others' output.
func TestRunDurationNeverPassesUnprofiledCommunicators(t *testing.T) {
	// Long enough for 3 cycles (150 communicators) on a loaded machine,
	// where the first cycle's compile alone can take a second.
	out, code := cli(t, "run", "../../examples/field-capture.yaml", "--backend", "cpu", "--out", t.TempDir(), "--no-verify",
		"--duration", "5s", "--gap", "50ms", "--devices", "1", "--comms", "50", "--channels", "1", "--items", "10")
	m := regexp.MustCompile(`, (\d+) cycles in `).FindStringSubmatch(out)
	if code != 0 || !strings.Contains(out, "result: exact") || strings.Contains(out, "no hook for communicator") || m == nil {
		t.Errorf("every communicator's block reused: exit %d, want exact:\n%s", code, out)
	} else if cycles, _ := strconv.Atoi(m[1]); cycles*50 <= 125 {
		t.Errorf("%d cycles of 50 communicators: not more than the arena holds, nothing reused:\n%s", cycles, out)
	}
	out, code = cli(t, "run", "../../examples/field-capture.yaml", "--backend", "cpu", "--out", t.TempDir(), "--no-verify",
		"--duration", "1s", "--gap", "100ms", "--devices", "1", "--comms", "130", "--channels", "1", "--items", "10")
	if code != exitVerdict || !strings.Contains(out, "got no hook from getDeviceHook") {
		t.Errorf("130 communicators alive at once, 125 blocks: exit %d, want %d naming those without a hook:\n%s", code, exitVerdict, out)
	}
}
