package sinks_test

import (
	"bytes"
	"fmt"
	"io"
	"math"
	"math/bits"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil/promlint"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/ncclhooks/ncclhooks/internal/config"
	"github.com/ncclhooks/ncclhooks/internal/hookgen"
	"github.com/ncclhooks/ncclhooks/internal/sinks"
)

func aggInfo(hook, name string, kind config.AggKind, value string, by []string, b config.Buckets) *hookgen.AggInfo {
	a := &config.Aggregate{Name: name, Kind: kind, By: by, Buckets: b}
	if value != "" {
		a.Value = &config.Expr{Source: value, Type: config.I64}
	}
	return &hookgen.AggInfo{Hook: hook, Agg: a}
}

// log2Row builds a cumulative log2 histogram row from raw values, the way
// the device buckets them: bucket 0 holds v <= 0, bucket i holds [2^(i-1), 2^i).
func log2Row(funcID int, name string, values []uint64) sinks.AggRow {
	counts := make([]uint64, config.Log2Buckets)
	var sum uint64
	for _, v := range values {
		counts[bits.Len64(v)]++
		sum += v
	}
	r := sinks.AggRow{FuncID: funcID, FuncName: name, ChannelID: -1, Count: uint64(len(values)), SumInt: int64(sum)}
	var cum uint64
	for i, n := range counts {
		cum += n
		b := sinks.Bucket{Count: cum}
		if i < len(counts)-1 {
			le := uint64(1)<<i - 1
			b.LE = &le
		}
		r.Buckets = append(r.Buckets, b)
	}
	return r
}

func parseProm(t *testing.T, data []byte) map[string]*dto.MetricFamily {
	t.Helper()
	parser := expfmt.NewTextParser(model.LegacyValidation)
	mfs, err := parser.TextToMetricFamilies(bytes.NewReader(data))
	if err != nil {
		t.Fatalf("text parser: %v\n%s", err, data)
	}
	return mfs
}

func lint(t *testing.T, data []byte) {
	t.Helper()
	problems, err := promlint.New(bytes.NewReader(data)).Lint()
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("promlint: %s: %s", p.Metric, p.Text)
	}
	// The reserved suffixes appear only on histogram samples (and _sum,
	// _count on the Go collector's summaries).
	mfs := parseProm(t, data)
	for _, line := range strings.Split(string(data), "\n") {
		if line == "" || line[0] == '#' {
			continue
		}
		name := line[:strings.IndexAny(line, "{ ")]
		for _, suf := range []string{"_bucket", "_sum", "_count"} {
			if base, ok := strings.CutSuffix(name, suf); ok {
				if mf := mfs[base]; mf == nil || mf.GetType() != dto.MetricType_HISTOGRAM && (suf == "_bucket" || mf.GetType() != dto.MetricType_SUMMARY) {
					t.Errorf("%s: %s outside a histogram", name, suf)
				}
			}
		}
	}
}

func labels(m *dto.Metric) map[string]string {
	out := map[string]string{}
	for _, l := range m.GetLabel() {
		out[l.GetName()] = l.GetValue()
	}
	return out
}

func readProm(t *testing.T, p *sinks.Prom, dev int) []byte {
	t.Helper()
	data, err := os.ReadFile(p.Path(dev))
	if err != nil {
		t.Fatal(err)
	}
	return data
}

func TestPromDefaultOutputIsAggregatesOnly(t *testing.T) {
	dir := t.TempDir()
	p, err := sinks.NewProm(dir, sinks.PromOptions{Host: "node7"})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()

	lat := aggInfo("all", "latency", config.AggHistogram, "duration", []string{"funcId"}, config.Buckets{Log2: true})
	sizes := aggInfo("all", "bytes_moved", config.AggHistogram, "workCounter % 7", []string{"channelId"}, config.Buckets{Bounds: []uint64{2, 4}})
	items := aggInfo("all", "workItems", config.AggCount, "", []string{"funcId", "channelId"}, config.Buckets{})
	total := aggInfo("all", "moved", config.AggSum, "workCounter", nil, config.Buckets{})
	low := aggInfo("all", "first_work_counter", config.AggMin, "workCounter", nil, config.Buckets{})
	wait := aggInfo("all", "wait", config.AggHistogram, "workCounter", nil, config.Buckets{Log2: true})

	values := []uint64{1500, 1800, 2100, 2500, 9000, 0}
	le2, le4 := uint64(2), uint64(4)
	d := &sinks.Dump{
		Stats: []sinks.Stats{{Hook: "all", Device: 0, Records: 10}, {Hook: "all", Device: 1}},
		Aggs: []sinks.AggSnapshot{
			{Info: lat, Device: 0, Rows: []sinks.AggRow{log2Row(12, "AllReduce_Sum_f32_RING_LL", values), log2Row(-2, "", []uint64{7})}},
			{Info: sizes, Device: 0, Rows: []sinks.AggRow{{FuncID: -1, ChannelID: 3, Count: 5, SumInt: 17,
				Buckets: []sinks.Bucket{{LE: &le2, Count: 1}, {LE: &le4, Count: 3}, {Count: 5}}}}},
			{Info: items, Device: 0, Rows: []sinks.AggRow{{FuncID: 12, FuncName: "AllReduce_Sum_f32_RING_LL", ChannelID: 1, Count: 42}}},
			{Info: total, Device: 0, Rows: []sinks.AggRow{{FuncID: -1, ChannelID: -1, Count: 3, SumInt: 99}}},
			{Info: low, Device: 0, Rows: []sinks.AggRow{{FuncID: -1, ChannelID: -1, Count: 3, Min: -4}}},
			{Info: wait, Device: 0, Rows: []sinks.AggRow{log2Row(-1, "", []uint64{1500, 2100})}},
		},
	}
	if err := p.Dump(d); err != nil {
		t.Fatal(err)
	}
	data := readProm(t, p, 0)
	lint(t, data)
	mfs := parseProm(t, data)
	for _, stat := range []string{"ncclhooks_records_total", "ncclhooks_dropped_total", "ncclhooks_matched_total"} {
		if mfs[stat] != nil {
			t.Errorf("%s present without DumpStats", stat)
		}
	}

	h := mfs["ncclhooks_latency_seconds"]
	if h == nil || h.GetType() != dto.MetricType_HISTOGRAM || len(h.Metric) != 2 {
		t.Fatalf("latency histogram: %v", h)
	}
	for _, m := range h.Metric {
		l := labels(m)
		if l["host"] != "node7" || l["hook"] != "all" || l["device"] != "0" || l["channel"] != "" {
			t.Errorf("labels %v", l)
		}
		if l["func"] == "overflow" {
			continue
		}
		if l["func"] != "AllReduce_Sum_f32_RING_LL" {
			t.Errorf("func label %q", l["func"])
		}
		hist := m.GetHistogram()
		var sum uint64
		for _, v := range values {
			sum += v
		}
		if hist.GetSampleCount() != uint64(len(values)) || math.Abs(hist.GetSampleSum()-float64(sum)*1e-9) > 1e-15 {
			t.Errorf("count %d sum %g, want %d and %g s", hist.GetSampleCount(), hist.GetSampleSum(), len(values), float64(sum)*1e-9)
		}
		prev := uint64(0)
		for _, b := range hist.Bucket {
			le := b.GetUpperBound()
			want := uint64(0)
			for _, v := range values {
				if float64(v)*1e-9 <= le*(1+1e-12) {
					want++
				}
			}
			if b.GetCumulativeCount() != want || b.GetCumulativeCount() < prev {
				t.Errorf("bucket le=%g: %d, want %d (cumulative)", le, b.GetCumulativeCount(), want)
			}
			prev = b.GetCumulativeCount()
		}
		// Values fill buckets 0 .. 14 (le 0 .. 2^14-1 ns), the overflow row
		// bucket 3: the empty buckets above 14 are left out.
		if n := len(hist.Bucket); n != 16 {
			t.Errorf("%d log2 buckets emitted, want 16 (le 0 .. 2^14-1, +Inf)", n)
		}
	}

	sh := mfs["ncclhooks_bytes_moved"]
	if sh == nil || len(sh.Metric) != 1 || labels(sh.Metric[0])["channel"] != "3" || labels(sh.Metric[0])["func"] != "" {
		t.Fatalf("explicit-bounds histogram: %v", sh)
	}
	if bs := sh.Metric[0].GetHistogram().Bucket; len(bs) != 3 || bs[0].GetCumulativeCount() != 1 || bs[1].GetCumulativeCount() != 3 || bs[1].GetUpperBound() != 4 || !math.IsInf(bs[2].GetUpperBound(), 1) {
		t.Errorf("explicit buckets %v", bs)
	}
	if c := mfs["ncclhooks_work_items_total"]; c == nil || c.GetType() != dto.MetricType_COUNTER || c.Metric[0].GetCounter().GetValue() != 42 ||
		labels(c.Metric[0])["channel"] != "1" || labels(c.Metric[0])["func"] != "AllReduce_Sum_f32_RING_LL" {
		t.Errorf("count aggregate: %v", c)
	}
	if c := mfs["ncclhooks_moved_total"]; c == nil || c.Metric[0].GetCounter().GetValue() != 99 {
		t.Errorf("sum aggregate: %v", c)
	}
	if c := mfs["ncclhooks_moved_observations_total"]; c == nil || c.Metric[0].GetCounter().GetValue() != 3 {
		t.Errorf("sum aggregate observations: %v", c)
	}
	// Log2 buckets 11 and 12 filled: le 1023 (the empty lower bound for
	// interpolation), 2047, 4095, then +Inf; nothing else of the 65.
	if w := mfs["ncclhooks_wait"]; w == nil || len(w.Metric) != 1 {
		t.Errorf("wait histogram: %v", w)
	} else if bs := w.Metric[0].GetHistogram().Bucket; len(bs) != 4 || bs[0].GetUpperBound() != 1023 || bs[0].GetCumulativeCount() != 0 ||
		bs[1].GetUpperBound() != 2047 || bs[1].GetCumulativeCount() != 1 || bs[2].GetUpperBound() != 4095 || bs[2].GetCumulativeCount() != 2 {
		t.Errorf("trimmed log2 buckets: %v", bs)
	}
	if g := mfs["ncclhooks_first_work_counter"]; g == nil || g.GetType() != dto.MetricType_GAUGE || g.Metric[0].GetGauge().GetValue() != -4 {
		t.Errorf("min aggregate: %v", g)
	}
	// Device 1 had no aggregates: its file exists and is empty by default.
	if data := readProm(t, p, 1); len(data) != 0 {
		t.Errorf("idle device file without DumpStats:\n%s", data)
	}
}

func TestPromDumpStatsCoverIdleDevices(t *testing.T) {
	dir := t.TempDir()
	p, err := sinks.NewProm(dir, sinks.PromOptions{Host: "h", DumpStats: true})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	dump := func(n int, stats ...sinks.Stats) {
		t.Helper()
		if err := p.Dump(&sinks.Dump{Stats: stats}); err != nil {
			t.Fatal(err)
		}
	}
	dump(1, sinks.Stats{Hook: "all", Device: 0, Matched: 100, Records: 90, Dropped: 10, DroppedBufferFull: 7, DroppedRingFull: 3},
		sinks.Stats{Hook: "all", Device: 1})
	// Second dump: device 1 absent from the dump (a drainer that skipped
	// it); it must stay exported with its last values.
	dump(2, sinks.Stats{Hook: "all", Device: 0, Matched: 250, Records: 230, Dropped: 20, DroppedBufferFull: 12, DroppedTorn: 5, DroppedRingFull: 3})

	want := map[int]map[string]float64{
		0: {"matched": 250, "records": 230, "buffer_full": 12, "overwritten": 0, "torn": 5, "ring_full": 3},
		1: {"matched": 0, "records": 0, "buffer_full": 0, "overwritten": 0, "torn": 0, "ring_full": 0},
	}
	for dev, w := range want {
		data := readProm(t, p, dev)
		lint(t, data)
		mfs := parseProm(t, data)
		get := func(name string) *dto.MetricFamily {
			mf := mfs[name]
			if mf == nil || mf.GetType() != dto.MetricType_COUNTER {
				t.Fatalf("device %d: %s missing or not a counter:\n%s", dev, name, data)
			}
			return mf
		}
		if v := get("ncclhooks_matched_total").Metric[0].GetCounter().GetValue(); v != w["matched"] {
			t.Errorf("device %d matched %v, want %v", dev, v, w["matched"])
		}
		if v := get("ncclhooks_records_total").Metric[0].GetCounter().GetValue(); v != w["records"] {
			t.Errorf("device %d records %v, want %v", dev, v, w["records"])
		}
		dropped := get("ncclhooks_dropped_total")
		if len(dropped.Metric) != 4 {
			t.Errorf("device %d: %d drop stages, want 4", dev, len(dropped.Metric))
		}
		for _, m := range dropped.Metric {
			l := labels(m)
			if l["device"] != fmt.Sprint(dev) || l["hook"] != "all" {
				t.Errorf("labels %v in device %d's file", l, dev)
			}
			if v := m.GetCounter().GetValue(); v != w[l["stage"]] {
				t.Errorf("device %d stage %s: %v, want %v", dev, l["stage"], v, w[l["stage"]])
			}
		}
	}
}

func TestPromTextfileReplacedAtomically(t *testing.T) {
	dir := t.TempDir()
	p, err := sinks.NewProm(dir, sinks.PromOptions{Host: "h", DumpStats: true})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	info := aggInfo("all", "latency", config.AggHistogram, "duration", []string{"funcId"}, config.Buckets{Log2: true})
	dumpN := func(n int) *sinks.Dump {
		var rows []sinks.AggRow
		for f := 0; f < 40; f++ {
			vals := make([]uint64, n+1)
			for i := range vals {
				vals[i] = uint64(1000 + 37*i*(f+1))
			}
			rows = append(rows, log2Row(f, fmt.Sprintf("Func%d", f), vals))
		}
		return &sinks.Dump{Stats: []sinks.Stats{{Hook: "all", Device: 0, Records: uint64(n)}},
			Aggs: []sinks.AggSnapshot{{Info: info, Device: 0, Rows: rows}}}
	}
	if err := p.Dump(dumpN(0)); err != nil {
		t.Fatal(err)
	}
	var stop atomic.Bool
	var reads atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan string, 1)
	wg.Add(1)
	go func() {
		defer wg.Done()
		for !stop.Load() {
			data, err := os.ReadFile(p.Path(0))
			if err != nil {
				errs <- err.Error()
				return
			}
			parser := expfmt.NewTextParser(model.LegacyValidation)
			mfs, err := parser.TextToMetricFamilies(bytes.NewReader(data))
			if err != nil || mfs["ncclhooks_latency_seconds"] == nil || len(mfs["ncclhooks_latency_seconds"].Metric) != 40 || mfs["ncclhooks_records_total"] == nil {
				errs <- fmt.Sprintf("partial file seen (%d bytes): %v", len(data), err)
				return
			}
			reads.Add(1)
		}
	}()
	for n := 1; n <= 300; n++ {
		if err := p.Dump(dumpN(n)); err != nil {
			t.Fatal(err)
		}
	}
	stop.Store(true)
	wg.Wait()
	select {
	case e := <-errs:
		t.Fatal(e)
	default:
	}
	if reads.Load() == 0 {
		t.Fatal("reader never read the file")
	}
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if e.Name() != fmt.Sprintf("ncclhooks_dev0_%d.prom", os.Getpid()) {
			t.Errorf("leftover file %s", e.Name())
		}
	}
}

func TestPromHTTPEndpoint(t *testing.T) {
	// No textfile directory: /metrics only.
	p, err := sinks.NewProm("", sinks.PromOptions{Host: "h", DumpStats: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Serve(":0"); err != nil {
		t.Fatal(err)
	}
	if host := p.Addr().String(); !strings.HasPrefix(host, "127.0.0.1:") {
		t.Errorf("listening on %s, want loopback by default", host)
	}
	if err := p.Dump(&sinks.Dump{Stats: []sinks.Stats{{Hook: "a", Device: 0, Records: 5}, {Hook: "a", Device: 3, Records: 7}}}); err != nil {
		t.Fatal(err)
	}
	resp, err := http.Get("http://" + p.Addr().String() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	data, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	lint(t, data)
	rec := parseProm(t, data)["ncclhooks_records_total"]
	if rec == nil || len(rec.Metric) != 2 {
		t.Fatalf("/metrics: want both devices' records_total:\n%s", data)
	}
	// The plugin's Go runtime, for a soak's goroutine count.
	if g := parseProm(t, data)["go_goroutines"]; g == nil || len(g.Metric) != 1 || g.Metric[0].GetGauge().GetValue() < 1 {
		t.Errorf("/metrics: want go_goroutines from the Go collector:\n%s", data)
	}
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := http.Get("http://" + p.Addr().String() + "/metrics"); err == nil {
		t.Error("endpoint still serving after Close")
	}
}

func TestPromListenAddressAndNameClashes(t *testing.T) {
	bad, err := sinks.NewProm(t.TempDir(), sinks.PromOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := bad.Serve("not an address"); err == nil || !strings.Contains(err.Error(), "HOST:PORT") {
		t.Errorf("bad listen address: %v", err)
	}
	dir := t.TempDir()
	p, err := sinks.NewProm(dir, sinks.PromOptions{Host: "h"})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	row := []sinks.AggRow{{FuncID: -1, ChannelID: -1, Count: 2}}
	err = p.Dump(&sinks.Dump{Aggs: []sinks.AggSnapshot{
		{Info: aggInfo("a", "calls", config.AggCount, "", nil, config.Buckets{}), Device: 0, Rows: row},
		{Info: aggInfo("b", "calls", config.AggCount, "", nil, config.Buckets{}), Device: 0, Rows: row},
		{Info: aggInfo("c", "calls", config.AggMax, "workCounter", nil, config.Buckets{}), Device: 0, Rows: row},
	}})
	if err != nil {
		t.Fatal(err)
	}
	data := readProm(t, p, 0)
	lint(t, data)
	mfs := parseProm(t, data)
	if c := mfs["ncclhooks_calls_total"]; c == nil || len(c.Metric) != 2 {
		t.Errorf("same-shape aggregates of two hooks should share a family with a hook label:\n%s", data)
	}
	if g := mfs["ncclhooks_c_calls"]; g == nil || g.GetType() != dto.MetricType_GAUGE {
		t.Errorf("a clashing shape should get the hook in its name:\n%s", data)
	}
	if _, err := os.Stat(filepath.Join(dir, fmt.Sprintf("ncclhooks_dev0_%d.prom", os.Getpid()))); err != nil {
		t.Error(err)
	}
}

// A bare port, like ":port", listens on the loopback interface only.
func TestPromBarePortListensOnLoopback(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)
	ln.Close() // free again; another test taking it in between fails Serve, not this check
	p, err := sinks.NewProm("", sinks.PromOptions{Host: "h"})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if err := p.Serve(port); err != nil {
		t.Fatal(err)
	}
	a := p.Addr().(*net.TCPAddr)
	if !a.IP.IsLoopback() || strconv.Itoa(a.Port) != port {
		t.Fatalf("NCCL_HOOKS_PROM_ADDR=%s listens on %s, want 127.0.0.1:%s", port, a, port)
	}
	// Reachable on loopback, not on the machine's other addresses.
	if c, err := net.Dial("tcp", "127.0.0.1:"+port); err != nil {
		t.Fatalf("loopback: %v", err)
	} else {
		c.Close()
	}
	addrs, _ := net.InterfaceAddrs()
	for _, ia := range addrs {
		ipn, ok := ia.(*net.IPNet)
		if !ok || ipn.IP.IsLoopback() || ipn.IP.To4() == nil {
			continue
		}
		if c, err := net.DialTimeout("tcp", net.JoinHostPort(ipn.IP.String(), port), 2*time.Second); err == nil {
			c.Close()
			t.Errorf("the endpoint answers on %s: a bare port must bind loopback only", ipn.IP)
		}
	}
	if err := p.Serve(port); err == nil {
		t.Error("a second Serve succeeded")
	}
}

// Processes of one job share the textfile directory and each sees its GPU
// as device 0: every process writes files of its own, named by GPU and pid,
// and its series carry the gpu and rank labels.
func TestPromOneFilePerProcessWithIdentity(t *testing.T) {
	dir := t.TempDir()
	row := []sinks.AggRow{{FuncID: -1, ChannelID: -1, Count: 4}}
	for rank, gpu := range []string{"GPU-aaaa", ""} {
		p, err := sinks.NewProm(dir, sinks.PromOptions{Host: "h", PID: 1000 + rank})
		if err != nil {
			t.Fatal(err)
		}
		p.Identify(0, sinks.DeviceIdentity{GPU: sinks.GPUName(rank, gpu), Rank: strconv.Itoa(rank)})
		err = p.Dump(&sinks.Dump{Aggs: []sinks.AggSnapshot{{Info: aggInfo("a", "calls", config.AggCount, "", nil, config.Buckets{}), Device: 0, Rows: row}}})
		if err != nil {
			t.Fatal(err)
		}
		p.Close()
	}
	want := map[string][2]string{"ncclhooks_GPU-aaaa_1000.prom": {"GPU-aaaa", "0"}, "ncclhooks_dev1_1001.prom": {"dev1", "1"}}
	ents, _ := os.ReadDir(dir)
	if len(ents) != len(want) {
		t.Fatalf("files %v, want %v", ents, want)
	}
	for name, w := range want {
		data, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		lint(t, data)
		c := parseProm(t, data)["ncclhooks_calls_total"]
		if c == nil || len(c.Metric) != 1 {
			t.Fatalf("%s:\n%s", name, data)
		}
		if l := labels(c.Metric[0]); l["gpu"] != w[0] || l["rank"] != w[1] || l["device"] != "0" || l["host"] != "h" {
			t.Errorf("%s: labels %v, want gpu %s rank %s", name, l, w[0], w[1])
		}
	}
}

// NameGPU renames a device's textfile and gpu label by its UUID and keeps
// the rank Identify gave.
func TestNameGPUKeepsTheRank(t *testing.T) {
	dir := t.TempDir()
	p, err := sinks.NewProm(dir, sinks.PromOptions{Host: "h", PID: 42, DumpStats: true})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	p.Identify(0, sinks.DeviceIdentity{GPU: sinks.GPUName(0, ""), Rank: "3"})
	if got := filepath.Base(p.Path(0)); got != "ncclhooks_dev0_42.prom" {
		t.Fatalf("before NameGPU: %s", got)
	}
	uuid := "GPU-4996d1fc-e0c2-6530-2a9c-092dd0e46471"
	p.NameGPU(0, uuid)
	if got, want := filepath.Base(p.Path(0)), "ncclhooks_"+uuid+"_42.prom"; got != want {
		t.Fatalf("after NameGPU: %s, want %s", got, want)
	}
	if err := p.Dump(&sinks.Dump{Stats: []sinks.Stats{{Hook: "a", Device: 0, Matched: 5, Records: 5}}}); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(p.Path(0))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), `gpu="`+uuid+`"`) || !strings.Contains(string(b), `rank="3"`) {
		t.Fatalf("textfile lacks the UUID's gpu label or rank 3:\n%s", b)
	}
}
