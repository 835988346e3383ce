package trace_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/ncclhooks/ncclhooks/internal/report"
	"github.com/ncclhooks/ncclhooks/internal/report/reporttest"
	"github.com/ncclhooks/ncclhooks/internal/trace"
)

type traceFile struct {
	TraceEvents     []map[string]any `json:"traceEvents"`
	DisplayTimeUnit string           `json:"displayTimeUnit"`
	OtherData       map[string]any   `json:"otherData"`
}

type parsed struct {
	file      traceFile
	slices    []map[string]any
	counters  []map[string]any
	procNames map[int]string
	thrNames  map[[2]int]string
}

func num(t *testing.T, e map[string]any, key string) float64 {
	t.Helper()
	v, ok := e[key].(float64)
	if !ok {
		t.Fatalf("event %v: %q is not a number", e, key)
	}
	return v
}

// ns is a trace time in microseconds as the whole nanoseconds it was written
// from: slices are compared in those, since the float64 sum of two
// three-decimal microsecond values is not exact.
func ns(us float64) int64 { return int64(math.Round(us * 1e3)) }

// validate checks data against the trace event format as Perfetto's JSON
// importer reads it: required keys per phase, named processes and threads,
// per-track monotonic timestamps and properly nested (here: disjoint) slices.
func validate(t *testing.T, data []byte) *parsed {
	t.Helper()
	p := &parsed{procNames: map[int]string{}, thrNames: map[[2]int]string{}}
	if err := json.Unmarshal(data, &p.file); err != nil {
		t.Fatalf("not JSON: %v", err)
	}
	type track struct{ pid, tid int }
	lastEnd := map[track]int64{}
	lastTs := map[track]int64{}
	for _, e := range p.file.TraceEvents {
		ph, _ := e["ph"].(string)
		name, _ := e["name"].(string)
		if name == "" {
			t.Fatalf("event without name: %v", e)
		}
		pid := int(num(t, e, "pid"))
		switch ph {
		case "M":
			args, _ := e["args"].(map[string]any)
			switch name {
			case "process_name":
				p.procNames[pid] = args["name"].(string)
			case "thread_name":
				p.thrNames[[2]int{pid, int(num(t, e, "tid"))}] = args["name"].(string)
			case "process_sort_index", "thread_sort_index":
				if _, ok := args["sort_index"].(float64); !ok {
					t.Fatalf("%s without a numeric sort_index: %v", name, e)
				}
			default:
				t.Fatalf("unknown metadata event %q", name)
			}
		case "X":
			ts, dur := ns(num(t, e, "ts")), ns(num(t, e, "dur"))
			tr := track{pid, int(num(t, e, "tid"))}
			if dur < 0 {
				t.Fatalf("negative duration: %v", e)
			}
			if ts < lastTs[tr] {
				t.Fatalf("track %v: ts %v ns after %v ns: not monotonic", tr, ts, lastTs[tr])
			}
			if ts < lastEnd[tr] {
				t.Fatalf("track %v: slice at %v ns overlaps the previous one ending at %v ns", tr, ts, lastEnd[tr])
			}
			lastTs[tr], lastEnd[tr] = ts, ts+dur
			if _, ok := p.thrNames[[2]int{tr.pid, tr.tid}]; !ok {
				t.Fatalf("slice on unnamed track %v", tr)
			}
			p.slices = append(p.slices, e)
		case "C":
			num(t, e, "ts")
			args, _ := e["args"].(map[string]any)
			if len(args) == 0 {
				t.Fatalf("counter without values: %v", e)
			}
			for _, v := range args {
				if _, ok := v.(float64); !ok {
					t.Fatalf("counter value %v is not a number", v)
				}
			}
			p.counters = append(p.counters, e)
		default:
			t.Fatalf("unexpected phase %q", ph)
		}
		if _, ok := p.procNames[pid]; !ok {
			t.Fatalf("event on unnamed process %d: %v", pid, e)
		}
	}
	return p
}

func writeTrace(t *testing.T, inputs ...string) ([]byte, *trace.Summary) {
	t.Helper()
	var buf bytes.Buffer
	sum, err := trace.Write(&buf, inputs, report.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return buf.Bytes(), sum
}

func TestTraceFromRun(t *testing.T) {
	dir := t.TempDir()
	_, truths, err := reporttest.WriteRun(dir, 2, reporttest.Options{Seed: 9, DropEvery: 53, Channels: 3})
	if err != nil {
		t.Fatal(err)
	}
	data, sum := writeTrace(t, dir)
	p := validate(t, data)

	paired := 0
	for _, tr := range truths {
		for _, ds := range tr.Durations {
			paired += len(ds)
		}
	}
	if len(p.slices) != paired || sum.Slices != paired {
		t.Fatalf("%d slices (summary %d), want %d paired work items", len(p.slices), sum.Slices, paired)
	}
	run, err := report.Read([]string{dir}, report.Options{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := p.file.OtherData["unpaired_starts"].(float64); uint64(got) != run.Hooks["all"].UnpairedStarts || got == 0 {
		t.Errorf("unpaired_starts %v, want %d (> 0 with drops)", got, run.Hooks["all"].UnpairedStarts)
	}
	if got := p.file.OtherData["unpaired_stops"].(float64); uint64(got) != run.Hooks["all"].UnpairedStops {
		t.Errorf("unpaired_stops %v, want %d", got, run.Hooks["all"].UnpairedStops)
	}
	if len(p.counters) != len(run.Stats) {
		t.Errorf("%d counter events, want one per dump_stats line (%d)", len(p.counters), len(run.Stats))
	}
	last := p.counters[len(p.counters)-1]["args"].(map[string]any)["all"].(float64)
	if int(last) != truths[1].Dropped {
		t.Errorf("last drop counter %v, want %d", last, truths[1].Dropped)
	}
	// Rank r is process 4242+r on device r: a trace process per process
	// (file), 100 apart; without comm lines no rank names it.
	if p.procNames[0] != "node0 pid 4242" || p.procNames[100] != "node0 pid 4243" || len(p.procNames) != 2 {
		t.Errorf("process names %v", p.procNames)
	}
	for ch := 0; ch < 3; ch++ {
		if p.thrNames[[2]int{100, ch + 1}] != "channel "+strconv.Itoa(ch) {
			t.Errorf("thread names %v", p.thrNames)
		}
	}

	// Placement on the host timeline: the generator's device clock runs
	// DeviceOffsetNs behind unix time, so trace ts + origin must be the
	// START's device timestamp + DeviceOffsetNs.
	origin := int64(p.file.OtherData["time_origin_unix_ns"].(float64))
	if origin < reporttest.StartUnixNs || origin > reporttest.StartUnixNs+1e6 {
		t.Errorf("time origin %d, want about %d", origin, int64(reporttest.StartUnixNs))
	}
	if !strings.Contains(p.file.OtherData["clock"].(string), "host_ns = ts - device_ns + host_unix_ns") {
		t.Errorf("clock note: %v", p.file.OtherData["clock"])
	}
	starts := map[string]uint64{} // "device/channel/wc" -> START device ts
	run, _ = report.Read([]string{dir}, report.Options{}, func(w *report.WorkItem) {
		starts[fmt.Sprintf("%d/%d/%d", w.Device, w.Channel, w.WorkCounter)] = w.Start
	})
	for _, s := range p.slices[:50] {
		args := s["args"].(map[string]any)
		k := fmt.Sprintf("%v/%v/%v", args["device"], args["channel"], args["workCounter"])
		dev, ok := starts[k]
		if !ok {
			t.Fatalf("slice %v has no work item", s)
		}
		host := int64(dev) + reporttest.DeviceOffsetNs
		got := origin + ns(num(t, s, "ts"))
		if got != host {
			t.Fatalf("slice %s placed at %d, want %d", k, got, host)
		}
		if s["name"] == "" || args["funcId"] == nil || args["hook"] != "all" || !strings.HasPrefix(fmt.Sprint(args["comm"]), "not known") {
			t.Fatalf("slice args %v", s)
		}
	}
}

// Two communicators on one device with the same channel ids: their work
// items overlap in time and must go to separate lanes of the channel. The
// two files have the same host, pid and start time: one process, as if its
// communicators' records had been split over two files.
func TestTraceOverlappingCommunicatorsGetLanes(t *testing.T) {
	dir := t.TempDir()
	a, b := filepath.Join(dir, "a.jsonl"), filepath.Join(dir, "b.jsonl")
	ta, err := reporttest.Write(a, reporttest.Options{Seed: 1, PID: 1, Channels: 2, Items: 30})
	if err != nil {
		t.Fatal(err)
	}
	tb, err := reporttest.Write(b, reporttest.Options{Seed: 2, PID: 1, Channels: 2, Items: 30})
	if err != nil {
		t.Fatal(err)
	}
	data, sum := writeTrace(t, dir)
	p := validate(t, data)
	want := 0
	for _, tr := range []*reporttest.Truth{ta, tb} {
		for _, ds := range tr.Durations {
			want += len(ds)
		}
	}
	if len(p.slices) != want {
		t.Fatalf("%d slices, want %d", len(p.slices), want)
	}
	if sum.Processes != 1 || sum.Tracks < 4 {
		t.Errorf("summary %+v: want one device with two lanes per channel", sum)
	}
	if p.thrNames[[2]int{0, 2}] != "channel 0 #2" {
		t.Errorf("thread names %v", p.thrNames)
	}
}

// Work items that follow each other on a channel, each STOP the next START,
// stay on one lane: a slice may start where the previous one ends. Their ts
// and dur, written in microseconds to the nanosecond, add up to the next ts
// only as whole nanoseconds (as float64, in a CI run, a slice's ts + dur
// came out 41815.683000000005 where the next slice's ts was 41815.683).
func TestTraceBackToBackItemsShareALane(t *testing.T) {
	dir := t.TempDir()
	truth, err := reporttest.Write(filepath.Join(dir, "a.jsonl"), reporttest.Options{Seed: 3, Channels: 2, Items: 300, BackToBack: true})
	if err != nil {
		t.Fatal(err)
	}
	data, sum := writeTrace(t, dir)
	p := validate(t, data)
	want := 0
	for _, ds := range truth.Durations {
		want += len(ds)
	}
	if len(p.slices) != want || sum.Tracks != 2 {
		t.Errorf("%d slices on %d tracks, want %d on one lane per channel (2); threads %v", len(p.slices), sum.Tracks, want, p.thrNames)
	}
}

// Two processes of one host that both saw their GPU as device 0 (a job
// with one process per GPU) are two trace processes, not one.
func TestTraceProcessesOfOneHostStayApart(t *testing.T) {
	dir := t.TempDir()
	for _, pid := range []int{7, 8} {
		if _, err := reporttest.Write(filepath.Join(dir, fmt.Sprintf("p%d.jsonl", pid)), reporttest.Options{Seed: uint64(pid), PID: pid, Items: 10}); err != nil {
			t.Fatal(err)
		}
	}
	data, sum := writeTrace(t, dir)
	p := validate(t, data)
	if sum.Processes != 2 || p.procNames[0] != "node0 pid 7" || p.procNames[100] != "node0 pid 8" {
		t.Errorf("%d processes, names %v: want pid 7 and pid 8 apart", sum.Processes, p.procNames)
	}
}

func TestTraceHostsGetDistinctProcesses(t *testing.T) {
	dir := t.TempDir()
	for i, host := range []string{"nodeB", "nodeA"} {
		if _, err := reporttest.Write(filepath.Join(dir, host+".jsonl"), reporttest.Options{Seed: uint64(i), Host: host, Items: 10}); err != nil {
			t.Fatal(err)
		}
	}
	data, _ := writeTrace(t, dir)
	p := validate(t, data)
	if p.procNames[0] != "nodeA pid 4242" || p.procNames[100000] != "nodeB pid 4242" {
		t.Errorf("process names %v", p.procNames)
	}
}
