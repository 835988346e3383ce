#!/usr/bin/env bash
# Two or more builds side by side on one GPU, alternating, as bench/RESULTS.md's A/B tables are
# measured: the hook cost (ncclhooks bench, ROUNDS_BENCH rounds) and the time per call inside
# patched NCCL (ROUNDS rounds of no plugin, the nop hook and each NCCL_PROFILES profile per build,
# one process each, as scripts/nccl-accept.sh times them). NCCL_PROFILES names examples, or gives
# profile paths (bench/profiles/count.yaml).
#   VARIANTS="base=.dev/ab/base new=.dev/gpu" scripts/gpu-ab.sh
# Each variant is NAME=DIR, DIR holding ncclhooks and libnccl-profiler-hooks.so (scripts/gpu-check.sh
# build); AB_ENV_NAME="VAR=value ..." adds environment for one variant (e.g. the defines
# bench/proto/regions-timing.patch reads). Needs nvcc and nccl/src (scripts/build-nccl.sh).
set -uo pipefail
cd "$(dirname "$0")/.."
read -ra VARS <<< "${VARIANTS:?VARIANTS=\"name=dir ...\"}"
PROFILES=${PROFILES:-examples/all-events.yaml,examples/latency.yaml,examples/field-capture.yaml}
read -ra NPROF <<< "${NCCL_PROFILES:-latency all-events field-capture}"
ROUNDS=${ROUNDS:-8}
ROUNDS_BENCH=${ROUNDS_BENCH:-3}
OUT=${OUT:-out/gpu-ab}
W=${WORK:-/tmp/gpu-ab}
mkdir -p "$OUT" "$W"
NCCL=${NCCL_DIR:-$W/nccl}
np=
if [ ! -f "$NCCL/lib/libnccl.so.2" ]; then
  scripts/build-nccl.sh --tag "${NCCL_TAG:-v2.28.9-1}" --arch sm_90 --jobs 12 --out "$NCCL" > "$W/build-nccl.log" 2>&1 &
  np=$!
fi
venv() { local n=${1//-/_}; local v="AB_ENV_$n"; echo "${!v:-}"; }
for round in $(seq "$ROUNDS_BENCH"); do
  for spec in "${VARS[@]}"; do
    name=${spec%%=*} dir=${spec#*=}
    echo "== bench $name, round $round"
    env $(venv "$name") "$dir/ncclhooks" bench -profiles "$PROFILES" -rates 1e6 2>&1 |
      grep -E '^ +[a-z0-9-]+ +[0-9.]+ +[0-9]+ +[0-9.]+x|registers' | grep -v warm
  done
done | tee "$OUT/ab-bench.txt"
[ -z "$np" ] || wait "$np" || { tail -5 "$W/build-nccl.log"; exit 1; }
export LD_LIBRARY_PATH=$NCCL/lib NCCL_NVLS_ENABLE=0 NCCL_HOOKS_CACHE_DIR=$W/cache
nvcc -std=c++17 -O2 -arch=sm_90 -o "$W/accept" nccl/accept/accept.cu -I"$NCCL/include" -L"$NCCL/lib" -lnccl -lpthread || exit 1
one() { # label [dir profile]
  local label=$1
  if [ $# = 1 ]; then
    echo "T $label $(timeout 120 "$W/accept" --time 2000 --bytes 8 2>/dev/null | grep -m1 '^ACCEPT')"
    return
  fi
  echo "T $label $(env $(venv "${label%%/*}") NCCL_PROFILER_PLUGIN=$(realpath "$2/libnccl-profiler-hooks.so") NCCL_HOOKS_PROFILE=$PWD/$3 \
    NCCL_HOOKS_DUMP_DIR=$W/d-$label-$RANDOM timeout 120 "$W/accept" --time 2000 --bytes 8 2>/dev/null | grep -m1 '^ACCEPT')"
}
first=${VARS[0]#*=}
for round in $(seq "$ROUNDS"); do
  one none
  one nop "$first" bench/profiles/nop.yaml
  for p in "${NPROF[@]}"; do
    # A name is an example (latency: examples/latency.yaml); a path is itself.
    f=examples/$p.yaml
    [[ $p == */* ]] && f=$p p=$(basename "$p" .yaml)
    for spec in "${VARS[@]}"; do one "${spec%%=*}/$p" "${spec#*=}" "$f"; done
  done
done > "$OUT/ab-nccl.txt"
python3 scripts/timing-table.py "$OUT/ab-nccl.txt" "$ROUNDS" "build / profile" | tee "$OUT/ab-nccl.md"
