package main

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// Issue 34.6: a hook that only aggregates is seen to match: the run's and
// check's rows give its matched count against the harness's own (exact, and
// MISMATCH when the count is off), the plugin's log and Prometheus say it,
// and report says capture n/a rather than 100% of 0 records.
func TestAggregateOnlyHookMatches(t *testing.T) {
	dir := t.TempDir()
	out, events, prom := filepath.Join(dir, "out"), t.TempDir(), filepath.Join(dir, "prom")
	const prof = "../../examples/latency.yaml"
	// 2 devices x 2 communicators x 4 channels x 300 work items: every
	// STOP paired, 2400 per device.
	const perDevice = 2 * 4 * 300
	stdout, stderr, code := cliSplit(t, []string{"NCCL_HOOKS_PROM_DIR=" + prom, "NCCL_HOOKS_PROM_DUMP_STATS=1"},
		"run", prof, "--backend", "cpu", "--out", out, "--events-out", events, "--items", "300")
	if code != 0 || !strings.Contains(stdout, "result: exact") {
		t.Fatalf("run: exit %d:\n%s%s", code, stdout, stderr)
	}
	rows := parseRows(t, stdout)
	for d := range 2 {
		r, ok := rows[fmt.Sprintf("latency/%d", d)]
		if !ok || r.matched != perDevice || r.expected != fmt.Sprint(perDevice) || r.records != 0 || r.dropped != 0 || r.result != "exact" {
			t.Errorf("run, device %d: row %+v, want %d matched and expected", d, r, perDevice)
		}
	}
	if want := fmt.Sprintf("matched %d, records 0, dropped 0", 2*perDevice); !strings.Contains(stderr, want) {
		t.Errorf("the plugin's log does not say %q:\n%s", want, stderr)
	}
	for d := range 2 {
		files, _ := filepath.Glob(filepath.Join(prom, fmt.Sprintf("ncclhooks_dev%d_*.prom", d)))
		if len(files) != 1 {
			t.Fatalf("device %d: textfiles %v", d, files)
		}
		data, _ := os.ReadFile(files[0])
		if !regexp.MustCompile(fmt.Sprintf(`(?m)^ncclhooks_matched_total\{[^}]*hook="latency"[^}]*\} %d$`, perDevice)).Match(data) {
			t.Errorf("device %d: no ncclhooks_matched_total %d in\n%s", d, perDevice, data)
		}
	}
	o, code := cli(t, "check", out, "--profile", prof, "--events", events)
	if code != 0 || !strings.Contains(o, "result: exact") {
		t.Fatalf("check: exit %d:\n%s", code, o)
	}
	if r := parseRows(t, o)["latency/0"]; r.matched != perDevice || r.expected != fmt.Sprint(perDevice) {
		t.Errorf("check: row %+v, want %d matched and expected", r, perDevice)
	}
	rep, code := cli(t, "report", out)
	if code != 0 || strings.Contains(rep, "capture 100.00% (0 records, 0 dropped)") ||
		!strings.Contains(rep, fmt.Sprintf("capture n/a (aggregates only: %d events matched, no records)", 2*perDevice)) {
		t.Errorf("report: exit %d:\n%s", code, rep)
	}
	// Tampered: one device's matched count one higher than its aggregates'.
	files, _ := filepath.Glob(filepath.Join(out, "ncclhooks-*.jsonl"))
	if len(files) != 1 {
		t.Fatalf("outputs %v", files)
	}
	body, _ := os.ReadFile(files[0])
	re := regexp.MustCompile(fmt.Sprintf(`("type":"dump_stats","hook":"latency","device":0,[^\n]*"final":true[^\n]*"matched_total":)%d,`, perDevice))
	tampered := re.ReplaceAllString(string(body), fmt.Sprintf("${1}%d,", perDevice+1))
	if tampered == string(body) {
		t.Fatal("no final dump_stats line of device 0 to tamper with")
	}
	if err := os.WriteFile(files[0], []byte(tampered), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"check", out, "--profile", prof, "--events", events}, {"check", out, "--profile", prof}} {
		o, code := cli(t, args...)
		if code != 1 || !strings.Contains(o, fmt.Sprintf("aggregate duration_ns counts %d events, matched_total %d", perDevice, perDevice+1)) {
			t.Errorf("%v of a tampered matched count: exit %d, want 1:\n%s", args, code, o)
		}
		if len(args) == 6 && !strings.Contains(o, fmt.Sprintf("harness expects %d matches, plugin matched %d", perDevice, perDevice+1)) {
			t.Errorf("with the event log: the harness's count is not compared:\n%s", o)
		}
	}
}
