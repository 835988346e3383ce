package report_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/ncclhooks/ncclhooks/internal/report"
	"github.com/ncclhooks/ncclhooks/internal/report/reporttest"
)

// nearestRank is the test's own percentile, computed from the generator's truth.
func nearestRank(ds []uint64, p float64) float64 {
	s := slices.Clone(ds)
	slices.Sort(s)
	i := int(math.Ceil(p/100*float64(len(s)))) - 1
	return float64(s[max(i, 0)])
}

func findFunc(t *testing.T, rep *report.Report, hook, fn string) report.FuncReport {
	t.Helper()
	for _, h := range rep.Hooks {
		if h.Hook != hook {
			continue
		}
		for _, f := range h.Functions {
			if f.Func == fn {
				return f
			}
		}
	}
	t.Fatalf("no row for hook %q func %q", hook, fn)
	return report.FuncReport{}
}

func TestReportMatchesGeneratedTruth(t *testing.T) {
	for _, mode := range []struct {
		name     string
		duration bool
	}{{"pairs", false}, {"recorded-duration", true}} {
		t.Run(mode.name, func(t *testing.T) {
			dir := t.TempDir()
			_, truths, err := reporttest.WriteRun(dir, 3, reporttest.Options{Seed: 7, DropEvery: 97, RecordDuration: mode.duration})
			if err != nil {
				t.Fatal(err)
			}
			rep, err := report.Load([]string{dir}, report.Options{})
			if err != nil {
				t.Fatal(err)
			}
			if rep.Files != 3 || rep.Profile != "all-events" {
				t.Fatalf("files %d profile %q", rep.Files, rep.Profile)
			}
			want := map[string][]uint64{}
			var records, dropped uint64
			for _, tr := range truths {
				for fn, ds := range tr.Durations {
					want[fn] = append(want[fn], ds...)
				}
				records += uint64(tr.Records)
				dropped += uint64(tr.Dropped)
			}
			if dropped == 0 {
				t.Fatal("generator planted no drops")
			}
			h := rep.Hooks[0]
			if h.Records != records {
				t.Errorf("records %d, want %d", h.Records, records)
			}
			if h.Capture == nil || h.Capture.Records != records || h.Capture.Dropped != dropped || !h.Capture.Final {
				t.Fatalf("capture %+v, want %d records %d dropped final", h.Capture, records, dropped)
			}
			if got, w := h.Capture.Ratio, float64(records)/float64(records+dropped); math.Abs(got-w) > 1e-12 {
				t.Errorf("capture ratio %v, want %v", got, w)
			}
			if !mode.duration && h.UnpairedStarts+h.UnpairedStops == 0 {
				t.Error("drops left no unpaired START/STOP")
			}
			for fn, ds := range want {
				f := findFunc(t, rep, "all", fn)
				if f.Dist.Count != len(ds) {
					t.Errorf("%s: count %d, want %d", fn, f.Dist.Count, len(ds))
				}
				for _, p := range []struct {
					got float64
					p   float64
				}{{f.Dist.P50, 50}, {f.Dist.P90, 90}, {f.Dist.P99, 99}, {f.Dist.Max, 100}} {
					if w := nearestRank(ds, p.p); p.got != w {
						t.Errorf("%s: p%v = %v, want %v", fn, p.p, p.got, w)
					}
				}
				if len(f.Channels) != 4 {
					t.Errorf("%s: %d channel rows, want 4", fn, len(f.Channels))
				}
				n := 0
				for _, c := range f.Channels {
					n += c.Dist.Count
				}
				if n != f.Dist.Count {
					t.Errorf("%s: channel counts sum to %d, all-channels %d", fn, n, f.Dist.Count)
				}
			}
		})
	}
}

func TestChannelSkew(t *testing.T) {
	dir := t.TempDir()
	if _, _, err := reporttest.WriteRun(dir, 1, reporttest.Options{Seed: 3, Jitter: 0.001, ChannelSlowdown: map[int]float64{2: 1.5}}); err != nil {
		t.Fatal(err)
	}
	rep, err := report.Load([]string{dir}, report.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, fn := range reporttest.DefaultFuncs {
		f := findFunc(t, rep, "all", fn.Name)
		if f.Skew == nil || f.Skew.SlowestChannel != 2 {
			t.Fatalf("%s: skew %+v, want slowest channel 2", fn.Name, f.Skew)
		}
		if math.Abs(f.Skew.Ratio-1.5) > 0.01 {
			t.Errorf("%s: skew ratio %.3f, want about 1.5", fn.Name, f.Skew.Ratio)
		}
		if w := 0.5 * fn.BaseNs; math.Abs(f.Skew.Ns-w) > 0.01*fn.BaseNs {
			t.Errorf("%s: skew %.0f ns, want about %.0f", fn.Name, f.Skew.Ns, w)
		}
	}
}

func writeFile(t *testing.T, dir, name, content string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

const header = `{"type":"header","format":1,"profile":"p","host":"h","pid":1,"backend":"cpu","start_unix_ns":1}` + "\n"

func TestBadInputs(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "good.jsonl")
	if _, err := reporttest.Write(good, reporttest.Options{}); err != nil {
		t.Fatal(err)
	}
	content, _ := os.ReadFile(good)
	lines := bytes.Count(content, []byte("\n"))
	truncated := writeFile(t, dir, "trunc.jsonl", string(content[:len(content)-20]))
	other := filepath.Join(dir, "other.jsonl")
	if _, err := reporttest.Write(other, reporttest.Options{Profile: "latency"}); err != nil {
		t.Fatal(err)
	}
	empty := filepath.Join(dir, "emptydir")
	os.Mkdir(empty, 0o755)

	cases := []struct {
		name   string
		inputs []string
		want   string // substring of the error
	}{
		{"mixed profiles", []string{good, other}, other + ":1: profile \"latency\" differs from \"all-events\""},
		{"empty dir", []string{empty}, empty + ": directory holds no *.jsonl files"},
		{"missing", []string{filepath.Join(dir, "nope")}, "nope: no such file"},
		{"no header", []string{writeFile(t, dir, "nohdr.jsonl", `{"type":"record","hook":"a","device":0}`+"\n")}, "nohdr.jsonl:1: first line is a \"record\" line"},
		{"not json", []string{writeFile(t, dir, "garbage.jsonl", header+"hello\n")}, "garbage.jsonl:2: invalid character"},
		{"empty file", []string{writeFile(t, dir, "zero.jsonl", "")}, "zero.jsonl: empty file"},
		{"no records", []string{writeFile(t, dir, "norec.jsonl", header)}, "norec.jsonl: no records"},
		{"bad record", []string{writeFile(t, dir, "badrec.jsonl", header+`{"type":"record","device":0}`+"\n")}, `badrec.jsonl:2: record line has no "hook"`},
		{"format", []string{writeFile(t, dir, "fmt.jsonl", strings.Replace(header, `"format":1`, `"format":9`, 1))}, "fmt.jsonl:1: header format 9"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := report.Load(c.inputs, report.Options{})
			if err == nil {
				t.Fatal("no error")
			}
			var ie *report.InputError
			if !errors.As(err, &ie) {
				t.Errorf("error %T is not an *InputError", err)
			}
			if !strings.Contains(err.Error(), c.want) {
				t.Errorf("error %q\nwant it to contain %q", err, c.want)
			}
		})
	}
	// A truncated last line (a run killed mid-write) is read past, with a
	// warning naming it: the rest of the file is good.
	var warned []string
	if _, err := report.Load([]string{truncated}, report.Options{Warn: func(m string) { warned = append(warned, m) }}); err != nil {
		t.Errorf("truncated last line: %v", err)
	} else if want := truncated + ":" + itoa(lines) + ": truncated last line ignored"; len(warned) != 1 || !strings.Contains(warned[0], want) {
		t.Errorf("warnings %q, want one with %q", warned, want)
	}
	if _, err := report.Load([]string{good, other}, report.Options{AllowMixed: true}); err != nil {
		t.Errorf("AllowMixed: %v", err)
	}
}

func itoa(n int) string { b, _ := json.Marshal(n); return string(b) }

func TestUnpairedAndRenamedFields(t *testing.T) {
	dir := t.TempDir()
	hdr := `{"type":"header","format":1,"profile":"p","host":"h","pid":1,"fields":{"x":{"ts":"timestamp","wc":"workCounter","ph":"phase","ch":"channelId"}}}` + "\n"
	body := `{"type":"record","hook":"x","device":0,"seq":0,"ts":100,"wc":1,"ph":0,"ch":3}
{"type":"record","hook":"x","device":0,"seq":1,"ts":150,"wc":2,"ph":1,"ch":3}
{"type":"record","hook":"x","device":0,"seq":2,"ts":160,"wc":1,"ph":1,"ch":3}
{"type":"record","hook":"x","device":0,"seq":3,"ts":170,"wc":3,"ph":0,"ch":3}
{"type":"record","hook":"x","device":0,"seq":4,"ts":300,"wc":9,"ph":0,"ch":3}
{"type":"record","hook":"x","device":0,"seq":5,"ts":310,"wc":9,"ph":0,"ch":3}
{"type":"record","hook":"x","device":0,"seq":6,"ts":330,"wc":9,"ph":1,"ch":3}
`
	p := writeFile(t, dir, "r.jsonl", hdr+body)
	var items []report.WorkItem
	run, err := report.Read([]string{p}, report.Options{}, func(w *report.WorkItem) { items = append(items, *w) })
	if err != nil {
		t.Fatal(err)
	}
	hc := run.Hooks["x"]
	// wc 9 has two STARTs waiting (two communicators, or a lost STOP): the
	// STOP takes the latest one and the older stays unpaired.
	if hc.Items != 2 || hc.UnpairedStops != 1 || hc.UnpairedStarts != 2 || hc.Records != 7 || hc.Ambiguous != 1 {
		t.Fatalf("counts %+v", *hc)
	}
	if len(items) != 2 || items[0].Duration != 60 || items[0].Channel != 3 || items[0].FuncLabel() != "all" || items[1].Duration != 20 {
		t.Fatalf("items %+v", items)
	}
}

func TestFlatParserAgreesWithEncodingJSON(t *testing.T) {
	dir := t.TempDir()
	lines := []string{
		`{"type":"record","hook":"a\"b","device":0,"timestamp":18446744073709551615,"phase":1,"workCounter":7,"duration":5,"channelId":1}`,
		`  {"type" : "record" , "hook":"\u00e9","device":-0,"timestamp":1e3,"phase":1,"workCounter":8,"duration":6.0}  `,
	}
	p := writeFile(t, dir, "f.jsonl", header+strings.Join(lines, "\n")+"\n")
	var got []report.WorkItem
	if _, err := report.Read([]string{p}, report.Options{}, func(w *report.WorkItem) { got = append(got, *w) }); err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].Hook != `a"b` || got[0].Stop != math.MaxUint64 || got[0].Duration != 5 ||
		got[1].Hook != "é" || got[1].Stop != 1000 || got[1].Duration != 6 {
		t.Fatalf("items %+v", got)
	}
	for _, bad := range []string{`{"type":"record",}`, `{"type":"record" "hook":1}`, `{"a":01}`, `{"a":tru}`, `{"a":1} x`, `{"a":"x`, `{"a":-}`} {
		p := writeFile(t, dir, "bad.jsonl", header+bad+"\n")
		if _, err := report.Load([]string{p}, report.Options{}); err == nil || !strings.Contains(err.Error(), "bad.jsonl:2:") {
			t.Errorf("%s: error %v, want a syntax error at line 2", bad, err)
		}
		if json.Valid([]byte(bad)) {
			t.Errorf("%s: the test's bad line is valid JSON", bad)
		}
	}
}

func TestRenderFormats(t *testing.T) {
	dir := t.TempDir()
	if _, _, err := reporttest.WriteRun(dir, 2, reporttest.Options{Seed: 1}); err != nil {
		t.Fatal(err)
	}
	rep, err := report.Load([]string{dir}, report.Options{})
	if err != nil {
		t.Fatal(err)
	}
	var js bytes.Buffer
	if err := rep.Write(&js, report.JSON, false); err != nil {
		t.Fatal(err)
	}
	var back report.Report
	if err := json.Unmarshal(js.Bytes(), &back); err != nil {
		t.Fatal(err)
	}
	if len(back.Hooks) != 1 || len(back.Hooks[0].Functions) != len(reporttest.DefaultFuncs) {
		t.Fatalf("json round trip: %+v", back)
	}
	var tbl, md bytes.Buffer
	rep.Write(&tbl, report.Table, false)
	rep.Write(&md, report.Markdown, true)
	f := rep.Hooks[0].Functions[0]
	if !hasRow(tbl.String(), "all", f.Func, "all", itoa(f.Dist.Count)) {
		t.Errorf("table lacks the all-channels row of %s with count %d:\n%s", f.Func, f.Dist.Count, tbl.String())
	}
	if strings.Count(tbl.String(), f.Func) != 1+4 {
		t.Errorf("table: want 1 all-channels row and 4 channel rows for %s:\n%s", f.Func, tbl.String())
	}
	if !strings.Contains(md.String(), "| all | "+f.Func+" | all | ") || strings.Count(md.String(), f.Func) != 1 {
		t.Errorf("markdown summary:\n%s", md.String())
	}
}

// hasRow reports whether a line of an aligned table starts with cells.
func hasRow(table string, cells ...string) bool {
	for _, l := range strings.Split(table, "\n") {
		if f := strings.Fields(l); len(f) >= len(cells) && slices.Equal(f[:len(cells)], cells) {
			return true
		}
	}
	return false
}

// TestPairingKeepsDevicesApart: two devices run the same channel and
// workCounter at overlapping times (every rank's process numbers them alike).
// Each STOP pairs with its own device's START: a pairing by channel and
// workCounter alone would give device 0's STOP device 1's later START (the
// latest before it): items of 400 and 2100 ns, and an ambiguous pairing.
func TestPairingKeepsDevicesApart(t *testing.T) {
	dir := t.TempDir()
	hdr := `{"type":"header","format":1,"profile":"p","host":"h","pid":1}` + "\n"
	body := `{"type":"record","hook":"x","device":0,"seq":0,"timestamp":1000,"workCounter":5,"phase":0,"channelId":1,"funcId":3,"func":"AllReduce_Sum_f32_RING_LL"}
{"type":"record","hook":"x","device":1,"seq":0,"timestamp":1100,"workCounter":5,"phase":0,"channelId":1,"funcId":3,"func":"AllReduce_Sum_f32_RING_LL"}
{"type":"record","hook":"x","device":0,"seq":1,"timestamp":1500,"workCounter":5,"phase":1,"channelId":1,"funcId":3,"func":"AllReduce_Sum_f32_RING_LL"}
{"type":"record","hook":"x","device":1,"seq":1,"timestamp":3100,"workCounter":5,"phase":1,"channelId":1,"funcId":3,"func":"AllReduce_Sum_f32_RING_LL"}
`
	p := writeFile(t, dir, "r.jsonl", hdr+body)
	var items []report.WorkItem
	run, err := report.Read([]string{p}, report.Options{}, func(w *report.WorkItem) { items = append(items, *w) })
	if err != nil {
		t.Fatal(err)
	}
	hc := run.Hooks["x"]
	if hc.Items != 2 || hc.UnpairedStops != 0 || hc.UnpairedStarts != 0 || hc.Ambiguous != 0 {
		t.Fatalf("counts %+v; want 2 items, nothing unpaired or ambiguous", *hc)
	}
	durs := map[int]uint64{}
	for _, it := range items {
		if it.Channel != 1 || it.WorkCounter != 5 || it.Func != "AllReduce_Sum_f32_RING_LL" {
			t.Errorf("item %+v", it)
		}
		durs[it.Device] = it.Duration
	}
	if durs[0] != 500 || durs[1] != 2000 || len(durs) != 2 {
		t.Errorf("durations by device %v, want device 0: 500, device 1: 2000", durs)
	}
}
