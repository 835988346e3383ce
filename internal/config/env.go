package config

// env.go holds the typed environment an expression is checked against: the catalogue, the constants
// START and STOP, and the lets in scope.

import (
	"slices"
	"strings"
)

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
	typ    Type      // catalogue type, or Bool/I64/F64 for a let
	why    string    // non-empty: the name exists but may not be used here, because why
	broken bool      // a let whose own expression failed: expressions using it are not checked further
	konst  *constVal // a let whose expression is constant: its value
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
