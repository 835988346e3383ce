package hookgen

// pairing.go writes the duration pairing: the derived values and each communicator's pairing
// table, keyed by (channel, workCounter).

// Duration pairing table geometry, in each communicator's context block:
// (channel % pairChannels, workCounter % pairDepth). NCCL runs a
// communicator's work on a channel in order, one block per channel, so an
// entry has one writer at a time wherever that block runs (a preempted block
// may resume on another multiprocessor). A depth of 64 holds a whole batch:
// NCCL starts every work item of a batch (up to 64, its offsetBitset) before
// it stops the first. Larger ids wrap into a shared entry, and the entry's
// tag (channel and workCounter) tells them apart: a wrap can only cost a
// pairing, never memory safety or a wrong duration.
const (
	pairChannels = 64
	pairDepth    = 64
)

// PairWords is the number of 64-bit words of the pairing table: two per
// entry, {tag, START timestamp}.
const PairWords = pairChannels * pairDepth * 2

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
	w.printf("/* ---- duration pairing (docs/ARCHITECTURE.md): entries keyed by (channel, workCounter\n")
	w.printf("   %% %d) in the communicator's block, written at START with one 16-byte store {tag,\n", pairDepth)
	w.printf("   timestamp} and read at STOP with one 16-byte load through the L1. The tag holds both\n")
	w.printf("   ids (channel, workCounter mod 2^48), so ids that share an entry do not pair. ---- */\n")
	w.printf("#define HK_PAIR_CHANNELS %d\n#define HK_PAIR_DEPTH %d\n", pairChannels, pairDepth)
	w.printf("/* The pairing tag: channel (8 bits), workCounter + 1 (48 bits); 0 = empty. */\n")
	w.printf("HK_FN hk_u64 hk_pair_tag(const ncclProfilerDevEvent_t* ev) {\n")
	w.printf("  return ((hk_u64)ev->channelId << 48) | ((ev->workCounter + 1ULL) & 0xffffffffffffULL);\n}\n")
	w.printf(`HK_FN void hk_pair(hk_u8* blk, const ncclProfilerDevEvent_t* ev, hk_derived_t* d) {
  const hk_u32 entry = (ev->channelId %% HK_PAIR_CHANNELS) * HK_PAIR_DEPTH + (hk_u32)(ev->workCounter %% HK_PAIR_DEPTH);
  hk_u64* e = (hk_u64*)(blk + HK_BLOCK_PAIRS) + 2u * entry; /* {tag, START timestamp} */
  const hk_u64 tag = hk_pair_tag(ev);
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
// uses them, the duration pairing that computes them.
func (g *generator) derived(pairing bool) {
	w := &g.w
	w.printf("/* Values derived from several events: duration and paired (at STOP). */\n")
	w.printf("typedef struct {\n  hk_u64 duration;\n  int paired;\n} hk_derived_t;\n\n")
	if pairing {
		g.pairingTable()
	}
}
