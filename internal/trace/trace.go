// Package trace turns ncclhooks JSON lines outputs into a Chrome trace event
// format file (JSON) that the Perfetto UI and chrome://tracing open: a process
// per input file, that is per process of the job, named by its rank (from
// the comm lines), host and pid (every process of a job sees its GPU as
// device 0); in it a track per (communicator, channel), a complete slice per
// work item (START and STOP paired, or a STOP with its recorded duration)
// named after the NCCL function with its communicator in its args, a
// counter track of drops from the dump_stats lines, and a counter track per
// on-device aggregate, drawn from its snapshots.
//
// Device timestamps are placed on the host timeline with the clock line of
// their file and device: host_ns = ts - device_ns + host_unix_ns. The trace's
// timestamps are microseconds since time_origin_unix_ns (the earliest event),
// which keeps nanosecond resolution in a float64.
package trace

import (
	"bufio"
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/ncclhooks/ncclhooks/internal/report"
	"github.com/ncclhooks/ncclhooks/internal/schema"
)

// ClockNote says how device timestamps were placed; it is written into the
// trace's otherData.
const ClockNote = "device timestamps are placed on the host timeline with each file's clock line for the device: " +
	"host_ns = ts - device_ns + host_unix_ns; trace ts = (host_ns - time_origin_unix_ns) / 1000 us"

// Summary says what a trace holds.
type Summary struct {
	Slices         int
	Counters       int // drop counter samples
	FillCounters   int // buffer fill samples (Perfetto format only): one per dump_stats line
	AggCounters    int // aggregate counter samples (one per aggregate line)
	AggTracks      int // aggregate counter tracks: one per aggregate and device
	Processes      int // processes (files)
	Tracks         int // (communicator, channel) tracks, extra lanes included
	UnpairedStarts uint64
	UnpairedStops  uint64
	// NoClock lists "host/device" pairs without a clock line: their slices
	// keep raw device time and do not line up with other devices.
	NoClock []string
}

// Event is one trace event as written (and as the tests read it back).
type Event struct {
	Name string          `json:"name"`
	Cat  string          `json:"cat,omitempty"`
	Ph   string          `json:"ph"`
	Ts   json.Number     `json:"ts,omitempty"`
	Dur  json.Number     `json:"dur,omitempty"`
	Pid  int             `json:"pid"`
	Tid  int             `json:"tid"`
	Args json.RawMessage `json:"args,omitempty"`
}

type slice struct {
	pid, track   int
	comm         int   // the communicator's index on the device; -1: not known
	start, stop  int64 // host ns
	hook, fn     string
	funcID       int64
	counter      uint64
	hasCounter   bool
	device, file int
}

// trackKey is one channel of one communicator of one hook of one device;
// lanes split it when work items overlap (several communicators on the same
// channel id whose records do not say which).
type trackKey struct {
	pid, hook, device, comm, channel int
}

// Write reads the inputs and writes their trace to w in the Chrome trace
// event format (JSON).
func Write(w io.Writer, inputs []string, opts report.Options) (*Summary, error) {
	b, err := build(inputs, opts)
	if err != nil {
		return nil, err
	}
	return b.write(w)
}

// build reads the inputs into a builder holding their slices.
func build(inputs []string, opts report.Options) (*builder, error) {
	opts.AggHistory = true
	var items []report.WorkItem
	run, err := report.Read(inputs, opts, func(it *report.WorkItem) {
		if it.HasTime {
			items = append(items, *it)
		}
	})
	if err != nil {
		return nil, err
	}
	b := newBuilder(run)
	for i := range items {
		b.add(&items[i])
	}
	return b, nil
}

type builder struct {
	run       *report.Run
	hostIdx   map[string]int  // host -> index in sorted order
	pids      map[procKey]int // process -> pid
	hostProcs map[string]int  // processes seen per host
	procs     map[int]string  // pid -> name
	hookIdx   map[string]int
	slices    []slice
	noClock   map[string]bool
	sum       Summary
}

func newBuilder(run *report.Run) *builder {
	b := &builder{run: run, hostIdx: map[string]int{}, pids: map[procKey]int{}, hostProcs: map[string]int{}, procs: map[int]string{}, hookIdx: map[string]int{}, noClock: map[string]bool{}}
	// pid = device on the first host; later hosts get 1000*host index + device.
	var hosts []string
	for _, f := range run.Files {
		if !slices.Contains(hosts, f.Header.Host) {
			hosts = append(hosts, f.Header.Host)
		}
	}
	slices.Sort(hosts)
	for i, h := range hosts {
		b.hostIdx[h] = i
	}
	for i, h := range run.HookNames() {
		b.hookIdx[h] = i
	}
	for _, hc := range run.Hooks {
		b.sum.UnpairedStarts += hc.UnpairedStarts
		b.sum.UnpairedStops += hc.UnpairedStops
	}
	return b
}

// procKey is one process: a run of a process is one file, named by host,
// pid and start time.
type procKey struct {
	host  string
	pid   int
	start int64
}

// pid is the trace process of a file: 100000*host index + 100*the
// process's index on its host (in the order read).
func (b *builder) pid(file int) int {
	h := b.run.Files[file].Header
	k := procKey{h.Host, h.PID, h.StartUnixNs}
	if p, ok := b.pids[k]; ok {
		return p
	}
	idx := b.hostProcs[h.Host]
	b.hostProcs[h.Host]++
	p := 100000*b.hostIdx[h.Host] + 100*idx
	b.pids[k] = p
	b.procs[p] = b.procName(file)
	return p
}

// procName names a trace process by its ranks: "rank 2/4 (host pid 7)",
// with its GPU where it has one with a UUID; without comm lines "host pid 7".
func (b *builder) procName(file int) string {
	f := b.run.Files[file]
	var ranks []string
	devs := map[int]bool{}
	for k, c := range f.Comms {
		ranks = append(ranks, fmt.Sprintf("%d/%d", c.Rank, c.NRanks))
		devs[k[0]] = true
	}
	slices.SortFunc(ranks, func(x, y string) int { return cmp.Compare(rankOf(x), rankOf(y)) })
	ranks = slices.Compact(ranks)
	where := b.run.Process(file)
	for d := range devs {
		if info := f.Devices[d]; len(devs) == 1 && info != nil && info.UUID != "" {
			where += "; " + info.UUID + " " + info.Name
		}
	}
	switch len(ranks) {
	case 0:
		return where
	case 1:
		return "rank " + ranks[0] + " (" + where + ")"
	}
	return "ranks " + strings.Join(ranks, ", ") + " (" + where + ")"
}

// rankOf is the rank of "r/n".
func rankOf(s string) int {
	r, _, _ := strings.Cut(s, "/")
	n, _ := strconv.Atoi(r)
	return n
}

// multiDevice says whether a file's process has several devices: its
// tracks and counters then name the device.
func (b *builder) multiDevice(file int) bool {
	f := b.run.Files[file]
	devs := map[int]bool{}
	for d := range f.Clocks {
		devs[d] = true
	}
	for d := range f.Devices {
		devs[d] = true
	}
	for k := range f.Comms {
		devs[k[0]] = true
	}
	return len(devs) > 1
}

// hostNs places a device timestamp of a file's device on the host timeline.
func (b *builder) hostNs(file, device int, ts uint64) int64 {
	f := b.run.Files[file]
	c, ok := f.Clocks[device]
	if !ok {
		b.noClock[fmt.Sprintf("%s/%d", f.Header.Host, device)] = true
		return int64(ts)
	}
	return c.HostNs(ts)
}

func (b *builder) add(it *report.WorkItem) {
	pid := b.pid(it.File)
	comm := -1
	if c, ok := b.run.Comm(it.File, it.Device, it.Comm); ok {
		comm = c.Comm
	}
	b.slices = append(b.slices, slice{
		pid: pid, track: it.Channel, comm: comm,
		start: b.hostNs(it.File, it.Device, it.Start), stop: b.hostNs(it.File, it.Device, it.Stop),
		hook: it.Hook, fn: it.FuncLabel(), funcID: it.FuncID, counter: it.WorkCounter, hasCounter: it.HasCounter,
		device: it.Device, file: it.File,
	})
}

// micros formats a nanosecond offset as microseconds with ns resolution.
func micros(ns int64) json.Number {
	return json.Number(strconv.FormatFloat(float64(ns)/1e3, 'f', 3, 64))
}

// counter is one point of a drops counter track: the cumulative drops of a
// hook at one dump, on the device's process.
type counter struct {
	pid  int
	name string
	ts   int64
	hook string
	val  uint64
}

// write writes the trace in phases: the counters and the time origin, the
// slices' lanes, then the events (metadata, slices, counters) and otherData.
func (b *builder) write(w io.Writer) (*Summary, error) {
	counters := b.counters()
	origin := b.origin(counters)
	tids, threads := b.lanes()

	ew := newEventWriter(w)
	ew.bw.WriteString("{\"traceEvents\":[\n")
	b.writeMeta(ew, threads)
	b.writeSlices(ew, tids, origin)
	writeCounters(ew, counters, origin)
	b.writeAggCounters(ew, origin)

	b.summarize(len(counters), len(threads))
	fmt.Fprintf(ew.bw, "\n],\n\"displayTimeUnit\":\"ns\",\n\"otherData\":%s}\n", b.otherData(origin))
	if err := ew.bw.Flush(); err != nil {
		return nil, err
	}
	return &b.sum, nil
}

// counters are the drops of every dump_stats line, in the order read.
func (b *builder) counters() []counter {
	var counters []counter
	for _, s := range b.run.Stats {
		counters = append(counters, counter{pid: b.pid(s.File), name: "dropped records (cumulative)" + b.deviceSuffix(s.File, s.Device),
			ts: s.TimeUnixNs, hook: s.Hook, val: s.Dropped})
	}
	return counters
}

// origin is the earliest host time of a slice or counter (0 if none).
func (b *builder) origin(counters []counter) int64 {
	origin := int64(math.MaxInt64)
	for _, s := range b.slices {
		origin = min(origin, s.start)
	}
	for _, c := range counters {
		origin = min(origin, c.ts)
	}
	for _, p := range b.run.AggHistory {
		origin = min(origin, p.Agg.TimeUnixNs)
	}
	if origin == math.MaxInt64 {
		origin = 0
	}
	return origin
}

// lanes sorts the slices and gives each its thread id: a slice goes to the
// first lane of its track (hook, device, communicator, channel) whose last
// slice ended before it starts, so no track holds overlapping slices. Thread
// ids are numbered in that order within each process. It returns the tid
// of each slice and the name of each (pid, tid).
func (b *builder) lanes() ([]int, map[[2]int]string) {
	multiHook := len(b.hookIdx) > 1
	slices.SortFunc(b.slices, func(x, y slice) int {
		return cmp.Or(cmp.Compare(x.pid, y.pid), cmp.Compare(b.hookIdx[x.hook], b.hookIdx[y.hook]), cmp.Compare(x.device, y.device),
			cmp.Compare(x.comm, y.comm), cmp.Compare(x.track, y.track), cmp.Compare(x.start, y.start), cmp.Compare(x.stop, y.stop))
	})
	type lane struct {
		tid int
		end int64
	}
	lanes := map[trackKey][]lane{}
	threads := map[[2]int]string{} // (pid, tid) -> name
	next := map[int]int{}          // pid -> its next tid
	tids := make([]int, len(b.slices))
	for i := range b.slices {
		s := &b.slices[i]
		k := trackKey{s.pid, b.hookIdx[s.hook], s.device, s.comm, s.track}
		ls := lanes[k]
		li := slices.IndexFunc(ls, func(l lane) bool { return l.end <= s.start })
		if li < 0 {
			li = len(ls)
			next[s.pid]++
			ls = append(ls, lane{tid: next[s.pid]})
			name := b.trackName(s, li)
			if multiHook {
				name += " [" + s.hook + "]"
			}
			threads[[2]int{s.pid, next[s.pid]}] = name
		}
		ls[li].end = s.stop
		lanes[k] = ls
		tids[i] = ls[li].tid
	}
	return tids, threads
}

// trackName names lane li of a slice's track: its communicator (or that
// the records do not say it), its channel ("all channels" where the hook
// does not record channelId), and its device where the process has several.
func (b *builder) trackName(s *slice, li int) string {
	name := "all channels"
	if s.track >= 0 {
		name = "channel " + strconv.Itoa(s.track)
	}
	if c, ok := b.run.Files[s.file].Comms[[2]int{s.device, s.comm}]; ok {
		name = fmt.Sprintf("comm %s %s rank %d, %s", c.Name, c.CommID, c.Rank, name)
	}
	if li > 0 {
		name += fmt.Sprintf(" #%d", li+1)
	}
	if b.multiDevice(s.file) {
		name = fmt.Sprintf("device %d: %s", s.device, name)
	}
	return name
}

// deviceSuffix names a counter's device where its process has several.
func (b *builder) deviceSuffix(file, device int) string {
	if b.multiDevice(file) {
		return fmt.Sprintf(", device %d", device)
	}
	return ""
}

// eventWriter writes the events of traceEvents, comma separated.
type eventWriter struct {
	bw    *bufio.Writer
	first bool
}

func newEventWriter(w io.Writer) *eventWriter {
	return &eventWriter{bw: bufio.NewWriterSize(w, 1<<20), first: true}
}

func (ew *eventWriter) emit(e any) {
	data, _ := json.Marshal(e)
	if ew.first {
		ew.first = false
	} else {
		ew.bw.WriteString(",\n")
	}
	ew.bw.Write(data)
}

func (ew *eventWriter) meta(name string, pid, tid int, args any) {
	a, _ := json.Marshal(args)
	ew.emit(Event{Name: name, Ph: "M", Pid: pid, Tid: tid, Args: a})
}

// writeMeta names and orders the processes and their threads (tracks).
func (b *builder) writeMeta(ew *eventWriter, threads map[[2]int]string) {
	pids := make([]int, 0, len(b.procs))
	for p := range b.procs {
		pids = append(pids, p)
	}
	slices.Sort(pids)
	for _, p := range pids {
		ew.meta("process_name", p, 0, map[string]string{"name": b.procs[p]})
		ew.meta("process_sort_index", p, 0, map[string]int{"sort_index": p})
	}
	thr := make([][2]int, 0, len(threads))
	for k := range threads {
		thr = append(thr, k)
	}
	slices.SortFunc(thr, func(x, y [2]int) int { return cmp.Or(cmp.Compare(x[0], y[0]), cmp.Compare(x[1], y[1])) })
	for _, k := range thr {
		ew.meta("thread_name", k[0], k[1], map[string]string{"name": threads[k]})
		ew.meta("thread_sort_index", k[0], k[1], map[string]int{"sort_index": k[1]})
	}
}

// writeSlices writes a complete event per slice, on the thread lanes gave it.
func (b *builder) writeSlices(ew *eventWriter, tids []int, origin int64) {
	for i, s := range b.slices {
		args := map[string]any{"hook": s.hook, "device": s.device, "file": b.run.Files[s.file].Path}
		if s.track >= 0 {
			args["channel"] = s.track
		}
		if s.funcID >= 0 {
			args["funcId"] = s.funcID
		}
		if s.hasCounter {
			args["workCounter"] = s.counter
		}
		if c, ok := b.run.Files[s.file].Comms[[2]int{s.device, s.comm}]; ok {
			args["comm"] = map[string]any{"comm_id": c.CommID, "name": c.Name, "rank": c.Rank, "nranks": c.NRanks}
		} else {
			args["comm"] = "not known: no comm line names it (a hook without the comm field on a device of several communicators)"
		}
		a, _ := json.Marshal(args)
		ew.emit(Event{Name: s.fn, Cat: s.hook, Ph: "X", Ts: micros(s.start - origin), Dur: micros(s.stop - s.start),
			Pid: s.pid, Tid: tids[i], Args: a})
	}
}

// writeCounters writes the drops counters, by process and time.
func writeCounters(ew *eventWriter, counters []counter, origin int64) {
	slices.SortStableFunc(counters, func(x, y counter) int { return cmp.Or(cmp.Compare(x.pid, y.pid), cmp.Compare(x.ts, y.ts)) })
	for _, c := range counters {
		a, _ := json.Marshal(map[string]uint64{c.hook: c.val})
		ew.emit(Event{Name: c.name, Ph: "C", Ts: micros(c.ts - origin), Pid: c.pid, Args: a})
	}
}

// summarize fills in the summary's counts and the devices without a clock.
func (b *builder) summarize(counters, tracks int) {
	b.sum.Slices = len(b.slices)
	b.sum.Counters = counters
	b.sum.Processes = len(b.procs)
	b.sum.Tracks = tracks
	for k := range b.noClock {
		b.sum.NoClock = append(b.sum.NoClock, k)
	}
	slices.Sort(b.sum.NoClock)
}

// otherData is the trace's otherData object: where it came from and how its
// timestamps were placed.
func (b *builder) otherData(origin int64) []byte {
	inputs := make([]string, len(b.run.Files))
	for i, f := range b.run.Files {
		inputs[i] = f.Path
	}
	other, _ := json.Marshal(map[string]any{
		"generator":             "ncclhooks trace",
		"profile":               b.run.Profile,
		"inputs":                inputs,
		"clock":                 ClockNote,
		"time_origin_unix_ns":   origin,
		"slices":                b.sum.Slices,
		"aggregate_counters":    b.sum.AggCounters,
		"unpaired_starts":       b.sum.UnpairedStarts,
		"unpaired_stops":        b.sum.UnpairedStops,
		"devices_without_clock": append([]string{}, b.sum.NoClock...),
	})
	return other
}

// writeAggCounters draws the on-device aggregates over time: a counter
// track per aggregate on its device's process, a series per key (function,
// channel), one sample per aggregate line. The value is what the kind
// keeps: count, sum, min, max; a histogram's mean (sum / count).
func (b *builder) writeAggCounters(ew *eventWriter, origin int64) {
	tracks := map[[2]string]bool{}
	for _, p := range b.run.AggHistory {
		a := p.Agg
		pid := b.pid(p.File)
		what := a.Kind
		if a.Kind == "histogram" {
			what = "mean"
		}
		name := fmt.Sprintf("%s %s (%s)%s", a.Hook, a.Name, what, b.deviceSuffix(p.File, a.Device))
		args := map[string]float64{}
		for _, r := range a.Rows {
			v, ok := aggValue(a.Kind, r)
			if !ok {
				continue
			}
			args[rowLabel(r)] = v
		}
		if len(args) == 0 {
			continue // nothing counted yet: Perfetto needs a value
		}
		data, _ := json.Marshal(args)
		ew.emit(Event{Name: name, Cat: "aggregate", Ph: "C", Ts: micros(a.TimeUnixNs - origin), Pid: pid, Args: data})
		b.sum.AggCounters++
		tracks[[2]string{strconv.Itoa(pid), name}] = true
	}
	b.sum.AggTracks = len(tracks)
}

// aggValue is the value a counter draws for a row; false where the row has
// none (a float sum that is not finite: JSON has no infinity).
func aggValue(kind string, r schema.AggRow) (float64, bool) {
	switch kind {
	case "count":
		return float64(r.Count), true
	case "min":
		if r.Min != nil {
			return float64(*r.Min), true
		}
	case "max":
		if r.Max != nil {
			return float64(*r.Max), true
		}
	case "sum", "histogram":
		f, err := strconv.ParseFloat(string(r.Sum), 64)
		if err != nil || math.IsInf(f, 0) || math.IsNaN(f) {
			return 0, false
		}
		if kind == "histogram" {
			if r.Count == 0 {
				return 0, false
			}
			f /= float64(r.Count)
		}
		return f, true
	}
	return 0, false
}

// rowLabel names a row's series: its function and channel, "all" for an
// aggregate without keys.
func rowLabel(r schema.AggRow) string {
	var parts []string
	if len(r.FuncID) > 0 {
		fn := r.Func
		if fn == "" {
			fn = strings.Trim(string(r.FuncID), `"`)
		}
		parts = append(parts, fn)
	}
	if len(r.ChannelID) > 0 {
		parts = append(parts, "ch "+strings.Trim(string(r.ChannelID), `"`))
	}
	if len(parts) == 0 {
		return "all"
	}
	return strings.Join(parts, " ")
}
