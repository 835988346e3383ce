package hookgen

// pairing.go writes the duration pairing: the derived values and the pairing table keyed by
// (communicator, channel, workCounter).

// Duration pairing table geometry: (communicator % pairComms, channel %
// pairChannels, workCounter % pairDepth). NCCL runs a communicator's work on
// a channel in order, one block per channel, so an entry has one writer at a
// time wherever that block runs (a preempted block may resume on another
// multiprocessor). A depth of 64 holds a whole batch: NCCL starts every work
// item of a batch (up to 64, its offsetBitset) before it stops the first.
// Larger ids wrap into a shared entry, and the entry's tag
// (all three ids) tells them apart: a wrap can only cost a pairing, never
// memory safety or a wrong duration.
const (
	pairComms    = 64
	pairChannels = 64
	pairDepth    = 64
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
	w.printf("/* ---- duration pairing (docs/ARCHITECTURE.md): entries keyed by (communicator,\n")
	w.printf("   channel, workCounter %% %d), written at START with one 16-byte store {tag, timestamp}\n", pairDepth)
	w.printf("   and read at STOP with one 16-byte load through the L1. The tag holds all three ids (communicator\n")
	w.printf("   mod 256, channel, workCounter mod 2^48), so ids that share an entry do not pair. ---- */\n")
	w.printf("#define HK_PAIR_COMMS %d\n#define HK_PAIR_CHANNELS %d\n#define HK_PAIR_DEPTH %d\n", pairComms, pairChannels, pairDepth)
	w.printf("/* The pairing tag: communicator (8 bits), channel (8 bits), workCounter + 1 (48 bits); 0 = empty. */\n")
	w.printf("HK_FN hk_u64 hk_pair_tag(hk_u32 comm, const ncclProfilerDevEvent_t* ev) {\n")
	w.printf("  return ((hk_u64)(comm & 0xffu) << 56) | ((hk_u64)ev->channelId << 48) | ((ev->workCounter + 1ULL) & 0xffffffffffffULL);\n}\n")
	w.printf("HK_VAR hk_u64 %s[HK_PAIR_COMMS * HK_PAIR_CHANNELS * HK_PAIR_DEPTH * 2] __attribute__((aligned(16)));\n", SymPairs)
	w.printf(`HK_FN void hk_pair(const hk_ctx_t* HK_RESTRICT cx, const ncclProfilerDevEvent_t* ev, hk_derived_t* d) {
  const hk_u32 entry = ((cx->comm %% HK_PAIR_COMMS) * HK_PAIR_CHANNELS + ev->channelId %% HK_PAIR_CHANNELS) * HK_PAIR_DEPTH +
                       (hk_u32)(ev->workCounter %% HK_PAIR_DEPTH);
  hk_u64* e = cx->pairs + 2u * entry; /* {tag, START timestamp} */
  const hk_u64 tag = hk_pair_tag(cx->comm, ev);
  if (ev->phase == 0) {
    hk_store64x2(e, tag, ev->timestamp);
  } else if (ev->phase == 1) {
    hk_u64 seen, start;
    hk_load64x2_l1(e, &seen, &start);
    if (seen == tag) {
      d->duration = ev->timestamp >= start ? ev->timestamp - start : 0ULL;
      d->paired = 1;
      hk_store64(e, 0ULL); /* a second STOP does not pair again */
    }
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
