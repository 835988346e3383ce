package cpu_test

import (
	"math"
	"math/bits"
	"math/rand"
	"slices"
	"testing"

	"github.com/ncclhooks/ncclhooks/internal/backend/cpu/internal/cdrive"
	"github.com/ncclhooks/ncclhooks/internal/config"
	"github.com/ncclhooks/ncclhooks/internal/hookgen/hooktest"
)

// Aggregates from concurrent threads equal the values computed here from
// the same events, word for word over all of the device's aggregation cells.
func TestAggregatesExact(t *testing.T) {
	h := hooktest.Hook("agg") // aggregates only: no record
	small := "workCounter % 1000 - 300"
	h.Aggregates = []*config.Aggregate{
		{Name: "n", Kind: config.AggCount, By: []string{"funcId", "channelId"}},
		{Name: "nf", Kind: config.AggCount, By: []string{"funcId"}},
		{Name: "total", Kind: config.AggSum, Value: hooktest.MustExpr(t, small)},
		{Name: "ftotal", Kind: config.AggSum, Value: hooktest.MustExpr(t, "workCounter / 4"), By: []string{"channelId"}},
		{Name: "lo", Kind: config.AggMin, Value: hooktest.MustExpr(t, small), By: []string{"funcId"}},
		{Name: "hi", Kind: config.AggMax, Value: hooktest.MustExpr(t, small), By: []string{"channelId"}},
		{Name: "h2", Kind: config.AggHistogram, Value: hooktest.MustExpr(t, "workCounter % 5000 - 100"), Buckets: config.Buckets{Log2: true}, By: []string{"funcId"}},
		{Name: "hb", Kind: config.AggHistogram, Value: hooktest.MustExpr(t, "workCounter % 2000"), Buckets: config.Buckets{Bounds: []uint64{10, 100, 1000}}},
	}
	m, d := load(t, hooktest.Profile(h), 0)
	if got := len(d.Slots(0)); got != 0 {
		t.Fatalf("an aggregate-only hook has %d record words", got)
	}

	r := rand.New(rand.NewSource(2))
	funcs := []uint32{0, 1, 5, 1023, 1024, 5000}
	chans := []uint8{0, 1, 63, 64, 200}
	streams := make([][]cdrive.Event, 6)
	var all []cdrive.Event
	for i := range streams {
		for range 2000 {
			ev := cdrive.Event{
				WorkCounter: uint64(r.Intn(1 << 20)),
				FuncID:      funcs[r.Intn(len(funcs))],
				ChannelID:   chans[r.Intn(len(chans))],
				Phase:       uint8(r.Intn(2)),
			}
			streams[i] = append(streams[i], ev)
			all = append(all, ev)
		}
	}
	cdrive.Run(d.Entry(), d.Ctx(), streams)

	// The expected cells, computed from the layout contract alone.
	want := make([]uint64, m.AggWords)
	fkey := func(f uint32) int { return int(min(f, config.MaxFuncIDs)) }
	ckey := func(c uint8) int { return int(min(c, config.MaxChannels)) }
	enc := func(v int64) uint64 { return uint64(v) ^ 1<<63 }
	off := 0
	next := func(keys, rowWords int) int { o := off; off += keys * rowWords; return o }
	nOff := next((config.MaxFuncIDs+1)*(config.MaxChannels+1), 1)
	nfOff := next(config.MaxFuncIDs+1, 1)
	totalOff := next(1, 2)
	ftotalOff := next(config.MaxChannels+1, 2)
	loOff := next(config.MaxFuncIDs+1, 2)
	hiOff := next(config.MaxChannels+1, 2)
	h2Off := next(config.MaxFuncIDs+1, 2+65)
	hbOff := next(1, 2+4)
	if off != m.AggWords {
		t.Fatalf("AggWords = %d, want %d", m.AggWords, off)
	}
	fsum := map[int]float64{}
	for _, ev := range all {
		wc := int64(ev.WorkCounter)
		f, c := fkey(ev.FuncID), ckey(ev.ChannelID)
		want[nOff+f*(config.MaxChannels+1)+c]++
		want[nfOff+f]++
		v := wc%1000 - 300
		want[totalOff]++
		want[totalOff+1] += uint64(v)
		want[ftotalOff+2*c]++
		fsum[c] += float64(wc) / 4
		want[loOff+2*f]++
		want[loOff+2*f+1] = max(want[loOff+2*f+1], ^enc(v))
		want[hiOff+2*c]++
		want[hiOff+2*c+1] = max(want[hiOff+2*c+1], enc(v))
		hv := wc%5000 - 100
		row := h2Off + f*67
		want[row]++
		want[row+1] += uint64(hv)
		bucket := 0
		if hv > 0 {
			bucket = 64 - bits.LeadingZeros64(uint64(hv))
		}
		want[row+2+bucket]++
		bv := wc % 2000
		want[hbOff]++
		want[hbOff+1] += uint64(bv)
		switch {
		case bv <= 10:
			want[hbOff+2]++
		case bv <= 100:
			want[hbOff+3]++
		case bv <= 1000:
			want[hbOff+4]++
		default:
			want[hbOff+5]++
		}
	}
	for c, s := range fsum { // quarters sum exactly in any order
		want[ftotalOff+2*c+1] = math.Float64bits(s)
	}
	got := readAgg(t, m, d)
	if !slices.Equal(got, want) {
		for i := range want {
			if got[i] != want[i] {
				t.Errorf("agg word %d = %d, want %d", i, got[i], want[i])
			}
		}
		t.FailNow()
	}
	// The host-side row helper agrees with the generated keying.
	for _, ev := range all[:50] {
		a := m.Aggs[0]
		if row := a.Row(ev.FuncID, uint32(ev.ChannelID)); row != fkey(ev.FuncID)*(config.MaxChannels+1)+ckey(ev.ChannelID) {
			t.Fatalf("Row(%d, %d) = %d", ev.FuncID, ev.ChannelID, row)
		}
	}
}
