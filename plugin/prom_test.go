package main

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil/promlint"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// A /metrics port that another process holds disables the endpoint only:
// one WARN names the address, and the hooks, the JSON lines and the
// textfiles stay active, exact.
func TestPromPortTakenDisablesOnlyTheEndpoint(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	addr := ln.Addr().String()
	dir := t.TempDir()
	out, prom := filepath.Join(dir, "out"), filepath.Join(dir, "prom")
	prof := writeProfile(t, dir, `version: 1
name: prom-port
hooks:
  - name: all
    fields: [workCounter, channelId, phase]
    buffer: {slots: 65536}
    aggregate:
      - {name: events, kind: count, by: [channelId]}
`)
	r := runDriver(t, []string{"NCCL_HOOKS_PROFILE=" + prof, "NCCL_HOOKS_BACKEND=cpu", "NCCL_HOOKS_DUMP_DIR=" + out,
		"NCCL_HOOKS_PROM_DIR=" + prom, "NCCL_HOOKS_PROM_ADDR=" + addr, "NCCL_HOOKS_PROM_DUMP_STATS=1"}, 2, 1, 2, 300, 1)
	if len(r.warns) != 1 || !strings.Contains(r.warns[0], "/metrics endpoint disabled") || !strings.Contains(r.warns[0], addr) ||
		!strings.Contains(r.warns[0], "address already in use") {
		t.Fatalf("want one WARN that the endpoint at %s is disabled, got %q\n%s", addr, r.warns, r.out)
	}
	for d := 0; d < 2; d++ {
		if !r.hooks[fmt.Sprint(0, d)] {
			t.Errorf("device %d got no hook", d)
		}
	}
	o := readOutput(t, out)
	ranks := map[string]bool{}
	for d := 0; d < 2; d++ {
		k := fmt.Sprint("all ", d)
		if st := o.final[k]; st.Records != r.emitted[d] || st.Matched != r.emitted[d] || o.records[k] != int(st.Records) {
			t.Errorf("device %d: final %+v, %d record lines, emitted %d", d, st, o.records[k], r.emitted[d])
		}
		files, _ := filepath.Glob(filepath.Join(prom, fmt.Sprintf("ncclhooks_dev%d_*.prom", d)))
		if len(files) != 1 {
			t.Fatalf("device %d: textfiles %v", d, files)
		}
		data, err := os.ReadFile(files[0])
		if err != nil {
			t.Fatal(err)
		}
		if problems, err := promlint.New(strings.NewReader(string(data))).Lint(); err != nil || len(problems) > 0 {
			t.Errorf("%s: promlint %v %v", files[0], err, problems)
		}
		parser := expfmt.NewTextParser(model.LegacyValidation)
		fams, err := parser.TextToMetricFamilies(strings.NewReader(string(data)))
		if err != nil {
			t.Fatal(err)
		}
		f := fams["ncclhooks_records_total"]
		if f == nil || len(f.Metric) != 1 || f.Metric[0].GetCounter().GetValue() != float64(r.emitted[d]) {
			t.Fatalf("%s: records_total, want %d:\n%s", files[0], r.emitted[d], data)
		}
		for _, l := range f.Metric[0].GetLabel() {
			switch l.GetName() {
			case "gpu":
				if l.GetValue() != fmt.Sprintf("dev%d", d) {
					t.Errorf("device %d: gpu label %q", d, l.GetValue())
				}
			case "rank":
				ranks[l.GetValue()] = true
			}
		}
	}
	if !ranks["0"] || !ranks["1"] {
		t.Errorf("rank labels %v, want the two communicators' ranks 0 and 1", ranks)
	}
}
