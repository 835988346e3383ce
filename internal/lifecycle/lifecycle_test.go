package lifecycle_test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ncclhooks/ncclhooks/internal/lifecycle"
)

// logs collects what a Session logs through NCCL's logger.
type logs struct {
	mu    sync.Mutex
	lines []string
}

func (l *logs) log(level int, msg string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	tag := map[int]string{lifecycle.LogWarn: "WARN", lifecycle.LogInfo: "INFO"}[level]
	l.lines = append(l.lines, tag+" "+msg)
}

func (l *logs) count(tag string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, s := range l.lines {
		if strings.HasPrefix(s, tag+" ") {
			n++
		}
	}
	return n
}

func session(t *testing.T, k lifecycle.Knobs, l *logs) *lifecycle.Session {
	t.Helper()
	return lifecycle.New(lifecycle.Env{
		Log:            l.log,
		FuncName:       func(id uint32) string { return map[uint32]string{0: "SendRecv", 1: "AllReduce_Sum_f32_RING_LL"}[id] },
		Knobs:          func() (lifecycle.Knobs, error) { return k, nil },
		HarnessPresent: func() bool { return true },
	})
}

// Two communicators through the cpu backend: one module, one context each,
// one comm line each, and the outputs settled only when the last one goes.
func TestSessionCommunicators(t *testing.T) {
	dir := t.TempDir()
	// An hour between dumps: the only dump is the final one.
	prof := filepath.Join(dir, "p.yaml")
	if err := os.WriteFile(prof, []byte("version: 1\nname: p\noutput: {dump_interval: 1h}\nhooks:\n  - name: all\n    fields: [timestamp, phase]\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	l := &logs{}
	s := session(t, lifecycle.Knobs{Profile: prof, Backend: "cpu", CC: "cc", DumpDir: dir, CacheDir: "off"}, l)
	a := s.Init(0xa, "comm-a", 1, 2, 0, 7)
	b := s.Init(0xb, "comm-b", 1, 2, 1, 7)
	hookA, ctxA := s.DeviceHook(0, a)
	hookB, ctxB := s.DeviceHook(0, b)
	if hookA == 0 || hookA != hookB || ctxA == 0 || ctxB == 0 || ctxA == ctxB {
		t.Fatalf("hooks %#x %#x, contexts %#x %#x: want one hook, two distinct contexts\n%s", hookA, hookB, ctxA, ctxB, strings.Join(l.lines, "\n"))
	}
	files, _ := filepath.Glob(filepath.Join(dir, "*.jsonl"))
	if len(files) != 1 {
		t.Fatalf("output files %v", files)
	}
	types := func() map[string]int {
		b, err := os.ReadFile(files[0])
		if err != nil {
			t.Fatal(err)
		}
		n := map[string]int{}
		for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
			var v struct{ Type string }
			if err := json.Unmarshal([]byte(line), &v); err != nil {
				t.Fatalf("%q: %v", line, err)
			}
			n[v.Type]++
		}
		return n
	}
	s.Finalize(a)
	if n := types(); n["header"] != 1 || n["comm"] != 2 || n["dump_stats"] != 0 {
		t.Errorf("after the first finalize: %v; want a header, 2 comm lines and no final dump yet", n)
	}
	s.Finalize(b)
	if n := types(); n["dump_stats"] == 0 {
		t.Errorf("after the last finalize: %v; want the final dump", n)
	}
	if w := l.count("WARN"); w != 0 {
		t.Errorf("%d WARN lines:\n%s", w, strings.Join(l.lines, "\n"))
	}
}

// Without a profile the session is inactive: one WARN, no hook for anyone.
func TestSessionInactiveWithoutProfile(t *testing.T) {
	l := &logs{}
	s := session(t, lifecycle.Knobs{Backend: "cpu"}, l)
	for i := range 3 {
		id := s.Init(uint64(i), "c", 1, 1, 0, 7)
		if h, c := s.DeviceHook(0, id); h != 0 || c != 0 {
			t.Fatalf("inactive session handed out hook %#x ctx %#x", h, c)
		}
		s.Finalize(id)
	}
	if w := l.count("WARN"); w != 1 || !strings.Contains(l.lines[0], "NCCL_HOOKS_PROFILE is not set") {
		t.Errorf("want exactly one WARN naming NCCL_HOOKS_PROFILE:\n%s", strings.Join(l.lines, "\n"))
	}
}

// With work positions, a finalized communicator has its regions retired
// from the drain (one INFO line says so) and then its block reused; the last
// finalize retires its own too, and settles the outputs as ever.
func TestSessionRetiresFinalizedCommunicators(t *testing.T) {
	dir := t.TempDir()
	prof := filepath.Join(dir, "p.yaml")
	if err := os.WriteFile(prof, []byte("version: 1\nname: p\noutput: {dump_interval: 1h}\nhooks:\n  - name: all\n    fields: [timestamp, phase]\n    buffer: {slots: 1024, overflow: overwrite_oldest, positions: work}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	l := &logs{}
	s := session(t, lifecycle.Knobs{Profile: prof, Backend: "cpu", CC: "cc", DumpDir: dir, CacheDir: "off"}, l)
	a := s.Init(0xa, "comm-a", 1, 2, 0, 7)
	b := s.Init(0xb, "comm-b", 1, 2, 1, 7)
	if hook, _ := s.DeviceHook(0, a); hook == 0 {
		t.Fatalf("no hook:\n%s", strings.Join(l.lines, "\n"))
	}
	s.DeviceHook(0, b)
	s.Finalize(b)
	retired := func() int {
		l.mu.Lock()
		defer l.mu.Unlock()
		n := 0
		for _, line := range l.lines {
			if strings.Contains(line, "finalized (device 0, comm index ") && strings.Contains(line, "its regions are settled at the drain's next pass, polled no more") {
				n++
			}
		}
		return n
	}
	if retired() != 1 {
		t.Errorf("no INFO line retiring communicator 1:\n%s", strings.Join(l.lines, "\n"))
	}
	if n, last, _ := s.Retired(0); n != 1 || last != 1 {
		t.Errorf("the drain retired %d blocks of device 0, the last %d, want 1, block 1", n, last)
	}
	s.Finalize(a) // the last: retires its block, settles
	if retired() != 2 || l.count("WARN") != 0 {
		t.Errorf("after the last finalize:\n%s", strings.Join(l.lines, "\n"))
	}
}

// NCCL_HOOKS_SHARED_CTX hands every communicator block 0, and a finalize
// never releases it (the others still call it): one block however many
// communicators come and go. With work positions it is ignored (one WARN),
// and finalized communicators' blocks are reused as without it.
func TestSharedCtxBlockNeverReleased(t *testing.T) {
	for _, tc := range []struct {
		name, buffer string
		ctxs, warns  int
	}{
		{"shared", "{slots: 1024}", 1, 0},
		{"work", "{slots: 1024, overflow: overwrite_oldest, positions: work}", 2, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			prof := filepath.Join(dir, "p.yaml")
			if err := os.WriteFile(prof, []byte("version: 1\nname: p\noutput: {dump_interval: 1h}\nhooks:\n  - name: all\n    fields: [timestamp, phase]\n    buffer: "+tc.buffer+"\n"), 0o600); err != nil {
				t.Fatal(err)
			}
			l := &logs{}
			s := session(t, lifecycle.Knobs{Profile: prof, Backend: "cpu", CC: "cc", DumpDir: dir, CacheDir: "off", SharedCtx: true}, l)
			a := s.Init(0xa, "comm-a", 1, 2, 0, 7)
			_, ctxA := s.DeviceHook(0, a)
			ctxs := map[uintptr]bool{ctxA: true}
			for i := range 20 {
				id := s.Init(uint64(0x100+i), fmt.Sprintf("comm-%d", i), 1, 2, 1, 7)
				_, c := s.DeviceHook(0, id)
				ctxs[c] = true
				if s.Blocks(0) > 2 {
					t.Fatalf("communicator %d: %d blocks, 2 communicators alive", i, s.Blocks(0))
				}
				s.Finalize(id)
				// The work module's block is released at the drain's
				// next pass: wait for it, so the next communicator
				// gets it back.
				for deadline := time.Now().Add(10 * time.Second); tc.ctxs > 1 && s.FreeBlocks(0) == 0; time.Sleep(time.Millisecond) {
					if time.Now().After(deadline) {
						t.Fatalf("communicator %d's block not released", i)
					}
				}
			}
			s.Finalize(a)
			if len(ctxs) > tc.ctxs || tc.ctxs == 1 && s.Blocks(0) != 1 {
				t.Errorf("%d distinct contexts, %d blocks: want at most %d", len(ctxs), s.Blocks(0), tc.ctxs)
			}
			if w := l.count("WARN"); w != tc.warns {
				t.Errorf("%d WARN lines, want %d:\n%s", w, tc.warns, strings.Join(l.lines, "\n"))
			}
		})
	}
}
