#!/usr/bin/env bash
# Calibrates ncclhooks diff on the cpu harness (bench/RESULTS.md, "diff
# calibration"). Each of PAIRS trials runs RUNS base runs, RUNS more runs of
# the same build and workload, and RUNS runs with a planted slowdown
# (`ncclhooks run --slowdown`), interleaved so that the machine's load falls
# on all three alike; then it diffs base against the identical runs (a FAIL
# is a false alarm) and base against the planted runs (a FAIL is a catch,
# anything else a miss). The identical and planted diffs share their base
# runs, so a trial costs 3 x RUNS runs. It prints one line per trial and the
# counts per threshold (THRESHOLDS, each a --max-regress), with the median
# and largest detectable change of the identical diffs.
#
# usage: scripts/diff-calibrate.sh
# Environment: PROFILE (examples/all-events.yaml), RUNS (20 per side),
# PAIRS (20), ITEMS (work items per channel, 1000), SLOWDOWN (1.05),
# THRESHOLDS ("2%"), DIFF_FLAGS (more flags for diff, e.g. "--stat p50"), NCCLHOOKS
# (build/ncclhooks), WORK (scratch directory; a new temporary one, removed
# at the end, by default).
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cli=${NCCLHOOKS:-$root/build/ncclhooks}
profile=${PROFILE:-$root/examples/all-events.yaml}
runs=${RUNS:-20}
pairs=${PAIRS:-20}
items=${ITEMS:-1000}
slowdown=${SLOWDOWN:-1.05}
flags=${DIFF_FLAGS:-}
thresholds=${THRESHOLDS:-2%}
if [[ -z ${WORK:-} ]]; then
	work=$(mktemp -d "${TMPDIR:-/tmp}/diff-calibrate.XXXXXX")
	trap 'rm -rf "$work"' EXIT
else
	work=$WORK
	mkdir -p "$work"
fi

run() { # run DIR [FLAGS...]: one harness run, its output in DIR
	local dir=$1
	shift
	"$cli" -q run "$profile" --backend cpu --items "$items" --no-verify --out "$dir" "$@" >/dev/null 2>"$dir.err" ||
		{ echo "diff-calibrate: run failed: $(tail -n 3 "$dir.err")" >&2; exit 1; }
}

# verdict BASE NEW THRESHOLD: prints "EXIT DETECTABLE" of diff BASE NEW.
verdict() {
	local code=0
	# shellcheck disable=SC2086 # flags are words
	"$cli" diff "$1" "$2" --max-regress "$3" $flags --json >"$work/diff.json" 2>"$work/diff.err" || code=$?
	local det
	det=$(awk -F': ' '/^  "detectable_change"/ { gsub(/[",]/, "", $2); print $2 }' "$work/diff.json")
	echo "$code ${det:-n/a}"
}

echo "diff-calibrate: $(basename "$profile"), $runs runs per side, $pairs trials, --items $items, planted --slowdown $slowdown, --max-regress $thresholds, more diff flags: ${flags:-none}"
echo "$(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg) at the start"
declare -A count dets
for p in $(seq -w 1 "$pairs"); do
	t=$work/trial-$p
	mkdir -p "$t/base" "$t/same" "$t/planted"
	for i in $(seq -w 1 "$runs"); do
		run "$t/base/r$i"
		run "$t/same/r$i"
		run "$t/planted/r$i" --slowdown "$slowdown"
	done
	line="trial $p:"
	for th in $thresholds; do
		read -r same det_same < <(verdict "$t/base" "$t/same" "$th")
		read -r planted det_planted < <(verdict "$t/base" "$t/planted" "$th")
		count[$th-same-$same]=$((${count[$th-same-$same]:-0} + 1))
		count[$th-planted-$planted]=$((${count[$th-planted-$planted]:-0} + 1))
		dets[$th]+="$det_same "
		line+=" at $th identical exit $same (detectable $det_same), planted exit $planted;"
	done
	echo "$line"
	rm -rf "$t"
done
echo
for th in $thresholds; do
	stat=$(printf '%s\n' ${dets[$th]} | grep -v n/a | sort -g | awk '{ v[NR] = $1 } END { if (NR) printf "median %+.2f%%, largest %+.2f%%", 100 * v[int((NR + 1) / 2)], 100 * v[NR] }')
	echo "--max-regress $th: identical: ${count[$th-same-1]:-0} of $pairs FAIL (false alarms), ${count[$th-same-0]:-0} PASS, ${count[$th-same-2]:-0} no verdict;" \
		"planted: ${count[$th-planted-1]:-0} of $pairs FAIL (caught), ${count[$th-planted-0]:-0} PASS, ${count[$th-planted-2]:-0} no verdict;" \
		"detectable change (identical): ${stat:-n/a}"
done
echo "load average $(cut -d' ' -f1-3 /proc/loadavg) at the end"
