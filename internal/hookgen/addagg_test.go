package hookgen_test

import (
	"math"
	"strings"
	"testing"

	"github.com/ncclhooks/ncclhooks/internal/config"
	"github.com/ncclhooks/ncclhooks/internal/hookgen"
	"github.com/ncclhooks/ncclhooks/internal/hookgen/hooktest"
)

// Each communicator's block holds its own cells; AddAgg adds them up into the
// host's layout: counts and sums add, float sums add as floats, the encoded
// extremes take the larger word, and an aggregate keyed by comm gets each
// block's rows in the communicator's own rows (from MaxCommKeys on, in the
// overflow row, added up).
func TestAddAggAddsTheCommunicatorsCells(t *testing.T) {
	h := hooktest.Hook("h", "funcId")
	h.Fields = nil
	h.Aggregates = []*config.Aggregate{
		{Name: "n", Kind: config.AggCount, By: []string{"funcId"}},
		{Name: "fs", Kind: config.AggSum, Value: hooktest.MustExpr(t, "duration / 1000")},
		{Name: "lo", Kind: config.AggMin, Value: hooktest.MustExpr(t, "duration")},
		{Name: "hi", Kind: config.AggMax, Value: hooktest.MustExpr(t, "duration"), By: []string{"comm"}},
		{Name: "h", Kind: config.AggHistogram, Value: hooktest.MustExpr(t, "duration"), Buckets: config.Buckets{Bounds: []uint64{10}}, By: []string{"funcId", "comm"}},
	}
	m, err := hookgen.Generate(hooktest.Profile(h))
	if err != nil {
		t.Fatal(err)
	}
	agg := map[string]*hookgen.AggInfo{}
	for _, a := range m.Aggs {
		agg[a.Agg.Name] = a
	}
	if agg["hi"].DevKeys() != 1 || agg["h"].DevKeys() != config.MaxFuncIDs+1 || agg["n"].DevKeys() != agg["n"].Keys {
		t.Fatalf("device rows: hi %d, h %d, n %d/%d", agg["hi"].DevKeys(), agg["h"].DevKeys(), agg["n"].DevKeys(), agg["n"].Keys)
	}
	enc := func(v int64) uint64 { return uint64(v) ^ 1<<63 }
	// block writes one event of duration d of function f into cells, as the
	// generated code does.
	event := func(cells []uint64, f int, d int64) {
		n := agg["n"]
		cells[n.DevOffset+f]++
		fs := agg["fs"].DevOffset
		cells[fs]++
		cells[fs+1] = math.Float64bits(math.Float64frombits(cells[fs+1]) + float64(d)/1000)
		lo := agg["lo"].DevOffset
		cells[lo]++
		cells[lo+1] = max(cells[lo+1], ^enc(d))
		hi := agg["hi"].DevOffset
		cells[hi]++
		cells[hi+1] = max(cells[hi+1], enc(d))
		hr := agg["h"].DevOffset + f*agg["h"].RowWords
		cells[hr]++
		cells[hr+1] += uint64(d)
		if d <= 10 {
			cells[hr+2]++
		} else {
			cells[hr+3]++
		}
	}
	dst := make([]uint64, m.AggWords)
	comms := []int{0, 3, config.MaxCommKeys, config.MaxCommKeys + 4}
	for i, comm := range comms {
		cells := make([]uint64, m.Block.AggWords)
		event(cells, 2, int64(5+100*i))
		event(cells, 7, int64(50*i))
		m.AddAgg(dst, comm, cells)
	}
	n := agg["n"]
	if dst[n.Offset+2] != 4 || dst[n.Offset+7] != 4 {
		t.Errorf("counts %d, %d; want 4, 4", dst[n.Offset+2], dst[n.Offset+7])
	}
	fs := agg["fs"].Offset
	if got := math.Float64frombits(dst[fs+1]); dst[fs] != 8 || math.Abs(got-(0.005+0.105+0.205+0.305+0.05+0.1+0.15)) > 1e-12 {
		t.Errorf("float sum %d events, %g", dst[fs], got)
	}
	lo := agg["lo"].Offset
	if dst[lo] != 8 || int64(^dst[lo+1]^1<<63) != 0 {
		t.Errorf("min of 8 events = %d", int64(^dst[lo+1]^1<<63))
	}
	hi := agg["hi"].Offset
	for c, want := range map[int]int64{0: 5, 3: 105, config.MaxCommKeys: 305} {
		row := dst[hi+2*c : hi+2*c+2]
		if row[0] == 0 || int64(row[1]^1<<63) != want {
			t.Errorf("max of comm key %d = %d (count %d), want %d", c, int64(row[1]^1<<63), row[0], want)
		}
	}
	if dst[hi+2*config.MaxCommKeys] != 4 {
		t.Errorf("the overflow comm row counts %d events, want the last two communicators' 4", dst[hi+2*config.MaxCommKeys])
	}
	h2 := agg["h"]
	row := func(f, c int) []uint64 {
		r := h2.Agg.RowOf(uint32(f), 0, uint32(c))
		return dst[h2.Offset+r*h2.RowWords : h2.Offset+(r+1)*h2.RowWords]
	}
	if r := row(2, 3); r[0] != 1 || r[1] != 105 || r[2] != 0 || r[3] != 1 {
		t.Errorf("histogram row (f 2, comm 3) = %v, want [1 105 0 1]", r)
	}
	if r := row(7, 0); r[0] != 1 || r[1] != 0 || r[2] != 1 {
		t.Errorf("histogram row (f 7, comm 0) = %v, want [1 0 1 0]", r)
	}
	if r := row(2, config.MaxCommKeys); r[0] != 2 || r[1] != 205+305 {
		t.Errorf("histogram overflow row (f 2) = %v, want 2 events, sum 510", r)
	}
}

// A block's rows leave the comm key out, and AddAgg puts them back as the
// fastest-varying key, as config orders the keys: the generator refuses
// another order rather than add cells into the wrong rows.
func TestCommKeyComesLast(t *testing.T) {
	h := hooktest.Hook("h")
	h.Aggregates = []*config.Aggregate{{Name: "n", Kind: config.AggCount, By: []string{"comm", "funcId"}}}
	if _, err := hookgen.Generate(hooktest.Profile(h)); err == nil || !strings.Contains(err.Error(), "by comm must come last") {
		t.Fatalf("by [comm, funcId]: %v, want an error", err)
	}
}
