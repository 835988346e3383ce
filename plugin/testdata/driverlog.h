// driverlog.h: the NCCL logger of the test drivers (cdriver.c, hostdriver.c).
// Each message is one "LOG <level> <text>" line on stdout, newlines folded,
// under mu (which the drivers also hold for their own lines), so that lines
// from several threads never interleave.
#ifndef NCCLHOOKS_DRIVERLOG_H
#define NCCLHOOKS_DRIVERLOG_H
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static void logger(int level, unsigned long flags, const char* file, int line, const char* fmt, ...) {
  (void)flags; (void)file; (void)line;
  char buf[8192];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  for (char* p = buf; *p; p++) if (*p == '\n') *p = ' ';
  pthread_mutex_lock(&mu);
  printf("LOG %d %s\n", level, buf);
  fflush(stdout);
  pthread_mutex_unlock(&mu);
}
#endif
