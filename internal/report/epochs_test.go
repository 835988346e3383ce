package report

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestReloadEpochs: a file whose profile a live reload changed mid-file is
// refused as mixed unless --allow-mixed, and then each epoch's dump_stats
// count on their own (the epoch's totals restart from zero), and the
// epoch's records are read under its own field names.
func TestReloadEpochs(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "ncclhooks-h-1.jsonl")
	lines := []string{
		`{"type":"header","format":1,"profile":"p","profile_file":"p.yaml","host":"h","pid":1,"backend":"cpu","start_unix_ns":1,"profile_hash":"aaaa","fields":{"a":{"timestamp":"timestamp","workCounter":"workCounter","channelId":"channelId","phase":"phase"}}}`,
		`{"type":"record","hook":"a","device":0,"seq":0,"timestamp":100,"workCounter":1,"channelId":0,"phase":0}`,
		`{"type":"record","hook":"a","device":0,"seq":1,"timestamp":300,"workCounter":1,"channelId":0,"phase":1}`,
		`{"type":"dump_stats","hook":"a","device":0,"dump":1,"final":true,"time_unix_ns":5,"matched_total":2,"records_total":2,"dropped_total":0,"records_since_last_dump":2,"dropped_since_last_dump":0,"dropped_buffer_full_total":0,"dropped_overwritten_total":0,"dropped_torn_total":0,"dropped_ring_full_total":0,"dropped_write_failed_total":0,"dropped_cap_total":0,"pending":0}`,
		`{"type":"profile","epoch":1,"profile":"p","profile_file":"p.yaml","profile_hash":"bbbb","active_unix_ns":6,"change_unix_ns":4,"fields":{"a":{"ts":"timestamp","workCounter":"workCounter","channelId":"channelId","phase":"phase"}}}`,
		`{"type":"record","hook":"a","device":0,"seq":0,"ts":1000,"workCounter":2,"channelId":0,"phase":0}`,
		`{"type":"record","hook":"a","device":0,"seq":1,"ts":1500,"workCounter":2,"channelId":0,"phase":1}`,
		`{"type":"dump_stats","hook":"a","device":0,"dump":1,"final":true,"time_unix_ns":7,"matched_total":3,"records_total":2,"dropped_total":1,"records_since_last_dump":2,"dropped_since_last_dump":1,"dropped_buffer_full_total":1,"dropped_overwritten_total":0,"dropped_torn_total":0,"dropped_ring_full_total":0,"dropped_write_failed_total":0,"dropped_cap_total":0,"pending":0}`,
	}
	if err := os.WriteFile(file, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Read([]string{file}, Options{}, nil); err == nil || !strings.Contains(err.Error(), "live reload") {
		t.Fatalf("read without --allow-mixed: %v, want the live reload named", err)
	}
	var durs []uint64
	run, err := Read([]string{file}, Options{AllowMixed: true}, func(w *WorkItem) { durs = append(durs, w.Duration) })
	if err != nil {
		t.Fatal(err)
	}
	c, ok := run.Capture("a")
	if !ok || c.Records != 4 || c.Dropped != 1 || c.Matched != 5 || !c.Final {
		t.Errorf("capture %+v, want the epochs added: 4 records, 1 dropped, 5 matched", c)
	}
	if len(durs) != 2 || durs[0] != 200 || durs[1] != 500 {
		t.Errorf("durations %v, want 200 and 500 (epoch 1's under its field name ts)", durs)
	}
}
