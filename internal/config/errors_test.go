package config

import (
	"errors"
	"fmt"
	"strings"
	"testing"
)

// header is a valid profile start; a hook follows at line 4.
const header = "version: 1\nname: t\nhooks:\n"

const knownFields = "timestamp, workCounter, funcId, channelId, phase, smid, clock, globaltimer, cudaDev, comm, duration, paired"

const knownNames = "timestamp, workCounter, funcId, channelId, phase, smid, clock, globaltimer, cudaDev, comm, duration, paired, START, STOP"

// hooks returns n hook entries h0, h1, ... that each record phase.
func hooks(n int) string {
	var b strings.Builder
	for i := range n {
		fmt.Fprintf(&b, "  - {name: h%d, fields: [phase]}\n", i)
	}
	return b.String()
}

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
			[]string{"2:1: invalid YAML: found a tab character that violates indentation: " + tabHint}},
		// yaml.v3 names the line of the scalar before the tab (4).
		{"tab indenting a hook key", header + "  - name: h\n\tfields: [phase]\n",
			[]string{"5:1: invalid YAML: found a tab character that violates indentation: " + tabHint}},
		{"tab on a line of its own", header + "  - name: h\n    fields: [phase]\n  \t\n",
			[]string{"6:3: invalid YAML: found a tab character that cannot start any token: " + tabHint}},
		{"tab before a list item", header + "  - name: h\n    fields:\n      - phase\n\t  - smid\n",
			[]string{"7:1: invalid YAML: found a tab character that violates indentation: " + tabHint}},
		// yaml.v3 names no line (1:1).
		{"unknown anchor", "version: *v\nname: t\nhooks:\n  - name: h\n    fields: [phase]\n",
			[]string{"1:10: invalid YAML: unknown anchor 'v' referenced: define the anchor (&NAME) before an alias (*NAME) refers to it"}},
		{"alias before its anchor", header + "  - name: h\n    fields: *f\n  - name: g\n    fields: &f [phase]\n",
			[]string{"5:13: invalid YAML: unknown anchor 'f' referenced: define the anchor (&NAME) before an alias (*NAME) refers to it"}},
		// yaml.v3: line 3 (the 0-based line of the mapping's start).
		{"key indented too far", header + "  - name: h\n    fields: [phase]\n     when: paired\n",
			[]string{"6:6: invalid YAML: did not find expected key (while parsing a block mapping at 4:5): check the indentation: keys of one mapping start in the same column"}},
		{"list item among keys", header + "  - name: h\n    fields: [phase]\n    - smid\n",
			[]string{"6:5: invalid YAML: did not find expected key (while parsing a block mapping at 4:5): check the indentation: keys of one mapping start in the same column"}},
		{"key outdented in a list", header + "  - name: h\n    fields: [phase]\n enabled: false\n",
			[]string{"6:2: invalid YAML: did not find expected key (while parsing a block mapping at 1:1): check the indentation: keys of one mapping start in the same column"}},
		{"list item outdented", header + "  - name: h\n    fields:\n      - phase\n     - smid\n",
			[]string{"7:6: invalid YAML: did not find expected key (while parsing a block mapping at 4:5): check the indentation: keys of one mapping start in the same column"}},
		// The file ends inside something left open: its opening is the token.
		{"unclosed list", header + "  - name: h\n    fields: [phase, smid\n",
			[]string{"5:13: invalid YAML: did not find expected ',' or ']' before the end of the file (at 6:1) while parsing a flow sequence that starts here: separate list items with ',' and close the list with ']'"}},
		{"unclosed mapping", header + "  - {name: h, fields: [phase]\n",
			[]string{"4:5: invalid YAML: did not find expected ',' or '}' before the end of the file (at 5:1) while parsing a flow mapping that starts here: separate entries with ',' and close the mapping with '}'"}},
		{"unclosed quote", header + "  - name: h\n    when: \"phase == STOP\n    fields: [phase]\n",
			[]string{"5:11: invalid YAML: the file ends (at 7:1) while scanning a quoted scalar that starts here: close it"}},
		{"mapping value on one line", "version: 1\nname: a: b\n",
			[]string{`2:8: invalid YAML: mapping values are not allowed in this context: check this line's indentation, or quote a value that contains ": "`}},
		{"reserved indicator", "version: 1\nname: t\nhooks: @h\n",
			[]string{"3:8: invalid YAML: found character that cannot start any token: quote a value that starts with this character"}},
		{"unknown escape", "version: 1\nname: \"a\\qb\"\n",
			[]string{`2:9: invalid YAML: found unknown escape character (while parsing a quoted scalar at 2:7): in double quotes, write \\ for a backslash, or use single quotes`}},
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
			[]string{`6:11: duplicate hook name "h" (first defined at p.yaml:4:11); hook names must be unique across the profile and its includes`}},
		{"duplicate hook names in flow style", header + "  - name: h\n    fields: [phase]\n  - {fields: [phase], name: h}\n",
			[]string{`6:29: duplicate hook name "h" (first defined at p.yaml:4:11); hook names must be unique across the profile and its includes`}},
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
			[]string{`6:13: buffer must be a mapping with keys slots, overflow, positions; got "4096"`}},
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
			[]string{`5:51: duplicate field name "timestamp" (first at 5:14); rename one with as: NAME`}},
		{"duplicate plain field", header + "  - name: h\n    fields:\n      - phase\n      - {field: smid}\n      - phase\n",
			[]string{`8:9: duplicate field name "phase" (first at 6:9); rename one with as: NAME`}},
		{"duplicate field by source", header + "  - name: h\n    fields: [smid, {type: u8, field: smid}]\n",
			[]string{`5:38: duplicate field name "smid" (first at 5:14); rename one with as: NAME`}},
		{"duplicate let name", header + "  - name: h\n    let:\n      - {name: a, expr: '1'}\n      - {expr: '2', name: a}\n    fields: [a]\n",
			[]string{`7:27: duplicate let name "a" (first at 6:16)`}},
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
			[]string{`5:53: aggregates can only be keyed by funcId, channelId and comm (bounded keys); got "smid"`}},
		{"key listed twice", header + "  - name: h\n    aggregate: [{name: a, kind: count, by: [funcId, funcId]}]\n",
			[]string{"5:53: funcId is listed twice in by"}},
		{"buckets on a sum", header + "  - name: h\n    aggregate: [{name: a, kind: sum, value: duration, buckets: log2}]\n",
			[]string{"5:55: buckets only apply to kind histogram; remove buckets"}},
		{"bounds not ascending", header + "  - name: h\n    aggregate:\n      - {name: a, kind: histogram, value: duration, buckets: {bounds: [10, 1000, 100]}}\n",
			[]string{"6:82: buckets.bounds must be strictly ascending: 100 follows 1000"}},
		{"negative bound", header + "  - name: h\n    aggregate:\n      - {name: a, kind: histogram, value: duration, buckets: {bounds: [-1]}}\n",
			[]string{`6:72: bucket bound must be a whole number >= 0; got "-1"`}},
		{"duplicate aggregate name", header + "  - name: h\n    aggregate:\n      - {name: a, kind: count}\n      - {name: a, kind: count}\n",
			[]string{`7:16: duplicate aggregate name "a" (first at 6:16)`}},
		{"integer too large for YAML", header + "  - name: h\n    fields: [phase]\n    buffer: {slots: 99999999999999999999}\n",
			[]string{"6:21: buffer.slots 99999999999999999999 is out of range: use a power of two from 16 to 16777216"}},
		{"bucket bound too large", header + "  - name: h\n    aggregate:\n      - {name: a, kind: histogram, value: duration, buckets: {bounds: [1, 18446744073709551616]}}\n",
			[]string{"6:75: bucket bound 18446744073709551616 is out of range: bounds are whole numbers from 0 to 18446744073709551615"}},
		{"integer literal too large", header + "  - name: h\n    when: smid > 99999999999999999999\n    fields: [phase]\n",
			[]string{"5:18: syntax error: integer literal 99999999999999999999 is out of range: integers are 64-bit signed, from -9223372036854775808 to 9223372036854775807"}},
		{"integer literal too large, quoted", header + "  - name: h\n    let: [{name: x, expr: \"1 + 9223372036854775808\"}]\n    fields: [x]\n",
			[]string{"5:32: syntax error: integer literal 9223372036854775808 is out of range: integers are 64-bit signed, from -9223372036854775808 to 9223372036854775807"}},
		{"float literal too large", header + "  - name: h\n    let: [{name: x, expr: 'duration * 1e999'}]\n    fields: [x]\n",
			[]string{"5:39: syntax error: float literal 1e999 is out of range: floats are 64-bit, at most 1.7976931348623157e+308 in magnitude"}},
		{"division by zero", header + "  - name: h\n    let: [{name: x, expr: duration / 0}]\n    fields: [x]\n",
			[]string{"5:36: division by zero: the divisor is always 0 (on the device x / 0 gives an infinity); divide by a value that is not 0"}},
		{"division by a float zero", header + "  - name: h\n    let: [{name: x, expr: duration / -0.0}]\n    fields: [x]\n",
			[]string{"5:36: division by zero: the divisor is always 0 (on the device x / 0 gives an infinity); divide by a value that is not 0"}},
		{"remainder by a folded zero", header + "  - name: h\n    when: workCounter % (STOP - 1) == 0\n    fields: [phase]\n",
			[]string{"5:23: remainder by zero: the divisor is always 0 (on the device x % 0 gives 0); divide by a value that is not 0"}},
		{"remainder by a constant let", header + "  - name: h\n    let:\n      - {name: n, expr: 'bitand(6, 1)'}\n      - {name: r, expr: smid % n}\n    fields: [r]\n",
			[]string{"7:30: remainder by zero: the divisor is always 0 (on the device x % 0 gives 0); divide by a value that is not 0"}},
		{"shift count too large", header + "  - name: h\n    let: [{name: x, expr: 'bitshl(smid, 64)'}]\n    fields: [x]\n",
			[]string{"5:41: shift count 64 is out of range: bitshl shifts a 64-bit integer by 0 to 63 bits"}},
		{"negative shift count", header + "  - name: h\n    when: bitushr(clock, 2 - 3) > 0\n    fields: [phase]\n",
			[]string{"5:26: shift count -1 is out of range: bitushr shifts a 64-bit integer by 0 to 63 bits"}},
		{"folded shift count", header + "  - name: h\n    when: 'bitshr(clock, max(8, 8 * 8)) > 0'\n    fields: [phase]\n",
			[]string{"5:26: shift count 64 is out of range: bitshr shifts a 64-bit integer by 0 to 63 bits"}},
		{"aggregate budget", header + "  - name: h\n    aggregate:\n      - {name: a, kind: histogram, value: duration, by: [funcId, channelId]}\n",
			[]string{"6:9: aggregates need 4463875 cells in all with this one (66625 keys x 67 words); at most 1048576: key fewer aggregates by both funcId and channelId, or use fewer histogram bounds"}},
		// Disabled hooks (lines 4-6) do not count: the 65th enabled one is on line 71.
		{"too many hooks", header + "  - {name: d0, fields: [phase], enabled: false}\n  - {name: d1, fields: [phase], enabled: false}\n  - {name: d2, fields: [phase], enabled: false}\n" + hooks(65),
			[]string{"71:12: this is the profile's enabled hook number 65; at most 64 may be enabled (each runs on every event inside NCCL's kernels): merge hooks, as one hook can record fields and several aggregates, or disable some with enabled: false"}},
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
