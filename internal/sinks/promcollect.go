package sinks

// The collector: the metrics of the last dumps (metrics.go), for the
// textfiles and /metrics.

import "github.com/prometheus/client_golang/prometheus"

// promCollector exposes one device's metrics (device -1: all devices).
// It describes nothing, so the registry treats it as unchecked: the metric
// set follows the dumps.
type promCollector struct {
	p      *Prom
	device int
}

func (promCollector) Describe(chan<- *prometheus.Desc) {}

func (c promCollector) Collect(ch chan<- prometheus.Metric) {
	c.p.mu.Lock()
	defer c.p.mu.Unlock()
	c.p.samples(c.device, func(s *sample) { ch <- s.promMetric() })
}
