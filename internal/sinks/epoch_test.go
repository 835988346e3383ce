package sinks

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/ncclhooks/ncclhooks/internal/hookgen"
	"github.com/ncclhooks/ncclhooks/internal/schema"
)

// TestEpochRestartsTheAccounting: after a profile line, a hook of the same
// name starts again from zero (the new epoch's drainer counts from zero):
// its first dump_stats' since-last-dump deltas are its totals, and the
// records the file lost in the previous epoch are not taken off the new
// epoch's, while Lost still counts them.
func TestEpochRestartsTheAccounting(t *testing.T) {
	dir := t.TempDir()
	h := allTypesHook()
	m := &hookgen.Module{Hooks: []*hookgen.HookInfo{h}}
	j, err := NewJSONL(dir, Header{Profile: "p", ProfileFile: "p.yaml", Host: "n", PID: 4, Backend: "cpu", Fields: HeaderFields(m)})
	if err != nil {
		t.Fatal(err)
	}
	vals := make([]hookgen.Value, len(h.Layout.Fields))
	for i := range vals {
		vals[i].Type = h.Layout.Fields[i].Type
	}
	must(0, j.Records([]Record{{Hook: h, Device: 0, Seq: 1, Values: vals}}))
	must(0, j.Dump(&Dump{Stats: []Stats{{Hook: h.Name, Device: 0, Matched: 1, Records: 1, RecordsSinceLastDump: 1}}}))
	j.Shed() // the next record is lost, as with a full disk
	must(0, j.Records([]Record{{Hook: h, Device: 0, Seq: 2, Values: vals}}))
	must(0, j.Dump(&Dump{Final: true, Stats: []Stats{{Hook: h.Name, Device: 0, Matched: 2, Records: 2, RecordsSinceLastDump: 2}}}))
	must(0, j.Epoch(Epoch{Epoch: 1, Profile: "p2", ProfileFile: "p.yaml", ProfileHash: "ab", ActiveUnixNs: time.Now().UnixNano(), Fields: HeaderFields(m)}))
	must(0, j.Records([]Record{{Hook: h, Device: 0, Seq: 1, Values: vals}}))
	must(0, j.Dump(&Dump{Final: true, Stats: []Stats{{Hook: h.Name, Device: 0, Matched: 1, Records: 1, RecordsSinceLastDump: 1}}}))
	if n := j.Lost(); n != 1 {
		t.Errorf("Lost %d, want the 1 record of epoch 0", n)
	}
	must(0, j.Close())
	var stats []schema.DumpStats
	types := ""
	for _, l := range readLines(t, filepath.Join(dir, FileName("n", 4))) {
		var typ string
		json.Unmarshal(l["type"], &typ)
		types += typ[:1]
		if typ == schema.TypeDumpStats {
			var st schema.DumpStats
			json.Unmarshal(mustMarshal(t, l), &st)
			stats = append(stats, st)
		}
	}
	if types != "hrddprd" {
		t.Errorf("line types %q, want header, record, 2 dump_stats, profile, record, dump_stats", types)
	}
	if len(stats) != 3 || stats[1].Records != 1 || stats[1].DroppedWriteFailed != 1 ||
		stats[2].Records != 1 || stats[2].Dropped != 0 || stats[2].RecordsSinceLastDump != 1 {
		t.Errorf("dump_stats %+v: want epoch 0 with 1 record and 1 write failed, epoch 1 with 1 record and no drop", stats)
	}
}

// TestGateHoldsUntilOpen: nothing passes a closed gate; the records it
// kept (copies: the caller reuses its values) come out at Open, in order,
// before anything given later.
func TestGateHoldsUntilOpen(t *testing.T) {
	s := &recordingSink{}
	g := NewGate(s)
	vals := []hookgen.Value{{U: 1}}
	must(0, g.Records([]Record{{Seq: 1, Values: vals}}))
	vals[0].U = 2 // reused by the caller
	must(0, g.Records([]Record{{Seq: 2, Values: vals}}))
	if len(s.seqs) != 0 {
		t.Fatalf("records passed the closed gate: %v", s.seqs)
	}
	done := make(chan struct{})
	go func() {
		g.Dump(&Dump{Final: true})
		close(done)
	}()
	select {
	case <-done:
		t.Fatal("a dump passed the closed gate")
	case <-time.After(20 * time.Millisecond):
	}
	must(0, g.Open())
	<-done
	must(0, g.Open()) // twice is fine
	must(0, g.Records([]Record{{Seq: 3, Values: vals}}))
	if s.dumps != 1 || fmt.Sprint(s.seqs) != "[1 2 3]" || fmt.Sprint(s.vals[:2]) != "[1 2]" {
		t.Errorf("%d dumps, records %v with values %v behind the gate, want 1 dump, [1 2 3] with [1 2 ...]", s.dumps, s.seqs, s.vals)
	}
}

type recordingSink struct {
	dumps int
	seqs  []uint64
	vals  []uint64
}

func (r *recordingSink) Records(recs []Record) error {
	for _, x := range recs {
		r.seqs = append(r.seqs, x.Seq)
		r.vals = append(r.vals, x.Values[0].U)
	}
	return nil
}
func (r *recordingSink) Dump(*Dump) error { r.dumps++; return nil }
func (r *recordingSink) Close() error     { return nil }
