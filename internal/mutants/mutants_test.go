package mutants

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// root is the module root: go test runs in the package's directory.
const root = "../.."

// mutant is one patch's preamble.
type mutant struct {
	path  string
	fault string
	tests []testSet // one go test run each
}

type testSet struct {
	pkg   string // ./internal/rings
	run   string // -run pattern; "" runs the package's tests
	names []string
}

// testNames are the test functions a -run pattern names: ^TestA$ or
// ^(TestA|TestB)$, the only forms the patches use, so that each can be
// checked to exist.
var testNames = regexp.MustCompile(`^\^\(?((?:Test[A-Za-z0-9_]+\|?)+)\)?\$$`)

func readMutants(t *testing.T) []mutant {
	t.Helper()
	paths, err := filepath.Glob("testdata/*.patch")
	if err != nil || len(paths) == 0 {
		t.Fatalf("no patches in testdata: %v", err)
	}
	var ms []mutant
	for _, p := range paths {
		body, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		m := mutant{path: p}
		pre, _, ok := strings.Cut(string(body), "\ndiff --git ")
		if !ok {
			t.Errorf("%s: no diff", p)
			continue
		}
		for _, l := range strings.Split(pre, "\n") {
			switch {
			case strings.HasPrefix(l, "Fault: "):
				m.fault = strings.TrimPrefix(l, "Fault: ")
			case strings.HasPrefix(l, "Tests: "):
				f := strings.Fields(strings.TrimPrefix(l, "Tests: "))
				ts := testSet{pkg: f[0]}
				if len(f) > 1 {
					ts.run = f[1]
					sub := testNames.FindStringSubmatch(ts.run)
					if sub == nil || len(f) > 2 {
						t.Errorf("%s: Tests: %q: want PACKAGE [^TestA$ or ^(TestA|TestB)$]", p, l)
						continue
					}
					ts.names = strings.Split(sub[1], "|")
				}
				m.tests = append(m.tests, ts)
			}
		}
		if m.fault == "" || len(m.tests) == 0 {
			t.Errorf("%s: want a Fault: line and at least one Tests: line in the preamble", p)
		}
		ms = append(ms, m)
	}
	return ms
}

// TestMutantsApply: every mutant still applies to the tree (git apply
// --check, which changes nothing), has its fault described, and names
// packages and test functions that exist, so scripts/mutate.sh runs what
// each patch says.
func TestMutantsApply(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("no git")
	}
	for _, m := range readMutants(t) {
		abs, err := filepath.Abs(m.path)
		if err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command("git", "apply", "--check", abs)
		cmd.Dir = root
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("%s no longer applies (rewrite it against the code it mutates): %v\n%s", m.path, err, out)
		}
		for _, ts := range m.tests {
			dir := filepath.Join(root, ts.pkg)
			srcs, _ := filepath.Glob(filepath.Join(dir, "*_test.go"))
			if len(srcs) == 0 {
				t.Errorf("%s: Tests: %s has no tests", m.path, ts.pkg)
				continue
			}
			var all strings.Builder
			for _, s := range srcs {
				b, err := os.ReadFile(s)
				if err != nil {
					t.Fatal(err)
				}
				all.Write(b)
			}
			for _, n := range ts.names {
				if !strings.Contains(all.String(), "\nfunc "+n+"(t *testing.T)") {
					t.Errorf("%s: Tests: %s has no %s", m.path, ts.pkg, n)
				}
			}
		}
	}
}
