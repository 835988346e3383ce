package config

// funcpred.go checks name predicates (func matches "re", func in [...]) and compiles their
// patterns.

import (
	"errors"
	"fmt"
	"regexp"
	"regexp/syntax"

	"github.com/expr-lang/expr/ast"
)

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
