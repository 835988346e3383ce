package hookgen

// Name predicates that match no function, and the names closest to them.

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
)

// Unmatched describes a name predicate that matches none of NCCL's function
// names: where it is and the names nearest to what it asks for.
type Unmatched struct {
	Set     *FuncSetInfo
	Closest []string // at most three, nearest first
}

func (u Unmatched) String() string {
	p := u.Set.Pred
	s := fmt.Sprintf("%s: hook %q: func %s %q matches none of NCCL's %s", p.Pos, u.Set.Hook, p.Op, strings.Join(p.Patterns, `", "`), "function names")
	if len(u.Closest) > 0 {
		s += "; closest: " + strings.Join(u.Closest, ", ")
	}
	return s
}

// UnmatchedFuncSets lists the name predicates of m that match no name of
// names (NCCL's function names by id), with the closest names to each.
func (m *Module) UnmatchedFuncSets(names []string) []Unmatched {
	var out []Unmatched
	for _, fs := range m.FuncSets {
		if slices.ContainsFunc(names[:min(len(names), MaxFuncIDs)], fs.Pred.Match) {
			continue
		}
		out = append(out, Unmatched{Set: fs, Closest: closest(fs.Pred.Patterns, names, 3)})
	}
	return out
}

// closest returns up to n distinct names nearest to any of the patterns, by
// edit distance (case-insensitive) between a pattern and the name or, for
// a shorter pattern, the name's prefix of its length: "AllReduce_Sum_f23"
// finds "AllReduce_Sum_f32_RING_LL".
func closest(patterns, names []string, n int) []string {
	type cand struct {
		name string
		d    int
	}
	var cs []cand
	for _, name := range names {
		d := -1
		for _, p := range patterns {
			lp, ln := strings.ToLower(p), strings.ToLower(name)
			dd := editDistance(lp, ln)
			if len(lp) < len(ln) {
				dd = min(dd, editDistance(lp, ln[:len(lp)]))
			}
			if d < 0 || dd < d {
				d = dd
			}
		}
		cs = append(cs, cand{name, d})
	}
	slices.SortStableFunc(cs, func(a, b cand) int { return cmp.Compare(a.d, b.d) })
	var out []string
	for _, c := range cs {
		if len(out) == n {
			break
		}
		if !slices.Contains(out, c.name) {
			out = append(out, c.name)
		}
	}
	return out
}

// editDistance is the Levenshtein distance between a and b (bytes).
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
