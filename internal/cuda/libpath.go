package cuda

// Finding and dlopening the driver, NVRTC and nvJitLink.

/*
#include <stdlib.h>
#include "hk_cuda.h"
*/
import "C"

import (
	"bufio"
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"unsafe"
)

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
