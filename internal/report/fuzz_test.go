package report

import (
	"os"
	"path/filepath"
	"testing"
)

// FuzzRead: the JSON lines reader of report, diff and trace (Read, LoadRun)
// on any file: an error or a run, never a panic or a hang.
func FuzzRead(f *testing.F) {
	f.Add([]byte(`{"type":"header","format":1,"profile":"p","host":"h","pid":1,"backend":"cpu","start_unix_ns":1,"funcs":["AllReduce_Sum_f32_RING_LL"]}
{"type":"comm","device":0,"comm":0,"comm_id":"0x1","rank":0,"nranks":1,"nnodes":1}
{"type":"clock","device":0,"host_unix_ns":5,"device_ns":3}
{"type":"record","hook":"all","device":0,"seq":2,"timestamp":10,"workCounter":1,"channelId":0,"phase":0,"funcId":0,"comm":0}
{"type":"record","hook":"all","device":0,"seq":3,"timestamp":30,"workCounter":1,"channelId":0,"phase":1,"funcId":0,"comm":0}
{"type":"dump_stats","hook":"all","device":0,"dump":1,"final":true,"matched_total":2,"records_total":2,"dropped_total":0,"pending":0}
{"type":"aggregate","hook":"lat","device":0,"name":"l","kind":"histogram","by":["funcId"],"final":true,"rows":[{"funcId":0,"count":1,"sum":20,"buckets":[{"le":1,"count":0},{"le":"+Inf","count":1}]}]}
`))
	f.Add([]byte(`{"type":"header","format":1}` + "\n" + `{"type":"record","hook":"a","phase":1,"timestamp":-1,"workCounter":1e400}` + "\n"))
	f.Add([]byte("{\"type\":\"inactive\",\"reason\":\"x\"}\n{"))
	// One file, rewritten for every input (the inputs of a process run one
	// at a time): a directory made and removed per input cost more than
	// the read.
	p := filepath.Join(f.TempDir(), "ncclhooks-h-1.jsonl")
	f.Fuzz(func(t *testing.T, data []byte) {
		if err := os.WriteFile(p, data, 0o600); err != nil {
			t.Fatal(err)
		}
		Read([]string{p}, Options{AggHistory: true, Warn: func(string) {}}, func(*WorkItem) {})
		LoadRun(p, Options{Warn: func(string) {}}, true)
	})
}
