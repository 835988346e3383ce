package cuda

import (
	"bytes"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// A cache that cannot be used never fails a compile: Do builds without it
// and says why in Failed (the plugin logs that once and stays active).
func TestCacheFaultsCompileWithoutTheCache(t *testing.T) {
	payload := bytes.Repeat([]byte("cubin"), 16<<10) // 80 KiB
	for _, tc := range []struct {
		name   string
		fault  func(t *testing.T, c *Cache, key string)
		failed string // in Failed; "" when the fault is repaired instead
		repair string // in Repaired
	}{
		{"read-only directory", func(t *testing.T, c *Cache, _ string) { readOnly(t, c.dir) }, "read-only file system", ""},
		{"full directory", func(t *testing.T, _ *Cache, _ string) { fileSizeLimit(t, 4096) }, "file too large", ""},
		{"entry is a directory", func(t *testing.T, c *Cache, key string) {
			mkdir(t, filepath.Join(c.path(key, ".cubin"), "inside"))
		}, "removing a bad entry (not a regular file)", "not a regular file"},
		{"entry is an empty directory", func(t *testing.T, c *Cache, key string) { mkdir(t, c.path(key, ".cubin")) }, "", "not a regular file"},
		{"lock is a directory", func(t *testing.T, c *Cache, key string) { mkdir(t, c.path(key, ".lock")) }, "is a directory", ""},
		{"corrupt entry", func(t *testing.T, c *Cache, key string) {
			b := encodeEntry(mustHex(t, key), payload)
			b[len(b)/2] ^= 0xff
			if err := os.WriteFile(c.path(key, ".cubin"), b, 0o600); err != nil {
				t.Fatal(err)
			}
		}, "", "hash mismatch"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newTestCache(t)
			key := CacheKey(tc.name)
			tc.fault(t, c, key)
			builds := 0
			r, err := c.Do(key, func() ([]byte, error) { builds++; return payload, nil })
			if err != nil || !bytes.Equal(r.Payload, payload) || r.Hit || builds != 1 {
				t.Fatalf("Do = hit %v, %d bytes, %v, %d builds; want one build, its payload and no error", r.Hit, len(r.Payload), err, builds)
			}
			switch {
			case tc.failed == "" && r.Failed != nil:
				t.Errorf("Failed = %v, want the fault repaired", r.Failed)
			case tc.failed != "" && (r.Failed == nil || !strings.Contains(r.Failed.Error(), tc.failed)):
				t.Errorf("Failed = %v, want it to say %q", r.Failed, tc.failed)
			}
			if !strings.Contains(r.Repaired, tc.repair) {
				t.Errorf("Repaired = %q, want %q", r.Repaired, tc.repair)
			}
			// A build error is still the caller's error, fault or not.
			if _, err := c.Do(CacheKey(tc.name, "2"), func() ([]byte, error) { return nil, os.ErrInvalid }); err != os.ErrInvalid {
				t.Errorf("a failing build under the fault: %v", err)
			}
		})
	}
}

func mkdir(t *testing.T, dir string) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
}

// readOnly makes dir read-only for this process: a mode for a user, a
// read-only tmpfs mounted over it for root (whom modes do not stop).
func readOnly(t *testing.T, dir string) {
	t.Helper()
	if os.Geteuid() != 0 {
		if err := os.Chmod(dir, 0o500); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { os.Chmod(dir, 0o700) })
		return
	}
	if err := unix.Mount("tmpfs", dir, "tmpfs", unix.MS_RDONLY, "mode=0700"); err != nil {
		t.Skipf("root without the right to mount a read-only tmpfs (%v): a read-only directory cannot be made", err)
	}
	t.Cleanup(func() { unix.Unmount(dir, 0) })
}

// fileSizeLimit makes writes past n bytes fail with EFBIG, as on a full
// disk (SIGXFSZ ignored, as the Go runtime does without a Notify), until
// the test ends.
func fileSizeLimit(t *testing.T, n uint64) {
	t.Helper()
	signal.Ignore(syscall.SIGXFSZ)
	var old unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_FSIZE, &old); err != nil {
		t.Fatal(err)
	}
	lim := old
	lim.Cur = n
	if err := unix.Setrlimit(unix.RLIMIT_FSIZE, &lim); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Setrlimit(unix.RLIMIT_FSIZE, &old); signal.Reset(syscall.SIGXFSZ) })
}

// An entry whose lock another process holds and never releases (a rank
// that hangs or was stopped mid-build) is waited for at most
// cacheLockWait, then built without the cache.
func TestCacheLockHeldForever(t *testing.T) {
	defer func(w time.Duration) { cacheLockWait = w }(cacheLockWait)
	cacheLockWait = 200 * time.Millisecond
	c := newTestCache(t)
	key := CacheKey("held")
	// flock locks belong to an open file: another open of the lock file
	// conflicts as another process's would.
	holder, err := os.OpenFile(c.path(key, ".lock"), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Close()
	if err := unix.Flock(int(holder.Fd()), unix.LOCK_EX); err != nil {
		t.Fatal(err)
	}
	r, err := c.Do(key, func() ([]byte, error) { return []byte("built"), nil })
	if err != nil || string(r.Payload) != "built" || r.Failed == nil || !strings.Contains(r.Failed.Error(), "still locked") {
		t.Fatalf("Do = %q, failed %v, %v; want a build without the cache", r.Payload, r.Failed, err)
	}
}
