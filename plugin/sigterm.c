// The final dump when the job is killed with SIGTERM (NCCL_HOOKS_SIGTERM_DUMP).
//
// The plugin lives in someone else's process: SIGTERM must still end it as
// before, with the same status, and a handler the job installed must still
// run. So the handler only wakes a thread of the plugin's (a write to a
// pipe, async-signal-safe) and returns at once: it never blocks the thread
// it interrupted, which may be one of Go's (a Go thread stuck in a handler
// stalls the Go runtime). That thread asks Go for the final dump, waits for
// it at most the knob's time, then puts back the disposition found at
// install (the default, or the job's handler) and sends SIGTERM again, which
// then does what it would have done without the plugin. If the job replaced
// the plugin's handler since, the thread changes nothing and sends nothing:
// whoever did that handles SIGTERM now (and may have chained to us).
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <string.h>
#include <unistd.h>
#include "exports.h"
#include "_cgo_export.h"

static struct sigaction prevTerm; // the disposition before the plugin's
static int reqPipe[2] = {-1, -1}, ackPipe[2] = {-1, -1};
static pid_t installedPid;
static int termTimeoutMs;
static int termRequested;

static void restoreAndResend(void) {
  sigaction(SIGTERM, &prevTerm, NULL);
  kill(getpid(), SIGTERM);
}

static void onTerm(int sig, siginfo_t* info, void* uc) {
  (void)sig; (void)info; (void)uc;
  int saved = errno;
  if (getpid() != installedPid) {
    // A child forked after init: the dump thread and the outputs are the
    // parent's. Behave as if the plugin had never been here.
    restoreAndResend();
  } else if (!__atomic_exchange_n(&termRequested, 1, __ATOMIC_ACQ_REL)) {
    char b = 1;
    (void)!write(reqPipe[1], &b, 1);
  }
  // A second SIGTERM while the dump runs is absorbed: the dump thread
  // sends one when it is done.
  errno = saved;
}

static void* termThread(void* arg) {
  (void)arg;
  char b;
  while (read(reqPipe[0], &b, 1) < 0 && errno == EINTR) {
  }
  hooksTerminate(); // starts the dump in Go and returns
  struct pollfd p = {.fd = ackPipe[0], .events = POLLIN};
  while (poll(&p, 1, termTimeoutMs) < 0 && errno == EINTR) {
  }
  struct sigaction cur;
  if (sigaction(SIGTERM, NULL, &cur) == 0 && (cur.sa_flags & SA_SIGINFO) && cur.sa_sigaction == onTerm) restoreAndResend();
  return NULL;
}

// hooks_term_done is called by Go when the final dump is written.
void hooks_term_done(void) {
  char b = 1;
  (void)!write(ackPipe[1], &b, 1);
}

// hooks_term_install installs the handler once per process; 0 on success,
// else an errno value (the plugin logs it, SIGTERM is left alone).
int hooks_term_install(int timeoutMs) {
  static int done;
  if (__atomic_exchange_n(&done, 1, __ATOMIC_ACQ_REL)) return 0;
  struct sigaction old;
  if (sigaction(SIGTERM, NULL, &old) != 0) return errno;
  if (!(old.sa_flags & SA_SIGINFO) && old.sa_handler == SIG_IGN) return 0; // the job ignores SIGTERM: nothing to do
  if (pipe2(reqPipe, O_CLOEXEC) != 0 || pipe2(ackPipe, O_CLOEXEC) != 0) return errno;
  termTimeoutMs = timeoutMs;
  installedPid = getpid();
  prevTerm = old;
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
  // The thread must never take SIGTERM itself: it waits for the dump.
  sigset_t all, saved;
  sigfillset(&all);
  pthread_sigmask(SIG_BLOCK, &all, &saved);
  pthread_t t;
  int err = pthread_create(&t, &attr, termThread, NULL);
  pthread_sigmask(SIG_SETMASK, &saved, NULL);
  pthread_attr_destroy(&attr);
  if (err != 0) return err;
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_sigaction = onTerm;
  sa.sa_flags = SA_SIGINFO | SA_ONSTACK | SA_RESTART; // SA_ONSTACK: Go's threads need it
  sigemptyset(&sa.sa_mask);
  if (sigaction(SIGTERM, &sa, NULL) != 0) return errno;
  return 0;
}
