package config

import (
	"errors"
	"io/fs"
	"os"
	"reflect"
	"strings"
	"testing"

	"github.com/expr-lang/expr/ast"
)

// FuzzParse: the profile parser never panics; it either returns a profile
// that keeps the schema's promises or an ErrorList of positioned problems.
func FuzzParse(f *testing.F) {
	f.Add([]byte(fullProfile))
	if data, err := os.ReadFile("../../examples/all-events.yaml"); err == nil {
		f.Add(data)
	}
	for _, s := range []string{
		"", "version: 1\n", "- a\n", "version: 1\nname: t\nhooks:\n  - name: h\n    fields: [phase]\n",
		header + "  - name: h\n    when: |\n      phase == STOP\n        && func matches \"^All\"\n    fields: [timestamp, {field: funcId, as: fn, type: u16}]\n",
		header + "  - name: h\n    let: [{name: a, expr: 'duration / 3'}, {name: b, expr: a > 2.0}]\n    fields: [a, b]\n    aggregate: [{name: x, kind: histogram, value: duration, buckets: {bounds: [1, 2]}}]\n",
		header + "  - &h {name: h, fields: [phase]}\n  - *h\n",
		"version: 1\nname: t\ninclude: [other.yaml]\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		// Includes are never read: a fuzzed include must not reach the disk.
		l := &loader{read: func(string) ([]byte, error) { return nil, fs.ErrNotExist }}
		p, err := l.load("f.yaml", data)
		if err != nil {
			checkErrorList(t, err, "f.yaml")
			return
		}
		checkProfile(t, p)
	})
}

func checkErrorList(t *testing.T, err error, file string) {
	t.Helper()
	var list ErrorList
	if !errors.As(err, &list) || len(list) == 0 {
		t.Fatalf("error %v (%T) is not a non-empty ErrorList", err, err)
	}
	for _, e := range list {
		if e.Pos.File != file || e.Pos.Line < 1 || e.Pos.Col < 1 || e.Msg == "" {
			t.Fatalf("badly positioned error: %q at %+v", e.Msg, e.Pos)
		}
	}
}

// checkProfile asserts what a valid profile promises its consumers.
func checkProfile(t *testing.T, p *Profile) {
	t.Helper()
	if len(p.Hooks) == 0 {
		t.Fatal("valid profile without hooks")
	}
	names := map[string]bool{}
	for _, h := range p.Hooks {
		if !identRE.MatchString(h.Name) || names[h.Name] {
			t.Fatalf("hook name %q invalid or repeated", h.Name)
		}
		names[h.Name] = true
		if s := h.Buffer.Slots; s < MinSlots || s > MaxSlots || s&(s-1) != 0 {
			t.Fatalf("hook %s: slots %d", h.Name, s)
		}
		if h.Sample < 1 {
			t.Fatalf("hook %s: sample %d", h.Name, h.Sample)
		}
		if len(h.Fields) == 0 && len(h.Aggregates) == 0 {
			t.Fatalf("hook %s records nothing", h.Name)
		}
		if h.When != nil {
			checkExprTree(t, h.When)
			if h.When.Type != Bool {
				t.Fatalf("hook %s: when of type %s", h.Name, h.When.Type)
			}
		}
		for _, l := range h.Lets {
			checkExprTree(t, l.Expr)
		}
		bytes := 0
		for _, f := range h.Fields {
			bytes += f.Type.Bytes()
			if f.Type.Bytes() == 0 {
				t.Fatalf("hook %s: field %s of type %q", h.Name, f.Name, f.Type)
			}
		}
		if bytes > MaxRecordBytes {
			t.Fatalf("hook %s: record of %d bytes", h.Name, bytes)
		}
		for _, a := range h.Aggregates {
			if (a.Value == nil) != (a.Kind == AggCount) {
				t.Fatalf("hook %s: aggregate %s of kind %s with value %v", h.Name, a.Name, a.Kind, a.Value)
			}
			if a.Value != nil {
				checkExprTree(t, a.Value)
			}
		}
	}
}

// deviceNodes are the node types hookgen translates.
var deviceNodes = map[reflect.Type]bool{
	reflect.TypeOf(&ast.IntegerNode{}): true, reflect.TypeOf(&ast.FloatNode{}): true,
	reflect.TypeOf(&ast.BoolNode{}): true, reflect.TypeOf(&ast.IdentifierNode{}): true,
	reflect.TypeOf(&ast.UnaryNode{}): true, reflect.TypeOf(&ast.BinaryNode{}): true,
	reflect.TypeOf(&ast.ConditionalNode{}): true, reflect.TypeOf(&ast.BuiltinNode{}): true,
}

// checkExprTree asserts that a checked tree holds only translatable nodes
// outside name predicates, that func and strings appear only inside them,
// and that the type is one of the three expression types.
func checkExprTree(t *testing.T, x *Expr) {
	t.Helper()
	if x.Type != Bool && x.Type != I64 && x.Type != F64 {
		t.Fatalf("%q: type %q", x.Source, x.Type)
	}
	preds := map[ast.Node]bool{}
	for _, fp := range x.FuncPreds {
		preds[fp.Node] = true
	}
	var walk func(n ast.Node)
	walk = func(n ast.Node) {
		if preds[n] {
			return
		}
		if !deviceNodes[reflect.TypeOf(n)] {
			t.Fatalf("%q: %T outside the device whitelist", x.Source, n)
		}
		switch n := n.(type) {
		case *ast.IdentifierNode:
			if n.Value == "func" {
				t.Fatalf("%q: func outside a name predicate", x.Source)
			}
		case *ast.UnaryNode:
			walk(n.Node)
		case *ast.BinaryNode:
			if !deviceOperators[n.Operator] {
				t.Fatalf("%q: operator %s", x.Source, n.Operator)
			}
			walk(n.Left)
			walk(n.Right)
		case *ast.ConditionalNode:
			walk(n.Cond)
			walk(n.Exp1)
			walk(n.Exp2)
		case *ast.BuiltinNode:
			if f, ok := LookupDeviceFunc(n.Name); !ok || f.Args != len(n.Arguments) {
				t.Fatalf("%q: builtin %s with %d arguments", x.Source, n.Name, len(n.Arguments))
			}
			for _, a := range n.Arguments {
				walk(a)
			}
		}
	}
	walk(x.Tree)
	for _, fp := range x.FuncPreds {
		if ast.Find(x.Tree, func(n ast.Node) bool { return n == fp.Node }) == nil {
			t.Fatalf("%q: predicate node not in the tree", x.Source)
		}
	}
}

// FuzzExpr: the expression checker never panics; what it accepts is
// translatable, and expr-lang evaluates it to a value of the type it
// reports.
func FuzzExpr(f *testing.F) {
	for _, s := range []string{
		"phase == STOP", "duration / 1000", "duration % 7", "paired ? duration : 0",
		"abs(channelId - smid) > 2 && min(1.5, 2.5) < max(us, 0.5)",
		"bitand(workCounter, 7) == bitshr(clock, 2)", "bitnot(n) + bitushr(-1, 3)",
		`func matches "^All" || func in ["a", "b"] and not (func startsWith "x")`,
		`func not contains "LL128" && func endsWith "_LL" && func == "y"`,
		"1 < channelId < 3", "if paired { 1 } else { 2 }", "channelId ^ 2", "-+-phase",
		"len([1])", "phase.x", "let a = 1; a", `"a" == func`, "(((1)))", "us ?: 1",
	} {
		f.Add(s)
	}
	env := NewEnv().WithLet("us", F64).WithLet("big", Bool).WithLet("n", I64)
	f.Fuzz(func(t *testing.T, src string) {
		x, err := CheckExpr(src, Pos{File: "e", Line: 1, Col: 1}, env)
		if err != nil {
			checkErrorList(t, err, "e")
			return
		}
		checkExprTree(t, x)
		if x.Source != src || x.Pos != (Pos{File: "e", Line: 1, Col: 1}) {
			t.Fatalf("Source %q, Pos %v", x.Source, x.Pos)
		}
		got, err := eval(t, x, env, sampleVars(env))
		if err != nil {
			if strings.Contains(err.Error(), "divide by zero") || strings.Contains(err.Error(), "negative shift") {
				return // run-time errors of expr-lang; the device defines its own result
			}
			t.Fatalf("%q: expr-lang cannot evaluate an accepted expression: %v", src, err)
		}
		if reflect.TypeOf(got) != goType(x.Type) {
			t.Fatalf("%q: expr-lang evaluates to %T, Type is %s", src, got, x.Type)
		}
	})
}
