package main

import (
	"encoding/binary"
	"os"
	"path/filepath"
	"regexp"
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
