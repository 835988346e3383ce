// Package lifecycle owns the plugin's life in a process: the knobs and the
// profile at the first init, the generated module, its compilation on the
// first getDeviceHook and its load on each device, the drainer and the
// sinks, and the settling of outputs at the last finalize. The plugin
// (package main, the exported C ABI) and `ncclhooks bench` both drive it;
// every failure is logged once through Env.Log and leaves the plugin
// inactive, never the job failed.
package lifecycle

import (
	"fmt"
	"time"

	"github.com/ncclhooks/ncclhooks/internal/abi"
	"github.com/ncclhooks/ncclhooks/internal/backend"
	"github.com/ncclhooks/ncclhooks/internal/gpuinfo"
	"github.com/ncclhooks/ncclhooks/internal/hookgen"
	"github.com/ncclhooks/ncclhooks/internal/rings"
)

// NCCL's log levels, as its logger takes them (package abi's).
const (
	LogWarn = abi.LogWarn
	LogInfo = abi.LogInfo
)

// Env is what the host process provides: NCCL's logger and function-name
// table, the knobs, and whether the ncclhooks harness is the caller.
type Env struct {
	Log            func(level int, msg string)
	FuncName       func(id uint32) string // NCCL's ncclProfilerDevFuncName; "" for an unknown id
	HostFuncName   func(id uint32) string // the host-event source's function table; "" past its end
	Knobs          func() (Knobs, error)  // read at the first init
	HarnessPresent func() bool            // the harness's marker symbol is loaded (cpu hooks are callable)
	DeviceHookNCCL func() bool            // the NCCL that loaded the plugin has the device hook (PR 2285)
	NCCLVersion    func() int             // ncclGetVersion (22809 for 2.28.9); 0 when unknown
	// NCCLLibrary finds the NCCL that called init and the library whose
	// kernels call the hook, whose register counts give the hooks' budget;
	// nil: not known (the budget is NCCL_HOOKS_MAX_REGISTERS or
	// gpu.DefaultRegisterBudget, as in ncclhooks bench).
	NCCLLibrary func() NCCLLibrary
	// DeviceArch is CUDA device ord's architecture ("sm_90"); nil: the
	// driver's (cuda.Open).
	DeviceArch    func(ord int) (string, error)
	PluginVersion string // the plugin's build (git describe); "" unknown
	// NVML opens NVML for the device lines' GPU state; nil: gpuinfo.Open
	// (libnvidia-ml, dlopened by the first background read).
	NVML func() (gpuinfo.Interface, error)
}

// Knobs are the NCCL_HOOKS_* settings (the README's knob table).
type Knobs struct {
	Profile       string        // NCCL_HOOKS_PROFILE: path of the YAML profile; unset: inactive
	Backend       string        // NCCL_HOOKS_BACKEND: auto (default), gpu, cpu
	Source        string        // NCCL_HOOKS_SOURCE: auto (default), host, device
	DumpDir       string        // NCCL_HOOKS_DUMP_DIR: overrides the profile's output.dump_dir
	Compress      string        // NCCL_HOOKS_COMPRESS: zstd, gzip or none (default) for the JSON lines
	MaxOutputSize int64         // NCCL_HOOKS_MAX_OUTPUT_BYTES: cap of the JSON lines file (0: none)
	CacheDir      string        // NCCL_HOOKS_CACHE_DIR: compile cache directory, "off" disables it
	CC            string        // NCCL_HOOKS_CC: C compiler of the cpu backend (default cc)
	CCTimeout     time.Duration // NCCL_HOOKS_CC_TIMEOUT: the compiler is killed after this (0: cpu.DefaultCompileTimeout)
	PromDir       string        // NCCL_HOOKS_PROM_DIR: write node-exporter textfiles there
	PromAddr      string        // NCCL_HOOKS_PROM_ADDR: serve /metrics there (host defaults to 127.0.0.1)
	PromDumpStats bool          // NCCL_HOOKS_PROM_DUMP_STATS: 1 adds capture statistics to Prometheus output
	OTLPEndpoint  string        // NCCL_HOOKS_OTLP_ENDPOINT: post the metrics there at every dump (OTLP/HTTP protobuf)
	OTLPHeaders   string        // NCCL_HOOKS_OTLP_HEADERS: key=value,... added to every OTLP request
	OTLPTimeout   time.Duration // NCCL_HOOKS_OTLP_TIMEOUT: bound of one OTLP export (0: sinks.DefaultOTLPTimeout)
	Job           string        // NCCL_HOOKS_JOB, else SLURM_JOB_ID: the job, an OTLP resource attribute
	NVRTCOptions  string        // NCCL_HOOKS_NVRTC_OPTIONS: extra NVRTC options for the hook module
	MaxRegisters  int           // NCCL_HOOKS_MAX_REGISTERS: registers a hook may use (0: read from the kernels that call the hook)
	RegisterCaps  []int         // NCCL_HOOKS_REGISTER_CAPS: diagnostics: the --maxrregcount values to try, in order
	SharedCtx     bool          // NCCL_HOOKS_SHARED_CTX: diagnostics: every communicator gets communicator 0's context
	// Reload (NCCL_HOOKS_RELOAD) is how often the profile file is looked
	// at for a live reload; 0: never (the hook is the module's own entry).
	Reload time.Duration
	// TermDump (NCCL_HOOKS_SIGTERM_DUMP) is the longest SIGTERM waits for
	// the final dump; 0: SIGTERM is not caught.
	TermDump time.Duration
	// FinalizeTimeout (NCCL_HOOKS_FINALIZE_TIMEOUT) is the longest the last
	// finalize waits for the outputs; 0: DefaultFinalizeTimeout.
	FinalizeTimeout time.Duration
}

// DefaultFinalizeTimeout bounds the last finalize's wait for the outputs: a
// final dump on working storage takes milliseconds; slow or hung storage
// must not hold NCCL's finalize (and so the job's exit) for longer.
const DefaultFinalizeTimeout = 10 * time.Second

// DefaultTermDump is NCCL_HOOKS_SIGTERM_DUMP's default: well inside the
// grace launchers give before SIGKILL (Kubernetes 30 s, Slurm's KillWait
// 30 s), and far more than a final dump takes.
const DefaultTermDump = 5 * time.Second

// New returns a Session that has seen no communicator yet.
// A nil HostFuncName names nothing, a nil DeviceHookNCCL says that NCCL has
// the device hook (as the harness does), a nil NCCLVersion knows none.
func New(env Env) *Session {
	if env.HostFuncName == nil {
		env.HostFuncName = func(uint32) string { return "" }
	}
	if env.DeviceHookNCCL == nil {
		env.DeviceHookNCCL = func() bool { return true }
	}
	if env.NCCLVersion == nil {
		env.NCCLVersion = func() int { return 0 }
	}
	return &Session{env: env, devices: map[int]backend.Device{}, comms: map[uint64]*comm{}, commsOnDevice: map[int]int{}, slots: map[int][]*slot{}, freeSlots: map[int][]uintptr{}}
}

// LoadDevice takes a compiled module to a hook NCCL may call on device ord:
// it loads it, fills the name predicates' function-id sets from names
// (NCCL's function names by id), records the device's clock pair (clock may
// be nil) and adds the device to dr, which starts draining at its current
// head. The device is closed again on failure.
func LoadDevice(c backend.Compiled, m *hookgen.Module, ord int, names []string, dr *rings.Drainer,
	clock func(device int, model string, hostUnixNs, deviceNs uint64) error) (backend.Device, error) {
	d, err := c.Load(ord)
	if err != nil {
		return nil, err
	}
	if err := d.WriteFuncSets(m.FuncSetBits(names)); err != nil {
		d.Close()
		return nil, fmt.Errorf("device %d: function-name sets: %w", ord, err)
	}
	if clock != nil {
		if host, dev, err := d.Clock(); err == nil {
			clock(d.Ordinal(), d.Model(), host, dev) // a failed write surfaces at the next dump
		}
	}
	if err := dr.Add(d, m); err != nil {
		d.Close()
		return nil, fmt.Errorf("device %d: %w", ord, err)
	}
	return d, nil
}
