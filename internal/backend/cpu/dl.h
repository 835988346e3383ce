#ifndef NCCLHOOKS_CPU_DL_H
#define NCCLHOOKS_CPU_DL_H

#include <stddef.h>

/* The symbols of one loaded copy of a generated module. */
typedef struct {
  void* handle;
  void* entry;
  void* entry_ptr;
} hk_cpu_module;

/* hk_cpu_open dlopens path privately and resolves every module symbol.
   On failure it returns -1 and writes a message into err. */
int hk_cpu_open(const char* path, hk_cpu_module* m, char* err, size_t errlen);
void hk_cpu_close(hk_cpu_module* m);

#endif
