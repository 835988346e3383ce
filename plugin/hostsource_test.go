package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/ncclhooks/ncclhooks/internal/config"
	"github.com/ncclhooks/ncclhooks/internal/schema"
)

// The host-event source, tested as released NCCL drives it: testdata/hostdriver.c
// calls init/startEvent/recordEventState/stopEvent/finalize of ncclProfiler_v5
// (NCCL 2.28), _v6 (2.30) or the official _v7 (2.31) with descriptors of that
// version, one thread per communicator, and exports no device hook.

// hostColls are hostdriver.c's collTable, by the device function NCCL would
// run for each (reductions with Sum, signed types by their unsigned twin).
var hostColls = []string{
	"AllReduce_Sum_f32_RING_LL", "SendRecv", "AllGather_RING_SIMPLE",
	"ReduceScatter_Sum_u32_RING_LL128", "AllReduce_Sum_bf16_TREE_SIMPLE", "SendRecv",
}

// hostT and hostD are hostdriver.c's T and D: where channel ch of collective
// k of the communicator of rank c starts, and how long it lasts.
func hostT(c, k, ch int) uint64 {
	return 1000000000000 + uint64(c)*1000000000 + uint64(k)*1000000 + uint64(ch)*1000
}
func hostD(k, ch int) uint64 { return 100 + uint64(k)*10 + uint64(ch) }

type hostRun struct {
	out   string
	warns []string
	masks map[int]int // communicator -> the activation mask init gave NCCL
}

func runHostDriver(t *testing.T, env []string, version, comms, colls, channels int) *hostRun {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "hostdriver")
	if out, err := exec.Command("cc", "-O2", "-Wall", "-Werror", "-pthread", "-rdynamic", "-I../internal/abi", "-o", bin,
		"testdata/hostdriver.c", "-ldl").CombinedOutput(); err != nil {
		t.Fatalf("building hostdriver: %v\n%s", err, out)
	}
	ctx, cancel := context.WithTimeout(context.Background(), driverTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, pluginPath, fmt.Sprint(version), fmt.Sprint(comms), fmt.Sprint(colls), fmt.Sprint(channels))
	cmd.Env = append(filteredEnv(), env...)
	out, err := cmd.CombinedOutput()
	r := &hostRun{out: string(out), masks: map[int]int{}}
	if err != nil || !strings.Contains(r.out, "DONE") {
		t.Fatalf("hostdriver: %v\n%s", err, out)
	}
	for _, l := range strings.Split(r.out, "\n") {
		var c, m int
		switch {
		case strings.HasPrefix(l, "LOG 2 "):
			r.warns = append(r.warns, strings.TrimPrefix(l, "LOG 2 "))
		case strings.HasPrefix(l, "MASK "):
			fmt.Sscanf(l, "MASK %d %d", &c, &m)
			r.masks[c] = m
		}
	}
	return r
}

// hostOutput is one run's output, decoded.
type hostOutput struct {
	header  schema.Header
	ranks   map[int]int // comm index -> rank (the driver's communicator)
	records map[string][]map[string]json.RawMessage
	final   map[string]schema.DumpStats
	aggs    map[string]schema.Aggregate // hook/name -> final snapshot
	models  []string                    // the device lines' names and clock lines' models
}

// hostRecord is a record of a kernel channel the host driver reported:
// its rank, collective k (workCounter - 1), channel and phase.
type hostRecord struct {
	rec                map[string]json.RawMessage
	rank, k, ch, phase int
}

// kernelChannelRecords returns hook's records, failing the test on one that
// names no kernel channel the driver reported, or a second one of it.
func (o *hostOutput) kernelChannelRecords(t *testing.T, hook string, colls, channels int) []hostRecord {
	t.Helper()
	seen := map[[4]int]bool{}
	var out []hostRecord
	for _, rec := range o.records[hook] {
		rank, ok := o.ranks[int(num(t, rec, "comm"))]
		hr := hostRecord{rank: rank, k: int(num(t, rec, "workCounter")) - 1, ch: int(num(t, rec, "channelId")), phase: int(num(t, rec, "phase"))}
		key := [4]int{hr.rank, hr.k, hr.ch, hr.phase}
		if !ok || hr.k < 0 || hr.k >= colls || hr.ch >= channels || hr.phase > 1 || seen[key] {
			t.Fatalf("record %v: no such kernel channel, or a second record of it", rec)
		}
		seen[key] = true
		hr.rec = rec
		out = append(out, hr)
	}
	return out
}

func readHostOutput(t *testing.T, dir string) *hostOutput {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join(dir, "ncclhooks-*.jsonl"))
	if len(files) != 1 {
		t.Fatalf("want one output file in %s, got %v", dir, files)
	}
	f, err := os.Open(files[0])
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	o := &hostOutput{ranks: map[int]int{}, records: map[string][]map[string]json.RawMessage{},
		final: map[string]schema.DumpStats{}, aggs: map[string]schema.Aggregate{}}
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<24)
	for sc.Scan() {
		var typ struct{ Type string }
		if err := json.Unmarshal(sc.Bytes(), &typ); err != nil {
			t.Fatalf("bad JSON line %q: %v", sc.Text(), err)
		}
		switch typ.Type {
		case "header":
			json.Unmarshal(sc.Bytes(), &o.header)
		case "device", "clock":
			var d struct{ Name, Model string }
			json.Unmarshal(sc.Bytes(), &d)
			o.models = append(o.models, d.Name+d.Model)
		case "comm":
			var c schema.Comm
			json.Unmarshal(sc.Bytes(), &c)
			o.ranks[c.Comm] = c.Rank
		case "record":
			var r map[string]json.RawMessage
			json.Unmarshal(sc.Bytes(), &r)
			var hook string
			json.Unmarshal(r["hook"], &hook)
			o.records[hook] = append(o.records[hook], r)
		case "dump_stats":
			var d schema.DumpStats
			json.Unmarshal(sc.Bytes(), &d)
			if d.Final {
				o.final[d.Hook] = d
			}
		case "aggregate":
			var a schema.Aggregate
			json.Unmarshal(sc.Bytes(), &a)
			if a.Final {
				o.aggs[a.Hook+"/"+a.Name] = a
			}
		}
	}
	return o
}

func num(t *testing.T, r map[string]json.RawMessage, key string) uint64 {
	t.Helper()
	var v uint64
	if err := json.Unmarshal(r[key], &v); err != nil {
		t.Fatalf("record %v: %s: %v", r, key, err)
	}
	return v
}

// Every kernel channel of every collective of every communicator becomes one
// START and one STOP record with NCCL's GPU timers, its channel, a work
// counter per (communicator, channel), the function NCCL ran and the
// communicator; name predicates select by those names; duration pairs each
// STOP with its START although the proxy starts every channel before it
// stops one; and records + drops = matched, exactly, for each NCCL version's
// struct and descriptors.
func TestHostEventsExact(t *testing.T) {
	const comms, colls, channels = 4, 30, 8
	for _, version := range []int{5, 6, 7} {
		t.Run(fmt.Sprintf("v%d", version), func(t *testing.T) {
			dir := t.TempDir()
			prof := writeProfile(t, dir, `version: 1
name: host
output: {dump_interval: 1h}
hooks:
  - name: all
    fields: [timestamp, workCounter, channelId, phase, funcId, comm]
    buffer: {slots: 4096}
  - name: allreduce
    when: func startsWith "AllReduce" && phase == STOP
    fields: [workCounter, channelId, phase, comm, duration]
  - name: latency
    when: phase == STOP && paired
    aggregate:
      - {name: per_func, kind: sum, value: duration, by: [funcId]}
      - {name: per_channel, kind: count, by: [channelId]}
`)
			r := runHostDriver(t, []string{"NCCL_HOOKS_PROFILE=" + prof, "NCCL_HOOKS_DUMP_DIR=" + dir}, version, comms, colls, channels)
			if len(r.warns) != 0 {
				t.Fatalf("WARN lines: %v\n%s", r.warns, r.out)
			}
			for c := range comms {
				if want := 1<<1 | 1<<2 | 1<<6; r.masks[c] != want {
					t.Errorf("communicator %d: activation mask %#x, want Coll|P2p|KernelCh %#x", c, r.masks[c], want)
				}
			}
			wantNCCL := map[int]string{5: "NCCL 2.28.9 loaded ncclProfiler_v5", 6: "NCCL 2.30.7 loaded ncclProfiler_v6", 7: "NCCL 2.31.2 loaded ncclProfiler_v7"}[version]
			if !strings.Contains(r.out, wantNCCL+": the hooks run on NCCL's host events") {
				t.Errorf("no INFO %q naming the source:\n%s", wantNCCL, r.out)
			}
			o := readHostOutput(t, dir)
			if want := strings.Fields(wantNCCL)[1]; o.header.NCCLVersion != want {
				t.Errorf("header nccl_version %q, want %q (ncclGetVersion)", o.header.NCCLVersion, want)
			}
			if o.header.Backend != "host" || len(o.ranks) != comms {
				t.Fatalf("header backend %q, %d comm lines; want host, %d", o.header.Backend, len(o.ranks), comms)
			}
			// The events are the GPU's: no driver here, so "host events",
			// never the CPU that runs the hooks.
			for _, m := range o.models {
				if m != "host events" {
					t.Errorf("device or clock line names %q, want the GPU or \"host events\"", m)
				}
			}
			if len(o.models) < 2 {
				t.Errorf("device and clock lines %v: want both", o.models)
			}

			for _, hr := range o.kernelChannelRecords(t, "all", colls, channels) {
				rec, rank, k, ch, ph := hr.rec, hr.rank, hr.k, hr.ch, hr.phase
				want := hostT(rank, k, ch)
				if ph == 1 {
					want += hostD(k, ch)
				}
				var fn string
				json.Unmarshal(rec["func"], &fn)
				if ts := num(t, rec, "timestamp"); ts != want || fn != hostColls[k%len(hostColls)] {
					t.Errorf("rank %d collective %d channel %d phase %d: timestamp %d func %q; NCCL reported %d for %q", rank, k, ch, ph, ts, fn, want, hostColls[k%len(hostColls)])
				}
			}
			events := uint64(comms * colls * channels * 2)
			if st := o.final["all"]; uint64(len(o.records["all"])) != events || st.Matched != events || st.Records != events || st.Dropped != 0 {
				t.Errorf("hook all: %d records, final dump %+v; want every one of %d events", len(o.records["all"]), st, events)
			}

			// The name predicate: STOPs of the AllReduce collectives, each with its duration.
			wantAR := 0
			for k := range colls {
				if strings.HasPrefix(hostColls[k%len(hostColls)], "AllReduce") {
					wantAR += comms * channels
				}
			}
			for _, rec := range o.records["allreduce"] {
				k, ch := int(num(t, rec, "workCounter"))-1, int(num(t, rec, "channelId"))
				if !strings.HasPrefix(hostColls[k%len(hostColls)], "AllReduce") || num(t, rec, "duration") != hostD(k, ch) {
					t.Errorf("allreduce record %v: collective %d is %s, lasting %d", rec, k, hostColls[k%len(hostColls)], hostD(k, ch))
				}
			}
			if st := o.final["allreduce"]; len(o.records["allreduce"]) != wantAR || st.Matched != uint64(wantAR) || st.Records != uint64(wantAR) {
				t.Errorf("hook allreduce: %d records, final %+v; want %d", len(o.records["allreduce"]), st, wantAR)
			}

			// The aggregates, against the driver's own durations.
			wantSum, wantCount := map[string]uint64{}, map[string]uint64{}
			for k := range colls {
				for ch := range channels {
					wantSum[hostColls[k%len(hostColls)]] += comms * hostD(k, ch)
					wantCount[fmt.Sprint(ch)] += comms
				}
			}
			checkPerFunc(t, o.aggs["latency/per_func"].Rows, comms*channels, colls, wantSum)
			gotCount := map[string]uint64{}
			for _, row := range o.aggs["latency/per_channel"].Rows {
				gotCount[string(row.ChannelID)] = row.Count
			}
			if fmt.Sprint(gotCount) != fmt.Sprint(wantCount) {
				t.Errorf("paired STOPs by channel %v, want %v", gotCount, wantCount)
			}
		})
	}
}

// Work positions from NCCL's host events: the source counts each
// (communicator, channel) from 1 as NCCL does, START from the thread that
// starts the work and STOP from the proxy's, and every event lands once in
// its communicator's region.
func TestHostEventsWorkPositions(t *testing.T) {
	const comms, colls, channels = 4, 30, 8
	dir := t.TempDir()
	prof := writeProfile(t, dir, `version: 1
name: host-work
output: {dump_interval: 1h}
hooks:
  - name: all
    fields: [timestamp, workCounter, channelId, phase, comm]
    buffer: {slots: 4096, overflow: overwrite_oldest, positions: work}
`)
	r := runHostDriver(t, []string{"NCCL_HOOKS_PROFILE=" + prof, "NCCL_HOOKS_DUMP_DIR=" + dir}, 7, comms, colls, channels)
	if len(r.warns) != 0 {
		t.Fatalf("WARN lines: %v\n%s", r.warns, r.out)
	}
	o := readHostOutput(t, dir)
	for _, hr := range o.kernelChannelRecords(t, "all", colls, channels) {
		if pos, seq := 2*uint64(hr.k+1)+uint64(hr.phase), num(t, hr.rec, "seq"); seq != pos {
			t.Errorf("record %v: seq %d, want its region position %d", hr.rec, seq, pos)
		}
		// The slot leaves the work counter out: the drain's, from the
		// position, is NCCL's kernel-channel count from 1.
		if wc := num(t, hr.rec, "workCounter"); wc != uint64(hr.k+1) {
			t.Errorf("record %v: workCounter %d, want %d", hr.rec, wc, hr.k+1)
		}
	}
	events := uint64(comms * colls * channels * 2)
	if st := o.final["all"]; uint64(len(o.records["all"])) != events || st.Matched != events || st.Records != events || st.Dropped != 0 {
		t.Errorf("%d records, final dump %+v; want every one of %d events", len(o.records["all"]), st, events)
	}
}

// Latency paired by the drain from NCCL's host events, through the real
// plugin: every kernel channel of every collective counts once, in its
// function's rows, with NCCL's own duration, and its records are counted,
// never written.
func TestHostEventsDrainLatency(t *testing.T) {
	const comms, colls, channels = 4, 30, 8
	dir := t.TempDir()
	prof := writeProfile(t, dir, `version: 1
name: host-drain
output: {dump_interval: 1h}
hooks:
  - name: latency
    aggregate:
      - {name: per_func, kind: sum, value: duration, by: [funcId]}
      - {name: slowest, kind: max, value: duration, by: [funcId, comm]}
      - {name: per_channel, kind: count, by: [channelId]}
    buffer: {slots: 4096, overflow: overwrite_oldest, positions: work}
`)
	r := runHostDriver(t, []string{"NCCL_HOOKS_PROFILE=" + prof, "NCCL_HOOKS_DUMP_DIR=" + dir}, 7, comms, colls, channels)
	if len(r.warns) != 0 {
		t.Fatalf("WARN lines: %v\n%s", r.warns, r.out)
	}
	if !strings.Contains(r.out, "START and STOP paired by the drain") {
		t.Errorf("no INFO line saying the drain pairs the records:\n%s", r.out)
	}
	o := readHostOutput(t, dir)
	events := uint64(comms * colls * channels * 2)
	if st := o.final["latency"]; len(o.records["latency"]) != 0 || st.Matched != events || st.Records != events || st.Dropped != 0 || st.Pending != 0 {
		t.Errorf("%d record lines, final dump %+v; want none written and all %d events counted", len(o.records["latency"]), st, events)
	}
	wantSum, wantMax, wantCount := map[string]uint64{}, map[string]uint64{}, map[string]uint64{}
	for k := range colls {
		fn := hostColls[k%len(hostColls)]
		for ch := range channels {
			wantSum[fn] += comms * hostD(k, ch)
			wantCount[fmt.Sprint(ch)] += comms
			wantMax[fn] = max(wantMax[fn], hostD(k, ch))
		}
	}
	checkPerFunc(t, o.aggs["latency/per_func"].Rows, comms*channels, colls, wantSum)
	slowest := o.aggs["latency/slowest"].Rows
	if len(slowest) != comms*len(wantMax) {
		t.Errorf("%d rows of slowest by function and communicator, want %d", len(slowest), comms*len(wantMax))
	}
	for _, row := range slowest {
		if row.Max == nil || uint64(*row.Max) != wantMax[row.Func] {
			t.Errorf("slowest %s comm %s: %v, want %d", row.Func, row.Comm, row.Max, wantMax[row.Func])
		}
	}
	gotCount := map[string]uint64{}
	for _, row := range o.aggs["latency/per_channel"].Rows {
		gotCount[string(row.ChannelID)] = row.Count
	}
	if fmt.Sprint(gotCount) != fmt.Sprint(wantCount) {
		t.Errorf("work items by channel %v, want %v", gotCount, wantCount)
	}
}

// checkPerFunc checks a sum of durations by funcId: each function's row
// counts its collectives' work items (perColl of each) and sums to
// wantSum's.
func checkPerFunc(t *testing.T, rows []schema.AggRow, perColl, colls int, wantSum map[string]uint64) {
	t.Helper()
	gotSum := map[string]uint64{}
	for _, row := range rows {
		s, err := row.Sum.Int64()
		if err != nil {
			t.Fatalf("per_func %s: sum %q: %v", row.Func, row.Sum, err)
		}
		gotSum[row.Func] = uint64(s)
		if want := uint64(perColl * countOf(row.Func, colls)); row.Count != want {
			t.Errorf("per_func %s: %d work items, want %d", row.Func, row.Count, want)
		}
	}
	if fmt.Sprint(gotSum) != fmt.Sprint(wantSum) {
		t.Errorf("sum of durations by function %v, want %v", gotSum, wantSum)
	}
}

// countOf is how many of colls collectives run the function name.
func countOf(name string, colls int) int {
	n := 0
	for k := range colls {
		if hostColls[k%len(hostColls)] == name {
			n++
		}
	}
	return n
}

// A buffer far smaller than the burst of events: what does not fit is
// counted as dropped, records + drops = matched = events, exactly.
func TestHostEventsOverflowCounted(t *testing.T) {
	const comms, colls, channels = 4, 400, 16
	dir := t.TempDir()
	prof := writeProfile(t, dir, `version: 1
name: overflow
output: {dump_interval: 1h}
hooks:
  - name: all
    fields: [timestamp, workCounter, channelId, phase, comm]
    buffer: {slots: 16}
`)
	r := runHostDriver(t, []string{"NCCL_HOOKS_PROFILE=" + prof, "NCCL_HOOKS_DUMP_DIR=" + dir}, 5, comms, colls, channels)
	o := readHostOutput(t, dir)
	st := o.final["all"]
	events := uint64(comms * colls * channels * 2)
	if st.Matched != events || st.Records+st.Dropped != events || uint64(len(o.records["all"])) != st.Records || st.Pending != 0 {
		t.Fatalf("final dump %+v with %d record lines; want records + dropped = matched = %d", st, len(o.records["all"]), events)
	}
	if st.Dropped == 0 {
		t.Fatalf("no drops with 16 slots for a burst of %d events: the overflow was not exercised", events)
	}
	if !strings.Contains(strings.Join(r.warns, "\n"), "buffer.slots") {
		t.Errorf("no WARN naming buffer.slots for the drops:\n%s", r.out)
	}
}

// A profile that needs what no host event carries is refused at init with
// the YAML positions, and the plugin asks NCCL for no events at all;
// NCCL_HOOKS_SOURCE=device on an NCCL without the hook asks for none either.
func TestHostSourceRefusals(t *testing.T) {
	dir := t.TempDir()
	prof := writeProfile(t, dir, `version: 1
name: smid
hooks:
  - name: where
    when: phase == STOP
    fields: [timestamp, smid]
`)
	r := runHostDriver(t, []string{"NCCL_HOOKS_PROFILE=" + prof, "NCCL_HOOKS_DUMP_DIR=" + dir}, 5, 2, 3, 2)
	if len(r.warns) != 1 || !strings.Contains(r.warns[0], "profile.yaml:6:25: smid (in hook \"where\" fields) is not available from NCCL's host events") {
		t.Errorf("want one WARN naming smid at profile.yaml:6:25, got %q", r.warns)
	}
	for c, m := range r.masks {
		if m != 0 {
			t.Errorf("communicator %d: activation mask %#x for a refused profile; want 0", c, m)
		}
	}
	// The refusal is in the dump directory too (TestRefusedProfileLeavesAnInactiveLine).
	if lines := fileLines(t, dir); len(lines) != 2 || lines[1]["type"] != schema.TypeInactive || !strings.Contains(fmt.Sprint(lines[1]["reason"]), "smid") {
		t.Errorf("want a header and the inactive line naming smid, got %v", lines)
	}

	prof = writeProfile(t, dir, "version: 1\nname: p\nhooks:\n  - name: all\n    fields: [timestamp]\n")
	r = runHostDriver(t, []string{"NCCL_HOOKS_PROFILE=" + prof, "NCCL_HOOKS_DUMP_DIR=" + dir, "NCCL_HOOKS_SOURCE=device"}, 7, 2, 3, 2)
	for c, m := range r.masks {
		if m != 0 {
			t.Errorf("NCCL_HOOKS_SOURCE=device: communicator %d: activation mask %#x; want 0", c, m)
		}
	}
	if !strings.Contains(r.out, "the hooks run in NCCL's kernels (device hook; NCCL_HOOKS_SOURCE=device)") {
		t.Errorf("no INFO naming the device source:\n%s", r.out)
	}
}

// The host source's function table: distinct names, spelt as NCCL's
// src/device/generate.py spells its device functions, every id a key of
// funcId aggregates (below MaxFuncIDs), Sum for every reduction.
func TestHostFunctionTable(t *testing.T) {
	name := regexp.MustCompile(`^(SendRecv|Unknown|(AllGather|Broadcast)_(TREE|RING|COLLNET_DIRECT|COLLNET_CHAIN|NVLS|NVLS_TREE|PAT)_(LL|LL128|SIMPLE)|(AllReduce|Reduce|ReduceScatter)_Sum_(u8|u32|u64|f16|f32|f64|bf16|f8e4m3|f8e5m2)_(TREE|RING|COLLNET_DIRECT|COLLNET_CHAIN|NVLS|NVLS_TREE|PAT)_(LL|LL128|SIMPLE))$`)
	seen := map[string]bool{}
	n := 0
	for ; hostFuncName(uint32(n)) != ""; n++ {
		s := hostFuncName(uint32(n))
		if !name.MatchString(s) || seen[s] {
			t.Errorf("id %d: %q is not an NCCL device function name, or a second id of one", n, s)
		}
		seen[s] = true
	}
	if want := 2 + 2*7*3 + 3*9*7*3; n != want || n > config.MaxFuncIDs {
		t.Errorf("%d names, want %d (at most %d)", n, want, config.MaxFuncIDs)
	}
	for _, s := range hostColls {
		if !seen[s] {
			t.Errorf("%q is not in the table", s)
		}
	}
}

// NCCL with the device hook, NCCL_HOOKS_SOURCE=host: getDeviceHook hands out
// no hook (one INFO says why), and nothing is compiled for the GPU.
func TestHostSourceDeclinesDeviceHook(t *testing.T) {
	dir := t.TempDir()
	prof := writeProfile(t, dir, "version: 1\nname: p\nhooks:\n  - name: all\n    fields: [timestamp, phase]\n")
	r := runDriver(t, []string{"NCCL_HOOKS_PROFILE=" + prof, "NCCL_HOOKS_DUMP_DIR=" + dir, "NCCL_HOOKS_SOURCE=host"}, 1, 2, 2, 10, 1)
	for k, on := range r.hooks {
		if on {
			t.Errorf("cycle/device %s got a device hook with NCCL_HOOKS_SOURCE=host", k)
		}
	}
	if len(r.hooks) == 0 || strings.Count(r.out, "no device hook") != 1 || len(r.warns) != 0 {
		t.Errorf("want no hook, one INFO declining it and no WARN:\n%s", r.out)
	}
}
