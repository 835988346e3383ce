#!/usr/bin/env bash
# CI regression job for ncclhooks: capture RUNS baseline and RUNS candidate
# runs of a workload with a hook profile (or take existing outputs), compare
# them with `ncclhooks diff`, and exit with its verdict: 0 pass,
# 1 regression, 2 no verdict (insufficient data) or error.
#
# usage: regress.sh                   run BASE_CMD and NEW_CMD RUNS times each,
#                                     interleaved, compare
#        regress.sh BASE_OUT          run NEW_CMD RUNS times, compare with a
#                                     stored baseline
#        regress.sh BASE_OUT NEW_OUT  compare existing outputs
#        regress.sh --capture DIR     only run BASE_CMD RUNS times, the runs in
#                                     DIR/run-01 ... (to store a baseline)
#
# BASE_OUT/NEW_OUT are what ncclhooks diff takes: a directory of runs (one per
# subdirectory, as --capture writes), one run's dump directory, or a JSON
# lines file. regress.sh deletes nothing it did not create: a directory it
# writes (OUT, or DIR of --capture) must be new, empty, or one it made before
# (it leaves a .ncclhooks-regress file there); otherwise it refuses.
#
# Environment:
#   NCCLHOOKS   the CLI (default: build/ncclhooks of this repository)
#   PROFILE     the hook profile (default: examples/all-events.yaml)
#   RUNS        runs per side (default 20, calibrated in bench/RESULTS.md; ncclhooks diff needs at least 4)
#   BASE_CMD    the baseline workload, run by bash with NCCL_HOOKS_PROFILE and
#               NCCL_HOOKS_DUMP_DIR exported (default: the cpu harness,
#               `ncclhooks run`). A real job runs e.g.
#               'torchrun --nproc-per-node 8 bench.py' with
#               NCCL_PROFILER_PLUGIN=hooks and the plugin on LD_LIBRARY_PATH.
#   NEW_CMD     the candidate workload (default: BASE_CMD)
#   DIFF_FLAGS  flags for ncclhooks diff (default: none: its defaults, which
#               examples/ci/README.md measures)
#   OUT         where runs, logs, diff.md, report.md and trace.json go
#               (default: ncclhooks-ci)
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
export NCCLHOOKS=${NCCLHOOKS:-$root/build/ncclhooks}
export PROFILE=${PROFILE:-$root/examples/all-events.yaml}
RUNS=${RUNS:-20}
BASE_CMD=${BASE_CMD:-'"$NCCLHOOKS" run "$PROFILE" --backend cpu --items 1000 --no-verify --out "$NCCL_HOOKS_DUMP_DIR"'}
NEW_CMD=${NEW_CMD:-$BASE_CMD}
DIFF_FLAGS=${DIFF_FLAGS:-}
OUT=${OUT:-ncclhooks-ci}
marker=.ncclhooks-regress

if [[ ! -x $NCCLHOOKS ]]; then
	echo "regress.sh: $NCCLHOOKS not found: run 'make build' or set NCCLHOOKS" >&2
	exit 2
fi
if ! [[ $RUNS =~ ^[0-9]+$ ]] || ((RUNS < 1)); then
	echo "regress.sh: RUNS=$RUNS: give a number of runs per side (20)" >&2
	exit 2
fi

# claim DIR: make DIR a directory of ours, or refuse. Ours: created here, or
# empty, or marked by an earlier regress.sh; then only what regress.sh writes
# there (run-NN/, run-NN.log, the reports) is ever replaced.
claim() {
	local d=$1
	if [[ -e $d && ! -d $d ]]; then
		echo "regress.sh: $d exists and is not a directory" >&2
		exit 2
	fi
	if [[ -d $d && ! -e $d/$marker && -n $(ls -A "$d") ]]; then
		echo "regress.sh: $d holds files regress.sh did not create; it deletes nothing it did not make: name a new directory (OUT=... or --capture NEW_DIR), or empty it yourself" >&2
		exit 2
	fi
	mkdir -p "$d"
	echo "written by examples/ci/regress.sh; it may replace run-*/, run-*.log and its reports here" >"$d/$marker"
}

# capture DIR I CMD: run one workload with the profile, its output in
# DIR/run-I (DIR claimed before).
capture() {
	local dir=$1/run-$2 log=$1/run-$2.log
	rm -rf "$dir" "$log"
	mkdir -p "$dir"
	echo "== $dir: $3" >&2
	if ! NCCL_HOOKS_PROFILE=$PROFILE NCCL_HOOKS_DUMP_DIR=$dir bash -c "$3" >"$log" 2>&1; then
		echo "regress.sh: the workload failed; the end of $log:" >&2
		tail -n 30 "$log" >&2
		exit 2
	fi
}

# clear DIR: remove the runs an earlier regress.sh left in its claimed DIR.
clear_runs() {
	rm -rf "$1"/run-[0-9]*
}

runs=$(seq -w 1 "$RUNS")
if [[ ${1:-} == --capture ]]; then
	[[ $# -eq 2 ]] || { echo "usage: regress.sh --capture DIR" >&2; exit 2; }
	claim "$2"
	clear_runs "$2"
	for i in $runs; do capture "$2" "$i" "$BASE_CMD"; done
	exit 0
fi

case $# in
0)
	claim "$OUT"
	claim "$OUT/base"
	claim "$OUT/new"
	clear_runs "$OUT/base"
	clear_runs "$OUT/new"
	# Interleaved, so that a change in the machine's load over the job
	# falls on both sides alike.
	for i in $runs; do
		capture "$OUT/base" "$i" "$BASE_CMD"
		capture "$OUT/new" "$i" "$NEW_CMD"
	done
	base=$OUT/base new=$OUT/new
	;;
1)
	claim "$OUT"
	claim "$OUT/new"
	clear_runs "$OUT/new"
	for i in $runs; do capture "$OUT/new" "$i" "$NEW_CMD"; done
	base=$1 new=$OUT/new
	;;
2)
	claim "$OUT"
	base=$1 new=$2
	;;
*)
	sed -n '2,35p' "$0" >&2
	exit 2
	;;
esac

# The verdict: markdown for the pull request comment, shown in the log too.
set +e
# shellcheck disable=SC2086 # DIFF_FLAGS is a list of flags
"$NCCLHOOKS" diff "$base" "$new" $DIFF_FLAGS --markdown >"$OUT/diff.md"
verdict=$?
set -e
cat "$OUT/diff.md"

# Artifacts for whoever investigates: the candidate's full report and trace
# (of its first run).
first=$new
[[ -d $new/run-$(seq -w 1 "$RUNS" | head -n1) ]] && first=$new/run-$(seq -w 1 "$RUNS" | head -n1)
if [[ -s $OUT/diff.md ]]; then
	"$NCCLHOOKS" report "$first" --markdown >"$OUT/report.md" 2>/dev/null || true
	"$NCCLHOOKS" trace "$first" -o "$OUT/trace.json" 2>/dev/null || true
fi

case $verdict in
0) echo "regress.sh: PASS" >&2 ;;
1) echo "regress.sh: FAIL: regression (see $OUT/diff.md; open $OUT/trace.json at https://ui.perfetto.dev)" >&2 ;;
*) echo "regress.sh: NO VERDICT: insufficient data or an input error (see $OUT/diff.md and the message above)" >&2 ;;
esac
exit $verdict
