package hookgen

// aggregate.go writes the aggregates: each aggregate's cell offset and its update by relaxed
// atomics.

import (
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/ncclhooks/ncclhooks/internal/config"
)

// aggInfo places an aggregate at offset of the host's cells, with config's
// geometry (layoutBlock places it in a block's).
func aggInfo(hook string, a *config.Aggregate, offset int) *AggInfo {
	return &AggInfo{Hook: hook, Agg: a, Offset: offset, Keys: a.Keys(), RowWords: a.RowWords(), Overflow: len(a.By) > 0,
		ByComm: slices.Contains(a.By, "comm")}
}

func (g *generator) aggOf(a *config.Aggregate) *AggInfo {
	for _, info := range g.m.Aggs {
		if info.Agg == a {
			return info
		}
	}
	panic("hookgen: aggregate without AggInfo")
}

// aggregate writes one aggregate's update (docs/ARCHITECTURE.md
// "Aggregates"): relaxed atomics whose results are unused.
func (g *generator) aggregate(t *translator, h *config.Hook, a *config.Aggregate, info *AggInfo) error {
	w := &g.w
	return w.span(h.Name, "aggregate "+a.Name, a.Pos, func() error {
		desc := string(a.Kind)
		if a.Value != nil {
			desc += " of " + a.Value.Source
		}
		if len(a.By) > 0 {
			desc += " by " + strings.Join(a.By, ", ")
		}
		w.printf("  /* aggregate %s: %s (%s) */\n  {\n", comment(fmt.Sprintf("%q", a.Name)), comment(desc), g.at.pos(a.Pos))
		row := "0u"
		for _, by := range a.By {
			var key string
			switch by {
			case "funcId":
				key = fmt.Sprintf("hk_key(ev->funcId, %du)", config.MaxFuncIDs)
				if row != "0u" {
					return fmt.Errorf("%s: aggregate %q: by funcId must come before channelId", a.Pos, a.Name)
				}
			case "channelId":
				key = fmt.Sprintf("hk_key(ev->channelId, %du)", config.MaxChannels)
				if row != "0u" {
					key = fmt.Sprintf("%s * %du + %s", row, config.MaxChannels+1, key)
				}
			case "comm":
				// The block is the communicator's own: no key to compute
				// (Module.AddAgg puts its rows in the communicator's, the
				// host's fastest-varying key).
				if by != a.By[len(a.By)-1] {
					return fmt.Errorf("%s: aggregate %q: by comm must come last", a.Pos, a.Name)
				}
				continue
			default:
				return fmt.Errorf("%s: aggregate %q: cannot key by %q; use funcId, channelId and/or comm", a.Pos, a.Name, by)
			}
			row = key
		}
		w.printf("    hk_u64* cell = HK_AGG(blk) + %d + (%s) * %d;\n", info.DevOffset, row, info.RowWords)
		var v cexpr
		if a.Value != nil {
			t.at = a.Value.Pos
			var err error
			if v, err = t.expr(a.Value.Tree); err != nil {
				return exprErr(h, "aggregate "+a.Name, err)
			}
			if v.kind == kindBool {
				v = cexpr{"(" + v.code + " ? 1LL : 0LL)", kindInt}
			}
			if a.Kind == config.AggSum && v.kind == kindFloat {
				w.printf("    const double v = %s;\n", v.code)
			} else {
				if v.kind == kindFloat { // integer aggregates: truncate, saturate
					v.code = "hk_f2i(" + v.code + ")"
				}
				w.printf("    const hk_i64 v = %s;\n", v.code)
			}
		}
		w.printf("    hk_red_add(&cell[0], 1ULL);\n")
		switch a.Kind {
		case config.AggSum:
			if v.kind == kindFloat {
				w.printf("    hk_red_add_f64(&cell[1], v);\n")
			} else {
				w.printf("    hk_red_add(&cell[1], (hk_u64)v);\n")
			}
		case config.AggMin:
			w.printf("    hk_red_max(&cell[1], ~hk_enc(v)); /* max of the complement: 0 means none */\n")
		case config.AggMax:
			w.printf("    hk_red_max(&cell[1], hk_enc(v));\n")
		case config.AggHistogram:
			w.printf("    hk_red_add(&cell[1], (hk_u64)v);\n")
			if a.Buckets.Log2 {
				w.printf("    hk_red_add(&cell[2 + hk_log2_bucket(v)], 1ULL);\n")
			} else {
				w.printf("    hk_red_add(&cell[2 + %s], 1ULL);\n", boundsBucket(a.Buckets.Bounds))
			}
		case config.AggCount:
		default:
			return fmt.Errorf("%s: aggregate %q: unknown kind %q; use count, sum, min, max or histogram", a.Pos, a.Name, a.Kind)
		}
		w.printf("  }\n")
		return nil
	})
}

// boundsBucket picks the first bucket whose bound v does not exceed, or the
// final +Inf bucket, as one branch-free-friendly conditional chain.
func boundsBucket(bounds []uint64) string {
	s := fmt.Sprintf("%du", len(bounds))
	for i := len(bounds) - 1; i >= 0; i-- {
		b := bounds[i]
		if b > math.MaxInt64 { // every int64 is below it
			b = math.MaxInt64
		}
		s = fmt.Sprintf("((v <= %dLL) ? %du : %s)", b, i, s)
	}
	return s
}
