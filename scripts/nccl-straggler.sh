#!/usr/bin/env bash
# A planted straggler in real collectives between ranks: nccl-tests'
# all_reduce_perf between 4 ranks on GPU 0 (one process each, its own
# NCCL_HOSTID), RUNS jobs as they are ("base") and RUNS jobs where one rank's
# stream spins DELAY microseconds before each collective ("plant":
# NCCL_TESTS_DELAY_US, nccl/patches/nccl-tests.patch), so that it arrives last
# and every other rank waits for it; each job with the latency profile (for
# diff) and one of each with all-events (records: cross-rank skew, the trace).
#   scripts/nccl-straggler.sh NCCL_DIR LABEL [--source device|host] [--delay-us 200] [--rank 2] [--runs 5] [--ranks 4]
# The job sets go to $W/{base,plant}/{latency,all-events}/jobK (one dump directory per job),
# and $OUT/straggler-LABEL-SOURCE.tgz; $OUT/straggler-LABEL-SOURCE.md gets what the CLI says of them:
# report --by rank of one job of each, diff base plant, and diff of the base set's halves.
set -uo pipefail
cd "$(dirname "$0")/.."
NCCL=$(realpath "${1:?usage: nccl-straggler.sh NCCL_DIR LABEL [--source device|host] [--delay-us D] [--rank R] [--runs N]}")
LABEL=${2:?LABEL}
shift 2
SOURCE=device DELAY=200 SLOW=2 RUNS=5 NRANKS=4
while [ $# -gt 0 ]; do
  case $1 in
    --source) SOURCE=$2; shift 2 ;;
    --delay-us) DELAY=$2; shift 2 ;;
    --rank) SLOW=$2; shift 2 ;;
    --runs) RUNS=$2; shift 2 ;;
    --ranks) NRANKS=$2; shift 2 ;;
    *) echo "nccl-straggler.sh: unknown option $1" >&2; exit 2 ;;
  esac
done
BIN=${BIN:-.dev/gpu}
OUT=${OUT:-out/nccl-ranks}
W=${WORK:-/tmp/nccl-ranks}/straggler-$LABEL-$SOURCE
rm -rf "$W"; mkdir -p "$OUT" "$W"
PLUGIN=$(realpath "$BIN/libnccl-profiler-hooks.so")
CLI=$(realpath "$BIN/ncclhooks")
export NCCL_NVLS_ENABLE=0 NCCL_SOCKET_IFNAME=lo NCCL_HOOKS_CACHE_DIR=$W/cache
T=${WORK:-/tmp/nccl-ranks}/nccl-tests-$LABEL
scripts/nccl-tests-build.sh "$NCCL" "$T" all_reduce_perf || exit 1
export LD_LIBRARY_PATH=$NCCL/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}

port=$((33500 + RANDOM % 2000))
status=0
# job DIR PROFILE DELAY: one all_reduce_perf between NRANKS processes, rank SLOW delayed DELAY us.
job() {
  local d=$1 prof=$2 delay=$3 pids=() r rc=0
  port=$((port + 1)); mkdir -p "$d"
  for ((r = 0; r < NRANKS; r++)); do
    local dl=0; [ $r = $SLOW ] && dl=$delay
    env NCCL_TESTS_NPROCS=$NRANKS NCCL_TESTS_PROC=$r NCCL_COMM_ID=127.0.0.1:$port NCCL_HOSTID=ncclhooks-rank$r \
      NCCL_TESTS_DELAY_US=$dl NCCL_PROFILER_PLUGIN=$PLUGIN NCCL_HOOKS_PROFILE=$PWD/examples/$prof.yaml \
      NCCL_HOOKS_SOURCE=$SOURCE NCCL_HOOKS_DUMP_DIR=$d \
      NCCL_DEBUG=WARN timeout 120 "$T/build/all_reduce_perf" -b 64K -e 4M -f 4 -g 1 -c 1 -w 2 -n ${ITERS:-20} > "$d/rank$r.log" 2>&1 &
    pids+=($!)
  done
  for r in "${!pids[@]}"; do
    wait "${pids[$r]}" && continue
    local st=$?; rc=1
    echo "  rank $r ($d): exit $st ($(grep -m3 -E 'ncclhooks|WARN|rror' "$d/rank$r.log" | cut -c1-240 | tr '\n' ' '))"
  done
  "$CLI" check "$d" --profile examples/$prof.yaml > "$d.check" 2>&1 || {
    rc=1; echo "  check $d:"; head -5 "$d.check"
    # What the plugin and NCCL said in each rank (no output at all: why).
    for r in $(seq 0 $((NRANKS - 1))); do grep -m4 -E 'ncclhooks|WARN' "$d/rank$r.log" | cut -c1-300 | sed "s/^/    rank $r: /"; done
  }
  return $rc
}
for ((k = 0; k < RUNS; k++)); do
  job "$W/base/latency/job$k" latency 0 || status=1
  job "$W/plant/latency/job$k" latency $DELAY || status=1
done
job "$W/base/all-events/job0" all-events 0 || status=1
job "$W/plant/all-events/job0" all-events $DELAY || status=1
md=$OUT/straggler-$LABEL-$SOURCE.md
{
  echo "all_reduce_perf 64 KiB-4 MiB between $NRANKS ranks on GPU 0 ($LABEL, NCCL_HOOKS_SOURCE=$SOURCE); plant: rank $SLOW's stream spins $DELAY us before each collective; $RUNS jobs a side"
  for side in base plant; do
    echo; echo "## report --by rank, $side, all-events"; echo
    "$CLI" report "$W/$side/all-events/job0" --by rank --markdown 2>&1 | head -80
  done
  echo; echo "## diff base plant (latency, $RUNS jobs a side)"; echo
  "$CLI" diff "$W/base/latency" "$W/plant/latency" 2>&1 | tail -40; echo "exit ${PIPESTATUS[0]}"
  h=$((RUNS / 2))
  mkdir -p "$W/half1" "$W/half2"
  for ((k = 0; k < RUNS; k++)); do [ $k -lt $h ] && cp -r "$W/base/latency/job$k" "$W/half1/" || cp -r "$W/base/latency/job$k" "$W/half2/"; done
  echo; echo "## diff of the base set's halves (identical jobs)"; echo
  "$CLI" diff "$W/half1" "$W/half2" 2>&1 | tail -40; echo "exit ${PIPESTATUS[0]}"
} > "$md" 2>&1
tar czf "$OUT/straggler-$LABEL-$SOURCE.tgz" -C "$W" base plant
cat "$md" | head -120
exit $status
