package schema

// Reading an output file back, plain or compressed.

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zstd"
)

// Compressions the plugin writes (NCCL_HOOKS_COMPRESS), and the suffix each
// adds to the file name.
const (
	CompressNone = "none"
	CompressZstd = "zstd"
	CompressGzip = "gzip"
)

// Suffix is the file name suffix of a compression: ".zst", ".gz" or "".
func Suffix(compression string) string {
	switch compression {
	case CompressZstd:
		return ".zst"
	case CompressGzip:
		return ".gz"
	}
	return ""
}

// IsOutputName reports whether a file name is that of a JSON lines output:
// *.jsonl, *.jsonl.zst or *.jsonl.gz.
func IsOutputName(name string) bool {
	for _, s := range OutputSuffixes {
		if strings.HasSuffix(name, s) {
			return true
		}
	}
	return false
}

// OutputSuffixes end the names of JSON lines outputs: plain, zstd, gzip.
var OutputSuffixes = []string{".jsonl", ".jsonl.zst", ".jsonl.gz"}

// OutputGlobs are the glob patterns of outputs in dir (a pattern itself).
func OutputGlobs(dir string) []string {
	var g []string
	for _, s := range OutputSuffixes {
		g = append(g, filepath.Join(dir, "*"+s))
	}
	return g
}

var (
	zstdMagic = []byte{0x28, 0xb5, 0x2f, 0xfd}
	gzipMagic = []byte{0x1f, 0x8b}
)

// Reader reads an output file's lines, decompressing it when it starts with
// a zstd or gzip magic number (whatever its name). A compressed file that
// ends early (a job killed while writing a frame) reads up to its last
// complete line, and Truncated then reports true; a plain file is read as it
// is.
type Reader struct {
	f         *os.File
	src       io.Reader // decompressed bytes
	closeDec  func()
	plain     bool
	buf       []byte // decompressed, not yet returned: only whole lines leave a compressed file
	truncated bool
	err       error
	size      int64 // the buffer size Open chose: the file's size, 4 KiB to 64 KiB
}

// Open opens an output file for reading.
func Open(path string) (*Reader, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	// A buffer no larger than the file (at least 4 KiB, at most 64 KiB): a
	// small output does not pay for a 64 KiB zeroed allocation.
	size := int64(1 << 16)
	if st, err := f.Stat(); err == nil && st.Mode().IsRegular() {
		size = min(max(st.Size(), 4096), size)
	}
	r := &Reader{f: f, size: size}
	br := bufio.NewReaderSize(f, int(size))
	head, _ := br.Peek(4)
	switch {
	case bytes.HasPrefix(head, zstdMagic):
		d, err := zstd.NewReader(br, zstd.WithDecoderConcurrency(1), zstd.WithDecoderMaxWindow(1<<27))
		if err != nil {
			f.Close()
			return nil, fmt.Errorf("%s: zstd: %w", path, err)
		}
		r.src, r.closeDec = d, d.Close
	case bytes.HasPrefix(head, gzipMagic):
		z, err := gzip.NewReader(br)
		if err != nil {
			f.Close()
			return nil, fmt.Errorf("%s: gzip: %w", path, err)
		}
		r.src, r.closeDec = z, func() { z.Close() }
	default:
		r.src, r.plain = br, true
	}
	return r, nil
}

// Read implements io.Reader.
func (r *Reader) Read(p []byte) (int, error) {
	if r.plain {
		return r.src.Read(p)
	}
	for {
		// Hand out whole lines only; the tail waits for its newline.
		if i := bytes.LastIndexByte(r.buf, '\n'); i >= 0 || (r.err == io.EOF && len(r.buf) > 0) {
			end := i + 1
			if r.err == io.EOF {
				end = len(r.buf) // a clean end: whatever is left
			}
			n := copy(p, r.buf[:end])
			r.buf = r.buf[n:]
			return n, nil
		}
		if r.err != nil {
			if r.err != io.EOF {
				// The stream ended inside a frame: drop the partial line.
				r.truncated = len(r.buf) > 0 || r.truncated
				r.buf = nil
				return 0, io.EOF
			}
			return 0, io.EOF
		}
		// Decompress into buf's spare room (a chunk array here escaped to
		// the heap: 64 KiB allocated per call).
		if cap(r.buf)-len(r.buf) < 1<<15 {
			r.buf = append(make([]byte, 0, len(r.buf)+1<<16), r.buf...)
		}
		n, err := r.src.Read(r.buf[len(r.buf):cap(r.buf)])
		r.buf = r.buf[:len(r.buf)+n]
		if err != nil {
			if err != io.EOF {
				r.truncated = true
			}
			r.err = err
		}
	}
}

// Truncated reports whether a compressed file ended before its last frame
// did (the lines read are those before it).
func (r *Reader) Truncated() bool { return r.truncated }

// BufferSize is a read buffer size fit for the file: its size on disk,
// at least 4 KiB and at most 64 KiB.
func (r *Reader) BufferSize() int { return int(r.size) }

// Close closes the file.
func (r *Reader) Close() error {
	if r.closeDec != nil {
		r.closeDec()
	}
	return r.f.Close()
}

// ErrTruncated describes a compressed output that ends inside a frame.
var ErrTruncated = errors.New("the compressed output ends inside a frame (the job was killed while writing): read up to its last complete line")
