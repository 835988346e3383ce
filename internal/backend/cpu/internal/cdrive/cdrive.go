// Package cdrive calls a loaded hook entry from C, as NCCL would: from the
// calling thread, or from several C threads at once. It exists for the
// tests of the cpu backend (test files cannot use cgo).
package cdrive

/*
#cgo CFLAGS: -I${SRCDIR}/../../../../abi
#cgo LDFLAGS: -lpthread
#include <stdlib.h>
#include "cdrive.h"
*/
import "C"

import (
	"unsafe"

	"github.com/ncclhooks/ncclhooks/internal/abi"
)

// Event is ncclProfilerDevEvent_t (abi's Go twin, whose layout abi's tests
// hold to the C header's).
type Event = abi.DevEvent

// Phases of an event.
const (
	Start = abi.PhaseStart
	Stop  = abi.PhaseStop
)

// copyToC copies events into C memory, which the C threads may read
// without holding Go pointers; free it with C.free.
func copyToC(events []Event) *C.ncclProfilerDevEvent_t {
	if len(events) == 0 {
		return nil
	}
	p := C.malloc(C.size_t(len(events)) * C.size_t(unsafe.Sizeof(Event{})))
	copy(unsafe.Slice((*Event)(p), len(events)), events)
	return (*C.ncclProfilerDevEvent_t)(p)
}

// Call calls entry(ev, ctx) once on the calling thread.
func Call(entry, ctx uintptr, ev Event) {
	p := copyToC([]Event{ev})
	defer C.free(unsafe.Pointer(p))
	C.hk_drive_one(C.uintptr_t(entry), C.uintptr_t(ctx), p)
}

// Run calls entry(ev, ctx) for every event of every stream, one C thread
// per stream, all streams at once; each stream's events are delivered in
// order. It returns when every thread has finished.
func Run(entry, ctx uintptr, streams [][]Event) {
	n := len(streams)
	if n == 0 {
		return
	}
	jobs := unsafe.Slice((*C.hk_stream)(C.calloc(C.size_t(n), C.size_t(unsafe.Sizeof(C.hk_stream{})))), n)
	defer C.free(unsafe.Pointer(&jobs[0]))
	for i, s := range streams {
		jobs[i].events = copyToC(s)
		jobs[i].n = C.size_t(len(s))
	}
	defer func() {
		for i := range jobs {
			C.free(unsafe.Pointer(jobs[i].events))
		}
	}()
	C.hk_drive_threads(C.uintptr_t(entry), C.uintptr_t(ctx), &jobs[0], C.int(n))
}
