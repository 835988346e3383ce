package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/ncclhooks/ncclhooks/internal/report/reporttest"
	"github.com/ncclhooks/ncclhooks/internal/schema"
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

// examples/skew.yaml promises that a straggler channel shows as a larger sum
// and max than its siblings: report computes, per aggregate and function,
// the channel with the largest value against the smallest. Checked against
// the final aggregate lines of a real run, merged over devices here.
func TestReportComputesSkewOfSkewExample(t *testing.T) {
	dir := t.TempDir()
	if out, code := cli(t, "run", "../../examples/skew.yaml", "--backend", "cpu", "--out", dir, "--items", "400"); code != 0 {
		t.Fatalf("run: exit %d:\n%s", code, out)
	}
	out, code := cli(t, "report", dir, "--json")
	if code != 0 {
		t.Fatalf("report: exit %d:\n%s", code, out)
	}
	var rep struct {
		AggSkew []struct {
			Aggregate, Stat, Func string
			Slowest               string `json:"slowest_channel"`
			Fastest               string `json:"fastest_channel"`
			Channels              int
			SlowValue             float64 `json:"slowest_value"`
			FastValue             float64 `json:"fastest_value"`
			Skew, Ratio           float64
		} `json:"aggregate_skew"`
	}
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatal(err)
	}
	// The final aggregate lines, merged over devices: sums add, min and max combine.
	files, _ := filepath.Glob(filepath.Join(dir, "*.jsonl"))
	data, _ := os.ReadFile(files[0])
	want := map[string]map[string]float64{} // "aggregate func" -> channel -> value
	for _, l := range strings.Split(string(data), "\n") {
		var a schema.Aggregate
		if json.Unmarshal([]byte(l), &a) != nil || a.Type != "aggregate" || !a.Final {
			continue
		}
		for _, r := range a.Rows {
			k := a.Name + " " + r.Func
			if want[k] == nil {
				want[k] = map[string]float64{}
			}
			ch := string(r.ChannelID)
			old, seen := want[k][ch]
			switch a.Kind {
			case "sum":
				v, _ := strconv.ParseFloat(string(r.Sum), 64)
				want[k][ch] = old + v
			case "min":
				if v := float64(*r.Min); !seen || v < old {
					want[k][ch] = v
				}
			case "max":
				if v := float64(*r.Max); !seen || v > old {
					want[k][ch] = v
				}
			}
		}
	}
	if len(rep.AggSkew) != len(want) || len(want) < 3*10 {
		t.Fatalf("%d skew rows, want one per aggregate and function (%d)", len(rep.AggSkew), len(want))
	}
	for _, s := range rep.AggSkew {
		chans := want[s.Aggregate+" "+s.Func]
		lo, hi := math.Inf(1), math.Inf(-1)
		for _, v := range chans {
			lo, hi = min(lo, v), max(hi, v)
		}
		if s.Channels != len(chans) || s.SlowValue != hi || s.FastValue != lo || s.Skew != hi-lo ||
			chans[s.Slowest] != hi || chans[s.Fastest] != lo || (lo > 0 && math.Abs(s.Ratio-hi/lo) > 1e-12) {
			t.Errorf("%s %s: %+v, channels %v", s.Aggregate, s.Func, s, chans)
		}
		if want := map[string]string{"busy_ns": "sum", "fastest_ns": "min", "slowest_ns": "max"}[s.Aggregate]; s.Stat != want {
			t.Errorf("%s: stat %s, want %s", s.Aggregate, s.Stat, want)
		}
	}
	if text, _ := cli(t, "report", dir); !strings.Contains(text, "channel skew of the on-device aggregates") {
		t.Errorf("the table has no skew section:\n%s", text)
	}
}

// The report of examples/drain-latency.yaml: its hook writes no record
// lines, and says so rather than "0 records"; its aggregates, by function,
// count what the run counted.
func TestReportOfDrainLatency(t *testing.T) {
	dir := t.TempDir()
	if out, code := cli(t, "run", "../../examples/drain-latency.yaml", "--backend", "cpu", "--out", dir, "--items", "400"); code != 0 {
		t.Fatalf("run: exit %d:\n%s", code, out)
	}
	out, code := cli(t, "report", dir)
	if code != 0 {
		t.Fatalf("report: exit %d:\n%s", code, out)
	}
	if !strings.Contains(out, "hook latency: records aggregated by the drain, none written; capture ") {
		t.Errorf("no line saying the hook's records went to its aggregates:\n%s", out)
	}
	if !strings.Contains(out, "latency  duration_ns  histogram  AllReduce_Sum_f32_RING_LL") {
		t.Errorf("no duration_ns row for AllReduce_Sum_f32_RING_LL:\n%s", out)
	}
	// The header names the hook, which is how the report knows.
	files, _ := filepath.Glob(filepath.Join(dir, "*.jsonl"))
	data, err := os.ReadFile(files[0])
	if err != nil {
		t.Fatal(err)
	}
	var h schema.Header
	if err := json.Unmarshal(data[:bytes.IndexByte(data, '\n')], &h); err != nil || !slices.Equal(h.Drained, []string{"latency"}) {
		t.Errorf("header drained %q (%v), want [latency]", h.Drained, err)
	}
}
