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
	"unicode"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/ncclhooks/ncclhooks/config"
	"github.com/ncclhooks/ncclhooks/hookgen"
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

// family is how one aggregate is exposed.
type family struct {
	name     string            // without suffixes
	agg      *config.Aggregate // the definition it was made from
	unit     float64           // exposed = value / unit (1e9 for ns -> s); dividing keeps 3ns at 3e-09 exactly
	kind     config.AggKind
	byFunc   bool
	byChan   bool
	log2     bool
	lo, hi   int // log2 only: bucket range ever non-empty (sticky, so series keep their buckets)
	seen     bool
	main     *prometheus.Desc
	samples  *prometheus.Desc // sum kind: the observation count
	labelSet []string
}

// Capture statistics descriptors.
var (
	statLabels  = []string{"host", "hook", "device"}
	matchedDesc = prometheus.NewDesc("ncclhooks_matched_total", "Events that matched the hook's predicate (positions reserved in the device buffer).", statLabels, nil)
	recordsDesc = prometheus.NewDesc("ncclhooks_records_total", "Records delivered to the sinks.", statLabels, nil)
	droppedDesc = prometheus.NewDesc("ncclhooks_dropped_total", "Records lost, by stage: buffer_full (device buffer, drop_newest), overwritten (device buffer, overwrite_oldest), torn (never completed), ring_full (host ring).", append(statLabels[:3:3], "stage"), nil)
	dropStages  = []string{"buffer_full", "overwritten", "torn", "ring_full"}
)

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

// listenAddr applies the loopback default to a listen address.
func listenAddr(s string) (string, error) {
	if _, err := strconv.Atoi(s); err == nil {
		return net.JoinHostPort("127.0.0.1", s), nil
	}
	host, port, err := net.SplitHostPort(s)
	if err != nil {
		return "", fmt.Errorf("prometheus listen address %q: want PORT, :PORT or HOST:PORT", s)
	}
	if host == "" {
		host = "127.0.0.1"
	}
	return net.JoinHostPort(host, port), nil
}

func (p *Prom) serve(a string) error {
	addr, err := listenAddr(a)
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("prometheus /metrics endpoint: %w (choose another port)", err)
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(promCollector{p: p, device: -1})
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError}))
	p.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	p.addr = ln.Addr()
	go p.srv.Serve(ln) // returns http.ErrServerClosed at Close
	return nil
}

// Addr is the /metrics endpoint's address, nil without one.
func (p *Prom) Addr() net.Addr { return p.addr }

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

// Close stops the /metrics endpoint. The textfiles stay: they hold the
// final values.
func (p *Prom) Close() error {
	if p.srv == nil {
		return nil
	}
	err := p.srv.Close()
	p.srv = nil
	if err != nil {
		return fmt.Errorf("prometheus /metrics endpoint: %w", err)
	}
	return nil
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
	}
	f.labelSet = []string{"host", "hook", "device"}
	if f.byFunc {
		f.labelSet = append(f.labelSet, "func")
	}
	if f.byChan {
		f.labelSet = append(f.labelSet, "channel")
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
	switch a.Kind {
	case config.AggCount:
		f.main = prometheus.NewDesc(counterName(base), help, f.labelSet, nil)
	case config.AggSum:
		f.main = prometheus.NewDesc(counterName(base), help, f.labelSet, nil)
		f.samples = prometheus.NewDesc(counterName(base+"_observations"), "Values added to the ncclhooks "+what+".", f.labelSet, nil)
	case config.AggMin, config.AggMax:
		f.main = prometheus.NewDesc(gaugeName(base), "ncclhooks "+what+" over the job so far.", f.labelSet, nil)
	case config.AggHistogram:
		f.main = prometheus.NewDesc(base, help, f.labelSet, nil)
	}
	p.families[id] = f
	p.names[base] = id
	return f
}

// sameShape reports whether two aggregates can share a metric family: same
// kind, keys, value expression (the family's help names it) and buckets.
func sameShape(f, g *family) bool {
	if f.kind != g.kind || f.byFunc != g.byFunc || f.byChan != g.byChan || f.log2 != g.log2 {
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
		for _, r := range a.Rows {
			labels := []string{host, k.id.hook, dev}
			if f.byFunc {
				labels = append(labels, funcLabel(r))
			}
			if f.byChan {
				labels = append(labels, keyLabel(r.ChannelID))
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
		l := []string{host, k.hook, strconv.Itoa(k.device)}
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
