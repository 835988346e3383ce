package harness

// records.go checks each record of the output against the event the harness emitted.

import (
	"encoding/json"
	"fmt"

	"github.com/ncclhooks/ncclhooks/internal/config"
)

type eventKey struct {
	channel     uint8
	workCounter uint64
	phase       uint8
}

// checkRecords compares each record's event fields with the event the
// harness emitted at that (channel, workCounter, phase), of the
// communicator the record names where several emitted one (emitterOf).
func checkRecords(h *config.Hook, recs []map[string]json.RawMessage, evs []Event, problems []string) (uint64, []string) {
	rc := &recordCheck{names: map[string]string{}, problems: problems} // names: source -> output name
	for _, f := range h.Fields {
		if e, ok := config.Lookup(f.Source); ok && e.Kind == config.KindEvent && f.Type.Bytes() >= e.Type.Bytes() {
			rc.names[f.Source] = f.Name
		}
	}
	for _, f := range h.Fields {
		if f.Source == "comm" {
			rc.commField = f.Name
		}
	}
	if rc.names["channelId"] == "" || rc.names["workCounter"] == "" || rc.names["phase"] == "" {
		return 0, problems // cannot locate the event of a record
	}
	rc.byKey = make(map[eventKey][]Event, len(evs))
	for _, e := range evs {
		k := eventKey{e.ChannelID, e.WorkCounter, e.Phase}
		rc.byKey[k] = append(rc.byKey[k], e)
	}
	rc.recorded = make(map[emitter]bool, len(recs))
	var checked uint64
	for _, rec := range recs {
		if rc.record(rec) {
			checked++
		}
	}
	if rc.bad > 3 {
		rc.problems = append(rc.problems, fmt.Sprintf("... %d record problems in all", rc.bad))
	}
	return checked, rc.problems
}

// recordCheck is checkRecords' state: where the event fields are in a
// record, the emitted events by key, the keys already recorded, and the
// problems found (the first three spelt out, all counted in bad).
type recordCheck struct {
	names     map[string]string    // event field source -> output name
	commField string               // the output name of a comm field, or ""
	byKey     map[eventKey][]Event // one per communicator that emitted it (counters from 1 repeat)
	recorded  map[emitter]bool
	problems  []string
	bad       int
}

// emitter is an event's key and the communicator that emitted it.
type emitter struct {
	key  eventKey
	comm int
}

// emitterOf picks the event a record traces back to among cands, the
// events emitted at its key: one per communicator where each counts from 1,
// as NCCL's do (profiles with work positions), else one. The record's comm
// field names it; without one, the first not yet recorded whose every event
// field the record holds, else one already recorded that it holds (a second
// record), else the first not yet recorded, else the first.
func (rc *recordCheck) emitterOf(rec map[string]json.RawMessage, cands []Event, get func(string) (uint64, bool)) Event {
	if len(cands) == 1 {
		return cands[0]
	}
	if rc.commField != "" {
		var c int
		if json.Unmarshal(rec[rc.commField], &c) == nil {
			for _, e := range cands {
				if e.Comm == c {
					return e
				}
			}
		}
		return cands[0]
	}
	k := eventKey{cands[0].ChannelID, cands[0].WorkCounter, cands[0].Phase}
	holds := func(e Event) bool {
		for src, v := range eventValues(e) {
			if got, ok := get(src); rc.names[src] != "" && (!ok || got != v) {
				return false
			}
		}
		return true
	}
	for _, e := range cands {
		if !rc.recorded[emitter{k, e.Comm}] && holds(e) {
			return e
		}
	}
	for _, e := range cands {
		if holds(e) { // recorded already: a second record of it
			return e
		}
	}
	for _, e := range cands {
		if !rc.recorded[emitter{k, e.Comm}] {
			return e
		}
	}
	return cands[0]
}

// problem counts a bad record and spells out the first three.
func (rc *recordCheck) problem(format string, args ...any) {
	rc.bad++
	if rc.bad <= 3 {
		rc.problems = append(rc.problems, fmt.Sprintf(format, args...))
	}
}

// record checks one record against the event it names; it returns false
// when the record names no emitted event.
func (rc *recordCheck) record(rec map[string]json.RawMessage) bool {
	names := rc.names
	get := func(src string) (uint64, bool) {
		raw, ok := rec[names[src]]
		if !ok {
			return 0, false
		}
		var v uint64
		return v, json.Unmarshal(raw, &v) == nil
	}
	ch, ok1 := get("channelId")
	wc, ok2 := get("workCounter")
	ph, ok3 := get("phase")
	k := eventKey{uint8(ch), wc, uint8(ph)}
	cands := rc.byKey[k]
	if !ok1 || !ok2 || !ok3 || len(cands) == 0 {
		rc.problem("record seq %s matches no emitted event", rec["seq"])
		return false
	}
	e := rc.emitterOf(rec, cands, get)
	if rc.recorded[emitter{k, e.Comm}] {
		rc.problem("record seq %s: a second record of channel %d workCounter %d phase %d", rec["seq"], ch, wc, ph)
	} else {
		rc.recorded[emitter{k, e.Comm}] = true
	}
	if rc.commField != "" {
		var c int
		if json.Unmarshal(rec[rc.commField], &c) != nil || c != e.Comm {
			rc.problem("record seq %s: %s = %s, but communicator %d emitted it", rec["seq"], rc.commField, rec[rc.commField], e.Comm)
		}
	}
	want := eventValues(e)
	for src, out := range names {
		if v, ok := get(src); !ok || v != want[src] {
			rc.problem("record seq %s: %s = %s, emitted %d", rec["seq"], out, rec[out], want[src])
		}
	}
	if names["funcId"] != "" {
		var fn string
		if json.Unmarshal(rec["func"], &fn) != nil || fn != FuncName(e.FuncID) {
			rc.problem("record seq %s: func %s, want %q", rec["seq"], rec["func"], FuncName(e.FuncID))
		}
	}
	return true
}

// eventValues are e's fields by source name.
func eventValues(e Event) map[string]uint64 {
	return map[string]uint64{"timestamp": e.Timestamp, "workCounter": e.WorkCounter, "funcId": uint64(e.FuncID),
		"channelId": uint64(e.ChannelID), "phase": uint64(e.Phase)}
}
