// Package sinks owns the outputs of a capture: the JSON lines file (one per
// process), Prometheus textfiles, the /metrics endpoint and the OTLP export,
// the last three rendering one set of metrics (metrics.go). A sink receives
// decoded records as they are drained and one Dump per dump interval; it
// never blocks the drain for long and never drops silently.
package sinks

import (
	"github.com/ncclhooks/ncclhooks/internal/gpuinfo"
	"github.com/ncclhooks/ncclhooks/internal/hookgen"
)

// Record is one decoded record of one hook on one device.
type Record struct {
	Hook   *hookgen.HookInfo
	Device int
	Seq    uint64          // position in the hook's device buffer
	Values []hookgen.Value // one per Hook.Layout.Fields
	// FuncName resolves the record's funcId field, "" when it has none.
	FuncName string
}

// Stats are the cumulative capture statistics of one hook on one device,
// plus the deltas since the previous dump.
type Stats struct {
	Hook       string
	Device     int
	Dump       int   // dump number, from 1
	Final      bool  // written at finalize
	TimeUnixNs int64 // when the dump was taken

	Matched            uint64 // events that matched (positions reserved)
	Records            uint64 // records emitted
	Dropped            uint64 // all drops, both stages
	DroppedBufferFull  uint64 // device stage, drop_newest
	DroppedOverwritten uint64 // device stage, lapped or overwritten (overwrite_oldest)
	DroppedTorn        uint64 // device stage, never completed
	DroppedRingFull    uint64 // host stage: the Go ring was full
	// DroppedWriteFailed is set by the JSON lines sink only: records whose
	// lines could not be written (a full disk); the drainer leaves it 0.
	DroppedWriteFailed uint64
	// DroppedCap is set by the JSON lines sink only: records not written
	// because the file reached its size cap (NCCL_HOOKS_MAX_OUTPUT_BYTES).
	DroppedCap uint64
	Pending    uint64 // reserved but not decided yet (0 in a final dump)

	RecordsSinceLastDump uint64
	DroppedSinceLastDump uint64
}

// AggSnapshot is a cumulative snapshot of one aggregate on one device.
type AggSnapshot struct {
	Info       *hookgen.AggInfo
	Device     int
	TimeUnixNs int64
	Final      bool
	Rows       []AggRow // rows with Count > 0
}

// AggRow is one key of an aggregate. FuncID and ChannelID are -1 when not a
// key of the aggregate, and they and Comm -2 for the overflow key; Comm is
// read only when the aggregate is keyed by comm.
type AggRow struct {
	FuncID    int
	FuncName  string
	ChannelID int
	Comm      int // the communicator's index on the device (its comm line)
	Count     uint64
	SumInt    int64   // sum, integer values
	SumFloat  float64 // sum, float values
	Min, Max  int64   // min/max kinds
	Buckets   []Bucket
}

// Bucket is one histogram bucket: the count of values <= LE (LE nil: +Inf).
// Counts are cumulative, as Prometheus' le buckets are.
type Bucket struct {
	LE    *uint64
	Count uint64
}

// DeviceState is one device's identity and its state from NVML (fields nil
// where a query failed, or all nil without NVML) at one moment.
type DeviceState struct {
	Device               int
	TimeUnixNs           int64
	Name, UUID, PCIBusID string
	gpuinfo.State
}

// Dump is everything a sink gets at one dump interval (or at finalize).
type Dump struct {
	Stats []Stats       // every hook on every known device, idle ones too
	Aggs  []AggSnapshot // every aggregate on every known device
	// Devices are the state of every known device (empty when the drainer
	// has no DeviceState function).
	Devices []DeviceState
	Final   bool
}

// Sink is one output. Records arrive from the drainer; Dump is called after
// the records it covers. Calls never overlap.
type Sink interface {
	// Records receives a batch of records. The slice and the records'
	// Values are reused after the call returns: copy what must outlive it.
	Records(recs []Record) error
	Dump(d *Dump) error
	Close() error
}
