#!/usr/bin/env bash
# Builds internal/fatbin's nvcc fixture (TestNvccFixture skips, naming it, until it is committed):
# small shared libraries whose .nv_fatbin holds nvcc-built kernels of known register counts,
# fixture_r32 (-maxrregcount=32) and fixture_r64 (-maxrregcount=64), each keeping 140 values live
# so that it uses exactly its cap, and that export ncclProfilerDevFuncName, as a library that
# calls the device hook does. One library per way nvcc stores device code:
#   libfixture-plain.so         whole program, no compression flags (nvcc's default)
#   libfixture-rdc-lz4.so       -rdc=true and a device link, -Xfatbin -compress-all: as NCCL builds
#   libfixture-compress-size.so --compress-mode=size (zstd, nvcc 12.8+); left out where nvcc lacks it
# beside each, LIB.res-usage.txt: what cuobjdump -res-usage says of it (the test compares every
# kernel with it), and README.txt: the nvcc version and each entry's compression.
#
# Run on a machine with nvcc (the GPU machine: CUDA 13.0), from the repository root:
#   scripts/make-cubin-fixture.sh [OUTDIR]      (default internal/fatbin/testdata/nvcc; ARCH: sm_90)
# then commit OUTDIR (about 100 KB in all; the script fails past 256 KB). The committed one was
# built without a GPU by Debian's nvcc 11.8 (nvidia-cuda-toolkit, non-free; gcc 12 needs
# NVCC_APPEND_FLAGS=-allow-unsupported-compiler); a run with nvcc 13.0 replaces it.
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${1:-internal/fatbin/testdata/nvcc}
ARCH=${ARCH:-sm_90}
NVCC=${NVCC:-nvcc}
command -v "$NVCC" > /dev/null || NVCC=/usr/local/cuda/bin/nvcc
CUOBJDUMP=$(dirname "$(command -v "$NVCC")")/cuobjdump
mkdir -p "$OUT"
rm -f "$OUT"/*.so "$OUT"/*.res-usage.txt "$OUT"/README.txt
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

cat > "$tmp/kernel.cu" <<'EOF'
// NAME keeps LIVE values in registers until the end: with -maxrregcount it
// uses exactly its cap (and spills the rest).
#define LIVE 140
extern "C" __global__ void NAME(const volatile unsigned* in, unsigned* out) {
  unsigned v[LIVE];
#pragma unroll
  for (int i = 0; i < LIVE; i++) v[i] = in[i * blockDim.x + threadIdx.x];
  unsigned acc = 0;
#pragma unroll
  for (int i = 0; i < LIVE / 2; i++) acc += v[i] * v[LIVE - 1 - i];
  out[threadIdx.x] = acc;
}
EOF
cat > "$tmp/exports.c" <<'EOF'
// What a library whose kernels call the device hook exports.
__attribute__((visibility("default"))) const char* ncclProfilerDevFuncName(int id) { return id == 0 ? "Fixture" : 0; }
EOF
cc -O2 -fPIC -c -o "$tmp/exports.o" "$tmp/exports.c"

# build NAME FLAGS...: lib NAME from fixture_r32.o and fixture_r64.o compiled with FLAGS.
build() {
  local name=$1; shift
  local objs=()
  for r in 32 64; do
    "$NVCC" -arch="$ARCH" -O3 -Xcompiler -fPIC -DNAME=fixture_r$r -maxrregcount=$r "$@" -c -o "$tmp/$name-r$r.o" "$tmp/kernel.cu" || return 1
    objs+=("$tmp/$name-r$r.o")
  done
  # -cudart shared: no static runtime in the library (it is parsed, never loaded).
  "$NVCC" -arch="$ARCH" -shared -cudart shared "$@" -o "$OUT/$name.so" "${objs[@]}" "$tmp/exports.o" || return 1
  strip --strip-unneeded "$OUT/$name.so"
  "$CUOBJDUMP" -res-usage "$OUT/$name.so" > "$OUT/$name.res-usage.txt"
}

build libfixture-plain
build libfixture-rdc-lz4 -rdc=true -Xfatbin -compress-all
if "$NVCC" --help 2>/dev/null | grep -q -- '--compress-mode'; then
  build libfixture-compress-size --compress-mode=size
else
  echo "nvcc has no --compress-mode: libfixture-compress-size.so left out"
fi

# The entries' flags (0x2000: LZ4, 0x8000: zstd), from the container headers.
{
  "$NVCC" --version | tail -2
  for so in "$OUT"/*.so; do
    python3 - "$so" <<'PY'
import struct, subprocess, sys
so = sys.argv[1]
sec = subprocess.run(["readelf", "-SW", so], capture_output=True, text=True).stdout
off = size = None
for line in sec.splitlines():
    f = line.replace("[ ", "[").split()
    if ".nv_fatbin" in f:
        i = f.index(".nv_fatbin")
        off, size = int(f[i + 3], 16), int(f[i + 4], 16)
d = open(so, "rb").read()[off:off + size]
p, out = 0, []
while p + 16 <= len(d):
    magic, _, hs, body = struct.unpack_from("<IHHQ", d, p)
    if magic != 0xBA55ED50:
        p += 8
        continue
    q, end = p + hs, p + hs + body
    while q < end:
        kind, _, ehs, stored = struct.unpack_from("<HHIQ", d, q)
        arch, = struct.unpack_from("<I", d, q + 28)
        flags, = struct.unpack_from("<Q", d, q + 40)
        comp = "zstd" if flags & 0x8000 else "lz4" if flags & 0x2000 else "plain"
        out.append(f"{'cubin' if kind == 2 else 'ptx' if kind == 1 else kind} sm_{arch} {comp}")
        q += ehs + stored
    p = (end + 7) & ~7
print(so.split("/")[-1] + ": " + ", ".join(out))
PY
  done
} > "$OUT/README.txt"
cat "$OUT/README.txt"
cat "$OUT"/*.res-usage.txt | grep -A1 "Function fixture"
total=$(du -cb "$OUT"/* | tail -1 | cut -f1)
echo "$OUT: $total bytes"
[ "$total" -le 262144 ] || { echo "make-cubin-fixture.sh: $OUT is $total bytes, more than 256 KB: too large to commit"; exit 1; }
