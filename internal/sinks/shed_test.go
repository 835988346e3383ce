package sinks

import (
	"strings"
	"testing"
	"time"

	"github.com/ncclhooks/ncclhooks/internal/hookgen"
)

// A comm line from NCCL's thread while a write holds the file (slow
// storage) is queued, not waited for, and reaches the file before the
// records that follow it; after Shed, records are counted as not written
// until the final dump, whose totals say so, and then recording resumes.
func TestShedAndQueuedLines(t *testing.T) {
	dir := t.TempDir()
	j, err := NewJSONL(dir, Header{Profile: "p"})
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	h := &hookgen.HookInfo{Name: "h", Layout: hookgen.Layout{}}
	recs := func(n int) []Record {
		r := make([]Record, n)
		for i := range r {
			r[i] = Record{Hook: h, Seq: uint64(i)}
		}
		return r
	}
	stats := func(records uint64, final bool) *Dump {
		return &Dump{Final: final, Stats: []Stats{{Hook: "h", Matched: records, Records: records, RecordsSinceLastDump: records}}}
	}

	j.mu.Lock() // a write in progress
	done := make(chan error)
	go func() { done <- j.Comm(Comm{Device: 0, Index: 0, Name: "c"}) }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Comm while the file is busy: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Comm waited for the write in progress")
	}
	j.mu.Unlock()
	if err := j.Records(recs(3)); err != nil {
		t.Fatal(err)
	}
	if err := j.Dump(stats(3, false)); err != nil {
		t.Fatal(err)
	}

	j.Shed()
	if err := j.Records(recs(5)); err != nil {
		t.Fatal(err)
	}
	if err := j.Dump(stats(8, true)); err != nil {
		t.Fatal(err)
	}
	if err := j.Records(recs(2)); err != nil { // after the final dump: written again
		t.Fatal(err)
	}
	if err := j.Dump(stats(10, false)); err != nil {
		t.Fatal(err)
	}

	var types []string
	var last map[string]string
	for _, l := range readLines(t, j.Path()) {
		types = append(types, strings.Trim(string(l["type"]), `"`))
		if string(l["type"]) == `"dump_stats"` {
			last = map[string]string{}
			for k, v := range l {
				last[k] = string(v)
			}
			if string(l["final"]) == "true" && (string(l["records_total"]) != "3" || string(l["dropped_write_failed_total"]) != "5" || string(l["dropped_total"]) != "5") {
				t.Errorf("final dump after Shed: %v", l)
			}
		}
	}
	want := "header comm record record record dump_stats dump_stats record record dump_stats"
	if got := strings.Join(types, " "); got != want {
		t.Errorf("lines:\n%s\nwant:\n%s", got, want)
	}
	if last["records_total"] != "5" || last["records_since_last_dump"] != "2" {
		t.Errorf("recording did not resume after the final dump: %v", last)
	}
}
