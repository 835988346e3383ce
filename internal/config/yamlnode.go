package config

import (
	"fmt"
	"regexp"
	"strings"

	"gopkg.in/yaml.v3"
)

// doc decodes one profile file from its yaml.Node tree, keeping positions,
// and records every problem instead of stopping at the first.
type doc struct {
	file  string
	lines []string // the file's text, to map expression offsets to positions
	errs  *ErrorList
	confs exprConfigs // shared by the files of one load
}

func (d *doc) pos(n *yaml.Node) Pos { return Pos{File: d.file, Line: n.Line, Col: n.Column} }

func (d *doc) errorf(n *yaml.Node, format string, args ...any) {
	d.errs.add(d.pos(n), format, args...)
}

// resolve follows aliases (*anchor) to the node they stand for.
func resolve(n *yaml.Node) *yaml.Node {
	for i := 0; n != nil && n.Kind == yaml.AliasNode && i < 100; i++ {
		n = n.Alias
	}
	return n
}

// describe names what a node is, for "got ..." in messages.
func describe(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.ScalarNode:
		if n.ShortTag() == "!!null" {
			return "nothing"
		}
		if r := []rune(n.Value); len(r) > MaxQuoted {
			return fmt.Sprintf("%q... (a string of %d characters)", string(r[:MaxQuoted]), len(r))
		}
		return fmt.Sprintf("%q", n.Value)
	}
	return "an unresolved alias"
}

// mapping is a decoded YAML mapping: values and key nodes by key.
type mapping struct {
	node *yaml.Node
	vals map[string]*yaml.Node
	keys map[string]*yaml.Node
}

func (m *mapping) get(key string) *yaml.Node { return m.vals[key] }

// mapping checks that n is a mapping whose keys are all in allowed and
// appear once; what names it in messages ("hook", "buffer").
func (d *doc) mapping(n *yaml.Node, what string, allowed ...string) (*mapping, bool) {
	if n.Kind != yaml.MappingNode {
		d.errorf(n, "%s must be a mapping with keys %s; got %s", what, strings.Join(allowed, ", "), describe(n))
		return nil, false
	}
	m := &mapping{node: n, vals: map[string]*yaml.Node{}, keys: map[string]*yaml.Node{}}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := resolve(n.Content[i]), resolve(n.Content[i+1])
		if k.Kind != yaml.ScalarNode {
			d.errorf(k, "keys of %s must be names; got %s", what, describe(k))
			continue
		}
		if first, dup := m.keys[k.Value]; dup {
			d.errorf(k, "duplicate key %q in %s (first at line %d)", k.Value, what, first.Line)
			continue
		}
		if !contains(allowed, k.Value) {
			d.errorf(k, "unknown key %q in %s; allowed: %s", k.Value, what, strings.Join(allowed, ", "))
			continue
		}
		m.keys[k.Value], m.vals[k.Value] = k, v
	}
	return m, true
}

// valueOf returns the value of key in mapping n, or n itself when n is not
// a mapping or has no such key: the token an error about that key points at.
func valueOf(n *yaml.Node, key string) *yaml.Node {
	if n.Kind == yaml.MappingNode {
		for i := 0; i+1 < len(n.Content); i += 2 {
			if k := resolve(n.Content[i]); k.Kind == yaml.ScalarNode && k.Value == key {
				return resolve(n.Content[i+1])
			}
		}
	}
	return n
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// seq checks that n is a list and returns its items, aliases resolved.
func (d *doc) seq(n *yaml.Node, what, example string) ([]*yaml.Node, bool) {
	if n.Kind != yaml.SequenceNode {
		d.errorf(n, "%s must be a list%s; got %s", what, example, describe(n))
		return nil, false
	}
	items := make([]*yaml.Node, len(n.Content))
	for i, it := range n.Content {
		items[i] = resolve(it)
	}
	return items, true
}

// str returns the text of a non-null scalar.
func (d *doc) str(n *yaml.Node, what string) (string, bool) {
	if n.Kind != yaml.ScalarNode || n.ShortTag() == "!!null" {
		d.errorf(n, "%s must be a string; got %s", what, describe(n))
		return "", false
	}
	return n.Value, true
}

// integer returns the value of an integer scalar; allowed says which values
// are, for the message.
func (d *doc) integer(n *yaml.Node, what, allowed string) (int64, bool) {
	var v int64
	if n.Kind != yaml.ScalarNode || n.ShortTag() != "!!int" || n.Decode(&v) != nil {
		if tooLarge(n) {
			d.errorf(n, "%s %s is out of range: use %s", what, n.Value, allowed)
		} else {
			d.errorf(n, "%s must be an integer: %s; got %s", what, allowed, describe(n))
		}
		return 0, false
	}
	return v, true
}

// decimalRE is a plain decimal integer as YAML writes one.
var decimalRE = regexp.MustCompile(`^[-+]?[0-9]+$`)

// tooLarge reports whether n is an integer literal too large for 64 bits
// (YAML reads one as a float).
func tooLarge(n *yaml.Node) bool {
	return n.Kind == yaml.ScalarNode && n.Style&(yaml.DoubleQuotedStyle|yaml.SingleQuotedStyle) == 0 && decimalRE.MatchString(n.Value)
}

func (d *doc) boolean(n *yaml.Node, what string) (bool, bool) {
	var v bool
	if n.Kind != yaml.ScalarNode || n.ShortTag() != "!!bool" || n.Decode(&v) != nil {
		d.errorf(n, "%s must be true or false; got %s", what, describe(n))
		return false, false
	}
	return v, true
}

// expr checks the expression in scalar n against env. Errors land at the
// offending character of the file.
func (d *doc) expr(n *yaml.Node, what string, env *Env) *Expr {
	if n.Kind != yaml.ScalarNode || n.ShortTag() == "!!null" {
		d.errorf(n, "%s must be an expression; got %s", what, describe(n))
		return nil
	}
	x, errs := checkExpr(n.Value, scalarMap(d.file, d.lines, n), env, d.confs)
	*d.errs = append(*d.errs, errs...)
	return x
}
