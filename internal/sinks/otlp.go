package sinks

// The OTLP export (NCCL_HOOKS_OTLP_ENDPOINT): the metrics of metrics.go as
// an OTLP/HTTP protobuf ExportMetricsServiceRequest, posted at every dump by
// one goroutine of the sink's own.
//
// Only the OTLP data model's message types (go.opentelemetry.io/proto/otlp
// metrics/v1, common/v1, resource/v1) are linked: the request's envelope,
// ExportMetricsServiceRequest { repeated ResourceMetrics resource_metrics = 1; },
// and the response's partial_success are written and read with protowire,
// since the package that defines them (collector/metrics/v1) also holds the
// gRPC service and its gateway, and would link gRPC into the plugin.

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	metricspb "go.opentelemetry.io/proto/otlp/metrics/v1"
	resourcepb "go.opentelemetry.io/proto/otlp/resource/v1"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/ncclhooks/ncclhooks/internal/abi"
)

// DefaultOTLPTimeout bounds one export (NCCL_HOOKS_OTLP_TIMEOUT).
const DefaultOTLPTimeout = 5 * time.Second

// OTLPOptions configure the OTLP export.
type OTLPOptions struct {
	// Endpoint is the receiver: a URL whose path is used as given, or,
	// without a path, the OTLP/HTTP default /v1/metrics is added
	// ("http://collector:4318" posts to http://collector:4318/v1/metrics);
	// without a scheme, http.
	Endpoint string
	// Headers are added to every request ("key=value,key2=value2", the
	// values percent-decoded, as OTEL_EXPORTER_OTLP_HEADERS). They may hold
	// credentials: no message ever quotes them.
	Headers string
	// Timeout bounds each export (DefaultOTLPTimeout when 0).
	Timeout time.Duration
	// FinalWait is the longest a final Dump waits for its export (Timeout
	// when 0 or longer): it runs in NCCL's finalize, which has a bound of
	// its own.
	FinalWait time.Duration
	// Job names the job (resource attribute ncclhooks.job; "" left out).
	Job string
	// PID is the process (process.pid); default the sink's PID.
	PID int
	// Version is the plugin's build, the instrumentation scope's version.
	Version string
	// Log receives the export's WARN lines (NCCL's logger): one when the
	// export fails and is disabled, one when the receiver rejects points.
	Log func(level int, msg string)
}

// otlpExport posts the requests the dumps build, one at a time, on a
// goroutine of its own: a dump never waits on the network but a final one,
// for at most FinalWait. The first failure (unreachable, a timeout, an HTTP
// error) disables the export with one WARN.
type otlpExport struct {
	url     string // the redacted URL, for messages
	target  string
	headers http.Header
	opts    OTLPOptions
	client  *http.Client
	start   uint64 // start_time_unix_nano of every cumulative point

	mu       sync.Mutex
	next     *otlpBatch // built by a dump and not yet taken; a newer one replaces it
	disabled bool
	rejected bool // the partial-success WARN was logged
	warned   bool // the export failed and its WARN was logged
	exported int  // requests the receiver accepted
	wake     chan struct{}
	stop     chan struct{}
	done     chan struct{}
}

// otlpBatch is one request; done is closed when it was posted, replaced by
// a newer one or given up.
type otlpBatch struct {
	body []byte
	done chan struct{}
}

// ExportOTLP starts exporting the metrics to an OTLP/HTTP receiver at every
// dump (NCCL_HOOKS_OTLP_ENDPOINT). It opens no connection: an unreachable
// receiver is found at the first export. An error (an endpoint or headers
// that cannot be used) leaves the sink as it was.
func (p *Prom) ExportOTLP(o OTLPOptions) error {
	if u := p.OTLPEndpoint(); u != "" {
		return fmt.Errorf("OTLP export: already exporting to %s", u)
	}
	target, err := otlpURL(o.Endpoint)
	if err != nil {
		return err
	}
	hdr, err := otlpHeaders(o.Headers)
	if err != nil {
		return err
	}
	if o.Timeout <= 0 {
		o.Timeout = DefaultOTLPTimeout
	}
	if o.FinalWait <= 0 || o.FinalWait > o.Timeout {
		o.FinalWait = o.Timeout
	}
	if o.PID == 0 {
		o.PID = p.opts.PID
	}
	if o.Log == nil {
		o.Log = func(int, string) {}
	}
	u, _ := url.Parse(target)
	e := &otlpExport{url: u.Redacted(), target: target, headers: hdr, opts: o,
		client: &http.Client{
			Timeout: o.Timeout,
			// A receiver's redirect is not followed: the body would be lost.
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
			Transport: &http.Transport{Proxy: http.ProxyFromEnvironment, MaxIdleConns: 1, IdleConnTimeout: time.Minute,
				TLSHandshakeTimeout: o.Timeout, ResponseHeaderTimeout: o.Timeout},
		},
		start: uint64(p.start.UnixNano()),
		wake:  make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{})}
	p.mu.Lock()
	p.otlp = e
	p.mu.Unlock()
	go e.run()
	return nil
}

// OTLPEndpoint is the URL the metrics are posted to (credentials redacted),
// "" without an OTLP export.
func (p *Prom) OTLPEndpoint() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.otlp == nil {
		return ""
	}
	return p.otlp.url
}

// OTLPExported is how many requests the receiver accepted, and whether the
// export is disabled (after its WARN).
func (p *Prom) OTLPExported() (n int, disabled bool) {
	p.mu.Lock()
	e := p.otlp
	p.mu.Unlock()
	if e == nil {
		return 0, false
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.exported, e.disabled
}

// otlpURL is the URL an endpoint knob names.
func otlpURL(s string) (string, error) {
	s = strings.TrimSpace(s)
	if !strings.Contains(s, "://") {
		s = "http://" + s
	}
	u, err := url.Parse(s)
	if err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") || u.RawQuery != "" || u.Fragment != "" {
		return "", fmt.Errorf("OTLP endpoint %q: want http://HOST:PORT (the path /v1/metrics is added) or a full URL such as https://HOST:PORT/v1/metrics", redactURL(s))
	}
	if u.Path == "" || u.Path == "/" {
		u.Path = "/v1/metrics"
	}
	return u.String(), nil
}

// redactURL hides the password of a URL that may not parse.
func redactURL(s string) string {
	if u, err := url.Parse(s); err == nil {
		return u.Redacted()
	}
	if i, j := strings.Index(s, "://"), strings.LastIndex(s, "@"); i >= 0 && j > i {
		return s[:i+3] + "xxxxx" + s[j:]
	}
	return s
}

// otlpHeaders parses "k=v,k2=v2" (values percent-decoded). Errors name the
// key only: values are often credentials.
func otlpHeaders(s string) (http.Header, error) {
	h := http.Header{}
	for _, kv := range strings.Split(s, ",") {
		if strings.TrimSpace(kv) == "" {
			continue
		}
		k, v, ok := strings.Cut(kv, "=")
		k = strings.TrimSpace(k)
		if !ok || k == "" || strings.ContainsAny(k, " \t\r\n:") {
			return nil, fmt.Errorf("OTLP headers: entry %d is not key=value (give key=value,key2=value2)", len(h)+1)
		}
		dv, err := url.PathUnescape(strings.TrimSpace(v))
		if err != nil || strings.ContainsAny(dv, "\r\n") {
			return nil, fmt.Errorf("OTLP headers: the value of %q is not a header value (percent-encode it)", k)
		}
		switch http.CanonicalHeaderKey(k) {
		case "Content-Type", "Content-Length", "Content-Encoding", "Host":
			return nil, fmt.Errorf("OTLP headers: %q is set by the exporter", k)
		}
		h.Add(k, dv)
	}
	return h, nil
}

// exportOTLP builds the request of the metrics as the dump at now left them
// and hands it to the export goroutine; a final dump waits for it, at most
// FinalWait. Called by Dump, p.mu not held.
func (p *Prom) exportOTLP(final bool, now time.Time) {
	p.mu.Lock()
	e := p.otlp
	if e == nil || e.isDisabled() {
		p.mu.Unlock()
		return
	}
	body := p.otlpRequest(e, uint64(now.UnixNano()))
	p.mu.Unlock()
	if body == nil {
		return // nothing known yet
	}
	b := &otlpBatch{body: body, done: make(chan struct{})}
	e.mu.Lock()
	if e.disabled {
		e.mu.Unlock()
		return
	}
	if e.next != nil {
		close(e.next.done) // superseded: cumulative values, the newer holds it
	}
	e.next = b
	e.mu.Unlock()
	select {
	case e.wake <- struct{}{}:
	default:
	}
	if final {
		t := time.NewTimer(e.opts.FinalWait)
		defer t.Stop()
		select {
		case <-b.done:
		case <-t.C:
			// The finalize cannot wait longer: a receiver this slow is
			// taken as hung, and the final values as not exported.
			e.fail(fmt.Errorf("the final dump's export had no answer within %v (at finalize the wait is at most NCCL_HOOKS_OTLP_TIMEOUT and half of NCCL_HOOKS_FINALIZE_TIMEOUT)", e.opts.FinalWait))
		}
	}
}

func (e *otlpExport) isDisabled() bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.disabled
}

// run posts the batches until the export is closed or disabled.
func (e *otlpExport) run() {
	defer close(e.done)
	for {
		select {
		case <-e.stop:
			return
		case <-e.wake:
		}
		e.mu.Lock()
		b := e.next
		e.next = nil
		e.mu.Unlock()
		if b == nil {
			continue
		}
		rejected, msg, err := e.post(b.body)
		if err != nil {
			e.fail(err)
			close(b.done)
			return
		}
		e.mu.Lock()
		e.exported++
		warnRejected := rejected > 0 && !e.rejected
		e.rejected = e.rejected || warnRejected
		e.mu.Unlock()
		if warnRejected {
			e.opts.Log(abi.LogWarn, fmt.Sprintf("ncclhooks: the OTLP receiver at %s rejected %d data points (the export goes on; this warning is not repeated): %s", e.url, rejected, msg))
		}
		close(b.done)
	}
}

// fail disables the export with its one WARN (the first failure's).
func (e *otlpExport) fail(err error) {
	e.mu.Lock()
	warned := e.warned
	e.warned, e.disabled = true, true
	if e.next != nil {
		close(e.next.done)
		e.next = nil
	}
	e.mu.Unlock()
	if !warned {
		e.opts.Log(abi.LogWarn, fmt.Sprintf("ncclhooks: OTLP export to %s disabled, everything else stays active (NCCL_HOOKS_OTLP_ENDPOINT; this warning is not repeated): %v", e.url, err))
	}
}

// post sends one request and reads the receiver's answer: the rejected
// points of a partial success, or an error for anything but a 2xx.
func (e *otlpExport) post(body []byte) (rejected int64, msg string, err error) {
	ctx, cancel := context.WithTimeout(context.Background(), e.opts.Timeout)
	defer cancel()
	go func() {
		select {
		case <-e.stop:
			cancel()
		case <-ctx.Done():
		}
	}()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, e.target, bytes.NewReader(body))
	if err != nil {
		return 0, "", err
	}
	for k, v := range e.headers {
		req.Header[k] = v
	}
	req.Header.Set("Content-Type", "application/x-protobuf")
	req.Header.Set("User-Agent", "ncclhooks/"+e.opts.Version)
	resp, err := e.client.Do(req)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err // the URL is in the message already, redacted
		}
		if errors.Is(err, context.DeadlineExceeded) || (ue != nil && ue.Timeout()) {
			return 0, "", fmt.Errorf("no answer within %v (NCCL_HOOKS_OTLP_TIMEOUT): %v", e.opts.Timeout, err)
		}
		return 0, "", err
	}
	defer resp.Body.Close()
	data, rerr := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if resp.StatusCode/100 != 2 {
		return 0, "", fmt.Errorf("HTTP %s: %s", resp.Status, statusMessage(data, resp.Header.Get("Content-Type")))
	}
	if rerr != nil {
		return 0, "", fmt.Errorf("reading the answer: %v", rerr)
	}
	rejected, msg = partialSuccess(data)
	return rejected, msg, nil
}

// Close stops the export; a request under way is abandoned.
func (e *otlpExport) close() {
	select {
	case <-e.stop:
	default:
		close(e.stop)
	}
	<-e.done
	e.mu.Lock()
	defer e.mu.Unlock()
	e.disabled = true // a later dump builds nothing and waits for nothing
	if e.next != nil {
		close(e.next.done)
		e.next = nil
	}
}

// partialSuccess reads ExportMetricsServiceResponse.partial_success (1):
// rejected_data_points (1), error_message (2).
func partialSuccess(b []byte) (rejected int64, msg string) {
	ps := protoField(b, 1, protowire.BytesType)
	if ps == nil {
		return 0, ""
	}
	for len(ps) > 0 {
		num, typ, n := protowire.ConsumeTag(ps)
		if n < 0 {
			break
		}
		ps = ps[n:]
		switch {
		case num == 1 && typ == protowire.VarintType:
			v, m := protowire.ConsumeVarint(ps)
			if m < 0 {
				return rejected, msg
			}
			rejected, ps = int64(v), ps[m:]
			continue
		case num == 2 && typ == protowire.BytesType:
			v, m := protowire.ConsumeBytes(ps)
			if m < 0 {
				return rejected, msg
			}
			msg, ps = quoteExcerpt(v), ps[m:]
			continue
		}
		m := protowire.ConsumeFieldValue(num, typ, ps)
		if m < 0 {
			break
		}
		ps = ps[m:]
	}
	return rejected, msg
}

// statusMessage is what an error answer says: google.rpc.Status's message
// (2) of a protobuf body, else an excerpt of the text.
func statusMessage(b []byte, ctype string) string {
	if strings.HasPrefix(ctype, "application/x-protobuf") {
		if m := protoField(b, 2, protowire.BytesType); m != nil {
			return quoteExcerpt(m)
		}
	}
	if len(b) == 0 {
		return "no message"
	}
	return quoteExcerpt(b)
}

// protoField is the last value of a length-delimited field of a message,
// nil when absent or malformed.
func protoField(b []byte, field protowire.Number, want protowire.Type) []byte {
	var out []byte
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return nil
		}
		b = b[n:]
		if num == field && typ == want {
			v, m := protowire.ConsumeBytes(b)
			if m < 0 {
				return nil
			}
			out, b = v, b[m:]
			continue
		}
		m := protowire.ConsumeFieldValue(num, typ, b)
		if m < 0 {
			return nil
		}
		b = b[m:]
	}
	return out
}

// quoteExcerpt quotes at most 200 bytes of a receiver's message.
func quoteExcerpt(b []byte) string {
	if len(b) > 200 {
		return strconv.Quote(string(b[:200])) + "..."
	}
	return strconv.Quote(string(b))
}

// otlpRequest encodes the metrics as an ExportMetricsServiceRequest: one
// ResourceMetrics per device (its GPU, rank and first communicator are the
// resource's), the metrics with the Prometheus outputs' names, the labels
// as data point attributes. nil when there is nothing to export. p.mu held.
func (p *Prom) otlpRequest(e *otlpExport, now uint64) []byte {
	var (
		out      []byte
		rm       *metricspb.ResourceMetrics
		metric   *metricspb.Metric
		lastDev  = math.MinInt
		lastName string
	)
	flush := func() {
		if rm == nil {
			return
		}
		b, err := proto.MarshalOptions{Deterministic: true}.Marshal(rm)
		if err != nil {
			return // cannot happen with these types; the device is left out
		}
		out = protowire.AppendTag(out, 1, protowire.BytesType)
		out = protowire.AppendBytes(out, b)
	}
	scope := &commonpb.InstrumentationScope{Name: "ncclhooks", Version: e.opts.Version}
	p.samples(-1, func(s *sample) {
		if s.device != lastDev {
			flush()
			rm = &metricspb.ResourceMetrics{Resource: p.otlpResource(e, s.device),
				ScopeMetrics: []*metricspb.ScopeMetrics{{Scope: scope}}}
			lastDev, lastName, metric = s.device, "", nil
		}
		sm := rm.ScopeMetrics[0]
		if s.def.name != lastName {
			metric = &metricspb.Metric{Name: s.def.name, Description: s.def.help, Unit: s.def.unit}
			switch s.def.typ {
			case counterType:
				metric.Data = &metricspb.Metric_Sum{Sum: &metricspb.Sum{IsMonotonic: true,
					AggregationTemporality: metricspb.AggregationTemporality_AGGREGATION_TEMPORALITY_CUMULATIVE}}
			case gaugeType:
				metric.Data = &metricspb.Metric_Gauge{Gauge: &metricspb.Gauge{}}
			case histogramType:
				metric.Data = &metricspb.Metric_Histogram{Histogram: &metricspb.Histogram{
					AggregationTemporality: metricspb.AggregationTemporality_AGGREGATION_TEMPORALITY_CUMULATIVE}}
			}
			sm.Metrics = append(sm.Metrics, metric)
			lastName = s.def.name
		}
		attrs := make([]*commonpb.KeyValue, len(s.labels))
		for i, v := range s.labels {
			attrs[i] = strAttr(s.def.labels[i], v)
		}
		switch d := metric.Data.(type) {
		case *metricspb.Metric_Sum:
			d.Sum.DataPoints = append(d.Sum.DataPoints, numberPoint(s, attrs, e.start, now))
		case *metricspb.Metric_Gauge:
			// A gauge's point has no start: it is a value at a moment.
			d.Gauge.DataPoints = append(d.Gauge.DataPoints, numberPoint(s, attrs, 0, now))
		case *metricspb.Metric_Histogram:
			// OTLP's bucket counts are per bucket, Prometheus' cumulative;
			// the last bucket is (last bound, +Inf).
			counts := make([]uint64, len(s.cumul)+1)
			var prev uint64
			for i, c := range s.cumul {
				counts[i], prev = c-prev, c
			}
			counts[len(s.cumul)] = s.count - prev
			sum := s.sum
			d.Histogram.DataPoints = append(d.Histogram.DataPoints, &metricspb.HistogramDataPoint{Attributes: attrs,
				StartTimeUnixNano: e.start, TimeUnixNano: now, Count: s.count, Sum: &sum,
				BucketCounts: counts, ExplicitBounds: s.bounds})
		}
	})
	flush()
	return out
}

func numberPoint(s *sample, attrs []*commonpb.KeyValue, start, now uint64) *metricspb.NumberDataPoint {
	dp := &metricspb.NumberDataPoint{Attributes: attrs, StartTimeUnixNano: start, TimeUnixNano: now}
	if s.exact {
		dp.Value = &metricspb.NumberDataPoint_AsInt{AsInt: s.ival}
	} else {
		dp.Value = &metricspb.NumberDataPoint_AsDouble{AsDouble: s.value}
	}
	return dp
}

// otlpResource names one device of the process: the resource attributes
// the export promises (README "OTLP"). p.mu held.
func (p *Prom) otlpResource(e *otlpExport, device int) *resourcepb.Resource {
	id := p.identity(device)
	inst := p.opts.Host + "/" + id.GPU
	if id.Rank != "" {
		inst += "/rank" + id.Rank
	}
	attrs := []*commonpb.KeyValue{
		strAttr("service.name", "ncclhooks"),
		strAttr("service.instance.id", inst),
		strAttr("host.name", p.opts.Host),
		intAttr("process.pid", int64(e.opts.PID)),
		strAttr("ncclhooks.gpu", id.GPU),
		intAttr("ncclhooks.device", int64(device)),
	}
	if e.opts.Job != "" {
		attrs = append(attrs, strAttr("ncclhooks.job", e.opts.Job))
	}
	if id.UUID != "" {
		attrs = append(attrs, strAttr("ncclhooks.gpu.uuid", id.UUID))
	}
	if r, err := strconv.Atoi(id.Rank); err == nil {
		attrs = append(attrs, intAttr("ncclhooks.rank", int64(r)))
	}
	if id.NRanks > 0 {
		attrs = append(attrs, intAttr("ncclhooks.nranks", int64(id.NRanks)))
	}
	if id.CommID != 0 {
		attrs = append(attrs, strAttr("ncclhooks.comm_id", fmt.Sprintf("%#x", id.CommID)))
	}
	if id.CommName != "" {
		attrs = append(attrs, strAttr("ncclhooks.comm_name", id.CommName))
	}
	return &resourcepb.Resource{Attributes: attrs}
}

func strAttr(k, v string) *commonpb.KeyValue {
	return &commonpb.KeyValue{Key: k, Value: &commonpb.AnyValue{Value: &commonpb.AnyValue_StringValue{StringValue: v}}}
}

func intAttr(k string, v int64) *commonpb.KeyValue {
	return &commonpb.KeyValue{Key: k, Value: &commonpb.AnyValue{Value: &commonpb.AnyValue_IntValue{IntValue: v}}}
}
