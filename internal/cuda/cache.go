package cuda

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Cache is the content-addressed on-disk compile cache: one file per key,
// <dir>/<key>.cubin, written atomically (temp file, fsync, rename), and a
// lock file <dir>/<key>.lock held exclusively while an entry is built, so
// that when 8 ranks of a node initialise at once one compiles and the others
// wait and reuse its result.
type Cache struct {
	dir string
}

// CacheResult is what Cache.Do did.
type CacheResult struct {
	Payload []byte
	Hit     bool // served from disk without building
	// Repaired says why an entry on disk was rejected, removed and rebuilt
	// (bad magic, foreign key, truncated, hash mismatch); "" when none was.
	// A bad entry is never returned.
	Repaired string
	// Failed says why the cache could not be used (a read-only or full
	// directory, an entry or lock that is a directory, an I/O error): the
	// payload was built without it. nil when the cache worked.
	Failed error
}

// DefaultCacheDir is $NCCL_HOOKS_CACHE_DIR, else $XDG_CACHE_HOME/ncclhooks,
// else ~/.cache/ncclhooks.
func DefaultCacheDir() string {
	if d := os.Getenv("NCCL_HOOKS_CACHE_DIR"); d != "" {
		return d
	}
	if d := os.Getenv("XDG_CACHE_HOME"); d != "" {
		return filepath.Join(d, "ncclhooks")
	}
	if h, err := os.UserHomeDir(); err == nil {
		return filepath.Join(h, ".cache", "ncclhooks")
	}
	return filepath.Join(os.TempDir(), "ncclhooks-"+strconv.Itoa(os.Getuid()))
}

// OpenCache opens (creating it 0700 if needed) the cache directory dir. It
// refuses a directory that another user owns or that is group- or
// world-writable: anyone who can write it could plant code that runs on the
// GPU inside every job.
func OpenCache(dir string) (*Cache, error) {
	if dir == "" {
		return nil, errors.New("cuda: compile cache: empty directory name")
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("cuda: compile cache %s: %w (set NCCL_HOOKS_CACHE_DIR to a writable private directory)", dir, err)
	}
	fi, err := os.Stat(dir)
	if err != nil {
		return nil, fmt.Errorf("cuda: compile cache: %w", err)
	}
	if !fi.IsDir() {
		return nil, fmt.Errorf("cuda: compile cache %s is not a directory (set NCCL_HOOKS_CACHE_DIR to a private directory)", dir)
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if ok && int(st.Uid) != os.Geteuid() {
		return nil, fmt.Errorf("cuda: compile cache %s is owned by uid %d, not by this user (uid %d): use a directory of your own (NCCL_HOOKS_CACHE_DIR)", dir, st.Uid, os.Geteuid())
	}
	if perm := fi.Mode().Perm(); perm&0o022 != 0 {
		return nil, fmt.Errorf("cuda: compile cache %s is group- or world-writable (mode %#o): run chmod 700 on it or set NCCL_HOOKS_CACHE_DIR to a private directory", dir, perm)
	}
	return &Cache{dir: dir}, nil
}

// Dir is the cache directory.
func (c *Cache) Dir() string { return c.dir }

// cacheLockWait bounds the wait for another process building the same
// entry: a build takes well under a second (NVRTC and the link, cold).
var cacheLockWait = 30 * time.Second

// Entry file layout (little-endian), followed by the payload.
const (
	entryMagic     = "NCHKCUB\x00"
	entryHeaderLen = 8 + 4 + 4 + 32 + 8 + 32 // magic, format, reserved, key, length, sha256(payload)
	maxEntryBytes  = 1 << 30
)

func (c *Cache) path(key, ext string) string { return filepath.Join(c.dir, key+ext) }

// Do returns the payload stored under key (a 64-digit hex key from
// CacheKey), building and storing it with build when it is absent or bad.
// Concurrent callers, in this process or others, build a key at most once.
// The cache never makes Do fail: when it cannot be read, locked or written,
// Do builds (or keeps what it built) without it and says why in
// CacheResult.Failed. Its only errors are build's.
func (c *Cache) Do(key string, build func() ([]byte, error)) (CacheResult, error) {
	res, err := c.do(key, build)
	if res.Failed != nil && res.Payload == nil && err == nil {
		res.Payload, err = build()
	}
	return res, err
}

func (c *Cache) do(key string, build func() ([]byte, error)) (res CacheResult, err error) {
	rawKey, kerr := hex.DecodeString(key)
	if kerr != nil || len(rawKey) != sha256.Size {
		res.Failed = fmt.Errorf("cuda: compile cache: malformed key %q", key)
		return res, nil
	}
	// Fast path without the lock: a complete entry is immutable.
	if p, _ := c.read(key, rawKey); p != nil {
		return CacheResult{Payload: p, Hit: true}, nil
	}

	lock, lerr := os.OpenFile(c.path(key, ".lock"), os.O_RDWR|os.O_CREATE|syscall.O_NOFOLLOW|syscall.O_CLOEXEC, 0o600)
	if lerr != nil {
		res.Failed = fmt.Errorf("cuda: compile cache: %w", lerr)
		return res, nil
	}
	defer lock.Close() // closing releases the lock
	// Another process builds this key (a rank of the same node): wait for
	// it, but not for a process that hangs or was stopped while holding it.
	deadline := time.Now().Add(cacheLockWait)
	for {
		lerr = unix.Flock(int(lock.Fd()), unix.LOCK_EX|unix.LOCK_NB)
		if (lerr != unix.EWOULDBLOCK && lerr != unix.EINTR) || time.Now().After(deadline) {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	if lerr == unix.EWOULDBLOCK {
		res.Failed = fmt.Errorf("cuda: compile cache: %s is still locked after %v (another process building this entry hangs)", lock.Name(), cacheLockWait)
		return res, nil
	}
	if lerr != nil {
		res.Failed = fmt.Errorf("cuda: compile cache: locking %s: %w", lock.Name(), lerr)
		return res, nil
	}

	// Whoever held the lock before us may have built it.
	p, bad := c.read(key, rawKey)
	if p != nil {
		return CacheResult{Payload: p, Hit: true}, nil
	}
	if bad != "" {
		res.Repaired = bad
		if rerr := os.Remove(c.path(key, ".cubin")); rerr != nil && !errors.Is(rerr, fs.ErrNotExist) {
			res.Failed = fmt.Errorf("cuda: compile cache: removing a bad entry (%s): %w", bad, rerr)
			return res, nil
		}
	}
	payload, err := build()
	if err != nil {
		return res, err
	}
	res.Payload = payload
	res.Failed = c.write(key, rawKey, payload)
	return res, nil
}

// read returns the entry's payload, or nil and why the entry on disk is bad
// ("" when there is none). Anything that cannot be read as an entry (a
// directory, an I/O error) is bad: Do removes it, or does without the cache.
func (c *Cache) read(key string, rawKey []byte) (payload []byte, bad string) {
	f, err := os.OpenFile(c.path(key, ".cubin"), os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_CLOEXEC|syscall.O_NONBLOCK, 0)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, ""
	}
	if err != nil {
		return nil, "unreadable: " + err.Error()
	}
	defer f.Close()
	if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() {
		return nil, "not a regular file"
	}
	b, err := io.ReadAll(io.LimitReader(f, maxEntryBytes+entryHeaderLen+1))
	if err != nil {
		return nil, "unreadable: " + err.Error()
	}
	p, why, _ := validateEntry(b, rawKey)
	return p, why
}

func validateEntry(b, rawKey []byte) ([]byte, string, error) {
	if len(b) < entryHeaderLen {
		return nil, "truncated header", nil
	}
	if string(b[:8]) != entryMagic {
		return nil, "bad magic (not a ncclhooks cache entry)", nil
	}
	if f := binary.LittleEndian.Uint32(b[8:]); f != cacheFormat {
		return nil, fmt.Sprintf("format %d, want %d", f, cacheFormat), nil
	}
	if !bytes.Equal(b[16:48], rawKey) {
		return nil, "foreign entry (its key differs from its file name)", nil
	}
	n := binary.LittleEndian.Uint64(b[48:])
	payload := b[entryHeaderLen:]
	if uint64(len(payload)) != n {
		return nil, fmt.Sprintf("length %d, header says %d (truncated or padded)", len(payload), n), nil
	}
	if sum := sha256.Sum256(payload); !bytes.Equal(sum[:], b[56:88]) {
		return nil, "payload hash mismatch (corrupt)", nil
	}
	return payload, "", nil
}

func encodeEntry(rawKey, payload []byte) []byte {
	b := make([]byte, entryHeaderLen, entryHeaderLen+len(payload))
	copy(b, entryMagic)
	binary.LittleEndian.PutUint32(b[8:], cacheFormat)
	copy(b[16:48], rawKey)
	binary.LittleEndian.PutUint64(b[48:], uint64(len(payload)))
	sum := sha256.Sum256(payload)
	copy(b[56:88], sum[:])
	return append(b, payload...)
}

// write stores the entry atomically: readers see no entry or a whole one.
func (c *Cache) write(key string, rawKey, payload []byte) error {
	tmp, err := os.CreateTemp(c.dir, key+".tmp-*")
	if err != nil {
		return fmt.Errorf("cuda: compile cache: %w", err)
	}
	ok := false
	defer func() {
		if !ok {
			tmp.Close()
			os.Remove(tmp.Name())
		}
	}()
	if _, err := tmp.Write(encodeEntry(rawKey, payload)); err != nil {
		return fmt.Errorf("cuda: compile cache: writing %s: %w", tmp.Name(), err)
	}
	if err := tmp.Sync(); err != nil {
		return fmt.Errorf("cuda: compile cache: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("cuda: compile cache: %w", err)
	}
	if err := os.Rename(tmp.Name(), c.path(key, ".cubin")); err != nil {
		return fmt.Errorf("cuda: compile cache: %w", err)
	}
	ok = true
	// Make the rename durable; failure here loses only a cache entry.
	if d, err := os.Open(c.dir); err == nil {
		d.Sync()
		d.Close()
	}
	return nil
}
