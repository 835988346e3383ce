package cpu_test

import (
	"encoding/binary"
	"sync/atomic"
	"testing"

	"github.com/ncclhooks/ncclhooks/internal/backend/cpu/internal/cdrive"
	"github.com/ncclhooks/ncclhooks/internal/config"
	"github.com/ncclhooks/ncclhooks/internal/hookgen"
	"github.com/ncclhooks/ncclhooks/internal/hookgen/hooktest"
)

// A hook with work positions writes each event into its communicator's
// block, in the region of its channel, at slot (2 x workCounter + phase) mod
// the region's slots, every word stamped with that position + 1; comm is
// devCtx's low bits; a channel id past NCCL's 64 lands in the region of its
// id mod 64, inside the block.
func TestWorkPositionsPlaceEachEvent(t *testing.T) {
	h := hooktest.Hook("all", append(eventFields, "comm")...)
	h.Buffer = config.Buffer{Slots: 64 * 16, Overflow: config.OverwriteOldest, Positions: config.PositionsWork}
	m, d := load(t, hooktest.Profile(h), 0)
	if !m.Work || m.Hooks[0].RegionSlots != 16 || m.Block.Bytes%hookgen.WorkBlockAlign != 0 {
		t.Fatalf("module: work %v, region slots %d, block %d bytes", m.Work, m.Hooks[0].RegionSlots, m.Block.Bytes)
	}
	info := m.Hooks[0]
	ctxs := make([]uintptr, 3)
	for comm := range ctxs {
		ctx, err := d.CommCtx(comm)
		if err != nil {
			t.Fatal(err)
		}
		if ctx%hookgen.WorkBlockAlign != uintptr(comm) {
			t.Fatalf("communicator %d: devCtx %#x does not carry its index in its low bits", comm, ctx)
		}
		ctxs[comm] = ctx
	}
	if d.Comms() != 3 {
		t.Fatalf("Comms() = %d, want 3", d.Comms())
	}
	type event struct {
		comm int
		ev   cdrive.Event
	}
	var sent []event
	for comm, ctx := range ctxs {
		for _, ch := range []uint8{0, 5, 63, 64 + 7} {
			for wc := uint64(1); wc <= 20; wc++ { // 40 positions: the region of 16 wraps
				for phase := uint8(0); phase < 2; phase++ {
					ev := cdrive.Event{Timestamp: wc<<20 | uint64(ch), WorkCounter: wc, FuncID: uint32(comm*100) + uint32(ch), ChannelID: ch, Phase: phase}
					cdrive.Call(d.Entry(), ctx, ev)
					sent = append(sent, event{comm, ev})
				}
			}
		}
	}
	// The last event written to each slot is what it holds.
	last := map[[3]uint64]event{}
	for _, e := range sent {
		pos := 2*e.ev.WorkCounter + uint64(e.ev.Phase)
		last[[3]uint64{uint64(e.comm), uint64(e.ev.ChannelID % 64), pos % 16}] = e
	}
	c := info.Layout.SlotWords()
	dec := info.Layout.NewSlotDecoder()
	for comm := range ctxs {
		regions := d.Regions(comm, 0)
		if len(regions) != 64*16*c {
			t.Fatalf("communicator %d: %d region words, want %d", comm, len(regions), 64*16*c)
		}
		for ch := range 64 {
			for j := range 16 {
				words := regions[(ch*16+j)*c:][:c]
				e, ok := last[[3]uint64{uint64(comm), uint64(ch), uint64(j)}]
				if !ok {
					for i := range words {
						if w := atomic.LoadUint64(&words[i]); w != 0 {
							t.Fatalf("communicator %d channel %d slot %d: word %d = %#x, never written", comm, ch, j, i, w)
						}
					}
					continue
				}
				pos := 2*e.ev.WorkCounter + uint64(e.ev.Phase)
				// The slot's chunks, decoded as the drain does (the work
				// counter from the position).
				payload := make([]byte, 4*c)
				for i := range words {
					w := atomic.LoadUint64(&words[i])
					if uint32(w>>32) != uint32(pos+1) {
						t.Fatalf("communicator %d channel %d slot %d: word %d stamped %d, want %d", comm, ch, j, i, w>>32, pos+1)
					}
					binary.LittleEndian.PutUint32(payload[4*i:], uint32(w))
				}
				vals := dec.Values(1)
				dec.DecodeBatch(payload, 4*c, []uint64{pos}, vals)
				got := unsigned(vals)
				want := append(eventValues(e.ev), uint64(comm))
				for i := range want {
					if got[i] != want[i] {
						t.Fatalf("communicator %d channel %d slot %d: record %v, want %v", comm, ch, j, got, want)
					}
				}
			}
		}
	}
	if d.Regions(3, 0) != nil || d.Regions(0, 1) != nil {
		t.Error("Regions of a communicator or hook that does not exist is not nil")
	}
}

// A hook whose aggregates the drain computes stores, at each event's work
// position, the two chunks hookgen.DrainRecord reads: the timestamp's low
// 53 bits, whatever its high bits, and the funcId key, an id past
// config.MaxFuncIDs in the overflow row, with nothing of one in the other.
func TestDrainRecordsHoldTimestampAndFuncKey(t *testing.T) {
	p, err := config.Parse("p.yaml", []byte(`version: 1
name: drained
hooks:
  - name: lat
    aggregate: [{name: d, kind: max, value: duration, by: [funcId]}]
    buffer: {slots: 1024, overflow: overwrite_oldest, positions: work}
`))
	if err != nil {
		t.Fatal(err)
	}
	m, d := load(t, p, 0)
	if c := m.Hooks[0].Layout.SlotWords(); c != hookgen.DrainChunks {
		t.Fatalf("drain records of %d words, want %d", c, hookgen.DrainChunks)
	}
	ctx, err := d.CommCtx(0)
	if err != nil {
		t.Fatal(err)
	}
	const n = 16 // region slots
	for i, tt := range []struct {
		ts     uint64
		funcID uint32
	}{{1, 0}, {1<<53 - 1, 1023}, {^uint64(0), 1024}, {0xfff0_0000_1234_5678, 5000}, {1 << 53, 7}} {
		ch := uint8(3 * i)
		ev := cdrive.Event{Timestamp: tt.ts, WorkCounter: uint64(i + 1), FuncID: tt.funcID, ChannelID: ch, Phase: uint8(i & 1)}
		cdrive.Call(d.Entry(), ctx, ev)
		pos := 2*ev.WorkCounter + uint64(ev.Phase)
		words := d.Regions(0, 0)[(int(ch)*n+int(pos%n))*2:][:2]
		w0, w1 := atomic.LoadUint64(&words[0]), atomic.LoadUint64(&words[1])
		if w0>>32 != pos+1 || w1>>32 != pos+1 {
			t.Fatalf("event %d: stamps %d, %d, want %d", i, w0>>32, w1>>32, pos+1)
		}
		ts, fn := hookgen.DrainRecord(uint32(w0), uint32(w1))
		if want := tt.ts & (1<<hookgen.DrainTimeBits - 1); ts != want {
			t.Errorf("event %d: timestamp %#x, want %#x", i, ts, want)
		}
		if want := min(tt.funcID, config.MaxFuncIDs); fn != want {
			t.Errorf("event %d: funcId key %d, want %d", i, fn, want)
		}
	}
}
