package cpu_test

import (
	"encoding/binary"
	"sync/atomic"
	"testing"

	"github.com/ncclhooks/ncclhooks/internal/backend"
	"github.com/ncclhooks/ncclhooks/internal/backend/cpu"
	"github.com/ncclhooks/ncclhooks/internal/backend/cpu/internal/cdrive"
	"github.com/ncclhooks/ncclhooks/internal/config"
	"github.com/ncclhooks/ncclhooks/internal/hookgen"
)

// load generates, compiles and loads p as device ordinal.
func load(t *testing.T, p *config.Profile, ordinal int) (*hookgen.Module, backend.Device) {
	t.Helper()
	m, err := hookgen.Generate(p)
	if err != nil {
		t.Fatalf("Generate: %v", err)
	}
	c, err := cpu.Compile(m, "", 0)
	if err != nil {
		t.Fatalf("Compile: %v", err)
	}
	d, err := c.Load(ordinal)
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	t.Cleanup(func() { d.Close() })
	return m, d
}

func call(d backend.Device, evs ...cdrive.Event) {
	for _, ev := range evs {
		cdrive.Call(d.Entry(), d.Ctx(), ev)
	}
}

func readCtl(t *testing.T, m *hookgen.Module, d backend.Device) []uint64 {
	t.Helper()
	ctl := make([]uint64, m.CtlWords())
	if err := d.ReadCtl(ctl); err != nil {
		t.Fatal(err)
	}
	return ctl
}

func readAgg(t *testing.T, m *hookgen.Module, d backend.Device) []uint64 {
	t.Helper()
	agg := make([]uint64, m.AggWords)
	if err := d.ReadAgg(agg); err != nil {
		t.Fatal(err)
	}
	return agg
}

// slot reads the slot of position pos the way the drain does: it returns
// the decoded record and the stamps of its words.
func slot(d backend.Device, h *hookgen.HookInfo, pos uint64) ([]hookgen.Value, []uint32) {
	c := h.Layout.SlotWords()
	words := d.Slots(h.Index)[int(pos%uint64(h.Slots))*c:][:c]
	payload := make([]byte, 4*c)
	stamps := make([]uint32, c)
	for i := range words {
		w := atomic.LoadUint64(&words[i])
		stamps[i] = uint32(w >> 32)
		binary.LittleEndian.PutUint32(payload[4*i:], uint32(w))
	}
	return h.Layout.Decode(payload, nil), stamps
}

// record reads the complete record at pos, failing the test if any word of
// its slot carries another position's stamp.
func record(t *testing.T, d backend.Device, h *hookgen.HookInfo, pos uint64) []hookgen.Value {
	t.Helper()
	vals, stamps := slot(d, h, pos)
	for i, s := range stamps {
		if s != uint32(pos+1) {
			t.Fatalf("hook %s position %d: word %d has stamp %d, want %d", h.Name, pos, i, s, pos+1)
		}
	}
	return vals
}

// eventValues are an event's catalogue values as the record holds them.
func eventValues(ev cdrive.Event) []uint64 {
	return []uint64{ev.Timestamp, ev.WorkCounter, uint64(ev.FuncID), uint64(ev.ChannelID), uint64(ev.Phase)}
}

func unsigned(vals []hookgen.Value) []uint64 {
	out := make([]uint64, len(vals))
	for i, v := range vals {
		out[i] = v.U
	}
	return out
}
