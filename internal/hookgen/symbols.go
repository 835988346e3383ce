package hookgen

// symbols.go writes the module symbols: the context type, the control words, the aggregation cells
// and the function-id sets.

import (
	"fmt"

	"github.com/ncclhooks/ncclhooks/internal/config"
)

func predText(fp *config.FuncPred) string {
	if fp.Op == config.FuncIn {
		return fmt.Sprintf("in %q", fp.Patterns)
	}
	if len(fp.Patterns) > 0 {
		return fmt.Sprintf("%s %q", fp.Op, fp.Patterns[0])
	}
	return string(fp.Op)
}

// symbols writes the module symbols of docs/ARCHITECTURE.md "Generated module
// symbols": the context type, the control words, the aggregation cells and the
// function-id sets.
func (g *generator) symbols() {
	m, w := g.m, &g.w
	H := len(m.Hooks)
	w.printf("/* ---- module symbols (docs/ARCHITECTURE.md) ---- */\n")
	w.printf("HK_EXTERN_C_BEGIN\n\n")
	w.printf("typedef struct {\n  hk_u64* slots; /* N slots of C words */\n  hk_u32* holes; /* N hole stamps (drop_newest) */\n} hk_hookbuf_t;\n")
	w.printf("/* The hook reaches all of its state through devCtx, never by symbol: called from\n")
	w.printf("   NCCL's kernel (another module), a function cannot address its own module's globals,\n")
	w.printf("   which the GPU resolves through the running kernel's module. */\n")
	w.printf("typedef struct {\n  hk_u64* ctl; /* %s */\n  hk_u64* agg; /* %s */\n  hk_u32* funcsets; /* %s */\n  hk_u64* pairs; /* %s */\n", SymCtl, SymAgg, SymFuncSets, SymPairs)
	w.printf("  hk_hookbuf_t hook[%d];\n  hk_u32 device;\n  hk_u32 comm; /* the communicator's index on this device: one context per communicator */\n} hk_ctx_t;\n\n", H)
	w.printf("/* Written once by the host after loading; its address is devCtx. */\nHK_VAR hk_ctx_t %s;\n", SymCtx)
	w.printf("/* ctl[h]: positions reserved by hook h; ctl[%d+h]: hook h's limit (drop_newest). */\nHK_VAR hk_u64 %s[%d];\n", H, SymCtl, 2*H)
	if m.AggWords > 0 {
		w.printf("/* Aggregation cells, %d words. */\nHK_VAR hk_u64 %s[%d];\n", m.AggWords, SymAgg, m.AggWords)
	} else {
		w.printf("/* No aggregates: one word so that the symbol exists. */\nHK_VAR hk_u64 %s[1];\n", SymAgg)
	}
	if len(m.FuncSets) > 0 {
		w.printf("/* Function-id sets of the name predicates, filled by the host at init. */\nHK_VAR hk_u32 %s[%d][%d];\n", SymFuncSets, len(m.FuncSets), FuncSetWords)
		for _, fs := range m.FuncSets {
			w.printf("/*   set %d: hook %s, func %s */\n", fs.Index, comment(fmt.Sprintf("%q", fs.Hook)), comment(predText(fs.Pred)))
		}
	} else {
		w.printf("/* No name predicates: one set so that the symbol exists. */\nHK_VAR hk_u32 %s[1][%d];\n", SymFuncSets, FuncSetWords)
	}
	w.printf("HK_FN int hk_in_funcset(const hk_ctx_t* HK_RESTRICT cx, int set, hk_u32 id) {\n")
	w.printf("  return id < %du && ((hk_load32_ro(&cx->funcsets[set * %d + (id >> 5)]) >> (id & 31u)) & 1u);\n}\n\n", FuncSetWords*32, FuncSetWords)
}
