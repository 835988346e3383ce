package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/ncclhooks/ncclhooks/internal/report/reporttest"
)

// outputsRun writes a synthetic run of ranks files into a new directory.
func outputsRun(t *testing.T, ranks int, o reporttest.Options) string {
	t.Helper()
	dir := t.TempDir()
	if _, _, err := reporttest.WriteRun(dir, ranks, o); err != nil {
		t.Fatal(err)
	}
	return dir
}

// outputsCmd runs one CLI command and returns its exit code and outputs.
func outputsCmd(f func([]string, io.Writer, io.Writer) int, args ...string) (int, string, string) {
	var out, errb bytes.Buffer
	code := f(args, &out, &errb)
	return code, out.String(), errb.String()
}

func TestReportCommand(t *testing.T) {
	dir := outputsRun(t, 2, reporttest.Options{Seed: 1, DropEvery: 101})
	code, out, stderr := outputsCmd(runReport, dir)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	for _, fn := range reporttest.DefaultFuncs {
		if !strings.Contains(out, fn.Name) {
			t.Errorf("table lacks %s:\n%s", fn.Name, out)
		}
	}
	if !strings.Contains(out, "capture 99.") {
		t.Errorf("table lacks the capture ratio:\n%s", out)
	}

	// Flags after the inputs work too.
	code, out, _ = outputsCmd(runReport, dir, "--json", "--summary")
	var js struct {
		Files int `json:"files"`
		Hooks []struct {
			Functions []struct {
				Func     string `json:"func"`
				Channels []any  `json:"channels"`
			} `json:"functions"`
		} `json:"hooks"`
	}
	if code != 0 || json.Unmarshal([]byte(out), &js) != nil || js.Files != 2 || len(js.Hooks[0].Functions) != 3 {
		t.Fatalf("--json: exit %d\n%s", code, out)
	}
	code, out, _ = outputsCmd(runReport, "--markdown", "--summary", dir)
	// Three rows, each with hook "all" and channel "all".
	if code != 0 || !strings.HasPrefix(out, "### ncclhooks report") || strings.Count(out, "| all |") != 2*3 {
		t.Errorf("--markdown --summary: exit %d\n%s", code, out)
	}
}

func TestReportCommandBadInputsExit2(t *testing.T) {
	dir := outputsRun(t, 1, reporttest.Options{})
	files, _ := filepath.Glob(filepath.Join(dir, "*.jsonl"))
	data, _ := os.ReadFile(files[0])
	truncated := filepath.Join(t.TempDir(), "cut.jsonl")
	os.WriteFile(truncated, data[:len(data)-10], 0o644)
	lines := bytes.Count(data, []byte("\n"))
	mixed := outputsRun(t, 1, reporttest.Options{Profile: "other", PID: 9})
	empty := t.TempDir()

	cases := []struct {
		args []string
		want string
	}{
		{[]string{dir, mixed}, `profile "other" differs from "all-events"`},
		{[]string{empty}, "directory holds no *.jsonl files"},
		{[]string{}, "usage: ncclhooks report"},
		{[]string{dir, "--json", "--markdown"}, "choose one"},
		{[]string{dir, "--bogus"}, "flag provided but not defined: -bogus"},
	}
	for _, c := range cases {
		code, _, stderr := outputsCmd(runReport, c.args...)
		if code != 2 || !strings.Contains(stderr, c.want) {
			t.Errorf("report %v: exit %d, stderr %q; want 2 and %q", c.args, code, stderr, c.want)
		}
	}
	// A run cut short mid-line: reported, with a warning, not refused.
	if code, _, stderr := outputsCmd(runReport, truncated); code != 0 || !strings.Contains(stderr, "cut.jsonl:"+itoaCmd(lines)+": truncated last line ignored") {
		t.Errorf("report of a truncated file: exit %d, stderr %q", code, stderr)
	}
	if code, _, stderr := outputsCmd(runReport, "--allow-mixed", dir, mixed); code != 0 {
		t.Errorf("--allow-mixed: exit %d: %s", code, stderr)
	}
}

func TestParseInterspersed(t *testing.T) {
	fs := flag.NewFlagSet("x", flag.ContinueOnError)
	o := fs.String("o", "", "")
	b := fs.Bool("b", false, "")
	if err := parseInterspersed(fs, []string{"in1", "-o", "out", "in2", "-b", "--", "-in3"}); err != nil {
		t.Fatal(err)
	}
	if *o != "out" || !*b || !slices.Equal(fs.Args(), []string{"in1", "in2", "-in3"}) {
		t.Errorf("o=%q b=%v args=%q", *o, *b, fs.Args())
	}
}

func itoaCmd(n int) string { b, _ := json.Marshal(n); return string(b) }
