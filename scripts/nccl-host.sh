#!/usr/bin/env bash
# The profiles inside real NCCL on one GPU, from NCCL's host events or its
# device hook (NCCL_HOOKS_SOURCE):
#   scripts/nccl-host.sh NCCL_LIB_DIR NCCL_INCLUDE_DIR LABEL [--source host|device] [--expect-struct N]
# NCCL_LIB_DIR holds libnccl.so.2 (the torch wheel's nvidia/nccl/lib, or a
# build's lib), NCCL_INCLUDE_DIR its nccl.h. nccl/accept/accept.cu (grouped
# send/recv to self in 1-rank communicators: a real NCCL kernel; stream and
# CUDA graph; the data checked) runs every example the source can run, with 1
# and 4 communicators, NCCL_PROFILER_PLUGIN set; then `ncclhooks check`
# (records + drops = matched, a comm line per communicator, one START and one
# STOP per communicator, channel and work item) and the record lines are
# counted. Each row says what was expected and what was seen; a failure
# prints the lines of the run that explain it. `ncclhooks report` of the
# latency example goes to $OUT/source-LABEL-SOURCE-latency.md (durations).
# --expect-struct N: NCCL must log "Loaded hooks (vN)". Needs the plugin and
# CLI in $BIN (default .dev/gpu) and nvcc. Exit 0 only when every row passes.
set -uo pipefail
cd "$(dirname "$0")/.."
LIB=$(realpath "${1:?usage: nccl-host.sh NCCL_LIB_DIR NCCL_INCLUDE_DIR LABEL [--source host|device] [--expect-struct N]}")
INC=$(realpath "${2:?NCCL_INCLUDE_DIR}")
LABEL=${3:?LABEL}
shift 3
SOURCE=host EXPECT=
while [ $# -gt 0 ]; do
  case $1 in
    --source) SOURCE=$2; shift 2 ;;
    --expect-struct) EXPECT=$2; shift 2 ;;
    *) echo "nccl-host.sh: unknown option $1" >&2; exit 2 ;;
  esac
done
BIN=${BIN:-.dev/gpu}
OUT=${OUT:-out/nccl-host}
NVCC=${NVCC:-nvcc}
W=${WORK:-/tmp/nccl-host}/$LABEL-$SOURCE
mkdir -p "$OUT" "$W"
PLUGIN=$(realpath "$BIN/libnccl-profiler-hooks.so")
CLI=$(realpath "$BIN/ncclhooks")
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export LD_LIBRARY_PATH=$LIB${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export NCCL_HOOKS_CACHE_DIR=$W/cache
[ -f "$LIB/libnccl.so.2" ] || { echo "FAIL $LABEL: no libnccl.so.2 in $LIB"; exit 1; }
[ -f "$INC/nccl.h" ] || { echo "FAIL $LABEL: no nccl.h in $INC"; exit 1; }
version=$(grep -m3 -E '#define NCCL_(MAJOR|MINOR|PATCH) ' "$INC/nccl.h" | awk '{printf "%s%s", (NR>1?".":""), $3}')

"$NVCC" -std=c++17 -O2 -arch="${ARCH:-sm_90}" -o "$W/accept" nccl/accept/accept.cu -I"$INC" -Xlinker "$LIB/libnccl.so.2" -lpthread \
  -Xlinker -rpath -Xlinker "$LIB" > "$W/accept-build.log" 2>&1 ||
  { echo "FAIL $LABEL: building nccl/accept/accept.cu against $INC and $LIB/libnccl.so.2:"; cat "$W/accept-build.log"; exit 1; }

status=0
echo "== NCCL $version ($LABEL, $LIB): NCCL_HOOKS_SOURCE=$SOURCE${EXPECT:+, expecting ncclProfiler_v$EXPECT}"
printf "%-14s %-5s %-6s %-16s %-12s %-9s %-8s %s\n" profile comms data loaded source check records warns
for p in examples/*.yaml; do
  name=$(basename "$p" .yaml)
  if [ "$SOURCE" = host ] && ! "$CLI" validate --source host "$p" > /dev/null 2>&1; then
    echo "$name: skipped (uses values host events lack: $("$CLI" validate --source host "$p" 2>&1 | grep -m1 -oE '^[^ ]+: [a-z]+' ))"
    continue
  fi
  for comms in 1 4; do
    d=$W/$name-c$comms
    rm -rf "$d"
    NCCL_PROFILER_PLUGIN=$PLUGIN NCCL_HOOKS_PROFILE=$PWD/$p NCCL_HOOKS_DUMP_DIR=$d NCCL_HOOKS_SOURCE=$SOURCE \
      NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,PROFILE timeout 180 "$W/accept" --comms $comms --iters 50 --graph-iters 10 --replays 5 \
      > "$d.log" 2>&1
    rc=$?
    loaded=$(grep -m1 -oE 'Loaded [A-Za-z0-9_-]+ \(v[0-9]+\)' "$d.log")
    src=none
    grep -q "the hooks run on NCCL's host events" "$d.log" && src=host
    grep -q "the hooks run in NCCL's kernels" "$d.log" && src=device
    warns=$(grep -c 'NCCL WARN' "$d.log")
    "$CLI" check "$d" --profile "$p" --comms $comms > "$d.check" 2>&1
    crc=$?
    recs=$(cat "$d"/ncclhooks-*.jsonl 2>/dev/null | grep -c '"type":"record"')
    rows=$(cat "$d"/ncclhooks-*.jsonl 2>/dev/null | grep '"type":"aggregate"' | grep -c '"final":true')
    printf "%-14s %-5s %-6s %-16s %-12s %-9s %-8s %s\n" "$name" $comms "$([ $rc = 0 ] && echo ok || echo "FAIL($rc)")" \
      "${loaded#Loaded }" $src "$([ $crc = 0 ] && echo exact || echo MISMATCH)" "$recs" "$warns"
    why=()
    [ $rc = 0 ] || why+=("accept exited $rc (3: an NCCL or CUDA call failed, 1: wrong data, 124: timeout; its ACCEPT line: $(grep -m1 '^ACCEPT' "$d.log"))")
    [ -z "$EXPECT" ] || [[ "$loaded" == *"(v$EXPECT)" ]] || why+=("NCCL loaded '${loaded:-nothing}', expected ncclProfiler_v$EXPECT")
    [ "$src" = "$SOURCE" ] || why+=("the plugin's INFO says source '$src', expected '$SOURCE' (NCCL_HOOKS_SOURCE=$SOURCE)")
    [ $crc = 0 ] || why+=("ncclhooks check found a mismatch (below)")
    [ "$warns" = 0 ] || why+=("$warns NCCL WARN lines")
    if [ "$SOURCE" = host ] && [ "$recs" = 0 ]; then
      # accept's communicators have one rank each: NCCL reports kernel channels only from proxy
      # operations, and send/recv to self has none (enqueue.cc: nProxyOps = selfSend ? 0 : 2).
      echo "  NOTE $LABEL host $name c$comms: no kernel-channel events, as expected of 1-rank communicators (send/recv to self has no proxy operations, where NCCL reports kernel channels); records from host events need 2 or more ranks"
    elif [ "$name" = all-events ]; then
      # It records every event; the others filter (field-capture keeps AllReduce only, which
      # 1-rank communicators never launch) or aggregate.
      [ "$recs" != 0 ] || why+=("no record lines: the hook was never called")
    elif [ "$rows" = 0 ]; then
      why+=("no final aggregate line")
    fi
    if [ ${#why[@]} -gt 0 ]; then
      status=1
      for w in "${why[@]}"; do echo "  FAIL $LABEL $SOURCE $name c$comms: $w"; done
      echo "  ---- $d.log (ACCEPT, WARN, ncclhooks, Loaded lines)"; grep -E 'ACCEPT|WARN|ncclhooks|Loaded|PROFILER' "$d.log" | head -25 | sed 's/^/  /'
      echo "  ---- $d.check"; head -30 "$d.check" | sed 's/^/  /'
    fi
  done
done
if [ -d "$W/latency-c1" ]; then
  { echo "NCCL $version ($LABEL), NCCL_HOOKS_SOURCE=$SOURCE, examples/latency.yaml, 1 communicator:"; echo
    "$CLI" report "$W/latency-c1" --markdown; } > "$OUT/source-$LABEL-$SOURCE-latency.md" 2>&1
  echo "-- durations (ncclhooks report, latency, 1 communicator): $OUT/source-$LABEL-$SOURCE-latency.md"
  head -30 "$OUT/source-$LABEL-$SOURCE-latency.md"
fi
exit $status
