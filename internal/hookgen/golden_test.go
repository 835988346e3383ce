package hookgen_test

import (
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/ncclhooks/ncclhooks/internal/config"
	"github.com/ncclhooks/ncclhooks/internal/hookgen"
	"github.com/ncclhooks/ncclhooks/internal/hookgen/hooktest"
)

var update = flag.Bool("update", false, "rewrite testdata/golden from examples/*.yaml (go generate ./hookgen, make golden)")

const goldenDir = "testdata/golden"

// generatedMarker is Go's rule for a generated file's marker line
// (go help generate), which review tools use to fold generated diffs.
var generatedMarker = regexp.MustCompile(`^// Code generated .* DO NOT EDIT\.$`)

func examples(t *testing.T) []string {
	t.Helper()
	files, err := filepath.Glob("../../examples/*.yaml")
	if err != nil || len(files) == 0 {
		t.Fatalf("no example profiles (%v)", err)
	}
	return files
}

func generateFile(t *testing.T, path string) *hookgen.Module {
	t.Helper()
	p, err := config.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	m, err := hookgen.Generate(p)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// TestGolden: the source generated from each example profile is checked in
// as testdata/golden/NAME.cu, so that a change to hookgen shows in review
// as a diff of the CUDA it produces. After an intended change, run
// `make golden` (go generate ./hookgen) and commit the new files with it.
func TestGolden(t *testing.T) {
	if *update {
		if err := os.MkdirAll(goldenDir, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	want := map[string]bool{}
	for _, path := range examples(t) {
		name := strings.TrimSuffix(filepath.Base(path), ".yaml") + ".cu"
		want[name] = true
		t.Run(name, func(t *testing.T) {
			src := generateFile(t, path).Source
			golden := filepath.Join(goldenDir, name)
			if *update {
				if err := os.WriteFile(golden, []byte(src), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			old, err := os.ReadFile(golden)
			if errors.Is(err, fs.ErrNotExist) {
				t.Fatalf("%s is missing: run make golden (go generate ./hookgen) and commit it", golden)
			}
			if err != nil {
				t.Fatal(err)
			}
			if string(old) != src {
				t.Errorf("the source generated from %s differs from hookgen/%s; if the change is intended, run make golden and commit the files:\n%s",
					path, golden, lineDiff(string(old), src, "golden", "generated"))
			}
		})
	}
	entries, err := os.ReadDir(goldenDir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if want[e.Name()] {
			continue
		}
		golden := filepath.Join(goldenDir, e.Name())
		if *update {
			if err := os.Remove(golden); err != nil {
				t.Fatal(err)
			}
			continue
		}
		t.Errorf("hookgen/%s belongs to no profile in examples/: run make golden to remove it", golden)
	}
}

// Every generated source starts with Go's marker line and names its profile
// by file name alone; the marker is a // comment, which C99 accepts, so the
// cpu backend's C build still takes the source (C++ and NVRTC always did).
func TestGeneratedMarker(t *testing.T) {
	sources := map[string]string{}
	for _, path := range examples(t) {
		sources[path] = generateFile(t, path).Source
	}
	m, err := hookgen.Generate(hooktest.Profile(hooktest.Hook("h", "phase")))
	if err != nil {
		t.Fatal(err)
	}
	sources["hooktest"] = m.Source
	for path, src := range sources {
		first, _, _ := strings.Cut(src, "\n")
		if !generatedMarker.MatchString(first) {
			t.Errorf("%s: first line %q does not match %s", path, first, generatedMarker)
		}
		if path == "hooktest" {
			path = hooktest.File
		}
		if want := "from " + filepath.Base(path) + ". DO NOT EDIT."; !strings.HasSuffix(first, want) {
			t.Errorf("%s: first line %q, want it to end %q", path, first, want)
		}
	}
	if _, err := exec.LookPath("cc"); err != nil {
		t.Skip("cc not found")
	}
	dir := t.TempDir()
	for path, src := range sources {
		c := filepath.Join(dir, filepath.Base(path)+".c")
		if err := os.WriteFile(c, []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
		if out, err := exec.Command("cc", "-std=c99", "-Wall", "-Werror", "-Wno-unused-function", "-fsyntax-only", c).CombinedOutput(); err != nil {
			t.Errorf("%s as C99: %v\n%s", path, err, out)
		}
	}
}

// The source names positions relative to the top-level profile, includes
// too, so the same profile tree gives the same bytes (and so the same GPU
// compile-cache key, which is made from the source) wherever it lies and
// from whichever working directory it is loaded. Diagnostics keep the
// paths as loaded, which name files the user can open.
func TestSourceIndependentOfProfileLocation(t *testing.T) {
	files := map[string]string{
		"prof/main.yaml": "version: 1\nname: moved\ninclude: [common/base.yaml, other/outside.yaml]\nhooks:\n" +
			"  - {name: latency, when: phase == STOP, fields: [timestamp]}\n",
		"prof/common/base.yaml":   "version: 1\nname: base\nhooks:\n  - {name: base, fields: [phase]}\n",
		"prof/other/outside.yaml": "version: 1\nname: outside\nhooks:\n  - {name: outside, fields: [funcId]}\n",
	}
	write := func(root string) {
		for name, text := range files {
			p := filepath.Join(root, name)
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	tmp := t.TempDir()
	a := filepath.Join(tmp, "a")
	b := filepath.Join(tmp, "somewhere", "else", "b")
	write(a)
	write(b)
	ma := generateFile(t, filepath.Join(a, "prof", "main.yaml")) // absolute path
	t.Chdir(filepath.Join(b, "prof", "common"))
	mb := generateFile(t, filepath.Join("..", "main.yaml")) // relative, from another directory
	if ma.Source != mb.Source {
		t.Fatalf("the same profile in two places gives different sources:\n%s", lineDiff(ma.Source, mb.Source, "a", "b"))
	}
	for _, want := range []string{
		"// Code generated by ncclhooks hookgen from main.yaml. DO NOT EDIT.\n",
		`/* ======== hook "base" (common/base.yaml:4:5) ======== */`,
		`/* ======== hook "outside" (other/outside.yaml:4:5) ======== */`,
		`/* ======== hook "latency" (main.yaml:5:5) ======== */`,
		"HK_FN void hk_hook_latency(",
	} {
		if !strings.Contains(ma.Source, want) {
			t.Errorf("source lacks %q", want)
		}
	}
	if strings.Contains(ma.Source, tmp) || strings.Contains(ma.Source, "../") {
		t.Errorf("source names a path outside the profile's directory")
	}
	for m, loaded := range map[*hookgen.Module]string{
		ma: filepath.Join(a, "prof", "common", "base.yaml"),
		mb: filepath.Join("..", "common", "base.yaml"),
	} {
		for _, s := range m.Lines {
			if s.Hook == "base" && s.Pos.File != loaded {
				t.Errorf("span %+v: diagnostics should name the included file as loaded, %s", s, loaded)
			}
		}
	}
}

// lineDiff is a line diff of a and b in the unified style, with three lines
// of context and line numbers of both sides: enough to review a golden
// mismatch in the test log.
func lineDiff(a, b, aName, bName string) string {
	x, y := strings.Split(a, "\n"), strings.Split(b, "\n")
	// lcs[i][j] is the length of the longest common subsequence of x[i:] and y[j:].
	lcs := make([][]int32, len(x)+1)
	for i := range lcs {
		lcs[i] = make([]int32, len(y)+1)
	}
	for i := len(x) - 1; i >= 0; i-- {
		for j := len(y) - 1; j >= 0; j-- {
			if x[i] == y[j] {
				lcs[i][j] = lcs[i+1][j+1] + 1
			} else {
				lcs[i][j] = max(lcs[i+1][j], lcs[i][j+1])
			}
		}
	}
	type line struct {
		op   byte // ' ', '-' or '+'
		text string
		i, j int // 1-based line numbers in x and y before this line
	}
	var ls []line
	i, j := 0, 0
	for i < len(x) || j < len(y) {
		switch {
		case i < len(x) && j < len(y) && x[i] == y[j]:
			ls = append(ls, line{' ', x[i], i, j})
			i, j = i+1, j+1
		case i < len(x) && (j == len(y) || lcs[i+1][j] >= lcs[i][j+1]):
			ls = append(ls, line{'-', x[i], i, j})
			i++
		default:
			ls = append(ls, line{'+', y[j], i, j})
			j++
		}
	}
	const context = 3
	var out strings.Builder
	fmt.Fprintf(&out, "--- %s\n+++ %s\n", aName, bName)
	for k := 0; k < len(ls); {
		if ls[k].op == ' ' {
			k++
			continue
		}
		start := max(0, k-context)
		end := k // one past the hunk's last line
		for end < len(ls) {
			if ls[end].op != ' ' {
				end++
				continue
			}
			run := end
			for run < len(ls) && ls[run].op == ' ' {
				run++
			}
			if run == len(ls) || run-end > 2*context {
				end = min(len(ls), end+context)
				break
			}
			end = run
		}
		fmt.Fprintf(&out, "@@ %s line %d, %s line %d @@\n", aName, ls[start].i+1, bName, ls[start].j+1)
		for _, l := range ls[start:end] {
			fmt.Fprintf(&out, "%c%s\n", l.op, l.text)
		}
		k = end
	}
	return out.String()
}

func TestLineDiff(t *testing.T) {
	a := "1\n2\n3\n4\n5\n6\n7\n8\n9\n10\n11\n12"
	b := "1\n2\n3\n4\nfive\n6\n7\n8\n9\n10\n11\n12\n13"
	want := "--- a\n+++ b\n" +
		"@@ a line 2, b line 2 @@\n 2\n 3\n 4\n-5\n+five\n 6\n 7\n 8\n" +
		"@@ a line 10, b line 10 @@\n 10\n 11\n 12\n+13\n"
	if got := lineDiff(a, b, "a", "b"); got != want {
		t.Errorf("lineDiff:\n%s\nwant:\n%s", got, want)
	}
}
