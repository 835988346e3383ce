// Package rings owns the host side of the record path: the consumer of the
// per-device slot buffers the generated hooks write (the fence-free stamp
// protocol of docs/ARCHITECTURE.md, "Record slots"), the Go rings that hold
// decided records until the sinks take them, and the exact drop accounting
// of both stages.
//
// For every hook on every device each reserved position is decided exactly
// once: emitted (into the hook's Ring, then to the sink) or dropped with a
// reason (buffer_full, overwritten, torn on the device side; ring_full on the
// host side), so records + drops + pending == matched at every dump and
// records + drops == matched at the final one.
//
// A Drainer runs all of this for a process; cilium/ebpf's ringbuf reader is
// the model: a private consumer position, and a record's words loaded
// atomically before its payload is trusted.
package rings
