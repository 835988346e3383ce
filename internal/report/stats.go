package report

import (
	"math"
	"slices"
)

// Dist summarises a set of durations, in nanoseconds.
type Dist struct {
	Count int     `json:"count"`
	P50   float64 `json:"p50_ns"`
	P90   float64 `json:"p90_ns"`
	P99   float64 `json:"p99_ns"`
	Max   float64 `json:"max_ns"`
	Mean  float64 `json:"mean_ns"`
}

// NewDist computes the distribution of ds, sorting ds in place.
// Percentiles use the nearest-rank method: the smallest value with at least
// p% of the samples at or below it, so every reported value was observed.
func NewDist(ds []uint64) Dist {
	if len(ds) == 0 {
		return Dist{}
	}
	slices.Sort(ds)
	var sum float64
	for _, d := range ds {
		sum += float64(d)
	}
	return Dist{
		Count: len(ds),
		P50:   float64(percentile(ds, 50)),
		P90:   float64(percentile(ds, 90)),
		P99:   float64(percentile(ds, 99)),
		Max:   float64(ds[len(ds)-1]),
		Mean:  sum / float64(len(ds)),
	}
}

// percentile of sorted values, nearest rank.
func percentile(sorted []uint64, p float64) uint64 {
	rank := int(math.Ceil(p / 100 * float64(len(sorted))))
	return sorted[max(rank, 1)-1]
}

// Skew is a function's per-channel skew: how much slower its slowest channel
// is than its fastest, comparing channel medians.
type Skew struct {
	Ns             float64 `json:"ns"`    // max channel median - min channel median
	Ratio          float64 `json:"ratio"` // max channel median / min channel median
	SlowestChannel int     `json:"slowest_channel"`
	FastestChannel int     `json:"fastest_channel"`
}

// Report is the statistics of one run.
type Report struct {
	Inputs  []string `json:"inputs"`
	Files   int      `json:"files"`
	Profile string   `json:"profile"`
	// Inactive are the processes in which the plugin recorded nothing (a
	// refused profile), with why: such a report is no measurement.
	Inactive []InactiveFile `json:"inactive,omitempty"`
	Hooks    []HookReport   `json:"hooks"`
	// Aggregates are the on-device aggregates, merged over devices and ranks.
	Aggregates []AggReport `json:"aggregates,omitempty"`
	// AggSkew is the channel skew of the aggregates keyed by channelId, per
	// function (examples/skew.yaml).
	AggSkew []AggSkew `json:"aggregate_skew,omitempty"`
}

// HookReport is one hook's statistics.
type HookReport struct {
	Hook           string   `json:"hook"`
	Records        uint64   `json:"records"`
	Items          uint64   `json:"work_items"`
	UnpairedStarts uint64   `json:"unpaired_starts"`
	UnpairedStops  uint64   `json:"unpaired_stops"`
	Ambiguous      uint64   `json:"ambiguous_pairs"`
	Capture        *Capture `json:"capture,omitempty"` // nil without dump_stats
	// Drained: the drain computes the hook's aggregates from its records,
	// and writes none of them (the header's drained).
	Drained   bool         `json:"drained,omitempty"`
	Functions []FuncReport `json:"functions"`
}

// FuncReport is one function of a hook, over all channels and per channel.
type FuncReport struct {
	Func     string          `json:"func"`
	Dist     Dist            `json:"all_channels"`
	Skew     *Skew           `json:"skew,omitempty"` // nil with fewer than two channels
	Channels []ChannelReport `json:"channels,omitempty"`
}

// ChannelReport is one channel of a function.
type ChannelReport struct {
	Channel int  `json:"channel"`
	Dist    Dist `json:"dist"`
}

// Collector gathers work-item durations by hook, function and channel.
type Collector struct {
	groups map[groupKey][]uint64
}

type groupKey struct {
	hook, fn string
	channel  int
}

// NewCollector returns an empty Collector.
func NewCollector() *Collector { return &Collector{groups: map[groupKey][]uint64{}} }

// Add records one work item; pass it as Read's onItem.
func (c *Collector) Add(w *WorkItem) {
	k := groupKey{w.Hook, w.FuncLabel(), w.Channel}
	c.groups[k] = append(c.groups[k], w.Duration)
}

// Load reads the inputs and computes their report.
func Load(inputs []string, opts Options) (*Report, error) {
	c := NewCollector()
	run, err := Read(inputs, opts, c.Add)
	if err != nil {
		return nil, err
	}
	return c.Report(run), nil
}

// Report computes the statistics of run from the collected items.
func (c *Collector) Report(run *Run) *Report {
	rep := &Report{Inputs: run.Inputs, Files: len(run.Files), Profile: run.Profile, Inactive: run.Inactive()}
	byFunc := map[string]map[string][]int{} // hook -> func -> channels
	for k := range c.groups {
		if byFunc[k.hook] == nil {
			byFunc[k.hook] = map[string][]int{}
		}
		byFunc[k.hook][k.fn] = append(byFunc[k.hook][k.fn], k.channel)
	}
	for _, h := range run.HookNames() {
		counts := run.Hooks[h]
		hr := HookReport{Hook: h, Records: counts.Records, Items: counts.Items,
			UnpairedStarts: counts.UnpairedStarts, UnpairedStops: counts.UnpairedStops, Ambiguous: counts.Ambiguous}
		if capt, ok := run.Capture(h); ok {
			hr.Capture = &capt
		}
		hr.Drained = run.Drained(h)
		fns := make([]string, 0, len(byFunc[h]))
		for fn := range byFunc[h] {
			fns = append(fns, fn)
		}
		slices.Sort(fns)
		for _, fn := range fns {
			hr.Functions = append(hr.Functions, c.funcReport(h, fn, byFunc[h][fn]))
		}
		rep.Hooks = append(rep.Hooks, hr)
	}
	rep.Aggregates = aggReports(run)
	rep.AggSkew = aggSkews(rep.Aggregates)
	return rep
}

func (c *Collector) funcReport(hook, fn string, channels []int) FuncReport {
	slices.Sort(channels)
	fr := FuncReport{Func: fn}
	var all []uint64
	for _, ch := range channels {
		ds := c.groups[groupKey{hook, fn, ch}]
		all = append(all, ds...)
		if ch >= 0 {
			fr.Channels = append(fr.Channels, ChannelReport{Channel: ch, Dist: NewDist(ds)})
		}
	}
	fr.Dist = NewDist(all)
	if len(fr.Channels) >= 2 {
		slow, fast := fr.Channels[0], fr.Channels[0]
		for _, cr := range fr.Channels[1:] {
			if cr.Dist.P50 > slow.Dist.P50 {
				slow = cr
			}
			if cr.Dist.P50 < fast.Dist.P50 {
				fast = cr
			}
		}
		sk := &Skew{Ns: slow.Dist.P50 - fast.Dist.P50, SlowestChannel: slow.Channel, FastestChannel: fast.Channel}
		if fast.Dist.P50 > 0 {
			sk.Ratio = slow.Dist.P50 / fast.Dist.P50
		}
		fr.Skew = sk
	}
	return fr
}
