package rings

import (
	"fmt"
	"math"

	"github.com/ncclhooks/ncclhooks/internal/config"
	"github.com/ncclhooks/ncclhooks/internal/hookgen"
	"github.com/ncclhooks/ncclhooks/internal/sinks"
)

// Key values of sinks.AggRow.
const (
	keyAbsent   = -1
	keyOverflow = -2
)

// decodeAgg turns one aggregate's cells (all of the device's, as ReadAgg adds them up) into
// a snapshot, per docs/ARCHITECTURE.md "Aggregates". Rows with count 0 are
// left out. Histogram buckets come out cumulative (Prometheus' le semantics).
func decodeAgg(a *hookgen.AggInfo, words []uint64, funcName func(uint32) string) ([]sinks.AggRow, error) {
	end := a.Offset + a.Keys*a.RowWords
	if a.Offset < 0 || end > len(words) {
		return nil, fmt.Errorf("aggregate %q of hook %q: cells [%d, %d) outside the %d aggregate words", a.Agg.Name, a.Hook, a.Offset, end, len(words))
	}
	nb := a.Buckets()
	var rows []sinks.AggRow
	for r := 0; r < a.Keys; r++ {
		cells := words[a.Offset+r*a.RowWords : a.Offset+(r+1)*a.RowWords]
		if cells[0] == 0 {
			continue
		}
		row := sinks.AggRow{FuncID: keyAbsent, ChannelID: keyAbsent, Comm: keyAbsent, Count: cells[0]}
		f, c, cm := a.Agg.RowKeys(r)
		if f >= 0 {
			row.FuncID = f
			if f == config.MaxFuncIDs {
				row.FuncID = keyOverflow
			} else if funcName != nil {
				row.FuncName = funcName(uint32(f))
			}
		}
		if c >= 0 {
			row.ChannelID = c
			if c == config.MaxChannels {
				row.ChannelID = keyOverflow
			}
		}
		if cm >= 0 {
			row.Comm = cm
			if cm == config.MaxCommKeys {
				row.Comm = keyOverflow
			}
		}
		switch a.Agg.Kind {
		case config.AggSum:
			if a.FloatSum() {
				row.SumFloat = math.Float64frombits(cells[1])
			} else {
				row.SumInt = int64(cells[1])
			}
		case config.AggMin:
			row.Min = int64(^cells[1] ^ 1<<63)
		case config.AggMax:
			row.Max = int64(cells[1] ^ 1<<63)
		case config.AggHistogram:
			row.SumInt = int64(cells[1])
			if len(cells) < 2+nb {
				return nil, fmt.Errorf("aggregate %q of hook %q: rows of %d words cannot hold %d buckets", a.Agg.Name, a.Hook, a.RowWords, nb)
			}
			row.Buckets = histogramBuckets(a.Agg.Buckets, cells[2:2+nb])
		}
		rows = append(rows, row)
	}
	return rows, nil
}

// histogramBuckets turns per-bucket counts into cumulative buckets with their
// upper bounds. Log2 bucket 0 holds v <= 0 and bucket i holds [2^(i-1), 2^i),
// so its integer upper bound is 2^i - 1; the last bucket is +Inf.
func histogramBuckets(b config.Buckets, counts []uint64) []sinks.Bucket {
	out := make([]sinks.Bucket, len(counts))
	var cum uint64
	for i, n := range counts {
		cum += n
		out[i].Count = cum
		if i == len(counts)-1 {
			continue // +Inf
		}
		var le uint64
		if b.Log2 {
			le = 1<<uint(i) - 1
		} else {
			le = b.Bounds[i]
		}
		out[i].LE = &le
	}
	return out
}
