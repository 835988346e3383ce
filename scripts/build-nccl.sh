#!/usr/bin/env bash
# Build NCCL with the device profiler hook patch (NVIDIA/nccl PR 2285, see nccl/README.md),
# from a source tarball made by nccl/make-source.sh, without network and without a git checkout.
#
#   scripts/build-nccl.sh --tag v2.28.9-1 --out DIR [--tarball FILE] [--arch sm_90]
#       [--only-funcs "PATTERN"] [--jobs N] [--cuda-home DIR]
#       [--patch FILE | --no-patch] [--suffix S] [--work-dir DIR]
#
# Result: DIR/lib/libnccl.so.2 (+ libnccl.so, libnccl.so.2.X.Y), DIR/include/nccl.h and
# DIR/build-info.txt (tag, patch sha256, arch, only-funcs, nvcc version, build seconds).
#
#   --tarball    default nccl/src/nccl-<tag>.tar.xz
#   --arch       sm_XY (also sm_XYa, sm_XYf, or just XY); default sm_90 (H100/H200)
#   --only-funcs NCCL's ONLY_FUNCS regex (src/device/generate.py); "" or "all" builds every function.
#                Default: SendRecv plus AllReduce/ReduceScatter Sum f32 and AllGather, RING, LL and SIMPLE.
#                A collective whose algorithm/protocol is not built runs NCCL's Nop function: pin
#                NCCL_ALGO=Ring NCCL_PROTO=LL,Simple when running collectives on such a build.
#   --jobs       parallel make jobs; default nproc
#   --cuda-home  default $CUDA_HOME, else /usr/local/cuda (nvcc must be DIR/bin/nvcc)
#   --patch      default nccl/patches/<tag>.patch; --no-patch builds stock NCCL (for comparisons)
#   --suffix     NCCL_SUFFIX, shown in the "NCCL version 2.28.9-devhook+cuda13.0" line that NCCL_DEBUG=VERSION
#                or INFO prints, so a log tells the patched library from the stock one.
#                Default "-devhook" when patched, "" with --no-patch
#   --work-dir   where the tree is extracted and built (kept); default a temporary dir, removed after
set -euo pipefail

die() { echo "build-nccl.sh: $*" >&2; exit 1; }
abspath() { echo "$(cd "$(dirname "$1")" && pwd)/$(basename "$1")"; }

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
tag= tarball= arch=sm_90 jobs= cudahome= out= patch= nopatch=0 workdir= suffix= suffix_set=0
onlyfuncs_set=0 onlyfuncs=
default_funcs="(SendRecv|AllReduce Sum f32 RING (LL|SIMPLE)|ReduceScatter Sum f32 RING (LL|SIMPLE)|AllGather RING (LL|SIMPLE))"

while [[ $# -gt 0 ]]; do
  opt=$1
  case "$opt" in
    --*=*) set -- "${opt%%=*}" "${opt#*=}" "${@:2}"; continue ;;
    --no-patch|-h|--help) ;;
    --*) [[ $# -ge 2 ]] || die "$opt needs a value" ;;
  esac
  case "$opt" in
    --tag) tag=${2:?--tag needs a value}; shift 2 ;;
    --tarball) tarball=${2:?--tarball needs a file}; shift 2 ;;
    --arch) arch=${2:?--arch needs a value}; shift 2 ;;
    --only-funcs) onlyfuncs=${2-}; onlyfuncs_set=1; shift 2 ;;
    --jobs) jobs=${2:?--jobs needs a number}; shift 2 ;;
    --cuda-home) cudahome=${2:?--cuda-home needs a directory}; shift 2 ;;
    --out) out=${2:?--out needs a directory}; shift 2 ;;
    --patch) patch=${2:?--patch needs a file}; shift 2 ;;
    --no-patch) nopatch=1; shift ;;
    --suffix) suffix=${2-}; suffix_set=1; shift 2 ;;
    --work-dir) workdir=${2:?--work-dir needs a directory}; shift 2 ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed -e '$d' -e 's/^# \{0,1\}//'; exit 0 ;;
    *) die "unknown argument '$opt' (see --help)" ;;
  esac
done

[[ -n $tag ]] || die "--tag is required (e.g. --tag v2.28.9-1)"
if [[ $suffix_set == 0 && $nopatch == 0 ]]; then suffix=-devhook; fi
[[ $suffix =~ ^[A-Za-z0-9._+-]*$ ]] || die "--suffix may only contain letters, digits and . _ + -"
[[ -n $out ]] || die "--out is required"
[[ $onlyfuncs_set == 1 ]] || onlyfuncs=$default_funcs
[[ $onlyfuncs == all ]] && onlyfuncs=
[[ -n $jobs ]] || jobs=$(nproc)
[[ $jobs =~ ^[0-9]+$ && $jobs -gt 0 ]] || die "--jobs must be a positive number, not '$jobs'"

# Source tarball
tarball=${tarball:-$repo/nccl/src/nccl-$tag.tar.xz}
[[ -f $tarball ]] || die "source tarball $tarball not found: run nccl/make-source.sh $tag where the NCCL mirror is, and copy nccl/src/ here (or pass --tarball)"
tarball=$(abspath "$tarball")

# Patch
if [[ $nopatch == 1 ]]; then
  patch=
else
  patch=${patch:-$repo/nccl/patches/$tag.patch}
  [[ -f $patch ]] || die "patch $patch not found (nccl/patches/ has: $(cd "$repo/nccl/patches" 2>/dev/null && ls *.patch 2>/dev/null | tr '\n' ' '))"
  patch=$(abspath "$patch")
  command -v patch >/dev/null || command -v git >/dev/null || die "neither 'patch' nor 'git' is installed: one is needed to apply $patch"
fi

# Architecture: sm_90 -> -gencode=arch=compute_90,code=sm_90 (sm_100a -> compute_100a/sm_100a)
a=${arch#sm_}; a=${a#compute_}
[[ $a =~ ^[0-9]+[af]?$ ]] || die "--arch must look like sm_90, sm_100a or 90, not '$arch'"
arch=sm_$a
gencode="-gencode=arch=compute_$a,code=sm_$a"

# CUDA
cudahome=${cudahome:-${CUDA_HOME:-/usr/local/cuda}}
nvcc=$cudahome/bin/nvcc
[[ -x $nvcc ]] || die "nvcc not found at $nvcc: pass --cuda-home DIR (DIR/bin/nvcc) or set CUDA_HOME"
[[ -f $cudahome/include/cuda_runtime.h ]] || die "$cudahome/include/cuda_runtime.h not found: --cuda-home is not a CUDA toolkit"
cudalib=
for d in "$cudahome/lib64" "$cudahome/lib/x86_64-linux-gnu" "$cudahome/lib" "$cudahome/targets/x86_64-linux/lib"; do
  if [[ -e $d/libcudart_static.a ]]; then cudalib=$d; break; fi
done
[[ -n $cudalib ]] || die "libcudart_static.a not found under $cudahome (lib64, lib/x86_64-linux-gnu, lib)"
nvccver=$("$nvcc" --version | grep -i release | sed 's/.*release //')
command -v python3 >/dev/null || die "python3 is required (NCCL's src/device/generate.py)"
command -v xz >/dev/null || die "xz is required to unpack $tarball"

# Work dir
cleanup=
if [[ -z $workdir ]]; then
  workdir=$(mktemp -d "${TMPDIR:-/tmp}/build-nccl.XXXXXX")
  cleanup=$workdir
fi
trap 'if [[ -n $cleanup ]]; then rm -rf "$cleanup"; fi' EXIT
mkdir -p "$workdir"
workdir=$(cd "$workdir" && pwd)
src=$workdir/nccl-$tag
rm -rf "$src"
mkdir -p "$src"
tar -xJf "$tarball" -C "$src" --strip-components=1 || die "could not extract $tarball"
[[ -f $src/makefiles/version.mk && -f $src/src/device/generate.py ]] || die "$tarball does not look like an NCCL source tree"

patchsha=none
if [[ -n $patch ]]; then
  patchsha=$(sha256sum "$patch" | cut -d' ' -f1)
  if command -v patch >/dev/null; then
    (cd "$src" && patch -p1 --forward --batch --quiet < "$patch") || die "patch $patch does not apply to $tarball (wrong tag?)"
  else
    (cd "$src" && git apply -p1 "$patch") || die "patch $patch does not apply to $tarball (wrong tag?)"
  fi
fi

echo "build-nccl.sh: $tag ${patch:+patched with $(basename "$patch") }for $arch, CUDA $nvccver ($cudahome), ONLY_FUNCS='${onlyfuncs}', -j$jobs in $src"
start=$(date +%s.%N)
log=$workdir/build.log
if ! make -C "$src" -j"$jobs" src.lib \
    BUILDDIR="$src/build" CUDA_HOME="$cudahome" CUDA_LIB="$cudalib" CUDA_INC="$cudahome/include" NVCC="$nvcc" \
    NVCC_GENCODE="$gencode" ONLY_FUNCS="$onlyfuncs" NCCL_SUFFIX="$suffix" > "$log" 2>&1; then
  tail -n 40 "$log" >&2
  if [[ -n $cleanup ]]; then cleanup=; echo "build-nccl.sh: build tree kept in $workdir" >&2; fi
  die "make failed (full log: $log)"
fi
secs=$(python3 -c "print('%.1f' % ($(date +%s.%N) - $start))")

mkdir -p "$out/lib" "$out/include"
out=$(cd "$out" && pwd)
cp -a "$src"/build/lib/libnccl.so* "$out/lib/"
cp -a "$src"/build/include/. "$out/include/"
[[ -e $out/lib/libnccl.so.2 && -f $out/include/nccl.h ]] || die "build finished but libnccl.so.2 or nccl.h is missing in $src/build"

version=$(sed -n 's/^NCCL_\(MAJOR\|MINOR\|PATCH\) *:= *//p' "$src/makefiles/version.mk" | paste -sd.)
{
  echo "tag: $tag"
  echo "nccl_version: $version$suffix"
  echo "patch: $(if [[ -n $patch ]]; then basename "$patch"; else echo none; fi)"
  echo "patch_sha256: $patchsha"
  echo "tarball: $(basename "$tarball")"
  echo "tarball_sha256: $(sha256sum "$tarball" | cut -d' ' -f1)"
  echo "arch: $arch"
  echo "nvcc_gencode: $gencode"
  echo "only_funcs: ${onlyfuncs:-<all>}"
  echo "cuda_home: $cudahome"
  echo "nvcc_version: $nvccver"
  echo "jobs: $jobs"
  echo "build_seconds: $secs"
  echo "built_at: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "host: $(uname -n) ($(nproc) cores)"
} > "$out/build-info.txt"
echo "build-nccl.sh: built in ${secs}s -> $out/lib/libnccl.so.2 ($(stat -L -c %s "$out/lib/libnccl.so.2") bytes)"
