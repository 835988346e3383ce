// launch runs a caller built as a shared library (build.sh: caller_so32,
// caller_so64): it loads CALLER_LIB with local symbols, as torch loads NCCL,
// so that the plugin finds neither ncclProfilerDevFuncName nor the caller's
// kernels through dlsym(RTLD_DEFAULT), and calls its caller_main.
#include <dlfcn.h>
#include <stdio.h>

int main(int argc, char** argv) {
  void* lib = dlopen(CALLER_LIB, RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    fprintf(stderr, "launch: dlopen %s: %s\n", CALLER_LIB, dlerror());
    return 3;
  }
  int (*caller_main)(int, char**) = (int (*)(int, char**))dlsym(lib, "caller_main");
  if (!caller_main) {
    fprintf(stderr, "launch: %s has no caller_main\n", CALLER_LIB);
    return 3;
  }
  if (dlsym(RTLD_DEFAULT, "ncclProfilerDevFuncName")) {
    fprintf(stderr, "launch: ncclProfilerDevFuncName is global: the caller was not loaded with local symbols\n");
    return 3;
  }
  return caller_main(argc, argv);
}
