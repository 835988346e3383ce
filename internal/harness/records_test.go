package harness

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/ncclhooks/ncclhooks/internal/abi"
	"github.com/ncclhooks/ncclhooks/internal/config"
)

// Where every communicator counts from 1 (profiles with work positions),
// the same (channel, workCounter, phase) was emitted once per communicator:
// a record is traced to the one its comm field names, or, without one, to
// the one whose fields it holds. Each is recorded once; a record whose
// fields no such event holds, or a second record of one, is a problem.
func TestRecordsTracedAmongCommunicators(t *testing.T) {
	ev := func(comm int, ts uint64, fn uint32) Event {
		return Event{DevEvent: abi.DevEvent{Timestamp: ts, WorkCounter: 1, FuncID: fn, ChannelID: 3, Phase: 0}, Comm: comm}
	}
	evs := []Event{ev(0, 100, 7), ev(1, 200, 8), ev(2, 300, 9)}
	rec := func(ts, fn uint64, comm int) map[string]json.RawMessage {
		name, _ := json.Marshal(FuncName(uint32(fn)))
		r := map[string]json.RawMessage{"seq": json.RawMessage("2"), "ts": raw(ts), "wc": raw(1), "fn": raw(fn), "ch": raw(3), "ph": raw(0), "func": name}
		if comm >= 0 {
			r["comm"] = raw(uint64(comm))
		}
		return r
	}
	hook := func(withComm bool) *config.Hook {
		h := &config.Hook{Name: "all", Fields: []*config.Field{
			{Name: "ts", Source: "timestamp", Type: config.U64}, {Name: "wc", Source: "workCounter", Type: config.U64},
			{Name: "fn", Source: "funcId", Type: config.U32}, {Name: "ch", Source: "channelId", Type: config.U8},
			{Name: "ph", Source: "phase", Type: config.U8}}}
		if withComm {
			h.Fields = append(h.Fields, &config.Field{Name: "comm", Source: "comm", Type: config.U8})
		}
		return h
	}
	for _, tt := range []struct {
		name     string
		withComm bool
		recs     []map[string]json.RawMessage
		problems []string // substrings, each in some problem
	}{
		{"by comm", true, []map[string]json.RawMessage{rec(300, 9, 2), rec(100, 7, 0), rec(200, 8, 1)}, nil},
		{"by fields", false, []map[string]json.RawMessage{rec(200, 8, -1), rec(300, 9, -1), rec(100, 7, -1)}, nil},
		{"comm names the wrong event", true, []map[string]json.RawMessage{rec(300, 9, 1)}, []string{"ts = 300, emitted 200"}},
		{"a second record", false, []map[string]json.RawMessage{rec(200, 8, -1), rec(200, 8, -1)}, []string{"a second record of channel 3 workCounter 1 phase 0"}},
		{"fields of no event", false, []map[string]json.RawMessage{rec(250, 8, -1)}, []string{"ts = 250, emitted 100"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			checked, problems := checkRecords(hook(tt.withComm), tt.recs, evs, nil)
			if checked != uint64(len(tt.recs)) {
				t.Errorf("checked %d of %d records", checked, len(tt.recs))
			}
			if len(problems) < len(tt.problems) || (len(tt.problems) == 0 && len(problems) > 0) {
				t.Fatalf("problems %q, want %q", problems, tt.problems)
			}
			// The fields of a record are checked in map order: a
			// wanted problem may be any of them.
			for _, want := range tt.problems {
				if !strings.Contains(strings.Join(problems, "\n"), want) {
					t.Errorf("problems %q, want one to say %q", problems, want)
				}
			}
		})
	}
}

func raw(v uint64) json.RawMessage { return json.RawMessage(fmt.Sprint(v)) }
