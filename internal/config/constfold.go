package config

// constfold.go refuses operations whose constant operands make them
// meaningless on the device: a division or remainder by zero, a shift by a
// count outside 0..63. The device defines them (x % 0 and an out-of-range
// shift give 0, x / 0 gives an infinity), so without this check a typo
// yields a hook that records a constant without a word.

import (
	"math"

	"github.com/expr-lang/expr/ast"
)

// constVal is the value of a constant expression.
type constVal struct {
	float bool
	i     int64
	f     float64
}

func (v constVal) isZero() bool { return v.float && v.f == 0 || !v.float && v.i == 0 }

func (v constVal) asFloat() float64 {
	if v.float {
		return v.f
	}
	return float64(v.i)
}

// constant folds node when its value does not depend on the event: literals,
// START and STOP, lets with constant expressions, and arithmetic, bit
// functions, abs, min and max of those. Integer arithmetic wraps, as on the
// device.
func (c *exprChecker) constant(node ast.Node) (constVal, bool) {
	switch n := node.(type) {
	case *ast.IntegerNode:
		return constVal{i: int64(n.Value)}, true
	case *ast.FloatNode:
		return constVal{float: true, f: n.Value}, true
	case *ast.IdentifierNode:
		if k, ok := Constants[n.Value]; ok {
			return constVal{i: int64(k)}, true
		}
		if v, ok := c.env.lookup(n.Value); ok && v.usable() && v.konst != nil {
			return *v.konst, true
		}
	case *ast.UnaryNode:
		x, ok := c.constant(n.Node)
		switch {
		case !ok:
		case n.Operator == "+":
			return x, true
		case n.Operator == "-" && x.float:
			return constVal{float: true, f: -x.f}, true
		case n.Operator == "-":
			return constVal{i: -x.i}, true
		}
	case *ast.BinaryNode:
		return c.constBinary(n)
	case *ast.BuiltinNode:
		return c.constBuiltin(n)
	}
	return constVal{}, false
}

func (c *exprChecker) constBinary(n *ast.BinaryNode) (constVal, bool) {
	l, ok := c.constant(n.Left)
	if !ok {
		return constVal{}, false
	}
	r, ok := c.constant(n.Right)
	if !ok {
		return constVal{}, false
	}
	switch n.Operator {
	case "/":
		if r.isZero() {
			return constVal{}, false
		}
		return constVal{float: true, f: l.asFloat() / r.asFloat()}, true
	case "%":
		if l.float || r.float || r.i == 0 {
			return constVal{}, false
		}
		return constVal{i: l.i % r.i}, true
	case "+", "-", "*":
		if l.float || r.float {
			a, b := l.asFloat(), r.asFloat()
			f := map[string]float64{"+": a + b, "-": a - b, "*": a * b}[n.Operator]
			return constVal{float: true, f: f}, true
		}
		i := map[string]int64{"+": l.i + r.i, "-": l.i - r.i, "*": l.i * r.i}[n.Operator]
		return constVal{i: i}, true
	}
	return constVal{}, false
}

func (c *exprChecker) constBuiltin(n *ast.BuiltinNode) (constVal, bool) {
	args := make([]constVal, len(n.Arguments))
	for i, a := range n.Arguments {
		v, ok := c.constant(a)
		if !ok {
			return constVal{}, false
		}
		args[i] = v
	}
	if n.Name == "abs" && len(args) == 1 {
		if args[0].float {
			return constVal{float: true, f: math.Abs(args[0].f)}, true
		}
		if args[0].i < 0 {
			return constVal{i: -args[0].i}, true
		}
		return args[0], true
	}
	if len(args) != 2 {
		return constVal{}, false
	}
	a, b := args[0], args[1]
	if n.Name == "min" || n.Name == "max" {
		if a.float != b.float {
			return constVal{}, false
		}
		less := a.float && a.f < b.f || !a.float && a.i < b.i
		if less == (n.Name == "min") {
			return a, true
		}
		return b, true
	}
	if a.float || b.float {
		return constVal{}, false
	}
	switch n.Name {
	case "bitand":
		return constVal{i: a.i & b.i}, true
	case "bitor":
		return constVal{i: a.i | b.i}, true
	case "bitxor":
		return constVal{i: a.i ^ b.i}, true
	case "bitnand":
		return constVal{i: a.i &^ b.i}, true
	case "bitshl", "bitshr", "bitushr":
		if b.i < 0 || b.i > 63 {
			return constVal{}, false
		}
		switch n.Name {
		case "bitshl":
			return constVal{i: a.i << b.i}, true
		case "bitshr":
			return constVal{i: a.i >> b.i}, true
		}
		return constVal{i: int64(uint64(a.i) >> b.i)}, true
	}
	return constVal{}, false
}

// checkConstants reports every division or remainder by a constant zero and
// every shift by a constant count outside 0..63 in the tree below node.
func (c *exprChecker) checkConstants(node ast.Node, seen map[ast.Node]bool) {
	if node == nil || seen[node] {
		return
	}
	seen[node] = true
	switch n := node.(type) {
	case *ast.UnaryNode:
		c.checkConstants(n.Node, seen)
	case *ast.ConditionalNode:
		c.checkConstants(n.Cond, seen)
		c.checkConstants(n.Exp1, seen)
		c.checkConstants(n.Exp2, seen)
	case *ast.BinaryNode:
		c.checkConstants(n.Left, seen)
		c.checkConstants(n.Right, seen)
		if n.Operator != "/" && n.Operator != "%" {
			return
		}
		if r, ok := c.constant(n.Right); ok && r.isZero() {
			what := map[string]string{"/": "division", "%": "remainder"}[n.Operator]
			c.errorf(at(n), "%s by zero: the divisor is always 0 (on the device x %s 0 gives %s); divide by a value that is not 0", what, n.Operator, map[string]string{"/": "an infinity", "%": "0"}[n.Operator])
		}
	case *ast.BuiltinNode:
		for _, a := range n.Arguments {
			c.checkConstants(a, seen)
		}
		switch n.Name {
		case "bitshl", "bitshr", "bitushr":
		default:
			return
		}
		if len(n.Arguments) != 2 {
			return
		}
		if k, ok := c.constant(n.Arguments[1]); ok && !k.float && (k.i < 0 || k.i > 63) {
			c.errorf(start(n.Arguments[1]), "shift count %d is out of range: %s shifts a 64-bit integer by 0 to 63 bits", k.i, n.Name)
		}
	}
}
