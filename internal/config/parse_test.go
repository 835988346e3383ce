package config

import (
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

const fullProfile = `version: 1
name: latency-per-collective
output:
  dump_dir: /tmp/out
  dump_interval: 250ms
  ring_capacity: 4096
hooks:
  - name: lat
    when: phase == STOP && func startsWith "AllReduce"
    sample: 1/8
    let:
      - {name: dur_us, expr: "duration / 1000"}
      - {name: slow, expr: dur_us > 100.0}
      - {name: cyc, expr: 'bitshr(clock, 4)'}
    fields:
      - timestamp
      - {field: funcId, as: fn, type: u16}
      - dur_us
      - slow
      - {field: cyc, type: u32}
    buffer:
      slots: 1024
      overflow: overwrite_oldest
    aggregate:
      - {name: calls, kind: count, by: [channelId, funcId]}
      - {name: total, kind: sum, value: dur_us}
      - {name: worst, kind: max, value: duration, by: [funcId]}
      - {name: latency, kind: histogram, value: duration, by: [funcId]}
      - {name: sizes, kind: histogram, value: duration, buckets: {bounds: [1000, 10000]}}
  - name: off
    enabled: false
    fields: [smid]
`

// comparable returns a copy of p without the parts that cannot be written
// down in a test literal: expression trees, the nodes predicates replace.
func comparable(p *Profile) *Profile {
	q := *p
	q.Hooks = nil
	strip := func(x *Expr) *Expr {
		if x == nil {
			return nil
		}
		y := *x
		y.Tree, y.src = nil, nil
		y.FuncPreds = nil
		for _, fp := range x.FuncPreds {
			f := *fp
			f.Node, f.re = nil, nil
			y.FuncPreds = append(y.FuncPreds, &f)
		}
		return &y
	}
	for _, h := range p.Hooks {
		g := *h
		g.When = strip(h.When)
		g.Lets, g.Aggregates = nil, nil
		for _, l := range h.Lets {
			m := *l
			m.Expr = strip(l.Expr)
			g.Lets = append(g.Lets, &m)
		}
		for _, a := range h.Aggregates {
			b := *a
			b.Value = strip(a.Value)
			g.Aggregates = append(g.Aggregates, &b)
		}
		q.Hooks = append(q.Hooks, &g)
	}
	return &q
}

func TestParseFullProfile(t *testing.T) {
	p, err := Parse("full.yaml", []byte(fullProfile))
	if err != nil {
		t.Fatal(err)
	}
	at := func(line, col int) Pos { return Pos{File: "full.yaml", Line: line, Col: col} }
	x := func(src string, typ Type, pos Pos) *Expr { return &Expr{Source: src, Pos: pos, Type: typ} }
	when := x(`phase == STOP && func startsWith "AllReduce"`, Bool, at(9, 11))
	when.FuncPreds = []*FuncPred{{Op: FuncStartsWith, Patterns: []string{"AllReduce"}, Pos: at(9, 28)}}
	want := &Profile{
		File:    "full.yaml",
		Hash:    fmt.Sprintf("%x", sha256.Sum256([]byte(fullProfile))), // the profile's bytes: it includes nothing
		Version: 1,
		Name:    "latency-per-collective",
		Pos:     at(1, 1),
		Output:  Output{DumpDir: "/tmp/out", DumpInterval: 250 * time.Millisecond, RingCapacity: 4096, Pos: at(4, 3)},
		Hooks: []*Hook{
			{
				Name:    "lat",
				Enabled: true,
				When:    when,
				Sample:  8,
				Lets: []*Let{
					{Name: "dur_us", Expr: x("duration / 1000", F64, at(12, 31)), Pos: at(12, 9)},
					{Name: "slow", Expr: x("dur_us > 100.0", Bool, at(13, 28)), Pos: at(13, 9)},
					{Name: "cyc", Expr: x("bitshr(clock, 4)", I64, at(14, 28)), Pos: at(14, 9)},
				},
				Fields: []*Field{
					{Name: "timestamp", Source: "timestamp", Type: U64, Pos: at(16, 9)},
					{Name: "fn", Source: "funcId", Type: U16, Pos: at(17, 9)},
					{Name: "dur_us", Source: "dur_us", Type: F64, Pos: at(18, 9)},
					{Name: "slow", Source: "slow", Type: Bool, Pos: at(19, 9)},
					{Name: "cyc", Source: "cyc", Type: U32, Pos: at(20, 9)},
				},
				Buffer: Buffer{Slots: 1024, Overflow: OverwriteOldest, Positions: PositionsShared, Pos: at(22, 7), PositionsPos: at(22, 7)},
				Aggregates: []*Aggregate{
					{Name: "calls", Kind: AggCount, By: []string{"funcId", "channelId"}, Pos: at(25, 9)},
					{Name: "total", Kind: AggSum, Value: x("dur_us", F64, at(26, 41)), Pos: at(26, 9)},
					{Name: "worst", Kind: AggMax, Value: x("duration", I64, at(27, 41)), By: []string{"funcId"}, Pos: at(27, 9)},
					{Name: "latency", Kind: AggHistogram, Value: x("duration", I64, at(28, 49)), By: []string{"funcId"}, Buckets: Buckets{Log2: true}, Pos: at(28, 9)},
					{Name: "sizes", Kind: AggHistogram, Value: x("duration", I64, at(29, 47)), Buckets: Buckets{Bounds: []uint64{1000, 10000}}, Pos: at(29, 9)},
				},
				Pos:     at(8, 5),
				NamePos: at(8, 11),
			},
			{
				Name:    "off",
				Enabled: false,
				Sample:  1,
				Fields:  []*Field{{Name: "smid", Source: "smid", Type: U32, Pos: at(32, 14)}},
				Buffer:  Buffer{Slots: DefaultSlots, Overflow: DropNewest, Positions: PositionsShared, Pos: at(30, 5), PositionsPos: at(30, 5)},
				Pos:     at(30, 5),
				NamePos: at(30, 11),
			},
		},
	}
	got := comparable(p)
	if !reflect.DeepEqual(got, want) {
		for i := range min(len(got.Hooks), len(want.Hooks)) {
			diffHook(t, got.Hooks[i], want.Hooks[i])
		}
		got.Hooks, want.Hooks = nil, nil
		if !reflect.DeepEqual(got, want) {
			t.Errorf("profile:\n got %+v\nwant %+v", got, want)
		}
	}
	if hs := p.EnabledHooks(); len(hs) != 1 || hs[0].Name != "lat" {
		t.Errorf("EnabledHooks = %v, want just lat", hs)
	}
	if fp := p.Hooks[0].When.FuncPreds[0]; fp.Node == nil || fp.re != nil {
		t.Errorf("startsWith predicate: Node %v, re %v; want a node and no regexp", fp.Node, fp.re)
	}
}

// diffHook reports the parts of two hooks that differ, one by one.
func diffHook(t *testing.T, got, want *Hook) {
	t.Helper()
	g, w := reflect.ValueOf(*got), reflect.ValueOf(*want)
	for i := range g.NumField() {
		if !reflect.DeepEqual(g.Field(i).Interface(), w.Field(i).Interface()) {
			t.Errorf("hook %s: %s:\n got %s\nwant %s", want.Name, g.Type().Field(i).Name, dump(g.Field(i)), dump(w.Field(i)))
		}
	}
}

func dump(v reflect.Value) string {
	b, err := json.Marshal(v.Interface())
	if err != nil {
		return err.Error()
	}
	return string(b)
}

func TestParseDefaults(t *testing.T) {
	p, err := Parse("min.yaml", []byte("version: 1\nname: m\nhooks:\n  - name: h\n    fields: [phase]\n"))
	if err != nil {
		t.Fatal(err)
	}
	if p.Output.DumpDir != "ncclhooks-out" || p.Output.DumpInterval != time.Second || p.Output.RingCapacity != 65536 {
		t.Errorf("output defaults = %+v", p.Output)
	}
	h := p.Hooks[0]
	if !h.Enabled || h.When != nil || h.Sample != 1 || h.Buffer.Slots != 4096 || h.Buffer.Overflow != DropNewest {
		t.Errorf("hook defaults = %+v", h)
	}
	if len(h.Fields) != 1 || h.Fields[0].Type != U8 {
		t.Errorf("fields = %+v, want phase as u8", h.Fields)
	}
}

func TestAggregateCells(t *testing.T) {
	tests := []struct {
		a          Aggregate
		keys, rows int
	}{
		{Aggregate{Kind: AggCount}, 1, 1},
		{Aggregate{Kind: AggSum, By: []string{"funcId"}}, MaxFuncIDs + 1, 2},
		{Aggregate{Kind: AggMin, By: []string{"channelId"}}, MaxChannels + 1, 2},
		{Aggregate{Kind: AggHistogram, By: []string{"funcId", "channelId"}, Buckets: Buckets{Log2: true}}, (MaxFuncIDs + 1) * (MaxChannels + 1), 2 + Log2Buckets},
		{Aggregate{Kind: AggHistogram, Buckets: Buckets{Bounds: []uint64{1, 2, 3}}}, 1, 2 + 4},
	}
	for _, tt := range tests {
		if k, r := tt.a.Keys(), tt.a.RowWords(); k != tt.keys || r != tt.rows {
			t.Errorf("%s by %v: Keys, RowWords = %d, %d; want %d, %d", tt.a.Kind, tt.a.By, k, r, tt.keys, tt.rows)
		}
	}
}

// writeFiles writes name -> content under a new temporary directory.
func writeFiles(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, content := range files {
		path := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func hookNames(p *Profile) []string {
	var names []string
	for _, h := range p.Hooks {
		names = append(names, h.Name)
	}
	return names
}

func TestIncludeOrder(t *testing.T) {
	dir := writeFiles(t, map[string]string{
		"main.yaml":       "version: 1\nname: main\ninclude: [common.yaml, sub/other.yaml]\nhooks:\n  - {name: m, fields: [phase]}\n",
		"common.yaml":     "version: 1\nname: common\nhooks:\n  - {name: a, fields: [phase]}\n  - {name: b, fields: [phase]}\n",
		"sub/other.yaml":  "version: 1\nname: other\ninclude: [nested.yaml]\nhooks:\n  - {name: o, fields: [phase]}\n",
		"sub/nested.yaml": "version: 1\nname: nested\nhooks:\n  - {name: n, fields: [phase]}\n",
	})
	p, err := Load(filepath.Join(dir, "main.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if got, want := hookNames(p), []string{"a", "b", "n", "o", "m"}; !reflect.DeepEqual(got, want) {
		t.Errorf("hooks = %v, want %v", got, want)
	}
	if got, want := p.Hooks[2].Pos.File, filepath.Join(dir, "sub", "nested.yaml"); got != want {
		t.Errorf("included hook position names %q, want %q", got, want)
	}
	if p.Name != "main" {
		t.Errorf("name = %q, want the top-level profile's", p.Name)
	}
}

// TestIncludeOnlyProfile: a profile may consist of includes alone.
func TestIncludeOnlyProfile(t *testing.T) {
	dir := writeFiles(t, map[string]string{
		"main.yaml":   "version: 1\nname: main\ninclude: [common.yaml]\n",
		"common.yaml": "version: 1\nname: common\nhooks:\n  - {name: a, fields: [phase]}\n",
	})
	p, err := Load(filepath.Join(dir, "main.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if got := hookNames(p); !reflect.DeepEqual(got, []string{"a"}) {
		t.Errorf("hooks = %v, want [a]", got)
	}
}

func TestIncludeErrors(t *testing.T) {
	tests := []struct {
		name  string
		files map[string]string
		want  []string // "file:line:col: message" with file relative to the directory
	}{
		{"cycle", map[string]string{
			"a.yaml": "version: 1\nname: a\ninclude: [b.yaml]\nhooks:\n  - {name: a, fields: [phase]}\n",
			"b.yaml": "version: 1\nname: b\ninclude: [a.yaml]\nhooks:\n  - {name: b, fields: [phase]}\n",
		}, []string{"b.yaml:3:11: include cycle: a.yaml -> b.yaml -> a.yaml; remove one of these includes"}},
		{"self include", map[string]string{
			"a.yaml": "version: 1\nname: a\ninclude:\n  - a.yaml\nhooks:\n  - {name: a, fields: [phase]}\n",
		}, []string{"a.yaml:4:5: include cycle: a.yaml -> a.yaml; remove one of these includes"}},
		{"missing file", map[string]string{
			"a.yaml": "version: 1\nname: a\ninclude: [nope.yaml]\nhooks:\n  - {name: a, fields: [phase]}\n",
		}, []string{`a.yaml:3:11: cannot read include "nope.yaml": open nope.yaml: no such file or directory`}},
		{"output in an include", map[string]string{
			"a.yaml": "version: 1\nname: a\ninclude: [b.yaml]\n",
			"b.yaml": "version: 1\nname: b\noutput: {dump_dir: x}\nhooks:\n  - {name: b, fields: [phase]}\n",
		}, []string{"b.yaml:3:1: an included profile cannot have an output section: output belongs to the top-level profile; move it there"}},
		{"duplicate hook across files", map[string]string{
			"a.yaml": "version: 1\nname: a\ninclude: [b.yaml]\nhooks:\n  - {name: h, fields: [phase]}\n",
			"b.yaml": "version: 1\nname: b\nhooks:\n  - {name: h, fields: [phase]}\n",
		}, []string{`a.yaml:5:12: duplicate hook name "h" (first defined at b.yaml:4:12); hook names must be unique across the profile and its includes`}},
		{"problems in both files", map[string]string{
			"a.yaml": "version: 1\nname: a\ninclude: [b.yaml]\nhooks:\n  - {name: h, fields: [nope]}\n",
			"b.yaml": "version: 1\nname: b\nhooks:\n  - {name: g, when: 'phase ** 2 > 1', fields: [phase]}\n",
		}, []string{
			`a.yaml:5:24: unknown field "nope"; known: ` + knownFields,
			"b.yaml:4:28: exponent (**) is not supported on the device; multiply, or use bitshl for powers of two",
		}},
		{"includes doubling per level", doublingIncludes(8), []string{
			"h.yaml:3:19: this include is the profile's 65th; at most 64 include files may be read in all (one included twice counts twice): include each file once"}},
		{"includes over the size limit", map[string]string{
			"a.yaml": "version: 1\nname: a\ninclude: [b.yaml, c.yaml]\nhooks:\n  - {name: h, fields: [phase]}\n",
			"b.yaml": "version: 1\nname: b\ninclude: []\n#" + strings.Repeat("x", MaxProfileBytes/2) + "\n",
			"c.yaml": "version: 1\nname: c\ninclude: []\n#" + strings.Repeat("x", MaxProfileBytes/2) + "\n",
		}, []string{`a.yaml:3:19: with include "c.yaml" the profile reaches 1048725 bytes: a profile may have at most 1048576 (1024 KiB) with its includes; ` + sizeAdvice}},
		{"include is not a list", map[string]string{
			"a.yaml": "version: 1\nname: a\ninclude: b.yaml\nhooks:\n  - {name: h, fields: [phase]}\n",
		}, []string{`a.yaml:3:10: include must be a list of profile files ([common.yaml]); got "b.yaml"`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := writeFiles(t, tt.files)
			_, err := Load(filepath.Join(dir, "a.yaml"))
			var list ErrorList
			if !errors.As(err, &list) {
				t.Fatalf("Load error = %v, want an ErrorList", err)
			}
			got := strings.ReplaceAll(err.Error(), dir+string(filepath.Separator), "")
			if want := strings.Join(tt.want, "\n"); got != want {
				t.Errorf("errors:\n%s\nwant:\n%s", got, want)
			}
		})
	}
}

// doublingIncludes returns files a.yaml, b.yaml, ... of which each includes
// the next twice: 2^levels reads without a limit.
func doublingIncludes(levels int) map[string]string {
	files := map[string]string{"a.yaml": "version: 1\nname: a\ninclude: [b.yaml, b.yaml]\nhooks:\n  - {name: h, fields: [phase]}\n"}
	for i := 1; i < levels; i++ {
		name, next := string(rune('a'+i)), string(rune('a'+i+1))
		files[name+".yaml"] = fmt.Sprintf("version: 1\nname: %s\ninclude: [%s.yaml, %s.yaml]\n", name, next, next)
	}
	files[string(rune('a'+levels))+".yaml"] = "version: 1\nname: leaf\ninclude: []\n"
	return files
}

func TestLoadMissingFile(t *testing.T) {
	_, err := Load(filepath.Join(t.TempDir(), "none.yaml"))
	if !errors.Is(err, os.ErrNotExist) {
		t.Errorf("Load of a missing file: %v, want an error wrapping os.ErrNotExist", err)
	}
}

// TestExampleAllEvents: the demo profile records every event with the five
// event fields, in order, and the communicator index, into a 65536-slot
// drop_newest buffer (3 ms of slack for the drain at 20M events/s).
func TestExampleAllEvents(t *testing.T) {
	p, err := Load("../../examples/all-events.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Hooks) != 1 {
		t.Fatalf("hooks = %v, want one", hookNames(p))
	}
	h := p.Hooks[0]
	if h.When != nil || h.Sample != 1 || !h.Enabled {
		t.Errorf("hook filters events: when %v, sample 1/%d, enabled %v", h.When, h.Sample, h.Enabled)
	}
	var names []string
	for _, f := range h.Fields {
		names = append(names, f.Name)
		if f.Source == "comm" {
			if f.Type != U8 {
				t.Errorf("field comm stored as %s, want u8", f.Type)
			}
			continue
		}
		if e, ok := Lookup(f.Source); !ok || e.Kind != KindEvent || f.Type != e.Type {
			t.Errorf("field %s: source %s of type %s, want an event field at its own type", f.Name, f.Source, f.Type)
		}
	}
	if want := []string{"timestamp", "workCounter", "funcId", "channelId", "phase", "comm"}; !reflect.DeepEqual(names, want) {
		t.Errorf("fields = %v, want %v", names, want)
	}
	if h.Buffer.Slots != 65536 || h.Buffer.Overflow != DropNewest {
		t.Errorf("buffer = %+v, want 65536 slots, drop_newest", h.Buffer)
	}
}
