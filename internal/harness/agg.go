package harness

import (
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"math"
	"text/tabwriter"

	"github.com/expr-lang/expr"
	"github.com/expr-lang/expr/ast"
	"github.com/expr-lang/expr/vm"

	"github.com/ncclhooks/ncclhooks/internal/abi"
	"github.com/ncclhooks/ncclhooks/internal/config"
	"github.com/ncclhooks/ncclhooks/internal/schema"
)

// AggCheck is one aggregate on one device: its final snapshot against the
// values the harness computes itself from the events it emitted.
type AggCheck struct {
	Hook, Name string
	Kind       config.AggKind
	Device     int
	Rows       int    // rows in the final snapshot
	Count      uint64 // values counted over all rows
	Checked    bool   // false: the predicate or value needs device-only values (smid, clock, ...)
	// Lost: records the drain dropped, for a hook it aggregates; its rows
	// are then checked within what they allow, not exactly.
	Lost     uint64
	Problems []string
}

// PrintAggs writes the aggregate checks.
func (s *Summary) PrintAggs(w io.Writer) {
	if len(s.Aggs) == 0 {
		return
	}
	tw := tabwriter.NewWriter(w, 2, 8, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "hook\taggregate\tkind\tdevice\trows\tvalues\tresult\t")
	for _, a := range s.Aggs {
		res := "exact"
		switch {
		case len(a.Problems) > 0:
			res = "MISMATCH"
		case !a.Checked:
			res = "n/a (device-only values)"
		case a.Lost > 0:
			res = fmt.Sprintf("within %d records dropped", a.Lost)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%d\t%d\t%s\t\n", a.Hook, a.Name, a.Kind, a.Device, a.Rows, a.Count, res)
	}
	tw.Flush()
	for _, a := range s.Aggs {
		for _, p := range a.Problems {
			fmt.Fprintf(w, "MISMATCH %s/%s device %d: %s\n", a.Hook, a.Name, a.Device, p)
		}
	}
}

// aggRow is one row of an aggregate, as written or as expected.
type aggRow struct {
	Count    uint64
	SumInt   int64
	SumFloat float64
	Min, Max int64
	Buckets  []uint64 // per bucket (not cumulative)
}

type rowKey struct{ fn, ch, comm int } // -1: not a key

// deviceValues are the event fields plus what the device derives, as the
// harness computes them: duration pairs each STOP with the START of the same
// work item: (communicator, channel, work counter), as the device keys it.
func deviceValues(evs []Event, device int) []map[string]any {
	type item struct {
		comm int
		ch   uint8
		wc   uint64
	}
	start := map[item]uint64{}
	envs := make([]map[string]any, len(evs))
	for i, e := range evs {
		env := map[string]any{
			"timestamp": int(e.Timestamp), "workCounter": int(e.WorkCounter), "funcId": int(e.FuncID),
			"channelId": int(e.ChannelID), "phase": int(e.Phase), "func": FuncName(e.FuncID),
			"cudaDev": device, "comm": e.Comm, "duration": 0, "paired": false,
		}
		maps.Copy(env, constants)
		k := item{e.Comm, e.ChannelID, e.WorkCounter}
		if e.Phase == abi.PhaseStart {
			start[k] = e.Timestamp
		} else if t0, ok := start[k]; ok {
			if e.Timestamp >= t0 {
				env["duration"] = int(e.Timestamp - t0)
			}
			env["paired"] = true
		}
		envs[i] = env
	}
	return envs
}

// hostComputable reports whether every name an expression uses is known to
// the harness (device intrinsics are not).
func hostComputable(x *config.Expr, lets map[string]bool) bool {
	if x == nil {
		return true
	}
	ok := true
	tree := x.Tree
	ast.Walk(&tree, identVisitor(func(name string) {
		e, found := config.Lookup(name)
		_, isConst := config.Constants[name]
		if lets[name] || isConst {
			return
		}
		if !found || e.Kind == config.KindIntrinsic && name != "cudaDev" && name != "comm" {
			ok = false
		}
	}))
	return ok
}

// compileExpr compiles x against the names deviceValues provides (lets stay
// undefined until run time): without them in the environment, expr-lang would
// take a name such as duration for its builtin function of that name.
func compileExpr(x *config.Expr) (*vm.Program, error) {
	return expr.Compile(x.Source, expr.Env(deviceValues([]Event{{}}, 0)[0]), expr.AllowUndefinedVariables())
}

// checkAggregates compares each aggregate's final snapshot in the output with
// the harness's own computation over its event log. It returns, per hook and
// device, the events each hook matched by that computation (every aggregate
// of a hook counts each event it matches), where it could compute them.
func (s *Summary) checkAggregates(prof *config.Profile, logs map[int][]Event, out *output) map[statKey]uint64 {
	matches := map[statKey]uint64{}
	for _, h := range prof.EnabledHooks() {
		if len(h.Aggregates) == 0 {
			continue
		}
		if _, refused := out.refused[h.Name]; refused {
			continue // left out of the device module: it aggregates nothing
		}
		lets := map[string]bool{}
		computable := hostComputable(h.When, lets)
		for _, l := range h.Lets {
			computable = computable && hostComputable(l.Expr, lets)
			lets[l.Name] = true
		}
		for _, a := range h.Aggregates {
			if !hostComputable(a.Value, lets) {
				computable = false
			}
		}
		for d := 0; d < s.Config.Devices; d++ {
			evs, haveLog := logs[d]
			var expected map[string]map[rowKey]*aggRow
			var err error
			if computable && haveLog {
				expected, err = expectAggregates(h, deviceValues(evs, d))
				if err == nil {
					var n uint64
					for _, r := range expected[h.Aggregates[0].Name] {
						n += r.Count
					}
					matches[statKey{h.Name, d}] = n
				}
			}
			for _, a := range h.Aggregates {
				c := AggCheck{Hook: h.Name, Name: a.Name, Kind: a.Kind, Device: d, Checked: computable && haveLog}
				got, ok := out.aggs[aggKey{h.Name, d, a.Name}]
				if !ok {
					c.Problems = append(c.Problems, "no final aggregate line")
					s.Aggs = append(s.Aggs, c)
					continue
				}
				c.Rows = len(got)
				for _, r := range got {
					c.Count += r.Count
				}
				if err != nil {
					c.Problems = append(c.Problems, err.Error())
				} else if c.Checked {
					// A hook the drain aggregates leaves out the work items
					// whose records it lost, and counts those records dropped.
					if h.DrainAggregates() {
						c.Lost = out.final[statKey{h.Name, d}].Dropped
					}
					c.Problems = compareRows(a, expected[a.Name], got, c.Lost)
				}
				s.Aggs = append(s.Aggs, c)
			}
		}
	}
	return matches
}

// expectAggregates evaluates the hook on every event with expr-lang itself.
func expectAggregates(h *config.Hook, envs []map[string]any) (map[string]map[rowKey]*aggRow, error) {
	var when *vm.Program
	var err error
	if h.When != nil {
		if when, err = compileExpr(h.When); err != nil {
			return nil, err
		}
	}
	letProgs := make([]*vm.Program, len(h.Lets))
	for i, l := range h.Lets {
		if letProgs[i], err = compileExpr(l.Expr); err != nil {
			return nil, err
		}
	}
	valProgs := make([]*vm.Program, len(h.Aggregates))
	for i, a := range h.Aggregates {
		if a.Value != nil {
			if valProgs[i], err = compileExpr(a.Value); err != nil {
				return nil, err
			}
		}
	}
	res := map[string]map[rowKey]*aggRow{}
	for _, a := range h.Aggregates {
		res[a.Name] = map[rowKey]*aggRow{}
	}
	for _, env := range envs {
		if h.Sample > 1 && env["workCounter"].(int)%int(h.Sample) != 0 {
			continue
		}
		if h.DrainAggregates() && (env["phase"] != int(abi.PhaseStop) || env["paired"] != true) {
			continue // the drain counts each work item at its STOP, paired
		}
		for i, l := range h.Lets { // lets a when needs come first on the device; all are pure
			v, err := expr.Run(letProgs[i], env)
			if err != nil {
				return nil, fmt.Errorf("let %s: %v", l.Name, err)
			}
			env[l.Name] = v
		}
		if when != nil {
			v, err := expr.Run(when, env)
			if err != nil {
				return nil, fmt.Errorf("when: %v", err)
			}
			if b, _ := v.(bool); !b {
				continue
			}
		}
		for i, a := range h.Aggregates {
			if err := accumulate(res[a.Name], a, valProgs[i], env); err != nil {
				return nil, err
			}
		}
	}
	return res, nil
}

// accumulate adds one matched event to the row of aggregate a that its keys
// select; value is a's compiled value expression (nil for a count).
func accumulate(rows map[rowKey]*aggRow, a *config.Aggregate, value *vm.Program, env map[string]any) error {
	k := rowKey{-1, -1, -1}
	for _, by := range a.By {
		switch by {
		case "funcId":
			k.fn = min(env["funcId"].(int), config.MaxFuncIDs)
		case "channelId":
			k.ch = min(env["channelId"].(int), config.MaxChannels)
		case "comm":
			k.comm = min(env["comm"].(int), config.MaxCommKeys)
		}
	}
	r := rows[k]
	if r == nil {
		r = &aggRow{Min: math.MaxInt64, Max: math.MinInt64}
		rows[k] = r
	}
	r.Count++
	if a.Value == nil {
		return nil
	}
	v, err := expr.Run(value, env)
	if err != nil {
		return fmt.Errorf("aggregate %s: %v", a.Name, err)
	}
	var iv int64
	switch x := v.(type) {
	case int:
		iv = int64(x)
		r.SumFloat += float64(x)
	case float64:
		iv = int64(x)
		r.SumFloat += x
	case bool:
		if x {
			iv = 1
		}
	}
	r.SumInt += iv
	r.Min, r.Max = min(r.Min, iv), max(r.Max, iv)
	if a.Kind == config.AggHistogram {
		if r.Buckets == nil {
			r.Buckets = make([]uint64, a.Buckets.Count())
		}
		r.Buckets[bucketOf(a.Buckets, iv)]++
	}
	return nil
}

func bucketOf(b config.Buckets, v int64) int {
	if b.Log2 {
		if v <= 0 {
			return 0
		}
		return 64 - countLeadingZeros(uint64(v))
	}
	for i, le := range b.Bounds {
		if v <= int64(le) {
			return i
		}
	}
	return len(b.Bounds)
}

func countLeadingZeros(v uint64) int {
	n := 0
	for i := 63; i >= 0 && v&(1<<uint(i)) == 0; i-- {
		n++
	}
	return n
}

// compareRows compares an aggregate's rows with the harness's, exactly when
// lost is 0. Otherwise (a hook the drain aggregates, lost: its dropped
// records) each work item left out lost a record of its own: every row
// holds at most what the harness computes, bucket by bucket, its max and
// min within, and the work items left out number at most lost.
func compareRows(a *config.Aggregate, want map[rowKey]*aggRow, got map[rowKey]*aggRow, lost uint64) []string {
	var problems []string
	add := func(format string, args ...any) {
		if len(problems) < 4 {
			problems = append(problems, fmt.Sprintf(format, args...))
		}
	}
	if lost > 0 {
		compareLossy(a, want, got, lost, add)
		return problems
	}
	if len(want) != len(got) {
		add("%d rows, the harness computes %d", len(got), len(want))
	}
	for k, w := range want {
		g, ok := got[k]
		if !ok {
			add("row %+v missing", k)
			continue
		}
		if g.Count != w.Count {
			add("row %+v: count %d, want %d", k, g.Count, w.Count)
		}
		switch a.Kind {
		case config.AggSum, config.AggHistogram:
			if a.Value != nil && a.Value.Type == config.F64 {
				if math.Abs(g.SumFloat-w.SumFloat) > 1e-9*math.Max(1, math.Abs(w.SumFloat)) {
					add("row %+v: sum %g, want %g", k, g.SumFloat, w.SumFloat)
				}
			} else if g.SumInt != w.SumInt {
				add("row %+v: sum %d, want %d", k, g.SumInt, w.SumInt)
			}
		case config.AggMin:
			if g.Min != w.Min {
				add("row %+v: min %d, want %d", k, g.Min, w.Min)
			}
		case config.AggMax:
			if g.Max != w.Max {
				add("row %+v: max %d, want %d", k, g.Max, w.Max)
			}
		}
		if a.Kind == config.AggHistogram {
			var cum uint64
			for i := range w.Buckets {
				cum += w.Buckets[i]
				if i >= len(g.Buckets) || g.Buckets[i] != cum {
					add("row %+v: bucket %d holds %v cumulative, want %d", k, i, g.Buckets, cum)
					break
				}
			}
		}
	}
	return problems
}

// compareLossy is compareRows for lost > 0.
func compareLossy(a *config.Aggregate, want map[rowKey]*aggRow, got map[rowKey]*aggRow, lost uint64, add func(string, ...any)) {
	var left uint64
	for k, w := range want {
		g, ok := got[k]
		if !ok {
			left += w.Count
			continue
		}
		if g.Count > w.Count {
			add("row %+v: count %d, more than the harness's %d", k, g.Count, w.Count)
			continue
		}
		left += w.Count - g.Count
		switch a.Kind {
		case config.AggSum, config.AggHistogram:
			if g.SumInt > w.SumInt {
				add("row %+v: sum %d, more than the harness's %d", k, g.SumInt, w.SumInt)
			}
		case config.AggMin:
			if g.Min < w.Min {
				add("row %+v: min %d, below the harness's %d", k, g.Min, w.Min)
			}
		case config.AggMax:
			if g.Max > w.Max {
				add("row %+v: max %d, above the harness's %d", k, g.Max, w.Max)
			}
		}
		if a.Kind == config.AggHistogram {
			var prev uint64
			for i := range w.Buckets {
				if i >= len(g.Buckets) || g.Buckets[i]-prev > w.Buckets[i] {
					add("row %+v: bucket %d holds more than the harness's %d (cumulative %v)", k, i, w.Buckets[i], g.Buckets)
					break
				}
				prev = g.Buckets[i]
			}
		}
	}
	for k := range got {
		if want[k] == nil {
			add("row %+v, which the harness does not compute", k)
		}
	}
	if left > lost {
		add("%d work items left out, more than the %d records dropped", left, lost)
	}
}

type aggKey struct {
	hook   string
	device int
	name   string
}

// parseAggLine reads one final aggregate line into rows keyed like the
// harness's own; bucket counts stay cumulative as written.
func parseAggLine(line []byte) (aggKey, map[rowKey]*aggRow, error) {
	var l schema.Aggregate
	if err := json.Unmarshal(line, &l); err != nil {
		return aggKey{}, nil, err
	}
	key := func(raw json.RawMessage, overflow int) int {
		if raw == nil {
			return -1
		}
		var n int
		if json.Unmarshal(raw, &n) == nil {
			return n
		}
		return overflow // "overflow"
	}
	rows := map[rowKey]*aggRow{}
	for _, r := range l.Rows {
		k := rowKey{key(r.FuncID, config.MaxFuncIDs), key(r.ChannelID, config.MaxChannels), key(r.Comm, config.MaxCommKeys)}
		row := &aggRow{Count: r.Count}
		if r.Min != nil {
			row.Min = *r.Min
		}
		if r.Max != nil {
			row.Max = *r.Max
		}
		if r.Sum != "" {
			row.SumInt, _ = r.Sum.Int64()
			row.SumFloat, _ = r.Sum.Float64()
		}
		for _, b := range r.Buckets {
			row.Buckets = append(row.Buckets, b.Count)
		}
		rows[k] = row
	}
	return aggKey{l.Hook, l.Device, l.Name}, rows, nil
}
