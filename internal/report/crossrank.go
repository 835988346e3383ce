package report

// Arrival skew across ranks (report --by rank): the same collective on
// every rank of a communicator is its (comm_id, channel, workCounter): NCCL
// counts work items per communicator and channel alike on every rank that
// runs the same sequence of collectives. Its arrival skew is the latest
// START less the earliest, and the rank that started last is the one the
// others waited for: in a ring each rank's work ends only after the last
// rank joined, so the late rank's own work item is the shortest, and the
// rank with the longest durations is where the wait shows, not its cause.

import (
	"cmp"
	"fmt"
	"io"
	"math"
	"slices"
	"strings"
)

// CrossRank is the arrival skew of one hook's work items in one
// communicator, over its ranks.
type CrossRank struct {
	Hook     string `json:"hook"`
	CommID   string `json:"comm_id"`
	CommName string `json:"comm_name"`
	NRanks   int    `json:"nranks"`
	// Ranks are the ranks the inputs hold of it.
	Ranks []int `json:"ranks"`
	// Clock says how the ranks' STARTs were put on one timeline, and how
	// exact that is.
	Clock string `json:"clock"`
	// All is every function together, then each function.
	All   CrossSkew   `json:"all"`
	Funcs []CrossSkew `json:"functions"`
	// Partial counts collectives seen on some of the ranks only (a rank's
	// record dropped, or work counters that do not line up): left out.
	Partial uint64 `json:"partial,omitempty"`
	// Mismatched counts collectives whose ranks ran different functions
	// under one (channel, workCounter): the counters do not line up there.
	Mismatched uint64 `json:"mismatched,omitempty"`
	// Duplicates counts STARTs of a rank seen again for the same collective
	// (two files claiming one rank): the first is kept.
	Duplicates uint64 `json:"duplicates,omitempty"`
}

// CrossSkew is the arrival skew of the collectives of one function (or of
// all): nanoseconds.
type CrossSkew struct {
	Func        string  `json:"func"`
	Collectives int     `json:"collectives"`
	SkewP50     float64 `json:"skew_p50_ns"`
	SkewP99     float64 `json:"skew_p99_ns"`
	SkewMax     float64 `json:"skew_max_ns"`
	// Ranks are each rank's share of last arrivals and its own work items'
	// p50 duration, by rank.
	Ranks []CrossRankStat `json:"ranks"`
	// Straggler is the rank that arrived last most often.
	Straggler *Straggler `json:"straggler,omitempty"`
}

// CrossRankStat is one rank of a CrossSkew.
type CrossRankStat struct {
	Rank  int    `json:"rank"`
	Label string `json:"label"`
	Last  int    `json:"last"` // collectives it started last
	// P50 is the p50 duration of its work items among these collectives.
	P50 float64 `json:"p50_ns"`
}

// Straggler is the rank that started last most often.
type Straggler struct {
	Rank  int     `json:"rank"`
	Label string  `json:"label"`
	Share float64 `json:"share"` // of the collectives, it started last
	// MeanLate is how long after the next-latest rank it started, on
	// average, where it was last: what the collective waited for it alone.
	MeanLate float64 `json:"mean_late_ns"`
	// MedianLate is the median over every collective of its START less
	// the latest other rank's (negative where it was not last), and
	// NoiseFloor what the ranks' arrivals vary by without a straggler: the
	// median spread of the other ranks' STARTs, or with two ranks (no
	// others to spread) twice the median absolute deviation of its own
	// lateness.
	MedianLate float64 `json:"median_late_ns"`
	NoiseFloor float64 `json:"noise_floor_ns"`
	// StandsOut: it is last in at least three quarters of the
	// collectives, its median lateness is above the noise floor, and its
	// last arrivals are beyond chance (binomial, one-sided, p < 0.001).
	// Otherwise no rank is named the straggler: the ranks arrive in an
	// order the noise decides, or one is late by too little to matter.
	StandsOut bool `json:"stands_out"`
	// ShortestP50 says its own work items have the smallest p50 of the
	// ranks (it waits for no one); SlowestRank is the rank with the largest
	// p50 duration, which "slowest by duration" would wrongly blame.
	ShortestP50 bool `json:"shortest_p50"`
	SlowestRank int  `json:"slowest_rank_by_p50"`
}

// arrival is one work item's START on one rank.
type arrival struct {
	file, device, comm int
	hook, fn           string
	channel            int
	counter            uint64
	start, duration    uint64
}

// addArrival keeps w for the cross-rank skew, if it says when and which
// collective it started.
func (c *ByCollector) addArrival(w *WorkItem) {
	if !w.HasTime || !w.HasCounter || w.Channel < 0 {
		return
	}
	c.arrivals = append(c.arrivals, arrival{w.File, w.Device, w.Comm, w.Hook, w.FuncLabel(), w.Channel, w.WorkCounter, w.Start, w.Duration})
}

// crossRanks computes the arrival skew of every communicator with two or
// more ranks in the inputs.
func (c *ByCollector) crossRanks(run *Run) []CrossRank {
	type commKey struct{ hook, id string }
	type collKey struct {
		commKey
		channel int
		counter uint64
	}
	type start struct {
		rank  int
		where [2]int // file, device
		fn    string
		ts    int64
		dur   uint64
	}
	comms := map[commKey]*CrossRank{}
	devices := map[commKey]map[[2]int]bool{}
	colls := map[collKey][]start{}
	for _, a := range c.arrivals {
		cm, ok := run.Comm(a.file, a.device, a.comm)
		if !ok || cm.NRanks < 2 {
			continue
		}
		ck := commKey{a.hook, cm.CommID}
		if comms[ck] == nil {
			comms[ck] = &CrossRank{Hook: a.hook, CommID: cm.CommID, CommName: cm.Name, NRanks: cm.NRanks}
			devices[ck] = map[[2]int]bool{}
		}
		devices[ck][[2]int{a.file, a.device}] = true
		k := collKey{ck, a.channel, a.counter}
		colls[k] = append(colls[k], start{rank: cm.Rank, where: [2]int{a.file, a.device}, fn: a.fn, ts: int64(a.start), dur: a.duration})
	}
	// One timeline per communicator: see clockOf.
	place := map[commKey]func(file, device int, ts int64) int64{}
	for ck, cr := range comms {
		cr.Clock, place[ck] = clockOf(run, devices[ck])
	}
	type acc struct {
		skews []uint64
		last  map[int]int
		late  map[int]float64 // summed margins where last
		durs  map[int][]uint64
		colls [][]rankTs // each collective's STARTs, by time
	}
	newAcc := func() *acc { return &acc{last: map[int]int{}, late: map[int]float64{}, durs: map[int][]uint64{}} }
	all := map[commKey]*acc{}
	perFn := map[commKey]map[string]*acc{}
	labels := map[commKey]map[int]string{}
	ranks := map[commKey]map[int]bool{}
	for k, ss := range colls {
		cr := comms[k.commKey]
		if labels[k.commKey] == nil {
			labels[k.commKey], ranks[k.commKey] = map[int]string{}, map[int]bool{}
		}
		// One START per rank; the first file's where two claim one rank.
		slices.SortStableFunc(ss, func(x, y start) int { return cmp.Compare(x.rank, y.rank) })
		uniq := ss[:0]
		for _, s := range ss {
			ranks[k.commKey][s.rank] = true
			if len(uniq) > 0 && uniq[len(uniq)-1].rank == s.rank {
				cr.Duplicates++
				continue
			}
			uniq = append(uniq, s)
			if _, ok := labels[k.commKey][s.rank]; !ok {
				labels[k.commKey][s.rank] = fmt.Sprintf("rank %d (%s)", s.rank, run.DeviceLabel(s.where[0], s.where[1]))
			}
		}
		ss = uniq
		if len(ss) < cr.NRanks {
			cr.Partial++
			continue
		}
		fn := ss[0].fn
		if slices.ContainsFunc(ss, func(s start) bool { return s.fn != fn }) {
			cr.Mismatched++
			continue
		}
		at := place[k.commKey]
		for i := range ss {
			ss[i].ts = at(ss[i].where[0], ss[i].where[1], ss[i].ts)
		}
		slices.SortStableFunc(ss, func(x, y start) int { return cmp.Compare(x.ts, y.ts) })
		lastRank := ss[len(ss)-1].rank
		skew := uint64(ss[len(ss)-1].ts - ss[0].ts)
		margin := float64(ss[len(ss)-1].ts - ss[len(ss)-2].ts)
		if perFn[k.commKey] == nil {
			perFn[k.commKey] = map[string]*acc{}
			all[k.commKey] = newAcc()
		}
		if perFn[k.commKey][fn] == nil {
			perFn[k.commKey][fn] = newAcc()
		}
		for _, a := range []*acc{all[k.commKey], perFn[k.commKey][fn]} {
			a.skews = append(a.skews, skew)
			a.last[lastRank]++
			a.late[lastRank] += margin
			for _, s := range ss {
				a.durs[s.rank] = append(a.durs[s.rank], s.dur)
			}
		}
		order := make([]rankTs, len(ss))
		for i, s := range ss {
			order[i] = rankTs{s.rank, s.ts}
		}
		all[k.commKey].colls = append(all[k.commKey].colls, order)
		perFn[k.commKey][fn].colls = append(perFn[k.commKey][fn].colls, order)
	}
	var out []CrossRank
	for ck, cr := range comms {
		for r := range ranks[ck] {
			cr.Ranks = append(cr.Ranks, r)
		}
		slices.Sort(cr.Ranks)
		if len(cr.Ranks) < 2 {
			continue // one rank in the inputs: nothing to compare it with
		}
		finish := func(fn string, a *acc) CrossSkew {
			cs := CrossSkew{Func: fn}
			if a == nil {
				return cs
			}
			d := NewDist(a.skews)
			cs.Collectives, cs.SkewP50, cs.SkewP99, cs.SkewMax = d.Count, d.P50, d.P99, d.Max
			for _, r := range cr.Ranks {
				cs.Ranks = append(cs.Ranks, CrossRankStat{Rank: r, Label: labels[ck][r], Last: a.last[r], P50: NewDist(a.durs[r]).P50})
			}
			cs.Straggler = straggler(cs, a.late, a.colls, cr.NRanks)
			return cs
		}
		cr.All = finish("all functions", all[ck])
		for fn, a := range perFn[ck] {
			cr.Funcs = append(cr.Funcs, finish(fn, a))
		}
		slices.SortFunc(cr.Funcs, func(x, y CrossSkew) int { return cmp.Compare(x.Func, y.Func) })
		out = append(out, *cr)
	}
	slices.SortFunc(out, func(x, y CrossRank) int { return cmp.Or(cmp.Compare(x.Hook, y.Hook), cmp.Compare(x.CommID, y.CommID)) })
	return out
}

// rankTs is one rank's START of a collective, on the communicator's timeline.
type rankTs struct {
	rank int
	ts   int64
}

// straggler names the rank that started last most often, and whether it
// stands out beyond noise and chance.
func straggler(cs CrossSkew, late map[int]float64, colls [][]rankTs, nranks int) *Straggler {
	if cs.Collectives == 0 || len(cs.Ranks) == 0 {
		return nil
	}
	top, fast, slow := 0, 0, 0
	for i, r := range cs.Ranks {
		if r.Last > cs.Ranks[top].Last {
			top = i
		}
		if r.P50 < cs.Ranks[fast].P50 {
			fast = i
		}
		if r.P50 > cs.Ranks[slow].P50 {
			slow = i
		}
	}
	t := cs.Ranks[top]
	s := &Straggler{Rank: t.Rank, Label: t.Label, Share: float64(t.Last) / float64(cs.Collectives), SlowestRank: cs.Ranks[slow].Rank,
		ShortestP50: fast == top}
	if t.Last > 0 {
		s.MeanLate = late[t.Rank] / float64(t.Last)
	}
	s.MedianLate, s.NoiseFloor = lateness(colls, t.Rank)
	s.StandsOut = 4*t.Last >= 3*cs.Collectives && s.MedianLate > s.NoiseFloor && binomialTail(cs.Collectives, t.Last, 1/float64(nranks)) < 1e-3
	return s
}

// lateness is rank's median lateness over colls (its START less the latest
// other rank's) and the noise floor it must clear (see Straggler).
func lateness(colls [][]rankTs, rank int) (median, floor float64) {
	late := make([]float64, 0, len(colls))
	spread := make([]float64, 0, len(colls))
	for _, c := range colls {
		var own int64
		lo, hi := int64(math.MaxInt64), int64(math.MinInt64)
		for _, r := range c {
			if r.rank == rank {
				own = r.ts
				continue
			}
			lo, hi = min(lo, r.ts), max(hi, r.ts)
		}
		late = append(late, float64(own-hi))
		spread = append(spread, float64(hi-lo))
	}
	if len(late) == 0 {
		return 0, 0
	}
	median = medianOf(late)
	if len(colls[0]) > 2 {
		return median, medianOf(spread)
	}
	dev := make([]float64, len(late))
	for i, l := range late {
		dev[i] = math.Abs(l - median)
	}
	return median, 2 * medianOf(dev)
}

// medianOf sorts xs and returns their median.
func medianOf(xs []float64) float64 {
	slices.Sort(xs)
	return median(xs)
}

// binomialTail is P(X >= k) for X ~ Binomial(n, p), summed in log space.
func binomialTail(n, k int, p float64) float64 {
	if k <= 0 {
		return 1
	}
	lgn, _ := math.Lgamma(float64(n + 1))
	var sum float64
	for i := k; i <= n; i++ {
		a, _ := math.Lgamma(float64(i + 1))
		b, _ := math.Lgamma(float64(n - i + 1))
		term := math.Exp(lgn - a - b + float64(i)*math.Log(p) + float64(n-i)*math.Log1p(-p))
		sum += term
		if term < sum*1e-17 {
			break // the rest is smaller still (past the mode)
		}
	}
	return min(sum, 1)
}

// clockOf puts the STARTs of one communicator's devices on one timeline:
// one GPU's timer as it is (every process on it reads the same
// globaltimer); the cpu backend's timestamps, the host's CLOCK_REALTIME,
// as they are on one host; else each device's clock line (host time =
// timestamp - device_ns + host_unix_ns), whose error the outputs do not
// tell: the pair's reading (microseconds) and the timer's drift since, and
// across hosts their clocks' offset.
func clockOf(run *Run, devs map[[2]int]bool) (string, func(file, device int, ts int64) int64) {
	raw := func(_, _ int, ts int64) int64 { return ts }
	uuids, hosts, backends := map[string]bool{}, map[string]bool{}, map[string]bool{}
	clocks := true
	for fd := range devs {
		f := run.Files[fd[0]]
		uuid := ""
		if d := f.Devices[fd[1]]; d != nil {
			uuid = d.UUID
		}
		uuids[uuid] = true
		hosts[f.Header.Host] = true
		backends[f.Header.Backend] = true
		_, ok := f.Clocks[fd[1]]
		clocks = clocks && ok
	}
	one := func(m map[string]bool, v string) bool { return len(m) == 1 && m[v] }
	switch {
	case len(uuids) == 1 && !uuids[""]:
		return "exact: one GPU's timer", raw
	case one(backends, "cpu") && len(hosts) == 1:
		return "exact: one host's CLOCK_REALTIME (the cpu backend's timestamps)", raw
	case backends["host"]:
		return "GPU timers compared as written (host events: the clock lines do not pair them with the host clock): error unknown", raw
	case !clocks:
		return "timestamps compared as written (a device has no clock line): error unknown", raw
	}
	place := func(file, device int, ts int64) int64 { return run.Files[file].Clocks[device].HostNs(uint64(ts)) }
	if len(hosts) == 1 {
		return "aligned by each device's clock line: error the pairs' reading (microseconds) and the timers' drift since", place
	}
	return "aligned by each device's clock line: error the pairs' reading and drift, plus the hosts' clock offset (NTP: tens of microseconds or more)", place
}

// writeCrossRanks writes the arrival skew, or why there is none.
func (r *ByReport) writeCrossRanks(w io.Writer, f Format) error {
	var b strings.Builder
	if r.CrossRankNote != "" {
		fmt.Fprintf(&b, "\ncross-rank arrival skew: %s\n", r.CrossRankNote)
	}
	for _, cr := range r.CrossRank {
		fmt.Fprintf(&b, "\ncross-rank arrival, hook %s, comm %s %q: ranks %s of %d; times %s\n",
			cr.Hook, cr.CommID, cr.CommName, intList(cr.Ranks), cr.NRanks, cr.Clock)
		b.WriteString("(a collective is its comm, channel and workCounter on every rank; skew = latest START - earliest; late by = after the next-latest rank, where last)\n")
		if cr.Partial+cr.Mismatched+cr.Duplicates > 0 {
			fmt.Fprintf(&b, "left out: %d collectives not seen on every rank (records dropped, or work counters that do not line up), %d whose ranks ran different functions, %d repeated STARTs of one rank\n",
				cr.Partial, cr.Mismatched, cr.Duplicates)
		}
		if _, err := io.WriteString(w, b.String()); err != nil {
			return err
		}
		b.Reset()
		g := grid{header: []string{"func", "collectives", "skew p50 us", "p99 us", "max us", "last most often", "share", "late by (mean) us", "its p50 us", "straggler"}}
		for _, cs := range append([]CrossSkew{cr.All}, cr.Funcs...) {
			s := cs.Straggler
			if s == nil {
				continue
			}
			mark := "-"
			if s.StandsOut {
				mark = "<- straggler"
			}
			own := ""
			for _, rs := range cs.Ranks {
				if rs.Rank == s.Rank {
					own = micros(rs.P50)
				}
			}
			g.add(cs.Func, fmt.Sprint(cs.Collectives), micros(cs.SkewP50), micros(cs.SkewP99), micros(cs.SkewMax),
				s.Label, pct(s.Share), micros(s.MeanLate), own, mark)
		}
		if err := g.write(w, f); err != nil {
			return err
		}
		b.WriteString(stragglerVerdict(cr))
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// stragglerVerdict says in words who held the communicator's collectives
// up, and why the slowest rank by duration is not it.
func stragglerVerdict(cr CrossRank) string {
	s := cr.All.Straggler
	if s == nil {
		return ""
	}
	if !s.StandsOut {
		return fmt.Sprintf("no rank stands out: the one most often last, %s, starts last in %s of %d collectives (chance: %s), its median lateness %s us within the noise floor (%s us)\n",
			s.Label, pct(s.Share), cr.All.Collectives, pct(1/float64(cr.NRanks)), micros(s.MedianLate), micros(s.NoiseFloor))
	}
	v := fmt.Sprintf("straggler: %s starts last in %s of %d collectives, %s us after the next-latest rank on average (median lateness %s us, noise floor %s us)",
		s.Label, pct(s.Share), cr.All.Collectives, micros(s.MeanLate), micros(s.MedianLate), micros(s.NoiseFloor))
	var own, others []float64
	for _, rs := range cr.All.Ranks {
		if rs.Rank == s.Rank {
			own = append(own, rs.P50)
		} else {
			others = append(others, rs.P50)
		}
	}
	switch {
	case s.ShortestP50 && len(own) == 1 && len(others) > 0:
		v += fmt.Sprintf("; its own work items are the shortest (p50 %s us, the others' %s to %s us): the others wait for it, so the slowest rank by p50 duration (rank %d) shows the wait, not its cause",
			micros(own[0]), micros(slices.Min(others)), micros(slices.Max(others)), s.SlowestRank)
	case s.SlowestRank != s.Rank:
		v += fmt.Sprintf("; the slowest rank by p50 duration is rank %d: in a collective the others wait for the last to arrive, so duration blames the waiting ranks", s.SlowestRank)
	}
	return v + "\n"
}

func intList(xs []int) string {
	s := make([]string, len(xs))
	for i, x := range xs {
		s[i] = fmt.Sprint(x)
	}
	return strings.Join(s, ",")
}

// crossRankNote says why the inputs give no arrival skew; "" when they do,
// or when they hold one rank of every communicator.
func crossRankNote(run *Run, crs []CrossRank, arrivals int) string {
	if len(crs) > 0 {
		return ""
	}
	multi := false
	ranks := map[string]map[int]bool{}
	for _, f := range run.Files {
		for _, cm := range f.Comms {
			if ranks[cm.CommID] == nil {
				ranks[cm.CommID] = map[int]bool{}
			}
			ranks[cm.CommID][cm.Rank] = true
			multi = multi || len(ranks[cm.CommID]) > 1
		}
	}
	switch {
	case !multi:
		return "" // one rank of each communicator: nothing to compare
	case arrivals == 0:
		return "needs records of the START of each work item with timestamp, workCounter and channelId (all-events, or a profile recording them); aggregates give each rank's durations only (the p50 bucket per rank above, where in collectives between ranks the one the others wait for has the shortest), not when each rank arrived"
	}
	return "no work item names its communicator: with several communicators on a device, record the comm field"
}
