package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/ncclhooks/ncclhooks/internal/config"
	"github.com/ncclhooks/ncclhooks/internal/schema"
)

const reloadBefore = `version: 1
name: before
hooks:
  - name: all
    fields: [timestamp, workCounter, funcId, channelId, phase, {field: comm, type: u8}]
    buffer:
      slots: 65536
      overflow: drop_newest
`

// after records the same events differently, and counts the STOPs on the
// device: a module of another layout, and an aggregate, behind the same hook.
const reloadAfter = `version: 1
name: after
hooks:
  - name: all2
    fields: [{field: timestamp, as: ts}, workCounter, channelId, phase, {field: comm, type: u8}]
    buffer:
      slots: 65536
      overflow: drop_newest
  - name: stops
    when: phase == STOP
    aggregate:
      - {name: n, kind: count}
`

const reloadBad = `version: 1
name: bad
hooks:
  - name: all3
    fields: [timestamp, nosuchfield]
`

// TestRunReloadMidRun swaps the profile of a running job through the real
// plugin (dlopened by ncclhooks run, its hooks compiled by the system cc):
// mid-run, while every channel goes on calling the hook, a profile that
// does not load is written over the watched file, then one that does. The
// first leaves the running profile in place with exactly one WARN naming
// file:line:col; the second becomes epoch 1. Every epoch's accounting is
// exact, every record equals an event the harness emitted, and the epochs'
// matches add up to every event emitted: none counted twice, none lost at
// the switch. The output holds the epochs one after the other (the
// previous epoch's final dump_stats, then the profile line with the new
// profile's hash, then only the new hooks' lines), and ncclhooks check
// verifies it the same way, given both profiles.
func TestRunReloadMidRun(t *testing.T) {
	dir := t.TempDir()
	before := writeFile(t, dir, "before.yaml", reloadBefore)
	after := writeFile(t, dir, "after.yaml", reloadAfter)
	bad := writeFile(t, dir, "bad.yaml", reloadBad)
	out := filepath.Join(dir, "out")
	res, code := cli(t, "run", before, "--backend", "cpu", "--out", out, "--devices", "2", "--comms", "2", "--channels", "2",
		"--items", "3000", "--reload-interval", "20ms", "--reload-to", bad, "--reload-to", after)
	if code != 0 {
		t.Fatalf("exit %d:\n%s", code, res)
	}
	var warns []string
	for _, l := range strings.Split(res, "\n") {
		if strings.HasPrefix(l, "plugin: WARN") {
			warns = append(warns, l)
		}
	}
	if len(warns) != 1 || !strings.Contains(warns[0], "reload:") || !strings.Contains(res, ".yaml:5:25: unknown field \"nosuchfield\"") {
		t.Errorf("want exactly one WARN, the refused reload's, with the error's file:line:col; got %q in:\n%s", warns, res)
	}
	for _, want := range []string{`all@0`, `all2@1`, `stops@1`, "each event matched in exactly one", "result: exact"} {
		if !strings.Contains(res, want) {
			t.Errorf("no %q in:\n%s", want, res)
		}
	}
	if strings.Contains(res, "MISMATCH") {
		t.Errorf("mismatch:\n%s", res)
	}
	// The across-epochs rows: every event of a device matched in one epoch.
	across := regexp.MustCompile(`\(every event\)\s+(\d)\s+all,all2\s+\[(\d+) (\d+)\]\s+(\d+)\s+(\d+)\s+exact`)
	rows := across.FindAllStringSubmatch(res, -1)
	if len(rows) != 2 {
		t.Fatalf("want an across-epochs row per device, got %d:\n%s", len(rows), res)
	}
	for _, r := range rows {
		var e0, e1, sum, exp int
		fmt.Sscan(r[2], &e0)
		fmt.Sscan(r[3], &e1)
		fmt.Sscan(r[4], &sum)
		fmt.Sscan(r[5], &exp)
		if e0 == 0 || e1 == 0 || e0+e1 != exp || sum != exp {
			t.Errorf("device %s: epochs matched %d + %d, emitted %d: the switch must come mid-run and lose nothing", r[1], e0, e1, exp)
		}
	}
	lat := regexp.MustCompile(`reload: epoch 1, profile "after" \(sha256 [0-9a-f]+\): active ([0-9.]+) ms after the file change, first record \(all2\) ([0-9.]+) ms after it`).FindStringSubmatch(res)
	if lat == nil {
		t.Fatalf("no reload latency line in:\n%s", res)
	}
	t.Logf("cpu backend, reload interval 20ms: file change -> switch %s ms, -> first record of the new hook %s ms", lat[1], lat[2])

	// The file: epochs in order, the profile line naming the new profile.
	files, _ := filepath.Glob(filepath.Join(out, "*.jsonl"))
	if len(files) != 1 {
		t.Fatalf("outputs %v", files)
	}
	want, err := config.Load(after)
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(files[0])
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<24)
	epoch, finals := 0, map[int]int{}
	for sc.Scan() {
		var l struct {
			Type  string `json:"type"`
			Hook  string `json:"hook"`
			Final bool   `json:"final"`
		}
		json.Unmarshal(sc.Bytes(), &l)
		switch l.Type {
		case schema.TypeProfile:
			var p schema.Profile
			if err := json.Unmarshal(sc.Bytes(), &p); err != nil {
				t.Fatal(err)
			}
			epoch++
			if p.Epoch != epoch || p.Profile != "after" || p.ProfileHash != want.Hash || p.ActiveUnixNs < p.ChangeUnixNs || p.Fields["all2"]["ts"] != "timestamp" {
				t.Errorf("profile line %+v: want epoch %d of %q, hash %s, active after the change, all2's fields", p, epoch, "after", want.Hash)
			}
			if finals[0] != 2 {
				t.Errorf("the profile line came after %d final dump_stats of epoch 0, want 2 (one per device)", finals[0])
			}
		case schema.TypeDumpStats:
			if l.Final {
				finals[epoch]++
			}
			fallthrough
		case schema.TypeRecord:
			if (epoch == 0) != (l.Hook == "all") {
				t.Errorf("epoch %d holds a %s line of hook %q", epoch, l.Type, l.Hook)
			}
		}
	}
	if epoch != 1 || finals[1] != 4 {
		t.Errorf("%d profile lines, epoch 1's final dump_stats %d: want 1 and 4 (2 hooks x 2 devices)", epoch, finals[1])
	}

	// check, as for a real job's output: both profiles, then the first
	// alone (epoch 1 by its accounting).
	res, code = cli(t, "check", out, "--profile", before, "--profile", after)
	if code != 0 || !strings.Contains(res, "result: exact") || !strings.Contains(res, "each event matched in exactly one") {
		t.Errorf("check with both profiles: exit %d:\n%s", code, res)
	}
	res, code = cli(t, "check", out, "--profile", before)
	if code != 0 || !strings.Contains(res, "all2@1") || !strings.Contains(res, "result: exact") {
		t.Errorf("check with the first profile: exit %d:\n%s", code, res)
	}
}

// TestReloadCommand: ncclhooks reload PID [PROFILE] finds the profile a
// process watches in its environment (a relative one in its working
// directory), writes a checked PROFILE over it, refuses one that does not
// load (file:line:col, the watched file untouched), and refuses a process
// that does not watch.
func TestReloadCommand(t *testing.T) {
	dir := t.TempDir()
	watched := writeFile(t, dir, "job.yaml", reloadBefore)
	after := writeFile(t, dir, "after.yaml", reloadAfter)
	bad := writeFile(t, dir, "bad.yaml", reloadBad)
	start := func(env ...string) int {
		cmd := exec.Command("sleep", "60")
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), env...)
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
		return cmd.Process.Pid
	}
	job := fmt.Sprint(start("NCCL_HOOKS_PROFILE=job.yaml", "NCCL_HOOKS_RELOAD=on"))
	out, code := cli(t, "reload", job, bad)
	if code != 1 || !strings.Contains(out, ":5:25") {
		t.Errorf("reload to a bad profile: exit %d, want 1 with its file:line:col:\n%s", code, out)
	}
	if b, _ := os.ReadFile(watched); string(b) != reloadBefore {
		t.Errorf("a refused profile changed the watched file")
	}
	out, code = cli(t, "reload", job, after)
	if b, _ := os.ReadFile(watched); code != 0 || string(b) != reloadAfter || !strings.Contains(out, watched) {
		t.Errorf("reload: exit %d, the watched file %s now holds the new profile: %v:\n%s", code, watched, string(b) == reloadAfter, out)
	}
	old := time.Now().Add(-time.Hour)
	os.Chtimes(watched, old, old)
	if out, code = cli(t, "reload", job); code != 0 {
		t.Errorf("reload without a profile: exit %d:\n%s", code, out)
	}
	if fi, _ := os.Stat(watched); fi.ModTime().Before(time.Now().Add(-time.Minute)) {
		t.Errorf("reload without a profile did not touch %s", watched)
	}
	unwatched := fmt.Sprint(start("NCCL_HOOKS_PROFILE=" + watched))
	if out, code = cli(t, "reload", unwatched, after); code != 2 || !strings.Contains(out, "NCCL_HOOKS_RELOAD") {
		t.Errorf("reload of a process that does not watch: exit %d, want 2 naming NCCL_HOOKS_RELOAD:\n%s", code, out)
	}
	if matches, _ := filepath.Glob(filepath.Join(dir, ".ncclhooks-reload-*")); len(matches) > 0 {
		t.Errorf("temporary files left: %v", matches)
	}
}
