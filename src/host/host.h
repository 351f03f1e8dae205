/*
 * host.h - internals of the host executor, shared by its files:
 *   group.c       the thread-rank group: per-rank slots, timed rendezvous,
 *                 point-to-point mailboxes, broken-group bookkeeping;
 *   host_ctx.c    tpla_ctx_create_host, the backend table, scratch;
 *   host_coll.c   the collectives;
 *   host_gemm.c   the CPU GEMM (Fortran BLAS sgemm_ or a blocked C loop);
 *   host_kernels.c the elementwise building blocks (axpby, sumsq, ...);
 *   shm_*.c       the cross-process group (shm.h), whose ranks are processes.
 *
 * Ranks are threads of one process, so a collective is: every rank posts a
 * description of its call (pointers included) in its slot, a timed
 * rendezvous, every rank checks that the posts agree and then reads the
 * other ranks' memory directly, and an untimed rendezvous so that nobody's
 * buffers change while others still read them.
 */
#ifndef TPLA_HOST_H
#define TPLA_HOST_H

#include "internal.h"

/* ---- grow-only scratch (one per purpose, per context) ------------------- */

typedef struct {
  void *ptr;
  size_t bytes;
} host_scratch_t;

/* Make s->ptr hold at least `bytes` (64-byte aligned; old contents are
 * lost). OUT_OF_MEMORY, reported as coming from `fn`, on failure. */
tpla_status_t host_scratch_reserve(host_scratch_t *s, size_t bytes, const char *fn);
void host_scratch_free(host_scratch_t *s);

/* ---- the group (group.c) ------------------------------------------------ */

typedef enum {
  HOST_OP_BARRIER = 1,
  HOST_OP_ALLREDUCE,
  HOST_OP_ALLGATHERV,
  HOST_OP_REDUCE_SCATTERV,
  HOST_OP_BROADCAST,
  HOST_OP_ALLTOALLV
} host_op_kind_t;

/* What a rank posts when it enters a group-wide collective. Fields that an
 * operation does not use stay zero, so posts compare field by field. */
typedef struct {
  host_op_kind_t kind;
  tpla_dtype_t dtype;
  size_t count;           /* allreduce/broadcast: count; allgatherv: own counts[rank] */
  size_t total;           /* *v: sum of counts */
  uint64_t counts_hash;   /* *v: fingerprint of the whole counts array */
  int root;               /* broadcast */
  const void *send;       /* send buffer (broadcast: buf) */
  void *recv;
  const void *scratch;    /* allreduce: this rank's reduced slice */
  const size_t *counts;   /* alltoallv: send counts; read only between rendezvous */
  const size_t *displs;   /* alltoallv: send displacements */
  tpla_status_t local_status; /* not SUCCESS: this rank rejected its own call */
} host_post_t;

int host_group_nranks(tpla_host_group_t g);

/* A group handle around a cross-process group (shm.h); destroying the
 * handle closes it. host_group_shared() returns it, or NULL for a thread
 * group. The in-process functions below apply to thread groups only. */
struct shm_group;
tpla_status_t host_group_wrap_shared(tpla_host_group_t *out, struct shm_group *shm, int nranks,
                                     const tpla_config_t *conf, const char *fn);
struct shm_group *host_group_shared(tpla_host_group_t g);
/* The group's configuration (defaults applied). */
const tpla_config_t *host_group_config(tpla_host_group_t g);

/* Break the group (thread or cross-process) for `why` unless it is broken
 * already (the first reason stays): every rank's waits in it end, and every
 * later collective fails, with REMOTE. Callable from any thread, also while
 * a rank waits in the group. tpla_ctx_abort's path (backend->abort). */
tpla_status_t host_group_break(tpla_host_group_t g, const char *why);
/* True if the group is broken, with the reason in why[size]. Cheap while
 * it is not (one atomic load); thread-safe. */
bool host_group_broken(tpla_host_group_t g, char *why, size_t size);

/* Register / unregister the context of `rank` (INVALID_USAGE if the rank
 * already has one). */
tpla_status_t host_group_join(tpla_host_group_t g, int rank, const char *fn);
void host_group_leave(tpla_host_group_t g, int rank);

/* Post `post` in the slot of `rank` and wait, at most timeout_ms, until
 * every rank has posted. TIMEOUT (and the group breaks) when time runs out,
 * REMOTE if the group is or becomes broken. On SUCCESS every post of this
 * operation can be read with host_group_post() until the next
 * host_group_sync(). */
tpla_status_t host_group_enter(tpla_host_group_t g, int rank, const host_post_t *post,
                               int64_t timeout_ms, const char *fn);
const host_post_t *host_group_post(tpla_host_group_t g, int rank);
/* Wait until every rank reaches this point; returns the OR of every rank's
 * `flag`. Untimed: it is only used after a successful host_group_enter,
 * when every rank is inside the same operation and only finite local work
 * remains before each arrives. */
int host_group_sync(tpla_host_group_t g, int flag);

/* Point-to-point: send `send_count` elements to `dst` and receive
 * `recv_count` from `src` (-1: none; both differ from `rank`). A rank that
 * rejected its own call passes that status as local_status: the transfer
 * then moves no data, its peers get REMOTE and it gets local_status back. */
tpla_status_t host_group_sendrecv(tpla_host_group_t g, int rank, int64_t timeout_ms,
                                  const char *fn, tpla_dtype_t dtype, const void *send,
                                  size_t send_count, int dst, void *recv, size_t recv_count,
                                  int src, tpla_status_t local_status);

/* ---- contexts (host_ctx.c) and collectives (host_coll.c) ---------------- */

/* ctx->impl of a host context. Scratch is per context and grow-only, so no
 * group-wide allocation has to be coordinated. */
typedef struct {
  tpla_host_group_t group;
  host_scratch_t coll; /* collectives: this rank's reduced slice */
  host_scratch_t gemm; /* GEMM: fp32 copies of half operands, packed panels */
} host_ctx_t;

tpla_status_t host_allreduce(tpla_ctx_t ctx, void *recv, const void *send, size_t count,
                             tpla_dtype_t dtype, void *stream);
tpla_status_t host_allgatherv(tpla_ctx_t ctx, void *recv, const void *send, const size_t *counts,
                              tpla_dtype_t dtype, void *stream);
tpla_status_t host_reduce_scatterv(tpla_ctx_t ctx, void *recv, const void *send,
                                   const size_t *counts, tpla_dtype_t dtype, void *stream);
tpla_status_t host_broadcast(tpla_ctx_t ctx, void *buf, size_t count, tpla_dtype_t dtype,
                             int root, void *stream);
tpla_status_t host_sendrecv(tpla_ctx_t ctx, const void *send, size_t send_count, int dst,
                            void *recv, size_t recv_count, int src, tpla_dtype_t dtype,
                            void *stream);
tpla_status_t host_barrier(tpla_ctx_t ctx, void *stream);
tpla_status_t host_alltoallv(tpla_ctx_t ctx, void *recv, const size_t *recv_counts,
                             const size_t *recv_displs, const void *send,
                             const size_t *send_counts, const size_t *send_displs,
                             tpla_dtype_t dtype, void *stream);

/* ---- shared by the thread group and the cross-process group ------------- */

/* Backend methods that do not depend on the kind of group (host_ctx.c).
 * They read ctx->impl as a host_ctx_t, which is also the first member of
 * a shared group's context (shm_ctx_t). */
size_t host_workspace_bytes(tpla_ctx_t ctx);
tpla_status_t host_gemm_m(tpla_ctx_t ctx, const tpla_gemm_call_t *call, void *stream);
tpla_status_t host_mem_alloc(tpla_ctx_t ctx, size_t bytes, void **ptr);
void host_mem_free(tpla_ctx_t ctx, void *ptr);
tpla_status_t host_axpby_m(tpla_ctx_t ctx, tpla_matrix_t y, tpla_matrix_t x, float alpha,
                           float beta, tpla_batch_t batch, void *stream);
tpla_status_t host_sumsq_m(tpla_ctx_t ctx, double *sumsq, tpla_matrix_t x, void *stream);
tpla_status_t host_scale_by_norm_m(tpla_ctx_t ctx, tpla_matrix_t y, tpla_matrix_t x,
                                   const double *sumsq, float safety, float eps, void *stream);
tpla_status_t host_normalize_list_m(tpla_ctx_t ctx, tpla_matrix_t y, tpla_batch_t batch,
                                   const tpla_matrix_t *x, const float *safety, const float *eps,
                                   double *sumsq, void *stream);
tpla_status_t host_store_list_m(tpla_ctx_t ctx, const tpla_matrix_t *x, tpla_matrix_t y,
                                tpla_batch_t batch, void *stream);
tpla_status_t host_zero_m(tpla_ctx_t ctx, tpla_matrix_t y, void *stream);
tpla_status_t host_mirror_upper_m(tpla_ctx_t ctx, tpla_matrix_t a, int64_t whole,
                                  tpla_batch_t batch, void *stream);
tpla_status_t host_add_diagonal_m(tpla_ctx_t ctx, tpla_matrix_t a, float value,
                                  tpla_batch_t batch, void *stream);
void *host_side_stream(tpla_ctx_t ctx, int i);
tpla_status_t host_stream_wait(tpla_ctx_t ctx, void *waiter, void *signaler);
void host_abort(tpla_ctx_t ctx);        /* backend->abort: breaks the group */
void host_poll_failure(tpla_ctx_t ctx); /* backend->poll_failure: a broken group */

/* Context creation (host_ctx.c). The configuration of a new context: the
 * group's, or cfg checked against it. */
tpla_status_t host_ctx_config(tpla_config_t *conf, tpla_host_group_t group,
                              const tpla_config_t *cfg, const char *fn);
/* Allocate a context and its zeroed impl of impl_bytes, filled in but for
 * the impl's fields (OUT_OF_MEMORY from `fn`); host_ctx_discard frees both
 * (when joining the group fails). */
tpla_status_t host_ctx_new(tpla_ctx_t *out, size_t impl_bytes, const tpla_backend_t *backend,
                           int rank, int nranks, const tpla_config_t *conf, const char *fn);
void host_ctx_discard(tpla_ctx_t ctx);

/* Collectives (host_coll.c). Name of an operation in messages. */
const char *host_op_name(int kind);

/* out[0..n) = sum over ranks r (in order) of rank_data(group, r) at element
 * offset `first`: fp32/fp64 in place, fp16/bf16 through fp32 accumulators
 * rounded once. */
void host_reduce_ranks(void *out, const void *(*rank_data)(void *group, int rank), void *group,
                       int nranks, size_t first, size_t n, tpla_dtype_t dtype);

/* The rank-local part of tpla_sendrecv: a self exchange (dst == src ==
 * rank) is done here (*done = true, its status returned); otherwise
 * *done = false and the result is the call's local status (not SUCCESS: it
 * rejected its own arguments but must still meet its remote peers). */
tpla_status_t host_sendrecv_check(tpla_ctx_t ctx, const char *fn, const void *send,
                                  size_t send_count, int dst, void *recv, size_t recv_count,
                                  int src, tpla_dtype_t dtype, bool *done);

/* ---- GEMM (host_gemm.c) ------------------------------------------------- */

/* Run a validated GEMM; scratch holds fp32 copies of half operands. */
tpla_status_t host_gemm_run(host_scratch_t *scratch, const tpla_gemm_call_t *call);

/* ---- elementwise building blocks (host_kernels.c) ----------------------- */

tpla_status_t host_axpby(tpla_matrix_t y, tpla_matrix_t x, float alpha, float beta);
tpla_status_t host_sumsq(double *sumsq, tpla_matrix_t x);
tpla_status_t host_zero(tpla_matrix_t y);
tpla_status_t host_scale_by_norm(tpla_matrix_t y, tpla_matrix_t x, const double *sumsq,
                                 float safety, float eps);
tpla_status_t host_mirror_upper(tpla_matrix_t a, int64_t whole);
tpla_status_t host_add_diagonal(tpla_matrix_t a, float value);

#endif /* TPLA_HOST_H */
