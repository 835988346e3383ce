package sinks

// The JSON lines file: its name, creating it exclusively, and writing whole
// lines at its end.

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zstd"

	"github.com/ncclhooks/ncclhooks/internal/schema"
)

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

// maxOutputNames is how many names NewJSONL tries before it gives up.
const maxOutputNames = 100

// NewJSONL creates (creating dir with mode 0755 if missing)
// dir/ncclhooks-<host>-<pid>.jsonl and writes its header line. It never
// writes into a file it did not create: the file is created exclusively
// (O_EXCL, which also refuses to follow a symlink planted under that name,
// and O_NOFOLLOW), and when the name is taken (an earlier run with the same
// host and pid, a symlink, a FIFO) it takes ncclhooks-<host>-<pid>.<n>.jsonl
// for the first free n from 1, so one file is always one run.
func NewJSONL(dir string, header Header) (*JSONL, error) {
	return OpenJSONL(dir, header, JSONLOptions{})
}

// JSONLOptions are the JSON lines output's knobs.
type JSONLOptions struct {
	// Compress is schema.CompressZstd or CompressGzip to compress the file
	// (NCCL_HOOKS_COMPRESS; the name gets .zst or .gz), "" or "none" not to.
	// Every write is a frame of its own (a zstd frame, a gzip member) of
	// whole lines, so a failed write is cut back to the previous frame and
	// a file whose job was killed reads up to its last complete frame.
	Compress string
	// MaxBytes caps the file (NCCL_HOOKS_MAX_OUTPUT_BYTES; 0: no cap): once
	// it holds that many bytes (compressed bytes when compressed, checked
	// at every write of up to 1 MiB of lines), record lines are no longer
	// written and are counted as dropped_cap; dump_stats, aggregate and the
	// other lines go on.
	MaxBytes int64
	// Log, when set, gets one WARN when the cap is reached.
	Log func(level int, msg string)
}

// OpenJSONL is NewJSONL with options.
func OpenJSONL(dir string, header Header, opts JSONLOptions) (*JSONL, error) {
	switch opts.Compress {
	case "", schema.CompressNone:
		opts.Compress = ""
	case schema.CompressZstd, schema.CompressGzip:
	default:
		return nil, fmt.Errorf("compression %q: use zstd, gzip or none", opts.Compress)
	}
	if header.Host == "" {
		header.Host, _ = os.Hostname()
	}
	if header.PID == 0 {
		header.PID = os.Getpid()
	}
	if header.Executable == "" {
		header.Executable, _ = os.Executable()
	}
	if header.StartUnixNs == 0 {
		header.StartUnixNs = time.Now().UnixNano()
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("creating the dump directory: %w", err)
	}
	name := FileName(header.Host, header.PID)
	suffix := schema.Suffix(opts.Compress)
	var f *os.File
	var path string
	for n := 0; ; n++ {
		if n == maxOutputNames {
			return nil, fmt.Errorf("opening the JSON lines output: %s and %d numbered alternatives in %s all exist; clean up the dump directory", name, maxOutputNames-1, dir)
		}
		path = filepath.Join(dir, name+suffix)
		if n > 0 {
			path = filepath.Join(dir, strings.TrimSuffix(name, ".jsonl")+"."+strconv.Itoa(n)+".jsonl"+suffix)
		}
		var err error
		f, err = os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL|syscall.O_NOFOLLOW|syscall.O_CLOEXEC, 0o644)
		if err == nil {
			break
		}
		if !errors.Is(err, fs.ErrExist) && !errors.Is(err, syscall.ELOOP) {
			return nil, fmt.Errorf("opening the JSON lines output: %w", err)
		}
	}
	j := &JSONL{path: path, f: f, recKeys: map[lineKey]uint64{}, lost: map[lineKey]uint64{},
		last: map[lineKey]writtenStats{}, hooks: map[hookDevice]*recordKeys{},
		compress: opts.Compress, maxBytes: opts.MaxBytes, log: opts.Log, capped: map[lineKey]uint64{}}
	if opts.Compress == schema.CompressZstd {
		// One goroutine, the fastest level: the drain must keep up.
		enc, err := zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.SpeedFastest), zstd.WithEncoderConcurrency(1))
		if err != nil {
			f.Close()
			os.Remove(path)
			return nil, fmt.Errorf("zstd: %w", err)
		}
		j.zenc = enc
	}
	j.writeHeader(&header)
	if err := j.writeLocked(j.b); err != nil {
		f.Close()
		os.Remove(path)
		return nil, fmt.Errorf("writing the header of %s: %w", path, err)
	}
	return j, nil
}

// Path is the file being written.
func (j *JSONL) Path() string { return j.path }

// writeLocked appends data at the end of the file's complete lines. On a
// failure the file is cut back to them, so that it never ends in part of a
// line.
func (j *JSONL) writeLocked(data []byte) error {
	if j.f == nil {
		return os.ErrClosed
	}
	if len(data) == 0 {
		return nil
	}
	if j.compress != "" {
		data = j.frame(data)
	}
	n, err := j.f.WriteAt(data, j.size)
	if err != nil {
		if n > 0 {
			j.f.Truncate(j.size)
		}
		return err
	}
	j.size += int64(len(data))
	return nil
}

// frame compresses data into one frame (a zstd frame or a gzip member):
// concatenated, they are one valid stream.
func (j *JSONL) frame(data []byte) []byte {
	if j.zenc != nil {
		j.zbuf = j.zenc.EncodeAll(data, j.zbuf[:0])
		return j.zbuf
	}
	var b bytes.Buffer
	b.Grow(len(data)/4 + 64)
	if j.gz == nil {
		j.gz, _ = gzip.NewWriterLevel(&b, gzip.BestSpeed) // a valid level: no error
	} else {
		j.gz.Reset(&b)
	}
	j.gz.Write(data) // a bytes.Buffer does not fail
	j.gz.Close()
	j.zbuf = b.Bytes()
	return j.zbuf
}
