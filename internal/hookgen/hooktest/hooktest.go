// Package hooktest builds typed profiles for tests of hookgen and its
// backends without going through YAML: expressions are parsed and checked
// by expr-lang against the catalogue, the way package config checks them,
// and can be evaluated by expr-lang's own VM on the same tree, which is the
// reference the generated C is compared with.
package hooktest

import (
	"fmt"
	"testing"

	"github.com/expr-lang/expr/ast"
	"github.com/expr-lang/expr/checker"
	"github.com/expr-lang/expr/compiler"
	"github.com/expr-lang/expr/conf"
	"github.com/expr-lang/expr/file"
	"github.com/expr-lang/expr/parser"
	"github.com/expr-lang/expr/vm"

	"github.com/ncclhooks/ncclhooks/internal/config"
)

// File is the profile file name the built values claim to come from.
const File = "test.yaml"

// Env is the typed environment of the catalogue, the constants and lets:
// integers are Go ints (expr-lang's int64 semantics), floats float64.
func Env(lets ...*config.Let) map[string]any {
	env := map[string]any{}
	for _, e := range config.Catalog {
		env[e.Name] = zero(e.Type)
	}
	for name, v := range config.Constants {
		env[name] = v
	}
	for _, l := range lets {
		env[l.Name] = zero(l.Expr.Type)
	}
	return env
}

func zero(t config.Type) any {
	switch {
	case t == config.Bool:
		return false
	case t == config.Str:
		return ""
	case t.IsFloat():
		return 0.0
	}
	return 0
}

func exprConfig(env map[string]any) *conf.Config {
	cfg := conf.CreateNew()
	cfg.WithEnv(env)
	cfg.Strict = true
	return cfg
}

// Expr parses and checks src against the catalogue and lets, without expr's
// optimizer, and records its function-name predicates.
func Expr(src string, lets ...*config.Let) (*config.Expr, error) {
	tree, err := checker.ParseCheck(src, exprConfig(Env(lets...)))
	if err != nil {
		return nil, err
	}
	e := &config.Expr{Source: src, Pos: config.Pos{File: File, Line: 1, Col: 1}, Tree: tree.Node}
	switch tree.Node.Type().Kind().String() {
	case "bool":
		e.Type = config.Bool
	case "float32", "float64":
		e.Type = config.F64
	default:
		e.Type = config.I64
	}
	var fc funcPredCollector
	ast.Walk(&e.Tree, &fc)
	e.FuncPreds = fc.preds
	return e, nil
}

// MustExpr is Expr that fails the test on error.
func MustExpr(t testing.TB, src string, lets ...*config.Let) *config.Expr {
	t.Helper()
	e, err := Expr(src, lets...)
	if err != nil {
		t.Fatalf("expression %q: %v", src, err)
	}
	return e
}

// Let checks a let expression that may use the earlier lets.
func Let(t testing.TB, name, src string, earlier ...*config.Let) *config.Let {
	t.Helper()
	return &config.Let{Name: name, Expr: MustExpr(t, src, earlier...), Pos: config.Pos{File: File, Line: 1, Col: 1}}
}

type funcPredCollector struct{ preds []*config.FuncPred }

func (c *funcPredCollector) Visit(n *ast.Node) {
	b, ok := (*n).(*ast.BinaryNode)
	if !ok {
		return
	}
	if id, ok := b.Left.(*ast.IdentifierNode); !ok || id.Value != "func" {
		return
	}
	fp := &config.FuncPred{Op: config.FuncPredOp(b.Operator), Node: b}
	switch r := b.Right.(type) {
	case *ast.StringNode:
		fp.Patterns = []string{r.Value}
	case *ast.ArrayNode:
		for _, s := range r.Nodes {
			fp.Patterns = append(fp.Patterns, s.(*ast.StringNode).Value)
		}
	}
	c.preds = append(c.preds, fp)
}

// Hook returns an enabled hook recording the named catalogue values with
// their catalogue types, in a drop_newest buffer of 4096 slots.
func Hook(name string, fields ...string) *config.Hook {
	h := &config.Hook{
		Name:    name,
		Enabled: true,
		Sample:  1,
		Buffer:  config.Buffer{Slots: 4096, Overflow: config.DropNewest, Pos: config.Pos{File: File, Line: 3, Col: 3}},
		Pos:     config.Pos{File: File, Line: 2, Col: 3},
	}
	for _, f := range fields {
		e, ok := config.Lookup(f)
		if !ok {
			panic(fmt.Sprintf("hooktest: %q is not in the catalogue", f))
		}
		h.Fields = append(h.Fields, &config.Field{Name: f, Source: f, Type: e.Type, Pos: config.Pos{File: File, Line: 4, Col: 5}})
	}
	return h
}

// Profile returns a profile of the given hooks.
func Profile(hooks ...*config.Hook) *config.Profile {
	return &config.Profile{File: File, Version: 1, Name: "test", Hooks: hooks, Pos: config.Pos{File: File, Line: 1, Col: 1}}
}

// Program compiles e's checked tree with expr-lang's compiler (no
// optimizer), for Run.
func Program(e *config.Expr, lets ...*config.Let) (*vm.Program, error) {
	tree := &parser.Tree{Node: e.Tree, Source: file.NewSource(e.Source)}
	return compiler.Compile(tree, exprConfig(Env(lets...)))
}
