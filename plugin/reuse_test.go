package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// A job that makes and destroys communicators (a process group per phase)
// reuses the context blocks of the finalized ones (docs/ARCHITECTURE.md,
// "Context blocks are reused"): many more communicators than the arena
// holds blocks for get their hook, the device makes no more blocks than
// communicators live at once, every event is counted exactly, and every
// record names its own communicator's index (the reused block's header is
// written again).
func TestContextBlocksReusedAcrossCycles(t *testing.T) {
	const devs, comms, chans, items, cycles = 1, 2, 2, 20, 300
	dir := t.TempDir()
	out := filepath.Join(dir, "out")
	// duration: each block holds a pairing table (64 KiB), so the arena
	// has room for fewer blocks than the run makes communicators.
	prof := writeProfile(t, dir, `version: 1
name: reuse
output: {dump_interval: 50ms}
hooks:
  - name: all
    fields: [workCounter, channelId, phase, {field: comm, type: u32}, duration]
    buffer: {slots: 65536, overflow: drop_newest}
`)
	r := runDriver(t, []string{"NCCL_HOOKS_PROFILE=" + prof, "NCCL_HOOKS_BACKEND=cpu", "NCCL_HOOKS_DUMP_DIR=" + out}, devs, comms, chans, items, cycles)
	if len(r.warns) != 0 {
		t.Fatalf("WARNs: %q", r.warns)
	}
	o := readOutput(t, out)
	exact(t, r, o, devs, cycles)
	// Every communicator got its hook: a comm line each, indexes counting
	// on over the cycles.
	for cy := range cycles {
		for i := range comms {
			name := fmt.Sprintf("cdriver-%d-%d", cy, i)
			if c, ok := o.comms[name]; !ok || c.Index != comms*cy+i {
				t.Fatalf("comm line of %s: %+v (found %v), want index %d", name, c, ok, comms*cy+i)
			}
		}
	}
	// The blocks: never more than the communicators alive at once.
	blockRE := regexp.MustCompile(`comm index (\d+) \(context block (\d+) of (\d+)\)`)
	seen := 0
	for _, l := range strings.Split(r.out, "\n") {
		m := blockRE.FindStringSubmatch(l)
		if m == nil {
			continue
		}
		seen++
		blk, _ := strconv.Atoi(m[2])
		n, _ := strconv.Atoi(m[3])
		if blk >= comms || n > comms {
			t.Fatalf("communicator %s got block %d of %d: more blocks than the %d communicators alive at once", m[1], blk, n, comms)
		}
	}
	if seen != cycles*comms*devs {
		t.Fatalf("%d INFO lines naming a context block, want one per communicator (%d)", seen, cycles*comms*devs)
	}
	// Every record names its communicator's index, never its block's:
	// each communicator's records are its own events (channels x items
	// STARTs and STOPs), whatever block it had.
	perComm := recordsByComm(t, outputFile(t, out))
	for idx := range cycles * comms {
		if perComm[idx] != chans*items*2 {
			t.Fatalf("communicator %d: %d records, want %d (of %d communicators seen)", idx, perComm[idx], chans*items*2, len(perComm))
		}
	}
}

// recordsByComm counts the record lines of an output by their comm field.
func recordsByComm(t *testing.T, path string) map[int]int {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	n := map[int]int{}
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<24)
	for sc.Scan() {
		var line struct {
			Type string `json:"type"`
			Comm *int   `json:"comm"`
		}
		if err := json.Unmarshal(sc.Bytes(), &line); err != nil {
			t.Fatal(err)
		}
		if line.Type == "record" {
			if line.Comm == nil {
				t.Fatalf("record without comm: %s", sc.Text())
			}
			n[*line.Comm]++
		}
	}
	return n
}

// The aggregates of finalized communicators are folded into the device's
// running totals before their blocks are reused: over many cycles the
// aggregate lines' counts never decrease, and the last one counts every
// work item emitted over all cycles (the latency profile: one per STOP).
func TestAggregatesExactAcrossBlockReuse(t *testing.T) {
	const devs, comms, chans, items, cycles = 2, 2, 2, 30, 150
	dir := t.TempDir()
	out := filepath.Join(dir, "out")
	prof := writeProfile(t, dir, `version: 1
name: reuse-agg
output: {dump_interval: 20ms}
hooks:
  - name: latency
    when: phase == STOP && paired
    aggregate:
      - {name: duration_ns, kind: histogram, value: duration, by: [funcId], buckets: log2}
      - {name: n, kind: count, by: [comm]}
`)
	r := runDriver(t, []string{"NCCL_HOOKS_PROFILE=" + prof, "NCCL_HOOKS_BACKEND=cpu", "NCCL_HOOKS_DUMP_DIR=" + out}, devs, comms, chans, items, cycles)
	if len(r.warns) != 0 {
		t.Fatalf("WARNs: %q", r.warns)
	}
	f, err := os.Open(outputFile(t, out))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	last := map[string]uint64{}  // "name dev" -> count summed over the rows of the latest line
	lines := map[string]int{}    // aggregate lines read
	commRows := map[string]int{} // rows of n in the last line
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<24)
	for sc.Scan() {
		var line struct {
			Type   string `json:"type"`
			Name   string `json:"name"`
			Device int    `json:"device"`
			Rows   []struct {
				Count uint64 `json:"count"`
			} `json:"rows"`
		}
		if err := json.Unmarshal(sc.Bytes(), &line); err != nil {
			t.Fatal(err)
		}
		if line.Type != "aggregate" {
			continue
		}
		k := fmt.Sprint(line.Name, " ", line.Device)
		var total uint64
		for _, row := range line.Rows {
			total += row.Count
		}
		if total < last[k] {
			t.Fatalf("%s: aggregate line %d counts %d, the one before %d: a total decreased", k, lines[k]+1, total, last[k])
		}
		last[k], lines[k], commRows[k] = total, lines[k]+1, len(line.Rows)
	}
	for d := range devs {
		want := r.emitted[d] / 2 // one work item a START and STOP
		for _, name := range []string{"duration_ns", "n"} {
			k := fmt.Sprint(name, " ", d)
			if last[k] != want || lines[k] < cycles {
				t.Errorf("%s: %d aggregate lines, the last counts %d work items, want %d (emitted over %d cycles) and a line a cycle at least", k, lines[k], last[k], want, cycles)
			}
		}
		// by comm: 16 communicators' rows and the overflow row.
		if k := fmt.Sprint("n ", d); commRows[k] != 17 {
			t.Errorf("%s: %d rows keyed by comm, want 17 (indexes 0-15 and the overflow)", k, commRows[k])
		}
	}
}
