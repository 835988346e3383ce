package hookgen_test

import (
	"encoding/binary"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/ncclhooks/ncclhooks/internal/config"
	"github.com/ncclhooks/ncclhooks/internal/hookgen"
	"github.com/ncclhooks/ncclhooks/internal/hookgen/hooktest"
)

// richProfile uses every construct the generator knows.
func richProfile(t testing.TB) *config.Profile {
	all := hooktest.Hook("all", "timestamp", "workCounter", "funcId", "channelId", "phase")
	lat := hooktest.Hook("latency", "funcId", "duration", "smid", "clock", "globaltimer", "cudaDev", "paired")
	dur := hooktest.Let(t, "dur_us", "duration / 1000")
	twice := hooktest.Let(t, "twice", "dur_us * 2", dur)
	lat.Lets = []*config.Let{dur, twice}
	lat.When = hooktest.MustExpr(t, `phase == STOP && (func startsWith "AllReduce" || func in ["Broadcast_RING", "x*/y"]) && twice >= 0`, dur, twice)
	lat.Sample = 4
	lat.Buffer.Overflow = config.OverwriteOldest
	lat.Fields = append(lat.Fields, &config.Field{Name: "us", Source: "dur_us", Type: config.F32}, &config.Field{Name: "us16", Source: "twice", Type: config.U16})
	lat.Aggregates = []*config.Aggregate{
		{Name: "n", Kind: config.AggCount, By: []string{"funcId", "channelId"}},
		{Name: "total", Kind: config.AggSum, Value: hooktest.MustExpr(t, "duration")},
		{Name: "ftotal", Kind: config.AggSum, Value: hooktest.MustExpr(t, "dur_us", dur), By: []string{"channelId"}},
		{Name: "lo", Kind: config.AggMin, Value: hooktest.MustExpr(t, "duration"), By: []string{"funcId"}},
		{Name: "hi", Kind: config.AggMax, Value: hooktest.MustExpr(t, "duration")},
		{Name: "h2", Kind: config.AggHistogram, Value: hooktest.MustExpr(t, "duration"), Buckets: config.Buckets{Log2: true}},
		{Name: "hb", Kind: config.AggHistogram, Value: hooktest.MustExpr(t, "duration"), Buckets: config.Buckets{Bounds: []uint64{10, 100, 1 << 63}}},
	}
	off := hooktest.Hook("off", "phase")
	off.Enabled = false
	return hooktest.Profile(all, lat, off)
}

func TestGenerateCompiles(t *testing.T) {
	m, err := hookgen.Generate(richProfile(t))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	src := filepath.Join(dir, "hooks.c")
	if err := os.WriteFile(src, []byte(m.Source), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, cc := range [][]string{{"cc", "-std=gnu11"}, {"c++", "-x", "c++", "-std=c++17"}} {
		if _, err := exec.LookPath(cc[0]); err != nil {
			t.Logf("%s not found; skipped", cc[0])
			continue
		}
		args := append(cc[1:], "-Wall", "-Wextra", "-Werror", "-Wno-unused-function", "-fsyntax-only", src)
		if out, err := exec.Command(cc[0], args...).CombinedOutput(); err != nil {
			t.Errorf("%s: %v\n%s", cc[0], err, out)
		}
	}
	if testing.Verbose() {
		t.Log(m.Source)
	}
}

func TestDisabledHooksAreNotGenerated(t *testing.T) {
	m, err := hookgen.Generate(richProfile(t))
	if err != nil {
		t.Fatal(err)
	}
	if len(m.Hooks) != 2 || m.Hooks[0].Name != "all" || m.Hooks[1].Name != "latency" || m.Hooks[1].Index != 1 {
		t.Fatalf("hooks = %+v, want all, latency", m.Hooks)
	}
	if strings.Contains(m.Source, `"off"`) || strings.Contains(m.Source, "hk_hook_off") {
		t.Error("the disabled hook was generated")
	}
	for _, sym := range []string{hookgen.SymEntry, hookgen.SymEntryPtr} {
		if !strings.Contains(m.Source, sym) {
			t.Errorf("symbol %s missing", sym)
		}
	}
}

func TestLayoutPacked(t *testing.T) {
	h := hooktest.Hook("l", "channelId", "timestamp", "phase", "funcId")
	h.Fields = append(h.Fields, &config.Field{Name: "w", Source: "workCounter", Type: config.U16})
	m, err := hookgen.Generate(hooktest.Profile(h))
	if err != nil {
		t.Fatal(err)
	}
	l := m.Hooks[0].Layout
	var offsets []int
	for _, f := range l.Fields {
		offsets = append(offsets, f.Offset)
	}
	if want := []int{0, 1, 9, 10, 14}; !slices.Equal(offsets, want) || l.Bytes != 16 || l.Chunks != 4 || l.SlotWords() != 4 {
		t.Fatalf("layout offsets %v bytes %d chunks %d, want %v, 16, 4", offsets, l.Bytes, l.Chunks, want)
	}
}

func TestEncodeCtx(t *testing.T) {
	m, err := hookgen.Generate(richProfile(t))
	if err != nil {
		t.Fatal(err)
	}
	b := m.EncodeCtx(hookgen.CtxAddrs{Device: 3, Comm: 5, Slots: []uintptr{0x1000, 0x2000}, Holes: []uintptr{0x3000, 0x4000}})
	if len(b) != m.CtxBytes() || len(b) != 2*16+8 {
		t.Fatalf("ctx is %d bytes, want %d", len(b), 2*16+8)
	}
	le := binary.LittleEndian
	want := []uint64{0x1000, 0x3000, 0x2000, 0x4000}
	for i, w := range want {
		if got := le.Uint64(b[8*i:]); got != w {
			t.Fatalf("ctx word %d = %#x, want %#x (bytes %x)", i, got, w, b)
		}
	}
	if le.Uint32(b[32:]) != 3 || le.Uint32(b[36:]) != 5 {
		t.Fatalf("ctx device %d comm %d, want 3 and 5", le.Uint32(b[32:]), le.Uint32(b[36:]))
	}
}

// A recording profile's arena is a power of two that holds the control
// words and at least MinArenaComms blocks, and the source masks devCtx to
// it; a profile that records nothing needs no such bound.
func TestArenaLayout(t *testing.T) {
	m, err := hookgen.Generate(richProfile(t))
	if err != nil {
		t.Fatal(err)
	}
	a := m.Arena
	if !a.Bound || a.Bytes&(a.Bytes-1) != 0 || a.Bytes < 2<<20 || a.CtlBytes < 8*m.CtlWords() || a.CtlBytes%128 != 0 ||
		m.ArenaComms() < hookgen.MinArenaComms || a.Bytes/2 >= a.CtlBytes+hookgen.MinArenaComms*m.Block.Bytes && a.Bytes > 2<<20 {
		t.Fatalf("arena %+v for blocks of %d bytes (%d fit)", a, m.Block.Bytes, m.ArenaComms())
	}
	if !strings.Contains(m.Source, fmt.Sprintf("#define HK_ARENA_BYTES %dULL\n", a.Bytes)) ||
		!strings.Contains(m.Source, "#define HK_CTL(blk) ((hk_u64*)((hk_u64)(blk) & ~(HK_ARENA_BYTES - 1ULL)))") {
		t.Error("the source does not mask devCtx to the arena for the control words")
	}
	h := hooktest.Hook("agg")
	h.Aggregates = []*config.Aggregate{{Name: "n", Kind: config.AggCount, By: []string{"funcId"}}}
	if m, err = hookgen.Generate(hooktest.Profile(h)); err != nil {
		t.Fatal(err)
	}
	if m.Arena.Bound || m.Arena.Bytes != 2<<20 || strings.Contains(m.Source, "HK_CTL") {
		t.Errorf("an aggregate-only profile: arena %+v, HK_CTL in the source: %v", m.Arena, strings.Contains(m.Source, "HK_CTL"))
	}
}

// The parts of the context block follow the header at cache-line offsets in
// a fixed order, each where the generated source says it is.
func TestBlockLayout(t *testing.T) {
	m, err := hookgen.Generate(richProfile(t))
	if err != nil {
		t.Fatal(err)
	}
	b := m.Block
	devWords := 0
	for _, a := range m.Aggs {
		if a.DevOffset != devWords {
			t.Errorf("aggregate %q at word %d of the block's cells, want %d", a.Agg.Name, a.DevOffset, devWords)
		}
		devWords += a.DevKeys() * a.RowWords
	}
	if b.AggWords != devWords || devWords == 0 {
		t.Fatalf("block aggregation words %d, want %d (> 0)", b.AggWords, devWords)
	}
	parts := []struct {
		name       string
		off, bytes int
	}{{"HK_BLOCK_FUNCSETS", b.FuncSets, 4 * hookgen.FuncSetWords * len(m.FuncSets)}, {"HK_BLOCK_PAIRS", b.Pairs, 8 * hookgen.PairWords}, {"HK_BLOCK_AGG", b.Agg, 8 * b.AggWords}}
	end := m.CtxBytes()
	for _, p := range parts {
		if p.bytes == 0 {
			continue
		}
		if p.off < end || p.off%128 != 0 {
			t.Errorf("%s at %d: overlaps the part before (ends at %d) or is not at a cache line", p.name, p.off, end)
		}
		if !strings.Contains(m.Source, fmt.Sprintf("#define %s %d ", p.name, p.off)) {
			t.Errorf("the source does not define %s as %d", p.name, p.off)
		}
		end = p.off + p.bytes
	}
	if b.Bytes < end || !strings.Contains(m.Source, fmt.Sprintf("#define HK_BLOCK_BYTES %d\n", b.Bytes)) {
		t.Errorf("block of %d bytes, parts end at %d; the source must define HK_BLOCK_BYTES as it", b.Bytes, end)
	}
}

// Called from NCCL's kernel, which lives in another module, the hook cannot
// address its own module's globals (the GPU resolves them through the
// running kernel's module, and the call faults): every access goes through
// devCtx. So the module defines no variable but the entry's pointer, which
// only the host reads, and no code names it.
func TestHookReachesStateOnlyThroughCtx(t *testing.T) {
	m, err := hookgen.Generate(richProfile(t))
	if err != nil {
		t.Fatal(err)
	}
	for i, line := range strings.Split(m.Source, "\n") {
		code := line
		if c := strings.Index(code, "/*"); c >= 0 {
			code = code[:c]
		}
		code = strings.TrimSpace(code)
		if strings.HasPrefix(code, "HK_VAR ") && !strings.HasPrefix(code, "HK_VAR ncclProfilerDevHook_t "+hookgen.SymEntryPtr+" = ") {
			t.Errorf("generated line %d defines a module variable: %s", i+1, line)
		}
		if strings.Contains(code, hookgen.SymEntryPtr) && !strings.HasPrefix(code, "HK_VAR ") {
			t.Errorf("generated line %d names %s outside its definition: %s", i+1, hookgen.SymEntryPtr, line)
		}
	}
}

// Every block of generated code traces back to its hook and profile line.
func TestTrace(t *testing.T) {
	p := richProfile(t)
	lat := p.Hooks[1]
	lat.When.Pos = config.Pos{File: "p.yaml", Line: 12, Col: 11}
	lat.Aggregates[6].Pos = config.Pos{File: "p.yaml", Line: 30, Col: 9}
	m, err := hookgen.Generate(p)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(m.Source, "\n")
	find := func(prefix string) int {
		for i, l := range lines {
			if strings.HasPrefix(strings.TrimSpace(l), prefix) {
				return i + 1
			}
		}
		t.Fatalf("no line starts with %q", prefix)
		return 0
	}
	for _, c := range []struct {
		prefix, hook, what string
		pos                string
	}{
		{"if (!", "latency", "when", "p.yaml:12:11"},
		{"hk_red_add(&cell[2 + ((v <=", "latency", "aggregate hb", "p.yaml:30:9"},
		{"const hk_u64 f2 = (hk_u64)(hk_u32)((hk_i64)ev->funcId);", "all", "field funcId", "test.yaml:4:5"},
		{"const double l_twice", "latency", "let twice", "test.yaml:1:1"},
		{"hk_store64x2(slot + 4", "all", "record", "test.yaml:4:5"},
	} {
		n := find(c.prefix)
		s, ok := m.Trace(n)
		if !ok || s.Hook != c.hook || s.What != c.what || s.Pos.String() != c.pos {
			t.Errorf("Trace(%d) (%s) = %+v, %v; want hook %s %s at %s", n, c.prefix, s, ok, c.hook, c.what, c.pos)
		}
	}
	if s, ok := m.Trace(1); ok {
		t.Errorf("the header traces to %+v", s)
	}
}

// Profile text reaches the source only inside comments, whatever it holds
// (but for hook names, which name the hook functions: TestHookFuncNames).
func TestProfileTextStaysInComments(t *testing.T) {
	h := hooktest.Hook("h", "phase")
	h.When = hooktest.MustExpr(t, `phase == STOP || func == "*/ int evil = 1; /*"`)
	h.When.Source = "phase == STOP */ int evil = 1; /*\n#error injected"
	m, err := hookgen.Generate(hooktest.Profile(h))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(m.Source, "\n#error") {
		t.Fatal("a newline of the profile reached the source")
	}
	dir := t.TempDir()
	src := filepath.Join(dir, "hooks.c")
	os.WriteFile(src, []byte(m.Source), 0o644)
	if out, err := exec.Command("cc", "-std=gnu11", "-fsyntax-only", "-Werror=comment", "-Wno-unused-function", src).CombinedOutput(); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if out, err := exec.Command("cc", "-std=gnu11", "-E", src).Output(); err != nil || strings.Contains(string(out), "evil") {
		t.Fatalf("profile text survived outside comments (%v)", err)
	}
}

func TestGenerateErrors(t *testing.T) {
	off := hooktest.Hook("off", "phase")
	off.Enabled = false
	if _, err := hookgen.Generate(hooktest.Profile(off)); err == nil || !strings.Contains(err.Error(), "no enabled hook") {
		t.Errorf("all hooks disabled: %v", err)
	}
	odd := hooktest.Hook("odd", "phase")
	odd.Buffer.Slots = 100
	if _, err := hookgen.Generate(hooktest.Profile(odd)); err == nil || !strings.Contains(err.Error(), "test.yaml:3:3") {
		t.Errorf("100 slots: %v", err)
	}
}

// FuncSetBits: every name a predicate matches sets its id's bit, no other bit
// is set, and ids past the set's capacity are ignored.
func TestFuncSetBits(t *testing.T) {
	m, err := hookgen.Generate(richProfile(t))
	if err != nil {
		t.Fatal(err)
	}
	if len(m.FuncSets) == 0 {
		t.Fatal("the rich profile has no name predicate")
	}
	names := make([]string, hookgen.MaxFuncIDs+40)
	for i := range names {
		names[i] = "SendRecv"
	}
	names[3], names[37], names[hookgen.MaxFuncIDs+1] = "AllReduce_Sum_f32_RING_LL", "Broadcast_RING", "AllReduce_x"
	for i, bits := range m.FuncSetBits(names) {
		if len(bits) != hookgen.FuncSetWords {
			t.Fatalf("set %d: %d words", i, len(bits))
		}
		for id := range hookgen.MaxFuncIDs {
			got := bits[id/32]>>(id%32)&1 == 1
			if want := m.FuncSets[i].Pred.Match(names[id]); got != want {
				t.Errorf("set %d (%s), id %d %q: bit %v, want %v", i, m.FuncSets[i].Hook, id, names[id], got, want)
			}
		}
	}
}

// Work positions: each hook's regions back to back in a block aligned for
// the communicator's index, and a record path with no atomic, no load of
// the header or a limit, and its position from the event.
func TestWorkPositions(t *testing.T) {
	p, err := config.Parse("p.yaml", []byte("version: 1\nname: t\nhooks:\n  - name: a\n    fields: [phase, comm]\n"+
		"    buffer: {slots: 1024, overflow: overwrite_oldest, positions: work}\n"+
		"  - name: b\n    fields: [timestamp]\n    buffer: {slots: 4096, overflow: overwrite_oldest, positions: work}\n"))
	if err != nil {
		t.Fatal(err)
	}
	m, err := hookgen.Generate(p)
	if err != nil {
		t.Fatal(err)
	}
	if !m.Work || m.Hooks[0].RegionSlots != 16 || m.Hooks[1].RegionSlots != 64 || m.Arena.Bound {
		t.Fatalf("work %v, region slots %d and %d, arena bound %v", m.Work, m.Hooks[0].RegionSlots, m.Hooks[1].RegionSlots, m.Arena.Bound)
	}
	want := []int{0, 8 * m.RegionWords(0)}
	if !slices.Equal(m.Block.Regions, want) || m.Block.Bytes != 8*(m.RegionWords(0)+m.RegionWords(1)) || m.Block.Bytes%hookgen.WorkBlockAlign != 0 {
		t.Fatalf("regions at %v (want %v), block %d bytes", m.Block.Regions, want, m.Block.Bytes)
	}
	for _, s := range []string{
		"#define HK_BLOCK_REGIONS_1 16384 /* hook \"b\": 64 regions of 64 slots of 2 words */",
		"const hk_u64 pos = 2ULL * ev->workCounter + (hk_u64)(ev->phase & 1u);",
		"((hk_u64)(ev->channelId & 63u) * 16ULL + (pos & 15ULL)) * 2ULL;",
		"(hk_u64)(hk_u32)((hk_i64)HK_COMM(blk))",
	} {
		if !strings.Contains(m.Source, s) {
			t.Errorf("the source lacks %q", s)
		}
	}
	for _, s := range []string{"hk_fetch_inc", "HK_CTL", "hk_load", "cxc"} {
		if strings.Contains(m.Source[strings.Index(m.Source, "module symbols"):], s) {
			t.Errorf("a work-positions hook uses %q", s)
		}
	}
	if _, err := hookgen.WorkCtx(4096*3, hookgen.WorkMaxComms); err == nil || !strings.Contains(err.Error(), "communicator 4096 gets no hook") {
		t.Errorf("WorkCtx past the last index: %v", err)
	}
	if ctx, err := hookgen.WorkCtx(4096*3, 7); err != nil || ctx != 4096*3+7 {
		t.Errorf("WorkCtx = %#x, %v", ctx, err)
	}
}
