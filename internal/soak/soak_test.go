package soak_test

import (
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/ncclhooks/ncclhooks/internal/soak"
)

func rule(metric string) soak.Rule {
	for _, r := range soak.Rules {
		if r.Metric == metric {
			return r
		}
	}
	panic(metric)
}

// series samples f every 2 s for d seconds.
func series(metric string, d int, f func(t float64) float64) *soak.Series {
	s := &soak.Series{Group: "g", Metric: metric}
	for t := 0; t <= d; t += 2 {
		s.T = append(s.T, float64(t))
		s.V = append(s.V, f(float64(t)))
	}
	return s
}

func TestSlopeOfALine(t *testing.T) {
	s := series("rss_kib", 100, func(t float64) float64 { return 3*t + 7 })
	got, err := soak.Slope(s.T, s.V)
	if err != nil || math.Abs(got-3) > 1e-9 {
		t.Fatalf("slope of 3t+7 = %v, %v; want 3", got, err)
	}
	if _, err := soak.Slope([]float64{1}, []float64{1}); !errors.Is(err, soak.ErrTooFewSamples) {
		t.Errorf("one sample: %v, want ErrTooFewSamples", err)
	}
	if _, err := soak.Slope([]float64{1, 1}, []float64{1, 2}); !errors.Is(err, soak.ErrTooFewSamples) {
		t.Errorf("two samples at one time: %v, want ErrTooFewSamples", err)
	}
}

// A leak of 2 MiB an hour after a warm-up that grew fast fails the RSS
// bound; the same warm-up followed by a flat, noisy plateau passes.
func TestRSSGrowingFailsFlatPasses(t *testing.T) {
	const d = 1800
	warm := func(t float64) float64 { return 50000 + 20000*min(t, 300)/300 } // KiB: +20 MiB in the first 5 minutes
	noise := func(t float64) float64 { return 300 * math.Sin(t/7) }          // GC's sawtooth, ±300 KiB
	grow := series("rss_kib", d, func(t float64) float64 { return warm(t) + noise(t) + 2048*t/3600 })
	flat := series("rss_kib", d, func(t float64) float64 { return warm(t) + noise(t) })

	r, err := soak.Judge(grow, rule("rss_kib"))
	if err != nil {
		t.Fatal(err)
	}
	if r.Pass || math.Abs(r.SlopeLate-2048) > 200 {
		t.Errorf("growing 2048 KiB/h: pass %v, slope after warm-up %.0f KiB/h; want FAIL near 2048", r.Pass, r.SlopeLate)
	}
	r, err = soak.Judge(flat, rule("rss_kib"))
	if err != nil {
		t.Fatal(err)
	}
	if !r.Pass || r.SlopeAll < 1024 {
		t.Errorf("flat after warm-up: pass %v (%s), slope over the whole run %.0f KiB/h (the warm-up's, above the bound); want PASS", r.Pass, r.Why, r.SlopeAll)
	}
	if r.First != warm(0)+noise(0) || r.Last != flat.V[len(flat.V)-1] || r.Max < r.Last {
		t.Errorf("first %v last %v max %v", r.First, r.Last, r.Max)
	}
}

// A count that comes and goes with the work passes, transients up and
// down included (a sample that caught 30 threads, one that caught a
// goroutine between its exit and its successor's start), and so does one
// alternating between two values, more often the higher late; one that
// gains one every few minutes fails by its level, whatever its slope.
func TestCountsByTheirLevel(t *testing.T) {
	comesAndGoes := series("threads", 1800, func(t float64) float64 {
		switch t {
		case 1700:
			return 30
		case 1000:
			return 2
		}
		return 8 + 4*float64(int(t)/2%3%2)
	})
	alternating := series("goroutines", 1800, func(t float64) float64 {
		if t > 1350 && int(t)/2%5 != 0 { // late, 12 four samples of five
			return 12
		}
		return 11 + float64(int(t)/2%2) // 11 and 12 alike, 11 every fifth late
	})
	if r, err := soak.Judge(alternating, rule("goroutines")); err != nil || !r.Pass {
		t.Errorf("goroutines 11 or 12, more often 12 late: %+v, %v; want PASS", r, err)
	}
	leak := series("fds", 1800, func(t float64) float64 { return 20 + float64(int(t)/600) })
	if r, err := soak.Judge(comesAndGoes, rule("threads")); err != nil || !r.Pass || r.Max != 30 {
		t.Errorf("threads 8 or 12 throughout, 30 and 2 once: %+v, %v; want PASS, max 30", r, err)
	}
	r, err := soak.Judge(leak, rule("fds"))
	if err != nil {
		t.Fatal(err)
	}
	if r.Pass || r.LevelQ3 != 21 || r.LevelQ4 != 22 {
		t.Errorf("an fd more every 10 minutes: pass %v, levels %v and %v; want FAIL, 21, 22", r.Pass, r.LevelQ3, r.LevelQ4)
	}
}

func TestReadGroupsByProcessAndSkipsNA(t *testing.T) {
	var b strings.Builder
	b.WriteString("t_s\texample\tpid\trss_kib\tthreads\tfds\tgoroutines\tgpu_mib\n")
	for i := range 8 {
		fmt.Fprintf(&b, "%d\tlatency\t10\t%d\t5\t9\t11\tNA\n", i, 100+i)
	}
	for i := range 8 {
		fmt.Fprintf(&b, "%d\tskew\t11\t200\t5\t9\tNA\tNA\n", 8+i)
	}
	ss, err := soak.Read(strings.NewReader(b.String()))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, s := range ss {
		got = append(got, fmt.Sprintf("%s/%s/%d", s.Group, s.Metric, len(s.V)))
	}
	want := "latency pid 10/rss_kib/8 latency pid 10/threads/8 latency pid 10/fds/8 latency pid 10/goroutines/8 skew pid 11/rss_kib/8 skew pid 11/threads/8 skew pid 11/fds/8"
	if strings.Join(got, " ") != want {
		t.Errorf("series:\n got %s\nwant %s", strings.Join(got, " "), want)
	}
	rs, err := soak.JudgeAll(ss, soak.Rules)
	if err != nil || len(rs) != 7 {
		t.Fatalf("JudgeAll: %d results, %v", len(rs), err)
	}
	if rs[0].Pass { // latency's RSS grows 3600 KiB/h
		t.Errorf("latency rss 100..107 KiB in 7 s: PASS, want FAIL")
	}
	if _, err := soak.Read(strings.NewReader("t_s\trss_kib\n1\t2\t3\n")); err == nil {
		t.Error("a line with more columns than the header: no error")
	}
	if _, err := soak.JudgeAll(ss[:1], soak.Rules); err != nil {
		t.Errorf("8 samples: %v", err)
	}
	short := []*soak.Series{{Group: "g", Metric: "fds", T: []float64{0, 1, 2, 3, 4, 5, 6}, V: []float64{1, 1, 1, 1, 1, 1, 1}}}
	if _, err := soak.JudgeAll(short, soak.Rules); !errors.Is(err, soak.ErrTooFewSamples) {
		t.Errorf("7 samples: %v, want ErrTooFewSamples (too short a soak is no PASS)", err)
	}
}

// The teardown after a slice's duration (finalize, the last dumps) raises
// RSS once; those samples, marked phase "after", are reported, not fitted:
// a flat run with a 8.5 MiB teardown passes, though a line through both
// would grow by megabytes an hour. Without the phase column they would be
// fitted, and the same samples fail; an unknown phase is an error.
func TestTeardownAfterTheDurationIsNotFitted(t *testing.T) {
	write := func(withPhase bool) string {
		var b strings.Builder
		b.WriteString("t_s\texample\tpid")
		if withPhase {
			b.WriteString("\tphase")
		}
		b.WriteString("\trss_kib\n")
		for i := 0; i <= 240; i += 2 {
			phase, rss := "run", 62944+40*math.Sin(float64(i)/5)
			if i > 220 {
				phase, rss = "after", 71444
			}
			fmt.Fprintf(&b, "%d\tlatency\t7", i)
			if withPhase {
				fmt.Fprintf(&b, "\t%s", phase)
			}
			fmt.Fprintf(&b, "\t%.0f\n", rss)
		}
		return b.String()
	}
	ss, err := soak.Read(strings.NewReader(write(true)))
	if err != nil || len(ss) != 1 {
		t.Fatalf("Read: %d series, %v", len(ss), err)
	}
	r, err := soak.Judge(ss[0], rule("rss_kib"))
	if err != nil {
		t.Fatal(err)
	}
	if !r.Pass || r.N != 111 || r.AfterN != 10 || r.AfterMax != 71444 || r.Max > 63000 {
		t.Errorf("flat run, teardown after it: pass %v (%s), %d samples judged, %d after (max %v), max %v; want PASS, 111, 10 after at 71444",
			r.Pass, r.Why, r.N, r.AfterN, r.AfterMax, r.Max)
	}
	ss, err = soak.Read(strings.NewReader(write(false)))
	if err != nil {
		t.Fatal(err)
	}
	if r, err := soak.Judge(ss[0], rule("rss_kib")); err != nil || r.Pass || !math.IsNaN(r.AfterMax) {
		t.Errorf("the same samples with no phase column: pass %v, after max %v, %v; want FAIL (the teardown fitted), NaN", r.Pass, r.AfterMax, err)
	}
	if _, err := soak.Read(strings.NewReader("t_s\tphase\trss_kib\n1\tteardown\t2\n")); err == nil || !strings.Contains(err.Error(), "samples:2: phase") {
		t.Errorf("phase teardown: %v, want an error naming the line and the column", err)
	}
}
