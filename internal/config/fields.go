package config

// fields.go parses what a hook records: its fields, checked against the catalogue and its lets, and
// its buffer.

import (
	"slices"
	"strings"

	"gopkg.in/yaml.v3"
)

// fields decodes the record fields; it returns false when the section had
// problems of its own.
func (d *doc) fields(v *yaml.Node, h *Hook, env *Env) bool {
	items, ok := d.seq(v, "fields", " of field names or {field: NAME, as: OUTNAME, type: TYPE}")
	if !ok {
		return false
	}
	before := len(*d.errs)
	byName := map[string]*yaml.Node{} // the tokens that gave each output name
	bytes, reported := 0, false
	for _, it := range items {
		f := d.field(it, env)
		if f == nil {
			continue
		}
		name := it // a plain field names itself; a mapping by as, else by field
		if it.Kind == yaml.MappingNode {
			if name = valueOf(it, "as"); name == it {
				name = valueOf(it, "field")
			}
		}
		if first, dup := byName[f.Name]; dup {
			d.errorf(name, "duplicate field name %q (first at %d:%d); rename one with as: NAME", f.Name, first.Line, first.Column)
			continue
		}
		byName[f.Name] = name
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
	for _, v := range env.all() {
		if _, constant := Constants[v.name]; v.name != "func" && !constant {
			names = append(names, v.name)
		}
	}
	return nameList(names)
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
	m, ok := d.mapping(v, "buffer", "slots", "overflow", "positions")
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
	b.PositionsPos = b.Pos
	if n := m.get("positions"); n != nil {
		b.PositionsPos = d.pos(n)
		switch s := Positions(n.Value); {
		case n.Kind == yaml.ScalarNode && (s == PositionsShared || s == PositionsWork):
			b.Positions = s
		default:
			d.errorf(n, "buffer.positions must be %s or %s; got %s", PositionsShared, PositionsWork, describe(n))
		}
	}
}
