package sinks

// The metrics every metrics output exports (the Prometheus textfiles,
// /metrics and OTLP), defined once: their names, help, units, types and
// labels (metricDef), and their values at the last dump (sample). The
// Prometheus collector and the OTLP encoder are two renderings of the same
// samples, so the two can never name a metric or a label differently.

import (
	"cmp"
	"slices"
	"strconv"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/ncclhooks/ncclhooks/internal/config"
)

// metricType is how a metric is exposed.
type metricType int

const (
	// counterType: a Prometheus counter; in OTLP a monotonic cumulative Sum.
	counterType metricType = iota
	// gaugeType: a Prometheus gauge; in OTLP a Gauge.
	gaugeType
	// histogramType: a Prometheus histogram; in OTLP a cumulative Histogram
	// with the same explicit bounds.
	histogramType
)

// metricDef is one metric as every output names it.
type metricDef struct {
	// name is the Prometheus name (a counter's ends in _total), and the
	// OTLP metric's name too: OTLP-to-Prometheus translation (Prometheus'
	// OTLP receiver, the Collector's Prometheus exporters) gives it back
	// unchanged, so a dashboard reads either.
	name   string
	help   string
	unit   string // UCUM for OTLP: "s" for the seconds metrics, else ""
	typ    metricType
	labels []string
	desc   *prometheus.Desc
}

func newMetricDef(name, help, unit string, typ metricType, labels []string) *metricDef {
	return &metricDef{name: name, help: help, unit: unit, typ: typ, labels: labels,
		desc: prometheus.NewDesc(name, help, labels, nil)}
}

// sample is one series of a metric at the last dump.
type sample struct {
	def    *metricDef
	device int
	labels []string // values, in def.labels order
	// value is a counter's or gauge's value; exact says that it is the
	// integer ival (counts, integer sums and extrema), which OTLP carries
	// exactly.
	value float64
	ival  int64
	exact bool
	// A histogram's count, sum, upper bounds (ascending, +Inf left out) and
	// the cumulative count at each bound.
	count  uint64
	sum    float64
	bounds []float64
	cumul  []uint64
}

func intSample(def *metricDef, device int, labels []string, v int64) sample {
	return sample{def: def, device: device, labels: labels, value: float64(v), ival: v, exact: true}
}

// Capture statistics: the metrics of NCCL_HOOKS_PROM_DUMP_STATS.
var (
	statLabels  = []string{"host", "gpu", "rank", "hook", "device"}
	matchedDef  = newMetricDef("ncclhooks_matched_total", "Events that matched the hook's predicate (positions reserved in the device buffer; for a hook that only aggregates, what its aggregates counted).", "", counterType, statLabels)
	recordsDef  = newMetricDef("ncclhooks_records_total", "Records delivered to the sinks.", "", counterType, statLabels)
	droppedDef  = newMetricDef("ncclhooks_dropped_total", "Records lost, by stage: buffer_full (device buffer, drop_newest), overwritten (device buffer, overwrite_oldest), torn (never completed), ring_full (host ring).", "", counterType, append(statLabels[:len(statLabels):len(statLabels)], "stage"))
	dropStages  = []string{"buffer_full", "overwritten", "torn", "ring_full"}
	statMetrics = []*metricDef{matchedDef, recordsDef, droppedDef}
)

// samples calls fn with every series of device's metrics (-1: every
// device's), in a stable order: by device, then metric name, then labels.
// p.mu must be held.
func (p *Prom) samples(device int, fn func(*sample)) {
	var out []sample
	host := p.opts.Host
	for k, a := range p.aggs {
		if device >= 0 && k.device != device {
			continue
		}
		f := p.families[k.id]
		dev := strconv.Itoa(k.device)
		id := p.identity(k.device)
		for _, r := range a.Rows {
			labels := []string{host, id.GPU, id.Rank, k.id.hook, dev}
			if f.byFunc {
				labels = append(labels, funcLabel(r))
			}
			if f.byChan {
				labels = append(labels, keyLabel(r.ChannelID))
			}
			if f.byComm {
				labels = append(labels, keyLabel(r.Comm))
			}
			out = f.rowSamples(out, a.Info.Agg, r, k.device, labels)
		}
	}
	if p.opts.DumpStats {
		for k, s := range p.stats {
			if device >= 0 && k.device != device {
				continue
			}
			id := p.identity(k.device)
			l := []string{host, id.GPU, id.Rank, k.hook, strconv.Itoa(k.device)}
			out = append(out, intSample(matchedDef, k.device, l, int64(s.Matched)), intSample(recordsDef, k.device, l, int64(s.Records)))
			for i, n := range []uint64{s.DroppedBufferFull, s.DroppedOverwritten, s.DroppedTorn, s.DroppedRingFull} {
				out = append(out, intSample(droppedDef, k.device, append(l[:len(l):len(l)], dropStages[i]), int64(n)))
			}
		}
	}
	slices.SortFunc(out, func(a, b sample) int {
		return cmp.Or(cmp.Compare(a.device, b.device), cmp.Compare(a.def.name, b.def.name), slices.Compare(a.labels, b.labels))
	})
	for i := range out {
		fn(&out[i])
	}
}

// rowSamples appends the series of one aggregate row.
func (f *family) rowSamples(out []sample, a *config.Aggregate, r AggRow, device int, labels []string) []sample {
	integer := a.Value == nil || !a.Value.Type.IsFloat()
	sum := float64(r.SumInt)
	if !integer {
		sum = r.SumFloat
	}
	sum /= f.unit
	// value is v in the family's unit, exact where no unit divides it.
	value := func(def *metricDef, v int64) sample {
		if f.unit == 1 {
			return intSample(def, device, labels, v)
		}
		return sample{def: def, device: device, labels: labels, value: float64(v) / f.unit}
	}
	switch f.kind {
	case config.AggCount:
		out = append(out, intSample(f.main, device, labels, int64(r.Count)))
	case config.AggSum:
		s := sample{def: f.main, device: device, labels: labels, value: sum}
		if integer && f.unit == 1 {
			s = intSample(f.main, device, labels, r.SumInt)
		}
		out = append(out, s, intSample(f.samples, device, labels, int64(r.Count)))
	case config.AggMin:
		out = append(out, value(f.main, r.Min))
	case config.AggMax:
		out = append(out, value(f.main, r.Max))
	case config.AggHistogram:
		s := sample{def: f.main, device: device, labels: labels, count: r.Count, sum: sum}
		for i, b := range r.Buckets {
			if b.LE == nil {
				continue // +Inf is the count
			}
			if f.log2 && (!f.seen || i < f.lo-1 || i > f.hi) {
				continue
			}
			s.bounds = append(s.bounds, float64(*b.LE)/f.unit)
			s.cumul = append(s.cumul, b.Count)
		}
		out = append(out, s)
	}
	return out
}

// promMetric is the sample as a Prometheus metric.
func (s *sample) promMetric() prometheus.Metric {
	switch s.def.typ {
	case counterType:
		return prometheus.MustNewConstMetric(s.def.desc, prometheus.CounterValue, s.value, s.labels...)
	case gaugeType:
		return prometheus.MustNewConstMetric(s.def.desc, prometheus.GaugeValue, s.value, s.labels...)
	}
	buckets := make(map[float64]uint64, len(s.bounds))
	for i, b := range s.bounds {
		buckets[b] = s.cumul[i]
	}
	m, err := prometheus.NewConstHistogram(s.def.desc, s.count, s.sum, buckets, s.labels...)
	if err != nil {
		return prometheus.NewInvalidMetric(s.def.desc, err)
	}
	return m
}

func funcLabel(r AggRow) string {
	switch {
	case r.FuncID == -2:
		return "overflow"
	case r.FuncName != "":
		return r.FuncName
	}
	return strconv.Itoa(r.FuncID)
}

func keyLabel(k int) string {
	if k == -2 {
		return "overflow"
	}
	return strconv.Itoa(k)
}
