#ifndef NCCLHOOKS_CDRIVE_H
#define NCCLHOOKS_CDRIVE_H

#include <stddef.h>
#include <stdint.h>

typedef struct {
  uint64_t timestamp;
  uint64_t workCounter;
  uint32_t funcId;
  uint8_t channelId;
  uint8_t phase;
  uint16_t rsvd;
} hk_event;

typedef struct {
  const hk_event* events;
  size_t n;
} hk_stream;

void hk_drive_one(uintptr_t entry, uintptr_t ctx, const hk_event* ev);
void hk_drive_threads(uintptr_t entry, uintptr_t ctx, hk_stream* streams, int n);

#endif
