package config

// yamlerr.go places YAML syntax errors at the character where the YAML parser
// found the problem.

import (
	"fmt"
	"reflect"
	"regexp"
	"strings"

	"gopkg.in/yaml.v3"
)

// yamlProblem is where and why yaml.v3 stopped.
type yamlProblem struct {
	msg     string // the problem, without "yaml: line N: "
	at      Pos    // the offending character
	context string // "while parsing a flow sequence", or empty
	ctxAt   Pos
	eof     bool // the file ended inside the context: at is the context's start
	tab     bool // the offending character is a tab
}

// yamlSyntaxError locates the error err that dec returned while decoding data.
//
// yaml.v3's message names one line and no column, and not the problem's
// line: a scanner error names the line of its context (the tab in "  - name:
// h\n\tfields: ..." is reported at the line of "h"), a parser error the
// 0-based line of its context or problem (one too small), and an unknown
// anchor no line at all. The parser it wraps (libyaml's, ported) keeps the
// exact marks of the problem and its context, which libyaml's own messages
// print; yaml.v3 does not export them, so they are read from the decoder with
// reflection. Should a later yaml.v3 lay its parser out differently, the
// fields are not found and the line of the message is used.
func yamlSyntaxError(file string, data []byte, dec *yaml.Decoder, err error) yamlProblem {
	p := yamlProblem{msg: yamlErrorMsg(err), at: yamlErrorPos(file, err)}
	parser := reflect.ValueOf(dec).Elem().FieldByName("parser")
	if !parser.IsValid() || parser.Kind() != reflect.Pointer || parser.IsNil() {
		return p
	}
	parser = parser.Elem()
	if strings.HasPrefix(p.msg, "unknown anchor ") {
		// Raised while composing, not parsing: the alias is the event
		// at hand.
		if m, ok := markOf(parser, "event", "start_mark"); ok {
			p.at = m.pos(file)
		}
		return p
	}
	yp := parser.FieldByName("parser")
	if !yp.IsValid() {
		return p
	}
	prob, ok := markOf(yp, "problem_mark")
	if !ok || fieldString(yp, "problem") == "" {
		return p
	}
	p.at = prob.pos(file)
	if prob.index >= 0 && prob.index < len(data) && data[prob.index] == '\t' {
		p.tab = true
		p.msg = strings.Replace(p.msg, "found character that", "found a tab character that", 1)
	}
	// A scanner's context ("while scanning a plain scalar") is the token
	// before the problem, noise unless the file ended inside it; a parser's
	// ("while parsing a block mapping") is the construct the problem breaks.
	if ctx := fieldString(yp, "context"); ctx != "" && (strings.HasPrefix(ctx, "while parsing") || prob.index >= len(data)) {
		if m, ok := markOf(yp, "context_mark"); ok && m != prob {
			p.context, p.ctxAt = ctx, m.pos(file)
		}
	}
	if prob.index >= len(data) && p.context != "" {
		// The file ended inside something left open (a quote, a
		// bracket): what is offending is its opening.
		p.at, p.ctxAt, p.eof = p.ctxAt, p.at, true
	}
	return p
}

// message is the error text for p, with the context's position and what to do.
func (p yamlProblem) message() string {
	s := "invalid YAML: " + p.msg
	switch {
	case p.eof && strings.HasPrefix(p.msg, "found unexpected end of stream"):
		s = fmt.Sprintf("invalid YAML: the file ends (at %d:%d) %s that starts here", p.ctxAt.Line, p.ctxAt.Col, p.context)
	case p.eof:
		s += fmt.Sprintf(" before the end of the file (at %d:%d) %s that starts here", p.ctxAt.Line, p.ctxAt.Col, p.context)
	case p.context != "":
		s += fmt.Sprintf(" (%s at %d:%d)", p.context, p.ctxAt.Line, p.ctxAt.Col)
	}
	if p.tab {
		return s + ": " + tabHint
	}
	for _, h := range yamlHints {
		if h.re.MatchString(p.msg) {
			return s + ": " + h.hint
		}
	}
	return s
}

const tabHint = "indent with spaces; YAML does not allow tabs in indentation"

var yamlHints = []struct {
	re   *regexp.Regexp
	hint string
}{
	{regexp.MustCompile(`tab character`), tabHint},
	{regexp.MustCompile(`^found unknown escape character`), `in double quotes, write \\ for a backslash, or use single quotes`},
	{regexp.MustCompile(`^unknown anchor`), "define the anchor (&NAME) before an alias (*NAME) refers to it"},
	{regexp.MustCompile(`^mapping values are not allowed`), `check this line's indentation, or quote a value that contains ": "`},
	{regexp.MustCompile(`^did not find expected key`), "check the indentation: keys of one mapping start in the same column"},
	{regexp.MustCompile(`^did not find expected '-' indicator`), "check the indentation: items of one list start in the same column"},
	{regexp.MustCompile(`^did not find expected ',' or ']'`), "separate list items with ',' and close the list with ']'"},
	{regexp.MustCompile(`^did not find expected ',' or '}'`), "separate entries with ',' and close the mapping with '}'"},
	{regexp.MustCompile(`^found unexpected end of stream`), "close it"},
	{regexp.MustCompile(`^found character that cannot start any token`), "quote a value that starts with this character"},
}

// mark is a yaml_mark_t: 0-based, the column in characters.
type mark struct{ index, line, column int }

func (m mark) pos(file string) Pos { return Pos{File: file, Line: m.line + 1, Col: m.column + 1} }

// markOf reads the yaml_mark_t at the path of field names below v.
func markOf(v reflect.Value, path ...string) (mark, bool) {
	for _, name := range path {
		if v.Kind() != reflect.Struct {
			return mark{}, false
		}
		if v = v.FieldByName(name); !v.IsValid() {
			return mark{}, false
		}
	}
	var m mark
	for name, dst := range map[string]*int{"index": &m.index, "line": &m.line, "column": &m.column} {
		f := v.FieldByName(name)
		if !f.IsValid() || f.Kind() != reflect.Int {
			return mark{}, false
		}
		*dst = int(f.Int())
	}
	return m, true
}

func fieldString(v reflect.Value, name string) string {
	if f := v.FieldByName(name); f.IsValid() && f.Kind() == reflect.String {
		return f.String()
	}
	return ""
}
