package cpu_test

import (
	"testing"

	"github.com/ncclhooks/ncclhooks/internal/backend/cpu/internal/cdrive"
	"github.com/ncclhooks/ncclhooks/internal/config"
	"github.com/ncclhooks/ncclhooks/internal/hookgen"
	"github.com/ncclhooks/ncclhooks/internal/hookgen/hooktest"
)

// Name predicates test one bit of a set the host fills from the function
// names; ids past the sets never match.
func TestNamePredicates(t *testing.T) {
	names := []string{
		"AllReduce_Sum_f32_RING_LL", "AllGather_RING", "Broadcast_RING", "ReduceScatter_Sum_f16_TREE",
		"AllReduce_Max_u8_TREE_SIMPLE", "SendRecv", "AllReduce_Sum_bf16_NVLS", "Reduce_Sum_f64_RING_LL128",
	}
	whens := []string{
		`func startsWith "AllReduce"`,
		`func in ["Broadcast_RING", "AllGather_RING"]`,
		`func matches "_(TREE|LL)$"`,
		`func endsWith "RING"`,
		`func contains "Sum"`,
		`func == "SendRecv"`,
		`not (func startsWith "AllReduce") && phase == STOP`,
		`func contains "Sum" || func == "SendRecv"`,
	}
	var hooks []*config.Hook
	for i, w := range whens {
		h := hooktest.Hook(string(rune('a'+i)), "funcId")
		h.When = hooktest.MustExpr(t, w)
		hooks = append(hooks, h)
	}
	m, d := load(t, hooktest.Profile(hooks...), 0)
	if len(m.FuncSets) != len(whens)+1 {
		t.Fatalf("%d function sets, want %d", len(m.FuncSets), len(whens)+1)
	}
	// Fill the sets as the plugin does: one bit per id whose name matches.
	sets := make([][]uint32, len(m.FuncSets))
	for i, fs := range m.FuncSets {
		sets[i] = make([]uint32, hookgen.FuncSetWords)
		for id, name := range names {
			if fs.Pred.Match(name) {
				sets[i][id/32] |= 1 << (id % 32)
			}
		}
	}
	if err := d.WriteFuncSets(sets); err != nil {
		t.Fatal(err)
	}

	ids := []uint32{hookgen.FuncSetWords * 32, 1 << 31, ^uint32(0)} // never match
	for id := range names {
		ids = append(ids, uint32(id))
	}
	var evs []cdrive.Event
	for _, id := range ids {
		for phase := range uint8(2) {
			evs = append(evs, cdrive.Event{FuncID: id, Phase: phase})
		}
	}
	call(d, evs...)

	// What each predicate must select, decided from the names here.
	match := func(hook int, id uint32, phase uint8) bool {
		// An id without a name is in no set.
		fp := func(i int) bool { return int(id) < len(names) && m.FuncSets[i].Pred.Match(names[id]) }
		switch hook {
		case 6:
			return !fp(6) && phase == cdrive.Stop
		case 7:
			return fp(7) || fp(8)
		}
		return fp(hook)
	}
	ctl := readCtl(t, m, d)
	for hi := range whens {
		var want []uint32
		for _, ev := range evs {
			if match(hi, ev.FuncID, ev.Phase) {
				want = append(want, ev.FuncID)
			}
		}
		if ctl[hi] != uint64(len(want)) {
			t.Errorf("%s: %d matches, want %d", whens[hi], ctl[hi], len(want))
			continue
		}
		for pos, id := range want {
			if got := record(t, d, m.Hooks[hi], uint64(pos))[0].U; got != uint64(id) {
				t.Errorf("%s: match %d is funcId %d, want %d", whens[hi], pos, got, id)
			}
		}
	}
}
