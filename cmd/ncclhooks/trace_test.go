package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ncclhooks/ncclhooks/internal/report/reporttest"
)

func TestTraceCommand(t *testing.T) {
	dir := outputsRun(t, 2, reporttest.Options{Seed: 4, Items: 20})
	out := filepath.Join(t.TempDir(), "trace.json")
	code, _, stderr := outputsCmd(runTrace, dir, "-o", out)
	if code != 0 || !strings.Contains(stderr, "wrote "+out+": 160 slices") {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	data, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	var tr struct {
		TraceEvents []struct {
			Ph string `json:"ph"`
		} `json:"traceEvents"`
	}
	if err := json.Unmarshal(data, &tr); err != nil {
		t.Fatal(err)
	}
	slices := 0
	for _, e := range tr.TraceEvents {
		if e.Ph == "X" {
			slices++
		}
	}
	if slices != 160 {
		t.Errorf("%d slices in the file, want 160", slices)
	}
	if st, _ := os.Stat(out); st.Mode().Perm() != 0o644 {
		t.Errorf("mode %v", st.Mode())
	}
	code, stdout, _ := outputsCmd(runTrace, "-o", "-", dir)
	if code != 0 || !json.Valid([]byte(stdout)) {
		t.Errorf("-o -: exit %d", code)
	}
	if code, _, stderr := outputsCmd(runTrace, t.TempDir(), "-o", out); code != 2 || !strings.Contains(stderr, "no *.jsonl files") {
		t.Errorf("empty dir: exit %d %s", code, stderr)
	}
	if entries, _ := os.ReadDir(filepath.Dir(out)); len(entries) != 1 {
		t.Errorf("leftover temporary files: %v", entries)
	}
}
