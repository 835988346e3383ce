package lifecycle_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ncclhooks/ncclhooks/internal/lifecycle"
)

// waitLog waits until some line the session logged contains want.
func (l *logs) wait(t *testing.T, want string) {
	t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for time.Now().Before(deadline) {
		l.mu.Lock()
		for _, s := range l.lines {
			if strings.Contains(s, want) {
				l.mu.Unlock()
				return
			}
		}
		l.mu.Unlock()
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatalf("no log line with %q:\n%s", want, strings.Join(l.lines, "\n"))
}

// TestReloadSession drives a session's live reload through its watcher
// while communicators come and go on other goroutines (under -race: the
// watcher, the reload and NCCL's entry points share the session): every
// communicator gets the switch's one entry and a slot of its own, before
// and after the reload; a profile that does not load, and one with work
// positions, leave the running one with one WARN each; a good one becomes
// epoch 1; the same file again is no reload.
func TestReloadSession(t *testing.T) {
	dir := t.TempDir()
	prof := filepath.Join(dir, "p.yaml")
	write := func(body string) {
		t.Helper()
		tmp := prof + ".tmp"
		if err := os.WriteFile(tmp, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, prof); err != nil {
			t.Fatal(err)
		}
	}
	write("version: 1\nname: p\nhooks:\n  - name: all\n    fields: [timestamp, phase]\n")
	l := &logs{}
	s := session(t, lifecycle.Knobs{Profile: prof, Backend: "cpu", CC: "cc", DumpDir: dir, CacheDir: "off", Reload: 5 * time.Millisecond}, l)
	a := s.Init(0xa, "comm-a", 1, 2, 0, 7)
	hook, ctxA := s.DeviceHook(0, a)
	if hook == 0 || ctxA == 0 {
		t.Fatalf("no hook: %s", strings.Join(l.lines, "\n"))
	}
	l.wait(t, "reload switch at")

	// Communicators come and go while the profile changes.
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var mu sync.Mutex
	var hooks []uintptr
	for g := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				id := s.Init(uint64(0x100*(g+1)+i), fmt.Sprintf("comm-%d-%d", g, i), 1, 2, 1, 7)
				h, c := s.DeviceHook(g, id)
				mu.Lock()
				hooks = append(hooks, h)
				mu.Unlock()
				if c == 0 || c == ctxA {
					t.Errorf("communicator %d-%d: context %#x", g, i, c)
				}
				s.Finalize(id)
				time.Sleep(time.Millisecond)
			}
		}()
	}
	write("version: 1\nname: p2\nhooks:\n  - name: all\n    fields: [timestamp, nosuch]\n")
	l.wait(t, `unknown field "nosuch"`)
	write("version: 1\nname: p3\nhooks:\n  - name: all\n    fields: [timestamp, phase]\n    buffer: {positions: work}\n")
	l.wait(t, "positions: work cannot be reloaded")
	write("version: 1\nname: p4\nhooks:\n  - name: two\n    fields: [timestamp, workCounter, phase]\n")
	l.wait(t, `reload: profile "p4"`)
	close(stop)
	wg.Wait()
	if r := s.Reload(time.Now(), time.Now()); !r.Unchanged || r.Swapped {
		t.Errorf("reload of the active profile: %+v, want unchanged", r)
	}
	b := s.Init(0xb, "comm-b", 1, 2, 1, 7)
	hookB, ctxB := s.DeviceHook(0, b)
	mu.Lock()
	for _, h := range append(hooks, hookB) {
		if h != hook {
			t.Errorf("a communicator got hook %#x, the first %#x: NCCL must keep one entry across reloads", h, hook)
		}
	}
	mu.Unlock()
	if ctxB == ctxA {
		t.Errorf("a later communicator got communicator a's slot")
	}
	s.Finalize(a)
	s.Finalize(b)
	if w := l.count("WARN"); w != 2 {
		t.Errorf("%d WARN lines, want 2 (the refused reloads):\n%s", w, strings.Join(l.lines, "\n"))
	}
	files, _ := filepath.Glob(filepath.Join(dir, "*.jsonl"))
	data, err := os.ReadFile(files[0])
	if err != nil {
		t.Fatal(err)
	}
	out := string(data)
	if n := strings.Count(out, `"type":"profile"`); n != 1 || !strings.Contains(out, `"type":"profile","epoch":1,"profile":"p4"`) {
		t.Errorf("%d profile lines, want one of epoch 1 naming p4", n)
	}
	after := out[strings.Index(out, `"type":"profile"`):]
	if !strings.Contains(after, `"type":"dump_stats","hook":"two"`) || strings.Contains(after, `"hook":"all"`) {
		t.Errorf("after the profile line, want the new hook's dump_stats and none of the old one's")
	}
}

// Context blocks and switch slots are reused across a live reload: before
// and after it, communicators made and finalized one after another beside
// one that lives throughout hold at most two blocks in the active module,
// and a finalized communicator's switch slot goes to the next one, never
// to a live one; the reload gives the live communicator a block in the new
// module, and a finalize after it releases that module's block.
func TestReloadReusesBlocksAndSlots(t *testing.T) {
	dir := t.TempDir()
	prof := filepath.Join(dir, "p.yaml")
	write := func(body string) {
		t.Helper()
		if err := os.WriteFile(prof+".tmp", []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(prof+".tmp", prof); err != nil {
			t.Fatal(err)
		}
	}
	write("version: 1\nname: p\nhooks:\n  - name: all\n    fields: [timestamp, phase, comm]\n")
	l := &logs{}
	s := session(t, lifecycle.Knobs{Profile: prof, Backend: "cpu", CC: "cc", DumpDir: dir, CacheDir: "off", Reload: time.Hour}, l)
	a := s.Init(0xa, "comm-a", 1, 2, 0, 7)
	_, ctxA := s.DeviceHook(0, a)
	churn := func(from int) {
		t.Helper()
		slots := map[uintptr]bool{}
		for i := range 40 {
			id := s.Init(uint64(from+i), fmt.Sprintf("comm-%d", from+i), 1, 2, 1, 7)
			_, c := s.DeviceHook(0, id)
			if c == 0 || c == ctxA {
				t.Fatalf("communicator %d: switch slot %#x (a's: %#x)", from+i, c, ctxA)
			}
			slots[c] = true
			if n := s.Blocks(0); n > 2 {
				t.Fatalf("communicator %d: %d blocks with 2 communicators alive", from+i, n)
			}
			s.Finalize(id)
		}
		if len(slots) != 1 {
			t.Errorf("%d switch slots for 40 communicators made one after another, want 1 reused", len(slots))
		}
	}
	churn(0x100)
	write("version: 1\nname: p2\nhooks:\n  - name: two\n    fields: [timestamp, workCounter, comm]\n")
	if r := s.Reload(time.Now(), time.Now()); !r.Swapped {
		t.Fatalf("reload: %+v\n%s", r, strings.Join(l.lines, "\n"))
	}
	if n := s.Blocks(0); n != 1 {
		t.Errorf("the new module has %d blocks, want 1 (communicator a's)", n)
	}
	churn(0x200)
	s.Finalize(a)
	if w := l.count("WARN"); w != 0 {
		t.Errorf("%d WARN lines:\n%s", w, strings.Join(l.lines, "\n"))
	}
}
