package hookgen

import (
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/expr-lang/expr/ast"

	"github.com/ncclhooks/ncclhooks/internal/config"
)

// kind is the C representation of an expression value. expr-lang has three
// value kinds on the device: int (Go's int64), float64 and bool.
type kind int

const (
	kindInt   kind = iota // hk_i64
	kindFloat             // double
	kindBool              // int, 0 or 1
)

func (k kind) String() string {
	switch k {
	case kindInt:
		return "int"
	case kindFloat:
		return "float"
	}
	return "bool"
}

// cType is the C type a value of this kind is held in.
func (k kind) cType() string {
	switch k {
	case kindInt:
		return "hk_i64"
	case kindFloat:
		return "double"
	}
	return "int"
}

// cexpr is a translated expression: fully parenthesised C and its kind.
type cexpr struct {
	code string
	kind kind
}

// translator turns checked expr-lang trees into C. Every node type it
// accepts is listed in expr; anything else is an error (the config
// validator refuses those first, with the profile position).
type translator struct {
	// names maps identifiers (catalogue values, lets, constants) to C.
	names map[string]cexpr
	// funcSets maps the nodes replaced by function-name predicates to their
	// set index in the context block.
	funcSets map[ast.Node]int
	// at is where the expression being translated starts in the profile.
	at config.Pos
}

// expr translates n. Every result carries its own outer parentheses, so a
// caller never depends on C operator precedence.
func (t *translator) expr(n ast.Node) (cexpr, error) {
	if set, ok := t.funcSets[n]; ok {
		return cexpr{fmt.Sprintf("hk_in_funcset(blk, %d, ev->funcId)", set), kindBool}, nil
	}
	switch n := n.(type) {
	case *ast.IntegerNode:
		return cexpr{intLiteral(int64(n.Value)), kindInt}, nil
	case *ast.FloatNode:
		return cexpr{floatLiteral(n.Value), kindFloat}, nil
	case *ast.BoolNode:
		if n.Value {
			return cexpr{"(1)", kindBool}, nil
		}
		return cexpr{"(0)", kindBool}, nil
	case *ast.IdentifierNode:
		if c, ok := t.names[n.Value]; ok {
			return c, nil
		}
		if n.Value == "func" {
			return cexpr{}, t.errorf(n, "func can only be used in a name predicate (func matches/startsWith/endsWith/contains/== \"...\", func in [...])")
		}
		return cexpr{}, t.errorf(n, "unknown name %q", n.Value)
	case *ast.UnaryNode:
		return t.unary(n)
	case *ast.BinaryNode:
		return t.binary(n)
	case *ast.ConditionalNode:
		return t.conditional(n)
	case *ast.BuiltinNode:
		return t.builtin(n)
	}
	return cexpr{}, t.errorf(n, "%s cannot run on the device", describe(n))
}

func (t *translator) unary(n *ast.UnaryNode) (cexpr, error) {
	x, err := t.expr(n.Node)
	if err != nil {
		return cexpr{}, err
	}
	switch n.Operator {
	case "!", "not":
		if x.kind != kindBool {
			return cexpr{}, t.errorf(n, "%s needs a bool, not %s", n.Operator, x.kind)
		}
		return cexpr{"(!" + x.code + ")", kindBool}, nil
	case "-":
		switch x.kind {
		case kindInt:
			return cexpr{"hk_neg(" + x.code + ")", kindInt}, nil
		case kindFloat:
			return cexpr{"(-" + x.code + ")", kindFloat}, nil
		}
	case "+":
		if x.kind != kindBool {
			return x, nil
		}
	}
	return cexpr{}, t.errorf(n, "unary %s is not supported on %s", n.Operator, x.kind)
}

func (t *translator) binary(n *ast.BinaryNode) (cexpr, error) {
	switch n.Operator {
	case "^", "**":
		return cexpr{}, t.errorf(n, "exponent is not supported on the device; multiply, or use bitshl for powers of two")
	}
	l, err := t.expr(n.Left)
	if err != nil {
		return cexpr{}, err
	}
	r, err := t.expr(n.Right)
	if err != nil {
		return cexpr{}, err
	}
	op := n.Operator
	switch op {
	case "&&", "and", "||", "or":
		if l.kind != kindBool || r.kind != kindBool {
			return cexpr{}, t.errorf(n, "%s needs bool operands, not %s and %s", op, l.kind, r.kind)
		}
		cop := "&&"
		if op == "||" || op == "or" {
			cop = "||"
		}
		return cexpr{"(" + l.code + " " + cop + " " + r.code + ")", kindBool}, nil
	case "==", "!=":
		if (l.kind == kindBool) != (r.kind == kindBool) {
			return cexpr{}, t.errorf(n, "cannot compare %s with %s", l.kind, r.kind)
		}
		l, r = promote(l, r)
		return cexpr{"(" + l.code + " " + op + " " + r.code + ")", kindBool}, nil
	case "<", "<=", ">", ">=":
		if l.kind == kindBool || r.kind == kindBool {
			return cexpr{}, t.errorf(n, "%s needs numbers, not %s and %s", op, l.kind, r.kind)
		}
		l, r = promote(l, r)
		return cexpr{"(" + l.code + " " + op + " " + r.code + ")", kindBool}, nil
	case "+", "-", "*":
		if l.kind == kindBool || r.kind == kindBool {
			return cexpr{}, t.errorf(n, "%s needs numbers, not %s and %s", op, l.kind, r.kind)
		}
		if l.kind == kindInt && r.kind == kindInt {
			fn := map[string]string{"+": "hk_add", "-": "hk_sub", "*": "hk_mul"}[op]
			return cexpr{fn + "(" + l.code + ", " + r.code + ")", kindInt}, nil
		}
		l, r = promote(l, r)
		return cexpr{"(" + l.code + " " + op + " " + r.code + ")", kindFloat}, nil
	case "/":
		// expr-lang's / always divides as float64, also for two integers.
		if l.kind == kindBool || r.kind == kindBool {
			return cexpr{}, t.errorf(n, "/ needs numbers, not %s and %s", l.kind, r.kind)
		}
		// hk_div, not C's /: the compiler's division calls a subroutine, and the hook
		// must make no calls (docs/ARCHITECTURE.md "Safe for every caller").
		return cexpr{"hk_div(" + toFloat(l) + ", " + toFloat(r) + ")", kindFloat}, nil
	case "%":
		if l.kind != kindInt || r.kind != kindInt {
			return cexpr{}, t.errorf(n, "%% needs integers, not %s and %s", l.kind, r.kind)
		}
		if k, ok := intConst(n.Right); ok && k != 0 && k != -1 {
			// A constant divisor: C's %, which compiles to a multiplication.
			return cexpr{"hk_mod_const(" + l.code + ", " + intLiteral(k) + ")", kindInt}, nil
		}
		return cexpr{"hk_mod(" + l.code + ", " + r.code + ")", kindInt}, nil
	}
	return cexpr{}, t.errorf(n, "operator %s cannot run on the device", op)
}

func (t *translator) conditional(n *ast.ConditionalNode) (cexpr, error) {
	c, err := t.expr(n.Cond)
	if err != nil {
		return cexpr{}, err
	}
	if c.kind != kindBool {
		return cexpr{}, t.errorf(n.Cond, "the condition must be a bool, not %s", c.kind)
	}
	a, err := t.expr(n.Exp1)
	if err != nil {
		return cexpr{}, err
	}
	b, err := t.expr(n.Exp2)
	if err != nil {
		return cexpr{}, err
	}
	if (a.kind == kindBool) != (b.kind == kindBool) {
		return cexpr{}, t.errorf(n, "both branches must be bool or both numbers, not %s and %s", a.kind, b.kind)
	}
	a, b = promote(a, b)
	return cexpr{"(" + c.code + " ? " + a.code + " : " + b.code + ")", a.kind}, nil
}

// builtin translates a call of a function of the device whitelist
// (config.DeviceFuncs) and refuses every other.
func (t *translator) builtin(n *ast.BuiltinNode) (cexpr, error) {
	args, err := t.builtinArgs(n)
	if err != nil {
		return cexpr{}, err
	}
	arity := func(want int) error {
		if len(args) != want {
			return t.errorf(n, "%s takes %d arguments, not %d", n.Name, want, len(args))
		}
		return nil
	}
	ints := func() error {
		for i, a := range args {
			if a.kind != kindInt {
				return t.errorf(n.Arguments[i], "%s needs integers, not %s", n.Name, a.kind)
			}
		}
		return nil
	}
	switch n.Name {
	case "abs":
		if err := arity(1); err != nil {
			return cexpr{}, err
		}
		if args[0].kind == kindInt {
			return cexpr{"hk_abs(" + args[0].code + ")", kindInt}, nil
		}
		return cexpr{"hk_abs_f(" + args[0].code + ")", kindFloat}, nil
	case "min", "max":
		if len(args) == 0 {
			return cexpr{}, t.errorf(n, "%s needs at least one argument", n.Name)
		}
		// Folded left to right as expr-lang does (see hk_min_i).
		acc := args[0]
		for _, x := range args[1:] {
			a, b := promote(acc, x)
			fn := "hk_" + n.Name + "_i("
			if a.kind == kindFloat {
				fn = "hk_" + n.Name + "_f("
			}
			acc = cexpr{fn + a.code + ", " + b.code + ")", a.kind}
		}
		return acc, nil
	case "bitnot":
		if err := arity(1); err != nil {
			return cexpr{}, err
		}
		if err := ints(); err != nil {
			return cexpr{}, err
		}
		return cexpr{"(~" + args[0].code + ")", kindInt}, nil
	case "bitand", "bitor", "bitxor", "bitnand":
		if err := arity(2); err != nil {
			return cexpr{}, err
		}
		if err := ints(); err != nil {
			return cexpr{}, err
		}
		op := map[string]string{"bitand": " & ", "bitor": " | ", "bitxor": " ^ ", "bitnand": " & ~"}[n.Name]
		return cexpr{"(" + args[0].code + op + args[1].code + ")", kindInt}, nil
	case "bitshl", "bitshr", "bitushr":
		if err := arity(2); err != nil {
			return cexpr{}, err
		}
		if err := ints(); err != nil {
			return cexpr{}, err
		}
		fn := map[string]string{"bitshl": "hk_shl", "bitshr": "hk_shr", "bitushr": "hk_ushr"}[n.Name]
		return cexpr{fn + "(" + args[0].code + ", " + args[1].code + ")", kindInt}, nil
	}
	return cexpr{}, t.errorf(n, "function %s is whitelisted but has no translation", n.Name)
}

// builtinArgs translates a call's arguments, which must be numbers, and
// refuses a function that cannot run on the device.
func (t *translator) builtinArgs(n *ast.BuiltinNode) ([]cexpr, error) {
	args := make([]cexpr, len(n.Arguments))
	for i, a := range n.Arguments {
		c, err := t.expr(a)
		if err != nil {
			return nil, err
		}
		if c.kind == kindBool {
			return nil, t.errorf(a, "%s needs numbers, not bool", n.Name)
		}
		args[i] = c
	}
	if _, ok := config.LookupDeviceFunc(n.Name); !ok {
		return nil, t.errorf(n, "function %s cannot run on the device", n.Name)
	}
	return args, nil
}

// promote converts an int operand to double when the other is a float, as
// expr-lang does for mixed arithmetic and comparisons.
func promote(a, b cexpr) (cexpr, cexpr) {
	if a.kind == kindFloat && b.kind == kindInt {
		return a, cexpr{toFloat(b), kindFloat}
	}
	if a.kind == kindInt && b.kind == kindFloat {
		return cexpr{toFloat(a), kindFloat}, b
	}
	return a, b
}

func toFloat(c cexpr) string {
	if c.kind == kindFloat {
		return c.code
	}
	return "((double)" + c.code + ")"
}

func intLiteral(v int64) string {
	if v == math.MinInt64 {
		return "(-9223372036854775807LL - 1LL)"
	}
	return "(" + strconv.FormatInt(v, 10) + "LL)"
}

// floatLiteral spells v so that it round-trips exactly, in a form valid in
// C99 and C++.
func floatLiteral(v float64) string {
	switch {
	case math.IsNaN(v):
		return "(0.0 / 0.0)"
	case math.IsInf(v, 1):
		return "(1e308 * 10.0)"
	case math.IsInf(v, -1):
		return "(-1e308 * 10.0)"
	}
	return "(" + strconv.FormatFloat(v, 'e', -1, 64) + ")"
}

// exprError is a translation error at a profile position.
type exprError struct {
	pos config.Pos
	msg string
}

func (e *exprError) Error() string { return e.pos.String() + ": " + e.msg }

func (t *translator) errorf(n ast.Node, format string, args ...any) error {
	return &exprError{t.loc(n), fmt.Sprintf(format, args...)}
}

// loc is the profile position of n, for errors that the config validator
// should have caught first. It assumes the expression is on one line, which
// is exact for plain scalars and close enough otherwise.
func (t *translator) loc(n ast.Node) config.Pos {
	p := t.at
	p.Col += n.Location().From
	return p
}

func describe(n ast.Node) string {
	name := fmt.Sprintf("%T", n)
	name = strings.TrimPrefix(name, "*ast.")
	return strings.TrimSuffix(name, "Node") + " expression"
}

// intConst returns the value of an integer literal, negated or not.
func intConst(n ast.Node) (int64, bool) {
	switch n := n.(type) {
	case *ast.IntegerNode:
		return int64(n.Value), true
	case *ast.UnaryNode:
		if n.Operator == "-" {
			if v, ok := intConst(n.Node); ok {
				return -v, true
			}
		}
	}
	return 0, false
}
