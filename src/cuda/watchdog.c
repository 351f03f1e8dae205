/*
 * watchdog.c - the call lock, the watchdog thread and the abort of a
 * CUDA-executor context (see watchdog.h).
 */
#include "watchdog.h"
#include "transport.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define WD_SLOTS 256            /* calls in flight that the watchdog follows; more wait */
#define WD_RELEASE 0x40000000u  /* added to a transport's last call number: past every wait */
/* A peer's abort matters only to a call that waits for it, so the marks are
 * read only once the oldest call has run this long (one small copy per
 * transport per poll: not for every healthy call of a training step). */
#define WD_MARKS_AFTER_MS 100

typedef struct {
  cudaEvent_t start, end;
  const char *fn;
  int64_t started_ms; /* when the watchdog first saw `start` complete; 0 = not yet */
} wd_call_t;

struct tpla_watchdog {
  tpla_ctx_t ctx;
  tpla_cuda_ctx_t *impl;
  pthread_t thread;
  bool thread_started, stop;
  pthread_mutex_t mu; /* guards everything below and the transports' list */
  pthread_cond_t cv;
  wd_call_t calls[WD_SLOTS];
  uint64_t head, tail; /* [head, tail): calls in flight, oldest first */
  int current;         /* the slot of the call between begin and end, or -1 */
  cudaStream_t stream; /* non-blocking: marks, releases, reading marks */
  uint32_t *marks;     /* host copy of this rank's marks (nranks words) */
  struct tpla_xport **xports;
  int nxports, cap;
};

/* ---- the call lock ---------------------------------------------------------------------- */

/* With wd->mu held: retire the calls that have ended and wait while more
 * than `most` remain in flight.
 * Bounded: the oldest call ends, or the watchdog times it out and fails the
 * context (whose abort waits for the call lock: so the wait gives up then,
 * and the caller must let the lock go). False if the context failed. */
static bool wait_in_flight_at_most(struct tpla_watchdog *wd, uint64_t most) {
  if (wd->tail - wd->head <= most)
    return true;
  /* event queries must not invalidate another thread's capture in global mode */
  enum cudaStreamCaptureMode mode = cudaStreamCaptureModeRelaxed;
  (void)cudaThreadExchangeStreamCaptureMode(&mode);
  bool ok = true;
  for (int round = 0; ok && wd->tail - wd->head > most; round++) {
    cudaError_t e = cudaEventQuery(wd->calls[wd->head % WD_SLOTS].end);
    if (e == cudaSuccess) {
      wd->head++;
      continue;
    }
    ok = !tpla_ctx_failed(wd->ctx);
    if (e != cudaErrorNotReady) { /* the watchdog reports it */
      (void)cudaGetLastError();
      break;
    }
    if (ok) {
      pthread_mutex_unlock(&wd->mu);
      tpla_poll_sleep(round);
      pthread_mutex_lock(&wd->mu);
    }
  }
  (void)cudaThreadExchangeStreamCaptureMode(&mode);
  return ok;
}

tpla_status_t tpla_wd_wait_calls(tpla_ctx_t ctx, const char *fn) {
  struct tpla_watchdog *wd = tpla_cuda_impl(ctx)->wd;
  if (wd == NULL)
    return tpla_ctx_check(ctx, fn);
  pthread_mutex_lock(&wd->mu);
  bool ok = wait_in_flight_at_most(wd, 0);
  pthread_mutex_unlock(&wd->mu);
  return ok ? TPLA_SUCCESS : tpla_ctx_check(ctx, fn);
}

tpla_status_t tpla_wd_call_begin(tpla_ctx_t ctx, const char *fn, bool on_device, void *stream) {
  tpla_cuda_ctx_t *impl = tpla_cuda_impl(ctx);
  pthread_mutex_lock(&impl->call_mu);
  if (tpla_ctx_failed(ctx)) { /* aborted while this thread waited for the lock */
    pthread_mutex_unlock(&impl->call_mu);
    return tpla_ctx_check(ctx, fn);
  }
  struct tpla_watchdog *wd = impl->wd;
  if (impl->call_depth++ > 0 || !on_device || wd == NULL)
    return TPLA_SUCCESS;
  wd->current = -1; /* the calling thread holds call_mu: nobody else sets it */
  enum cudaStreamCaptureStatus capturing = cudaStreamCaptureStatusNone;
  if (cudaStreamIsCapturing((cudaStream_t)stream, &capturing) != cudaSuccess ||
      capturing != cudaStreamCaptureStatusNone) {
    (void)cudaGetLastError(); /* a graph runs later: its calls go unwatched */
    return TPLA_SUCCESS;
  }
  pthread_mutex_lock(&wd->mu);
  /* A full ring waits for its oldest call rather than leave this one
   * unwatched: a stuck unwatched call would hide every later call from the
   * watchdog (their start events never complete). */
  if (!wait_in_flight_at_most(wd, WD_SLOTS - 1)) {
    pthread_mutex_unlock(&wd->mu);
    impl->call_depth--;
    pthread_mutex_unlock(&impl->call_mu);
    return tpla_ctx_check(ctx, fn);
  }
  if (wd->tail - wd->head < WD_SLOTS) {
    int slot = (int)(wd->tail % WD_SLOTS);
    if (cudaEventRecord(wd->calls[slot].start, (cudaStream_t)stream) == cudaSuccess) {
      wd->calls[slot].fn = fn;
      wd->calls[slot].started_ms = 0;
      wd->current = slot;
    } else {
      (void)cudaGetLastError(); /* the call itself will report a bad stream */
    }
  }
  pthread_mutex_unlock(&wd->mu);
  return TPLA_SUCCESS;
}

void tpla_wd_call_end(tpla_ctx_t ctx, bool on_device, void *stream) {
  tpla_cuda_ctx_t *impl = tpla_cuda_impl(ctx);
  struct tpla_watchdog *wd = impl->wd;
  if (--impl->call_depth == 0 && on_device && wd != NULL) {
    pthread_mutex_lock(&wd->mu);
    if (wd->current >= 0) {
      if (cudaEventRecord(wd->calls[wd->current].end, (cudaStream_t)stream) == cudaSuccess) {
        wd->tail++; /* now the watchdog's */
        pthread_cond_signal(&wd->cv);
      } else {
        (void)cudaGetLastError(); /* unwatched; the call has reported its own failure */
      }
    }
    wd->current = -1;
    pthread_mutex_unlock(&wd->mu);
  }
  pthread_mutex_unlock(&impl->call_mu);
}

/* ---- transports ---------------------------------------------------------------------------- */

tpla_status_t tpla_wd_reserve_xport(tpla_cuda_ctx_t *impl, const char *fn) {
  struct tpla_watchdog *wd = impl->wd;
  if (wd == NULL)
    return TPLA_SUCCESS;
  tpla_status_t st = TPLA_SUCCESS;
  pthread_mutex_lock(&wd->mu);
  if (wd->nxports == wd->cap) {
    int cap = wd->cap ? 2 * wd->cap : 8;
    struct tpla_xport **grown = realloc(wd->xports, sizeof *grown * (size_t)cap);
    if (grown != NULL) {
      wd->xports = grown;
      wd->cap = cap;
    } else {
      st = tpla_fail(TPLA_ERROR_OUT_OF_MEMORY, fn, "out of host memory (the watchdog's list "
                     "of transports)");
    }
  }
  pthread_mutex_unlock(&wd->mu);
  return st;
}

void tpla_wd_add_xport(tpla_cuda_ctx_t *impl, struct tpla_xport *xp) {
  struct tpla_watchdog *wd = impl->wd;
  if (wd == NULL || xp->kind != OVL_XPORT_PEER)
    return;
  pthread_mutex_lock(&wd->mu);
  /* room reserved by this creation (tpla_wd_reserve_xport; creations hold the call lock) */
  if (wd->nxports < wd->cap)
    wd->xports[wd->nxports++] = xp;
  pthread_mutex_unlock(&wd->mu);
}

void tpla_wd_remove_xport(tpla_cuda_ctx_t *impl, struct tpla_xport *xp) {
  struct tpla_watchdog *wd = impl->wd;
  if (wd == NULL)
    return;
  pthread_mutex_lock(&wd->mu);
  for (int i = 0; i < wd->nxports; i++)
    if (wd->xports[i] == xp)
      wd->xports[i--] = wd->xports[--wd->nxports];
  pthread_mutex_unlock(&wd->mu);
  /* a release enqueued before the removal must not write into freed flags */
  (void)cudaStreamSynchronize(wd->stream);
  (void)cudaGetLastError();
}

/* ---- abort ------------------------------------------------------------------------------------ */

/* Step 2 of watchdog.h for one transport, on the watchdog's stream (no call
 * begins on a failed context, so last_seq and the value stay the same). */
static void release_flags(struct tpla_watchdog *wd, tpla_xport_t *xp) {
  uint32_t past = atomic_load(&xp->last_seq) + WD_RELEASE;
  uint32_t *words = xp_flags_of(xp, xp->rank);
  for (int w = 0; w < xp->nranks + xp->nflags; w++)
    (void)xp_write(xp, wd->stream, words + w, past, "release a wait");
}

/* Steps 1 and 2 of watchdog.h for one transport, on the watchdog's stream. */
static void release_xport(struct tpla_watchdog *wd, tpla_xport_t *xp) {
  for (int q = 0; q < xp->nranks; q++)
    if (q != xp->rank)
      (void)xp_write(xp, wd->stream, xp_mark_word(xp, q, xp->rank), 1u, "mark an abort");
  release_flags(wd, xp);
}

void tpla_wd_abort(tpla_ctx_t ctx) {
  tpla_cuda_ctx_t *impl = tpla_cuda_impl(ctx);
  struct tpla_watchdog *wd = impl->wd;
  tpla_device_guard_t guard;
  bool entered = tpla_device_guard_enter(&guard, ctx->device, "tpla_ctx_abort") == TPLA_SUCCESS;
  if (wd != NULL && entered) {
    pthread_mutex_lock(&wd->mu);
    for (int i = 0; i < wd->nxports; i++)
      release_xport(wd, wd->xports[i]);
    pthread_mutex_unlock(&wd->mu);
    (void)cudaStreamSynchronize(wd->stream); /* nothing else waits on it */
  }
  /* No thread is inside an NCCL call of this context while we hold the lock;
   * a thread waiting on the host for a stream gives up once the context has
   * failed (transport.c wait_stream), so this wait ends. */
  pthread_mutex_lock(&impl->call_mu);
  if (!impl->comm_aborted) {
    tpla_nccl_abort(impl->comm);
    impl->comm_aborted = 1;
  }
  pthread_mutex_unlock(&impl->call_mu);
  (void)cudaGetLastError();
  if (entered)
    tpla_device_guard_exit(&guard);
}

/* ---- the thread ---------------------------------------------------------------------------- */

/* With wd->mu held: retire completed calls; 1 if the oldest call has run
 * for longer than the timeout or an event query failed (status in *st,
 * message in why). *age_ms: how long the oldest call has run (0: none). */
static int examine_calls(struct tpla_watchdog *wd, char *why, size_t size, tpla_status_t *st,
                         int64_t *age_ms) {
  int64_t now = tpla_now_ms(), limit = wd->ctx->cfg.timeout_ms;
  *age_ms = 0;
  while (wd->head != wd->tail) {
    wd_call_t *c = &wd->calls[wd->head % WD_SLOTS];
    cudaError_t e = cudaEventQuery(c->end);
    if (e == cudaSuccess) {
      wd->head++;
      continue;
    }
    if (e == cudaErrorNotReady) {
      e = cudaEventQuery(c->start);
      if (e == cudaErrorNotReady)
        return 0;
    }
    if (e != cudaSuccess) {
      (void)cudaGetLastError();
      snprintf(why, size, "the watchdog's event query after %s failed: %s", c->fn,
               cudaGetErrorString(e));
      *st = TPLA_ERROR_CUDA;
      return 1;
    }
    if (c->started_ms == 0)
      c->started_ms = now;
    *age_ms = now - c->started_ms;
    if (*age_ms <= limit)
      return 0;
    snprintf(why, size,
             "the watchdog found %s of rank %d still running on the device %" PRId64
             " ms after it started (cfg timeout_ms %" PRId64 "): a peer did not make its "
             "matching call or is stuck",
             c->fn, wd->ctx->rank, now - c->started_ms, limit);
    *st = TPLA_ERROR_TIMEOUT;
    return 1;
  }
  return 0;
}

/* With wd->mu held: 1 if a peer marked this rank's flags with its abort. */
static int examine_marks(struct tpla_watchdog *wd, char *why, size_t size) {
  for (int i = 0; i < wd->nxports; i++) {
    tpla_xport_t *xp = wd->xports[i];
    if (cudaMemcpyAsync(wd->marks, xp_mark_word(xp, xp->rank, 0),
                        sizeof *wd->marks * (size_t)xp->nranks, cudaMemcpyDeviceToHost,
                        wd->stream) != cudaSuccess ||
        cudaStreamSynchronize(wd->stream) != cudaSuccess) {
      (void)cudaGetLastError();
      continue;
    }
    for (int q = 0; q < xp->nranks; q++)
      if (q != xp->rank && wd->marks[q] != 0) {
        snprintf(why, size, "rank %d aborted its context (its mark in this rank's flags)", q);
        return 1;
      }
  }
  return 0;
}

/* With wd->mu held, before the abort releases them: every transport's flag
 * words as this rank sees them, appended to `why`. A stop then says what
 * each rank still waited for: the ready word of a peer that never began
 * the call, or the step flag of a chunk that never came (a value below
 * the stuck call's number). Only this rank's own memory is read, so a peer
 * or link that stopped cannot stop the watchdog too. */
static void describe_flags(struct tpla_watchdog *wd, char *why, size_t size) {
  for (int i = 0; i < wd->nxports; i++) {
    tpla_xport_t *xp = wd->xports[i];
    int n = xp->nranks + xp->nflags;
    uint32_t *words = malloc(sizeof *words * (size_t)n);
    if (words == NULL)
      return;
    if (cudaMemcpyAsync(words, xp_flags_of(xp, xp->rank), sizeof *words * (size_t)n,
                        cudaMemcpyDeviceToHost, wd->stream) != cudaSuccess ||
        cudaStreamSynchronize(wd->stream) != cudaSuccess) {
      (void)cudaGetLastError();
      free(words);
      continue;
    }
    tpla_appendf(why, size, "; transport %d of %d at the stop (last call begun: %u): ready from",
                 i + 1, wd->nxports, (unsigned)atomic_load(&xp->last_seq));
    for (int q = 0, first = 1; q < xp->nranks; q++)
      if (q != xp->rank) {
        tpla_appendf(why, size, "%s rank %d: %u", first ? "" : ",", q, (unsigned)words[q]);
        first = 0;
      }
    tpla_appendf(why, size, "; step flags ");
    tpla_append_word_runs(why, size, words + xp->nranks, xp->nflags);
    free(words);
  }
}

/* With wd->mu held, on a failed context whose calls have not all drained:
 * retire the finished calls and release this rank's flag words again. A
 * peer's copy that was still running at the abort can land its step flag or
 * ready word after the release and lower the word below a queued wait, which
 * would then never end (nor a synchronize of its stream). Only this rank's
 * own memory is written, one release at a time on the watchdog's stream. */
static void release_again(struct tpla_watchdog *wd) {
  char why[64];
  tpla_status_t st = TPLA_SUCCESS;
  int64_t age_ms = 0;
  (void)examine_calls(wd, why, sizeof why, &st, &age_ms); /* the context failed already */
  cudaError_t idle = cudaStreamQuery(wd->stream);
  (void)cudaGetLastError();
  if (wd->head == wd->tail || idle != cudaSuccess)
    return;
  for (int i = 0; i < wd->nxports; i++)
    release_flags(wd, wd->xports[i]);
}

/* Without wd->mu: an asynchronous NCCL error, checked only when no thread
 * holds the call lock (which may be aborting the communicator). */
static int examine_nccl(struct tpla_watchdog *wd, char *why, size_t size) {
  tpla_cuda_ctx_t *impl = wd->impl;
  if (pthread_mutex_trylock(&impl->call_mu) != 0)
    return 0;
  ncclResult_t ae = ncclSuccess;
  if (!impl->comm_aborted && ncclCommGetAsyncError(impl->comm, &ae) == ncclSuccess &&
      ae != ncclSuccess && ae != ncclInProgress)
    snprintf(why, size, "NCCL reported an asynchronous error on the communicator: %s",
             ncclGetErrorString(ae));
  pthread_mutex_unlock(&impl->call_mu);
  return ae != ncclSuccess && ae != ncclInProgress;
}

static void *watch(void *arg) {
  struct tpla_watchdog *wd = arg;
  (void)cudaSetDevice(wd->ctx->device);
  /* Its event queries and synchronizes would otherwise invalidate any other
   * thread's capture in global mode (cudaStreamCaptureModeGlobal, the
   * default, forbids them process-wide); they touch no captured stream. */
  enum cudaStreamCaptureMode relaxed = cudaStreamCaptureModeRelaxed;
  (void)cudaThreadExchangeStreamCaptureMode(&relaxed);
  int64_t poll = wd->ctx->cfg.timeout_ms / 10;
  poll = poll < 1 ? 1 : poll > 20 ? 20 : poll;
  char why[sizeof wd->ctx->failure.why];
  pthread_mutex_lock(&wd->mu);
  while (!wd->stop) {
    if (wd->head == wd->tail) {
      pthread_cond_wait(&wd->cv, &wd->mu);
      continue;
    }
    if (tpla_ctx_failed(wd->ctx)) {
      release_again(wd);
      struct timespec until = tpla_deadline_after(poll);
      (void)pthread_cond_timedwait(&wd->cv, &wd->mu, &until);
      continue;
    }
    tpla_status_t st = TPLA_ERROR_REMOTE;
    int64_t age_ms = 0;
    int found = examine_calls(wd, why, sizeof why, &st, &age_ms);
    if (!found && age_ms >= WD_MARKS_AFTER_MS)
      found = examine_marks(wd, why, sizeof why);
    if (found)
      describe_flags(wd, why, sizeof why);
    pthread_mutex_unlock(&wd->mu);
    if (!found && examine_nccl(wd, why, sizeof why)) {
      found = 1;
      st = TPLA_ERROR_NCCL;
    }
    if (found)
      (void)tpla_ctx_fail(wd->ctx, st, "%s", why);
    pthread_mutex_lock(&wd->mu);
    if (!wd->stop) {
      struct timespec until = tpla_deadline_after(poll);
      (void)pthread_cond_timedwait(&wd->cv, &wd->mu, &until);
    }
  }
  pthread_mutex_unlock(&wd->mu);
  return NULL;
}

/* ---- life ------------------------------------------------------------------------------------ */

static tpla_status_t create_watchdog(tpla_ctx_t ctx, tpla_cuda_ctx_t *impl, const char *fn) {
  struct tpla_watchdog *wd = calloc(1, sizeof *wd);
  if (wd == NULL)
    return tpla_fail(TPLA_ERROR_OUT_OF_MEMORY, fn, "out of host memory");
  if (pthread_mutex_init(&wd->mu, NULL) != 0) {
    free(wd);
    return tpla_fail(TPLA_ERROR_INTERNAL, fn, "cannot create the watchdog's lock");
  }
  if (!tpla_cond_init_monotonic(&wd->cv)) {
    pthread_mutex_destroy(&wd->mu);
    free(wd);
    return tpla_fail(TPLA_ERROR_INTERNAL, fn, "cannot create the watchdog's condition");
  }
  impl->wd = wd; /* from here on tpla_wd_destroy releases whatever exists */
  wd->ctx = ctx;
  wd->impl = impl;
  wd->current = -1;
  wd->marks = calloc((size_t)ctx->nranks, sizeof *wd->marks);
  if (wd->marks == NULL)
    return tpla_fail(TPLA_ERROR_OUT_OF_MEMORY, fn, "out of host memory");
  CUDA_TRY(fn, cudaStreamCreateWithFlags(&wd->stream, cudaStreamNonBlocking));
  for (int i = 0; i < WD_SLOTS; i++) {
    CUDA_TRY(fn, cudaEventCreateWithFlags(&wd->calls[i].start, cudaEventDisableTiming));
    CUDA_TRY(fn, cudaEventCreateWithFlags(&wd->calls[i].end, cudaEventDisableTiming));
  }
  if (pthread_create(&wd->thread, NULL, watch, wd) != 0)
    return tpla_fail(TPLA_ERROR_INTERNAL, fn, "cannot start the watchdog thread");
  wd->thread_started = true;
  return TPLA_SUCCESS;
}

tpla_status_t tpla_wd_create(tpla_ctx_t ctx, tpla_cuda_ctx_t *impl, const char *fn) {
  pthread_mutexattr_t attr;
  bool ok = pthread_mutexattr_init(&attr) == 0 &&
            pthread_mutexattr_settype(&attr, PTHREAD_MUTEX_RECURSIVE) == 0 &&
            pthread_mutex_init(&impl->call_mu, &attr) == 0;
  pthread_mutexattr_destroy(&attr);
  if (!ok)
    return tpla_fail(TPLA_ERROR_INTERNAL, fn, "cannot create the context's call lock");
  impl->call_mu_ready = 1;
  return ctx->nranks > 1 ? create_watchdog(ctx, impl, fn) : TPLA_SUCCESS;
}

void tpla_wd_destroy(tpla_cuda_ctx_t *impl) {
  struct tpla_watchdog *wd = impl->wd;
  if (wd != NULL) {
    if (wd->thread_started) {
      pthread_mutex_lock(&wd->mu);
      wd->stop = true;
      pthread_cond_signal(&wd->cv);
      pthread_mutex_unlock(&wd->mu);
      pthread_join(wd->thread, NULL);
    }
    for (int i = 0; i < WD_SLOTS; i++) {
      if (wd->calls[i].start)
        (void)cudaEventDestroy(wd->calls[i].start);
      if (wd->calls[i].end)
        (void)cudaEventDestroy(wd->calls[i].end);
    }
    if (wd->stream)
      (void)cudaStreamDestroy(wd->stream);
    (void)cudaGetLastError();
    pthread_cond_destroy(&wd->cv);
    pthread_mutex_destroy(&wd->mu);
    free(wd->marks);
    free(wd->xports);
    free(wd);
    impl->wd = NULL;
  }
  if (impl->call_mu_ready)
    pthread_mutex_destroy(&impl->call_mu);
  impl->call_mu_ready = 0;
}
