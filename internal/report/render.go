package report

import (
	"encoding/json"
	"fmt"
	"io"
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
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(r)
	}
	var b strings.Builder
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
	io.WriteString(w, "on-device aggregates (all devices and ranks merged; histogram quantiles are bucket upper bounds)\n\n")
	a := grid{header: []string{"hook", "aggregate", "kind", "func", "channel", "count", "sum", "min", "max", "p50 <=", "p90 <=", "p99 <="}}
	for _, ag := range r.Aggregates {
		for _, row := range ag.Rows {
			sum, mn, mx := "", "", ""
			switch ag.Kind {
			case "sum", "histogram":
				sum = strconv.FormatFloat(row.Sum, 'f', -1, 64)
			case "min":
				mn = strconv.FormatFloat(row.Min, 'f', -1, 64)
			case "max":
				mx = strconv.FormatFloat(row.Max, 'f', -1, 64)
			}
			a.add(ag.Hook, ag.Name, ag.Kind, orAll(row.Func), orAll(row.Channel), strconv.FormatUint(row.Count, 10),
				sum, mn, mx, row.P50, row.P90, row.P99)
		}
	}
	return a.write(w, f)
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
	s := fmt.Sprintf("%s (%d records, %d dropped)", pct(c.Ratio), c.Records, c.Dropped)
	if !c.Final {
		s += ", no final dump: the run did not finalize"
	}
	return s
}

// Summary is the one-line verdict of a diff.
func (d *Diff) Summary() string {
	stats := joinStats(d.Stats)
	thr := strconv.FormatFloat(100*d.MaxRegress, 'f', -1, 64) + "%"
	var s string
	if d.Pass {
		s = fmt.Sprintf("PASS: no row slower by more than %s (%s) in %d compared row(s)", thr, stats, d.Compared)
	} else {
		s = fmt.Sprintf("FAIL: %d of %d compared row(s) slower by more than %s (%s)", d.Regressions, d.Compared, thr, stats)
	}
	if d.Improved > 0 {
		s += fmt.Sprintf(", %d improved", d.Improved)
	}
	if d.Skipped > 0 {
		s += fmt.Sprintf(", %d with insufficient data (< %d samples)", d.Skipped, d.MinSamples)
	}
	return s
}

// Write writes the diff in format f: a summary line, then a table.
func (d *Diff) Write(w io.Writer, f Format) error {
	if f == JSON {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(d)
	}
	var head string
	if f == Markdown {
		mark := "✅"
		if !d.Pass {
			mark = "❌"
		}
		head = fmt.Sprintf("### %s ncclhooks diff: %s\n\nbase: `%s`, new: `%s`\n\n", mark, d.Summary(),
			strings.Join(d.BaseInputs, " "), strings.Join(d.NewInputs, " "))
	} else {
		head = d.Summary() + "\n\n"
	}
	if _, err := io.WriteString(w, head); err != nil {
		return err
	}
	g := grid{header: []string{"hook", "func", "channel", "samples base/new"}}
	for _, st := range d.Stats {
		g.header = append(g.header, string(st)+" us base -> new")
	}
	g.header = append(g.header, "verdict")
	for _, r := range d.Rows {
		cells := []string{r.Hook, r.Func, channelLabel(r.Channel), fmt.Sprintf("%d/%d", r.BaseSamples, r.NewSamples)}
		for _, st := range d.Stats {
			cells = append(cells, changeText(r.Changes, st))
		}
		verdict := string(r.Verdict)
		if f == Markdown && r.Verdict == VerdictRegression {
			verdict = "**regression**"
		}
		g.add(append(cells, verdict)...)
	}
	return g.write(w, f)
}

func changeText(cs []Change, st Stat) string {
	for _, c := range cs {
		if c.Stat != st {
			continue
		}
		delta := "n/a"
		if c.Defined {
			delta = signedPct(c.Delta)
		}
		return fmt.Sprintf("%s -> %s (%s)", micros(c.Base), micros(c.New), delta)
	}
	return "-"
}
