// localmain loads localnccl.so with local symbols, as torch loads NCCL, and
// runs it against the plugin. Usage: localmain LOCALNCCL PLUGIN.
#include <dlfcn.h>
#include <stdio.h>

int main(int argc, char** argv) {
  if (argc != 3) return 2;
  void* nccl = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
  if (!nccl) {
    printf("ERROR dlopen %s\n", dlerror());
    return 1;
  }
  int (*run)(const char*) = (int (*)(const char*))dlsym(nccl, "localnccl_run");
  if (!run) return 1;
  if (dlsym(RTLD_DEFAULT, "ncclGetVersion")) {
    printf("ERROR ncclGetVersion is global\n");
    return 1;
  }
  return run(argv[2]);
}
