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
	*l = append(*l, &Error{Pos: pos, Msg: fmt.Sprintf(format, clipQuoted(format, args)...)})
}

// MaxQuoted is the most characters of a profile's text an error quotes.
// Errors reach NCCL's log and CI logs: a file that is not a profile (a
// credentials file named by mistake) must not appear there, so a message
// quotes at most the offending token, cut to this length.
const MaxQuoted = 24

// clipQuoted cuts every string argument of a %q verb in format to
// MaxQuoted characters: every quoted token of the profile goes through
// here (and describe), so no message can echo more of a file.
func clipQuoted(format string, args []any) []any {
	out := args
	arg := 0
	for i := 0; i < len(format); i++ {
		if format[i] != '%' {
			continue
		}
		i++
		for i < len(format) && strings.IndexByte("+-# 0123456789.", format[i]) >= 0 {
			i++
		}
		if i >= len(format) || format[i] == '%' {
			continue
		}
		if format[i] == 'q' && arg < len(args) {
			if s, ok := args[arg].(string); ok && len([]rune(s)) > MaxQuoted {
				if &out[0] == &args[0] {
					out = append([]any(nil), args...)
				}
				out[arg] = clip(s)
			}
		}
		arg++
	}
	return out
}

// clip cuts s to MaxQuoted characters, saying how long it was.
func clip(s string) string {
	r := []rune(s)
	if len(r) <= MaxQuoted {
		return s
	}
	return fmt.Sprintf("%s... (%d characters)", string(r[:MaxQuoted]), len(r))
}
