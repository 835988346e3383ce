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
# Then the time per NCCL call: no plugin, the nop hook and profiles in alternating
# rounds (TIMING_ROUNDS, TIMING_LABELS, TIMING_BYTES), medians and spread.
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
ROUNDS=${TIMING_ROUNDS:-8}
read -ra LABELS <<< "${TIMING_LABELS:-none nop latency drain-latency all-events every-event}"
read -ra SIZES <<< "${TIMING_BYTES:-8}"
echo "== NCCL $tag: time per NCCL call (grouped send/recv to self, 1 communicator; $ROUNDS rounds alternating ${LABELS[*]}, one process each, best of 5 x 2000 calls inside a process)"
run_timing() { # label profile-or-empty bytes
  local label=$1 prof=$2 bytes=$3 env=()
  [ -n "$prof" ] && env=(NCCL_PROFILER_PLUGIN=$PLUGIN NCCL_HOOKS_PROFILE=$PWD/$prof NCCL_HOOKS_DUMP_DIR=$W/timing-$label)
  env "${env[@]}" timeout 120 "$W/accept" --time 2000 --bytes "$bytes" 2>/dev/null | grep -m1 '^ACCEPT' | sed 's/^ACCEPT //'
}
for bytes in "${SIZES[@]}"; do
  samples=()
  for round in $(seq "$ROUNDS"); do
    for label in "${LABELS[@]}"; do
      case $label in none) prof= ;; nop) prof=bench/profiles/nop.yaml ;; *) prof=examples/$label.yaml ;; esac
      j=$(run_timing "$label" "$prof" $bytes)
      s=$(echo "$j" | grep -oE '"us_per_call_stream":[0-9.]+' | cut -d: -f2)
      g=$(echo "$j" | grep -oE '"us_per_call_graph":[0-9.]+' | cut -d: -f2)
      samples+=("$label ${s:-nan} ${g:-nan}")
    done
  done
  python3 - "$bytes" "$tag" "$ROUNDS" "${samples[@]}" <<'PY' | tee -a "$OUT/nccl-timing.md"
import sys, statistics, math
bytes_, tag, rounds = sys.argv[1], sys.argv[2], sys.argv[3]
by = {}
for r in sys.argv[4:]:
    name, s, g = r.split()
    by.setdefault(name, ([], []))
    if s != "nan": by[name][0].append(float(s))
    if g != "nan": by[name][1].append(float(g))
def med(v): return statistics.median(v) if v else math.nan
ns, ng = med(by["none"][0]), med(by["none"][1])
print(f"\n{bytes_} B per call, NCCL {tag} with the device hook patch (H200), {rounds} alternating rounds:\n")
print("| plugin / profile | runs | graph: median us per call | min - max | vs no plugin (median) | stream: median | min - max | vs no plugin |")
print("| --- | --- | --- | --- | --- | --- | --- | --- |")
for name, (s, g) in by.items():
    print(f"| {name} | {len(g)} | {med(g):.3f} | {min(g, default=math.nan):.3f} - {max(g, default=math.nan):.3f} | {100*(med(g)/ng-1):+.2f}% "
          f"| {med(s):.3f} | {min(s, default=math.nan):.3f} - {max(s, default=math.nan):.3f} | {100*(med(s)/ns-1):+.2f}% |")
PY
done
exit $status
