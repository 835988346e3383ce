package config

import (
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/expr-lang/expr/ast"
	"github.com/expr-lang/expr/compiler"
	"github.com/expr-lang/expr/conf"
	"github.com/expr-lang/expr/file"
	"github.com/expr-lang/expr/parser"
	"github.com/expr-lang/expr/vm"
)

// sampleVars is one event: every usable name of env with a value of the Go
// type Env.Vars gives it.
func sampleVars(env *Env) map[string]any {
	vars := env.Vars()
	values := map[string]any{
		"timestamp": 1_700_000_000_123, "workCounter": 42, "funcId": 7, "channelId": 3,
		"phase": 1, "smid": 11, "clock": 1024, "globaltimer": 1_700_000_000_500, "cudaDev": 0,
		"duration": 2500, "paired": true, "func": "AllReduce_Sum_f32_RING_LL",
	}
	for name, v := range values {
		if _, ok := vars[name]; ok {
			vars[name] = v
		}
	}
	return vars
}

// eval runs a checked tree with expr-lang itself, as hookgen's differential
// tests do.
func eval(t testing.TB, x *Expr, env *Env, vars map[string]any) (any, error) {
	t.Helper()
	cfg := conf.New(env.Vars())
	cfg.Optimize = false
	prog, err := compiler.Compile(&parser.Tree{Node: x.Tree, Source: file.NewSource(x.Source)}, cfg)
	if err != nil {
		t.Fatalf("compile %q: %v", x.Source, err)
	}
	return vm.Run(prog, vars)
}

// goType is the Go type expr-lang produces for a value of type t.
func goType(t Type) reflect.Type {
	switch t {
	case Bool:
		return reflect.TypeOf(false)
	case F64:
		return reflect.TypeOf(0.0)
	}
	return reflect.TypeOf(0)
}

func TestCheckExprAccepts(t *testing.T) {
	env := NewEnv().WithLet("us", F64).WithLet("big", Bool).WithLet("n", I64)
	tests := []struct {
		src   string
		typ   Type
		want  any // the value for sampleVars
		preds []FuncPredOp
	}{
		{"42", I64, 42, nil},
		{"2.5", F64, 2.5, nil},
		{"true", Bool, true, nil},
		{"phase == STOP", Bool, true, nil},
		{"phase != START and channelId < 4", Bool, true, nil},
		{"!paired || not big", Bool, true, nil},
		{"-channelId + +smid", I64, 8, nil},
		{"duration / 1000", F64, 2.5, nil},
		{"duration % 1000", I64, 500, nil},
		{"duration * 2 - 1", I64, 4999, nil},
		{"us * 2", F64, 0.0, nil},
		{"n + 1", I64, 1, nil},
		{"paired ? duration : 0", I64, 2500, nil},
		{"if paired { 1.5 } else { 0.5 }", F64, 1.5, nil},
		{"1 < channelId <= 3", Bool, true, nil},
		{"abs(channelId - smid)", I64, 8, nil},
		{"abs(-2.5)", F64, 2.5, nil},
		{"min(smid, channelId) + max(smid, channelId)", I64, 14, nil},
		{"min(2.5, 1.5)", F64, 1.5, nil},
		{"bitand(workCounter, 7) + bitor(1, 2) + bitxor(3, 1)", I64, 2 + 3 + 2, nil},
		{"bitnot(0)", I64, -1, nil},
		{"bitshl(1, 4) + bitshr(clock, 4) + bitushr(-1, 60)", I64, 16 + 64 + 15, nil},
		{`func matches "^AllReduce_.*_RING"`, Bool, true, []FuncPredOp{FuncMatches}},
		{`func startsWith "AllGather" || func endsWith "_LL"`, Bool, true, []FuncPredOp{FuncStartsWith, FuncEndsWith}},
		{`func contains "Sum" && func == "AllReduce_Sum_f32_RING_LL"`, Bool, true, []FuncPredOp{FuncContains, FuncEquals}},
		{`func in ["Broadcast_RING", "AllReduce_Sum_f32_RING_LL"]`, Bool, true, []FuncPredOp{FuncIn}},
		{`func not in ["Broadcast_RING"] and phase == STOP`, Bool, true, []FuncPredOp{FuncIn}},
		{`!(func startsWith "All")`, Bool, false, []FuncPredOp{FuncStartsWith}},
	}
	for _, tt := range tests {
		t.Run(tt.src, func(t *testing.T) {
			x, err := CheckExpr(tt.src, Pos{File: "x", Line: 1, Col: 1}, env)
			if err != nil {
				t.Fatal(err)
			}
			if x.Type != tt.typ {
				t.Errorf("Type = %s, want %s", x.Type, tt.typ)
			}
			var ops []FuncPredOp
			for _, fp := range x.FuncPreds {
				ops = append(ops, fp.Op)
				if ast.Find(x.Tree, func(n ast.Node) bool { return n == fp.Node }) == nil {
					t.Errorf("predicate %s %q: its node is not in the tree", fp.Op, fp.Patterns)
				}
				if got := fp.Match("AllReduce_Sum_f32_RING_LL"); got != evalPred(t, fp) {
					t.Errorf("predicate %s %q: Match = %v, expr-lang says %v", fp.Op, fp.Patterns, got, !got)
				}
			}
			if !reflect.DeepEqual(ops, tt.preds) {
				t.Errorf("FuncPreds = %v, want %v", ops, tt.preds)
			}
			got, err := eval(t, x, env, sampleVars(env))
			if err != nil {
				t.Fatal(err)
			}
			if reflect.TypeOf(got) != goType(x.Type) {
				t.Errorf("expr-lang evaluates to %T, but Type is %s", got, x.Type)
			}
			if got != tt.want {
				t.Errorf("value = %v, want %v", got, tt.want)
			}
		})
	}
}

// evalPred evaluates the predicate's node with expr-lang for the sample
// function name.
func evalPred(t *testing.T, fp *FuncPred) bool {
	env := NewEnv()
	v, err := eval(t, &Expr{Tree: fp.Node}, env, sampleVars(env))
	if err != nil {
		t.Fatal(err)
	}
	return v.(bool)
}

func TestCheckExprRefuses(t *testing.T) {
	env := NewEnv().WithLet("us", F64)
	tests := []struct{ src, want string }{
		{"channelId ** 2", "1:11: exponent (**) is not supported on the device; multiply, or use bitshl for powers of two"},
		{"func", "1:1: " + funcOnlyInPreds},
		{`func != "x"`, "1:1: " + funcOnlyInPreds + `; for "not equal" write not (func == "s")`},
		{`"AllReduce" == func`, "1:1: func goes on the left of a name predicate, as in func == ..."},
		{`"x" + 1`, `1:1: string literals are only allowed on the right of a name predicate (func startsWith "s")`},
		{`func startsWith phase`, `1:17: func startsWith needs a string literal on its right, as in func startsWith "AllReduce"`},
		{`func in "AllReduce"`, `1:9: func in needs a list of names: func in ["a", "b"]`},
		{`func in []`, "1:9: func in [] matches nothing: list at least one name"},
		{`func in ["a", 1]`, `1:15: func in needs string literals: func in ["a", "b"]`},
		{`func matches "[a-"`, `1:14: invalid regular expression "[a-": missing closing ]: "[a-"`},
		{`phase contains "x"`, "1:7: operator contains only applies to the function name, as in func contains ...; compare numbers with == and ||"},
		{"nil", "1:1: nil is not supported: device values are numbers and booleans"},
		{"[1, 2]", `1:1: lists are only allowed on the right of func in ["a", "b"]`},
		{"{a: 1}", "1:1: a map is not supported on the device"},
		{"let x = 1; x", "1:5: let inside an expression is not supported: add it to the hook's let list"},
		{"phase; smid", "1:1: ';' sequences are not supported: write one expression"},
		{"phase.x", "1:7: member and index access are not supported: device values are plain numbers"},
		{"foo(1)", "1:1: function foo is not supported on the device; use " + deviceBuiltinList},
		{"round(us)", "1:1: function round is not supported on the device; use " + deviceBuiltinList},
		{"min(smid)", "1:1: min takes exactly 2 arguments on the device; got 1: nest calls, as in min(a, min(b, c))"},
		{"abs(1, 2)", "1:1: abs takes 1 argument(s); got 2"},
		{"bitand(us, 1)", "1:8: cannot use float64 as argument (type int) to call bitand"},
		{"us % 2", "1:4: invalid operation: % (mismatched types float64 and int)"},
		{"min(us, 1)", "1:1: min needs two integers or two floats; got a float and an integer (multiply the integer by 1.0)"},
		{"paired ? 1 : true", "1:14: both branches of a conditional must have the same type; got an integer and a boolean (write 0.0 for a float zero, or multiply by 1.0)"},
		{"paired ?: false", "1:1: the ?: shorthand is not supported; write cond ? a : b"},
		{strings.Repeat("paired ?: ", 200) + "true", "1:1: the ?: shorthand is not supported; write cond ? a : b"},
		{"phase ?? 1", "1:7: operator ?? is not supported on the device"},
		{"1..3", "1:2: operator .. is not supported on the device"},
		{"phase == (1", "1:12: syntax error: unexpected end of expression"},
		{"", "1:1: empty expression"},
		{"undefined_thing > 1 && other < 2", `1:1: unknown name "undefined_thing"; known: ` + knownNames + ", us (and func, in name predicates)\n" +
			`1:24: unknown name "other"; known: ` + knownNames + ", us (and func, in name predicates)"},
		{strings.Repeat("1+", MaxExprLen/2) + "1", fmt.Sprintf("1:1: expression is %d characters long; at most %d: split it into lets", MaxExprLen+1, MaxExprLen)},
	}
	for _, tt := range tests {
		t.Run(tt.src, func(t *testing.T) {
			_, err := CheckExpr(tt.src, Pos{File: "x", Line: 1, Col: 1}, env)
			var list ErrorList
			if !errors.As(err, &list) {
				t.Fatalf("CheckExpr(%q) = %v, want an ErrorList", tt.src, err)
			}
			if got := strings.ReplaceAll(err.Error(), "x:", ""); got != tt.want {
				t.Errorf("got  %s\nwant %s", got, tt.want)
			}
		})
	}
}

// TestCheckExprStart: positions are relative to where the expression starts.
func TestCheckExprStart(t *testing.T) {
	_, err := CheckExpr("phase ==\n  nope", Pos{File: "f.yaml", Line: 7, Col: 12}, NewEnv())
	if err == nil || !strings.HasPrefix(err.Error(), `f.yaml:8:3: unknown name "nope"`) {
		t.Errorf("error = %v, want it at f.yaml:8:3", err)
	}
}

// TestExprPositions checks, for every YAML scalar style, that an error
// inside an expression lands where the offending word is in the file.
func TestExprPositions(t *testing.T) {
	tests := []struct{ name, hook string }{
		{"plain", "    when: phase == STOP && nope\n"},
		{"plain with comment", "    when: phase == STOP && nope # stops only\n"},
		{"plain over two lines", "    when: phase == STOP\n      && nope\n"},
		{"single-quoted", "    when: 'phase == STOP && nope'\n"},
		{"single-quoted with escaped quote", "    when: 'func == ''x'' &&   nope'\n"},
		{"double-quoted with escapes", "    when: \"func == \\\"a\\tb\\u00e9\\\" && nope\"\n"},
		{"literal block", "    when: |\n      phase == STOP\n        && nope\n"},
		{"literal block with blank line", "    when: |\n      phase == STOP\n\n      && nope\n"},
		{"folded block", "    when: >-\n      phase == STOP\n      && nope\n"},
		{"non-ASCII before", "    when: 'func == \"Tür\" && nope'\n"},
		{"flow mapping in let", "    let: [{name: x, expr: \"1 + nope\"}]\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			src := header + "  - name: h\n" + tt.hook + "    fields: [phase]\n"
			want := Pos{File: "p.yaml"}
			for i, line := range strings.Split(src, "\n") {
				if j := strings.Index(line, "nope"); j >= 0 {
					want.Line, want.Col = i+1, utf8.RuneCountInString(line[:j])+1
				}
			}
			_, err := Parse("p.yaml", []byte(src))
			var list ErrorList
			if !errors.As(err, &list) || len(list) != 1 {
				t.Fatalf("Parse error = %v, want one error", err)
			}
			if list[0].Pos != want || !strings.HasPrefix(list[0].Msg, `unknown name "nope"`) {
				t.Errorf("got %v, want it at %v", list[0], want)
			}
		})
	}
}

// TestBlockScalarExprPos: a block scalar's expression starts on the line
// after the | indicator, at the block's indentation.
func TestBlockScalarExprPos(t *testing.T) {
	src := header + "  - name: h\n    when: |\n        phase == STOP\n    fields: [phase]\n"
	p, err := Parse("p.yaml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	if got, want := p.Hooks[0].When.Pos, (Pos{File: "p.yaml", Line: 6, Col: 9}); got != want {
		t.Errorf("When.Pos = %v, want %v", got, want)
	}
}

func TestFuncPredMatch(t *testing.T) {
	const name = "AllReduce_Sum_f32_RING_LL"
	tests := []struct {
		fp   FuncPred
		want bool
	}{
		{FuncPred{Op: FuncMatches, Patterns: []string{"^AllReduce_.*_LL$"}}, true},
		{FuncPred{Op: FuncMatches, Patterns: []string{"Sum_f(16|32)"}}, true},
		{FuncPred{Op: FuncMatches, Patterns: []string{"^Sum"}}, false},
		{FuncPred{Op: FuncMatches, Patterns: []string{"(unclosed"}}, false},
		{FuncPred{Op: FuncStartsWith, Patterns: []string{"AllReduce"}}, true},
		{FuncPred{Op: FuncStartsWith, Patterns: []string{"AllGather"}}, false},
		{FuncPred{Op: FuncEndsWith, Patterns: []string{"RING_LL"}}, true},
		{FuncPred{Op: FuncEndsWith, Patterns: []string{"LL128"}}, false},
		{FuncPred{Op: FuncContains, Patterns: []string{"_f32_"}}, true},
		{FuncPred{Op: FuncContains, Patterns: []string{"bf16"}}, false},
		{FuncPred{Op: FuncEquals, Patterns: []string{name}}, true},
		{FuncPred{Op: FuncEquals, Patterns: []string{"AllReduce"}}, false},
		{FuncPred{Op: FuncIn, Patterns: []string{"Broadcast_RING", name}}, true},
		{FuncPred{Op: FuncIn, Patterns: []string{"Broadcast_RING"}}, false},
	}
	for _, tt := range tests {
		if got := tt.fp.Match(name); got != tt.want {
			t.Errorf("%s %q: Match(%q) = %v, want %v", tt.fp.Op, tt.fp.Patterns, name, got, tt.want)
		}
	}
}

// TestFuncPredRegexpCompiledOnce: validation compiles the pattern, so Match
// uses it rather than compiling per call.
func TestFuncPredRegexpCompiledOnce(t *testing.T) {
	x, err := CheckExpr(`func matches "^Send"`, Pos{Line: 1, Col: 1}, NewEnv())
	if err != nil {
		t.Fatal(err)
	}
	fp := x.FuncPreds[0]
	if fp.re == nil || fp.re.String() != "^Send" {
		t.Fatalf("regexp not compiled at validation: %v", fp.re)
	}
	if !fp.Match("SendRecv") || fp.Match("Recv") {
		t.Error("compiled predicate matches wrongly")
	}
}
