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

	"github.com/ncclhooks/ncclhooks/internal/backend"
	"github.com/ncclhooks/ncclhooks/internal/cuda"
	"github.com/ncclhooks/ncclhooks/internal/hookgen"
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

// HookOptions are the NVRTC options of every hook module, besides the
// register cap (registerCaps): ptxas -v puts the resource lines in the log.
var HookOptions = []string{"--ptxas-options=-v"}

// Compiled is a hook module compiled once per process and architecture.
type Compiled struct {
	mod *hookgen.Module
	lib *cuda.Lib

	// wholeProgram compiles without -rdc=true; tests use it to prove that
	// Load refuses the module-relative address that results.
	wholeProgram bool
	opt          Options  // Budget filled in
	options      []string // NVRTC options of the hook module, without the register cap

	// refused are the hooks left out of mod because they could fault NCCL's
	// kernels (Compile regenerates the module without them).
	refused []Refusal

	mu          sync.Mutex
	images      map[string]*archImages // by architecture
	info        string
	cacheFailed error // the first cache failure (the cache is off after it)
}

type archImages struct {
	hook, clock *cuda.Image
	res         Resources // of the hook module's entry
	regCap      int       // the --maxrregcount it was built with
}

// Options configures Compile.
type Options struct {
	Cache  *cuda.Cache // nil: no cache
	Budget int         // registers a hook may use (NCCL_HOOKS_MAX_REGISTERS); 0: DefaultRegisterBudget
	// Caps are the --maxrregcount values to try, in order, instead of 24,
	// 32, ... up to the budget (NCCL_HOOKS_REGISTER_CAPS, for diagnostics);
	// an unsafe build is refused either way.
	Caps  []int
	Extra []string // more NVRTC options (NCCL_HOOKS_NVRTC_OPTIONS), after HookOptions
}

// Open compiles m as Compile does, with the CUDA libraries of this machine
// (cuda.Open) and the compile cache in cacheDir ("off": none; "": the
// default, cuda.DefaultCacheDir), which replaces opt.Cache. A cache that
// cannot be opened or used (read-only, full, a bad entry that cannot be
// removed) is not an error: the module is compiled without it, and the
// returned cacheErr says why (the caller logs it once).
func Open(m *hookgen.Module, cacheDir string, opt Options) (c *Compiled, cacheErr, err error) {
	lib, err := cuda.Open()
	if err != nil {
		return nil, nil, err
	}
	opt.Cache = nil
	if cacheDir != "off" {
		if cacheDir == "" {
			cacheDir = cuda.DefaultCacheDir()
		}
		if opt.Cache, cacheErr = cuda.OpenCache(cacheDir); cacheErr != nil {
			opt.Cache = nil
		}
	}
	c, err = Compile(m, lib, opt)
	if cacheErr == nil && c != nil {
		cacheErr = c.CacheFailure()
	}
	return c, cacheErr, err
}

// Compile compiles and links m for the architecture of device 0, without
// creating a context on it (a context costs every rank memory on a device it
// may not use); devices of other architectures are compiled for at Load.
// Without nvJitLink, linking needs the driver's cuLink* and so a context:
// compilation then happens at the first Load. A compile error is a
// *CompileError whose positions point into the profile.
//
// Every build is checked for what it asks of its caller (Resources.Check,
// against opt.Budget). A hook that could fault NCCL's kernels is left out,
// and the module regenerated without it: Refused lists them, and Module is
// the module actually built. If no hook is left, the error is an
// *UnsafeModuleError.
func Compile(m *hookgen.Module, lib *cuda.Lib, opt Options) (*Compiled, error) {
	if err := opt.check(); err != nil {
		return nil, err
	}
	n, err := lib.DeviceCount()
	if err != nil {
		return nil, err
	}
	if n == 0 {
		return nil, errors.New("gpu backend: no CUDA device is visible (check CUDA_VISIBLE_DEVICES, or use NCCL_HOOKS_BACKEND=cpu)")
	}
	c := newCompiled(m, lib, opt)
	if !lib.HasJitLink() {
		return c, nil
	}
	arch, err := lib.DeviceArch(0)
	if err != nil {
		return nil, err
	}
	compile := func(src string, opt cuda.CompileOptions) (*cuda.Image, error) { return lib.Compile(arch, src, opt) }
	_, err = c.imagesFor(arch, compile)
	var whole *unsafeBuild
	if !errors.As(err, &whole) {
		if err != nil {
			return nil, err
		}
		return c, nil
	}
	return c.withoutUnsafeHooks(arch, compile, whole)
}

// Resources is what the entry built for arch asks of its caller (zero if
// arch was not built).
func (c *Compiled) Resources(arch string) (Resources, int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if imgs := c.images[arch]; imgs != nil {
		return imgs.res, imgs.regCap
	}
	return Resources{}, 0
}

// check fills in the default budget and refuses options that cannot work.
func (o *Options) check() error {
	if o.Budget == 0 {
		o.Budget = DefaultRegisterBudget
	}
	if o.Budget < MinRegisterBudget || o.Budget > 255 {
		return fmt.Errorf("gpu backend: a register budget of %d is outside %d..255 (NCCL_HOOKS_MAX_REGISTERS)", o.Budget, MinRegisterBudget)
	}
	for _, x := range o.Extra {
		if strings.HasPrefix(x, "--maxrregcount") || strings.HasPrefix(x, "-maxrregcount") {
			return fmt.Errorf("gpu backend: NCCL_HOOKS_NVRTC_OPTIONS sets %q: the register cap follows the budget; set NCCL_HOOKS_MAX_REGISTERS instead", x)
		}
	}
	return nil
}

// caps are the register caps to build with, lowest first.
func (o *Options) caps() []int {
	if len(o.Caps) > 0 {
		return o.Caps
	}
	return registerCaps(o.Budget)
}

func newCompiled(m *hookgen.Module, lib *cuda.Lib, opt Options) *Compiled {
	return &Compiled{mod: m, lib: lib, opt: opt, images: map[string]*archImages{},
		options: append(append([]string(nil), HookOptions...), opt.Extra...)}
}

type compileFunc func(string, cuda.CompileOptions) (*cuda.Image, error)

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
func (c *Compiled) imagesFor(arch string, compile func(string, cuda.CompileOptions) (*cuda.Image, error)) (*archImages, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if imgs := c.images[arch]; imgs != nil {
		return imgs, nil
	}
	// Relocatable and linked: the entry resolves to an absolute address
	// that NCCL's kernels can call (docs/ARCHITECTURE.md). The lowest
	// register cap whose build is safe to call wins.
	var hook *cuda.Image
	var res Resources
	var regCap int
	var refused *unsafeBuild
	for _, cap := range c.opt.caps() {
		opts := append(append([]string(nil), c.options...), fmt.Sprintf("--maxrregcount=%d", cap))
		opt := cuda.CompileOptions{Name: SourceName, Options: opts, Cache: c.opt.Cache, Link: true, WholeProgram: c.wholeProgram}
		img, err := compile(c.mod.Source, opt)
		c.noteCache(img)
		if err != nil {
			var ce *cuda.CompileError
			if errors.As(err, &ce) {
				return nil, traceError(c.mod, arch, ce)
			}
			return nil, fmt.Errorf("gpu backend: compiling the hook module for %s: %w", arch, err)
		}
		if c.wholeProgram { // tests: no linked image to check; Load refuses its address
			hook, regCap = img, cap
			break
		}
		r, err := EntryResources(img.Cubin)
		if err != nil {
			return nil, fmt.Errorf("gpu backend: %w", err)
		}
		if err := r.Check(c.opt.Budget); err != nil {
			refused = &unsafeBuild{res: r, check: err}
			continue
		}
		hook, res, regCap = img, r, cap
		break
	}
	if hook == nil {
		return nil, refused
	}
	// The clock kernel is called from no other module: whole-program code.
	clock, err := compile(clockSrc, cuda.CompileOptions{Name: "ncclhooks_clock.cu", Cache: c.opt.Cache, WholeProgram: true})
	c.noteCache(clock)
	if err != nil {
		return nil, fmt.Errorf("gpu backend: compiling the clock kernel: %w", err)
	}
	imgs := &archImages{hook: hook, clock: clock, res: res, regCap: regCap}
	c.images[arch] = imgs
	major, minor := c.lib.NVRTCVersion()
	how := fmt.Sprintf("%.1fms (link %.1fms)", ms(hook.CompileTime), ms(hook.LinkTime))
	switch {
	case c.opt.Cache == nil:
		how = "no cache, " + how
	case !hook.CacheHit:
		how = "cache miss, compiled in " + how
	}
	if hook.CacheHit {
		how = fmt.Sprintf("cache hit, %.1fms", ms(hook.CompileTime))
	}
	how += fmt.Sprintf("; %s (built with --maxrregcount=%d; callers need at least %d registers, budget %d)",
		res, regCap, res.Registers, c.opt.Budget)
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

// noteCache keeps the first cache failure and compiles without the cache
// from then on: one failure, one WARN (c.mu held).
func (c *Compiled) noteCache(img *cuda.Image) {
	if img == nil || img.CacheFailed == nil {
		return
	}
	if c.cacheFailed == nil {
		c.cacheFailed = img.CacheFailed
	}
	c.opt.Cache = nil
}

// CacheFailure is why the compile cache could not be used (the module was
// compiled without it from then on), nil when it worked or there is none.
func (c *Compiled) CacheFailure() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.cacheFailed
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

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
	d := &Device{c: c, d: cudaDriver{nd}}
	if err := d.load(imgs); err != nil {
		d.Close()
		return nil, fmt.Errorf("gpu backend: device %d: %w", ordinal, err)
	}
	d.LoadTime = time.Since(t0)
	return d, nil
}
