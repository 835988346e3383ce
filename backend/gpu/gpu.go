// Package gpu is the GPU backend: it compiles a generated hook module with
// NVRTC (relocatable code, through the on-disk cache), loads it into each
// device's primary context, allocates the hook buffers in host-mapped pinned
// memory (the device writes them, the drain reads them in place), writes the
// module's context, and resolves the absolute address of ncclhooks_entry
// that NCCL calls. All host access to device memory goes through a private
// non-blocking stream: never NCCL's streams, never the legacy default stream,
// and nothing is added to a CUDA graph.
//
// The entry runs inside NCCL's kernel, i.e. in another module: a __device__
// or __constant__ variable of the hook module named directly in its code is
// addressed through a constant bank bound to the running kernel's module
// (NCCL's), not the hook's. The generated code must reach all of its state
// through devCtx (measured on the H200: a generated hook that names
// ncclhooks_ctl and ncclhooks_ctx directly faults with
// CUDA_ERROR_ILLEGAL_INSTRUCTION; one that uses only devCtx works).
package gpu

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/ncclhooks/ncclhooks/backend"
	"github.com/ncclhooks/ncclhooks/config"
	"github.com/ncclhooks/ncclhooks/hookgen"
	"github.com/ncclhooks/ncclhooks/nvrtc"
)

// SourceName is the program name NVRTC diagnostics use.
const SourceName = "ncclhooks_profile.cu"

// clockSrc is the tiny module behind Device.Clock: one thread stores the
// device's globaltimer (the clock of ncclProfilerDevEvent_t.timestamp).
const clockSrc = `extern "C" __global__ void ncclhooks_clock(unsigned long long* out) {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  *(volatile unsigned long long*)out = t;
}
`

// HookOptions are the NVRTC options of every hook module.
//
// NCCL's kernel calls the hook through a pointer into another module, so no
// linker sees both and sizes the caller's registers for the callee: a hook
// that uses more registers than the calling kernel was given faults
// (CUDA_ERROR_ILLEGAL_INSTRUCTION, seen on the H200 with small callers). The
// cap keeps the hook within what real kernels have; ptxas -v puts the hook's
// resource use in the build log, which Info reports.
var HookOptions = []string{"--maxrregcount=32", "--ptxas-options=-v"}

// Compiled is a hook module compiled once per process and architecture.
type Compiled struct {
	mod   *hookgen.Module
	lib   *nvrtc.Lib
	cache *nvrtc.Cache

	// wholeProgram compiles without -rdc=true; tests use it to prove that
	// Load refuses the module-relative address that results.
	wholeProgram bool
	options      []string // NVRTC options of the hook module

	mu     sync.Mutex
	images map[string]*archImages // by architecture
	info   string
}

type archImages struct {
	hook, clock *nvrtc.Image
}

// Compile compiles and links m for the architecture of device 0, without
// creating a context on it (a context costs every rank memory on a device it
// may not use); devices of other architectures are compiled for at Load.
// Without nvJitLink, linking needs the driver's cuLink* and so a context:
// compilation then happens at the first Load. cache may be nil. A compile
// error is a *CompileError whose positions point into the profile.
//
// extra NVRTC options (NCCL_HOOKS_NVRTC_OPTIONS) follow HookOptions.
func Compile(m *hookgen.Module, lib *nvrtc.Lib, cache *nvrtc.Cache, extra ...string) (backend.Compiled, error) {
	c := newCompiled(m, lib, cache)
	c.options = append(append([]string(nil), HookOptions...), extra...)
	n, err := lib.DeviceCount()
	if err != nil {
		return nil, err
	}
	if n == 0 {
		return nil, errors.New("gpu backend: no CUDA device is visible (check CUDA_VISIBLE_DEVICES, or use NCCL_HOOKS_BACKEND=cpu)")
	}
	if !lib.HasJitLink() {
		return c, nil
	}
	arch, err := lib.DeviceArch(0)
	if err != nil {
		return nil, err
	}
	if _, err := c.imagesFor(arch, func(src string, opt nvrtc.CompileOptions) (*nvrtc.Image, error) {
		return lib.Compile(arch, src, opt)
	}); err != nil {
		return nil, err
	}
	return c, nil
}

func newCompiled(m *hookgen.Module, lib *nvrtc.Lib, cache *nvrtc.Cache) *Compiled {
	return &Compiled{mod: m, lib: lib, cache: cache, images: map[string]*archImages{}}
}

// Module is the generated module.
func (c *Compiled) Module() *hookgen.Module { return c.mod }

// Info describes the build, e.g. "nvrtc 13.0 sm_90, 41ms" or "... cache hit".
func (c *Compiled) Info() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.info
}

// imagesFor returns the images for arch, compiling them with compile the
// first time.
func (c *Compiled) imagesFor(arch string, compile func(string, nvrtc.CompileOptions) (*nvrtc.Image, error)) (*archImages, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if imgs := c.images[arch]; imgs != nil {
		return imgs, nil
	}
	// Relocatable and linked: the entry resolves to an absolute address
	// that NCCL's kernels can call (DESIGN.md section 4).
	opt := nvrtc.CompileOptions{Name: SourceName, Options: c.options, Cache: c.cache, Link: true, WholeProgram: c.wholeProgram}
	hook, err := compile(c.mod.Source, opt)
	if err != nil {
		var ce *nvrtc.CompileError
		if errors.As(err, &ce) {
			return nil, traceError(c.mod, arch, ce)
		}
		return nil, fmt.Errorf("gpu backend: compiling the hook module for %s: %w", arch, err)
	}
	// The clock kernel is called from no other module: whole-program code.
	clock, err := compile(clockSrc, nvrtc.CompileOptions{Name: "ncclhooks_clock.cu", Cache: c.cache, WholeProgram: true})
	if err != nil {
		return nil, fmt.Errorf("gpu backend: compiling the clock kernel: %w", err)
	}
	imgs := &archImages{hook: hook, clock: clock}
	c.images[arch] = imgs
	major, minor := c.lib.NVRTCVersion()
	how := fmt.Sprintf("%.1fms (link %.1fms)", ms(hook.CompileTime), ms(hook.LinkTime))
	switch {
	case c.cache == nil:
		how = "no cache, " + how
	case !hook.CacheHit:
		how = "cache miss, compiled in " + how
	}
	if hook.CacheHit {
		how = fmt.Sprintf("cache hit, %.1fms", ms(hook.CompileTime))
	}
	if res := resources(hook.Log, hookgen.SymEntry); res != "" {
		how += "; " + res
	}
	if hook.CacheRepaired != "" {
		how += " (replaced a bad cache entry: " + hook.CacheRepaired + ")"
	}
	info := fmt.Sprintf("nvrtc %d.%d %s, %s", major, minor, arch, how)
	if c.info == "" {
		c.info = info
	} else {
		c.info += "; " + info
	}
	return imgs, nil
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// Diag is one compiler diagnostic traced back to the profile.
type Diag struct {
	Pos  config.Pos // the profile position the generated line came from (zero if none)
	Hook string     // hook name ("" for prelude or module-level code)
	What string     // the generating construct: "when", "field fn", ...
	Line int        // line in the generated source (ncclhooks gen shows it)
	Kind string     // "error", "warning", ...
	Msg  string
}

func (d Diag) String() string {
	gen := fmt.Sprintf("generated line %d", d.Line)
	if d.Pos.File == "" {
		return fmt.Sprintf("%s: %s: %s: %s", SourceName, gen, d.Kind, d.Msg)
	}
	return fmt.Sprintf("%s: hook %q (%s): %s: %s [%s]", d.Pos, d.Hook, d.What, d.Kind, d.Msg, gen)
}

// CompileError is an NVRTC failure on a generated module, traced back to
// the profile.
type CompileError struct {
	Arch  string
	Diags []Diag
	Log   string // NVRTC's full log
}

func (e *CompileError) Error() string {
	var lines []string
	for _, d := range e.Diags {
		if strings.HasSuffix(d.Kind, "error") {
			lines = append(lines, "  "+d.String())
		}
	}
	if len(lines) == 0 {
		return fmt.Sprintf("gpu backend: NVRTC failed to compile the profile for %s:\n%s", e.Arch, strings.TrimSpace(e.Log))
	}
	return fmt.Sprintf("gpu backend: NVRTC failed to compile the profile for %s (see ncclhooks gen for the generated source):\n%s",
		e.Arch, strings.Join(lines, "\n"))
}

func traceError(m *hookgen.Module, arch string, ce *nvrtc.CompileError) *CompileError {
	e := &CompileError{Arch: arch, Log: ce.Log}
	for _, l := range ce.Lines {
		d := Diag{Line: l.Line, Kind: l.Kind, Msg: l.Msg}
		if span, ok := m.Trace(l.Line); ok {
			d.Pos, d.Hook, d.What = span.Pos, span.Hook, span.What
		}
		e.Diags = append(e.Diags, d)
	}
	return e
}

// CheckEntryAddress refuses a hook address that cannot be called from
// another module. Relocatable code loaded by cuModuleLoadData resolves to an
// absolute address (0x7f...); whole-program or LTO code resolves to a
// module-relative one (such as 0x80), and NCCL's kernel would fault on it.
func CheckEntryAddress(addr uint64) error {
	if addr == 0 {
		return fmt.Errorf("gpu backend: %s is null: the module did not initialise it", hookgen.SymEntryPtr)
	}
	if addr < 1<<32 {
		return fmt.Errorf("gpu backend: %s resolved to %#x, a module-relative address: whole-program or LTO code slipped in "+
			"(the hook must be compiled with -rdc=true and without -dlto); refusing to hand it to NCCL", hookgen.SymEntry, addr)
	}
	return nil
}

// Load loads the module on device ordinal and sets up its buffers.
func (c *Compiled) Load(ordinal int) (backend.Device, error) {
	t0 := time.Now()
	nd, err := c.lib.Device(ordinal)
	if err != nil {
		return nil, err
	}
	imgs, err := c.imagesFor(nd.Arch(), nd.Compile)
	if err != nil {
		nd.Close()
		return nil, err
	}
	d := &Device{c: c, d: nd}
	if err := d.load(imgs); err != nil {
		d.Close()
		return nil, fmt.Errorf("gpu backend: device %d: %w", ordinal, err)
	}
	d.LoadTime = time.Since(t0)
	return d, nil
}

// resources extracts ptxas's resource lines for function fn from a build log
// ("Used 24 registers", "0 bytes stack frame, 0 bytes spill stores, ...").
func resources(log, fn string) string {
	lines := strings.Split(log, "\n")
	var out []string
	for i, l := range lines {
		if !strings.Contains(l, "Function properties for "+fn) && !strings.Contains(l, "Compiling entry function '"+fn+"'") {
			continue
		}
		for _, next := range lines[i+1 : min(i+3, len(lines))] {
			next = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(next), "ptxas info    :"))
			if strings.Contains(next, "registers") || strings.Contains(next, "stack frame") {
				out = append(out, next)
			}
		}
	}
	return strings.Join(out, "; ")
}
