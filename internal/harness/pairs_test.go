package harness

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/ncclhooks/ncclhooks/internal/config"
	"github.com/ncclhooks/ncclhooks/internal/schema"
)

// A u8 comm field wraps after 256 communicators on a device (a soak makes
// thousands): the same (comm, channel, workCounter) then names several work
// items, and the pair check says it cannot tell them apart instead of
// reporting each as a MISMATCH. Up to 256 it checks.
func TestPairsNotCheckedWhereTheCommFieldWraps(t *testing.T) {
	for _, tc := range []struct {
		typ   config.Type
		comms int
		skip  bool
	}{{config.U8, 256, false}, {config.U8, 257, true}, {config.I8, 129, true}, {"", 5000, false}} {
		prof := &config.Profile{Hooks: []*config.Hook{{Name: "all", Enabled: true, Fields: []*config.Field{
			{Name: "comm", Source: "comm", Type: tc.typ}, {Name: "channelId", Source: "channelId"},
			{Name: "workCounter", Source: "workCounter"}, {Name: "phase", Source: "phase"}}}}}
		out := &output{final: map[statKey]schema.DumpStats{{"all", 0}: {}}, records: map[statKey][]map[string]json.RawMessage{}}
		for c := range tc.comms {
			out.comms = append(out.comms, schema.Comm{Device: 0, Comm: c})
		}
		for ph := range 2 {
			for range 2 { // two work items whose comm indices wrapped to 0
				out.records[statKey{"all", 0}] = append(out.records[statKey{"all", 0}], map[string]json.RawMessage{
					"comm": json.RawMessage("0"), "channelId": json.RawMessage("1"), "workCounter": json.RawMessage("7"), "phase": json.RawMessage([]byte{'0' + byte(ph)})})
			}
		}
		pcs := checkPairs(prof, out)
		if len(pcs) != 1 {
			t.Fatalf("%s, %d comms: %d pair checks", tc.typ, tc.comms, len(pcs))
		}
		pc := pcs[0]
		if skipped := pc.Skipped != ""; skipped != tc.skip {
			t.Errorf("comm %q, %d communicators: skipped %q, want skipped %v", tc.typ, tc.comms, pc.Skipped, tc.skip)
		}
		if !tc.skip && !strings.Contains(strings.Join(pc.Problems, "\n"), "2 START and 2 STOP") {
			t.Errorf("comm %q, %d communicators: checked, want the doubled work item reported: %v", tc.typ, tc.comms, pc.Problems)
		}
	}
}
