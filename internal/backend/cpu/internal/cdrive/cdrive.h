#ifndef NCCLHOOKS_CDRIVE_H
#define NCCLHOOKS_CDRIVE_H

#include <stddef.h>
#include <stdint.h>

#include "ncclhooks_abi.h"

typedef struct {
  const ncclProfilerDevEvent_t* events;
  size_t n;
} hk_stream;

void hk_drive_one(uintptr_t entry, uintptr_t ctx, const ncclProfilerDevEvent_t* ev);
void hk_drive_threads(uintptr_t entry, uintptr_t ctx, hk_stream* streams, int n);

#endif
