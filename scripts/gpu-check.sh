#!/usr/bin/env bash
# Everything ncclhooks proves on a GPU machine, in one go (the device machine
# has no Go: build there-runnable binaries first with `scripts/gpu-check.sh build`,
# which writes .dev/gpu/, then run `scripts/gpu-check.sh run` on the GPU machine).
# Results go to $OUT (or out/gpu-check).
set -uo pipefail
cd "$(dirname "$0")/.."
BIN=.dev/gpu
case "${1:-}" in
build)
  mkdir -p $BIN
  make build >/dev/null || exit 1
  cp build/ncclhooks build/libnccl-profiler-hooks.so $BIN/
  for p in nvrtc backend/gpu harness/gpu; do
    go test -c -o $BIN/$(echo $p | tr / _).test ./$p || exit 1
  done
  exit 0 ;;
run) ;;
*) echo "usage: $0 build|run"; exit 2 ;;
esac
OUT=${OUT:-out/gpu-check}
ROOT=$PWD
WORK=/tmp/gpu-check   # everything; $OUT gets the summary files only (the device tool brings back 8)
mkdir -p "$OUT" "$WORK"
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export NCCL_HOOKS_CACHE_DIR=/tmp/ncclhooks-cache
{
  echo "== machine"; nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader; date -u
  for p in nvrtc backend/gpu harness/gpu; do
    echo "== go test ./$p"
    (cd $p && "$ROOT/$BIN/$(echo $p | tr / _).test" -test.v -test.count=1 > "$WORK/test-$(echo $p | tr / _).log" 2>&1; echo "exit $?")
    grep -E "^(--- |PASS|FAIL|ok|panic)" "$WORK/test-$(echo $p | tr / _).log" | head -60
  done
  for ex in all-events latency skew field-capture sampled-trace; do
    echo "== ncclhooks run examples/$ex.yaml --backend gpu"
    $BIN/ncclhooks run examples/$ex.yaml --backend gpu --out "$WORK/$ex" --devices 1 --comms 4 --channels 16 --items 1000 --batch 4 --bytes 65536 2>&1 | tail -14
  done
  echo "== graph mode"
  $BIN/ncclhooks run examples/all-events.yaml --backend gpu --graph --replays 5 --out "$WORK/graph" --devices 1 --comms 3 --channels 16 --items 400 2>&1 | tail -8
  echo "== make demo equivalent (auto backend)"
  (cd /tmp && rm -rf demo && $OLDPWD/$BIN/ncclhooks run $OLDPWD/examples/all-events.yaml --out /tmp/demo 2>&1 | tail -8)
  echo "== report / trace on the GPU output"
  $BIN/ncclhooks report "$WORK/all-events" 2>&1 | head -30
  $BIN/ncclhooks trace "$WORK/sampled-trace" -o "$WORK/trace.json" 2>&1 | tail -3
  echo "== torch + released NCCL loads the plugin"
  timeout 300 python3 harness/torch/torch_nccl_load.py $BIN/libnccl-profiler-hooks.so examples/all-events.yaml "$WORK/torch" 2>&1 | tail -40
  echo "== bench"
  $BIN/ncclhooks bench -profiles examples/all-events.yaml,examples/latency.yaml -o "$OUT/bench.md" 2>&1
} 2>&1 | tee "$OUT/gpu-check.log"
tar czf "$OUT/work.tgz" -C /tmp gpu-check 2>/dev/null
