#!/usr/bin/env bash
# Faults under GPU sharing: the caller matrix faulted with 6 caller processes
# on the GPU at once and never one at a time. This runs the same callers N at
# a time and alone, with the plugin's hooks, the RFC's nvcc-built counter
# hook from another module, and the same counter hook inside the caller's own
# module (the control), then catches faults under compute-sanitizer and in
# GPU core dumps.
#   harness/callers/probe/share.sh PLUGIN.so        (GPU machine, nvcc on PATH)
set -uo pipefail
PLUGIN=$(realpath "${1:?usage: share.sh PLUGIN.so}") || exit 2
cd "$(dirname "$0")"
W=${WORK:-/tmp/share}
OUT=${OUT:-$W/out}
NVCC=${NVCC:-nvcc}
ARCH=${ARCH:-sm_90}
N=${SHARE_N:-6}        # processes at once
ROUNDS=${SHARE_ROUNDS:-8}
EX=$(realpath ../../../../examples)
ABI=$(realpath ../../../abi) # ncclhooks_abi.h: the event, hook type and profiler structs
mkdir -p "$W" "$OUT"
export NCCL_HOOKS_CACHE_DIR=$W/cache NCCL_HOOKS_BACKEND=gpu
ARGS=(--channels 8 --items 32 --batch 4 --launches 2)

# par LABEL N ROUNDS CMD...: ROUNDS times, N copies of CMD at once (copy j
# gets J=j and its own directory $W/j<j>); counts exits and shows the first
# three failures.
par() {
  local label=$1 n=$2 rounds=$3; shift 3
  local ok=0 bad=0 i j pids
  for ((i = 0; i < rounds; i++)); do
    pids=()
    for ((j = 0; j < n; j++)); do
      rm -rf "$W/j$j"; mkdir -p "$W/j$j/out" "$W/j$j/events"
      J=$j "$@" > "$W/j$j/log" 2>&1 &
      pids+=($!)
    done
    for ((j = 0; j < n; j++)); do
      if wait "${pids[$j]}"; then ok=$((ok + 1)); else
        bad=$((bad + 1))
        if [ $bad -le 3 ]; then
          echo "  failure $bad:"
          grep -E "RESULT|CALLER|caller:|ERROR|Invalid|at 0x|by thread|Address|exception" "$W/j$j/log" | head -12 | cut -c1-400 | sed 's/^/    /'
          cp "$W/j$j/log" "$W/fail-$(echo "$label" | tr -c 'a-zA-Z0-9' _)-$bad.log"
        fi
      fi
    done
  done
  printf "%-64s %3d ok %3d failed (of %d, %d at once)\n" "$label" $ok $bad $((n * rounds)) "$n"
}

# The matrix's first column: caller_rdc96, 4 communicators initialised concurrently.
caller4() { # profile [env...]   ($WRAP: a command to run it under)
  local prof=$1; shift
  env NCCL_HOOKS_PROFILE="$prof" NCCL_HOOKS_DUMP_DIR="$W/j$J/out" "$@" timeout 120 ${WRAP:-} \
    "$W/cb/caller_rdc96" --plugin "$PLUGIN" --events "$W/j$J/events" "${ARGS[@]}" --comms 4 --threads
}
probe() { # mode path [env...]
  local mode=$1 path=$2; shift 2
  env NCCL_HOOKS_PROFILE="$EX/all-events.yaml" NCCL_HOOKS_DUMP_DIR="$W/j$J/out" "$@" timeout 120 \
    "$W/pc" "$mode" "$path" 8 20000 > "$W/j$J/result" 2>&1
  cat "$W/j$J/result"
  grep -q "RESULT ok" "$W/j$J/result"
}

main() {
  echo "== machine"; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; $NVCC --version | tail -1
  echo "== build"
  ../build.sh "$W/cb" | tail -4 &
  b1=$!
  $NVCC -arch=$ARCH -I"$ABI" -rdc=true -o "$W/pc" caller.cu -lcuda -ldl 2> "$W/pc.log" || cat "$W/pc.log" &
  b2=$!
  $NVCC -arch=$ARCH -I"$ABI" -rdc=true -shared -Xcompiler -fPIC -o "$W/libcount.so" hooks.cu -DKIND_COUNT 2> "$W/count.log" || cat "$W/count.log" &
  b3=$!
  wait $b1; wait $b2; wait $b3
  # Warm the compile cache so that every run below loads the same cubin.
  J=0 caller4 "$EX/all-events.yaml" > /dev/null 2>&1
  J=0 caller4 "$EX/latency.yaml" > /dev/null 2>&1
  echo "== $N processes at once vs one at a time"
  par "plugin all-events, caller_rdc96, 4 comms, $N at once" "$N" "$ROUNDS" caller4 "$EX/all-events.yaml"
  par "plugin all-events, caller_rdc96, 4 comms, alone" 1 $((N * 3)) caller4 "$EX/all-events.yaml"
  par "plugin latency, caller_rdc96, 4 comms, $N at once" "$N" "$ROUNDS" caller4 "$EX/latency.yaml"
  par "plugin all-events, CUDA_MODULE_LOADING=EAGER, $N at once" "$N" "$ROUNDS" caller4 "$EX/all-events.yaml" CUDA_MODULE_LOADING=EAGER
  par "probe caller, RFC counter hook in a .so (other module), $N at once" "$N" "$ROUNDS" probe so "$W/libcount.so"
  par "probe caller, counter hook in its own module, $N at once" "$N" "$ROUNDS" probe local -
  par "probe caller, plugin all-events, $N at once" "$N" "$ROUNDS" probe plugin "$PLUGIN"
  par "probe caller, RFC counter hook in a .so, alone" 1 $((N * 2)) probe so "$W/libcount.so"
  echo "== compute-sanitizer memcheck, $N at once"
  WRAP="compute-sanitizer --tool memcheck --print-limit 4 --error-exitcode 9" \
    par "memcheck: plugin all-events, caller_rdc96, 4 comms" "$N" 2 caller4 "$EX/all-events.yaml"
  echo "== GPU core dumps of faults, $N at once"
  mkdir -p "$W/cores"
  par "coredump: plugin all-events, caller_rdc96, 4 comms" "$N" 3 caller4 "$EX/all-events.yaml" \
    CUDA_ENABLE_COREDUMP_ON_EXCEPTION=1 CUDA_ENABLE_CPU_COREDUMP_ON_EXCEPTION=0 \
    CUDA_COREDUMP_GENERATION_FLAGS=skip_global_memory,skip_shared_memory,skip_nonrelocated_elf_images \
    CUDA_COREDUMP_FILE="$W/cores/core.%p"
  for core in $(ls "$W"/cores/core.* 2>/dev/null | head -2); do
    echo "-- $core"
    timeout 60 cuda-gdb -batch -ex "target cudacore $core" -ex "info cuda kernels" -ex "bt" -ex 'x/6i $errorpc' \
      -ex 'x/6i $pc' -ex "info registers R20 R21" 2>&1 | grep -v "^\[" | head -40
  done
}
main 2>&1 | tee "$OUT/share.log"
tar czf "$OUT/share-fails.tgz" -C "$W" $(cd "$W" && ls fail-*.log 2>/dev/null) 2>/dev/null
