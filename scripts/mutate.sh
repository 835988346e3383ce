#!/usr/bin/env bash
# mutate.sh: mutation testing (issue 32 item 5). Plants each fault of
# internal/mutants/testdata/NN-name.patch in a copy of the tree and runs the
# tests named for it; a fault that no test notices is a hole in the tests.
#
#   scripts/mutate.sh                 every mutant
#   scripts/mutate.sh 05 lap-loses    the mutants whose file name contains an argument
#
# A mutant is a patch with a preamble that git apply ignores:
#
#   Fault: what a reviewer planted, in one line
#   Tests: PACKAGE [RUN-REGEX]        one or more; each is one go test
#
# For each mutant, in one copy of the working tree under $TMPDIR (the
# checkout itself is never touched): git apply, make build (the plugin and
# the CLI, which the plugin and cmd tests load through NCCLHOOKS_PLUGIN and
# NCCLHOOKS_CLI), each Tests line as go test -count=1 (no -race: the faults
# are logic, not races), then git apply -R. Outcomes:
#
#   killed        a named test failed (the test that failed is recorded)
#   survived      every named test passed: add a test that fails on it
#   timeout       a test ran past MUTATE_TIMEOUT (default 300 s) per Tests line
#   not compiled  the build failed (a mutant to rewrite: it tests nothing)
#
# It prints a table and score = killed / (total - not compiled), writes the
# table as markdown to $MUTATE_OUT (default: $TMPDIR/mutate-results.md), and
# exits 1 if any mutant survived or timed out, 2 on a usage or setup error.
# Not part of make test (minutes: a build and the tests per mutant);
# internal/mutants' TestMutantsApply checks in make test that every patch
# still applies and names tests that exist.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
dir=$root/internal/mutants/testdata
timeout_s=${MUTATE_TIMEOUT:-300}
out_md=${MUTATE_OUT:-${TMPDIR:-/tmp}/mutate-results.md}

patches=()
for p in "$dir"/*.patch; do
	name=$(basename "$p" .patch)
	if [ $# -eq 0 ]; then
		patches+=("$p")
		continue
	fi
	for a in "$@"; do
		case $name in *"$a"*) patches+=("$p"); break ;; esac
	done
done
if [ ${#patches[@]} -eq 0 ]; then
	echo "mutate.sh: no mutant matches: $*" >&2
	exit 2
fi

work=$(mktemp -d "${TMPDIR:-/tmp}/ncclhooks-mutate.XXXXXX")
trap 'rm -rf "$work"' EXIT
tree=$work/tree
mkdir -p "$tree"
# The working tree as it is (tracked and untracked files, not ignored ones:
# no build/ or out/).
(cd "$root" && git ls-files -z --cached --others --exclude-standard |
	xargs -0 cp --parents -t "$tree" 2>/dev/null) || true
(cd "$root" && git ls-files -z --deleted | xargs -0 -r -I{} rm -f "$tree/{}")

export NCCLHOOKS_PLUGIN=$tree/build/libnccl-profiler-hooks.so
export NCCLHOOKS_CLI=$tree/build/ncclhooks

results=()
killed=0 survived=0 timedout=0 notcompiled=0
start_all=$(date +%s)
for p in "${patches[@]}"; do
	name=$(basename "$p" .patch)
	fault=$(sed -n 's/^Fault: //p' "$p" | head -1)
	mapfile -t tests < <(sed -n 's/^Tests: //p' "$p")
	t0=$(date +%s)
	log=$work/$name.log
	: >"$log"
	outcome="" by=""
	if ! (cd "$tree" && git apply "$p") >>"$log" 2>&1; then
		echo "mutate.sh: $name does not apply:" >&2
		cat "$log" >&2
		exit 2
	fi
	if ! (cd "$tree" && make --no-print-directory build) >>"$log" 2>&1; then
		outcome="not compiled"
	else
		for t in "${tests[@]}"; do
			read -r pkg run <<<"$t"
			args=(test -count=1 -timeout "${timeout_s}s" "$pkg")
			[ -n "${run:-}" ] && args+=(-run "$run")
			rc=0
			(cd "$tree" && timeout --kill-after=30 $((timeout_s + 30)) go "${args[@]}") >"$work/out" 2>&1 || rc=$?
			cat "$work/out" >>"$log"
			if [ $rc -eq 0 ]; then
				continue
			fi
			if [ $rc -eq 124 ] || [ $rc -eq 137 ] || grep -q '^panic: test timed out' "$work/out"; then
				outcome=timeout by="$pkg"
			else
				outcome=killed
				# A fault kills the test binary before any "--- FAIL" line.
				failed=$(grep -o -- '^--- FAIL: [^ ]*' "$work/out" | sed 's/^--- FAIL: //' | sort -u | paste -sd, -) || true
				grep -q '^fatal error: ' "$work/out" && failed="${failed:+$failed, }the test process faulted: $(grep -m1 '^fatal error: ' "$work/out")"
				by="${pkg#./} ${failed:-(build or setup of the test binary)}"
			fi
			break
		done
		[ -z "$outcome" ] && outcome=survived
	fi
	(cd "$tree" && git apply -R "$p") >>"$log" 2>&1
	secs=$(($(date +%s) - t0))
	case $outcome in
	killed) killed=$((killed + 1)) ;;
	survived) survived=$((survived + 1)) ;;
	timeout) timedout=$((timedout + 1)) ;;
	"not compiled") notcompiled=$((notcompiled + 1)) ;;
	esac
	printf '%-44s %-12s %4ds  %s\n' "$name" "$outcome" "$secs" "$by"
	if [ "$outcome" != killed ]; then
		echo "  fault: $fault"
		[ "$outcome" = survived ] || tail -20 "$log" | sed 's/^/  | /'
	fi
	results+=("| $name | $fault | $outcome | ${by:-} |")
done
total=${#patches[@]}
scored=$((total - notcompiled))
secs_all=$(($(date +%s) - start_all))
score="n/a"
[ $scored -gt 0 ] && score="$killed/$scored ($((100 * killed / scored))%)"
summary="mutants $total: killed $killed, survived $survived, timeout $timedout, not compiled $notcompiled; score $score; ${secs_all}s"
echo "$summary"
{
	echo "| mutant | fault | outcome | killed by |"
	echo "| --- | --- | --- | --- |"
	printf '%s\n' "${results[@]}"
	echo
	echo "$summary"
} >"$out_md"
echo "table: $out_md"
[ $survived -eq 0 ] && [ $timedout -eq 0 ]
