#!/usr/bin/env bash
# Soak: the real plugin .so under the ncclhooks harness for DURATION, every
# example in turn, while its process is sampled; then a flat-or-not verdict.
#
#   scripts/soak.sh DURATION [OUT]          DURATION: 30m, 10m, 90s, 2h
#
# Each example of $EXAMPLES gets one long-lived process for its slice of
# DURATION (the plugin reads its profile once per process, so the examples
# cannot share one): `ncclhooks run EXAMPLE --duration SLICE`, which repeats
# cycles of init, work items and finalize with the plugin loaded throughout,
# dumping every output.dump_interval (1 s in the examples), idle too between
# cycles. The run checks the accounting of every dump_stats line (records +
# dropped + pending = matched, totals never decreasing), and so does
# `ncclhooks check` of its output afterwards. Every $INTERVAL the process is
# sampled: RSS (VmRSS), threads, open files (/proc/PID/fd), the plugin's
# goroutines (go_goroutines of its /metrics, NCCL_HOOKS_PROM_ADDR) and, on
# the gpu backend where nvidia-smi is present, device memory. The samples go
# to OUT/samples.tsv, each marked phase "run" within the slice's duration and
# "after" once it is over (finalize and the last dumps: shown, not fitted); `ncclhooks soak-verdict` fits the slopes and says PASS
# or FAIL (OUT/verdict.txt). Exit 0: every run exact and PASS.
#
# Environment (defaults in brackets):
#   BIN       directory of ncclhooks and libnccl-profiler-hooks.so [build, after make build;
#             .dev/gpu on the GPU machine, which has no Go]; CLI and PLUGIN name them apart
#   BACKEND   cpu or gpu [cpu]
#   EXAMPLES  the profiles, in turn [examples/*.yaml]
#   INTERVAL  seconds between samples [2]
#   RUN_FLAGS the harness's load per cycle [--devices 2 --comms 2 --channels 2 --items 100 --gap 250ms]
#   VERDICT_FLAGS  extra soak-verdict flags (bounds) []
#   PROM_PORT first /metrics port, one per example [19464]
set -u
usage() { echo "usage: scripts/soak.sh DURATION [OUT]   (DURATION: 30m, 10m, 90s, 2h)" >&2; exit 2; }
[ $# -ge 1 ] && [ $# -le 2 ] || usage
case "$1" in
*s) secs=${1%s} ;;
*m) secs=$((${1%m} * 60)) ;;
*h) secs=$((${1%h} * 3600)) ;;
*) usage ;;
esac
[[ "$secs" =~ ^[0-9]+$ ]] && [ "$secs" -gt 0 ] || usage
BIN=${BIN:-build}
BACKEND=${BACKEND:-cpu}
INTERVAL=${INTERVAL:-2}
RUN_FLAGS=${RUN_FLAGS:---devices 2 --comms 2 --channels 2 --items 100 --gap 250ms}
VERDICT_FLAGS=${VERDICT_FLAGS:-}
PROM_PORT=${PROM_PORT:-19464}
OUT=${2:-out/soak-$BACKEND-$(date +%Y%m%d-%H%M%S)}
read -r -a examples <<<"${EXAMPLES:-$(echo examples/*.yaml)}"
CLI=${CLI:-$BIN/ncclhooks}
PLUGIN=${PLUGIN:-$BIN/libnccl-profiler-hooks.so}
for f in "$CLI" "$PLUGIN"; do
  [ -f "$f" ] || { echo "soak: $f missing: run make build (or set BIN=.dev/gpu on the GPU machine)" >&2; exit 2; }
done
slice=$((secs / ${#examples[@]}))
if [ "$slice" -lt $((8 * INTERVAL)) ]; then
  echo "soak: $1 over ${#examples[@]} examples is ${slice}s each: give at least $((8 * INTERVAL * ${#examples[@]}))s (8 samples per example)" >&2
  exit 2
fi
mkdir -p "$OUT" || exit 2
# Outputs compressed and capped: hours of records would fill the disk. At the
# cap the plugin counts record lines as dropped_cap_total and keeps dumping,
# and the accounting stays exact.
export NCCL_HOOKS_COMPRESS=${NCCL_HOOKS_COMPRESS:-zstd}
export NCCL_HOOKS_MAX_OUTPUT_BYTES=${NCCL_HOOKS_MAX_OUTPUT_BYTES:-256M}
export NCCL_HOOKS_CACHE_DIR=${NCCL_HOOKS_CACHE_DIR:-/tmp/ncclhooks-cache}

gpu_mem=none
if [ "$BACKEND" = gpu ] && command -v nvidia-smi >/dev/null; then
  if nvidia-smi --query-compute-apps=pid,used_memory --format=csv,noheader,nounits >/dev/null 2>&1; then
    gpu_mem=apps
  elif nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits >/dev/null 2>&1; then
    gpu_mem=gpu
  fi
fi

# goroutines PORT: go_goroutines of the plugin's /metrics, NA where it does not answer.
goroutines() {
  local body
  if command -v curl >/dev/null; then
    body=$(curl -s -m 2 "http://127.0.0.1:$1/metrics")
  else
    body=$(exec 3<>"/dev/tcp/127.0.0.1/$1" 2>/dev/null &&
      printf 'GET /metrics HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n' >&3 && timeout 2 cat <&3)
  fi
  awk '$1 == "go_goroutines" { print $2; found = 1 } END { if (!found) print "NA" }' <<<"$body"
}

# gpumem PID: MiB of device memory the process holds (apps), or the GPUs' in all.
gpumem() {
  case $gpu_mem in
  apps) nvidia-smi --query-compute-apps=pid,used_memory --format=csv,noheader,nounits 2>/dev/null |
    awk -F', *' -v p="$1" '$1 == p { s += $2; f = 1 } END { print f ? s : 0 }' ;;
  gpu) nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits 2>/dev/null | awk '{ s += $1 } END { print s }' ;;
  *) echo NA ;;
  esac
}

samples=$OUT/samples.tsv
printf 't_s\texample\tpid\tphase\trss_kib\tthreads\tfds\tgoroutines\tgpu_mib\n' >"$samples"
echo "soak: $1 on the $BACKEND backend, ${#examples[@]} examples x ${slice}s, $BIN, samples every ${INTERVAL}s into $samples" >&2
t0=$(date +%s.%N)
fail=0
i=0
for ex in "${examples[@]}"; do
  name=$(basename "$ex" .yaml)
  port=$((PROM_PORT + i))
  i=$((i + 1))
  dir=$OUT/$name
  rm -rf "$dir"
  # shellcheck disable=SC2086 # RUN_FLAGS is a list of flags
  NCCL_HOOKS_PROM_ADDR=127.0.0.1:$port "$CLI" --quiet run "$ex" --backend "$BACKEND" --plugin "$PLUGIN" \
    --no-verify --duration "${slice}s" --out "$dir" $RUN_FLAGS >"$OUT/$name.run.txt" 2>"$OUT/$name.run.log" &
  pid=$!
  started=$(date +%s.%N)
  while kill -0 "$pid" 2>/dev/null; do
    st=/proc/$pid/status
    rss=$(awk '/^VmRSS:/ { print $2 }' "$st" 2>/dev/null)
    thr=$(awk '/^Threads:/ { print $2 }' "$st" 2>/dev/null)
    fds=$(ls "/proc/$pid/fd" 2>/dev/null | wc -l)
    gor=$(goroutines "$port")
    gmem=$(gpumem "$pid")
    now=$(date +%s.%N)
    t=$(awk -v a="$t0" -v b="$now" 'BEGIN { printf "%.3f", b - a }')
    phase=$(awk -v a="$started" -v b="$now" -v d="$slice" 'BEGIN { print (b - a < d) ? "run" : "after" }')
    # A sample read as the process exits is left out.
    if [ -n "$rss" ] && [ -n "$thr" ] && kill -0 "$pid" 2>/dev/null; then
      printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$t" "$name" "$pid" "$phase" "$rss" "$thr" "$fds" "$gor" "$gmem" >>"$samples"
    fi
    sleep "$INTERVAL"
  done
  wait "$pid"
  rc=$?
  verdict=$(grep '^result:' "$OUT/$name.run.txt")
  echo "soak: $name (pid $pid): exit $rc: ${verdict:-no result, see $OUT/$name.run.log}" >&2
  [ "$rc" = 0 ] || fail=1
  "$CLI" --quiet check "$dir" --profile "$ex" >"$OUT/$name.check.txt" 2>&1
  rc=$?
  echo "soak: $name: ncclhooks check: exit $rc: $(grep -E '^(result|dump_stats lines)' "$OUT/$name.check.txt" | tr '\n' ' ')" >&2
  [ "$rc" = 0 ] || fail=1
done
# shellcheck disable=SC2086
"$CLI" soak-verdict "$samples" $VERDICT_FLAGS | tee "$OUT/verdict.txt"
rc=${PIPESTATUS[0]}
[ "$rc" = 0 ] || fail=1
if [ "$fail" = 0 ]; then
  echo "soak: PASS: every run exact at every dump, every metric flat ($OUT)" >&2
else
  echo "soak: FAIL ($OUT)" >&2
fi
exit $fail
