package hookgen

import (
	"encoding/binary"
	"fmt"
	"math"
	"slices"
	"unsafe"

	"github.com/ncclhooks/ncclhooks/internal/config"
)

// Symbol names every generated module defines (docs/ARCHITECTURE.md): the
// entry and the pointer the GPU backend reads its address from. The module
// has no other variable: the hooks' state is in memory the backend allocates,
// the control words (CtlWords) and each communicator's context block
// (Module.Block).
const (
	SymEntry    = "ncclhooks_entry"
	SymEntryPtr = "ncclhooks_entry_ptr"
)

// FuncSetWords is the number of 32-bit words of one function-id set: ids
// 0..FuncSetWords*32-1 can be tested; a larger id never matches a set.
const FuncSetWords = 256

// Module describes a generated source: everything a backend, the drain and
// the decoders need to know about it.
type Module struct {
	Profile  *config.Profile
	Source   string
	Hooks    []*HookInfo    // enabled hooks, in dispatch order; Index == position here
	FuncSets []*FuncSetInfo // name predicates; set i is the block's function-id set i
	Aggs     []*AggInfo     // aggregates of all hooks; cells laid out back to back
	// AggWords is the number of 64-bit words of a device's aggregates as the
	// host reads them (ReadAgg): every aggregate's Keys rows, a communicator
	// key included. Each context block holds its communicator's cells,
	// Block.AggWords of them, without that key; AddAgg adds them up.
	AggWords int
	Block    BlockLayout // one communicator's context block: devCtx points at it
	Arena    ArenaLayout // the device's control words and context blocks
	// Work: every hook takes its records' positions from the work counter
	// (buffer.positions: work). Each communicator's block is then its
	// regions, in host-mapped memory aligned to WorkBlockAlign, and its
	// devCtx is the block's address plus the communicator's index
	// (WorkCtx): the hooks load nothing but the event.
	Work  bool
	Lines []LineSpan // generated line ranges traced back to the profile
	// prelude is the byte range of Source that holds the prelude (the
	// intrinsics, hk_div, the atomics), the same for every profile.
	prelude [2]int
}

// HooksSource is Source without the prelude: what the profile generated
// (ncclhooks gen --hooks). A comment stands where the prelude was.
func (m *Module) HooksSource() string {
	if m.prelude[1] == 0 {
		return m.Source
	}
	return m.Source[:m.prelude[0]] + "/* (the prelude is left out: ncclhooks gen PROFILE without --hooks shows it) */\n" + m.Source[m.prelude[1]:]
}

// CtlWords is the number of 64-bit control words, which every communicator
// of a device shares: ctl[h] is the head (positions reserved by hook h),
// ctl[H+h] its limit (drop_newest, written by the host).
func (m *Module) CtlWords() int { return 2 * len(m.Hooks) }

// HookInfo is one enabled hook as generated.
type HookInfo struct {
	Index    int
	Name     string
	Slots    int // N, a power of two
	Overflow config.Overflow
	Layout   Layout
	Hook     *config.Hook
	// Work: positions from the work counter, 2 x workCounter + phase, in
	// a region per (communicator, channel) of RegionSlots slots
	// (Slots / config.RegionChannels); Block.Regions[Index] places the
	// hook's regions in each communicator's block.
	Work        bool
	RegionSlots int
}

// Drain records: a hook whose aggregates the drain computes
// (config.Hook.DrainAggregates) records, in DrainChunks chunks, the low
// DrainTimeBits bits of each event's timestamp (a duration, the difference
// of two, is exact below 2^52 ns, 52 days: the drain takes a larger one for
// a STOP before its START, 0) and above them, from bit
// DrainFuncShift of chunk 1, its funcId key (config.MaxFuncIDs for any
// larger id, the overflow row's). The drain knows the rest, the channel and
// the communicator, from the region the record is in. Two chunks are one
// vector store.
const (
	DrainChunks    = 2
	DrainTimeBits  = 53
	DrainFuncShift = DrainTimeBits - 32
)

// DrainRecord decodes the two chunks of a drain record.
func DrainRecord(c0, c1 uint32) (timestamp uint64, funcID uint32) {
	return uint64(c0) | uint64(c1&(1<<DrainFuncShift-1))<<32, c1 >> DrainFuncShift
}

// Work positions: a communicator's block is aligned to WorkBlockAlign,
// and its index on the device rides in devCtx's low bits, below
// WorkMaxComms.
const (
	WorkBlockAlign = 4096
	WorkMaxComms   = WorkBlockAlign
)

// WorkComm says whether communicator comm can have a block of a Work
// module: its index must fit devCtx's low bits.
func WorkComm(comm int) error {
	if comm < 0 || comm >= WorkMaxComms {
		return fmt.Errorf("a profile with positions: work holds %d communicators per device (the index rides in the context's low bits); communicator %d gets no hook (profile it with fewer on the device, or with positions: shared)", WorkMaxComms, comm)
	}
	return nil
}

// WorkCtx is the devCtx of communicator comm whose block (of a Work
// module) lies at block.
func WorkCtx(block uintptr, comm int) (uintptr, error) {
	if err := WorkComm(comm); err != nil {
		return 0, err
	}
	if block%WorkBlockAlign != 0 {
		return 0, fmt.Errorf("the block of communicator %d at %#x is not aligned to %d bytes", comm, block, WorkBlockAlign)
	}
	return block + uintptr(comm), nil
}

// RegionWords is the number of words of hook h's regions in one
// communicator's block (Work modules): config.RegionChannels regions of
// RegionSlots slots of SlotWords words.
func (m *Module) RegionWords(h int) int {
	info := m.Hooks[h]
	return config.RegionChannels * info.RegionSlots * info.Layout.SlotWords()
}

// CtxAddrs are what the header of a context block (hk_ctx_t) holds. The hook
// reaches all of its state through devCtx and never by symbol: called from
// NCCL's kernel, which lives in another module, a function cannot address its
// own module's globals (the GPU resolves them through the running kernel's
// module, so such an access faults).
type CtxAddrs struct {
	Device       int
	Comm         int       // the communicator's index on the device (the comm intrinsic)
	Slots, Holes []uintptr // per hook, as the hook sees them (device addresses on the GPU)
}

// CtxBytes is the byte size of hk_ctx_t, the block's header: two pointers
// per hook, the device ordinal and the communicator index.
func (m *Module) CtxBytes() int { return 16*len(m.Hooks) + 8 }

// EncodeCtx returns the bytes of hk_ctx_t (little-endian, 64-bit pointers).
func (m *Module) EncodeCtx(a CtxAddrs) []byte {
	b := make([]byte, m.CtxBytes())
	for h := range m.Hooks {
		if h < len(a.Slots) {
			binary.LittleEndian.PutUint64(b[16*h:], uint64(a.Slots[h]))
		}
		if h < len(a.Holes) {
			binary.LittleEndian.PutUint64(b[16*h+8:], uint64(a.Holes[h]))
		}
	}
	binary.LittleEndian.PutUint32(b[16*len(m.Hooks):], uint32(a.Device))
	binary.LittleEndian.PutUint32(b[16*len(m.Hooks)+4:], uint32(a.Comm))
	return b
}

// ArenaLayout is the device's arena (docs/ARCHITECTURE.md "Generated module
// symbols and the context block"): Bytes of memory aligned to Bytes, a power of two, that opens with
// the control words (CtlBytes, a cache line or more) and holds context blocks
// after them. A record hook finds the control words by masking devCtx to the
// arena's alignment, with no load; so when Bound (the profile records), every
// block must lie in the arena, and it has room for at least MinArenaComms.
// Otherwise a block that does not fit may lie anywhere.
type ArenaLayout struct {
	Bytes    int
	CtlBytes int
	Bound    bool
}

// ArenaComms is how many context blocks the arena holds.
func (m *Module) ArenaComms() int { return (m.Arena.Bytes - m.Arena.CtlBytes) / m.Block.Bytes }

// BlockOffset places communicator comm's context block: at byte offset off
// of the arena while the arena has room (inArena); past it, in an allocation
// of its own, unless the profile records (Arena.Bound), whose hooks find the
// control words by masking devCtx: then comm gets no block (err).
func (m *Module) BlockOffset(comm int) (off int, inArena bool, err error) {
	switch n := m.ArenaComms(); {
	case comm < n:
		return m.Arena.CtlBytes + comm*m.Block.Bytes, true, nil
	case m.Arena.Bound:
		return 0, false, fmt.Errorf("the device's arena holds the context blocks of %d communicators, and profile %q records: its hooks find the control words through the arena (profile this communicator with fewer on the device, or with aggregates instead of records)", n, m.Profile.Name)
	}
	return 0, false, nil
}

// MinArenaComms is the least number of communicators per device whose
// context blocks the arena of a recording profile holds.
const MinArenaComms = 64

// minArena is the least arena: one 2 MiB page of GPU memory, which holds the
// control words and every block of most profiles.
const minArena = 2 << 20

func (m *Module) layoutArena() {
	a := &m.Arena
	a.CtlBytes = alignUp(8*m.CtlWords(), blockAlign)
	for _, h := range m.Hooks {
		// Work hooks find their regions in their own block.
		a.Bound = a.Bound || (len(h.Layout.Fields) > 0 && !h.Work)
	}
	need := a.CtlBytes + m.Block.Bytes
	if m.Work {
		need = a.CtlBytes
	}
	if a.Bound {
		need = a.CtlBytes + MinArenaComms*m.Block.Bytes
	}
	a.Bytes = minArena
	if m.Work {
		// The blocks are host memory of their own: the arena holds
		// the control words alone.
		a.Bytes = WorkBlockAlign
	}
	for a.Bytes < need {
		a.Bytes *= 2
	}
}

// BlockLayout places the parts of a communicator's context block, which
// devCtx points at (docs/ARCHITECTURE.md "Generated module symbols and the
// context block"): byte offsets
// from its start, each part at a multiple of blockAlign. The hot path reaches
// every part but the header at a constant offset from devCtx, with no load
// of an address first. A part a profile does not use has size 0.
type BlockLayout struct {
	FuncSets int // FuncSetWords 32-bit words per name predicate, filled by the host
	Pairs    int // the duration pairing table, PairWords 64-bit words
	Agg      int // AggWords 64-bit aggregation cells: this communicator's
	AggWords int
	// Regions places each hook's regions (Work modules, whose blocks hold
	// nothing else: no header, which would be a load).
	Regions []int
	Bytes   int // the whole block
}

// blockAlign is the alignment of each part of a block: a cache line, so that
// the header the host writes shares none with cells the device updates.
const blockAlign = 128

func alignUp(n, a int) int { return (n + a - 1) / a * a }

// layoutBlock places the parts of the block after the header, and each
// aggregate's cells among the block's.
func (m *Module) layoutBlock(pairing bool) {
	b := &m.Block
	if m.Work {
		off := 0
		for h := range m.Hooks {
			b.Regions = append(b.Regions, off)
			off = alignUp(off+8*m.RegionWords(h), blockAlign)
		}
		b.Bytes = alignUp(off, WorkBlockAlign)
		return
	}
	off := alignUp(m.CtxBytes(), blockAlign)
	if len(m.FuncSets) > 0 {
		b.FuncSets = off
		off = alignUp(off+4*FuncSetWords*len(m.FuncSets), blockAlign)
	}
	if pairing {
		b.Pairs = off
		off = alignUp(off+8*PairWords, blockAlign)
	}
	for _, a := range m.Aggs {
		a.DevOffset = b.AggWords
		b.AggWords += a.DevKeys() * a.RowWords
	}
	if b.AggWords > 0 {
		b.Agg = off
		off = alignUp(off+8*b.AggWords, blockAlign)
	}
	b.Bytes = off
}

// Trace returns the narrowest generated span that contains line (1-based),
// so that a compiler diagnostic can name the hook and profile position it
// came from.
func (m *Module) Trace(line int) (LineSpan, bool) {
	best, found := LineSpan{}, false
	for _, s := range m.Lines {
		if line < s.Start || line > s.End {
			continue
		}
		if !found || s.End-s.Start < best.End-best.Start {
			best, found = s, true
		}
	}
	return best, found
}

// FuncSetInfo is one function-id set to fill at init from function names.
type FuncSetInfo struct {
	Index int
	Pred  *config.FuncPred
	Hook  string
}

// MaxFuncIDs is how many function ids a set holds.
const MaxFuncIDs = FuncSetWords * 32

// FuncSetBits resolves every name predicate of m against names (NCCL's
// function names, by id) into the words of the function-id sets: set i, id n
// is bit n%32 of word n/32. Ids from MaxFuncIDs on are never matched.
func (m *Module) FuncSetBits(names []string) [][]uint32 {
	sets := make([][]uint32, len(m.FuncSets))
	for i, fs := range m.FuncSets {
		bits := make([]uint32, FuncSetWords)
		for id, n := range names[:min(len(names), MaxFuncIDs)] {
			if fs.Pred.Match(n) {
				bits[id/32] |= 1 << (id % 32)
			}
		}
		sets[i] = bits
	}
	return sets
}

// AggInfo is one aggregate's place in the host's cells (ReadAgg) and in each
// context block's.
type AggInfo struct {
	Hook      string
	Agg       *config.Aggregate
	Offset    int  // first 64-bit word in the host's cells
	Keys      int  // number of key combinations (rows): config.Aggregate.Keys
	RowWords  int  // words per row: config.Aggregate.RowWords
	Overflow  bool // keyed by funcId and/or channelId: the last key of each collects out-of-range ids
	DevOffset int  // first 64-bit word in a block's cells
	// ByComm: keyed by comm. A block's rows leave that key out (a block is
	// one communicator's); AddAgg puts them in the communicator's rows.
	ByComm bool
}

// FloatSum says whether the aggregate sums float64 values: its sum word
// holds float64 bits, not int64.
func (a *AggInfo) FloatSum() bool {
	return a.Agg.Kind == config.AggSum && a.Agg.Value != nil && a.Agg.Value.Type.IsFloat()
}

// DevKeys is the number of rows of the aggregate in a context block: Keys
// without the comm key, which the block itself stands for.
func (a *AggInfo) DevKeys() int {
	if a.ByComm {
		return a.Keys / (config.MaxCommKeys + 1)
	}
	return a.Keys
}

// AddAgg adds the aggregation cells of communicator comm's context block
// (Block.AggWords words, as the hooks updated them) into dst (AggWords words,
// the host's layout): counts and sums add up, the encoded minima and maxima
// take the larger word, and an aggregate keyed by comm puts the block's rows
// in the communicator's rows (the overflow key's, from MaxCommKeys on). dst
// starts zeroed; adding every block of a device gives the device's cells.
func (m *Module) AddAgg(dst []uint64, comm int, cells []uint64) {
	ck := min(comm, config.MaxCommKeys)
	for _, a := range m.Aggs {
		kind, rw, floatSum := a.Agg.Kind, a.RowWords, a.FloatSum()
		for r := 0; r < a.DevKeys(); r++ {
			hr := r
			if a.ByComm {
				hr = r*(config.MaxCommKeys+1) + ck
			}
			src := cells[a.DevOffset+r*rw : a.DevOffset+(r+1)*rw]
			out := dst[a.Offset+hr*rw : a.Offset+(hr+1)*rw]
			for i, w := range src {
				switch {
				case i == 1 && (kind == config.AggMin || kind == config.AggMax):
					out[i] = max(out[i], w)
				case i == 1 && floatSum:
					out[i] = math.Float64bits(math.Float64frombits(out[i]) + math.Float64frombits(w))
				default:
					out[i] += w
				}
			}
		}
	}
}

// Buckets is the number of histogram buckets of the aggregate (0 unless a
// histogram): config.Buckets.Count.
func (a *AggInfo) Buckets() int {
	if a.Agg.Kind != config.AggHistogram {
		return 0
	}
	return a.Agg.Buckets.Count()
}

// Row returns the row of a (funcId, channelId) key, folding out-of-range ids
// into the overflow key exactly as the generated code does
// (config.Aggregate.Row).
func (a *AggInfo) Row(funcID, channelID uint32) int { return a.Agg.Row(funcID, channelID) }

// LineSpan maps generated source lines [Start, End] (1-based) to the profile.
type LineSpan struct {
	Start, End int
	Hook       string
	What       string // "when", "let dur_us", "field fn", "aggregate latency", ...
	Pos        config.Pos
}

// Layout is a packed record layout, described once for generator and decoder.
type Layout struct {
	Fields []FieldLayout
	Bytes  int // packed payload bytes
	Chunks int // 32-bit chunks = ceil(Bytes/4); a slot holds those not Implied, a 64-bit word each
	// Implied are the chunks a hook with work positions does not store:
	// each holds nothing but its record's work counter, which the record's
	// position (2 x workCounter + phase) already says, so the drain's
	// decoder takes it from there (NewSlotDecoder; docs/ARCHITECTURE.md,
	// "Work positions"). Ascending; nil for every other hook.
	Implied []ImpliedChunk
}

// ImpliedChunk is payload chunk Chunk, uint32(workCounter >> Shift).
type ImpliedChunk struct {
	Chunk int
	Shift uint
}

// FieldLayout is one field at a byte offset of the packed payload.
type FieldLayout struct {
	Name   string
	Source string
	Type   config.Type
	Offset int
}

// SlotWords is the number of 64-bit words of one slot: a stored chunk each.
func (l *Layout) SlotWords() int { return l.Chunks - len(l.Implied) }

// Stored lists the payload chunks a slot holds, word by word.
func (l *Layout) Stored() []int {
	stored := make([]int, 0, l.SlotWords())
	next := 0
	for c := range l.Chunks {
		if next < len(l.Implied) && l.Implied[next].Chunk == c {
			next++
			continue
		}
		stored = append(stored, c)
	}
	return stored
}

// implyWorkCounter marks the chunks of l that hold nothing but a
// workCounter field, stored as the integer it is (4 or 8 bytes on chunk
// boundaries), as Implied: for a hook with work positions. The fields lie
// in offset order, so the chunks come out ascending.
func (l *Layout) implyWorkCounter() {
	for _, f := range l.Fields {
		size := f.Type.Bytes()
		if f.Source != "workCounter" || f.Offset%4 != 0 || (size != 4 && size != 8) || f.Type.IsFloat() {
			continue
		}
		for k := 0; k < size/4; k++ {
			l.Implied = append(l.Implied, ImpliedChunk{Chunk: f.Offset/4 + k, Shift: uint(32 * k)})
		}
	}
}

// implied reports whether field f is an implied work counter: its chunks
// are its own, so its first one says.
func (l *Layout) implied(f FieldLayout) bool {
	return slices.ContainsFunc(l.Implied, func(ic ImpliedChunk) bool { return ic.Chunk == f.Offset/4 })
}

// Value is a decoded field value: exactly one of U, I, F is meaningful, by Type.
type Value struct {
	Type config.Type
	U    uint64
	I    int64
	F    float64
}

// Decode unpacks a payload (len >= l.Bytes) into one value per field,
// setting each value's Type. The drain decodes through a Decoder instead,
// which sets the types once.
func (l *Layout) Decode(payload []byte, out []Value) []Value {
	n := len(l.Fields)
	if cap(out) < n {
		out = make([]Value, n)
	}
	out = out[:n]
	for i, f := range l.Fields {
		out[i] = Value{Type: f.Type}
	}
	l.NewDecoder().Decode(payload, out)
	return out
}

// A Decoder decodes the payloads of one layout into values it typed once
// (Values), so that per record it writes one member per field and nothing
// else: the drain decodes every record it delivers.
type Decoder struct {
	fields []fieldCodec
	types  []config.Type
	span   int // the payload bytes the fields span
}

// fieldCodec is what decoding one field needs, packed: where its bytes are,
// how many, and what they hold.
type fieldCodec struct {
	offset uint32
	size   uint8 // bytes: 1, 2, 4 or 8
	shift  uint8 // signed: 64 - 8*size, the sign extension
	class  valueClass
}

type valueClass uint8

const (
	classU valueClass = iota
	classI
	classF32
	classF64
	// classPosU, classPosI: an implied work counter (Layout.Implied),
	// from the record's position rather than its payload, unsigned or
	// signed.
	classPosU
	classPosI
)

func codecOf(f FieldLayout) fieldCodec {
	c := fieldCodec{offset: uint32(f.Offset), size: uint8(f.Type.Bytes())}
	switch {
	case f.Type == config.F32:
		c.class = classF32
	case f.Type == config.F64:
		c.class = classF64
	case f.Type.IsSigned():
		c.class, c.shift = classI, 64-8*c.size
	}
	return c
}

// NewDecoder returns the decoder of l.
func (l *Layout) NewDecoder() *Decoder {
	d := &Decoder{fields: make([]fieldCodec, len(l.Fields)), types: make([]config.Type, len(l.Fields))}
	for i, f := range l.Fields {
		d.fields[i] = codecOf(f)
		d.types[i] = f.Type
		d.span = max(d.span, f.Offset+f.Type.Bytes())
	}
	return d
}

// NewSlotDecoder returns the decoder of l's records as a slot holds them: its
// stored chunks back to back (4 x SlotWords bytes), the Implied work counter
// taken from each record's position. For a layout with nothing implied it
// is NewDecoder.
func (l *Layout) NewSlotDecoder() *Decoder {
	d := l.NewDecoder()
	if len(l.Implied) == 0 {
		return d
	}
	stored := l.Stored()
	d.span = 4 * len(stored)
	for i, f := range l.Fields {
		c := &d.fields[i]
		if l.implied(f) {
			c.class, c.offset = classPosU, 0
			if f.Type.IsSigned() {
				c.class = classPosI
			}
			continue
		}
		// A stored field's chunks are stored together: it moves with
		// its first one.
		c.offset = uint32(4*slices.Index(stored, f.Offset/4) + f.Offset%4)
	}
	return d
}

// Values returns the values of n records, back to back, typed and zero.
func (d *Decoder) Values(n int) []Value {
	vs := make([]Value, n*len(d.fields))
	for i := range vs {
		vs[i].Type = d.types[i%len(d.fields)]
	}
	return vs
}

// DecodeBatch decodes the records of positions seqs that lie back to back
// in payloads, stride bytes apart (stride >= the layout's bytes), into vals,
// the values of len(seqs) records from Values (record i's field f is
// vals[i*fields+f]); an implied work counter (NewSlotDecoder) is seq / 2. It decodes
// a field of every record before the next field: each field's size and kind
// are looked at once per batch, not once per record, and the loop over the
// records is a load and a store. The drain decodes every record it delivers:
// on the H200's host this took an all-events record from 14-23 ns (Decode,
// record by record) to 8 (BenchmarkDecodeBatch, bench/RESULTS.md).
func (d *Decoder) DecodeBatch(payloads []byte, stride int, seqs []uint64, vals []Value) {
	n, nf := len(seqs), len(d.fields)
	if n == 0 || nf == 0 {
		return
	}
	if stride < d.span || len(payloads) < (n-1)*stride+d.span || len(vals) < n*nf {
		panic(fmt.Sprintf("hookgen: DecodeBatch: %d records of %d bytes (%d-byte layout) in %d payload bytes and %d values",
			n, stride, d.span, len(payloads), len(vals)))
	}
	// The bounds are checked above: the loops step pointers, with no
	// check per record (indexed, the checks cost as much as the loads).
	le := binary.LittleEndian
	vsize := unsafe.Sizeof(Value{})
	for f, c := range d.fields {
		// Field f of every record: the column vals[f], vals[f+nf], ...
		src := unsafe.Pointer(&payloads[c.offset])
		dst := unsafe.Pointer(&vals[f])
		at := func(i int) (unsafe.Pointer, *Value) {
			return unsafe.Add(src, i*stride), (*Value)(unsafe.Add(dst, uintptr(i*nf)*vsize))
		}
		switch {
		case c.class == classPosU && c.size == 8:
			// workCounter from the position, 2 x workCounter + phase.
			for i := range n {
				_, v := at(i)
				v.U = seqs[i] >> 1
			}
		case c.class == classPosU:
			for i := range n {
				_, v := at(i)
				v.U = uint64(uint32(seqs[i] >> 1))
			}
		case c.class == classPosI && c.size == 8:
			for i := range n {
				_, v := at(i)
				v.I = int64(seqs[i] >> 1)
			}
		case c.class == classPosI:
			for i := range n {
				_, v := at(i)
				v.I = int64(int32(uint32(seqs[i] >> 1)))
			}
		case c.class == classU && c.size == 8:
			for i := range n {
				p, v := at(i)
				v.U = le.Uint64((*[8]byte)(p)[:])
			}
		case c.class == classU && c.size == 4:
			for i := range n {
				p, v := at(i)
				v.U = uint64(le.Uint32((*[4]byte)(p)[:]))
			}
		case c.class == classU && c.size == 2:
			for i := range n {
				p, v := at(i)
				v.U = uint64(le.Uint16((*[2]byte)(p)[:]))
			}
		case c.class == classU:
			for i := range n {
				p, v := at(i)
				v.U = uint64(*(*byte)(p))
			}
		default:
			// Signed and float fields: the general path.
			for i := range n {
				p, v := at(i)
				c.set(v, c.raw(unsafe.Slice((*byte)(p), c.size)))
			}
		}
	}
}

// raw reads the field's size bytes at the start of b, little-endian.
func (c fieldCodec) raw(b []byte) uint64 {
	le := binary.LittleEndian
	switch c.size {
	case 1:
		return uint64(b[0])
	case 2:
		return uint64(le.Uint16(b))
	case 4:
		return uint64(le.Uint32(b))
	}
	return le.Uint64(b)
}

// set stores the field's raw bits u in v as the member its kind uses.
func (c fieldCodec) set(v *Value, u uint64) {
	switch c.class {
	case classU:
		v.U = u
	case classI:
		v.I = int64(u<<c.shift) >> c.shift
	case classF32:
		v.F = float64(math.Float32frombits(uint32(u)))
	default:
		v.F = math.Float64frombits(u)
	}
}

// Decode unpacks payload into out: one record's values from Values, which
// only Decode has written since. The drain decodes a batch at a time
// (DecodeBatch).
func (d *Decoder) Decode(payload []byte, out []Value) {
	out = out[:len(d.fields)]
	for i, c := range d.fields {
		c.set(&out[i], c.raw(payload[c.offset:]))
	}
}
