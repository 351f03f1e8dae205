/*
 * deadline.c - absolute CLOCK_MONOTONIC deadlines for the timed condition
 * waits of the host group and the process-local plan exchange (their
 * condition variables are created on CLOCK_MONOTONIC, so a wall-clock jump
 * cannot stretch or cut a timeout).
 */
#include "internal.h"

struct timespec tpla_deadline_after(int64_t ms) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  t.tv_sec += (time_t)(ms / 1000);
  t.tv_nsec += (long)(ms % 1000) * 1000000L;
  if (t.tv_nsec >= 1000000000L) {
    t.tv_sec += 1;
    t.tv_nsec -= 1000000000L;
  }
  return t;
}
