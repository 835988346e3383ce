package report

// Channel skew from on-device aggregates keyed by channel (examples/skew.yaml):
// per function, the channel with the largest value against the smallest.

import (
	"cmp"
	"slices"
	"strconv"
)

// AggSkew is the channel skew of one aggregate keyed by channelId, for one
// function (Func "all" where the aggregate has no funcId key). Stat is what
// is compared: the sum, min, max or count the aggregate keeps, a
// histogram's mean; for durations a straggler channel has the largest.
type AggSkew struct {
	Hook      string  `json:"hook"`
	Aggregate string  `json:"aggregate"`
	Stat      string  `json:"stat"`
	Func      string  `json:"func"`
	Channels  int     `json:"channels"`
	Slowest   string  `json:"slowest_channel"` // the largest value
	SlowValue float64 `json:"slowest_value"`
	Fastest   string  `json:"fastest_channel"` // the smallest value
	FastValue float64 `json:"fastest_value"`
	Skew      float64 `json:"skew"`            // slowest - fastest
	Ratio     float64 `json:"ratio,omitempty"` // slowest / fastest; absent when fastest is 0
}

// aggSkews computes the channel skew of every aggregate keyed by channelId,
// per function, over channels with at least one value (the overflow row
// is no channel and left out).
func aggSkews(aggs []AggReport) []AggSkew {
	var out []AggSkew
	for _, ag := range aggs {
		if !slices.Contains(ag.By, "channelId") {
			continue
		}
		stat := ag.Kind
		if stat == "histogram" {
			stat = "mean"
		}
		type point struct {
			ch string
			v  float64
		}
		byFunc := map[string][]point{}
		var funcs []string
		for _, r := range ag.Rows {
			if r.Count == 0 || r.Channel == "" || r.Channel == "overflow" {
				continue
			}
			v, ok := rowStat(ag.Kind, r)
			if !ok {
				continue
			}
			fn := orAll(r.Func)
			if _, seen := byFunc[fn]; !seen {
				funcs = append(funcs, fn)
			}
			byFunc[fn] = append(byFunc[fn], point{r.Channel, v})
		}
		slices.Sort(funcs)
		for _, fn := range funcs {
			ps := byFunc[fn]
			if len(ps) < 2 {
				continue
			}
			// Ties go to the lower channel, so the result does not depend on row order.
			chNum := func(s string) int { n, _ := strconv.Atoi(s); return n }
			slices.SortFunc(ps, func(a, b point) int { return cmp.Or(cmp.Compare(a.v, b.v), cmp.Compare(chNum(a.ch), chNum(b.ch))) })
			fast, slow := ps[0], ps[len(ps)-1]
			s := AggSkew{Hook: ag.Hook, Aggregate: ag.Name, Stat: stat, Func: fn, Channels: len(ps),
				Slowest: slow.ch, SlowValue: slow.v, Fastest: fast.ch, FastValue: fast.v, Skew: slow.v - fast.v}
			if fast.v > 0 {
				s.Ratio = slow.v / fast.v
			}
			out = append(out, s)
		}
	}
	return out
}

// rowStat is the value a row's channel is compared by.
func rowStat(kind string, r AggRowStat) (float64, bool) {
	switch kind {
	case "count":
		return float64(r.Count), true
	case "sum":
		return r.Sum, true
	case "min":
		return r.Min, true
	case "max":
		return r.Max, true
	case "histogram":
		return r.Sum / float64(r.Count), true
	}
	return 0, false
}
