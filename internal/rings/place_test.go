package rings

import (
	"encoding/binary"
	"fmt"
	"testing"

	"github.com/ncclhooks/ncclhooks/internal/config"
	"github.com/ncclhooks/ncclhooks/internal/hookgen"
)

// placedModule is every-event's hook with a u32 work counter in the middle
// and another u64 one: the slots hold the other chunks.
func placedModule(t *testing.T, regionSlots int) *hookgen.Module {
	t.Helper()
	src := fmt.Sprintf(`version: 1
name: placed
hooks:
  - name: all
    fields: [timestamp, {field: workCounter, as: wc32, type: u32}, funcId, workCounter, channelId, phase, {field: comm, type: u8}]
    buffer: {slots: %d, overflow: overwrite_oldest, positions: work}
`, config.RegionChannels*regionSlots)
	return generateProfile(t, src)
}

// A work hook's slots leave out the chunks of its work-counter fields
// (hookgen.Layout.Implied): the cursor copies a slot's stored chunks into
// the ring, and the slot decoder (hookgen.Layout.NewSlotDecoder, as deliver
// uses it) takes the work counter from the record's position, so the
// decoded record is the event, as the hook's whole payload decodes. A slot with one word of an earlier lap stops the run
// there; a later lap is counted overwritten.
func TestPlacedRecordsTakeTheWorkCounterFromThePosition(t *testing.T) {
	const n = 16
	m := placedModule(t, n)
	info := m.Hooks[0]
	l := &info.Layout
	if got, want := l.Implied, []hookgen.ImpliedChunk{{Chunk: 2}, {Chunk: 4}, {Chunk: 5, Shift: 32}}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("implied chunks %v, want %v (layout %+v)", got, want, l.Fields)
	}
	if l.SlotWords() != l.Chunks-3 || fmt.Sprint(l.Stored()) != "[0 1 3 6]" {
		t.Fatalf("%d slot words of %d chunks, stored %v", l.SlotWords(), l.Chunks, l.Stored())
	}
	k, err := newConsumer(info, 0, nil, nil, 0, 4*n)
	if err != nil {
		t.Fatal(err)
	}
	c := l.SlotWords()
	slots := make([]uint64, n*c)
	r := newRegionCursor(slots, n, c)
	// The event of position p, and its whole payload as the hook packs
	// it, of which the slot holds the stored chunks.
	const channel, comm = 5, 3
	const first = uint64(1) << 33 // the work counter's high chunk is not 0
	event := func(p uint64) map[string]uint64 {
		wc := p >> 1
		return map[string]uint64{"timestamp": 1e18 + 7*p, "wc32": uint64(uint32(wc)), "funcId": 40 + p%5, "workCounter": wc,
			"channelId": channel, "phase": p & 1, "comm": comm}
	}
	full := func(p uint64) []byte {
		b := make([]byte, 4*l.Chunks)
		for _, f := range l.Fields {
			for i := range f.Type.Bytes() {
				b[f.Offset+i] = byte(event(p)[f.Name] >> (8 * i))
			}
		}
		return b
	}
	write := func(p uint64, words int) {
		b := full(p)
		for i, ch := range l.Stored()[:words] {
			slots[int(p%n)*c+i] = uint64(uint32(p+1))<<32 | uint64(binary.LittleEndian.Uint32(b[4*ch:]))
		}
	}
	// The cursor starts at the true position here, as a region's does at
	// NCCL's first work item: the stamps carry only its low 32 bits.
	r.pos = 2 * first
	for p := r.pos; p < r.pos+10; p++ {
		write(p, c)
	}
	write(r.pos+10, c-1) // the last word still an earlier lap's
	if got := r.take(k.ring); got != 10 {
		t.Fatalf("took %d positions, want 10 (the 11th is not complete)", got)
	}
	seqs, payloads := k.ring.Peek(10)
	if k.ring.stride != 4*c {
		t.Fatalf("ring records of %d bytes, want the slot's %d", k.ring.stride, 4*c)
	}
	dec := l.NewSlotDecoder()
	vals := dec.Values(len(seqs))
	dec.DecodeBatch(payloads, k.ring.stride, seqs, vals)
	for i, seq := range seqs {
		p := 2*first + uint64(i)
		if seq != p {
			t.Fatalf("record %d: position %d, want %d", i, seq, p)
		}
		wantVals := l.Decode(full(p), nil)
		for f, fl := range l.Fields {
			got := vals[i*len(l.Fields)+f]
			if got != wantVals[f] || got.U != event(p)[fl.Name] {
				t.Fatalf("record %d field %s: decoded %+v from the ring, %+v from the whole payload, event %d", i, fl.Name, got, wantVals[f], event(p)[fl.Name])
			}
		}
	}
	k.ring.Release(len(seqs))
	// A later lap in the 11th position's slot: overwritten, and the run
	// of the next lap's positions is taken.
	for p := 2*first + 10 + n; p < 2*first+12+n; p++ {
		write(p, c)
	}
	r.take(k.ring)
	if r.overwritten == 0 || r.records != 10 {
		t.Fatalf("after a later lap: %d records, %d overwritten", r.records, r.overwritten)
	}
}

// The slot decoder gives a signed work counter its sign as the payload's
// decoder does (an i32 work counter past 2^31, and an i64 one).
func TestSlotDecoderSignedWorkCounter(t *testing.T) {
	l := hookgen.Layout{Fields: []hookgen.FieldLayout{
		{Name: "a", Source: "workCounter", Type: config.I32, Offset: 0},
		{Name: "b", Source: "workCounter", Type: config.I64, Offset: 4},
		{Name: "ts", Source: "timestamp", Type: config.U64, Offset: 12},
	}, Bytes: 20, Chunks: 5, Implied: []hookgen.ImpliedChunk{{Chunk: 0}, {Chunk: 1}, {Chunk: 2, Shift: 32}}}
	wc := uint64(1)<<62 | 1<<31 | 5
	seqs := []uint64{2*wc + 1}
	payload := make([]byte, 8)
	binary.LittleEndian.PutUint64(payload, 77)
	dec := l.NewSlotDecoder()
	vals := dec.Values(1)
	dec.DecodeBatch(payload, 8, seqs, vals)
	whole := make([]byte, 20) // the record whole, as a payload decoder reads it
	binary.LittleEndian.PutUint32(whole[0:], uint32(wc))
	binary.LittleEndian.PutUint64(whole[4:], wc)
	binary.LittleEndian.PutUint64(whole[12:], 77)
	want := l.Decode(whole, nil)
	if fmt.Sprint(vals) != fmt.Sprint(want) || vals[0].I != int64(int32(uint32(wc))) || vals[1].I != int64(wc) || vals[2].U != 77 {
		t.Fatalf("slot decoder %+v, payload decoder %+v", vals, want)
	}
}
