// Package otlptest is an OTLP/HTTP metrics receiver for tests that decodes
// with the official OTLP types, never with ncclhooks' encoder.
//
// Receiver decodes every request body as the upstream
// go.opentelemetry.io/proto/otlp collector/metrics/v1
// ExportMetricsServiceRequest with proto.Unmarshal and refuses (HTTP 400,
// and an error the test reads) a request whose body has unknown fields at
// any depth, a content type other than application/x-protobuf, a method
// other than POST or another path; it answers a valid one with an
// ExportMetricsServiceResponse. Check holds a request to the OTLP metrics
// data model as the plugin promises it (cumulative monotonic sums,
// histograms whose bucket counts add up to their count, explicit bounds
// ascending, times set); Series flattens a request into Prometheus sample
// names and labels, so that a test compares it with the Prometheus
// textfiles of the same run.
package otlptest

import (
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	collectorpb "go.opentelemetry.io/proto/otlp/collector/metrics/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	metricspb "go.opentelemetry.io/proto/otlp/metrics/v1"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// Request is one request the receiver accepted.
type Request struct {
	Header http.Header
	Body   *collectorpb.ExportMetricsServiceRequest
}

// Receiver is an OTLP/HTTP metrics receiver on 127.0.0.1.
type Receiver struct {
	URL string // http://127.0.0.1:PORT/v1/metrics

	srv *http.Server
	ln  net.Listener

	mu       sync.Mutex
	reqs     []Request
	errs     []error
	status   int   // answer every request with this status (0: 200)
	rejected int64 // partial_success.rejected_data_points of each answer
	got      chan struct{}
}

// Start starts a receiver; Close it.
func Start() (*Receiver, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	r := &Receiver{URL: "http://" + ln.Addr().String() + "/v1/metrics", ln: ln, got: make(chan struct{}, 1)}
	r.srv = &http.Server{Handler: http.HandlerFunc(r.serve), ReadHeaderTimeout: 10 * time.Second}
	go r.srv.Serve(ln)
	return r, nil
}

// Fail makes the receiver answer every request with an HTTP status (503).
func (r *Receiver) Fail(status int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.status = status
}

// Reject makes the receiver answer with a partial success that rejected n
// data points.
func (r *Receiver) Reject(n int64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.rejected = n
}

// Close stops the receiver.
func (r *Receiver) Close() error { return r.srv.Close() }

// Requests are the requests accepted so far, and the errors of those refused.
func (r *Receiver) Requests() ([]Request, []error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.reqs), slices.Clone(r.errs)
}

// Wait waits until n requests arrived (accepted or refused), at most d.
func (r *Receiver) Wait(n int, d time.Duration) bool {
	deadline := time.Now().Add(d)
	for {
		r.mu.Lock()
		k := len(r.reqs) + len(r.errs)
		r.mu.Unlock()
		if k >= n {
			return true
		}
		left := time.Until(deadline)
		if left <= 0 {
			return false
		}
		select {
		case <-r.got:
		case <-time.After(min(left, 50*time.Millisecond)):
		}
	}
}

func (r *Receiver) serve(w http.ResponseWriter, q *http.Request) {
	defer func() {
		select {
		case r.got <- struct{}{}:
		default:
		}
	}()
	body, err := io.ReadAll(q.Body)
	var req *collectorpb.ExportMetricsServiceRequest
	switch {
	case err != nil:
	case q.Method != http.MethodPost:
		err = fmt.Errorf("method %s, want POST", q.Method)
	case q.URL.Path != "/v1/metrics":
		err = fmt.Errorf("path %s, want /v1/metrics", q.URL.Path)
	case q.Header.Get("Content-Type") != "application/x-protobuf":
		err = fmt.Errorf("content type %q, want application/x-protobuf", q.Header.Get("Content-Type"))
	default:
		req = &collectorpb.ExportMetricsServiceRequest{}
		if err = (proto.UnmarshalOptions{DiscardUnknown: false}).Unmarshal(body, req); err == nil {
			err = noUnknown(req.ProtoReflect(), "ExportMetricsServiceRequest")
		}
	}
	r.mu.Lock()
	status, rejected := r.status, r.rejected
	if err != nil {
		r.errs = append(r.errs, err)
	} else if status == 0 {
		r.reqs = append(r.reqs, Request{Header: q.Header.Clone(), Body: req})
	}
	r.mu.Unlock()
	w.Header().Set("Content-Type", "application/x-protobuf")
	if err != nil {
		w.WriteHeader(http.StatusBadRequest)
		return
	}
	if status != 0 {
		w.WriteHeader(status)
		return
	}
	resp := &collectorpb.ExportMetricsServiceResponse{}
	if rejected > 0 {
		resp.PartialSuccess = &collectorpb.ExportMetricsPartialSuccess{RejectedDataPoints: rejected, ErrorMessage: "test receiver rejects points"}
	}
	b, _ := proto.Marshal(resp)
	w.Write(b)
}

// noUnknown refuses a message with unknown fields at any depth: a field
// number or wire type that the official types do not have.
func noUnknown(m protoreflect.Message, path string) error {
	if u := m.GetUnknown(); len(u) > 0 {
		return fmt.Errorf("%s: %d bytes of unknown fields", path, len(u))
	}
	var err error
	m.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		p := path + "." + string(fd.Name())
		switch {
		case fd.IsList() && fd.Message() != nil:
			l := v.List()
			for i := 0; i < l.Len() && err == nil; i++ {
				err = noUnknown(l.Get(i).Message(), fmt.Sprintf("%s[%d]", p, i))
			}
		case fd.IsMap():
		case fd.Message() != nil:
			err = noUnknown(v.Message(), p)
		}
		return err == nil
	})
	return err
}

// Check holds a request to the data model the plugin promises: every
// resource has service.name, every metric a name and data, every sum is
// cumulative and monotonic, every histogram cumulative with ascending
// bounds and bucket counts (one more than the bounds) that add up to its
// count, every point has a time (and a cumulative one a start before it),
// and no point's attributes repeat a key.
func Check(req *collectorpb.ExportMetricsServiceRequest) error {
	var errs []error
	bad := func(f string, a ...any) { errs = append(errs, fmt.Errorf(f, a...)) }
	cum := metricspb.AggregationTemporality_AGGREGATION_TEMPORALITY_CUMULATIVE
	if len(req.ResourceMetrics) == 0 {
		bad("no resource metrics")
	}
	for _, rm := range req.ResourceMetrics {
		if _, ok := Attr(rm.GetResource().GetAttributes(), "service.name"); !ok {
			bad("a resource without service.name")
		}
		for _, sm := range rm.ScopeMetrics {
			for _, m := range sm.Metrics {
				attrs := func(kv []*commonpb.KeyValue) {
					seen := map[string]bool{}
					for _, a := range kv {
						if seen[a.Key] {
							bad("%s: attribute %s twice", m.Name, a.Key)
						}
						seen[a.Key] = true
					}
				}
				times := func(start, t uint64, cumulative bool) {
					if t == 0 || (cumulative && (start == 0 || start > t)) {
						bad("%s: point start %d time %d", m.Name, start, t)
					}
				}
				if m.Name == "" {
					bad("a metric without a name")
				}
				switch d := m.Data.(type) {
				case *metricspb.Metric_Sum:
					if d.Sum.AggregationTemporality != cum || !d.Sum.IsMonotonic {
						bad("%s: sum %v monotonic %v, want cumulative and monotonic", m.Name, d.Sum.AggregationTemporality, d.Sum.IsMonotonic)
					}
					for _, p := range d.Sum.DataPoints {
						attrs(p.Attributes)
						times(p.StartTimeUnixNano, p.TimeUnixNano, true)
						if p.Value == nil {
							bad("%s: a point without a value", m.Name)
						}
					}
				case *metricspb.Metric_Gauge:
					for _, p := range d.Gauge.DataPoints {
						attrs(p.Attributes)
						times(p.StartTimeUnixNano, p.TimeUnixNano, false)
						if p.Value == nil {
							bad("%s: a point without a value", m.Name)
						}
					}
				case *metricspb.Metric_Histogram:
					if d.Histogram.AggregationTemporality != cum {
						bad("%s: histogram %v, want cumulative", m.Name, d.Histogram.AggregationTemporality)
					}
					for _, p := range d.Histogram.DataPoints {
						attrs(p.Attributes)
						times(p.StartTimeUnixNano, p.TimeUnixNano, true)
						if len(p.BucketCounts) != len(p.ExplicitBounds)+1 {
							bad("%s: %d bucket counts for %d bounds", m.Name, len(p.BucketCounts), len(p.ExplicitBounds))
						}
						var n uint64
						for _, c := range p.BucketCounts {
							n += c
						}
						if n != p.Count {
							bad("%s: bucket counts add up to %d, count %d", m.Name, n, p.Count)
						}
						for i := 1; i < len(p.ExplicitBounds); i++ {
							if p.ExplicitBounds[i] <= p.ExplicitBounds[i-1] {
								bad("%s: bounds %v not strictly ascending", m.Name, p.ExplicitBounds)
								break
							}
						}
					}
				default:
					bad("%s: data %T, want a sum, gauge or histogram", m.Name, m.Data)
				}
			}
		}
	}
	return errors.Join(errs...)
}

// Attr is an attribute's value as a string (ints in decimal).
func Attr(kv []*commonpb.KeyValue, key string) (string, bool) {
	for _, a := range kv {
		if a.Key != key {
			continue
		}
		switch v := a.Value.GetValue().(type) {
		case *commonpb.AnyValue_StringValue:
			return v.StringValue, true
		case *commonpb.AnyValue_IntValue:
			return strconv.FormatInt(v.IntValue, 10), true
		case *commonpb.AnyValue_BoolValue:
			return strconv.FormatBool(v.BoolValue), true
		case *commonpb.AnyValue_DoubleValue:
			return strconv.FormatFloat(v.DoubleValue, 'g', -1, 64), true
		}
		return a.Value.String(), true
	}
	return "", false
}

// Series flattens a request into Prometheus samples: a sum or gauge is
// name{labels}, a histogram name_bucket{labels,le} (cumulative), name_count
// and name_sum, labels being the point's attributes, sorted, with values
// as Key formats them. The value of each is the point's.
func Series(req *collectorpb.ExportMetricsServiceRequest) map[string]float64 {
	out := map[string]float64{}
	for _, rm := range req.ResourceMetrics {
		for _, sm := range rm.ScopeMetrics {
			for _, m := range sm.Metrics {
				number := func(p *metricspb.NumberDataPoint) {
					v := p.GetAsDouble()
					if _, ok := p.Value.(*metricspb.NumberDataPoint_AsInt); ok {
						v = float64(p.GetAsInt())
					}
					out[Key(m.Name, labels(p.Attributes))] = v
				}
				switch d := m.Data.(type) {
				case *metricspb.Metric_Sum:
					for _, p := range d.Sum.DataPoints {
						number(p)
					}
				case *metricspb.Metric_Gauge:
					for _, p := range d.Gauge.DataPoints {
						number(p)
					}
				case *metricspb.Metric_Histogram:
					for _, p := range d.Histogram.DataPoints {
						l := labels(p.Attributes)
						out[Key(m.Name+"_count", l)] = float64(p.Count)
						out[Key(m.Name+"_sum", l)] = p.GetSum()
						var cum uint64
						for i, c := range p.BucketCounts {
							cum += c
							le := math.Inf(1)
							if i < len(p.ExplicitBounds) {
								le = p.ExplicitBounds[i]
							}
							out[Key(m.Name+"_bucket", append(slices.Clone(l), [2]string{"le", FormatLE(le)}))] = float64(cum)
						}
					}
				}
			}
		}
	}
	return out
}

func labels(kv []*commonpb.KeyValue) [][2]string {
	var l [][2]string
	for _, a := range kv {
		v, _ := Attr([]*commonpb.KeyValue{a}, a.Key)
		l = append(l, [2]string{a.Key, v})
	}
	return l
}

// FormatLE is how Key writes a bucket's upper bound.
func FormatLE(v float64) string {
	if math.IsInf(v, 1) {
		return "+Inf"
	}
	return strconv.FormatFloat(v, 'g', -1, 64)
}

// Key names one sample: name{k="v",...} with the labels sorted.
func Key(name string, l [][2]string) string {
	l = slices.Clone(l)
	slices.SortFunc(l, func(a, b [2]string) int { return strings.Compare(a[0], b[0]) })
	var b strings.Builder
	b.WriteString(name)
	b.WriteByte('{')
	for i, kv := range l {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, "%s=%q", kv[0], kv[1])
	}
	b.WriteByte('}')
	return b.String()
}

// PromSeries flattens a Prometheus text exposition (a textfile) as Series
// flattens a request: the samples Prometheus would scrape from it.
func PromSeries(text []byte) (map[string]float64, error) {
	parser := expfmt.NewTextParser(model.LegacyValidation)
	fams, err := parser.TextToMetricFamilies(strings.NewReader(string(text)))
	if err != nil {
		return nil, err
	}
	out := map[string]float64{}
	for name, f := range fams {
		for _, m := range f.Metric {
			var l [][2]string
			for _, lp := range m.Label {
				l = append(l, [2]string{lp.GetName(), lp.GetValue()})
			}
			switch f.GetType() {
			case dto.MetricType_COUNTER:
				out[Key(name, l)] = m.GetCounter().GetValue()
			case dto.MetricType_GAUGE:
				out[Key(name, l)] = m.GetGauge().GetValue()
			case dto.MetricType_HISTOGRAM:
				h := m.GetHistogram()
				out[Key(name+"_count", l)] = float64(h.GetSampleCount())
				out[Key(name+"_sum", l)] = h.GetSampleSum()
				for _, b := range h.Bucket {
					out[Key(name+"_bucket", append(slices.Clone(l), [2]string{"le", FormatLE(b.GetUpperBound())}))] = float64(b.GetCumulativeCount())
				}
				out[Key(name+"_bucket", append(slices.Clone(l), [2]string{"le", "+Inf"}))] = float64(h.GetSampleCount())
			default:
				return nil, fmt.Errorf("%s: type %v", name, f.GetType())
			}
		}
	}
	return out, nil
}

// PromDir reads every textfile (*.prom) of dir as PromSeries does, the
// samples of all of them together.
func PromDir(dir string) (map[string]float64, error) {
	files, _ := filepath.Glob(filepath.Join(dir, "*.prom"))
	if len(files) == 0 {
		return nil, fmt.Errorf("no textfiles in %s", dir)
	}
	out := map[string]float64{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		s, err := PromSeries(b)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", f, err)
		}
		maps.Copy(out, s)
	}
	return out, nil
}

// Hanging is a server that accepts connections and reads them, never
// answering: an export to it waits for its timeout.
type Hanging struct {
	Endpoint string // http://ADDR/v1/metrics
	ln       net.Listener
	mu       sync.Mutex
	conns    []net.Conn
}

// Hang starts a Hanging server on 127.0.0.1.
func Hang() (*Hanging, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	h := &Hanging{Endpoint: "http://" + ln.Addr().String() + "/v1/metrics", ln: ln}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			h.mu.Lock()
			h.conns = append(h.conns, c)
			h.mu.Unlock()
			go io.Copy(io.Discard, c) // read, never answered
		}
	}()
	return h, nil
}

// Connections counts the connections accepted so far.
func (h *Hanging) Connections() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.conns)
}

// Close closes the listener and every connection.
func (h *Hanging) Close() {
	h.ln.Close()
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, c := range h.conns {
		c.Close()
	}
}
