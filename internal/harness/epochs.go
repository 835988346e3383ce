package harness

// epochs.go checks an output with profile epochs (a live reload,
// schema.Profile): each epoch on its own, and every event counted in
// exactly one epoch.

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/ncclhooks/ncclhooks/internal/config"
	"github.com/ncclhooks/ncclhooks/internal/schema"
)

// AcrossCheck is one predicate on one device across a live reload's
// profile epochs: every epoch has a hook with that predicate (its when,
// none: every event), and the matches of the epochs add up to the matches
// of the whole run, exactly: no event was counted twice or lost at a switch.
type AcrossCheck struct {
	When     string // the predicate's source; "" for every event
	Device   int
	Hooks    []string // a hook of each epoch
	PerEpoch []uint64 // its matched_total in each epoch
	Sum      uint64
	Expected int64 // the events the predicate matches in the whole run; -1 unknown
	Problems []string
}

// checkStatsOnly checks an epoch whose profile is not known from its
// dump_stats lines and its fields (the header's or profile line's) alone: records + dropped = matched, drops by stage,
// nothing pending, a record line per record unless the drain aggregates
// the hook.
func (s *Summary) checkStatsOnly(out *output) {
	var keys []statKey
	for k := range out.final {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b statKey) int {
		if c := strings.Compare(a.hook, b.hook); c != 0 {
			return c
		}
		return a.device - b.device
	})
	drained := map[string]bool{}
	for _, h := range out.drained {
		drained[h] = true
	}
	for _, k := range keys {
		st := out.final[k]
		r := Row{Hook: k.hook, Device: k.device, Epoch: out.epoch, Expected: -1, Matched: st.Matched, Records: st.Records, Dropped: st.Dropped, Lines: out.lines[k]}
		r.Stages = fmt.Sprintf("full %d, overwritten %d, torn %d, ring %d", st.DroppedBufferFull, st.DroppedOverwritten, st.DroppedTorn, st.DroppedRingFull)
		if fs, ok := out.fields[k.hook]; ok && len(fs) == 0 && !drained[k.hook] {
			// Aggregate only: what it matched is what its aggregates
			// counted; it reserves nothing and records nothing.
			if st.Records != 0 || st.Dropped != 0 || st.Pending != 0 || r.Lines != 0 {
				r.Problems = append(r.Problems, fmt.Sprintf("records %d, dropped %d, pending %d, %d record lines from a hook that only aggregates", st.Records, st.Dropped, st.Pending, r.Lines))
			}
			s.Rows = append(s.Rows, r)
			continue
		}
		r.Problems = statsProblems(st, nil)
		if !drained[k.hook] && r.Lines != r.Records {
			r.Problems = append(r.Problems, fmt.Sprintf("%d record lines but records_total %d", r.Lines, r.Records))
		}
		s.Rows = append(s.Rows, r)
	}
}

// statsProblems is what a final dump_stats line says against itself.
func statsProblems(st schema.DumpStats, p []string) []string {
	if st.Records+st.Dropped != st.Matched {
		p = append(p, fmt.Sprintf("records %d + dropped %d != matched %d", st.Records, st.Dropped, st.Matched))
	}
	if st.DroppedBufferFull+st.DroppedOverwritten+st.DroppedTorn+st.DroppedRingFull+st.DroppedWriteFailed+st.DroppedCap != st.Dropped {
		p = append(p, "drops by stage do not add up to dropped_total")
	}
	if st.Pending != 0 {
		p = append(p, fmt.Sprintf("%d positions still pending after finalize", st.Pending))
	}
	return p
}

// checkAcross checks that the epochs together matched each event once: for
// every predicate that a hook of each epoch has (profs[e] known), the
// epochs' matched_total add up to what the predicate matches in the run's
// events (the logs; without them, only "every event" is known: emitted).
func (s *Summary) checkAcross(outs []*output, profs []*config.Profile, logs map[int][]Event, emitted map[int]uint64) {
	byWhen := make([]map[string]*config.Hook, len(outs))
	for e, p := range profs {
		if p == nil {
			return // an epoch of a profile not given: accounting per epoch only
		}
		byWhen[e] = map[string]*config.Hook{}
		for _, h := range p.EnabledHooks() {
			if _, refused := outs[e].refused[h.Name]; refused || h.Sample != 1 {
				continue
			}
			w := ""
			if h.When != nil {
				w = h.When.Source
			}
			if byWhen[e][w] == nil {
				byWhen[e][w] = h
			}
		}
	}
	var whens []string
	for w := range byWhen[0] {
		if !slices.ContainsFunc(byWhen, func(m map[string]*config.Hook) bool { return m[w] == nil }) {
			whens = append(whens, w)
		}
	}
	slices.Sort(whens)
	for _, w := range whens {
		first := byWhen[0][w]
		pred, predErr := compilePredicate(first)
		for d := 0; d < s.Config.Devices; d++ {
			c := AcrossCheck{When: w, Device: d, Expected: -1}
			for e := range outs {
				h := byWhen[e][w]
				st, ok := outs[e].final[statKey{h.Name, d}]
				if !ok {
					c.Problems = append(c.Problems, fmt.Sprintf("epoch %d: hook %q has no final dump_stats line", e, h.Name))
				}
				c.Hooks = append(c.Hooks, h.Name)
				c.PerEpoch = append(c.PerEpoch, st.Matched)
				c.Sum += st.Matched
			}
			switch evs, ok := logs[d]; {
			case ok && predErr == nil && pred != nil:
				n, err := countMatches(first, pred, evs)
				if err != nil {
					c.Problems = append(c.Problems, err.Error())
				} else {
					c.Expected = int64(n)
				}
			case w == "" && emitted[d] > 0:
				c.Expected = int64(emitted[d])
			}
			if c.Expected >= 0 && uint64(c.Expected) != c.Sum {
				c.Problems = append(c.Problems, fmt.Sprintf("the epochs matched %d events in all (%v), the run has %d that match", c.Sum, c.PerEpoch, c.Expected))
			}
			s.Across = append(s.Across, c)
		}
	}
}

// PrintAcross writes the checks across profile epochs, if any.
func (s *Summary) PrintAcross(w io.Writer) {
	if s.Epochs <= 1 {
		return
	}
	fmt.Fprintf(w, "%d profile epochs (live reload): each event matched in exactly one\n", s.Epochs)
	tw := tabwriter.NewWriter(w, 2, 8, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "when\tdevice\thooks by epoch\tmatched by epoch\tsum\texpected\tresult\t")
	for _, c := range s.Across {
		when, exp, res := c.When, "n/a", "exact"
		if when == "" {
			when = "(every event)"
		}
		if c.Expected >= 0 {
			exp = fmt.Sprint(c.Expected)
		}
		if len(c.Problems) > 0 {
			res = "MISMATCH"
		}
		fmt.Fprintf(tw, "%s\t%d\t%s\t%v\t%d\t%s\t%s\t\n", when, c.Device, strings.Join(c.Hooks, ","), c.PerEpoch, c.Sum, exp, res)
	}
	tw.Flush()
	for _, c := range s.Across {
		for _, p := range c.Problems {
			fmt.Fprintf(w, "MISMATCH across epochs, device %d: %s\n", c.Device, p)
		}
	}
}
