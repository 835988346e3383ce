#!/usr/bin/env bash
# The record path without a returning atomic, as a prototype to read in SASS
# (bench/RESULTS.md "Positions from the work counter"): all-events as
# ncclhooks generates it, and the same module with its record position taken
# from the event (a region per (channel, phase), the position its workCounter,
# matched and full counted with fire-and-forget reductions, the drop_newest
# limit read through the L1). Compiled offline, nothing runs: needs nvcc and
# cuobjdump (CUDA 11.8 or later, for sm_90), and the CLI (make build; BIN names another).
set -euo pipefail
cd "$(dirname "$0")/../.."
BIN=${BIN:-build/ncclhooks} # make build
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$BIN" gen examples/all-events.yaml -o "$work/atomic.cu"
python3 - "$work/atomic.cu" "$work/regions.cu" <<'PY'
import sys
s = open(sys.argv[1]).read()
s = s.replace('} hk_hookbuf_t;', '''  hk_u64* ctr;    /* per region (channel, phase): matched, full */
  hk_u64* limits; /* per region: the drop_newest limit, written by the host */
} hk_hookbuf_t;''', 1)
a = s.index('    const hk_u64 limit = hk_load64(&cx->ctl[1]);')
b = s.index('      const hk_u64 stamp', s.index('      hk_u64* slot = cx->hook[0].slots'))
s = s[:a] + '''    /* the region (channel, phase) of this communicator's context: one writer, the
       channel's block, whose positions are the work counters, in order */
    const hk_u32 r = ((hk_u32)(ev->channelId & 63u) << 1) | (hk_u32)(ev->phase & 1u);
    const hk_u64 pos = ev->workCounter;
    hk_u64* ctr = cx->hook[0].ctr + 2u * r;
    const hk_u64 limit = hk_load64_cached(cx->hook[0].limits + r);
    hk_red_add(ctr, 1ULL); /* matched */
    if (pos >= limit) { /* buffer full: counted, no record */
      hk_red_add(ctr + 1, 1ULL);
    } else {
      hk_u64* slot = cx->hook[0].slots + ((hk_u64)r * 512ULL + (pos & 511ULL)) * 6ULL;
''' + s[b:]
s = s.replace('HK_FN void hk_store64(hk_u64* p, hk_u64 v) { asm volatile("st.volatile', '''HK_FN hk_u64 hk_load64_cached(const hk_u64* p) {
  hk_u64 r;
  asm volatile("ld.global.ca.u64 %0, [%1];" : "=l"(r) : "l"(p));
  return r;
}
HK_FN void hk_store64(hk_u64* p, hk_u64 v) { asm volatile("st.volatile''', 1)
open(sys.argv[2], 'w').write(s)
PY
printf "%-8s %6s %8s %5s %6s %6s\n" variant instrs atomics reds loads stores
for v in atomic regions; do
  nvcc -arch=sm_90 -rdc=true -cubin -o "$work/$v.cubin" "$work/$v.cu"
  cuobjdump -sass -fun ncclhooks_entry "$work/$v.cubin" | grep -E '^\s+/\*[0-9a-f]{4}\*/' | grep -v NOP > "$work/$v.sass"
  printf "%-8s %6d %8d %5d %6d %6d\n" $v $(wc -l < "$work/$v.sass") $(grep -cE 'ATOMG|ATOM\.' "$work/$v.sass" || true) \
    $(grep -c 'RED' "$work/$v.sass" || true) $(grep -cE '\bLD(G)?\.' "$work/$v.sass" || true) $(grep -cE '\bST(G)?\.' "$work/$v.sass" || true)
  [ -z "${SHOW:-}" ] || grep -E 'LD|ST|RED|ATOM' "$work/$v.sass"
done
