package report

// The report as one self-contained HTML page of SVG charts (report --html):
// no script, no style sheet, font or image from anywhere else, so it opens
// offline and can be attached to a CI run. Every chart is an <svg> of class
// "chart" and one of "histogram", "heatmap", "aggregate" or "drops", with a
// <title> per bar, cell and point that gives its numbers.

import (
	"cmp"
	"fmt"
	"html"
	"io"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
)

// Page collects what the HTML page draws from the work items: each item's
// duration by hook, function, rank (or device) and channel.
type Page struct {
	items map[pageKey][]uint64
}

type pageKey struct {
	hook, fn           string
	file, device, comm int
	channel            int
}

// NewPage returns an empty page; pass its Add to Read beside a Collector's.
func NewPage() *Page { return &Page{items: map[pageKey][]uint64{}} }

// Add records one work item.
func (p *Page) Add(w *WorkItem) {
	k := pageKey{w.Hook, w.FuncLabel(), w.File, w.Device, w.Comm, w.Channel}
	p.items[k] = append(p.items[k], w.Duration)
}

// PageSummary counts the charts of a page.
type PageSummary struct {
	Histograms, HeatMaps, AggCharts, DropCharts int
}

// Write writes the page of run, whose statistics are rep.
func (p *Page) Write(w io.Writer, run *Run, rep *Report) (PageSummary, error) {
	var sum PageSummary
	var b strings.Builder
	title := "ncclhooks report: " + run.Profile
	fmt.Fprintf(&b, `<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>%s</title>
<style>
body{font:14px/1.4 system-ui,sans-serif;margin:1.5em;color:#222}
h1{font-size:1.4em}h2{font-size:1.2em;margin-top:1.6em;border-bottom:1px solid #ccc}h3{font-size:1em;margin:1.2em 0 .3em}
.charts{display:flex;flex-wrap:wrap;gap:1em}figure{margin:0}figcaption{font-size:12px;color:#555;max-width:640px}
svg text{font:11px system-ui,sans-serif;fill:#333}
table{border-collapse:collapse}td,th{padding:2px 8px;border-bottom:1px solid #eee;text-align:right}th:first-child,td:first-child{text-align:left}
</style></head><body>
<h1>%s</h1>
<p>%d file(s): %s</p>
`, esc(title), esc(title), rep.Files, esc(strings.Join(run.Inputs, ", ")))
	if len(rep.Inactive) > 0 {
		fmt.Fprintf(&b, "<p><strong>INACTIVE</strong>: the plugin recorded nothing in %d file(s) (%s: %s)</p>\n",
			len(rep.Inactive), esc(rep.Inactive[0].Path), esc(rep.Inactive[0].Reason))
	}
	// Work items per hook: a histogram and a heat map per function.
	byHook := map[string]map[string]bool{}
	for k := range p.items {
		if byHook[k.hook] == nil {
			byHook[k.hook] = map[string]bool{}
		}
		byHook[k.hook][k.fn] = true
	}
	for _, h := range rep.Hooks {
		capture := "no dump_stats"
		if h.Capture != nil {
			capture = captureText(h.Capture)
		}
		fmt.Fprintf(&b, "<h2>hook %s</h2>\n<p>%d records, %d work items; capture %s</p>\n", esc(h.Hook), h.Records, h.Items, esc(capture))
		fns := slices.Sorted(maps.Keys(byHook[h.Hook]))
		for _, fn := range fns {
			fmt.Fprintf(&b, "<h3>%s</h3>\n<div class=\"charts\">\n", esc(fn))
			var all []uint64
			cells := map[[2]string][]uint64{} // (row label, channel) -> durations
			rowKeys := map[string]string{}    // row label -> sort key
			for k, ds := range p.items {
				if k.hook != h.Hook || k.fn != fn {
					continue
				}
				all = append(all, ds...)
				key, label, ok := run.RankKey(k.file, k.device)
				if !ok {
					key, label = run.DeviceKey(k.file, k.device), run.DeviceLabel(k.file, k.device)
				}
				c := [2]string{label, channelLabel(k.channel)}
				cells[c] = append(cells[c], ds...)
				rowKeys[label] = key
			}
			histogramSVG(&b, h.Hook, fn, all)
			sum.Histograms++
			heatMapSVG(&b, h.Hook, fn, cells, rowKeys)
			sum.HeatMaps++
			b.WriteString("</div>\n")
		}
	}
	// On-device histograms, merged over devices and ranks.
	for _, a := range rep.Aggregates {
		if a.Kind != "histogram" {
			continue
		}
		fmt.Fprintf(&b, "<h2>aggregate %s %s (histogram)</h2>\n<div class=\"charts\">\n", esc(a.Hook), esc(a.Name))
		for _, r := range a.Rows {
			aggHistogramSVG(&b, a, r)
			sum.AggCharts++
		}
		b.WriteString("</div>\n")
	}
	b.WriteString("<h2>drops over time</h2>\n<div class=\"charts\">\n")
	for _, hook := range run.HookNames() {
		if dropsSVG(&b, run, hook) {
			sum.DropCharts++
		}
	}
	b.WriteString("</div>\n</body></html>\n")
	_, err := io.WriteString(w, b.String())
	return sum, err
}

func esc(s string) string { return html.EscapeString(s) }

// us formats nanoseconds as microseconds for labels.
func us(ns float64) string {
	switch {
	case ns >= 1e7:
		return strconv.FormatFloat(ns/1e3, 'f', 0, 64) + " us"
	case ns >= 1e4:
		return strconv.FormatFloat(ns/1e3, 'f', 1, 64) + " us"
	}
	return strconv.FormatFloat(ns/1e3, 'f', 2, 64) + " us"
}

const (
	chartW, chartH = 560, 220
	padL, padB     = 56, 40
	padT, padR     = 14, 14
)

// histogramSVG draws the durations of one function: 40 bins, log-spaced
// where the largest is over 4 times the smallest, with p50 and p99 marked.
func histogramSVG(b *strings.Builder, hook, fn string, ds []uint64) {
	d := NewDist(ds) // sorts ds
	lo, hi := float64(max(ds[0], 1)), float64(max(ds[len(ds)-1], 1))
	const bins = 40
	logScale := hi > 4*lo
	edge := func(i int) float64 { // lower edge of bin i
		if logScale {
			return lo * math.Pow(hi/lo, float64(i)/bins)
		}
		return lo + (hi-lo)*float64(i)/bins
	}
	counts := make([]int, bins)
	for _, v := range ds {
		x := float64(max(v, 1))
		var i int
		switch {
		case hi == lo:
			i = 0
		case logScale:
			i = int(bins * math.Log(x/lo) / math.Log(hi/lo))
		default:
			i = int(bins * (x - lo) / (hi - lo))
		}
		counts[min(max(i, 0), bins-1)]++
	}
	top := slices.Max(counts)
	scale := "linear"
	if logScale {
		scale = "log"
	}
	fmt.Fprintf(b, `<figure><svg class="chart histogram" data-hook="%s" data-func="%s" width="%d" height="%d" viewBox="0 0 %d %d" role="img" xmlns="http://www.w3.org/2000/svg">
<title>%s: durations of %d work items</title>
`, esc(hook), esc(fn), chartW, chartH, chartW, chartH, esc(fn), len(ds))
	plotW, plotH := float64(chartW-padL-padR), float64(chartH-padT-padB)
	bw := plotW / bins
	for i, c := range counts {
		if c == 0 {
			continue
		}
		h := plotH * float64(c) / float64(top)
		fmt.Fprintf(b, `<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="#4c78a8"><title>%s - %s: %d</title></rect>
`, float64(padL)+float64(i)*bw, float64(padT)+plotH-h, math.Max(bw-1, 1), h, us(edge(i)), us(edge(i+1)), c)
	}
	pos := func(v float64) float64 {
		switch {
		case hi == lo:
			return float64(padL)
		case logScale:
			return float64(padL) + plotW*math.Log(math.Max(v, lo)/lo)/math.Log(hi/lo)
		}
		return float64(padL) + plotW*(v-lo)/(hi-lo)
	}
	for _, m := range []struct {
		name string
		v    float64
	}{{"p50", d.P50}, {"p99", d.P99}} {
		x, anchor, tx := pos(m.v), "start", 2.0
		if x > float64(padL)+plotW*0.75 {
			anchor, tx = "end", -2
		}
		ty := padT + 10
		if m.name == "p99" {
			ty += 12
		}
		fmt.Fprintf(b, `<line x1="%.1f" y1="%d" x2="%.1f" y2="%.1f" stroke="#e45756" stroke-dasharray="3 2"/><text x="%.1f" y="%d" text-anchor="%s">%s %s</text>
`, x, padT, x, float64(padT)+plotH, x+tx, ty, anchor, m.name, us(m.v))
	}
	axes(b, plotW, plotH, us(lo), us(hi), strconv.Itoa(top), "duration ("+scale+" scale)", "work items")
	fmt.Fprintf(b, "</svg><figcaption>%s: %d work items, p50 %s, p90 %s, p99 %s, max %s</figcaption></figure>\n",
		esc(fn), d.Count, us(d.P50), us(d.P90), us(d.P99), us(d.Max))
}

// axes draws the plot's frame, its x range and y maximum.
func axes(b *strings.Builder, plotW, plotH float64, xlo, xhi, ytop, xname, yname string) {
	x0, y0 := float64(padL), float64(padT)+plotH
	fmt.Fprintf(b, `<path d="M%.1f %d V%.1f H%.1f" fill="none" stroke="#888"/>
<text x="%.1f" y="%.1f">%s</text><text x="%.1f" y="%.1f" text-anchor="end">%s</text><text x="%.1f" y="%.1f" text-anchor="middle">%s</text>
<text x="%.1f" y="%.1f" text-anchor="end">%s</text><text x="%.1f" y="%.1f" text-anchor="end">0</text>
<text transform="translate(12 %.1f) rotate(-90)" text-anchor="middle">%s</text>
`, x0, padT, y0, x0+plotW,
		x0, y0+14, esc(xlo), x0+plotW, y0+14, esc(xhi), x0+plotW/2, y0+30, esc(xname),
		x0-4, float64(padT)+10, esc(ytop), x0-4, y0,
		float64(padT)+plotH/2, esc(yname))
}

// color maps t in [0, 1] to a light-to-dark sequential scale (yellow to
// purple, after viridis).
func color(t float64) string {
	stops := [][3]float64{{253, 231, 37}, {94, 201, 98}, {33, 145, 140}, {59, 82, 139}, {68, 1, 84}}
	t = math.Min(math.Max(t, 0), 1) * float64(len(stops)-1)
	i := min(int(t), len(stops)-2)
	f := t - float64(i)
	var c [3]int
	for j := range c {
		c[j] = int(stops[i][j] + f*(stops[i+1][j]-stops[i][j]))
	}
	return fmt.Sprintf("#%02x%02x%02x", c[0], c[1], c[2])
}

// heatMapSVG draws one function's median duration per rank (or device) and
// channel, each row's channel skew (slowest channel median - fastest) at
// its right and, with several rows, each channel's skew across the rows
// (slowest row median - fastest) at the bottom.
func heatMapSVG(b *strings.Builder, hook, fn string, cells map[[2]string][]uint64, rowKeys map[string]string) {
	var rows, cols []string
	for c := range cells {
		if !slices.Contains(rows, c[0]) {
			rows = append(rows, c[0])
		}
		if !slices.Contains(cols, c[1]) {
			cols = append(cols, c[1])
		}
	}
	slices.SortFunc(rows, func(x, y string) int { return cmp.Or(compareGroups(rowKeys[x], rowKeys[y]), cmp.Compare(x, y)) })
	slices.SortFunc(cols, func(x, y string) int {
		a, ea := strconv.Atoi(x)
		c, ec := strconv.Atoi(y)
		if ea == nil && ec == nil {
			return cmp.Compare(a, c)
		}
		return cmp.Compare(x, y)
	})
	p50 := map[[2]string]float64{}
	lo, hi := math.Inf(1), math.Inf(-1)
	for c, ds := range cells {
		v := NewDist(ds).P50
		p50[c] = v
		lo, hi = math.Min(lo, v), math.Max(hi, v)
	}
	const cell, labelW, skewW, top = 26, 200, 90, 34
	extra := 0
	if len(rows) > 1 {
		extra = cell
	}
	w := labelW + cell*len(cols) + skewW + 10
	h := top + cell*len(rows) + extra + 30
	fmt.Fprintf(b, `<figure><svg class="chart heatmap" data-hook="%s" data-func="%s" width="%d" height="%d" viewBox="0 0 %d %d" role="img" xmlns="http://www.w3.org/2000/svg">
<title>%s: median duration by rank and channel</title>
<text x="%d" y="12">channel</text><text x="%d" y="12">channel skew</text>
`, esc(hook), esc(fn), w, h, w, h, esc(fn), labelW, labelW+cell*len(cols)+6)
	for j, c := range cols {
		fmt.Fprintf(b, `<text x="%d" y="28" text-anchor="middle">%s</text>
`, labelW+cell*j+cell/2, esc(c))
	}
	frac := func(v float64) float64 {
		if hi == lo {
			return 0.5
		}
		return (v - lo) / (hi - lo)
	}
	for i, r := range rows {
		y := top + cell*i
		label := r
		if len(label) > 30 {
			label = label[:29] + "…"
		}
		fmt.Fprintf(b, `<text x="%d" y="%d" text-anchor="end"><title>%s</title>%s</text>
`, labelW-6, y+cell/2+4, esc(r), esc(label))
		rlo, rhi := math.Inf(1), math.Inf(-1)
		for j, c := range cols {
			v, ok := p50[[2]string{r, c}]
			if !ok {
				continue
			}
			rlo, rhi = math.Min(rlo, v), math.Max(rhi, v)
			fmt.Fprintf(b, `<rect class="cell" x="%d" y="%d" width="%d" height="%d" fill="%s"><title>%s, channel %s: p50 %s of %d work items</title></rect>
`, labelW+cell*j, y, cell-1, cell-1, color(frac(v)), esc(r), esc(c), us(v), len(cells[[2]string{r, c}]))
		}
		fmt.Fprintf(b, `<text class="skew" x="%d" y="%d"><title>%s: slowest channel median - fastest</title>%s</text>
`, labelW+cell*len(cols)+6, y+cell/2+4, esc(r), us(rhi-rlo))
	}
	if len(rows) > 1 {
		y := top + cell*len(rows)
		fmt.Fprintf(b, `<text x="%d" y="%d" text-anchor="end">rank skew</text>
`, labelW-6, y+cell/2+4)
		for j, c := range cols {
			clo, chi := math.Inf(1), math.Inf(-1)
			for _, r := range rows {
				if v, ok := p50[[2]string{r, c}]; ok {
					clo, chi = math.Min(clo, v), math.Max(chi, v)
				}
			}
			fmt.Fprintf(b, `<text class="skew" x="%d" y="%d" text-anchor="middle" transform="rotate(-30 %d %d)"><title>channel %s: slowest rank median - fastest: %s</title>%s</text>
`, labelW+cell*j+cell/2, y+cell/2+4, labelW+cell*j+cell/2, y+cell/2+4, esc(c), us(chi-clo), strings.TrimSuffix(us(chi-clo), " us"))
		}
	}
	fmt.Fprintf(b, `<text x="%d" y="%d" text-anchor="end">p50</text><rect x="%d" y="%d" width="12" height="12" fill="%s"/><text x="%d" y="%d">%s</text><rect x="%d" y="%d" width="12" height="12" fill="%s"/><text x="%d" y="%d">%s</text>
`, labelW-6, h-8, labelW, h-18, color(0), labelW+16, h-8, us(lo), labelW+90, h-18, color(1), labelW+106, h-8, us(hi))
	fmt.Fprintf(b, "</svg><figcaption>%s: median duration per rank (or device) and channel; at the right each row's channel skew, at the bottom each channel's skew across ranks (us)</figcaption></figure>\n", esc(fn))
}

// aggHistogramSVG draws one row of an on-device histogram from its
// buckets (log2 or the profile's bounds: one bar per bucket up to the last
// that counted anything).
func aggHistogramSVG(b *strings.Builder, a AggReport, r AggRowStat) {
	counts := make([]uint64, len(r.buckets))
	var prev uint64
	last := 0
	for i, c := range r.buckets {
		counts[i] = c - prev
		prev = c
		if counts[i] > 0 {
			last = i
		}
	}
	first := slices.IndexFunc(counts, func(c uint64) bool { return c > 0 })
	if first < 0 {
		return
	}
	counts, les := counts[first:last+1], r.les[first:last+1]
	top := slices.Max(counts)
	label := orAll(r.Func)
	if r.Channel != "" {
		label += " channel " + r.Channel
	}
	fmt.Fprintf(b, `<figure><svg class="chart aggregate" data-hook="%s" data-aggregate="%s" data-func="%s" width="%d" height="%d" viewBox="0 0 %d %d" role="img" xmlns="http://www.w3.org/2000/svg">
<title>%s %s: %s</title>
`, esc(a.Hook), esc(a.Name), esc(r.Func), chartW, chartH, chartW, chartH, esc(a.Hook), esc(a.Name), esc(label))
	plotW, plotH := float64(chartW-padL-padR), float64(chartH-padT-padB)
	bw := plotW / float64(len(counts))
	for i, c := range counts {
		h := plotH * float64(c) / float64(top)
		fmt.Fprintf(b, `<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="#72b7b2"><title>le %s: %d</title></rect>
`, float64(padL)+float64(i)*bw, float64(padT)+plotH-h, math.Max(bw-1, 1), h, esc(les[i]), c)
	}
	axes(b, plotW, plotH, "le "+les[0], "le "+les[len(les)-1], strconv.FormatUint(top, 10), "bucket (upper bound, the aggregate's unit)", "values")
	fmt.Fprintf(b, "</svg><figcaption>%s: %d values, p50 in the bucket up to %s, p99 up to %s</figcaption></figure>\n",
		esc(label), r.Count, esc(string(r.P50)), esc(string(r.P99)))
}

// dropsSVG draws a hook's cumulative drops over time, a line per process
// and device, from the dump_stats lines; false where it has none.
func dropsSVG(b *strings.Builder, run *Run, hook string) bool {
	type series struct {
		label string
		ts    []int64
		vals  []uint64
	}
	var all []*series
	idx := map[[2]int]*series{}
	t0, t1 := int64(math.MaxInt64), int64(math.MinInt64)
	var top uint64
	var matched uint64
	for _, s := range run.Stats {
		if s.Hook != hook {
			continue
		}
		k := [2]int{s.File, s.Device}
		sr := idx[k]
		if sr == nil {
			sr = &series{label: run.DeviceLabel(s.File, s.Device)}
			idx[k] = sr
			all = append(all, sr)
		}
		sr.ts = append(sr.ts, s.TimeUnixNs)
		sr.vals = append(sr.vals, s.Dropped)
		t0, t1 = min(t0, s.TimeUnixNs), max(t1, s.TimeUnixNs)
		top = max(top, s.Dropped)
		matched = max(matched, s.Matched)
	}
	if len(all) == 0 {
		return false
	}
	palette := []string{"#4c78a8", "#f58518", "#e45756", "#72b7b2", "#54a24b", "#eeca3b", "#b279a2", "#ff9da6", "#9d755d", "#bab0ac"}
	h := chartH + 16*len(all)
	fmt.Fprintf(b, `<figure><svg class="chart drops" data-hook="%s" width="%d" height="%d" viewBox="0 0 %d %d" role="img" xmlns="http://www.w3.org/2000/svg">
<title>hook %s: dropped records over time</title>
`, esc(hook), chartW, h, chartW, h, esc(hook))
	plotW, plotH := float64(chartW-padL-padR), float64(chartH-padT-padB)
	span := float64(max(t1-t0, 1))
	yTop := float64(max(top, 1))
	for i, sr := range all {
		col := palette[i%len(palette)]
		var pts []string
		for j := range sr.ts {
			x := float64(padL) + plotW*float64(sr.ts[j]-t0)/span
			y := float64(padT) + plotH - plotH*float64(sr.vals[j])/yTop
			pts = append(pts, fmt.Sprintf("%.1f,%.1f", x, y))
		}
		fmt.Fprintf(b, `<polyline fill="none" stroke="%s" stroke-width="1.5" points="%s"/>
`, col, strings.Join(pts, " "))
		for j := range sr.ts {
			x := float64(padL) + plotW*float64(sr.ts[j]-t0)/span
			y := float64(padT) + plotH - plotH*float64(sr.vals[j])/yTop
			fmt.Fprintf(b, `<circle class="point" cx="%.1f" cy="%.1f" r="2.5" fill="%s"><title>%s, %.3f s: %d dropped (cumulative)</title></circle>
`, x, y, col, esc(sr.label), float64(sr.ts[j]-t0)/1e9, sr.vals[j])
		}
		fmt.Fprintf(b, `<rect x="%d" y="%d" width="10" height="10" fill="%s"/><text x="%d" y="%d">%s</text>
`, padL, chartH+16*i-4, col, padL+14, chartH+16*i+5, esc(sr.label))
	}
	axes(b, plotW, plotH, "0 s", strconv.FormatFloat(span/1e9, 'f', 3, 64)+" s", strconv.FormatUint(top, 10), "time since the first dump", "dropped")
	caption := fmt.Sprintf("hook %s: dropped records (cumulative) at each dump, per process and device; %d at most", hook, top)
	if top == 0 {
		caption = fmt.Sprintf("hook %s: no drops in any dump (%d matched at most per device)", hook, matched)
	}
	fmt.Fprintf(b, "</svg><figcaption>%s</figcaption></figure>\n", esc(caption))
	return true
}
