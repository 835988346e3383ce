#!/usr/bin/env bash
# Acceptance inside real NCCL built with the device hook, on one GPU:
#   scripts/nccl-accept.sh NCCL_DIR [--no-timing]
# NCCL_DIR is a hook-enabled build (scripts/build-nccl.sh --out NCCL_DIR).
# For every example profile, with 1 and 4 one-rank communicators initialised
# concurrently on their own streams: grouped send/recv to self in a loop and
# from a replayed CUDA graph (nccl/accept/accept.cu checks the data), then
# `ncclhooks check` on the plugin's output (records + drops = matched, one
# comm line per communicator, one START and one STOP per communicator,
# channel and work item, function names from NCCL's ncclProfilerDevFuncName).
# Then the time per NCCL call: no plugin, the nop hook, every example.
# Needs the plugin and CLI in $BIN (default .dev/gpu, scripts/gpu-check.sh
# build) and nvcc. Results go to $OUT (default out/nccl-accept).
set -uo pipefail
cd "$(dirname "$0")/.."
NCCL=$(realpath "${1:?usage: nccl-accept.sh NCCL_DIR [--no-timing]}")
TIMING=1
[ "${2:-}" = "--no-timing" ] && TIMING=0
BIN=${BIN:-.dev/gpu}
OUT=${OUT:-out/nccl-accept}
NVCC=${NVCC:-nvcc}
W=${WORK:-/tmp/nccl-accept}
mkdir -p "$OUT" "$W"
PLUGIN=$(realpath "$BIN/libnccl-profiler-hooks.so")
CLI=$(realpath "$BIN/ncclhooks")
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export LD_LIBRARY_PATH=$NCCL/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export NCCL_HOOKS_CACHE_DIR=$W/cache
tag=$(cat "$NCCL/build-info.txt" 2>/dev/null | grep -m1 -oE 'v[0-9]+\.[0-9]+\.[0-9]+-[0-9]+' || echo "?")

"$NVCC" -std=c++17 -O2 -arch="${ARCH:-sm_90}" -o "$W/accept" nccl/accept/accept.cu -I"$NCCL/include" -L"$NCCL/lib" -lnccl -lpthread \
  > "$W/accept-build.log" 2>&1 || { cat "$W/accept-build.log"; exit 1; }

status=0
echo "== NCCL $tag ($NCCL): acceptance"
printf "%-16s %-6s %-8s %-6s %-10s %s\n" profile comms nccl data plugin check
for p in examples/*.yaml; do
  name=$(basename "$p" .yaml)
  for comms in 1 4; do
    d=$W/$tag-$name-c$comms
    rm -rf "$d"
    NCCL_PROFILER_PLUGIN=$PLUGIN NCCL_HOOKS_PROFILE=$PWD/$p NCCL_HOOKS_DUMP_DIR=$d \
      NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,PROFILE timeout 180 "$W/accept" --comms $comms --iters 50 --graph-iters 10 --replays 5 \
      > "$d.log" 2>&1
    rc=$?
    line=$(grep -m1 '^ACCEPT' "$d.log" || echo "ACCEPT none")
    loaded=$(grep -m1 -oE 'Loaded [A-Za-z0-9_-]+ \(v[0-9]+\)' "$d.log" | head -1)
    warns=$(grep -c 'NCCL WARN' "$d.log")
    "$CLI" check "$d" --profile "$p" --comms $comms > "$d.check" 2>&1
    crc=$?
    data=$([ $rc = 0 ] && echo ok || echo "FAIL($rc)")
    printf "%-16s %-6s %-8s %-6s %-10s %s\n" "$name" $comms "$tag" "$data" "${loaded:-not-loaded}" \
      "$([ $crc = 0 ] && echo exact || echo MISMATCH), WARN lines: $warns"
    # The patched NCCL must take the plugin's v7 (PR 2285's, with getDeviceHook).
    if [ $rc != 0 ] || [ $crc != 0 ] || [ "$warns" != 0 ] || [[ "$loaded" != *"(v7)"* ]]; then
      status=1
      echo "---- $d.log"; grep -E 'ACCEPT|WARN|ncclhooks|Loaded' "$d.log" | head -20
      echo "---- check"; cat "$d.check" | head -30
    fi
  done
done
# One full check output, as the note shows it.
cat "$W/$tag-all-events-c4.check" 2>/dev/null | cut -c1-400

[ $TIMING = 1 ] || exit $status
echo "== NCCL $tag: time per NCCL call (grouped send/recv to self, 1 communicator; best of 5 rounds of 2000 calls in each of 2 processes)"
run_timing() { # label profile-or-empty bytes
  local label=$1 prof=$2 bytes=$3 env=()
  [ -n "$prof" ] && env=(NCCL_PROFILER_PLUGIN=$PLUGIN NCCL_HOOKS_PROFILE=$PWD/$prof NCCL_HOOKS_DUMP_DIR=$W/timing-$label)
  env "${env[@]}" timeout 120 "$W/accept" --time 2000 --bytes "$bytes" 2>/dev/null | grep -m1 '^ACCEPT' | sed 's/^ACCEPT //'
}
for bytes in 8 65536; do
  rows=()
  for label in none nop all-events latency skew field-capture sampled-trace; do
    case $label in none) prof= ;; nop) prof=bench/profiles/nop.yaml ;; *) prof=examples/$label.yaml ;; esac
    best_s=9e9 best_g=9e9
    for round in 1 2; do
      j=$(run_timing "$label" "$prof" $bytes)
      s=$(echo "$j" | grep -oE '"us_per_call_stream":[0-9.]+' | cut -d: -f2)
      g=$(echo "$j" | grep -oE '"us_per_call_graph":[0-9.]+' | cut -d: -f2)
      [ -n "$s" ] && best_s=$(python3 -c "print(min($best_s, $s))")
      [ -n "$g" ] && best_g=$(python3 -c "print(min($best_g, $g))")
    done
    rows+=("$label $best_s $best_g")
  done
  python3 - "$bytes" "$tag" "${rows[@]}" <<'PY' | tee -a "$OUT/nccl-timing.md"
import sys
bytes_, tag, rows = sys.argv[1], sys.argv[2], [r.split() for r in sys.argv[3:]]
base = {r[0]: (float(r[1]), float(r[2])) for r in rows}
ns, ng = base["none"]
print(f"\n{bytes_} B per call, NCCL {tag} with the device hook patch (H200):\n")
print("| plugin / profile | us per call (stream) | vs no plugin | us per call (graph) | vs no plugin |")
print("| --- | --- | --- | --- | --- |")
for name, s, g in rows:
    s, g = float(s), float(g)
    print(f"| {name} | {s:.3f} | {100*(s/ns-1):+.2f}% | {g:.3f} | {100*(g/ng-1):+.2f}% |")
PY
done
exit $status
