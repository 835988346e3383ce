package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ncclhooks/ncclhooks/internal/schema"
)

// lines reads a JSON lines file into its lines, by type.
func linesByType(t *testing.T, path string) map[string][]map[string]any {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]map[string]any{}
	for _, l := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		out[m["type"].(string)] = append(out[m["type"].(string)], m)
	}
	return out
}

func onlyFile(t *testing.T, dir string) string {
	t.Helper()
	m, _ := filepath.Glob(filepath.Join(dir, "*.jsonl"))
	if len(m) != 1 {
		t.Fatalf("%s: %d files, want 1", dir, len(m))
	}
	return m[0]
}

type byReport struct {
	Funcs []struct {
		Hook, Func string
		Groups     []struct {
			Key, Label string
			Dist       struct {
				Count int     `json:"count"`
				P50   float64 `json:"p50_ns"`
			} `json:"dist"`
			Slowest bool `json:"slowest"`
		} `json:"groups"`
	} `json:"functions"`
	Unattributed int `json:"unattributed_items"`
}

func reportBy(t *testing.T, by string, dirs ...string) byReport {
	t.Helper()
	out, code := cli(t, append([]string{"report", "--by", by, "--json"}, dirs...)...)
	var r byReport
	if code != 0 || json.Unmarshal([]byte(out), &r) != nil || len(r.Funcs) == 0 {
		t.Fatalf("report --by %s: exit %d:\n%.3000s", by, code, out)
	}
	return r
}

// Two processes of one job on one node, each seeing its GPU as device 0 (a
// simulated one: the cpu backend), rank 0 and rank 1 of the same two
// communicators, rank 1 planted 4x slower: every output says which process,
// rank and communicator it is; report --by names the slow rank and device;
// trace keeps the processes apart.
func TestTwoProcessesOfOneJob(t *testing.T) {
	dirs := []string{t.TempDir(), t.TempDir()}
	for rank, dir := range dirs {
		args := []string{"run", "../../examples/all-events.yaml", "--backend", "cpu", "--out", dir, "--devices", "1",
			"--comms", "2", "--channels", "2", "--items", "300", "--ranks", "2", "--rank", fmt.Sprint(rank)}
		if rank == 1 {
			args = append(args, "--slowdown", "4")
		}
		if out, code := cli(t, args...); code != 0 || !strings.Contains(out, "result: exact") {
			t.Fatalf("rank %d: exit %d:\n%s", rank, code, out)
		}
	}
	var pids [2]int
	commIDs := map[int]string{} // comm index -> comm_id, the same in both processes
	for rank, dir := range dirs {
		ls := linesByType(t, onlyFile(t, dir))
		h := ls[schema.TypeHeader][0]
		pids[rank] = int(h["pid"].(float64))
		if h["host"] == "" || pids[rank] <= 0 || filepath.Base(fmt.Sprint(h["executable"])) != filepath.Base(cliPath) {
			t.Errorf("rank %d header %v: want host, pid and the executable %s", rank, h, cliPath)
		}
		devs := ls[schema.TypeDevice]
		if len(devs) < 2 || devs[0]["device"].(float64) != 0 || !strings.HasPrefix(devs[0]["name"].(string), "cpu") {
			t.Errorf("rank %d device lines %v: want device 0 at load and at each dump, named by the cpu", rank, devs)
		}
		comms := ls[schema.TypeComm]
		if len(comms) != 2 {
			t.Fatalf("rank %d: comm lines %v", rank, comms)
		}
		for _, c := range comms {
			idx := int(c["comm"].(float64))
			if int(c["rank"].(float64)) != rank || c["nranks"].(float64) != 2 {
				t.Errorf("rank %d: comm line %v", rank, c)
			}
			if id, ok := commIDs[idx]; ok && id != c["comm_id"] {
				t.Errorf("comm %d: comm_id %v in rank %d, %v in rank 0", idx, c["comm_id"], rank, id)
			}
			commIDs[idx] = c["comm_id"].(string)
		}
	}
	if pids[0] == pids[1] {
		t.Fatalf("both processes have pid %d", pids[0])
	}

	total := func(r byReport, want int) int {
		n := 0
		for _, f := range r.Funcs {
			if len(f.Groups) != want {
				t.Errorf("%s: %d groups, want %d: %+v", f.Func, len(f.Groups), want, f.Groups)
			}
			for _, g := range f.Groups {
				n += g.Dist.Count
			}
		}
		return n
	}
	byRank := reportBy(t, "rank", dirs...)
	nRank := total(byRank, 2) // a rank is a device's place in both its communicators
	for _, f := range byRank.Funcs {
		for _, g := range f.Groups {
			if g.Slowest && !strings.Contains(g.Label, "rank 1/2") {
				t.Errorf("%s: slowest is %q, want a rank 1 group (planted 4x)", f.Func, g.Label)
			}
		}
	}
	byDevice := reportBy(t, "device", dirs...)
	nDevice := total(byDevice, 2)
	for _, f := range byDevice.Funcs {
		for _, g := range f.Groups {
			if g.Slowest != strings.Contains(g.Key, fmt.Sprintf("pid %d ", pids[1])) {
				t.Errorf("%s: group %q slowest=%v: want rank 1's device (pid %d) the slowest", f.Func, g.Key, g.Slowest, pids[1])
			}
		}
	}
	byComm := reportBy(t, "comm", dirs...)
	nComm := total(byComm, 2)
	if nRank != nDevice || nRank != nComm || nRank == 0 || byRank.Unattributed+byDevice.Unattributed+byComm.Unattributed != 0 {
		t.Errorf("work items by rank %d, device %d, comm %d; unattributed %d %d %d: want all the same, none left out",
			nRank, nDevice, nComm, byRank.Unattributed, byDevice.Unattributed, byComm.Unattributed)
	}
	if out, code := cli(t, append([]string{"report", "--by", "device"}, dirs...)...); code != 0 || !strings.Contains(out, "<- slowest") {
		t.Errorf("report --by device table: exit %d:\n%s", code, out)
	}
	if out, code := cli(t, "report", "--by", "gpu", dirs[0]); code != 2 || !strings.Contains(out, "want rank, device or comm") {
		t.Errorf("--by gpu: exit %d: %s", code, out)
	}

	// The trace: a process each, named by rank and pid (it was one
	// "device 0" for both).
	tracePath := filepath.Join(t.TempDir(), "trace.json")
	if out, code := cli(t, append([]string{"trace", "-o", tracePath}, dirs...)...); code != 0 {
		t.Fatalf("trace: exit %d:\n%s", code, out)
	}
	data, err := os.ReadFile(tracePath)
	if err != nil {
		t.Fatal(err)
	}
	var tr struct {
		TraceEvents []struct {
			Name string         `json:"name"`
			Ph   string         `json:"ph"`
			Pid  int            `json:"pid"`
			Args map[string]any `json:"args"`
		} `json:"traceEvents"`
	}
	if err := json.Unmarshal(data, &tr); err != nil {
		t.Fatal(err)
	}
	names := map[int]string{}
	slicesPer := map[int]int{}
	tracks := map[int]map[string]bool{} // pid -> thread names
	for _, e := range tr.TraceEvents {
		switch {
		case e.Ph == "M" && e.Name == "process_name":
			names[e.Pid] = e.Args["name"].(string)
		case e.Ph == "M" && e.Name == "thread_name":
			if tracks[e.Pid] == nil {
				tracks[e.Pid] = map[string]bool{}
			}
			tracks[e.Pid][e.Args["name"].(string)] = true
		case e.Ph == "X":
			slicesPer[e.Pid]++
			if c, ok := e.Args["comm"].(map[string]any); !ok || c["comm_id"] == nil || c["name"] == nil {
				t.Fatalf("slice %v: no comm_id and name in its args", e)
			}
		}
	}
	if len(names) != 2 || len(slicesPer) != 2 {
		t.Fatalf("trace processes %v, slices per process %v: want two", names, slicesPer)
	}
	for rank, pid := range pids {
		found := false
		for p, n := range names {
			if n != fmt.Sprintf("rank %d/2 (%s pid %d)", rank, hostname(t), pid) {
				continue
			}
			found = true
			// A track per communicator and channel.
			for k, id := range commIDs {
				for ch := range 2 {
					if want := fmt.Sprintf("comm harness-comm%d %s rank %d, channel %d", k, id, rank, ch); !tracks[p][want] {
						t.Errorf("rank %d: no track %q among %v", rank, want, tracks[p])
					}
				}
			}
		}
		if !found {
			t.Errorf("no trace process \"rank %d/2 (host pid %d)\": %v", rank, pid, names)
		}
	}
}

// hostname is this host's name, as the plugin writes it.
func hostname(t *testing.T) string {
	t.Helper()
	h, err := os.Hostname()
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// The harness's default run of an aggregate-only profile (issue 34.2): two
// devices of two communicators each. By rank every aggregate row has its
// rank (its device's, in both communicators), so the table is there; by comm
// no row can be split between the device's communicators, and the report
// says so rather than printing its heading alone.
func TestReportByOfTheDefaultRun(t *testing.T) {
	out := t.TempDir()
	if o, code := cli(t, "run", "../../examples/latency.yaml", "--backend", "cpu", "--out", out, "--items", "300"); code != 0 || !strings.Contains(o, "result: exact") {
		t.Fatalf("run: exit %d:\n%s", code, o)
	}
	o, code := cli(t, "report", "--by", "rank", out)
	if code != 0 || strings.Contains(o, "left out") || !strings.Contains(o, "rank 0/2 of comms ") || !strings.Contains(o, "rank 1/2 of comms ") ||
		!strings.Contains(o, "<- slowest") {
		t.Errorf("report --by rank: exit %d: want both aggregates for ranks 0 and 1, none left out:\n%s", code, o)
	}
	o, code = cli(t, "report", "--by", "comm", out)
	if code != 0 || !strings.Contains(o, "aggregate rows left out: their device has several communicators") {
		t.Errorf("report --by comm: exit %d: want the rows left out said:\n%s", code, o)
	}
}

// Aggregates keyed by comm, through the real plugin and harness (which
// checks every row against its own computation): each communicator of a
// device has its own rows, and report --by comm attributes every row to its
// communicator, though three share each device.
func TestAggregatesByComm(t *testing.T) {
	dir := t.TempDir()
	prof := writeFile(t, dir, "by-comm.yaml", `version: 1
name: by-comm
hooks:
  - name: lat
    when: phase == STOP && paired
    aggregate:
      - {name: items, kind: count, by: [funcId, comm]}
      - {name: duration_ns, kind: histogram, value: duration, by: [channelId, comm]}
      - {name: total_ns, kind: sum, value: duration, by: [comm]}
`)
	out := filepath.Join(dir, "out")
	if o, code := cli(t, "run", prof, "--backend", "cpu", "--out", out, "--devices", "2", "--comms", "3", "--channels", "2", "--items", "200"); code != 0 || !strings.Contains(o, "result: exact") {
		t.Fatalf("exit %d:\n%s", code, o)
	}
	final := map[[2]any]map[int]uint64{} // (device, aggregate) -> comm -> count, from the last snapshot
	for _, a := range linesByType(t, onlyFile(t, out))[schema.TypeAggregate] {
		k := [2]any{a["device"], a["name"]}
		final[k] = map[int]uint64{}
		for _, r := range a["rows"].([]any) {
			row := r.(map[string]any)
			final[k][int(row["comm"].(float64))] += uint64(row["count"].(float64))
		}
	}
	var total uint64
	for dev := range 2 {
		for _, name := range []string{"items", "duration_ns", "total_ns"} {
			got := final[[2]any{float64(dev), name}]
			if len(got) != 3 || got[0] == 0 || got[1] == 0 || got[2] == 0 {
				t.Errorf("device %d %s: counts by comm %v, want three communicators", dev, name, got)
			}
			if name == "total_ns" {
				for _, n := range got {
					total += n
				}
			}
		}
	}
	o, code := cli(t, "report", "--by", "comm", "--json", out)
	var r struct {
		Aggregates []struct {
			Name   string
			Groups []struct {
				Key  string
				Stat struct {
					Count uint64 `json:"count"`
				} `json:"stat"`
			} `json:"groups"`
		} `json:"aggregates"`
		Unattributed int `json:"unattributed_aggregate_rows"`
	}
	if code != 0 || json.Unmarshal([]byte(o), &r) != nil {
		t.Fatalf("report --by comm: exit %d:\n%.2000s", code, o)
	}
	if r.Unattributed != 0 {
		t.Errorf("%d aggregate rows unattributed", r.Unattributed)
	}
	for _, a := range r.Aggregates {
		if a.Name != "total_ns" {
			continue
		}
		var sum uint64
		for _, g := range a.Groups {
			sum += g.Stat.Count
		}
		if len(a.Groups) != 6 || sum != total {
			t.Errorf("total_ns by comm: %d groups, %d values: want the 6 communicators and the file's %d", len(a.Groups), sum, total)
		}
	}
}
