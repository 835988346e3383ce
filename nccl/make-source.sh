#!/usr/bin/env bash
# Make nccl/src/nccl-<tag>.tar.xz, a `git archive` of an NCCL tag (or branch), so that NCCL's source can be
# carried to a machine without network (see nccl/README.md). nccl/src/ is git-ignored.
#
#   nccl/make-source.sh [--git-dir DIR] [TAG ...]
#
# DIR defaults to /work/.mirror/NVIDIA+nccl/repo (a bare mirror of github.com/NVIDIA/nccl).
# TAGs default to the NCCL tags nccl/patches/ has patches for (v*.patch).
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
gitdir=/work/.mirror/NVIDIA+nccl/repo
tags=()
while [[ $# -gt 0 ]]; do
  case "$1" in
    --git-dir) gitdir=${2:?--git-dir needs a directory}; shift 2 ;;
    --git-dir=*) gitdir=${1#--git-dir=}; shift ;;
    -h|--help) sed -n '2,8p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    -*) echo "make-source.sh: unknown option $1" >&2; exit 2 ;;
    *) tags+=("$1"); shift ;;
  esac
done
if [[ ${#tags[@]} -eq 0 ]]; then
  # NCCL's tags only: nccl-tests.patch is for NVIDIA/nccl-tests, not a tag of NCCL.
  for p in "$here"/patches/v*.patch; do [[ -e $p ]] && tags+=("$(basename "$p" .patch)"); done
  [[ ${#tags[@]} -gt 0 ]] || { echo "make-source.sh: no tags given and no nccl/patches/*.patch" >&2; exit 2; }
fi

command -v git >/dev/null || { echo "make-source.sh: git not found" >&2; exit 1; }
command -v xz >/dev/null || { echo "make-source.sh: xz not found" >&2; exit 1; }
git --git-dir="$gitdir" rev-parse --git-dir >/dev/null 2>&1 ||
  { echo "make-source.sh: $gitdir is not a git directory (use --git-dir)" >&2; exit 1; }

mkdir -p "$here/src"
for tag in "${tags[@]}"; do
  # A tag, or a branch (such as dev, for NCCL versions not yet tagged).
  ref=refs/tags/$tag
  git --git-dir="$gitdir" rev-parse -q --verify "$ref^{commit}" >/dev/null || ref=refs/heads/$tag
  git --git-dir="$gitdir" rev-parse -q --verify "$ref^{commit}" >/dev/null ||
    { echo "make-source.sh: no tag or branch $tag in $gitdir" >&2; exit 1; }
  out="$here/src/nccl-$tag.tar.xz"
  # The archive's top folder is nccl-<tag>/; scripts/build-nccl.sh strips it.
  git --git-dir="$gitdir" archive --format=tar --prefix="nccl-$tag/" "$ref" | xz -T0 -6 > "$out.tmp"
  mv "$out.tmp" "$out"
  printf '%s  %s bytes\n' "$out" "$(stat -c %s "$out")"
done
