package report

// report --by rank|device|comm: the work items of each function split by
// rank, GPU or communicator across every process of the run, the slowest
// group marked, so that a slow GPU or rank stands out.

import (
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
)

// By is a grouping of report --by.
type By string

const (
	ByRank   By = "rank"   // a device's ranks in its communicators (comm lines), in whichever process
	ByDevice By = "device" // the GPU, by UUID (host, pid and ordinal without one)
	ByComm   By = "comm"   // the communicator, all its ranks together
)

// ParseBy reads a --by value.
func ParseBy(s string) (By, error) {
	switch b := By(s); b {
	case ByRank, ByDevice, ByComm:
		return b, nil
	}
	return "", fmt.Errorf("--by %q: want rank, device or comm", s)
}

// ByReport is the work items of each hook and function, per group.
type ByReport struct {
	By      By       `json:"by"`
	Inputs  []string `json:"inputs"`
	Files   int      `json:"files"`
	Profile string   `json:"profile"`
	// Inactive are the processes in which the plugin recorded nothing.
	Inactive []InactiveFile `json:"inactive,omitempty"`
	Funcs    []ByFunc       `json:"functions"`
	// Aggregates are the on-device aggregates per group. An aggregate is
	// per device, and a rank is a device's place in its communicators, so
	// by rank every row with a comm line for its device is attributed; by
	// comm only rows keyed by comm, or of a device with one communicator.
	Aggregates []ByAgg `json:"aggregates,omitempty"`
	// UnattributedAggs counts aggregate rows left out: by rank, of devices
	// without a comm line; by comm, also of devices with several
	// communicators, not keyed by comm (or in its overflow key).
	UnattributedAggs int `json:"unattributed_aggregate_rows,omitempty"`
	// Unattributed counts work items no group could be named for: by rank,
	// of devices without a comm line; by comm, also items of a device
	// several communicators share whose hook does not record comm.
	Unattributed uint64 `json:"unattributed_items,omitempty"`
	// CrossRank is, by rank, the arrival skew of each communicator's
	// collectives across its ranks and the rank the others waited for;
	// CrossRankNote says why there is none where the inputs hold several
	// ranks of a communicator (aggregates only, say).
	CrossRank     []CrossRank `json:"cross_rank,omitempty"`
	CrossRankNote string      `json:"cross_rank_note,omitempty"`
}

// ByFunc is one function of a hook, per group.
type ByFunc struct {
	Hook   string    `json:"hook"`
	Func   string    `json:"func"`
	Groups []ByGroup `json:"groups"`
	// SlowestVsMedian is the slowest group's p50 over the median of the
	// groups' p50s (0 with fewer than two groups).
	SlowestVsMedian float64 `json:"slowest_vs_median,omitempty"`
}

// ByGroup is one rank, GPU or communicator of a function.
type ByGroup struct {
	Key     string `json:"key"`
	Label   string `json:"label"`
	Dist    Dist   `json:"dist"`
	Slowest bool   `json:"slowest,omitempty"` // the largest p50 of the function's groups (two or more)
	// Slowdown names the clock event reasons that held its GPUs' clocks
	// down in some device line (power cap, thermal, ...).
	Slowdown []string `json:"slowdown,omitempty"`
}

// ByAgg is one key (function, channel) of one aggregate, per group. The
// slowest group is the one with the largest mean (sum and histogram
// aggregates) or maximum (max aggregates); count and min aggregates mark
// none.
type ByAgg struct {
	Hook            string       `json:"hook"`
	Name            string       `json:"name"`
	Kind            string       `json:"kind"`
	Func            string       `json:"func,omitempty"`
	Channel         string       `json:"channel,omitempty"`
	Groups          []ByAggGroup `json:"groups"`
	SlowestVsMedian float64      `json:"slowest_vs_median,omitempty"`
}

// ByAggGroup is one aggregate key of one rank, GPU or communicator.
type ByAggGroup struct {
	Key      string     `json:"key"`
	Label    string     `json:"label"`
	Stat     AggRowStat `json:"stat"`
	Mean     float64    `json:"mean,omitempty"` // sum / count
	Slowest  bool       `json:"slowest,omitempty"`
	Slowdown []string   `json:"slowdown,omitempty"`
}

// metric is what marks the slowest group of an aggregate key; ok false for
// kinds that have none.
func (g *ByAggGroup) metric(kind string) (float64, bool) {
	switch kind {
	case "sum", "histogram":
		return g.Mean, true
	case "max":
		return g.Stat.Max, true
	}
	return 0, false
}

// commKey is an aggregate row's comm key: the index, or -1 when the
// aggregate is not keyed by comm (the overflow key is no communicator: -2).
func commKey(raw json.RawMessage) int {
	if len(raw) == 0 {
		return -1
	}
	var n int
	if json.Unmarshal(raw, &n) != nil {
		return -2
	}
	return n
}

type byRaw struct {
	file, device, comm int
	hook, fn           string
}

// ByCollector gathers work-item durations by file, device and communicator;
// Report groups them once the whole run is read.
type ByCollector struct {
	by       By
	raw      map[byRaw][]uint64
	arrivals []arrival // by rank: each work item's START, for the cross-rank skew
}

// NewByCollector returns an empty collector for grouping by.
func NewByCollector(by By) *ByCollector { return &ByCollector{by: by, raw: map[byRaw][]uint64{}} }

// Add records one work item; pass it as Read's onItem.
func (c *ByCollector) Add(w *WorkItem) {
	k := byRaw{w.File, w.Device, w.Comm, w.Hook, w.FuncLabel()}
	c.raw[k] = append(c.raw[k], w.Duration)
	if c.by == ByRank {
		c.addArrival(w)
	}
}

// LoadBy reads the inputs and groups their work items by.
func LoadBy(inputs []string, opts Options, by By) (*ByReport, error) {
	c := NewByCollector(by)
	run, err := Read(inputs, opts, c.Add)
	if err != nil {
		return nil, err
	}
	return c.Report(run), nil
}

// group names the group of a file's device and comm index; ok false when
// the outputs do not say.
func (c *ByCollector) group(run *Run, file, device, comm int) (key, label string, ok bool) {
	switch c.by {
	case ByDevice:
		return run.DeviceKey(file, device), run.DeviceLabel(file, device), true
	case ByRank:
		return run.RankKey(file, device)
	}
	cm, ok := run.Comm(file, device, comm)
	if !ok {
		return "", "", false
	}
	return cm.CommID, fmt.Sprintf("comm %s %q (%d ranks)", cm.CommID, cm.Name, cm.NRanks), true
}

// Report groups the collected items.
func (c *ByCollector) Report(run *Run) *ByReport {
	rep := &ByReport{By: c.by, Inputs: run.Inputs, Files: len(run.Files), Profile: run.Profile, Inactive: run.Inactive()}
	type fk struct{ hook, fn string }
	type acc struct {
		label    string
		ds       []uint64
		slowdown []string
	}
	funcs := map[fk]map[string]*acc{}
	for k, ds := range c.raw {
		key, label, ok := c.group(run, k.file, k.device, k.comm)
		if !ok {
			rep.Unattributed += uint64(len(ds))
			continue
		}
		f := fk{k.hook, k.fn}
		if funcs[f] == nil {
			funcs[f] = map[string]*acc{}
		}
		a := funcs[f][key]
		if a == nil {
			a = &acc{label: label}
			funcs[f][key] = a
		}
		a.ds = append(a.ds, ds...)
		if d := run.Files[k.file].Devices[k.device]; d != nil {
			for _, s := range d.Slowdown {
				if !slices.Contains(a.slowdown, s) {
					a.slowdown = append(a.slowdown, s)
				}
			}
		}
	}
	for f, groups := range funcs {
		bf := ByFunc{Hook: f.hook, Func: f.fn}
		for key, a := range groups {
			slices.Sort(a.slowdown)
			bf.Groups = append(bf.Groups, ByGroup{Key: key, Label: a.label, Dist: NewDist(a.ds), Slowdown: a.slowdown})
		}
		slices.SortFunc(bf.Groups, func(x, y ByGroup) int { return compareGroups(x.Key, y.Key) })
		if len(bf.Groups) >= 2 {
			slow := 0
			p50s := make([]float64, len(bf.Groups))
			for i, g := range bf.Groups {
				p50s[i] = g.Dist.P50
				if g.Dist.P50 > bf.Groups[slow].Dist.P50 {
					slow = i
				}
			}
			bf.Groups[slow].Slowest = true
			slices.Sort(p50s)
			if m := median(p50s); m > 0 {
				bf.SlowestVsMedian = bf.Groups[slow].Dist.P50 / m
			}
		}
		rep.Funcs = append(rep.Funcs, bf)
	}
	slices.SortFunc(rep.Funcs, func(x, y ByFunc) int { return cmp.Or(cmp.Compare(x.Hook, y.Hook), cmp.Compare(x.Func, y.Func)) })
	c.aggregates(run, rep)
	if c.by == ByRank {
		rep.CrossRank = c.crossRanks(run)
		rep.CrossRankNote = crossRankNote(run, rep.CrossRank, len(c.arrivals))
	}
	return rep
}

// aggregates merges the run's aggregate snapshots per group and key.
func (c *ByCollector) aggregates(run *Run, rep *ByReport) {
	type ak struct {
		hook, name string
		row        [2]string
	}
	type acc struct {
		kind   string
		groups map[string]*ByAggGroup
	}
	aggs := map[ak]*acc{}
	for k, a := range run.Aggs {
		var slowdown []string
		if d := run.Files[k.file].Devices[k.device]; d != nil {
			slowdown = d.Slowdown
		}
		for _, r := range a.Rows {
			key, label, ok := c.group(run, k.file, k.device, commKey(r.Comm))
			if !ok {
				rep.UnattributedAggs++
				continue
			}
			id := ak{a.Hook, a.Name, rowKeyText(r)}
			x := aggs[id]
			if x == nil {
				x = &acc{kind: a.Kind, groups: map[string]*ByAggGroup{}}
				aggs[id] = x
			}
			g := x.groups[key]
			if g == nil {
				g = &ByAggGroup{Key: key, Label: label, Stat: *newAggRowStat(id.row)}
				x.groups[key] = g
			}
			g.Stat.add(r)
			for _, s := range slowdown {
				if !slices.Contains(g.Slowdown, s) {
					g.Slowdown = append(g.Slowdown, s)
				}
			}
		}
	}
	for id, x := range aggs {
		ba := ByAgg{Hook: id.hook, Name: id.name, Kind: x.kind, Func: id.row[0], Channel: id.row[1]}
		for _, g := range x.groups {
			g.Stat.finish()
			if g.Stat.Count > 0 {
				g.Mean = g.Stat.Sum / float64(g.Stat.Count)
			}
			slices.Sort(g.Slowdown)
			ba.Groups = append(ba.Groups, *g)
		}
		slices.SortFunc(ba.Groups, func(x, y ByAggGroup) int { return compareGroups(x.Key, y.Key) })
		if _, ok := ba.Groups[0].metric(ba.Kind); ok && len(ba.Groups) >= 2 {
			slow := 0
			vals := make([]float64, len(ba.Groups))
			for i := range ba.Groups {
				vals[i], _ = ba.Groups[i].metric(ba.Kind)
				if vals[i] > vals[slow] {
					slow = i
				}
			}
			ba.Groups[slow].Slowest = true
			top := vals[slow]
			slices.Sort(vals)
			if m := median(vals); m > 0 {
				ba.SlowestVsMedian = top / m
			}
		}
		rep.Aggregates = append(rep.Aggregates, ba)
	}
	slices.SortFunc(rep.Aggregates, func(x, y ByAgg) int {
		return cmp.Or(cmp.Compare(x.Hook, y.Hook), cmp.Compare(x.Name, y.Name), compareKeys(x.Func, y.Func), compareKeys(x.Channel, y.Channel))
	})
}

// Write writes the grouped report in format f.
func (r *ByReport) Write(w io.Writer, f Format) error {
	if f == JSON {
		return writeJSON(w, r)
	}
	var b strings.Builder
	if f == Markdown {
		fmt.Fprintf(&b, "### ncclhooks report by %s: profile `%s`, %d file(s)\n\n", r.By, r.Profile, r.Files)
	} else {
		fmt.Fprintf(&b, "profile %s, %d file(s), by %s\n", r.Profile, r.Files, r.By)
	}
	if r.Unattributed > 0 {
		fmt.Fprintf(&b, "%d work items left out: the outputs do not name their %s (no comm line, or several communicators on their device and a hook that does not record the comm field)\n", r.Unattributed, r.By)
	}
	if r.UnattributedAggs > 0 {
		// Said whatever is left: with every row left out there is no table.
		fmt.Fprintf(&b, "%d aggregate rows left out: %s\n", r.UnattributedAggs, r.unattributedAggsWhy())
	}
	if len(r.Funcs) == 0 && len(r.Aggregates) == 0 {
		fmt.Fprintf(&b, "nothing to show by %s\n", r.By)
	}
	for _, cr := range r.CrossRank {
		if s := cr.All.Straggler; s != nil && s.StandsOut {
			// Before the tables whose "slowest" points elsewhere.
			fmt.Fprintf(&b, "straggler: rank %d of comm %s (hook %s), the rank the others wait for: \"slowest\" below is by p50 duration, which marks the waiting ranks (cross-rank arrival, at the end)\n",
				s.Rank, cr.CommID, cr.Hook)
		}
	}
	b.WriteString("\n")
	if _, err := io.WriteString(w, b.String()); err != nil {
		return err
	}
	if err := r.writeItems(w, f); err != nil {
		return err
	}
	if err := r.writeAggregates(w, f); err != nil {
		return err
	}
	return r.writeCrossRanks(w, f)
}

// unattributedAggsWhy says why aggregate rows have no group.
func (r *ByReport) unattributedAggsWhy() string {
	if r.By == ByComm {
		return "their device has several communicators and the aggregate is not keyed by comm (add comm to its by), or the outputs have no comm line for it"
	}
	return "their device has no comm line"
}

// writeItems writes the work items' table (none for aggregate-only profiles).
func (r *ByReport) writeItems(w io.Writer, f Format) error {
	if len(r.Funcs) == 0 {
		return nil
	}
	g := grid{header: []string{"hook", "func", string(r.By), "count", "p50 us", "p90 us", "p99 us", "max us", "slowest", "throttled"}}
	for _, fn := range r.Funcs {
		for _, gr := range fn.Groups {
			mark := ""
			if gr.Slowest {
				mark = fmt.Sprintf("<- slowest (%.2fx the median)", fn.SlowestVsMedian)
			}
			throttle := strings.Join(gr.Slowdown, ",")
			if throttle == "" {
				throttle = "-"
			}
			g.add(fn.Hook, fn.Func, gr.Label, fmt.Sprint(gr.Dist.Count), micros(gr.Dist.P50), micros(gr.Dist.P90),
				micros(gr.Dist.P99), micros(gr.Dist.Max), mark, throttle)
		}
	}
	if err := g.write(w, f); err != nil {
		return err
	}
	_, err := io.WriteString(w, "\n")
	return err
}

// writeAggregates writes the aggregates' table.
func (r *ByReport) writeAggregates(w io.Writer, f Format) error {
	if len(r.Aggregates) == 0 {
		return nil
	}
	if _, err := io.WriteString(w, "aggregates (values in the aggregate's units; histogram quantiles are bucket bounds):\n"); err != nil {
		return err
	}
	ag := grid{header: []string{"hook", "aggregate", "func", "channel", string(r.By), "count", "mean", "p50 le", "p99 le", "max", "slowest", "throttled"}}
	dash := func(s string) string {
		if s == "" {
			return "-"
		}
		return s
	}
	for _, a := range r.Aggregates {
		for _, gr := range a.Groups {
			mean, maxv := "-", "-"
			if a.Kind == "sum" || a.Kind == "histogram" {
				mean = strconv.FormatFloat(gr.Mean, 'f', 1, 64)
			}
			if a.Kind == "max" {
				maxv = strconv.FormatFloat(gr.Stat.Max, 'f', -1, 64)
			}
			mark := ""
			if gr.Slowest {
				mark = fmt.Sprintf("<- slowest (%.2fx the median)", a.SlowestVsMedian)
			}
			ag.add(a.Hook, a.Name, dash(a.Func), dash(a.Channel), gr.Label, fmt.Sprint(gr.Stat.Count), mean, dash(string(gr.Stat.P50)), dash(string(gr.Stat.P99)),
				maxv, mark, dash(strings.Join(gr.Slowdown, ",")))
		}
	}
	return ag.write(w, f)
}
