package sinks

// The line encoders: dump_stats and aggregate lines, field values, JSON
// strings and keys.

import (
	"maps"
	"math"
	"slices"
	"strconv"
	"unicode/utf8"

	"github.com/ncclhooks/ncclhooks/internal/config"
	"github.com/ncclhooks/ncclhooks/internal/gpuinfo"
	"github.com/ncclhooks/ncclhooks/internal/hookgen"
)

// appendStats writes a dump_stats line.
func appendStats(b []byte, s *Stats) []byte {
	b = append(b, `{"type":"dump_stats","hook":`...)
	b = appendString(b, s.Hook)
	b = append(b, `,"device":`...)
	b = strconv.AppendInt(b, int64(s.Device), 10)
	b = append(b, `,"dump":`...)
	b = strconv.AppendInt(b, int64(s.Dump), 10)
	b = append(b, `,"final":`...)
	b = strconv.AppendBool(b, s.Final)
	b = append(b, `,"time_unix_ns":`...)
	b = strconv.AppendInt(b, s.TimeUnixNs, 10)
	for _, kv := range []struct {
		k string
		v uint64
	}{
		{"matched_total", s.Matched},
		{"records_total", s.Records},
		{"dropped_total", s.Dropped},
		{"records_since_last_dump", s.RecordsSinceLastDump},
		{"dropped_since_last_dump", s.DroppedSinceLastDump},
		{"dropped_buffer_full_total", s.DroppedBufferFull},
		{"dropped_overwritten_total", s.DroppedOverwritten},
		{"dropped_torn_total", s.DroppedTorn},
		{"dropped_ring_full_total", s.DroppedRingFull},
		{"dropped_write_failed_total", s.DroppedWriteFailed},
		{"dropped_cap_total", s.DroppedCap},
		{"pending", s.Pending},
	} {
		b = appendKey(b, kv.k)
		b = strconv.AppendUint(b, kv.v, 10)
	}
	return append(b, "}\n"...)
}

// appendDevice writes a device line: identity, then each state value that
// was read.
func appendDevice(b []byte, d *DeviceState) []byte {
	b = append(b, `{"type":"device","device":`...)
	b = strconv.AppendInt(b, int64(d.Device), 10)
	b = append(b, `,"time_unix_ns":`...)
	b = strconv.AppendInt(b, d.TimeUnixNs, 10)
	b = appendKey(b, "name")
	b = appendString(b, d.Name)
	for _, kv := range []struct{ k, v string }{{"uuid", d.UUID}, {"pci_bus_id", d.PCIBusID}} {
		if kv.v != "" {
			b = appendKey(b, kv.k)
			b = appendString(b, kv.v)
		}
	}
	u32 := func(k string, v *uint32) {
		if v != nil {
			b = appendKey(b, k)
			b = strconv.AppendUint(b, uint64(*v), 10)
		}
	}
	u64 := func(k string, v *uint64) {
		if v != nil {
			b = appendKey(b, k)
			b = strconv.AppendUint(b, *v, 10)
		}
	}
	u32("sm_clock_mhz", d.SMClockMHz)
	u32("mem_clock_mhz", d.MemClockMHz)
	if r := d.ClockEventReasons; r != nil {
		u64("clock_event_reasons", r)
		if names := gpuinfo.ReasonNames(*r); len(names) > 0 {
			b = appendKey(b, "throttle")
			b = appendStrings(b, names)
		}
		if gpuinfo.Slowdown(*r) != 0 {
			b = append(b, `,"slowdown":true`...)
		}
	}
	u32("temperature_c", d.TemperatureC)
	u32("power_mw", d.PowerMW)
	u64("ecc_corrected_volatile", d.ECCCorrected)
	u64("ecc_uncorrected_volatile", d.ECCUncorrected)
	u64("nvlink_errors", d.NVLinkErrors)
	if d.NVLinks > 0 {
		b = appendKey(b, "nvlinks")
		b = strconv.AppendInt(b, int64(d.NVLinks), 10)
	}
	return append(b, "}\n"...)
}

// appendAggregate writes an aggregate line: the aggregate, then its rows.
func appendAggregate(b []byte, a *AggSnapshot) []byte {
	agg := a.Info.Agg
	b = append(b, `{"type":"aggregate","hook":`...)
	b = appendString(b, a.Info.Hook)
	b = append(b, `,"device":`...)
	b = strconv.AppendInt(b, int64(a.Device), 10)
	b = appendKey(b, "name")
	b = appendString(b, agg.Name)
	b = appendKey(b, "kind")
	b = appendString(b, string(agg.Kind))
	b = appendKey(b, "by")
	b = appendStrings(b, agg.By)
	b = append(b, `,"time_unix_ns":`...)
	b = strconv.AppendInt(b, a.TimeUnixNs, 10)
	b = append(b, `,"final":`...)
	b = strconv.AppendBool(b, a.Final)
	b = append(b, `,"rows":[`...)
	floatSum := agg.Value != nil && agg.Value.Type.IsFloat()
	for i := range a.Rows {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendAggRow(b, agg, &a.Rows[i], floatSum)
	}
	return append(b, "]}\n"...)
}

// appendAggRow writes one row of an aggregate line: its keys, its count, the
// value of the aggregate's kind and, for a histogram, the buckets.
func appendAggRow(b []byte, agg *config.Aggregate, r *AggRow, floatSum bool) []byte {
	b = append(b, '{')
	sep := false
	key := func(k string) {
		if sep {
			b = append(b, ',')
		}
		sep = true
		b = appendString(b, k)
		b = append(b, ':')
	}
	if r.FuncID != -1 {
		key("funcId")
		b = appendKeyValue(b, r.FuncID)
		if r.FuncName != "" {
			key("func")
			b = appendString(b, r.FuncName)
		}
	}
	if r.ChannelID != -1 {
		key("channelId")
		b = appendKeyValue(b, r.ChannelID)
	}
	if slices.Contains(agg.By, "comm") { // Comm's zero value is communicator 0: ask the aggregate
		key("comm")
		b = appendKeyValue(b, r.Comm)
	}
	key("count")
	b = strconv.AppendUint(b, r.Count, 10)
	switch agg.Kind {
	case config.AggSum, config.AggHistogram:
		key("sum")
		if floatSum {
			b = appendFloat(b, r.SumFloat, 64)
		} else {
			b = strconv.AppendInt(b, r.SumInt, 10)
		}
	case config.AggMin:
		key("min")
		b = strconv.AppendInt(b, r.Min, 10)
	case config.AggMax:
		key("max")
		b = strconv.AppendInt(b, r.Max, 10)
	}
	if agg.Kind == config.AggHistogram {
		key("buckets")
		b = appendBuckets(b, r.Buckets)
	}
	return append(b, '}')
}

// appendBuckets writes a histogram's buckets: [{"le":N,"count":N},...], the
// last one's le "+Inf".
func appendBuckets(b []byte, buckets []Bucket) []byte {
	b = append(b, '[')
	for i, bk := range buckets {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"le":`...)
		if bk.LE == nil {
			b = append(b, `"+Inf"`...)
		} else {
			b = strconv.AppendUint(b, *bk.LE, 10)
		}
		b = append(b, `,"count":`...)
		b = strconv.AppendUint(b, bk.Count, 10)
		b = append(b, '}')
	}
	return append(b, ']')
}

// appendKeyValue writes an aggregation key: the id, or "overflow" for the
// key that collects out-of-range ids.
func appendKeyValue(b []byte, id int) []byte {
	if id < 0 {
		return append(b, `"overflow"`...)
	}
	return strconv.AppendInt(b, int64(id), 10)
}

// appendValue writes a field value exactly: integers as JSON integers (full
// 64-bit range), floats in the shortest form that reads back to the same
// value, bools as true/false.
func appendValue(b []byte, v *hookgen.Value) []byte {
	switch v.Type {
	case config.U64, config.U32, config.U16, config.U8: // the usual fields first
		return appendUint(b, v.U)
	case config.I64, config.I32, config.I16, config.I8:
		return appendInt(b, v.I)
	case config.Bool:
		return strconv.AppendBool(b, v.U != 0)
	case config.F32:
		return appendFloat(b, v.F, 32)
	case config.F64:
		return appendFloat(b, v.F, 64)
	}
	return appendUint(b, v.U)
}

// appendFloat writes f; JSON has no NaN or infinities, so those are written
// as the strings "NaN", "+Inf" and "-Inf" (Prometheus' spelling).
func appendFloat(b []byte, f float64, bits int) []byte {
	switch {
	case math.IsNaN(f):
		return append(b, `"NaN"`...)
	case math.IsInf(f, 1):
		return append(b, `"+Inf"`...)
	case math.IsInf(f, -1):
		return append(b, `"-Inf"`...)
	}
	return strconv.AppendFloat(b, f, 'g', -1, bits)
}

func appendKey(b []byte, k string) []byte {
	b = append(b, ',')
	b = appendString(b, k)
	return append(b, ':')
}

func appendStringMap2(b []byte, m map[string]map[string]string) []byte {
	b = append(b, '{')
	for i, k := range sortedKeys(m) {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendString(b, k)
		b = append(b, ":{"...)
		for i, f := range sortedKeys(m[k]) {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendString(b, f)
			b = append(b, ':')
			b = appendString(b, m[k][f])
		}
		b = append(b, '}')
	}
	return append(b, '}')
}

func sortedKeys[V any](m map[string]V) []string { return slices.Sorted(maps.Keys(m)) }

// appendStrings writes ss as a JSON array of strings.
func appendStrings(b []byte, ss []string) []byte {
	b = append(b, '[')
	for i, s := range ss {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendString(b, s)
	}
	return append(b, ']')
}

// appendString writes s as a JSON string.
func appendString(b []byte, s string) []byte {
	const hex = "0123456789abcdef"
	b = append(b, '"')
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			switch {
			case c == '"' || c == '\\':
				b = append(b, '\\', c)
			case c == '\n':
				b = append(b, '\\', 'n')
			case c == '\t':
				b = append(b, '\\', 't')
			case c < 0x20:
				b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
			default:
				b = append(b, c)
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, `\ufffd`...)
		} else {
			b = append(b, s[i:i+size]...)
		}
		i += size
	}
	return append(b, '"')
}
