package config

import (
	"errors"
	"fmt"
	"regexp"
	"regexp/syntax"
	"slices"
	"strings"

	"github.com/expr-lang/expr/ast"
	"github.com/expr-lang/expr/checker"
	"github.com/expr-lang/expr/conf"
	"github.com/expr-lang/expr/file"
	"github.com/expr-lang/expr/parser"
)

// MaxExprLen bounds the source of one expression: expressions become device
// code on the hot path, so a long one is a mistake rather than a need.
const MaxExprLen = 4096

// Env is the typed environment an expression is checked against: the
// catalogue, the constants START and STOP, and the lets visible where the
// expression stands. Integers are checked as Go int (int64): every catalogue
// value is below 2^63, and it keeps expr-lang's types uniform (a ternary of a
// uint64 and an int literal would otherwise have no type).
type Env struct {
	vars []envVar
}

type envVar struct {
	name   string
	typ    Type   // catalogue type, or Bool/I64/F64 for a let
	why    string // non-empty: the name exists but may not be used here, because why
	broken bool   // a let whose own expression failed: expressions using it are not checked further
}

// NewEnv returns the environment of the catalogue and the constants.
func NewEnv() *Env {
	e := &Env{}
	for _, c := range Catalog {
		e.vars = append(e.vars, envVar{name: c.Name, typ: c.Type})
	}
	for _, name := range constantNames() {
		e.vars = append(e.vars, envVar{name: name, typ: I64})
	}
	return e
}

// WithLet returns a copy of e in which the let name of type t (Bool, I64 or
// F64) is usable.
func (e *Env) WithLet(name string, t Type) *Env { return e.with(envVar{name: name, typ: t}) }

// withUnusable returns a copy of e in which name is known but refused with
// the reason why, for a message better than "unknown name".
func (e *Env) withUnusable(name string, t Type, why string) *Env {
	return e.with(envVar{name: name, typ: t, why: why})
}

func (e *Env) with(v envVar) *Env {
	vars := slices.Clone(e.vars)
	if i := slices.IndexFunc(vars, func(x envVar) bool { return x.name == v.name }); i >= 0 {
		vars[i] = v
	} else {
		vars = append(vars, v)
	}
	return &Env{vars: vars}
}

func (e *Env) lookup(name string) (envVar, bool) {
	for _, v := range e.vars {
		if v.name == name {
			return v, true
		}
	}
	return envVar{}, false
}

// Type returns the type of a name usable in expressions of e.
func (e *Env) Type(name string) (Type, bool) {
	v, ok := e.lookup(name)
	return v.typ, ok && v.usable()
}

func (v envVar) usable() bool { return v.why == "" && !v.broken }

// Vars returns the expr-lang environment the checker used: every usable
// name mapped to a zero value of the Go type it was checked as (int,
// float64, bool, or string for func). Fill it with an event's values, of the
// same Go types, to evaluate an Expr.Tree with expr-lang on the host.
func (e *Env) Vars() map[string]any {
	m := make(map[string]any, len(e.vars))
	for _, v := range e.vars {
		if !v.usable() {
			continue
		}
		m[v.name] = zeroOf(v.typ)
		if c, ok := Constants[v.name]; ok {
			m[v.name] = c
		}
	}
	return m
}

func zeroOf(t Type) any {
	switch {
	case t == Bool:
		return false
	case t == Str:
		return ""
	case t.IsFloat():
		return float64(0)
	}
	return int(0)
}

// usableNames lists what an expression of e may name, for messages.
func (e *Env) usableNames() string {
	var names []string
	for _, v := range e.vars {
		if v.usable() && v.typ != Str {
			names = append(names, v.name)
		}
	}
	return strings.Join(names, ", ") + " (and func, in name predicates)"
}

func constantNames() []string {
	names := make([]string, 0, len(Constants))
	for name := range Constants {
		names = append(names, name)
	}
	// START before STOP: by value, so messages are stable.
	slices.SortFunc(names, func(a, b string) int { return Constants[a] - Constants[b] })
	return names
}

// exprType maps a catalogue or let type to the type of an expression.
func exprType(t Type) Type {
	switch {
	case t == Bool, t == Str:
		return t
	case t.IsFloat():
		return F64
	}
	return I64
}

// typeWord names an expression type in messages.
func typeWord(t Type) string {
	switch t {
	case Bool:
		return "a boolean"
	case F64:
		return "a float"
	case Str:
		return "a string"
	}
	return "an integer"
}

// CheckExpr parses and type-checks an expression written outside a profile
// file; start is the position of its first character. It returns an
// ErrorList on problems.
func CheckExpr(src string, start Pos, env *Env) (*Expr, error) {
	x, errs := checkExpr(src, plainMap(src, start), env)
	if err := errs.Err(); err != nil {
		return nil, err
	}
	return x, nil
}

// DeviceFunc is an expr-lang builtin the device implements.
type DeviceFunc struct {
	Name string
	Args int // the number of arguments it takes in a profile
}

// DeviceFuncs is the device whitelist of functions, in the order messages
// list them: the validator accepts these and no other, and hookgen
// translates each of them and refuses every other (hookgen's tests hold
// both). bitnand(a, b) is a &^ b.
var DeviceFuncs = []DeviceFunc{
	{"abs", 1}, {"min", 2}, {"max", 2},
	{"bitand", 2}, {"bitor", 2}, {"bitxor", 2}, {"bitnand", 2}, {"bitnot", 1},
	{"bitshl", 2}, {"bitshr", 2}, {"bitushr", 2},
}

// LookupDeviceFunc returns the whitelist's entry for name.
func LookupDeviceFunc(name string) (DeviceFunc, bool) {
	for _, f := range DeviceFuncs {
		if f.Name == name {
			return f, true
		}
	}
	return DeviceFunc{}, false
}

// deviceBuiltinList names the whitelist for messages.
var deviceBuiltinList = func() string {
	names := make([]string, len(DeviceFuncs))
	for i, f := range DeviceFuncs {
		names[i] = f.Name
	}
	return strings.Join(names, ", ")
}()

// deviceOperators are the expr-lang binary operators over numbers and
// booleans the device implements.
var deviceOperators = map[string]bool{
	"==": true, "!=": true, "<": true, "<=": true, ">": true, ">=": true,
	"&&": true, "and": true, "||": true, "or": true,
	"+": true, "-": true, "*": true, "/": true, "%": true,
}

// funcPredOps are the operators of name predicates.
var funcPredOps = map[string]FuncPredOp{
	"matches": FuncMatches, "startsWith": FuncStartsWith, "endsWith": FuncEndsWith,
	"contains": FuncContains, "==": FuncEquals, "in": FuncIn,
}

const funcOnlyInPreds = `func can only be used in name predicates: func matches "re", func startsWith "s", func endsWith "s", func contains "s", func == "s", func in ["a", "b"]`

// checkExpr parses src, refuses everything the device cannot run, and
// type-checks the rest. All problems are reported with file positions.
func checkExpr(src string, m *srcMap, env *Env) (*Expr, ErrorList) {
	c := &exprChecker{src: m, env: env, seen: map[ast.Node]bool{}, types: map[ast.Node]Type{}}
	if n := len([]rune(src)); n > MaxExprLen {
		c.errorf(0, "expression is %d characters long; at most %d: split it into lets", n, MaxExprLen)
		return nil, c.errs
	}
	if strings.TrimSpace(src) == "" {
		c.errorf(0, "empty expression")
		return nil, c.errs
	}
	cfg := conf.New(env.Vars())
	cfg.Optimize = false // the optimizer folds `in [...]` into maps; hookgen needs the tree as written
	tree, err := parser.ParseWithConfig(src, cfg)
	if err != nil {
		c.exprError("syntax error: ", err)
		return nil, c.errs
	}
	c.walk(tree.Node)
	if len(c.errs) > 0 || c.broken {
		return nil, c.errs
	}
	if _, err := checker.Check(tree, cfg); err != nil {
		c.exprError("", err)
		return nil, c.errs
	}
	t := c.typeOf(tree.Node)
	if len(c.errs) > 0 {
		return nil, c.errs
	}
	return &Expr{Source: src, Pos: m.pos(0), Tree: tree.Node, Type: t, FuncPreds: c.preds}, nil
}

type exprChecker struct {
	src   *srcMap
	env   *Env
	errs  ErrorList
	preds []*FuncPred
	seen  map[ast.Node]bool // nodes shared by a chained comparison are walked once
	types map[ast.Node]Type // and typed once
	// broken: the expression uses a let whose expression failed; it cannot
	// be type-checked, and its other problems are still reported.
	broken bool
}

func (c *exprChecker) errorf(off int, format string, args ...any) {
	c.errs.add(c.src.pos(off), format, args...)
}

// exprError reports an error from expr-lang's parser or checker at the
// position it names.
func (c *exprChecker) exprError(prefix string, err error) {
	var fe *file.Error
	if errors.As(err, &fe) {
		if fe.Message == "unexpected token EOF" {
			// expr-lang places the end at the last character; point past it.
			c.errorf(fe.From+1, "%sunexpected end of expression", prefix)
			return
		}
		c.errorf(fe.From, "%s%s", prefix, strings.TrimSpace(fe.Message))
		return
	}
	c.errorf(0, "%s%v", prefix, err)
}

// at returns the offset of a node's own token (an operator's, a name's).
func at(n ast.Node) int { return n.Location().From }

// start returns the offset of the leftmost token of a node's subtree; a
// ternary's own location is the token after it, useless in messages.
func start(n ast.Node) int {
	from := n.Location().From
	var kids []ast.Node
	switch n := n.(type) {
	case *ast.BinaryNode:
		kids = []ast.Node{n.Left}
	case *ast.ConditionalNode:
		kids = []ast.Node{n.Cond}
	}
	for _, k := range kids {
		if k != nil {
			from = min(from, start(k))
		}
	}
	return from
}

// walk refuses every node outside the device whitelist and collects name
// predicates. hookgen translates exactly what walk lets through.
func (c *exprChecker) walk(node ast.Node) {
	if node == nil || c.seen[node] {
		return
	}
	c.seen[node] = true
	switch n := node.(type) {
	case *ast.IntegerNode, *ast.FloatNode, *ast.BoolNode:
	case *ast.IdentifierNode:
		c.ident(n)
	case *ast.UnaryNode:
		switch n.Operator {
		case "!", "not", "-", "+":
		default:
			c.errorf(at(n), "operator %s is not supported on the device", n.Operator)
		}
		c.walk(n.Node)
	case *ast.BinaryNode:
		c.binary(n)
	case *ast.ConditionalNode:
		if n.Exp1 == n.Cond {
			// expr-lang builds a ?: b by sharing a; nested, the sharing
			// doubles per level, and every pass over the tree explodes.
			c.errorf(start(n.Cond), "the ?: shorthand is not supported; write cond ? a : b")
			return
		}
		c.walk(n.Cond)
		c.walk(n.Exp1)
		c.walk(n.Exp2)
	case *ast.BuiltinNode:
		f, ok := LookupDeviceFunc(n.Name)
		want := f.Args
		switch {
		case !ok:
			c.errorf(at(n), "function %s is not supported on the device; use %s", n.Name, deviceBuiltinList)
			return // its arguments (closures, lists) would only add noise
		case len(n.Arguments) != want && (n.Name == "min" || n.Name == "max"):
			c.errorf(at(n), "%s takes exactly 2 arguments on the device; got %d: nest calls, as in %s(a, %s(b, c))", n.Name, len(n.Arguments), n.Name, n.Name)
		case len(n.Arguments) != want:
			c.errorf(at(n), "%s takes %d argument(s); got %d", n.Name, want, len(n.Arguments))
		}
		for _, a := range n.Arguments {
			c.walk(a)
		}
	case *ast.CallNode:
		name := "this call"
		if id, ok := n.Callee.(*ast.IdentifierNode); ok {
			name = id.Value
		}
		c.errorf(at(n), "function %s is not supported on the device; use %s", name, deviceBuiltinList)
	case *ast.StringNode:
		c.errorf(at(n), `string literals are only allowed on the right of a name predicate (func startsWith "s")`)
	case *ast.ArrayNode:
		c.errorf(at(n), `lists are only allowed on the right of func in ["a", "b"]`)
	case *ast.NilNode:
		c.errorf(at(n), "nil is not supported: device values are numbers and booleans")
	case *ast.VariableDeclaratorNode:
		c.errorf(at(n), "let inside an expression is not supported: add it to the hook's let list")
	case *ast.SequenceNode:
		c.errorf(start(n.Nodes[0]), "';' sequences are not supported: write one expression")
	case *ast.MemberNode, *ast.SliceNode, *ast.ChainNode:
		c.errorf(at(n), "member and index access are not supported: device values are plain numbers")
	default:
		c.errorf(at(n), "%s is not supported on the device", describeNode(n))
	}
}

func describeNode(n ast.Node) string {
	switch n.(type) {
	case *ast.MapNode, *ast.PairNode:
		return "a map"
	case *ast.BytesNode:
		return "a bytes literal"
	case *ast.PredicateNode, *ast.PointerNode:
		return "a closure"
	}
	return "this construct"
}

func (c *exprChecker) ident(n *ast.IdentifierNode) {
	if n.Value == "func" {
		c.errorf(at(n), "%s", funcOnlyInPreds)
		return
	}
	v, ok := c.env.lookup(n.Value)
	switch {
	case !ok:
		c.errorf(at(n), "unknown name %q; known: %s", n.Value, c.env.usableNames())
	case v.broken:
		c.broken = true // the let's own error says it all
	case v.why != "":
		c.errorf(at(n), "cannot use %s here: %s", n.Value, v.why)
	}
}

func (c *exprChecker) binary(n *ast.BinaryNode) {
	_, isPredOp := funcPredOps[n.Operator]
	switch {
	case isFunc(n.Left) && isPredOp:
		c.funcPred(n, funcPredOps[n.Operator])
		return
	case isFunc(n.Left):
		msg := funcOnlyInPreds
		if n.Operator == "!=" {
			msg += `; for "not equal" write not (func == "s")`
		}
		c.errorf(at(n.Left), "%s", msg)
		if !isPattern(n.Right) { // a pattern would only repeat the error
			c.walk(n.Right)
		}
		return
	case isFunc(n.Right) && isPattern(n.Left):
		c.errorf(start(n.Left), "func goes on the left of a name predicate, as in func %s ...", n.Operator)
		return
	case n.Operator == "^" || n.Operator == "**":
		c.errorf(at(n), "exponent (%s) is not supported on the device; multiply, or use bitshl for powers of two", n.Operator)
	case isPredOp && n.Operator != "==":
		c.errorf(at(n), `operator %s only applies to the function name, as in func %s ...; compare numbers with == and ||`, n.Operator, n.Operator)
		c.walk(n.Left) // the right side is a pattern, which would only repeat the error
		return
	case !deviceOperators[n.Operator]:
		c.errorf(at(n), "operator %s is not supported on the device", n.Operator)
	}
	c.walk(n.Left)
	c.walk(n.Right)
}

func isFunc(n ast.Node) bool {
	id, ok := n.(*ast.IdentifierNode)
	return ok && id.Value == "func"
}

// isPattern reports whether n is what goes on the right of a name
// predicate: a string literal or a list.
func isPattern(n ast.Node) bool {
	switch n.(type) {
	case *ast.StringNode, *ast.ArrayNode:
		return true
	}
	return false
}

// funcPred records a name predicate: func on the left, string literals on
// the right.
func (c *exprChecker) funcPred(n *ast.BinaryNode, op FuncPredOp) {
	fp := &FuncPred{Op: op, Node: n, Pos: c.src.pos(at(n.Left))}
	if op == FuncIn {
		list, ok := n.Right.(*ast.ArrayNode)
		if !ok {
			c.errorf(start(n.Right), `func in needs a list of names: func in ["a", "b"]`)
			return
		}
		if len(list.Nodes) == 0 {
			c.errorf(at(list), `func in [] matches nothing: list at least one name`)
			return
		}
		for _, e := range list.Nodes {
			s, ok := e.(*ast.StringNode)
			if !ok {
				c.errorf(start(e), `func in needs string literals: func in ["a", "b"]`)
				return
			}
			fp.Patterns = append(fp.Patterns, s.Value)
		}
	} else {
		s, ok := n.Right.(*ast.StringNode)
		if !ok {
			c.errorf(start(n.Right), "func %s needs a string literal on its right, as in func %s %q", n.Operator, n.Operator, "AllReduce")
			return
		}
		fp.Patterns = []string{s.Value}
		if op == FuncMatches {
			re, err := regexp.Compile(s.Value)
			if err != nil {
				c.errorf(at(s), "invalid regular expression %q: %s", s.Value, regexpProblem(err))
				return
			}
			fp.re = re
		}
	}
	c.preds = append(c.preds, fp)
}

// regexpProblem is the reason a pattern does not compile, without the
// pattern repeated.
func regexpProblem(err error) string {
	var se *syntax.Error
	if errors.As(err, &se) {
		return fmt.Sprintf("%s: %q", se.Code, se.Expr)
	}
	return err.Error()
}

// typeOf infers the type of a checked node: Bool, I64 or F64. expr-lang
// leaves a ternary with branches of different types untyped and types
// min/max by their first argument; the device needs one static type, so
// those mixes are refused here.
func (c *exprChecker) typeOf(node ast.Node) Type {
	if t, ok := c.types[node]; ok {
		return t
	}
	t := c.inferType(node)
	c.types[node] = t
	return t
}

func (c *exprChecker) inferType(node ast.Node) Type {
	if fp := slices.IndexFunc(c.preds, func(p *FuncPred) bool { return p.Node == node }); fp >= 0 {
		return Bool
	}
	switch n := node.(type) {
	case *ast.IntegerNode:
		return I64
	case *ast.FloatNode:
		return F64
	case *ast.BoolNode:
		return Bool
	case *ast.IdentifierNode:
		t, _ := c.env.Type(n.Value)
		return exprType(t)
	case *ast.UnaryNode:
		if n.Operator == "!" || n.Operator == "not" {
			return Bool
		}
		return c.typeOf(n.Node)
	case *ast.BinaryNode:
		l, r := c.typeOf(n.Left), c.typeOf(n.Right)
		switch n.Operator {
		case "/":
			return F64
		case "%":
			return I64
		case "+", "-", "*":
			if l == F64 || r == F64 {
				return F64
			}
			return I64
		}
		return Bool
	case *ast.ConditionalNode:
		c.typeOf(n.Cond)
		a, b := c.typeOf(n.Exp1), c.typeOf(n.Exp2)
		if a != b {
			c.errorf(start(n.Exp2), "both branches of a conditional must have the same type; got %s and %s (write 0.0 for a float zero, or multiply by 1.0)", typeWord(a), typeWord(b))
		}
		return a
	case *ast.BuiltinNode:
		var ts []Type
		for _, a := range n.Arguments {
			ts = append(ts, c.typeOf(a))
		}
		switch n.Name {
		case "abs":
			return ts[0]
		case "min", "max":
			if ts[0] != ts[1] {
				c.errorf(at(n), "%s needs two integers or two floats; got %s and %s (multiply the integer by 1.0)", n.Name, typeWord(ts[0]), typeWord(ts[1]))
			}
			return ts[0]
		}
		return I64 // bit functions
	}
	return I64 // unreachable after walk
}
