package config

import (
	"regexp"
	"strings"

	"github.com/ncclhooks/ncclhooks/internal/abi"
)

// Type is the type of a field, a let or an expression result.
type Type string

const (
	Bool Type = "bool"
	U8   Type = "u8"
	U16  Type = "u16"
	U32  Type = "u32"
	U64  Type = "u64"
	I8   Type = "i8"
	I16  Type = "i16"
	I32  Type = "i32"
	I64  Type = "i64"
	F32  Type = "f32"
	F64  Type = "f64"
	Str  Type = "string" // only the function name, only inside name predicates
)

// Bytes is the stored size of a value of type t.
func (t Type) Bytes() int {
	switch t {
	case Bool, U8, I8:
		return 1
	case U16, I16:
		return 2
	case U32, I32, F32:
		return 4
	case U64, I64, F64:
		return 8
	}
	return 0
}

// IsFloat reports whether t is a floating-point type.
func (t Type) IsFloat() bool { return t == F32 || t == F64 }

// IsSigned reports whether t is a signed integer type.
func (t Type) IsSigned() bool { return t == I8 || t == I16 || t == I32 || t == I64 }

// StorableTypes are the types a record field may be stored as.
var StorableTypes = []Type{U8, U16, U32, U64, I8, I16, I32, I64, F32, F64, Bool}

// SourceKind says where a catalogue value comes from.
type SourceKind string

const (
	KindEvent     SourceKind = "event"     // a field of ncclProfilerDevEvent_t
	KindIntrinsic SourceKind = "intrinsic" // read on the device at the hook
	KindDerived   SourceKind = "derived"   // computed on the device from several events
	KindName      SourceKind = "name"      // the function name: name predicates only
)

// CatalogEntry describes one name usable in expressions and fields.
type CatalogEntry struct {
	Name string
	Type Type
	Kind SourceKind
	Doc  string
}

// Catalog lists every value a profile can use, in documentation order.
// hookgen implements each entry; a test keeps the two in step.
var Catalog = []CatalogEntry{
	{"timestamp", U64, KindEvent, "device globaltimer at the work-item boundary, ns"},
	{"workCounter", U64, KindEvent, "monotonic work counter of the channel"},
	{"funcId", U32, KindEvent, "index into NCCL's device function table"},
	{"channelId", U8, KindEvent, "channel (one block per channel)"},
	{"phase", U8, KindEvent, "START (0) or STOP (1)"},
	{"smid", U32, KindIntrinsic, "multiprocessor the calling block runs on"},
	{"clock", U64, KindIntrinsic, "the multiprocessor's cycle counter at the hook (clock64)"},
	{"globaltimer", U64, KindIntrinsic, "device globaltimer read at the hook, ns"},
	{"cudaDev", U32, KindIntrinsic, "CUDA device ordinal the hook runs on"},
	{"comm", U32, KindIntrinsic, "the communicator's index on its device (0, 1, ... in the order NCCL asked for hooks); the output's comm lines name each one"},
	{"duration", U64, KindDerived, "at STOP: this STOP's timestamp minus the START timestamp of the same work item on the same block, ns; 0 at START or when no START was seen"},
	{"paired", Bool, KindDerived, "at STOP: true when duration found its START"},
	{"func", Str, KindName, "function name (\"AllReduce_Sum_f32_RING_LL\"): only in name predicates, resolved at init"},
}

// Constants usable in expressions: the phases of ncclProfilerDevEvent_t.
var Constants = map[string]int{"START": abi.PhaseStart, "STOP": abi.PhaseStop}

// Reserved output keys a field may not be named.
var ReservedFieldNames = []string{"type", "hook", "device", "seq", "func"}

// Lookup returns the catalogue entry for name.
func Lookup(name string) (CatalogEntry, bool) {
	for _, e := range Catalog {
		if e.Name == name {
			return e, true
		}
	}
	return CatalogEntry{}, false
}

func matchFuncPred(fp *FuncPred, name string) bool {
	switch fp.Op {
	case FuncMatches:
		re := fp.re
		if re == nil { // built by hand rather than by validation
			var err error
			if re, err = regexp.Compile(fp.Patterns[0]); err != nil {
				return false
			}
		}
		return re.MatchString(name)
	case FuncStartsWith:
		return strings.HasPrefix(name, fp.Patterns[0])
	case FuncEndsWith:
		return strings.HasSuffix(name, fp.Patterns[0])
	case FuncContains:
		return strings.Contains(name, fp.Patterns[0])
	case FuncEquals:
		return name == fp.Patterns[0]
	case FuncIn:
		for _, p := range fp.Patterns {
			if p == name {
				return true
			}
		}
	}
	return false
}
