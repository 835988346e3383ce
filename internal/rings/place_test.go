package rings

import (
	"bytes"
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
	p, err := config.Parse("p.yaml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	m, err := hookgen.Generate(p)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// A work hook's slots leave out the chunks of its work-counter fields
// (hookgen.Layout.Implied): the cursor's copy puts each stored word's chunk
// where the layout places it and writes the work counter from the position,
// as Layout.Payload does, so the decoded record is the event's. A slot with
// one word of an earlier lap stops the run there; a later lap is counted
// overwritten.
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
	r.place = k.place
	// The event of position p; its payload as the device's hook packs it,
	// all chunks, to store the non-implied ones.
	const channel, comm = 5, 3
	const first = uint64(1) << 33 // the work counter's high chunk is not 0
	full := func(p uint64) []byte {
		wc := p >> 1
		vals := map[string]uint64{"timestamp": 1e18 + 7*p, "wc32": wc, "funcId": 40 + p%5, "workCounter": wc,
			"channelId": channel, "phase": p & 1, "comm": comm}
		b := make([]byte, 4*l.Chunks)
		for _, f := range l.Fields {
			for i := range f.Type.Bytes() {
				b[f.Offset+i] = byte(vals[f.Name] >> (8 * i))
			}
		}
		return b
	}
	write := func(p uint64, words int) {
		b := full(p)
		for i, ch := range l.Stored()[:words] {
			slots[int(p%n)*c+i] = uint64(uint32(p+1))<<32 | uint64(b[4*ch]) | uint64(b[4*ch+1])<<8 | uint64(b[4*ch+2])<<16 | uint64(b[4*ch+3])<<24
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
	dec := l.NewDecoder()
	for i, seq := range seqs {
		p := 2*first + uint64(i)
		rec := payloads[i*4*l.Chunks : (i+1)*4*l.Chunks]
		if seq != p || !bytes.Equal(rec, full(p)) {
			t.Fatalf("record %d: position %d, payload %x; want %d, %x", i, seq, rec, p, full(p))
		}
		words := slots[int(p%n)*c : int(p%n+1)*c]
		viaLayout := make([]byte, 4*l.Chunks)
		l.Payload(words, p, viaLayout)
		if !bytes.Equal(viaLayout, rec) {
			t.Fatalf("record %d: Layout.Payload %x, the drain's copy %x", i, viaLayout, rec)
		}
		vals := dec.Values(1)
		dec.Decode(rec, vals)
		if vals[1].U != uint64(uint32(p>>1)) || vals[3].U != p>>1 || vals[5].U != p&1 {
			t.Fatalf("record %d decoded %v: wc32 %d, workCounter %d, phase %d", i, vals, uint32(p>>1), p>>1, p&1)
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
