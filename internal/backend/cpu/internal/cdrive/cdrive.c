#include "cdrive.h"

#include <pthread.h>
#include <stdlib.h>

typedef struct {
  ncclProfilerDevHook_t fn;
  void* ctx;
  const hk_stream* stream;
  volatile int* go;
} hk_job;

void hk_drive_one(uintptr_t entry, uintptr_t ctx, const ncclProfilerDevEvent_t* ev) {
  ((ncclProfilerDevHook_t)entry)(ev, (void*)ctx);
}

static void* hk_run(void* arg) {
  hk_job* j = (hk_job*)arg;
  /* Start together, so the streams really overlap. */
  while (!__atomic_load_n(j->go, __ATOMIC_ACQUIRE)) {
  }
  for (size_t i = 0; i < j->stream->n; i++) j->fn(&j->stream->events[i], j->ctx);
  return NULL;
}

void hk_drive_threads(uintptr_t entry, uintptr_t ctx, hk_stream* streams, int n) {
  volatile int go = 0;
  pthread_t* threads = (pthread_t*)calloc((size_t)n, sizeof(pthread_t));
  hk_job* jobs = (hk_job*)calloc((size_t)n, sizeof(hk_job));
  int started = 0;
  for (int i = 0; i < n; i++) {
    jobs[i].fn = (ncclProfilerDevHook_t)entry;
    jobs[i].ctx = (void*)ctx;
    jobs[i].stream = &streams[i];
    jobs[i].go = &go;
    if (pthread_create(&threads[i], NULL, hk_run, &jobs[i]) != 0) break;
    started++;
  }
  __atomic_store_n(&go, 1, __ATOMIC_RELEASE);
  for (int i = 0; i < started; i++) pthread_join(threads[i], NULL);
  /* A thread that could not start: run its stream here, so no event is lost. */
  for (int i = started; i < n; i++) hk_run(&jobs[i]);
  free(jobs);
  free(threads);
}
