package hookgen

// pairing.go writes the duration pairing: the derived values and the pairing table keyed by
// (multiprocessor, warp slot, workCounter).

// Duration pairing table geometry: (multiprocessor, warp slot, workCounter
// % pairDepth). 256 multiprocessors and 64 warp slots cover every current
// GPU; larger ids wrap, which can only cost a pairing, never memory safety.
const (
	pairSMs   = 256
	pairWarps = 64
	pairDepth = 8
)

func (g *generator) usesPairing() bool {
	for _, h := range g.m.Hooks {
		used := g.hookNames(h.Hook)
		if used["duration"] || used["paired"] {
			return true
		}
	}
	return false
}

func (g *generator) pairingTable() {
	w := &g.w
	w.printf("/* ---- duration pairing (docs/ARCHITECTURE.md): entries keyed by (multiprocessor,\n")
	w.printf("   warp slot, workCounter %% %d). A block's thread 0 owns its warp slot while it runs, so\n", pairDepth)
	w.printf("   concurrent kernels with the same channel ids never share an entry. ---- */\n")
	w.printf("#define HK_PAIR_SMS %d\n#define HK_PAIR_WARPS %d\n#define HK_PAIR_DEPTH %d\n", pairSMs, pairWarps, pairDepth)
	w.printf("typedef struct {\n  hk_u64 key; /* workCounter + 1; 0 = empty */\n  hk_u64 channel;\n  hk_u64 start;\n} hk_pair_t;\n")
	w.printf("HK_VAR hk_pair_t %s[HK_PAIR_SMS * HK_PAIR_WARPS * HK_PAIR_DEPTH];\n", SymPairs)
	w.printf(`HK_FN void hk_pair(const hk_ctx_t* HK_RESTRICT cx, const ncclProfilerDevEvent_t* ev, hk_derived_t* d) {
#ifdef HK_GPU
  const hk_u32 owner = (hk_smid() %% HK_PAIR_SMS) * HK_PAIR_WARPS + hk_warpid() %% HK_PAIR_WARPS;
#else
  const hk_u32 owner = hk_warpid() %% (HK_PAIR_SMS * HK_PAIR_WARPS); /* thread slot */
#endif
  hk_pair_t* e = &((hk_pair_t*)cx->pairs)[owner * HK_PAIR_DEPTH + (hk_u32)(ev->workCounter %% HK_PAIR_DEPTH)];
  if (ev->phase == 0) {
    hk_store64(&e->channel, ev->channelId);
    hk_store64(&e->start, ev->timestamp);
    hk_store64(&e->key, ev->workCounter + 1ULL);
  } else if (ev->phase == 1 && hk_load64(&e->key) == ev->workCounter + 1ULL &&
             hk_load64(&e->channel) == ev->channelId) {
    const hk_u64 start = hk_load64(&e->start);
    d->duration = ev->timestamp >= start ? ev->timestamp - start : 0ULL;
    d->paired = 1;
    hk_store64(&e->key, 0ULL); /* a second STOP does not pair again */
  }
}

`)
}

// derived writes the values derived from several events and, when a hook
// uses them, the duration pairing table that computes them.
func (g *generator) derived(pairing bool) {
	w := &g.w
	w.printf("/* Values derived from several events: duration and paired (at STOP). */\n")
	w.printf("typedef struct {\n  hk_u64 duration;\n  int paired;\n} hk_derived_t;\n\n")
	if pairing {
		g.pairingTable()
	} else {
		w.printf("/* No duration pairing: one word so that the symbol exists. */\nHK_VAR hk_u64 %s[1];\n\n", SymPairs)
	}
}
