/*
 * host_shared_util.h - shared helpers for the cross-process host group tests
 * (test_host_shared_group.c, test_host_shared_failures.c): RCHECK (rank_check.h), which a
 * forked rank reports failures with, timing helpers, unique segment names,
 * /dev/shm leftover checks, parent/child shared memory, and run_procs, which
 * forks one process per rank of a fresh tpla_host_group_create_shared group.
 */
#ifndef TPLA_TESTS_HOST_SHARED_UTIL_H
#define TPLA_TESTS_HOST_SHARED_UTIL_H

#include "internal.h"
#include "rank_check.h"

#include <fcntl.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define MAX_PROCS 8

static inline double now_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static inline void sleep_ms(int ms) {
  struct timespec t = {ms / 1000, (long)(ms % 1000) * 1000000L};
  nanosleep(&t, NULL);
}

static inline void unique_name(char *out, size_t size) {
  static int counter;
  snprintf(out, size, "tpla-test-%d-%d", (int)getpid(), counter++);
}

/* True if a segment called `name` exists (and removes it). */
static inline bool segment_exists(const char *name) {
  char path[512]; /* whole: test_name_length_limit's names pass 200 characters */
  snprintf(path, sizeof path, "/%s", name);
  int fd = shm_open(path, O_RDONLY, 0);
  if (fd < 0)
    return false;
  close(fd);
  shm_unlink(path);
  return true;
}

/* Memory the children write and the parent reads. */
static inline void *shared_alloc(size_t bytes) {
  void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  return p == MAP_FAILED ? NULL : p;
}

/* ---- the process runner ------------------------------------------------------- */

typedef int (*proc_fn_t)(tpla_ctx_t ctx, int rank, int nranks, void *arg);

typedef struct {
  int64_t timeout_ms; /* 0: 20 s */
  size_t staging;     /* 0: the library's default */
} proc_opts_t;

static inline int child_main(const char *name, int nranks, int rank, proc_fn_t fn, void *arg,
                             const proc_opts_t *o) {
  if (o != NULL && o->staging > 0) {
    char v[32];
    snprintf(v, sizeof v, "%zu", o->staging);
    setenv("TPLA_SHM_STAGING_BYTES", v, 1);
  }
  tpla_config_t cfg = TPLA_CONFIG_INIT;
  cfg.timeout_ms = o != NULL && o->timeout_ms > 0 ? o->timeout_ms : 20000;
  tpla_host_group_t group = NULL;
  tpla_ctx_t ctx = NULL;
  RCHECK_OK(tpla_host_group_create_shared(&group, name, nranks, rank, &cfg));
  RCHECK_OK(tpla_ctx_create_host(&ctx, group, rank, NULL));
  int rc = fn(ctx, rank, nranks, arg);
  RCHECK_OK(tpla_ctx_destroy(ctx));
  RCHECK_OK(tpla_host_group_destroy(group));
  return rc;
}

/* Fork nranks processes, each one rank of a fresh group running fn; returns
 * how many failed (or -1), and fails if the segment outlives them. */
static inline int run_procs(int nranks, proc_fn_t fn, void *arg, const proc_opts_t *o) {
  char name[96];
  unique_name(name, sizeof name);
  pid_t pids[MAX_PROCS];
  fflush(stdout);
  fflush(stderr);
  int started = 0, failed = 0;
  for (; started < nranks; started++) {
    pids[started] = fork();
    if (pids[started] < 0)
      break;
    if (pids[started] == 0)
      exit(child_main(name, nranks, started, fn, arg, o)); /* exit: LSan checks the child */
  }
  for (int r = 0; r < started; r++) {
    int status = 0;
    if (waitpid(pids[r], &status, 0) != pids[r] || !WIFEXITED(status) || WEXITSTATUS(status))
      failed++;
  }
  if (segment_exists(name)) {
    fprintf(stderr, "  run_procs: /dev/shm/%s was left behind\n", name);
    failed++;
  }
  return started == nranks ? failed : -1;
}

#endif /* TPLA_TESTS_HOST_SHARED_UTIL_H */
