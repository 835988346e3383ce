package config

import (
	"errors"
	"strings"
	"testing"
)

// A hook with positions: work is accepted when it records every event from
// the event's own values and comm, overwriting the oldest records, and every
// other rule is refused at its place with what to do.
func TestWorkPositions(t *testing.T) {
	const good = "  - name: all\n    fields: [timestamp, workCounter, funcId, channelId, phase, comm, smid]\n" +
		"    buffer: {slots: 65536, overflow: overwrite_oldest, positions: work}\n"
	p, err := Parse("p.yaml", []byte(header+good))
	if err != nil {
		t.Fatal(err)
	}
	if b := p.Hooks[0].Buffer; b.Positions != PositionsWork || b.PositionsPos.Line != 6 || b.PositionsPos.Col != 67 {
		t.Fatalf("buffer %+v, want work positions given at 6:67", b)
	}
	if p.Hooks[0].DrainAggregates() {
		t.Error("a hook with fields and no aggregates is aggregated by the drain")
	}
	const drained = "  - name: lat\n    aggregate:\n      - {name: d, kind: histogram, value: duration, by: [funcId], buckets: log2}\n      - {name: n, kind: count, by: [channelId, comm]}\n" +
		"    buffer: {slots: 65536, overflow: overwrite_oldest, positions: work}\n"
	if p, err := Parse("p.yaml", []byte(header+drained)); err != nil || !p.Hooks[0].DrainAggregates() {
		t.Fatalf("aggregates of a hook with work positions: %v, want accepted and computed by the drain", err)
	}
	// drop_newest is the drain's to apply: the device reads no limit.
	const newest = "  - name: h\n    fields: [phase]\n    buffer: {slots: 1024, overflow: drop_newest, positions: work}\n"
	if p, err := Parse("p.yaml", []byte(header+newest)); err != nil || p.Hooks[0].Buffer.Overflow != DropNewest {
		t.Fatalf("drop_newest with work positions: %v, want accepted", err)
	}
	if p, err := Parse("p.yaml", []byte(header+"  - {name: h, fields: [phase]}\n")); err != nil || p.Hooks[0].Buffer.Positions != PositionsShared {
		t.Fatalf("default positions: %v, %v", err, p)
	}
	for _, tt := range []struct {
		name, src string
		want      []string
	}{
		{"too few slots",
			"  - name: h\n    fields: [phase]\n    buffer: {slots: 512, overflow: overwrite_oldest, positions: work}\n",
			[]string{`6:65: hook "h": positions: work splits buffer.slots over NCCL's 64 channels: give at least 1024 slots, not 512`}},
		{"when",
			"  - name: h\n    when: phase == STOP\n    fields: [phase]\n    buffer: {slots: 1024, overflow: overwrite_oldest, positions: work}\n",
			[]string{`5:11: hook "h": positions: work records every event, and a when would leave positions unwritten (a region lapped before the drain read it cannot say which of its lost positions matched): record every event and filter in the report, or use positions: shared`}},
		{"sample",
			"  - name: h\n    sample: 1/8\n    fields: [phase]\n    buffer: {slots: 1024, overflow: overwrite_oldest, positions: work}\n",
			[]string{`4:5: hook "h": positions: work records every event, and sample would leave positions unwritten: use positions: shared`}},
		{"no fields and no aggregate",
			"  - name: h\n    buffer: {slots: 1024, overflow: overwrite_oldest, positions: work}\n",
			[]string{`4:5: hook "h" records nothing: add fields, aggregate, or both`}},
		{"fields and aggregates",
			"  - name: h\n    fields: [phase]\n    aggregate: [{name: n, kind: count}]\n    buffer: {slots: 1024, overflow: overwrite_oldest, positions: work}\n",
			[]string{`6:17: hook "h": with positions: work, a hook records fields or aggregates work items in the drain, not both: make them two hooks`}},
		{"an aggregate of another value",
			"  - name: h\n    aggregate: [{name: d, kind: max, value: duration}, {name: n, kind: sum, value: channelId, by: [funcId]}]\n" +
				"    buffer: {slots: 1024, overflow: overwrite_oldest, positions: work}\n",
			[]string{`5:84: hook "h": aggregate "n": with positions: work the drain aggregates each work item from its START and STOP records, and its value can be duration, or none to count work items; not "channelId" (record the values in a hook of their own, or use positions: shared)`}},
		{"device state through a let and a field",
			"  - name: h\n    let: [{name: d, expr: duration / 2}, {name: x, expr: \"d + 1\"}]\n    fields: [x, cudaDev]\n" +
				"    buffer: {slots: 1024, overflow: overwrite_oldest, positions: work}\n",
			[]string{
				`5:27: hook "h": duration (in let d) is not available with positions: work: pairing keeps each START in device memory and loads it at STOP`,
				`6:17: hook "h": cudaDev (in fields) is not available with positions: work: the device ordinal is in the context block's header, a load`}},
		{"a let no field uses",
			"  - name: h\n    let: [{name: d, expr: duration}]\n    fields: [phase]\n" +
				"    buffer: {slots: 1024, overflow: overwrite_oldest, positions: work}\n",
			[]string{`5:27: hook "h": duration (in let d) is not available with positions: work: pairing keeps each START in device memory and loads it at STOP`}},
		{"a let on a hook the drain aggregates",
			"  - name: h\n    let: [{name: w, expr: workCounter}]\n    aggregate: [{name: n, kind: count}]\n" +
				"    buffer: {slots: 1024, overflow: overwrite_oldest, positions: work}\n",
			[]string{`5:11: hook "h": let w: the drain aggregates this hook's work items from their timestamps alone, and a let would be computed on the device for nothing: remove it`}},
		{"comm in a let",
			"  - name: h\n    let: [{name: c2, expr: comm * 2}]\n    fields: [c2, comm]\n" +
				"    buffer: {slots: 1024, overflow: overwrite_oldest, positions: work}\n",
			[]string{`5:28: hook "h": comm (in let c2): with positions: work the device knows only the communicator's context block, which a later communicator reuses, and the drain writes its index into the comm field: record comm as a field and compute from it in the report`}},
		{"a function-name test",
			"  - name: h\n    let: [{name: ar, expr: 'func startsWith \"AllReduce\"'}]\n    fields: [ar]\n" +
				"    buffer: {slots: 1024, overflow: overwrite_oldest, positions: work}\n",
			[]string{`5:29: hook "h": positions: work cannot test function names (in let ar): the function-id sets are in the context block; record funcId and filter in the report`}},
		{"mixed with a shared hook",
			good + "  - {name: lat, fields: [phase]}\n",
			[]string{`7:5: hook "lat" uses positions: shared, and hook "all" (p.yaml:6:67) positions: work: every enabled hook of a profile must use work positions, or none`}},
		{"not one of the two",
			"  - name: h\n    fields: [phase]\n    buffer: {positions: counter}\n",
			[]string{`6:25: buffer.positions must be shared or work; got "counter"`}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse("p.yaml", []byte(header+tt.src))
			var list ErrorList
			if !errors.As(err, &list) {
				t.Fatalf("Parse: %v, want an ErrorList", err)
			}
			var got []string
			for _, e := range list {
				got = append(got, strings.TrimPrefix(e.Error(), "p.yaml:"))
			}
			if strings.Join(got, "\n") != strings.Join(tt.want, "\n") {
				t.Errorf("errors:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(tt.want, "\n"))
			}
		})
	}
}
