package cuda

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

func newTestCache(t *testing.T) *Cache {
	t.Helper()
	c, err := OpenCache(filepath.Join(t.TempDir(), "cache"))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestCacheBuildThenHit(t *testing.T) {
	c := newTestCache(t)
	key := CacheKey("src", "opts")
	builds := 0
	build := func() ([]byte, error) { builds++; return []byte("cubin-1"), nil }

	r, err := c.Do(key, build)
	if err != nil || r.Hit || string(r.Payload) != "cubin-1" {
		t.Fatalf("first Do = %+v, %v; want a build of cubin-1", r, err)
	}
	r, err = c.Do(key, build)
	if err != nil || !r.Hit || string(r.Payload) != "cubin-1" || builds != 1 {
		t.Fatalf("second Do = %+v, %v, builds %d; want a hit without a build", r, err, builds)
	}
	fi, err := os.Stat(c.path(key, ".cubin"))
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("entry mode = %v, %v; want 0600", fi.Mode(), err)
	}
}

func TestCacheBuildErrorIsNotStored(t *testing.T) {
	c := newTestCache(t)
	key := CacheKey("bad")
	if _, err := c.Do(key, func() ([]byte, error) { return nil, fmt.Errorf("boom") }); err == nil || err.Error() != "boom" {
		t.Fatalf("Do = %v, want boom", err)
	}
	r, err := c.Do(key, func() ([]byte, error) { return []byte("ok"), nil })
	if err != nil || r.Hit || string(r.Payload) != "ok" {
		t.Fatalf("Do after failed build = %+v, %v", r, err)
	}
}

func TestCacheKeyParts(t *testing.T) {
	// Part boundaries matter: ("ab","c") and ("a","bc") must differ.
	if CacheKey("ab", "c") == CacheKey("a", "bc") {
		t.Fatal("CacheKey ignores part boundaries")
	}
	if CacheKey("x") != CacheKey("x") || len(CacheKey("x")) != 64 {
		t.Fatal("CacheKey is not a stable 64-digit hex digest")
	}
}

func TestCacheRejectsBadEntries(t *testing.T) {
	good := encodeEntry(make([]byte, 32), []byte("payload"))
	tests := []struct {
		name   string
		entry  func(key string, raw []byte) []byte
		reason string
	}{
		{"garbage", func(string, []byte) []byte {
			return []byte("garbage that is long enough to hold a header......................................................")
		}, "bad magic"},
		{"empty", func(string, []byte) []byte { return nil }, "truncated header"},
		{"truncated payload", func(_ string, raw []byte) []byte { b := encodeEntry(raw, []byte("0123456789")); return b[:len(b)-3] }, "truncated"},
		{"flipped payload bit", func(_ string, raw []byte) []byte {
			b := encodeEntry(raw, []byte("0123456789"))
			b[len(b)-1] ^= 1
			return b
		}, "hash mismatch"},
		{"foreign key", func(string, []byte) []byte { return good }, "foreign"},
		{"other format", func(_ string, raw []byte) []byte { b := encodeEntry(raw, []byte("x")); b[8] = 99; return b }, "format 99"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := newTestCache(t)
			key := CacheKey(tc.name)
			raw := mustHex(t, key)
			if err := os.WriteFile(c.path(key, ".cubin"), tc.entry(key, raw), 0o600); err != nil {
				t.Fatal(err)
			}
			builds := 0
			r, err := c.Do(key, func() ([]byte, error) { builds++; return []byte("fresh"), nil })
			if err != nil {
				t.Fatal(err)
			}
			if r.Hit || builds != 1 || string(r.Payload) != "fresh" {
				t.Fatalf("Do = %+v, builds %d: a bad entry was used", r, builds)
			}
			if !strings.Contains(r.Repaired, tc.reason) {
				t.Fatalf("Repaired = %q, want it to mention %q", r.Repaired, tc.reason)
			}
			r, err = c.Do(key, func() ([]byte, error) { t.Fatal("rebuilt twice"); return nil, nil })
			if err != nil || !r.Hit || string(r.Payload) != "fresh" || r.Repaired != "" {
				t.Fatalf("Do after repair = %+v, %v; want a clean hit", r, err)
			}
		})
	}
}

func mustHex(t *testing.T, key string) []byte {
	t.Helper()
	var b []byte
	for i := 0; i < len(key); i += 2 {
		var v byte
		fmt.Sscanf(key[i:i+2], "%02x", &v)
		b = append(b, v)
	}
	return b
}

func TestCacheConcurrentGoroutines(t *testing.T) {
	c := newTestCache(t)
	key := CacheKey("goroutines")
	var builds atomic.Int32
	var wg sync.WaitGroup
	start := make(chan struct{})
	results := make([]CacheResult, 8)
	errs := make([]error, 8)
	for i := range results {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			results[i], errs[i] = c.Do(key, func() ([]byte, error) {
				builds.Add(1)
				time.Sleep(50 * time.Millisecond) // hold the lock while others arrive
				return []byte("built once"), nil
			})
		}()
	}
	close(start)
	wg.Wait()
	hits := 0
	for i, r := range results {
		if errs[i] != nil || string(r.Payload) != "built once" {
			t.Fatalf("caller %d: %+v, %v", i, r, errs[i])
		}
		if r.Hit {
			hits++
		}
	}
	if builds.Load() != 1 || hits != 7 {
		t.Fatalf("builds = %d, hits = %d; want exactly one build and 7 hits", builds.Load(), hits)
	}
}

// TestCacheConcurrentProcesses starts 8 copies of this test binary that hit
// the same key at once, as 8 ranks of a node do: exactly one builds.
func TestCacheConcurrentProcesses(t *testing.T) {
	if os.Getenv("NCCLHOOKS_CACHE_CHILD") != "" {
		cacheChild(t)
		return
	}
	if testing.Short() {
		t.Skip("starts 8 processes")
	}
	dir := filepath.Join(t.TempDir(), "cache")
	counter := filepath.Join(t.TempDir(), "builds")
	gate := filepath.Join(t.TempDir(), "go")
	var cmds []*exec.Cmd
	var outs []*bytes.Buffer
	for range 8 {
		cmd := exec.Command(os.Args[0], "-test.run=^TestCacheConcurrentProcesses$", "-test.v")
		cmd.Env = append(os.Environ(), "NCCLHOOKS_CACHE_CHILD=1", "CHILD_DIR="+dir, "CHILD_COUNTER="+counter, "CHILD_GATE="+gate)
		out := &bytes.Buffer{}
		cmd.Stdout, cmd.Stderr = out, out
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		cmds = append(cmds, cmd)
		outs = append(outs, out)
	}
	time.Sleep(200 * time.Millisecond) // let them reach the gate
	if err := os.WriteFile(gate, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	hits := 0
	for i, cmd := range cmds {
		if err := cmd.Wait(); err != nil {
			t.Fatalf("child %d: %v\n%s", i, err, outs[i])
		}
		out := outs[i].String()
		if !strings.Contains(out, "payload=shared-cubin") {
			t.Fatalf("child %d got the wrong payload:\n%s", i, out)
		}
		if strings.Contains(out, "hit=true") {
			hits++
		}
	}
	b, _ := os.ReadFile(counter)
	if len(b) != 1 || hits != 7 {
		t.Fatalf("builds = %d, hits = %d; want exactly one build and 7 hits", len(b), hits)
	}
}

func cacheChild(t *testing.T) {
	for {
		if _, err := os.Stat(os.Getenv("CHILD_GATE")); err == nil {
			break
		}
		time.Sleep(time.Millisecond)
	}
	c, err := OpenCache(os.Getenv("CHILD_DIR"))
	if err != nil {
		t.Fatal(err)
	}
	r, err := c.Do(CacheKey("processes"), func() ([]byte, error) {
		f, err := os.OpenFile(os.Getenv("CHILD_COUNTER"), os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o600)
		if err != nil {
			return nil, err
		}
		f.Write([]byte("x"))
		f.Close()
		time.Sleep(100 * time.Millisecond)
		return []byte("shared-cubin"), nil
	})
	if err != nil {
		t.Fatal(err)
	}
	fmt.Printf("hit=%v payload=%s\n", r.Hit, r.Payload)
}

func TestOpenCachePermissions(t *testing.T) {
	base := t.TempDir()

	fresh := filepath.Join(base, "a", "b")
	if _, err := OpenCache(fresh); err != nil {
		t.Fatal(err)
	}
	if fi, _ := os.Stat(fresh); fi.Mode().Perm()&0o077 != 0 {
		t.Fatalf("new cache dir mode %v, want no group/other access", fi.Mode().Perm())
	}

	for _, mode := range []os.FileMode{0o777, 0o770, 0o702} {
		d := filepath.Join(base, fmt.Sprintf("m%o", mode))
		os.Mkdir(d, 0o700)
		os.Chmod(d, mode)
		_, err := OpenCache(d)
		if err == nil || !strings.Contains(err.Error(), "writable") || !strings.Contains(err.Error(), "NCCL_HOOKS_CACHE_DIR") {
			t.Errorf("mode %o: err = %v, want a refusal naming the knob", mode, err)
		}
	}
	ro := filepath.Join(base, "ro")
	os.Mkdir(ro, 0o755) // readable by others is fine, writable is not
	if _, err := OpenCache(ro); err != nil {
		t.Errorf("mode 755: %v", err)
	}

	file := filepath.Join(base, "file")
	os.WriteFile(file, nil, 0o600)
	if _, err := OpenCache(file); err == nil {
		t.Error("a regular file was accepted as cache directory")
	}

	if os.Geteuid() != 0 {
		t.Log("not root: cannot create a directory owned by another user; ownership check not exercised")
		return
	}
	other := filepath.Join(base, "other")
	os.Mkdir(other, 0o700)
	if err := os.Chown(other, 65534, 65534); err != nil {
		t.Fatal(err)
	}
	if _, err := OpenCache(other); err == nil || !strings.Contains(err.Error(), "owned by uid 65534") {
		t.Errorf("dir of another user: err = %v, want a refusal", err)
	}
}

func TestDefaultCacheDir(t *testing.T) {
	t.Setenv("NCCL_HOOKS_CACHE_DIR", "/x/knob")
	t.Setenv("XDG_CACHE_HOME", "/x/xdg")
	if got := DefaultCacheDir(); got != "/x/knob" {
		t.Errorf("with the knob: %s", got)
	}
	t.Setenv("NCCL_HOOKS_CACHE_DIR", "")
	if got := DefaultCacheDir(); got != "/x/xdg/ncclhooks" {
		t.Errorf("with XDG_CACHE_HOME: %s", got)
	}
	t.Setenv("XDG_CACHE_HOME", "")
	t.Setenv("HOME", "/x/home")
	if got := DefaultCacheDir(); got != "/x/home/.cache/ncclhooks" {
		t.Errorf("with HOME: %s", got)
	}
}
