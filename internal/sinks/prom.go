package sinks

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

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
	// Host is the host label; default os.Hostname.
	Host string
	// PID names the textfiles; default os.Getpid.
	PID int
	// FilePrefix names the textfiles: <FilePrefix>_<gpu>_<pid>.prom;
	// default "ncclhooks".
	FilePrefix string
}

// DeviceIdentity is what tells one process's device from another's on the
// node (every process of a job may see its GPU as device 0): the GPU, named
// by GPUName, and the rank of the first communicator on it. Both are labels
// of every series, with values bounded by the node's GPUs and the job's ranks.
// The rest names the device in OTLP's resource attributes only.
type DeviceIdentity struct {
	GPU  string
	Rank string // "" when no communicator named one
	// UUID is the GPU's ("" on the cpu backend); the first communicator on
	// the device is CommID (0: none), CommName, one of NRanks ranks.
	UUID     string
	CommID   uint64
	CommName string
	NRanks   int
}

// GPUName is how the Prometheus outputs name a GPU: its UUID where one is
// known, else dev<ordinal>.
func GPUName(ordinal int, uuid string) string {
	if uuid != "" {
		return uuid
	}
	return "dev" + strconv.Itoa(ordinal)
}

// Prom writes node-exporter textfile collector files, one per device of the
// process (<prefix>_<gpu>_<pid>.prom, replaced atomically at every dump: the
// processes of a job sharing one directory never write each other's file),
// and optionally serves the same metrics on /metrics (Serve) and posts them
// to an OTLP receiver at every dump (ExportOTLP). Aggregates become real Prometheus
// types: count -> counter (_total), sum -> counters of the sum and of the
// observations, min/max -> gauges, histogram -> histogram with cumulative
// buckets. An aggregate of the catalogue's duration (ns) is exposed in
// seconds, named *_seconds, as Prometheus conventions ask. Labels are host,
// gpu, rank, hook, device, and func/channel only where the aggregate is keyed
// by them, so cardinality is bounded by the node's GPUs, the job's ranks and
// the profile (the pid names the file, never a label).
type Prom struct {
	dir  string
	opts PromOptions

	mu       sync.Mutex
	devices  map[int]bool
	ids      map[int]DeviceIdentity
	stats    map[statKey]Stats
	aggs     map[aggKey]AggSnapshot
	families map[aggID]*family
	names    map[string]aggID // family name -> its owner
	regs     map[int]*prometheus.Registry

	srv  *http.Server
	addr net.Addr

	start time.Time   // when the sink opened: the start of every cumulative OTLP point
	otlp  *otlpExport // nil without an OTLP export
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
// missing); with dir "" it writes none (Serve adds the endpoint).
func NewProm(dir string, opts PromOptions) (*Prom, error) {
	if opts.PID == 0 {
		opts.PID = os.Getpid()
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
	p := &Prom{dir: dir, opts: opts, devices: map[int]bool{}, ids: map[int]DeviceIdentity{}, stats: map[statKey]Stats{},
		aggs: map[aggKey]AggSnapshot{}, families: map[aggID]*family{}, names: map[string]aggID{}, regs: map[int]*prometheus.Registry{},
		start: time.Now()}
	return p, nil
}

// Identify names a device's GPU and rank, for its textfile's name and its
// labels. Call it before the device's first dump: a series whose labels
// change is a new series.
func (p *Prom) Identify(device int, id DeviceIdentity) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.ids[device] = id
}

// NameGPU names a device's GPU by its UUID (GPUName) once the device is
// loaded, keeping the rest Identify gave: before the load only the ordinal
// is known. Call it before the device's first dump.
func (p *Prom) NameGPU(device int, uuid string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	id := p.identity(device)
	id.GPU, id.UUID = GPUName(device, uuid), uuid
	p.ids[device] = id
}

// identity is a device's identity, the ordinal's defaults where Identify
// was not called.
func (p *Prom) identity(device int) DeviceIdentity {
	if id, ok := p.ids[device]; ok {
		return id
	}
	return DeviceIdentity{GPU: GPUName(device, "")}
}

// Path is the textfile of a device ("" without a textfile directory).
func (p *Prom) Path(device int) string {
	if p.dir == "" {
		return ""
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.pathLocked(device)
}

func (p *Prom) pathLocked(device int) string {
	gpu := strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '-':
			return r
		}
		return '_'
	}, p.identity(device).GPU)
	return filepath.Join(p.dir, fmt.Sprintf("%s_%s_%d.prom", p.opts.FilePrefix, gpu, p.opts.PID))
}

// Records ignores records: Prometheus gets aggregates and statistics only.
func (p *Prom) Records([]Record) error { return nil }

// time is when the dump was taken (now for a dump that does not say).
func (d *Dump) time() time.Time {
	switch {
	case len(d.Stats) > 0 && d.Stats[0].TimeUnixNs > 0:
		return time.Unix(0, d.Stats[0].TimeUnixNs)
	case len(d.Aggs) > 0 && d.Aggs[0].TimeUnixNs > 0:
		return time.Unix(0, d.Aggs[0].TimeUnixNs)
	}
	return time.Now()
}

// Dump updates the metrics, rewrites every known device's textfile and
// hands the OTLP export its request (a final dump waits for it, at most
// OTLPOptions.FinalWait).
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
	paths := map[int]string{}
	for dev := range p.devices {
		devices = append(devices, dev)
		paths[dev] = p.pathLocked(dev)
		if p.regs[dev] == nil {
			reg := prometheus.NewRegistry()
			reg.MustRegister(promCollector{p: p, device: dev})
			p.regs[dev] = reg
		}
	}
	p.mu.Unlock()
	if p.dir == "" {
		p.exportOTLP(d.Final, d.time())
		return nil // /metrics or OTLP only
	}
	slices.Sort(devices)
	var errs []error
	for _, dev := range devices {
		// WriteToTextfile writes a temporary file next to the target (its
		// name does not end in .prom, so the collector ignores it) and
		// renames it over the target: a reader sees the old or the new file.
		if err := prometheus.WriteToTextfile(paths[dev], p.regs[dev]); err != nil {
			errs = append(errs, fmt.Errorf("prometheus textfile for device %d: %w", dev, err))
		}
	}
	p.exportOTLP(d.Final, d.time())
	return errors.Join(errs...)
}
