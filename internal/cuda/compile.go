package cuda

/*
#include <stdlib.h>
#include "hk_cuda.h"
*/
import "C"

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"
	"unsafe"
)

// CompileOptions controls Device.Compile.
type CompileOptions struct {
	Name    string   // program name used in diagnostics ("profile.cu")
	Options []string // extra NVRTC options; -rdc=true and --gpu-architecture=<device arch> are always added
	Cache   *Cache   // nil: no cache

	// Link links the relocatable cubin into an executable one (nvJitLink,
	// or cuLink* for Device.Compile without nvJitLink). Link a module whose
	// __device__ functions or variables other modules use: loaded unlinked,
	// the driver refused a generated hook module (CUDA_ERROR_INVALID_IMAGE)
	// and dropped a variable no kernel references (ncclhooks_entry_ptr:
	// "named symbol not found") on CUDA 13.0, driver 580. With a cache, the
	// linked image is what is cached.
	Link bool

	// WholeProgram leaves out -rdc=true (and Link): for self-contained
	// kernels, and for tests. Whole-program code resolves a __device__
	// function to a module-relative address that no other module can call
	// (docs/ARCHITECTURE.md, "Safe for every caller").
	WholeProgram bool
}

// Image is a compiled cubin.
type Image struct {
	Cubin       []byte
	Log         string // NVRTC's log (warnings); empty on a cache hit
	CacheHit    bool
	CompileTime time.Duration // the whole Compile call, cache lookup included
	LinkTime    time.Duration // the link step within it (0 if not linked or a cache hit)
	Linked      bool
	Arch        string   // e.g. "sm_90"
	Options     []string // the NVRTC options used
	CacheKey    string   // hex; empty without a cache
	// CacheRepaired says why a cache entry was found bad, removed and
	// rebuilt ("" when none was): worth one log line.
	CacheRepaired string
	// CacheFailed says why the cache could not be used (the image was
	// compiled without it); nil when it worked. Worth one WARN.
	CacheFailed error
}

// DiagLine is one diagnostic of the NVRTC log.
type DiagLine struct {
	File string // program name as given in CompileOptions.Name
	Line int    // 1-based line of the source
	Kind string // "error", "warning", "catastrophic error", "remark"
	Msg  string
}

// CompileError is a failed compilation, with the log and its diagnostics.
type CompileError struct {
	Name  string
	Log   string
	Lines []DiagLine
}

func (e *CompileError) Error() string {
	var errs []DiagLine
	for _, l := range e.Lines {
		if strings.HasSuffix(l.Kind, "error") {
			errs = append(errs, l)
		}
	}
	if len(errs) == 0 {
		return fmt.Sprintf("cuda: compiling %s failed:\n%s", e.Name, strings.TrimSpace(e.Log))
	}
	s := fmt.Sprintf("cuda: compiling %s: line %d: %s: %s", e.Name, errs[0].Line, errs[0].Kind, errs[0].Msg)
	if len(errs) > 1 {
		s += fmt.Sprintf(" (and %d more errors)", len(errs)-1)
	}
	return s
}

var archRE = regexp.MustCompile(`^sm_\d+[af]?$`)

var diagRE = regexp.MustCompile(`^(.+?)\((\d+)\): ((?:catastrophic )?error|warning|remark)(?: #[\w-]+)?: (.*)$`)

// ParseLog extracts the "name(LINE): error: msg" lines of an NVRTC log.
func ParseLog(log string) []DiagLine {
	var out []DiagLine
	for _, line := range strings.Split(log, "\n") {
		m := diagRE.FindStringSubmatch(strings.TrimRight(line, "\r"))
		if m == nil {
			continue
		}
		n, err := strconv.Atoi(m[2])
		if err != nil {
			continue
		}
		out = append(out, DiagLine{File: m[1], Line: n, Kind: m[3], Msg: m[4]})
	}
	return out
}

// cacheFormat changes whenever what a cache entry holds changes meaning.
const cacheFormat = 1

// reservedOptions are set by Compile itself; a caller's copy would conflict.
var reservedOptions = []string{"-arch", "--gpu-architecture", "-rdc", "--relocatable-device-code", "-dlto", "--dlink-time-opt", "-dlink-time-opt"}

// Compile compiles CUDA C source to a relocatable cubin for the device's
// architecture, through opt.Cache when given. A compilation failure is a
// *CompileError.
func (d *Device) Compile(src string, opt CompileOptions) (*Image, error) {
	return d.lib.compile(d.Arch(), src, opt, d.Link)
}

// Compile compiles for an architecture ("sm_90") without a device context
// (see Device.Compile and DeviceArch). opt.Link needs nvJitLink here.
func (l *Lib) Compile(arch, src string, opt CompileOptions) (*Image, error) {
	var link func(...[]byte) ([]byte, error)
	if l.HasJitLink() {
		link = func(images ...[]byte) ([]byte, error) { return jitLink(arch, images) }
	}
	return l.compile(arch, src, opt, link)
}

func (l *Lib) compile(arch, src string, opt CompileOptions, link func(...[]byte) ([]byte, error)) (*Image, error) {
	t0 := time.Now()
	name := opt.Name
	if name == "" {
		name = "hook.cu"
	}
	for _, o := range opt.Options {
		for _, r := range reservedOptions {
			if o == r || strings.HasPrefix(o, r+"=") {
				return nil, fmt.Errorf("cuda: option %q is set by ncclhooks itself (the architecture comes from the device, relocatable code is required): remove it", o)
			}
		}
	}
	if !archRE.MatchString(arch) {
		return nil, fmt.Errorf("cuda: architecture %q is not of the form sm_XY", arch)
	}
	img := &Image{Arch: arch}
	img.Options = append(img.Options, "--gpu-architecture="+img.Arch)
	if !opt.WholeProgram {
		img.Options = append(img.Options, "-rdc=true")
	}
	img.Options = append(img.Options, opt.Options...)
	img.Linked = opt.Link && !opt.WholeProgram
	if img.Linked && link == nil {
		return nil, fmt.Errorf("cuda: linking for %s needs nvJitLink (libnvJitLink.so.%d was not found): install the CUDA %d nvJitLink runtime or set CUDA_HOME", arch, l.nvrtcMajor, l.nvrtcMajor)
	}

	build := func() ([]byte, error) {
		cubin, log, err := compileNVRTC(src, name, img.Options)
		img.Log = log
		if err != nil || !img.Linked {
			return cubin, err
		}
		t := time.Now()
		cubin, err = link(cubin)
		img.LinkTime = time.Since(t)
		if err != nil {
			return nil, fmt.Errorf("cuda: linking %s: %w", name, err)
		}
		return cubin, nil
	}
	if opt.Cache == nil {
		cubin, err := build()
		if err != nil {
			return nil, err
		}
		img.Cubin = cubin
	} else {
		major, minor := l.NVRTCVersion()
		img.CacheKey = CacheKey(src, strings.Join(img.Options, "\x00"), fmt.Sprintf("nvrtc %d.%d", major, minor),
			img.Arch, fmt.Sprintf("driver %d", l.DriverVersion()), fmt.Sprintf("linked %v", img.Linked))
		res, err := opt.Cache.Do(img.CacheKey, build)
		if err != nil {
			return nil, err
		}
		img.Cubin, img.CacheHit, img.CacheRepaired, img.CacheFailed = res.Payload, res.Hit, res.Repaired, res.Failed
	}
	img.CompileTime = time.Since(t0)
	return img, nil
}

// CacheKey is the hex sha256 of the parts (length-prefixed, so part
// boundaries count) and the cache format version.
func CacheKey(parts ...string) string {
	h := sha256.New()
	var n [8]byte
	binary.LittleEndian.PutUint64(n[:], cacheFormat)
	h.Write(n[:])
	for _, p := range parts {
		binary.LittleEndian.PutUint64(n[:], uint64(len(p)))
		h.Write(n[:])
		h.Write([]byte(p))
	}
	return hex.EncodeToString(h.Sum(nil))
}

func compileNVRTC(src, name string, options []string) (cubin []byte, log string, err error) {
	csrc, cname := C.CString(src), C.CString(name)
	defer C.free(unsafe.Pointer(csrc))
	defer C.free(unsafe.Pointer(cname))
	var prog C.hk_h
	if r := C.hk_nvrtcCreateProgram(&prog, csrc, cname); r != 0 {
		return nil, "", nvrtcErr("nvrtcCreateProgram", r)
	}
	defer C.hk_nvrtcDestroyProgram(prog)

	copts := make([]*C.char, len(options))
	for i, o := range options {
		copts[i] = C.CString(o)
		defer C.free(unsafe.Pointer(copts[i]))
	}
	// The array of C strings must itself be C memory.
	arr := C.malloc(C.size_t(len(copts)+1) * C.size_t(unsafe.Sizeof(uintptr(0))))
	defer C.free(arr)
	copy(unsafe.Slice((**C.char)(arr), len(copts)), copts)
	rc := C.hk_nvrtcCompileProgram(prog, C.int(len(copts)), (**C.char)(arr))

	var clog *C.char
	var n C.size_t
	if C.hk_nvrtcGetLog(prog, &clog, &n) == 0 && clog != nil {
		log = strings.TrimRight(C.GoStringN(clog, C.int(n)), "\x00")
		C.free(unsafe.Pointer(clog))
	}
	if rc != 0 {
		if rc == 6 { // NVRTC_ERROR_COMPILATION: the source is at fault
			return nil, log, &CompileError{Name: name, Log: log, Lines: ParseLog(log)}
		}
		err := nvrtcErr("nvrtcCompileProgram", rc)
		if log != "" {
			err = fmt.Errorf("%w\n%s", err, log)
		}
		return nil, log, err
	}
	var out *C.char
	if r := C.hk_nvrtcGetCUBIN(prog, &out, &n); r != 0 {
		return nil, log, nvrtcErr("nvrtcGetCUBIN", r)
	}
	defer C.free(unsafe.Pointer(out))
	return C.GoBytes(unsafe.Pointer(out), C.int(n)), log, nil
}

// Link links relocatable cubins (or PTX) into one cubin for the device's
// architecture, with nvJitLink when it was found, else the driver's cuLink*.
func (d *Device) Link(images ...[]byte) ([]byte, error) {
	if d.lib.HasJitLink() {
		return d.linkJit(images)
	}
	return d.linkDriver(images)
}

// linkInputs lays the inputs out in C memory: pointers, sizes, kinds.
type linkInputs struct {
	ptrs  *unsafe.Pointer
	sizes *C.size_t
	kinds *C.int
	free  func()
}

func newLinkInputs(images [][]byte) (*linkInputs, error) {
	n := len(images)
	if n == 0 {
		return nil, fmt.Errorf("cuda: link: no inputs")
	}
	for i, img := range images {
		if len(img) == 0 {
			return nil, fmt.Errorf("cuda: link: input %d is empty", i)
		}
	}
	block := C.calloc(C.size_t(n), 8+8+4)
	ptrs := unsafe.Slice((*unsafe.Pointer)(block), n)
	sizes := unsafe.Slice((*C.size_t)(unsafe.Add(block, 8*n)), n)
	kinds := unsafe.Slice((*C.int)(unsafe.Add(block, 16*n)), n)
	for i, img := range images {
		ptrs[i] = C.CBytes(img)
		sizes[i] = C.size_t(len(img))
		if !bytes.HasPrefix(img, []byte("\x7fELF")) {
			kinds[i] = 1 // PTX text
		}
	}
	return &linkInputs{
		ptrs: &ptrs[0], sizes: &sizes[0], kinds: &kinds[0],
		free: func() {
			for _, p := range ptrs {
				C.free(p)
			}
			C.free(block)
		},
	}, nil
}

func (d *Device) linkJit(images [][]byte) ([]byte, error) { return jitLink(d.Arch(), images) }

func jitLink(arch string, images [][]byte) ([]byte, error) {
	in, err := newLinkInputs(images)
	if err != nil {
		return nil, err
	}
	defer in.free()
	carch := C.CString("-arch=" + arch)
	defer C.free(unsafe.Pointer(carch))
	opts := (**C.char)(C.malloc(8))
	defer C.free(unsafe.Pointer(opts))
	*opts = carch
	var out unsafe.Pointer
	var n C.size_t
	var clog *C.char
	r := C.hk_jlLink(C.int(len(images)), opts, 1, in.ptrs, in.sizes, in.kinds, &out, &n, &clog)
	log := ""
	if clog != nil {
		log = C.GoString(clog)
		C.free(unsafe.Pointer(clog))
	}
	if r != 0 {
		return nil, jitLinkErr("nvJitLink", r, log)
	}
	defer C.free(out)
	return C.GoBytes(out, C.int(n)), nil
}

func (d *Device) linkDriver(images [][]byte) ([]byte, error) {
	in, err := newLinkInputs(images)
	if err != nil {
		return nil, err
	}
	defer in.free()
	const logSize = 8192
	clog := (*C.char)(C.calloc(logSize, 1))
	defer C.free(unsafe.Pointer(clog))
	var out unsafe.Pointer
	var n C.size_t
	r := C.hk_cuLink(d.ctx, C.int(len(images)), in.ptrs, in.sizes, in.kinds, &out, &n, clog, logSize)
	if r != 0 {
		err := cuErr("cuLink", r)
		if log := C.GoString(clog); log != "" {
			err = fmt.Errorf("%w\n%s", err, log)
		}
		return nil, err
	}
	defer C.free(out)
	return C.GoBytes(out, C.int(n)), nil
}
