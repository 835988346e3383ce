// The plugin's exit handler. exit() runs atexit handlers in the reverse
// order of their registration, and the CUDA runtime registers its own at
// the job's first CUDA call, before NCCL initializes a communicator and so
// before the plugin's first init registers this one: it runs first, while
// the buffers' host memory is still mapped, and has Go write the final dump
// of communicators never finalized and stop the drain reading device
// memory (Session.Exit). A child forked after init exits as if the plugin
// had never been here: the drain and the outputs are the parent's.
#include <stdlib.h>
#include <unistd.h>
#include "exports.h"
#include "_cgo_export.h"

static pid_t installedPid;

static void onExit(void) {
  if (getpid() == installedPid) hooksExit();
}

// hooks_exit_install registers onExit once per process; 0 on success.
int hooks_exit_install(void) {
  static int done;
  if (__atomic_exchange_n(&done, 1, __ATOMIC_ACQ_REL)) return 0;
  installedPid = getpid();
  return atexit(onExit);
}
