// Package report reads ncclhooks JSON lines outputs back (files or
// directories, several ranks' files merged), pairs START/STOP records into
// work-item durations, and turns them into per hook, function and channel
// statistics and regression verdicts between two sets of runs (runs.go,
// diff.go, rank.go: the statistics of a verdict). The CLI's report,
// diff and trace commands are built on it; the line format is the contract
// in docs/ARCHITECTURE.md.
package report

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"

	"github.com/ncclhooks/ncclhooks/internal/gpuinfo"
	"github.com/ncclhooks/ncclhooks/internal/schema"
)

// FormatVersion is the JSON lines format version this package reads.
const FormatVersion = schema.Format

// Header is a file's first line.
type Header = schema.Header

// Clock is a host/device timestamp pair taken together on one device, and
// the device's model ("" in outputs that do not record it).
type Clock struct {
	Device     int
	HostUnixNs uint64
	DeviceNs   uint64
	Model      string
}

// HostNs places a device timestamp on the host timeline:
// host = device_ts - device_ns + host_unix_ns.
func (c Clock) HostNs(deviceTs uint64) int64 {
	return int64(deviceTs-c.DeviceNs) + int64(c.HostUnixNs)
}

// DumpStats is one dump_stats line of one of the run's files.
type DumpStats struct {
	File  int // index into Run.Files
	Epoch int // the file's profile epoch (a live reload; 0: the header's profile)
	schema.DumpStats
}

// File is one JSON lines file of a run: one process.
type File struct {
	Path   string
	Header Header
	// Epoch is the profile epoch being read (schema.Profile: a live reload
	// made another profile active mid-file); Epochs are its profile lines.
	Epoch   int
	Epochs  []schema.Profile
	Clocks  map[int]Clock // by device
	Records int           // record lines
	// Devices are the devices' identity and their latest state, by ordinal
	// (from device lines; absent in outputs of older versions).
	Devices map[int]*DeviceInfo
	// Comms are the communicators handed a hook, by device and comm index.
	Comms map[[2]int]schema.Comm
	// Inactive is why the plugin recorded nothing in this process (its
	// inactive line: a refused profile); "" when it was active.
	Inactive string
}

// DeviceInfo is what a file's device lines say about one device.
type DeviceInfo struct {
	schema.Device // the latest line
	// Slowdown names the clock event reasons that held the clocks down in
	// any of its lines (power cap, thermal, ...), sorted.
	Slowdown []string
}

// WorkItem is one work item measured between its START and STOP, either
// paired from two records or from a STOP record's recorded duration.
type WorkItem struct {
	File        int // index into Run.Files
	Hook        string
	Device      int
	Channel     int    // -1 when the hook does not record channelId
	FuncID      int64  // -1 when the hook does not record funcId
	Func        string // function name; see FuncLabel
	Comm        int    // the comm intrinsic (index on the device); -1 when the hook does not record it
	WorkCounter uint64
	HasCounter  bool
	Start, Stop uint64 // device timestamps, ns (Start = Stop - duration for recorded durations)
	HasTime     bool   // Start and Stop are meaningful
	Duration    uint64 // ns
}

// FuncLabel names the item's function: the resolved name, else "funcId N",
// else "all" for hooks that do not record the function.
func (w *WorkItem) FuncLabel() string { return funcLabel(w.Func, w.FuncID) }

func funcLabel(name string, id int64) string {
	switch {
	case name != "":
		return name
	case id >= 0:
		return "funcId " + strconv.FormatInt(id, 10)
	}
	return "all"
}

// HookCounts are per-hook record and pairing counts.
type HookCounts struct {
	Records        uint64
	Items          uint64
	UnpairedStarts uint64 // START without its STOP
	UnpairedStops  uint64 // STOP without its START (or recorded duration unpaired)
	// Ambiguous counts pairs made while several STARTs waited under the same
	// (device, channel, workCounter): concurrent communicators on one device.
	// A recorded duration (paired on the device) has no such ambiguity.
	Ambiguous uint64
}

// Run is everything read from one set of inputs.
type Run struct {
	Inputs  []string
	Files   []*File
	Profile string // header profile name (the first file's, with AllowMixed)
	// ProfileHash is the first profile_hash of the files (outputs of older
	// versions have none); with AllowMixed, files of other hashes join.
	ProfileHash string
	hashFile    string // the output file that gave ProfileHash, and its profile file
	hashProfile string
	Hooks       map[string]*HookCounts
	Stats       []DumpStats             // every dump_stats line, in file order
	Aggs        map[aggKey]*AggSnapshot // the latest snapshot of every aggregate, per file and device
	// Warnings are problems the inputs were read past (a truncated last line).
	Warnings []string
	// Refused are the hooks the plugin left out of the device module
	// (refused lines: they could fault NCCL's kernels), with the reason.
	Refused map[string]string
	// AggHistory is every aggregate snapshot in file order, kept only with
	// Options.AggHistory (the trace draws them over time).
	AggHistory []AggPoint
}

// AggPoint is one aggregate snapshot and the index of its file in Run.Files.
type AggPoint struct {
	File int
	Agg  *AggSnapshot
}

// HookNames returns the hooks seen, sorted.
func (r *Run) HookNames() []string {
	names := make([]string, 0, len(r.Hooks))
	for h := range r.Hooks {
		names = append(names, h)
	}
	slices.Sort(names)
	return names
}

// Options tune Read.
type Options struct {
	// AllowMixed accepts files whose headers name different profiles.
	AllowMixed bool
	// AggHistory keeps every aggregate snapshot in Run.AggHistory, not only
	// the latest.
	AggHistory bool
	// Warn, when set, receives each of Run.Warnings as it is found.
	Warn func(msg string)
	// Progress, when set, is called now and then with bytes read so far
	// and the total size of all inputs.
	Progress func(done, total int64)
}

// InputError is a problem with the inputs: a missing, empty, truncated or
// inconsistent file. Its message names file:line where there is one.
type InputError struct {
	Path string
	Line int // 0: the file (or directory) as a whole
	Err  error
}

func (e *InputError) Error() string {
	if e.Line > 0 {
		return fmt.Sprintf("%s:%d: %v", e.Path, e.Line, e.Err)
	}
	return fmt.Sprintf("%s: %v", e.Path, e.Err)
}

func (e *InputError) Unwrap() error { return e.Err }

// ErrNoRecords is wrapped by Read's error when the inputs hold no record at all.
var ErrNoRecords = errors.New("no records")

// ErrInactive is wrapped by Read's error when the inputs hold nothing
// because the plugin was inactive (an inactive line: a refused profile).
var ErrInactive = errors.New("INACTIVE: the plugin recorded nothing (its profile was refused)")

// Expand turns the inputs (files or directories, searched recursively for
// *.jsonl) into a sorted list of files.
func Expand(inputs []string) ([]string, error) {
	if len(inputs) == 0 {
		return nil, errors.New("no inputs given: name JSON lines files or dump directories")
	}
	var files []string
	for _, in := range inputs {
		st, err := os.Stat(in)
		if err != nil {
			return nil, &InputError{Path: in, Err: errors.Unwrap(err)}
		}
		if !st.IsDir() {
			files = append(files, in)
			continue
		}
		var found []string
		err = filepath.WalkDir(in, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if !d.IsDir() && schema.IsOutputName(p) {
				found = append(found, p)
			}
			return nil
		})
		if err != nil {
			return nil, &InputError{Path: in, Err: err}
		}
		if len(found) == 0 {
			return nil, &InputError{Path: in, Err: errors.New("directory holds no *.jsonl files (nor .jsonl.zst, .jsonl.gz: is it the dump directory of a finished run?)")}
		}
		slices.Sort(found)
		files = append(files, found...)
	}
	return files, nil
}

// Read reads every input and calls onItem for each work item, in file order.
// It fails with an *InputError (or an error wrapping ErrNoRecords) on bad
// inputs.
func Read(inputs []string, opts Options, onItem func(*WorkItem)) (*Run, error) {
	paths, err := Expand(inputs)
	if err != nil {
		return nil, err
	}
	run := &Run{Inputs: inputs, Hooks: map[string]*HookCounts{}}
	var total int64
	for _, p := range paths {
		if st, err := os.Stat(p); err == nil {
			total += st.Size()
		}
	}
	r := &reader{run: run, opts: opts, onItem: onItem, total: total}
	for i, p := range paths {
		if err := r.readFile(i, p); err != nil {
			return nil, err
		}
	}
	var records int
	for _, f := range run.Files {
		records += f.Records
	}
	if records == 0 && len(run.Aggs) == 0 {
		if in := run.Inactive(); len(in) > 0 {
			return nil, &InputError{Path: in[0].Path, Err: fmt.Errorf("%w in %d of %d file(s): %s", ErrInactive, len(in), len(paths), in[0].Reason)}
		}
		return nil, &InputError{Path: paths[0], Err: fmt.Errorf("%w and no aggregates in %d file(s): did the profile's hooks match any event?", ErrNoRecords, len(paths))}
	}
	return run, nil
}

type reader struct {
	run    *Run
	opts   Options
	onItem func(*WorkItem)
	total  int64
	done   int64
	obj    flatObject
}

func (r *reader) readFile(index int, path string) error {
	fh, err := schema.Open(path)
	if err != nil {
		if u := errors.Unwrap(err); u != nil {
			err = u
		}
		return &InputError{Path: path, Err: err}
	}
	defer fh.Close()
	f := &File{Path: path, Clocks: map[int]Clock{}, Devices: map[int]*DeviceInfo{}, Comms: map[[2]int]schema.Comm{}}
	pending := map[pairKey][]pendingStart{}
	// ReadBytes grows past the buffer for a longer line: a small file
	// needs no 1 MiB buffer (zeroed, per file).
	br := bufio.NewReaderSize(fh, min(1<<20, 16*fh.BufferSize()))
	lineNo := 0
	for {
		line, err := br.ReadBytes('\n')
		if len(line) == 0 && err == io.EOF {
			break
		}
		if err != nil && err != io.EOF {
			return &InputError{Path: path, Line: lineNo + 1, Err: err}
		}
		lineNo++
		r.progress(int64(len(line)))
		complete := err == nil
		line = bytes.TrimRight(line, "\r\n")
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		if lerr := r.line(index, f, pending, line, lineNo); lerr != nil {
			if !complete {
				// A run killed mid-write (SIGKILL, OOM, a full disk before
				// the plugin cut its writes back) ends in part of a line:
				// the rest of the file is good.
				r.warn(fmt.Sprintf("%s:%d: truncated last line ignored (the run was cut short: killed, or the disk filled); the totals are those of the last dump_stats line before it", path, lineNo))
				break
			}
			return &InputError{Path: path, Line: lineNo, Err: lerr}
		}
	}
	if fh.Truncated() {
		r.warn(fmt.Sprintf("%s: %v; the totals are those of the last dump_stats line before it", path, schema.ErrTruncated))
	}
	if lineNo == 0 {
		return &InputError{Path: path, Err: errors.New("empty file: not an ncclhooks JSON lines output")}
	}
	for k, q := range pending {
		r.run.hook(k.hook).UnpairedStarts += uint64(len(q))
	}
	r.run.Files = append(r.run.Files, f)
	return nil
}

func (r *reader) warn(msg string) {
	r.run.Warnings = append(r.run.Warnings, msg)
	if r.opts.Warn != nil {
		r.opts.Warn(msg)
	}
}

func (r *reader) progress(n int64) {
	if r.opts.Progress == nil {
		return
	}
	before := r.done >> 22
	r.done += n
	r.total = max(r.total, r.done) // a compressed file reads as more bytes than it has
	if r.done>>22 != before || r.done == r.total {
		r.opts.Progress(r.done, r.total)
	}
}

func (run *Run) hook(name string) *HookCounts {
	h := run.Hooks[name]
	if h == nil {
		h = &HookCounts{}
		run.Hooks[name] = h
	}
	return h
}

func (r *reader) line(index int, f *File, pending map[pairKey][]pendingStart, line []byte, lineNo int) error {
	o := &r.obj
	err := o.parse(line)
	if err == errNotFlat {
		return r.nested(f, line, lineNo)
	}
	if err != nil {
		return err
	}
	typ := o.str("type")
	if lineNo == 1 || f.Header.Format == 0 {
		if typ != "header" {
			return fmt.Errorf("first line is a %q line, not the header: not an ncclhooks JSON lines file", typ)
		}
		return r.header(f, line)
	}
	switch typ {
	case schema.TypeRecord:
		f.Records++
		return r.record(index, f, pending)
	case "clock":
		dev, ok1 := o.int("device")
		host, ok2 := o.uint("host_unix_ns")
		devNs, ok3 := o.uint("device_ns")
		if !ok1 || !ok2 || !ok3 {
			return errors.New("clock line needs integer device, host_unix_ns and device_ns")
		}
		f.Clocks[int(dev)] = Clock{Device: int(dev), HostUnixNs: host, DeviceNs: devNs, Model: o.str("model")}
	case schema.TypeDumpStats:
		return r.dumpStats(index, f.Epoch, line)
	case schema.TypeComm:
		var c schema.Comm
		if err := json.Unmarshal(line, &c); err != nil {
			return fmt.Errorf("comm line: %v", err)
		}
		f.Comms[[2]int{c.Device, c.Comm}] = c
	case schema.TypeDevice:
		return f.device(line)
	case schema.TypeInactive:
		f.Inactive = o.str("reason")
	case schema.TypeRefused:
		if r.run.Refused == nil {
			r.run.Refused = map[string]string{}
		}
		r.run.Refused[o.str("hook")] = o.str("reason")
	case "header":
		return errors.New("a second header line: files were concatenated; keep one file per process")
	case "":
		return errors.New(`line has no "type"`)
	}
	// Unknown types (and aggregates) are left to other readers.
	return nil
}

// nested handles lines with nested values: the header (field map) and
// aggregate snapshots; anything else nested is not ours to judge.
func (r *reader) nested(f *File, line []byte, lineNo int) error {
	var probe struct {
		Type string `json:"type"`
	}
	if err := json.Unmarshal(line, &probe); err != nil {
		return err
	}
	if lineNo == 1 || f.Header.Format == 0 {
		if probe.Type != "header" {
			return fmt.Errorf("first line is a %q line, not the header: not an ncclhooks JSON lines file", probe.Type)
		}
		return r.header(f, line)
	}
	switch probe.Type {
	case schema.TypeProfile:
		return r.profileLine(f, line)
	case schema.TypeAggregate:
		return r.aggregate(len(r.run.Files), line)
	case schema.TypeDevice:
		return f.device(line)
	}
	return nil
}

// device keeps a device line: the latest state, and every slowdown seen.
func (f *File) device(line []byte) error {
	var d schema.Device
	if err := json.Unmarshal(line, &d); err != nil {
		return fmt.Errorf("device line: %v", err)
	}
	info := f.Devices[d.Device]
	if info == nil {
		info = &DeviceInfo{}
		f.Devices[d.Device] = info
	}
	info.Device = d
	if d.Slowdown && d.ClockEventReasons != nil {
		for _, n := range gpuinfo.ReasonNames(gpuinfo.Slowdown(*d.ClockEventReasons)) {
			if !slices.Contains(info.Slowdown, n) {
				info.Slowdown = append(info.Slowdown, n)
			}
		}
		slices.Sort(info.Slowdown)
	}
	return nil
}

func (r *reader) header(f *File, line []byte) error {
	if err := json.Unmarshal(line, &f.Header); err != nil {
		return fmt.Errorf("header: %v", err)
	}
	if f.Header.Format != FormatVersion {
		return fmt.Errorf("header format %d: this ncclhooks reads format %d (use the ncclhooks that wrote the file)", f.Header.Format, FormatVersion)
	}
	switch {
	case len(r.run.Files) == 0:
		r.run.Profile = f.Header.Profile
	case f.Header.Profile != r.run.Profile && !r.opts.AllowMixed:
		return fmt.Errorf("profile %q differs from %q of %s: the inputs come from different profiles; pass --allow-mixed to merge them anyway",
			f.Header.Profile, r.run.Profile, r.run.Files[0].Path)
	}
	switch h := f.Header.ProfileHash; {
	case h == "" || h == r.run.ProfileHash:
	case r.run.ProfileHash == "":
		r.run.ProfileHash, r.run.hashFile, r.run.hashProfile = h, f.Path, f.Header.ProfileFile
	case !r.opts.AllowMixed:
		// One name, other contents: an edited profile, whose numbers
		// would be merged as if they measured the same thing.
		return fmt.Errorf("profile %s (%s) differs from profile %s (%s) of %s: the inputs come from different versions of profile %q; pass --allow-mixed to merge them anyway",
			ShortHash(h), f.Header.ProfileFile, ShortHash(r.run.ProfileHash), r.run.hashProfile, r.run.hashFile, f.Header.Profile)
	}
	return nil
}

// profileLine reads a profile line: a live reload made another profile
// active from here on. Its epochs ran different profiles, merged only with
// --allow-mixed, as files of different profile versions are; each epoch's
// dump_stats count on their own (their totals restart).
func (r *reader) profileLine(f *File, line []byte) error {
	var p schema.Profile
	if err := json.Unmarshal(line, &p); err != nil {
		return fmt.Errorf("profile line: %v", err)
	}
	if p.Epoch != f.Epoch+1 {
		return fmt.Errorf("profile line of epoch %d after epoch %d", p.Epoch, f.Epoch)
	}
	if !r.opts.AllowMixed && (p.Profile != r.run.Profile || (r.run.ProfileHash != "" && p.ProfileHash != r.run.ProfileHash)) {
		return fmt.Errorf("a live reload made profile %q (%s, %s) active mid-file as epoch %d, after %q (%s): the file's epochs ran different profiles; pass --allow-mixed to read them together (ncclhooks check verifies each epoch)",
			p.Profile, p.ProfileFile, ShortHash(p.ProfileHash), p.Epoch, r.run.Profile, ShortHash(r.run.ProfileHash))
	}
	f.Epoch = p.Epoch
	f.Epochs = append(f.Epochs, p)
	// The epoch's records name their fields as its profile does.
	fields := maps.Clone(f.Header.Fields)
	if fields == nil {
		fields = map[string]map[string]string{}
	}
	maps.Copy(fields, p.Fields)
	f.Header.Fields = fields
	f.Header.Drained = append(slices.Clone(f.Header.Drained), p.Drained...)
	return nil
}

// ShortHash names a profile hash in messages: "sha256:" and 12 hex digits.
func ShortHash(h string) string {
	if len(h) > 12 {
		h = h[:12]
	}
	return "sha256:" + h
}

// Inactive lists the files whose process recorded nothing, with why.
func (r *Run) Inactive() []InactiveFile {
	var out []InactiveFile
	for _, f := range r.Files {
		if f.Inactive != "" {
			out = append(out, InactiveFile{Path: f.Path, Reason: f.Inactive})
		}
	}
	return out
}

// InactiveFile is a process in which the plugin recorded nothing.
type InactiveFile struct {
	Path   string `json:"path"`
	Reason string `json:"reason"`
}

// Drained says whether some file's header names hook among the hooks the
// drain aggregates, which write no record line.
func (r *Run) Drained(hook string) bool {
	for _, f := range r.Files {
		if slices.Contains(f.Header.Drained, hook) {
			return true
		}
	}
	return false
}

// source returns the output key under which hook records a catalogue source.
func (f *File) source(hook, src string) string {
	if m := f.Header.Fields[hook]; m != nil {
		for out, s := range m {
			if s == src {
				return out
			}
		}
	}
	return src
}
