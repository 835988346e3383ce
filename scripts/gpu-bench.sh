#!/usr/bin/env bash
# The benchmarks on the GPU machine (no Go there): run `scripts/gpu-check.sh build` here first.
# Results and a CPU profile of the drain go to $OUT (or out/gpu-bench).
OUT=${OUT:-out/gpu-bench}
export NCCL_HOOKS_CACHE_DIR=/tmp/ncclhooks-cache
mkdir -p "$OUT"
.dev/gpu/ncclhooks bench -profiles bench/profiles/count.yaml,examples/all-events.yaml,examples/latency.yaml,examples/field-capture.yaml \
  -rates 5e6,1e7,1.5e7,2e7,3e7,4e7 -o "$OUT/bench.md" -cpuprofile "$OUT/drain.pprof" 2>&1 | tee "$OUT/bench.log"
