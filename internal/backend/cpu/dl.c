#include "dl.h"

#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

static int resolve(hk_cpu_module* m, const char* name, void** out, char* err, size_t errlen) {
  dlerror();
  *out = dlsym(m->handle, name);
  if (*out == NULL) {
    const char* e = dlerror();
    snprintf(err, errlen, "symbol %s: %s", name, e ? e : "not found");
    return -1;
  }
  return 0;
}

int hk_cpu_open(const char* path, hk_cpu_module* m, char* err, size_t errlen) {
  memset(m, 0, sizeof(*m));
  /* RTLD_LOCAL: every device's copy keeps its own globals and symbols. */
  m->handle = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (m->handle == NULL) {
    const char* e = dlerror();
    snprintf(err, errlen, "%s", e ? e : "dlopen failed");
    return -1;
  }
  if (resolve(m, "ncclhooks_entry", &m->entry, err, errlen) ||
      resolve(m, "ncclhooks_entry_ptr", &m->entry_ptr, err, errlen)) {
    dlclose(m->handle);
    m->handle = NULL;
    return -1;
  }
  return 0;
}

void hk_cpu_close(hk_cpu_module* m) {
  if (m->handle != NULL) dlclose(m->handle);
  m->handle = NULL;
}
