#!/usr/bin/env bash
# Root-cause probes for hook faults (docs/ARCHITECTURE.md, "Why hooks faulted
# in callers the project did not build"). Runs on a GPU machine with nvcc:
#   harness/callers/probe/run.sh PLUGIN.so
# Every probe runs in its own process (a fault is sticky for its context).
set -uo pipefail
cd "$(dirname "$0")"
PLUGIN=$(realpath "${1:?usage: run.sh PLUGIN.so}")
W=${WORK:-/tmp/probe}
OUT=${OUT:-$W/out}
NVCC=${NVCC:-nvcc}
ARCH=${ARCH:-sm_90}
EX=$(realpath ../../../../examples)
ABI=$(realpath ../../../abi) # ncclhooks_abi.h: the event, hook type and profiler structs
mkdir -p "$W" "$OUT"
export NCCL_HOOKS_CACHE_DIR=$W/cache NCCL_HOOKS_DUMP_DIR=$W/dump
main() {
echo "== machine"; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; $NVCC --version | tail -2

echo "== build callers (nvcc, -Xptxas -v)"
build_caller() { # name flags...
  local name=$1; shift
  $NVCC -arch=$ARCH -I"$ABI" -o "$W/$name" caller.cu -lcuda -ldl -Xptxas -v "$@" 2> "$W/$name.ptxas" || { echo "BUILD FAILED $name"; cat "$W/$name.ptxas"; }
  printf "%-14s %s\n" "$name" "$(grep -A2 'for caller' "$W/$name.ptxas" | grep -oE '[0-9]+ bytes stack frame|Used [0-9]+ registers' | tr '\n' ' ')"
}
build_caller wp &
build_caller rdc -rdc=true &
for R in 24 32 40 64 128; do build_caller rdc_r$R -rdc=true -maxrregcount=$R -DLIVE=96 & done
build_caller wp_r32 -maxrregcount=32 -DLIVE=96 &
wait

echo "== call sites (SASS): whole program vs -rdc"
for c in wp rdc; do echo "-- $c"; cuobjdump -sass "$W/$c" | grep -E 'CALL|RET|MOV R2[01],|R21, RZ, RZ' | head -8; done
echo "-- relocations on the return-address moves (rdc has them, wp must not)"
for c in wp rdc; do echo "$c: $(cuobjdump -elf "$W/$c" | grep -c 'R_CUDA_ABS32_\(LO\|HI\)_32')"; done

echo "== build probe hooks (nvcc -rdc, shared libraries)"
build_hook() { # name flags...
  local name=$1; shift
  $NVCC -arch=$ARCH -I"$ABI" -rdc=true -shared -Xcompiler -fPIC -o "$W/lib$name.so" hooks.cu -Xptxas -v "$@" 2> "$W/$name.ptxas" || { echo "BUILD FAILED $name"; cat "$W/$name.ptxas"; }
  printf "%-14s %s %s\n" "$name" "$(cuobjdump -elf "$W/lib$name.so" 2>/dev/null | grep -oE 'probe_hook\(0x[0-9a-f]+\)\s+(register count|frame size): \w+' | sed 's/probe_hook([^)]*)//' | tr -s ' \t' ' ' | tr '\n' ' ')" \
    "$(grep -A1 'for probe_hook' "$W/$name.ptxas" | grep -oE '[0-9]+ bytes stack frame' | head -1)"
}
build_hook count -DKIND_COUNT &
for K in 8 40 88; do for M in 32 64 128; do build_hook regs${K}_m$M -DKIND_REGS=$K -maxrregcount=$M & done; done
for S in 64 1024 4096 16384; do build_hook stack$S -DKIND_STACK=$S & done
wait
$NVCC -arch=$ARCH -I"$ABI" -rdc=true -cubin -DKIND_COUNT -DPROBE_CUBIN -o "$W/count.rdc.cubin" hooks.cu && nvlink -arch=$ARCH "$W/count.rdc.cubin" -o "$W/count.cubin" || echo "cubin build failed"

run() { # label caller mode path [blocks events stacklimit]
  local label=$1 c=$2; shift 2
  local r; r=$(timeout 60 "$W/$c" "$@" 2>&1 | grep RESULT | head -1)
  printf "%-40s %-10s %s\n" "$label" "$c" "${r:-RESULT no result (timeout or crash)}"
}
echo "== matrix: RFC counter hook by loading route, from every caller"
for c in wp rdc rdc_r24 rdc_r32 wp_r32; do
  run "count .so (runtime-loaded)" $c so "$W/libcount.so"
  run "count cubin (cuModuleLoadData)" $c cubin "$W/count.cubin"
  run "count cubin (cuLibraryLoadData)" $c library "$W/count.cubin"
done
echo "== matrix: plugin hooks (NVRTC) from every caller"
cat > "$W/count-only.yaml" <<'Y'
version: 1
name: count-only
hooks:
  - name: n
    aggregate:
      - {name: events, kind: count}
Y
for c in wp rdc rdc_r24 rdc_r32 rdc_r40 rdc_r64; do
  for p in "$W/count-only.yaml" $EX/all-events.yaml $EX/latency.yaml $EX/field-capture.yaml; do
    NCCL_HOOKS_PROFILE=$p run "plugin $(basename $p .yaml)" $c plugin "$PLUGIN"
  done
done
echo "== matrix: hook registers vs caller registers (count hooks with K live values)"
for c in rdc_r24 rdc_r32 rdc_r40 rdc_r64 rdc_r128; do
  for K in 8 40 88; do for M in 32 64 128; do run "regs${K}_m$M" $c so "$W/libregs${K}_m$M.so"; done; done
done
echo "== matrix: hook stack frames vs the context's stack limit"
for S in 64 1024 4096 16384; do
  run "stack$S default limit" rdc so "$W/libstack$S.so"
  run "stack$S limit 32768" rdc so "$W/libstack$S.so" 8 2000 32768
  run "stack$S default limit" rdc_r128 so "$W/libstack$S.so"
done
echo "== compute-sanitizer on two faults"
NCCL_HOOKS_PROFILE=$W/count-only.yaml timeout 120 compute-sanitizer --tool memcheck "$W/wp" plugin "$PLUGIN" 2 20 2>&1 | head -25
NCCL_HOOKS_PROFILE=$EX/field-capture.yaml timeout 120 compute-sanitizer --tool memcheck "$W/rdc_r24" plugin "$PLUGIN" 2 20 2>&1 | head -25

echo "== the plugin's NVRTC hooks (compile cache): resources and frame code"
for f in $(find "$W/cache" -type f -size +1k 2>/dev/null); do
  echo "-- $f: $(cuobjdump -elf "$f" 2>/dev/null | grep -oE 'ncclhooks_entry\(0x[0-9a-f]+\)\s+(register count|frame size): \w+' | tr -s ' \t' ' ' | tr '\n' ' ')"
  cuobjdump -sass "$f" 2>/dev/null | grep -E 'Function|STL|LDL|CALL|RET' | head -12
done

echo "== register use of released NCCL (torch wheel)"
NCCL_SO=$(python3 -c 'import nvidia.nccl, os; print(os.path.join(list(nvidia.nccl.__path__)[0], "lib", "libnccl.so.2"))' 2>/dev/null)
ls -la "$NCCL_SO"
cuobjdump -res-usage "$NCCL_SO" > "$W/nccl-wheel-res.txt" 2>&1
python3 - "$W/nccl-wheel-res.txt" sm_90 <<'PY'
import re, sys, collections
txt = open(sys.argv[1]).read()
want = sys.argv[2]
chunks = re.split(r'arch = (sm_\d+)', txt)
rows = []
for i in range(1, len(chunks) - 1, 2):
    if chunks[i] == want:
        rows += re.findall(r'Function ([^\s:]+):\s*REG:(\d+) STACK:(\d+)', chunks[i + 1])
print("archs:", sorted(set(chunks[1::2])), "functions for", want + ":", len(rows))
kern = [(n, int(r), int(s)) for n, r, s in rows if 'ncclDevKernel' in n]
func = [(n, int(r), int(s)) for n, r, s in rows if 'ncclDevKernel' not in n]
for label, xs in (("kernels ncclDevKernel_*", kern), ("other functions", func)):
    if not xs: continue
    regs = collections.Counter(r for _, r, _ in xs); stk = [s for _, _, s in xs]
    print(f"{label}: {len(xs)}; REG histogram {sorted(regs.items())}; STACK min {min(stk)} max {max(stk)}")
    for n, r, s in sorted(xs, key=lambda x: x[1])[:4]: print(f"   lowest REG {r} STACK {s} {n[:110]}")
PY
xz -9 -c "$W/nccl-wheel-res.txt" > "$OUT/nccl-wheel-res.txt.xz"
}
main 2>&1 | tee "$OUT/probe.log"
