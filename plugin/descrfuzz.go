package main

// The host-event source's descriptor reader (hostsrc.c) driven by bytes, for
// FuzzHostDescriptors: no Go code outside the tests calls it, so the linker
// leaves it out of the plugin but for the small C shim below.

/*
#include <stdlib.h>
#include <string.h>
#include "exports.h"

// What the entry saw, per (channel, work counter): 1 started, 2 stopped.
// At most 1024 ops run, so a channel's work counter stays below 1024.
typedef struct {
  int n, bad;
  uint8_t state[256][1024];
} hk_fuzz_sink;

static void hk_fuzz_entry(const ncclProfilerDevEvent_t* ev, void* ctx) {
  hk_fuzz_sink* s = (hk_fuzz_sink*)ctx;
  s->n++;
  if (ev->phase > 1 || !hooks_host_func_name((int)ev->funcId) || ev->workCounter == 0 || ev->workCounter >= 1024) {
    s->bad |= 1;
    return;
  }
  uint8_t* st = &s->state[ev->channelId][ev->workCounter];
  if (ev->phase == 0) {
    if (*st != 0) s->bad |= 4; // a work counter used twice
    *st = 1;
  } else {
    if (*st != 1) s->bad |= 2; // a STOP without its START, or a second STOP
    *st = 2;
  }
}

static const char* hk_fuzz_strs[] = {"AllReduce", "AllGather", "Broadcast", "Reduce", "ReduceScatter", "Send", "Recv",
  "ncclFloat32", "ncclInt8", "ncclBfloat16", "ncclFloat8e5m2", "RING", "TREE", "PAT", "NVLS", "LL", "LL128", "SIMPLE", "", "x", NULL};

// hk_fuzz_run plays ops (4 bytes each: kind, a, b, c) against a fresh
// communicator: 0 start a descriptor of type bit a%16 (strings chosen by b,
// c; parent: handle b%8 or a raw value), 1 KernelChStop state on handle
// a%8 (timer from b), 2 any state id, 3 stopEvent of handle a%8 (then
// forgotten), 4 stop of a raw tagged or NULL value. Returns 0, or a bit set
// of what the entry saw wrong: 1 an unknown phase, function id or work
// counter, 2 a STOP without its START or a second one, 4 a work counter
// started twice, 8 no memory for the sink.
static int hk_fuzz_run(const uint8_t* ops, size_t n) {
  // On the heap, not in thread-local storage: 256 KiB of __thread in the
  // plugin exhausts the static TLS block of a process that dlopens it
  // ("cannot allocate memory in static TLS block").
  hk_fuzz_sink* sink = (hk_fuzz_sink*)calloc(1, sizeof *sink);
  if (!sink) return 8;
  hk_comm c;
  memset(&c, 0, sizeof c);
  c.host = 1, c.entry = hk_fuzz_entry, c.ctx = sink;
  void* h[8] = {0};
  const int ns = (int)(sizeof hk_fuzz_strs / sizeof hk_fuzz_strs[0]);
  for (size_t i = 0; i + 4 <= n; i += 4) {
    uint8_t k = ops[i] % 5, a = ops[i + 1], b = ops[i + 2], cc = ops[i + 3];
    switch (k) {
    case 0: {
      ncclProfilerEventDescr_v5_t d;
      memset(&d, 0, sizeof d);
      d.type = 1ULL << (a % 16);
      d.parentObj = (b & 0x80) ? (void*)(uintptr_t)(b * 0x0101010101010101ULL) : h[b % 8];
      d.coll.func = hk_fuzz_strs[b % ns], d.coll.datatype = hk_fuzz_strs[cc % ns];
      d.coll.algo = hk_fuzz_strs[(b + cc) % ns], d.coll.proto = hk_fuzz_strs[(b * 7 + cc) % ns];
      if (d.type == NCCLHOOKS_PROFILE_KERNEL_CH) d.kernelCh.channelId = cc, d.kernelCh.pTimer = b;
      int slot = cc % 8;
      // A handle still open is stopped first, as NCCL would have.
      if (h[slot]) hooks_host_stop(h[slot]), h[slot] = NULL;
      hooks_host_start(&c, &h[slot], &d);
      break;
    }
    case 1:
    case 2: {
      ncclProfilerEventStateArgs_v5_t s;
      memset(&s, 0, sizeof s);
      s.kernelCh.pTimer = b;
      hooks_host_state(h[a % 8], k == 1 ? NCCLHOOKS_STATE_KERNEL_CH_STOP : b, (cc & 1) ? &s : NULL);
      break;
    }
    case 3:
      hooks_host_stop(h[a % 8]);
      h[a % 8] = NULL;
      break;
    case 4:
      hooks_host_stop((a & 1) ? (void*)(uintptr_t)((b << 1) | 1) : NULL);
      break;
    }
  }
  for (int i = 0; i < 8; i++) hooks_host_stop(h[i]);
  int bad = sink->bad;
  free(sink);
  return bad;
}
*/
import "C"

import "unsafe"

// hostDescriptorRun runs ops through the host-event source (see hk_fuzz_run).
func hostDescriptorRun(ops []byte) int {
	if len(ops) == 0 {
		return 0
	}
	return int(C.hk_fuzz_run((*C.uint8_t)(unsafe.Pointer(&ops[0])), C.size_t(len(ops))))
}
