package config

import (
	"errors"
	"strings"
	"testing"
)

// header is a valid profile start; a hook follows at line 4.
const header = "version: 1\nname: t\nhooks:\n"

const knownFields = "timestamp, workCounter, funcId, channelId, phase, smid, clock, globaltimer, cudaDev, comm, duration, paired"

const knownNames = "timestamp, workCounter, funcId, channelId, phase, smid, clock, globaltimer, cudaDev, comm, duration, paired, START, STOP"

// TestBrokenProfiles checks, for each broken profile, every message Parse
// reports and its line:col, in order.
func TestBrokenProfiles(t *testing.T) {
	tests := []struct {
		name string
		src  string
		want []string // "line:col: message", sorted by position
	}{
		{"empty file", "",
			[]string{"1:1: the profile is empty: expected a mapping with version, name and hooks"}},
		{"only a comment", "# nothing yet\n",
			[]string{"1:1: the profile is empty: expected a mapping with version, name and hooks"}},
		{"top level is a list", "- version: 1\n",
			[]string{"1:1: a profile must be a mapping with keys version, name, include, output, hooks; got a list"}},
		{"tab indentation", "version: 1\n\tname: t\n",
			[]string{"2:1: invalid YAML: found a tab character that violates indentation"}},
		{"two documents", header + "  - name: h\n    fields: [phase]\n---\nversion: 1\n",
			[]string{"6:1: a profile is one YAML document; remove this second document (or its --- separator)"}},
		{"missing version", "name: t\nhooks:\n  - name: h\n    fields: [phase]\n",
			[]string{`1:1: missing version: add "version: 1"`}},
		{"version 2", "version: 2\nname: t\nhooks:\n  - name: h\n    fields: [phase]\n",
			[]string{"1:10: version must be 1, the only profile version this ncclhooks reads; got 2"}},
		{"version not a number", "version: one\nname: t\nhooks:\n  - name: h\n    fields: [phase]\n",
			[]string{`1:10: version must be an integer: 1; got "one"`}},
		{"missing name", "version: 1\nhooks:\n  - name: h\n    fields: [phase]\n",
			[]string{`1:1: missing name: add a profile name such as "name: my-profile"`}},
		{"bad profile name", "version: 1\nname: a b\nhooks:\n  - name: h\n    fields: [phase]\n",
			[]string{`2:7: profile name "a b" may only use letters, digits, '_', '.' and '-'`}},
		{"duplicate key", "version: 1\nname: t\nname: u\nhooks:\n  - name: h\n    fields: [phase]\n",
			[]string{`3:1: duplicate key "name" in a profile (first at line 2)`}},
		{"unknown top-level key", "version: 1\nname: t\nhook:\n  - name: h\n",
			[]string{
				"1:1: missing hooks: add a list of hooks, each with a name and fields or aggregates",
				`3:1: unknown key "hook" in a profile; allowed: version, name, include, output, hooks`,
			}},
		{"hooks is a mapping", "version: 1\nname: t\nhooks: {}\n",
			[]string{"3:8: hooks must be a list of hooks (- name: ...); got a mapping"}},
		{"hooks is empty", "version: 1\nname: t\nhooks: []\n",
			[]string{"3:8: hooks is empty: add at least one hook"}},
		{"hook without name", header + "  - fields: [phase]\n",
			[]string{`4:5: hook needs a name: add "name: my_hook"`}},
		{"hook name not an identifier", header + "  - name: my-hook\n    fields: [phase]\n",
			[]string{`4:11: hook name "my-hook" must be an identifier (it names generated C code): a letter or '_', then letters, digits or '_'`}},
		{"duplicate hook names", header + "  - name: h\n    fields: [phase]\n  - name: h\n    fields: [phase]\n",
			[]string{`6:5: duplicate hook name "h" (first defined at p.yaml:4:5); hook names must be unique across the profile and its includes`}},
		{"unknown hook key", header + "  - name: h\n    filter: phase == STOP\n    fields: [phase]\n",
			[]string{`5:5: unknown key "filter" in a hook; allowed: name, enabled, when, sample, let, fields, buffer, aggregate`}},
		{"enabled not a bool", header + "  - name: h\n    enabled: maybe\n    fields: [phase]\n",
			[]string{`5:14: enabled must be true or false; got "maybe"`}},
		{"hook records nothing", header + "  - name: h\n    enabled: false\n",
			[]string{`4:5: hook "h" records nothing: add fields, aggregate, or both`}},
		{"slots not a number", header + "  - name: h\n    fields: [phase]\n    buffer: {slots: many}\n",
			[]string{`6:21: buffer.slots must be an integer: a power of two from 16 to 16777216; got "many"`}},
		{"slots not a power of two", header + "  - name: h\n    fields: [phase]\n    buffer:\n      slots: 1000\n",
			[]string{"7:14: buffer.slots 1000 is not a power of two: use a power of two from 16 to 16777216, such as 1024"}},
		{"slots too small", header + "  - name: h\n    fields: [phase]\n    buffer:\n      slots: 8\n",
			[]string{"7:14: buffer.slots 8 is out of range: use a power of two from 16 to 16777216"}},
		{"unknown overflow policy", header + "  - name: h\n    fields: [phase]\n    buffer:\n      overflow: wrap\n",
			[]string{`7:17: buffer.overflow must be drop_newest or overwrite_oldest; got "wrap"`}},
		{"buffer not a mapping", header + "  - name: h\n    fields: [phase]\n    buffer: 4096\n",
			[]string{`6:13: buffer must be a mapping with keys slots, overflow; got "4096"`}},
		{"unknown field", header + "  - name: h\n    fields: [bogus]\n",
			[]string{`5:14: unknown field "bogus"; known: ` + knownFields}},
		{"unknown field lists lets", header + "  - name: h\n    let: [{name: us, expr: duration / 1000}]\n    fields: [u]\n",
			[]string{`6:14: unknown field "u"; known: ` + knownFields + ", us"}},
		{"func as a field", header + "  - name: h\n    fields: [func]\n",
			[]string{"5:14: func is not a field: record funcId, and the JSON lines output adds the function name"}},
		{"fields not a list", header + "  - name: h\n    fields: timestamp\n",
			[]string{`5:13: fields must be a list of field names or {field: NAME, as: OUTNAME, type: TYPE}; got "timestamp"`}},
		{"unstorable field type", header + "  - name: h\n    fields:\n      - {field: phase, type: u128}\n",
			[]string{`6:30: field type "u128" is not storable; use one of u8, u16, u32, u64, i8, i16, i32, i64, f32, f64, bool`}},
		{"bool type for a number", header + "  - name: h\n    fields:\n      - {field: phase, type: bool}\n",
			[]string{"6:30: type bool needs a boolean source; phase is a number"}},
		{"duplicate field name", header + "  - name: h\n    fields: [timestamp, clock, {field: clock, as: timestamp}]\n",
			[]string{`5:32: duplicate field name "timestamp" (first at line 5); rename one with as: NAME`}},
		{"reserved field name", header + "  - name: h\n    fields:\n      - {field: workCounter, as: seq}\n",
			[]string{`6:34: field name "seq" is reserved in record lines (type, hook, device, seq, func); rename it with as: NAME`}},
		{"field rename not an identifier", header + "  - name: h\n    fields:\n      - {field: phase, as: 2x}\n",
			[]string{`6:28: field name "2x" must be an identifier: a letter or '_', then letters, digits or '_'`}},
		{"record too large", header + "  - name: h\n    fields: [timestamp, workCounter, clock, globaltimer, duration,\n      {field: timestamp, as: t2}, {field: clock, as: c2}, {field: duration, as: d2},\n      {field: workCounter, as: w2}]\n",
			[]string{"7:7: the record reaches 72 bytes with this field; at most 64: drop fields or store them narrower (type: u32, u16, u8)"}},
		{"when is an integer", header + "  - name: h\n    when: duration + 1\n    fields: [phase]\n",
			[]string{"5:11: when must be a boolean condition, such as phase == STOP; this expression is an integer"}},
		{"when names an unknown value", header + "  - name: h\n    when: phse == STOP\n    fields: [phase]\n",
			[]string{`5:11: unknown name "phse"; known: ` + knownNames + " (and func, in name predicates)"}},
		{"exponent", header + "  - name: h\n    when: channelId ^ 2 > 4\n    fields: [phase]\n",
			[]string{"5:21: exponent (^) is not supported on the device; multiply, or use bitshl for powers of two"}},
		{"func outside a predicate", header + "  - name: h\n    when: func + 1 > 0\n    fields: [phase]\n",
			[]string{`5:11: ` + funcOnlyInPreds}},
		{"invalid regular expression", header + "  - name: h\n    when: 'func matches \"(All\"'\n    fields: [phase]\n",
			[]string{`5:25: invalid regular expression "(All": missing closing ): "(All"`}},
		{"syntax error", header + "  - name: h\n    when: phase == (STOP\n    fields: [phase]\n",
			[]string{"5:25: syntax error: unexpected end of expression"}},
		{"type mismatch", header + "  - name: h\n    when: paired == 1\n    fields: [phase]\n",
			[]string{"5:18: invalid operation: == (mismatched types bool and int)"}},
		{"unsupported function", header + "  - name: h\n    when: len(phase) > 0\n    fields: [phase]\n",
			[]string{"5:11: function len is not supported on the device; use abs, min, max, bitand, bitor, bitxor, bitnand, bitnot, bitshl, bitshr, bitushr"}},
		{"max of three", header + "  - name: h\n    let: [{name: m, expr: 'max(smid, clock, 1)'}]\n    fields: [m]\n",
			[]string{"5:28: max takes exactly 2 arguments on the device; got 3: nest calls, as in max(a, max(b, c))"}},
		{"string literal outside a predicate", header + "  - name: h\n    when: 'phase == \"STOP\"'\n    fields: [phase]\n",
			[]string{`5:21: string literals are only allowed on the right of a name predicate (func startsWith "s")`}},
		{"in over numbers", header + "  - name: h\n    when: phase in [0, 1]\n    fields: [phase]\n",
			[]string{"5:17: operator in only applies to the function name, as in func in ...; compare numbers with == and ||"}},
		{"mixed ternary", header + "  - name: h\n    let: [{name: x, expr: 'paired ? 1 : 2.5'}]\n    fields: [x]\n",
			[]string{"5:41: both branches of a conditional must have the same type; got an integer and a float (write 0.0 for a float zero, or multiply by 1.0)"}},
		{"empty expression", header + "  - name: h\n    when: ''\n    fields: [phase]\n",
			[]string{"5:11: empty expression"}},
		{"when without expression", header + "  - name: h\n    when:\n    fields: [phase]\n",
			[]string{"5:10: when must be an expression; got nothing"}},
		{"sample not 1/N", header + "  - name: h\n    sample: 2/3\n    fields: [phase]\n",
			[]string{`5:13: sample must be "1/N" with N a whole number from 1 to 4294967295 (keeps work items whose workCounter is a multiple of N); got "2/3"`}},
		{"sample of zero", header + "  - name: h\n    sample: 1/0\n    fields: [phase]\n",
			[]string{`5:13: sample must be "1/N" with N a whole number from 1 to 4294967295 (keeps work items whose workCounter is a multiple of N); got "1/0"`}},
		{"let shadows the catalogue", header + "  - name: h\n    let: [{name: phase, expr: '1'}]\n    fields: [phase]\n",
			[]string{`5:18: let name "phase" shadows the catalogue field phase; choose another name`}},
		{"let named like a keyword", header + "  - name: h\n    let: [{name: matches, expr: '1'}]\n    fields: [phase]\n",
			[]string{`5:18: let name "matches" is an expression keyword; choose another name`}},
		{"let uses a later let", header + "  - name: h\n    let:\n      - {name: a, expr: b + 1}\n      - {name: b, expr: '2'}\n    fields: [a]\n",
			[]string{"6:25: cannot use b here: a let can only use lets defined before it"}},
		{"when uses a let", header + "  - name: h\n    when: us > 5\n    let: [{name: us, expr: duration / 1000}]\n    fields: [us]\n",
			[]string{"5:11: cannot use us here: when is tested before lets are computed; repeat the expression in when"}},
		{"broken let is reported once", header + "  - name: h\n    let:\n      - {name: a, expr: nope}\n      - {name: b, expr: a * 2}\n    fields: [b]\n",
			[]string{`6:25: unknown name "nope"; known: ` + knownNames + " (and func, in name predicates)"}},
		{"unknown aggregate kind", header + "  - name: h\n    aggregate: [{name: a, kind: avg, value: duration}]\n",
			[]string{`5:33: aggregate kind must be one of count, sum, min, max, histogram; got "avg"`}},
		{"count with a value", header + "  - name: h\n    aggregate: [{name: a, kind: count, value: duration}]\n",
			[]string{"5:40: a count aggregate takes no value (it counts matching events); remove value, or use kind sum"}},
		{"sum without a value", header + "  - name: h\n    aggregate: [{name: a, kind: sum}]\n",
			[]string{`5:17: a sum aggregate needs a value expression, such as "value: duration"`}},
		{"sum of a boolean", header + "  - name: h\n    aggregate: [{name: a, kind: sum, value: paired}]\n",
			[]string{"5:45: a sum aggregate needs a number; this expression is a boolean"}},
		{"histogram of a float", header + "  - name: h\n    aggregate: [{name: a, kind: histogram, value: duration / 1000}]\n",
			[]string{"5:51: histogram values must be integers; this expression is a float (/ always divides as float)"}},
		{"unbounded key", header + "  - name: h\n    aggregate: [{name: a, kind: count, by: [funcId, smid]}]\n",
			[]string{`5:53: aggregates can only be keyed by funcId and channelId (bounded keys); got "smid"`}},
		{"key listed twice", header + "  - name: h\n    aggregate: [{name: a, kind: count, by: [funcId, funcId]}]\n",
			[]string{"5:53: funcId is listed twice in by"}},
		{"buckets on a sum", header + "  - name: h\n    aggregate: [{name: a, kind: sum, value: duration, buckets: log2}]\n",
			[]string{"5:55: buckets only apply to kind histogram; remove buckets"}},
		{"bounds not ascending", header + "  - name: h\n    aggregate:\n      - {name: a, kind: histogram, value: duration, buckets: {bounds: [10, 1000, 100]}}\n",
			[]string{"6:82: buckets.bounds must be strictly ascending: 100 follows 1000"}},
		{"negative bound", header + "  - name: h\n    aggregate:\n      - {name: a, kind: histogram, value: duration, buckets: {bounds: [-1]}}\n",
			[]string{`6:72: bucket bound must be a whole number >= 0; got "-1"`}},
		{"duplicate aggregate name", header + "  - name: h\n    aggregate:\n      - {name: a, kind: count}\n      - {name: a, kind: count}\n",
			[]string{`7:9: duplicate aggregate name "a" (first at line 6)`}},
		{"aggregate budget", header + "  - name: h\n    aggregate:\n      - {name: a, kind: histogram, value: duration, by: [funcId, channelId]}\n",
			[]string{"6:9: aggregates need 4463875 cells in all with this one (66625 keys x 67 words); at most 1048576: key fewer aggregates by both funcId and channelId, or use fewer histogram bounds"}},
		{"dump interval not a duration", "version: 1\nname: t\noutput:\n  dump_interval: fast\nhooks:\n  - name: h\n    fields: [phase]\n",
			[]string{`4:18: output.dump_interval must be a duration from 10ms to 1h0m0s, such as 500ms or 2s; got "fast"`}},
		{"dump interval too short", "version: 1\nname: t\noutput:\n  dump_interval: 1ms\nhooks:\n  - name: h\n    fields: [phase]\n",
			[]string{"4:18: output.dump_interval 1ms is out of range: use a duration from 10ms to 1h0m0s, such as 500ms or 2s"}},
		{"ring capacity not a power of two", "version: 1\nname: t\noutput:\n  ring_capacity: 3000\nhooks:\n  - name: h\n    fields: [phase]\n",
			[]string{"4:18: output.ring_capacity 3000 is not a power of two: use a power of two from 1024 to 16777216, such as 4096"}},
		{"unknown output key", "version: 1\nname: t\noutput:\n  dir: out\nhooks:\n  - name: h\n    fields: [phase]\n",
			[]string{`4:3: unknown key "dir" in output; allowed: dump_dir, dump_interval, ring_capacity`}},
		{"several problems at once", header + "  - name: h\n    when: phse == 1\n    fields: [bogus]\n    buffer: {slots: 100}\n",
			[]string{
				`5:11: unknown name "phse"; known: ` + knownNames + " (and func, in name predicates)",
				`6:14: unknown field "bogus"; known: ` + knownFields,
				"7:21: buffer.slots 100 is not a power of two: use a power of two from 16 to 16777216, such as 128",
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := Parse("p.yaml", []byte(tt.src))
			if err == nil {
				t.Fatalf("Parse accepted a broken profile: %+v", p)
			}
			var list ErrorList
			if !errors.As(err, &list) {
				t.Fatalf("error is %T, want ErrorList: %v", err, err)
			}
			var got []string
			for _, e := range list {
				if e.Pos.File != "p.yaml" {
					t.Errorf("error names file %q, want p.yaml: %v", e.Pos.File, e)
				}
				got = append(got, strings.TrimPrefix(e.Error(), "p.yaml:"))
			}
			if strings.Join(got, "\n") != strings.Join(tt.want, "\n") {
				t.Errorf("errors:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(tt.want, "\n"))
			}
			if err.Error() != "p.yaml:"+strings.Join(got, "\np.yaml:") {
				t.Errorf("Error() = %q, not the list joined by lines", err.Error())
			}
		})
	}
}
