package rings

import (
	"encoding/binary"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ncclhooks/ncclhooks/internal/backend"
	"github.com/ncclhooks/ncclhooks/internal/config"
	"github.com/ncclhooks/ncclhooks/internal/hookgen"
	"github.com/ncclhooks/ncclhooks/internal/sinks"
)

// fakeDevice is a backend.Device in Go memory. Its producers (goroutines)
// follow the producer side of docs/ARCHITECTURE.md "Record slots" with
// sync/atomic, as the generated hooks do on the device.
type fakeDevice struct {
	ord   int
	m     *hookgen.Module
	slots [][]uint64
	holes [][]uint32
	ctl   []uint64
	agg   []uint64
	// shut makes every read fail as a CUDA driver does once it shut down at
	// process exit.
	shut atomic.Bool
	// ctlReads counts ReadCtl calls: copies of the heads from the device.
	ctlReads atomic.Int64
	// work holds a Work module's blocks: [comm][hook] regions, made by
	// CommCtx.
	workMu sync.Mutex
	work   [][][]uint64
	// index is the communicator each block serves (-1: free, ReleaseComm);
	// releases counts ReleaseComm calls.
	index    []int
	releases int
}

func (f *fakeDevice) shutdownErr() error {
	if f.shut.Load() {
		return fmt.Errorf("%w: cuda: cuMemcpyDtoHAsync: error 4", backend.ErrShutdown)
	}
	return nil
}

func newFakeDevice(ord int, m *hookgen.Module) *fakeDevice {
	f := &fakeDevice{ord: ord, m: m, ctl: make([]uint64, m.CtlWords()), agg: make([]uint64, m.AggWords)}
	for _, h := range m.Hooks {
		f.slots = append(f.slots, make([]uint64, h.Slots*h.Layout.SlotWords()))
		f.holes = append(f.holes, make([]uint32, h.Slots))
	}
	return f
}

func (f *fakeDevice) Ordinal() int   { return f.ord }
func (f *fakeDevice) Entry() uintptr { return 0 }
func (f *fakeDevice) Ctx() uintptr   { return 0 }
func (f *fakeDevice) CommCtx(comm int) (uintptr, error) {
	f.workMu.Lock()
	defer f.workMu.Unlock()
	for f.m.Work && len(f.work) <= comm {
		f.newBlock()
	}
	if comm < len(f.index) && f.index[comm] < 0 {
		f.index[comm] = comm
	}
	return 0, nil
}

// newBlock makes the next block, serving the communicator of its index
// (workMu held).
func (f *fakeDevice) newBlock() {
	var block [][]uint64
	for h := range f.m.Hooks {
		block = append(block, make([]uint64, f.m.RegionWords(h)))
	}
	f.work = append(f.work, block)
	f.index = append(f.index, len(f.index))
}

func (f *fakeDevice) NewComm(index int) (int, uintptr, error) {
	f.workMu.Lock()
	defer f.workMu.Unlock()
	slot := slices.Index(f.index, -1)
	if slot < 0 {
		f.newBlock()
		slot = len(f.index) - 1
	}
	f.index[slot] = index
	return slot, 0, nil
}

func (f *fakeDevice) ReleaseComm(slot int) error {
	f.workMu.Lock()
	defer f.workMu.Unlock()
	if slot < 0 || slot >= len(f.index) || f.index[slot] < 0 {
		return nil
	}
	for _, r := range f.work[slot] {
		for i := range r {
			atomic.StoreUint64(&r[i], 0)
		}
	}
	f.index[slot] = -1
	f.releases++
	return nil
}

func (f *fakeDevice) CommIndex(slot int) int {
	f.workMu.Lock()
	defer f.workMu.Unlock()
	if slot < 0 || slot >= len(f.index) {
		return -1
	}
	return f.index[slot]
}
func (f *fakeDevice) Slots(h int) []uint64 { return f.slots[h] }
func (f *fakeDevice) Comms() int {
	f.workMu.Lock()
	defer f.workMu.Unlock()
	return len(f.work)
}
func (f *fakeDevice) Regions(comm, h int) []uint64 {
	f.workMu.Lock()
	defer f.workMu.Unlock()
	if comm >= len(f.work) {
		return nil
	}
	return f.work[comm][h]
}
func (f *fakeDevice) Holes(h int) []uint32           { return f.holes[h] }
func (f *fakeDevice) Close() error                   { return nil }
func (f *fakeDevice) WriteFuncSets([][]uint32) error { return nil }
func (f *fakeDevice) Clock() (uint64, uint64, error) {
	return uint64(time.Now().UnixNano()), 0, nil
}
func (f *fakeDevice) Model() string { return "fake" }

func (f *fakeDevice) Identity() backend.Identity { return backend.Identity{Name: "fake"} }

func (f *fakeDevice) ReadCtl(dst []uint64) error {
	f.ctlReads.Add(1)
	if err := f.shutdownErr(); err != nil {
		return err
	}
	for i := range dst {
		dst[i] = atomic.LoadUint64(&f.ctl[i])
	}
	return nil
}

func (f *fakeDevice) WriteLimit(h int, limit uint64) error {
	atomic.StoreUint64(&f.ctl[len(f.m.Hooks)+h], limit)
	return nil
}

func (f *fakeDevice) ReadAgg(dst []uint64) error {
	if err := f.shutdownErr(); err != nil {
		return err
	}
	for i := range dst {
		dst[i] = atomic.LoadUint64(&f.agg[i])
	}
	return nil
}

// reserve is producer steps 1 and 2: it returns the position, and whether
// it was a hole (drop_newest past the limit; the hole stamp is written).
func (f *fakeDevice) reserve(h int) (pos uint64, hole bool) {
	pos = atomic.AddUint64(&f.ctl[h], 1) - 1
	info := f.m.Hooks[h]
	if info.Overflow == config.DropNewest && pos >= atomic.LoadUint64(&f.ctl[len(f.m.Hooks)+h]) {
		atomic.StoreUint32(&f.holes[h][pos%uint64(info.Slots)], uint32(pos+1))
		return pos, true
	}
	return pos, false
}

// write is producer step 3: it writes the first `words` words of pos's slot
// (all of them for a complete record), sleeping delay between words.
func (f *fakeDevice) write(h int, pos uint64, payload []byte, words int, delay time.Duration) {
	info := f.m.Hooks[h]
	c := info.Layout.Chunks
	padded := make([]byte, 4*c)
	copy(padded, payload)
	base := int(pos%uint64(info.Slots)) * c
	stamp := uint64(uint32(pos+1)) << 32
	for i := 0; i < words; i++ {
		if i > 0 && delay > 0 {
			time.Sleep(delay)
		}
		atomic.StoreUint64(&f.slots[h][base+i], stamp|uint64(binary.LittleEndian.Uint32(padded[4*i:])))
	}
}

// testLayout: id u64, check u64, funcId u32, neg i16 = 22 bytes, 6 chunks.
// check and neg are functions of id, so a record mixing two writers fails.
func testLayout() hookgen.Layout {
	l := hookgen.Layout{
		Fields: []hookgen.FieldLayout{
			{Name: "id", Source: "workCounter", Type: config.U64, Offset: 0},
			{Name: "check", Source: "timestamp", Type: config.U64, Offset: 8},
			{Name: "fn", Source: "funcId", Type: config.U32, Offset: 16},
			{Name: "neg", Source: "neg", Type: config.I16, Offset: 20},
		},
		Bytes:  22,
		Chunks: 6,
	}
	return l
}

func mix(id uint64) uint64 {
	id ^= id >> 33
	id *= 0xff51afd7ed558ccd
	id ^= id >> 33
	return id | 1<<63 // the top bit exercises full-range uint64
}

func testPayload(id uint64) []byte {
	b := make([]byte, 22)
	binary.LittleEndian.PutUint64(b[0:], id)
	binary.LittleEndian.PutUint64(b[8:], mix(id))
	binary.LittleEndian.PutUint32(b[16:], uint32(id%7))
	binary.LittleEndian.PutUint16(b[20:], uint16(-int16(id%1000)))
	return b
}

func testFuncName(id uint32) string { return fmt.Sprintf("F%d", id) }

// checkRecord verifies that a record is exactly one producer's write.
func checkRecord(r sinks.Record) error {
	v := r.Values
	if len(v) != 4 {
		return fmt.Errorf("seq %d: %d values", r.Seq, len(v))
	}
	id := v[0].U
	if v[1].U != mix(id) || v[2].U != id%7 || v[3].I != -int64(id%1000) || r.FuncName != testFuncName(uint32(id%7)) {
		return fmt.Errorf("seq %d: torn or corrupt record: %+v func %q", r.Seq, v, r.FuncName)
	}
	return nil
}

func testModule(hooks ...*hookgen.HookInfo) *hookgen.Module {
	m := &hookgen.Module{Profile: &config.Profile{Name: "test"}}
	for i, h := range hooks {
		h.Index = i
		if h.Hook == nil {
			h.Hook = &config.Hook{Name: h.Name, Buffer: config.Buffer{Slots: h.Slots, Overflow: h.Overflow,
				Pos: config.Pos{File: "p.yaml", Line: 10 + i, Col: 5}}}
		}
		m.Hooks = append(m.Hooks, h)
	}
	return m
}

func testHook(name string, slots int, ov config.Overflow) *hookgen.HookInfo {
	return &hookgen.HookInfo{Name: name, Slots: slots, Overflow: ov, Layout: testLayout()}
}

type key struct {
	hook string
	dev  int
}

// recordingSink keeps copies of everything. It takes no lock: the drainer
// promises calls never overlap, and the race detector checks it.
type recordingSink struct {
	t       *testing.T
	delay   time.Duration
	records map[key][]sinks.Record
	seen    map[key]uint64 // records received so far
	dumps   []sinks.Dump
	bad     []string
	total   atomic.Int64 // records received, readable while the drainer runs
	// drained are hooks the drain aggregates: their records are counted,
	// not delivered.
	drained map[string]bool
	// aggOnly are hooks that only aggregate: they match without positions,
	// so matched is not records + dropped + pending.
	aggOnly map[string]bool
}

func newRecordingSink(t *testing.T) *recordingSink {
	return &recordingSink{t: t, records: map[key][]sinks.Record{}, seen: map[key]uint64{}}
}

func (s *recordingSink) Records(recs []sinks.Record) error {
	if s.delay > 0 {
		time.Sleep(s.delay)
	}
	for _, r := range recs {
		r.Values = append([]hookgen.Value(nil), r.Values...)
		k := key{r.Hook.Name, r.Device}
		s.records[k] = append(s.records[k], r)
		s.seen[k]++
	}
	s.total.Add(int64(len(recs)))
	return nil
}

func (s *recordingSink) Dump(d *sinks.Dump) error {
	c := *d
	c.Stats = append([]sinks.Stats(nil), d.Stats...)
	c.Aggs = append([]sinks.AggSnapshot(nil), d.Aggs...)
	for _, st := range d.Stats {
		// A dump follows exactly the records it counts.
		if got := s.seen[key{st.Hook, st.Device}]; got != st.Records && !s.drained[st.Hook] {
			s.bad = append(s.bad, fmt.Sprintf("dump %d %s/%d: %d records delivered before it, stats say %d", st.Dump, st.Hook, st.Device, got, st.Records))
		}
		if st.Matched != st.Records+st.Dropped+st.Pending && !s.aggOnly[st.Hook] {
			s.bad = append(s.bad, fmt.Sprintf("dump %d %s/%d: matched %d != records %d + dropped %d + pending %d", st.Dump, st.Hook, st.Device, st.Matched, st.Records, st.Dropped, st.Pending))
		}
		if st.Dropped != st.DroppedBufferFull+st.DroppedOverwritten+st.DroppedTorn+st.DroppedRingFull {
			s.bad = append(s.bad, fmt.Sprintf("dump %d %s/%d: dropped %d is not the sum of its reasons", st.Dump, st.Hook, st.Device, st.Dropped))
		}
	}
	s.dumps = append(s.dumps, c)
	return nil
}

func (s *recordingSink) Close() error { return nil }

// logRecorder collects log lines from any goroutine.
type logRecorder struct {
	mu    sync.Mutex
	lines []string
	warns int
}

func (l *logRecorder) log(level int, msg string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lines = append(l.lines, msg)
	if level == LogWarn {
		l.warns++
	}
}
