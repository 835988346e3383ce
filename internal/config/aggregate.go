package config

// aggregate.go parses a hook's aggregates: their kind, value, keys (by) and histogram buckets.

import (
	"math"
	"slices"
	"strings"

	"gopkg.in/yaml.v3"
)

var aggKinds = []AggKind{AggCount, AggSum, AggMin, AggMax, AggHistogram}

// aggregates decodes the aggregate list; it returns false when the section
// had problems of its own.
func (d *doc) aggregates(v *yaml.Node, h *Hook, env *Env) bool {
	items, ok := d.seq(v, "aggregate", " of {name: NAME, kind: KIND, value: EXPRESSION, ...}")
	if !ok {
		return false
	}
	before := len(*d.errs)
	seen := map[string]*yaml.Node{} // name tokens
	for _, it := range items {
		a := d.aggregate(it, env)
		if a == nil {
			continue
		}
		name := valueOf(it, "name")
		if first, dup := seen[a.Name]; dup && a.Name != "" {
			d.errorf(name, "duplicate aggregate name %q (first at %d:%d)", a.Name, first.Line, first.Column)
			continue
		}
		seen[a.Name] = name
		h.Aggregates = append(h.Aggregates, a)
	}
	return len(*d.errs) == before
}

func (d *doc) aggregate(it *yaml.Node, env *Env) *Aggregate {
	m, ok := d.mapping(it, "an aggregate", "name", "kind", "value", "by", "buckets")
	if !ok {
		return nil
	}
	a := &Aggregate{Pos: d.pos(it)}
	if n := m.get("name"); n == nil {
		d.errorf(it, "aggregate needs a name: add \"name: latency\"")
	} else if s, ok := d.str(n, "aggregate name"); ok {
		if !identRE.MatchString(s) {
			d.errorf(n, "aggregate name %q must be an identifier: a letter or '_', then letters, digits or '_'", s)
		}
		a.Name = s
	}
	kinds := make([]string, len(aggKinds))
	for i, k := range aggKinds {
		kinds[i] = string(k)
	}
	if n := m.get("kind"); n == nil {
		d.errorf(it, "aggregate needs a kind: one of %s", strings.Join(kinds, ", "))
		return a
	} else if k := AggKind(n.Value); n.Kind != yaml.ScalarNode || !slices.Contains(aggKinds, k) {
		d.errorf(n, "aggregate kind must be one of %s; got %s", strings.Join(kinds, ", "), describe(n))
		return a
	} else {
		a.Kind = k
	}
	switch n := m.get("value"); {
	case a.Kind == AggCount && n != nil:
		d.errorf(m.keys["value"], "a count aggregate takes no value (it counts matching events); remove value, or use kind sum")
	case a.Kind != AggCount && n == nil:
		d.errorf(it, "a %s aggregate needs a value expression, such as \"value: duration\"", a.Kind)
	case n != nil:
		a.Value = d.expr(n, "value", env)
		if x := a.Value; x != nil {
			switch {
			case x.Type == Bool:
				d.errorf(n, "a %s aggregate needs a number; this expression is a boolean", a.Kind)
			case x.Type == F64 && a.Kind != AggSum:
				d.errorf(n, "%s values must be integers; this expression is a float (/ always divides as float)", a.Kind)
			}
		}
	}
	if n := m.get("by"); n != nil {
		a.By = d.aggBy(n)
	}
	n := m.get("buckets")
	switch {
	case n != nil && a.Kind != AggHistogram:
		d.errorf(m.keys["buckets"], "buckets only apply to kind histogram; remove buckets")
	case a.Kind == AggHistogram && n == nil:
		a.Buckets.Log2 = true
	case a.Kind == AggHistogram:
		a.Buckets = d.buckets(n)
	}
	return a
}

// aggKeys are the bounded keys an aggregate can be keyed by, in row order.
var aggKeys = []string{"funcId", "channelId", "comm"}

func (d *doc) aggBy(n *yaml.Node) []string {
	items, ok := d.seq(n, "by", " of keys (funcId, channelId and comm: [funcId], [funcId, comm], ...)")
	if !ok {
		return nil
	}
	seen := map[string]bool{}
	for _, it := range items {
		s, ok := d.str(it, "a by key")
		switch {
		case !ok:
		case !slices.Contains(aggKeys, s):
			d.errorf(it, "aggregates can only be keyed by funcId, channelId and comm (bounded keys); got %q", s)
		case seen[s]:
			d.errorf(it, "%s is listed twice in by", s)
		default:
			seen[s] = true
		}
	}
	var by []string
	for _, k := range aggKeys {
		if seen[k] {
			by = append(by, k)
		}
	}
	return by
}

func (d *doc) buckets(n *yaml.Node) Buckets {
	const allowed = "log2, or {bounds: [B1, B2, ...]} with whole numbers in ascending order"
	if n.Kind == yaml.ScalarNode {
		if n.Value != "log2" {
			d.errorf(n, "buckets must be %s; got %s", allowed, describe(n))
		}
		return Buckets{Log2: true}
	}
	m, ok := d.mapping(n, "buckets", "bounds")
	if !ok {
		return Buckets{Log2: true}
	}
	bn := m.get("bounds")
	if bn == nil {
		d.errorf(n, "buckets needs bounds: {bounds: [1000, 10000, 100000]}")
		return Buckets{}
	}
	items, ok := d.seq(bn, "buckets.bounds", " of whole numbers in ascending order")
	if !ok {
		return Buckets{}
	}
	if len(items) == 0 {
		d.errorf(bn, "buckets.bounds is empty: list at least one bound, or use buckets: log2")
	}
	var b Buckets
	for i, it := range items {
		var v uint64
		if it.Kind != yaml.ScalarNode || it.ShortTag() != "!!int" || strings.HasPrefix(it.Value, "-") || it.Decode(&v) != nil {
			if tooLarge(it) && !strings.HasPrefix(it.Value, "-") {
				d.errorf(it, "bucket bound %s is out of range: bounds are whole numbers from 0 to %d", it.Value, uint64(math.MaxUint64))
			} else {
				d.errorf(it, "bucket bound must be a whole number >= 0; got %s", describe(it))
			}
			return Buckets{}
		}
		if i > 0 && v <= b.Bounds[i-1] {
			d.errorf(it, "buckets.bounds must be strictly ascending: %d follows %d", v, b.Bounds[i-1])
			return Buckets{}
		}
		b.Bounds = append(b.Bounds, v)
	}
	return b
}
