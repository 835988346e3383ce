package gpu

import (
	"encoding/binary"
	"errors"
	"path/filepath"
	"sort"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ncclhooks/ncclhooks/internal/cuda"
	"github.com/ncclhooks/ncclhooks/internal/gputest"
	gpuharness "github.com/ncclhooks/ncclhooks/internal/harness/gpuharness"
	"github.com/ncclhooks/ncclhooks/internal/hookgen"
	"github.com/ncclhooks/ncclhooks/internal/hookgen/hooktest"
)

func TestCheckEntryAddress(t *testing.T) {
	for _, tc := range []struct {
		addr uint64
		want string // "" = accepted
	}{
		{0, "null"},
		{0x80, "module-relative"},
		{0xffffffff, "module-relative"},
		{0x7f12_3456_7000, ""},
	} {
		err := CheckEntryAddress(tc.addr)
		if (tc.want == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("CheckEntryAddress(%#x) = %v, want %q", tc.addr, err, tc.want)
		}
	}
}

func allEventsModule(t *testing.T, slots int) *hookgen.Module {
	t.Helper()
	h := hooktest.Hook("all", "timestamp", "workCounter", "funcId", "channelId", "phase")
	h.Buffer.Slots = slots
	m, err := hookgen.Generate(hooktest.Profile(h))
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func TestTraceErrorNamesProfilePosition(t *testing.T) {
	m := allEventsModule(t, 64)
	span := narrowestHookSpan(t, m)
	ce := &cuda.CompileError{Name: SourceName, Lines: []cuda.DiagLine{
		{File: SourceName, Line: span.Start, Kind: "error", Msg: "boom"},
		{File: SourceName, Line: 1, Kind: "warning", Msg: "header"},
	}}
	e := traceError(m, "sm_90", ce)
	if e.Diags[0].Pos != span.Pos || e.Diags[0].Hook != span.Hook {
		t.Fatalf("diag = %+v, want the span %+v", e.Diags[0], span)
	}
	if msg := e.Error(); !strings.Contains(msg, span.Pos.String()) || !strings.Contains(msg, "boom") || strings.Contains(msg, "header") {
		t.Fatalf("error = %q, want the profile position and only the error", msg)
	}
}

// narrowestHookSpan is the smallest generated span traced to a hook whose
// first line ends a statement or comment, so that code appended to it is
// compiled and diagnosed on that line.
func narrowestHookSpan(t *testing.T, m *hookgen.Module) hookgen.LineSpan {
	t.Helper()
	lines := strings.Split(m.Source, "\n")
	var best hookgen.LineSpan
	for _, s := range m.Lines {
		l := strings.TrimSpace(lines[s.Start-1])
		if s.Hook == "" || !(strings.HasSuffix(l, "*/") || strings.HasSuffix(l, ";")) {
			continue
		}
		if best.Hook == "" || s.End-s.Start < best.End-best.Start {
			best = s
		}
	}
	if best.Hook == "" {
		t.Fatal("the generated module has no span traced to a hook")
	}
	return best
}

// openLib returns the CUDA libraries or skips the test where no GPU is.
func openLib(t *testing.T) *cuda.Lib {
	t.Helper()
	lib, err := cuda.OpenGPU()
	gputest.Open(t, err)
	return lib
}

// played is a loaded generated module and NCCL's part: the harness's
// ncclKernelMain model (package harness/gpu), a module of its own that calls
// the hook through the resolved address.
type played struct {
	dev *Device
}

func loadWithCaller(t *testing.T, lib *cuda.Lib, m *hookgen.Module, cache *cuda.Cache) *played {
	t.Helper()
	comp, err := Compile(m, lib, Options{Cache: cache})
	if err != nil {
		t.Fatal(err)
	}
	return loadCompiled(t, comp)
}

func loadCompiled(t *testing.T, comp *Compiled) *played {
	t.Helper()
	bd, err := comp.Load(0)
	if err != nil {
		t.Fatal(err)
	}
	dev := bd.(*Device)
	t.Cleanup(func() { dev.Close() })
	return &played{dev: dev}
}

// run plays blocks channels of n work items each (n a multiple of 4), with
// channelId = block, workCounter = item + 1 (NCCL counts from 1) and funcId = 7.
func (p *played) run(t *testing.T, blocks, n int) {
	t.Helper()
	cfg := gpuharness.Config{Comms: 1, Channels: blocks, Launches: 1, Batches: n / 4, ItemsPerBatch: 4,
		BytesPerItem: 16, FuncIDs: []uint32{7}, Replays: 1}
	if _, err := gpuharness.Run(p.dev.d.(cudaDriver).d, uint64(p.dev.Entry()), []uint64{uint64(p.dev.Ctx())}, cfg); err != nil {
		t.Fatalf("the caller module calling the resolved hook: %v", err)
	}
}

type rec struct {
	channel, work, phase uint64
}

// TestGPUGeneratedHookCalledFromAnotherModule is the backend end to end on
// the device: a generated module, loaded and resolved, called through its
// address by a kernel of another module; records land in host-mapped slots
// with the publication protocol of docs/ARCHITECTURE.md.
func TestGPUGeneratedHookCalledFromAnotherModule(t *testing.T) {
	lib := openLib(t)
	const slots = 4096
	m := allEventsModule(t, slots)
	p := loadWithCaller(t, lib, m, nil)
	dev := p.dev
	if err := dev.WriteLimit(0, slots); err != nil { // the drain's first limit
		t.Fatal(err)
	}
	const blocks, n = 16, 100 // 3200 events, below the slot count
	start := time.Now()
	p.run(t, blocks, n)
	t.Logf("%d events in %v", 2*blocks*n, time.Since(start))

	ctl := make([]uint64, m.CtlWords())
	if err := dev.ReadCtl(ctl); err != nil {
		t.Fatal(err)
	}
	if ctl[0] != 2*blocks*n || ctl[1] != slots {
		t.Fatalf("ctl = %v, want head %d and limit %d", ctl, 2*blocks*n, slots)
	}
	lay := &m.Hooks[0].Layout
	words := lay.SlotWords()
	buf := dev.Slots(0)
	payload := make([]byte, 4*words)
	var got []rec
	var vals []hookgen.Value
	for pos := range ctl[0] {
		for i := range words {
			w := atomic.LoadUint64(&buf[int(pos)*words+i])
			if uint32(w>>32) != uint32(pos+1) {
				t.Fatalf("position %d word %d: stamp %d, want %d", pos, i, w>>32, pos+1)
			}
			binary.LittleEndian.PutUint32(payload[4*i:], uint32(w))
		}
		vals = lay.Decode(payload, vals)
		r := rec{}
		for i, f := range lay.Fields {
			switch f.Name {
			case "channelId":
				r.channel = vals[i].U
			case "workCounter":
				r.work = vals[i].U
			case "phase":
				r.phase = vals[i].U
			case "funcId":
				if vals[i].U != 7 {
					t.Fatalf("position %d: funcId %d, want 7", pos, vals[i].U)
				}
			case "timestamp":
				if vals[i].U == 0 {
					t.Fatalf("position %d: zero timestamp", pos)
				}
			}
		}
		got = append(got, r)
	}
	var want []rec
	for b := range blocks {
		for i := range n {
			want = append(want, rec{uint64(b), uint64(i) + 1, 0}, rec{uint64(b), uint64(i) + 1, 1})
		}
	}
	less := func(s []rec) func(i, j int) bool {
		return func(i, j int) bool {
			a, b := s[i], s[j]
			if a.channel != b.channel {
				return a.channel < b.channel
			}
			if a.work != b.work {
				return a.work < b.work
			}
			return a.phase < b.phase
		}
	}
	sort.Slice(got, less(got))
	sort.Slice(want, less(want))
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("records differ at %d: got %+v, want %+v", i, got[i], want[i])
		}
	}

	// Past the limit, drop_newest marks holes instead of writing slots.
	p.run(t, 1, slots/2) // slots more events: positions 3200..3200+slots-1
	if err := dev.ReadCtl(ctl); err != nil {
		t.Fatal(err)
	}
	holes := dev.Holes(0)
	for pos := uint64(slots); pos < ctl[0]; pos++ {
		if h := atomic.LoadUint32(&holes[pos%slots]); h != uint32(pos+1) {
			t.Fatalf("position %d past the limit: hole stamp %d, want %d", pos, h, pos+1)
		}
	}
}

func TestGPUWholeProgramIsRefused(t *testing.T) {
	lib := openLib(t)
	c := newCompiled(allEventsModule(t, 64), lib, Options{Budget: DefaultRegisterBudget})
	c.wholeProgram = true
	d, err := c.Load(0)
	if err == nil {
		d.Close()
		t.Fatal("a whole-program module was loaded and its address accepted")
	}
	if !strings.Contains(err.Error(), "module-relative") {
		t.Fatalf("err = %v, want the module-relative refusal", err)
	}
	t.Log(err)
}

func TestGPUCacheAndCompileErrors(t *testing.T) {
	lib := openLib(t)
	cache, err := cuda.OpenCache(filepath.Join(t.TempDir(), "cache"))
	if err != nil {
		t.Fatal(err)
	}
	m := allEventsModule(t, 64)
	cold, err := Compile(m, lib, Options{Cache: cache})
	if err != nil {
		t.Fatal(err)
	}
	warm, err := Compile(m, lib, Options{Cache: cache})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("cold: %s; warm: %s", cold.Info(), warm.Info())
	if strings.Contains(cold.Info(), "cache hit") || !strings.Contains(warm.Info(), "cache hit") {
		t.Fatalf("cold %q, warm %q", cold.Info(), warm.Info())
	}

	// Break one line that belongs to a hook: the error must name the
	// profile position of that hook's construct.
	span := narrowestHookSpan(t, m)
	lines := strings.Split(m.Source, "\n")
	lines[span.Start-1] += " int hk_broken = ;"
	bad := *m
	bad.Source = strings.Join(lines, "\n")
	_, err = Compile(&bad, lib, Options{})
	var ce *CompileError
	if !errors.As(err, &ce) {
		t.Fatalf("err = %v, want a *CompileError", err)
	}
	if !strings.Contains(err.Error(), span.Pos.String()) {
		t.Fatalf("error does not name %s:\n%v", span.Pos, err)
	}
	t.Log(err)
}

func TestGPUClockAndFuncSets(t *testing.T) {
	lib := openLib(t)
	p := loadWithCaller(t, lib, allEventsModule(t, 64), nil)
	h0, d0, err := p.dev.Clock()
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(50 * time.Millisecond)
	h1, d1, err := p.dev.Clock()
	if err != nil {
		t.Fatal(err)
	}
	dh, dd := int64(h1-h0), int64(d1-d0)
	t.Logf("clock: host %d device %d; after 50ms host +%d device +%d ns", h0, d0, dh, dd)
	if dh < 50e6 || dd < 45e6 || dd-dh > 2e6 || dh-dd > 2e6 {
		t.Fatalf("host and device clocks disagree: host +%d ns, device +%d ns", dh, dd)
	}
	set := make([]uint32, hookgen.FuncSetWords)
	set[0] = 1
	if err := p.dev.WriteFuncSets(nil); err != nil { // all-events has no name predicate
		t.Fatal(err)
	}
	if err := p.dev.WriteFuncSets([][]uint32{set}); err == nil {
		t.Fatal("more function sets than the module has were accepted")
	}
	if err := p.dev.ReadAgg(make([]uint64, 1)); err != nil {
		t.Fatal(err)
	}
}
