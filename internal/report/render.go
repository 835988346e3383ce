package report

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
)

// Format is an output format of the report and diff commands.
type Format int

const (
	Table Format = iota
	JSON
	Markdown
)

// micros formats nanoseconds as microseconds.
func micros(ns float64) string { return strconv.FormatFloat(ns/1e3, 'f', 2, 64) }

func channelLabel(ch int) string {
	if ch < 0 {
		return "all"
	}
	return strconv.Itoa(ch)
}

func pct(f float64) string { return strconv.FormatFloat(100*f, 'f', 2, 64) + "%" }

func signedPct(f float64) string {
	s := strconv.FormatFloat(100*f, 'f', 1, 64) + "%"
	if f >= 0 {
		s = "+" + s
	}
	return s
}

// grid collects rows and writes them as an aligned table or a markdown table.
type grid struct {
	header []string
	rows   [][]string
}

func (g *grid) add(cells ...string) { g.rows = append(g.rows, cells) }

func (g *grid) write(w io.Writer, f Format) error {
	if f == Markdown {
		esc := func(s string) string { return strings.ReplaceAll(s, "|", `\|`) }
		line := func(cells []string) string {
			out := make([]string, len(cells))
			for i, c := range cells {
				out[i] = esc(c)
			}
			return "| " + strings.Join(out, " | ") + " |\n"
		}
		var b strings.Builder
		b.WriteString(line(g.header))
		seps := make([]string, len(g.header))
		for i := range seps {
			seps[i] = "---"
		}
		b.WriteString("|" + strings.Join(seps, "|") + "|\n")
		for _, r := range g.rows {
			b.WriteString(line(r))
		}
		_, err := io.WriteString(w, b.String())
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, strings.Join(g.header, "\t"))
	for _, r := range g.rows {
		fmt.Fprintln(tw, strings.Join(r, "\t"))
	}
	return tw.Flush()
}

// Write writes the report in format f. Channel rows follow each function's
// all-channels row unless summary is set.
func (r *Report) Write(w io.Writer, f Format, summary bool) error {
	if f == JSON {
		return writeJSON(w, r)
	}
	var b strings.Builder
	for _, in := range r.Inactive {
		// First: nothing below measures these processes.
		fmt.Fprintf(&b, "INACTIVE: the plugin recorded nothing in %s: %s\n", in.Path, in.Reason)
	}
	if len(r.Inactive) > 0 {
		b.WriteString("\n")
	}
	if f == Markdown {
		fmt.Fprintf(&b, "### ncclhooks report: profile `%s`, %d file(s)\n\n", r.Profile, r.Files)
	} else {
		fmt.Fprintf(&b, "profile %s, %d file(s)\n", r.Profile, r.Files)
	}
	for _, h := range r.Hooks {
		bullet := "hook "
		if f == Markdown {
			bullet = "- hook "
		}
		if h.Drained {
			// Its records are counted, none is written.
			fmt.Fprintf(&b, "%s%s: records aggregated by the drain, none written; capture %s\n", bullet, h.Hook, captureText(h.Capture))
			continue
		}
		if h.Records == 0 && h.Capture != nil && !h.Capture.Captured() && h.Capture.Matched > 0 {
			// It reserves no position: nothing to capture or pair.
			fmt.Fprintf(&b, "%s%s: capture %s\n", bullet, h.Hook, captureText(h.Capture))
			continue
		}
		fmt.Fprintf(&b, "%s%s: %d records, %d work items, %d unpaired START, %d unpaired STOP, capture %s\n",
			bullet, h.Hook, h.Records, h.Items, h.UnpairedStarts, h.UnpairedStops, captureText(h.Capture))
		if h.Ambiguous > 0 {
			fmt.Fprintf(&b, "  %d work items paired ambiguously: concurrent communicators on one device used the same channel and workCounter; record the duration field for exact pairing on the device\n", h.Ambiguous)
		}
	}
	b.WriteString("\n")
	if _, err := io.WriteString(w, b.String()); err != nil {
		return err
	}
	g := grid{header: []string{"hook", "func", "channel", "count", "p50 us", "p90 us", "p99 us", "max us", "skew us", "skew ratio (slowest vs fastest ch)"}}
	for _, h := range r.Hooks {
		for _, fn := range h.Functions {
			skewNs, skewRatio := "-", "-"
			if fn.Skew != nil {
				skewNs = micros(fn.Skew.Ns)
				skewRatio = fmt.Sprintf("%.2fx", fn.Skew.Ratio)
				if fn.Skew.Ns > 0 {
					skewRatio += fmt.Sprintf(" (ch %d vs %d)", fn.Skew.SlowestChannel, fn.Skew.FastestChannel)
				}
			}
			g.add(append([]string{h.Hook, fn.Func, "all"}, append(distCells(fn.Dist), skewNs, skewRatio)...)...)
			if summary {
				continue
			}
			for _, c := range fn.Channels {
				g.add(append([]string{h.Hook, fn.Func, channelLabel(c.Channel)}, append(distCells(c.Dist), "", "")...)...)
			}
		}
	}
	switch {
	case len(g.rows) > 0:
		if err := g.write(w, f); err != nil {
			return err
		}
	case len(r.Aggregates) == 0:
		_, err := io.WriteString(w, "no work items: the hooks record neither START/STOP pairs (phase, timestamp, workCounter) nor duration\n")
		return err
	}
	if len(r.Aggregates) == 0 {
		return nil
	}
	if len(g.rows) > 0 {
		io.WriteString(w, "\n")
	}
	io.WriteString(w, "aggregates (on the device, or by the drain for work positions; all devices and ranks merged; histogram quantiles are bucket upper bounds)\n\n")
	a := grid{header: []string{"hook", "aggregate", "kind", "func", "channel", "count", "sum", "min", "max", "p50 <=", "p90 <=", "p99 <="}}
	for _, ag := range r.Aggregates {
		for _, row := range ag.Rows {
			sum, mn, mx := "", "", ""
			switch ag.Kind {
			case "sum", "histogram":
				sum = number(row.Sum)
			case "min":
				mn = number(row.Min)
			case "max":
				mx = number(row.Max)
			}
			a.add(ag.Hook, ag.Name, ag.Kind, orAll(row.Func), orAll(row.Channel), strconv.FormatUint(row.Count, 10),
				sum, mn, mx, string(row.P50), string(row.P90), string(row.P99))
		}
	}
	if err := a.write(w, f); err != nil {
		return err
	}
	if len(r.AggSkew) == 0 {
		return nil
	}
	io.WriteString(w, "\nchannel skew of the on-device aggregates keyed by channel (per function: the channel with the largest value, a straggler, against the smallest)\n\n")
	sk := grid{header: []string{"hook", "aggregate", "stat", "func", "channels", "slowest ch", "value", "fastest ch", "value", "skew", "ratio"}}
	for _, s := range r.AggSkew {
		ratio := "-"
		if s.Ratio > 0 {
			ratio = fmt.Sprintf("%.2fx", s.Ratio)
		}
		sk.add(s.Hook, s.Aggregate, s.Stat, s.Func, strconv.Itoa(s.Channels), s.Slowest, number(s.SlowValue),
			s.Fastest, number(s.FastValue), number(s.Skew), ratio)
	}
	return sk.write(w, f)
}

// number writes a table value: an integer exactly, anything else rounded
// to 3 decimals (a float sum, a mean).
func number(v float64) string {
	if v == float64(int64(v)) {
		return strconv.FormatInt(int64(v), 10)
	}
	return strconv.FormatFloat(v, 'f', 3, 64)
}

func orAll(key string) string {
	if key == "" {
		return "all"
	}
	return key
}

func distCells(d Dist) []string {
	return []string{strconv.Itoa(d.Count), micros(d.P50), micros(d.P90), micros(d.P99), micros(d.Max)}
}

func captureText(c *Capture) string {
	if c == nil {
		return "unknown (no dump_stats)"
	}
	var s string
	switch {
	case c.Captured():
		s = fmt.Sprintf("%s (%d records, %d dropped)", pct(c.Ratio), c.Records, c.Dropped)
	case c.Matched > 0: // 0 of 0 is no 100%
		s = fmt.Sprintf("n/a (aggregates only: %d events matched, no records)", c.Matched)
	default:
		s = "n/a (nothing matched: 0 records, 0 dropped)"
	}
	if !c.Final {
		s += ", no final dump: the run did not finalize"
	}
	return s
}

// rowLevel is the level of each change's interval.
func (d *Diff) rowLevel() float64 {
	if d.RowConfidence > 0 {
		return d.RowConfidence
	}
	return d.Confidence
}

// confidenceText says what the confidence covers.
func (d *Diff) confidenceText() string {
	if d.Comparisons <= 1 {
		return pctText(d.Confidence)
	}
	return fmt.Sprintf("%s for all %d changes together (each interval at %s)", pctText(d.Confidence), d.Comparisons, levelText(d.RowConfidence))
}

// Summary is the one-line verdict of a diff, with how many rows were
// compared and skipped, and why.
func (d *Diff) Summary() string {
	crit := fmt.Sprintf("slower by more than %s with %s confidence", pctText(d.MaxRegress), pctText(d.Confidence))
	if d.Comparisons > 1 {
		crit += fmt.Sprintf(" over all %d changes together", d.Comparisons)
	}
	stats := joinStats(d.Stats)
	var s string
	switch d.Result {
	case ResultPass:
		s = fmt.Sprintf("PASS: no row %s in %d compared row(s) (%s)", crit, d.Compared, stats)
	case ResultFail:
		s = fmt.Sprintf("FAIL: %d of %d compared row(s) %s (%s)", d.Regressions, d.Compared+d.Inconclusive, crit, stats)
	case ResultNoVerdict:
		s = fmt.Sprintf("NO VERDICT (%s): %d of %d row(s) could be %s (their intervals reach the threshold); %d compared, none slower",
			stats, d.Inconclusive, d.Inconclusive+d.Compared, crit, d.Compared)
	case ResultInsufficient:
		if d.Skipped == 0 {
			s = fmt.Sprintf("INSUFFICIENT DATA (%s): no verdict: no row to compare", stats)
		} else {
			s = fmt.Sprintf("INSUFFICIENT DATA (%s): no verdict for %d of %d row(s); %d compared, none %s", stats, d.Skipped, d.Skipped+d.Compared, d.Compared, crit)
		}
	}
	if d.Improved > 0 {
		s += fmt.Sprintf(", %d improved", d.Improved)
	}
	if d.Inconclusive > 0 && d.Result != ResultNoVerdict {
		s += fmt.Sprintf("; %d row(s) with no verdict (intervals reach the threshold)", d.Inconclusive)
	}
	if d.Detectable > 0 {
		s += "; detectable change " + detectableText(float64(d.Detectable))
	}
	if d.Skipped > 0 {
		causes := make([]string, 0, len(d.SkippedBy))
		for c := range d.SkippedBy {
			causes = append(causes, c)
		}
		slices.Sort(causes)
		parts := make([]string, len(causes))
		for i, c := range causes {
			parts[i] = fmt.Sprintf("%d %s", d.SkippedBy[c], c)
		}
		s += fmt.Sprintf("; %d skipped: %s", d.Skipped, strings.Join(parts, ", "))
	}
	if d.NotCompared > 0 {
		s += fmt.Sprintf("; %d row(s) not compared (none of the statistics asked for exists for them)", d.NotCompared)
	}
	return s
}

// detectableText is the diff's detectable change: the smallest slowdown of
// its noisiest row that these runs could tell from noise.
func detectableText(f float64) string {
	if math.IsInf(f, 1) {
		return "unbounded (a histogram bucket without an upper bound)"
	}
	return signedPct(f)
}

// runsText names one side's runs: "10 runs in DIR" when they share a
// directory, else the list.
func runsText(runs []string) string {
	if len(runs) == 1 {
		return "1 run: `" + runs[0] + "`"
	}
	dir := filepath.Dir(runs[0])
	for _, r := range runs[1:] {
		if filepath.Dir(r) != dir {
			return fmt.Sprintf("%d runs: `%s`", len(runs), strings.Join(runs, "`, `"))
		}
	}
	return fmt.Sprintf("%d runs in `%s`", len(runs), dir)
}

// Write writes the diff in format f: the summary line, the inputs, the
// threshold as read and the method, then one line per row and statistic
// (rows not compared are only counted, except in JSON).
func (d *Diff) Write(w io.Writer, f Format) error {
	if f == JSON {
		return writeJSON(w, d)
	}
	var b strings.Builder
	if f == Markdown {
		mark := map[Result]string{ResultPass: "✅", ResultFail: "❌", ResultInsufficient: "⚠️", ResultNoVerdict: "⚠️"}[d.Result]
		fmt.Fprintf(&b, "### %s ncclhooks diff: %s\n\n", mark, d.Summary())
		fmt.Fprintf(&b, "- base: %s\n- new: %s\n- threshold: %s, confidence %s\n- method: %s\n",
			runsText(d.BaseRuns), runsText(d.NewRuns), d.Threshold, d.confidenceText(), d.Method)
		for _, n := range d.Warnings {
			fmt.Fprintf(&b, "- ⚠️ warning: %s\n", n)
		}
		for _, n := range d.Notes {
			fmt.Fprintf(&b, "- note: %s\n", n)
		}
		b.WriteString("\n")
	} else {
		unquote := strings.NewReplacer("`", "")
		fmt.Fprintf(&b, "%s\n\nbase: %s\nnew: %s\nthreshold: %s, confidence %s\nmethod: %s\n",
			d.Summary(), unquote.Replace(runsText(d.BaseRuns)), unquote.Replace(runsText(d.NewRuns)), d.Threshold, d.confidenceText(), d.Method)
		for _, n := range d.Warnings {
			fmt.Fprintf(&b, "warning: %s\n", n)
		}
		for _, n := range d.Notes {
			fmt.Fprintf(&b, "note: %s\n", n)
		}
		b.WriteString("\n")
	}
	if _, err := io.WriteString(w, b.String()); err != nil {
		return err
	}
	interval := "change [" + levelText(d.rowLevel()) + " interval]"
	g := grid{header: []string{"hook", "aggregate", "func", "channel", "stat", "runs base/new", "samples/run base/new", "base", "new", interval, "verdict"}}
	for _, r := range d.Rows {
		if r.Verdict == VerdictNotCompared {
			continue // counted in the summary; listed in the JSON
		}
		agg := "-"
		if r.Aggregate != "" {
			agg = r.Aggregate + " (" + r.Kind + ")"
		}
		lead := []string{r.Hook, agg, r.Func, r.Channel}
		runs := fmt.Sprintf("%d/%d", r.BaseRuns, r.NewRuns)
		samples := fmt.Sprintf("%d/%d", r.BaseSamples, r.NewSamples)
		if len(r.Changes) == 0 {
			g.add(append(lead, "-", runs, samples, "", "", "", verdictText(r.Verdict, r.Reason, f))...)
			continue
		}
		for _, c := range r.Changes {
			g.add(append(lead, string(c.Stat), runs, samples, valueText(r, c, c.Base), valueText(r, c, c.New), changeText(c),
				verdictText(c.Verdict, c.Reason, f))...)
		}
	}
	return g.write(w, f)
}

func verdictText(v Verdict, reason string, f Format) string {
	s := string(v)
	if f == Markdown && v == VerdictRegression {
		s = "**regression**"
	}
	if reason != "" && (v == VerdictInsufficient || v == VerdictNotCompared || v == VerdictInconclusive) {
		s += " (" + reason + ")"
	}
	return s
}

// valueText formats one side's value: durations of work items in
// microseconds, skew in % of the median, aggregates in their own units,
// and a histogram quantile as its bucket.
func valueText(r DiffRow, c Change, v Value) string {
	lo, hi := float64(v.Lo), float64(v.Hi)
	plain := func(x float64) string {
		if math.IsInf(x, 0) {
			if x > 0 {
				return "+Inf"
			}
			return "-Inf"
		}
		return strconv.FormatFloat(x, 'g', 6, 64)
	}
	switch {
	case c.Bucketed:
		return "(" + plain(lo) + ", " + plain(hi) + "]"
	case c.Stat == StatSkew:
		return strconv.FormatFloat(100*lo, 'f', 1, 64) + "% of p50"
	case c.Stat == StatCount || r.Aggregate != "":
		return plain(lo)
	}
	return micros(lo) + " us"
}

// changeText formats the estimate and its interval: "+5.1% [+3.2%, +7.0%]";
// a bucketed estimate is a range.
func changeText(c Change) string {
	if !c.Defined {
		return "n/a"
	}
	p := func(x num) string {
		f := float64(x)
		switch {
		case math.IsInf(f, 1):
			return "+Inf"
		case math.IsInf(f, -1):
			return "-Inf"
		}
		return signedPct(f)
	}
	est := p(c.EstLo)
	if c.EstHi != c.EstLo {
		est += ".." + p(c.EstHi)
	}
	s := est + " [" + p(c.Lo) + ", " + p(c.Hi) + "]"
	if c.Additive {
		s += " of p50"
	}
	return s
}

// writeJSON writes v as indented JSON, the --json form of every report.
func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}
