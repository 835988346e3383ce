package main

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ncclhooks/ncclhooks/internal/sinks/otlptest"
)

const otlpProfile = `version: 1
name: otlp
output: {dump_interval: 100ms}
hooks:
  - name: all
    fields: [workCounter, channelId, phase]
    buffer: {slots: 65536}
    aggregate:
      - {name: events, kind: count, by: [channelId]}
  - name: latency
    when: phase == STOP && paired
    aggregate:
      - {name: duration_ns, kind: histogram, value: duration, by: [funcId], buckets: log2}
      - {name: busy_ns, kind: sum, value: duration, by: [channelId]}
      - {name: slowest_ns, kind: max, value: duration}
      - {name: spread, kind: histogram, value: workCounter % 10, buckets: {bounds: [1, 4, 8]}}
`

// promSeriesOf reads every textfile of dir as the samples Prometheus would
// scrape.
func promSeriesOf(t *testing.T, dir string) map[string]float64 {
	t.Helper()
	s, err := otlptest.PromDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// The OTLP export end to end through the real .so on the cpu backend: two
// devices, each a rank of its own communicator, with a profile of every
// aggregate kind and the capture statistics. A receiver that decodes with
// the official OTLP types (no unknown field, application/x-protobuf)
// accepts every request; each holds the data model (cumulative monotonic
// sums, histograms whose buckets add up to their count); the last one, the
// final dump's, holds exactly the series, labels and values of the final
// Prometheus textfiles, and records_total is what the driver emitted, as in
// the JSON lines; each device is a resource with the host, its rank, its
// communicator, the job (SLURM_JOB_ID) and the pid; no WARN.
func TestOTLPExportThroughThePlugin(t *testing.T) {
	rcv, err := otlptest.Start()
	if err != nil {
		t.Fatal(err)
	}
	defer rcv.Close()
	dir := t.TempDir()
	out, prom := filepath.Join(dir, "out"), filepath.Join(dir, "prom")
	prof := writeProfile(t, dir, otlpProfile)
	r := runDriver(t, []string{"NCCL_HOOKS_PROFILE=" + prof, "NCCL_HOOKS_BACKEND=cpu", "NCCL_HOOKS_DUMP_DIR=" + out,
		"NCCL_HOOKS_PROM_DIR=" + prom, "NCCL_HOOKS_PROM_DUMP_STATS=1", "NCCL_HOOKS_OTLP_ENDPOINT=" + rcv.URL,
		"SLURM_JOB_ID=4711", "NCCL_HOOKS_OTLP_HEADERS=x-scope=ncclhooks-test"}, 2, 1, 2, 3000, 1)
	if len(r.warns) != 0 {
		t.Errorf("WARN lines %q", r.warns)
	}
	if !strings.Contains(r.out, "exporting the metrics to "+rcv.URL) {
		t.Errorf("no INFO line naming the OTLP endpoint:\n%s", r.out)
	}
	reqs, errs := rcv.Requests()
	if len(errs) > 0 || len(reqs) == 0 {
		t.Fatalf("%d requests accepted, refused: %v", len(reqs), errs)
	}
	for i, q := range reqs {
		if err := otlptest.Check(q.Body); err != nil {
			t.Errorf("request %d: %v", i, err)
		}
		if q.Header.Get("X-Scope") != "ncclhooks-test" {
			t.Errorf("request %d: headers %v", i, q.Header)
		}
	}
	last := reqs[len(reqs)-1].Body
	got, want := otlptest.Series(last), promSeriesOf(t, prom)
	for k, v := range want {
		if g, ok := got[k]; !ok || g != v {
			t.Errorf("%s: OTLP %v (present %v), textfile %v", k, g, ok, v)
		}
	}
	for k := range got {
		if _, ok := want[k]; !ok {
			t.Errorf("%s exported, not in the textfiles", k)
		}
	}
	// The export equals the textfiles (above), whose records_total is every
	// emitted event, as the JSON lines are.
	checkExactWithProm(t, r, out, prom)
	ranks := map[string]bool{}
	if len(last.ResourceMetrics) != 2 {
		t.Fatalf("%d resources, want one per device", len(last.ResourceMetrics))
	}
	for d, rm := range last.ResourceMetrics {
		a := rm.Resource.Attributes
		for key, want := range map[string]string{"service.name": "ncclhooks", "host.name": hostname(t), "ncclhooks.job": "4711",
			"ncclhooks.device": fmt.Sprint(d), "ncclhooks.gpu": fmt.Sprintf("dev%d", d), "ncclhooks.nranks": "2"} {
			if v, _ := otlptest.Attr(a, key); v != want {
				t.Errorf("resource %d: %s = %q, want %q", d, key, v, want)
			}
		}
		rank, _ := otlptest.Attr(a, "ncclhooks.rank")
		ranks[rank] = true
		if v, _ := otlptest.Attr(a, "ncclhooks.comm_id"); !strings.HasPrefix(v, "0x") {
			t.Errorf("resource %d: comm_id %q", d, v)
		}
		if v, _ := otlptest.Attr(a, "process.pid"); v == "" || v == "0" {
			t.Errorf("resource %d: pid %q", d, v)
		}
	}
	if !ranks["0"] || !ranks["1"] {
		t.Errorf("rank attributes %v, want the two communicators' ranks 0 and 1", ranks)
	}
	t.Logf("%d requests, %d series in the last", len(reqs), len(got))
}

func hostname(t *testing.T) string {
	h, err := os.Hostname()
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// An unreachable OTLP endpoint (nothing listens) disables the export only:
// one WARN names it, and the hooks, the JSON lines and the textfiles stay
// exact.
func TestOTLPUnreachableDisablesOnlyTheExport(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ep := "http://" + ln.Addr().String()
	ln.Close() // nothing listens there now
	dir := t.TempDir()
	out, prom := filepath.Join(dir, "out"), filepath.Join(dir, "prom")
	prof := writeProfile(t, dir, otlpProfile)
	r := runDriver(t, []string{"NCCL_HOOKS_PROFILE=" + prof, "NCCL_HOOKS_BACKEND=cpu", "NCCL_HOOKS_DUMP_DIR=" + out,
		"NCCL_HOOKS_PROM_DIR=" + prom, "NCCL_HOOKS_PROM_DUMP_STATS=1", "NCCL_HOOKS_OTLP_ENDPOINT=" + ep}, 2, 1, 2, 3000, 1)
	if len(r.warns) != 1 || !strings.Contains(r.warns[0], "OTLP export to "+ep+"/v1/metrics disabled") || !strings.Contains(r.warns[0], "connection refused") {
		t.Fatalf("want one WARN that the OTLP export to %s is disabled, got %q\n%s", ep, r.warns, r.out)
	}
	checkExactWithProm(t, r, out, prom)
}

// checkExactWithProm: every device got its hook, the JSON lines account
// for every emitted event, and the textfiles' records_total says the same.
func checkExactWithProm(t *testing.T, r *driverRun, out, prom string) {
	t.Helper()
	for d := 0; d < 2; d++ {
		if !r.hooks[fmt.Sprint(0, d)] {
			t.Errorf("device %d got no hook", d)
		}
	}
	o := readOutput(t, out)
	series := promSeriesOf(t, prom)
	for d := 0; d < 2; d++ {
		k := fmt.Sprint("all ", d)
		if st := o.final[k]; st.Records != r.emitted[d] || st.Matched != r.emitted[d] || o.records[k] != int(st.Records) {
			t.Errorf("device %d: final %+v, %d record lines, emitted %d", d, st, o.records[k], r.emitted[d])
		}
		key := otlptest.Key("ncclhooks_records_total", [][2]string{{"host", hostname(t)}, {"gpu", fmt.Sprintf("dev%d", d)},
			{"rank", fmt.Sprint(d)}, {"hook", "all"}, {"device", fmt.Sprint(d)}})
		if series[key] != float64(r.emitted[d]) {
			t.Errorf("device %d: textfile %s = %v, emitted %d", d, key, series[key], r.emitted[d])
		}
	}
}

// A receiver that accepts the connection and never answers: the last
// finalize returns within its bound (NCCL_HOOKS_FINALIZE_TIMEOUT=2s: the
// final dump waits for its export at most 1 s, though the export's own
// timeout is 30 s), with one WARN, that the export had no answer, and none
// that the outputs did not settle; the JSON lines and the textfiles are
// exact.
func TestOTLPHungReceiverDoesNotHoldFinalize(t *testing.T) {
	hang, err := otlptest.Hang()
	if err != nil {
		t.Fatal(err)
	}
	defer hang.Close()
	ep := hang.Endpoint
	dir := t.TempDir()
	out, prom := filepath.Join(dir, "out"), filepath.Join(dir, "prom")
	// One dump only, the final one: the export that hangs is the final
	// dump's, which finalize waits for.
	prof := writeProfile(t, dir, strings.Replace(otlpProfile, "dump_interval: 100ms", "dump_interval: 1h", 1))
	r := runDriver(t, []string{"NCCL_HOOKS_PROFILE=" + prof, "NCCL_HOOKS_BACKEND=cpu", "NCCL_HOOKS_DUMP_DIR=" + out,
		"NCCL_HOOKS_PROM_DIR=" + prom, "NCCL_HOOKS_PROM_DUMP_STATS=1", "NCCL_HOOKS_OTLP_ENDPOINT=" + ep,
		"NCCL_HOOKS_OTLP_TIMEOUT=30s", "NCCL_HOOKS_FINALIZE_TIMEOUT=2s"}, 2, 1, 2, 3000, 1)
	var ms int
	i := strings.Index(r.out, "FINALIZE_MS ")
	if i < 0 {
		t.Fatalf("no finalize:\n%s", r.out)
	}
	fmt.Sscanf(r.out[i:], "FINALIZE_MS 0 %d", &ms)
	// The final dump waits 1 s for the export; the rest is slack for a
	// loaded machine, far below the 30 s export timeout.
	if ms < 900 || ms > 8_000 {
		t.Errorf("finalize took %d ms, want about the 1 s the final export may take", ms)
	}
	if n := countWarns(r.warns, "did not settle"); n != 0 {
		t.Errorf("finalize gave up on the outputs: %q", r.warns)
	}
	if len(r.warns) != 1 || !strings.Contains(r.warns[0], "OTLP export to "+ep+" disabled") || !strings.Contains(r.warns[0], "no answer within 1s") {
		t.Errorf("want one WARN that the final export had no answer within 1 s, got %q", r.warns)
	}
	if hang.Connections() == 0 {
		t.Error("the export never connected")
	}
	checkExactWithProm(t, r, out, prom)
	t.Logf("finalize %d ms; warns %q", ms, r.warns)
}

// Knobs the export cannot use: headers that are not key=value disable the
// export only, with one WARN that quotes no value, the outputs exact; an
// OTLP timeout that is not a duration is a knob error like any other (the
// plugin inactive, one WARN naming the knob).
func TestOTLPKnobsRefused(t *testing.T) {
	dir := t.TempDir()
	out, prom := filepath.Join(dir, "out"), filepath.Join(dir, "prom")
	prof := writeProfile(t, dir, otlpProfile)
	base := []string{"NCCL_HOOKS_PROFILE=" + prof, "NCCL_HOOKS_BACKEND=cpu", "NCCL_HOOKS_DUMP_DIR=" + out,
		"NCCL_HOOKS_PROM_DIR=" + prom, "NCCL_HOOKS_PROM_DUMP_STATS=1", "NCCL_HOOKS_OTLP_ENDPOINT=http://127.0.0.1:9"}
	r := runDriver(t, append(base, "NCCL_HOOKS_OTLP_HEADERS=token-s3cret"), 2, 1, 2, 300, 1)
	if len(r.warns) != 1 || !strings.Contains(r.warns[0], "OTLP export disabled (NCCL_HOOKS_OTLP_ENDPOINT), everything else stays active") ||
		!strings.Contains(r.warns[0], "not key=value") || strings.Contains(r.warns[0], "s3cret") {
		t.Fatalf("want one WARN that the OTLP headers disable the export, got %q", r.warns)
	}
	checkExactWithProm(t, r, out, prom)

	r = runDriver(t, append(base, "NCCL_HOOKS_DUMP_DIR="+filepath.Join(dir, "out2"), "NCCL_HOOKS_OTLP_TIMEOUT=forever"), 1, 1, 1, 10, 1)
	if len(r.warns) != 1 || !strings.Contains(r.warns[0], "inactive") || !strings.Contains(r.warns[0], `NCCL_HOOKS_OTLP_TIMEOUT="forever"`) {
		t.Fatalf("want one WARN that the plugin is inactive for the timeout knob, got %q", r.warns)
	}
}
