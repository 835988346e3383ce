// Package cdrive calls a loaded hook entry from C, as NCCL would: from the
// calling thread, or from several C threads at once. It exists for the
// tests of the cpu backend (test files cannot use cgo).
package cdrive

/*
#cgo LDFLAGS: -lpthread
#include <stdlib.h>
#include "cdrive.h"
*/
import "C"

import (
	"unsafe"
)

// Event mirrors ncclProfilerDevEvent_t (24 bytes).
type Event struct {
	Timestamp   uint64
	WorkCounter uint64
	FuncID      uint32
	ChannelID   uint8
	Phase       uint8
	_           uint16
}

// Phases of an event.
const (
	Start = 0
	Stop  = 1
)

var _ [24 - unsafe.Sizeof(Event{})]struct{}
var _ [unsafe.Sizeof(Event{}) - 24]struct{}

// copyToC copies events into C memory, which the C threads may read
// without holding Go pointers; free it with C.free.
func copyToC(events []Event) *C.hk_event {
	if len(events) == 0 {
		return nil
	}
	p := C.malloc(C.size_t(len(events)) * C.size_t(unsafe.Sizeof(Event{})))
	copy(unsafe.Slice((*Event)(p), len(events)), events)
	return (*C.hk_event)(p)
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
