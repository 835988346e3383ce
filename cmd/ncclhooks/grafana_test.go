package main

import (
	"encoding/json"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/prometheus/otlptranslator"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	metricspb "go.opentelemetry.io/proto/otlp/metrics/v1"

	"github.com/ncclhooks/ncclhooks/internal/sinks/otlptest"
)

// Every metric the Grafana dashboard in examples/grafana queries is one the
// plugin's Prometheus exporter writes: the profiles the dashboard names
// (latency.yaml, skew.yaml) run through the real plugin on the cpu backend
// with NCCL_HOOKS_PROM_DIR and NCCL_HOOKS_PROM_DUMP_STATS=1, and their
// textfiles, parsed by Prometheus' own parser, hold every series name the
// dashboard's expressions and variables name, with every label they group
// or filter by.
func TestGrafanaDashboardQueriesExportedMetrics(t *testing.T) {
	exprs := dashboardExprs(t)
	// The exporter's output for the dashboard's profiles.
	prom := filepath.Join(t.TempDir(), "prom")
	os.MkdirAll(prom, 0o755)
	for _, prof := range []string{"latency", "skew"} {
		env := []string{"NCCL_HOOKS_PROM_DIR=" + prom, "NCCL_HOOKS_PROM_DUMP_STATS=1"}
		if text, code := cliEnv(t, env, "run", "../../examples/"+prof+".yaml", "--backend", "cpu", "--out", filepath.Join(t.TempDir(), prof), "--items", "200"); code != 0 {
			t.Fatalf("run %s: exit %d:\n%s", prof, code, text)
		}
	}
	series := map[string]map[string]bool{} // sample name -> its labels
	files, _ := filepath.Glob(filepath.Join(prom, "*.prom"))
	if len(files) == 0 {
		t.Fatal("the runs wrote no textfiles")
	}
	for _, f := range files {
		r, err := os.Open(f)
		if err != nil {
			t.Fatal(err)
		}
		parser := expfmt.NewTextParser(model.LegacyValidation)
		fams, err := parser.TextToMetricFamilies(r)
		r.Close()
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		for name, fam := range fams {
			names := []string{name}
			if fam.GetType().String() == "HISTOGRAM" {
				names = append(names, name+"_bucket", name+"_count", name+"_sum")
			}
			for _, n := range names {
				if series[n] == nil {
					series[n] = map[string]bool{}
				}
				for _, m := range fam.Metric {
					for _, l := range m.Label {
						series[n][l.GetName()] = true
					}
				}
				if strings.HasSuffix(n, "_bucket") {
					series[n]["le"] = true
				}
			}
		}
	}

	checkDashboard(t, exprs, series)
}

// dashboardExprs are the queries of the dashboard's panels and variables.
func dashboardExprs(t *testing.T) []string {
	t.Helper()
	data, err := os.ReadFile("../../examples/grafana/ncclhooks-dashboard.json")
	if err != nil {
		t.Fatal(err)
	}
	var dash struct {
		Title  string `json:"title"`
		Panels []struct {
			ID      int    `json:"id"`
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
		Templating struct {
			List []struct {
				Name       string `json:"name"`
				Definition string `json:"definition"`
			} `json:"list"`
		} `json:"templating"`
	}
	if err := json.Unmarshal(data, &dash); err != nil {
		t.Fatalf("examples/grafana/ncclhooks-dashboard.json: %v", err)
	}
	var exprs []string
	ids := map[int]bool{}
	for _, p := range dash.Panels {
		if ids[p.ID] || len(p.Targets) == 0 {
			t.Errorf("panel %d %q: a duplicate id or no query", p.ID, p.Title)
		}
		ids[p.ID] = true
		for _, tg := range p.Targets {
			exprs = append(exprs, tg.Expr)
		}
	}
	for _, v := range dash.Templating.List {
		if v.Definition != "" {
			exprs = append(exprs, v.Definition)
		}
	}
	return exprs
}

// checkDashboard checks that every metric a query names is one of series
// (sample name -> its labels), with every label the query groups or
// filters by.
func checkDashboard(t *testing.T, exprs []string, series map[string]map[string]bool) {
	t.Helper()
	metric := regexp.MustCompile(`ncclhooks_[a-zA-Z0-9_]+`)
	labels := regexp.MustCompile(`(?:by|without) \(([^)]*)\)|([a-z_]+)=~?"`)
	queried := 0
	for _, e := range exprs {
		names := metric.FindAllString(e, -1)
		if len(names) == 0 && !strings.Contains(e, "label_values") {
			t.Errorf("query %q names no ncclhooks metric", e)
		}
		for _, n := range names {
			queried++
			ls, ok := series[n]
			if !ok {
				t.Errorf("the dashboard queries %s, which the exporter does not write (it writes %v)", n, slices.Sorted(maps.Keys(series)))
				continue
			}
			for _, m := range labels.FindAllStringSubmatch(e, -1) {
				for _, l := range strings.Split(m[1]+m[2], ",") {
					if l = strings.TrimSpace(l); l != "" && !ls[l] {
						t.Errorf("query %q: %s has no label %q (labels %v)", e, n, l, ls)
					}
				}
			}
		}
		for _, m := range regexp.MustCompile(`label_values\((ncclhooks_[a-z_]+), ([a-z_]+)\)`).FindAllStringSubmatch(e, -1) {
			if !series[m[1]][m[2]] {
				t.Errorf("variable query %q: no label %s on %s", e, m[2], m[1])
			}
		}
	}
	if queried < 10 {
		t.Errorf("%d metric references checked, want the dashboard's", queried)
	}
}

// The same dashboard reads a Prometheus fed by OTLP: the dashboard's
// profiles run through the real plugin with NCCL_HOOKS_OTLP_ENDPOINT (and
// NCCL_HOOKS_PROM_DUMP_STATS=1) to a receiver that decodes with the official
// OTLP types; every metric and data point attribute is translated to
// Prometheus names as Prometheus' OTLP receiver does (its own
// otlptranslator), under each translation strategy it offers; the
// resulting series hold every name and label the dashboard queries.
func TestGrafanaDashboardQueriesOTLPMetrics(t *testing.T) {
	exprs := dashboardExprs(t)
	rcv, err := otlptest.Start()
	if err != nil {
		t.Fatal(err)
	}
	defer rcv.Close()
	for _, prof := range []string{"latency", "skew"} {
		env := []string{"NCCL_HOOKS_OTLP_ENDPOINT=" + rcv.URL, "NCCL_HOOKS_PROM_DUMP_STATS=1"}
		if text, code := cliEnv(t, env, "run", "../../examples/"+prof+".yaml", "--backend", "cpu", "--out", filepath.Join(t.TempDir(), prof), "--items", "200"); code != 0 {
			t.Fatalf("run %s: exit %d:\n%s", prof, code, text)
		}
	}
	reqs, errs := rcv.Requests()
	if len(errs) > 0 || len(reqs) == 0 {
		t.Fatalf("%d requests, refused: %v", len(reqs), errs)
	}
	for _, strategy := range []otlptranslator.TranslationStrategyOption{otlptranslator.UnderscoreEscapingWithSuffixes,
		otlptranslator.NoUTF8EscapingWithSuffixes, otlptranslator.UnderscoreEscapingWithoutSuffixes, otlptranslator.NoTranslation} {
		t.Run(string(strategy), func(t *testing.T) {
			namer := otlptranslator.NewMetricNamer("", strategy)
			labeler := otlptranslator.LabelNamer{UTF8Allowed: !strategy.ShouldEscape()}
			series := map[string]map[string]bool{}
			add := func(name string, attrs []*commonpb.KeyValue, extra ...string) {
				if series[name] == nil {
					series[name] = map[string]bool{}
				}
				for _, a := range attrs {
					l, err := labeler.Build(a.Key)
					if err != nil {
						t.Fatal(err)
					}
					series[name][l] = true
				}
				for _, l := range extra {
					series[name][l] = true
				}
			}
			for _, q := range reqs {
				if err := otlptest.Check(q.Body); err != nil {
					t.Fatal(err)
				}
				for _, rm := range q.Body.ResourceMetrics {
					for _, sm := range rm.ScopeMetrics {
						for _, m := range sm.Metrics {
							typ := otlptranslator.MetricType(otlptranslator.MetricTypeGauge)
							switch {
							case m.GetSum() != nil:
								typ = otlptranslator.MetricTypeMonotonicCounter
							case m.GetHistogram() != nil:
								typ = otlptranslator.MetricTypeHistogram
							}
							name, err := namer.Build(otlptranslator.Metric{Name: m.Name, Unit: m.Unit, Type: typ})
							if err != nil {
								t.Fatal(err)
							}
							switch d := m.Data.(type) {
							case *metricspb.Metric_Sum:
								for _, p := range d.Sum.DataPoints {
									add(name, p.Attributes)
								}
							case *metricspb.Metric_Gauge:
								for _, p := range d.Gauge.DataPoints {
									add(name, p.Attributes)
								}
							case *metricspb.Metric_Histogram:
								for _, p := range d.Histogram.DataPoints {
									add(name+"_bucket", p.Attributes, "le")
									add(name+"_count", p.Attributes)
									add(name+"_sum", p.Attributes)
								}
							}
						}
					}
				}
			}
			checkDashboard(t, exprs, series)
		})
	}
}
