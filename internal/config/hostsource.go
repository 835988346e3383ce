package config

import (
	"fmt"
	"strings"

	"github.com/expr-lang/expr/ast"
)

// HostSourceLacks are the catalogue values NCCL's host events cannot give
// (NCCL_HOOKS_SOURCE=host), with why: the host source sees a kernel channel's
// GPU timer at its start and stop, never the multiprocessor that ran it.
var HostSourceLacks = map[string]string{
	"smid":        "no host event says which multiprocessor ran the channel",
	"clock":       "no host event carries the multiprocessor's cycle counter",
	"globaltimer": "the hooks run on the host, after the kernel: use timestamp, the GPU timer NCCL reports",
}

// CheckHostSource reports every use, in the enabled hooks, of a value the
// host-event source cannot provide, at its position in the profile.
func CheckHostSource(p *Profile) error {
	var errs ErrorList
	lacks := func(pos Pos, name, where string) {
		errs.add(pos, "%s (in %s) is not available from NCCL's host events (NCCL_HOOKS_SOURCE=host): %s; the host source provides %s",
			name, where, HostSourceLacks[name], hostSourceNames())
	}
	walk := func(x *Expr, where string) {
		if x == nil {
			return
		}
		tree := x.Tree
		ast.Walk(&tree, identVisitor(func(n *ast.IdentifierNode) {
			if _, ok := HostSourceLacks[n.Value]; ok {
				lacks(x.PosAt(n.Location().From), n.Value, where)
			}
		}))
	}
	for _, h := range p.Hooks {
		if !h.Enabled {
			continue
		}
		for _, l := range h.Lets {
			walk(l.Expr, fmt.Sprintf("hook %q let %s", h.Name, l.Name))
		}
		walk(h.When, fmt.Sprintf("hook %q when", h.Name))
		for _, f := range h.Fields {
			if _, ok := HostSourceLacks[f.Source]; ok {
				lacks(f.Pos, f.Source, fmt.Sprintf("hook %q fields", h.Name))
			}
		}
		for _, a := range h.Aggregates {
			walk(a.Value, fmt.Sprintf("hook %q aggregate %s", h.Name, a.Name))
		}
	}
	return errs.Err()
}

func hostSourceNames() string {
	var names []string
	for _, e := range Catalog {
		if _, ok := HostSourceLacks[e.Name]; !ok {
			names = append(names, e.Name)
		}
	}
	return strings.Join(names, ", ")
}

// identVisitor calls f for every identifier of a tree.
type identVisitor func(n *ast.IdentifierNode)

func (f identVisitor) Visit(n *ast.Node) {
	if id, ok := (*n).(*ast.IdentifierNode); ok {
		f(id)
	}
}
