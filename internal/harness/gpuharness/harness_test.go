package gpuharness

import (
	"bytes"
	"os"
	"strings"
	"sync"
	"testing"
	"unsafe"

	"github.com/ncclhooks/ncclhooks/internal/abi"
	"github.com/ncclhooks/ncclhooks/internal/cuda"
	"github.com/ncclhooks/ncclhooks/internal/gputest"
)

// fixture is the GPU state shared by the GPU tests: one device, the harness
// kernels and the two built-in hooks, loaded once.
type fixture struct {
	dev     *cuda.Device
	h       *Harness
	nop     *ModuleHook
	counter *CountingHook
}

var (
	fixtureOnce sync.Once
	shared      *fixture
	openErr     error // from cuda.OpenGPU
	setupErr    error
)

func TestMain(m *testing.M) {
	code := m.Run()
	if shared != nil {
		shared.counter.Close()
		shared.nop.Close()
		shared.h.Close()
		shared.dev.Close()
	}
	os.Exit(code)
}

// gpuFixture skips the test where there is no GPU and fails it where the GPU
// is there but the harness cannot be set up.
func gpuFixture(t *testing.T) *fixture {
	t.Helper()
	fixtureOnce.Do(func() {
		lib, err := cuda.OpenGPU()
		if err != nil {
			openErr = err
			return
		}
		f := &fixture{}
		if f.dev, err = lib.Device(0); err != nil {
			setupErr = err
			return
		}
		if f.h, err = New(f.dev, nil); err != nil {
			setupErr = err
			return
		}
		if f.nop, err = LoadNopHook(f.dev, nil); err != nil {
			setupErr = err
			return
		}
		if f.counter, err = LoadCountingHook(f.dev, nil); err != nil {
			setupErr = err
			return
		}
		shared = f
	})
	gputest.Open(t, openErr)
	if setupErr != nil {
		t.Fatalf("GPU harness setup: %v", setupErr)
	}
	return shared
}

func TestRunCountsExactly(t *testing.T) {
	f := gpuFixture(t)
	for _, tc := range []struct {
		name string
		cfg  Config
	}{
		{"streams", Config{Comms: 4, Channels: 8, Launches: 2, Batches: 16, ItemsPerBatch: 4, BytesPerItem: 32 << 10,
			FuncIDs: []uint32{3, 7, 11}, Replays: 2, LogEvents: true, CounterStride: 1 << 40}}, // emitGPU's stride
		{"graph replays", Config{Comms: 3, Channels: 16, Launches: 3, Batches: 8, ItemsPerBatch: 2, BytesPerItem: 64 << 10,
			FuncIDs: []uint32{1, 2, 3, 4, 5}, Graph: true, Replays: 5, LogEvents: true}},
		{"large items", Config{Comms: 2, Channels: 4, Launches: 1, Batches: 4, ItemsPerBatch: 2, BytesPerItem: 2 << 20,
			FuncIDs: []uint32{9}, Graph: true, Replays: 2, LogEvents: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := f.counter.Reset(); err != nil {
				t.Fatal(err)
			}
			res, err := f.h.Run(f.counter.Hook, tc.cfg)
			if err != nil {
				t.Fatal(err)
			}
			start, stop, err := f.counter.Counts()
			if err != nil {
				t.Fatal(err)
			}
			// comms x channels x launches x batches x items x replays, per phase.
			want := uint64(tc.cfg.Comms*tc.cfg.Channels*tc.cfg.Launches*tc.cfg.Batches*tc.cfg.ItemsPerBatch) * uint64(tc.cfg.Replays)
			if start != want || stop != want {
				t.Errorf("counting hook saw START %d, STOP %d; want %d each", start, stop, want)
			}
			if res.Emitted() != 2*want {
				t.Errorf("kernels emitted %d events, want %d", res.Emitted(), 2*want)
			}
			checkEvents(t, &tc.cfg, res)
			t.Logf("%d events in %.2f ms GPU (%v wall): %.3g events/s", res.Emitted(), res.KernelMs, res.Elapsed, res.EventsPerSec())
		})
	}
}

// checkEvents checks the logged events against the configuration: per
// (communicator, channel) every work counter from FirstCounter (never 0, as
// in NCCL) appears once at START and once at STOP, in order, with the
// batch's function id and rising timestamps; and all communicators were
// running at one same moment.
func checkEvents(t *testing.T, cfg *Config, res *Result) {
	t.Helper()
	if len(res.Events) != cfg.Comms {
		t.Fatalf("event log has %d communicators, want %d", len(res.Events), cfg.Comms)
	}
	itemsPerChannel := cfg.ItemsPerComm() / uint64(cfg.Channels)
	var latestFirst, earliestLast uint64 = 0, ^uint64(0)
	for comm, evs := range res.Events {
		if uint64(len(evs)) != cfg.EventsPerComm() {
			t.Fatalf("communicator %d logged %d events, want %d", comm, len(evs), cfg.EventsPerComm())
		}
		type key struct{ ch, phase uint8 }
		wc0 := cfg.FirstCounter(comm)
		seen := map[key]uint64{} // work items so far: the next work counter is wc0 + seen
		lastTS := map[uint8]uint64{}
		startTS := map[[2]uint64]uint64{}
		first, last := ^uint64(0), uint64(0)
		for _, ev := range evs {
			k := key{ev.ChannelID, ev.Phase}
			if int(ev.ChannelID) >= cfg.Channels || ev.Phase > abi.PhaseStop {
				t.Fatalf("communicator %d: bad event %+v", comm, ev)
			}
			if want := wc0 + seen[k]; ev.WorkCounter != want {
				t.Fatalf("communicator %d channel %d phase %d: work counter %d, want %d (from %d, monotonic, no repeats across launches and replays)",
					comm, ev.ChannelID, ev.Phase, ev.WorkCounter, want, wc0)
			}
			seen[k]++
			batch := (ev.WorkCounter - wc0) / uint64(cfg.ItemsPerBatch) // batches run so far on this channel
			launch := int(batch/uint64(cfg.Batches)) % cfg.Launches
			if want := cfg.FuncID(comm, launch, int(batch%uint64(cfg.Batches))); ev.FuncID != want {
				t.Fatalf("communicator %d channel %d work %d: funcId %d, want %d", comm, ev.ChannelID, ev.WorkCounter, ev.FuncID, want)
			}
			if ev.Timestamp < lastTS[ev.ChannelID] {
				t.Fatalf("communicator %d channel %d: timestamp went back from %d to %d", comm, ev.ChannelID, lastTS[ev.ChannelID], ev.Timestamp)
			}
			lastTS[ev.ChannelID] = ev.Timestamp
			item := [2]uint64{uint64(ev.ChannelID), ev.WorkCounter}
			if ev.Phase == abi.PhaseStart {
				startTS[item] = ev.Timestamp
			} else if s, ok := startTS[item]; !ok || ev.Timestamp < s {
				t.Fatalf("communicator %d channel %d work %d: STOP without an earlier START", comm, ev.ChannelID, ev.WorkCounter)
			}
			first, last = min(first, ev.Timestamp), max(last, ev.Timestamp)
		}
		for ch := range cfg.Channels {
			for _, ph := range []uint8{abi.PhaseStart, abi.PhaseStop} {
				if got := seen[key{uint8(ch), ph}]; got != itemsPerChannel {
					t.Errorf("communicator %d channel %d phase %d: %d work items, want %d", comm, ch, ph, got, itemsPerChannel)
				}
			}
		}
		latestFirst, earliestLast = max(latestFirst, first), min(earliestLast, last)
	}
	if cfg.Comms > 1 && latestFirst >= earliestLast {
		t.Errorf("communicators did not overlap: the last one started at %d, after the first one ended at %d", latestFirst, earliestLast)
	}
}

func TestRunNopAndNullHook(t *testing.T) {
	f := gpuFixture(t)
	cfg := DefaultConfig()
	res, err := Run(f.dev, f.nop.Entry, nil, cfg)
	if err != nil {
		t.Fatal(err)
	}
	for i, n := range res.EmittedPerComm {
		if n != cfg.EventsPerComm() {
			t.Errorf("nop hook: communicator %d emitted %d events, want %d", i, n, cfg.EventsPerComm())
		}
	}
	// A null hook is NCCL's "no hook": no call, no event, the same work.
	res, err = f.h.Run(Hook{Name: "none"}, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if res.Emitted() != 0 {
		t.Errorf("null hook: %d events emitted, want 0", res.Emitted())
	}
	for i, n := range res.ItemsPerComm {
		if n != cfg.ItemsPerComm() {
			t.Errorf("null hook: communicator %d ran %d work items, want %d", i, n, cfg.ItemsPerComm())
		}
	}
}

func TestRunRefusesNonResidentComms(t *testing.T) {
	f := gpuFixture(t)
	cfg := DefaultConfig()
	cfg.Comms, cfg.Channels = MaxComms, MaxChannels
	if _, err := f.h.Run(f.nop.Hook, cfg); err == nil || !strings.Contains(err.Error(), "lower Comms or Channels") {
		t.Fatalf("Run with %d blocks = %v, want a refusal naming Comms and Channels", cfg.Comms*cfg.Channels, err)
	}
}

func TestHookCost(t *testing.T) {
	f := gpuFixture(t)
	if err := f.counter.Reset(); err != nil {
		t.Fatal(err)
	}
	opt := CostOptions{Blocks: 32, Calls: 4000, Rounds: 5, FuncIDs: []uint32{0, 1}}
	rows, err := f.h.HookCost([]Hook{f.counter.Hook}, opt)
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	WriteCostTable(&buf, rows)
	t.Logf("hook cost on %s, %d blocks x %d calls:\n%s", f.dev.Name, opt.Blocks, opt.Calls, buf.String())
	if len(rows) != 2 || rows[0].Hook != "nop" || rows[1].Hook != "counter" {
		t.Fatalf("rows = %+v, want nop then counter", rows)
	}
	if rows[0].NsPerCall <= 0 || rows[0].RatioToNop != 1 {
		t.Errorf("nop row %+v: want a positive cost and ratio 1", rows[0])
	}
	// A device-memory atomic is latency-bound (a dependent round trip to memory, ~250-300 ns on the H200): it must cost more than nothing.
	if rows[1].NsPerCall <= rows[0].NsPerCall {
		t.Errorf("counting hook %.1f ns/call is not above the nop hook's %.1f", rows[1].NsPerCall, rows[0].NsPerCall)
	}
	// Warm-up round included: every call reached the hook.
	start, stop, err := f.counter.Counts()
	if err != nil {
		t.Fatal(err)
	}
	if want := uint64(opt.Rounds+1) * uint64(opt.Blocks*opt.Calls) / 2; start != want || stop != want {
		t.Errorf("counting hook saw START %d, STOP %d during the benchmark; want %d each", start, stop, want)
	}
}

func TestThroughputMeetsPacedRate(t *testing.T) {
	f := gpuFixture(t)
	cfg := Config{Comms: 4, Channels: 16, Launches: 1, Batches: 4000, ItemsPerBatch: 4, BytesPerItem: 4 << 10,
		FuncIDs: []uint32{0}, Replays: 1, EventRate: 20e6}
	var rows []*Throughput
	for _, hk := range []Hook{f.nop.Hook, f.counter.Hook} {
		tp, err := f.h.Throughput(hk, cfg)
		if err != nil {
			t.Fatal(err)
		}
		if tp.Emitted != cfg.Events() {
			t.Errorf("%s: %d events emitted, want %d", hk.Name, tp.Emitted, cfg.Events())
		}
		// Pacing holds batches back, so the rate can only fall short of
		// the target by work or hook time, or pass it by the last batch.
		if tp.EventsPerSec < 0.8*cfg.EventRate || tp.EventsPerSec > 1.05*cfg.EventRate {
			t.Errorf("%s: %.3g events/s, want about %.3g", hk.Name, tp.EventsPerSec, cfg.EventRate)
		}
		rows = append(rows, tp)
	}
	unpaced := cfg
	unpaced.EventRate = 0
	unpaced.BytesPerItem = 16
	for _, hk := range []Hook{f.nop.Hook, f.counter.Hook} {
		tp, err := f.h.Throughput(hk, unpaced)
		if err != nil {
			t.Fatal(err)
		}
		rows = append(rows, tp)
	}
	var buf bytes.Buffer
	WriteThroughputTable(&buf, rows)
	t.Logf("throughput on %s (%d comms x %d channels):\n%s", f.dev.Name, cfg.Comms, cfg.Channels, buf.String())
}

// TestHookKernelsReserveTheBudget reads ptxas's register counts from the
// harness module's compile log (New compiles it with -v): every kernel the
// harness launches with a hook must have at least the registers of a hook
// the plugin accepts, or such a hook faults it; and the harness kernel must
// leave room for maxBlocksPerSM blocks per multiprocessor.
func TestHookKernelsReserveTheBudget(t *testing.T) {
	f := gpuFixture(t)
	log := f.h.Image.Log
	if log == "" {
		t.Fatal("the harness module's compile log is empty: no ptxas -v output to check")
	}
	regs := kernelRegisters(log)
	for _, k := range hookKernels {
		n, ok := regs[k]
		switch {
		case !ok:
			t.Errorf("%s: no register count in the compile log:\n%s", k, log)
		case n < hookRegisters:
			t.Errorf("%s has %d registers, fewer than the %d a hook the plugin accepts may use: such a hook faults it", k, n, hookRegisters)
		}
	}
	if n := regs[kernelHarness]; n*threadsPerBlock*maxBlocksPerSM > registersPerSM {
		t.Errorf("%s has %d registers: %d blocks of %d threads exceed a multiprocessor's %d (maxBlocksPerSM)", kernelHarness, n, maxBlocksPerSM, threadsPerBlock, registersPerSM)
	}
	t.Logf("registers on %s (%s): %v", f.dev.Name, f.dev.Arch(), regs)
}

// The bench's hand-written region hook writes each event's record at the
// event's own position, 2 * workCounter + phase, in its channel's region:
// every word stamped with the position + 1, the chunks the event's fields.
func TestRegionHookWritesEachEventAtItsPosition(t *testing.T) {
	f := gpuFixture(t)
	r, err := LoadRegionHook(f.dev, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	// 64 work items per channel, work counters 1-64: positions 2-129, inside
	// one lap.
	cfg := Config{Comms: 1, Channels: 8, Launches: 2, Batches: 8, ItemsPerBatch: 4, BytesPerItem: 1024,
		FuncIDs: []uint32{3, 5}, Replays: 1, LogEvents: true}
	res, err := f.h.Run(r.Hook, cfg)
	if err != nil {
		t.Fatal(err)
	}
	words := unsafe.Slice((*uint64)(r.host), regionHookBytes/8)
	checked := 0
	for _, ev := range res.Events[0] {
		pos := 2*ev.WorkCounter + uint64(ev.Phase)
		if pos < 2 {
			t.Fatalf("event %+v: position %d, before the first work item's (2): the counters must start at 1", ev, pos)
		}
		if pos >= regionSlots {
			t.Fatalf("event %+v: position %d is past the region's first lap", ev, pos)
		}
		slot := words[6*(uint64(ev.ChannelID)*regionSlots+pos):][:6]
		want := []uint32{uint32(ev.Timestamp), uint32(ev.Timestamp >> 32), uint32(ev.WorkCounter), uint32(ev.WorkCounter >> 32),
			ev.FuncID, uint32(ev.ChannelID) | uint32(ev.Phase)<<8}
		for i, w := range slot {
			if w != uint64(uint32(pos+1))<<32|uint64(want[i]) {
				t.Fatalf("event %+v: word %d of its slot is %#x, want stamp %d and chunk %#x", ev, i, w, pos+1, want[i])
			}
		}
		checked++
	}
	if want := 2 * 8 * 64; checked != want {
		t.Fatalf("checked %d events, want %d", checked, want)
	}
}
