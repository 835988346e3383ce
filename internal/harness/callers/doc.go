// Package callers holds callers of the device hook that the project does not
// build with its own toolchain: caller.cu, compiled by nvcc the way NCCL
// compiles its kernels (build.sh: relocatable at NCCL's 96-register budget,
// relocatable above it, whole program, and relocatable shared libraries of
// 32 and 64 registers loaded with local symbols, as torch loads NCCL), plays
// NCCL against the real plugin and logs every event it passed to a hook;
// the tests run every example profile and generated ones through each
// caller and check the plugin's output against those logs
// (harness.CheckFile). probe/ holds the root-cause experiments behind
// docs/ARCHITECTURE.md "Safe for every caller".
// New folder: these are C++/CUDA programs and their driver, not the harness's
// own NVRTC kernel (harness/gpu).
package callers
