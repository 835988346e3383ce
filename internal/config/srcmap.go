package config

import (
	"unicode"

	"gopkg.in/yaml.v3"
)

// srcMap maps a character offset inside an expression (what expr-lang
// reports) to the position of that character in the profile file. YAML
// quoting, escapes, folding and block indentation all shift characters, so
// the map is built by aligning the scalar's value with the file text.
type srcMap struct {
	file string
	segs []segment // ascending off
	at   Pos       // fallback: the scalar's own position
}

// segment says that value offset off (in runes) is at line:col of the file,
// and that the following characters of the same source piece follow it.
type segment struct{ off, line, col int }

// pos returns the file position of the rune at offset off of the value.
func (m *srcMap) pos(off int) Pos {
	if len(m.segs) == 0 {
		return m.at
	}
	s := m.segs[0]
	for _, t := range m.segs[1:] {
		if t.off > off {
			break
		}
		s = t
	}
	if off < s.off {
		off = s.off
	}
	return Pos{File: m.file, Line: s.line, Col: s.col + off - s.off}
}

// plainMap is the map of an expression written outside YAML: its first
// character is at start and each later line starts at column 1.
func plainMap(src string, start Pos) *srcMap {
	m := &srcMap{file: start.File, at: start}
	m.segs = append(m.segs, segment{0, start.Line, start.Col})
	off, line := 0, start.Line
	for _, r := range src {
		off++
		if r == '\n' {
			line++
			m.segs = append(m.segs, segment{off, line, 1})
		}
	}
	return m
}

// scalarMap aligns the value of scalar n with lines, the text of its file.
func scalarMap(file string, lines []string, n *yaml.Node) *srcMap {
	m := &srcMap{file: file, at: Pos{File: file, Line: n.Line, Col: n.Column}}
	value := []rune(n.Value)
	line, col := n.Line, n.Column // 1-based start of the text to align
	block := n.Style&(yaml.LiteralStyle|yaml.FoldedStyle) != 0
	switch {
	case block: // the content starts on the line after the | or > header
		line, col = n.Line+1, 1
	case n.Style&(yaml.DoubleQuotedStyle|yaml.SingleQuotedStyle) != 0:
		col++
	}
	cursor := 0 // value runes aligned so far
	gap := 0    // source runes skipped since the last aligned piece
	for ; line <= len(lines) && cursor < len(value); line, col = line+1, 1 {
		text := []rune(lines[line-1])
		if col-1 > len(text) {
			break
		}
		ps := pieces(text, col-1, n.Style)
		end, aligned := col-1, 0
		for _, p := range ps {
			gap += p.start - p.prevEnd
			idx := indexRunes(value, cursor, p.text)
			// A piece may only be found where the skipped source
			// characters (spaces, escapes, line breaks) could account
			// for the skipped value characters; this rejects comments.
			if idx < 0 || idx-cursor > gap {
				break
			}
			m.segs = append(m.segs, segment{idx, line, p.start + 1})
			cursor, gap, end = idx+len(p.text), 0, p.start+len(p.text)
			aligned++
		}
		if aligned < len(ps) {
			break // a comment, the scalar's end, or an escape we do not decode
		}
		gap += len(text) - end + 1 // trailing characters and the line break
	}
	return m
}

// piece is a run of source characters that appears unchanged in the value.
type piece struct {
	text           []rune
	start, prevEnd int // rune index in the line; end of the previous piece
}

// pieces splits a line, from rune index from, into runs of non-space
// characters. In quoted scalars, quotes end a run, and so does a whole
// double-quoted escape (\t, \x41, \u00e9): the value holds what it stands for.
func pieces(line []rune, from int, style yaml.Style) []piece {
	quoted := style&(yaml.DoubleQuotedStyle|yaml.SingleQuotedStyle) != 0
	escapes := style&yaml.DoubleQuotedStyle != 0
	// skip returns how many runes at i are not copied to the value as-is.
	skip := func(i int) int {
		switch r := line[i]; {
		case escapes && r == '\\' && i+1 < len(line):
			return 2 + hexDigits(line[i+1])
		case unicode.IsSpace(r), quoted && (r == '\'' || r == '"' || r == '\\'):
			return 1
		}
		return 0
	}
	var ps []piece
	prevEnd := from
	for i := from; i < len(line); {
		if n := skip(i); n > 0 {
			i += n
			continue
		}
		j := i
		for j < len(line) && skip(j) == 0 {
			j++
		}
		ps = append(ps, piece{text: line[i:j], start: i, prevEnd: prevEnd})
		prevEnd, i = j, j
	}
	return ps
}

// hexDigits is the number of hex digits after a double-quoted escape letter.
func hexDigits(letter rune) int {
	switch letter {
	case 'x':
		return 2
	case 'u':
		return 4
	case 'U':
		return 8
	}
	return 0
}

// indexRunes returns the index of sub in s at or after from, or -1.
func indexRunes(s []rune, from int, sub []rune) int {
	for i := from; i+len(sub) <= len(s); i++ {
		if string(s[i:i+len(sub)]) == string(sub) {
			return i
		}
	}
	return -1
}
