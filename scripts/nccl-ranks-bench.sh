#!/usr/bin/env bash
# The time a hook adds inside real collectives between ranks: nccl-tests'
# all_reduce_perf between 2 ranks on GPU 0 (one process each, its own
# NCCL_HOSTID: NCCL's socket transport over loopback), with no plugin and with
# each profile, in interleaved rounds (the order rotates each round), so that
# drift of the machine falls on every profile alike.
# --join multirank (NCCL >= 2.30): one host identity and NCCL_MULTI_RANK_GPU_ENABLE=1
# instead (NCCL's transports within one GPU, no sockets).
#   scripts/nccl-ranks-bench.sh NCCL_DIR LABEL [--source device|host] [--join hostid|multirank] [--rounds R] [--profiles "..."] [--ranks N]
# Per size (8 B, 64 KiB, 1 MiB, 64 MiB): the out-of-place time rank 0 reports (the mean
# of -n ITERS calls), the median over rounds with min-max, and the median's change
# against no plugin. Table: $OUT/ranks-bench-LABEL-SOURCE.md.
set -uo pipefail
cd "$(dirname "$0")/.."
NCCL=$(realpath "${1:?usage: nccl-ranks-bench.sh NCCL_DIR LABEL [--source device|host] [--rounds R]}")
LABEL=${2:?LABEL}
shift 2
SOURCE=device JOIN=hostid ROUNDS=5 NRANKS=2 PROFILES="nop drain-latency latency all-events"
while [ $# -gt 0 ]; do
  case $1 in
    --source) SOURCE=$2; shift 2 ;;
    --rounds) ROUNDS=$2; shift 2 ;;
    --join) JOIN=$2; shift 2 ;;
    --profiles) PROFILES=$2; shift 2 ;;
    --ranks) NRANKS=$2; shift 2 ;;
    *) echo "nccl-ranks-bench.sh: unknown option $1" >&2; exit 2 ;;
  esac
done
BIN=${BIN:-.dev/gpu}
OUT=${OUT:-out/nccl-ranks}
case $JOIN in
  hostid) join() { echo NCCL_HOSTID=ncclhooks-rank$1; } ;;
  multirank) join() { echo NCCL_MULTI_RANK_GPU_ENABLE=1; } ;;
  *) echo "nccl-ranks-bench.sh: --join hostid|multirank, not $JOIN" >&2; exit 2 ;;
esac
W=${WORK:-/tmp/nccl-ranks}/bench-$LABEL-$SOURCE-$JOIN
mkdir -p "$OUT" "$W"
PLUGIN=$(realpath "$BIN/libnccl-profiler-hooks.so")
export NCCL_NVLS_ENABLE=0 NCCL_SOCKET_IFNAME=lo NCCL_HOOKS_CACHE_DIR=$W/cache
T=${WORK:-/tmp/nccl-ranks}/nccl-tests-$LABEL
scripts/nccl-tests-build.sh "$NCCL" "$T" all_reduce_perf || exit 1
export LD_LIBRARY_PATH=$NCCL/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
profile() { [ -f examples/$1.yaml ] && echo $PWD/examples/$1.yaml || echo $PWD/bench/profiles/$1.yaml; }

port=$((31500 + RANDOM % 2000))
status=0
# job DIR PROFILE: one all_reduce_perf between NRANKS processes; rank 0's log is DIR/rank0.log.
job() {
  local d=$1 prof=$2 pids=() r rc=0
  port=$((port + 1)); rm -rf "$d"; mkdir -p "$d"
  for ((r = 0; r < NRANKS; r++)); do
    env NCCL_TESTS_NPROCS=$NRANKS NCCL_TESTS_PROC=$r NCCL_COMM_ID=127.0.0.1:$port $(join $r) \
      ${prof:+NCCL_PROFILER_PLUGIN=$PLUGIN NCCL_HOOKS_PROFILE=$(profile $prof) NCCL_HOOKS_SOURCE=$SOURCE NCCL_HOOKS_DUMP_DIR=$d} \
      NCCL_DEBUG=WARN timeout 120 "$T/build/all_reduce_perf" -b 8 -e 64M -f 2 -g 1 -c 0 -w 5 -n ${ITERS:-20} > "$d/rank$r.log" 2>&1 &
    pids+=($!)
  done
  for r in "${!pids[@]}"; do
    wait "${pids[$r]}" && continue
    local st=$?; rc=1
    echo "  rank $r ($prof): exit $st ($(grep -m3 -E 'ncclhooks|WARN|rror' "$d/rank$r.log" | cut -c1-240 | tr '\n' ' '))"
  done
  return $rc
}
all=(none $PROFILES)
for ((round = 0; round < ROUNDS; round++)); do
  for ((k = 0; k < ${#all[@]}; k++)); do
    prof=${all[$(((k + round) % ${#all[@]}))]}
    [ $prof = none ] && p= || p=$prof
    job "$W/r$round-$prof" "$p" || status=1
  done
done
python3 - "$W" "$ROUNDS" "$LABEL, joined by $JOIN" "$SOURCE" "$NRANKS" ${all[@]} > "$OUT/ranks-bench-$LABEL-$SOURCE-$JOIN.md" <<'PY'
import re, statistics, sys
w, rounds, label, source, nranks, profs = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4], sys.argv[5], sys.argv[6:]
sizes = [8, 65536, 1 << 20, 64 << 20]
t = {}  # (profile, size) -> [us]
for p in profs:
    for r in range(rounds):
        try:
            log = open(f"{w}/r{r}-{p}/rank0.log").read()
        except OSError:
            continue
        for m in re.finditer(r"^\s+(\d+)\s+\d+\s+\w+\s+\w+\s+-?\d+\s+([\d.]+)\s", log, re.M):
            if int(m.group(1)) in sizes:
                t.setdefault((p, int(m.group(1))), []).append(float(m.group(2)))
def name(s): return f"{s >> 20} MiB" if s >= 1 << 20 else f"{s >> 10} KiB" if s >= 1024 else f"{s} B"
print(f"all_reduce_perf between {nranks} ranks on GPU 0 (one process each, NCCL_HOOKS_SOURCE={source}, {label}), "
      f"out-of-place time of rank 0 in us (mean of -n calls), median over {rounds} interleaved rounds (min-max), "
      f"and the median's change against no plugin\n")
print("| size | " + " | ".join(profs) + " |")
print("| --- |" + " --- |" * len(profs))
for s in sizes:
    base = t.get(("none", s))
    cells = []
    for p in profs:
        v = t.get((p, s))
        if not v:
            cells.append("-"); continue
        med = statistics.median(v)
        c = f"{med:.1f} ({min(v):.1f}-{max(v):.1f})"
        if p != "none" and base:
            c += f" {100 * (med / statistics.median(base) - 1):+.1f}%"
        cells.append(c + f" n={len(v)}")
    print(f"| {name(s)} | " + " | ".join(cells) + " |")
PY
cat "$OUT/ranks-bench-$LABEL-$SOURCE-$JOIN.md"
exit $status
