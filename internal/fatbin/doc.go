// Package fatbin reads the resources of the GPU kernels a host library carries.
//
// A library built by nvcc keeps its device code in the ELF section .nv_fatbin:
// fat binary containers (magic 0xBA55ED50) back to back, each a list of
// entries (PTX or a cubin, for one SM architecture), their payloads stored
// plain, LZ4-compressed (nvcc -Xfatbin -compress-all, as NCCL builds) or
// zstd-compressed. A cubin is an ELF file whose .nv.info sections hold each
// function's register count, stack frame and stack size (EIATTR_REGCOUNT,
// EIATTR_FRAME_SIZE, EIATTR_MAX_STACK_SIZE) and a kernel's .nv.info.<kernel>
// section its launch bounds (EIATTR_MAX_THREADS).
//
// The plugin uses it at init to learn how many registers the kernels that
// call its device hook are launched with: a hook that uses more faults them
// (docs/ARCHITECTURE.md, "Safe for every caller"). Reading is cheap on
// purpose: the section's container and entry headers are read in place, and
// only the cubins of the one architecture the driver would load are read
// (decompressed where needed), never the other architectures' code.
//
// The container format is NVIDIA's and undocumented; the layout here is the
// one nvcc 11.8 to 13 writes (checked against cuobjdump on real libraries).
// Anything else is an error that says what was found, never a guess.
package fatbin
