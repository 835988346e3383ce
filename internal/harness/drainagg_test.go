package harness

import (
	"strings"
	"testing"

	"github.com/ncclhooks/ncclhooks/internal/config"
)

// With records dropped, a hook the drain aggregates is checked within what
// the drops allow: no row above the harness's, bucket by bucket and in its
// max, and no more work items left out than records dropped.
func TestCompareRowsWithinDrops(t *testing.T) {
	hist := &config.Aggregate{Name: "d", Kind: config.AggHistogram, Buckets: config.Buckets{Bounds: []uint64{10, 100}}}
	top := &config.Aggregate{Name: "top", Kind: config.AggMax}
	want := map[rowKey]*aggRow{
		{1, -1, -1}: {Count: 5, SumInt: 150, Max: 90, Buckets: []uint64{2, 3, 0}},
		{2, -1, -1}: {Count: 2, SumInt: 20, Max: 15, Buckets: []uint64{1, 1, 0}},
	}
	row := func(count uint64, sum, mx int64, cum ...uint64) *aggRow {
		return &aggRow{Count: count, SumInt: sum, Max: mx, Buckets: cum}
	}
	for _, tt := range []struct {
		name string
		a    *config.Aggregate
		got  map[rowKey]*aggRow
		lost uint64
		want string // a problem's text, "" for none
	}{
		{"a row and a work item left out", hist, map[rowKey]*aggRow{{1, -1, -1}: row(4, 140, 0, 1, 4, 4)}, 3, ""},
		{"all exact with no drop", hist, map[rowKey]*aggRow{{1, -1, -1}: row(5, 150, 0, 2, 5, 5), {2, -1, -1}: row(2, 20, 0, 1, 2, 2)}, 0, ""},
		{"exactly, a work item short", hist, map[rowKey]*aggRow{{1, -1, -1}: row(4, 140, 0, 1, 4, 4), {2, -1, -1}: row(2, 20, 0, 1, 2, 2)}, 0, "count 4, want 5"},
		{"more left out than dropped", hist, map[rowKey]*aggRow{{1, -1, -1}: row(4, 140, 0, 1, 4, 4)}, 2, "3 work items left out, more than the 2 records dropped"},
		{"a count above", hist, map[rowKey]*aggRow{{1, -1, -1}: row(6, 150, 0, 2, 6, 6)}, 9, "count 6, more than"},
		{"a bucket above", hist, map[rowKey]*aggRow{{1, -1, -1}: row(4, 100, 0, 3, 4, 4)}, 9, "bucket 0 holds more"},
		{"a sum above", hist, map[rowKey]*aggRow{{1, -1, -1}: row(4, 151, 0, 1, 4, 4)}, 9, "sum 151, more than"},
		{"a row the harness has not", hist, map[rowKey]*aggRow{{3, -1, -1}: row(1, 1, 0, 1, 1, 1)}, 9, "which the harness does not compute"},
		{"a max above", top, map[rowKey]*aggRow{{2, -1, -1}: row(1, 0, 16)}, 9, "max 16, above"},
		{"a max within", top, map[rowKey]*aggRow{{2, -1, -1}: row(1, 0, 12)}, 9, ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			problems := compareRows(tt.a, want, tt.got, tt.lost)
			text := strings.Join(problems, "; ")
			if (tt.want == "") != (len(problems) == 0) || !strings.Contains(text, tt.want) {
				t.Errorf("problems %q, want %q", text, tt.want)
			}
		})
	}
}
