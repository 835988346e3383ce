package sinks

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/ncclhooks/ncclhooks/internal/config"
	"github.com/ncclhooks/ncclhooks/internal/hookgen"
)

func readLines(t *testing.T, path string) []map[string]json.RawMessage {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []map[string]json.RawMessage
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var m map[string]json.RawMessage
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatalf("line %d is not JSON: %v: %s", len(out)+1, err, sc.Text())
		}
		out = append(out, m)
	}
	return out
}

// keysInOrder returns a line's keys in the order written.
func keysInOrder(t *testing.T, line []byte) []string {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(line))
	dec.Token() // {
	var keys []string
	for dec.More() {
		k, err := dec.Token()
		if err != nil {
			t.Fatal(err)
		}
		keys = append(keys, k.(string))
		var skip json.RawMessage
		if err := dec.Decode(&skip); err != nil {
			t.Fatal(err)
		}
	}
	return keys
}

func allTypesHook() *hookgen.HookInfo {
	types := []config.Type{config.U64, config.I64, config.F64, config.F32, config.I32, config.I8, config.U16, config.Bool, config.U32}
	names := []string{"big", "neg", "x", "y", "small", "tiny", "w", "ok", "fid"}
	l := hookgen.Layout{}
	for i, ty := range types {
		src := names[i]
		if names[i] == "fid" {
			src = "funcId"
		}
		l.Fields = append(l.Fields, hookgen.FieldLayout{Name: names[i], Source: src, Type: ty, Offset: l.Bytes})
		l.Bytes += ty.Bytes()
	}
	l.Chunks = (l.Bytes + 3) / 4
	return &hookgen.HookInfo{Name: "all\"types", Slots: 16, Layout: l}
}

func TestRecordsRoundTripExactly(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "out", "nested")
	j, err := NewJSONL(dir, Header{Profile: "p", ProfileFile: "p.yaml", Host: "node/1", PID: 42, Backend: "cpu", StartUnixNs: 5})
	if err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(dir); err != nil || fi.Mode().Perm() != 0o755 {
		t.Fatalf("dump dir: %v %v", fi, err)
	}
	h := allTypesHook()
	rows := [][]hookgen.Value{
		{{U: math.MaxUint64}, {I: math.MinInt64}, {F: -1.5e-300}, {F: float64(float32(0.1))}, {I: -2147483648}, {I: -128}, {U: 65535}, {U: 1}, {U: 7}},
		{{U: 0}, {I: -1}, {F: math.MaxFloat64}, {F: float64(float32(-3.4e38))}, {I: 5}, {I: 127}, {U: 0}, {U: 0}, {U: 4294967295}},
		{{U: 1 << 63}, {I: math.MaxInt64}, {F: 0.1}, {F: 1e-45}, {I: 0}, {I: 0}, {U: 1}, {U: 0}, {U: 0}},
	}
	var recs []Record
	for i, vals := range rows {
		for f := range vals {
			vals[f].Type = h.Layout.Fields[f].Type
		}
		recs = append(recs, Record{Hook: h, Device: 3, Seq: uint64(1000 + i), Values: vals, FuncName: "AllReduce_Sum_f32_RING_LL"})
	}
	if err := j.Records(recs); err != nil {
		t.Fatal(err)
	}
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "ncclhooks-node_1-42.jsonl")
	if j.Path() != path {
		t.Fatalf("path %s, want %s", j.Path(), path)
	}
	raw, _ := os.ReadFile(path)
	lines := strings.Split(strings.TrimSpace(string(raw)), "\n")
	if len(lines) != 1+len(recs) {
		t.Fatalf("%d lines", len(lines))
	}
	for i, line := range lines[1:] {
		want := []string{"type", "hook", "device", "seq", "big", "neg", "x", "y", "small", "tiny", "w", "ok", "fid", "func"}
		if got := keysInOrder(t, []byte(line)); !slices.Equal(got, want) {
			t.Fatalf("record keys %v, want %v", got, want)
		}
		var m map[string]json.RawMessage
		dec := json.NewDecoder(strings.NewReader(line))
		dec.UseNumber()
		if err := dec.Decode(&m); err != nil {
			t.Fatal(err)
		}
		num := func(k string) string { return string(m[k]) }
		var hook string
		json.Unmarshal(m["hook"], &hook)
		if hook != h.Name || num("device") != "3" || num("seq") != []string{"1000", "1001", "1002"}[i] {
			t.Errorf("record %d: hook %q device %s seq %s", i, hook, num("device"), num("seq"))
		}
		for f, fl := range h.Layout.Fields {
			v := rows[i][f]
			text := num(fl.Name)
			switch {
			case fl.Type == config.Bool:
				if text != map[bool]string{true: "true", false: "false"}[v.U != 0] {
					t.Errorf("%s = %s", fl.Name, text)
				}
			case fl.Type.IsFloat():
				var got float64
				if err := json.Unmarshal([]byte(text), &got); err != nil {
					t.Fatalf("%s = %s: %v", fl.Name, text, err)
				}
				if fl.Type == config.F32 && float32(got) != float32(v.F) || fl.Type == config.F64 && got != v.F {
					t.Errorf("%s = %s, wrote %v", fl.Name, text, v.F)
				}
			case fl.Type.IsSigned():
				var got int64
				if err := json.Unmarshal([]byte(text), &got); err != nil || got != v.I {
					t.Errorf("%s = %s, wrote %d (%v)", fl.Name, text, v.I, err)
				}
			default:
				var got uint64
				if err := json.Unmarshal([]byte(text), &got); err != nil || got != v.U {
					t.Errorf("%s = %s, wrote %d (%v)", fl.Name, text, v.U, err)
				}
			}
		}
		if num("func") != `"AllReduce_Sum_f32_RING_LL"` {
			t.Errorf("func = %s", num("func"))
		}
	}
}

func TestHeaderClockStatsAggregateLines(t *testing.T) {
	dir := t.TempDir()
	m := &hookgen.Module{Hooks: []*hookgen.HookInfo{{Name: "h", Layout: hookgen.Layout{Fields: []hookgen.FieldLayout{{Name: "ts", Source: "timestamp", Type: config.U64}}}}}}
	j, err := NewJSONL(dir, Header{Profile: "prof", Host: "h1", PID: 7, Backend: "gpu", Fields: HeaderFields(m)})
	if err != nil {
		t.Fatal(err)
	}
	if err := j.Clock(1, "NVIDIA H200", 1700000000000000000, 123456789); err != nil {
		t.Fatal(err)
	}
	le := func(v uint64) *uint64 { return &v }
	hist := &hookgen.AggInfo{Hook: "h", Agg: &config.Aggregate{Name: "lat", Kind: config.AggHistogram, By: []string{"funcId"},
		Value: &config.Expr{Type: config.I64}}}
	sum := &hookgen.AggInfo{Hook: "h", Agg: &config.Aggregate{Name: "bytes", Kind: config.AggSum, By: []string{"channelId"},
		Value: &config.Expr{Type: config.F64}}}
	d := &Dump{
		// Each stage a count of its own, so that a count under another
		// stage's key shows.
		Stats: []Stats{{Hook: "h", Device: 1, Dump: 3, Final: true, TimeUnixNs: 99, Matched: 16, Records: 6, Dropped: 10,
			DroppedBufferFull: 1, DroppedOverwritten: 2, DroppedTorn: 3, DroppedRingFull: 4, RecordsSinceLastDump: 2, DroppedSinceLastDump: 3}},
		Aggs: []AggSnapshot{
			{Info: hist, Device: 1, TimeUnixNs: 99, Final: true, Rows: []AggRow{
				{FuncID: 5, FuncName: "AllReduce", ChannelID: -1, Count: 3, SumInt: -12, Buckets: []Bucket{{LE: le(1), Count: 1}, {LE: le(10), Count: 2}, {Count: 3}}},
				{FuncID: -2, ChannelID: -1, Count: 1, SumInt: 4, Buckets: []Bucket{{LE: le(1), Count: 0}, {LE: le(10), Count: 1}, {Count: 1}}},
			}},
			{Info: sum, Device: 1, TimeUnixNs: 99, Rows: []AggRow{{FuncID: -1, ChannelID: 2, Count: 2, SumFloat: 2.5}}},
		},
		Final: true,
	}
	if err := j.Dump(d); err != nil {
		t.Fatal(err)
	}
	// Dump flushes: the lines are on disk before Close.
	lines := readLines(t, filepath.Join(dir, "ncclhooks-h1-7.jsonl"))
	if len(lines) != 5 {
		t.Fatalf("%d lines before Close, want 5", len(lines))
	}
	j.Close()

	var hdr struct {
		Type, Profile, Host, Backend string
		Format                       int
		PID                          int   `json:"pid"`
		StartUnixNs                  int64 `json:"start_unix_ns"`
		Fields                       map[string]map[string]string
	}
	raw, _ := json.Marshal(lines[0])
	json.Unmarshal(raw, &hdr)
	if hdr.Type != "header" || hdr.Profile != "prof" || hdr.Host != "h1" || hdr.Backend != "gpu" || hdr.StartUnixNs == 0 || hdr.Fields["h"]["ts"] != "timestamp" {
		t.Errorf("header %+v", hdr)
	}
	if string(lines[1]["type"]) != `"clock"` || string(lines[1]["host_unix_ns"]) != "1700000000000000000" || string(lines[1]["device_ns"]) != "123456789" ||
		string(lines[1]["model"]) != `"NVIDIA H200"` {
		t.Errorf("clock line %v", lines[1])
	}

	want := []string{"type", "hook", "device", "dump", "final", "time_unix_ns", "matched_total", "records_total", "dropped_total",
		"records_since_last_dump", "dropped_since_last_dump", "dropped_buffer_full_total", "dropped_overwritten_total",
		"dropped_torn_total", "dropped_ring_full_total", "dropped_write_failed_total", "dropped_cap_total", "pending"}
	rawLines := strings.Split(strings.TrimSpace(string(must(os.ReadFile(filepath.Join(dir, "ncclhooks-h1-7.jsonl"))))), "\n")
	if got := keysInOrder(t, []byte(rawLines[2])); !slices.Equal(got, want) {
		t.Errorf("dump_stats keys %v, want %v", got, want)
	}
	ds := lines[2]
	for k, v := range map[string]string{"dump": "3", "final": "true", "matched_total": "16", "records_total": "6", "dropped_total": "10",
		"records_since_last_dump": "2", "dropped_since_last_dump": "3", "dropped_buffer_full_total": "1",
		"dropped_overwritten_total": "2", "dropped_torn_total": "3", "dropped_ring_full_total": "4"} {
		if string(ds[k]) != v {
			t.Errorf("dump_stats %s = %s, want %s", k, ds[k], v)
		}
	}

	var agg struct {
		Type, Hook, Name, Kind string
		Device                 int
		By                     []string
		Final                  bool
		Rows                   []map[string]any
	}
	raw, _ = json.Marshal(lines[3])
	json.Unmarshal(raw, &agg)
	if agg.Type != "aggregate" || agg.Name != "lat" || agg.Kind != "histogram" || !slices.Equal(agg.By, []string{"funcId"}) || !agg.Final || len(agg.Rows) != 2 {
		t.Fatalf("aggregate line %+v", agg)
	}
	r0, r1 := agg.Rows[0], agg.Rows[1]
	if r0["funcId"] != 5.0 || r0["func"] != "AllReduce" || r0["count"] != 3.0 || r0["sum"] != -12.0 || r1["funcId"] != "overflow" {
		t.Errorf("histogram rows %v", agg.Rows)
	}
	if _, has := r0["channelId"]; has {
		t.Errorf("channelId written for an aggregate not keyed by it")
	}
	b := r0["buckets"].([]any)
	if len(b) != 3 || b[0].(map[string]any)["le"] != 1.0 || b[2].(map[string]any)["le"] != "+Inf" || b[2].(map[string]any)["count"] != 3.0 {
		t.Errorf("buckets %v", b)
	}
	raw, _ = json.Marshal(lines[4])
	agg.Rows = nil
	json.Unmarshal(raw, &agg)
	if agg.Kind != "sum" || len(agg.Rows) != 1 || agg.Rows[0]["channelId"] != 2.0 || agg.Rows[0]["sum"] != 2.5 {
		t.Errorf("sum aggregate %+v", agg)
	}
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// A file of the same name (an earlier run with the same host and pid, a
// planted symlink, a FIFO) is never written into: the sink takes the next
// free numbered name, and each file has one header.
func TestOpenNeverReusesAFile(t *testing.T) {
	dir := t.TempDir()
	h := &hookgen.HookInfo{Name: "h", Layout: hookgen.Layout{Fields: []hookgen.FieldLayout{{Name: "v", Source: "workCounter", Type: config.U32}}}}
	secret := filepath.Join(t.TempDir(), "secret")
	if err := os.WriteFile(secret, []byte("root only\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	// .1 is a symlink to the secret, .2 a FIFO: the third open gets .3.
	if err := os.Symlink(secret, filepath.Join(dir, "ncclhooks-n-9.1.jsonl")); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(filepath.Join(dir, "ncclhooks-n-9.2.jsonl"), 0o644); err != nil {
		t.Fatal(err)
	}
	var paths []string
	for cycle := range 2 {
		j, err := NewJSONL(dir, Header{Profile: "p", Host: "n", PID: 9})
		if err != nil {
			t.Fatal(err)
		}
		paths = append(paths, filepath.Base(j.Path()))
		if err := j.Records([]Record{{Hook: h, Seq: uint64(cycle), Values: []hookgen.Value{{Type: config.U32, U: uint64(10 + cycle)}}}}); err != nil {
			t.Fatal(err)
		}
		if err := j.Close(); err != nil {
			t.Fatal(err)
		}
	}
	if !slices.Equal(paths, []string{"ncclhooks-n-9.jsonl", "ncclhooks-n-9.3.jsonl"}) {
		t.Errorf("files %v", paths)
	}
	for i, p := range paths {
		lines := readLines(t, filepath.Join(dir, p))
		if len(lines) != 2 || string(lines[0]["type"]) != `"header"` || string(lines[1]["v"]) != fmt.Sprint(10+i) {
			t.Errorf("%s: %v", p, lines)
		}
	}
	if b, _ := os.ReadFile(secret); string(b) != "root only\n" {
		t.Errorf("the symlink's target was written: %q", b)
	}
	if got := FileName("a b/c", 1); got != "ncclhooks-a_b_c-1.jsonl" {
		t.Errorf("FileName = %s", got)
	}
}

// A failed write (here: the descriptor swapped for a read-only one, as a
// full disk fails every write) leaves no partial line, counts the records it
// held as dropped_write_failed, keeps the comm line, and the output resumes
// once writes succeed again; the since-last deltas add up to the totals.
func TestWriteFailureIsCountedAndRecovers(t *testing.T) {
	dir := t.TempDir()
	h := &hookgen.HookInfo{Name: "h", Layout: hookgen.Layout{Fields: []hookgen.FieldLayout{{Name: "v", Source: "workCounter", Type: config.U32}}}}
	j, err := NewJSONL(dir, Header{Profile: "p", Host: "n", PID: 1})
	if err != nil {
		t.Fatal(err)
	}
	recs := func(n int) []Record {
		var r []Record
		for i := range n {
			r = append(r, Record{Hook: h, Seq: uint64(i), Values: []hookgen.Value{{Type: config.U32, U: uint64(i)}}})
		}
		return r
	}
	total := uint64(0)
	dump := func(n int, final bool) error {
		total += uint64(n)
		if err := j.Records(recs(n)); err != nil {
			return err
		}
		return j.Dump(&Dump{Final: final, Stats: []Stats{{Hook: "h", Matched: total, Records: total, Final: final, RecordsSinceLastDump: uint64(n)}}})
	}
	if err := dump(3, false); err != nil {
		t.Fatal(err)
	}
	good := j.f
	ro, err := os.Open(j.Path())
	if err != nil {
		t.Fatal(err)
	}
	j.mu.Lock()
	j.f = ro
	j.mu.Unlock()
	if err := dump(5, false); err == nil {
		t.Fatal("a failed write reported no error")
	}
	if err := j.Comm(Comm{Device: 0, Index: 0, Name: "kept"}); err == nil {
		t.Fatal("a failed comm write reported no error")
	}
	if err := dump(2, true); err == nil {
		t.Fatal("a failed final dump reported no error")
	}
	j.mu.Lock()
	j.f = good
	j.mu.Unlock()
	ro.Close()
	if err := dump(4, false); err != nil {
		t.Fatalf("after the disk has room again: %v", err)
	}
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	lines := readLines(t, j.Path())
	var types []string
	recLines, deltas := 0, uint64(0)
	var last map[string]json.RawMessage
	finals := 0
	for _, l := range lines {
		types = append(types, strings.Trim(string(l["type"]), `"`))
		switch string(l["type"]) {
		case `"record"`:
			recLines++
		case `"dump_stats"`:
			last = l
			deltas += must(strconv.ParseUint(string(l["records_since_last_dump"]), 10, 64))
			if string(l["final"]) == "true" {
				finals++
			}
		}
	}
	// 3 + 4 records written; the 5 and 2 buffered during the failure are lost.
	if recLines != 7 || string(last["records_total"]) != "7" || string(last["dropped_write_failed_total"]) != "7" ||
		string(last["dropped_total"]) != "7" || string(last["matched_total"]) != "14" || deltas != 7 || finals != 1 {
		t.Errorf("lines %v; last dump %s; records_since_last_dump sums to %d", types, last, deltas)
	}
	if !slices.Contains(types, "comm") {
		t.Errorf("the comm line written during the failure was lost: %v", types)
	}
}

func TestNonFiniteFloatsStayValidJSON(t *testing.T) {
	for _, c := range []struct {
		f    float64
		want string
	}{{math.NaN(), `"NaN"`}, {math.Inf(1), `"+Inf"`}, {math.Inf(-1), `"-Inf"`}, {1e21, "1e+21"}, {-0.5, "-0.5"}} {
		got := string(appendValue(nil, &hookgen.Value{Type: config.F64, F: c.f}))
		if got != c.want || !json.Valid([]byte(got)) {
			t.Errorf("%v -> %s, want %s", c.f, got, c.want)
		}
	}
	if s := string(appendString(nil, "a\"b\\c\n\x01\xff")); !json.Valid([]byte(s)) || s != `"a\"b\\c\n\u0001\ufffd"` {
		t.Errorf("escaped string %s", s)
	}
}

func TestMultiCallsEverySink(t *testing.T) {
	a, b := &countSink{}, &countSink{fail: true}
	m := Multi(a, b)
	err := m.Records(make([]Record, 3))
	m.Dump(&Dump{})
	m.Close()
	if err == nil || a.recs != 3 || b.recs != 3 || a.dumps != 1 || b.dumps != 1 || !a.closed || !b.closed {
		t.Errorf("multi: err %v, a %+v, b %+v", err, a, b)
	}
}

type countSink struct {
	recs, dumps int
	closed      bool
	fail        bool
}

func (c *countSink) Records(r []Record) error {
	c.recs += len(r)
	if c.fail {
		return os.ErrClosed
	}
	return nil
}
func (c *countSink) Dump(*Dump) error { c.dumps++; return nil }
func (c *countSink) Close() error     { c.closed = true; return nil }
