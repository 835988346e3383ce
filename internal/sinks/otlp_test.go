package sinks_test

import (
	"fmt"
	"maps"
	"net"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	metricspb "go.opentelemetry.io/proto/otlp/metrics/v1"

	"github.com/ncclhooks/ncclhooks/internal/config"
	"github.com/ncclhooks/ncclhooks/internal/sinks"
	"github.com/ncclhooks/ncclhooks/internal/sinks/otlptest"
)

// warnLog collects the WARN lines an export logs.
type warnLog struct {
	mu    sync.Mutex
	warns []string
}

func (w *warnLog) log(level int, msg string) {
	if level != 2 {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.warns = append(w.warns, msg)
}

func (w *warnLog) get() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Clone(w.warns)
}

// otlpDump is a dump of every aggregate kind the metrics outputs expose.
func otlpDump(final bool, scale uint64) *sinks.Dump {
	lat := aggInfo("all", "latency", config.AggHistogram, "duration", []string{"funcId"}, config.Buckets{Log2: true})
	sizes := aggInfo("all", "bytes_moved", config.AggHistogram, "workCounter % 7", []string{"channelId"}, config.Buckets{Bounds: []uint64{2, 4}})
	items := aggInfo("all", "workItems", config.AggCount, "", []string{"funcId", "channelId"}, config.Buckets{})
	busy := aggInfo("all", "busy", config.AggSum, "duration", []string{"channelId"}, config.Buckets{})
	moved := aggInfo("all", "moved", config.AggSum, "workCounter", []string{"comm"}, config.Buckets{})
	low := aggInfo("all", "fastest", config.AggMin, "duration", nil, config.Buckets{})
	high := aggInfo("all", "last_work_counter", config.AggMax, "workCounter", nil, config.Buckets{})
	values := []uint64{1500 * scale, 1800, 2100, 2500, 9000, 0}
	le2, le4 := uint64(2), uint64(4)
	now := time.Now().UnixNano()
	return &sinks.Dump{Final: final,
		Stats: []sinks.Stats{{Hook: "all", Device: 0, Matched: 12 * scale, Records: 10 * scale, Dropped: 2, DroppedRingFull: 2, TimeUnixNs: now}, {Hook: "all", Device: 1, TimeUnixNs: now}},
		Aggs: []sinks.AggSnapshot{
			{Info: lat, Device: 0, Rows: []sinks.AggRow{log2Row(12, "AllReduce_Sum_f32_RING_LL", values), log2Row(-2, "", []uint64{7})}},
			{Info: sizes, Device: 0, Rows: []sinks.AggRow{{FuncID: -1, ChannelID: 3, Count: 5 * scale, SumInt: 17,
				Buckets: []sinks.Bucket{{LE: &le2, Count: 1}, {LE: &le4, Count: 3}, {Count: 5 * scale}}}}},
			{Info: items, Device: 0, Rows: []sinks.AggRow{{FuncID: 12, FuncName: "AllReduce_Sum_f32_RING_LL", ChannelID: 1, Count: 42 * scale}}},
			{Info: busy, Device: 0, Rows: []sinks.AggRow{{FuncID: -1, ChannelID: 0, Count: 3, SumInt: 3}, {FuncID: -1, ChannelID: -2, Count: 1, SumInt: 123456789}}},
			{Info: moved, Device: 0, Rows: []sinks.AggRow{{FuncID: -1, ChannelID: -1, Comm: 1, Count: 3, SumInt: 99 * int64(scale)}}},
			{Info: low, Device: 0, Rows: []sinks.AggRow{{FuncID: -1, ChannelID: -1, Count: 3, Min: 700}}},
			{Info: high, Device: 1, Rows: []sinks.AggRow{{FuncID: -1, ChannelID: -1, Count: 3, Max: -4}}},
		},
	}
}

// The OTLP export carries exactly what the Prometheus textfiles of the same
// dumps hold: a receiver that decodes with the official OTLP types (no
// unknown field tolerated, content type application/x-protobuf) gets, at
// each dump, every series of both devices' textfiles with the same name,
// labels (as data point attributes) and value; sums are cumulative and
// monotonic, counts exact integers, histograms cumulative with the
// textfiles' bounds and bucket counts that add up to their count, the
// seconds metrics in unit "s"; each device is one resource with its host,
// GPU (UUID), rank, first communicator and the job; the headers arrive.
func TestOTLPExportMatchesPrometheus(t *testing.T) {
	rcv, err := otlptest.Start()
	if err != nil {
		t.Fatal(err)
	}
	defer rcv.Close()
	dir := t.TempDir()
	p, err := sinks.NewProm(dir, sinks.PromOptions{Host: "node7", PID: 4242, DumpStats: true})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	uuid := "GPU-4996d1fc-e0c2-6530-2a9c-092dd0e46471"
	p.Identify(0, sinks.DeviceIdentity{GPU: "dev0", Rank: "3", CommID: 0xabc, CommName: "world", NRanks: 8})
	p.NameGPU(0, uuid)
	p.Identify(1, sinks.DeviceIdentity{GPU: "dev1"})
	var w warnLog
	if err := p.ExportOTLP(sinks.OTLPOptions{Endpoint: strings.TrimSuffix(rcv.URL, "/v1/metrics"), Headers: "Authorization=Bearer%20s3cret,x-tenant=t1",
		Job: "job-77", Version: "v-test", Log: w.log}); err != nil {
		t.Fatal(err)
	}
	if got := p.OTLPEndpoint(); got != rcv.URL {
		t.Errorf("endpoint %s, want %s (the default path added)", got, rcv.URL)
	}
	for i, final := range []bool{false, true} {
		if err := p.Dump(otlpDump(final, uint64(i+1))); err != nil {
			t.Fatal(err)
		}
		// A final dump waits for its export; a periodic one does not.
		if !final && !rcv.Wait(i+1, 10*time.Second) {
			t.Fatalf("dump %d: no request", i+1)
		}
		reqs, errs := rcv.Requests()
		if len(errs) > 0 || len(reqs) != i+1 {
			t.Fatalf("dump %d: %d requests, refused: %v", i+1, len(reqs), errs)
		}
		req := reqs[i]
		if err := otlptest.Check(req.Body); err != nil {
			t.Errorf("dump %d: %v", i+1, err)
		}
		if h := req.Header; h.Get("Authorization") != "Bearer s3cret" || h.Get("X-Tenant") != "t1" {
			t.Errorf("headers %v", h)
		}
		want := map[string]float64{}
		for dev := 0; dev < 2; dev++ {
			s, err := otlptest.PromSeries(readProm(t, p, dev))
			if err != nil {
				t.Fatal(err)
			}
			maps.Copy(want, s)
		}
		got := otlptest.Series(req.Body)
		for k, v := range want {
			if g, ok := got[k]; !ok || g != v {
				t.Errorf("dump %d: %s: OTLP %v (present %v), textfile %v", i+1, k, g, ok, v)
			}
		}
		for k := range got {
			if _, ok := want[k]; !ok {
				t.Errorf("dump %d: %s exported, not in the textfiles", i+1, k)
			}
		}
		if len(want) < 30 {
			t.Errorf("dump %d: only %d series compared", i+1, len(want))
		}
		checkOTLPShape(t, req.Body.ResourceMetrics, uuid)
	}
	if n, disabled := p.OTLPExported(); n != 2 || disabled {
		t.Errorf("exported %d, disabled %v", n, disabled)
	}
	if ws := w.get(); len(ws) != 0 {
		t.Errorf("WARN lines %q", ws)
	}
}

// checkOTLPShape checks the resources, units and value types.
func checkOTLPShape(t *testing.T, rms []*metricspb.ResourceMetrics, uuid string) {
	t.Helper()
	if len(rms) != 2 {
		t.Fatalf("%d resources, want one per device", len(rms))
	}
	wantRes := []map[string]string{
		{"service.name": "ncclhooks", "service.instance.id": "node7/" + uuid + "/rank3", "host.name": "node7", "process.pid": "4242",
			"ncclhooks.job": "job-77", "ncclhooks.device": "0", "ncclhooks.gpu": uuid, "ncclhooks.gpu.uuid": uuid, "ncclhooks.rank": "3",
			"ncclhooks.nranks": "8", "ncclhooks.comm_id": "0xabc", "ncclhooks.comm_name": "world"},
		{"service.name": "ncclhooks", "service.instance.id": "node7/dev1", "host.name": "node7", "process.pid": "4242",
			"ncclhooks.job": "job-77", "ncclhooks.device": "1", "ncclhooks.gpu": "dev1"},
	}
	for i, rm := range rms {
		got := map[string]string{}
		for _, a := range rm.Resource.Attributes {
			got[a.Key], _ = otlptest.Attr(rm.Resource.Attributes, a.Key)
		}
		if !maps.Equal(got, wantRes[i]) {
			t.Errorf("resource %d: %v, want %v", i, got, wantRes[i])
		}
		if len(rm.ScopeMetrics) != 1 || rm.ScopeMetrics[0].Scope.GetName() != "ncclhooks" || rm.ScopeMetrics[0].Scope.GetVersion() != "v-test" {
			t.Errorf("resource %d: scopes %v", i, rm.ScopeMetrics)
			continue
		}
		for _, m := range rm.ScopeMetrics[0].Metrics {
			wantUnit := ""
			if strings.Contains(m.Name, "_seconds") && !strings.HasSuffix(m.Name, "_observations_total") {
				wantUnit = "s"
			}
			if m.Unit != wantUnit || m.Description == "" {
				t.Errorf("%s: unit %q description %q, want unit %q", m.Name, m.Unit, m.Description, wantUnit)
			}
			if s := m.GetSum(); s != nil && !strings.Contains(m.Name, "_seconds") {
				for _, dp := range s.DataPoints {
					if _, ok := dp.Value.(*metricspb.NumberDataPoint_AsInt); !ok {
						t.Errorf("%s: a count as %T, want an exact integer", m.Name, dp.Value)
					}
				}
			}
		}
	}
}

// An unreachable receiver (nothing listens), one that answers 503 and one
// that accepts the connection and never answers each disable the export at
// its first request with one WARN that names the endpoint, never the
// headers' values; the textfiles go on being written at every dump; a
// final dump returns within FinalWait even while the export hangs.
func TestOTLPFailureDisablesOnlyTheExport(t *testing.T) {
	refused := func(t *testing.T) string {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr := ln.Addr().String()
		ln.Close() // nothing listens there now
		return "http://" + addr
	}
	for _, tc := range []struct {
		name     string
		endpoint func(t *testing.T) string
		why      string
	}{
		{"refused", refused, "connection refused"},
		{"503", func(t *testing.T) string {
			rcv, err := otlptest.Start()
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { rcv.Close() })
			rcv.Fail(503)
			return rcv.URL
		}, "HTTP 503"},
		{"hang", func(t *testing.T) string { return hangingServer(t) }, "the final dump's export had no answer within 300ms"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			p, err := sinks.NewProm(dir, sinks.PromOptions{Host: "h", PID: 1, DumpStats: true})
			if err != nil {
				t.Fatal(err)
			}
			defer p.Close()
			var w warnLog
			ep := tc.endpoint(t)
			if err := p.ExportOTLP(sinks.OTLPOptions{Endpoint: ep, Headers: "authorization=s3cret", Timeout: time.Second, FinalWait: 300 * time.Millisecond, Log: w.log}); err != nil {
				t.Fatal(err)
			}
			for i := 0; i < 3; i++ {
				start := time.Now()
				d := otlpDump(i != 1, uint64(i+1))
				if err := p.Dump(d); err != nil {
					t.Fatal(err)
				}
				if el := time.Since(start); el > 800*time.Millisecond {
					t.Errorf("dump %d took %v (final %v, FinalWait 300ms)", i+1, el, d.Final)
				}
				b, err := os.ReadFile(p.Path(0))
				if !strings.Contains(string(b), fmt.Sprintf("ncclhooks_records_total{device=\"0\",gpu=\"dev0\",hook=\"all\",host=\"h\",rank=\"\"} %d\n", 10*(i+1))) {
					t.Errorf("dump %d: textfile %v:\n%s", i+1, err, b)
				}
				if i == 0 {
					// Let the first export fail (a hang: the final dump's
					// wait, 300 ms, gives up on it).
					deadline := time.Now().Add(10 * time.Second)
					for len(w.get()) == 0 && time.Now().Before(deadline) {
						time.Sleep(20 * time.Millisecond)
					}
				}
			}
			ws := w.get()
			if len(ws) != 1 || !strings.Contains(ws[0], "OTLP export to "+ep) || !strings.Contains(ws[0], "disabled") || !strings.Contains(ws[0], tc.why) {
				t.Errorf("want one WARN that the export to %s is disabled (%s), got %q", ep, tc.why, ws)
			}
			for _, m := range ws {
				if strings.Contains(m, "s3cret") {
					t.Errorf("WARN quotes a header value: %s", m)
				}
			}
			if n, disabled := p.OTLPExported(); n != 0 || !disabled {
				t.Errorf("exported %d, disabled %v", n, disabled)
			}
		})
	}
}

// hangingServer is an otlptest.Hanging, closed at the test's end.
func hangingServer(t *testing.T) string {
	h, err := otlptest.Hang()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(h.Close)
	return h.Endpoint
}

// A partial success is one WARN with the receiver's count and message; the
// export goes on.
func TestOTLPPartialSuccessWarnsOnce(t *testing.T) {
	rcv, err := otlptest.Start()
	if err != nil {
		t.Fatal(err)
	}
	defer rcv.Close()
	rcv.Reject(3)
	p, err := sinks.NewProm("", sinks.PromOptions{Host: "h", PID: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	var w warnLog
	if err := p.ExportOTLP(sinks.OTLPOptions{Endpoint: rcv.URL, Log: w.log}); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 3; i++ {
		if err := p.Dump(otlpDump(true, 1)); err != nil {
			t.Fatal(err)
		}
	}
	if n, disabled := p.OTLPExported(); n != 3 || disabled {
		t.Errorf("exported %d, disabled %v", n, disabled)
	}
	if ws := w.get(); len(ws) != 1 || !strings.Contains(ws[0], "rejected 3 data points") || !strings.Contains(ws[0], "test receiver rejects points") {
		t.Errorf("WARN lines %q", ws)
	}
}

// Endpoints and headers that cannot be used are refused at once, the
// message quoting no password or header value; an endpoint's own path is
// kept.
func TestOTLPOptionsRefused(t *testing.T) {
	for _, tc := range []struct{ endpoint, headers, want string }{
		{"ftp://h:1", "", "OTLP endpoint"},
		{"http://", "", "OTLP endpoint"},
		{"http://user:pw-s3cret@h:1/x?q=1", "", "xxxxx"},
		{"http://h:1", "novalue", "entry 1 is not key=value"},
		{"http://h:1", "a=b,Content-Type=s3cret", "set by the exporter"},
		{"http://h:1", "a=%zzs3cret", `value of "a"`},
	} {
		p, err := sinks.NewProm("", sinks.PromOptions{Host: "h", PID: 1})
		if err != nil {
			t.Fatal(err)
		}
		err = p.ExportOTLP(sinks.OTLPOptions{Endpoint: tc.endpoint, Headers: tc.headers})
		if err == nil || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "s3cret") {
			t.Errorf("endpoint %q headers %q: %v, want an error with %q and no secret", tc.endpoint, tc.headers, err, tc.want)
		}
		if p.OTLPEndpoint() != "" {
			t.Errorf("%q: exporting after an error", tc.endpoint)
		}
	}
	p, _ := sinks.NewProm("", sinks.PromOptions{Host: "h", PID: 1})
	defer p.Close()
	if err := p.ExportOTLP(sinks.OTLPOptions{Endpoint: "collector:4318/otlp/v1/metrics"}); err != nil {
		t.Fatal(err)
	}
	if got := p.OTLPEndpoint(); got != "http://collector:4318/otlp/v1/metrics" {
		t.Errorf("endpoint %s", got)
	}
}
