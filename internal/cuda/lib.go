// Package cuda owns the GPU toolchain at run time: hand-written dlopen
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
package cuda

/*
#cgo LDFLAGS: -ldl
#include "hk_cuda.h"
*/
import "C"

import (
	"fmt"
	"strings"
	"sync"
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
		return nil, fmt.Errorf("cuda: %w: %s not found: no NVIDIA driver is installed or it is not on the library path (%v)", ErrNoDriver, driverNames[0], err)
	}
	l.DriverPath = path
	if missing := bindDriver(cu); len(missing) > 0 {
		return nil, fmt.Errorf("cuda: the CUDA driver at %s lacks %s: it is too old; ncclhooks needs a CUDA 12.0 or newer driver", path, strings.Join(missing, ", "))
	}
	var v C.int
	if r := C.hk_cuDriverGetVersion(&v); r != 0 {
		return nil, cuErr("cuDriverGetVersion", r)
	}
	l.driverVersion = int(v)
	if l.driverVersion < MinDriverVersion {
		return nil, fmt.Errorf("cuda: the CUDA driver supports CUDA %s; ncclhooks needs CUDA 12.0 or newer: update the NVIDIA driver", versionString(l.driverVersion))
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
		return nil, fmt.Errorf("cuda: %s not found (tried %s in CUDA_HOME, CUDA_PATH, /usr/local/cuda, python nvidia wheels and the ld.so path): install the %s NVRTC runtime or set CUDA_HOME", names[0], strings.Join(names, ", "), want)
	}
	l.NVRTCPath = path
	if missing := bindNVRTC(nv); len(missing) > 0 {
		return nil, fmt.Errorf("cuda: %s lacks %s: install NVRTC 12.0 or newer", path, strings.Join(missing, ", "))
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
		return nil, fmt.Errorf("cuda: %w: the driver sees no CUDA device (check CUDA_VISIBLE_DEVICES)", ErrNoDevice)
	}
	return l, nil
}

func versionString(v int) string { return fmt.Sprintf("%d.%d", v/1000, v%1000/10) }
