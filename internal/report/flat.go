package report

import (
	"encoding/json"
	"errors"
	"strconv"
)

// flatObject is one JSON object whose values are all scalars, the shape of
// every record and dump_stats line. Parsing it by hand is several times faster
// than encoding/json into a map, which matters for files of millions of
// records; anything else (nested values, odd escapes) falls back to
// encoding/json.
type flatObject struct {
	keys []string
	vals []flatValue
}

type flatKind uint8

const (
	flatNumber flatKind = iota
	flatString
	flatBool
	flatNull
)

type flatValue struct {
	kind flatKind
	raw  string // number text, unquoted string, "true"/"false"
}

// errNotFlat says the object has a nested value: use encoding/json.
var errNotFlat = errors.New("not a flat object")

// parse fills o from line. It returns errNotFlat for valid-looking objects
// with nested values and a syntax error for anything that is not JSON.
func (o *flatObject) parse(line []byte) error {
	o.keys, o.vals = o.keys[:0], o.vals[:0]
	i := skipSpace(line, 0)
	if i >= len(line) || line[i] != '{' {
		return syntaxError(line)
	}
	i = skipSpace(line, i+1)
	if i < len(line) && line[i] == '}' {
		return trailing(line, i+1)
	}
	for {
		if i >= len(line) || line[i] != '"' {
			return syntaxError(line)
		}
		key, next, err := scanString(line, i)
		if err != nil {
			return err
		}
		i = skipSpace(line, next)
		if i >= len(line) || line[i] != ':' {
			return syntaxError(line)
		}
		i = skipSpace(line, i+1)
		if i >= len(line) {
			return syntaxError(line)
		}
		var v flatValue
		switch c := line[i]; {
		case c == '"':
			v.kind = flatString
			v.raw, i, err = scanString(line, i)
			if err != nil {
				return err
			}
		case c == '{' || c == '[':
			return errNotFlat
		case c == 't' || c == 'f' || c == 'n':
			word := "true"
			v.kind = flatBool
			if c == 'f' {
				word = "false"
			} else if c == 'n' {
				word, v.kind = "null", flatNull
			}
			if len(line) < i+len(word) || string(line[i:i+len(word)]) != word {
				return syntaxError(line)
			}
			v.raw = word
			i += len(word)
		default:
			end := scanNumber(line, i)
			if end == i {
				return syntaxError(line)
			}
			v.kind, v.raw = flatNumber, string(line[i:end])
			i = end
		}
		o.keys = append(o.keys, key)
		o.vals = append(o.vals, v)
		i = skipSpace(line, i)
		if i >= len(line) {
			return syntaxError(line)
		}
		switch line[i] {
		case ',':
			i = skipSpace(line, i+1)
		case '}':
			return trailing(line, i+1)
		default:
			return syntaxError(line)
		}
	}
}

func (o *flatObject) get(key string) (flatValue, bool) {
	for i, k := range o.keys {
		if k == key {
			return o.vals[i], true
		}
	}
	return flatValue{}, false
}

func (o *flatObject) str(key string) string {
	v, _ := o.get(key)
	if v.kind != flatString {
		return ""
	}
	return v.raw
}

// uint returns key as an unsigned integer; ok is false when it is missing or
// not a non-negative integer (booleans count as 0 and 1).
func (o *flatObject) uint(key string) (uint64, bool) {
	v, ok := o.get(key)
	if !ok {
		return 0, false
	}
	return v.uint()
}

func (v flatValue) uint() (uint64, bool) {
	switch v.kind {
	case flatBool:
		if v.raw == "true" {
			return 1, true
		}
		return 0, true
	case flatNumber:
		u, err := strconv.ParseUint(v.raw, 10, 64)
		if err == nil {
			return u, true
		}
		// Accept integral floats ("1e3", "12.0") written by other tools.
		if f, ferr := strconv.ParseFloat(v.raw, 64); ferr == nil && f >= 0 && f == float64(uint64(f)) {
			return uint64(f), true
		}
	}
	return 0, false
}

func (o *flatObject) int(key string) (int64, bool) {
	v, ok := o.get(key)
	if !ok || v.kind != flatNumber {
		return 0, false
	}
	n, err := strconv.ParseInt(v.raw, 10, 64)
	if err != nil {
		return 0, false
	}
	return n, true
}

func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\r' || b[i] == '\n') {
		i++
	}
	return i
}

func trailing(line []byte, i int) error {
	if skipSpace(line, i) != len(line) {
		return syntaxError(line)
	}
	return nil
}

// scanString reads the string starting at line[i] == '"'.
func scanString(line []byte, i int) (string, int, error) {
	escaped := false
	for j := i + 1; j < len(line); j++ {
		switch c := line[j]; {
		case c == '\\':
			escaped = true
			j++
		case c < 0x20:
			return "", 0, syntaxError(line)
		case c == '"':
			if !escaped {
				return string(line[i+1 : j]), j + 1, nil
			}
			var s string
			if err := json.Unmarshal(line[i:j+1], &s); err != nil {
				return "", 0, syntaxError(line)
			}
			return s, j + 1, nil
		}
	}
	return "", 0, syntaxError(line)
}

// scanNumber returns the end of the JSON number at line[i], or i if there is none.
func scanNumber(b []byte, i int) int {
	j := i
	if j < len(b) && b[j] == '-' {
		j++
	}
	digits := func() bool {
		s := j
		for j < len(b) && b[j] >= '0' && b[j] <= '9' {
			j++
		}
		return j > s
	}
	if j < len(b) && b[j] == '0' {
		j++
	} else if !digits() {
		return i
	}
	if j < len(b) && b[j] == '.' {
		j++
		if !digits() {
			return i
		}
	}
	if j < len(b) && (b[j] == 'e' || b[j] == 'E') {
		j++
		if j < len(b) && (b[j] == '+' || b[j] == '-') {
			j++
		}
		if !digits() {
			return i
		}
	}
	return j
}

// syntaxError describes what is wrong with a line, in encoding/json's words.
func syntaxError(line []byte) error {
	var v any
	if err := json.Unmarshal(line, &v); err != nil {
		return err
	}
	if _, ok := v.(map[string]any); !ok {
		return errors.New("not a JSON object")
	}
	return errors.New("invalid JSON")
}
