#!/usr/bin/env bash
# Builds the foreign callers of the plugin's device hook (caller.cu):
#   caller_rdc96   -rdc, -maxrregcount=96: at NCCL's register budget (NCCL's
#                  kernels use exactly 96)
#   caller_rdc255  -rdc, no cap, enough live values to use well over 96
#   caller_wp      whole program: the hook call is compiled out
#   caller_so32    -rdc, -maxrregcount=32, built as libcaller_so32.so, which
#                  exports ncclProfilerDevFuncName and which caller_so32
#                  (launch/launch.c) loads with local symbols, as torch loads NCCL:
#                  the plugin must read the budget, 32, from its .nv_fatbin
#   caller_so64    the same at 64 registers
# usage: harness/callers/build.sh OUTDIR   (NVCC, ARCH override nvcc, sm_90; CC cc)
set -uo pipefail
OUTDIR=${1:?usage: build.sh OUTDIR}
NVCC=${NVCC:-nvcc}
ARCH=${ARCH:-sm_90}
HERE=$(cd "$(dirname "$0")" && pwd)
SRC=$HERE/caller.cu
mkdir -p "$OUTDIR" || exit 1
OUTDIR=$(cd "$OUTDIR" && pwd)

# -ldl/-lpthread also reach nvlink, which skips them with a warning: harmless.
LINK=(-lcuda -ldl -lpthread -Xlinker --export-dynamic)
# -I: the NCCL ABI header (abi/ncclhooks_abi.h).
COMMON=(-std=c++17 -O3 -arch="$ARCH" -Xptxas -v -I"$HERE/../../abi")

build() { # name flags...
  local name=$1; shift
  "$NVCC" "${COMMON[@]}" -DCALLER_NAME="\"$name\"" "$@" -o "$OUTDIR/$name" "$SRC" "${LINK[@]}" \
    > "$OUTDIR/$name.log" 2>&1
}

build_so() { # name flags...: lib<name>.so and its launcher <name>
  local name=$1; shift
  "$NVCC" "${COMMON[@]}" -DCALLER_NAME="\"$name\"" -DCALLER_SHARED -shared -Xcompiler -fPIC "$@" \
    -o "$OUTDIR/lib$name.so" "$SRC" -lcuda -ldl -lpthread > "$OUTDIR/$name.log" 2>&1 &&
    "${CC:-cc}" -O2 -Wall -DCALLER_LIB="\"$OUTDIR/lib$name.so\"" -o "$OUTDIR/$name" "$HERE/launch/launch.c" -ldl \
      >> "$OUTDIR/$name.log" 2>&1
}

# LIVE values picked with nvcc 11.8 on sm_90 (uncapped -rdc: LIVE=64 needs
# 161 registers, LIVE=96 needs 231), with room for other compilers.
names=(caller_rdc96 caller_rdc255 caller_wp caller_so32 caller_so64)
build caller_rdc96 -rdc=true -Xptxas -maxrregcount=96 -DLIVE=64 & pids=($!)
build caller_rdc255 -rdc=true -DLIVE=96 & pids+=($!)
build caller_wp -DLIVE=32 & pids+=($!)
build_so caller_so32 -rdc=true -Xptxas -maxrregcount=32 -DLIVE=64 & pids+=($!)
build_so caller_so64 -rdc=true -Xptxas -maxrregcount=64 -DLIVE=64 & pids+=($!)

failed=0
for i in "${!pids[@]}"; do
  if ! wait "${pids[$i]}"; then
    echo "BUILD FAILED ${names[$i]}:"
    cat "$OUTDIR/${names[$i]}.log"
    failed=1
  fi
done
[ "$failed" = 0 ] || exit 1

# Kernel register count and stack from the linked image (res-usage REG is
# right for kernels).
usage_of() { # binary -> "REG STACK" of caller_kernel
  cuobjdump -res-usage "$1" 2>/dev/null |
    awk '/Function caller_kernel:/ { getline; for (i = 1; i <= NF; i++) { split($i, kv, ":"); r[kv[1]] = kv[2] }
                                      print r["REG"], r["STACK"]; exit }'
}

status=0
echo "nvcc $("$NVCC" --version | grep -oE "release [0-9.]+" | head -1), arch $ARCH"
for name in "${names[@]}"; do
  img=$OUTDIR/$name
  [ -f "$OUTDIR/lib$name.so" ] && img=$OUTDIR/lib$name.so
  read -r reg stack <<< "$(usage_of "$img")"
  if [ -z "${reg:-}" ]; then
    echo "$name: no caller_kernel in cuobjdump -res-usage"
    status=1
    continue
  fi
  spill=$(grep -A4 "for 'caller_kernel'\|for caller_kernel" "$OUTDIR/$name.log" | grep -oE '[0-9]+ bytes spill stores' | head -1)
  printf "%-14s REG %-4s STACK %-5s %s\n" "$name" "$reg" "$stack" "${spill:+($spill)}"
  case $name in
    caller_rdc96) [ "$reg" -eq 96 ] || { echo "  FAIL: caller_rdc96 must use exactly 96 registers"; status=1; } ;;
    caller_rdc255) [ "$reg" -gt 96 ] || { echo "  FAIL: caller_rdc255 must use more than 96 registers"; status=1; } ;;
    caller_so32) [ "$reg" -eq 32 ] || { echo "  FAIL: caller_so32 must use exactly 32 registers"; status=1; } ;;
    caller_so64) [ "$reg" -eq 64 ] || { echo "  FAIL: caller_so64 must use exactly 64 registers"; status=1; } ;;
  esac
done
exit $status
