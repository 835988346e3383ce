#!/usr/bin/env bash
# Real collectives between ranks on one GPU: NVIDIA/nccl-tests (patched with
# nccl/patches/nccl-tests.patch: one process per rank without MPI), each rank
# its own process with its own NCCL_HOSTID, so that NCCL treats the ranks as
# separate nodes and joins them through its socket transport over loopback
# (proxy operations, so KernelCh/ProxyOp host events).
# With --join multirank (NCCL >= 2.30) the ranks keep one host identity and
# NCCL_MULTI_RANK_GPU_ENABLE=1 lets them share the GPU: NCCL's intra-node
# transports (P2P/SHM on one device), no proxy, so device-hook events only.
#   scripts/nccl-ranks.sh NCCL_DIR LABEL [--source host|device] [--join hostid|multirank] [--ranks "2 4"] [--tests "..."] [--profiles "..."] [--jobs J]
# NCCL_DIR holds lib/libnccl.so.2 and include/nccl.h (a build of scripts/build-nccl.sh,
# or the torch wheel's nvidia/nccl). Builds nccl-tests from nccl/src/nccl-tests.tar.xz
# against it, then per test and rank count: once with no plugin, once per profile
# (default: every example). A row passes when every rank exits 0 (nccl-tests' -c 1 data
# check; the patch makes each process report its own wrong results) and `ncclhooks check`
# says exact; a profile that `ncclhooks validate --source` refuses (host events carry no
# smid, clock or globaltimer) must leave every rank's output inactive with that reason.
# --jobs J runs J rows at once (correctness only; the rows' seconds are then not timings).
# PORT_BASE: the first NCCL_COMM_ID port (scripts running at once need ranges apart).
# Per-row outputs stay in $WORK, a failed row's logs also go to $OUT/failed-LABEL-SOURCE-JOIN/;
# $OUT/ranks-LABEL-SOURCE.md gets the table and,
# for latency at the largest rank count, `ncclhooks report --by rank`.
set -uo pipefail
cd "$(dirname "$0")/.."
NCCL=$(realpath "${1:?usage: nccl-ranks.sh NCCL_DIR LABEL [--source host|device]}")
LABEL=${2:?LABEL}
shift 2
SOURCE=host JOIN=hostid RANKS="2 4" TESTS="all_reduce_perf all_gather_perf reduce_scatter_perf sendrecv_perf" JOBS=1
PROFILES=$(cd examples && ls *.yaml | sed 's/\.yaml$//' | tr '\n' ' ')
while [ $# -gt 0 ]; do
  case $1 in
    --source) SOURCE=$2; shift 2 ;;
    --join) JOIN=$2; shift 2 ;;
    --ranks) RANKS=$2; shift 2 ;;
    --tests) TESTS=$2; shift 2 ;;
    --profiles) PROFILES=$2; shift 2 ;;
    --jobs) JOBS=$2; shift 2 ;;
    *) echo "nccl-ranks.sh: unknown option $1" >&2; exit 2 ;;
  esac
done
BIN=${BIN:-.dev/gpu}
OUT=${OUT:-out/nccl-ranks}
case $JOIN in
  hostid) join() { echo NCCL_HOSTID=ncclhooks-rank$1; } ;;
  multirank) join() { echo NCCL_MULTI_RANK_GPU_ENABLE=1; } ;;
  *) echo "nccl-ranks.sh: --join hostid|multirank, not $JOIN" >&2; exit 2 ;;
esac
W=${WORK:-/tmp/nccl-ranks}/$LABEL-$SOURCE-$JOIN
mkdir -p "$OUT" "$W"
PLUGIN=$(realpath "$BIN/libnccl-profiler-hooks.so")
CLI=$(realpath "$BIN/ncclhooks")
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 NCCL_SOCKET_IFNAME=lo
export NCCL_HOOKS_CACHE_DIR=$W/cache
[ -f "$NCCL/lib/libnccl.so.2" ] && [ -f "$NCCL/include/nccl.h" ] || { echo "FAIL $LABEL: want $NCCL/lib/libnccl.so.2 and $NCCL/include/nccl.h"; exit 1; }

# nccl-tests against this NCCL, one build per NCCL.
T=${WORK:-/tmp/nccl-ranks}/nccl-tests-$LABEL
scripts/nccl-tests-build.sh "$NCCL" "$T" $TESTS || exit 1
export LD_LIBRARY_PATH=$NCCL/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}

# profile NAME: examples/NAME.yaml, else bench/profiles/NAME.yaml (nop).
profile() { [ -f examples/$1.yaml ] && echo $PWD/examples/$1.yaml || echo $PWD/bench/profiles/$1.yaml; }
# What this source refuses, per profile: validate's reason ("" = accepted).
declare -A refused
for prof in $PROFILES; do
  "$CLI" validate --source $SOURCE --no-gpu-check "$(profile $prof)" > "$W/validate-$prof.txt" 2>&1 ||
    refused[$prof]=$(grep -m1 -vE '^\s*$' "$W/validate-$prof.txt" | cut -c1-160)
done

PORT_BASE=${PORT_BASE:-$((29500 + RANDOM % 2000))}
# ranks N DIR TEST PROFILE PORT: one process per rank; every rank's exit status, 0 = all 0.
ranks() {
  local n=$1 d=$2 t=$3 prof=$4 port=$5 pids=() r rc=0
  mkdir -p "$d"
  for ((r = 0; r < n; r++)); do
    env NCCL_TESTS_NPROCS=$n NCCL_TESTS_PROC=$r NCCL_COMM_ID=127.0.0.1:$port $(join $r) \
      ${prof:+NCCL_PROFILER_PLUGIN=$PLUGIN NCCL_HOOKS_PROFILE=$(profile $prof) NCCL_HOOKS_SOURCE=$SOURCE NCCL_HOOKS_DUMP_DIR=$d} \
      NCCL_DEBUG=WARN timeout 240 "$T/build/$t" -b 8 -e 64M -f 8 -g 1 -c 1 -w 2 -n ${ITERS:-5} > "$d/rank$r.log" 2>&1 &
    pids+=($!)
  done
  for r in "${!pids[@]}"; do
    wait "${pids[$r]}" && continue
    local st=$?; rc=1
    echo "  rank $r of $t (${prof:-no plugin}): exit $st ($(grep -m2 -E 'wrong|WARN|error|Error' "$d/rank$r.log" | tr '\n' ' '))"
  done
  return $rc
}

# row N TEST PROFILE PORT: one table line in DIR.row, and DIR.fail when the row fails.
row() {
  local n=$1 t=$2 prof=$3 port=$4 d=$W/$2-r$1-${3:-none} t0=$SECONDS rc chk=- recs=- oob f
  rm -rf "$d" "$d.row" "$d.fail"
  ranks $n "$d" $t "$prof" $port > "$d.ranks" 2>&1; rc=$?
  oob=$(grep -m1 -oE 'Out of bounds values : [0-9]+ [A-Z]+' "$d/rank0.log")
  if [ -n "$prof" ] && [ -n "${refused[$prof]:-}" ]; then
    # Refused by this source: every rank's output must say inactive, nothing recorded.
    chk="refused, inactive"
    f=$(grep -l '"type":"inactive"' "$d"/ncclhooks-*.jsonl 2>/dev/null | wc -l)
    [ "$f" -ge "$n" ] || { chk="MISMATCH: $f of $n outputs inactive"; echo "  FAIL $t r$n $prof: refused by --source $SOURCE (${refused[$prof]}) but $f of $n outputs say inactive" >> "$d.ranks"; touch "$d.fail"; }
    recs=$(cat "$d"/ncclhooks-*.jsonl 2>/dev/null | grep -c '"type":"record"')
    [ "$recs" = 0 ] || { chk="MISMATCH: $recs records"; touch "$d.fail"; }
  elif [ -n "$prof" ]; then
    "$CLI" check "$d" --profile "$(profile $prof)" > "$d.check" 2>&1 && chk=exact || chk=MISMATCH
    recs=$(cat "$d"/ncclhooks-*.jsonl 2>/dev/null | grep -c '"type":"record"')
    [ $chk = exact ] || { touch "$d.fail"; { echo "  FAIL $t r$n $prof: check:"; head -15 "$d.check" | sed 's/^/    /'
      for f in "$d"/rank*.log; do grep -m4 -E 'ncclhooks|WARN' "$f" | cut -c1-300 | sed "s|^|    ${f##*/}: |"; done; } >> "$d.ranks"; }
  fi
  # A Go fault in the plugin at exit may leave the exit status 0 (the 2026-12-07 H100 run): the logs tell.
  for f in "$d"/rank*.log; do
    grep -qE '^(fatal error|panic):|^SIGSEGV|signal SIGSEGV' "$f" || continue
    rc=1; { echo "  FAIL $t r$n ${prof:-none}: ${f##*/} has a fault:"; grep -m1 -A12 -E '^(fatal error|panic):|signal SIGSEGV' "$f" | cut -c1-200 | sed 's/^/    /'; } >> "$d.ranks"
  done
  [ $rc = 0 ] || touch "$d.fail"
  echo "| $t | $n | ${prof:-none} | $([ $rc = 0 ] && echo "all 0" || echo FAIL) | ${oob:-?} | $chk | $recs | $((SECONDS - t0)) |" > "$d.row"
}

md=$OUT/ranks-$LABEL-$SOURCE-$JOIN.md
{ echo "NCCL $(grep -m3 -E '#define NCCL_(MAJOR|MINOR|PATCH) ' "$NCCL/include/nccl.h" | awk '{printf "%s%s", (NR>1?".":""), $3}') ($LABEL), NCCL_HOOKS_SOURCE=$SOURCE, nccl-tests -b 8 -e 64M -f 8 -c 1, one process per rank on GPU 0, joined by $([ $JOIN = hostid ] && echo "an NCCL_HOSTID each (socket transport over lo)" || echo "NCCL_MULTI_RANK_GPU_ENABLE=1 (one host)"), $JOBS row(s) at a time"; echo
  for prof in $PROFILES; do [ -n "${refused[$prof]:-}" ] && echo "- $prof: refused by --source $SOURCE: ${refused[$prof]}"; done
  echo
  echo "| test | ranks | profile | ranks' exit | #wrong (rank 0) | check | records | seconds |"; echo "| --- | --- | --- | --- | --- | --- | --- | --- |"; } > "$md"
rows=() k=0 t0=$SECONDS
for n in $RANKS; do
  for t in $TESTS; do
    for prof in "" $PROFILES; do
      (( $(jobs -rp | wc -l) >= JOBS )) && wait -n
      row $n $t "$prof" $((PORT_BASE + k)) &
      rows+=("$W/$t-r$n-${prof:-none}"); k=$((k + 1))
    done
  done
done
wait
status=0
for d in "${rows[@]}"; do
  cat "$d.ranks" 2>/dev/null
  cat "$d.row" 2>/dev/null | tee -a "$md" || { echo "| $d | no row |" | tee -a "$md"; status=1; }
  if [ -f "$d.fail" ]; then
    status=1
    # A failed row's rank logs come back with $OUT (their last 64 KiB each): the machine's are lost with it.
    f=$OUT/failed-$LABEL-$SOURCE-$JOIN/${d##*/}; mkdir -p "$f"
    for l in "$d"/rank*.log "$d.ranks" "$d.check"; do [ -f "$l" ] && tail -c 65536 "$l" > "$f/${l##*/}"; done
  fi
done
echo "$k rows in $((SECONDS - t0)) s, $JOBS at a time" | tee -a "$md"
last=${RANKS##* }
for t in all_reduce_perf; do
  d=$W/$t-r$last-latency
  [ -d "$d" ] && { echo; echo "\`ncclhooks report --by rank\` of $t, $last ranks, latency:"; echo; "$CLI" report "$d" --by rank --markdown 2>&1 | head -60; } >> "$md"
done
echo "-- $md"
exit $status
