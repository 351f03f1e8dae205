/*
 * ce_sync.c - tpla_ce_bench's bounded waits: the barrier where the two rank
 * threads meet, the polling wait on a CUDA event, the abort flag that ends every
 * wait early, the per-rank step names that timeout messages quote, the failure
 * report behind the CU/NC/LT macros, and the watchdog that ends a process whose
 * threads are stuck inside a CUDA or NCCL call.
 */
#include "ce_bench.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static struct {
  double timeout_s, limit_s;
  pthread_mutex_t mu;
  pthread_cond_t cv;
  int arrived;
  unsigned generation;
  atomic_int aborted, finished;
  _Atomic(const char *) step[NRANKS];
  pthread_t watchdog;
} st;

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void pause_ns(long ns) {
  struct timespec pause = {0, ns};
  nanosleep(&pause, NULL);
}

static const char *step_of(int rank) {
  const char *s = atomic_load(&st.step[rank]);
  return s ? s : "(starting)";
}

void set_step(const rank_t *rk, const char *what) { atomic_store(&st.step[rk->rank], what); }

/* Never called with st.mu held. */
void raise_abort(void) {
  atomic_store(&st.aborted, 1);
  pthread_mutex_lock(&st.mu);
  pthread_cond_broadcast(&st.cv);
  pthread_mutex_unlock(&st.mu);
}

int abort_raised(void) { return atomic_load(&st.aborted); }

int fail(int rank, const char *file, int line, const char *call, const char *why) {
  const char *slash = strrchr(file, '/');
  fprintf(stderr, "ce_bench: rank %d: %s:%d: %s failed: %s\n", rank, slash ? slash + 1 : file,
          line, call, why);
  raise_abort();
  return -1;
}

int cuda_failed(int rank, cudaError_t e, const char *call, const char *file, int line) {
  return e == cudaSuccess ? 0 : fail(rank, file, line, call, cudaGetErrorString(e));
}
int nccl_failed(int rank, ncclResult_t e, const char *call, const char *file, int line) {
  return e == ncclSuccess ? 0 : fail(rank, file, line, call, ncclGetErrorString(e));
}
int lt_failed(int rank, cublasStatus_t e, const char *call, const char *file, int line) {
  return e == CUBLAS_STATUS_SUCCESS ? 0 : fail(rank, file, line, call, cublasLtGetStatusString(e));
}

int barrier(const rank_t *rk, const char *what) {
  set_step(rk, what);
  pthread_mutex_lock(&st.mu);
  unsigned gen = st.generation;
  if (++st.arrived == NRANKS) {
    st.arrived = 0;
    st.generation++;
    pthread_cond_broadcast(&st.cv);
  } else {
    struct timespec dl;
    clock_gettime(CLOCK_MONOTONIC, &dl);
    dl.tv_sec += (time_t)st.timeout_s;
    while (gen == st.generation && !atomic_load(&st.aborted)) {
      if (pthread_cond_timedwait(&st.cv, &st.mu, &dl) == ETIMEDOUT && gen == st.generation) {
        pthread_mutex_unlock(&st.mu);
        fprintf(stderr, "ce_bench: rank %d: timeout after %.0f s at '%s'; rank %d is at '%s'\n",
                rk->rank, st.timeout_s, what, rk->peer, step_of(rk->peer));
        raise_abort();
        return -1;
      }
    }
  }
  pthread_mutex_unlock(&st.mu);
  return atomic_load(&st.aborted) ? -1 : 0;
}

int wait_event(const rank_t *rk, cudaEvent_t ev, const char *what) {
  double deadline = now_s() + st.timeout_s;
  set_step(rk, what);
  for (;;) {
    cudaError_t q = cudaEventQuery(ev);
    if (q == cudaSuccess)
      return 0;
    if (q != cudaErrorNotReady)
      return fail(rk->rank, __FILE__, __LINE__, what, cudaGetErrorString(q));
    if (atomic_load(&st.aborted))
      return -1;
    if (now_s() > deadline) {
      fprintf(stderr, "ce_bench: rank %d: timeout: '%s' not done after %.0f s; "
              "rank %d is at '%s'\n", rk->rank, what, st.timeout_s, rk->peer,
              step_of(rk->peer));
      raise_abort();
      return -1;
    }
    pause_ns(20000);
  }
}

int wait_stream(const rank_t *rk, cudaStream_t stream, cudaEvent_t ev, const char *what) {
  CU(cudaEventRecord(ev, stream));
  return wait_event(rk, ev, what);
}

/* The last resort: a thread blocked inside a CUDA or NCCL call cannot poll. */
static void *watchdog_main(void *arg) {
  (void)arg;
  double start = now_s(), aborted_at = 0.0;
  while (!atomic_load(&st.finished)) {
    pause_ns(200000000);
    double t = now_s();
    if (aborted_at == 0.0 && atomic_load(&st.aborted))
      aborted_at = t;
    if (t - start > st.limit_s || (aborted_at > 0.0 && t - aborted_at > st.timeout_s)) {
      fprintf(stderr, "ce_bench: watchdog: not finished after %.0f s (rank 0 at '%s', rank 1 "
              "at '%s'); exiting\nce_bench: failed\n", t - start, step_of(0), step_of(1));
      fflush(stdout);
      _exit(1);
    }
  }
  return NULL;
}

void sync_init(double timeout_s, double limit_s) {
  st.timeout_s = timeout_s;
  st.limit_s = limit_s;
  pthread_condattr_t ca; /* the barrier's deadline is on the monotonic clock */
  pthread_condattr_init(&ca);
  pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
  pthread_cond_init(&st.cv, &ca);
  pthread_condattr_destroy(&ca);
  pthread_mutex_init(&st.mu, NULL);
}

int watchdog_start(void) {
  return pthread_create(&st.watchdog, NULL, watchdog_main, NULL) != 0 ? -1 : 0;
}

void watchdog_stop(void) {
  atomic_store(&st.finished, 1);
  pthread_join(st.watchdog, NULL);
}
