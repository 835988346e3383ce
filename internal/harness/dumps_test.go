package harness

import (
	"strings"
	"testing"

	"github.com/ncclhooks/ncclhooks/internal/schema"
)

// dumpsOf makes consistent dump_stats lines from cumulative (records,
// dropped, pending) triples, as the plugin writes them.
func dumpsOf(totals ...[3]uint64) []schema.DumpStats {
	var out []schema.DumpStats
	var prev schema.DumpStats
	for i, t := range totals {
		st := schema.DumpStats{Dump: i + 1, Records: t[0], Dropped: t[1], DroppedRingFull: t[1], Pending: t[2], Matched: t[0] + t[1] + t[2]}
		st.RecordsSinceLastDump, st.DroppedSinceLastDump = st.Records-prev.Records, st.Dropped-prev.Dropped
		out = append(out, st)
		prev = st
	}
	out[len(out)-1].Final = true
	return out
}

// Every dump is checked, not only the final one: each planted fault in an
// intermediate dump is one problem naming that dump, while the final dump
// stays exact.
func TestCheckDumpsFindsAnIntermediateFault(t *testing.T) {
	good := dumpsOf([3]uint64{10, 0, 2}, [3]uint64{20, 1, 0}, [3]uint64{40, 1, 3}, [3]uint64{50, 2, 0})
	if p := checkDumps(good, false, nil); len(p) != 0 {
		t.Fatalf("consistent dumps: %v", p)
	}
	faults := map[string]func(d []schema.DumpStats){
		"records 20 + dropped 1 + pending 0 != matched 22": func(d []schema.DumpStats) { d[1].Matched++ },
		"drops by stage do not add up":                     func(d []schema.DumpStats) { d[1].DroppedRingFull = 0; d[1].DroppedTorn = 2 },
		"totals went down":                                 func(d []schema.DumpStats) { d[2].Records, d[2].Pending = 15, 28 },
		"since the last dump: records 11":                  func(d []schema.DumpStats) { d[1].RecordsSinceLastDump = 11 },
		"dump number 2 follows dump 2":                     func(d []schema.DumpStats) { d[2].Dump = 2 },
	}
	for want, plant := range faults {
		d := dumpsOf([3]uint64{10, 0, 2}, [3]uint64{20, 1, 0}, [3]uint64{40, 1, 3}, [3]uint64{50, 2, 0})
		plant(d)
		p := checkDumps(d, false, nil)
		if len(p) == 0 || !strings.Contains(strings.Join(p, "\n"), want) {
			t.Errorf("planted %q: problems %q", want, p)
		}
	}
	// The drainer numbers its dumps: a hook's first line may come at a
	// later one.
	later := dumpsOf([3]uint64{1, 0, 0}, [3]uint64{2, 0, 0})
	later[0].Dump, later[1].Dump = 13, 14
	if p := checkDumps(later, false, nil); len(p) != 0 {
		t.Errorf("dumps 13, 14: %v", p)
	}
	// A hook that only aggregates reserves no position: its matched is
	// what its aggregates counted, never records + dropped.
	agg := []schema.DumpStats{{Dump: 1, Matched: 7}, {Dump: 2, Matched: 9, Final: true}}
	if p := checkDumps(agg, true, nil); len(p) != 0 {
		t.Errorf("aggregate-only dumps: %v", p)
	}
	agg[1].Matched = 5
	if p := checkDumps(agg, true, nil); len(p) != 1 {
		t.Errorf("aggregate-only matched going down: %v", p)
	}
}

func TestCheckDumpsBoundsItsProblems(t *testing.T) {
	var totals [][3]uint64
	for i := range 100 {
		totals = append(totals, [3]uint64{uint64(i), 0, 0})
	}
	d := dumpsOf(totals...)
	for i := range d {
		d[i].Matched++
	}
	p := checkDumps(d, false, nil)
	if len(p) != maxDumpProblems+1 || p[maxDumpProblems] != "95 more dump problems" {
		t.Errorf("100 faulty dumps: %d problems, last %q", len(p), p[len(p)-1])
	}
}
