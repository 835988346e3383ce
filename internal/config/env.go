package config

// env.go holds the typed environment an expression is checked against: the catalogue, the constants
// START and STOP, and the lets in scope.

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"

	"github.com/expr-lang/expr/conf"
)

// Env is the typed environment an expression is checked against: the
// catalogue, the constants START and STOP, and the lets visible where the
// expression stands. Integers are checked as Go int (int64): every catalogue
// value is below 2^63, and it keeps expr-lang's types uniform (a ternary of a
// uint64 and an int literal would otherwise have no type).
type Env struct {
	base []envVar       // the catalogue and the constants, shared by every Env
	lets []envVar       // no let has a name of base
	idx  map[string]int // lets by name
}

type envVar struct {
	name   string
	typ    Type      // catalogue type, or Bool/I64/F64 for a let
	why    string    // non-empty: the name exists but may not be used here, because why
	broken bool      // a let whose own expression failed: expressions using it are not checked further
	konst  *constVal // a let whose expression is constant: its value
}

// NewEnv returns the environment of the catalogue and the constants.
func NewEnv() *Env { return &Env{base: baseVars()} }

// baseVars are the catalogue and the constants, built once and shared by
// every Env, and never changed.
var baseVars = sync.OnceValue(func() []envVar {
	var vars []envVar
	for _, c := range Catalog {
		vars = append(vars, envVar{name: c.Name, typ: c.Type})
	}
	for _, name := range constantNames() {
		vars = append(vars, envVar{name: name, typ: I64})
	}
	return slices.Clip(vars)
})

// WithLet returns a copy of e in which the let name of type t (Bool, I64 or
// F64) is usable.
func (e *Env) WithLet(name string, t Type) *Env { return e.with(envVar{name: name, typ: t}) }

// with returns a copy of e with the variables vs set.
func (e *Env) with(vs ...envVar) *Env {
	c := &Env{base: e.base, lets: slices.Clone(e.lets), idx: maps.Clone(e.idx)}
	for _, v := range vs {
		c.set(v)
	}
	return c
}

// set adds v to e, or replaces the let of its name in its place. The let
// list changes e in place: a hook's lets are checked one after the other
// against one Env, each made usable once checked (a copy per let made a hook
// of n lets cost n^2).
func (e *Env) set(v envVar) {
	if i, ok := e.idx[v.name]; ok {
		e.lets[i] = v
		return
	}
	if e.idx == nil {
		e.idx = map[string]int{}
	}
	e.idx[v.name] = len(e.lets)
	e.lets = append(e.lets, v)
}

// all returns every variable of e, the catalogue's first.
func (e *Env) all() []envVar { return slices.Concat(e.base, e.lets) }

// exprConfigs caches expr-lang configurations by the variables they declare.
// Building one (its builtin table, the variables' types by reflection) cost
// more than parsing and checking a typical expression. The checker writes to
// a configuration's type cache, so a cache serves one goroutine.
type exprConfigs map[string]*conf.Config

// config returns an expr-lang configuration that declares the usable names
// of e among names (the identifiers of an expression: a configuration of all
// of a hook's lets made each let cost as much as all before it), from cache
// when it has one. A nil names declares every usable name.
func (e *Env) config(names []string, cache exprConfigs) *conf.Config {
	var vars []envVar
	if names == nil {
		vars = e.all()
	} else {
		for _, n := range names {
			if v, ok := e.lookup(n); ok {
				vars = append(vars, v)
			}
		}
	}
	vars = slices.DeleteFunc(vars, func(v envVar) bool { return !v.usable() })
	var key strings.Builder
	for _, v := range vars {
		key.WriteString(v.name)
		key.WriteByte('=')
		key.WriteString(string(v.typ))
		key.WriteByte(';')
	}
	if c, ok := cache[key.String()]; ok {
		return c
	}
	c := conf.New(varsMap(vars))
	c.Optimize = false // the optimizer folds `in [...]` into maps; hookgen needs the tree as written
	if cache != nil {
		cache[key.String()] = c
	}
	return c
}

func (e *Env) lookup(name string) (envVar, bool) {
	if i, ok := e.idx[name]; ok {
		return e.lets[i], true
	}
	for _, v := range e.base {
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
	return varsMap(slices.DeleteFunc(e.all(), func(v envVar) bool { return !v.usable() }))
}

func varsMap(vars []envVar) map[string]any {
	m := make(map[string]any, len(vars))
	for _, v := range vars {
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
	for _, v := range e.all() {
		if v.usable() && v.typ != Str {
			names = append(names, v.name)
		}
	}
	return nameList(names) + " (and func, in name predicates)"
}

// maxListedNames bounds the names a message lists: a hook with thousands of
// lets must not make each of its errors as long as all of them.
const maxListedNames = 40

func nameList(names []string) string {
	if len(names) > maxListedNames {
		return strings.Join(names[:maxListedNames], ", ") + fmt.Sprintf(", and %d more", len(names)-maxListedNames)
	}
	return strings.Join(names, ", ")
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
