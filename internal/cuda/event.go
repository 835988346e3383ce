package cuda

// Timing events.

/*
#include "hk_cuda.h"
*/
import "C"

// Event is a CUDA event with timing enabled.
type Event struct {
	d *Device
	h C.hk_h
}

// NewEvent creates an event.
func (d *Device) NewEvent() (*Event, error) {
	e := &Event{d: d}
	if r := C.hk_cuEventCreate(d.ctx, &e.h); r != 0 {
		return nil, cuErr("cuEventCreate", r)
	}
	return e, nil
}

// Record records e on s (nil: the private stream).
func (e *Event) Record(s *Stream) error {
	h, err := e.d.stream(s)
	if err != nil {
		return err
	}
	return cuErr("cuEventRecord", C.hk_cuEventRecord(e.d.ctx, e.h, h))
}

// Sync waits for e.
func (e *Event) Sync() error {
	return cuErr("cuEventSynchronize", C.hk_cuEventSynchronize(e.d.ctx, e.h))
}

// Destroy destroys e.
func (e *Event) Destroy() error {
	r := C.hk_cuEventDestroy(e.d.ctx, e.h)
	e.h = 0
	return cuErr("cuEventDestroy", r)
}

// ElapsedMs is the time between two completed events, in milliseconds.
func ElapsedMs(start, end *Event) (float32, error) {
	var ms C.float
	if r := C.hk_cuEventElapsedTime(start.d.ctx, &ms, start.h, end.h); r != 0 {
		return 0, cuErr("cuEventElapsedTime", r)
	}
	return float32(ms), nil
}
