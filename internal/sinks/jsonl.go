package sinks

import (
	"encoding/binary"
	"fmt"
	"maps"
	"os"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zstd"

	"github.com/ncclhooks/ncclhooks/internal/abi"
	"github.com/ncclhooks/ncclhooks/internal/config"
	"github.com/ncclhooks/ncclhooks/internal/hookgen"
)

// JSONLFormat is the version written in the header line.
const JSONLFormat = 1

// Header is the first line of a JSON lines file.
type Header struct {
	Profile     string
	ProfileFile string
	Host        string // default: os.Hostname
	PID         int    // default: os.Getpid
	Executable  string // default: os.Executable
	Backend     string
	StartUnixNs int64 // default: now
	// ProfileHash, PluginVersion and NCCLVersion are the schema.Header
	// keys of the same names; "" leaves each out.
	ProfileHash   string
	PluginVersion string
	NCCLVersion   string
	// Fields optionally maps, per hook, each output field name to its
	// catalogue source, so readers find renamed fields ("ts" -> "timestamp").
	// HeaderFields builds it from a module.
	Fields map[string]map[string]string
	// Funcs are NCCL's function names by id, as the plugin resolved them.
	Funcs []string
	// Drained are the hooks whose aggregates the drain computes from their
	// records, none of which is written (HeaderDrained).
	Drained []string
}

// HeaderDrained returns Header.Drained for a module.
func HeaderDrained(m *hookgen.Module) []string {
	var out []string
	for _, h := range m.Hooks {
		if h.Hook != nil && h.Hook.DrainAggregates() {
			out = append(out, h.Name)
		}
	}
	return out
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

// JSONL writes one JSON object per line into the process's file (see
// docs/ARCHITECTURE.md, "JSON lines"). It is safe for concurrent use; the
// drainer calls Records and Dump, the plugin calls Clock.
//
// The file only ever holds complete lines, and its dump_stats lines count
// only what reached it. Lines are buffered and written at the end of the
// file's complete lines; a write that fails (a full disk, a file-size
// limit) is cut back to them, the record lines it held are counted as
// dropped_write_failed in the next dump that is written, the other lines
// (comm, clock, refused) are kept and written with the next write, and
// writing goes on: when the disk has room again the output resumes.
type JSONL struct {
	mu   sync.Mutex
	path string
	f    *os.File
	size int64 // bytes of complete lines in the file

	meta    []byte // comm, clock, refused lines not yet written
	recs    []byte // record lines not yet written
	recKeys map[lineKey]uint64
	err     error // the last write error, nil after a successful write

	lost map[lineKey]uint64 // records whose lines never reached the file
	// last is what the last dump_stats line written for a hook and device
	// said, for the since-last-dump deltas of the next one.
	last map[lineKey]writtenStats
	// pendingFinal holds a final dump whose write failed: it is written
	// before anything else, at the next write.
	pendingFinal     []byte
	pendingFinalLast map[lineKey]writtenStats // j.last once pendingFinal is written

	b     []byte // line being built
	hooks map[hookDevice]*recordKeys

	// queued are comm, clock and refused lines from callers that found a
	// write in progress: NCCL's threads never wait for the storage. The next
	// write takes them first (under queueMu, never held across a write).
	queueMu sync.Mutex
	queued  []byte
	// shed: the settle in progress must end soon (Shed): record lines are
	// counted as dropped_write_failed instead of written, until the final
	// dump is written.
	shed atomic.Bool

	compress   string        // "" (plain), schema.CompressZstd or CompressGzip
	zenc       *zstd.Encoder // zstd
	gz         *gzip.Writer  // gzip, reset for every frame
	zbuf       []byte        // the last frame
	maxBytes   int64         // 0: no cap
	capReached bool
	capped     map[lineKey]uint64
	// lostBefore counts what lost and capped held in earlier profile
	// epochs (Epoch restarts them with the epoch's totals), for Lost.
	lostBefore uint64
	log        func(level int, msg string)
}

// overCap reports whether a record line that ends the buffered lines would
// take the file past its cap: a plain file counts its buffered lines, a
// compressed one only what it holds (checked again at every write). Once
// over, it stays over.
func (j *JSONL) overCap() bool {
	if j.capReached {
		return true
	}
	size := j.size
	if j.compress == "" {
		size += int64(len(j.meta) + len(j.recs) + len(j.pendingFinal))
	}
	if size <= j.maxBytes {
		return false
	}
	j.capReached = true
	if j.log != nil {
		j.log(abi.LogWarn, fmt.Sprintf("ncclhooks: %s reached NCCL_HOOKS_MAX_OUTPUT_BYTES (%d bytes): further records are counted as dropped_cap in the dump_stats lines, not written; dumps go on; this warning is not repeated", j.path, j.maxBytes))
	}
	return true
}

type lineKey struct {
	hook   string
	device int
}

type writtenStats struct{ records, dropped uint64 }

// flushAt is the size of buffered record lines that triggers a write.
const flushAt = 1 << 20

// recordKeys are the precomputed pieces of one hook's record lines on one
// device: only seq and the field values differ from line to line.
type recordKeys struct {
	prefix  []byte // {"type":"record","hook":"name","device":N,"seq":
	fields  []fieldKey
	hasFunc bool
	// The last function name written and the line's end with it
	// (,"func":"name"}\n; }\n without funcId): records come in runs of one
	// function, so it is quoted once per run.
	lastFunc string
	suffix   []byte
	room     int // the most bytes of a line, but for suffix
	// The high digits of seq and of each field, for values that share them
	// record after record.
	seqHigh highDigits
	high    []highDigits
}

// fieldKey is a field's ,"name": and, when that is at most 16 bytes, the
// same bytes as two words, zero padded: two stores instead of a copy.
type fieldKey struct {
	b      []byte
	w0, w1 uint64
}

func newFieldKey(name string) fieldKey {
	k := fieldKey{b: appendKey(nil, name)}
	if len(k.b) <= 16 {
		var w [16]byte
		copy(w[:], k.b)
		k.w0, k.w1 = binary.LittleEndian.Uint64(w[:]), binary.LittleEndian.Uint64(w[8:])
	}
	return k
}

// hookDevice is what one recordKeys is for.
type hookDevice struct {
	hook   *hookgen.HookInfo
	device int
}

// flushLocked writes the pending final dump, the kept lines and the
// buffered records. When that fails the records are counted lost; the
// other lines are kept for the next write.
func (j *JSONL) flushLocked() error {
	j.queueMu.Lock()
	j.meta = append(j.meta, j.queued...)
	j.queued = j.queued[:0]
	j.queueMu.Unlock()
	if j.shed.Load() {
		j.dropRecords()
	}
	if len(j.pendingFinal)+len(j.meta)+len(j.recs) == 0 {
		return nil
	}
	if len(j.pendingFinal) > 0 {
		if err := j.writeLocked(j.pendingFinal); err != nil {
			j.dropRecords()
			return j.fail(err)
		}
		j.pendingFinal = j.pendingFinal[:0]
		maps.Copy(j.last, j.pendingFinalLast)
		j.shed.Store(false)
	}
	data := j.meta
	switch {
	case len(j.meta) == 0:
		data = j.recs // the usual case: no copy of the records
	case len(j.recs) > 0:
		data = append(j.meta, j.recs...)
		j.meta = data[:len(j.meta)] // same contents; data may have grown it
	}
	if err := j.writeLocked(data); err != nil {
		j.dropRecords()
		return j.fail(err)
	}
	j.meta, j.recs = j.meta[:0], j.recs[:0]
	clear(j.recKeys)
	j.err = nil
	return nil
}

// dropRecords counts the buffered record lines as lost and forgets them.
func (j *JSONL) dropRecords() {
	for k, n := range j.recKeys {
		j.lost[k] += n
	}
	clear(j.recKeys)
	j.recs = j.recs[:0]
}

func (j *JSONL) fail(err error) error {
	j.err = err
	return fmt.Errorf("writing %s (records that are not written are counted as dropped_write_failed; writing resumes when it can): %w", j.path, err)
}

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
	if h.Executable != "" {
		b = appendKey(b, "executable")
		b = appendString(b, h.Executable)
	}
	b = appendKey(b, "backend")
	b = appendString(b, h.Backend)
	b = appendKey(b, "start_unix_ns")
	b = strconv.AppendInt(b, h.StartUnixNs, 10)
	for _, kv := range [][2]string{{"profile_hash", h.ProfileHash}, {"plugin_version", h.PluginVersion}, {"nccl_version", h.NCCLVersion}} {
		if kv[1] != "" {
			b = appendKey(b, kv[0])
			b = appendString(b, kv[1])
		}
	}
	if len(h.Fields) > 0 {
		b = appendKey(b, "fields")
		b = appendStringMap2(b, h.Fields)
	}
	if len(h.Funcs) > 0 {
		b = appendKey(b, "funcs")
		b = appendStrings(b, h.Funcs)
	}
	if len(h.Drained) > 0 {
		b = appendKey(b, "drained")
		b = appendStrings(b, h.Drained)
	}
	j.b = append(b, "}\n"...)
}

// metaLine queues a line that must reach the file (comm, clock, refused)
// and writes it with everything buffered before it, unless a write is in
// progress: then the line goes with the next write (the drainer's next
// dump at the latest), and the caller, one of NCCL's threads, does not wait
// for slow storage.
func (j *JSONL) metaLine(line []byte) error {
	j.queueMu.Lock()
	j.queued = append(j.queued, line...)
	j.queueMu.Unlock()
	if !j.mu.TryLock() {
		return nil
	}
	defer j.mu.Unlock()
	if j.f == nil {
		return os.ErrClosed
	}
	return j.flushLocked()
}

// Shed makes the settle in progress end as soon as the write in progress
// returns: record lines not yet written are counted as dropped_write_failed
// instead of written, and the final dump is written next. It lasts until a
// final dump is written. Called when finalize would otherwise wait on slow
// or hung storage.
func (j *JSONL) Shed() { j.shed.Store(true) }

// Clock writes a host/device timestamp pair of one device, with the
// device's model ("NVIDIA H200"; "" leaves it out) so that a diff can refuse
// to compare runs on different hardware.
func (j *JSONL) Clock(device int, model string, hostUnixNs, deviceNs uint64) error {
	b := append([]byte(nil), `{"type":"clock","device":`...)
	b = strconv.AppendInt(b, int64(device), 10)
	if model != "" {
		b = appendKey(b, "model")
		b = appendString(b, model)
	}
	b = append(b, `,"host_unix_ns":`...)
	b = strconv.AppendUint(b, hostUnixNs, 10)
	b = append(b, `,"device_ns":`...)
	b = strconv.AppendUint(b, deviceNs, 10)
	return j.metaLine(append(b, "}\n"...))
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
	UUID   string // the GPU's; "" leaves it out
}

// Comm writes a comm line: {"type":"comm","device":0,"comm":1,"comm_id":"0x..",
// "name":"..","rank":0,"nranks":8,"nnodes":1}.
func (j *JSONL) Comm(c Comm) error {
	b := append([]byte(nil), `{"type":"comm","device":`...)
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
	if c.UUID != "" {
		b = appendKey(b, "uuid")
		b = appendString(b, c.UUID)
	}
	return j.metaLine(append(b, "}\n"...))
}

// Device writes a device line (the device's identity and state) now, as
// the plugin does when it loads a device; Dump writes one per device too.
func (j *JSONL) Device(d *DeviceState) error {
	return j.metaLine(appendDevice(nil, d))
}

// Inactive writes an inactive line: the plugin records nothing in this
// process, for reason. {"type":"inactive","time_unix_ns":..,"reason":"..."}.
func (j *JSONL) Inactive(reason string) error {
	b := strconv.AppendInt([]byte(`{"type":"inactive","time_unix_ns":`), time.Now().UnixNano(), 10)
	b = appendString(append(b, `,"reason":`...), reason)
	return j.metaLine(append(b, "}\n"...))
}

// Refused writes a refused line for a hook left out of the device module
// because it could fault NCCL's kernels: {"type":"refused","hook":"h",
// "position":"p.yaml:5:5","reason":"..."}. It records nothing and has no
// dump_stats.
func (j *JSONL) Refused(hook, position, reason string) error {
	b := appendString([]byte(`{"type":"refused","hook":`), hook)
	b = appendString(append(b, `,"position":`...), position)
	b = appendString(append(b, `,"reason":`...), reason)
	return j.metaLine(append(b, "}\n"...))
}

func (j *JSONL) keys(h *hookgen.HookInfo, device int) *recordKeys {
	hd := hookDevice{h, device}
	if k, ok := j.hooks[hd]; ok {
		return k
	}
	k := &recordKeys{}
	k.prefix = appendString([]byte(`{"type":"record","hook":`), h.Name)
	k.prefix = append(k.prefix, `,"device":`...)
	k.prefix = appendInt(k.prefix, int64(device))
	k.prefix = append(k.prefix, `,"seq":`...)
	for _, f := range h.Layout.Fields {
		k.fields = append(k.fields, newFieldKey(f.Name))
		k.hasFunc = k.hasFunc || f.Source == "funcId"
	}
	if !k.hasFunc {
		k.suffix = []byte("}\n")
	}
	k.high = make([]highDigits, len(k.fields))
	k.room = len(k.prefix) + maxValueLen
	for _, f := range k.fields {
		k.room += len(f.b) + maxValueLen
	}
	j.hooks[hd] = k
	return k
}

// maxValueLen bounds the bytes of one field value: a float's shortest form
// (24, as in -1.2345678901234567e-308) or an integer with putUint's room.
const maxValueLen = max(24, intRoom)

// appendRecord writes r's line: the room for it is made once, and the
// pieces and numbers are copied and formatted into it by index.
func (k *recordKeys) appendRecord(b []byte, r *Record) []byte {
	if k.hasFunc && (k.suffix == nil || r.FuncName != k.lastFunc) {
		k.lastFunc = r.FuncName
		k.suffix = append(appendString(appendKey(k.suffix[:0], "func"), r.FuncName), "}\n"...)
	}
	b = slices.Grow(b, k.room+len(k.suffix))
	buf := b[:cap(b)]
	i := len(b)
	i += copy(buf[i:], k.prefix)
	if r.Seq < 1e8 {
		i = putUint(buf, i, r.Seq)
	} else {
		i = k.seqHigh.put(buf, i, r.Seq)
	}
	for f := range r.Values {
		if fk := &k.fields[f]; len(fk.b) <= 16 {
			// Past the key, the padding lands in the value's room.
			binary.LittleEndian.PutUint64(buf[i:], fk.w0)
			binary.LittleEndian.PutUint64(buf[i+8:], fk.w1)
			i += len(fk.b)
		} else {
			i += copy(buf[i:], fk.b)
		}
		v := &r.Values[f]
		// Every type named u... is unsigned (and appendValue writes other
		// names as unsigned too): one byte tells, where the type switch
		// compared strings.
		if t := v.Type; len(t) > 0 && t[0] == 'u' {
			if v.U < 1e8 {
				i = putUint(buf, i, v.U)
			} else {
				i = k.high[f].put(buf, i, v.U) // timestamps
			}
			continue
		}
		switch v.Type {
		case config.I64, config.I32, config.I16, config.I8:
			i = putInt(buf, i, v.I)
		default:
			nb := appendValue(buf[:i], v) // floats, bools: within the room
			buf, i = nb[:cap(nb)], len(nb)
		}
	}
	i += copy(buf[i:], k.suffix)
	return buf[:i]
}

// Records writes one line per record: type, hook, device, seq, the fields by
// profile name in layout order, then func when the layout records funcId.
func (j *JSONL) Records(recs []Record) error {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.f == nil {
		return os.ErrClosed
	}
	if j.shed.Load() {
		for i := range recs {
			j.lost[lineKey{recs[i].Hook.Name, recs[i].Device}]++
		}
		return nil
	}
	// Records come in runs of one hook and device: its line pieces are
	// looked up, and its records counted, once per run.
	var run hookDevice
	var k *recordKeys
	var n uint64
	b := j.recs
	for i := range recs {
		r := &recs[i]
		if r.Hook != run.hook || r.Device != run.device {
			if n > 0 {
				j.recKeys[lineKey{run.hook.Name, run.device}] += n
			}
			run, n = hookDevice{r.Hook, r.Device}, 0
			k = j.keys(r.Hook, r.Device)
		}
		if j.capReached {
			j.capped[lineKey{run.hook.Name, run.device}]++
			continue
		}
		n++
		start := len(b)
		b = k.appendRecord(b, r)
		if j.maxBytes > 0 {
			j.recs = b
			if j.overCap() {
				b = b[:start]
				n--
				j.capped[lineKey{run.hook.Name, run.device}]++
			}
		}
	}
	j.recs = b
	if n > 0 {
		j.recKeys[lineKey{run.hook.Name, run.device}] += n
	}
	if len(j.recs) >= flushAt {
		return j.flushLocked()
	}
	return nil
}

// Dump writes the buffered records, then the dump_stats lines, the
// aggregate lines and the device lines. The dump_stats lines count only the records whose lines
// reached the file: records_total is lowered, and dropped_total and
// dropped_write_failed_total raised, by the records whose write failed, and
// the since-last-dump deltas are taken from the last dump_stats line that
// reached the file. A final dump that cannot be written is kept and written
// before anything else at the next write.
func (j *JSONL) Dump(d *Dump) error {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.f == nil {
		return os.ErrClosed
	}
	ferr := j.flushLocked()
	lines := j.b[:0]
	written := map[lineKey]writtenStats{}
	for i := range d.Stats {
		st := d.Stats[i]
		k := lineKey{st.Hook, st.Device}
		p, ok := j.last[k]
		if !ok {
			// No dump of this hook and device written yet: the caller's
			// deltas say where it started.
			p = writtenStats{st.Records - min(st.RecordsSinceLastDump, st.Records), st.Dropped - min(st.DroppedSinceLastDump, st.Dropped)}
		}
		lost := min(j.lost[k], st.Records)
		st.Records -= lost
		st.Dropped += lost
		st.DroppedWriteFailed += lost
		capped := min(j.capped[k], st.Records)
		st.Records -= capped
		st.Dropped += capped
		st.DroppedCap += capped
		w := writtenStats{st.Records, st.Dropped}
		st.RecordsSinceLastDump = w.records - min(p.records, w.records)
		st.DroppedSinceLastDump = w.dropped - min(p.dropped, w.dropped)
		written[k] = w
		lines = appendStats(lines, &st)
	}
	for i := range d.Aggs {
		lines = appendAggregate(lines, &d.Aggs[i])
	}
	for i := range d.Devices {
		lines = appendDevice(lines, &d.Devices[i])
	}
	j.b = lines
	if err := j.writeLocked(lines); err != nil {
		if d.Final {
			j.pendingFinal = append(j.pendingFinal[:0], lines...)
			j.pendingFinalLast = written
		}
		return j.fail(err)
	}
	if d.Final {
		j.pendingFinal = j.pendingFinal[:0]
		j.shed.Store(false)
	}
	maps.Copy(j.last, written)
	return ferr
}

// Lost is the number of records the file lost: lines that could not be
// written, and lines past NCCL_HOOKS_MAX_OUTPUT_BYTES.
func (j *JSONL) Lost() uint64 {
	j.mu.Lock()
	defer j.mu.Unlock()
	var n uint64
	for _, v := range j.lost {
		n += v
	}
	for _, v := range j.capped {
		n += v
	}
	return n + j.lostBefore
}

// Epoch is a profile line's contents (schema.Profile).
type Epoch struct {
	Epoch        int
	Profile      string
	ProfileFile  string
	ProfileHash  string
	ActiveUnixNs int64
	ChangeUnixNs int64
	Fields       map[string]map[string]string // HeaderFields of the epoch's module
	Drained      []string                     // HeaderDrained of the epoch's module
}

// Epoch writes a profile line, opening a profile epoch (a live reload):
// everything buffered is written first, and the per hook and device
// accounting (the since-last-dump deltas, the records the file lost or
// capped) starts again, as the drainer's totals do for the epoch's hooks.
// The previous epoch's final dump must have been written (Dump) before.
// {"type":"profile","epoch":1,"profile":"p","profile_file":"p.yaml",
// "profile_hash":"..","active_unix_ns":..,"change_unix_ns":..,"fields":{..}}
func (j *JSONL) Epoch(e Epoch) error {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.f == nil {
		return os.ErrClosed
	}
	b := strconv.AppendInt([]byte(`{"type":"profile","epoch":`), int64(e.Epoch), 10)
	b = appendString(appendKey(b, "profile"), e.Profile)
	b = appendString(appendKey(b, "profile_file"), e.ProfileFile)
	b = appendString(appendKey(b, "profile_hash"), e.ProfileHash)
	b = strconv.AppendInt(appendKey(b, "active_unix_ns"), e.ActiveUnixNs, 10)
	b = strconv.AppendInt(appendKey(b, "change_unix_ns"), e.ChangeUnixNs, 10)
	if len(e.Fields) > 0 {
		b = appendStringMap2(appendKey(b, "fields"), e.Fields)
	}
	if len(e.Drained) > 0 {
		b = appendStrings(appendKey(b, "drained"), e.Drained)
	}
	j.meta = append(j.meta, append(b, "}\n"...)...)
	err := j.flushLocked()
	for _, v := range j.lost {
		j.lostBefore += v
	}
	for _, v := range j.capped {
		j.lostBefore += v
	}
	clear(j.lost)
	clear(j.capped)
	clear(j.last)
	clear(j.hooks)
	return err
}

// Close writes what is buffered and closes the file.
func (j *JSONL) Close() error {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.f == nil {
		return nil
	}
	err := j.flushLocked()
	if j.zenc != nil {
		j.zenc.Close()
	}
	if cerr := j.f.Close(); err == nil {
		err = cerr
	}
	j.f = nil
	if err != nil {
		return fmt.Errorf("closing %s: %w", j.path, err)
	}
	return nil
}
