package hookgen

// entry.go writes each hook's static function (intrinsics, lets, predicate, record, aggregates) and
// the entry that calls them in profile order.

import (
	"fmt"
	"regexp"

	"github.com/expr-lang/expr/ast"

	"github.com/ncclhooks/ncclhooks/internal/config"
)

// intrinsics are read once per hook invocation, before its predicate.
var intrinsics = []struct{ name, read string }{
	{"smid", "hk_smid()"},
	{"clock", "hk_clock()"},
	{"globaltimer", "hk_globaltimer()"},
}

// catalogC is how each catalogue value is spelt in C (intrinsics: the
// local variable read at the top of the hook).
func catalogC(e config.CatalogEntry) (cexpr, bool) {
	var code string
	switch e.Kind {
	case config.KindEvent:
		code = "((hk_i64)ev->" + e.Name + ")"
	case config.KindIntrinsic:
		switch e.Name {
		case "cudaDev":
			code = "((hk_i64)cx->device)"
		case "comm":
			code = "((hk_i64)cx->comm)"
		default:
			code = "(iv_" + e.Name + ")"
		}
	case config.KindDerived:
		if e.Name == "paired" {
			return cexpr{"(dv->paired)", kindBool}, true
		}
		code = "((hk_i64)dv->" + e.Name + ")"
	default:
		return cexpr{}, false
	}
	k := kindInt
	switch {
	case e.Type == config.Bool:
		k = kindBool
	case e.Type.IsFloat():
		k = kindFloat
	}
	return cexpr{code, k}, true
}

func baseNames() map[string]cexpr {
	names := map[string]cexpr{}
	for _, e := range config.Catalog {
		if c, ok := catalogC(e); ok {
			names[e.Name] = c
		}
	}
	for name, v := range config.Constants {
		names[name] = cexpr{intLiteral(int64(v)), kindInt}
	}
	return names
}

var cIdent = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

func (g *generator) hook(info *HookInfo) error {
	h, w := info.Hook, &g.w
	t := &translator{names: baseNames(), funcSets: g.funcSets}
	used := g.hookNames(h)
	return w.span(h.Name, "hook", h.Pos, func() error {
		w.printf("/* ======== hook %s (%s) ======== */\n", comment(fmt.Sprintf("%q", h.Name)), g.at.pos(h.Pos))
		w.printf("HK_FN void %s(hk_u8* blk, const ncclProfilerDevEvent_t* ev, const hk_derived_t* dv) {\n", g.fns[info.Index])
		header, early := needsHeader(h, used)
		if info.Work {
			// Its block has no header: comm is devCtx's low bits.
			t.names["comm"] = cexpr{"((hk_i64)HK_COMM(blk))", kindInt}
		}
		if !header && len(h.Aggregates) == 0 && !usesFuncSets(h) && !info.Work {
			w.printf("  (void)blk;\n")
		}
		w.printf("  (void)dv;\n")
		if header && early {
			g.header()
		}
		if h.Sample > 1 {
			_ = w.span(h.Name, "sample", h.Pos, func() error {
				w.printf("  /* sample 1/%d: keep work items with workCounter %% %d == 0 */\n", h.Sample, h.Sample)
				w.printf("  if (ev->workCounter %% %dULL != 0ULL) return;\n", h.Sample)
				return nil
			})
		}
		for _, in := range intrinsics {
			if used[in.name] {
				w.printf("  const hk_i64 iv_%s = (hk_i64)%s; /* read at the hook */\n", in.name, in.read)
			}
		}
		earlyLets := lets(h, h.When)
		for _, l := range h.Lets {
			if earlyLets[l.Name] {
				if err := g.let(t, h, l); err != nil {
					return err
				}
			}
		}
		if h.When != nil {
			err := w.span(h.Name, "when", h.When.Pos, func() error {
				t.at = h.When.Pos
				c, err := t.expr(h.When.Tree)
				if err != nil {
					return exprErr(h, "when", err)
				}
				if c.kind != kindBool {
					return fmt.Errorf("%s: hook %q: when must be a bool, not %s", h.When.Pos, h.Name, c.kind)
				}
				w.printf("  /* hook %s (%s): when %s */\n", comment(fmt.Sprintf("%q", h.Name)), g.at.pos(h.When.Pos), comment(h.When.Source))
				w.printf("  if (!%s) return;\n", c.code)
				return nil
			})
			if err != nil {
				return err
			}
		}
		if header && !early {
			g.header()
		}
		for _, l := range h.Lets {
			if !earlyLets[l.Name] {
				if err := g.let(t, h, l); err != nil {
					return err
				}
			}
		}
		if info.Layout.Chunks > 0 {
			if err := g.record(t, info); err != nil {
				return err
			}
		}
		for _, a := range deviceAggregates(h) {
			if err := g.aggregate(t, h, a, g.aggOf(a)); err != nil {
				return err
			}
		}
		w.printf("}\n\n")
		return nil
	})
}

// deviceAggregates are the aggregates of h the device computes: none for a
// hook whose aggregates the drain computes (config.Hook.DrainAggregates).
func deviceAggregates(h *config.Hook) []*config.Aggregate {
	if h.DrainAggregates() {
		return nil
	}
	return h.Aggregates
}

// needsHeader says whether hook h reads the context block's header (its
// record buffers, or the comm and cudaDev intrinsics), and whether before its
// predicate. Everything else the hooks use is at a constant offset from
// devCtx: a hook that needs no header loads nothing but what it uses, and one
// that needs it after its predicate loads it only for the work items it keeps.
func needsHeader(h *config.Hook, used map[string]bool) (header, early bool) {
	if h.Buffer.Positions == config.PositionsWork {
		return false, false // its block is its regions: no header (docs/ARCHITECTURE.md, "Work positions")
	}
	header = len(h.Fields) > 0 || used["comm"] || used["cudaDev"]
	if !header || h.When == nil {
		return header, false
	}
	for _, e := range append([]*config.Expr{h.When}, earlyLetExprs(h)...) {
		for _, name := range identifiers(e.Tree) {
			if name == "comm" || name == "cudaDev" {
				return true, true
			}
		}
	}
	return true, false
}

// usesFuncSets says whether a hook's expressions test function names, which
// read the block's function-id sets.
func usesFuncSets(h *config.Hook) bool {
	for _, e := range hookExprs(h) {
		if len(e.FuncPreds) > 0 {
			return true
		}
	}
	return false
}

func earlyLetExprs(h *config.Hook) []*config.Expr {
	var es []*config.Expr
	need := lets(h, h.When)
	for _, l := range h.Lets {
		if need[l.Name] {
			es = append(es, l.Expr)
		}
	}
	return es
}

// header copies the context block's header once: read through the pointer,
// a field would be loaded again after every atomic or store below, which
// clobber memory, and each load would wait behind it.
func (g *generator) header() {
	g.w.printf("  /* The block's header, read once here: read through the pointer, a field would be\n")
	g.w.printf("     loaded again after every atomic or store below, and wait behind it. */\n")
	g.w.printf("  const hk_ctx_t cxc = *(const hk_ctx_t*)blk;\n")
	g.w.printf("  const hk_ctx_t* HK_RESTRICT const cx = &cxc;\n")
}

// lets returns the lets that e needs, directly or through other lets: they
// are computed before the predicate, every other let after it.
func lets(h *config.Hook, e *config.Expr) map[string]bool {
	need := map[string]bool{}
	if e == nil {
		return need
	}
	byName := map[string]*config.Let{}
	for _, l := range h.Lets {
		byName[l.Name] = l
	}
	var visit func(tree ast.Node)
	visit = func(tree ast.Node) {
		for _, name := range identifiers(tree) {
			if l, ok := byName[name]; ok && !need[name] {
				need[name] = true
				visit(l.Expr.Tree)
			}
		}
	}
	visit(e.Tree)
	return need
}

func (g *generator) let(t *translator, h *config.Hook, l *config.Let) error {
	w := &g.w
	return w.span(h.Name, "let "+l.Name, l.Pos, func() error {
		t.at = l.Expr.Pos
		c, err := t.expr(l.Expr.Tree)
		if err != nil {
			return exprErr(h, "let "+l.Name, err)
		}
		v := fmt.Sprintf("l%d", len(t.names))
		if cIdent.MatchString(l.Name) {
			v = "l_" + l.Name
		}
		w.printf("  /* let %s = %s (%s) */\n", comment(l.Name), comment(l.Expr.Source), g.at.pos(l.Pos))
		w.printf("  const %s %s = %s;\n", c.kind.cType(), v, c.code)
		t.names[l.Name] = cexpr{"(" + v + ")", c.kind}
		return nil
	})
}

// entry writes the one hook NCCL calls, which dispatches to every hook in
// profile order, and the pointer variable the GPU backend reads its address from.
func (g *generator) entry(pairing bool) {
	m, w := g.m, &g.w
	w.printf("/* The hook NCCL calls on lane 0 of each block, at START and STOP of every work item. */\n")
	w.printf("HK_ENTRY void %s(const ncclProfilerDevEvent_t* event, void* devCtx) {\n", SymEntry)
	w.printf("  if (!devCtx) return;\n")
	w.printf("  /* The event, read once here: read through the pointer, a field would be loaded again\n")
	w.printf("     after every atomic or store below, which clobber memory, and wait behind it. */\n")
	w.printf("  const ncclProfilerDevEvent_t evc = *event;\n")
	w.printf("  const ncclProfilerDevEvent_t* const ev = &evc;\n")
	w.printf("  hk_u8* const blk = (hk_u8*)devCtx; /* this communicator's context block */\n")
	w.printf("  hk_derived_t dv = {0, 0};\n")
	if pairing {
		w.printf("  hk_pair(blk, ev, &dv);\n")
	}
	for _, h := range m.Hooks {
		w.printf("  %s(blk, ev, &dv); /* %s */\n", g.fns[h.Index], comment(fmt.Sprintf("%q", h.Name)))
	}
	w.printf("}\n\n")
	w.printf("/* The entry's absolute address, for the GPU backend to read (a function pointer:\n")
	w.printf("   a cast to void* would need dynamic initialisation, which __device__ variables lack). */\n")
	w.printf("HK_VAR ncclProfilerDevHook_t %s = %s;\n\n", SymEntryPtr, SymEntry)
	w.printf("HK_EXTERN_C_END\n")
}
