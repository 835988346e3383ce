package config

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
)

// Error is one problem in a profile, at a position in its file.
type Error struct {
	Pos Pos
	Msg string
}

func (e *Error) Error() string { return e.Pos.String() + ": " + e.Msg }

// ErrorList is every problem found in a profile. Parse and Load return it
// whole, so a user fixes a profile in one round rather than one error at a
// time.
type ErrorList []*Error

// Error returns one line per problem, sorted by position.
func (l ErrorList) Error() string {
	s := slices.Clone(l)
	s.sort()
	lines := make([]string, len(s))
	for i, e := range s {
		lines[i] = e.Error()
	}
	return strings.Join(lines, "\n")
}

// Err returns l as an error, sorted by position, or nil when l is empty (a
// nil ErrorList stored in an error interface would not compare equal to nil).
func (l ErrorList) Err() error {
	if len(l) == 0 {
		return nil
	}
	l.sort()
	return l
}

func (l ErrorList) sort() {
	slices.SortStableFunc(l, func(a, b *Error) int {
		return cmp.Or(
			cmp.Compare(a.Pos.File, b.Pos.File),
			cmp.Compare(a.Pos.Line, b.Pos.Line),
			cmp.Compare(a.Pos.Col, b.Pos.Col),
		)
	})
}

func (l *ErrorList) add(pos Pos, format string, args ...any) {
	*l = append(*l, &Error{Pos: pos, Msg: fmt.Sprintf(format, args...)})
}
