package sinks

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
)

// PromOptions configure the Prometheus sink.
type PromOptions struct {
	// DumpStats adds the capture statistics (ncclhooks_matched_total,
	// ncclhooks_records_total, ncclhooks_dropped_total{stage}) for every
	// known hook and device at every dump, idle ones too. Off by default:
	// the default output is the profile's aggregates only
	// (NCCL_HOOKS_PROM_DUMP_STATS=1 turns it on).
	DumpStats bool
	// Addr, when set, serves /metrics over HTTP (NCCL_HOOKS_PROM_ADDR). A
	// bare port or ":port" binds to 127.0.0.1; give a host ("0.0.0.0:9464")
	// to listen elsewhere.
	Addr string
	// Host is the host label; default os.Hostname.
	Host string
	// FilePrefix names the textfiles: <FilePrefix>_dev<N>.prom; default "ncclhooks".
	FilePrefix string
}

// Prom writes node-exporter textfile collector files, one per device
// (<prefix>_dev<N>.prom, replaced atomically at every dump), and optionally
// serves the same metrics on /metrics. Aggregates become real Prometheus
// types: count -> counter (_total), sum -> counters of the sum and of the
// observations, min/max -> gauges, histogram -> histogram with cumulative
// buckets. An aggregate of the catalogue's duration (ns) is exposed in
// seconds, named *_seconds, as Prometheus conventions ask. Labels are host, hook, device, and func/channel only where the
// aggregate is keyed by them, so cardinality is bounded by the profile.
type Prom struct {
	dir  string
	opts PromOptions

	mu       sync.Mutex
	devices  map[int]bool
	stats    map[statKey]Stats
	aggs     map[aggKey]AggSnapshot
	families map[aggID]*family
	names    map[string]aggID // family name -> its owner
	regs     map[int]*prometheus.Registry

	srv  *http.Server
	addr net.Addr
}

type statKey struct {
	hook   string
	device int
}

type aggID struct{ hook, name string }

type aggKey struct {
	id     aggID
	device int
}

// NewProm returns a Prometheus sink writing textfiles into dir (created if
// missing); with dir "" it only serves opts.Addr.
func NewProm(dir string, opts PromOptions) (*Prom, error) {
	if dir == "" && opts.Addr == "" {
		return nil, errors.New("prometheus sink: give a textfile directory, a /metrics address, or both")
	}
	if opts.Host == "" {
		h, err := os.Hostname()
		if err != nil {
			h = "unknown"
		}
		opts.Host = h
	}
	if opts.FilePrefix == "" {
		opts.FilePrefix = "ncclhooks"
	}
	if dir != "" {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return nil, fmt.Errorf("prometheus textfile directory: %w", err)
		}
	}
	p := &Prom{dir: dir, opts: opts, devices: map[int]bool{}, stats: map[statKey]Stats{},
		aggs: map[aggKey]AggSnapshot{}, families: map[aggID]*family{}, names: map[string]aggID{}, regs: map[int]*prometheus.Registry{}}
	if opts.Addr != "" {
		if err := p.serve(opts.Addr); err != nil {
			return nil, err
		}
	}
	return p, nil
}

// Path is the textfile of a device ("" without a textfile directory).
func (p *Prom) Path(device int) string {
	if p.dir == "" {
		return ""
	}
	return filepath.Join(p.dir, fmt.Sprintf("%s_dev%d.prom", p.opts.FilePrefix, device))
}

// Records ignores records: Prometheus gets aggregates and statistics only.
func (p *Prom) Records([]Record) error { return nil }

// Dump updates the metrics and rewrites every known device's textfile.
func (p *Prom) Dump(d *Dump) error {
	p.mu.Lock()
	for _, s := range d.Stats {
		p.devices[s.Device] = true
		p.stats[statKey{s.Hook, s.Device}] = s
	}
	for _, a := range d.Aggs {
		if a.Info == nil || a.Info.Agg == nil {
			continue
		}
		p.devices[a.Device] = true
		id := aggID{a.Info.Hook, a.Info.Agg.Name}
		p.aggs[aggKey{id, a.Device}] = a
		p.family(a.Info).widen(a.Rows)
	}
	devices := make([]int, 0, len(p.devices))
	for dev := range p.devices {
		devices = append(devices, dev)
		if p.regs[dev] == nil {
			reg := prometheus.NewRegistry()
			reg.MustRegister(promCollector{p: p, device: dev})
			p.regs[dev] = reg
		}
	}
	p.mu.Unlock()
	if p.dir == "" {
		return nil // /metrics only
	}
	slices.Sort(devices)
	var errs []error
	for _, dev := range devices {
		// WriteToTextfile writes a temporary file next to the target (its
		// name does not end in .prom, so the collector ignores it) and
		// renames it over the target: a reader sees the old or the new file.
		if err := prometheus.WriteToTextfile(p.Path(dev), p.regs[dev]); err != nil {
			errs = append(errs, fmt.Errorf("prometheus textfile for device %d: %w", dev, err))
		}
	}
	return errors.Join(errs...)
}
