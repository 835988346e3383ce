package harness

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"os"
	"text/tabwriter"
	"time"

	"github.com/expr-lang/expr"
	"github.com/expr-lang/expr/ast"
	"github.com/expr-lang/expr/vm"

	"github.com/ncclhooks/ncclhooks/config"
	"github.com/ncclhooks/ncclhooks/schema"
)

// Summary is the outcome of a harness run.
type Summary struct {
	Config        Config
	PluginVersion int
	HookActive    bool
	Emitted       uint64
	Emit, Total   time.Duration
	OutputFile    string
	Rows          []Row
	Aggs          []AggCheck
	Problems      []string    // about the run as a whole (contexts, comm lines)
	Refused       []string    // hooks the plugin left out as unsafe to call, with why
	CommLines     map[int]int // comm lines per device
	Pairs         []PairCheck // START/STOP per work item, for hooks that record enough to tell
	Log           string      // what the plugin logged through the NCCL logger
}

// Row is one hook on one device.
type Row struct {
	Hook     string
	Device   int
	Emitted  uint64 // events the harness passed to the hook on this device
	Expected int64  // matches computed independently by the harness; -1: not computable
	Matched  uint64 // the plugin's matched_total
	Records  uint64 // the plugin's records_total
	Dropped  uint64 // the plugin's dropped_total
	Stages   string // drops by stage
	Lines    uint64 // record lines in the output
	Checked  uint64 // record lines whose fields were compared with the event log
	Problems []string
}

// OK reports whether every row's accounting and every aggregate is exact.
func (s *Summary) OK() bool {
	if len(s.Problems) > 0 {
		return false
	}
	for _, p := range s.Pairs {
		if len(p.Problems) > 0 {
			return false
		}
	}
	for _, r := range s.Rows {
		if len(r.Problems) > 0 {
			return false
		}
	}
	for _, a := range s.Aggs {
		if len(a.Problems) > 0 {
			return false
		}
	}
	return len(s.Rows)+len(s.Aggs) > 0
}

// EventsPerSec is the rate the harness emitted events at.
func (s *Summary) EventsPerSec() float64 {
	if s.Emit <= 0 {
		return 0
	}
	return float64(s.Emitted) / s.Emit.Seconds()
}

// Print writes the summary table.
func (s *Summary) Print(w io.Writer) {
	tw := tabwriter.NewWriter(w, 2, 8, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "hook\tdevice\temitted\texpected\tmatched\trecorded\tdropped\tdrops by stage\trecord lines\tchecked\tresult\t")
	for _, r := range s.Rows {
		exp := "n/a"
		if r.Expected >= 0 {
			exp = fmt.Sprint(r.Expected)
		}
		res := "exact"
		if len(r.Problems) > 0 {
			res = "MISMATCH"
		}
		fmt.Fprintf(tw, "%s\t%d\t%d\t%s\t%d\t%d\t%d\t%s\t%d\t%d\t%s\t\n", r.Hook, r.Device, r.Emitted, exp, r.Matched,
			r.Records, r.Dropped, r.Stages, r.Lines, r.Checked, res)
	}
	tw.Flush()
	for _, r := range s.Rows {
		for _, p := range r.Problems {
			fmt.Fprintf(w, "MISMATCH %s device %d: %s\n", r.Hook, r.Device, p)
		}
	}
	for _, p := range s.Problems {
		fmt.Fprintf(w, "MISMATCH %s\n", p)
	}
	for _, r := range s.Refused {
		fmt.Fprintf(w, "REFUSED %s\n", r)
	}
}

// checkContexts checks what getDeviceHook gave the communicators: one hook
// per device, and a context of its own for every communicator.
func (s *Summary) checkContexts(comms []*comm) {
	hooks := map[int]uintptr{}
	seen := map[uintptr]string{}
	for _, c := range comms {
		if c.hook == 0 {
			continue
		}
		if h, ok := hooks[c.Device]; ok && h != c.hook {
			s.Problems = append(s.Problems, fmt.Sprintf("device %d: communicators got different hooks %#x and %#x", c.Device, h, c.hook))
		}
		hooks[c.Device] = c.hook
		me := fmt.Sprintf("device %d communicator %d", c.Device, c.index)
		if other, ok := seen[c.ctx]; ok {
			s.Problems = append(s.Problems, fmt.Sprintf("%s and %s share the context %#x: each communicator must get its own", other, me, c.ctx))
		}
		seen[c.ctx] = me
	}
}

type eventKey struct {
	channel     uint8
	workCounter uint64
	phase       uint8
}

// check reads the plugin's JSON lines output and compares it with what was
// emitted: records + drops = matched, exactly; matched = the harness's own
// count where the predicate allows computing it; every record's event
// fields equal the event the harness passed.
func (s *Summary) check(prof *config.Profile, logs map[int][]Event, emitted map[int]uint64) error {
	if !s.HookActive {
		return nil
	}
	file, err := outputFile(s.Config.OutputDir)
	if err != nil {
		return err
	}
	return s.checkFile(prof, file, logs, emitted)
}

// CheckFile checks a plugin output file against the events a caller of the
// hooks passed them on each of devices devices (logs and emitted by device;
// a device without a log is checked for accounting only; devices 0: those
// the output names), as Run checks its own runs: callers the harness did not
// build (harness/callers) and real NCCL (ncclhooks check) use it.
func CheckFile(prof *config.Profile, file string, devices int, logs map[int][]Event, emitted map[int]uint64) (*Summary, error) {
	s := &Summary{Config: Config{Devices: devices}, HookActive: true}
	for d := range devices {
		s.Emitted += emitted[d]
	}
	return s, s.checkFile(prof, file, logs, emitted)
}

func (s *Summary) checkFile(prof *config.Profile, file string, logs map[int][]Event, emitted map[int]uint64) error {
	s.OutputFile = file
	out, err := readOutput(file)
	if err != nil {
		return err
	}
	if s.Config.Devices <= 0 { // from the output: the devices its comm lines and dump_stats name
		for _, c := range out.comms {
			s.Config.Devices = max(s.Config.Devices, c.Device+1)
		}
		for k := range out.final {
			s.Config.Devices = max(s.Config.Devices, k.device+1)
		}
	}
	s.CommLines = map[int]int{}
	for _, c := range out.comms {
		s.CommLines[c.Device]++
	}
	s.checkComms(out, logs)
	s.Pairs = checkPairs(prof, out)
	s.checkAggregates(prof, logs, out)
	for _, h := range prof.EnabledHooks() {
		if why, ok := out.refused[h.Name]; ok {
			s.Refused = append(s.Refused, fmt.Sprintf("hook %q: %s", h.Name, why))
			continue // left out of the device module: no records, no stats
		}
		if len(h.Fields) == 0 {
			continue // aggregate only: no records, checked above
		}
		pred, predErr := compilePredicate(h)
		for d := 0; d < s.Config.Devices; d++ {
			r := Row{Hook: h.Name, Device: d, Emitted: emitted[d], Expected: -1}
			st, ok := out.final[statKey{h.Name, d}]
			if !ok {
				r.Problems = append(r.Problems, "no final dump_stats line")
				s.Rows = append(s.Rows, r)
				continue
			}
			r.Matched, r.Records, r.Dropped = st.Matched, st.Records, st.Dropped
			r.Stages = fmt.Sprintf("full %d, overwritten %d, torn %d, ring %d",
				st.DroppedBufferFull, st.DroppedOverwritten, st.DroppedTorn, st.DroppedRingFull)
			if st.DroppedWriteFailed > 0 {
				r.Stages += fmt.Sprintf(", write failed %d", st.DroppedWriteFailed)
			}
			if r.Records+r.Dropped != r.Matched {
				r.Problems = append(r.Problems, fmt.Sprintf("records %d + dropped %d != matched %d", r.Records, r.Dropped, r.Matched))
			}
			if st.DroppedBufferFull+st.DroppedOverwritten+st.DroppedTorn+st.DroppedRingFull+st.DroppedWriteFailed != st.Dropped {
				r.Problems = append(r.Problems, "drops by stage do not add up to dropped_total")
			}
			if st.Pending != 0 {
				r.Problems = append(r.Problems, fmt.Sprintf("%d positions still pending after finalize", st.Pending))
			}
			recs := out.records[statKey{h.Name, d}]
			r.Lines = uint64(len(recs))
			if r.Lines != r.Records {
				r.Problems = append(r.Problems, fmt.Sprintf("%d record lines but records_total %d", r.Lines, r.Records))
			}
			if evs, ok := logs[d]; ok && predErr == nil && pred != nil {
				n, err := countMatches(h, pred, evs)
				if err != nil {
					r.Problems = append(r.Problems, err.Error())
				} else {
					r.Expected = int64(n)
					if uint64(n) != r.Matched {
						r.Problems = append(r.Problems, fmt.Sprintf("harness expects %d matches, plugin matched %d", n, r.Matched))
					}
				}
			}
			if evs, ok := logs[d]; ok {
				r.Checked, r.Problems = checkRecords(h, recs, evs, r.Problems)
			}
			s.Rows = append(s.Rows, r)
		}
	}
	return nil
}

// checkRecords compares each record's event fields with the event the
// harness emitted at that (channel, workCounter, phase).
func checkRecords(h *config.Hook, recs []map[string]json.RawMessage, evs []Event, problems []string) (uint64, []string) {
	names := map[string]string{} // source -> output name
	for _, f := range h.Fields {
		if e, ok := config.Lookup(f.Source); ok && e.Kind == config.KindEvent && f.Type.Bytes() >= e.Type.Bytes() {
			names[f.Source] = f.Name
		}
	}
	commField := ""
	for _, f := range h.Fields {
		if f.Source == "comm" {
			commField = f.Name
		}
	}
	if names["channelId"] == "" || names["workCounter"] == "" || names["phase"] == "" {
		return 0, problems // cannot locate the event of a record
	}
	byKey := make(map[eventKey]Event, len(evs))
	for _, e := range evs {
		byKey[eventKey{e.ChannelID, e.WorkCounter, e.Phase}] = e
	}
	recorded := make(map[eventKey]bool, len(recs))
	var checked uint64
	bad := 0
	for _, rec := range recs {
		get := func(src string) (uint64, bool) {
			raw, ok := rec[names[src]]
			if !ok {
				return 0, false
			}
			var v uint64
			return v, json.Unmarshal(raw, &v) == nil
		}
		ch, ok1 := get("channelId")
		wc, ok2 := get("workCounter")
		ph, ok3 := get("phase")
		e, found := byKey[eventKey{uint8(ch), wc, uint8(ph)}]
		if !ok1 || !ok2 || !ok3 || !found {
			bad++
			if bad <= 3 {
				problems = append(problems, fmt.Sprintf("record seq %s matches no emitted event", rec["seq"]))
			}
			continue
		}
		if k := (eventKey{uint8(ch), wc, uint8(ph)}); recorded[k] {
			bad++
			if bad <= 3 {
				problems = append(problems, fmt.Sprintf("record seq %s: a second record of channel %d workCounter %d phase %d", rec["seq"], ch, wc, ph))
			}
		} else {
			recorded[k] = true
		}
		if commField != "" {
			var c int
			if json.Unmarshal(rec[commField], &c) != nil || c != e.Comm {
				bad++
				if bad <= 3 {
					problems = append(problems, fmt.Sprintf("record seq %s: %s = %s, but communicator %d emitted it", rec["seq"], commField, rec[commField], e.Comm))
				}
			}
		}
		want := map[string]uint64{"timestamp": e.Timestamp, "workCounter": e.WorkCounter, "funcId": uint64(e.FuncID),
			"channelId": uint64(e.ChannelID), "phase": uint64(e.Phase)}
		for src, out := range names {
			if v, ok := get(src); !ok || v != want[src] {
				bad++
				if bad <= 3 {
					problems = append(problems, fmt.Sprintf("record seq %s: %s = %s, emitted %d", rec["seq"], out, rec[out], want[src]))
				}
			}
		}
		if names["funcId"] != "" {
			var fn string
			if json.Unmarshal(rec["func"], &fn) != nil || fn != FuncName(e.FuncID) {
				bad++
				if bad <= 3 {
					problems = append(problems, fmt.Sprintf("record seq %s: func %s, want %q", rec["seq"], rec["func"], FuncName(e.FuncID)))
				}
			}
		}
		checked++
	}
	if bad > 3 {
		problems = append(problems, fmt.Sprintf("... %d record problems in all", bad))
	}
	return checked, problems
}

// compilePredicate compiles the hook's sample and when with expr-lang itself,
// independently of the generated C. nil, nil: the predicate uses values only
// the device knows (intrinsics, derived fields), so it cannot be checked here.
func compilePredicate(h *config.Hook) (*vm.Program, error) {
	src := "true"
	if h.When != nil {
		src = h.When.Source
		tree := h.When.Tree
		usable := true
		ast.Walk(&tree, identVisitor(func(name string) {
			e, ok := config.Lookup(name)
			_, isConst := config.Constants[name]
			if !isConst && name != "comm" && (!ok || (e.Kind != config.KindEvent && e.Kind != config.KindName)) {
				usable = false
			}
		}))
		if !usable {
			return nil, nil
		}
	}
	return expr.Compile(src, expr.Env(predicateEnv(Event{})), expr.AsBool())
}

func predicateEnv(e Event) map[string]any {
	env := map[string]any{
		"timestamp": e.Timestamp, "workCounter": e.WorkCounter, "funcId": e.FuncID,
		"channelId": e.ChannelID, "phase": e.Phase, "func": FuncName(e.FuncID), "comm": e.Comm,
	}
	maps.Copy(env, constants)
	return env
}

// constants are the profile's named constants (START, STOP) for expr-lang.
var constants = func() map[string]any {
	m := map[string]any{}
	for name, v := range config.Constants {
		m[name] = v
	}
	return m
}()

func countMatches(h *config.Hook, pred *vm.Program, evs []Event) (int, error) {
	n := 0
	for _, e := range evs {
		if h.Sample > 1 && e.WorkCounter%uint64(h.Sample) != 0 {
			continue
		}
		v, err := expr.Run(pred, predicateEnv(e))
		if err != nil {
			return 0, fmt.Errorf("evaluating when for %+v: %v", e, err)
		}
		if v.(bool) {
			n++
		}
	}
	return n, nil
}

type statKey struct {
	hook   string
	device int
}

type output struct {
	aggs    map[aggKey]map[rowKey]*aggRow // final snapshots
	final   map[statKey]schema.DumpStats
	records map[statKey][]map[string]json.RawMessage
	comms   []schema.Comm
	refused map[string]string // hook -> reason
}

// checkComms checks the comm lines: per device, indices 0, 1, ... once each,
// and one for every communicator that emitted events.
func (s *Summary) checkComms(out *output, logs map[int][]Event) {
	byDev := map[int]map[int]bool{}
	for _, c := range out.comms {
		if byDev[c.Device] == nil {
			byDev[c.Device] = map[int]bool{}
		}
		if byDev[c.Device][c.Comm] {
			s.Problems = append(s.Problems, fmt.Sprintf("device %d: comm %d has two comm lines", c.Device, c.Comm))
		}
		byDev[c.Device][c.Comm] = true
	}
	for d, set := range byDev {
		for i := range len(set) {
			if !set[i] {
				s.Problems = append(s.Problems, fmt.Sprintf("device %d: comm indices are not 0..%d: %d is missing", d, len(set)-1, i))
			}
		}
	}
	for d, evs := range logs {
		for _, e := range evs {
			if !byDev[d][e.Comm] {
				s.Problems = append(s.Problems, fmt.Sprintf("device %d: communicator %d emitted events but has no comm line", d, e.Comm))
				break
			}
		}
	}
}

// outputFile finds this process's JSON lines file in dir.
func outputFile(dir string) (string, error) { return OutputFile(dir, os.Getpid()) }

func readOutput(file string) (*output, error) {
	f, err := os.Open(file)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	out := &output{final: map[statKey]schema.DumpStats{}, records: map[statKey][]map[string]json.RawMessage{},
		aggs: map[aggKey]map[rowKey]*aggRow{}, refused: map[string]string{}}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	for line := 1; sc.Scan(); line++ {
		var m map[string]json.RawMessage
		dec := json.NewDecoder(bytes.NewReader(sc.Bytes()))
		dec.UseNumber()
		if err := dec.Decode(&m); err != nil {
			return nil, fmt.Errorf("%s:%d: %v", file, line, err)
		}
		var typ, hook string
		var dev int
		json.Unmarshal(m["type"], &typ)
		json.Unmarshal(m["hook"], &hook)
		json.Unmarshal(m["device"], &dev)
		k := statKey{hook, dev}
		switch typ {
		case schema.TypeRecord:
			out.records[k] = append(out.records[k], m)
		case schema.TypeAggregate:
			var fin schema.Aggregate
			json.Unmarshal(sc.Bytes(), &fin)
			if !fin.Final {
				continue
			}
			k, rows, err := parseAggLine(sc.Bytes())
			if err != nil {
				return nil, fmt.Errorf("%s:%d: %v", file, line, err)
			}
			out.aggs[k] = rows
		case schema.TypeComm:
			var c schema.Comm
			if err := json.Unmarshal(sc.Bytes(), &c); err != nil {
				return nil, fmt.Errorf("%s:%d: %v", file, line, err)
			}
			out.comms = append(out.comms, c)
		case schema.TypeRefused:
			var r schema.Refused
			json.Unmarshal(sc.Bytes(), &r)
			out.refused[hook] = r.Position + ": " + r.Reason
		case schema.TypeDumpStats:
			var st schema.DumpStats
			if err := json.Unmarshal(sc.Bytes(), &st); err != nil {
				return nil, fmt.Errorf("%s:%d: %v", file, line, err)
			}
			if st.Final {
				out.final[k] = st // the last final dump wins (several init/finalize cycles)
			}
		}
	}
	return out, sc.Err()
}

// identVisitor calls f for every identifier of a tree.
type identVisitor func(name string)

func (f identVisitor) Visit(n *ast.Node) {
	if id, ok := (*n).(*ast.IdentifierNode); ok {
		f(id.Value)
	}
}

// CommIndex maps each communicator name of a plugin output's comm lines to
// its index (the comm intrinsic), for callers that number their
// communicators otherwise.
func CommIndex(file string) (map[string]int, error) {
	out, err := readOutput(file)
	if err != nil {
		return nil, err
	}
	m := map[string]int{}
	for _, c := range out.comms {
		m[c.Name] = c.Comm
	}
	return m, nil
}
