#!/usr/bin/env bash
# Chases faults the caller matrix found: reruns (caller, profile) pairs under
# build variants (NCCL_HOOKS_REGISTER_CAPS, NCCL_HOOKS_SHARED_CTX), under
# compute-sanitizer memcheck, and dumps the SASS of the hooks and callers.
#   harness/callers/probe/diag.sh PLUGIN.so        (GPU machine, nvcc on PATH)
set -uo pipefail
PLUGIN=$(realpath "${1:?usage: diag.sh PLUGIN.so}") || exit 2
cd "$(dirname "$0")/.."
W=${WORK:-/tmp/diag}
OUT=${OUT:-$W/out}
mkdir -p "$W" "$OUT"
EX=$(realpath ../../../examples)
ARGS=(--channels 8 --items 32 --batch 4 --launches 2)
main() {
  ./build.sh "$W/cb" | tail -4 || exit 1
  cat > "$W/gen49.yaml" <<'Y'
version: 1
name: gen49
output: {dump_interval: 200ms}
hooks:
  - name: h0
    when: "func in [\"SendRecv\", \"AllGather_RING_LL\"] || channelId % 2 == 0"
    sample: 1/3
    let:
      - {name: v0, expr: "bitand(bitshr(phase, 63), 1)"}
    aggregate:
      - {name: a0, kind: min, value: "v0", by: [channelId]}
Y
  n=0
  run() { # label caller profile "env..." args...
    local label=$1 caller=$2 prof=$3 envs=$4; shift 4
    local res=""
    for rep in 1 2 3; do
      n=$((n + 1))
      local d=$W/run$n
      mkdir -p "$d"
      line=$(env NCCL_HOOKS_PROFILE="$prof" NCCL_HOOKS_DUMP_DIR="$d" NCCL_HOOKS_CACHE_DIR="$W/cache-${envs// /_}" NCCL_HOOKS_BACKEND=gpu $envs \
        timeout 60 "$W/cb/$caller" --plugin "$PLUGIN" "${ARGS[@]}" "$@" 2> "$d/stderr" | grep '^CALLER')
      ok=$(echo "$line" | grep -oE '"ok":(true|false)' | cut -d: -f2)
      err=$(echo "$line" | grep -oE '"error":"[^"]*"' | cut -d'"' -f4)
      live=$(echo "$line" | grep -oE '"live_ok":(true|false)' | cut -d: -f2)
      res="$res ${ok:-?}/${live:-?}${err:+($err)}"
    done
    built=$(grep -m1 -oE 'registers, [^;]*\(built with --maxrregcount=[0-9]+' "$W/run$n/stderr" | sed 's/ (built with/ @/')
    printf "%-44s %-14s %-14s %-34s %s | %s\n" "$label" "$caller" "$(basename "$prof" .yaml)" "${envs:-default}" "$res" "$built"
  }
  echo "== variants: ok/live_ok per run (3 runs each)"
  for envs in "" "NCCL_HOOKS_REGISTER_CAPS=32" "NCCL_HOOKS_REGISTER_CAPS=64" "NCCL_HOOKS_REGISTER_CAPS=96"; do
    run "1 comm, streams" caller_rdc255 "$EX/field-capture.yaml" "$envs"
  done
  for envs in "" "NCCL_HOOKS_REGISTER_CAPS=32" "NCCL_HOOKS_REGISTER_CAPS=40" "NCCL_HOOKS_REGISTER_CAPS=64"; do
    run "1 comm, streams" caller_rdc255 "$W/gen49.yaml" "$envs"
  done
  for envs in "" "NCCL_HOOKS_SHARED_CTX=1" "NCCL_HOOKS_REGISTER_CAPS=64" "NCCL_HOOKS_REGISTER_CAPS=96"; do
    run "4 comms, threads, streams" caller_rdc96 "$EX/all-events.yaml" "$envs" --comms 4 --threads
  done
  run "1 comm, streams" caller_rdc96 "$EX/all-events.yaml" ""
  run "4 comms, threads, streams, no plugin hook" caller_rdc96 "$EX/all-events.yaml" "NCCL_HOOKS_PROFILE=/nonexistent" --comms 4 --threads
  for envs in "" "NCCL_HOOKS_SHARED_CTX=1"; do
    run "2 comms, graphs" caller_rdc96 "$EX/latency.yaml" "$envs" --comms 2 --graph --replays 2
  done
  echo "== memcheck on failing configurations"
  for spec in "caller_rdc96 $EX/all-events.yaml --comms 4 --threads" "caller_rdc255 $EX/field-capture.yaml" "caller_rdc255 $W/gen49.yaml"; do
    set -- $spec
    c=$1 p=$2; shift 2
    echo "-- $c $(basename $p) $*"
    NCCL_HOOKS_PROFILE=$p NCCL_HOOKS_DUMP_DIR=$W/mc NCCL_HOOKS_CACHE_DIR=$W/cache- NCCL_HOOKS_BACKEND=gpu timeout 120 \
      compute-sanitizer --tool memcheck --print-limit 6 "$W/cb/$c" --plugin "$PLUGIN" "${ARGS[@]}" "$@" 2>&1 | grep -vE '^NCCL INFO' | cut -c1-220 | head -30
  done
  echo "== SASS of the hook builds (compile cache entries, 88-byte header stripped)"
  mkdir -p "$W/sass"
  for f in $(find "$W"/cache-* -name '*.cubin' -size +2k); do
    tail -c +89 "$f" > "$W/x.cubin"
    name=$(basename $(dirname "$f"))-$(basename "$f" .cubin | cut -c1-10)
    if cuobjdump -sass "$W/x.cubin" > "$W/sass/$name.sass" 2>/dev/null; then
      regs=$(grep -oE '\bR[0-9]+\b' "$W/sass/$name.sass" | sort -uV | tr '\n' ' ')
      echo "$name: $(cuobjdump -elf "$W/x.cubin" | grep -oE 'ncclhooks_entry\(0x[0-9a-f]+\)\s+(register count|frame size): \w+' | tr -s '\t ' ' ' | tr '\n' ' ') | $(grep -cE 'STL|LDL' "$W/sass/$name.sass") local ops | $(grep -oE 'BSSY B[0-9]+|BMOV[^;]*' "$W/sass/$name.sass" | sort -u | tr '\n' ' ') | regs: $regs"
    fi
  done
  for c in caller_rdc96 caller_rdc255; do cuobjdump -sass "$W/cb/$c" > "$W/sass/$c.sass" 2>/dev/null; done
  tar cJf "$OUT/sass.tar.xz" -C "$W" sass
}
main 2>&1 | tee "$OUT/diag.log"
