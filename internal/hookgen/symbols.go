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
// symbols" and the layout of the context block: its header type, the offsets
// of its parts and the function-id test.
func (g *generator) symbols() {
	m, w := g.m, &g.w
	H := len(m.Hooks)
	b := m.Block
	w.printf("/* ---- module symbols and the context block (docs/ARCHITECTURE.md) ---- */\n")
	w.printf("HK_EXTERN_C_BEGIN\n\n")
	if m.Work {
		g.workSymbols()
		return
	}
	w.printf("typedef struct {\n  hk_u64* slots; /* N slots of C words */\n  hk_u32* holes; /* N hole stamps (drop_newest) */\n} hk_hookbuf_t;\n")
	w.printf("/* The header of a context block. The hook reaches all of its state through devCtx,\n")
	w.printf("   never by symbol: called from NCCL's kernel (another module), a function cannot\n")
	w.printf("   address its own module's globals, which the GPU resolves through the running\n")
	w.printf("   kernel's module. */\n")
	w.printf("typedef struct {\n")
	w.printf("  hk_hookbuf_t hook[%d];\n  hk_u32 device;\n  hk_u32 comm; /* the communicator's index on this device */\n} hk_ctx_t;\n\n", H)
	w.printf("/* devCtx points at the communicator's context block, which the host allocates and fills\n")
	w.printf("   before the hook is handed out: the header, then each part at a constant offset, so\n")
	w.printf("   that the hook computes their addresses from devCtx without loading one. */\n")
	if b.FuncSets > 0 {
		w.printf("#define HK_BLOCK_FUNCSETS %d /* %d function-id sets of %d words, filled by the host */\n", b.FuncSets, len(m.FuncSets), FuncSetWords)
		for _, fs := range m.FuncSets {
			w.printf("/*   set %d: hook %s, func %s */\n", fs.Index, comment(fmt.Sprintf("%q", fs.Hook)), comment(predText(fs.Pred)))
		}
	}
	if b.Pairs > 0 {
		w.printf("#define HK_BLOCK_PAIRS %d /* the duration pairing table, %d words */\n", b.Pairs, PairWords)
	}
	if b.Agg > 0 {
		w.printf("#define HK_BLOCK_AGG %d /* this communicator's aggregation cells, %d words */\n", b.Agg, b.AggWords)
		w.printf("#define HK_AGG(blk) ((hk_u64*)((blk) + HK_BLOCK_AGG))\n")
	}
	w.printf("#define HK_BLOCK_BYTES %d\n", b.Bytes)
	if m.Arena.Bound {
		w.printf("/* The device's arena, aligned to its size, opens with the control words, which every\n")
		w.printf("   communicator shares (ctl[h]: positions reserved by hook h; ctl[%d+h]: its limit,\n", H)
		w.printf("   drop_newest), and holds every context block: the control words are devCtx masked. */\n")
		w.printf("#define HK_ARENA_BYTES %dULL\n", m.Arena.Bytes)
		w.printf("#define HK_CTL(blk) ((hk_u64*)((hk_u64)(blk) & ~(HK_ARENA_BYTES - 1ULL)))\n")
	}
	if b.FuncSets > 0 {
		w.printf("HK_FN int hk_in_funcset(const hk_u8* blk, int set, hk_u32 id) {\n")
		w.printf("  const hk_u32* sets = (const hk_u32*)(blk + HK_BLOCK_FUNCSETS);\n")
		w.printf("  return id < %du && ((hk_load32_ro(&sets[set * %d + (id >> 5)]) >> (id & 31u)) & 1u);\n}\n", FuncSetWords*32, FuncSetWords)
	}
	w.printf("\n")
}

// workSymbols writes the layout of a Work module's block: each hook's
// regions, and devCtx's split into the block and the communicator's index.
func (g *generator) workSymbols() {
	m, w := g.m, &g.w
	w.printf("/* devCtx is the communicator's block plus its index on this device: the block, aligned\n")
	w.printf("   to %d bytes in host-mapped memory, holds each hook's regions, one per (communicator,\n", WorkBlockAlign)
	w.printf("   channel), and nothing else; a record's position is 2 x workCounter + phase in its\n")
	w.printf("   region. Nothing is loaded but the event: no counter, no header, no limit. */\n")
	w.printf("#define HK_COMM_MASK %dULL\n", WorkBlockAlign-1)
	w.printf("#define HK_COMM(blk) ((hk_u64)(blk) & HK_COMM_MASK)\n")
	w.printf("#define HK_REGIONS(blk, off) ((hk_u64*)((blk) - HK_COMM(blk) + (off)))\n")
	for _, h := range m.Hooks {
		w.printf("#define HK_BLOCK_REGIONS_%d %d /* hook %s: %d regions of %d slots of %d words */\n",
			h.Index, m.Block.Regions[h.Index], comment(fmt.Sprintf("%q", h.Name)), config.RegionChannels, h.RegionSlots, h.Layout.SlotWords())
	}
	w.printf("#define HK_BLOCK_BYTES %d\n\n", m.Block.Bytes)
}
