/*
 * shm_ctx.c - tpla_host_group_create_shared, and the contexts of a
 * cross-process host group: the backend table (collectives from
 * shm_coll.c; the GEMM, elementwise building blocks and scratch of the host
 * executor, which are per-process anyway; the plan-time exchange on the
 * all-gather), and the overlap transport, which is the host transport
 * restricted to SENDRECV (a rank cannot map a peer process's buffers).
 */
#include "shm.h"

#include "host_ops.h"
#include "overlap.h" /* tpla_host_xport_ops */

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

/* ---- public: the group ---------------------------------------------------------- */

static bool name_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
         c == '.' || c == '_' || c == '-';
}

tpla_status_t tpla_host_group_create_shared(tpla_host_group_t *group, const char *name,
                                            int nranks, int rank, const tpla_config_t *cfg) {
  static const char fn[] = "tpla_host_group_create_shared";
  tpla_clear_error();
  if (group == NULL)
    return tpla_fail(TPLA_ERROR_INVALID_ARGUMENT, fn, "argument 'group' is NULL");
  if (name == NULL)
    return tpla_fail(TPLA_ERROR_INVALID_ARGUMENT, fn, "argument 'name' is NULL");
  const char *body = name[0] == '/' ? name + 1 : name;
  size_t len = strlen(body);
  bool ok = len >= 1 && len <= 200 && strcmp(body, ".") != 0 && strcmp(body, "..") != 0;
  for (size_t i = 0; ok && i < len; i++)
    ok = name_char(body[i]);
  if (!ok)
    return tpla_fail(TPLA_ERROR_INVALID_ARGUMENT, fn,
                     "argument 'name': \"%.64s\" must be 1 to 200 characters of [A-Za-z0-9._-] "
                     "after an optional leading '/'",
                     name);
  if (nranks < 1 || nranks > TPLA_MAX_RANKS)
    return tpla_fail(TPLA_ERROR_INVALID_ARGUMENT, fn, "argument 'nranks': %d is not in [1, %d]",
                     nranks, TPLA_MAX_RANKS);
  if (rank < 0 || rank >= nranks)
    return tpla_fail(TPLA_ERROR_INVALID_ARGUMENT, fn, "argument 'rank': %d is not in [0, %d)",
                     rank, nranks);
  tpla_config_t conf;
  TPLA_TRY(tpla_check_config(fn, cfg, &conf));
  shm_group_t *shm = NULL;
  TPLA_TRY(shm_group_open(&shm, name, nranks, rank, &conf, fn));
  tpla_status_t s = host_group_wrap_shared(group, shm, nranks, &conf, fn);
  if (s != TPLA_SUCCESS)
    shm_group_close(shm);
  return s;
}

/* ---- backend methods -------------------------------------------------------------- */

static shm_ctx_t *impl(tpla_ctx_t ctx) { return (shm_ctx_t *)ctx->impl; }

static tpla_status_t shm_destroy(tpla_ctx_t ctx) {
  shm_ctx_t *h = impl(ctx);
  shm_group_leave(h->shm);
  host_scratch_free(&h->base.coll);
  host_scratch_free(&h->base.gemm);
  free(h);
  ctx->impl = NULL;
  return TPLA_SUCCESS;
}

/* The GEMM, elementwise building blocks, plan memory and streams are the
 * host executor's (host_ctx.c): they work on this context's base. */

/* The overlap transport: the host transport's SENDRECV mode (point-to-point
 * through the segment); PEER would need the peers' windows mapped here. */
static struct tpla_xport_ops shm_xport_ops;
static pthread_once_t shm_xport_once = PTHREAD_ONCE_INIT;

static tpla_status_t shm_xport_create(tpla_ctx_t ctx, const ovl_xport_desc_t *desc,
                                      tpla_xport_t **out) {
  *out = NULL;
  if (desc->kind == OVL_XPORT_PEER) /* the same verdict on every rank of the group */
    return tpla_fail(TPLA_ERROR_NOT_SUPPORTED, desc->fn,
                     "transport PEER: the ranks of a cross-process host group cannot map each "
                     "other's memory; use TPLA_TRANSPORT_SENDRECV or AUTO");
  ovl_xport_desc_t d = *desc;
  if (d.kind == OVL_XPORT_AUTO)
    d.kind = OVL_XPORT_SENDRECV;
  return tpla_host_xport_ops.create(ctx, &d, out);
}

static void shm_xport_init(void) {
  shm_xport_ops = tpla_host_xport_ops;
  shm_xport_ops.create = shm_xport_create;
}

static const tpla_backend_t shm_backend = {
    .name = "host-shared",
    .destroy = shm_destroy,
    .allreduce = shm_allreduce,
    .allgatherv = shm_allgatherv,
    .reduce_scatterv = shm_reduce_scatterv,
    .broadcast = shm_broadcast,
    .sendrecv = shm_sendrecv_m,
    .barrier = shm_barrier,
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
    .alltoallv = shm_alltoallv,
    .exchange = tpla_host_exchange, /* an all-gather of bytes: shm_allgatherv */
    .xport = &shm_xport_ops,
    .abort = host_abort,               /* host_ctx.c: breaks the shared group */
    .poll_failure = host_poll_failure, /* for every process of the group */
};

/* ---- contexts ------------------------------------------------------------------------ */

tpla_status_t shm_ctx_create(tpla_ctx_t *ctx, tpla_host_group_t group, int rank,
                             const tpla_config_t *cfg, const char *fn) {
  shm_group_t *shm = host_group_shared(group);
  if (rank != shm_group_rank(shm))
    return tpla_fail(TPLA_ERROR_INVALID_ARGUMENT, fn,
                     "argument 'rank': %d, but this process joined the shared group as rank %d",
                     rank, shm_group_rank(shm));
  tpla_config_t conf;
  TPLA_TRY(host_ctx_config(&conf, group, cfg, fn));
  pthread_once(&shm_xport_once, shm_xport_init);
  tpla_ctx_t c;
  TPLA_TRY(host_ctx_new(&c, sizeof(shm_ctx_t), &shm_backend, rank, host_group_nranks(group),
                        &conf, fn));
  tpla_status_t s = shm_group_join(shm, fn);
  if (s != TPLA_SUCCESS) {
    host_ctx_discard(c);
    return s;
  }
  impl(c)->base.group = group;
  impl(c)->shm = shm;
  *ctx = c;
  return TPLA_SUCCESS;
}
