package hookgen

// record.go writes the record protocol of the record slots: a hook's fields packed into stamped
// chunks.

import (
	"fmt"
	"strings"

	"github.com/ncclhooks/ncclhooks/internal/config"
)

// record writes the record protocol of docs/ARCHITECTURE.md "Record slots".
func (g *generator) record(t *translator, info *HookInfo) error {
	h, w, l := info.Hook, &g.w, &info.Layout
	H := len(g.m.Hooks)
	pos := h.Pos
	if len(h.Fields) > 0 {
		pos = h.Fields[0].Pos
	}
	return w.span(h.Name, "record", pos, func() error {
		if info.Work {
			if h.DrainAggregates() {
				w.printf("  /* record for the drain's aggregates: timestamp and funcId in %d chunks; %d slots in each\n", l.Chunks, info.RegionSlots)
				w.printf("     of %d channel regions, positions from the work counter, %s */\n  {\n", config.RegionChannels, workPolicy(info))
			} else {
				if len(l.Implied) > 0 {
					w.printf("  /* record: %d fields, %d bytes in %d chunks, %d of them stored (the work counter's are\n",
						len(l.Fields), l.Bytes, l.Chunks, l.SlotWords())
					w.printf("     the position's); %d slots in each of %d channel regions, positions from the work\n",
						info.RegionSlots, config.RegionChannels)
					w.printf("     counter, %s */\n  {\n", workPolicy(info))
				} else {
					w.printf("  /* record: %d fields, %d bytes in %d chunks; %d slots in each of %d channel regions,\n",
						len(l.Fields), l.Bytes, l.Chunks, info.RegionSlots, config.RegionChannels)
					w.printf("     positions from the work counter, %s */\n  {\n", workPolicy(info))
				}
			}
			w.printf("    const hk_u64 pos = 2ULL * ev->workCounter + (hk_u64)(ev->phase & 1u);\n")
			w.printf("    /* a channel beyond NCCL's %d shares the region of its id mod %d: it never writes past\n", config.RegionChannels, config.RegionChannels)
			w.printf("       the block, but the drain may take its records for that channel's */\n")
			w.printf("    hk_u64* slot = HK_REGIONS(blk, HK_BLOCK_REGIONS_%d) +\n", info.Index)
			w.printf("        ((hk_u64)(ev->channelId & %du) * %dULL + (pos & %dULL)) * %dULL;\n",
				config.RegionChannels-1, info.RegionSlots, info.RegionSlots-1, l.SlotWords())
			if err := g.recordStores(t, info, "    "); err != nil {
				return err
			}
			w.printf("  }\n")
			return nil
		}
		w.printf("  /* record: %d fields, %d bytes in %d chunks; %d slots, %s */\n  {\n",
			len(l.Fields), l.Bytes, l.Chunks, info.Slots, comment(string(info.Overflow)))
		dropNewest := info.Overflow == config.DropNewest
		w.printf("    hk_u64* const ctl = HK_CTL(blk);\n")
		if dropNewest {
			w.printf("    const hk_u64 limit = hk_load64(&ctl[%d]);\n", H+info.Index)
		}
		w.printf("    const hk_u64 pos = hk_fetch_inc(&ctl[%d]);\n", info.Index)
		mask := fmt.Sprintf("%dULL", info.Slots-1)
		if dropNewest {
			w.printf("    if (pos >= limit) { /* buffer full: leave a hole stamp, no record */\n")
			w.printf("      hk_store32(&cx->hook[%d].holes[pos & %s], (hk_u32)(pos + 1ULL));\n", info.Index, mask)
			w.printf("    } else {\n")
		} else {
			w.printf("    {\n")
		}
		w.printf("      hk_u64* slot = cx->hook[%d].slots + (pos & %s) * %dULL;\n", info.Index, mask, l.Chunks)
		if err := g.recordStores(t, info, "      "); err != nil {
			return err
		}
		w.printf("    }\n  }\n")
		return nil
	})
}

// workPolicy names the overflow policy of a hook with work positions, which
// the drain applies: the device writes every position.
func workPolicy(info *HookInfo) string {
	if info.Overflow == config.DropNewest {
		return "drop_newest (the drain's: no limit is read)"
	}
	return comment(string(info.Overflow))
}

// recordStores writes the end of a record, each line indented by in: its
// stamp, fields, chunks and stores into slot, at pos.
func (g *generator) recordStores(t *translator, info *HookInfo, in string) error {
	h, w, l := info.Hook, &g.w, &info.Layout
	w.printf("%sconst hk_u64 stamp = (hk_u64)(hk_u32)(pos + 1ULL) << 32;\n", in)
	if h.DrainAggregates() {
		g.drainStores(in)
		return nil
	}
	for i, f := range l.Fields {
		cf := h.Fields[i]
		err := w.span(h.Name, "field "+f.Name, cf.Pos, func() error {
			if l.implied(f) {
				w.printf("%s/* field %s <- %s as %s at byte %d (%s): the drain's, from the position */\n",
					in, comment(f.Name), comment(f.Source), f.Type, f.Offset, g.at.pos(cf.Pos))
				return nil
			}
			src, ok := t.names[f.Source]
			if !ok {
				return fmt.Errorf("%s: hook %q: field %q: unknown source %q", cf.Pos, h.Name, f.Name, f.Source)
			}
			w.printf("%s/* field %s <- %s as %s at byte %d (%s) */\n", in, comment(f.Name), comment(f.Source), f.Type, f.Offset, g.at.pos(cf.Pos))
			w.printf("%sconst hk_u64 f%d = %s;\n", in, i, fieldBits(src, f.Type))
			return nil
		})
		if err != nil {
			return err
		}
	}
	stored := l.Stored()
	for _, c := range stored {
		w.printf("%sconst hk_u32 c%d = %s;\n", in, c, chunk(l, c))
	}
	for i := 0; i < len(stored); {
		if len(stored)%2 == 0 { // slots are 16-byte aligned: vector stores
			w.printf("%shk_store64x2(slot + %d, stamp | c%d, stamp | c%d);\n", in, i, stored[i], stored[i+1])
			i += 2
			continue
		}
		w.printf("%shk_store64(slot + %d, stamp | c%d);\n", in, i, stored[i])
		i++
	}
	return nil
}

// drainStores writes a drain record's chunks (DrainRecord) and its store.
func (g *generator) drainStores(in string) {
	w := &g.w
	w.printf("%s/* the timestamp's low %d bits: the drain's durations are their differences */\n", in, DrainTimeBits)
	w.printf("%sconst hk_u64 t = ev->timestamp;\n", in)
	w.printf("%s/* the funcId key: %d, the overflow row, for any larger id */\n", in, config.MaxFuncIDs)
	w.printf("%sconst hk_u32 fn = ev->funcId < %du ? ev->funcId : %du;\n", in, config.MaxFuncIDs, config.MaxFuncIDs)
	w.printf("%sconst hk_u32 c0 = (hk_u32)t;\n", in)
	w.printf("%sconst hk_u32 c1 = ((hk_u32)(t >> 32) & %#xu) | fn << %d;\n", in, 1<<DrainFuncShift-1, DrainFuncShift)
	w.printf("%shk_store64x2(slot + 0, stamp | c0, stamp | c1);\n", in)
}

// fieldBits converts a value to the little-endian bits of a stored type,
// zero-extended to 64 bits.
func fieldBits(v cexpr, t config.Type) string {
	if t == config.Bool {
		return "(" + v.code + " ? 1ULL : 0ULL)"
	}
	if v.kind == kindBool {
		v = cexpr{"(" + v.code + " ? 1LL : 0LL)", kindInt}
	}
	switch t {
	case config.F32:
		return "(hk_u64)hk_f32_bits((float)" + v.code + ")"
	case config.F64:
		return "hk_f64_bits(" + toFloat(v) + ")"
	}
	i := v.code
	if v.kind == kindFloat {
		i = "hk_f2i(" + v.code + ")"
	}
	if t.Bytes() == 8 {
		return "(hk_u64)" + i
	}
	width := map[int]string{1: "hk_u8", 2: "hk_u16", 4: "hk_u32"}[t.Bytes()]
	return "(hk_u64)(" + width + ")" + i
}

// chunk is the C expression of 32-bit chunk c of the packed payload: bytes
// [4c, 4c+4), assembled from the fields that overlap them.
func chunk(l *Layout, c int) string {
	var terms []string
	for i, f := range l.Fields {
		lo, hi := f.Offset, f.Offset+f.Type.Bytes()
		if hi <= 4*c || lo >= 4*c+4 {
			continue
		}
		switch shift := 8 * (lo - 4*c); {
		case shift > 0:
			terms = append(terms, fmt.Sprintf("(hk_u32)(f%d << %d)", i, shift))
		case shift < 0:
			terms = append(terms, fmt.Sprintf("(hk_u32)(f%d >> %d)", i, -shift))
		default:
			terms = append(terms, fmt.Sprintf("(hk_u32)f%d", i))
		}
	}
	return strings.Join(terms, " | ")
}
