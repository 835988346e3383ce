#!/usr/bin/env bash
# Builds the ptxas fixtures of internal/fatbin's tests with NVIDIA's own
# ptxas and fatbinary (no nvcc, no CUDA headers: CUDA 11.8's, from Debian's
# nvidia-cuda-toolkit package, unpacked with dpkg-deb -x), and records what
# NVIDIA's cuobjdump says of them (the tests compare against it):
#   plain.so  sm_80 and sm_90 cubins, stored plain
#   lz4.so    the same, fatbinary -compress-all (LZ4, as NCCL builds)
#   ptx.so    PTX for compute_90 only
# Each kernel keeps 140 values live (volatile loads, all used at the end), so
# it uses exactly the registers its .maxnreg allows: 32 and 64, with spills.
# usage: build.sh CUDA_BIN_DIR   (ptxas, fatbinary, cuobjdump); cc builds the .so
set -euo pipefail
bin=${1:?usage: build.sh CUDA_BIN_DIR}
cd "$(dirname "$0")"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

kernel() { # name maxnreg live
  local name=$1 cap=$2 n=$3 i
  echo ".visible .entry $name(.param .u64 p, .param .u64 q)"
  echo ".maxnreg $cap"
  echo "{"
  echo "  .reg .u32 %r<$((n + 1))>;"
  echo "  .reg .u64 %a<2>;"
  echo "  ld.param.u64 %a0, [p];"
  echo "  ld.param.u64 %a1, [q];"
  for ((i = 0; i < n; i++)); do echo "  ld.volatile.global.u32 %r$i, [%a0+$((4 * i))];"; done
  echo "  mov.u32 %r$n, 0;"
  for ((i = 0; i < n / 2; i++)); do echo "  mad.lo.u32 %r$n, %r$i, %r$((n - 1 - i)), %r$n;"; done
  echo "  st.global.u32 [%a1], %r$n;"
  echo "  ret;"
  echo "}"
}
ptx() { # arch
  printf '.version 7.8\n.target %s\n.address_size 64\n\n' "$1"
  kernel fixture_r32 32 140
  kernel fixture_r64 64 140
}
for a in 80 90; do
  ptx sm_$a > "$tmp/f$a.ptx"
  "$bin/ptxas" -arch=sm_$a "$tmp/f$a.ptx" -o "$tmp/f$a.cubin"
done
printf '.version 7.8\n.target sm_90\n.address_size 64\n\n.visible .entry fixture_ptx()\n{\n  ret;\n}\n' > "$tmp/small.ptx"
images="--image=profile=sm_80,file=$tmp/f80.cubin --image=profile=sm_90,file=$tmp/f90.cubin"
"$bin/fatbinary" -64 --create="$tmp/plain.fatbin" $images
"$bin/fatbinary" -64 --create="$tmp/lz4.fatbin" -compress-all $images
"$bin/fatbinary" -64 --create="$tmp/ptx.fatbin" --compress=false --image=profile=compute_90,file="$tmp/small.ptx"
for v in plain lz4 ptx; do
  cat > "$tmp/$v.c" <<C
// The fat binary in the section nvcc puts it in, and the symbol a library
// that calls the device hook exports.
__asm__(".section .nv_fatbin, \"a\"\n.balign 8\n.incbin \"$tmp/$v.fatbin\"\n.previous\n");
const char* ncclProfilerDevFuncName(int id) { return id == 0 ? "Fixture" : 0; }
C
  ${CC:-cc} -shared -fPIC -O2 -s -o "$v.so" "$tmp/$v.c"
done
for v in plain lz4; do "$bin/cuobjdump" -res-usage "$v.so" > "$v.res-usage.txt"; done
"$bin/cuobjdump" --version | tail -2 > cuobjdump-version.txt
ls -l ./*.so
