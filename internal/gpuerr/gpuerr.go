// Package gpuerr names the ways a machine has no usable GPU. The CUDA
// bindings (package internal/cuda) return errors that Is these, and the GPU test
// helper (internal/gputest) skips for them only: any other failure to open
// the CUDA libraries on a machine is a real failure. It is a leaf so that
// both can import it.
package gpuerr

import "errors"

var (
	// ErrNoDriver: no NVIDIA driver library (libcuda) could be loaded.
	ErrNoDriver = errors.New("no NVIDIA driver")
	// ErrNoDevice: the driver is there but sees no CUDA device.
	ErrNoDevice = errors.New("no CUDA device")
)
