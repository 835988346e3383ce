// Package reporttest writes synthetic ncclhooks JSON lines outputs shaped
// like a cpu-backend run of examples/all-events.yaml (header, clock pairs,
// START/STOP records in position order, dump_stats per dump), with planted
// slowdowns, per-channel skew, jitter and drops, for the tests of report,
// trace and the CLI and for the CI example's sample outputs. Everything is
// deterministic for a given Seed.
package reporttest

import (
	"bufio"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"

	"github.com/ncclhooks/ncclhooks/internal/gpuinfo"
)

// Func is one NCCL device function the synthetic workload runs.
type Func struct {
	ID     int
	Name   string
	BaseNs float64 // median work-item duration
}

// DefaultFuncs are three NCCL-style functions with realistic durations.
var DefaultFuncs = []Func{
	{ID: 12, Name: "AllReduce_Sum_f32_RING_LL", BaseNs: 18_000},
	{ID: 40, Name: "AllGather_RING_LL128", BaseNs: 42_000},
	{ID: 57, Name: "ReduceScatter_Sum_bf16_RING_SIMPLE", BaseNs: 95_000},
}

// Options describe one process's output.
type Options struct {
	Profile  string // header profile name; default "all-events"
	Host     string // default "node0"
	PID      int    // default 4242
	Devices  []int  // default [0]
	Channels int    // default 4
	Funcs    []Func // default DefaultFuncs
	Items    int    // work items per channel per device; default 200
	Seed     uint64
	// Jitter is the relative spread of durations (uniform in ±Jitter); default 0.02.
	Jitter float64
	// Slowdown multiplies the durations of the named functions (1.10: 10% slower).
	Slowdown map[string]float64
	// ChannelSlowdown multiplies the durations on the given channels (skew).
	ChannelSlowdown map[int]float64
	// BackToBack starts each work item of a channel at its previous one's
	// STOP, as a channel's items can follow each other; default a 2 us gap.
	BackToBack bool
	// DropEvery leaves out every n-th record as a buffer_full drop (0: none).
	DropEvery int
	// Dumps is the number of dump_stats rounds, the last one final; default 3.
	Dumps int
	// RecordDuration writes STOP records with a device-computed duration
	// field instead of START and STOP records.
	RecordDuration bool
	// NoFinal leaves out the final dump (a run that did not finalize).
	NoFinal bool
	// Scale multiplies every duration (a run-wide effect, as the machine's
	// state gives a real run); 0: 1.
	Scale float64
	// Model is the device model written in the clock lines ("" leaves it
	// out, as outputs before models were recorded).
	Model string
	// ClockEventReasons, when set, writes a device line per device (named
	// Model) with these NVML clock event reasons, as a throttled GPU's
	// outputs have.
	ClockEventReasons uint64
}

func (o *Options) defaults() {
	if o.Profile == "" {
		o.Profile = "all-events"
	}
	if o.Host == "" {
		o.Host = "node0"
	}
	if o.PID == 0 {
		o.PID = 4242
	}
	if len(o.Devices) == 0 {
		o.Devices = []int{0}
	}
	if o.Channels == 0 {
		o.Channels = 4
	}
	if len(o.Funcs) == 0 {
		o.Funcs = DefaultFuncs
	}
	if o.Items == 0 {
		o.Items = 200
	}
	if o.Jitter == 0 {
		o.Jitter = 0.02
	}
	if o.Dumps == 0 {
		o.Dumps = 3
	}
}

// Device clocks: the device timer runs DeviceOffsetNs behind unix time.
const (
	StartUnixNs    = 1_760_000_000_000_000_000
	DeviceOffsetNs = 1_759_990_000_000_000_000 // device_ns = host_unix_ns - this
	Hook           = "all"
)

type event struct {
	ts, wc   uint64
	fn       Func
	ch       int
	phase    int
	duration uint64
}

// Truth is what a written file contains, for tests to check against.
type Truth struct {
	Records, Dropped int
	// Durations by function name, ns, of the work items whose START and STOP
	// were both written (or whose duration was recorded).
	Durations map[string][]uint64
}

// Write writes one process's JSON lines file at path.
func Write(path string, o Options) (*Truth, error) {
	o.defaults()
	rng := rand.New(rand.NewPCG(o.Seed, 0x6e63636c))
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	w := bufio.NewWriter(f)
	line := func(v map[string]any) {
		b, _ := json.Marshal(v)
		w.Write(b)
		w.WriteByte('\n')
	}
	line(map[string]any{"type": "header", "format": 1, "profile": o.Profile, "profile_file": "examples/all-events.yaml",
		"host": o.Host, "pid": o.PID, "backend": "cpu", "start_unix_ns": StartUnixNs})
	for _, d := range o.Devices {
		clock := map[string]any{"type": "clock", "device": d, "host_unix_ns": uint64(StartUnixNs), "device_ns": uint64(StartUnixNs - DeviceOffsetNs)}
		if o.Model != "" {
			clock["model"] = o.Model
		}
		line(clock)
		if o.ClockEventReasons != 0 {
			r := o.ClockEventReasons
			dl := map[string]any{"type": "device", "device": d, "time_unix_ns": StartUnixNs, "name": o.Model,
				"uuid": fmt.Sprintf("GPU-%08x-0000-0000-0000-%012x", o.PID, d), "clock_event_reasons": r,
				"throttle": gpuinfo.ReasonNames(r)}
			if gpuinfo.Slowdown(r) != 0 {
				dl["slowdown"] = true
			}
			line(dl)
		}
	}
	truth := &Truth{Durations: map[string][]uint64{}}
	for _, dev := range o.Devices {
		evs := o.events(rng)
		written := map[[2]uint64]int{} // (channel, wc) -> phases written
		kept := make([]bool, len(evs))
		for i := range evs {
			kept[i] = o.DropEvery == 0 || (i+1)%o.DropEvery != 0
		}
		for i, e := range evs {
			if kept[i] {
				written[[2]uint64{uint64(e.ch), e.wc}]++
			}
		}
		perDump := (len(evs) + o.Dumps - 1) / o.Dumps
		var recs, drops, lastDrops int
		dump := 0
		for i, e := range evs {
			if kept[i] {
				rec := map[string]any{"type": "record", "hook": Hook, "device": dev, "seq": i,
					"timestamp": e.ts, "workCounter": e.wc, "funcId": e.fn.ID, "channelId": e.ch, "phase": e.phase, "func": e.fn.Name}
				if o.RecordDuration {
					rec["duration"], rec["paired"] = e.duration, 1
				}
				line(rec)
				recs++
				complete := o.RecordDuration || written[[2]uint64{uint64(e.ch), e.wc}] == 2
				if e.phase == 1 && complete {
					truth.Durations[e.fn.Name] = append(truth.Durations[e.fn.Name], e.duration)
				}
			} else {
				drops++
			}
			if (i+1)%perDump == 0 || i == len(evs)-1 {
				dump++
				final := i == len(evs)-1
				if final && o.NoFinal {
					break
				}
				line(map[string]any{"type": "dump_stats", "hook": Hook, "device": dev, "dump": dump, "final": final,
					"time_unix_ns": int64(e.ts + DeviceOffsetNs), "matched_total": recs + drops, "records_total": recs,
					"dropped_total": drops, "records_since_last_dump": 0, "dropped_since_last_dump": drops - lastDrops,
					"dropped_buffer_full_total": drops, "dropped_overwritten_total": 0, "dropped_torn_total": 0, "dropped_ring_full_total": 0})
				lastDrops = drops
			}
		}
		truth.Records += recs
		truth.Dropped += drops
	}
	if err := w.Flush(); err != nil {
		return nil, err
	}
	return truth, f.Close()
}

// events simulates one device: on every channel, work items back to back,
// the same function on every channel for one workCounter (one collective),
// returned in position order (the order the hook reserved them).
func (o *Options) events(rng *rand.Rand) []event {
	var evs []event
	for ch := 0; ch < o.Channels; ch++ {
		t := uint64(StartUnixNs-DeviceOffsetNs) + uint64(ch)*150
		for k := 0; k < o.Items; k++ {
			fn := o.Funcs[k%len(o.Funcs)]
			d := fn.BaseNs * (1 + o.Jitter*(2*rng.Float64()-1))
			if s, ok := o.Slowdown[fn.Name]; ok {
				d *= s
			}
			if s, ok := o.ChannelSlowdown[ch]; ok {
				d *= s
			}
			if o.Scale > 0 {
				d *= o.Scale
			}
			dur := uint64(d)
			wc := uint64(k + 1)
			if !o.RecordDuration {
				evs = append(evs, event{ts: t, wc: wc, fn: fn, ch: ch, phase: 0})
			}
			evs = append(evs, event{ts: t + dur, wc: wc, fn: fn, ch: ch, phase: 1, duration: dur})
			t += dur
			if !o.BackToBack {
				t += 2_000 // a gap between work items
			}
		}
	}
	slices.SortStableFunc(evs, func(a, b event) int {
		switch {
		case a.ts < b.ts:
			return -1
		case a.ts > b.ts:
			return 1
		}
		return 0
	})
	return evs
}

// WriteRun writes one file per rank into dir, named like the JSON lines
// sink's files (ncclhooks-<host>-<pid>.jsonl); rank r gets device r, PID
// 4242+r and Seed+r.
func WriteRun(dir string, ranks int, o Options) ([]string, []*Truth, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, nil, err
	}
	var paths []string
	var truths []*Truth
	for r := 0; r < ranks; r++ {
		ro := o
		ro.defaults()
		ro.PID = 4242 + r
		ro.Devices = []int{r}
		ro.Seed = o.Seed + uint64(r)
		p := filepath.Join(dir, fmt.Sprintf("ncclhooks-%s-%d.jsonl", ro.Host, ro.PID))
		t, err := Write(p, ro)
		if err != nil {
			return nil, nil, err
		}
		paths = append(paths, p)
		truths = append(truths, t)
	}
	return paths, truths, nil
}

// WriteRuns writes n runs of WriteRun into dir/run-01, dir/run-02, ... (the
// layout examples/ci/regress.sh writes), run i with Seed+1000*i and, when
// scales is given, Scale scales[i%len(scales)]. It returns the directory.
func WriteRuns(dir string, n, ranks int, o Options, scales ...float64) (string, error) {
	for i := 0; i < n; i++ {
		ro := o
		ro.Seed = o.Seed + 1000*uint64(i)
		if len(scales) > 0 {
			ro.Scale = scales[i%len(scales)]
		}
		if _, _, err := WriteRun(filepath.Join(dir, fmt.Sprintf("run-%02d", i+1)), ranks, ro); err != nil {
			return "", err
		}
	}
	return dir, nil
}
