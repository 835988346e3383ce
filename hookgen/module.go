package hookgen

import (
	"encoding/binary"
	"math"

	"github.com/ncclhooks/ncclhooks/config"
)

// Symbol names every generated module defines (docs/ARCHITECTURE.md).
const (
	SymEntry    = "ncclhooks_entry"
	SymEntryPtr = "ncclhooks_entry_ptr"
	SymCtx      = "ncclhooks_ctx"
	SymCtl      = "ncclhooks_ctl"
	SymAgg      = "ncclhooks_agg"
	SymFuncSets = "ncclhooks_funcsets"
	SymPairs    = "ncclhooks_pairs"
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
	FuncSets []*FuncSetInfo // name predicates; set i is ncclhooks_funcsets[i]
	Aggs     []*AggInfo     // aggregates of all hooks; cells laid out back to back in ncclhooks_agg
	AggWords int            // total 64-bit words of ncclhooks_agg
	Lines    []LineSpan     // generated line ranges traced back to the profile
}

// CtlWords is the number of 64-bit words of ncclhooks_ctl: head then limit per hook.
func (m *Module) CtlWords() int { return 2 * len(m.Hooks) }

// HookInfo is one enabled hook as generated.
type HookInfo struct {
	Index    int
	Name     string
	Slots    int // N, a power of two
	Overflow config.Overflow
	Layout   Layout
	Hook     *config.Hook
}

// CtxAddrs are the addresses hk_ctx_t holds for one device. The hook reaches
// all of its state through devCtx and never by symbol: called from NCCL's
// kernel, which lives in another module, a function cannot address its own
// module's globals (the GPU resolves them through the running kernel's
// module, so such an access faults).
type CtxAddrs struct {
	Device                    int
	Ctl, Agg, FuncSets, Pairs uintptr   // the module's ncclhooks_ctl, _agg, _funcsets, _pairs
	Slots, Holes              []uintptr // per hook, as the hook sees them (device addresses on the GPU)
}

// CtxBytes is the byte size of hk_ctx_t: four pointers, two per hook, the
// device ordinal and padding.
func (m *Module) CtxBytes() int { return 32 + 16*len(m.Hooks) + 8 }

// EncodeCtx returns the bytes of hk_ctx_t (little-endian, 64-bit pointers).
func (m *Module) EncodeCtx(a CtxAddrs) []byte {
	b := make([]byte, m.CtxBytes())
	for i, p := range []uintptr{a.Ctl, a.Agg, a.FuncSets, a.Pairs} {
		binary.LittleEndian.PutUint64(b[8*i:], uint64(p))
	}
	for h := range m.Hooks {
		if h < len(a.Slots) {
			binary.LittleEndian.PutUint64(b[32+16*h:], uint64(a.Slots[h]))
		}
		if h < len(a.Holes) {
			binary.LittleEndian.PutUint64(b[32+16*h+8:], uint64(a.Holes[h]))
		}
	}
	binary.LittleEndian.PutUint32(b[32+16*len(m.Hooks):], uint32(a.Device))
	return b
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

// AggInfo is one aggregate's place in ncclhooks_agg.
type AggInfo struct {
	Hook     string
	Agg      *config.Aggregate
	Offset   int  // first 64-bit word in ncclhooks_agg
	Keys     int  // number of key combinations (rows)
	RowWords int  // words per row
	Overflow bool // keyed by funcId and/or channelId: the last key of each collects out-of-range ids
}

// Buckets is the number of histogram buckets of the aggregate (0 unless a
// histogram): config.Log2Buckets, or len(bounds)+1 with the final +Inf bucket.
func (a *AggInfo) Buckets() int {
	if a.Agg.Kind != config.AggHistogram {
		return 0
	}
	if a.Agg.Buckets.Log2 {
		return config.Log2Buckets
	}
	return len(a.Agg.Buckets.Bounds) + 1
}

// Row returns the row of a (funcId, channelId) key, folding out-of-range ids
// into the overflow key exactly as the generated code does.
func (a *AggInfo) Row(funcID, channelID uint32) int {
	row := 0
	for _, by := range a.Agg.By {
		switch by {
		case "funcId":
			row = row*(config.MaxFuncIDs+1) + int(min(funcID, config.MaxFuncIDs))
		case "channelId":
			row = row*(config.MaxChannels+1) + int(min(channelID, config.MaxChannels))
		}
	}
	return row
}

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
	Chunks int // 32-bit chunks = ceil(Bytes/4); a slot is Chunks 64-bit words
}

// FieldLayout is one field at a byte offset of the packed payload.
type FieldLayout struct {
	Name   string
	Source string
	Type   config.Type
	Offset int
}

// SlotWords is the number of 64-bit words of one slot.
func (l *Layout) SlotWords() int { return l.Chunks }

// Value is a decoded field value: exactly one of U, I, F is meaningful, by Type.
type Value struct {
	Type config.Type
	U    uint64
	I    int64
	F    float64
}

// Decode unpacks a payload (len >= l.Bytes) into one value per field.
func (l *Layout) Decode(payload []byte, out []Value) []Value {
	out = out[:0]
	for _, f := range l.Fields {
		b := payload[f.Offset : f.Offset+f.Type.Bytes()]
		v := Value{Type: f.Type}
		switch f.Type {
		case config.Bool, config.U8:
			v.U = uint64(b[0])
		case config.U16:
			v.U = uint64(binary.LittleEndian.Uint16(b))
		case config.U32:
			v.U = uint64(binary.LittleEndian.Uint32(b))
		case config.U64:
			v.U = binary.LittleEndian.Uint64(b)
		case config.I8:
			v.I = int64(int8(b[0]))
		case config.I16:
			v.I = int64(int16(binary.LittleEndian.Uint16(b)))
		case config.I32:
			v.I = int64(int32(binary.LittleEndian.Uint32(b)))
		case config.I64:
			v.I = int64(binary.LittleEndian.Uint64(b))
		case config.F32:
			v.F = float64(math.Float32frombits(binary.LittleEndian.Uint32(b)))
		case config.F64:
			v.F = math.Float64frombits(binary.LittleEndian.Uint64(b))
		}
		out = append(out, v)
	}
	return out
}
