package config

import (
	"errors"
	"fmt"
	"math"
	"regexp"
	"strings"
	"unicode/utf8"

	"github.com/expr-lang/expr/ast"
	"github.com/expr-lang/expr/checker"
	"github.com/expr-lang/expr/file"
	"github.com/expr-lang/expr/parser"
)

// MaxExprLen bounds the source of one expression: expressions become device
// code on the hot path, so a long one is a mistake rather than a need.
const MaxExprLen = 4096

// CheckExpr parses and type-checks an expression written outside a profile
// file; start is the position of its first character. It returns an
// ErrorList on problems.
func CheckExpr(src string, start Pos, env *Env) (*Expr, error) {
	x, errs := checkExpr(src, plainMap(src, start), env, nil)
	if err := errs.Err(); err != nil {
		return nil, err
	}
	return x, nil
}

// checkExpr parses src, refuses everything the device cannot run, and
// type-checks the rest. All problems are reported with file positions.
func checkExpr(src string, m *srcMap, env *Env, confs exprConfigs) (*Expr, ErrorList) {
	c := &exprChecker{src: m, text: src, env: env, seen: map[ast.Node]bool{}, types: map[ast.Node]Type{}}
	if n := len([]rune(src)); n > MaxExprLen {
		c.errorf(0, "expression is %d characters long; at most %d: split it into lets", n, MaxExprLen)
		return nil, c.errs
	}
	if strings.TrimSpace(src) == "" {
		c.errorf(0, "empty expression")
		return nil, c.errs
	}
	// Parsing needs no variables (let names cannot be builtins'); checking
	// needs those the expression names.
	tree, err := parser.ParseWithConfig(src, NewEnv().config([]string{}, confs))
	if err != nil {
		c.exprError("syntax error: ", err)
		return nil, c.errs
	}
	c.walk(tree.Node)
	if len(c.errs) > 0 || c.broken {
		return nil, c.errs
	}
	if _, err := checker.Check(tree, env.config(identifiers(tree.Node), confs)); err != nil {
		c.exprError("", err)
		return nil, c.errs
	}
	t := c.typeOf(tree.Node)
	if len(c.errs) > 0 {
		return nil, c.errs
	}
	c.checkConstants(tree.Node, map[ast.Node]bool{})
	if len(c.errs) > 0 {
		return nil, c.errs
	}
	x := &Expr{Source: src, Pos: m.pos(0), Tree: tree.Node, Type: t, FuncPreds: c.preds, src: m}
	if v, ok := c.constant(tree.Node); ok {
		x.konst = &v
	}
	return x, nil
}

type exprChecker struct {
	src   *srcMap
	text  string // the expression
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
		if off, msg, ok := c.literalError(fe); ok {
			c.errorf(off, "%s%s", prefix, msg)
			return
		}
		c.errorf(fe.From, "%s%s", prefix, strings.TrimSpace(fe.Message))
		return
	}
	c.errorf(0, "%s%v", prefix, err)
}

// identifiers returns the names an expression tree uses.
func identifiers(node ast.Node) []string {
	seen := map[string]bool{}
	var names []string
	ast.Walk(&node, identVisitor(func(id *ast.IdentifierNode) {
		if !seen[id.Value] {
			seen[id.Value] = true
			names = append(names, id.Value)
		}
	}))
	return names
}

// literalRE matches expr-lang's message for a number literal it cannot read.
var literalRE = regexp.MustCompile(`^invalid (integer|float|hex|binary|octal) literal: strconv\.Parse\w+: parsing "([^"]*)": (.*)$`)

// literalError rewrites expr-lang's error for a literal out of range: it is
// placed at the literal's last character; the offending token starts at its
// first.
func (c *exprChecker) literalError(fe *file.Error) (int, string, bool) {
	m := literalRE.FindStringSubmatch(strings.TrimSpace(fe.Message))
	if m == nil {
		return 0, "", false
	}
	kind, lit, why := m[1], m[2], m[3]
	text := []rune(c.text)
	end := min(fe.From+1, len(text))
	off := strings.LastIndex(string(text[:end]), lit)
	if off < 0 {
		return 0, "", false
	}
	off = utf8.RuneCountInString(string(text[:end])[:off])
	if !strings.HasSuffix(why, "value out of range") {
		return off, fmt.Sprintf("invalid %s literal %s: %s", kind, lit, why), true
	}
	if kind == "float" {
		return off, fmt.Sprintf("float literal %s is out of range: floats are 64-bit, at most %g in magnitude", lit, math.MaxFloat64), true
	}
	return off, fmt.Sprintf("integer literal %s is out of range: integers are 64-bit signed, from %d to %d", lit, math.MinInt64, math.MaxInt64), true
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
