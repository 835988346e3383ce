package main

/*
#include <stdlib.h>
*/
import "C"

import (
	"fmt"
	"strconv"
	"strings"
	"unsafe"

	"github.com/ncclhooks/ncclhooks/backend/gpu"
)

// getenv reads the process environment as it is now. os.Getenv would not
// do: a c-shared library's Go runtime copies the environment the process
// started with, and jobs often set NCCL_* variables later (Python's
// os.environ before init_process_group).
func getenv(name string) string {
	cs := C.CString(name)
	defer C.free(unsafe.Pointer(cs))
	v := C.getenv(cs)
	if v == nil {
		return ""
	}
	return C.GoString(v)
}

// knobs are the NCCL_HOOKS_* environment variables (the README's knob table).
type knobs struct {
	profile       string // NCCL_HOOKS_PROFILE: path of the YAML profile; unset: inactive
	backend       string // NCCL_HOOKS_BACKEND: auto (default), gpu, cpu
	dumpDir       string // NCCL_HOOKS_DUMP_DIR: overrides the profile's output.dump_dir
	cacheDir      string // NCCL_HOOKS_CACHE_DIR: compile cache directory, "off" disables it
	cc            string // NCCL_HOOKS_CC: C compiler of the cpu backend (default cc)
	promDir       string // NCCL_HOOKS_PROM_DIR: write node-exporter textfiles there
	promAddr      string // NCCL_HOOKS_PROM_ADDR: serve /metrics there (host defaults to 127.0.0.1)
	promDumpStats bool   // NCCL_HOOKS_PROM_DUMP_STATS: 1 adds capture statistics to Prometheus output
	nvrtcOptions  string // NCCL_HOOKS_NVRTC_OPTIONS: extra NVRTC options for the hook module
	maxRegisters  int    // NCCL_HOOKS_MAX_REGISTERS: registers a hook may use (0: the default budget)
	registerCaps  []int  // NCCL_HOOKS_REGISTER_CAPS: diagnostics: the --maxrregcount values to try, in order
	sharedCtx     bool   // NCCL_HOOKS_SHARED_CTX: diagnostics: every communicator gets communicator 0's context
}

func readKnobs() (knobs, error) {
	k := knobs{
		profile:  getenv("NCCL_HOOKS_PROFILE"),
		backend:  strings.ToLower(getenv("NCCL_HOOKS_BACKEND")),
		dumpDir:  getenv("NCCL_HOOKS_DUMP_DIR"),
		cacheDir: getenv("NCCL_HOOKS_CACHE_DIR"),
		cc:       getenv("NCCL_HOOKS_CC"),
		promDir:  getenv("NCCL_HOOKS_PROM_DIR"),
		promAddr: getenv("NCCL_HOOKS_PROM_ADDR"),

		nvrtcOptions: getenv("NCCL_HOOKS_NVRTC_OPTIONS"),
	}
	switch k.backend {
	case "":
		k.backend = "auto"
	case "auto", "gpu", "cpu":
	default:
		return k, fmt.Errorf("NCCL_HOOKS_BACKEND=%q: use auto, gpu or cpu", k.backend)
	}
	switch v := getenv("NCCL_HOOKS_PROM_DUMP_STATS"); v {
	case "", "0":
	case "1":
		k.promDumpStats = true
	default:
		return k, fmt.Errorf("NCCL_HOOKS_PROM_DUMP_STATS=%q: use 0 or 1", v)
	}
	if v := getenv("NCCL_HOOKS_MAX_REGISTERS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < gpu.MinRegisterBudget || n > 255 {
			return k, fmt.Errorf("NCCL_HOOKS_MAX_REGISTERS=%q: give the register count of the kernels that call the hook, %d..255 (NCCL's have %d)",
				v, gpu.MinRegisterBudget, gpu.DefaultRegisterBudget)
		}
		k.maxRegisters = n
	}
	if v := getenv("NCCL_HOOKS_REGISTER_CAPS"); v != "" {
		for _, f := range strings.Split(v, ",") {
			n, err := strconv.Atoi(strings.TrimSpace(f))
			if err != nil || n < gpu.MinRegisterBudget || n > 255 {
				return k, fmt.Errorf("NCCL_HOOKS_REGISTER_CAPS=%q: give register caps %d..255, comma-separated", v, gpu.MinRegisterBudget)
			}
			k.registerCaps = append(k.registerCaps, n)
		}
	}
	k.sharedCtx = getenv("NCCL_HOOKS_SHARED_CTX") == "1"
	if k.cc == "" {
		k.cc = "cc"
	}
	return k, nil
}
