package hookgen

import (
	"strings"
	"testing"

	"github.com/expr-lang/expr/ast"
	"github.com/expr-lang/expr/builtin"

	"github.com/ncclhooks/ncclhooks/internal/config"
)

// One device whitelist (config.DeviceFuncs) for the validator and the
// translator: every function on it passes the validator and translates to
// C; every other expr-lang builtin is refused by both, the validator naming
// the whitelist.
func TestDeviceWhitelist(t *testing.T) {
	at := config.Pos{File: "p.yaml", Line: 3, Col: 9}
	args := func(n int) string { return strings.TrimSuffix(strings.Repeat("channelId, ", n), ", ") }
	names := map[string]bool{}
	for _, f := range config.DeviceFuncs {
		names[f.Name] = true
		src := f.Name + "(" + args(f.Args) + ")"
		x, err := config.CheckExpr(src, at, config.NewEnv())
		if err != nil {
			t.Errorf("%s: the validator refuses a whitelisted function: %v", src, err)
			continue
		}
		c, err := translate(x)
		if err != nil || c.code == "" {
			t.Errorf("%s: does not translate: %q, %v", src, c.code, err)
		}
		if _, ok := builtin.Index[f.Name]; !ok {
			t.Errorf("%s is whitelisted but is no expr-lang builtin", f.Name)
		}
	}
	list := make([]string, len(config.DeviceFuncs))
	for i, f := range config.DeviceFuncs {
		list[i] = f.Name
	}
	refusal := "is not supported on the device; use " + strings.Join(list, ", ")
	for _, b := range builtin.Builtins {
		if names[b.Name] {
			continue
		}
		// The first spelling the parser takes (predicate builtins need a
		// closure, some three arguments) must be refused by name.
		refused := false
		for _, src := range []string{b.Name + "(channelId)", b.Name + "([1], #)", b.Name + "([1], #, 0)"} {
			_, err := config.CheckExpr(src, at, config.NewEnv())
			if err == nil {
				t.Errorf("%s: the validator accepts a function off the whitelist", src)
				break
			}
			if strings.Contains(err.Error(), "syntax error") {
				continue
			}
			if !strings.Contains(err.Error(), "function "+b.Name+" "+refusal) {
				t.Errorf("%s: the validator says %q, want the whitelist", src, err)
			}
			refused = true
			break
		}
		if !refused {
			t.Errorf("%s: no spelling reached the validator's whitelist", b.Name)
		}
		n := &ast.BuiltinNode{Name: b.Name, Arguments: []ast.Node{&ast.IntegerNode{Value: 1}}}
		tr := &translator{names: baseNames(), funcSets: map[ast.Node]int{}, at: at}
		if c, err := tr.expr(n); err == nil || !strings.Contains(err.Error(), "function "+b.Name+" cannot run on the device") {
			t.Errorf("%s: the translator gives %q, %v; want it refused", b.Name, c.code, err)
		}
	}
}
