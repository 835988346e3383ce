package harness

// summary.go holds the Summary of a run: its rows per hook and device, its verdict and its
// printout.

import (
	"fmt"
	"io"
	"text/tabwriter"
	"time"
)

// Summary is the outcome of a harness run.
type Summary struct {
	Config        Config
	PluginVersion int
	HookActive    bool
	Emitted       uint64
	Emit, Total   time.Duration
	Cycles        int // init/emit/finalize cycles in this process (Config.Duration)
	OutputFile    string
	Rows          []Row
	Aggs          []AggCheck
	Problems      []string      // about the run as a whole (contexts, comm lines)
	Refused       []string      // hooks the plugin left out as unsafe to call, with why
	CommLines     map[int]int   // comm lines per device
	Pairs         []PairCheck   // START/STOP per work item, for hooks that record enough to tell
	Epochs        int           // profile epochs in the output (a live reload); 0 or 1: none
	Across        []AcrossCheck // with epochs: each event matched in exactly one
	Log           string        // what the plugin logged through the NCCL logger
}

// Row is one hook on one device.
type Row struct {
	Hook     string
	Device   int
	Epoch    int    // the profile epoch (a live reload; 0: the header's profile)
	Emitted  uint64 // events the harness passed to the hook on this device
	Expected int64  // matches computed independently by the harness; -1: not computable
	Matched  uint64 // the plugin's matched_total
	Records  uint64 // the plugin's records_total
	Dropped  uint64 // the plugin's dropped_total
	Stages   string // drops by stage
	Lines    uint64 // record lines in the output
	Checked  uint64 // record lines whose fields were compared with the event log
	Dumps    int    // dump_stats lines, each checked (checkDumps)
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
	for _, c := range s.Across {
		if len(c.Problems) > 0 {
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
		hook := r.Hook
		if s.Epochs > 1 {
			hook = fmt.Sprintf("%s@%d", r.Hook, r.Epoch)
		}
		fmt.Fprintf(tw, "%s\t%d\t%d\t%s\t%d\t%d\t%d\t%s\t%d\t%d\t%s\t\n", hook, r.Device, r.Emitted, exp, r.Matched,
			r.Records, r.Dropped, r.Stages, r.Lines, r.Checked, res)
	}
	tw.Flush()
	dumps := 0
	for _, r := range s.Rows {
		dumps += r.Dumps
	}
	if dumps > 0 {
		fmt.Fprintf(w, "dump_stats lines checked: %d (at every dump: records + dropped + pending = matched, drops by stage add up, totals never decrease)\n", dumps)
	}
	for _, r := range s.Rows {
		for _, p := range r.Problems {
			fmt.Fprintf(w, "MISMATCH %s (epoch %d) device %d: %s\n", r.Hook, r.Epoch, r.Device, p)
		}
	}
	for _, p := range s.Problems {
		fmt.Fprintf(w, "MISMATCH %s\n", p)
	}
	for _, r := range s.Refused {
		fmt.Fprintf(w, "REFUSED %s\n", r)
	}
	s.PrintAcross(w)
}
