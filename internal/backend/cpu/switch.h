#ifndef NCCLHOOKS_CPU_SWITCH_H
#define NCCLHOOKS_CPU_SWITCH_H

#include <stdint.h>
#include "ncclhooks_abi.h"

/* What a switch slot points at: the active module's entry and the
   communicator's context block in it. Immutable once published. */
typedef struct {
  ncclProfilerDevHook_t entry;
  void* ctx;
} hk_switch_pair;

/* hk_switch_entry is the hook handed to the caller while profile reload is
   on (NCCL_HOOKS_RELOAD): devCtx is a slot, one cache line holding a
   pointer to the active pair; each call loads it once (acquire) and calls
   that module's entry with that context. A NULL pair records nothing. */
void hk_switch_entry(const ncclProfilerDevEvent_t* ev, void* slot);

void* hk_switch_slot(void);                            /* a zeroed slot; NULL when out of memory */
int hk_switch_set(void* slot, void* entry, void* ctx); /* publish a new pair; -1 when out of memory */

#endif
