package gpu

import (
	"encoding/binary"
	"fmt"
	"math/rand"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
	"unsafe"

	"github.com/ncclhooks/ncclhooks/internal/config"
	"github.com/ncclhooks/ncclhooks/internal/cuda"
	"github.com/ncclhooks/ncclhooks/internal/hookgen"
)

// fakeDriver stands in for the CUDA driver on the cpu: device memory is Go
// memory at made-up device addresses (host-mapped allocations are one buffer
// under both), and the module's globals are allocations of the sizes the
// module description gives.
type fakeDriver struct {
	regions []*region
	next    uint64
	globals map[string]*region
}

type region struct {
	dev  uint64
	mem  []byte // aligned to 16 bytes, as the driver's allocations
	host bool   // host-mapped
	keep []uint64
}

func newFakeDriver(m *hookgen.Module) *fakeDriver {
	f := &fakeDriver{next: 0x7f10_0000_0000, globals: map[string]*region{}}
	f.globals[hookgen.SymEntryPtr] = f.alloc(8, false)
	binary.LittleEndian.PutUint64(f.globals[hookgen.SymEntryPtr].mem, 0x7f20_0000_1000)
	return f
}

func (f *fakeDriver) alloc(n int, host bool) *region {
	words := make([]uint64, (n+31)/8)
	b := unsafe.Slice((*byte)(unsafe.Pointer(&words[0])), len(words)*8)
	if off := uintptr(unsafe.Pointer(&b[0])) % 16; off != 0 {
		b = b[16-off:]
	}
	r := &region{dev: f.next, mem: b[:n:n], host: host, keep: words}
	f.next += uint64(n+255) &^ 255
	f.regions = append(f.regions, r)
	return r
}

// at returns the n bytes of device memory at addr; they must lie in one
// allocation.
func (f *fakeDriver) at(addr uint64, n int) ([]byte, error) {
	for _, r := range f.regions {
		if addr >= r.dev && addr+uint64(n) <= r.dev+uint64(len(r.mem)) {
			return r.mem[addr-r.dev : addr-r.dev+uint64(n)], nil
		}
	}
	return nil, fmt.Errorf("fake driver: %d bytes at %#x lie in no allocation", n, addr)
}

func (f *fakeDriver) Ordinal() int               { return 3 }
func (f *fakeDriver) Name() string               { return "fake GPU" }
func (f *fakeDriver) UUID() string               { return "" }
func (f *fakeDriver) PCIBusID() string           { return "" }
func (f *fakeDriver) CanMapHost() bool           { return true }
func (f *fakeDriver) NewStream() (stream, error) { return fakeStream{}, nil }
func (f *fakeDriver) Load(*cuda.Image) (module, error) {
	return fakeModule{f}, nil
}
func (f *fakeDriver) HostAlloc(n int) (unsafe.Pointer, uint64, error) {
	r := f.alloc(n, true)
	return unsafe.Pointer(&r.mem[0]), r.dev, nil
}
func (f *fakeDriver) FreeHost(unsafe.Pointer) error { return nil }
func (f *fakeDriver) Alloc(n int) (uint64, error)   { return f.alloc(n, false).dev, nil }
func (f *fakeDriver) Free(uint64) error             { return nil }
func (f *fakeDriver) CopyHtoD(dst uint64, src []byte, _ stream) error {
	b, err := f.at(dst, len(src))
	if err == nil {
		copy(b, src)
	}
	return err
}
func (f *fakeDriver) CopyDtoH(dst []byte, src uint64, _ stream) error {
	b, err := f.at(src, len(dst))
	if err == nil {
		copy(dst, b)
	}
	return err
}
func (f *fakeDriver) Memset(dst uint64, v byte, n int, _ stream) error {
	b, err := f.at(dst, n)
	for i := range b {
		b[i] = v
	}
	return err
}
func (f *fakeDriver) Launch(_ function, _, _ [3]uint32, _ uint32, _ stream, args ...any) error {
	b, err := f.at(args[0].(uint64), 8) // the clock kernel's output word
	if err == nil {
		binary.LittleEndian.PutUint64(b, 777)
	}
	return err
}
func (f *fakeDriver) Close() error { return nil }

type fakeStream struct{}

func (fakeStream) Sync() error    { return nil }
func (fakeStream) Destroy() error { return nil }

type fakeModule struct{ f *fakeDriver }

func (m fakeModule) ReadPointer(name string) (uint64, error) {
	r, ok := m.f.globals[name]
	if !ok {
		return 0, fmt.Errorf("no global %s", name)
	}
	return binary.LittleEndian.Uint64(r.mem), nil
}
func (m fakeModule) Global(name string) (uint64, uint64, error) {
	r, ok := m.f.globals[name]
	if !ok {
		return 0, 0, fmt.Errorf("no global %s", name)
	}
	return r.dev, uint64(len(r.mem)), nil
}
func (m fakeModule) Function(string) (function, error) { return "ncclhooks_clock", nil }
func (m fakeModule) Unload() error                     { return nil }

// loadOnFakeDriver generates the profile and loads it on a fake driver; the
// device is closed when the test ends.
func loadOnFakeDriver(t *testing.T, file, profile string) (*hookgen.Module, *fakeDriver, *Device) {
	t.Helper()
	p, err := config.Parse(file, []byte(profile))
	if err != nil {
		t.Fatal(err)
	}
	m, err := hookgen.Generate(p)
	if err != nil {
		t.Fatal(err)
	}
	fd := newFakeDriver(m)
	d := &Device{c: &Compiled{mod: m}, d: fd}
	if err := d.load(&archImages{hook: &cuda.Image{}, clock: &cuda.Image{}}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	return m, fd, d
}

const layoutProfile = `version: 1
name: layout
hooks:
  - name: even   # 22 bytes: 6 chunks, stored two by two (vector stores)
    fields: [timestamp, workCounter, funcId, channelId, phase]
    buffer: {slots: 64}
  - name: odd    # 12 bytes: 3 chunks, stored one by one
    fields: [workCounter, funcId]
    buffer: {slots: 16, overflow: overwrite_oldest}
  - name: agg
    when: func startsWith "AllReduce"
    aggregate: [{name: n, kind: count, by: [channelId]}]
`

// storeRE matches the generated code's record stores: the word index and
// the chunks stored there (two for a vector store).
var storeRE = regexp.MustCompile(`hk_store64(x2)?\(slot \+ (\d+), stamp \| c(\d+)(?:, stamp \| c(\d+))?\);`)

// TestDeviceLayoutOnAFakeDriver loads a generated module on a fake driver
// and checks what only the GPU machine used to: each communicator's context
// block is device memory of the module's size whose header holds the device
// addresses of ncclhooks_ctl and of every hook's buffers; those buffers are
// the host-mapped memory the drainer reads through Slots and Holes, of the
// sizes the layout needs; the limit and the heads are read and written at
// their offsets; the function sets are in every block, also one made after
// they were written; ReadAgg adds up the blocks' cells;
// and a record stored the way the generated code stores it (its vector
// stores' operand order, as the prelude's PTX lays the operands out) reads
// back through Slots as the payload it was made of.
func TestDeviceLayoutOnAFakeDriver(t *testing.T) {
	m, fd, d := loadOnFakeDriver(t, "layout.yaml", layoutProfile)
	H := len(m.Hooks)
	if d.Entry() != 0x7f20_0000_1000 || d.Ctx() == 0 {
		t.Fatalf("entry %#x ctx %#x", d.Entry(), d.Ctx())
	}
	block := func(p uintptr) []byte {
		t.Helper()
		b, err := fd.at(uint64(p), m.Block.Bytes)
		if err != nil {
			t.Fatalf("context block at %#x: %v", p, err)
		}
		return b
	}

	// The header, as the hook reads it.
	ctx := block(d.Ctx())
	le := binary.LittleEndian
	// The control words open the arena, and communicator 0's block follows
	// them in it: one page for a record hook's header and head.
	// what the record hooks compute: devCtx masked to the arena's alignment.
	A := uint64(m.Arena.Bytes)
	if d.arena%A != 0 || uint64(d.Ctx())&^(A-1) != d.arena || uint64(d.Ctx()) != d.arena+uint64(m.Arena.CtlBytes) {
		t.Errorf("block at %#x, arena (the control words) at %#x of %d bytes", d.Ctx(), d.arena, A)
	}
	if dev, comm := le.Uint32(ctx[16*H:]), le.Uint32(ctx[16*H+4:]); dev != 3 || comm != 0 {
		t.Errorf("ctx device %d comm %d, want 3 and 0", dev, comm)
	}
	for h, info := range m.Hooks {
		words := info.Slots * info.Layout.SlotWords()
		slots, err := fd.at(le.Uint64(ctx[16*h:]), 8*max(words, 1))
		if err != nil {
			t.Fatalf("hook %s slots: %v", info.Name, err)
		}
		holes, err := fd.at(le.Uint64(ctx[16*h+8:]), 4*info.Slots)
		if err != nil {
			t.Fatalf("hook %s holes: %v", info.Name, err)
		}
		if len(d.Slots(h)) != words || words > 0 && unsafe.Pointer(&d.Slots(h)[0]) != unsafe.Pointer(&slots[0]) {
			t.Errorf("hook %s: Slots is %d words at %p, the device's buffer %d words at %p", info.Name, len(d.Slots(h)), d.Slots(h), words, slots)
		}
		if len(d.Holes(h)) != info.Slots || unsafe.Pointer(&d.Holes(h)[0]) != unsafe.Pointer(&holes[0]) {
			t.Errorf("hook %s: Holes is not the device's hole buffer", info.Name)
		}
		if words > 0 && uintptr(unsafe.Pointer(&slots[0]))%16 != 0 {
			t.Errorf("hook %s: slots not 16-byte aligned (vector stores)", info.Name)
		}
	}

	// Control words: heads at ctl[h], limits at ctl[H+h].
	ctl, err := fd.at(d.arena, 8*m.CtlWords())
	if err != nil {
		t.Fatal(err)
	}
	for h := range H {
		le.PutUint64(ctl[8*h:], uint64(100+h))
		if err := d.WriteLimit(h, uint64(5000+h)); err != nil {
			t.Fatal(err)
		}
	}
	heads := make([]uint64, m.CtlWords())
	if err := d.ReadCtl(heads); err != nil {
		t.Fatal(err)
	}
	for h := range H {
		if heads[h] != uint64(100+h) || heads[H+h] != uint64(5000+h) {
			t.Errorf("hook %d: head %d limit %d, want %d and %d", h, heads[h], heads[H+h], 100+h, 5000+h)
		}
	}
	set := make([]uint32, hookgen.FuncSetWords)
	set[0], set[len(set)-1] = 0b1011, 1<<31
	if err := d.WriteFuncSets([][]uint32{set}); err != nil {
		t.Fatal(err)
	}
	// Later communicators: blocks of their own, the header with their index.
	for comm := 1; comm <= 2; comm++ {
		p, err := d.CommCtx(comm)
		if err != nil {
			t.Fatal(err)
		}
		b := block(p)
		if le.Uint32(b[16*H+4:]) != uint32(comm) || string(b[:16*H]) != string(ctx[:16*H]) || uint64(p)&^(A-1) != d.arena {
			t.Errorf("communicator %d: header % x", comm, b[:m.CtxBytes()])
		}
	}
	for comm := range 3 {
		p, _ := d.CommCtx(comm)
		fs := block(p)[m.Block.FuncSets:]
		if le.Uint32(fs) != 0b1011 || le.Uint32(fs[4*(len(set)-1):]) != 1<<31 {
			t.Errorf("communicator %d: function set words at the wrong offsets: % x", comm, fs[:8])
		}
		cells := block(p)[m.Block.Agg:]
		for i := range m.Block.AggWords {
			le.PutUint64(cells[8*i:], uint64((comm+1)*(i*i+1)))
		}
	}
	agg := make([]uint64, m.AggWords)
	if err := d.ReadAgg(agg); err != nil {
		t.Fatal(err)
	}
	for i, v := range agg { // the profile's one aggregate has no comm key: 1+2+3 times each word
		if v != uint64(6*(i*i+1)) {
			t.Fatalf("agg word %d = %d, want %d", i, v, 6*(i*i+1))
		}
	}

	// A record written as the generated code writes it.
	prelude := regexp.MustCompile(`hk_store64x2\(hk_u64\* p, hk_u64 a, hk_u64 b\) \{\s*asm volatile\("st\.volatile\.global\.v2\.u64 \[%0\], \{%1, %2\};" : : "l"\(p\), "l"\(a\), "l"\(b\)`)
	if !prelude.MatchString(m.Source) {
		t.Fatal("the prelude's hk_store64x2 is not st.v2 [p], {a, b}: the vector store's word order is unknown (PTX stores {a, b} with a at the lower address)")
	}
	r := rand.New(rand.NewSource(1))
	for h, info := range m.Hooks {
		l := info.Layout
		if l.Chunks == 0 {
			continue
		}
		stores := hookStores(t, m.Source, h)
		if l.Chunks%2 == 0 && !strings.Contains(stores[0][0], "x2") {
			t.Errorf("hook %s: %d chunks but no vector store", info.Name, l.Chunks)
		}
		for _, pos := range []uint64{0, 1, uint64(info.Slots) - 1, uint64(info.Slots) + 2, 1<<32 + 5} {
			payload := make([]byte, 4*l.Chunks)
			r.Read(payload[:l.Bytes])
			slot := le.Uint64(ctx[16*h:]) + 8*(pos&uint64(info.Slots-1))*uint64(l.Chunks)
			stamp := uint64(uint32(pos+1)) << 32
			chunk := func(s string) uint64 {
				c, _ := strconv.Atoi(s)
				return stamp | uint64(le.Uint32(payload[4*c:]))
			}
			for _, st := range stores {
				word, _ := strconv.Atoi(st[2])
				vals := []uint64{chunk(st[3])}
				if st[1] == "x2" {
					vals = append(vals, chunk(st[4])) // {a, b}: b at the higher address
				}
				for i, v := range vals {
					b, err := fd.at(slot+8*uint64(word+i), 8)
					if err != nil {
						t.Fatal(err)
					}
					le.PutUint64(b, v)
				}
			}
			// What the drainer reads, through the host view.
			view := d.Slots(h)[int(pos&uint64(info.Slots-1))*l.Chunks:][:l.Chunks]
			got := make([]byte, 4*l.Chunks)
			for i, w := range view {
				if uint32(w>>32) != uint32(pos+1) {
					t.Fatalf("hook %s pos %d: word %d stamped %d, want %d", info.Name, pos, i, w>>32, uint32(pos+1))
				}
				le.PutUint32(got[4*i:], uint32(w))
			}
			want := fmt.Sprint(l.Decode(payload, nil))
			if dec := fmt.Sprint(l.Decode(got, nil)); dec != want {
				t.Errorf("hook %s pos %d: the drainer decodes %s, the device stored %s", info.Name, pos, dec, want)
			}
		}
	}

	if host, dev, err := d.Clock(); err != nil || dev != 777 || host == 0 {
		t.Errorf("Clock = %d, %d, %v", host, dev, err)
	}
}

// Context blocks are carved from the arena while they fit, each zeroed but
// for its header. Past that, a profile that records nothing gets allocations
// of its own; a recording profile's hooks find the control words by masking
// devCtx, so its next communicator gets no block.
func TestBlocksBeyondTheArena(t *testing.T) {
	for _, tc := range []struct{ name, hook string }{
		{"aggregates", "    aggregate: [{name: d, kind: histogram, value: duration, by: [funcId], buckets: log2}]"},
		{"records", "    fields: [timestamp, duration]\n    buffer: {slots: 64}"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, fd, d := loadOnFakeDriver(t, "big.yaml", "version: 1\nname: big\nhooks:\n  - name: lat\n    when: phase == STOP && paired\n"+tc.hook+"\n")
			B, fit, A := m.Block.Bytes, m.ArenaComms(), uint64(m.Arena.Bytes)
			if m.Arena.Bound && fit < hookgen.MinArenaComms || fit < 1 {
				t.Fatalf("%d blocks of %d bytes fit the %d-byte arena", fit, B, A)
			}
			for comm := 0; comm <= fit+1; comm++ {
				p, err := d.CommCtx(comm)
				if comm >= fit && m.Arena.Bound {
					if err == nil {
						t.Fatalf("communicator %d of a recording profile got a block outside the arena (%d fit)", comm, fit)
					}
					t.Logf("communicator %d: %v", comm, err)
					return
				}
				if err != nil {
					t.Fatal(err)
				}
				inArena := uint64(p)&^(A-1) == d.arena
				if inArena != (comm < fit) || inArena && uint64(p) != d.arena+uint64(m.Arena.CtlBytes+comm*B) {
					t.Errorf("communicator %d: block at %#x, arena at %#x of %d bytes, %d fit", comm, p, d.arena, A, fit)
				}
				b, err := fd.at(uint64(p), B)
				if err != nil {
					t.Fatal(err)
				}
				if binary.LittleEndian.Uint32(b[16+4:]) != uint32(comm) {
					t.Errorf("communicator %d: header % x", comm, b[:m.CtxBytes()])
				}
				for i, x := range b[m.CtxBytes():] {
					if x != 0 {
						t.Fatalf("communicator %d: block byte %d is %d, want zero", comm, m.CtxBytes()+i, x)
					}
				}
			}
			if len(d.extra) != 2 {
				t.Errorf("%d blocks have allocations of their own, want 2", len(d.extra))
			}
		})
	}
}

// hookStores returns the record stores of hook h in the generated source,
// in order: each a storeRE match.
func hookStores(t *testing.T, src string, h int) [][]string {
	t.Helper()
	start := strings.Index(src, fmt.Sprintf("cx->hook[%d].slots", h))
	if start < 0 {
		t.Fatalf("no slot address of hook %d in the source", h)
	}
	end := strings.Index(src[start:], "\n    }\n")
	if end < 0 {
		t.Fatalf("hook %d: end of its record block not found", h)
	}
	stores := storeRE.FindAllStringSubmatch(src[start:start+end], -1)
	if len(stores) == 0 {
		t.Fatalf("hook %d: no record stores", h)
	}
	words := map[int]bool{}
	for _, st := range stores {
		w, _ := strconv.Atoi(st[2])
		words[w] = true
		if st[1] == "x2" {
			words[w+1] = true
		}
	}
	var ws []int
	for w := range words {
		ws = append(ws, w)
	}
	sort.Ints(ws)
	for i, w := range ws {
		if i != w {
			t.Fatalf("hook %d: stores cover words %v", h, ws)
		}
	}
	return stores
}

// A Work module's communicators each get a block of host-mapped memory,
// aligned so that devCtx carries the communicator's index in its low bits;
// Regions views, on the host, the memory the hook writes at devCtx minus the
// index plus the hook's offset.
func TestWorkBlocksOnAFakeDriver(t *testing.T) {
	m, fd, d := loadOnFakeDriver(t, "work.yaml", `version: 1
name: work
hooks:
  - name: a
    fields: [timestamp, phase]
    buffer: {slots: 1024, overflow: overwrite_oldest, positions: work}
  - name: b
    fields: [funcId]
    buffer: {slots: 2048, overflow: overwrite_oldest, positions: work}
`)
	seen := map[uint64]bool{}
	for comm := range 3 {
		ctx, err := d.CommCtx(comm)
		if err != nil {
			t.Fatal(err)
		}
		if ctx%hookgen.WorkBlockAlign != uintptr(comm) {
			t.Fatalf("communicator %d: devCtx %#x", comm, ctx)
		}
		block := uint64(ctx) - uint64(comm)
		if seen[block] {
			t.Fatalf("communicator %d shares block %#x", comm, block)
		}
		seen[block] = true
		for h := range m.Hooks {
			view := d.Regions(comm, h)
			if len(view) != m.RegionWords(h) {
				t.Fatalf("communicator %d hook %d: %d words, want %d", comm, h, len(view), m.RegionWords(h))
			}
			dev, err := fd.at(block+uint64(m.Block.Regions[h]), 8*len(view))
			if err != nil {
				t.Fatal(err)
			}
			dev[8*len(view)-1] = byte(comm + 1) // the device writes the last byte
			if view[len(view)-1]>>56 != uint64(comm+1) {
				t.Errorf("communicator %d hook %d: the host view does not show the device's write", comm, h)
			}
		}
	}
	if d.Comms() != 3 || d.Regions(3, 0) != nil {
		t.Errorf("Comms() = %d; Regions of communicator 3: %v", d.Comms(), d.Regions(3, 0) != nil)
	}
}
