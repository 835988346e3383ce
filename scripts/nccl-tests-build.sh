#!/usr/bin/env bash
# Builds NVIDIA/nccl-tests (nccl/src/nccl-tests.tar.xz, patched with
# nccl/patches/nccl-tests.patch: one process per rank without MPI, and
# NCCL_TESTS_DELAY_US, a planted straggler) against one NCCL, for sm_90.
#   scripts/nccl-tests-build.sh NCCL_DIR BUILD_DIR [TEST ...]
# NCCL_DIR holds lib/libnccl.so.2 and include/nccl.h. The binaries go to BUILD_DIR/build;
# a BUILD_DIR that already has them is kept (built once where several scripts ask at once). TESTs default to the four the ranks step runs.
set -uo pipefail
cd "$(dirname "$0")/.."
NCCL=$(realpath "${1:?usage: nccl-tests-build.sh NCCL_DIR BUILD_DIR [TEST ...]}")
T=${2:?BUILD_DIR}
shift 2
tests=("$@")
[ ${#tests[@]} -gt 0 ] || tests=(all_reduce_perf all_gather_perf reduce_scatter_perf sendrecv_perf)
# Scripts running at once (the ranks step's streams of one NCCL) build one BUILD_DIR once:
# the first takes the lock and builds, the others wait for it and keep what it built.
mkdir -p "$(dirname "$T")"
exec {lock}> "$T.lock"
flock "$lock"
missing=0
for t in "${tests[@]}"; do [ -x "$T/build/$t" ] || missing=1; done
[ $missing = 0 ] && exit 0
# A private NCCL_HOME: the wheel has no libnccl.so link.
rm -rf "$T" && mkdir -p "$T/home/lib" && tar xJf nccl/src/nccl-tests.tar.xz -C "$T" --strip-components=1 || exit 1
ln -s "$NCCL/include" "$T/home/include"; ln -s "$NCCL/lib/libnccl.so.2" "$T/home/lib/libnccl.so"; ln -s "$NCCL/lib/libnccl.so.2" "$T/home/lib/libnccl.so.2"
(cd "$T" && patch -p1 -s < "$OLDPWD/nccl/patches/nccl-tests.patch") || { echo "FAIL: nccl/patches/nccl-tests.patch does not apply"; exit 1; }
make -j16 -C "$T/src" MPI=0 NCCL_HOME="$T/home" CUDA_HOME=${CUDA_HOME:-/usr/local/cuda} \
  NVCC_GENCODE="-gencode=arch=compute_90,code=sm_90" BUILDDIR="$T/build" $(printf "$T/build/%s " "${tests[@]}") > "$T/build.log" 2>&1 ||
  { echo "FAIL: building nccl-tests against $NCCL:"; tail -20 "$T/build.log"; exit 1; }
