package main

import (
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// TestCheckRealNCCLOutput: ncclhooks check on the output of a real plugin
// run (the cpu harness, 2 devices x 2 communicators x 4 channels x 200
// items) passes, and fails on
// each kind of damage a real NCCL run could show: a work item with two
// STARTs, a STOP in the wrong communicator, too few comm lines, and records that
// do not match the caller's event logs.
func TestCheckRealNCCLOutput(t *testing.T) {
	dir := t.TempDir()
	if out, code := cli(t, "run", "../../examples/all-events.yaml", "--backend", "cpu", "--out", dir, "--items", "200"); code != 0 {
		t.Fatalf("run: exit %d\n%s", code, out)
	}
	files, _ := filepath.Glob(filepath.Join(dir, "ncclhooks-*.jsonl"))
	if len(files) != 1 {
		t.Fatalf("outputs %v", files)
	}
	out, code := cli(t, "check", dir, "--profile", "../../examples/all-events.yaml", "--comms", "2")
	if code != 0 || !strings.Contains(out, "1600 work items, 1600 with one START and one STOP") || !strings.Contains(out, "result: exact") {
		t.Fatalf("check of an intact run: exit %d\n%s", code, out)
	}
	if _, code := cli(t, "check", dir, "--profile", "../../examples/all-events.yaml", "--comms", "3"); code != 1 {
		t.Errorf("--comms 3 against 2 comm lines per device: exit %d, want 1", code)
	}

	body, err := os.ReadFile(files[0])
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.SplitAfter(string(body), "\n")
	var rec int
	for i, l := range lines {
		if strings.Contains(l, `"type":"record"`) && strings.Contains(l, `"phase":1`) {
			rec = i
			break
		}
	}
	// Damage that keeps the line count and the totals, so only the pairing
	// can see it: a STOP turned into a second START, and a STOP moved to the
	// other communicator.
	edit := func(re, to string) string {
		l := append([]string(nil), lines...)
		l[rec] = regexp.MustCompile(re).ReplaceAllString(l[rec], to)
		return strings.Join(l, "")
	}
	for name, damaged := range map[string]string{
		"second START": edit(`"phase":1`, `"phase":0`),
		"moved STOP":   edit(`"comm":\d+`, `"comm":7`),
	} {
		bad := t.TempDir()
		if err := os.WriteFile(filepath.Join(bad, filepath.Base(files[0])), []byte(damaged), 0o644); err != nil {
			t.Fatal(err)
		}
		out, code := cli(t, "check", bad, "--profile", "../../examples/all-events.yaml")
		if code != 1 || !strings.Contains(out, "START and") {
			t.Errorf("%s: exit %d, want 1 with a MISMATCH of the pairing\n%s", name, code, out)
		}
	}

	// Event logs that disagree with the records: one event of device 0,
	// communicator 0, with a timestamp no record has.
	ev := t.TempDir()
	b := make([]byte, 24+24)
	copy(b, "NCHKEV1\x00")
	binary.LittleEndian.PutUint64(b[16:], 1)
	binary.LittleEndian.PutUint64(b[24:], 12345)
	if err := os.WriteFile(filepath.Join(ev, "events-dev0-comm0.bin"), b, 0o644); err != nil {
		t.Fatal(err)
	}
	if out, code := cli(t, "check", dir, "--profile", "../../examples/all-events.yaml", "--events", ev); code != 1 {
		t.Errorf("records against a foreign event log: exit %d, want 1\n%s", code, out)
	}
	if err := os.WriteFile(filepath.Join(ev, "events-dev0-comm0.bin"), b[:30], 0o644); err != nil {
		t.Fatal(err)
	}
	if out, code := cli(t, "check", dir, "--profile", "../../examples/all-events.yaml", "--events", ev); code != 2 || !strings.Contains(out, "bytes of events for a count of 1") {
		t.Errorf("a truncated event log: exit %d, want 2 naming it\n%s", code, out)
	}
}

// TestCheckFindsTamperedRecords: the harness's own event log of a real run
// (run --events-out) makes check compare every record with the event it
// names. The intact output is exact; each kind of damage to one record of it
// is a MISMATCH with exit 1 and says what it found: a changed field, a
// duplicated record, a missing record, a wrong function name.
func TestCheckFindsTamperedRecords(t *testing.T) {
	dir, events := t.TempDir(), t.TempDir()
	const profile = "../../examples/all-events.yaml"
	if out, code := cli(t, "run", profile, "--backend", "cpu", "--out", dir, "--events-out", events, "--devices", "1", "--items", "100"); code != 0 {
		t.Fatalf("run: exit %d\n%s", code, out)
	}
	files, _ := filepath.Glob(filepath.Join(dir, "ncclhooks-*.jsonl"))
	if len(files) != 1 {
		t.Fatalf("outputs %v", files)
	}
	out, code := cli(t, "check", dir, "--profile", profile, "--events", events)
	if code != 0 || !strings.Contains(out, "result: exact") || !regexp.MustCompile(`\s1600\s+1600\s+exact`).MatchString(out) {
		t.Fatalf("check of the intact run against its event log: exit %d, want 0 with 1600 records checked\n%s", code, out)
	}
	body, err := os.ReadFile(files[0])
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.SplitAfter(string(body), "\n")
	rec := -1
	for i, l := range lines {
		if strings.Contains(l, `"type":"record"`) && strings.Contains(l, `"phase":1`) {
			rec = i
			break
		}
	}
	if rec < 0 {
		t.Fatal("no STOP record in the output")
	}
	seq := regexp.MustCompile(`"seq":\d+`).FindString(lines[rec])
	with := func(f func(l []string) []string) string {
		return strings.Join(f(append([]string(nil), lines...)), "")
	}
	edit := func(re, to string) string {
		return with(func(l []string) []string {
			l[rec] = regexp.MustCompile(re).ReplaceAllString(l[rec], to)
			return l
		})
	}
	ts := regexp.MustCompile(`"timestamp":(\d+)`).FindStringSubmatch(lines[rec])[1]
	// The final dump_stats line, and the comm line of the device's last
	// communicator (dropping it leaves the indices 0..n-1 contiguous: only
	// the check that every communicator with events has one sees it).
	final, lastComm, lastIndex := -1, -1, -1
	for i, l := range lines {
		if strings.Contains(l, `"type":"dump_stats"`) && strings.Contains(l, `"final":true`) {
			final = i
		}
		if m := regexp.MustCompile(`"type":"comm","device":0,"comm":(\d+)`).FindStringSubmatch(l); m != nil {
			if n, _ := strconv.Atoi(m[1]); n > lastIndex {
				lastComm, lastIndex = i, n
			}
		}
	}
	if final < 0 || lastIndex < 1 {
		t.Fatalf("no final dump_stats line (%d) or fewer than 2 comm lines (last index %d) in the output", final, lastIndex)
	}
	// One drop more in the final dump, in dropped_total and a stage alike:
	// the stages still add up, records + dropped exceed matched.
	more := func(key string) func(string) string {
		return func(m string) string {
			n, _ := strconv.Atoi(strings.TrimPrefix(m, `"`+key+`":`))
			return fmt.Sprintf(`"%s":%d`, key, n+1)
		}
	}
	extraDrop := with(func(l []string) []string {
		for _, key := range []string{"dropped_total", "dropped_torn_total"} {
			l[final] = regexp.MustCompile(`"`+key+`":\d+`).ReplaceAllStringFunc(l[final], more(key))
		}
		return l
	})
	for _, tt := range []struct {
		name, body, want string
	}{
		{"changed field", edit(`"timestamp":\d+`, `"timestamp":1`+ts), "timestamp = 1" + ts + ", emitted " + ts},
		{"duplicated record", with(func(l []string) []string { return append(l[:rec+1], l[rec:]...) }), "a second record of channel"},
		{"missing record", with(func(l []string) []string { return append(l[:rec], l[rec+1:]...) }), "1599 record lines but records_total 1600"},
		{"wrong function name", edit(`"func":"[^"]*"`, `"func":"AllReduce_Sum_f64_TREE_LL"`), `func "AllReduce_Sum_f64_TREE_LL", want`},
		{"a drop more than matched", extraDrop, "records 1600 + dropped 1 != matched 1600"},
		{"comm line missing", with(func(l []string) []string { return append(l[:lastComm], l[lastComm+1:]...) }),
			fmt.Sprintf("device 0: communicator %d emitted events but has no comm line", lastIndex)},
	} {
		bad := t.TempDir()
		if err := os.WriteFile(filepath.Join(bad, filepath.Base(files[0])), []byte(tt.body), 0o644); err != nil {
			t.Fatal(err)
		}
		out, code := cli(t, "check", bad, "--profile", profile, "--events", events)
		if code != 1 || !strings.Contains(out, "result: MISMATCH") || !strings.Contains(out, tt.want) {
			t.Errorf("%s (record %s): exit %d, want 1, a MISMATCH and %q\n%s", tt.name, seq, code, tt.want, out)
		}
	}
}

// A hook the plugin refused (the caller's budget is too small for it, as in
// the caller matrix's 32-register column) writes a refused line and nothing
// else: check names it REFUSED and checks the other hooks, and does not
// call the refused hook's missing aggregates a MISMATCH (the caller matrix's
// test, which takes a refusal with its reason, failed on exactly that).
func TestCheckRefusedAggregateHook(t *testing.T) {
	dir := t.TempDir()
	prof := filepath.Join(t.TempDir(), "two.yaml")
	if err := os.WriteFile(prof, []byte(`version: 1
name: two
hooks:
  - name: latency
    when: phase == STOP && paired
    aggregate:
      - {name: duration_ns, kind: histogram, value: duration, by: [funcId], buckets: log2}
      - {name: slowest_ns, kind: max, value: duration, by: [funcId]}
  - name: trace
    fields: [timestamp, workCounter, channelId, phase]
`), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, code := cli(t, "run", prof, "--backend", "cpu", "--out", dir, "--items", "200"); code != 0 {
		t.Fatalf("run: exit %d\n%s", code, out)
	}
	files, _ := filepath.Glob(filepath.Join(dir, "ncclhooks-*.jsonl"))
	if len(files) != 1 {
		t.Fatalf("outputs %v", files)
	}
	body, err := os.ReadFile(files[0])
	if err != nil {
		t.Fatal(err)
	}
	// What the plugin writes for a refused hook: its refused line, and no
	// aggregate or dump_stats line of it.
	var kept []string
	dropped := 0
	for _, l := range strings.SplitAfter(string(body), "\n") {
		if strings.Contains(l, `"hook":"latency"`) && (strings.Contains(l, `"type":"aggregate"`) || strings.Contains(l, `"type":"dump_stats"`)) {
			dropped++
			continue
		}
		kept = append(kept, l)
		if strings.Contains(l, `"type":"header"`) {
			kept = append(kept, `{"type":"refused","hook":"latency","position":"latency.yaml:4:5","reason":"needs a 48-byte stack frame"}`+"\n")
		}
	}
	if dropped == 0 {
		t.Fatal("the latency hook wrote no aggregate or dump_stats line to take out")
	}
	if err := os.WriteFile(files[0], []byte(strings.Join(kept, "")), 0o644); err != nil {
		t.Fatal(err)
	}
	out, code := cli(t, "check", dir, "--profile", prof)
	// A refusal is never "exact" (check exits 1 and says MISMATCH), but the
	// only problem named is the refusal: the trace hook's rows are exact.
	if code != 1 || !strings.Contains(out, `REFUSED hook "latency"`) || strings.Contains(out, "MISMATCH latency") || strings.Count(out, "   exact") != 2 {
		t.Fatalf("check with the latency hook refused: exit %d, want 1, REFUSED, no MISMATCH of latency and the trace hook's 2 rows exact\n%s", code, out)
	}
}
