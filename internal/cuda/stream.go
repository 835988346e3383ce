package cuda

// Streams, and the CUDA graphs captured from them.

/*
#include "hk_cuda.h"
*/
import "C"

// Stream is a non-blocking CUDA stream (it does not synchronise with the
// legacy default stream).
type Stream struct {
	d *Device
	h C.hk_h
}

// NewStream creates a non-blocking stream.
func (d *Device) NewStream() (*Stream, error) {
	s := &Stream{d: d}
	if r := C.hk_cuStreamCreateNonBlocking(d.ctx, &s.h); r != 0 {
		return nil, cuErr("cuStreamCreate", r)
	}
	return s, nil
}

// legacyStream is CUDA's legacy default stream (CU_STREAM_LEGACY), which the
// package itself never uses: its tests queue work there to stand for what
// NCCL or the application has queued on blocking streams.
func (d *Device) legacyStream() *Stream { return &Stream{d: d, h: 1} }

// Sync waits for the work queued on s.
func (s *Stream) Sync() error {
	return cuErr("cuStreamSynchronize", C.hk_cuStreamSynchronize(s.d.ctx, s.h))
}

// Destroy destroys s; queued work still completes.
func (s *Stream) Destroy() error {
	if s.h == 0 {
		return nil
	}
	r := C.hk_cuStreamDestroy(s.d.ctx, s.h)
	s.h = 0
	return cuErr("cuStreamDestroy", r)
}

// BeginCapture starts capturing s into a graph. The capture is relaxed:
// Begin/EndCapture may run on different OS threads (Go moves goroutines),
// and other threads' CUDA calls (the drainer's) are not disturbed.
func (s *Stream) BeginCapture() error {
	return cuErr("cuStreamBeginCapture", C.hk_cuStreamBeginCaptureRelaxed(s.d.ctx, s.h))
}

// EndCapture ends the capture and instantiates the captured graph.
func (s *Stream) EndCapture() (*Graph, error) {
	g := &Graph{d: s.d}
	if r := C.hk_cuStreamEndCapture(s.d.ctx, s.h, &g.graph); r != 0 {
		return nil, cuErr("cuStreamEndCapture", r)
	}
	if r := C.hk_cuGraphInstantiate(s.d.ctx, &g.exec, g.graph); r != 0 {
		C.hk_cuGraphDestroy(s.d.ctx, 0, g.graph)
		return nil, cuErr("cuGraphInstantiateWithFlags", r)
	}
	return g, nil
}

// Graph is an instantiated CUDA graph.
type Graph struct {
	d           *Device
	graph, exec C.hk_h
}

// Launch queues one replay of g on s (nil: the private stream).
func (g *Graph) Launch(s *Stream) error {
	h, err := g.d.stream(s)
	if err != nil {
		return err
	}
	return cuErr("cuGraphLaunch", C.hk_cuGraphLaunch(g.d.ctx, g.exec, h))
}

// Destroy frees the graph and its executable form.
func (g *Graph) Destroy() error {
	r := C.hk_cuGraphDestroy(g.d.ctx, g.exec, g.graph)
	g.exec, g.graph = 0, 0
	return cuErr("cuGraphDestroy", r)
}
