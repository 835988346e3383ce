package config

import (
	"slices"
	"strconv"

	"github.com/expr-lang/expr/builtin"
	"gopkg.in/yaml.v3"
)

var hookKeys = []string{"name", "enabled", "when", "sample", "let", "fields", "buffer", "aggregate"}

// exprKeywords are words expr-lang's lexer reads as operators or literals:
// a let by one of these names could never be referenced.
var exprKeywords = []string{"true", "false", "nil", "not", "in", "matches", "contains", "startsWith", "endsWith", "and", "or", "let", "if", "else"}

// hook decodes one hook. It returns nil only when n is not a mapping; a
// hook with problems is still returned, so that profile-wide checks
// (duplicate names) see it, but its problems are in d.errs.
func (d *doc) hook(n *yaml.Node) *Hook {
	m, ok := d.mapping(n, "a hook", hookKeys...)
	if !ok {
		return nil
	}
	h := &Hook{
		Enabled: true,
		Sample:  1,
		Buffer:  Buffer{Slots: DefaultSlots, Overflow: DropNewest, Positions: PositionsShared, Pos: d.pos(n), PositionsPos: d.pos(n)},
		Pos:     d.pos(n),
		NamePos: d.pos(n),
	}
	if v := m.get("name"); v == nil {
		d.errorf(n, `hook needs a name: add "name: my_hook"`)
	} else if s, ok := d.str(v, "hook name"); ok {
		h.NamePos = d.pos(v)
		if !identRE.MatchString(s) {
			d.errorf(v, "hook name %q must be an identifier (it names generated C code): a letter or '_', then letters, digits or '_'", s)
		}
		h.Name = s
	}
	if v := m.get("enabled"); v != nil {
		if b, ok := d.boolean(v, "enabled"); ok {
			h.Enabled = b
		}
	}
	if v := m.get("sample"); v != nil {
		h.Sample = d.sample(v)
	}
	env, whenEnv := NewEnv(), NewEnv()
	if v := m.get("let"); v != nil {
		h.Lets, env, whenEnv = d.lets(v)
	}
	if v := m.get("when"); v != nil {
		if x := d.expr(v, "when", whenEnv); x != nil {
			if x.Type != Bool {
				d.errorf(v, "when must be a boolean condition, such as phase == STOP; this expression is %s", typeWord(x.Type))
			}
			h.When = x
		}
	}
	recordsOK := true
	if v := m.get("fields"); v != nil {
		recordsOK = d.fields(v, h, env)
	}
	if v := m.get("buffer"); v != nil {
		d.buffer(v, &h.Buffer)
	}
	if v := m.get("aggregate"); v != nil {
		recordsOK = d.aggregates(v, h, env) && recordsOK
	}
	if recordsOK && len(h.Fields) == 0 && len(h.Aggregates) == 0 {
		d.errorf(n, "hook %q records nothing: add fields, aggregate, or both", h.Name)
	}
	return h
}

func (d *doc) sample(v *yaml.Node) uint32 {
	const allowed = `"1/N" with N a whole number from 1 to 4294967295 (keeps work items whose workCounter is a multiple of N)`
	sm := sampleRE.FindStringSubmatch(v.Value)
	if v.Kind != yaml.ScalarNode || sm == nil {
		d.errorf(v, "sample must be %s; got %s", allowed, describe(v))
		return 1
	}
	n, err := strconv.ParseUint(sm[1], 10, 32)
	if err != nil || n == 0 {
		d.errorf(v, "sample must be %s; got %s", allowed, describe(v))
		return 1
	}
	return uint32(n)
}

// lets decodes the let list. It returns the lets, the environment of
// fields and aggregates (every let), and the environment of when (no let:
// when is tested before lets are computed).
func (d *doc) lets(v *yaml.Node) ([]*Let, *Env, *Env) {
	env, whenEnv := NewEnv(), NewEnv()
	items, ok := d.seq(v, "let", " of {name: NAME, expr: EXPRESSION}")
	if !ok {
		return nil, env, whenEnv
	}
	type item struct {
		let  *Let
		expr *yaml.Node
	}
	var list []item
	seen := map[string]*yaml.Node{} // name tokens
	for _, it := range items {
		m, ok := d.mapping(it, "a let", "name", "expr")
		if !ok {
			continue
		}
		l := &Let{Pos: d.pos(it)}
		nameNode, exprNode := m.get("name"), m.get("expr")
		if nameNode == nil {
			d.errorf(it, "let needs a name: {name: NAME, expr: EXPRESSION}")
		} else if s, ok := d.str(nameNode, "let name"); ok && d.letName(nameNode, s) {
			if first, dup := seen[s]; dup {
				d.errorf(nameNode, "duplicate let name %q (first at %d:%d)", s, first.Line, first.Column)
			} else {
				l.Name = s
				seen[s] = nameNode
			}
		}
		if exprNode == nil {
			d.errorf(it, "let needs an expr: {name: NAME, expr: EXPRESSION}")
		}
		list = append(list, item{l, exprNode})
	}
	// A let sees the lets before it; the ones after it are named in the
	// message rather than reported as unknown.
	var later, notInWhen []envVar
	for _, it := range list {
		if it.let.Name != "" {
			later = append(later, envVar{name: it.let.Name, typ: I64, why: "a let can only use lets defined before it"})
			notInWhen = append(notInWhen, envVar{name: it.let.Name, typ: I64, why: "when is tested before lets are computed; repeat the expression in when"})
		}
	}
	env, whenEnv = env.with(later...), whenEnv.with(notInWhen...) // copies: env changes below
	var lets []*Let
	for _, it := range list {
		if it.expr != nil {
			it.let.Expr = d.expr(it.expr, "let expr", env)
		}
		if it.let.Name == "" {
			continue
		}
		if it.let.Expr == nil {
			env.set(envVar{name: it.let.Name, broken: true})
		} else {
			env.set(envVar{name: it.let.Name, typ: it.let.Expr.Type, konst: it.let.Expr.konst})
		}
		lets = append(lets, it.let)
	}
	return lets, env, whenEnv
}

// letName checks a let's name; it reports the problem and returns false.
func (d *doc) letName(n *yaml.Node, s string) bool {
	_, catalogued := Lookup(s)
	_, constant := Constants[s]
	_, isBuiltin := builtin.Index[s]
	switch {
	case !identRE.MatchString(s):
		d.errorf(n, "let name %q must be an identifier: a letter or '_', then letters, digits or '_'", s)
	case catalogued:
		d.errorf(n, "let name %q shadows the catalogue field %s; choose another name", s, s)
	case constant:
		d.errorf(n, "let name %q shadows the constant %s; choose another name", s, s)
	case slices.Contains(exprKeywords, s):
		d.errorf(n, "let name %q is an expression keyword; choose another name", s)
	case isBuiltin:
		d.errorf(n, "let name %q is the name of an expr-lang function; choose another name", s)
	default:
		return true
	}
	return false
}

// The geometry of an aggregate's cells (docs/ARCHITECTURE.md, "Aggregates"),
// defined here once: hookgen places the cells and the host decodes them by
// these methods; the generated code computes the same rows on the device.
