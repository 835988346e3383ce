package rings

import (
	"encoding/binary"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ncclhooks/ncclhooks/internal/config"
	"github.com/ncclhooks/ncclhooks/internal/hookgen"
)

// Work positions with reused blocks (backend.Device.NewComm): a finalized
// communicator's block is released only once every hook's regions in it
// are settled, its cursors are made again on the reset block, and the
// records of the communicator that takes it next are delivered with that
// communicator's index in their comm field, though the device writes the
// slot (devCtx's low bits). Over many cycles the device makes no more
// blocks than communicators live at once, and the counts stay exact.
func TestWorkBlocksReusedAfterSettle(t *testing.T) {
	p, err := config.Parse("p.yaml", []byte(`version: 1
name: p
output: {dump_interval: 1h}
hooks:
  - name: a
    fields: [workCounter, phase, {field: comm, type: u16}]
    buffer: {slots: 1024, overflow: overwrite_oldest, positions: work}
  - name: b
    fields: [workCounter, {field: comm, type: u32}, channelId]
    buffer: {slots: 1024, overflow: overwrite_oldest, positions: work}
`))
	if err != nil {
		t.Fatal(err)
	}
	m, err := hookgen.Generate(p)
	if err != nil {
		t.Fatal(err)
	}
	dev := newFakeDevice(0, m) // no block: NewComm makes them
	sink := newRecordingSink(t)
	d := NewDrainer(Options{Sink: sink, FuncName: testFuncName, PollInterval: 100 * time.Microsecond, DumpInterval: 2 * time.Millisecond})
	if err := d.Add(dev, m); err != nil {
		t.Fatal(err)
	}
	const cycles, alive, items = 40, 3, 5
	index := 0
	want := map[int]int{} // records per communicator index, per hook
	for cy := range cycles {
		var slots []int
		for range alive {
			slot, _, err := dev.NewComm(index + 300) // indexes unlike any slot
			if err != nil {
				t.Fatal(err)
			}
			slots = append(slots, slot)
			for h := range m.Hooks {
				writeWorkRecords(t, m, h, dev.Regions(slot, h), slot, items)
			}
			want[index+300] = items * 2
			index++
		}
		for _, slot := range slots {
			d.Retire(0, slot)
		}
		if cy%2 == 1 {
			d.Flush(false) // some cycles settle at a pass, the others while later ones run
		}
		waitFor(t, func() bool { return dev.CommIndex(slots[0]) < 0 && dev.CommIndex(slots[alive-1]) < 0 })
	}
	d.Close()
	if n := dev.Comms(); n > alive {
		t.Errorf("%d blocks made for %d communicators, %d alive at once", n, index, alive)
	}
	if dev.releases != cycles*alive {
		t.Errorf("%d blocks released, want %d", dev.releases, cycles*alive)
	}
	stats := checkDumps(t, sink)
	for h, info := range m.Hooks {
		st := stats[key{info.Name, 0}]
		if st.Matched != uint64(index*items*2) || st.Records != st.Matched || st.Dropped != 0 {
			t.Errorf("hook %s: %+v, want %d records", info.Name, st, index*items*2)
		}
		got := map[int]int{}
		for _, r := range sink.records[key{info.Name, 0}] {
			for i, f := range info.Layout.Fields {
				if f.Source == "comm" {
					got[int(r.Values[i].U)]++
				}
			}
		}
		for c, n := range want {
			if got[c] != n {
				t.Fatalf("hook %d: communicator %d: %d records, want %d (by comm field: %v)", h, c, got[c], n, got)
			}
		}
	}
}

// writeWorkRecords writes items work items (START and STOP) on channel 0
// of a Work hook's regions as the device does: positions 2 x workCounter +
// phase from workCounter 1, every stored chunk stamped, the comm field
// holding the slot.
func writeWorkRecords(t *testing.T, m *hookgen.Module, h int, regions []uint64, slot, items int) {
	t.Helper()
	l := &m.Hooks[h].Layout
	stored := l.Stored()
	n := uint64(m.Hooks[h].RegionSlots)
	for wc := uint64(1); wc <= uint64(items); wc++ {
		for phase := uint64(0); phase < 2; phase++ {
			pos := 2*wc + phase
			payload := make([]byte, 4*l.Chunks)
			for _, f := range l.Fields {
				var v uint64
				switch f.Source {
				case "workCounter":
					v = wc
				case "phase":
					v = phase
				case "comm":
					v = uint64(slot)
				}
				var b [8]byte
				binary.LittleEndian.PutUint64(b[:], v)
				copy(payload[f.Offset:f.Offset+f.Type.Bytes()], b[:])
			}
			base := int(pos%n) * len(stored)
			for i, c := range stored {
				w := uint64(uint32(pos+1))<<32 | uint64(binary.LittleEndian.Uint32(payload[4*c:]))
				atomic.StoreUint64(&regions[base+i], w)
			}
		}
	}
}

func waitFor(t *testing.T, ok func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !ok(); time.Sleep(200 * time.Microsecond) {
		if time.Now().After(deadline) {
			t.Fatal("timed out")
		}
	}
}

// A process that makes and finalizes communicators one after another keeps
// no entry per finalized communicator: the work consumers' retirement
// queues hold those not taken yet, whatever the count (before, a list of
// every communicator ever retired: 8 bytes each, for good).
func TestRetirementsBoundedOverManyCommunicators(t *testing.T) {
	p, err := config.Parse("p.yaml", []byte(`version: 1
name: p
output: {dump_interval: 1h}
hooks:
  - name: a
    fields: [workCounter, phase]
    buffer: {slots: 1024, overflow: overwrite_oldest, positions: work}
  - name: b
    fields: [workCounter, channelId]
    buffer: {slots: 1024, overflow: overwrite_oldest, positions: work}
`))
	if err != nil {
		t.Fatal(err)
	}
	m, err := hookgen.Generate(p)
	if err != nil {
		t.Fatal(err)
	}
	dev := newFakeDevice(0, m)
	d := NewDrainer(Options{Sink: newRecordingSink(t), FuncName: testFuncName, PollInterval: 100 * time.Microsecond, DumpInterval: time.Hour})
	if err := d.Add(dev, m); err != nil {
		t.Fatal(err)
	}
	const comms, alive = 1000, 2
	maxQueued := 0
	for i := 0; i < comms; i += alive {
		var slots []int
		for range alive {
			slot, _, err := dev.NewComm(i)
			if err != nil {
				t.Fatal(err)
			}
			slots = append(slots, slot)
		}
		for _, slot := range slots {
			d.Retire(0, slot)
		}
		waitFor(t, func() bool { return dev.CommIndex(slots[0]) < 0 && dev.CommIndex(slots[alive-1]) < 0 })
		_, _, q := d.Retired(0)
		maxQueued = max(maxQueued, q)
	}
	total, _, queued := d.Retired(0)
	d.Close()
	if total != comms {
		t.Errorf("%d communicators retired, want %d", total, comms)
	}
	// 2 consumers, each queue at most a few cycles' communicators (its
	// capacity, what stays allocated).
	if maxQueued > 2*8*alive || queued > 2*8*alive {
		t.Errorf("the retirement queues held up to %d entries (%d at the end) over %d communicators, %d alive at once: want a bound, not one per communicator", maxQueued, queued, comms, alive)
	}
	if n := dev.Comms(); n > alive {
		t.Errorf("%d blocks made for %d communicators", n, comms)
	}
}
