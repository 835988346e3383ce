package config

import "testing"

// Row follows docs/ARCHITECTURE.md ("Aggregates": by both, row
// f*(MaxChannels+1)+c; ids beyond a bound in the last row of their key), and
// RowKey inverts it on every row.
func TestAggregateRows(t *testing.T) {
	for _, by := range [][]string{nil, {"funcId"}, {"channelId"}, {"funcId", "channelId"}} {
		a := &Aggregate{Kind: AggCount, By: by}
		for _, f := range []uint32{0, 1, 7, MaxFuncIDs - 1, MaxFuncIDs, MaxFuncIDs + 5, 1 << 31} {
			for _, c := range []uint32{0, 3, MaxChannels - 1, MaxChannels, 255} {
				fk, ck := int(min(f, MaxFuncIDs)), int(min(c, MaxChannels))
				want := 0
				switch {
				case len(by) == 2:
					want = fk*(MaxChannels+1) + ck
				case len(by) == 1 && by[0] == "funcId":
					want = fk
				case len(by) == 1:
					want = ck
				}
				row := a.Row(f, c)
				if row != want {
					t.Errorf("by %v: Row(%d, %d) = %d, want %d", by, f, c, row, want)
				}
			}
		}
		for r := range a.Keys() {
			f, c := a.RowKey(r)
			switch {
			case (f >= 0) != (len(by) > 0 && by[0] == "funcId"), (c >= 0) != (len(by) > 0 && by[len(by)-1] == "channelId"):
				t.Errorf("by %v: RowKey(%d) = %d, %d: wrong keys present", by, r, f, c)
			case a.Row(uint32(max(f, 0)), uint32(max(c, 0))) != r:
				t.Errorf("by %v: RowKey(%d) = %d, %d, whose Row is %d", by, r, f, c, a.Row(uint32(max(f, 0)), uint32(max(c, 0))))
			}
		}
	}
}

// With comm among the keys, comm varies fastest (after funcId and
// channelId), indexes at or beyond MaxCommKeys share its overflow row, and
// RowKeys inverts RowOf on every row.
func TestAggregateRowsByComm(t *testing.T) {
	for _, by := range [][]string{{"comm"}, {"funcId", "comm"}, {"channelId", "comm"}, {"funcId", "channelId", "comm"}} {
		a := &Aggregate{Kind: AggCount, By: by}
		want := 1
		for _, k := range by {
			want *= keyBound(k) + 1
		}
		if a.Keys() != want {
			t.Errorf("by %v: %d keys, want %d", by, a.Keys(), want)
		}
		if r := a.RowOf(3, 2, 5); r%(MaxCommKeys+1) != 5 {
			t.Errorf("by %v: RowOf(3, 2, 5) = %d: comm 5 is not its fastest-varying key", by, r)
		}
		if a.RowOf(3, 2, MaxCommKeys+9) != a.RowOf(3, 2, MaxCommKeys) {
			t.Errorf("by %v: comm beyond the bound is not in the overflow row", by)
		}
		for r := range a.Keys() {
			f, c, cm := a.RowKeys(r)
			if cm < 0 || (f >= 0) != (by[0] == "funcId") || (c >= 0) != (len(by) > 1 && by[len(by)-2] == "channelId") {
				t.Fatalf("by %v: RowKeys(%d) = %d, %d, %d: wrong keys present", by, r, f, c, cm)
			}
			if got := a.RowOf(uint32(max(f, 0)), uint32(max(c, 0)), uint32(cm)); got != r {
				t.Fatalf("by %v: RowKeys(%d) = %d, %d, %d, whose RowOf is %d", by, r, f, c, cm, got)
			}
		}
	}
}

// Strides compute the rows RowOf does, for every combination of keys, ids
// within and beyond their bounds included.
func TestAggregateStridesAreRowOf(t *testing.T) {
	ids := []uint32{0, 1, 7, 15, 16, 63, 64, 65, 1023, 1024, 5000}
	for _, by := range [][]string{{}, {"funcId"}, {"channelId"}, {"comm"}, {"funcId", "channelId"}, {"funcId", "comm"},
		{"channelId", "comm"}, {"funcId", "channelId", "comm"}} {
		a := &Aggregate{Kind: AggCount, By: by}
		s := a.Strides()
		for _, f := range ids {
			for _, c := range ids {
				for _, m := range ids {
					if got, want := s.Row(f, c, m), a.RowOf(f, c, m); got != want {
						t.Fatalf("by %v: strides %+v give row %d for (%d, %d, %d), RowOf %d", by, s, got, f, c, m, want)
					}
				}
			}
		}
	}
}
