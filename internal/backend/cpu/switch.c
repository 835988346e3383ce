// The cpu backend's switch (switch.go): the hook the caller keeps across
// profile reloads.
#include <stdlib.h>
#include <string.h>
#include "switch.h"

void hk_switch_entry(const ncclProfilerDevEvent_t* ev, void* slot) {
  const hk_switch_pair* p = __atomic_load_n((const hk_switch_pair**)slot, __ATOMIC_ACQUIRE);
  if (p) p->entry(ev, p->ctx);
}

void* hk_switch_slot(void) {
  void* s = aligned_alloc(64, 64);
  if (s) memset(s, 0, 64);
  return s;
}

int hk_switch_set(void* slot, void* entry, void* ctx) {
  // Pairs are never freed: a caller descheduled between its load of the
  // slot and its call may still read the previous one at any later time.
  hk_switch_pair* p = (hk_switch_pair*)malloc(sizeof *p);
  if (!p) return -1;
  p->entry = (ncclProfilerDevHook_t)entry;
  p->ctx = ctx;
  __atomic_store_n((hk_switch_pair**)slot, p, __ATOMIC_RELEASE);
  return 0;
}
