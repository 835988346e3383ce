package gpuharness

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ncclhooks/ncclhooks/internal/cuda"
	"github.com/ncclhooks/ncclhooks/internal/gputest"
	"github.com/ncclhooks/ncclhooks/internal/sinks/otlptest"
)

// TestOTLPExportGPU runs a GPU job through the real plugin and CLI with the
// OTLP export on, against a receiver that decodes every request with the
// official OTLP types. Every request must hold the data model; the last (the
// final dump's) must carry exactly the series and values of the final
// Prometheus textfiles; the resource must name the GPU by its UUID; and the
// run must be exact. The plugin is found as TestReloadLatencyGPU finds it.
func TestOTLPExportGPU(t *testing.T) {
	_, err := cuda.OpenGPU()
	gputest.Open(t, err)
	dir := t.TempDir()
	cli, plugin := cliAndPlugin(t, dir)
	rcv, err := otlptest.Start()
	if err != nil {
		t.Fatal(err)
	}
	defer rcv.Close()
	prof := filepath.Join(dir, "otlp.yaml")
	if err := os.WriteFile(prof, []byte(`version: 1
name: otlp-gpu
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
`), 0o644); err != nil {
		t.Fatal(err)
	}
	prom := filepath.Join(dir, "prom")
	args := []string{"run", prof, "--backend", "gpu", "--devices", "1", "--comms", "2", "--channels", "8", "--items", "4000",
		"--event-rate", "2e5", "--plugin", plugin, "--out", filepath.Join(dir, "out")}
	cmd := exec.Command(cli, args...)
	for _, e := range os.Environ() {
		if !strings.HasPrefix(e, "NCCL_HOOKS_") || strings.HasPrefix(e, "NCCL_HOOKS_CACHE_DIR=") {
			cmd.Env = append(cmd.Env, e)
		}
	}
	cmd.Env = append(cmd.Env, "NCCL_HOOKS_OTLP_ENDPOINT="+rcv.URL, "NCCL_HOOKS_PROM_DIR="+prom, "NCCL_HOOKS_PROM_DUMP_STATS=1",
		"SLURM_JOB_ID=4711")
	out, err := cmd.CombinedOutput()
	res := string(out)
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", cli, strings.Join(args, " "), err, res)
	}
	if !strings.Contains(res, "result: exact") || strings.Contains(res, "MISMATCH") {
		t.Errorf("the run is not exact:\n%s", res)
	}
	if strings.Contains(res, "WARN") {
		t.Errorf("WARN lines in:\n%s", res)
	}
	reqs, errs := rcv.Requests()
	if len(errs) > 0 || len(reqs) < 2 {
		t.Fatalf("%d requests accepted (want a periodic and a final one), refused: %v\n%s", len(reqs), errs, res)
	}
	for i, q := range reqs {
		if err := otlptest.Check(q.Body); err != nil {
			t.Errorf("request %d: %v", i, err)
		}
	}
	want, err := otlptest.PromDir(prom)
	if err != nil {
		t.Fatal(err)
	}
	last := reqs[len(reqs)-1].Body
	got := otlptest.Series(last)
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
	var records float64
	for k, v := range got {
		if strings.HasPrefix(k, "ncclhooks_records_total{") && strings.Contains(k, `hook="all"`) {
			records += v
		}
	}
	if records == 0 {
		t.Errorf("no records_total of hook all in the last request: %v", got)
	}
	if len(last.ResourceMetrics) == 0 {
		t.Fatal("no resource in the last request")
	}
	a := last.ResourceMetrics[0].Resource.Attributes
	if v, _ := otlptest.Attr(a, "ncclhooks.gpu.uuid"); !strings.HasPrefix(v, "GPU-") {
		t.Errorf("resource: ncclhooks.gpu.uuid = %q, want the GPU's UUID", v)
	}
	if v, _ := otlptest.Attr(a, "ncclhooks.job"); v != "4711" {
		t.Errorf("resource: ncclhooks.job = %q, want 4711", v)
	}
	t.Logf("GPU %s: %d OTLP requests, %d series in the last, records_total of hook all %v, equal to the textfiles",
		deviceName(t), len(reqs), len(got), records)
}
