package gpuharness

import (
	"bytes"
	"strings"
	"testing"
)

// These tests need no GPU.

func TestValidateNamesTheKnob(t *testing.T) {
	for _, tc := range []struct {
		name   string
		mutate func(*Config)
		want   string
	}{
		{"no comms", func(c *Config) { c.Comms = 0 }, "Comms = 0: want 1..64"},
		{"too many channels", func(c *Config) { c.Channels = 65 }, "Channels = 65: want 1..64"},
		{"no launches", func(c *Config) { c.Launches = 0 }, "Launches = 0"},
		{"no batches", func(c *Config) { c.Batches = 0 }, "Batches = 0"},
		{"no items", func(c *Config) { c.ItemsPerBatch = 0 }, "ItemsPerBatch = 0"},
		{"odd bytes", func(c *Config) { c.BytesPerItem = 100 }, "BytesPerItem = 100: must be a multiple of 16"},
		{"no replays", func(c *Config) { c.Replays = 0 }, "Replays = 0"},
		{"no func ids", func(c *Config) { c.FuncIDs = nil }, "FuncIDs is empty"},
		{"negative rate", func(c *Config) { c.EventRate = -1 }, "EventRate = -1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := DefaultConfig()
			tc.mutate(&cfg)
			err := cfg.Validate()
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Validate() = %v, want an error containing %q", err, tc.want)
			}
		})
	}
	cfg := DefaultConfig()
	if err := cfg.Validate(); err != nil {
		t.Fatalf("DefaultConfig().Validate() = %v", err)
	}
}

func TestFuncIDCyclesPerBatchAndDiffersPerComm(t *testing.T) {
	cfg := DefaultConfig()
	cfg.FuncIDs = []uint32{10, 20, 30}
	cfg.Batches = 4
	// The kernel's rule: FuncIDs[(funcOffset + b) % n], funcOffset = (comm + launch*Batches) % n.
	for comm := range 3 {
		for launch := range 3 {
			for b := range cfg.Batches {
				want := cfg.FuncIDs[(comm+launch*cfg.Batches+b)%3]
				if got := cfg.FuncID(comm, launch, b); got != want {
					t.Fatalf("FuncID(%d, %d, %d) = %d, want %d", comm, launch, b, got, want)
				}
			}
		}
	}
	if cfg.FuncID(0, 0, 0) == cfg.FuncID(1, 0, 0) {
		t.Errorf("communicators 0 and 1 start with the same function id %d", cfg.FuncID(0, 0, 0))
	}
}

func TestEventCounts(t *testing.T) {
	cfg := Config{Comms: 3, Channels: 5, Launches: 2, Batches: 7, ItemsPerBatch: 4, BytesPerItem: 16, FuncIDs: []uint32{0}, Replays: 6}
	if got, want := cfg.ItemsPerComm(), uint64(5*2*7*4*6); got != want {
		t.Errorf("ItemsPerComm() = %d, want %d", got, want)
	}
	if got, want := cfg.Events(), uint64(3*5*2*7*4*2*6); got != want {
		t.Errorf("Events() = %d, want %d", got, want)
	}
	if got, want := cfg.logCap()*uint64(cfg.Channels), cfg.EventsPerComm(); got != want {
		t.Errorf("log capacity %d per communicator, want %d", got, want)
	}
}

// NCCL's work counters start at 1: so do every communicator's, with or
// without a stride between them.
func TestFirstCounterIsNeverZero(t *testing.T) {
	cfg := DefaultConfig()
	for comm := range cfg.Comms {
		if got := cfg.FirstCounter(comm); got != 1 {
			t.Errorf("no stride: communicator %d starts at %d, want 1", comm, got)
		}
	}
	cfg.CounterStride = 1 << 40
	for comm := range cfg.Comms {
		if got, want := cfg.FirstCounter(comm), uint64(comm)<<40+1; got != want || uint32(got) != 1 {
			t.Errorf("stride 1<<40: communicator %d starts at %#x, want %#x (low 32 bits 1)", comm, got, want)
		}
	}
}

func TestBatchPeriodMeetsRate(t *testing.T) {
	cfg := Config{Comms: 4, Channels: 16, ItemsPerBatch: 4, EventRate: 20e6}
	// 4 comms x 16 channels x 4 items x 2 events = 512 events per batch period.
	if got, want := cfg.batchPeriodNs(), uint64(25600); got != want {
		t.Errorf("batchPeriodNs() = %d, want %d", got, want)
	}
	cfg.EventRate = 0
	if got := cfg.batchPeriodNs(); got != 0 {
		t.Errorf("unpaced batchPeriodNs() = %d, want 0", got)
	}
}

func TestFillPatternReducesExactly(t *testing.T) {
	// u32 lanes wrap: n reductions of x are n*x mod 2^32, which verifyData relies on.
	x := fillPattern(12345, fillSeed(3))
	var acc uint32
	for range 1000 {
		acc += x
	}
	if acc != 1000*x {
		t.Errorf("1000 wrapped additions of %#x = %#x, want %#x", x, acc, 1000*x)
	}
	if fillPattern(1, fillSeed(0)) == fillPattern(1, fillSeed(1)) {
		t.Error("communicators 0 and 1 have the same source pattern")
	}
}

func TestTables(t *testing.T) {
	var buf bytes.Buffer
	if err := WriteCostTable(&buf, []HookCost{{Hook: "nop", NsPerCall: 72.4, RatioToNop: 1}, {Hook: "counter", NsPerCall: 310, RatioToNop: 4.28}}); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"ns/call", "nop", "72.4", "counter", "4.28"} {
		if !strings.Contains(buf.String(), want) {
			t.Errorf("cost table lacks %q:\n%s", want, buf.String())
		}
	}
	buf.Reset()
	if err := WriteThroughputTable(&buf, []*Throughput{{Hook: "nop", TargetRate: 2e7, Emitted: 123456, EventsPerSec: 1.99e7}}); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"ev/s", "2e+07", "123456", "1.99e+07"} {
		if !strings.Contains(buf.String(), want) {
			t.Errorf("throughput table lacks %q:\n%s", want, buf.String())
		}
	}
}
