/*
 * deadline.c - condition variables on CLOCK_MONOTONIC and absolute
 * deadlines on that clock, for the timed waits of the host group and the
 * process-local plan exchange (a wall-clock jump cannot stretch or cut a
 * timeout).
 */
#include "internal.h"

bool tpla_cond_init_monotonic(pthread_cond_t *cv) {
  pthread_condattr_t attr;
  if (pthread_condattr_init(&attr) != 0)
    return false;
  bool ok = pthread_condattr_setclock(&attr, CLOCK_MONOTONIC) == 0 &&
            pthread_cond_init(cv, &attr) == 0;
  pthread_condattr_destroy(&attr);
  return ok;
}

struct timespec tpla_deadline_after(int64_t ms) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return tpla_deadline_add(t, ms);
}

struct timespec tpla_deadline_add(struct timespec t, int64_t ms) {
  t.tv_sec += (time_t)(ms / 1000);
  t.tv_nsec += (long)(ms % 1000) * 1000000L;
  if (t.tv_nsec >= 1000000000L) {
    t.tv_sec += 1;
    t.tv_nsec -= 1000000000L;
  }
  return t;
}
