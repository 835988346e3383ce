package hookgen

import (
	"math/rand"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/ncclhooks/ncclhooks/internal/config"
	"github.com/ncclhooks/ncclhooks/internal/hookgen/hooktest"
)

// Hook functions are named after their hooks; any other name is spelt in
// hex, and a repeated name takes the hook's index.
func TestHookFuncNames(t *testing.T) {
	for name, want := range map[string]string{
		"latency":            "hk_hook_latency",
		"allreduce_trace":    "hk_hook_allreduce_trace",
		"UPPER_and_lower_09": "hk_hook_UPPER_and_lower_09",
		"buf_t":              "hk_hook_buf_t",
		"x_":                 "hk_hook_x_",
		"a-b":                "hk_hookx_612d62",
		"_x":                 "hk_hookx_5f78",
		"a__b":               "hk_hookx_615f5f62",
		"9lives":             "hk_hookx_396c69766573",
		"":                   "hk_hookx_",
		"ü":                  "hk_hookx_c3bc",
		"*/ x; /*":           "hk_hookx_2a2f20783b202f2a",
	} {
		if got := hookFunc(name); got != want {
			t.Errorf("hookFunc(%q) = %s, want %s", name, got, want)
		}
	}
	var hooks []*HookInfo
	for i, name := range []string{"h", "a-b", "h", "a_2db", "a-b", "h"} {
		hooks = append(hooks, &HookInfo{Index: i, Name: name})
	}
	got := strings.Join(hookFuncs(hooks), " ")
	if want := "hk_hook_h hk_hookx_612d62 hk_hookd2_68 hk_hook_a_2db hk_hookd4_612d62 hk_hookd5_68"; got != want {
		t.Errorf("hookFuncs = %s, want %s", got, want)
	}
}

// Whatever the names, and however often they repeat, every hook gets a C
// identifier of its own without a double underscore (which C++ reserves).
func TestHookFuncNamesCollisionFree(t *testing.T) {
	r := rand.New(rand.NewSource(14))
	alphabet := []byte("ab_-2d5fxh\x00/")
	for round := 0; round < 2000; round++ {
		var hooks []*HookInfo
		for i := 0; i < 1+r.Intn(12); i++ {
			name := make([]byte, r.Intn(6))
			for k := range name {
				name[k] = alphabet[r.Intn(len(alphabet))]
			}
			hooks = append(hooks, &HookInfo{Index: i, Name: string(name)})
		}
		seen := map[string]string{}
		for i, fn := range hookFuncs(hooks) {
			if !cIdent.MatchString(fn) || strings.Contains(fn, "__") {
				t.Fatalf("hook %q: function %q is not a plain C identifier", hooks[i].Name, fn)
			}
			if prev, ok := seen[fn]; ok {
				t.Fatalf("hooks %q and %q both get %s", prev, hooks[i].Name, fn)
			}
			seen[fn] = hooks[i].Name
		}
	}
}

// A profile whose hook names are not identifiers, or repeat, compiles, and
// the hook-function prefixes name the hook functions and nothing else.
func TestHookFuncNamesCompile(t *testing.T) {
	var hooks []*config.Hook
	for _, name := range []string{"latency", "a-b", "a_2db", "latency", "x */ int evil; /*", "_x"} {
		hooks = append(hooks, hooktest.Hook(name, "phase"))
	}
	m, err := Generate(hooktest.Profile(hooks...))
	if err != nil {
		t.Fatal(err)
	}
	fns := map[string]bool{}
	for _, fn := range hookFuncs(m.Hooks) {
		fns[fn] = true
		if n := strings.Count(m.Source, "HK_FN void "+fn+"("); n != 1 {
			t.Errorf("%s is defined %d times", fn, n)
		}
		if n := strings.Count(m.Source, "  "+fn+"(blk, ev, &dv);"); n != 1 {
			t.Errorf("the entry calls %s %d times", fn, n)
		}
	}
	for _, id := range regexp.MustCompile(`\bhk_hook(_|x|d)[A-Za-z0-9_]*`).FindAllString(m.Source, -1) {
		if !fns[id] {
			t.Errorf("%s in the source is not a hook function", id)
		}
	}
	if _, err := exec.LookPath("cc"); err != nil {
		t.Skip("cc not found")
	}
	src := filepath.Join(t.TempDir(), "hooks.c")
	if err := os.WriteFile(src, []byte(m.Source), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("cc", "-std=gnu11", "-Wall", "-Werror", "-Wno-unused-function", "-fsyntax-only", src).CombinedOutput(); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
}
