#!/usr/bin/env bash
# Times the probe hooks of probe_plugin.cu inside patched NCCL (8-byte grouped send/recv
# to self replayed from a CUDA graph, nccl/accept/accept.cu --time 2000), ROUNDS rounds
# alternating no plugin and every probe, one process each; prints medians. On the GPU
# machine, after scripts/gpu-ab.sh or scripts/build-nccl.sh has built NCCL:
#   NCCL_DIR=/tmp/gpu-ab/nccl bench/proto/nccl-cost/run.sh
set -uo pipefail
cd "$(dirname "$0")"
ROOT=$(cd ../../.. && pwd)
NCCL=${NCCL_DIR:?NCCL_DIR=a scripts/build-nccl.sh output}
W=${WORK:-/tmp/nccl-cost}
OUT=${OUT:-$ROOT/out/nccl-cost}
ROUNDS=${ROUNDS:-6}
read -ra PROBES <<< "${PROBES:-nop chain40 wide40 chain80 wide80 load1 load2 red1 pair pairpf paircg pairnold cur rghost rgdev rgvmm}"
mkdir -p "$W" "$OUT"
nvcc -arch=sm_90 -I"$ROOT/internal/abi" -rdc=true -shared -Xcompiler -fPIC -Xptxas -v -o "$W/libprobe.so" probe_plugin.cu -lcuda \
  2> "$W/ptxas.log" || { cat "$W/ptxas.log"; exit 1; }
grep -A1 'Function properties for probe_' "$W/ptxas.log" | grep -oE 'probe_\w+|[0-9]+ bytes stack frame' | paste - - | tee "$OUT/frames.txt"
cuobjdump -sass "$W/libprobe.so" | awk '/Function : probe_/{f=$3} /\/\*[0-9a-f]{4}\*\//{if(f!="" && $0 !~ /NOP/) n[f]++} END{for(f in n) print f, n[f], "instructions"}' | sort | tee "$OUT/instructions.txt"
[ -x "$W/accept" ] || nvcc -std=c++17 -O2 -arch=sm_90 -o "$W/accept" "$ROOT/nccl/accept/accept.cu" -I"$NCCL/include" -L"$NCCL/lib" -lnccl -lpthread || exit 1
export LD_LIBRARY_PATH=$NCCL/lib NCCL_NVLS_ENABLE=0
for round in $(seq "$ROUNDS"); do
  echo "T none $(timeout 60 "$W/accept" --time 2000 --bytes 8 2>/dev/null | grep -m1 '^ACCEPT')"
  for p in "${PROBES[@]}"; do
    NCCL_PROFILER_PLUGIN=$W/libprobe.so NCCLHOOKS_PROBE=$p timeout 60 "$W/accept" --time 2000 --bytes 8 > "$W/run.log" 2>/dev/null
    echo "T $p $(grep -m1 '^ACCEPT' "$W/run.log")"
    grep '^PROBE' "$W/run.log" | sed "s/^/# round $round: /" >&2
  done
done > "$OUT/probe-raw.txt" 2> "$OUT/probe-notes.txt"
cat "$OUT/probe-notes.txt"
python3 "$ROOT/scripts/timing-table.py" "$OUT/probe-raw.txt" "$ROUNDS" probe --ns-against nop | tee "$OUT/probe.md"
