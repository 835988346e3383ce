// Package abi owns the NCCL-facing ABI: one C header and its Go twin.
//
// ncclhooks_abi.h defines, once for every C, C++, CUDA and NVRTC source of
// the project, the device profiler hook of NCCL pull request 2285 (the event
// ncclProfilerDevEvent_t, the hook type, the phases), NCCL's log levels and
// the profiler subsystem flag, the profiler plugin structs
// ncclProfiler_v5/_v6/_v7 the plugin exports and the harness and callers
// load, and NCCL's host event descriptors (v5, v6, NCCL 2.31's v7) the
// host-event source reads. cgo packages include it with
// -I${SRCDIR}/../abi (adjusted to their depth), nvcc builds with -I, and
// sources compiled at run time (the generated hooks, the GPU harness) start
// with ModuleHeader (the header less the descriptors). This file is its Go
// twin; the package's tests check the two against each other through the C
// compiler (layout, constants, byte decoding). It is a folder of its own
// because the contract belongs to none of the packages that speak it.
package abi

import (
	_ "embed"
	"encoding/binary"
	"strings"
)

// Header is the text of ncclhooks_abi.h.
//
//go:embed ncclhooks_abi.h
var Header string

// ModuleHeader is Header without NCCL's host event descriptors, for the
// sources compiled at run time: hooks only ever see ncclProfilerDevEvent_t,
// and the generated source (and so its compile-cache key) stays the same
// whatever the descriptors say.
var ModuleHeader = withoutHostEvents(Header)

// The host event section of the header: from its heading to its #endif.
const (
	hostEventsBegin = "\n// ---- host events: NCCL's profiler event descriptors ----\n"
	hostEventsEnd   = "#endif // C11 or C++\n"
)

func withoutHostEvents(h string) string {
	i := strings.Index(h, hostEventsBegin)
	j := strings.Index(h, hostEventsEnd)
	if i < 0 || j < i {
		panic("abi: ncclhooks_abi.h lost its host event section markers")
	}
	return h[:i] + h[j+len(hostEventsEnd):]
}

// DevEvent is ncclProfilerDevEvent_t, field for field (the c tags name the C
// members): 24 bytes, no padding, little endian on every CUDA platform.
type DevEvent struct {
	Timestamp   uint64 `c:"timestamp"`   // device globaltimer, ns
	WorkCounter uint64 `c:"workCounter"` // monotonic per channel
	FuncID      uint32 `c:"funcId"`      // index into NCCL's device function table
	ChannelID   uint8  `c:"channelId"`
	Phase       uint8  `c:"phase"` // PhaseStart or PhaseStop
	Rsvd        uint16 `c:"rsvd"`
}

// DevEventSize is sizeof(ncclProfilerDevEvent_t).
const DevEventSize = 24

// Values of DevEvent.Phase (NCCLHOOKS_PHASE_START, NCCLHOOKS_PHASE_STOP).
const (
	PhaseStart = 0
	PhaseStop  = 1
)

// The NCCL log levels the plugin logs at (NCCL_LOG_WARN, NCCL_LOG_INFO) and
// the subsystem flag of its messages (NCCL_PROFILE).
const (
	LogWarn       = 2
	LogInfo       = 3
	SubsysProfile = 16384
)

// AppendDevEvent appends e to b as the device writes it: DecodeDevEvent's
// inverse.
func AppendDevEvent(b []byte, e DevEvent) []byte {
	b = binary.LittleEndian.AppendUint64(b, e.Timestamp)
	b = binary.LittleEndian.AppendUint64(b, e.WorkCounter)
	b = binary.LittleEndian.AppendUint32(b, e.FuncID)
	b = append(b, e.ChannelID, e.Phase)
	return binary.LittleEndian.AppendUint16(b, e.Rsvd)
}

// DecodeDevEvent reads one event from the first DevEventSize bytes of b, as
// the device wrote it.
func DecodeDevEvent(b []byte) DevEvent {
	_ = b[DevEventSize-1]
	return DevEvent{
		Timestamp:   binary.LittleEndian.Uint64(b[0:]),
		WorkCounter: binary.LittleEndian.Uint64(b[8:]),
		FuncID:      binary.LittleEndian.Uint32(b[16:]),
		ChannelID:   b[20],
		Phase:       b[21],
		Rsvd:        binary.LittleEndian.Uint16(b[22:]),
	}
}
