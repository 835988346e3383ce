package sinks

// Metric families: how an aggregate is exposed, its metric names and its
// log2 bucket range.

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"unicode"

	"github.com/ncclhooks/ncclhooks/internal/config"
	"github.com/ncclhooks/ncclhooks/internal/hookgen"
)

// family is how one aggregate is exposed.
type family struct {
	name     string            // without suffixes
	agg      *config.Aggregate // the definition it was made from
	unit     float64           // exposed = value / unit (1e9 for ns -> s); dividing keeps 3ns at 3e-09 exactly
	kind     config.AggKind
	byFunc   bool
	byChan   bool
	byComm   bool
	log2     bool
	lo, hi   int // log2 only: bucket range ever non-empty (sticky, so series keep their buckets)
	seen     bool
	main     *metricDef
	samples  *metricDef // sum kind: the observation count
	labelSet []string
}

// family returns (creating it once) how an aggregate is exposed. An
// aggregate named like one of another hook with the same shape shares its
// metric family (the hook label tells them apart); a clash of shapes gets
// the hook name in the metric name.
func (p *Prom) family(info *hookgen.AggInfo) *family {
	id := aggID{info.Hook, info.Agg.Name}
	if f := p.families[id]; f != nil {
		return f
	}
	a := info.Agg
	f := &family{kind: a.Kind, log2: a.Buckets.Log2, lo: -1, hi: -1}
	for _, k := range a.By {
		f.byFunc = f.byFunc || k == "funcId"
		f.byChan = f.byChan || k == "channelId"
		f.byComm = f.byComm || k == "comm"
	}
	f.labelSet = []string{"host", "gpu", "rank", "hook", "device"}
	if f.byFunc {
		f.labelSet = append(f.labelSet, "func")
	}
	if f.byChan {
		f.labelSet = append(f.labelSet, "channel")
	}
	if f.byComm {
		f.labelSet = append(f.labelSet, "comm")
	}
	f.unit = 1
	base := "ncclhooks_" + metricName(a.Name)
	if a.Value != nil && strings.TrimSpace(a.Value.Source) == "duration" {
		// The catalogue's duration is in ns; Prometheus wants base units.
		f.unit = 1e9
		base = strings.TrimSuffix(base, "_ns")
		if !strings.HasSuffix(base, "_seconds") {
			base += "_seconds"
		}
	}
	f.agg = a
	if owner, taken := p.names[base]; taken && !sameShape(p.families[owner], f) {
		base = "ncclhooks_" + metricName(info.Hook) + "_" + metricName(a.Name)
	}
	if owner, taken := p.names[base]; taken {
		// Same shape: share the family and its descriptors.
		shared := p.families[owner]
		p.families[id] = shared
		return shared
	}
	f.name = base
	what := fmt.Sprintf("%s aggregate %q", a.Kind, a.Name)
	if a.Value != nil {
		what += " of " + strconv.Quote(a.Value.Source)
	}
	if len(a.By) > 0 {
		what += " by " + strings.Join(a.By, ", ")
	}
	help := "ncclhooks " + what + " (cumulative since the job started)."
	unit := ""
	if f.unit == 1e9 {
		unit = "s"
	}
	switch a.Kind {
	case config.AggCount:
		f.main = newMetricDef(counterName(base), help, "", counterType, f.labelSet)
	case config.AggSum:
		f.main = newMetricDef(counterName(base), help, unit, counterType, f.labelSet)
		f.samples = newMetricDef(counterName(base+"_observations"), "Values added to the ncclhooks "+what+".", "", counterType, f.labelSet)
	case config.AggMin, config.AggMax:
		f.main = newMetricDef(gaugeName(base), "ncclhooks "+what+" over the job so far.", unit, gaugeType, f.labelSet)
	case config.AggHistogram:
		f.main = newMetricDef(base, help, unit, histogramType, f.labelSet)
	}
	p.families[id] = f
	p.names[base] = id
	return f
}

// sameShape reports whether two aggregates can share a metric family: same
// kind, keys, value expression (the family's help names it) and buckets.
func sameShape(f, g *family) bool {
	if f.kind != g.kind || f.byFunc != g.byFunc || f.byChan != g.byChan || f.byComm != g.byComm || f.log2 != g.log2 {
		return false
	}
	src := func(a *config.Aggregate) string {
		if a.Value == nil {
			return ""
		}
		return a.Value.Source
	}
	return f.unit == g.unit && src(f.agg) == src(g.agg) && slices.Equal(f.agg.Buckets.Bounds, g.agg.Buckets.Bounds)
}

// widen extends a log2 family's bucket range to the buckets rows fill.
// Emitting only that range (plus one empty bucket below it as the lower
// bound for interpolation) keeps 65-bucket histograms small; the range only
// grows, so a series never loses a bucket.
func (f *family) widen(rows []AggRow) {
	if !f.log2 {
		return
	}
	for _, r := range rows {
		var prev uint64
		for i, b := range r.Buckets {
			if b.LE == nil {
				break
			}
			if b.Count > prev {
				if !f.seen || i < f.lo {
					f.lo = i
				}
				if !f.seen || i > f.hi {
					f.hi = i
				}
				f.seen = true
			}
			prev = b.Count
		}
	}
}

// metricName turns a profile name into a snake_case metric name part:
// camelCase is split, anything but letters and digits becomes '_'.
func metricName(s string) string {
	var b strings.Builder
	prevLower := false
	for _, r := range s {
		switch {
		case r < unicode.MaxASCII && (unicode.IsLetter(r) || unicode.IsDigit(r)):
			if unicode.IsUpper(r) {
				if prevLower {
					b.WriteByte('_')
				}
				r = unicode.ToLower(r)
			}
			b.WriteRune(r)
			prevLower = unicode.IsLower(r) || unicode.IsDigit(r)
		default:
			b.WriteByte('_')
			prevLower = false
		}
	}
	return strings.Trim(b.String(), "_")
}

func counterName(base string) string {
	if strings.HasSuffix(base, "_total") {
		return base
	}
	return base + "_total"
}

// gaugeName keeps gauges clear of the suffixes Prometheus reserves for
// counters, histograms and summaries.
func gaugeName(base string) string {
	for _, s := range []string{"_total", "_count", "_sum", "_bucket"} {
		if strings.HasSuffix(base, s) {
			return base + "_value"
		}
	}
	return base
}
