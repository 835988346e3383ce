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
// harness emitted at that (channel, workCounter, phase).
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
	rc.byKey = make(map[eventKey]Event, len(evs))
	for _, e := range evs {
		rc.byKey[eventKey{e.ChannelID, e.WorkCounter, e.Phase}] = e
	}
	rc.recorded = make(map[eventKey]bool, len(recs))
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
	names     map[string]string // event field source -> output name
	commField string            // the output name of a comm field, or ""
	byKey     map[eventKey]Event
	recorded  map[eventKey]bool
	problems  []string
	bad       int
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
	e, found := rc.byKey[eventKey{uint8(ch), wc, uint8(ph)}]
	if !ok1 || !ok2 || !ok3 || !found {
		rc.problem("record seq %s matches no emitted event", rec["seq"])
		return false
	}
	if k := (eventKey{uint8(ch), wc, uint8(ph)}); rc.recorded[k] {
		rc.problem("record seq %s: a second record of channel %d workCounter %d phase %d", rec["seq"], ch, wc, ph)
	} else {
		rc.recorded[k] = true
	}
	if rc.commField != "" {
		var c int
		if json.Unmarshal(rec[rc.commField], &c) != nil || c != e.Comm {
			rc.problem("record seq %s: %s = %s, but communicator %d emitted it", rec["seq"], rc.commField, rec[rc.commField], e.Comm)
		}
	}
	want := map[string]uint64{"timestamp": e.Timestamp, "workCounter": e.WorkCounter, "funcId": uint64(e.FuncID),
		"channelId": uint64(e.ChannelID), "phase": uint64(e.Phase)}
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
