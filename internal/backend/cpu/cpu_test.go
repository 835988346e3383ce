package cpu_test

import (
	"math/rand"
	"slices"
	"strings"
	"testing"

	"github.com/ncclhooks/ncclhooks/internal/backend/cpu"
	"github.com/ncclhooks/ncclhooks/internal/backend/cpu/internal/cdrive"
	"github.com/ncclhooks/ncclhooks/internal/config"
	"github.com/ncclhooks/ncclhooks/internal/hookgen"
	"github.com/ncclhooks/ncclhooks/internal/hookgen/hooktest"
)

var eventFields = []string{"timestamp", "workCounter", "funcId", "channelId", "phase"}

// Concurrent producers on the same channel ids: every position is one
// complete record, and the records are exactly the events sent.
func TestRecordsFromConcurrentThreads(t *testing.T) {
	const threads, perThread = 8, 500
	h := hooktest.Hook("all", eventFields...)
	h.Buffer.Slots = 8192
	m, d := load(t, hooktest.Profile(h), 0)

	r := rand.New(rand.NewSource(1))
	want := map[[5]uint64]int{}
	streams := make([][]cdrive.Event, threads)
	for i := range streams {
		for wc := range perThread / 2 {
			for phase := uint8(0); phase < 2; phase++ {
				ev := cdrive.Event{
					Timestamp:   r.Uint64() >> 1,
					WorkCounter: uint64(wc),
					FuncID:      r.Uint32(),
					ChannelID:   uint8(i % 4), // two threads per channel id
					Phase:       phase,
				}
				streams[i] = append(streams[i], ev)
				want[[5]uint64(eventValues(ev))]++
			}
		}
	}
	cdrive.Run(d.Entry(), d.Ctx(), streams)

	ctl := readCtl(t, m, d)
	if ctl[0] != threads*perThread {
		t.Fatalf("head = %d, want %d", ctl[0], threads*perThread)
	}
	for pos := range ctl[0] {
		got := [5]uint64(unsigned(record(t, d, m.Hooks[0], pos)))
		if want[got] == 0 {
			t.Fatalf("position %d: record %v was never sent (or twice)", pos, got)
		}
		want[got]--
	}
}

// Every stored type packs and decodes back to the value the expression had.
func TestFieldTypesRoundTrip(t *testing.T) {
	h := hooktest.Hook("types")
	lets := []struct {
		name, src string
		typ       config.Type
	}{
		{"neg", "-(channelId + 1)", config.I8},
		{"big", "workCounter * 3", config.U64},
		{"half", "workCounter / 2", config.F32},
		{"third", "workCounter / 3", config.F64},
		{"odd", "workCounter % 2 == 1", config.Bool},
		{"short", "-(workCounter * 7)", config.I16},
		{"ushort", "workCounter + 65000", config.U16},
		{"word", "funcId - 5", config.I32},
		{"trunc", "workCounter / 4", config.U32}, // a float stored as an integer truncates
		{"wide", "-(timestamp)", config.I64},
		{"byte", "funcId", config.U8},
	}
	var earlier []*config.Let
	for i, l := range lets {
		let := hooktest.Let(t, l.name, l.src, earlier...)
		earlier = append(earlier, let)
		h.Fields = append(h.Fields, &config.Field{Name: l.name, Source: l.name, Type: l.typ, Pos: config.Pos{File: hooktest.File, Line: 10 + i, Col: 7}})
	}
	h.Lets = earlier
	m, d := load(t, hooktest.Profile(h), 0)
	info := m.Hooks[0]
	if want := 1 + 8 + 4 + 8 + 1 + 2 + 2 + 4 + 4 + 8 + 1; info.Layout.Bytes != want {
		t.Fatalf("layout bytes = %d, want %d", info.Layout.Bytes, want)
	}
	for wc := uint64(0); wc < 300; wc += 7 {
		ev := cdrive.Event{Timestamp: 1<<40 + wc, WorkCounter: wc, FuncID: uint32(wc * 13), ChannelID: uint8(wc % 64)}
		call(d, ev)
		got := record(t, d, info, wc/7)
		want := []hookgen.Value{
			{Type: config.I8, I: int64(int8(-(int64(ev.ChannelID) + 1)))},
			{Type: config.U64, U: wc * 3},
			{Type: config.F32, F: float64(float32(float64(wc) / 2))},
			{Type: config.F64, F: float64(wc) / 3},
			{Type: config.Bool, U: wc % 2},
			{Type: config.I16, I: int64(int16(-int64(wc * 7)))},
			{Type: config.U16, U: uint64(uint16(wc + 65000))},
			{Type: config.I32, I: int64(ev.FuncID) - 5},
			{Type: config.U32, U: wc / 4},
			{Type: config.I64, I: -int64(ev.Timestamp)},
			{Type: config.U8, U: uint64(uint8(ev.FuncID))},
		}
		if !slices.Equal(got, want) {
			t.Fatalf("workCounter %d:\n got %v\nwant %v", wc, got, want)
		}
	}
}

// drop_newest: once the limit is reached, positions leave hole stamps and
// the records already written stay intact; raising the limit resumes.
func TestDropNewestLeavesHoles(t *testing.T) {
	const n = 16
	h := hooktest.Hook("dn", eventFields...)
	h.Buffer.Slots = n
	m, d := load(t, hooktest.Profile(h), 0)
	info := m.Hooks[0]
	evs := make([]cdrive.Event, 100)
	for i := range evs {
		evs[i] = cdrive.Event{Timestamp: uint64(1000 + i), WorkCounter: uint64(i), FuncID: 3}
	}
	call(d, evs...)
	if ctl := readCtl(t, m, d); ctl[0] != 100 || ctl[1] != n {
		t.Fatalf("ctl = %v, want head 100 and the initial limit %d", ctl, n)
	}
	for pos := range uint64(n) {
		if got, want := unsigned(record(t, d, info, pos)), eventValues(evs[pos]); !slices.Equal(got, want) {
			t.Fatalf("position %d = %v, want %v", pos, got, want)
		}
	}
	holes := d.Holes(0)
	for j := range n {
		last := uint64(j) + n*((99-uint64(j))/n) // the last position >= n that maps to slot j
		if holes[j] != uint32(last+1) {
			t.Errorf("holes[%d] = %d, want %d", j, holes[j], last+1)
		}
	}

	// The drainer consumed everything: publish the next limit.
	if err := d.WriteLimit(0, 100+n); err != nil {
		t.Fatal(err)
	}
	more := make([]cdrive.Event, n+3)
	for i := range more {
		more[i] = cdrive.Event{Timestamp: uint64(5000 + i), WorkCounter: uint64(100 + i)}
	}
	call(d, more...)
	for i := range n {
		pos := uint64(100 + i)
		if got, want := unsigned(record(t, d, info, pos)), eventValues(more[i]); !slices.Equal(got, want) {
			t.Fatalf("position %d = %v, want %v", pos, got, want)
		}
	}
	if holes[(100+n)%n] != 100+n+1 {
		t.Errorf("position %d past the new limit left hole %d", 100+n, holes[(100+n)%n])
	}
}

// overwrite_oldest: every slot holds the newest position that maps to it.
func TestOverwriteOldestKeepsNewest(t *testing.T) {
	const n = 16
	h := hooktest.Hook("ow", eventFields...)
	h.Buffer = config.Buffer{Slots: n, Overflow: config.OverwriteOldest}
	m, d := load(t, hooktest.Profile(h), 0)
	evs := make([]cdrive.Event, 103)
	for i := range evs {
		evs[i] = cdrive.Event{Timestamp: uint64(7 * i), WorkCounter: uint64(i), ChannelID: uint8(i), Phase: uint8(i % 2)}
	}
	call(d, evs...)
	if head := readCtl(t, m, d)[0]; head != 103 {
		t.Fatalf("head = %d, want 103", head)
	}
	for pos := uint64(103 - n); pos < 103; pos++ {
		if got, want := unsigned(record(t, d, m.Hooks[0], pos)), eventValues(evs[pos]); !slices.Equal(got, want) {
			t.Fatalf("position %d = %v, want %v", pos, got, want)
		}
	}
	for _, hole := range d.Holes(0) {
		if hole != 0 {
			t.Fatalf("overwrite_oldest left a hole stamp %d", hole)
		}
	}
}

// Sampling keeps whole work items (START and STOP) with workCounter % N == 0,
// and a when predicate filters before anything is reserved.
func TestSampleAndWhen(t *testing.T) {
	h := hooktest.Hook("s", "workCounter", "phase")
	h.Sample = 5
	h.When = hooktest.MustExpr(t, "channelId != 3")
	m, d := load(t, hooktest.Profile(h), 0)
	var want [][]uint64
	for wc := range uint64(40) {
		for phase := range uint8(2) {
			ev := cdrive.Event{WorkCounter: wc, Phase: phase, ChannelID: uint8(wc % 4)}
			call(d, ev)
			if wc%5 == 0 && ev.ChannelID != 3 {
				want = append(want, []uint64{wc, uint64(phase)})
			}
		}
	}
	if head := readCtl(t, m, d)[0]; head != uint64(len(want)) {
		t.Fatalf("head = %d, want %d", head, len(want))
	}
	for pos, w := range want {
		if got := unsigned(record(t, d, m.Hooks[0], uint64(pos))); !slices.Equal(got, w) {
			t.Fatalf("position %d = %v, want %v", pos, got, w)
		}
	}
}

// Each Load is a separate device: its own globals, its own ordinal.
func TestDevicesAreIndependent(t *testing.T) {
	h := hooktest.Hook("dev", "workCounter", "cudaDev")
	m, err := hookgen.Generate(hooktest.Profile(h))
	if err != nil {
		t.Fatal(err)
	}
	c, err := cpu.Compile(m, "", 0)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(c.Info(), "ms") {
		t.Errorf("Info() = %q, want the compiler and the time it took", c.Info())
	}
	d0, err := c.Load(0)
	if err != nil {
		t.Fatal(err)
	}
	defer d0.Close()
	d3, err := c.Load(3)
	if err != nil {
		t.Fatal(err)
	}
	defer d3.Close()
	if d0.Entry() == d3.Entry() || d0.Ctx() == d3.Ctx() {
		t.Fatal("two devices share one loaded copy")
	}
	call(d0, cdrive.Event{WorkCounter: 1}, cdrive.Event{WorkCounter: 2})
	call(d3, cdrive.Event{WorkCounter: 9})
	if h0, h3 := readCtl(t, m, d0)[0], readCtl(t, m, d3)[0]; h0 != 2 || h3 != 1 {
		t.Fatalf("heads = %d, %d; want 2, 1", h0, h3)
	}
	if got := unsigned(record(t, d3, m.Hooks[0], 0)); !slices.Equal(got, []uint64{9, 3}) {
		t.Fatalf("device 3 record = %v, want [9 3]", got)
	}
	if got := unsigned(record(t, d0, m.Hooks[0], 1)); !slices.Equal(got, []uint64{2, 0}) {
		t.Fatalf("device 0 record = %v, want [2 0]", got)
	}
	host, dev, err := d0.Clock()
	if err != nil || host != dev || host == 0 {
		t.Fatalf("Clock() = %d, %d, %v; want one host clock reading twice", host, dev, err)
	}
	if err := d0.Close(); err != nil {
		t.Fatal(err)
	}
	if err := d0.ReadCtl(make([]uint64, 2)); err == nil {
		t.Fatal("ReadCtl after Close succeeded")
	}
}

// The intrinsics run on the host: the CPU id, a monotonic clock and the
// realtime clock.
func TestIntrinsics(t *testing.T) {
	h := hooktest.Hook("in", "smid", "clock", "globaltimer")
	m, d := load(t, hooktest.Profile(h), 0)
	before, _, _ := d.Clock()
	call(d, cdrive.Event{}, cdrive.Event{})
	after, _, _ := d.Clock()
	r0, r1 := unsigned(record(t, d, m.Hooks[0], 0)), unsigned(record(t, d, m.Hooks[0], 1))
	if r0[2] < before || r1[2] > after || r1[2] < r0[2] {
		t.Errorf("globaltimer %d, %d not within [%d, %d]", r0[2], r1[2], before, after)
	}
	if r1[1] <= r0[1] {
		t.Errorf("clock did not advance: %d then %d", r0[1], r1[1])
	}
	if r0[0] > 1<<16 {
		t.Errorf("smid = %d, not a CPU id", r0[0])
	}
}

// A compiler error names the hook and the profile position of the block
// it is in.
func TestCompileErrorNamesProfilePosition(t *testing.T) {
	h := hooktest.Hook("broken", "phase")
	h.When = hooktest.MustExpr(t, "phase == STOP")
	h.When.Pos = config.Pos{File: "p.yaml", Line: 12, Col: 11}
	m, err := hookgen.Generate(hooktest.Profile(h))
	if err != nil {
		t.Fatal(err)
	}
	// Damage the generated predicate, as a translator bug would.
	lines := strings.Split(m.Source, "\n")
	found := false
	for i, l := range lines {
		if strings.HasPrefix(strings.TrimSpace(l), "if (!") {
			lines[i] = strings.Replace(l, "if (!", "if (! undeclared_name +", 1)
			found = true
			break
		}
	}
	if !found {
		t.Fatal("no predicate line in the generated source")
	}
	m.Source = strings.Join(lines, "\n")
	_, err = cpu.Compile(m, "", 0)
	if err == nil {
		t.Fatal("compiled a broken source")
	}
	for _, want := range []string{`p.yaml:12:11: hook "broken" when: generated line`, "undeclared_name"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not contain %q", err, want)
		}
	}
	if _, err := cpu.Compile(m, "no-such-cc-ncclhooks", 0); err == nil || !strings.Contains(err.Error(), "not found") {
		t.Errorf("missing compiler: error %v", err)
	}
}

func TestWriteFuncSetsChecksShape(t *testing.T) {
	h := hooktest.Hook("f", "phase")
	h.When = hooktest.MustExpr(t, `func startsWith "AllReduce"`)
	_, d := load(t, hooktest.Profile(h), 0)
	if err := d.WriteFuncSets(make([][]uint32, 2)); err == nil {
		t.Error("two sets accepted for a module with one")
	}
	if err := d.WriteFuncSets([][]uint32{make([]uint32, hookgen.FuncSetWords+1)}); err == nil {
		t.Error("an oversized set accepted")
	}
	if err := d.WriteFuncSets([][]uint32{make([]uint32, hookgen.FuncSetWords)}); err != nil {
		t.Error(err)
	}
}
