package main

import (
	"bufio"
	"encoding/json"
	"maps"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// The JSON samples in examples/README.md have the keys a real run writes
// today (issue 34.10: they had fallen behind the output). Each complete
// sample line ("...": elided list items) of a type that all-events writes
// is compared with the first such line of a real run.
func TestExamplesReadmeSamplesMatchTheOutput(t *testing.T) {
	dir := t.TempDir()
	if out, code := cli(t, "run", "../../examples/all-events.yaml", "--backend", "cpu", "--out", dir, "--devices", "1", "--comms", "1", "--items", "20"); code != 0 {
		t.Fatalf("run: exit %d:\n%s", code, out)
	}
	real := map[string][]string{} // type -> keys of its first line
	for _, l := range readLines(t, onlyFile(t, dir)) {
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatal(err)
		}
		if typ := m["type"].(string); real[typ] == nil {
			real[typ] = slices.Sorted(maps.Keys(m))
		}
	}
	elided := regexp.MustCompile(`,\s*\.\.\.\s*([\]}])`)
	samples := 0
	for i, l := range readLines(t, "../../examples/README.md") {
		if !strings.HasPrefix(l, `{"type":"`) || !strings.HasSuffix(l, "}") {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(elided.ReplaceAllString(l, "$1")), &m); err != nil {
			t.Errorf("examples/README.md:%d: not JSON: %v\n%s", i+1, err, l)
			continue
		}
		want, ok := real[m["type"].(string)]
		if !ok || m["type"] == "record" && m["hook"] != "all" {
			continue // a type or a record all-events does not write
		}
		samples++
		if got := slices.Sorted(maps.Keys(m)); !slices.Equal(got, want) {
			t.Errorf("examples/README.md:%d: a %s line with keys %v; the plugin writes %v", i+1, m["type"], got, want)
		}
	}
	if samples < 6 {
		t.Errorf("%d sample lines compared, want the header, comm, clock, device, record and dump_stats at least", samples)
	}
}

func readLines(t *testing.T, path string) []string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var lines []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	for sc.Scan() {
		lines = append(lines, sc.Text())
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return lines
}
