package config

// exprtype.go infers the one static type the device needs for each node of a checked expression,
// and names types in messages.

import (
	"slices"

	"github.com/expr-lang/expr/ast"
)

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
