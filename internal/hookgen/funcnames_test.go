package hookgen

import (
	"slices"
	"strings"
	"testing"

	"github.com/ncclhooks/ncclhooks/internal/config"
)

func TestUnmatchedFuncSetsNameTheClosest(t *testing.T) {
	p, err := config.Parse("p.yaml", []byte(`version: 1
name: names
hooks:
  - name: typo
    when: func startsWith "AllReduce_Sum_f23"
    fields: [timestamp]
  - name: good
    when: func startsWith "AllGather"
    fields: [timestamp]
  - name: nothing
    when: func in ["Bcast", "SendRecv"]
    fields: [timestamp]
`))
	if err != nil {
		t.Fatal(err)
	}
	m, err := Generate(p)
	if err != nil {
		t.Fatal(err)
	}
	names := []string{"AllGather_RING_LL", "AllReduce_Sum_f32_RING_LL", "AllReduce_Sum_f16_RING_LL", "Broadcast_RING_LL", "ReduceScatter_Sum_f32_RING_LL"}
	un := m.UnmatchedFuncSets(names)
	if len(un) != 2 || un[0].Set.Hook != "typo" || un[1].Set.Hook != "nothing" {
		t.Fatalf("unmatched %v, want the typo's and the in-list's", un)
	}
	if un[0].Closest[0] != "AllReduce_Sum_f32_RING_LL" || len(un[0].Closest) != 3 {
		t.Errorf("closest to the typo: %v", un[0].Closest)
	}
	if !slices.Contains(un[1].Closest, "Broadcast_RING_LL") {
		t.Errorf("closest to Bcast: %v", un[1].Closest)
	}
	if s := un[0].String(); !strings.HasPrefix(s, "p.yaml:5:") || !strings.Contains(s, "closest: AllReduce_Sum_f32_RING_LL") {
		t.Errorf("message %q: want the position and the closest names", s)
	}
	if un := m.UnmatchedFuncSets(nil); len(un) != 3 || len(un[0].Closest) != 0 {
		t.Errorf("no names at all: %v", un)
	}
}
