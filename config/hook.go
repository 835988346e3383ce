package config

import (
	"slices"
	"strconv"
	"strings"

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
		Buffer:  Buffer{Slots: DefaultSlots, Overflow: DropNewest, Pos: d.pos(n)},
		Pos:     d.pos(n),
	}
	if v := m.get("name"); v == nil {
		d.errorf(n, `hook needs a name: add "name: my_hook"`)
	} else if s, ok := d.str(v, "hook name"); ok {
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
	seen := map[string]*Let{}
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
				d.errorf(nameNode, "duplicate let name %q (first at line %d)", s, first.Pos.Line)
			} else {
				l.Name = s
				seen[s] = l
			}
		}
		if exprNode == nil {
			d.errorf(it, "let needs an expr: {name: NAME, expr: EXPRESSION}")
		}
		list = append(list, item{l, exprNode})
	}
	// A let sees the lets before it; the ones after it are named in the
	// message rather than reported as unknown.
	for _, it := range list {
		if it.let.Name != "" {
			env = env.withUnusable(it.let.Name, I64, "a let can only use lets defined before it")
			whenEnv = whenEnv.withUnusable(it.let.Name, I64, "when is tested before lets are computed; repeat the expression in when")
		}
	}
	var lets []*Let
	for _, it := range list {
		if it.expr != nil {
			it.let.Expr = d.expr(it.expr, "let expr", env)
		}
		if it.let.Name == "" {
			continue
		}
		if it.let.Expr == nil {
			env = env.with(envVar{name: it.let.Name, broken: true})
		} else {
			env = env.WithLet(it.let.Name, it.let.Expr.Type)
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

// fields decodes the record fields; it returns false when the section had
// problems of its own.
func (d *doc) fields(v *yaml.Node, h *Hook, env *Env) bool {
	items, ok := d.seq(v, "fields", " of field names or {field: NAME, as: OUTNAME, type: TYPE}")
	if !ok {
		return false
	}
	before := len(*d.errs)
	byName := map[string]*Field{}
	bytes, reported := 0, false
	for _, it := range items {
		f := d.field(it, env)
		if f == nil {
			continue
		}
		if first, dup := byName[f.Name]; dup {
			d.errorf(it, "duplicate field name %q (first at line %d); rename one with as: NAME", f.Name, first.Pos.Line)
			continue
		}
		byName[f.Name] = f
		h.Fields = append(h.Fields, f)
		bytes += f.Type.Bytes()
		if bytes > MaxRecordBytes && !reported {
			reported = true
			d.errorf(it, "the record reaches %d bytes with this field; at most %d: drop fields or store them narrower (type: u32, u16, u8)", bytes, MaxRecordBytes)
		}
	}
	return len(*d.errs) == before
}

func (d *doc) field(it *yaml.Node, env *Env) *Field {
	f := &Field{Pos: d.pos(it)}
	srcNode, asNode, typeNode := it, (*yaml.Node)(nil), (*yaml.Node)(nil)
	if it.Kind == yaml.MappingNode {
		m, _ := d.mapping(it, "a field", "field", "as", "type")
		if srcNode = m.get("field"); srcNode == nil {
			d.errorf(it, "field needs a source: {field: NAME, as: OUTNAME, type: TYPE}")
			return nil
		}
		asNode, typeNode = m.get("as"), m.get("type")
	} else if it.Kind != yaml.ScalarNode {
		d.errorf(it, "a field is a name or {field: NAME, as: OUTNAME, type: TYPE}; got %s", describe(it))
		return nil
	}
	src, ok := d.str(srcNode, "field")
	if !ok {
		return nil
	}
	v, known := env.lookup(src)
	_, constant := Constants[src]
	switch {
	case src == "func":
		d.errorf(srcNode, "func is not a field: record funcId, and the JSON lines output adds the function name")
		return nil
	case !known || constant:
		d.errorf(srcNode, "unknown field %q; known: %s", src, fieldNames(env))
		return nil
	}
	// Catalogue types and let types (bool, i64, f64) are all storable.
	f.Source, f.Name, f.Type = src, src, v.typ
	if v.broken {
		f.Type = I64 // its let's problem is already reported
	}
	if asNode != nil {
		if s, ok := d.str(asNode, "as"); ok {
			if !identRE.MatchString(s) {
				d.errorf(asNode, "field name %q must be an identifier: a letter or '_', then letters, digits or '_'", s)
				return nil
			}
			f.Name = s
		}
	}
	if slices.Contains(ReservedFieldNames, f.Name) {
		at := srcNode
		if asNode != nil {
			at = asNode
		}
		d.errorf(at, "field name %q is reserved in record lines (%s); rename it with as: NAME", f.Name, strings.Join(ReservedFieldNames, ", "))
		return nil
	}
	if typeNode != nil {
		s, ok := d.str(typeNode, "type")
		if !ok {
			return nil
		}
		t := Type(s)
		switch {
		case !slices.Contains(StorableTypes, t):
			d.errorf(typeNode, "field type %q is not storable; use one of %s", s, storableList())
			return nil
		case t == Bool && f.Type != Bool:
			d.errorf(typeNode, "type bool needs a boolean source; %s is a number", src)
			return nil
		}
		f.Type = t
	}
	return f
}

// fieldNames lists what a field may record: the catalogue but func, and
// the hook's lets.
func fieldNames(env *Env) string {
	var names []string
	for _, v := range env.vars {
		if _, constant := Constants[v.name]; v.name != "func" && !constant {
			names = append(names, v.name)
		}
	}
	return strings.Join(names, ", ")
}

func storableList() string {
	s := make([]string, len(StorableTypes))
	for i, t := range StorableTypes {
		s[i] = string(t)
	}
	return strings.Join(s, ", ")
}

func (d *doc) buffer(v *yaml.Node, b *Buffer) {
	b.Pos = d.pos(v)
	m, ok := d.mapping(v, "buffer", "slots", "overflow")
	if !ok {
		return
	}
	if n := m.get("slots"); n != nil {
		if s, ok := d.powerOfTwo(n, "buffer.slots", MinSlots, MaxSlots); ok {
			b.Slots = s
		}
	}
	if n := m.get("overflow"); n != nil {
		switch s := Overflow(n.Value); {
		case n.Kind == yaml.ScalarNode && (s == DropNewest || s == OverwriteOldest):
			b.Overflow = s
		default:
			d.errorf(n, "buffer.overflow must be %s or %s; got %s", DropNewest, OverwriteOldest, describe(n))
		}
	}
}

var aggKinds = []AggKind{AggCount, AggSum, AggMin, AggMax, AggHistogram}

// aggregates decodes the aggregate list; it returns false when the section
// had problems of its own.
func (d *doc) aggregates(v *yaml.Node, h *Hook, env *Env) bool {
	items, ok := d.seq(v, "aggregate", " of {name: NAME, kind: KIND, value: EXPRESSION, ...}")
	if !ok {
		return false
	}
	before := len(*d.errs)
	seen := map[string]*Aggregate{}
	for _, it := range items {
		a := d.aggregate(it, env)
		if a == nil {
			continue
		}
		if first, dup := seen[a.Name]; dup && a.Name != "" {
			d.errorf(it, "duplicate aggregate name %q (first at line %d)", a.Name, first.Pos.Line)
			continue
		}
		seen[a.Name] = a
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
var aggKeys = []string{"funcId", "channelId"}

func (d *doc) aggBy(n *yaml.Node) []string {
	items, ok := d.seq(n, "by", " of keys ([funcId], [channelId] or [funcId, channelId])")
	if !ok {
		return nil
	}
	seen := map[string]bool{}
	for _, it := range items {
		s, ok := d.str(it, "a by key")
		switch {
		case !ok:
		case !slices.Contains(aggKeys, s):
			d.errorf(it, "aggregates can only be keyed by funcId and channelId (bounded keys); got %q", s)
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
			d.errorf(it, "bucket bound must be a whole number >= 0; got %s", describe(it))
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

// The geometry of an aggregate's cells (docs/ARCHITECTURE.md, "Aggregates"),
// defined here once: hookgen places the cells and the host decodes them by
// these methods; the generated code computes the same rows on the device.

// Keys is the number of rows of the aggregate: one per key combination,
// each bounded key with one more row for ids beyond its bound.
func (a *Aggregate) Keys() int {
	rows := 1
	for _, k := range a.By {
		rows *= keyBound(k) + 1
	}
	return rows
}

// keyBound is the number of ids a by key keeps apart; larger ids share the
// overflow row, the key's last.
func keyBound(key string) int {
	if key == "channelId" {
		return MaxChannels
	}
	return MaxFuncIDs
}

// Row is the row of the key (funcID, channelID): keys in by order, the last
// varying fastest (by both: funcId*(MaxChannels+1)+channelId), an id at or
// beyond its key's bound in the key's overflow row.
func (a *Aggregate) Row(funcID, channelID uint32) int {
	row := 0
	for _, k := range a.By {
		id := funcID
		if k == "channelId" {
			id = channelID
		}
		row = row*(keyBound(k)+1) + int(min(id, uint32(keyBound(k))))
	}
	return row
}

// RowKey is Row's inverse: the funcId and channelId keys of a row, each -1
// when the aggregate is not keyed by it, and MaxFuncIDs or MaxChannels for
// the overflow row.
func (a *Aggregate) RowKey(row int) (funcID, channelID int) {
	funcID, channelID = -1, -1
	for i := len(a.By) - 1; i >= 0; i-- {
		n := keyBound(a.By[i]) + 1
		if a.By[i] == "channelId" {
			channelID = row % n
		} else {
			funcID = row % n
		}
		row /= n
	}
	return funcID, channelID
}

// RowWords is the number of 64-bit words of one row of the aggregate.
func (a *Aggregate) RowWords() int {
	switch a.Kind {
	case AggCount:
		return 1
	case AggHistogram:
		return 2 + a.Buckets.Count()
	}
	return 2
}

// Count is the number of histogram buckets, the +Inf bucket included.
func (b Buckets) Count() int {
	if b.Log2 {
		return Log2Buckets
	}
	return len(b.Bounds) + 1
}
