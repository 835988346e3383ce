package report

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strconv"

	"github.com/ncclhooks/ncclhooks/internal/schema"
)

// AggSnapshot is the latest snapshot of one on-device aggregate of one
// device in one file (docs/ARCHITECTURE.md, "Aggregates").
type AggSnapshot = schema.Aggregate

type aggKey struct {
	file, device int
	hook, name   string
}

// aggregate keeps the latest snapshot of an aggregate line (they are
// cumulative, so the latest holds everything).
func (r *reader) aggregate(index int, line []byte) error {
	var a AggSnapshot
	dec := json.NewDecoder(bytes.NewReader(line))
	dec.UseNumber()
	if err := dec.Decode(&a); err != nil {
		return fmt.Errorf("aggregate line: %v", err)
	}
	if a.Hook == "" || a.Name == "" {
		return fmt.Errorf("aggregate line needs hook and name")
	}
	if r.run.Aggs == nil {
		r.run.Aggs = map[aggKey]*AggSnapshot{}
	}
	r.run.Aggs[aggKey{index, a.Device, a.Hook, a.Name}] = &a
	if r.opts.AggHistory {
		r.run.AggHistory = append(r.run.AggHistory, AggPoint{File: index, Agg: &a})
	}
	return nil
}

// Bound is a histogram bucket's upper bound as written ("2047", "+Inf"):
// JSON gets a number, or the string "+Inf" where no number can say it.
type Bound string

// MarshalJSON writes a finite bound as a JSON number.
func (b Bound) MarshalJSON() ([]byte, error) {
	if f, err := strconv.ParseFloat(string(b), 64); err == nil && !math.IsInf(f, 0) && !math.IsNaN(f) {
		return []byte(b), nil
	}
	return json.Marshal(string(b))
}

// AggReport is one aggregate merged over every device and file, per key.
type AggReport struct {
	Hook string       `json:"hook"`
	Name string       `json:"name"`
	Kind string       `json:"kind"`
	By   []string     `json:"by,omitempty"`
	Rows []AggRowStat `json:"rows"`
}

// AggRowStat is one key of a merged aggregate. For histograms, P50/P90/P99
// are the upper bounds of the buckets that hold those quantiles.
type AggRowStat struct {
	Func    string  `json:"func,omitempty"`
	Channel string  `json:"channel,omitempty"`
	Count   uint64  `json:"count"`
	Sum     float64 `json:"sum,omitempty"`
	Min     float64 `json:"min,omitempty"`
	Max     float64 `json:"max,omitempty"`
	P50     Bound   `json:"p50_le,omitempty"`
	P90     Bound   `json:"p90_le,omitempty"`
	P99     Bound   `json:"p99_le,omitempty"`

	les     []string
	buckets []uint64 // cumulative, as written
}

// aggReports merges the run's aggregate snapshots by hook, name and key.
func aggReports(run *Run) []AggReport {
	type mergeKey struct{ hook, name string }
	merged := map[mergeKey]*AggReport{}
	rows := map[mergeKey]map[[2]string]*AggRowStat{}
	for _, a := range run.Aggs {
		k := mergeKey{a.Hook, a.Name}
		if merged[k] == nil {
			merged[k] = &AggReport{Hook: a.Hook, Name: a.Name, Kind: a.Kind, By: a.By}
			rows[k] = map[[2]string]*AggRowStat{}
		}
		for _, r := range a.Rows {
			rk := rowKeyText(r)
			s := rows[k][rk]
			if s == nil {
				s = newAggRowStat(rk)
				rows[k][rk] = s
			}
			s.add(r)
		}
	}
	var out []AggReport
	for k, rep := range merged {
		for _, s := range rows[k] {
			s.finish()
			rep.Rows = append(rep.Rows, *s)
		}
		slices.SortFunc(rep.Rows, func(a, b AggRowStat) int {
			if a.Func != b.Func {
				return compareKeys(a.Func, b.Func)
			}
			return compareKeys(a.Channel, b.Channel)
		})
		out = append(out, *rep)
	}
	slices.SortFunc(out, func(a, b AggReport) int {
		if a.Hook != b.Hook {
			return compareKeys(a.Hook, b.Hook)
		}
		return compareKeys(a.Name, b.Name)
	})
	return out
}

// rowKeyText is a row's (func, channel) key as the report shows it.
func rowKeyText(r schema.AggRow) [2]string {
	return [2]string{keyText(r.FuncID, r.Func), keyText(r.ChannelID, "")}
}

func newAggRowStat(rk [2]string) *AggRowStat {
	return &AggRowStat{Func: rk[0], Channel: rk[1], Min: math.Inf(1), Max: math.Inf(-1)}
}

// add merges one snapshot row (of one device) into s.
func (s *AggRowStat) add(r schema.AggRow) {
	s.Count += r.Count
	if v, err := r.Sum.Float64(); err == nil {
		s.Sum += v
	}
	if r.Min != nil {
		s.Min = math.Min(s.Min, float64(*r.Min))
	}
	if r.Max != nil {
		s.Max = math.Max(s.Max, float64(*r.Max))
	}
	for i, b := range r.Buckets {
		if i == len(s.buckets) {
			s.buckets = append(s.buckets, 0)
			s.les = append(s.les, string(b.LE))
		}
		s.buckets[i] += b.Count
	}
}

// finish settles what add left open: min and max without values, quantiles.
func (s *AggRowStat) finish() {
	if math.IsInf(s.Min, 1) {
		s.Min = 0
	}
	if math.IsInf(s.Max, -1) {
		s.Max = 0
	}
	s.P50, s.P90, s.P99 = Bound(s.quantileLE(0.50)), Bound(s.quantileLE(0.90)), Bound(s.quantileLE(0.99))
}

// quantileLE is the upper bound of the bucket holding quantile q.
func (s *AggRowStat) quantileLE(q float64) string {
	if len(s.buckets) == 0 || s.Count == 0 {
		return ""
	}
	want := uint64(math.Ceil(q * float64(s.Count)))
	for i, c := range s.buckets {
		if c >= want {
			le := s.les[i]
			if u, err := strconv.Unquote(le); err == nil {
				return u // "+Inf"
			}
			return le
		}
	}
	return "+Inf"
}

func keyText(raw json.RawMessage, name string) string {
	if len(raw) == 0 {
		return ""
	}
	if name != "" {
		return name
	}
	if s, err := strconv.Unquote(string(raw)); err == nil {
		return s // "overflow"
	}
	return string(raw)
}

// compareKeys orders numbers numerically and everything else as text.
func compareKeys(a, b string) int {
	x, errA := strconv.Atoi(a)
	y, errB := strconv.Atoi(b)
	if errA == nil && errB == nil {
		return x - y
	}
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}
