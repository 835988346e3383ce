#!/usr/bin/env bash
# Everything ncclhooks proves on a GPU machine, in one go. The device machine
# has no Go: `scripts/gpu-check.sh build` here writes .dev/gpu/ (the plugin,
# the CLI, the GPU test binaries) and the NCCL source tarballs (nccl/src/);
# `scripts/gpu-check.sh run` there (carry .dev/gpu and nccl/src) runs:
#   1. patched NCCL builds (v2.28.9-1 and v2.30.7-1, sm_90, SendRecv), in the background
#   2. the GPU tests with NCCLHOOKS_REQUIRE_GPU=1: nvrtc, backend/gpu, gpuinfo (NVML, device lines),
#      harness/gpu and the caller matrix (harness/callers: nvcc-built callers)
#   3. the examples through the harness, stream and graph mode
#   4. acceptance inside each patched NCCL and the time per NCCL call
#   5. NCCL's host events (NCCL_HOOKS_SOURCE=host, scripts/nccl-host.sh): the
#      torch wheel's NCCL (2.28.9, no device hook; must load v5), each patched
#      NCCL from step 1 from host events and from the device hook (must load
#      v7), NCCL 2.31 where NCCL_231_DIR names a build of it (its official v7),
#      torch_nccl_load.py (records must appear), and the latency durations of
#      each side by side
#   6. the hook cost against the nop hook and the sustained rates (ncclhooks bench), with
#      a CPU profile of the drain during the sustained rates ($OUT/drain.pprof)
#   7. the SASS of each example's hook: instructions, atomics, reductions, loads, stores
#      (host231: NCCL's dev branch, unpatched; HOST_WHEEL=0 leaves out the wheel and torch)
#   8. ranks (builds the patched NCCLs itself when the nccl step is not asked for): real
#      collectives between 2 and 4 ranks on GPU 0 with no plugin
#      and every example (scripts/nccl-ranks.sh, nccl-tests; the wheel's NCCL from host events,
#      each patched NCCL from its device hook, for NCCL >= 2.30 also joined by
#      NCCL_MULTI_RANK_GPU_ENABLE=1) and torch_nccl_load.py --ranks 2 from host events, as
#      streams one after another, under MPS where the machine has it; then alone on the GPU
#      the hook's added time inside a 2-rank all-reduce
#      (scripts/nccl-ranks-bench.sh on the newest tag, BENCH_ROUNDS rounds (10) of BENCH_ITERS
#      calls (50)) and a planted straggler (scripts/nccl-straggler.sh)
#   9. budget (builds the patched NCCLs itself when the nccl step is not asked for): the plugin's INFO line of the register budget it read from the NCCL that loaded
#      it (accept.cu linked against the wheel's NCCL and each patched NCCL of step 1; torch's
#      wheel NCCL through torch, which loads it with local symbols), never "version unknown";
#      every kernel of each NCCL read by internal/fatbin against cuobjdump -res-usage, with the
#      time it took; the fixtures; NCCL loaded with local symbols (plugin
#      TestNCCLLoadedWithLocalSymbols)
# Summaries go to $OUT (or out/gpu-check); STEPS="tests nccl examples host host231 budget sass bench ranks"
# picks steps (default all but sass, bench and ranks), GPU_TESTS test packages, NCCL_TAGS tags,
# BENCH_RATES the bench's event rates (default 1e7), RANKS_CONCURRENT=1 the ranks step's streams at once,
# RANKS_PARTS which of its parts run ("wheel torch hostid multirank bench straggler", all by default; the whole
# step takes more than one 10-minute command), RANKS_MPS=0 its correctness streams without MPS,
# GPU_TEST_RUN a -test.run pattern for the tests step.
set -uo pipefail
cd "$(dirname "$0")/.."
BIN=.dev/gpu
read -ra TESTS <<< "${GPU_TESTS:-internal/cuda internal/backend/gpu internal/harness/gpuharness internal/harness/callers internal/gpuinfo}" # GPU_TESTS picks packages
read -ra TAGS <<< "${NCCL_TAGS:-v2.28.9-1 v2.30.7-1}"
case "${1:-}" in
build)
  mkdir -p $BIN
  make build >/dev/null || exit 1
  cp build/ncclhooks build/libnccl-profiler-hooks.so $BIN/
  for p in "${TESTS[@]}" internal/fatbin plugin; do
    go test -c -o $BIN/$(echo $p | tr / _).test ./$p || exit 1
  done
  for tag in v2.28.9-1 v2.30.7-1; do
    [ -f nccl/src/nccl-$tag.tar.xz ] || nccl/make-source.sh $tag || exit 1
  done
  # The newest NCCL source (branch dev), built unpatched by the host step.
  [ -f nccl/src/nccl-dev.tar.xz ] || nccl/make-source.sh dev || exit 1
  # NVIDIA/nccl-tests for the ranks step (patched by nccl/patches/nccl-tests.patch there).
  [ -f nccl/src/nccl-tests.tar.xz ] || { git --git-dir=${NCCL_TESTS_GIT:-/work/.mirror/NVIDIA+nccl-tests/repo} archive --format=tar \
    --prefix=nccl-tests/ HEAD | xz -T0 -6 > nccl/src/nccl-tests.tar.xz; } || exit 1
  exit 0 ;;
run) ;;
*) echo "usage: $0 build|run"; exit 2 ;;
esac
OUT=${OUT:-out/gpu-check}
STEPS=${STEPS:-tests nccl examples host host231 budget}
ROOT=$PWD
WORK=/tmp/gpu-check # everything; $OUT gets the summary files only (the device tool brings back 8)
mkdir -p "$OUT" "$WORK"
export PATH=$PATH:/usr/local/cuda/bin
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export NCCL_HOOKS_CACHE_DIR=/tmp/ncclhooks-cache
export NCCLHOOKS_REQUIRE_GPU=1
has() { [[ " $STEPS " == *" $1 "* ]]; }
# stamp WHAT: a heading with the wall clock and the seconds since the command began.
stamp() { echo "== [$(date -u +%T), ${SECONDS} s] $*"; }
# wheel_nccl: the directory of torch's NCCL wheel (nvidia/nccl), or python's error.
wheel_nccl() { python3 -c 'import nvidia.nccl as m; print(list(m.__path__)[0])' 2>&1; }
part() { [[ " ${RANKS_PARTS:-wheel torch hostid multirank bench straggler} " == *" $1 "* ]]; }
# at_least_230 TAG: NCCL_MULTI_RANK_GPU_ENABLE exists from NCCL 2.30 on.
at_least_230() { [[ $1 =~ ^v2\.([0-9]+)\. ]] && (( BASH_REMATCH[1] >= 30 )); }
# MPS lets the processes of one GPU run at once. mps_start: the daemon, where the machine has it.
MPS_CTL=$(command -v nvidia-cuda-mps-control || ls /usr/local/nvidia/bin/nvidia-cuda-mps-control 2>/dev/null)
mps_start() {
  [ -n "$MPS_CTL" ] || { echo "no nvidia-cuda-mps-control: the ranks take turns on the GPU"; return; }
  export CUDA_MPS_PIPE_DIRECTORY=/tmp/mps-pipe CUDA_MPS_LOG_DIRECTORY=/tmp/mps-log
  mkdir -p $CUDA_MPS_PIPE_DIRECTORY $CUDA_MPS_LOG_DIRECTORY
  "$MPS_CTL" -d && echo "MPS on ($MPS_CTL)"
}
mps_stop() { [ -n "$MPS_CTL" ] && [ -n "${CUDA_MPS_PIPE_DIRECTORY:-}" ] && { echo quit | "$MPS_CTL"; echo "MPS off (exit $?)"; unset CUDA_MPS_PIPE_DIRECTORY CUDA_MPS_LOG_DIRECTORY; }; }

# budget_step prints the plugin's budget line ("ncclhooks: NCCL 2.30.7 at PATH: 312 kernels call the
# hook, 96 registers each, stack 552-792 B: hooks built for at most 96 registers; read in 3ms") of
# each NCCL that loaded it, and checks what internal/fatbin reads against cuobjdump.
budget_step() {
  echo "== budget: the register budget read from the NCCL that loads the plugin"
  local pat='ncclhooks: [^ ].* at /[^ ]*: .*; read in [^ ]+' libs=() wheel tag
  # budget_line LIBDIR INCDIR LABEL SOURCE: accept.cu (1 communicator, send/recv to self) linked
  # against that NCCL loads the plugin once; its budget line, and never "version unknown".
  budget_line() {
    local W=$WORK/budget-$3
    mkdir -p "$W"
    nvcc -std=c++17 -O2 -arch=sm_90 -o "$W/accept" nccl/accept/accept.cu -I"$2" -Xlinker "$1/libnccl.so.2" -lpthread \
      -Xlinker -rpath -Xlinker "$1" > "$W/build.log" 2>&1 || { echo "FAIL budget $3: building accept.cu:"; tail -5 "$W/build.log"; return; }
    LD_LIBRARY_PATH=$1 NCCL_PROFILER_PLUGIN=$ROOT/$BIN/libnccl-profiler-hooks.so NCCL_HOOKS_PROFILE=$ROOT/examples/latency.yaml \
      NCCL_HOOKS_DUMP_DIR=$W/out NCCL_HOOKS_SOURCE=$4 NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,PROFILE \
      timeout 120 "$W/accept" --comms 1 --iters 5 --graph-iters 2 --replays 1 > "$W/run.log" 2>&1
    echo "-- $3 (accept exit $?, NCCL_HOOKS_SOURCE=$4): $(grep -m1 -oE 'Loaded [A-Za-z0-9_-]+ \(v[0-9]+\)' "$W/run.log")"
    grep -m1 -oE "$pat" "$W/run.log" || { echo "FAIL budget $3: no budget line:"; grep -m8 ncclhooks "$W/run.log"; }
    ! grep -m1 "NCCL (version unknown)" "$W/run.log" || echo "FAIL budget $3: the NCCL version is unknown"
  }
  if [ "${HOST_WHEEL:-1}" = 1 ]; then
    wheel=$(wheel_nccl)
    if [ -f "$wheel/lib/libnccl.so.2" ]; then
      libs+=("$wheel/lib/libnccl.so.2")
      budget_line "$wheel/lib" "$wheel/include" wheel host
    else
      echo "FAIL budget: the torch wheel's NCCL not found ('$wheel')"
    fi
    echo "-- torch with the wheel's NCCL (torch loads it with local symbols)"
    timeout 300 python3 internal/harness/torch/torch_nccl_load.py $BIN/libnccl-profiler-hooks.so examples/latency.yaml "$WORK/budget-torch" > "$WORK/budget-torch.log" 2>&1
    echo "torch_nccl_load.py exit $? (77 = skipped: 1 rank has no kernel channels)"
    grep -m1 -oE "$pat" "$WORK/budget-torch.log" || { echo "FAIL budget torch: no budget line:"; grep -m8 ncclhooks "$WORK/budget-torch.log"; }
    ! grep -m1 "NCCL (version unknown)" "$WORK/budget-torch.log" || echo "FAIL budget torch: the NCCL version is unknown"
  fi
  for tag in "${TAGS[@]}"; do
    [ -n "${nccl_pid[$tag]:-}" ] && { wait "${nccl_pid[$tag]}"; echo "build NCCL $tag: exit $?"; unset "nccl_pid[$tag]"; }
    if [ -f "$WORK/nccl-$tag/lib/libnccl.so.2" ]; then
      libs+=("$(realpath "$WORK/nccl-$tag/lib/libnccl.so.2")")
      budget_line "$(realpath "$WORK/nccl-$tag/lib")" "$WORK/nccl-$tag/include" "patched-$tag" device
    else
      echo "FAIL budget patched $tag: not built in $WORK/nccl-$tag (log: $WORK/build-nccl-$tag.log)"
    fi
  done
  echo "-- each NCCL's kernels read by internal/fatbin against cuobjdump -res-usage, and the fixtures"
  (cd internal/fatbin && NCCLHOOKS_FATBIN_LIBS=$(IFS=:; echo "${libs[*]}") timeout 300 "$ROOT/$BIN/internal_fatbin.test" -test.v -test.count=1 \
    -test.run 'TestRealLibraries|TestNvccFixture|TestPtxasFixtures' > "$WORK/test-fatbin.log" 2>&1; echo "exit $?")
  grep -E "^(--- |PASS|FAIL|ok|panic)|_test.go:[0-9]+: " "$WORK/test-fatbin.log" | head -40
  echo "-- NCCL loaded with local symbols: its version, its device hook and its kernels' budget (32 registers)"
  (cd plugin && NCCLHOOKS_PLUGIN=$ROOT/$BIN/libnccl-profiler-hooks.so NCCLHOOKS_CLI=$ROOT/$BIN/ncclhooks timeout 120 "$ROOT/$BIN/plugin.test" \
    -test.v -test.count=1 -test.run TestNCCLLoadedWithLocalSymbols > "$WORK/test-plugin-budget.log" 2>&1; echo "exit $?")
  grep -E "^(--- |PASS|FAIL|ok|panic)|_test.go:[0-9]+: " "$WORK/test-plugin-budget.log" | head -20
}

main() {
  echo "== machine"; nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader; nvcc --version | tail -1; date -u
  declare -A nccl_pid
  if has nccl || has ranks || has budget; then
    for tag in "${TAGS[@]}"; do
      # The ranks and budget steps alone build what they need; the nccl step always builds.
      has nccl || [ ! -f "$WORK/nccl-$tag/lib/libnccl.so.2" ] || continue
      # The ranks step's nccl-tests build against this NCCL follows it in the same background
      # job (about a minute each, which the streams would otherwise wait for one after another).
      { scripts/build-nccl.sh --tag $tag --arch sm_90 --jobs 8 --out "$WORK/nccl-$tag" > "$WORK/build-nccl-$tag.log" 2>&1 &&
        { ! has ranks || scripts/nccl-tests-build.sh "$WORK/nccl-$tag" "$WORK/ranks/nccl-tests-patched-$tag" >> "$WORK/build-nccl-$tag.log" 2>&1; }; } &
      nccl_pid[$tag]=$!
    done
  fi
  # The wheel's nccl-tests for the ranks step, built while its torch part runs.
  local wheel_tests_pid=
  if has ranks && part wheel; then
    local wheel_dir
    wheel_dir=$(wheel_nccl)
    [ -f "$wheel_dir/lib/libnccl.so.2" ] && { scripts/nccl-tests-build.sh "$wheel_dir" "$WORK/ranks/nccl-tests-wheel" > "$WORK/build-nccl-tests-wheel.log" 2>&1 & wheel_tests_pid=$!; }
  fi
  local dev_pid=
  if has host231 && [ -z "${NCCL_231_DIR:-}" ] && [ -f nccl/src/nccl-dev.tar.xz ]; then
    scripts/build-nccl.sh --tag dev --no-patch --arch sm_90 --jobs 8 --out "$WORK/nccl-dev" > "$WORK/build-nccl-dev.log" 2>&1 &
    dev_pid=$!
  fi
  if has tests; then
    for p in "${TESTS[@]}"; do
      name=$(echo $p | tr / _)
      echo "== go test ./$p (NCCLHOOKS_REQUIRE_GPU=1)"
      (cd $p && NCCLHOOKS_PLUGIN=$ROOT/$BIN/libnccl-profiler-hooks.so NCCLHOOKS_CLI=$ROOT/$BIN/ncclhooks \
        NCCLHOOKS_MATRIX_OUT=$WORK/caller-matrix.md timeout 560 "$ROOT/$BIN/$name.test" -test.v -test.count=1 ${GPU_TEST_RUN:+-test.run "$GPU_TEST_RUN"} \
        > "$WORK/test-$name.log" 2>&1; echo "exit $?")
      grep -E "^(--- |PASS|FAIL|ok|panic)|caller matrix|^\| " "$WORK/test-$name.log" | head -60
      grep -E "^\s+\S+_test.go:[0-9]+: " "$WORK/test-$name.log" | grep -vE "GPU test skipped" | head -40
    done
    cp "$WORK/caller-matrix.md" "$OUT/" 2>/dev/null
  fi
  if has examples; then
    for ex in all-events every-event latency drain-latency skew field-capture sampled-trace; do
      echo "== ncclhooks run examples/$ex.yaml --backend gpu"
      $BIN/ncclhooks run examples/$ex.yaml --backend gpu --out "$WORK/$ex" --devices 1 --comms 4 --channels 16 --items 1000 --batch 4 --bytes 65536 2>&1 | tail -9
    done
    echo "== graph mode"
    for ex in all-events every-event drain-latency; do
      $BIN/ncclhooks run examples/$ex.yaml --backend gpu --graph --replays 5 --out "$WORK/graph-$ex" --devices 1 --comms 3 --channels 16 --items 400 2>&1 | tail -6
    done
  fi
  if has nccl; then
    for tag in "${TAGS[@]}"; do
      echo "== build NCCL $tag with the device hook"
      wait "${nccl_pid[$tag]}"; echo "exit $?"; tail -4 "$WORK/build-nccl-$tag.log"; unset "nccl_pid[$tag]"
      lib=$WORK/nccl-$tag/lib/libnccl.so.2
      [ -f "$lib" ] || continue
      echo "-- register use of its kernels (cuobjdump -res-usage, sm_90)"
      cuobjdump -res-usage "$lib" 2>/dev/null | python3 -c '
import re, sys, collections
rows = re.findall(r"Function ([^\s:]+):\s*REG:(\d+) STACK:(\d+)", sys.stdin.read())
k = [(n, int(r), int(s)) for n, r, s in rows if "ncclDevKernel" in n]
if k:
    print("kernels:", len(k), "REG", sorted(collections.Counter(r for _, r, _ in k).items()), "STACK", min(s for *_, s in k), "-", max(s for *_, s in k))'
      nm -D --defined-only "$lib" | grep -c ncclProfilerDevFuncName | sed 's/^/ncclProfilerDevFuncName exported: /'
      opt=()
      [ $tag = v2.30.7-1 ] && opt=(--no-timing)
      OUT=$OUT BIN=$BIN WORK=$WORK/accept scripts/nccl-accept.sh "$WORK/nccl-$tag" "${opt[@]}"; echo "exit $?"
    done
    tar cJf "$OUT/nccl-libs.tar.xz" -C "$WORK" $(cd "$WORK" && ls -d nccl-v*/lib nccl-v*/include nccl-v*/build-info.txt 2>/dev/null) 2>/dev/null
  fi
  if has host; then
    if [ "${HOST_WHEEL:-1}" = 1 ]; then
    echo "== NCCL's host events (NCCL_HOOKS_SOURCE=host): the torch wheel's NCCL"
    wheel=$(wheel_nccl)
    if [ -f "$wheel/lib/libnccl.so.2" ] && [ -f "$wheel/include/nccl.h" ]; then
      OUT=$OUT BIN=$BIN WORK=$WORK/host scripts/nccl-host.sh "$wheel/lib" "$wheel/include" wheel --source host --expect-struct 5
      echo "exit $? (wheel, host events)"
    else
      echo "FAIL host: the torch wheel's NCCL not found: python3 -c 'import nvidia.nccl' gave '$wheel' (want DIR with lib/libnccl.so.2 and include/nccl.h; pip install nvidia-nccl-cu13)"
    fi
    fi
    for tag in "${TAGS[@]}"; do
      nccl=$WORK/nccl-$tag
      if [ ! -f "$nccl/lib/libnccl.so.2" ]; then
        echo "SKIP patched NCCL $tag: not built in $nccl (the nccl step builds it: STEPS must include nccl)"
        continue
      fi
      for src in host device; do
        echo "== patched NCCL $tag (device hook), NCCL_HOOKS_SOURCE=$src"
        OUT=$OUT BIN=$BIN WORK=$WORK/host scripts/nccl-host.sh "$nccl/lib" "$nccl/include" "patched-$tag" --source $src --expect-struct 7
        echo "exit $? (patched $tag, $src)"
      done
    done
    if [ "${HOST_WHEEL:-1}" = 1 ]; then
    echo "== torch with the wheel's NCCL: torch_nccl_load.py (the plugin must record, not only load)"
    timeout 300 python3 internal/harness/torch/torch_nccl_load.py $BIN/libnccl-profiler-hooks.so examples/all-events.yaml "$WORK/torch" 2>&1 | tail -25
    echo "exit ${PIPESTATUS[0]} (torch; 77 = skipped)"
    fi
    echo "== durations side by side (examples/latency.yaml, 1 communicator: KernelCh start to stop from host events; work item START to STOP from the device hook)"
    for f in "$OUT"/source-*-latency.md; do [ -f "$f" ] && { echo "-- $f"; cat "$f"; }; done
  fi
  if has host231; then
    if [ -n "${NCCL_231_DIR:-}" ]; then
      echo "== NCCL 2.31 ($NCCL_231_DIR): the official ncclProfiler_v7, host events"
      OUT=$OUT BIN=$BIN WORK=$WORK/host scripts/nccl-host.sh "$NCCL_231_DIR/lib" "$NCCL_231_DIR/include" nccl-2.31 --source host --expect-struct 7
      echo "exit $? (NCCL 2.31, host)"
    elif [ -n "$dev_pid" ]; then
      echo "== the newest NCCL source (branch dev, unpatched), host events"
      wait "$dev_pid"; echo "build exit $?"; tail -4 "$WORK/build-nccl-dev.log"
      if [ -f "$WORK/nccl-dev/lib/libnccl.so.2" ]; then
        # The dev branch of this repository's mirror (2.31.0a7) has profiler v6 only: NCCL
        # 2.31's official v7 (profiler_v7.h) is not in it, so no struct version is required;
        # the table says which one it loaded.
        OUT=$OUT BIN=$BIN WORK=$WORK/host scripts/nccl-host.sh "$WORK/nccl-dev/lib" "$WORK/nccl-dev/include" nccl-dev --source host
        echo "exit $? (NCCL dev, host)"
      else
        echo "FAIL NCCL dev: scripts/build-nccl.sh --tag dev --no-patch did not produce $WORK/nccl-dev/lib/libnccl.so.2 (log: $WORK/build-nccl-dev.log)"
      fi
    else
      echo "SKIP NCCL 2.31: set NCCL_231_DIR to a build of NCCL 2.31 with the official v7 (src/include/plugin/profiler/profiler_v7.h; scripts/build-nccl.sh --no-patch), or carry nccl/src/nccl-dev.tar.xz (gpu-check.sh build makes it)"
    fi
  fi
  if has ranks; then
    # Real collectives between ranks on GPU 0, under MPS where the machine has it (the ranks'
    # processes then run at once; without it they take turns in time slices of ~2 ms). The
    # correctness rows run as streams one after another (RANKS_CONCURRENT=1: at once), each 2
    # rows at a time: the wheel's NCCL from host events, each patched NCCL from its device hook
    # (and, for NCCL >= 2.30, joined by NCCL_MULTI_RANK_GPU_ENABLE=1), torch between 2 processes;
    # then, alone on the GPU, the bench and the straggler. On the H100 (bench/RESULTS.md): at
    # once under MPS, a fault in one client failed rows of every stream (07:58); one after
    # another under MPS, every hostid stream passed in 51-75 s (15:23); at once without MPS
    # (RANKS_MPS=0), a stream took 378 s (17:31).
    [ "${RANKS_MPS:-1}" = 1 ] && mps_start
    local R=$WORK/ranks-logs t0=$SECONDS; mkdir -p "$R"
    local -a spids=() slogs=()
    # stream LOG CMD...: one correctness stream in the background.
    # RANKS_CONCURRENT=0 runs the streams one after another: under MPS a fatal fault in one
    # client reaches every client of the server, so concurrent streams cannot tell whose it was.
    stream() {
      local log=$1; shift
      if [ "${RANKS_CONCURRENT:-0}" = 0 ]; then "$@" > "$log" 2>&1; (exit $?) & else "$@" > "$log" 2>&1 & fi
      spids+=($!); slogs+=("$log")
    }
    wheel=$(wheel_nccl)
    # torch first: the wheel's nccl-tests builds meanwhile (started with the NCCL builds).
    part torch && stamp "ranks: torch, 2 processes" && stream "$R/torch.log" bash -c "for prof in latency all-events; do
        echo \"== torch with the wheel's NCCL, 2 processes on GPU 0 (NCCL_HOSTID each), NCCL_HOOKS_SOURCE=host, \$prof\"
        NCCL_HOOKS_SOURCE=host timeout 300 python3 internal/harness/torch/torch_nccl_load.py --ranks 2 $BIN/libnccl-profiler-hooks.so examples/\$prof.yaml $WORK/torch-ranks-\$prof 2>&1 | tail -12
        echo \"exit \${PIPESTATUS[0]} (torch, 2 ranks, \$prof; 77 = skipped)\"
        $BIN/ncclhooks check $WORK/torch-ranks-\$prof --profile examples/\$prof.yaml 2>&1 | tail -3
        $BIN/ncclhooks report $WORK/torch-ranks-\$prof --by rank --markdown 2>&1 | head -40
      done"
    [ -n "$wheel_tests_pid" ] && { wait "$wheel_tests_pid"; echo "build nccl-tests against the wheel: exit $?"; }
    part wheel && stamp "ranks: the wheel's NCCL, host events" && stream "$R/wheel-host.log" env PORT_BASE=20000 OUT=$OUT BIN=$BIN WORK=$WORK/ranks scripts/nccl-ranks.sh "$wheel" wheel --source host --jobs 2
    local port=21000
    for tag in "${TAGS[@]}"; do
      [ -n "${nccl_pid[$tag]:-}" ] && { wait "${nccl_pid[$tag]}"; echo "build NCCL $tag and nccl-tests against it: exit $?"; tail -2 "$WORK/build-nccl-$tag.log"; unset "nccl_pid[$tag]"; }
      [ -f "$WORK/nccl-$tag/lib/libnccl.so.2" ] || { echo "FAIL ranks on patched $tag: not built (log: $WORK/build-nccl-$tag.log)"; continue; }
      part hostid && stamp "ranks: patched $tag, device hook, NCCL_HOSTID each" && stream "$R/patched-$tag-device.log" env NCCL_ALGO=Ring NCCL_PROTO=LL,Simple PORT_BASE=$port OUT=$OUT BIN=$BIN WORK=$WORK/ranks \
        scripts/nccl-ranks.sh "$WORK/nccl-$tag" "patched-$tag" --source device --jobs 2
      port=$((port + 1000))
      if at_least_230 $tag && part multirank; then
        stamp "ranks: patched $tag, device hook, NCCL_MULTI_RANK_GPU_ENABLE=1"
        stream "$R/patched-$tag-device-multirank.log" env NCCL_ALGO=Ring NCCL_PROTO=LL,Simple PORT_BASE=$port OUT=$OUT BIN=$BIN WORK=$WORK/ranks \
          scripts/nccl-ranks.sh "$WORK/nccl-$tag" "patched-$tag" --source device --join multirank --jobs 2
        port=$((port + 1000))
      fi
    done
    for k in "${!spids[@]}"; do
      wait "${spids[$k]}"; local rc=$?
      echo "== ranks: ${slogs[$k]##*/} (exit $rc)"
      grep -vE '^\| [a-z_]+_perf \|' "${slogs[$k]}" | head -80  # the rows are in the .md tables of $OUT
      grep -E '^\| [a-z_]+_perf \|' "${slogs[$k]}" | grep -vE '\| all 0 \| Out of bounds values : 0 OK \| (-|exact|refused, inactive) \|' | sed 's/^/FAILED ROW /'
    done
    stamp "ranks: the correctness streams took $((SECONDS - t0)) s"
    if [ "${RANKS_MPS:-1}" != 1 ] && { part bench || part straggler; }; then mps_start; fi
    # The bench and the straggler, alone on the GPU. The bench joins the ranks by
    # NCCL_MULTI_RANK_GPU_ENABLE=1 where the NCCL has it (NCCL's transports within one GPU;
    # the socket transport over loopback spreads the no-plugin rounds by -14%..+21%).
    local btag=${TAGS[-1]} bjoin=hostid
    at_least_230 $btag && bjoin=multirank
    if part bench && [ -f "$WORK/nccl-$btag/lib/libnccl.so.2" ]; then
      stamp "ranks: the time a hook adds inside all-reduce between 2 ranks (patched NCCL $btag, device hook, joined by $bjoin)"
      t0=$SECONDS
      NCCL_ALGO=Ring NCCL_PROTO=LL,Simple OUT=$OUT BIN=$BIN WORK=$WORK/ranks ITERS=${BENCH_ITERS:-50} scripts/nccl-ranks-bench.sh "$WORK/nccl-$btag" "patched-$btag" \
        --source device --join $bjoin --rounds ${BENCH_ROUNDS:-10}
      echo "exit $? (ranks bench, $((SECONDS - t0)) s)"
    fi
    tag=${TAGS[0]}
    if part straggler && [ -f "$WORK/nccl-$tag/lib/libnccl.so.2" ]; then
      stamp "ranks: a planted straggler between 4 ranks (patched NCCL $tag, device hook)"
      t0=$SECONDS
      NCCL_ALGO=Ring NCCL_PROTO=LL,Simple OUT=$OUT BIN=$BIN WORK=$WORK/ranks scripts/nccl-straggler.sh "$WORK/nccl-$tag" "patched-$tag" --source device
      echo "exit $? (straggler, $((SECONDS - t0)) s)"
    fi
    mps_stop
  fi
  if has budget; then
    budget_step
  fi
  if has sass; then
    echo "== SASS of each example's hook (the cubin the plugin compiles, cuobjdump -sass, function ncclhooks_entry)"
    printf "%-16s %6s %8s %6s %6s %6s %s\n" profile instrs atomics reds loads stores "loads by kind"
    for p in bench/profiles/nop.yaml bench/profiles/count.yaml examples/*.yaml; do
      name=$(basename "$p" .yaml)
      cache=$WORK/sass-$name; rm -rf "$cache"
      NCCL_HOOKS_CACHE_DIR=$cache $BIN/ncclhooks run "$p" --backend gpu --devices 1 --comms 1 --channels 2 --items 10 --out "$WORK/sass-out-$name" > "$WORK/sass-$name.log" 2>&1
      # The cache holds a cubin per rung of the register ladder the plugin tried; the one it
      # took is the one whose entry has no stack frame (no local-memory access: STL, LDL).
      found=
      for cubin in $(find "$cache" -name '*.cubin' -size +1k); do
        # A cache entry is a header and the cubin: cut at the ELF magic.
        python3 -c 'import sys; d = open(sys.argv[1], "rb").read(); open(sys.argv[2], "wb").write(d[d.find(b"\x7fELF"):])' "$cubin" "$WORK/sass-$name.cubin"
        cuobjdump -sass -fun ncclhooks_entry "$WORK/sass-$name.cubin" > "$WORK/sass-$name.txt" 2>&1
        # (and it is the hook's: the clock kernel's module is cached too)
        grep -q 'RET' "$WORK/sass-$name.txt" && ! grep -qE '\b(STL|LDL)\b' "$WORK/sass-$name.txt" && { found=1; break; }
      done
      [ -n "$found" ] || { echo "$name: no frame-free cubin in $cache"; continue; }
      python3 - "$name" "$WORK/sass-$name.txt" <<'PY'
import re, sys, collections
name, path = sys.argv[1], sys.argv[2]
ops = re.findall(r"/\*[0-9a-f]{4}\*/\s+(?:@!?U?P\w+\s+)?([A-Z][A-Z0-9_.]*)", open(path).read())
c = collections.Counter(o.split(".")[0] for o in ops)
loads = collections.Counter(o for o in ops if o.split(".")[0] in ("LDG", "LD"))
atom = c["ATOMG"] + c["ATOM"]
red = c["REDG"] + c["RED"]
ld = c["LDG"] + c["LD"]
st = c["STG"] + c["ST"]
print(f"{name:<16} {len(ops):>6} {atom:>8} {red:>6} {ld:>6} {st:>6} {dict(loads)}")
PY
    done
  fi
  if has bench; then
    echo "== bench (hook cost against the nop hook; sustained rates ${BENCH_RATES:-1e7})"
    timeout 280 $BIN/ncclhooks bench -profiles bench/profiles/count.yaml,examples/all-events.yaml,examples/every-event.yaml,examples/latency.yaml,examples/drain-latency.yaml,examples/field-capture.yaml \
      -rates "${BENCH_RATES:-1e7}" -o "$OUT/bench.md" -cpuprofile "$OUT/drain.pprof" 2>&1 | tail -60
  fi
}
main 2>&1 | tee "$OUT/gpu-check.log"
tar czf "$OUT/work.tgz" -C /tmp --exclude='gpu-check/nccl-v*' --exclude='*.bin' --exclude='cache' --exclude='*.jsonl' --exclude='nccl-tests-*' gpu-check 2>/dev/null
ls -la "$OUT"
