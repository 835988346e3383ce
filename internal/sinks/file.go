package sinks

// The JSON lines file: its name, creating it exclusively, and writing whole
// lines at its end.

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/ncclhooks/ncclhooks/internal/hookgen"
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
	name := FileName(header.Host, header.PID)
	var f *os.File
	var path string
	for n := 0; ; n++ {
		if n == maxOutputNames {
			return nil, fmt.Errorf("opening the JSON lines output: %s and %d numbered alternatives in %s all exist; clean up the dump directory", name, maxOutputNames-1, dir)
		}
		path = filepath.Join(dir, name)
		if n > 0 {
			path = filepath.Join(dir, strings.TrimSuffix(name, ".jsonl")+"."+strconv.Itoa(n)+".jsonl")
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
		last: map[lineKey]writtenStats{}, hooks: map[*hookgen.HookInfo]*recordKeys{}}
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
