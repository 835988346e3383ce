// Package nvrtc owns the GPU toolchain at run time: hand-written dlopen
// bindings for NVRTC, the CUDA driver API and nvJitLink (no CUDA headers or
// libraries at build time, in the style of go-nvml), compiling CUDA C to a
// relocatable cubin, linking, loading it into a device's primary context,
// resolving symbols, device memory, streams, events and graphs, and the
// content-addressed on-disk compile cache.
//
// Every call that needs a CUDA context makes the device's primary context
// current for the duration of that one C call and restores what was current
// before, so callers need not lock OS threads, and a foreign thread (NCCL's)
// is left as found.
package nvrtc

/*
#cgo LDFLAGS: -ldl
#include <stdlib.h>
#include "hk_cuda.h"
*/
import "C"

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"unsafe"
)

// MinDriverVersion is the oldest CUDA driver API version supported (12.0):
// the versioned entry points and cubin loading this package relies on.
const MinDriverVersion = 12000

// Lib is the loaded set of libraries. There is one per process.
type Lib struct {
	driverVersion          int
	nvrtcMajor, nvrtcMinor int
	jitLinkMajor           int // 0: nvJitLink not loaded

	// Paths the libraries were loaded from (as reported by dladdr).
	DriverPath, NVRTCPath, JitLinkPath string
}

var (
	openMu  sync.Mutex
	openLib *Lib
)

// Open loads libcuda, NVRTC and (optionally) nvJitLink and initialises the
// driver. It is safe to call repeatedly and concurrently: after the first
// success it returns the same *Lib. A failure is returned as is and retried
// on the next call.
func Open() (*Lib, error) {
	openMu.Lock()
	defer openMu.Unlock()
	if openLib != nil {
		return openLib, nil
	}
	l, err := open()
	if err != nil {
		return nil, err
	}
	openLib = l
	return l, nil
}

func open() (*Lib, error) {
	l := &Lib{}
	cu, path, err := loadLib(driverNames, driverDirs())
	if err != nil {
		return nil, fmt.Errorf("nvrtc: %w: %s not found: no NVIDIA driver is installed or it is not on the library path (%v)", ErrNoDriver, driverNames[0], err)
	}
	l.DriverPath = path
	if missing := bindDriver(cu); len(missing) > 0 {
		return nil, fmt.Errorf("nvrtc: the CUDA driver at %s lacks %s: it is too old; ncclhooks needs a CUDA 12.0 or newer driver", path, strings.Join(missing, ", "))
	}
	var v C.int
	if r := C.hk_cuDriverGetVersion(&v); r != 0 {
		return nil, cuErr("cuDriverGetVersion", r)
	}
	l.driverVersion = int(v)
	if l.driverVersion < MinDriverVersion {
		return nil, fmt.Errorf("nvrtc: the CUDA driver supports CUDA %s; ncclhooks needs CUDA 12.0 or newer: update the NVIDIA driver", versionString(l.driverVersion))
	}
	if r := C.hk_cuInit(); r != 0 {
		return nil, cuErr("cuInit", r)
	}

	// NVRTC: the newest major the driver can run, down to 12.
	var names []string
	for m := l.driverVersion / 1000; m >= 12; m-- {
		names = append(names, fmt.Sprintf("libnvrtc.so.%d", m))
	}
	nv, path, err := loadLib(names, toolkitDirs())
	if err != nil {
		want := fmt.Sprintf("CUDA %d", l.driverVersion/1000)
		return nil, fmt.Errorf("nvrtc: %s not found (tried %s in CUDA_HOME, CUDA_PATH, /usr/local/cuda, python nvidia wheels and the ld.so path): install the %s NVRTC runtime or set CUDA_HOME", names[0], strings.Join(names, ", "), want)
	}
	l.NVRTCPath = path
	if missing := bindNVRTC(nv); len(missing) > 0 {
		return nil, fmt.Errorf("nvrtc: %s lacks %s: install NVRTC 12.0 or newer", path, strings.Join(missing, ", "))
	}
	var maj, min C.int
	if r := C.hk_nvrtcVersion(&maj, &min); r != 0 {
		return nil, nvrtcErr("nvrtcVersion", r)
	}
	l.nvrtcMajor, l.nvrtcMinor = int(maj), int(min)

	// nvJitLink is optional (cuLink* is the fallback): same major as NVRTC.
	jl, path, err := loadLib([]string{fmt.Sprintf("libnvJitLink.so.%d", l.nvrtcMajor)}, toolkitDirs())
	if err == nil && bindJitLink(jl, l.nvrtcMajor) {
		l.jitLinkMajor = l.nvrtcMajor
		l.JitLinkPath = path
	}
	return l, nil
}

// DriverVersion is the CUDA version the driver supports, e.g. 13000.
func (l *Lib) DriverVersion() int { return l.driverVersion }

// NVRTCVersion is the version of the loaded NVRTC.
func (l *Lib) NVRTCVersion() (major, minor int) { return l.nvrtcMajor, l.nvrtcMinor }

// HasJitLink reports whether nvJitLink was found (else Link uses cuLink*).
func (l *Lib) HasJitLink() bool { return l.jitLinkMajor != 0 }

// String describes the loaded toolchain for logs.
func (l *Lib) String() string {
	s := fmt.Sprintf("CUDA driver %s, NVRTC %d.%d (%s)", versionString(l.driverVersion), l.nvrtcMajor, l.nvrtcMinor, l.NVRTCPath)
	if l.HasJitLink() {
		s += ", nvJitLink (" + l.JitLinkPath + ")"
	}
	return s
}

// DeviceCount is the number of CUDA devices visible to the process.
func (l *Lib) DeviceCount() (int, error) {
	var n C.int
	if r := C.hk_cuDeviceGetCount(&n); r != 0 {
		return 0, cuErr("cuDeviceGetCount", r)
	}
	return int(n), nil
}

// OpenGPU is Open for code that needs a device: it fails with an error that
// Is ErrNoDriver or ErrNoDevice where this machine has no usable GPU.
func OpenGPU() (*Lib, error) {
	l, err := Open()
	if err != nil {
		return nil, err
	}
	n, err := l.DeviceCount()
	if err != nil {
		return nil, err
	}
	if n == 0 {
		return nil, fmt.Errorf("nvrtc: %w: the driver sees no CUDA device (check CUDA_VISIBLE_DEVICES)", ErrNoDevice)
	}
	return l, nil
}

func versionString(v int) string { return fmt.Sprintf("%d.%d", v/1000, v%1000/10) }

var driverNames = []string{"libcuda.so.1", "libcuda.so"}

// driverDirs are where a driver lives when ld.so does not know it (containers).
// The toolkit's stubs/libcuda.so is deliberately absent: it is a stub.
func driverDirs() []string {
	return []string{"/usr/local/nvidia/lib64", "/usr/lib/" + archTriple() + "-linux-gnu", "/usr/lib64", "/usr/lib/wsl/lib"}
}

// toolkitDirs lists where NVRTC and nvJitLink are looked for, in order.
func toolkitDirs() []string {
	var dirs []string
	target := archTriple() + "-linux"
	if runtime.GOARCH == "arm64" {
		target = "sbsa-linux"
	}
	for _, env := range []string{"CUDA_HOME", "CUDA_PATH"} {
		if d := os.Getenv(env); d != "" {
			dirs = append(dirs, filepath.Join(d, "lib64"), filepath.Join(d, "lib"), filepath.Join(d, "targets", target, "lib"))
		}
	}
	dirs = append(dirs, "/usr/local/cuda/lib64", "/usr/local/cuda/targets/"+target+"/lib")
	return append(dirs, wheelDirs()...)
}

func archTriple() string {
	if runtime.GOARCH == "arm64" {
		return "aarch64"
	}
	return "x86_64"
}

// wheelDirs finds the lib folders of the python nvidia-* wheels (torch's CUDA
// runtime) from the libraries already mapped into this process: a torch
// process has .../site-packages/nvidia/<pkg>/lib/*.so mapped.
func wheelDirs() []string {
	f, err := os.Open("/proc/self/maps")
	if err != nil {
		return nil
	}
	defer f.Close()
	seen := map[string]bool{}
	var dirs []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		i := strings.Index(line, "/nvidia/")
		j := strings.IndexByte(line, '/')
		if i < 0 || j < 0 || !strings.Contains(line, "-packages/nvidia/") {
			continue
		}
		root := line[j : i+len("/nvidia")]
		if seen[root] {
			continue
		}
		seen[root] = true
		libs, _ := filepath.Glob(filepath.Join(root, "*", "lib"))
		dirs = append(dirs, libs...)
	}
	return dirs
}

// loadLib opens the first of names that is already loaded, else the first
// found in dirs, else the first the dynamic linker finds.
func loadLib(names, dirs []string) (C.hk_h, string, error) {
	for _, n := range names {
		if h, _ := dlopen(n, true); h != 0 {
			return h, n, nil
		}
	}
	var errs []string
	try := func(p string) C.hk_h {
		h, err := dlopen(p, false)
		if h == 0 {
			errs = append(errs, err)
		}
		return h
	}
	for _, d := range dirs {
		for _, n := range names {
			p := filepath.Join(d, n)
			if _, err := os.Stat(p); err != nil {
				continue
			}
			if h := try(p); h != 0 {
				return h, p, nil
			}
		}
	}
	for _, n := range names {
		if h := try(n); h != 0 {
			return h, n, nil
		}
	}
	return 0, "", errors.New(strings.Join(errs, "; "))
}

// dlopen opens path (noload: only if already loaded); the string is
// dlerror's message when it fails.
func dlopen(path string, noload bool) (C.hk_h, string) {
	cs := C.CString(path)
	defer C.free(unsafe.Pointer(cs))
	nl := C.int(0)
	if noload {
		nl = 1
	}
	var buf [512]C.char
	h := C.hk_dlopen(cs, nl, &buf[0], C.size_t(len(buf)))
	if h == 0 {
		return 0, C.GoString(&buf[0])
	}
	return h, ""
}

// sym returns the first of names that lib exports, or nil.
func sym(lib C.hk_h, names ...string) unsafe.Pointer {
	for _, n := range names {
		cs := C.CString(n)
		p := C.hk_sym(lib, cs)
		C.free(unsafe.Pointer(cs))
		if p != nil {
			return p
		}
	}
	return nil
}

// bindDriver fills hk_cu. Versioned names are the current ABI where the
// plain name is a legacy one (cuMemAlloc takes 32-bit sizes, ...). It returns
// the required symbols that are missing.
func bindDriver(lib C.hk_h) (missing []string) {
	t := &C.hk_cu
	req := func(dst *unsafe.Pointer, names ...string) {
		if *dst = sym(lib, names...); *dst == nil {
			missing = append(missing, names[0])
		}
	}
	opt := func(dst *unsafe.Pointer, names ...string) { *dst = sym(lib, names...) }
	req(&t.cuInit, "cuInit")
	req(&t.cuDriverGetVersion, "cuDriverGetVersion")
	req(&t.cuGetErrorName, "cuGetErrorName")
	req(&t.cuGetErrorString, "cuGetErrorString")
	req(&t.cuDeviceGetCount, "cuDeviceGetCount")
	req(&t.cuDeviceGet, "cuDeviceGet")
	req(&t.cuDeviceGetAttribute, "cuDeviceGetAttribute")
	req(&t.cuDeviceGetName, "cuDeviceGetName")
	req(&t.cuDevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain")
	req(&t.cuDevicePrimaryCtxRelease, "cuDevicePrimaryCtxRelease_v2")
	req(&t.cuCtxGetCurrent, "cuCtxGetCurrent")
	req(&t.cuCtxSetCurrent, "cuCtxSetCurrent")
	req(&t.cuModuleLoadData, "cuModuleLoadData")
	req(&t.cuModuleUnload, "cuModuleUnload")
	req(&t.cuModuleGetGlobal, "cuModuleGetGlobal_v2")
	req(&t.cuModuleGetFunction, "cuModuleGetFunction")
	req(&t.cuMemAlloc, "cuMemAlloc_v2")
	req(&t.cuMemFree, "cuMemFree_v2")
	req(&t.cuMemHostAlloc, "cuMemHostAlloc")
	req(&t.cuMemHostGetDevicePointer, "cuMemHostGetDevicePointer_v2")
	req(&t.cuMemFreeHost, "cuMemFreeHost")
	req(&t.cuStreamCreate, "cuStreamCreate")
	req(&t.cuStreamSynchronize, "cuStreamSynchronize")
	req(&t.cuStreamDestroy, "cuStreamDestroy_v2")
	req(&t.cuMemcpyHtoDAsync, "cuMemcpyHtoDAsync_v2")
	req(&t.cuMemcpyDtoHAsync, "cuMemcpyDtoHAsync_v2")
	req(&t.cuMemsetD8Async, "cuMemsetD8Async")
	req(&t.cuLaunchKernel, "cuLaunchKernel")
	// Optional: the backend does not need them (the harness does); a
	// wrapper reports a missing one when called.
	opt(&t.cuCtxSynchronize, "cuCtxSynchronize")
	opt(&t.cuMemcpyDtoDAsync, "cuMemcpyDtoDAsync_v2")
	opt(&t.cuEventCreate, "cuEventCreate")
	opt(&t.cuEventRecord, "cuEventRecord")
	opt(&t.cuEventSynchronize, "cuEventSynchronize")
	// _v2 (12.8+) fixed the semantics, same signature.
	opt(&t.cuEventElapsedTime, "cuEventElapsedTime_v2", "cuEventElapsedTime")
	opt(&t.cuEventDestroy, "cuEventDestroy_v2")
	opt(&t.cuStreamBeginCapture, "cuStreamBeginCapture_v2")
	opt(&t.cuStreamEndCapture, "cuStreamEndCapture")
	opt(&t.cuGraphInstantiateWithFlags, "cuGraphInstantiateWithFlags")
	opt(&t.cuGraphLaunch, "cuGraphLaunch")
	opt(&t.cuGraphExecDestroy, "cuGraphExecDestroy")
	opt(&t.cuGraphDestroy, "cuGraphDestroy")
	// Optional: Link falls back to nvJitLink or reports the absence.
	t.cuLinkCreate = sym(lib, "cuLinkCreate_v2")
	t.cuLinkAddData = sym(lib, "cuLinkAddData_v2")
	t.cuLinkComplete = sym(lib, "cuLinkComplete")
	t.cuLinkDestroy = sym(lib, "cuLinkDestroy")
	return missing
}

func bindNVRTC(lib C.hk_h) (missing []string) {
	t := &C.hk_nvrtc
	req := func(dst *unsafe.Pointer, name string) {
		if *dst = sym(lib, name); *dst == nil {
			missing = append(missing, name)
		}
	}
	req(&t.nvrtcVersion, "nvrtcVersion")
	req(&t.nvrtcGetErrorString, "nvrtcGetErrorString")
	req(&t.nvrtcCreateProgram, "nvrtcCreateProgram")
	req(&t.nvrtcCompileProgram, "nvrtcCompileProgram")
	req(&t.nvrtcGetProgramLogSize, "nvrtcGetProgramLogSize")
	req(&t.nvrtcGetProgramLog, "nvrtcGetProgramLog")
	req(&t.nvrtcGetCUBINSize, "nvrtcGetCUBINSize")
	req(&t.nvrtcGetCUBIN, "nvrtcGetCUBIN")
	req(&t.nvrtcDestroyProgram, "nvrtcDestroyProgram")
	return missing
}

// bindJitLink fills hk_jl. nvJitLink exports its API under versioned names
// (__nvJitLinkCreate_13_0; the header #defines the plain name to one of
// them), so try the plain name, then each minor of the library's major.
func bindJitLink(lib C.hk_h, major int) bool {
	t := &C.hk_jl
	versioned := func(name string) []string {
		names := []string{name}
		for minor := 9; minor >= 0; minor-- {
			names = append(names, fmt.Sprintf("__%s_%d_%d", name, major, minor))
		}
		return names
	}
	all := true
	bind := func(dst *unsafe.Pointer, name string) {
		if *dst = sym(lib, versioned(name)...); *dst == nil {
			all = false
		}
	}
	bind(&t.create, "nvJitLinkCreate")
	bind(&t.destroy, "nvJitLinkDestroy")
	bind(&t.addData, "nvJitLinkAddData")
	bind(&t.complete, "nvJitLinkComplete")
	bind(&t.getLinkedCubinSize, "nvJitLinkGetLinkedCubinSize")
	bind(&t.getLinkedCubin, "nvJitLinkGetLinkedCubin")
	bind(&t.getErrorLogSize, "nvJitLinkGetErrorLogSize")
	bind(&t.getErrorLog, "nvJitLinkGetErrorLog")
	return all
}
