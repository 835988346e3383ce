package cuda

// Kernel launches and their arguments.

/*
#include <stdlib.h>
#include "hk_cuda.h"
*/
import "C"

import (
	"fmt"
	"math"
	"unsafe"
)

// Launch queues f on s (nil: the private stream) with the given kernel
// arguments, each one of uint64, int64, uint32, int32, uint16, int16, uint8,
// int8, uint, int, uintptr, float32, float64, bool or unsafe.Pointer (a
// device-visible address), matching the kernel's parameter types in size.
func (d *Device) Launch(f *Function, grid, block [3]uint32, sharedBytes uint32, s *Stream, args ...any) error {
	h, err := d.stream(s)
	if err != nil {
		return err
	}
	// Parameter values and the pointer array live in C memory: cgo forbids
	// passing C a Go array of Go pointers.
	n := len(args)
	buf := C.calloc(C.size_t(2*n+1), 8)
	defer C.free(buf)
	vals := unsafe.Slice((*uint64)(buf), 2*n+1)
	ptrs := unsafe.Slice((*unsafe.Pointer)(unsafe.Add(buf, 8*n)), n)
	for i, a := range args {
		v, err := argBits(a)
		if err != nil {
			return fmt.Errorf("cuda: launch %s: argument %d: %w", f.Name, i, err)
		}
		vals[i] = v // little-endian: a narrower value sits at the cell's start
		ptrs[i] = unsafe.Add(buf, 8*i)
	}
	var params *unsafe.Pointer
	if n > 0 {
		params = &ptrs[0]
	}
	g := [3]C.uint{C.uint(grid[0]), C.uint(grid[1]), C.uint(grid[2])}
	b := [3]C.uint{C.uint(block[0]), C.uint(block[1]), C.uint(block[2])}
	r := C.hk_cuLaunch(d.ctx, f.h, &g[0], &b[0], C.uint(sharedBytes), h, params)
	if r != 0 {
		return fmt.Errorf("launch %s: %w", f.Name, cuErr("cuLaunchKernel", r))
	}
	return nil
}

func argBits(a any) (uint64, error) {
	switch v := a.(type) {
	case uint64:
		return v, nil
	case int64:
		return uint64(v), nil
	case uint32:
		return uint64(v), nil
	case int32:
		return uint64(uint32(v)), nil
	case uint16:
		return uint64(v), nil
	case int16:
		return uint64(uint16(v)), nil
	case uint8:
		return uint64(v), nil
	case int8:
		return uint64(uint8(v)), nil
	case uint:
		return uint64(v), nil
	case int:
		return uint64(v), nil
	case uintptr:
		return uint64(v), nil
	case float32:
		return uint64(math.Float32bits(v)), nil
	case float64:
		return math.Float64bits(v), nil
	case bool:
		if v {
			return 1, nil
		}
		return 0, nil
	case unsafe.Pointer:
		return uint64(uintptr(v)), nil
	}
	return 0, fmt.Errorf("unsupported type %T", a)
}
