// Package perfettotest decodes a Perfetto trace for tests with decoders
// this project did not write: protoc (protobuf-compiler) and Perfetto's own
// protos/perfetto/trace/perfetto_trace.proto, never with ncclhooks' encoder.
//
// protoc turns the upstream .proto into a descriptor set, and protobuf-go's
// dynamicpb decodes the trace with it; the result is read by the upstream
// field names, so a wrong field number or wire type shows up as a missing
// field or as unknown fields (which Decode refuses). `protoc --decode` also
// parses the trace once. Where protoc or the proto file is missing, Require
// skips the test, saying what to install.
//
// The proto file is looked up in $NCCLHOOKS_PERFETTO_PROTO (its path), else
// at shared/perfetto/perfetto_trace.proto beside the repository (where the
// project's shared data lives); it is not committed to the repository.
package perfettotest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/descriptorpb"
	"google.golang.org/protobuf/types/dynamicpb"
)

// Slice is one complete slice: a TYPE_SLICE_BEGIN and its TYPE_SLICE_END
// on one track.
type Slice struct {
	Track      string // the track's name
	Process    string // its parent process track's process_name
	Name       string
	Categories []string
	Ts, Dur    int64 // ns
	Args       map[string]any
}

// Counter is one counter track's samples.
type Counter struct {
	Track   string
	Process string
	Unit    string
	Values  []float64
	Ts      []int64
}

// Trace is what a decoded trace holds.
type Trace struct {
	Packets   int
	Processes map[uint64]string // process track uuid -> process_name
	Pids      map[uint64]int64
	Tracks    map[uint64]string // slice track uuid -> name
	Slices    []Slice
	Counters  map[string]*Counter // "process\x00track" -> samples
}

// Require finds protoc and the upstream proto, or skips t.
func Require(t testing.TB) (protoc, protoFile string) {
	t.Helper()
	protoc, err := exec.LookPath("protoc")
	if err != nil {
		t.Skip("protoc not found (Debian: apt-get install protobuf-compiler): the Perfetto trace is not decoded")
	}
	protoFile = os.Getenv("NCCLHOOKS_PERFETTO_PROTO")
	if protoFile == "" {
		_, here, _, _ := runtime.Caller(0)
		root := filepath.Join(filepath.Dir(here), "..", "..", "..")
		protoFile = filepath.Join(root, "..", "shared", "perfetto", "perfetto_trace.proto")
	}
	if _, err := os.Stat(protoFile); err != nil {
		t.Skipf("Perfetto's perfetto_trace.proto not found at %s (set NCCLHOOKS_PERFETTO_PROTO to protos/perfetto/trace/perfetto_trace.proto of github.com/google/perfetto): the Perfetto trace is not decoded", protoFile)
	}
	return protoc, protoFile
}

// Decode decodes data, a perfetto.protos.Trace, with protoc and the
// upstream proto, and pairs its slices. It fails t on anything Perfetto's
// trace_processor would refuse or misread: unknown fields, a packet without
// a trusted sequence id, an event on an undescribed track, a counter value
// on a track that is no counter track, an END without its BEGIN, a BEGIN
// left open.
func Decode(t testing.TB, data []byte) *Trace {
	t.Helper()
	protoc, protoFile := Require(t)
	dir := t.TempDir()
	trace := filepath.Join(dir, "trace.pb")
	if err := os.WriteFile(trace, data, 0o644); err != nil {
		t.Fatal(err)
	}
	in, err := os.Open(trace)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	cmd := exec.Command(protoc, "--proto_path="+filepath.Dir(protoFile), "--decode=perfetto.protos.Trace", filepath.Base(protoFile))
	cmd.Stdin = in
	var stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = nil, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("protoc --decode=perfetto.protos.Trace: %v: %s", err, stderr.String())
	}
	desc := filepath.Join(dir, "perfetto.desc")
	if out, err := exec.Command(protoc, "--proto_path="+filepath.Dir(protoFile), "--descriptor_set_out="+desc, filepath.Base(protoFile)).CombinedOutput(); err != nil {
		t.Fatalf("protoc --descriptor_set_out: %v: %s", err, out)
	}
	raw, err := os.ReadFile(desc)
	if err != nil {
		t.Fatal(err)
	}
	var set descriptorpb.FileDescriptorSet
	if err := proto.Unmarshal(raw, &set); err != nil {
		t.Fatal(err)
	}
	files, err := protodesc.NewFiles(&set)
	if err != nil {
		t.Fatal(err)
	}
	d, err := files.FindDescriptorByName("perfetto.protos.Trace")
	if err != nil {
		t.Fatal(err)
	}
	msg := dynamicpb.NewMessage(d.(protoreflect.MessageDescriptor))
	if err := proto.Unmarshal(data, msg); err != nil {
		t.Fatalf("not a perfetto.protos.Trace: %v", err)
	}
	if err := noUnknown(msg, "Trace"); err != nil {
		t.Fatal(err)
	}
	return read(t, msg)
}

// noUnknown refuses fields the upstream proto does not define.
func noUnknown(m protoreflect.Message, path string) error {
	if u := m.GetUnknown(); len(u) > 0 {
		return fmt.Errorf("%s: %d bytes of fields perfetto_trace.proto does not define (a wrong field number or wire type)", path, len(u))
	}
	var err error
	m.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		if fd.Kind() != protoreflect.MessageKind {
			return true
		}
		p := path + "." + string(fd.Name())
		switch {
		case fd.IsList():
			for i := 0; i < v.List().Len() && err == nil; i++ {
				err = noUnknown(v.List().Get(i).Message(), fmt.Sprintf("%s[%d]", p, i))
			}
		case fd.IsMap():
		default:
			err = noUnknown(v.Message(), p)
		}
		return err == nil
	})
	return err
}

// get reads a field by its upstream name (the zero value where unset).
func get(m protoreflect.Message, name string) protoreflect.Value {
	fd := m.Descriptor().Fields().ByName(protoreflect.Name(name))
	if fd == nil {
		panic("perfetto_trace.proto has no field " + string(m.Descriptor().FullName()) + "." + name)
	}
	return m.Get(fd)
}

func has(m protoreflect.Message, name string) bool {
	return m.Has(m.Descriptor().Fields().ByName(protoreflect.Name(name)))
}

func read(t testing.TB, msg protoreflect.Message) *Trace {
	t.Helper()
	tr := &Trace{Processes: map[uint64]string{}, Pids: map[uint64]int64{}, Tracks: map[uint64]string{}, Counters: map[string]*Counter{}}
	parent := map[uint64]uint64{}
	counters := map[uint64]*Counter{}
	open := map[uint64][]int{} // track -> indexes of open slices
	packets := get(msg, "packet").List()
	tr.Packets = packets.Len()
	for i := 0; i < packets.Len(); i++ {
		p := packets.Get(i).Message()
		if get(p, "trusted_packet_sequence_id").Uint() == 0 {
			t.Fatalf("packet %d: no trusted_packet_sequence_id (trace_processor drops its track events)", i)
		}
		switch {
		case has(p, "track_descriptor"):
			td := get(p, "track_descriptor").Message()
			u := get(td, "uuid").Uint()
			if u == 0 {
				t.Fatalf("packet %d: track descriptor without uuid", i)
			}
			if has(td, "process") {
				pd := get(td, "process").Message()
				tr.Processes[u] = get(pd, "process_name").String()
				tr.Pids[u] = get(pd, "pid").Int()
				continue
			}
			par := get(td, "parent_uuid").Uint()
			if _, ok := tr.Processes[par]; !ok {
				t.Fatalf("packet %d: track %d's parent %d is no process track described before it", i, u, par)
			}
			parent[u] = par
			name := get(td, "name").String()
			if has(td, "counter") {
				cd := get(td, "counter").Message()
				unit := ""
				if has(cd, "unit") {
					unit = string(cd.Descriptor().Fields().ByName("unit").Enum().Values().ByNumber(get(cd, "unit").Enum()).Name())
				}
				c := &Counter{Track: name, Process: tr.Processes[par], Unit: unit}
				counters[u] = c
				tr.Counters[c.Process+"\x00"+name] = c
			} else {
				tr.Tracks[u] = name
			}
		case has(p, "track_event"):
			ev := get(p, "track_event").Message()
			ts := int64(get(p, "timestamp").Uint())
			u := get(ev, "track_uuid").Uint()
			typ := string(ev.Descriptor().Fields().ByName("type").Enum().Values().ByNumber(get(ev, "type").Enum()).Name())
			switch typ {
			case "TYPE_COUNTER":
				c, ok := counters[u]
				if !ok {
					t.Fatalf("packet %d: a counter value on track %d, which is no counter track", i, u)
				}
				v := float64(get(ev, "counter_value").Int())
				if has(ev, "double_counter_value") {
					v = get(ev, "double_counter_value").Float()
				}
				c.Values = append(c.Values, v)
				c.Ts = append(c.Ts, ts)
			case "TYPE_SLICE_BEGIN":
				name, ok := tr.Tracks[u]
				if !ok {
					t.Fatalf("packet %d: a slice on track %d, not described as a slice track", i, u)
				}
				s := Slice{Track: name, Process: tr.Processes[parent[u]], Name: get(ev, "name").String(), Ts: ts, Args: map[string]any{}}
				cats := get(ev, "categories").List()
				for j := 0; j < cats.Len(); j++ {
					s.Categories = append(s.Categories, cats.Get(j).String())
				}
				anns := get(ev, "debug_annotations").List()
				for j := 0; j < anns.Len(); j++ {
					a := anns.Get(j).Message()
					s.Args[get(a, "name").String()] = annValue(a)
				}
				open[u] = append(open[u], len(tr.Slices))
				tr.Slices = append(tr.Slices, s)
			case "TYPE_SLICE_END":
				st := open[u]
				if len(st) == 0 {
					t.Fatalf("packet %d: TYPE_SLICE_END on track %d (%s) without an open slice", i, u, tr.Tracks[u])
				}
				s := &tr.Slices[st[len(st)-1]]
				open[u] = st[:len(st)-1]
				if ts < s.Ts {
					t.Fatalf("packet %d: slice %s ends at %d before it begins at %d", i, s.Name, ts, s.Ts)
				}
				s.Dur = ts - s.Ts
			default:
				t.Fatalf("packet %d: track event of type %s", i, typ)
			}
		default:
			t.Fatalf("packet %d: neither a track descriptor nor a track event", i)
		}
	}
	for u, st := range open {
		if len(st) > 0 {
			t.Fatalf("track %d (%s): %d slices never end", u, tr.Tracks[u], len(st))
		}
	}
	return tr
}

// annValue is a debug annotation's value: a string, an int64, a uint64, or
// a map of its dict entries.
func annValue(a protoreflect.Message) any {
	switch {
	case has(a, "string_value"):
		return get(a, "string_value").String()
	case has(a, "int_value"):
		return get(a, "int_value").Int()
	case has(a, "uint_value"):
		return get(a, "uint_value").Uint()
	}
	m := map[string]any{}
	entries := get(a, "dict_entries").List()
	for i := 0; i < entries.Len(); i++ {
		e := entries.Get(i).Message()
		m[get(e, "name").String()] = annValue(e)
	}
	return m
}

// CompareJSON checks that the Perfetto trace holds the slices of the JSON
// trace of the same inputs (ncclhooks trace --format json): as many, each
// with the same process, track and name, the same start (JSON: ts
// microseconds since otherData.time_origin_unix_ns) and duration to the
// nanosecond. It returns the number of slices compared.
func CompareJSON(t testing.TB, jsonTrace []byte, tr *Trace) int {
	t.Helper()
	var jt struct {
		TraceEvents []struct {
			Name string          `json:"name"`
			Ph   string          `json:"ph"`
			Ts   json.Number     `json:"ts"`
			Dur  json.Number     `json:"dur"`
			Pid  int             `json:"pid"`
			Tid  int             `json:"tid"`
			Args json.RawMessage `json:"args"`
		} `json:"traceEvents"`
		OtherData struct {
			Origin int64 `json:"time_origin_unix_ns"`
		} `json:"otherData"`
	}
	if err := json.Unmarshal(jsonTrace, &jt); err != nil {
		t.Fatalf("JSON trace: %v", err)
	}
	procs, threads := map[int]string{}, map[[2]int]string{}
	for _, e := range jt.TraceEvents {
		var a struct{ Name string }
		json.Unmarshal(e.Args, &a)
		switch e.Name {
		case "process_name":
			procs[e.Pid] = a.Name
		case "thread_name":
			threads[[2]int{e.Pid, e.Tid}] = a.Name
		}
	}
	// The JSON's ts and dur are microseconds with three decimals: whole
	// nanoseconds, parsed exactly.
	nanos := func(n json.Number) int64 {
		s := string(n)
		whole, frac, _ := strings.Cut(s, ".")
		frac = (frac + "000")[:3]
		v, err := strconv.ParseInt(whole+frac, 10, 64)
		if err != nil {
			t.Fatalf("JSON time %q: %v", s, err)
		}
		return v
	}
	want := map[string]int{}
	n := 0
	for _, e := range jt.TraceEvents {
		if e.Ph != "X" {
			continue
		}
		n++
		want[fmt.Sprintf("%s | %s | %s | %d | %d", procs[e.Pid], threads[[2]int{e.Pid, e.Tid}], e.Name, jt.OtherData.Origin+nanos(e.Ts), nanos(e.Dur))]++
	}
	if len(tr.Slices) != n {
		t.Fatalf("the Perfetto trace has %d slices, the JSON trace %d", len(tr.Slices), n)
	}
	for _, s := range tr.Slices {
		k := fmt.Sprintf("%s | %s | %s | %d | %d", s.Process, s.Track, s.Name, s.Ts, s.Dur)
		if want[k] == 0 {
			t.Fatalf("Perfetto slice %q is not in the JSON trace", k)
		}
		want[k]--
	}
	return n
}
