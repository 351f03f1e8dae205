/*
 * host_transport.c - the overlap transport of the host executor
 * (struct tpla_xport_ops of src/core/overlap.h), so the tensor-parallel
 * schedules run, step for step, with threads as ranks:
 *   - windows are plain host memory; the ranks share base pointers through
 *     the plan-time exchange (all ranks are threads of this process);
 *   - put/get = memcpy into/out of a peer's window;
 *   - flags are C11 atomics: a sender stores the call number with release
 *     order after its memcpy, a receiver loads with acquire order, so the
 *     data is visible when the flag is; waits poll with back-off and give
 *     up after the context's timeout_ms (TPLA_ERROR_TIMEOUT), raising an
 *     abort word in every peer so that their waits end at once (REMOTE),
 *     or when the group breaks (tpla_ctx_abort on any rank: REMOTE);
 *   - SENDRECV steps are the group's blocking point-to-point exchange;
 *   - lanes do not exist: everything runs in program order on the calling
 *     thread, which the schedules are written to allow;
 *   - the plan-time rehearsal exists only so that CI runs the plans' code of
 *     it (the host has no lazy loading): zeroed scratch and window, and
 *     begin, step, arrival and wait_ready touch no peer until it ends;
 *   - with TPLA_HOST_LAZY_PULLS=1 (tests) a pull copies nothing when it is
 *     issued: its destination turns to NaN bytes (0xff) and the copy is made
 *     when a lane waits for its flag (arrival), when the lanes are synced or
 *     when the exchange ends, the latest a GPU copy may complete. So code
 *     that reads pulled rows before waiting for them, or overwrites a source
 *     the peer may still be reading, fails here as it could on a GPU, where
 *     lanes are not run in program order.
 * GEMMs go to the host backend's GEMM; bias and the fold of received
 * partials are loops here (fp32 math, like the CUDA kernel).
 */
#include "host.h" /* host_group_broken */
#include "overlap.h"

#include <inttypes.h>
#include <math.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef _Atomic uint32_t flag_t;

/* A rank's window and flags. Over PEER its peers write into them (a rank that times out
 * raises its abort word in every peer), also after this rank destroyed its plan, when a
 * peer's call is still waiting: so every PEER transport of the group holds a reference,
 * and the last one to go frees them. */
struct host_mem {
  _Atomic int refs;
  void *window;
  flag_t *flags;
};

struct tpla_xport {
  tpla_ctx_t ctx;
  ovl_xport_kind_t kind;
  int rank, nranks, nflags;
  size_t window_bytes;
  struct host_mem *mem;
  void *window;        /* mem's */
  flag_t *flags;       /* mem's: [nranks] ready, [nflags] steps, [1] abort: written by peers */
  void **peer_window;  /* every rank's window (ours included) */
  flag_t **peer_flags; /* every rank's flags */
  struct host_mem **peer_mem; /* every rank's mem */
  bool shared;                /* PEER, set up on every rank: it holds peer_mem's references */
  const char *fn;      /* the public function of the call in progress */
  bool rehearsal;      /* between rehearse_begin and rehearse_end: no peer is touched */
  bool lazy;           /* TPLA_HOST_LAZY_PULLS=1: pulls copied when waited for */
  struct pending_pull *pending;
  int npending, pending_cap;
};

/* A pull issued but not copied yet (lazy pulls). */
struct pending_pull {
  int flag, from;
  uint32_t seq;
  tpla_matrix_t recv;
  const char *src;
  int64_t src_ld;
};

/* Fixed layout, no padding: status, then pointers as integers, then text. */
typedef struct {
  int32_t status, unused;
  uint64_t window, flags, mem;
  char message[176];
} host_record_t;

static size_t nflag_words(const tpla_xport_t *xp) { return (size_t)(xp->nranks + xp->nflags + 1); }
static flag_t *ready_of(flag_t *f, int q) { return &f[q]; }
static flag_t *step_of(const tpla_xport_t *xp, flag_t *f, int flag) {
  return &f[xp->nranks + flag];
}
static flag_t *abort_of(const tpla_xport_t *xp, flag_t *f) {
  return &f[xp->nranks + xp->nflags];
}

static void mem_free(struct host_mem *m) {
  if (m == NULL)
    return;
  free(m->window);
  free((void *)m->flags);
  free(m);
}

static void host_destroy(tpla_xport_t *xp) {
  if (xp == NULL)
    return;
  if (!xp->shared) /* no peer holds ours */
    mem_free(xp->mem);
  for (int q = 0; xp->shared && q < xp->nranks; q++)
    if (atomic_fetch_sub_explicit(&xp->peer_mem[q]->refs, 1, memory_order_acq_rel) == 1)
      mem_free(xp->peer_mem[q]);
  free(xp->peer_mem);
  free(xp->peer_window);
  free(xp->peer_flags);
  free(xp->pending);
  free(xp);
}

/* This rank's part of create; the message goes to rec on failure. */
static tpla_status_t create_local(tpla_xport_t *xp, host_record_t *rec) {
  size_t bytes = (xp->window_bytes + 63) & ~(size_t)63;
  if (bytes < xp->window_bytes) {
    snprintf(rec->message, sizeof rec->message, "a window of %zu bytes is too large",
             xp->window_bytes);
    return TPLA_ERROR_OUT_OF_MEMORY;
  }
  if ((xp->mem = calloc(1, sizeof *xp->mem)) == NULL) {
    snprintf(rec->message, sizeof rec->message, "out of host memory");
    return TPLA_ERROR_OUT_OF_MEMORY;
  }
  /* every PEER transport of the group will hold it, if the group's creation succeeds */
  atomic_init(&xp->mem->refs, xp->kind == OVL_XPORT_PEER ? xp->nranks : 1);
  if (bytes > 0 && (xp->window = xp->mem->window = aligned_alloc(64, bytes)) == NULL) {
    snprintf(rec->message, sizeof rec->message, "cannot allocate a window of %zu bytes", bytes);
    return TPLA_ERROR_OUT_OF_MEMORY;
  }
  xp->flags = xp->mem->flags = malloc(sizeof(flag_t) * nflag_words(xp));
  xp->peer_window = calloc((size_t)xp->nranks, sizeof *xp->peer_window);
  xp->peer_flags = calloc((size_t)xp->nranks, sizeof *xp->peer_flags);
  xp->peer_mem = calloc((size_t)xp->nranks, sizeof *xp->peer_mem);
  if (xp->flags == NULL || xp->peer_window == NULL || xp->peer_flags == NULL ||
      xp->peer_mem == NULL) {
    snprintf(rec->message, sizeof rec->message, "out of host memory for %d ranks' flags",
             xp->nranks);
    return TPLA_ERROR_OUT_OF_MEMORY;
  }
  for (size_t i = 0; i < nflag_words(xp); i++)
    atomic_init(&xp->flags[i], 0u);
  rec->window = (uint64_t)(uintptr_t)xp->window;
  rec->flags = (uint64_t)(uintptr_t)xp->flags;
  rec->mem = (uint64_t)(uintptr_t)xp->mem;
  return TPLA_SUCCESS;
}

static tpla_status_t host_create(tpla_ctx_t ctx, const ovl_xport_desc_t *desc,
                                 tpla_xport_t **out) {
  const char *fn = desc->fn;
  *out = NULL;
  tpla_xport_t *xp = calloc(1, sizeof *xp);
  host_record_t mine, *all = calloc((size_t)ctx->nranks, sizeof *all);
  memset(&mine, 0, sizeof mine);
  tpla_status_t st = tpla_plan_agree_memory(ctx, fn, xp && all);
  if (st != TPLA_SUCCESS) {
    free(xp);
    free(all);
    return st;
  }
  xp->ctx = ctx;
  /* every rank shares this process's memory: PEER is always possible */
  xp->kind = desc->kind == OVL_XPORT_AUTO ? OVL_XPORT_PEER : desc->kind;
  xp->rank = ctx->rank;
  xp->nranks = ctx->nranks;
  xp->nflags = desc->nflags;
  xp->window_bytes = desc->window_bytes;
  xp->fn = fn;
  const char *lazy = getenv("TPLA_HOST_LAZY_PULLS");
  xp->lazy = lazy != NULL && strcmp(lazy, "1") == 0;
  st = create_local(xp, &mine);
  mine.status = (int32_t)st;
  tpla_status_t ex = ctx->backend->exchange(ctx, all, &mine, sizeof mine);
  if (ex == TPLA_SUCCESS && st != TPLA_SUCCESS)
    ex = tpla_fail(st, fn, "%s", mine.message);
  for (int q = 0; ex == TPLA_SUCCESS && q < ctx->nranks; q++)
    if (all[q].status != 0)
      ex = tpla_fail(TPLA_ERROR_REMOTE, fn, "rank %d could not set up its transport: %s", q,
                     all[q].message);
  for (int q = 0; ex == TPLA_SUCCESS && q < ctx->nranks; q++) {
    xp->peer_window[q] = (void *)(uintptr_t)all[q].window;
    xp->peer_flags[q] = (flag_t *)(uintptr_t)all[q].flags;
  }
  /* Over PEER every rank now holds every rank's mem (the verdict above is the same on every
   * rank, so either all take their references or none does). */
  for (int q = 0; ex == TPLA_SUCCESS && xp->kind == OVL_XPORT_PEER && q < ctx->nranks; q++)
    xp->peer_mem[q] = (struct host_mem *)(uintptr_t)all[q].mem;
  xp->shared = ex == TPLA_SUCCESS && xp->kind == OVL_XPORT_PEER;
  free(all);
  if (ex != TPLA_SUCCESS) {
    host_destroy(xp);
    return ex;
  }
  *out = xp;
  return TPLA_SUCCESS;
}

static ovl_xport_kind_t host_kind(const tpla_xport_t *xp) { return xp->kind; }
static void *host_window(const tpla_xport_t *xp) { return xp->window; }
static void *host_peer_window(const tpla_xport_t *xp, int q) {
  return xp->kind == OVL_XPORT_PEER && !xp->rehearsal ? xp->peer_window[q] : NULL;
}
static void *host_stream(const tpla_xport_t *xp, int lane) { return NULL; }
static size_t host_bytes(const tpla_xport_t *xp) {
  return xp->window_bytes + (xp->kind == OVL_XPORT_LOCAL ? 0 : sizeof(flag_t) * nflag_words(xp));
}

/* ---- flags ------------------------------------------------------------------ */

static int64_t now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void back_off(int round) {
  if (round < 64)
    return; /* spin a little: peers are usually just behind */
  long us = round < 200 ? 20 : 200;
  struct timespec ts = {0, us * 1000L};
  nanosleep(&ts, NULL);
}

/* The group of the transport's context (a thread or cross-process group):
 * a rank's abort, a timeout or a departure breaks it. */
static tpla_host_group_t host_group_of(const tpla_xport_t *xp) {
  return ((const host_ctx_t *)xp->ctx->impl)->group;
}

/* Wait until *f reached seq (cyclically), the group breaks (REMOTE: this
 * rank's or a peer's tpla_ctx_abort, a collective's timeout) or the timeout
 * passes. `what` and `peer` name it. */
static tpla_status_t wait_flag(tpla_xport_t *xp, flag_t *f, uint32_t seq, const char *what,
                               int peer) {
  int64_t deadline = now_ms() + xp->ctx->cfg.timeout_ms;
  for (int round = 0;; round++) {
    if (ovl_seq_reached(atomic_load_explicit(f, memory_order_acquire), seq))
      return TPLA_SUCCESS;
    uint32_t aborted = atomic_load_explicit(abort_of(xp, xp->flags), memory_order_acquire);
    if (aborted != 0)
      return tpla_fail(TPLA_ERROR_REMOTE, xp->fn,
                       "rank %d: rank %u gave up on call %" PRIu32 " of the plan (timeout); "
                       "the plan is unusable", xp->rank, aborted - 1, seq);
    char why[320], whom[32] = "";
    if (peer >= 0) /* a chunk's flag may be written by any peer */
      snprintf(whom, sizeof whom, " from rank %d", peer);
    if ((round & 63) == 63 && host_group_broken(host_group_of(xp), why, sizeof why))
      return tpla_fail(TPLA_ERROR_REMOTE, xp->fn,
                       "rank %d stopped waiting for %s%s in call %" PRIu32
                       " of the plan: the host group is broken: %s",
                       xp->rank, what, whom, seq, why);
    if ((round & 63) == 63 && now_ms() > deadline) {
      for (int q = 0; q < xp->nranks; q++) /* release everyone else's waits */
        atomic_store_explicit(abort_of(xp, xp->peer_flags[q]), (uint32_t)xp->rank + 1,
                              memory_order_release);
      return tpla_fail(TPLA_ERROR_TIMEOUT, xp->fn,
                       "rank %d waited %" PRId64 " ms for %s%s in call %" PRIu32
                       " of the plan (flag holds %" PRIu32 "): did every rank make the call?",
                       xp->rank, xp->ctx->cfg.timeout_ms, what, whom, seq,
                       atomic_load_explicit(f, memory_order_relaxed));
    }
    back_off(round);
  }
}

static void set_flag(flag_t *f, uint32_t seq) {
  atomic_store_explicit(f, seq, memory_order_release);
}

static tpla_status_t host_begin(tpla_xport_t *xp, uint32_t seq, void *stream, const char *fn) {
  xp->fn = fn;
  if (xp->kind != OVL_XPORT_PEER || xp->rehearsal)
    return TPLA_SUCCESS;
  uint32_t aborted = atomic_load_explicit(abort_of(xp, xp->flags), memory_order_acquire);
  if (aborted != 0)
    return tpla_fail(TPLA_ERROR_REMOTE, fn, "rank %u gave up on an earlier call of the plan",
                     aborted - 1);
  /* this rank's window is free for call seq: the previous call is over */
  for (int q = 0; q < xp->nranks; q++)
    if (q != xp->rank)
      set_flag(ready_of(xp->peer_flags[q], xp->rank), seq);
  return TPLA_SUCCESS;
}

static tpla_status_t complete_pulls(tpla_xport_t *xp, int flag);

/* Every pull has completed when the exchange ends. */
static tpla_status_t host_end(tpla_xport_t *xp, void *stream) { return complete_pulls(xp, -1); }

/* ---- data movement ------------------------------------------------------------ */

static void copy_rows(void *dst, int64_t ldd, const void *src, int64_t lds, int64_t rows,
                      int64_t cols, size_t esize) {
  for (int64_t i = 0; i < rows; i++)
    memcpy((char *)dst + (size_t)(i * ldd) * esize, (const char *)src + (size_t)(i * lds) * esize,
           (size_t)cols * esize);
}

static tpla_status_t host_copy(tpla_xport_t *xp, int lane, int after, tpla_matrix_t dst,
                               tpla_matrix_t src) {
  if (dst.rows > 0 && dst.cols > 0)
    copy_rows(dst.data, dst.ld, src.data, src.ld, dst.rows, dst.cols, tpla_dtype_size(dst.dtype));
  return TPLA_SUCCESS;
}

static bool dense(const tpla_matrix_t *m) { return m->rows <= 1 || m->ld == m->cols; }

static size_t view_bytes(const tpla_matrix_t *m) {
  return (size_t)m->rows * (size_t)m->cols * tpla_dtype_size(m->dtype);
}

static tpla_status_t step_sendrecv(tpla_xport_t *xp, const ovl_step_t *s) {
  if ((s->to >= 0 && !dense(&s->send)) || (s->from >= 0 && !dense(&s->recv)))
    return tpla_fail(TPLA_ERROR_INTERNAL, xp->fn, "a SENDRECV step needs dense views");
  if (s->scale_send != NULL || s->scale_recv != NULL) /* an FP8 scale, before the data */
    TPLA_TRY(xp->ctx->backend->sendrecv(
        xp->ctx, s->scale_send, s->scale_send ? sizeof(float) : 0, s->scale_send ? s->to : -1,
        s->scale_recv, s->scale_recv ? sizeof(float) : 0, s->scale_recv ? s->from : -1,
        TPLA_UINT8, NULL));
  size_t sb = s->to >= 0 ? view_bytes(&s->send) : 0, rb = s->from >= 0 ? view_bytes(&s->recv) : 0;
  return xp->ctx->backend->sendrecv(xp->ctx, s->send.data, sb, s->to, s->recv.data, rb, s->from,
                                    TPLA_UINT8, NULL);
}

static tpla_status_t pull_now(tpla_xport_t *xp, const struct pending_pull *p) {
  TPLA_TRY(wait_flag(xp, step_of(xp, xp->flags, p->flag), p->seq, "a published slice", p->from));
  copy_rows(p->recv.data, p->recv.ld, p->src, p->src_ld, p->recv.rows, p->recv.cols,
            tpla_dtype_size(p->recv.dtype));
  return TPLA_SUCCESS;
}

static tpla_status_t defer_pull(tpla_xport_t *xp, const struct pending_pull *p) {
  if (xp->npending == xp->pending_cap) {
    int cap = xp->pending_cap > 0 ? 2 * xp->pending_cap : 16;
    struct pending_pull *grown = realloc(xp->pending, sizeof *grown * (size_t)cap);
    if (grown == NULL)
      return tpla_fail(TPLA_ERROR_OUT_OF_MEMORY, xp->fn, "out of host memory (lazy pulls)");
    xp->pending = grown;
    xp->pending_cap = cap;
  }
  size_t es = tpla_dtype_size(p->recv.dtype);
  for (int64_t i = 0; i < p->recv.rows; i++) /* NaN in every float type */
    memset((char *)p->recv.data + (size_t)(i * p->recv.ld) * es, 0xff, (size_t)p->recv.cols * es);
  xp->pending[xp->npending++] = *p;
  return TPLA_SUCCESS;
}

/* The pending pulls of `flag` (-1: all), in the order they were issued. */
static tpla_status_t complete_pulls(tpla_xport_t *xp, int flag) {
  int kept = 0;
  tpla_status_t st = TPLA_SUCCESS;
  for (int i = 0; i < xp->npending; i++) {
    if (st == TPLA_SUCCESS && (flag < 0 || xp->pending[i].flag == flag))
      st = pull_now(xp, &xp->pending[i]);
    else if (st == TPLA_SUCCESS)
      xp->pending[kept++] = xp->pending[i];
  }
  xp->npending = st == TPLA_SUCCESS ? kept : 0; /* after a failure the call is over */
  return st;
}

static tpla_status_t host_step(tpla_xport_t *xp, const ovl_step_t *s, uint32_t seq) {
  if (xp->rehearsal)
    return TPLA_SUCCESS;
  if (xp->kind == OVL_XPORT_SENDRECV)
    return step_sendrecv(xp, s);
  if (xp->kind != OVL_XPORT_PEER)
    return tpla_fail(TPLA_ERROR_INTERNAL, xp->fn, "a transfer step on a local transport");
  size_t es = tpla_dtype_size(s->send.dtype);
  if (!s->pull) {
    if (s->to < 0)
      return TPLA_SUCCESS;
    if (s->written) { /* the GEMM wrote the piece after wait_ready: publish it */
      set_flag(step_of(xp, xp->peer_flags[s->to], s->flag), seq);
      return TPLA_SUCCESS;
    }
    TPLA_TRY(wait_flag(xp, ready_of(xp->flags, s->to), seq, "the ready signal", s->to));
    if (s->scale_send != NULL)
      memcpy((char *)xp->peer_window[s->to] + s->scale_to_offset, s->scale_send, sizeof(float));
    char *dst = (char *)xp->peer_window[s->to] + s->to_offset;
    copy_rows(dst, s->send.cols, s->send.data, s->send.ld, s->send.rows, s->send.cols, es);
    set_flag(step_of(xp, xp->peer_flags[s->to], s->flag), seq);
    return TPLA_SUCCESS;
  }
  if (s->to >= 0) /* our piece (in our window) is ready for `to` to read */
    set_flag(step_of(xp, xp->peer_flags[s->to], s->flag), seq);
  if (s->from < 0)
    return TPLA_SUCCESS;
  struct pending_pull pull = {s->flag, s->from, seq, s->recv,
                              (const char *)xp->peer_window[s->from] + s->from_offset,
                              s->from_ld > 0 ? s->from_ld : s->recv.cols};
  return xp->lazy ? defer_pull(xp, &pull) : pull_now(xp, &pull);
}

static tpla_status_t host_arrival(tpla_xport_t *xp, int lane, int flag, uint32_t seq) {
  if (xp->kind != OVL_XPORT_PEER || xp->rehearsal) /* SENDRECV steps complete before returning */
    return TPLA_SUCCESS;
  TPLA_TRY(complete_pulls(xp, flag));
  return wait_flag(xp, step_of(xp, xp->flags, flag), seq, "a chunk", -1);
}

static tpla_status_t host_wait_ready(tpla_xport_t *xp, int lane, int peer, uint32_t seq) {
  if (xp->kind != OVL_XPORT_PEER || xp->rehearsal)
    return TPLA_SUCCESS;
  return wait_flag(xp, ready_of(xp->flags, peer), seq, "the ready signal", peer);
}

static tpla_status_t host_sync_lanes(tpla_xport_t *xp, int lane) { return complete_pulls(xp, -1); }

static tpla_status_t host_rehearse_begin(tpla_xport_t *xp, size_t scratch_bytes, void **scratch) {
  *scratch = NULL;
  if (scratch_bytes > 0 && (*scratch = calloc(1, scratch_bytes)) == NULL)
    return tpla_fail(TPLA_ERROR_OUT_OF_MEMORY, xp->fn,
                     "out of host memory (%zu bytes of plan-time rehearsal scratch)",
                     scratch_bytes);
  if (xp->window_bytes > 0) /* as the CUDA rehearsal: no stale window is read */
    memset(xp->window, 0, xp->window_bytes);
  xp->rehearsal = true;
  return TPLA_SUCCESS;
}

static tpla_status_t host_rehearse_end(tpla_xport_t *xp, void *scratch) {
  xp->rehearsal = false;
  free(scratch);
  return TPLA_SUCCESS;
}

/* ---- arithmetic ------------------------------------------------------------------- */

static float load(const void *p, tpla_dtype_t t, size_t i) {
  switch (t) {
  case TPLA_FLOAT16: return tpla_half_to_float(((const uint16_t *)p)[i]);
  case TPLA_BFLOAT16: return tpla_bf16_to_float(((const uint16_t *)p)[i]);
  default: return ((const float *)p)[i];
  }
}

static void store(void *p, tpla_dtype_t t, size_t i, float v) {
  switch (t) {
  case TPLA_FLOAT16: ((uint16_t *)p)[i] = tpla_float_to_half(v); break;
  case TPLA_BFLOAT16: ((uint16_t *)p)[i] = tpla_float_to_bf16(v); break;
  default: ((float *)p)[i] = v; break;
  }
}

static tpla_status_t host_fold(tpla_xport_t *xp, int lane, const ovl_fold_t *f) {
  const tpla_matrix_t *y = &f->y;
  tpla_dtype_t t = y->dtype;
  for (int64_t i = 0; i < y->rows; i++)
    for (int64_t j = 0; j < y->cols; j++) {
      size_t dense_idx = (size_t)(i * y->cols + j);
      float s = 0.0f;
      for (int q = 0; q < f->nslots; q++)
        s += load(f->slots, t, (size_t)q * f->slot_stride + dense_idx);
      float v = s;
      if (f->beta != 0.0f)
        v += f->beta * load(y->data, t, (size_t)(i * y->ld + j));
      if (f->bias != NULL)
        v += load(f->bias, t, (size_t)j);
      if (f->y2.data != NULL)
        store(f->y2.data, t, (size_t)(i * f->y2.ld + j), s);
      store(y->data, t, (size_t)(i * y->ld + j), v);
    }
  return TPLA_SUCCESS;
}

static tpla_status_t host_set_scale(tpla_xport_t *xp, int lane, float *dst, const float *src) {
  *dst = src != NULL ? *src : 1.0f;
  return TPLA_SUCCESS;
}

static tpla_status_t host_transpose(tpla_xport_t *xp, int lane, tpla_matrix_t dst,
                                    tpla_matrix_t src) {
  for (int64_t i = 0; i < src.rows; i++)
    for (int64_t j = 0; j < src.cols; j++)
      ((uint8_t *)dst.data)[j * dst.ld + i] = ((const uint8_t *)src.data)[i * src.ld + j];
  return TPLA_SUCCESS;
}

static tpla_status_t host_amax(tpla_xport_t *xp, int lane, tpla_matrix_t m, float *amax) {
  float a = 0.0f;
  for (int64_t i = 0; i < m.rows; i++)
    for (int64_t j = 0; j < m.cols; j++) {
      float v = fabsf(load(m.data, m.dtype, (size_t)(i * m.ld + j)));
      a = v > a || isnan(v) ? v : a;
    }
  *amax = a;
  return TPLA_SUCCESS;
}

/* D = alpha op(A) op(B) + beta C + bias: the backend's GEMM, then (C apart
 * from D, or a bias) one pass adding beta C and the bias in fp32. */
static tpla_status_t host_gemm(tpla_xport_t *xp, int lane, const tpla_gemm_call_t *call,
                               const void *bias, const tpla_matrix_t *c) {
  tpla_gemm_call_t g = *call;
  if (c != NULL)
    g.beta = 0.0f;
  TPLA_TRY(xp->ctx->backend->gemm(xp->ctx, &g, NULL));
  if (bias == NULL && c == NULL)
    return TPLA_SUCCESS;
  const tpla_matrix_t *d = &call->d;
  for (int64_t i = 0; i < d->rows; i++)
    for (int64_t j = 0; j < d->cols; j++) {
      size_t at = (size_t)(i * d->ld + j);
      float v = load(d->data, d->dtype, at);
      if (c != NULL && call->beta != 0.0f)
        v += call->beta * load(c->data, d->dtype, (size_t)(i * c->ld + j));
      if (bias != NULL)
        v += load(bias, d->dtype, (size_t)j);
      store(d->data, d->dtype, at, v);
    }
  return TPLA_SUCCESS;
}

/* The host runs every lane in program order: nothing is left in flight. */
static tpla_status_t host_quiesce(tpla_xport_t *xp) {
  (void)xp;
  return TPLA_SUCCESS;
}

const struct tpla_xport_ops tpla_host_xport_ops = {
    .create = host_create,
    .destroy = host_destroy,
    .kind = host_kind,
    .window = host_window,
    .peer_window = host_peer_window,
    .bytes = host_bytes,
    .stream = host_stream,
    .begin = host_begin,
    .end = host_end,
    .step = host_step,
    .arrival = host_arrival,
    .wait_ready = host_wait_ready,
    .sync_lanes = host_sync_lanes,
    .quiesce = host_quiesce,
    .gemm = host_gemm,
    .fold = host_fold,
    .copy = host_copy,
    .set_scale = host_set_scale,
    .transpose = host_transpose,
    .amax = host_amax,
    .rehearse_begin = host_rehearse_begin,
    .rehearse_end = host_rehearse_end,
};
