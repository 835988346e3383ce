// Package config owns the YAML hook profile (version 1): its schema, defaults,
// validation, the field catalogue, and type-checked expressions. Every error it
// returns names the profile file, line and column, and says what is allowed.
package config

import (
	"fmt"
	"regexp"
	"time"

	"github.com/expr-lang/expr/ast"
)

// Pos is a position in a profile file (1-based line and column).
type Pos struct {
	File string
	Line int
	Col  int
}

func (p Pos) String() string { return fmt.Sprintf("%s:%d:%d", p.File, p.Line, p.Col) }

// Profile is a parsed, validated hook profile.
type Profile struct {
	File    string // path as given
	Version int
	Name    string
	Output  Output
	Hooks   []*Hook // in execution order: included profiles' hooks first, then this file's
	Pos     Pos
	// Hash is the SHA-256 (hex) of the profile's bytes and its includes', in
	// the order read: the output's header carries it, so that readers can
	// refuse to merge runs of different profiles that share a name.
	Hash string
}

// EnabledHooks returns the hooks with Enabled set, in execution order.
func (p *Profile) EnabledHooks() []*Hook {
	var hs []*Hook
	for _, h := range p.Hooks {
		if h.Enabled {
			hs = append(hs, h)
		}
	}
	return hs
}

// Output holds where and how often captured data is written.
type Output struct {
	DumpDir      string        // default "ncclhooks-out"; NCCL_HOOKS_DUMP_DIR overrides it
	DumpInterval time.Duration // default 1s
	RingCapacity int           // host ring per hook per device, power of two; default 1<<16
	Pos          Pos
}

// Overflow policy of a device buffer.
type Overflow string

const (
	DropNewest      Overflow = "drop_newest"
	OverwriteOldest Overflow = "overwrite_oldest"
)

// Positions says where a record's position comes from.
type Positions string

const (
	// PositionsShared: a counter of the device's, one returning atomic a
	// record (the default).
	PositionsShared Positions = "shared"
	// PositionsWork: the event itself, 2 x workCounter + phase, in a
	// region of the buffer per (communicator, channel): no atomic and no
	// load (checkWorkPositions says what such a hook may use).
	PositionsWork Positions = "work"
)

// Buffer is the per-device record buffer of one hook.
type Buffer struct {
	Slots     int // power of two, MinSlots..MaxSlots; default 4096
	Overflow  Overflow
	Positions Positions // default PositionsShared
	Pos       Pos
	// PositionsPos is where positions was given (Pos when it was not).
	PositionsPos Pos
}

// RegionChannels is the number of regions a buffer with work positions is
// split into, one per NCCL channel (NCCL's MAXCHANNELS).
const RegionChannels = 64

// Buffer size limits.
const (
	MinSlots = 16
	MaxSlots = 1 << 24
)

// Hook is one hook of a profile: a predicate, the record it writes, its
// buffer and its on-device aggregations.
type Hook struct {
	Name       string
	Enabled    bool   // default true
	When       *Expr  // nil: every event matches
	Sample     uint32 // keep work items with workCounter % Sample == 0; 1 (default) keeps all
	Lets       []*Let
	Fields     []*Field // empty only for a hook that only aggregates
	Buffer     Buffer
	Aggregates []*Aggregate
	Pos        Pos // the hook's entry
	NamePos    Pos // its name's token (the entry's position when it has no name)
}

// DrainAggregates says whether the drain, not the device, computes h's
// aggregates: a hook with work positions and aggregates records each event's
// timestamp and funcId (hookgen.DrainRecord) at 2 x workCounter + phase, and
// the drain pairs the two positions of each work item, which are adjacent
// in their region, into one value of duration.
// Its aggregates count each work item whose START and STOP reached the
// drain, as phase == STOP && paired does on the device.
func (h *Hook) DrainAggregates() bool {
	return h.Buffer.Positions == PositionsWork && len(h.Aggregates) > 0
}

// Let is a named expression usable by fields, aggregates and later lets.
type Let struct {
	Name string
	Expr *Expr
	Pos  Pos
}

// Field is one field of a hook's record.
type Field struct {
	Name   string // output name (the rename, or the source name)
	Source string // a catalogue name or a let name
	Type   Type   // stored type; default: the source's type
	Pos    Pos
}

// AggKind is what an aggregate computes.
type AggKind string

const (
	AggCount     AggKind = "count"
	AggSum       AggKind = "sum"
	AggMin       AggKind = "min"
	AggMax       AggKind = "max"
	AggHistogram AggKind = "histogram"
)

// Aggregate is an aggregation, keyed by bounded keys: on the device, or in
// the drain for a hook with work positions (Hook.DrainAggregates).
type Aggregate struct {
	Name    string
	Kind    AggKind
	Value   *Expr    // nil for count
	By      []string // subset of "funcId", "channelId", in this order
	Buckets Buckets  // histogram only
	Pos     Pos
}

// Buckets are a histogram's bucket bounds: log2 (bucket i counts values in
// [2^(i-1), 2^i), bucket 0 counts 0) or explicit upper bounds (le, ascending;
// a final +Inf bucket is implied).
type Buckets struct {
	Log2   bool
	Bounds []uint64
}

// Key-space bounds for aggregation keys.
const (
	MaxFuncIDs     = 1024 // funcId keys are 0..MaxFuncIDs-1; larger ids fall into an overflow key
	MaxChannels    = 64   // channelId keys are 0..MaxChannels-1; larger ids fall into an overflow key
	MaxCommKeys    = 16   // comm keys (the communicator's index on its device) are 0..MaxCommKeys-1; later ones share an overflow key
	Log2Buckets    = 65   // log2 histogram buckets (0, then one per power of two up to 2^64)
	MaxAggCells    = 1 << 20
	MaxRecordBytes = 64
)

// Expr is a type-checked expr-lang expression from the profile.
type Expr struct {
	Source string   // as written in the profile
	Pos    Pos      // position of the first character of the expression
	Tree   ast.Node // checked tree (no optimizer run)
	Type   Type     // result type: Bool, I64 or F64
	// FuncPreds are the function-name predicates found in Tree, in order of
	// appearance; hookgen turns each into a function-id set filled at init.
	FuncPreds []*FuncPred
	src       *srcMap // character offsets of Source -> file positions

	konst *constVal // the value of a constant expression, else nil
}

// PosAt is the file position of the character at offset off of Source (as
// expr-lang's node locations count them).
func (x *Expr) PosAt(off int) Pos {
	if x.src == nil {
		return x.Pos
	}
	return x.src.pos(off)
}

// FuncPredOp is how a name predicate matches function names.
type FuncPredOp string

const (
	FuncMatches    FuncPredOp = "matches" // regular expression (Go syntax)
	FuncStartsWith FuncPredOp = "startsWith"
	FuncEndsWith   FuncPredOp = "endsWith"
	FuncContains   FuncPredOp = "contains"
	FuncEquals     FuncPredOp = "=="
	FuncIn         FuncPredOp = "in"
)

// FuncPred is a predicate over the function name, resolved at init into a
// set of function ids.
type FuncPred struct {
	Op       FuncPredOp
	Patterns []string // one, or several for "in"
	Node     ast.Node // the node in Expr.Tree this predicate replaces
	Pos      Pos

	re *regexp.Regexp // FuncMatches: compiled once, at validation
}

// Match reports whether the function name matches the predicate.
func (fp *FuncPred) Match(name string) bool { return matchFuncPred(fp, name) }
