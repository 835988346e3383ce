package sinks

// The collector: the metrics of the last dumps, aggregate rows and capture
// statistics, for the textfiles and /metrics.

import (
	"strconv"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/ncclhooks/ncclhooks/internal/config"
)

// Capture statistics descriptors.
var (
	statLabels  = []string{"host", "gpu", "rank", "hook", "device"}
	matchedDesc = prometheus.NewDesc("ncclhooks_matched_total", "Events that matched the hook's predicate (positions reserved in the device buffer; for a hook that only aggregates, what its aggregates counted).", statLabels, nil)
	recordsDesc = prometheus.NewDesc("ncclhooks_records_total", "Records delivered to the sinks.", statLabels, nil)
	droppedDesc = prometheus.NewDesc("ncclhooks_dropped_total", "Records lost, by stage: buffer_full (device buffer, drop_newest), overwritten (device buffer, overwrite_oldest), torn (never completed), ring_full (host ring).", append(statLabels[:len(statLabels):len(statLabels)], "stage"), nil)
	dropStages  = []string{"buffer_full", "overwritten", "torn", "ring_full"}
)

// promCollector exposes one device's metrics (device -1: all devices).
// It describes nothing, so the registry treats it as unchecked: the metric
// set follows the dumps.
type promCollector struct {
	p      *Prom
	device int
}

func (promCollector) Describe(chan<- *prometheus.Desc) {}

func (c promCollector) Collect(ch chan<- prometheus.Metric) {
	p := c.p
	p.mu.Lock()
	defer p.mu.Unlock()
	host := p.opts.Host
	for k, a := range p.aggs {
		if c.device >= 0 && k.device != c.device {
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
			collectRow(ch, f, a.Info.Agg, r, labels)
		}
	}
	if !p.opts.DumpStats {
		return
	}
	for k, s := range p.stats {
		if c.device >= 0 && k.device != c.device {
			continue
		}
		id := p.identity(k.device)
		l := []string{host, id.GPU, id.Rank, k.hook, strconv.Itoa(k.device)}
		ch <- prometheus.MustNewConstMetric(matchedDesc, prometheus.CounterValue, float64(s.Matched), l...)
		ch <- prometheus.MustNewConstMetric(recordsDesc, prometheus.CounterValue, float64(s.Records), l...)
		for i, n := range []uint64{s.DroppedBufferFull, s.DroppedOverwritten, s.DroppedTorn, s.DroppedRingFull} {
			ch <- prometheus.MustNewConstMetric(droppedDesc, prometheus.CounterValue, float64(n), append(l, dropStages[i])...)
		}
	}
}

func collectRow(ch chan<- prometheus.Metric, f *family, a *config.Aggregate, r AggRow, labels []string) {
	sum := float64(r.SumInt)
	if a.Value != nil && a.Value.Type.IsFloat() {
		sum = r.SumFloat
	}
	sum /= f.unit
	switch f.kind {
	case config.AggCount:
		ch <- prometheus.MustNewConstMetric(f.main, prometheus.CounterValue, float64(r.Count), labels...)
	case config.AggSum:
		ch <- prometheus.MustNewConstMetric(f.main, prometheus.CounterValue, sum, labels...)
		ch <- prometheus.MustNewConstMetric(f.samples, prometheus.CounterValue, float64(r.Count), labels...)
	case config.AggMin:
		ch <- prometheus.MustNewConstMetric(f.main, prometheus.GaugeValue, float64(r.Min)/f.unit, labels...)
	case config.AggMax:
		ch <- prometheus.MustNewConstMetric(f.main, prometheus.GaugeValue, float64(r.Max)/f.unit, labels...)
	case config.AggHistogram:
		buckets := map[float64]uint64{}
		for i, b := range r.Buckets {
			if b.LE == nil {
				continue // +Inf is the count
			}
			if f.log2 && (!f.seen || i < f.lo-1 || i > f.hi) {
				continue
			}
			buckets[float64(*b.LE)/f.unit] = b.Count
		}
		m, err := prometheus.NewConstHistogram(f.main, r.Count, sum, buckets, labels...)
		if err != nil {
			m = prometheus.NewInvalidMetric(f.main, err)
		}
		ch <- m
	}
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
