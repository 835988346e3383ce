package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"
)

// report --html through the real plugin on the cpu backend, opened in a
// real headless Chromium: the charts are there and drawn (a histogram and a
// heat map per function, the drops over time; for an aggregate-only
// profile the on-device histograms), the page fetches nothing but itself,
// and the browser reports no console error, exception or log error.
func TestReportHTMLInABrowser(t *testing.T) {
	browser := findChromium(t)
	dir := t.TempDir()
	rec, agg := filepath.Join(dir, "rec"), filepath.Join(dir, "agg")
	if text, code := cli(t, "run", "../../examples/all-events.yaml", "--backend", "cpu", "--out", rec, "--ranks", "2", "--devices", "1", "--comms", "1", "--channels", "4", "--items", "100"); code != 0 {
		t.Fatalf("run: exit %d:\n%s", code, text)
	}
	if text, code := cli(t, "run", "../../examples/latency.yaml", "--backend", "cpu", "--out", agg, "--items", "500"); code != 0 {
		t.Fatalf("run: exit %d:\n%s", code, text)
	}
	recPage, aggPage := filepath.Join(dir, "rec.html"), filepath.Join(dir, "agg.html")
	text, code := cli(t, "report", rec, "--html", recPage)
	if code != 0 || !strings.Contains(text, "wrote "+recPage+": ") || !strings.Contains(text, "1 drops charts") {
		t.Fatalf("report --html: exit %d:\n%s", code, text)
	}
	if text, code := cli(t, "report", agg, "--html", aggPage); code != 0 {
		t.Fatalf("report --html: exit %d:\n%s", code, text)
	}
	if text, code := cli(t, "report", rec, "--html", recPage, "--by", "rank"); code != 2 || !strings.Contains(text, "leave out --by") {
		t.Errorf("--html with --by: exit %d:\n%s", code, text)
	}
	data, _ := os.ReadFile(recPage)
	for _, bad := range []string{"<script", "http://", "https://", "<link", "@import", "url("} {
		if bad == "http://" {
			// SVG's namespace is a name, not a fetch.
			if strings.Count(string(data), bad) != strings.Count(string(data), `xmlns="http://www.w3.org/2000/svg"`) {
				t.Errorf("the page names an http:// address")
			}
			continue
		}
		if strings.Contains(string(data), bad) {
			t.Errorf("the page holds %q: it must need nothing from elsewhere", bad)
		}
	}

	// The all-events page: 2 ranks x 1 communicator x 4 channels.
	got := openPage(t, browser, recPage)
	if got.histogram == 0 || got.histogram != got.heatmap || got.drops != 1 || got.undrawn != "" {
		t.Errorf("all-events page: %+v", got)
	}
	if got.cells != 8*got.heatmap {
		t.Errorf("%d heat map cells in %d heat maps, want 2 ranks x 4 channels each", got.cells, got.heatmap)
	}
	// The latency page: aggregates only, histograms from the device.
	got = openPage(t, browser, aggPage)
	if got.aggregate == 0 || got.histogram != 0 || got.drops != 1 || got.undrawn != "" {
		t.Errorf("latency page: %+v", got)
	}
}

type pageCharts struct {
	histogram, heatmap, aggregate, drops, cells int
	undrawn                                     string // charts with no size or no marks
}

// findChromium finds Debian's chromium (or Chrome), or skips.
func findChromium(t *testing.T) string {
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	t.Skip("no chromium (Debian: apt-get install chromium): the HTML report is not opened in a browser")
	return ""
}

// openPage loads path in headless Chromium and counts its charts; it fails
// t on any console error or warning, uncaught exception, browser log error
// or warning, or request for anything but the page itself.
func openPage(t *testing.T, browser, path string) pageCharts {
	t.Helper()
	res, problems := browse(t, browser, path)
	if len(problems) > 0 {
		t.Errorf("%s in chromium: %s", filepath.Base(path), strings.Join(problems, "\n"))
	}
	return res
}

func browse(t *testing.T, browser, path string) (pageCharts, []string) {
	t.Helper()
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(browser), chromedp.NoSandbox, chromedp.DisableGPU,
		chromedp.Flag("disable-quic", true), chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true), chromedp.Flag("disable-sync", true),
		chromedp.UserDataDir(t.TempDir()))
	actx, cancel := chromedp.NewExecAllocator(context.Background(), opts...)
	defer cancel()
	ctx, cancel := chromedp.NewContext(actx)
	defer cancel()
	url := "file://" + path
	var mu sync.Mutex
	var problems []string
	add := func(p string) { mu.Lock(); problems = append(problems, p); mu.Unlock() }
	messages := chromedp.Console(ctx) // subscribes now, before the page loads
	if err := chromedp.Listen(ctx, func(ev any) {
		if e, ok := ev.(*network.EventRequestWillBeSent); ok && e.Request.URL != url {
			add("request for " + e.Request.URL)
		}
	}); err != nil {
		t.Fatalf("chromium: %v", err)
	}
	if _, err := chromedp.Call(ctx, network.Enable, network.EnableParams{}); err != nil {
		t.Fatalf("chromium: Network.enable: %v", err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for m, err := range messages {
			if err != nil {
				return
			}
			switch m.Type {
			case chromedp.ConsoleError, chromedp.ConsoleWarning, chromedp.ConsoleException:
				add(m.String())
			}
		}
	}()
	type counts struct {
		Histogram, Heatmap, Aggregate, Drops, Cells int
		Undrawn                                     string
	}
	tctx, tcancel := context.WithTimeout(ctx, 90*time.Second)
	defer tcancel()
	if err := chromedp.Do(tctx, chromedp.Navigate(url), chromedp.WaitReady("body")); err != nil {
		t.Fatalf("chromium %s: %v", path, err)
	}
	res, err := chromedp.Run(tctx, chromedp.Evaluate[counts](`(() => {
		const n = s => document.querySelectorAll(s).length;
		const undrawn = [...document.querySelectorAll("svg.chart")].filter(s => {
			const r = s.getBoundingClientRect();
			return r.width < 50 || r.height < 50 || s.querySelectorAll("rect, polyline, circle").length === 0;
		}).map(s => s.getAttribute("class") + " " + (s.dataset.func || s.dataset.hook)).join("; ");
		return {Histogram: n("svg.chart.histogram"), Heatmap: n("svg.chart.heatmap"), Aggregate: n("svg.chart.aggregate"),
			Drops: n("svg.chart.drops"), Cells: n("svg.chart.heatmap rect.cell"), Undrawn: undrawn};
	})()`))
	if err != nil {
		t.Fatalf("chromium %s: %v", path, err)
	}
	// Let late messages arrive, then end the subscription.
	time.Sleep(500 * time.Millisecond)
	cancel()
	<-done
	mu.Lock()
	defer mu.Unlock()
	return pageCharts{res.Histogram, res.Heatmap, res.Aggregate, res.Drops, res.Cells, res.Undrawn}, problems
}

// The browser check sees what it is there to see: a page with a console
// error, a script error and a request for another file.
func TestBrowserCheckSeesErrors(t *testing.T) {
	browser := findChromium(t)
	page := filepath.Join(t.TempDir(), "bad.html")
	os.WriteFile(page, []byte(`<!DOCTYPE html><html><body><img src="missing.png"><script>console.error("planted"); undefinedFunction();</script></body></html>`), 0o644)
	_, problems := browse(t, browser, page)
	all := strings.Join(problems, "\n")
	for _, want := range []string{"planted", "undefinedFunction", "missing.png"} {
		if !strings.Contains(all, want) {
			t.Errorf("the check missed %q; it saw:\n%s", want, all)
		}
	}
}
