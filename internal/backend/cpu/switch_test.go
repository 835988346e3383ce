package cpu_test

import (
	"sync"
	"testing"

	"github.com/ncclhooks/ncclhooks/internal/backend/cpu"
	"github.com/ncclhooks/ncclhooks/internal/backend/cpu/internal/cdrive"
	"github.com/ncclhooks/ncclhooks/internal/hookgen/hooktest"
)

// TestSwitchWhileCalled: 8 C threads call the switch with one slot while
// the slot is switched back and forth between two loaded modules. Each call
// runs wholly in one module: the two modules' heads add up to every event,
// and every position of each holds a complete record of its own.
func TestSwitchWhileCalled(t *testing.T) {
	const threads, perThread = 8, 4000
	h := hooktest.Hook("all", eventFields...)
	h.Buffer.Slots = 1 << 16
	ma, a := load(t, hooktest.Profile(h), 0)
	mb, b := load(t, hooktest.Profile(h), 1)
	sw := cpu.Switch{}
	entry, _ := sw.Entry(0)
	sl, err := sw.NewSlot(0)
	if err != nil {
		t.Fatal(err)
	}
	cdrive.Call(entry, sl, cdrive.Event{}) // an empty slot calls nothing
	if ha, hb := readCtl(t, ma, a)[0], readCtl(t, mb, b)[0]; ha != 0 || hb != 0 {
		t.Fatalf("heads %d, %d after a call through an empty slot", ha, hb)
	}
	if err := sw.Set(0, sl, a.Entry(), a.Ctx()); err != nil {
		t.Fatal(err)
	}
	streams := make([][]cdrive.Event, threads)
	for i := range streams {
		for wc := range perThread / 2 {
			for phase := uint8(0); phase < 2; phase++ {
				streams[i] = append(streams[i], cdrive.Event{Timestamp: uint64(i<<32 | wc), WorkCounter: uint64(wc + 1), ChannelID: uint8(i), Phase: phase})
			}
		}
	}
	// A round: the streams run while a goroutine switches the slot between
	// the modules. The 8 C threads make their 32000 calls in about a
	// millisecond, and a loaded machine can keep the switcher off a core
	// that long (seen in CI: 13983 switches, every call in a, and in 3 of 30
	// runs here): the calls wait for the switcher's first switch, and a
	// second round runs if one module still got none. Two rounds fit the buffers (65536 slots).
	const rounds = 2
	switches, round := 0, 0
	var ha, hb uint64
	for round < rounds && (ha == 0 || hb == 0) {
		round++
		stop, started := make(chan struct{}), make(chan struct{})
		var wg sync.WaitGroup
		wg.Add(1)
		go func() {
			defer wg.Done()
			for first := true; ; first = false {
				select {
				case <-stop:
					return
				default:
				}
				d := a
				if switches%2 == 0 {
					d = b
				}
				if err := sw.Set(0, sl, d.Entry(), d.Ctx()); err != nil {
					t.Error(err)
					return
				}
				switches++
				if first {
					close(started)
				}
			}
		}()
		<-started // the switcher is on a core as the calls begin
		cdrive.Run(entry, sl, streams)
		close(stop)
		wg.Wait()
		ha, hb = readCtl(t, ma, a)[0], readCtl(t, mb, b)[0]
	}
	if ha+hb != uint64(round*threads*perThread) || ha == 0 || hb == 0 {
		t.Fatalf("heads %d + %d after %d rounds, want %d in all, some in each (%d switches)", ha, hb, round, round*threads*perThread, switches)
	}
	for p := uint64(0); p < ha; p++ {
		if _, stamps := slot(a, ma.Hooks[0], p); !complete(stamps, p) {
			t.Fatalf("module a position %d: stamps %v, not a complete record of its own", p, stamps)
		}
	}
	for p := uint64(0); p < hb; p++ {
		if _, stamps := slot(b, mb.Hooks[0], p); !complete(stamps, p) {
			t.Fatalf("module b position %d: stamps %v, not a complete record of its own", p, stamps)
		}
	}
	t.Logf("%d switches during %d rounds of %d calls: %d in a, %d in b", switches, round, threads*perThread, ha, hb)
}

func complete(stamps []uint32, p uint64) bool {
	for _, s := range stamps {
		if s != uint32(p+1) {
			return false
		}
	}
	return len(stamps) > 0
}
