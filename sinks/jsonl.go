package sinks

import (
	"bufio"
	"fmt"
	"maps"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/ncclhooks/ncclhooks/config"
	"github.com/ncclhooks/ncclhooks/hookgen"
)

// JSONLFormat is the version written in the header line.
const JSONLFormat = 1

// Header is the first line of a JSON lines file.
type Header struct {
	Profile     string
	ProfileFile string
	Host        string // default: os.Hostname
	PID         int    // default: os.Getpid
	Backend     string
	StartUnixNs int64 // default: now
	// Fields optionally maps, per hook, each output field name to its
	// catalogue source, so readers find renamed fields ("ts" -> "timestamp").
	// HeaderFields builds it from a module.
	Fields map[string]map[string]string
}

// HeaderFields returns Header.Fields for a module.
func HeaderFields(m *hookgen.Module) map[string]map[string]string {
	out := map[string]map[string]string{}
	for _, h := range m.Hooks {
		fs := map[string]string{}
		for _, f := range h.Layout.Fields {
			fs[f.Name] = f.Source
		}
		out[h.Name] = fs
	}
	return out
}

// FileName is the name of a process's JSON lines file:
// ncclhooks-<host>-<pid>.jsonl (characters other than letters, digits, '.',
// '-' and '_' in the host name become '_').
func FileName(host string, pid int) string {
	safe := strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '.', r == '-', r == '_':
			return r
		}
		return '_'
	}, host)
	return fmt.Sprintf("ncclhooks-%s-%d.jsonl", safe, pid)
}

// JSONL writes one JSON object per line into the process's file (see
// docs/ARCHITECTURE.md, "JSON lines"). It is safe for concurrent use; the
// drainer calls Records and Dump, the plugin calls Clock.
type JSONL struct {
	mu    sync.Mutex
	path  string
	f     *os.File
	w     *bufio.Writer
	b     []byte // line being built
	hooks map[*hookgen.HookInfo]*recordKeys
}

// recordKeys are a hook's precomputed record line pieces.
type recordKeys struct {
	prefix  []byte   // {"type":"record","hook":"name","device":
	fields  [][]byte // ,"field":
	hasFunc bool
}

// NewJSONL opens (creating dir with mode 0755 and the file if missing)
// dir/ncclhooks-<host>-<pid>.jsonl. A new file starts with the header line;
// an existing one (a re-init in the same process) is appended to and keeps
// its single header.
func NewJSONL(dir string, header Header) (*JSONL, error) {
	if header.Host == "" {
		header.Host, _ = os.Hostname()
	}
	if header.PID == 0 {
		header.PID = os.Getpid()
	}
	if header.StartUnixNs == 0 {
		header.StartUnixNs = time.Now().UnixNano()
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("creating the dump directory: %w", err)
	}
	path := filepath.Join(dir, FileName(header.Host, header.PID))
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("opening the JSON lines output: %w", err)
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("opening the JSON lines output: %w", err)
	}
	j := &JSONL{path: path, f: f, w: bufio.NewWriterSize(f, 1<<20), hooks: map[*hookgen.HookInfo]*recordKeys{}}
	if fi.Size() == 0 {
		j.writeHeader(&header)
		if err := j.w.Flush(); err != nil {
			f.Close()
			return nil, fmt.Errorf("writing %s: %w", path, err)
		}
	}
	return j, nil
}

// Path is the file being written.
func (j *JSONL) Path() string { return j.path }

func (j *JSONL) writeHeader(h *Header) {
	b := append(j.b[:0], `{"type":"header","format":`...)
	b = strconv.AppendInt(b, JSONLFormat, 10)
	b = appendKey(b, "profile")
	b = appendString(b, h.Profile)
	b = appendKey(b, "profile_file")
	b = appendString(b, h.ProfileFile)
	b = appendKey(b, "host")
	b = appendString(b, h.Host)
	b = appendKey(b, "pid")
	b = strconv.AppendInt(b, int64(h.PID), 10)
	b = appendKey(b, "backend")
	b = appendString(b, h.Backend)
	b = appendKey(b, "start_unix_ns")
	b = strconv.AppendInt(b, h.StartUnixNs, 10)
	if len(h.Fields) > 0 {
		b = appendKey(b, "fields")
		b = appendStringMap2(b, h.Fields)
	}
	j.b = append(b, "}\n"...)
	j.w.Write(j.b)
}

// Clock writes a host/device timestamp pair of one device, with the
// device's model ("NVIDIA H200"; "" leaves it out) so that a diff can refuse
// to compare runs on different hardware.
func (j *JSONL) Clock(device int, model string, hostUnixNs, deviceNs uint64) error {
	j.mu.Lock()
	defer j.mu.Unlock()
	b := append(j.b[:0], `{"type":"clock","device":`...)
	b = strconv.AppendInt(b, int64(device), 10)
	if model != "" {
		b = appendKey(b, "model")
		b = appendString(b, model)
	}
	b = append(b, `,"host_unix_ns":`...)
	b = strconv.AppendUint(b, hostUnixNs, 10)
	b = append(b, `,"device_ns":`...)
	b = strconv.AppendUint(b, deviceNs, 10)
	j.b = append(b, "}\n"...)
	j.w.Write(j.b)
	return j.w.Flush()
}

// Comm is one communicator that was handed a hook: its index on the device
// (what the comm field of records holds) and its identity from NCCL's init.
type Comm struct {
	Device int
	Index  int    // the comm intrinsic
	ID     uint64 // commId from init
	Name   string
	Rank   int
	NRanks int
	NNodes int
}

// Comm writes a comm line: {"type":"comm","device":0,"comm":1,"comm_id":"0x..",
// "name":"..","rank":0,"nranks":8,"nnodes":1}.
func (j *JSONL) Comm(c Comm) error {
	j.mu.Lock()
	defer j.mu.Unlock()
	b := append(j.b[:0], `{"type":"comm","device":`...)
	b = strconv.AppendInt(b, int64(c.Device), 10)
	b = append(b, `,"comm":`...)
	b = strconv.AppendInt(b, int64(c.Index), 10)
	b = append(b, `,"comm_id":"0x`...)
	b = strconv.AppendUint(b, c.ID, 16)
	b = append(b, `","name":`...)
	b = appendString(b, c.Name)
	b = append(b, `,"rank":`...)
	b = strconv.AppendInt(b, int64(c.Rank), 10)
	b = append(b, `,"nranks":`...)
	b = strconv.AppendInt(b, int64(c.NRanks), 10)
	b = append(b, `,"nnodes":`...)
	b = strconv.AppendInt(b, int64(c.NNodes), 10)
	j.b = append(b, "}\n"...)
	j.w.Write(j.b)
	return j.w.Flush()
}

// Refused writes a refused line for a hook left out of the device module
// because it could fault NCCL's kernels: {"type":"refused","hook":"h",
// "position":"p.yaml:5:5","reason":"..."}. It records nothing and has no
// dump_stats.
func (j *JSONL) Refused(hook, position, reason string) error {
	j.mu.Lock()
	defer j.mu.Unlock()
	b := appendString(append(j.b[:0], `{"type":"refused","hook":`...), hook)
	b = appendString(append(b, `,"position":`...), position)
	b = appendString(append(b, `,"reason":`...), reason)
	j.b = append(b, "}\n"...)
	j.w.Write(j.b)
	return j.w.Flush()
}

func (j *JSONL) keys(h *hookgen.HookInfo) *recordKeys {
	if k, ok := j.hooks[h]; ok {
		return k
	}
	k := &recordKeys{}
	k.prefix = appendString([]byte(`{"type":"record","hook":`), h.Name)
	k.prefix = append(k.prefix, `,"device":`...)
	for _, f := range h.Layout.Fields {
		k.fields = append(k.fields, appendKey(nil, f.Name))
		k.hasFunc = k.hasFunc || f.Source == "funcId"
	}
	j.hooks[h] = k
	return k
}

// Records writes one line per record: type, hook, device, seq, the fields by
// profile name in layout order, then func when the layout records funcId.
func (j *JSONL) Records(recs []Record) error {
	j.mu.Lock()
	defer j.mu.Unlock()
	for i := range recs {
		r := &recs[i]
		k := j.keys(r.Hook)
		b := append(j.b[:0], k.prefix...)
		b = strconv.AppendInt(b, int64(r.Device), 10)
		b = append(b, `,"seq":`...)
		b = strconv.AppendUint(b, r.Seq, 10)
		for f, v := range r.Values {
			b = append(b, k.fields[f]...)
			b = appendValue(b, v)
		}
		if k.hasFunc {
			b = appendKey(b, "func")
			b = appendString(b, r.FuncName)
		}
		j.b = append(b, "}\n"...)
		if _, err := j.w.Write(j.b); err != nil {
			return fmt.Errorf("writing %s: %w", j.path, err)
		}
	}
	return nil
}

// Dump writes the dump_stats lines, then the aggregate lines, and flushes.
func (j *JSONL) Dump(d *Dump) error {
	j.mu.Lock()
	defer j.mu.Unlock()
	for i := range d.Stats {
		j.b = appendStats(j.b[:0], &d.Stats[i])
		j.w.Write(j.b)
	}
	for i := range d.Aggs {
		j.b = appendAggregate(j.b[:0], &d.Aggs[i])
		j.w.Write(j.b)
	}
	if err := j.w.Flush(); err != nil {
		return fmt.Errorf("writing %s: %w", j.path, err)
	}
	return nil
}

// Close flushes and closes the file.
func (j *JSONL) Close() error {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.f == nil {
		return nil
	}
	err := j.w.Flush()
	if cerr := j.f.Close(); err == nil {
		err = cerr
	}
	j.f = nil
	if err != nil {
		return fmt.Errorf("closing %s: %w", j.path, err)
	}
	return nil
}

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
	} {
		b = appendKey(b, kv.k)
		b = strconv.AppendUint(b, kv.v, 10)
	}
	return append(b, "}\n"...)
}

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
	b = append(b, '[')
	for i, k := range agg.By {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendString(b, k)
	}
	b = append(b, `],"time_unix_ns":`...)
	b = strconv.AppendInt(b, a.TimeUnixNs, 10)
	b = append(b, `,"final":`...)
	b = strconv.AppendBool(b, a.Final)
	b = append(b, `,"rows":[`...)
	floatSum := agg.Value != nil && agg.Value.Type.IsFloat()
	for i := range a.Rows {
		r := &a.Rows[i]
		if i > 0 {
			b = append(b, ',')
		}
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
			b = append(b, '[')
			for i, bk := range r.Buckets {
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
			b = append(b, ']')
		}
		b = append(b, '}')
	}
	return append(b, "]}\n"...)
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
func appendValue(b []byte, v hookgen.Value) []byte {
	switch {
	case v.Type == config.Bool:
		return strconv.AppendBool(b, v.U != 0)
	case v.Type == config.F32:
		return appendFloat(b, v.F, 32)
	case v.Type.IsFloat():
		return appendFloat(b, v.F, 64)
	case v.Type.IsSigned():
		return strconv.AppendInt(b, v.I, 10)
	}
	return strconv.AppendUint(b, v.U, 10)
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
