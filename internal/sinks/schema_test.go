package sinks

import (
	"encoding/json"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/ncclhooks/ncclhooks/internal/config"
	"github.com/ncclhooks/ncclhooks/internal/gpuinfo"
	"github.com/ncclhooks/ncclhooks/internal/hookgen"
	"github.com/ncclhooks/ncclhooks/internal/schema"
)

// jsonKeys are the keys a schema struct names, split into those always
// present and those that may be left out (omitempty).
func jsonKeys(v any) (always, optional []string) {
	t := reflect.TypeOf(v)
	for i := range t.NumField() {
		name, opts, _ := strings.Cut(t.Field(i).Tag.Get("json"), ",")
		if name == "" || name == "-" {
			continue
		}
		if strings.Contains(opts, "omitempty") {
			optional = append(optional, name)
		} else {
			always = append(always, name)
		}
	}
	return always, optional
}

// checkKeys fails for a key the schema names that the line lacks, and for a
// key the line has that the schema does not name (extra: allowed ones).
func checkKeys(t *testing.T, what string, line map[string]json.RawMessage, v any, extra ...string) {
	t.Helper()
	always, optional := jsonKeys(v)
	for _, k := range always {
		if _, ok := line[k]; !ok {
			t.Errorf("%s line lacks %q, which %T names (readers use it)", what, k, v)
		}
	}
	for k := range line {
		if !slices.Contains(always, k) && !slices.Contains(optional, k) && !slices.Contains(extra, k) {
			t.Errorf("%s line has %q, which %T does not name", what, k, v)
		}
	}
}

// Every line type the writer produces has exactly the keys of its schema
// struct: readers decode into those structs, so a key they use and the
// writer never writes (a check that can never fire) is caught here.
func TestWriterFollowsTheSchema(t *testing.T) {
	dir := t.TempDir()
	h := allTypesHook()
	m := &hookgen.Module{Hooks: []*hookgen.HookInfo{h}}
	j, err := NewJSONL(dir, Header{Profile: "p", ProfileFile: "p.yaml", Host: "n", PID: 3, Backend: "cpu", Fields: HeaderFields(m), Funcs: []string{"AllReduce_Sum_f32_RING_LL", "Broadcast_RING_LL"}, Drained: []string{"lat"},
		ProfileHash: "ce4cea05", PluginVersion: "v1.0-3-gabc", NCCLVersion: "2.28.9"})
	if err != nil {
		t.Fatal(err)
	}
	must(0, j.Clock(0, "NVIDIA H200", 1, 2))
	must(0, j.Comm(Comm{Device: 0, Index: 1, ID: 0xab, Name: "c", Rank: 0, NRanks: 2, NNodes: 1, UUID: "GPU-1"}))
	u32 := func(v uint32) *uint32 { return &v }
	u64 := func(v uint64) *uint64 { return &v }
	// Every state key set, so that every key Device names must be written.
	full := DeviceState{Device: 0, TimeUnixNs: 5, Name: "NVIDIA H200", UUID: "GPU-1", PCIBusID: "0000:19:00.0",
		State: gpuinfo.State{SMClockMHz: u32(1980), MemClockMHz: u32(3201), ClockEventReasons: u64(0x44), TemperatureC: u32(40),
			PowerMW: u32(90000), ECCCorrected: u64(1), ECCUncorrected: u64(0), NVLinkErrors: u64(2), NVLinks: 18}}
	must(0, j.Device(&full))
	must(0, j.Refused("h2", "p.yaml:3:5", "needs a stack frame"))
	must(0, j.Inactive("cpu backend: cc failed"))
	vals := make([]hookgen.Value, len(h.Layout.Fields))
	for i := range vals {
		vals[i].Type = h.Layout.Fields[i].Type
	}
	must(0, j.Records([]Record{{Hook: h, Device: 0, Seq: 1, Values: vals, FuncName: "SendRecv"}}))
	le := uint64(10)
	agg := func(kind config.AggKind, by ...string) *hookgen.AggInfo {
		return &hookgen.AggInfo{Hook: h.Name, Agg: &config.Aggregate{Name: string(kind), Kind: kind, By: by, Value: &config.Expr{Type: config.I64}}}
	}
	must(0, j.Dump(&Dump{
		Stats: []Stats{{Hook: h.Name, Device: 0, Dump: 1, Final: true}},
		Aggs: []AggSnapshot{
			{Info: agg(config.AggHistogram, "funcId", "channelId", "comm"), Rows: []AggRow{{FuncID: 1, FuncName: "SendRecv", ChannelID: 2, Comm: 1, Count: 1,
				Buckets: []Bucket{{LE: &le, Count: 1}, {Count: 1}}}}},
			{Info: agg(config.AggMin, "funcId"), Rows: []AggRow{{FuncID: 1, ChannelID: -1, Count: 1, Min: 3}}},
			{Info: agg(config.AggMax), Rows: []AggRow{{FuncID: -1, ChannelID: -1, Count: 1, Max: 3}}},
			{Info: agg(config.AggCount), Rows: []AggRow{{FuncID: -1, ChannelID: -1, Count: 1}}},
		},
		Devices: []DeviceState{full},
		Final:   true,
	}))
	must(0, j.Epoch(Epoch{Epoch: 1, Profile: "p2", ProfileFile: "p.yaml", ProfileHash: "ab12", ActiveUnixNs: 7, ChangeUnixNs: 6,
		Fields: HeaderFields(m), Drained: []string{"lat"}}))
	must(0, j.Close())

	lines := readLines(t, filepath.Join(dir, FileName("n", 3)))
	seen := map[string]int{}
	defer func() {
		if seen[schema.TypeDevice] != 2 {
			t.Errorf("%d device lines, want 2 (one by Device, one by Dump)", seen[schema.TypeDevice])
		}
	}()
	for _, l := range lines {
		var typ string
		json.Unmarshal(l["type"], &typ)
		seen[typ]++
		switch typ {
		case schema.TypeHeader:
			checkKeys(t, typ, l, schema.Header{})
			allKeys(t, typ, l, schema.Header{})
		case schema.TypeDevice:
			checkKeys(t, typ, l, schema.Device{})
			allKeys(t, typ, l, schema.Device{})
		case schema.TypeClock:
			checkKeys(t, typ, l, schema.Clock{})
		case schema.TypeComm:
			checkKeys(t, typ, l, schema.Comm{})
			allKeys(t, typ, l, schema.Comm{})
		case schema.TypeRefused:
			checkKeys(t, typ, l, schema.Refused{})
		case schema.TypeInactive:
			checkKeys(t, typ, l, schema.Inactive{})
		case schema.TypeProfile:
			checkKeys(t, typ, l, schema.Profile{})
			allKeys(t, typ, l, schema.Profile{})
		case schema.TypeRecord:
			var fields []string
			for _, f := range h.Layout.Fields {
				fields = append(fields, f.Name)
			}
			checkKeys(t, typ, l, schema.Record{}, fields...)
		case schema.TypeDumpStats:
			checkKeys(t, typ, l, schema.DumpStats{})
		case schema.TypeAggregate:
			checkKeys(t, typ, l, schema.Aggregate{})
			var a schema.Aggregate
			if err := json.Unmarshal(mustMarshal(t, l), &a); err != nil {
				t.Fatalf("aggregate line does not decode into schema.Aggregate: %v", err)
			}
			for _, raw := range rawRows(t, l) {
				checkKeys(t, "aggregate row", raw, schema.AggRow{})
				if a.Kind == "histogram" { // keyed by all three: every key written
					for _, k := range []string{"funcId", "func", "channelId", "comm", "sum", "buckets"} {
						if _, ok := raw[k]; !ok {
							t.Errorf("histogram row lacks %q", k)
						}
					}
				}
			}
		default:
			t.Errorf("line type %q is not in the schema", typ)
		}
	}
	for _, typ := range []string{schema.TypeHeader, schema.TypeClock, schema.TypeComm, schema.TypeRefused, schema.TypeRecord,
		schema.TypeDumpStats, schema.TypeAggregate, schema.TypeDevice, schema.TypeInactive, schema.TypeProfile} {
		if seen[typ] == 0 {
			t.Errorf("no %s line written", typ)
		}
	}
}

// allKeys fails for an optional key of v the line lacks: the line was
// written with every optional value set.
func allKeys(t *testing.T, what string, line map[string]json.RawMessage, v any) {
	t.Helper()
	_, optional := jsonKeys(v)
	for _, k := range optional {
		if _, ok := line[k]; !ok {
			t.Errorf("%s line lacks %q, which %T names, though its value was set", what, k, v)
		}
	}
}

func mustMarshal(t *testing.T, l map[string]json.RawMessage) []byte {
	b, err := json.Marshal(l)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func rawRows(t *testing.T, l map[string]json.RawMessage) []map[string]json.RawMessage {
	var rows []map[string]json.RawMessage
	if err := json.Unmarshal(l["rows"], &rows); err != nil {
		t.Fatal(err)
	}
	return rows
}
