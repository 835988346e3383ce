// Package schema is the one definition of the plugin's JSON lines output
// (docs/ARCHITECTURE.md, "JSON lines"): the line types, and each line's keys
// as the Go structs that readers decode into. The writer (package sinks)
// spells the same keys by hand for speed; a test in sinks checks that every
// key these structs name is written and nothing else is.
package schema

import (
	"encoding/json"
	"fmt"
	"strconv"
)

// Format is the version the header line carries.
const Format = 1

// Line types, the "type" key of every line.
const (
	TypeHeader    = "header"
	TypeClock     = "clock"
	TypeComm      = "comm"
	TypeRefused   = "refused"
	TypeRecord    = "record"
	TypeDumpStats = "dump_stats"
	TypeAggregate = "aggregate"
	TypeDevice    = "device"
	TypeInactive  = "inactive"
	TypeProfile   = "profile"
)

// Header is the first line of a file.
type Header struct {
	Type        string `json:"type"`
	Format      int    `json:"format"`
	Profile     string `json:"profile"`
	ProfileFile string `json:"profile_file"`
	Host        string `json:"host"`
	PID         int    `json:"pid"`
	Executable  string `json:"executable,omitempty"` // the process's program (/proc/self/exe)
	Backend     string `json:"backend"`
	StartUnixNs int64  `json:"start_unix_ns"`
	// ProfileHash is the SHA-256 (hex) of the profile file and its includes
	// (config.Profile.Hash): runs of different hashes are not merged
	// unless asked. Absent in outputs of older versions, and where the
	// profile could not be read.
	ProfileHash string `json:"profile_hash,omitempty"`
	// PluginVersion is the plugin's build (git describe, stamped by the
	// Makefile), NCCLVersion the NCCL that loaded it ("2.28.9"; "unknown"
	// where the plugin cannot tell, as under the harness). Absent in
	// outputs of older versions.
	PluginVersion string `json:"plugin_version,omitempty"`
	NCCLVersion   string `json:"nccl_version,omitempty"`
	// Fields maps, per hook, each output field name to its catalogue source
	// ("ts" -> "timestamp"), for profiles that rename fields.
	Fields map[string]map[string]string `json:"fields,omitempty"`
	// Funcs are NCCL's function names by id (ncclProfilerDevFuncName) as the
	// plugin resolved them; absent where NCCL names none.
	Funcs []string `json:"funcs,omitempty"`
	// Drained are the hooks whose aggregates the drain computes from their
	// records (buffer.positions: work with aggregates): their records are
	// counted in dump_stats, and no record line is written.
	Drained []string `json:"drained,omitempty"`
}

// Profile opens a profile epoch: the profile a live reload
// (NCCL_HOOKS_RELOAD) made active. Epoch 0 is the header's profile; the
// k-th profile line opens epoch k, and every record, dump_stats and
// aggregate line after it, up to the next profile line, is that epoch's.
// The plugin writes it after the previous epoch's final dump_stats and
// aggregates, so the epochs' lines never interleave; comm, clock, device
// and refused lines belong to no epoch (communicators and devices outlive
// reloads). Totals restart in each epoch: records + dropped = matched
// holds per epoch, hook and device.
type Profile struct {
	Type        string `json:"type"`
	Epoch       int    `json:"epoch"`
	Profile     string `json:"profile"`
	ProfileFile string `json:"profile_file"`
	ProfileHash string `json:"profile_hash"`
	// ActiveUnixNs is when the switch made its hooks active (its first
	// records may be as early), ChangeUnixNs when the file change that
	// caused the reload was seen (its modification time).
	ActiveUnixNs int64 `json:"active_unix_ns"`
	ChangeUnixNs int64 `json:"change_unix_ns"`
	// Fields and Drained are the header's, for this epoch's module.
	Fields  map[string]map[string]string `json:"fields,omitempty"`
	Drained []string                     `json:"drained,omitempty"`
}

// Clock is a host/device timestamp pair taken together on one device.
type Clock struct {
	Type       string `json:"type"`
	Device     int    `json:"device"`
	Model      string `json:"model,omitempty"` // "NVIDIA H200"; "cpu: <model name>" on the cpu backend
	HostUnixNs uint64 `json:"host_unix_ns"`
	DeviceNs   uint64 `json:"device_ns"`
}

// Comm is a communicator handed a hook: its index on the device (what a
// record's comm field holds) and its identity from NCCL's init.
type Comm struct {
	Type   string `json:"type"`
	Device int    `json:"device"`
	Comm   int    `json:"comm"`
	CommID string `json:"comm_id"` // "0x..."
	Name   string `json:"name"`
	Rank   int    `json:"rank"`
	NRanks int    `json:"nranks"`
	NNodes int    `json:"nnodes"`
	UUID   string `json:"uuid,omitempty"` // the GPU it runs on (the device line's uuid)
}

// Device names one device of the process (its GPU by UUID, PCI bus id and
// name, from the CUDA driver) and, where NVML answers, its state: written
// when the device is loaded and at every dump. A state key is left out when
// its query failed or NVML is not there.
type Device struct {
	Type       string `json:"type"`
	Device     int    `json:"device"`
	TimeUnixNs int64  `json:"time_unix_ns"`
	Name       string `json:"name"`                 // "NVIDIA H200"; "cpu: <model name>" on the cpu backend
	UUID       string `json:"uuid,omitempty"`       // "GPU-8c1e..." (nvidia-smi's spelling)
	PCIBusID   string `json:"pci_bus_id,omitempty"` // "0000:19:00.0"

	SMClockMHz  *uint32 `json:"sm_clock_mhz,omitempty"`
	MemClockMHz *uint32 `json:"mem_clock_mhz,omitempty"`
	// ClockEventReasons is NVML's bitmask of why the clocks are what they
	// are (nvmlClocksEventReason*); Throttle names its bits, Slowdown is
	// true when one of them holds the clocks down (power cap, thermal,
	// hardware slowdown, power brake, sync boost).
	ClockEventReasons *uint64  `json:"clock_event_reasons,omitempty"`
	Throttle          []string `json:"throttle,omitempty"`
	Slowdown          bool     `json:"slowdown,omitempty"`
	TemperatureC      *uint32  `json:"temperature_c,omitempty"`
	PowerMW           *uint32  `json:"power_mw,omitempty"`
	ECCCorrected      *uint64  `json:"ecc_corrected_volatile,omitempty"`
	ECCUncorrected    *uint64  `json:"ecc_uncorrected_volatile,omitempty"`
	NVLinkErrors      *uint64  `json:"nvlink_errors,omitempty"` // replay + recovery + CRC, summed over the active links
	NVLinks           int      `json:"nvlinks,omitempty"`       // active NVLinks
}

// DeviceKey is how readers tell devices apart across processes: the GPU's
// UUID, else the host and pid of the process with the ordinal (outputs of the
// cpu backend, of older versions, or of a driver that gave no UUID).
func DeviceKey(uuid, host string, pid, ordinal int) string {
	if uuid != "" {
		return uuid
	}
	return fmt.Sprintf("%s pid %d device %d", host, pid, ordinal)
}

// Inactive says that the plugin records nothing in this process, and why:
// the profile was refused (it does not load, generate or compile) or a knob
// is wrong. It follows the header, alone: a file with one is the whole
// output of a job that ran unprofiled.
type Inactive struct {
	Type       string `json:"type"`
	TimeUnixNs int64  `json:"time_unix_ns"`
	Reason     string `json:"reason"`
}

// Refused is a hook left out because it could fault NCCL's kernels.
type Refused struct {
	Type     string `json:"type"`
	Hook     string `json:"hook"`
	Position string `json:"position"` // file:line:col in the profile
	Reason   string `json:"reason"`
}

// Record is the fixed part of a record line. The hook's fields follow under
// their profile names, then func (the function's name) when the hook
// records funcId.
type Record struct {
	Type   string `json:"type"`
	Hook   string `json:"hook"`
	Device int    `json:"device"`
	Seq    uint64 `json:"seq"`
	Func   string `json:"func,omitempty"`
}

// DumpStats is one hook's capture accounting on one device at one dump;
// totals are cumulative over the process.
type DumpStats struct {
	Type                 string `json:"type"`
	Hook                 string `json:"hook"`
	Device               int    `json:"device"`
	Dump                 int    `json:"dump"` // from 1
	Final                bool   `json:"final"`
	TimeUnixNs           int64  `json:"time_unix_ns"`
	Matched              uint64 `json:"matched_total"`
	Records              uint64 `json:"records_total"`
	Dropped              uint64 `json:"dropped_total"`
	RecordsSinceLastDump uint64 `json:"records_since_last_dump"`
	DroppedSinceLastDump uint64 `json:"dropped_since_last_dump"`
	DroppedBufferFull    uint64 `json:"dropped_buffer_full_total"`
	DroppedOverwritten   uint64 `json:"dropped_overwritten_total"`
	DroppedTorn          uint64 `json:"dropped_torn_total"`
	DroppedRingFull      uint64 `json:"dropped_ring_full_total"`
	DroppedWriteFailed   uint64 `json:"dropped_write_failed_total"` // records whose lines could not be written (a full disk)
	DroppedCap           uint64 `json:"dropped_cap_total"`          // records not written: the file reached NCCL_HOOKS_MAX_OUTPUT_BYTES
	Pending              uint64 `json:"pending"`                    // reserved, not yet decided; 0 in a final dump
}

// Aggregate is a cumulative snapshot of one on-device aggregate.
type Aggregate struct {
	Type       string   `json:"type"`
	Hook       string   `json:"hook"`
	Device     int      `json:"device"`
	Name       string   `json:"name"`
	Kind       string   `json:"kind"`
	By         []string `json:"by"`
	TimeUnixNs int64    `json:"time_unix_ns"`
	Final      bool     `json:"final"`
	Rows       []AggRow `json:"rows"`
}

// AggRow is one key combination of an aggregate. A key is an id, or
// "overflow" for the row that collects out-of-range ids.
type AggRow struct {
	FuncID    json.RawMessage `json:"funcId,omitempty"`
	Func      string          `json:"func,omitempty"`
	ChannelID json.RawMessage `json:"channelId,omitempty"`
	Comm      json.RawMessage `json:"comm,omitempty"` // the communicator's index on the device: its comm line
	Count     uint64          `json:"count"`
	Sum       Number          `json:"sum,omitempty"`     // sum and histogram
	Min       *int64          `json:"min,omitempty"`     // min aggregates; nil when absent
	Max       *int64          `json:"max,omitempty"`     // max aggregates; nil when absent
	Buckets   []Bucket        `json:"buckets,omitempty"` // histogram, cumulative
}

// Bucket is a histogram bucket: the count of values <= LE (a number, or
// "+Inf" for the last).
type Bucket struct {
	LE    json.RawMessage `json:"le"`
	Count uint64          `json:"count"`
}

// Number is a JSON number, or one of the strings "NaN", "+Inf" and "-Inf"
// that the writer uses for float sums JSON numbers cannot hold.
type Number string

// UnmarshalJSON accepts a number or one of the three strings.
func (n *Number) UnmarshalJSON(b []byte) error {
	if len(b) > 0 && b[0] == '"' {
		var s string
		if err := json.Unmarshal(b, &s); err != nil {
			return err
		}
		switch s {
		case "NaN", "+Inf", "-Inf":
			*n = Number(s)
			return nil
		}
		return fmt.Errorf("%s is not a number (nor NaN, +Inf, -Inf)", b)
	}
	var num json.Number
	if err := json.Unmarshal(b, &num); err != nil {
		return err
	}
	*n = Number(num)
	return nil
}

// Float64 accepts NaN and the infinities.
func (n Number) Float64() (float64, error) { return strconv.ParseFloat(string(n), 64) }

// Int64 is the number as an integer.
func (n Number) Int64() (int64, error) { return strconv.ParseInt(string(n), 10, 64) }
