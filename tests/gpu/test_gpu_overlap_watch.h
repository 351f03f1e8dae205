/*
 * test_gpu_overlap_watch.h - progress lines and hang reports of the GPU
 * overlap tests (included by test_gpu_overlap_util.h).
 *
 * Every rank records the step it is in ("create AG+GEMM ...", "call 2",
 * "sync ...", "host barrier ..."); in runs of 2+ ranks each step is also
 * printed and flushed at once, so a log cut off by a timeout still shows
 * where every rank was. A rank that stays in one step longer than
 * TPLA_TEST_HANG_S seconds (20 by default; 900 with TPLA_TEST_NO_WATCHDOG,
 * for compute-sanitizer) is reported -- by a monitor thread (which also
 * catches a thread blocked inside a CUDA call, e.g. cudaFree) or by the
 * polled stream waits of the tests -- with every rank's step and its age
 * and the flag words of the plans in use, read on a fresh non-blocking
 * stream; then the process exits with status 1: a stuck device cannot be
 * cleaned up in-process, so the test fails instead of hanging.
 *
 * TPLA_TEST_PROGRESS=0/1 turns the progress lines off/on (default: on
 * with 2+ ranks). Header-only; include after gpu_util.h.
 */
#ifndef TPLA_TEST_GPU_OVERLAP_WATCH_H
#define TPLA_TEST_GPU_OVERLAP_WATCH_H

#include <execinfo.h>
#include <signal.h>
#include <sys/prctl.h>
#include "gpu_util.h"
#include "overlap.h"

#include "../../src/cuda/transport.h" /* the plan's flag words, for the report */

#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>

#define GW_MAX_RANKS 8

typedef struct {
  char step[200];
  double since;           /* gw_now() when the step began */
  int active;             /* the rank is running (not yet finished) */
  const ovl_plan_t *plan; /* the plan the rank calls, or NULL */
  pthread_t thread;       /* the rank's thread (its last step's caller) */
  int has_thread;
} gw_state_t;

typedef struct {
  pthread_mutex_t lock;
  int nranks, print;
  double hang_s;
  gw_state_t rank[GW_MAX_RANKS];
  pthread_t monitor;
  int monitor_running, stop;
} gw_watch_t;

static const char *gw_test_name = "test_gpu_overlap"; /* set by the test's main */

/* Seconds since the first call (the process's first watched step). */
static inline double gw_now(void) {
  static double t0 = -1.0;
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  double t = (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
  if (t0 < 0)
    t0 = t;
  return t - t0;
}

static inline double gw_hang_seconds(void) {
  const char *e = getenv("TPLA_TEST_HANG_S");
  double s = e ? atof(e) : 0.0;
  if (s > 0)
    return s;
  return getenv("TPLA_TEST_NO_WATCHDOG") ? 900.0 : 20.0;
}

static inline void gw_init(gw_watch_t *w, int nranks) {
  memset(w, 0, sizeof *w);
  pthread_mutex_init(&w->lock, NULL);
  w->nranks = nranks;
  const char *e = getenv("TPLA_TEST_PROGRESS");
  w->print = e ? atoi(e) != 0 : nranks > 1;
  w->hang_s = gw_hang_seconds();
  void *warm[1]; /* backtrace() loads libgcc on first use: not in a signal handler */
  (void)backtrace(warm, 1);
  double now = gw_now();
  for (int q = 0; q < nranks && q < GW_MAX_RANKS; q++) {
    w->rank[q].active = 1;
    w->rank[q].since = now;
    snprintf(w->rank[q].step, sizeof w->rank[q].step, "starting");
  }
}

/* Rank `rank` enters a step (printed with its time when w->print). */
static inline void gw_step(gw_watch_t *w, int rank, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static inline void gw_step(gw_watch_t *w, int rank, const char *fmt, ...) {
  if (w == NULL || rank < 0 || rank >= GW_MAX_RANKS)
    return;
  pthread_mutex_lock(&w->lock);
  gw_state_t *s = &w->rank[rank];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(s->step, sizeof s->step, fmt, ap);
  va_end(ap);
  s->since = gw_now();
  s->thread = pthread_self();
  s->has_thread = 1;
  if (w->print) {
    printf("# [rank %d %9.3f s] %s\n", rank, s->since, s->step);
    fflush(stdout);
  }
  pthread_mutex_unlock(&w->lock);
}

static inline void gw_plan(gw_watch_t *w, int rank, const ovl_plan_t *plan) {
  pthread_mutex_lock(&w->lock);
  w->rank[rank].plan = plan;
  pthread_mutex_unlock(&w->lock);
}

static inline void gw_done(gw_watch_t *w, int rank) {
  gw_step(w, rank, "finished");
  pthread_mutex_lock(&w->lock);
  w->rank[rank].active = 0;
  w->rank[rank].plan = NULL;
  pthread_mutex_unlock(&w->lock);
}

/* ---- the report ------------------------------------------------------------------ */

static void gw_alarm_(int sig) {
  (void)sig;
  static const char msg[] = "  (reading the flag words blocked for 20 s: the driver is stuck "
                            "too; see the steps above)\nFAIL: hang detected, exiting\n";
  ssize_t n = write(2, msg, sizeof msg - 1);
  (void)n;
  _exit(1);
}

/* n words at device address src of `device`, through pinned memory on a
 * fresh non-blocking stream, waited for at most 3 s; 0 when read. */
static inline int gw_read_words(int device, const void *src, uint32_t *out, size_t n) {
  cudaStream_t s = NULL;
  uint32_t *h = NULL;
  if (cudaSetDevice(device) != cudaSuccess ||
      cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking) != cudaSuccess ||
      cudaMallocHost((void **)&h, n * sizeof *h) != cudaSuccess ||
      cudaMemcpyAsync(h, src, n * sizeof *h, cudaMemcpyDeviceToHost, s) != cudaSuccess)
    return 1;
  double end = gw_now() + 3.0;
  cudaError_t q;
  while ((q = cudaStreamQuery(s)) == cudaErrorNotReady && gw_now() < end)
    usleep(1000);
  if (q != cudaSuccess)
    return 2;
  memcpy(out, h, n * sizeof *h); /* the process exits next: nothing is freed */
  return 0;
}

static const char *gw_kind_name(ovl_kind_t k) {
  return k == OVL_AG ? "AG+GEMM" : k == OVL_RS ? "GEMM+RS" : "GEMM+AR";
}

/* The flag words of rank `rank`'s plan: ready[q] (written by rank q at the
 * start of each call) and the step flags (phase.distance.chunk), each
 * holding the number of the last call whose piece arrived; the plan has
 * issued call p->seq, so a word below it is what the rank waits for. */
static inline void gw_dump_plan(int rank, const ovl_plan_t *p) {
  static const char *xk[] = {"AUTO", "PEER", "SENDRECV", "LOCAL"};
  fprintf(stderr, "  rank %d plan: %s, %s, transport %s, %d chunk%s, %d ranks, last call issued "
          "seq %u%s\n", rank, gw_kind_name(p->kind),
          p->mode == TPLA_OVERLAP_SERIAL ? "SERIAL" : "OVERLAP", xk[p->xkind & 3], p->chunks,
          p->chunks == 1 ? "" : "s", p->nranks, (unsigned)p->seq, p->broken ? " (broken)" : "");
  const tpla_xport_t *xp = p->xp;
  if (xp == NULL || p->xkind != OVL_XPORT_PEER || xp->peer_base == NULL) {
    fprintf(stderr, "    (no flag words: ordered by NCCL and CUDA events)\n");
    return;
  }
  size_t words = (size_t)(xp->nranks + xp->nflags);
  uint32_t *v = calloc(words + 1, sizeof *v);
  int st = v ? gw_read_words(xp->device, xp->peer_base[xp->rank], v, words) : 1;
  if (st != 0) {
    fprintf(stderr, "    flag words at %p on device %d: %s\n", (void *)xp->peer_base[xp->rank],
            xp->device, st == 2 ? "the copy did not finish in 3 s (the device is stuck)"
                                : "could not start a copy");
    return;
  }
  fprintf(stderr, "    ready (written by rank q):");
  for (int q = 0; q < xp->nranks; q++)
    if (q == xp->rank)
      fprintf(stderr, " q%d:-", q);
    else
      fprintf(stderr, " q%d:%u%s", q, v[q], ovl_seq_reached(v[q], p->seq) ? "" : "<");
  fprintf(stderr, "\n    step flags (phase.distance.chunk):");
  int per_phase = (xp->nranks - 1) * p->chunks;
  for (int f = 0; f < xp->nflags; f++) {
    int phase = per_phase > 0 ? f / per_phase : 0, rest = per_phase > 0 ? f % per_phase : f;
    fprintf(stderr, "%s %d.%d.%d:%u%s", f % 8 == 0 ? "\n     " : "", phase,
            rest / p->chunks + 1, rest % p->chunks, v[xp->nranks + f],
            ovl_seq_reached(v[xp->nranks + f], p->seq) ? "" : "<");
  }
  fprintf(stderr, "\n    ('<': behind the last call issued)\n");
}

/* SIGUSR2 in a blocked rank thread: its call stack, async-signal-safely. */
static void gw_backtrace_(int sig) {
  (void)sig;
  void *frames[32];
  int n = backtrace(frames, 32);
  backtrace_symbols_fd(frames, n, 2);
}

/* Print every rank's step and age and the flag words of the plans in use,
 * then exit(1). Only the first caller reports; later ones wait for the exit. */
static void gw_report(gw_watch_t *w, const char *why) __attribute__((noreturn));
static void gw_report(gw_watch_t *w, const char *why) {
  static atomic_int reporting;
  if (atomic_exchange(&reporting, 1))
    for (;;)
      pause();
  double now = gw_now();
  fflush(stdout);
  fprintf(stderr, "\nHANG in %s: %s\n", gw_test_name, why);
  const ovl_plan_t *plans[GW_MAX_RANKS] = {NULL};
  /* a stuck rank never holds the lock for long: do not wait for it anyway */
  int locked = pthread_mutex_trylock(&w->lock) == 0;
  for (int q = 0; q < w->nranks && q < GW_MAX_RANKS; q++) {
    gw_state_t *s = &w->rank[q];
    fprintf(stderr, "  rank %d: %s for %.1f s: %s\n", q, s->active ? "in this step" : "finished",
            now - s->since, s->step);
    plans[q] = s->active ? s->plan : NULL;
  }
  if (locked)
    pthread_mutex_unlock(&w->lock);
  fflush(stderr);
  /* where each thread is blocked: a debugger's backtrace when one is here */
  char cmd[256];
  snprintf(cmd, sizeof cmd, "command -v gdb >/dev/null && timeout 60 gdb -p %d -batch -nx -ex "
           "'thread apply all bt 25' 2>/dev/null | grep -E '^Thread|^#' | head -n 300 >&2",
           (int)getpid());
  (void)prctl(PR_SET_PTRACER, PR_SET_PTRACER_ANY, 0, 0, 0); /* Yama: let gdb attach */
  if (system(cmd) != 0) { /* no gdb: each rank thread prints its own frames */
    fprintf(stderr, "  (no gdb; glibc backtraces of the rank threads follow)\n");
    signal(SIGUSR2, gw_backtrace_);
    for (int q = 0; q < w->nranks && q < GW_MAX_RANKS; q++)
      if (w->rank[q].active && w->rank[q].has_thread) {
        fprintf(stderr, "  rank %d:\n", q);
        pthread_kill(w->rank[q].thread, SIGUSR2);
        sleep(1);
      }
  }
  fflush(stderr);
  signal(SIGALRM, gw_alarm_); /* CUDA calls below may block behind a stuck driver */
  alarm(20);
  for (int q = 0; q < w->nranks && q < GW_MAX_RANKS; q++)
    if (plans[q] != NULL)
      gw_dump_plan(q, plans[q]);
  fprintf(stderr, "FAIL: %s: hang detected (no progress for %.0f s); exiting, since a stuck "
          "device cannot be cleaned up in this process\n", gw_test_name, w->hang_s);
  fflush(stderr);
  _exit(1);
}

/* ---- the monitor and the polled stream wait -------------------------------------- */

static void *gw_monitor_main(void *arg) {
  gw_watch_t *w = arg;
  for (;;) {
    usleep(200000);
    pthread_mutex_lock(&w->lock);
    double now = gw_now();
    int stuck = -1, stop = w->stop;
    for (int q = 0; q < w->nranks && q < GW_MAX_RANKS && stuck < 0; q++)
      if (w->rank[q].active && now - w->rank[q].since > w->hang_s)
        stuck = q;
    pthread_mutex_unlock(&w->lock);
    if (stop)
      return NULL;
    if (stuck >= 0) {
      char why[96];
      snprintf(why, sizeof why, "rank %d made no progress for %.0f s (monitor)", stuck,
               w->hang_s);
      gw_report(w, why);
    }
  }
}

static inline void gw_monitor_start(gw_watch_t *w) {
  w->monitor_running = pthread_create(&w->monitor, NULL, gw_monitor_main, w) == 0;
}

static inline void gw_monitor_stop(gw_watch_t *w) {
  if (!w->monitor_running)
    return;
  pthread_mutex_lock(&w->lock);
  w->stop = 1;
  pthread_mutex_unlock(&w->lock);
  pthread_join(w->monitor, NULL);
  w->monitor_running = 0;
}

/* Wait for `stream` with a polled deadline (w->hang_s); on expiry report
 * the hang (does not return). Returns 0 when drained, 1 on a CUDA error. */
static inline int gw_sync(gw_watch_t *w, int rank, cudaStream_t stream, const char *what) {
  gw_step(w, rank, "sync: %s", what);
  double deadline = gw_now() + w->hang_s;
  for (;;) {
    cudaError_t q = cudaStreamQuery(stream);
    if (q == cudaSuccess) {
      gw_step(w, rank, "synced: %s", what);
      return 0;
    }
    if (q != cudaErrorNotReady) {
      fprintf(stderr, "  rank %d: %s: cudaStreamQuery: %s\n", rank, what, cudaGetErrorString(q));
      return 1;
    }
    if (gw_now() > deadline) {
      char why[256];
      snprintf(why, sizeof why, "rank %d: the stream did not drain within %.0f s (%s)", rank,
               w->hang_s, what);
      gw_report(w, why);
    }
    usleep(200);
  }
}

#endif /* TPLA_TEST_GPU_OVERLAP_WATCH_H */
