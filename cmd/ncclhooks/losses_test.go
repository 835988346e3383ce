package main

import (
	"bufio"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ncclhooks/ncclhooks/internal/report"
)

// header is the first line of the one output file in dir.
func header(t *testing.T, dir string) map[string]any {
	t.Helper()
	f, err := os.Open(onlyFile(t, dir))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	var h map[string]any
	if !sc.Scan() || json.Unmarshal(sc.Bytes(), &h) != nil {
		t.Fatalf("%s: no header line", dir)
	}
	return h
}

// A profile the plugin refuses in a real job (here: its compiler fails)
// leaves an inactive line in the dump directory; report (and report --by)
// shows INACTIVE and exits 2, and diff gives no verdict from it. The header carries the
// profile's hash, the plugin's build (the same git describe as the CLI's
// when make built both) and the NCCL version, unknown under the harness.
func TestRefusedProfileIsInactiveInReportAndDiff(t *testing.T) {
	out := filepath.Join(t.TempDir(), "out")
	text, _ := cliEnv(t, []string{"NCCL_HOOKS_CC=/bin/false", "NCCL_HOOKS_CACHE_DIR=off"},
		"run", "../../examples/latency.yaml", "--backend", "cpu", "--items", "10", "--out", out)
	if !strings.Contains(text, "inactive") {
		t.Fatalf("run with a failing compiler did not go inactive:\n%s", text)
	}
	h := header(t, out)
	if h["profile"] != "latency" || len(h["profile_hash"].(string)) != 64 || h["nccl_version"] != "unknown" || h["plugin_version"] == "" {
		t.Errorf("header %v", h)
	}
	if v, _ := cli(t, "--version"); os.Getenv("NCCLHOOKS_PLUGIN") != "" && !strings.Contains(v, "("+h["plugin_version"].(string)+")") {
		t.Errorf("plugin_version %v is not the CLI's build (%s): is the Makefile's stamp missing?", h["plugin_version"], strings.TrimSpace(v))
	}
	text, code := cli(t, "report", out)
	if code != 2 || !strings.Contains(text, "INACTIVE") || !strings.Contains(text, "/bin/false failed") {
		t.Errorf("report of an inactive output: exit %d, want 2 and INACTIVE with the reason:\n%s", code, text)
	}
	for _, by := range []string{"rank", "device", "comm"} {
		if text, code := cli(t, "report", out, "--by", by); code != 2 || !strings.Contains(text, "INACTIVE") || !strings.Contains(text, "/bin/false failed") {
			t.Errorf("report --by %s of an inactive output: exit %d, want 2 and INACTIVE with the reason:\n%s", by, code, text)
		}
	}
	if text, code := cli(t, "diff", out, out); code != 2 || !strings.Contains(text, "INACTIVE") {
		t.Errorf("diff of an inactive output: exit %d, want 2 and INACTIVE:\n%s", code, text)
	}
}

// Two versions of one profile (the same name, other contents) are not
// merged by report nor compared by diff: both name the two hashes and
// --allow-mixed; with --allow-mixed they are.
func TestReportAndDiffRefuseDifferentProfileHashes(t *testing.T) {
	dir := t.TempDir()
	orig, err := os.ReadFile("testdata/agg-only.yaml")
	if err != nil {
		t.Fatal(err)
	}
	edited := filepath.Join(dir, "agg-only.yaml")
	if err := os.WriteFile(edited, append(orig, "# edited: another version of the profile\n"...), 0o644); err != nil {
		t.Fatal(err)
	}
	a := harnessRuns(t, "testdata/agg-only.yaml", 4, nil)[0]
	b := harnessRuns(t, edited, 4, nil)[0]
	ha, hb := header(t, filepath.Join(a, "run-01"))["profile_hash"].(string), header(t, filepath.Join(b, "run-01"))["profile_hash"].(string)
	if ha == hb || ha == "" {
		t.Fatalf("profile hashes %q and %q: want two", ha, hb)
	}
	names := func(text string) bool {
		return strings.Contains(text, report.ShortHash(ha)) && strings.Contains(text, report.ShortHash(hb)) && strings.Contains(text, "--allow-mixed")
	}
	fa, fb := onlyFile(t, filepath.Join(a, "run-01")), onlyFile(t, filepath.Join(b, "run-01"))
	if text, code := cli(t, "report", fa, fb); code != 2 || !names(text) {
		t.Errorf("report of two profile versions: exit %d, want 2 naming both hashes:\n%s", code, text)
	}
	if text, code := cli(t, "report", fa, fb, "--allow-mixed"); code != 0 {
		t.Errorf("report --allow-mixed: exit %d:\n%s", code, text)
	}
	if text, code := cli(t, "diff", a, b); code != 2 || !names(text) {
		t.Errorf("diff of two profile versions: exit %d, want 2 naming both hashes:\n%s", code, text)
	}
	if text, _ := cli(t, "diff", a, b, "--allow-mixed"); names(text) {
		t.Errorf("diff --allow-mixed still refuses:\n%s", text)
	}
}
