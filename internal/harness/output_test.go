package harness

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/ncclhooks/ncclhooks/internal/config"
)

// writeOutput writes a plugin output of n record lines of hook "all" on
// device 0, as the plugin writes them, and the final dump_stats line.
func writeOutput(t *testing.T, n int) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), fmt.Sprintf("ncclhooks-h-%d.jsonl", n))
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	w := bufio.NewWriter(f)
	fmt.Fprintf(w, `{"type":"header","format":1,"profile":"all-events","host":"h","pid":1,"backend":"cpu","start_unix_ns":1}`+"\n")
	for i := range n {
		fmt.Fprintf(w, `{"type":"record","hook":"all","device":0,"seq":%d,"timestamp":%d,"workCounter":%d,"funcId":%d,"channelId":%d,"phase":%d,"comm":0,"func":"%s"}`+"\n",
			i, 1_700_000_000_000_000_000+i, i/2, i%23, i%4, i%2, FuncName(uint32(i%23)))
	}
	fmt.Fprintf(w, `{"type":"dump_stats","hook":"all","device":0,"dump":1,"final":true,"time_unix_ns":2,"matched_total":%d,"records_total":%d,"dropped_total":0,"records_since_last_dump":%d,"dropped_since_last_dump":0,"pending":0}`+"\n", n, n, n)
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	return path
}

// heapAfter returns the live heap once out has been read, with out alive.
func heapAfter(t *testing.T, path string, keep bool) (uint64, *output) {
	t.Helper()
	runtime.GC()
	out, err := readOutput(path, keep)
	if err != nil {
		t.Fatal(err)
	}
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc, out
}

// TestOutputWithoutRecordsIsBounded: reading an output for run --no-verify
// keeps counts, not records: 10x the records costs no more memory. Every
// record line was kept as a map (6.25 GB at 4 M records, issue 13): 180k more
// records held some 190 MB.
func TestOutputWithoutRecordsIsBounded(t *testing.T) {
	small, large := writeOutput(t, 20_000), writeOutput(t, 200_000)
	base, out := heapAfter(t, small, false)
	if got := out.lines[statKey{"all", 0}]; got != 20_000 {
		t.Fatalf("counted %d record lines, want 20000", got)
	}
	runtime.KeepAlive(out)
	out = nil
	grown, out := heapAfter(t, large, false)
	if got := out.lines[statKey{"all", 0}]; got != 200_000 || len(out.records) != 0 {
		t.Fatalf("counted %d record lines, kept %d hooks' records; want 200000 and none", got, len(out.records))
	}
	if st := out.final[statKey{"all", 0}]; st.Records != 200_000 {
		t.Fatalf("final dump_stats: %+v", st)
	}
	runtime.KeepAlive(out)
	t.Logf("live heap with the output of 20k records read: %d bytes; of 200k: %d", base, grown)
	const bound = 16 << 20
	if grown > base+bound {
		t.Errorf("reading 180k more records grew the live heap by %d bytes; at most %d", grown-base, bound)
	}

	// The same file checked: the accounting holds, no record is checked one
	// by one, and no pairs are computed.
	s := &Summary{Config: Config{Devices: 1}, HookActive: true}
	prof := allEvents(t)
	if err := s.checkFile(prof, large, nil, map[int]uint64{0: 200_000}, false); err != nil {
		t.Fatal(err)
	}
	if !s.OK() || len(s.Rows) != 1 || s.Rows[0].Lines != 200_000 || s.Rows[0].Checked != 0 || s.Pairs != nil {
		t.Errorf("check without records: OK %v, rows %+v, pairs %+v", s.OK(), s.Rows, s.Pairs)
	}
}

func allEvents(t *testing.T) *config.Profile {
	t.Helper()
	p, err := config.Load("../../examples/all-events.yaml")
	if err != nil {
		t.Fatal(err)
	}
	return p
}
