#!/usr/bin/env bash
# Measures what the defaults of regress.sh and ncclhooks diff do on this
# machine: PAIRS jobs whose baseline and candidate are the same build and
# workload (every FAIL is a false alarm), and PAIRS jobs whose candidate has
# a planted slowdown (`ncclhooks run --slowdown 1.05`: every work item lasts
# about 5% longer; every PASS is a miss). Each job is regress.sh as CI runs it,
# with its defaults (RUNS runs per side, interleaved, and diff's defaults).
# The figures in examples/ci/README.md come from this script.
#
# usage: calibrate.sh [PAIRS] (default 20)
# Environment: SLOWDOWN (default 1.05), KINDS (default "identical planted":
# which halves to run; the planted half appends --slowdown to BASE_CMD, so it
# needs the harness, while KINDS=identical measures any workload's false
# alarms), WORK (scratch directory, default a new temporary one, removed at
# the end unless KEEP=1), and what regress.sh reads (NCCLHOOKS, PROFILE,
# RUNS, BASE_CMD, DIFF_FLAGS).
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)
export NCCLHOOKS=${NCCLHOOKS:-$root/build/ncclhooks}
export PROFILE=${PROFILE:-$root/examples/all-events.yaml}
pairs=${1:-20}
slowdown=${SLOWDOWN:-1.05}
base_cmd=${BASE_CMD:-'"$NCCLHOOKS" run "$PROFILE" --backend cpu --items 1000 --no-verify --out "$NCCL_HOOKS_DUMP_DIR"'}
work=${WORK:-$(mktemp -d "${TMPDIR:-/tmp}/ncclhooks-calibrate.XXXXXX")}
if [[ ${KEEP:-0} != 1 && -z ${WORK:-} ]]; then
	trap 'rm -rf "$work"' EXIT
fi
mkdir -p "$work"

kinds=${KINDS:-identical planted}
echo "calibrate.sh: $pairs pairs each of: $kinds (planted: --slowdown $slowdown), RUNS=${RUNS:-20} per side; $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg) at the start"
echo "job: BASE_CMD=$base_cmd"
echo "diff: ncclhooks diff BASE NEW ${DIFF_FLAGS:-(defaults)}"
declare -A count
effects=()
for kind in $kinds; do
	for p in $(seq -w 1 "$pairs"); do
		new_cmd=$base_cmd
		[[ $kind == planted ]] && new_cmd="$base_cmd --slowdown $slowdown"
		out=$work/$kind-$p
		set +e
		OUT=$out BASE_CMD=$base_cmd NEW_CMD=$new_cmd "$here/regress.sh" >"$out.log" 2>&1
		code=$?
		set -e
		summary=$(grep -m1 '^### ' "$out/diff.md" 2>/dev/null | sed 's/^### [^ ]* ncclhooks diff: //' || true)
		echo "$kind $p: exit $code: ${summary:-$(tail -n 1 "$out.log")}"
		count[$kind-$code]=$((${count[$kind-$code]:-0} + 1))
		if [[ $kind == planted ]]; then
			# The estimated change of the first row, as the diff measured it.
			e=$("$NCCLHOOKS" diff "$out/base" "$out/new" ${DIFF_FLAGS:-} --json 2>/dev/null |
				awk -F': ' '/"estimate_lo"/ { gsub(/,/, "", $2); print $2; exit }' || true)
			[[ -n $e ]] && effects+=("$e")
		fi
	done
done
median=$(printf '%s\n' "${effects[@]}" | sort -g | awk '{ v[NR] = $1 } END { if (NR) printf "%+.1f%%", 100 * (NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2) }')
echo
if [[ " $kinds " == *" identical "* ]]; then
	echo "identical: ${count[identical-1]:-0} of $pairs FAIL (false alarms), ${count[identical-0]:-0} PASS, ${count[identical-2]:-0} no verdict"
fi
if [[ " $kinds " == *" planted "* ]]; then
	echo "planted --slowdown $slowdown: ${count[planted-1]:-0} of $pairs FAIL (caught), ${count[planted-0]:-0} PASS (missed), ${count[planted-2]:-0} no verdict; median measured change ${median:-n/a}"
fi
echo "load average $(cut -d' ' -f1-3 /proc/loadavg) at the end"
