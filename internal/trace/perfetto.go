package trace

// Perfetto's native trace format: a perfetto.protos.Trace, a stream of
// TracePacket messages, encoded by hand with protowire. Only the few
// messages and fields below are written; their numbers are those of
// Perfetto's protos (protos/perfetto/trace/trace.proto, trace_packet.proto
// and track_event/{track_descriptor,process_descriptor,counter_descriptor,
// track_event,debug_annotation}.proto), which are proto2 and stable: a
// field number, once released, is never reused. The tests decode the output
// with protoc and those upstream protos, and, where it is installed, load it
// with Perfetto's trace_processor.
//
// The layout follows Perfetto's "synthetic track event" recipe
// (perfetto.dev/docs/reference/synthetic-track-event):
//
//   - a process track per input file (a TrackDescriptor with a
//     ProcessDescriptor: the same pid and name as the JSON trace),
//     ordering its children explicitly;
//   - under it a slice track per (hook, device, communicator, channel) and
//     lane, in the JSON trace's order (sibling_order_rank = its tid there);
//     a work item is a TYPE_SLICE_BEGIN and a TYPE_SLICE_END on it, its
//     args as debug annotations;
//   - counter tracks under the process: per hook and device the cumulative
//     drops and the pending positions (reserved in the device buffer, not
//     yet drained: its fill) of every dump_stats line, and a track per
//     aggregate, device and key (function, channel) with a sample per
//     aggregate line.
//
// Timestamps are the host timeline in nanoseconds (unix time, as the JSON
// lines have it; the trace's default clock), not the JSON trace's
// microseconds since an origin: nothing is rounded.

import (
	"bufio"
	"cmp"
	"fmt"
	"io"
	"maps"
	"math"
	"slices"
	"strconv"

	"google.golang.org/protobuf/encoding/protowire"

	"github.com/ncclhooks/ncclhooks/internal/report"
)

// Field numbers of perfetto.protos messages.
const (
	traceHasPacket = 1 // Trace.packet

	packetTimestamp       = 8  // TracePacket.timestamp (uint64, ns)
	packetSequenceID      = 10 // TracePacket.trusted_packet_sequence_id
	packetTrackEvent      = 11 // TracePacket.track_event
	packetSequenceFlags   = 13 // TracePacket.sequence_flags
	packetTrackDescriptor = 60 // TracePacket.track_descriptor

	trackUUID         = 1  // TrackDescriptor.uuid
	trackName         = 2  // TrackDescriptor.name
	trackProcess      = 3  // TrackDescriptor.process
	trackParentUUID   = 5  // TrackDescriptor.parent_uuid
	trackCounter      = 8  // TrackDescriptor.counter
	trackChildOrder   = 11 // TrackDescriptor.child_ordering
	trackSiblingOrder = 12 // TrackDescriptor.sibling_order_rank

	processPID  = 1 // ProcessDescriptor.pid
	processName = 6 // ProcessDescriptor.process_name

	counterUnit      = 3 // CounterDescriptor.unit
	counterUnitCount = 2 // CounterDescriptor.Unit.UNIT_COUNT

	eventDebugAnnotations = 4  // TrackEvent.debug_annotations
	eventType             = 9  // TrackEvent.type
	eventTrackUUID        = 11 // TrackEvent.track_uuid
	eventCategories       = 22 // TrackEvent.categories
	eventName             = 23 // TrackEvent.name
	eventCounterValue     = 30 // TrackEvent.counter_value (int64)
	eventDoubleCounter    = 44 // TrackEvent.double_counter_value

	annotUint   = 3  // DebugAnnotation.uint_value
	annotInt    = 4  // DebugAnnotation.int_value
	annotString = 6  // DebugAnnotation.string_value
	annotName   = 10 // DebugAnnotation.name
	annotDict   = 11 // DebugAnnotation.dict_entries

	typeSliceBegin = 1 // TrackEvent.Type.TYPE_SLICE_BEGIN
	typeSliceEnd   = 2 // TrackEvent.Type.TYPE_SLICE_END
	typeCounter    = 4 // TrackEvent.Type.TYPE_COUNTER

	childOrderingExplicit = 3 // TrackDescriptor.ChildTracksOrdering.EXPLICIT
	seqIncrementalCleared = 1 // TracePacket.SequenceFlags.SEQ_INCREMENTAL_STATE_CLEARED

	// sequenceID is the one writer sequence of the trace: every packet is
	// written by this process, in order.
	sequenceID = 1
)

// WritePerfetto reads the inputs and writes their trace to w in Perfetto's
// native protobuf format (TrackEvent): the same processes, tracks, slices
// and aggregate counters as Write's JSON, plus a fill counter per hook and
// device.
func WritePerfetto(w io.Writer, inputs []string, opts report.Options) (*Summary, error) {
	b, err := build(inputs, opts)
	if err != nil {
		return nil, err
	}
	return b.writePerfetto(w)
}

// pbWriter writes TracePackets to a Trace stream.
type pbWriter struct {
	bw      *bufio.Writer
	buf     []byte // the packet being built
	scratch []byte
	first   bool
	uuid    uint64 // the last track uuid given out
}

// packet writes one TracePacket whose fields body appended to p.buf (after
// the sequence fields).
func (p *pbWriter) packet(body func(b []byte) []byte) {
	b := protowire.AppendTag(p.buf[:0], packetSequenceID, protowire.VarintType)
	b = protowire.AppendVarint(b, sequenceID)
	if p.first {
		p.first = false
		b = protowire.AppendTag(b, packetSequenceFlags, protowire.VarintType)
		b = protowire.AppendVarint(b, seqIncrementalCleared)
	}
	b = body(b)
	p.scratch = protowire.AppendTag(p.scratch[:0], traceHasPacket, protowire.BytesType)
	p.scratch = protowire.AppendVarint(p.scratch, uint64(len(b)))
	p.bw.Write(p.scratch)
	p.bw.Write(b)
	p.buf = b
}

func (p *pbWriter) newUUID() uint64 { p.uuid++; return p.uuid }

// message appends field num holding the message that fill appends.
func message(b []byte, num protowire.Number, fill func(b []byte) []byte) []byte {
	b = protowire.AppendTag(b, num, protowire.BytesType)
	// Reserve one length byte; move the body if it needs more.
	at := len(b)
	b = append(b, 0)
	b = fill(b)
	n := len(b) - at - 1
	if n < 0x80 {
		b[at] = byte(n)
		return b
	}
	size := protowire.SizeVarint(uint64(n))
	b = append(b, make([]byte, size-1)...)
	copy(b[at+size:], b[at+1:at+1+n])
	protowire.AppendVarint(b[at:at], uint64(n))
	return b
}

func varintField(b []byte, num protowire.Number, v uint64) []byte {
	b = protowire.AppendTag(b, num, protowire.VarintType)
	return protowire.AppendVarint(b, v)
}

func stringField(b []byte, num protowire.Number, s string) []byte {
	b = protowire.AppendTag(b, num, protowire.BytesType)
	return protowire.AppendString(b, s)
}

// Debug annotations (a slice's args).
func argString(b []byte, name, v string) []byte {
	return message(b, eventDebugAnnotations, func(b []byte) []byte {
		return stringField(stringField(b, annotName, name), annotString, v)
	})
}

func argUint(b []byte, name string, v uint64) []byte {
	return message(b, eventDebugAnnotations, func(b []byte) []byte {
		return varintField(stringField(b, annotName, name), annotUint, v)
	})
}

func argInt(b []byte, name string, v int64) []byte {
	return message(b, eventDebugAnnotations, func(b []byte) []byte {
		return varintField(stringField(b, annotName, name), annotInt, uint64(v))
	})
}

// pbEvent is one TrackEvent in time order: a slice's begin or end, or a
// counter sample.
type pbEvent struct {
	ts    int64
	track uint64
	kind  uint8 // typeSliceBegin, typeSliceEnd, typeCounter
	slice int   // index into b.slices (begin and end)
	ival  int64 // counter value (integer counters)
	fval  float64
	float bool
}

// writePerfetto writes the trace: the track descriptors, then every event
// in time order (a track's own events keep their order: a slice's end comes
// before the next slice's begin at the same time).
func (b *builder) writePerfetto(w io.Writer) (*Summary, error) {
	counters := b.counters()
	tids, threads := b.lanes()
	p := &pbWriter{bw: bufio.NewWriterSize(w, 1<<20), first: true}
	for _, pt := range b.run.AggHistory {
		b.pid(pt.File) // every process is named before its tracks
	}

	// Process tracks.
	pids := slices.Sorted(maps.Keys(b.procs))
	procUUID := map[int]uint64{}
	for _, pid := range pids {
		u := p.newUUID()
		procUUID[pid] = u
		p.packet(func(bb []byte) []byte {
			return message(bb, packetTrackDescriptor, func(bb []byte) []byte {
				bb = varintField(bb, trackUUID, u)
				bb = message(bb, trackProcess, func(bb []byte) []byte {
					bb = varintField(bb, processPID, uint64(pid))
					return stringField(bb, processName, b.procs[pid])
				})
				return varintField(bb, trackChildOrder, childOrderingExplicit)
			})
		})
	}
	// Slice tracks, in the JSON trace's thread order.
	thr := slices.SortedFunc(maps.Keys(threads), func(x, y [2]int) int { return cmp.Or(cmp.Compare(x[0], y[0]), cmp.Compare(x[1], y[1])) })
	laneUUID := map[[2]int]uint64{}
	for _, k := range thr {
		laneUUID[k] = p.childTrack(procUUID[k[0]], threads[k], k[1], false)
	}
	var events []pbEvent
	for i, s := range b.slices {
		u := laneUUID[[2]int{s.pid, tids[i]}]
		events = append(events, pbEvent{ts: s.start, track: u, kind: typeSliceBegin, slice: i},
			pbEvent{ts: s.stop, track: u, kind: typeSliceEnd, slice: i})
	}
	// Counter tracks after the slice tracks of their process.
	rank := map[int]int{} // pid -> next sibling rank
	for k := range threads {
		rank[k[0]] = max(rank[k[0]], k[1]+1)
	}
	counterTracks := map[string]uint64{} // "pid\x00name" -> uuid
	counterTrack := func(pid int, name string) uint64 {
		key := strconv.Itoa(pid) + "\x00" + name
		if u, ok := counterTracks[key]; ok {
			return u
		}
		u := p.childTrack(procUUID[pid], name, rank[pid], true)
		rank[pid]++
		counterTracks[key] = u
		return u
	}
	for _, s := range b.run.Stats {
		pid := b.pid(s.File)
		where := ", hook " + s.Hook + b.deviceSuffix(s.File, s.Device)
		events = append(events,
			pbEvent{ts: s.TimeUnixNs, track: counterTrack(pid, "dropped records (cumulative)"+where), kind: typeCounter, ival: int64(s.Dropped)},
			pbEvent{ts: s.TimeUnixNs, track: counterTrack(pid, "pending in device buffer (reserved, not drained)"+where), kind: typeCounter, ival: int64(s.Pending)})
		b.sum.FillCounters++
	}
	aggTracks := map[string]bool{}
	for _, pt := range b.run.AggHistory {
		a := pt.Agg
		pid := b.pid(pt.File)
		what := a.Kind
		if a.Kind == "histogram" {
			what = "mean"
		}
		name := fmt.Sprintf("%s %s (%s)%s", a.Hook, a.Name, what, b.deviceSuffix(pt.File, a.Device))
		n := 0
		for _, r := range a.Rows {
			v, ok := aggValue(a.Kind, r)
			if !ok {
				continue
			}
			n++
			events = append(events, pbEvent{ts: a.TimeUnixNs, track: counterTrack(pid, name+" "+rowLabel(r)), kind: typeCounter, fval: v, float: true})
		}
		if n > 0 {
			b.sum.AggCounters++
			aggTracks[strconv.Itoa(pid)+"\x00"+name] = true
		}
	}
	b.sum.AggTracks = len(aggTracks)
	// Stable: a track's events were appended in its own order.
	slices.SortStableFunc(events, func(x, y pbEvent) int { return cmp.Compare(x.ts, y.ts) })
	for i := range events {
		b.writeEvent(p, &events[i])
	}
	b.summarize(len(counters), len(threads))
	if err := p.bw.Flush(); err != nil {
		return nil, err
	}
	return &b.sum, nil
}

// childTrack writes the descriptor of a track under a process track and
// returns its uuid.
func (p *pbWriter) childTrack(parent uint64, name string, rank int, counter bool) uint64 {
	u := p.newUUID()
	p.packet(func(b []byte) []byte {
		return message(b, packetTrackDescriptor, func(b []byte) []byte {
			b = varintField(b, trackUUID, u)
			b = varintField(b, trackParentUUID, parent)
			b = stringField(b, trackName, name)
			b = varintField(b, trackSiblingOrder, uint64(rank))
			if counter {
				b = message(b, trackCounter, func(b []byte) []byte {
					return varintField(b, counterUnit, counterUnitCount)
				})
			}
			return b
		})
	})
	return u
}

// writeEvent writes one TrackEvent packet.
func (b *builder) writeEvent(p *pbWriter, e *pbEvent) {
	p.packet(func(bb []byte) []byte {
		bb = varintField(bb, packetTimestamp, uint64(e.ts))
		return message(bb, packetTrackEvent, func(bb []byte) []byte {
			bb = varintField(bb, eventType, uint64(e.kind))
			bb = varintField(bb, eventTrackUUID, e.track)
			switch e.kind {
			case typeCounter:
				if e.float {
					bb = protowire.AppendTag(bb, eventDoubleCounter, protowire.Fixed64Type)
					return protowire.AppendFixed64(bb, math.Float64bits(e.fval))
				}
				return varintField(bb, eventCounterValue, uint64(e.ival))
			case typeSliceEnd:
				return bb
			}
			s := &b.slices[e.slice]
			bb = stringField(bb, eventCategories, s.hook)
			bb = stringField(bb, eventName, s.fn)
			bb = argString(bb, "hook", s.hook)
			bb = argInt(bb, "device", int64(s.device))
			if s.track >= 0 {
				bb = argInt(bb, "channel", int64(s.track))
			}
			if s.funcID >= 0 {
				bb = argInt(bb, "funcId", s.funcID)
			}
			if s.hasCounter {
				bb = argUint(bb, "workCounter", s.counter)
			}
			if c, ok := b.run.Files[s.file].Comms[[2]int{s.device, s.comm}]; ok {
				bb = message(bb, eventDebugAnnotations, func(bb []byte) []byte {
					bb = stringField(bb, annotName, "comm")
					for _, kv := range []struct {
						k string
						v any
					}{{"comm_id", c.CommID}, {"name", c.Name}, {"rank", c.Rank}, {"nranks", c.NRanks}} {
						bb = message(bb, annotDict, func(bb []byte) []byte {
							bb = stringField(bb, annotName, kv.k)
							if s, ok := kv.v.(string); ok {
								return stringField(bb, annotString, s)
							}
							return varintField(bb, annotInt, uint64(int64(kv.v.(int))))
						})
					}
					return bb
				})
			} else {
				bb = argString(bb, "comm", "not known: no comm line names it (a hook without the comm field on a device of several communicators)")
			}
			return argString(bb, "file", b.run.Files[s.file].Path)
		})
	})
}
