/*
 * host_ctx.c - contexts of the host executor: tpla_ctx_create_host, the
 * backend table (collectives in host_coll.c, GEMM in host_gemm.c, building
 * blocks in host_kernels.c, the plan-time exchange in host_ops.c),
 * per-context grow-only scratch, plan memory.
 */
#include "host.h"
#include "host_ops.h"
#include "shm.h" /* shm_ctx_create */
#include "overlap.h" /* tpla_host_xport_ops */

#include <stdlib.h>

/* ---- scratch ------------------------------------------------------------- */

tpla_status_t host_scratch_reserve(host_scratch_t *s, size_t bytes, const char *fn) {
  if (bytes <= s->bytes)
    return TPLA_SUCCESS;
  size_t rounded = (bytes + 63) & ~(size_t)63;
  if (rounded < bytes)
    return tpla_fail(TPLA_ERROR_OUT_OF_MEMORY, fn, "host scratch of %zu bytes is too large",
                     bytes);
  void *p = aligned_alloc(64, rounded);
  if (p == NULL)
    return tpla_fail(TPLA_ERROR_OUT_OF_MEMORY, fn, "cannot allocate %zu bytes of host scratch",
                     rounded);
  free(s->ptr);
  s->ptr = p;
  s->bytes = rounded;
  return TPLA_SUCCESS;
}

void host_scratch_free(host_scratch_t *s) {
  free(s->ptr);
  s->ptr = NULL;
  s->bytes = 0;
}

/* ---- backend methods ----------------------------------------------------- */

static host_ctx_t *impl(tpla_ctx_t ctx) { return (host_ctx_t *)ctx->impl; }

static tpla_status_t host_destroy(tpla_ctx_t ctx) {
  host_ctx_t *h = impl(ctx);
  host_group_leave(h->group, ctx->rank);
  host_scratch_free(&h->coll);
  host_scratch_free(&h->gemm);
  free(h);
  ctx->impl = NULL;
  return TPLA_SUCCESS;
}

size_t host_workspace_bytes(tpla_ctx_t ctx) {
  return impl(ctx)->coll.bytes + impl(ctx)->gemm.bytes;
}

/* View v of batch member j (tpla_batch_t). */
static tpla_matrix_t member(tpla_matrix_t v, tpla_batch_t batch, int j) {
  if (v.data != NULL)
    v.data = (char *)v.data + (size_t)j * batch.stride;
  return v;
}

tpla_status_t host_gemm_m(tpla_ctx_t ctx, const tpla_gemm_call_t *call, void *stream) {
  if (call->batch.count <= 1)
    return host_gemm_run(&impl(ctx)->gemm, call);
  tpla_gemm_call_t one = *call;
  tpla_matrix_t c;
  one.batch = (tpla_batch_t){0};
  for (int j = 0; j < call->batch.count; j++) {
    one.a = member(call->a, call->batch, j);
    one.b = member(call->b, call->batch, j);
    one.d = member(call->d, call->batch, j);
    if (call->c != NULL) {
      c = member(*call->c, call->batch, j);
      one.c = &c;
    }
    TPLA_TRY(host_gemm_run(&impl(ctx)->gemm, &one));
  }
  return TPLA_SUCCESS;
}

tpla_status_t host_mem_alloc(tpla_ctx_t ctx, size_t bytes, void **ptr) {
  size_t rounded = ((bytes ? bytes : 1) + 63) & ~(size_t)63;
  void *p = rounded >= bytes ? aligned_alloc(64, rounded) : NULL;
  if (p == NULL)
    return tpla_fail(TPLA_ERROR_OUT_OF_MEMORY, "host executor",
                     "cannot allocate %zu bytes of plan memory", bytes);
  *ptr = p;
  return TPLA_SUCCESS;
}

void host_mem_free(tpla_ctx_t ctx, void *ptr) { free(ptr); }

tpla_status_t host_axpby_m(tpla_ctx_t ctx, tpla_matrix_t y, tpla_matrix_t x, float alpha,
                           float beta, tpla_batch_t batch, void *stream) {
  for (int j = 0; j < (batch.count > 1 ? batch.count : 1); j++)
    TPLA_TRY(host_axpby(member(y, batch, j), member(x, batch, j), alpha, beta));
  return TPLA_SUCCESS;
}

tpla_status_t host_sumsq_m(tpla_ctx_t ctx, double *sumsq, tpla_matrix_t x, void *stream) {
  return host_sumsq(sumsq, x);
}

tpla_status_t host_scale_by_norm_m(tpla_ctx_t ctx, tpla_matrix_t y, tpla_matrix_t x,
                                   const double *sumsq, float safety, float eps, void *stream) {
  return host_scale_by_norm(y, x, sumsq, safety, eps);
}

tpla_status_t host_normalize_list_m(tpla_ctx_t ctx, tpla_matrix_t y, tpla_batch_t batch,
                                   const tpla_matrix_t *x, const float *safety, const float *eps,
                                   double *sumsq, void *stream) {
  for (int j = 0; j < batch.count; j++) {
    TPLA_TRY(host_sumsq(&sumsq[j], x[j]));
    TPLA_TRY(host_scale_by_norm(member(y, batch, j), x[j], &sumsq[j], safety[j], eps[j]));
  }
  return TPLA_SUCCESS;
}

tpla_status_t host_store_list_m(tpla_ctx_t ctx, const tpla_matrix_t *x, tpla_matrix_t y,
                                tpla_batch_t batch, void *stream) {
  for (int j = 0; j < batch.count; j++)
    TPLA_TRY(host_axpby(x[j], member(y, batch, j), 1.0f, 0.0f));
  return TPLA_SUCCESS;
}

tpla_status_t host_zero_m(tpla_ctx_t ctx, tpla_matrix_t y, void *stream) {
  return host_zero(y);
}

tpla_status_t host_mirror_upper_m(tpla_ctx_t ctx, tpla_matrix_t a, int64_t whole,
                                  tpla_batch_t batch, void *stream) {
  for (int j = 0; j < (batch.count > 1 ? batch.count : 1); j++)
    TPLA_TRY(host_mirror_upper(member(a, batch, j), whole));
  return TPLA_SUCCESS;
}

tpla_status_t host_add_diagonal_m(tpla_ctx_t ctx, tpla_matrix_t a, float value,
                                  tpla_batch_t batch, void *stream) {
  for (int j = 0; j < (batch.count > 1 ? batch.count : 1); j++)
    TPLA_TRY(host_add_diagonal(member(a, batch, j), value));
  return TPLA_SUCCESS;
}

/* Host calls complete before they return: there is nothing to overlap or
 * to order. */
void *host_side_stream(tpla_ctx_t ctx, int i) { return NULL; }
tpla_status_t host_stream_wait(tpla_ctx_t ctx, void *waiter, void *signaler) {
  return TPLA_SUCCESS;
}

/* tpla_ctx_abort (after ctx_fail.c recorded the failure): break the group,
 * so this rank's waits and every peer's waits for it end with REMOTE at
 * once. Only takes the group's lock, which a waiting rank releases while
 * it sleeps, so it may run on any thread during a call. */
void host_abort(tpla_ctx_t ctx) {
  host_group_break(impl(ctx)->group, ctx->failure.why); /* names the rank */
}

/* A group broken by a peer (its abort, a timeout, its departure) fails this
 * context too, so tpla_ctx_get_async_error reports it and calls stop at
 * their start. One atomic load while the group is whole. */
void host_poll_failure(tpla_ctx_t ctx) {
  char why[320];
  if (host_group_broken(impl(ctx)->group, why, sizeof why))
    tpla_ctx_fail(ctx, TPLA_ERROR_REMOTE, "the host group is broken: %s", why);
}

static const tpla_backend_t host_backend = {
    .name = "host",
    .destroy = host_destroy,
    .allreduce = host_allreduce,
    .allgatherv = host_allgatherv,
    .reduce_scatterv = host_reduce_scatterv,
    .broadcast = host_broadcast,
    .sendrecv = host_sendrecv,
    .barrier = host_barrier,
    .side_stream = host_side_stream,
    .stream_wait = host_stream_wait,
    .gemm = host_gemm_m,
    .workspace_bytes = host_workspace_bytes,
    .mem_alloc = host_mem_alloc,
    .mem_free = host_mem_free,
    .axpby = host_axpby_m,
    .sumsq = host_sumsq_m,
    .scale_by_norm = host_scale_by_norm_m,
    .normalize_list = host_normalize_list_m,
    .store_list = host_store_list_m,
    .zero = host_zero_m,
    .mirror_upper = host_mirror_upper_m,
    .add_diagonal = host_add_diagonal_m,
    .alltoallv = host_alltoallv,
    .exchange = tpla_host_exchange, /* host_ops.c */
    .xport = &tpla_host_xport_ops,  /* host_transport.c (overlap plans) */
    .abort = host_abort,
    .poll_failure = host_poll_failure,
};

/* ---- contexts ------------------------------------------------------------ */

tpla_status_t host_ctx_config(tpla_config_t *conf, tpla_host_group_t group,
                              const tpla_config_t *cfg, const char *fn) {
  /* Without a configuration of its own a context inherits the group's. */
  *conf = *host_group_config(group);
  if (cfg != NULL)
    TPLA_TRY(tpla_check_config(fn, cfg, conf));
  return TPLA_SUCCESS;
}

tpla_status_t host_ctx_new(tpla_ctx_t *out, size_t impl_bytes, const tpla_backend_t *backend,
                           int rank, int nranks, const tpla_config_t *conf, const char *fn) {
  struct tpla_ctx *c = calloc(1, sizeof *c);
  void *h = calloc(1, impl_bytes);
  if (c == NULL || h == NULL) {
    free(c);
    free(h);
    return tpla_fail(TPLA_ERROR_OUT_OF_MEMORY, fn, "cannot allocate a context");
  }
  c->backend = backend;
  c->executor = TPLA_EXECUTOR_HOST;
  c->rank = rank;
  c->nranks = nranks;
  c->device = -1;
  c->cfg = *conf;
  c->impl = h;
  *out = c;
  return TPLA_SUCCESS;
}

void host_ctx_discard(tpla_ctx_t ctx) {
  free(ctx->impl);
  free(ctx);
}

/* ---- public: create ------------------------------------------------------ */

tpla_status_t tpla_ctx_create_host(tpla_ctx_t *ctx, tpla_host_group_t group, int rank,
                                   const tpla_config_t *cfg) {
  static const char fn[] = "tpla_ctx_create_host";
  tpla_clear_error();
  if (ctx == NULL)
    return tpla_fail(TPLA_ERROR_INVALID_ARGUMENT, fn, "argument 'ctx' is NULL");
  if (group == NULL)
    return tpla_fail(TPLA_ERROR_INVALID_ARGUMENT, fn, "argument 'group' is NULL");
  int nranks = host_group_nranks(group);
  if (rank < 0 || rank >= nranks)
    return tpla_fail(TPLA_ERROR_INVALID_ARGUMENT, fn, "argument 'rank': %d is not in [0, %d)",
                     rank, nranks);
  if (host_group_shared(group) != NULL) /* a cross-process group: shm_ctx.c */
    return shm_ctx_create(ctx, group, rank, cfg, fn);
  tpla_config_t conf;
  TPLA_TRY(host_ctx_config(&conf, group, cfg, fn));
  tpla_ctx_t c = NULL;
  TPLA_TRY(host_ctx_new(&c, sizeof(host_ctx_t), &host_backend, rank, nranks, &conf, fn));
  tpla_status_t s = host_group_join(group, rank, fn);
  if (s != TPLA_SUCCESS) {
    host_ctx_discard(c);
    return s;
  }
  impl(c)->group = group;
  *ctx = c;
  return TPLA_SUCCESS;
}
