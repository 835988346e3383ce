#!/usr/bin/env bash
# CI regression job for ncclhooks: capture a baseline and a candidate run of a
# workload with a hook profile (or take existing outputs), compare them with
# `ncclhooks diff`, and exit with its verdict: 0 pass, 1 regression, 2 error.
#
# usage: regress.sh                 run BASE_CMD then NEW_CMD, compare
#        regress.sh BASE_OUT        run NEW_CMD, compare with a stored baseline
#        regress.sh BASE_OUT NEW_OUT  compare two existing outputs
#        regress.sh --capture DIR   only run BASE_CMD, its output in DIR (to
#                                   store a baseline, e.g. built from main)
#
# BASE_OUT/NEW_OUT are dump directories (or JSON lines files). Environment:
#   NCCLHOOKS   the CLI (default: build/ncclhooks of this repository)
#   PROFILE     the hook profile (default: examples/all-events.yaml)
#   BASE_CMD    the baseline workload, run by bash with NCCL_HOOKS_PROFILE and
#               NCCL_HOOKS_DUMP_DIR exported (default: the cpu harness,
#               `ncclhooks run`). A real job runs e.g.
#               'torchrun --nproc-per-node 8 bench.py' with
#               NCCL_PROFILER_PLUGIN=hooks and the plugin on LD_LIBRARY_PATH.
#   NEW_CMD     the candidate workload (default: BASE_CMD)
#   DIFF_FLAGS  flags for ncclhooks diff (default: --stat p50 --max-regress 5%
#               --min-samples 30)
#   OUT         where outputs, logs, diff.md, report.md and trace.json go
#               (default: ncclhooks-ci)
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
export NCCLHOOKS=${NCCLHOOKS:-$root/build/ncclhooks}
export PROFILE=${PROFILE:-$root/examples/all-events.yaml}
BASE_CMD=${BASE_CMD:-'"$NCCLHOOKS" run "$PROFILE" --backend cpu --items 200 --no-verify --out "$NCCL_HOOKS_DUMP_DIR"'}
NEW_CMD=${NEW_CMD:-$BASE_CMD}
DIFF_FLAGS=${DIFF_FLAGS:---stat p50 --max-regress 5% --min-samples 30}
OUT=${OUT:-ncclhooks-ci}

if [[ ! -x $NCCLHOOKS ]]; then
	echo "regress.sh: $NCCLHOOKS not found: run 'make build' or set NCCLHOOKS" >&2
	exit 2
fi
mkdir -p "$OUT"

# capture DIR CMD: run one workload with the profile, its output in DIR.
capture() {
	local dir=$1 log=$1.log
	rm -rf "$dir"
	mkdir -p "$dir"
	echo "== $dir: $2" >&2
	if ! NCCL_HOOKS_PROFILE=$PROFILE NCCL_HOOKS_DUMP_DIR=$dir bash -c "$2" >"$log" 2>&1; then
		echo "regress.sh: the workload failed; the end of $log:" >&2
		tail -n 30 "$log" >&2
		exit 2
	fi
}

if [[ ${1:-} == --capture ]]; then
	[[ $# -eq 2 ]] || { echo "usage: regress.sh --capture DIR" >&2; exit 2; }
	capture "$2" "$BASE_CMD"
	exit 0
fi

case $# in
0)
	capture "$OUT/base" "$BASE_CMD"
	capture "$OUT/new" "$NEW_CMD"
	base=$OUT/base new=$OUT/new
	;;
1)
	capture "$OUT/new" "$NEW_CMD"
	base=$1 new=$OUT/new
	;;
2) base=$1 new=$2 ;;
*)
	sed -n '2,27p' "$0" >&2
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

# Artifacts for whoever investigates: the candidate's full report and trace.
if [[ $verdict -ne 2 ]]; then
	"$NCCLHOOKS" report "$new" --markdown >"$OUT/report.md" || true
	"$NCCLHOOKS" trace "$new" -o "$OUT/trace.json" 2>/dev/null || true
fi

case $verdict in
0) echo "regress.sh: PASS" >&2 ;;
1) echo "regress.sh: FAIL: regression (see $OUT/diff.md; open $OUT/trace.json at https://ui.perfetto.dev)" >&2 ;;
*) echo "regress.sh: ERROR: ncclhooks diff could not compare the runs" >&2 ;;
esac
exit $verdict
