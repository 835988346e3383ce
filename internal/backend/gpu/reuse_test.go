package gpu

import (
	"bytes"
	"encoding/binary"
	"testing"

	"github.com/ncclhooks/ncclhooks/internal/config"
	"github.com/ncclhooks/ncclhooks/internal/hookgen"
)

// A finalized communicator's context block is reused (ReleaseComm, then
// NewComm), on a fake driver: the GPU path's copies are only checked here,
// not on a GPU. Released, its cells are added into the device's running
// totals, so ReadAgg's sums stay what they were, and the block is what a
// new block holds: zeroed (pairing table, cells), its header and function-id
// sets written again; the next communicator takes the lowest free slot,
// its header names that communicator's index, and the device makes no more
// blocks than communicators live at once.
func TestBlocksReusedOnAFakeDriver(t *testing.T) {
	m, fd, d := loadOnFakeDriver(t, "reuse.yaml", `version: 1
name: reuse
hooks:
  - name: lat
    when: phase == STOP && paired && func startsWith "AllReduce"
    aggregate:
      - {name: n, kind: count, by: [comm]}
      - {name: d, kind: sum, value: duration}
`)
	sets := m.FuncSetBits([]string{"AllReduce_Sum_f32", "Broadcast"})
	if err := d.WriteFuncSets(sets); err != nil {
		t.Fatal(err)
	}
	B := m.Block.Bytes
	block := func(slot int) []byte {
		d.blockMu.Lock()
		p := d.blocks[slot] // not CommCtx, which would claim a free slot
		d.blockMu.Unlock()
		b, err := fd.at(p, B)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	fresh := bytes.Clone(block(0)) // made at load: slot 0, header naming 0
	n, sum := m.Aggs[0], m.Aggs[1]
	bump := func(slot int, count, dur uint64) { // what the hook adds into a block's cells
		c := block(slot)[m.Block.Agg:]
		add := func(word int, v uint64) {
			binary.LittleEndian.PutUint64(c[8*word:], binary.LittleEndian.Uint64(c[8*word:])+v)
		}
		add(n.DevOffset, count)
		add(sum.DevOffset, count)
		add(sum.DevOffset+1, dur)
		block(slot)[m.Block.Pairs+3] = 0xee // a pairing entry left behind
	}
	read := func() (byComm []uint64, count, total uint64) {
		dst := make([]uint64, m.AggWords)
		if err := d.ReadAgg(dst); err != nil {
			t.Fatal(err)
		}
		for k := range config.MaxCommKeys + 1 {
			byComm = append(byComm, dst[n.Offset+k*n.RowWords])
		}
		return byComm, dst[sum.Offset], dst[sum.Offset+1]
	}

	index := 0
	newComm := func(wantSlot int) {
		t.Helper()
		slot, ctx, err := d.NewComm(index)
		if err != nil || slot != wantSlot {
			t.Fatalf("NewComm(%d) = slot %d, %v; want slot %d", index, slot, err, wantSlot)
		}
		if c, _ := d.CommCtx(slot); c != ctx { // in use: CommCtx claims nothing
			t.Fatalf("slot %d: NewComm's ctx %#x, CommCtx's %#x", slot, ctx, c)
		}
		if got := binary.LittleEndian.Uint32(block(slot)[16+4:]); got != uint32(index) || d.CommIndex(slot) != index {
			t.Fatalf("slot %d: header names communicator %d, CommIndex %d; want %d", slot, got, d.CommIndex(slot), index)
		}
		index++
	}
	newComm(0) // the block made at load
	newComm(1)
	var wantCount, wantDur uint64
	for cycle := range 40 {
		for slot := range 2 {
			bump(slot, uint64(cycle+1), 1000*uint64(slot+1))
			wantCount += uint64(cycle + 1)
			wantDur += 1000 * uint64(slot+1)
		}
		before, c0, d0 := read()
		for slot := range 2 {
			if err := d.ReleaseComm(slot); err != nil {
				t.Fatal(err)
			}
			if err := d.ReleaseComm(slot); err != nil { // already free: nothing
				t.Fatal(err)
			}
			if d.CommIndex(slot) != -1 {
				t.Fatalf("slot %d released, CommIndex %d", slot, d.CommIndex(slot))
			}
		}
		after, c1, d1 := read()
		if c0 != wantCount || d0 != wantDur || c1 != c0 || d1 != d0 || !slicesEqual(before, after) {
			t.Fatalf("cycle %d: totals %d/%d before the release, %d/%d after (want %d/%d); by comm %v, then %v", cycle, c0, d0, c1, d1, wantCount, wantDur, before, after)
		}
		// Reset as new: slot 0 is what the load made (its header names 0).
		if b := block(0); !bytes.Equal(b, fresh) {
			for i := range b {
				if b[i] != fresh[i] {
					t.Fatalf("cycle %d: released block 0 differs from a new one at byte %d: %#x, want %#x", cycle, i, b[i], fresh[i])
				}
			}
		}
		newComm(0)
		newComm(1)
	}
	if d.Comms() != 2 {
		t.Errorf("%d blocks made for %d communicators, 2 alive at once", d.Comms(), index)
	}
	byComm, _, _ := read()
	// Communicators 0-15 have rows of their own, the rest the overflow row.
	for k, c := range byComm {
		if k < config.MaxCommKeys && c != uint64(k/2+1) {
			t.Errorf("by comm: row %d counts %d, want %d", k, c, k/2+1)
		}
	}
	var total uint64
	for _, c := range byComm {
		total += c
	}
	if total != wantCount {
		t.Errorf("by comm: rows add up to %d, want %d", total, wantCount)
	}
}

// A Work module's blocks are reused too: the regions, host-mapped memory,
// zeroed by the host; devCtx is the block plus its slot.
func TestWorkBlocksReusedOnAFakeDriver(t *testing.T) {
	m, _, d := loadOnFakeDriver(t, "work.yaml", "version: 1\nname: w\nhooks:\n  - name: all\n    fields: [workCounter, phase]\n    buffer: {slots: 1024, overflow: overwrite_oldest, positions: work}\n")
	for cycle := range 10 {
		for slot := range 3 {
			got, ctx, err := d.NewComm(10*cycle + slot)
			if err != nil || got != slot || ctx%hookgen.WorkBlockAlign != uintptr(slot) {
				t.Fatalf("cycle %d: NewComm = slot %d ctx %#x, %v; want slot %d", cycle, got, ctx, err, slot)
			}
			r := d.Regions(slot, 0)
			for i, w := range r {
				if w != 0 {
					t.Fatalf("cycle %d slot %d: region word %d is %#x, want a zeroed block", cycle, slot, i, w)
				}
			}
			r[0], r[len(r)-1] = 1, 2 // the device writes
		}
		for slot := range 3 {
			if err := d.ReleaseComm(slot); err != nil {
				t.Fatal(err)
			}
		}
	}
	if d.Comms() != 3 || m.RegionWords(0) == 0 {
		t.Errorf("%d blocks for 3 communicators alive at once", d.Comms())
	}
}

func slicesEqual(a, b []uint64) bool { return string(asBytes(a)) == string(asBytes(b)) }
