// Package cabi reports what the C compiler makes of ncclhooks_abi.h: member
// offsets and sizes, macro values, and the bytes of an event built in C; it
// also checks the header's function types against NCCL's signatures at
// compile time.
// Package abi's tests compare them with the Go twin; they cannot use cgo
// themselves, and package abi stays free of it.
package cabi

/*
#cgo CFLAGS: -std=c11 -Wall -Werror -I${SRCDIR}/../..
#include <stddef.h>
#include <string.h>
#include "ncclhooks_abi.h"

typedef struct {
  const char* name;
  size_t offset, size;
} cabi_member;

#define CABI_MEMBER(t, m) {#m, offsetof(t, m), sizeof(((t*)0)->m)}

static const cabi_member cabi_event[] = {
  CABI_MEMBER(ncclProfilerDevEvent_t, timestamp), CABI_MEMBER(ncclProfilerDevEvent_t, workCounter),
  CABI_MEMBER(ncclProfilerDevEvent_t, funcId),    CABI_MEMBER(ncclProfilerDevEvent_t, channelId),
  CABI_MEMBER(ncclProfilerDevEvent_t, phase),     CABI_MEMBER(ncclProfilerDevEvent_t, rsvd),
};
static const cabi_member cabi_v7[] = {
  CABI_MEMBER(ncclProfiler_v7_t, name),       CABI_MEMBER(ncclProfiler_v7_t, init),
  CABI_MEMBER(ncclProfiler_v7_t, startEvent), CABI_MEMBER(ncclProfiler_v7_t, stopEvent),
  CABI_MEMBER(ncclProfiler_v7_t, recordEventState), CABI_MEMBER(ncclProfiler_v7_t, finalize),
  CABI_MEMBER(ncclProfiler_v7_t, getDeviceHook),
};
static const cabi_member cabi_v5[] = {
  CABI_MEMBER(ncclProfiler_v5_t, name),       CABI_MEMBER(ncclProfiler_v5_t, init),
  CABI_MEMBER(ncclProfiler_v5_t, startEvent), CABI_MEMBER(ncclProfiler_v5_t, stopEvent),
  CABI_MEMBER(ncclProfiler_v5_t, recordEventState), CABI_MEMBER(ncclProfiler_v5_t, finalize),
};

static const cabi_member* cabi_members(int which, int* n, size_t* size) {
  switch (which) {
  case 0: *n = sizeof cabi_event / sizeof cabi_event[0]; *size = sizeof(ncclProfilerDevEvent_t); return cabi_event;
  case 7: *n = sizeof cabi_v7 / sizeof cabi_v7[0]; *size = sizeof(ncclProfiler_v7_t); return cabi_v7;
  case 6: *n = sizeof cabi_v5 / sizeof cabi_v5[0]; *size = sizeof(ncclProfiler_v6_t); return cabi_v5;
  default: *n = sizeof cabi_v5 / sizeof cabi_v5[0]; *size = sizeof(ncclProfiler_v5_t); return cabi_v5;
  }
}

static void cabi_event_bytes(unsigned char* out, unsigned long long ts, unsigned long long wc, unsigned int fn,
                             unsigned char ch, unsigned char ph, unsigned short rsvd) {
  ncclProfilerDevEvent_t e;
  memset(&e, 0, sizeof e);
  e.timestamp = ts;
  e.workCounter = wc;
  e.funcId = fn;
  e.channelId = ch;
  e.phase = ph;
  e.rsvd = rsvd;
  memcpy(out, &e, sizeof e);
}

// The function types of the header, against the signatures of DESIGN.md
// section 3 spelled out here (gcc and clang builtins).
#define CABI_TYPE(x, t) __builtin_types_compatible_p(__typeof__(x), t)
#define CABI_V7(m) (((ncclProfiler_v7_t*)0)->m)
_Static_assert(CABI_TYPE(ncclProfilerDevHook_t, void (*)(const ncclProfilerDevEvent_t*, void*)), "hook type");
_Static_assert(CABI_TYPE(ncclDebugLogger_t, void (*)(int, unsigned long, const char*, int, const char*, ...)), "logger");
_Static_assert(CABI_TYPE(CABI_V7(name), const char*), "name");
_Static_assert(CABI_TYPE(CABI_V7(init), ncclResult_t (*)(void**, uint64_t, int*, const char*, int, int, int,
                                                          ncclDebugLogger_t)), "init");
_Static_assert(CABI_TYPE(CABI_V7(startEvent), ncclResult_t (*)(void*, void**, void*)), "startEvent");
_Static_assert(CABI_TYPE(CABI_V7(stopEvent), ncclResult_t (*)(void*)), "stopEvent");
_Static_assert(CABI_TYPE(CABI_V7(recordEventState), ncclResult_t (*)(void*, int, void*)), "recordEventState");
_Static_assert(CABI_TYPE(CABI_V7(finalize), ncclResult_t (*)(void*)), "finalize");
_Static_assert(CABI_TYPE(CABI_V7(getDeviceHook), ncclResult_t (*)(int, void**, void**)), "getDeviceHook");
_Static_assert(CABI_TYPE(ncclResult_t, int), "ncclResult_t is an int");
*/
import "C"

import "unsafe"

// Member is one struct member as the C compiler laid it out.
type Member struct {
	Name         string
	Offset, Size uintptr
}

// Struct names a struct of the header for Layout.
type Struct int

// The structs Layout describes.
const (
	Event      Struct = 0 // ncclProfilerDevEvent_t
	ProfilerV5 Struct = 5 // ncclProfiler_v5_t
	ProfilerV6 Struct = 6 // ncclProfiler_v6_t
	ProfilerV7 Struct = 7 // ncclProfiler_v7_t
)

// Layout returns the struct's size and its members in declaration order.
func Layout(s Struct) (size uintptr, members []Member) {
	var n C.int
	var sz C.size_t
	p := C.cabi_members(C.int(s), &n, &sz)
	for _, m := range unsafe.Slice(p, int(n)) {
		members = append(members, Member{C.GoString(m.name), uintptr(m.offset), uintptr(m.size)})
	}
	return uintptr(sz), members
}

// Macros are the header's constants, by macro name.
var Macros = map[string]int{
	"NCCLHOOKS_PHASE_START": C.NCCLHOOKS_PHASE_START,
	"NCCLHOOKS_PHASE_STOP":  C.NCCLHOOKS_PHASE_STOP,
	"NCCL_LOG_WARN":         C.NCCL_LOG_WARN,
	"NCCL_LOG_INFO":         C.NCCL_LOG_INFO,
	"NCCL_PROFILE":          C.NCCL_PROFILE,
	"ncclSuccess":           C.ncclSuccess,
}

// EventBytes is the memory of an ncclProfilerDevEvent_t with these members,
// built in C.
func EventBytes(timestamp, workCounter uint64, funcID uint32, channelID, phase uint8, rsvd uint16) []byte {
	b := make([]byte, C.sizeof_ncclProfilerDevEvent_t)
	C.cabi_event_bytes((*C.uchar)(unsafe.Pointer(&b[0])), C.ulonglong(timestamp), C.ulonglong(workCounter),
		C.uint(funcID), C.uchar(channelID), C.uchar(phase), C.ushort(rsvd))
	return b
}
