package main

/*
#include <stdlib.h>
*/
import "C"

import (
	"fmt"
	"strconv"
	"strings"
	"time"
	"unsafe"

	"github.com/ncclhooks/ncclhooks/internal/backend/cpu"
	"github.com/ncclhooks/ncclhooks/internal/backend/gpu"
	"github.com/ncclhooks/ncclhooks/internal/lifecycle"
	"github.com/ncclhooks/ncclhooks/internal/sinks"
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

// readKnobs reads the knobs from the environment as it is now.
func readKnobs() (lifecycle.Knobs, error) {
	k := lifecycle.Knobs{
		Profile:  getenv("NCCL_HOOKS_PROFILE"),
		Backend:  strings.ToLower(getenv("NCCL_HOOKS_BACKEND")),
		Source:   strings.ToLower(getenv("NCCL_HOOKS_SOURCE")),
		DumpDir:  getenv("NCCL_HOOKS_DUMP_DIR"),
		CacheDir: getenv("NCCL_HOOKS_CACHE_DIR"),
		CC:       getenv("NCCL_HOOKS_CC"),
		PromDir:  getenv("NCCL_HOOKS_PROM_DIR"),
		PromAddr: getenv("NCCL_HOOKS_PROM_ADDR"),

		OTLPEndpoint: getenv("NCCL_HOOKS_OTLP_ENDPOINT"),
		OTLPHeaders:  getenv("NCCL_HOOKS_OTLP_HEADERS"),
		Job:          getenv("NCCL_HOOKS_JOB"),

		NVRTCOptions: getenv("NCCL_HOOKS_NVRTC_OPTIONS"),
	}
	switch k.Backend {
	case "":
		k.Backend = "auto"
	case "auto", "gpu", "cpu":
	default:
		return k, fmt.Errorf("NCCL_HOOKS_BACKEND=%q: use auto, gpu or cpu", k.Backend)
	}
	switch k.Source {
	case "":
		k.Source = "auto"
	case "auto", "host", "device":
	default:
		return k, fmt.Errorf("NCCL_HOOKS_SOURCE=%q: use auto, host or device", k.Source)
	}
	switch v := strings.ToLower(getenv("NCCL_HOOKS_COMPRESS")); v {
	case "", "none", "0":
	case "zstd", "gzip":
		k.Compress = v
	default:
		return k, fmt.Errorf("NCCL_HOOKS_COMPRESS=%q: use zstd, gzip or none", v)
	}
	if v := getenv("NCCL_HOOKS_MAX_OUTPUT_BYTES"); v != "" {
		n, err := parseSize(v)
		if err != nil {
			return k, fmt.Errorf("NCCL_HOOKS_MAX_OUTPUT_BYTES=%q: give a size in bytes, with an optional K, M, G or T (powers of 1024): 512M, 20G; 0 for no cap", v)
		}
		k.MaxOutputSize = n
	}
	switch v := getenv("NCCL_HOOKS_PROM_DUMP_STATS"); v {
	case "", "0":
	case "1":
		k.PromDumpStats = true
	default:
		return k, fmt.Errorf("NCCL_HOOKS_PROM_DUMP_STATS=%q: use 0 or 1", v)
	}
	if v := getenv("NCCL_HOOKS_MAX_REGISTERS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < gpu.MinRegisterBudget || n > 255 {
			return k, fmt.Errorf("NCCL_HOOKS_MAX_REGISTERS=%q: give the register count of the kernels that call the hook, %d..255 (NCCL's have %d)",
				v, gpu.MinRegisterBudget, gpu.DefaultRegisterBudget)
		}
		k.MaxRegisters = n
	}
	if v := getenv("NCCL_HOOKS_REGISTER_CAPS"); v != "" {
		for _, f := range strings.Split(v, ",") {
			n, err := strconv.Atoi(strings.TrimSpace(f))
			if err != nil || n < gpu.MinRegisterBudget || n > 255 {
				return k, fmt.Errorf("NCCL_HOOKS_REGISTER_CAPS=%q: give register caps %d..255, comma-separated", v, gpu.MinRegisterBudget)
			}
			k.RegisterCaps = append(k.RegisterCaps, n)
		}
	}
	if v := getenv("NCCL_HOOKS_CC_TIMEOUT"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			return k, fmt.Errorf("NCCL_HOOKS_CC_TIMEOUT=%q: give a duration such as 30s (default %v)", v, cpu.DefaultCompileTimeout)
		}
		k.CCTimeout = d
	}
	k.TermDump = lifecycle.DefaultTermDump
	switch v := getenv("NCCL_HOOKS_SIGTERM_DUMP"); v {
	case "":
	case "0", "off":
		k.TermDump = 0
	default:
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 || d > time.Minute {
			return k, fmt.Errorf("NCCL_HOOKS_SIGTERM_DUMP=%q: give the longest wait for the final dump at SIGTERM, up to 1m (default %v), or off", v, lifecycle.DefaultTermDump)
		}
		k.TermDump = d
	}
	if v := getenv("NCCL_HOOKS_FINALIZE_TIMEOUT"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			return k, fmt.Errorf("NCCL_HOOKS_FINALIZE_TIMEOUT=%q: give a duration such as 30s (default %v)", v, lifecycle.DefaultFinalizeTimeout)
		}
		k.FinalizeTimeout = d
	}
	if v := getenv("NCCL_HOOKS_OTLP_TIMEOUT"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 || d > time.Minute {
			return k, fmt.Errorf("NCCL_HOOKS_OTLP_TIMEOUT=%q: give the longest one OTLP export may take, up to 1m, such as 2s (default %v)", v, sinks.DefaultOTLPTimeout)
		}
		k.OTLPTimeout = d
	}
	if k.Job == "" {
		k.Job = getenv("SLURM_JOB_ID")
	}
	switch v := strings.ToLower(getenv("NCCL_HOOKS_RELOAD")); v {
	case "", "0", "off":
	case "1", "on":
		k.Reload = lifecycle.DefaultReloadInterval
	default:
		d, err := time.ParseDuration(v)
		if err != nil || d < time.Millisecond || d > time.Minute {
			return k, fmt.Errorf("NCCL_HOOKS_RELOAD=%q: give on (the profile is watched every %v), a watch interval from 1ms to 1m, or off (default)", v, lifecycle.DefaultReloadInterval)
		}
		k.Reload = d
	}
	k.SharedCtx = getenv("NCCL_HOOKS_SHARED_CTX") == "1"
	if k.CC == "" {
		k.CC = "cc"
	}
	return k, nil
}

// parseSize reads a byte count with an optional binary suffix (K, M, G, T;
// KiB, MiB... and KB, MB... mean the same).
func parseSize(v string) (int64, error) {
	s := strings.ToUpper(strings.TrimSpace(v))
	s = strings.TrimSuffix(strings.TrimSuffix(s, "B"), "I")
	mult := int64(1)
	if n := len(s); n > 0 {
		if i := strings.IndexByte("KMGT", s[n-1]); i >= 0 {
			mult = int64(1) << (10 * (i + 1))
			s = s[:n-1]
		}
	}
	n, err := strconv.ParseInt(strings.TrimSpace(s), 10, 64)
	if err != nil || n < 0 || n > (1<<62)/mult {
		return 0, fmt.Errorf("bad size %q", v)
	}
	return n * mult, nil
}
