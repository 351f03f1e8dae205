/*
 * shm_coll.c - the collectives of the cross-process host group.
 *
 * A rank never sees another rank's buffers, only its staging area in the
 * shared segment (shm.h). Every group-wide collective is a sequence of
 * rounds, the same number on every rank:
 *   stage (copy this rank's piece into its staging area) -> rendezvous ->
 *   read the peers' staging areas -> rendezvous (the areas may be reused)
 * The first rendezvous also carries the post, and every rank checks it
 * against rank 0's ("agree", as in host_coll.c), so a disagreement fails
 * with REMOTE everywhere before anything is written, after which every rank
 * does exactly one more rendezvous.
 *
 * Reductions: element i is summed over the ranks in order in fp32 (fp64 for
 * fp64) and rounded once - the thread group's exact arithmetic, so results
 * match it bit for bit. All-to-all: counts are agreed through the staging
 * areas, then data moves in P-1 pairwise point-to-point shifts.
 */
#include "shm.h"

#include <string.h>

static shm_ctx_t *impl(tpla_ctx_t ctx) { return (shm_ctx_t *)ctx->impl; }

/* Fingerprint of a counts array (FNV-1a over the values). */
static uint64_t hash_counts(const size_t *counts, int n) {
  uint64_t h = 1469598103934665603ull;
  for (int i = 0; i < n; i++) {
    h ^= (uint64_t)counts[i];
    h *= 1099511628211ull;
  }
  return h;
}

/* After the entry rendezvous: our own rejection, or REMOTE if any post
 * disagrees with rank 0's. The same verdict on every rank. */
static tpla_status_t agree(tpla_ctx_t ctx, const char *fn) {
  shm_group_t *g = impl(ctx)->shm;
  const shm_post_t *mine = shm_post(g, ctx->rank), *p0 = shm_post(g, 0);
  if (mine->local_status != TPLA_SUCCESS)
    return (tpla_status_t)mine->local_status; /* recorded before posting */
  for (int r = 0; r < ctx->nranks; r++) {
    const shm_post_t *p = shm_post(g, r);
    if (p->local_status != TPLA_SUCCESS)
      return tpla_fail(TPLA_ERROR_REMOTE, fn, "rank %d rejected its arguments (%s)", r,
                       tpla_status_string((tpla_status_t)p->local_status));
    if (p->kind != p0->kind)
      return tpla_fail(TPLA_ERROR_REMOTE, fn, "ranks disagree: rank 0 called %s, rank %d %s",
                       host_op_name(p0->kind), r, host_op_name(p->kind));
    if (p->dtype != p0->dtype)
      return tpla_fail(TPLA_ERROR_REMOTE, fn, "ranks disagree: rank 0 passed dtype %s, rank %d %s",
                       tpla_dtype_name((tpla_dtype_t)p0->dtype), r,
                       tpla_dtype_name((tpla_dtype_t)p->dtype));
    if (p->count != p0->count)
      return tpla_fail(TPLA_ERROR_REMOTE, fn,
                       "ranks disagree: rank 0 passed count %llu, rank %d passed %llu",
                       (unsigned long long)p0->count, r, (unsigned long long)p->count);
    if (p->total != p0->total || p->counts_hash != p0->counts_hash)
      return tpla_fail(TPLA_ERROR_REMOTE, fn,
                       "ranks disagree: the counts arrays of rank 0 (total %llu) and rank %d "
                       "(total %llu) differ",
                       (unsigned long long)p0->total, r, (unsigned long long)p->total);
    if (p->root != p0->root)
      return tpla_fail(TPLA_ERROR_REMOTE, fn, "ranks disagree: rank 0 passed root %d, rank %d %d",
                       p0->root, r, p->root);
  }
  return TPLA_SUCCESS;
}

/* Entry: post, rendezvous, agree. On a disagreement every rank does one
 * more rendezvous (so all leave together) and returns the verdict. */
static tpla_status_t enter(tpla_ctx_t ctx, const shm_post_t *post, const char *fn) {
  shm_group_t *g = impl(ctx)->shm;
  TPLA_TRY(shm_enter(g, post, ctx->cfg.timeout_ms, fn));
  tpla_status_t s = agree(ctx, fn);
  if (s != TPLA_SUCCESS) { /* a successful sync keeps the verdict's message */
    tpla_status_t t = shm_sync(g, 0, NULL, ctx->cfg.timeout_ms, fn);
    return t == TPLA_SUCCESS ? s : t;
  }
  return TPLA_SUCCESS;
}

static tpla_status_t sync(tpla_ctx_t ctx, const char *fn) {
  return shm_sync(impl(ctx)->shm, 0, NULL, ctx->cfg.timeout_ms, fn);
}

/* Elements per staging area. */
static size_t chunk_elems(tpla_ctx_t ctx, size_t es) {
  return shm_staging_bytes(impl(ctx)->shm) / es;
}

static const void *staging_of(void *group, int r) { return shm_staging(group, r); }

/* out[0..n) = sum over ranks (in order) of their staging areas at element
 * offset `first` (host_reduce_ranks: the thread group's arithmetic). */
static void reduce_staged(void *out, shm_group_t *g, int nranks, size_t first, size_t n,
                          tpla_dtype_t dtype) {
  host_reduce_ranks(out, staging_of, g, nranks, first, n, dtype);
}

/* ---- reductions ------------------------------------------------------------------ */

tpla_status_t shm_allreduce(tpla_ctx_t ctx, void *recv, const void *send, size_t count,
                            tpla_dtype_t dtype, void *stream) {
  static const char fn[] = "tpla_allreduce";
  shm_ctx_t *h = impl(ctx);
  size_t es = tpla_dtype_size(dtype), step = chunk_elems(ctx, es);
  shm_post_t post = {.kind = HOST_OP_ALLREDUCE, .dtype = dtype, .count = count};
  /* send == recv or apart: a round's send bytes are not yet written */
  post.local_status = tpla_check_in_place(fn, "send", send, count, "recv", recv, count, 0, dtype);
  for (size_t off = 0; off < count; off += step) {
    size_t n = count - off < step ? count - off : step;
    if (post.local_status == TPLA_SUCCESS)
      memcpy(shm_staging(h->shm, ctx->rank), (const char *)send + off * es, n * es);
    TPLA_TRY(off == 0 ? enter(ctx, &post, fn) : sync(ctx, fn));
    reduce_staged((char *)recv + off * es, h->shm, ctx->nranks, 0, n, dtype);
    TPLA_TRY(sync(ctx, fn));
  }
  return TPLA_SUCCESS;
}

tpla_status_t shm_reduce_scatterv(tpla_ctx_t ctx, void *recv, const void *send,
                                  const size_t *counts, tpla_dtype_t dtype, void *stream) {
  static const char fn[] = "tpla_reduce_scatterv";
  shm_ctx_t *h = impl(ctx);
  size_t es = tpla_dtype_size(dtype), step = chunk_elems(ctx, es);
  size_t total = tpla_sum_counts(counts, ctx->nranks), mine = counts[ctx->rank];
  size_t first = tpla_sum_counts(counts, ctx->rank), last = first + mine;
  shm_post_t post = {.kind = HOST_OP_REDUCE_SCATTERV, .dtype = dtype, .total = total,
                     .counts_hash = hash_counts(counts, ctx->nranks)};
  /* recv may be in place in send: reduce into scratch, copy at the end */
  post.local_status = tpla_check_in_place(fn, "recv", recv, mine, "send", send, total, first,
                                          dtype);
  if (post.local_status == TPLA_SUCCESS)
    post.local_status = host_scratch_reserve(&h->base.coll, mine * es, fn);
  for (size_t off = 0; off < total; off += step) {
    size_t n = total - off < step ? total - off : step;
    if (post.local_status == TPLA_SUCCESS)
      memcpy(shm_staging(h->shm, ctx->rank), (const char *)send + off * es, n * es);
    TPLA_TRY(off == 0 ? enter(ctx, &post, fn) : sync(ctx, fn));
    size_t lo = off > first ? off : first, hi = off + n < last ? off + n : last;
    if (lo < hi)
      reduce_staged((char *)h->base.coll.ptr + (lo - first) * es, h->shm, ctx->nranks, lo - off,
                    hi - lo, dtype);
    TPLA_TRY(sync(ctx, fn));
  }
  if (mine > 0)
    memcpy(recv, h->base.coll.ptr, mine * es);
  return TPLA_SUCCESS;
}

/* ---- data movement ------------------------------------------------------------- */

tpla_status_t shm_allgatherv(tpla_ctx_t ctx, void *recv, const void *send, const size_t *counts,
                             tpla_dtype_t dtype, void *stream) {
  static const char fn[] = "tpla_allgatherv";
  shm_ctx_t *h = impl(ctx);
  int n = ctx->nranks;
  size_t es = tpla_dtype_size(dtype), step = chunk_elems(ctx, es), most = 0;
  for (int r = 0; r < n; r++)
    most = counts[r] > most ? counts[r] : most;
  size_t own = counts[ctx->rank], own_at = tpla_sum_counts(counts, ctx->rank);
  shm_post_t post = {.kind = HOST_OP_ALLGATHERV, .dtype = dtype,
                     .total = tpla_sum_counts(counts, n), .counts_hash = hash_counts(counts, n)};
  post.local_status = tpla_check_in_place(fn, "send", send, own, "recv", recv, post.total,
                                          own_at, dtype);
  /* Round i moves elements [i*step, (i+1)*step) of every rank's block. */
  for (size_t off = 0; off == 0 || off < most; off += step) {
    if (post.local_status == TPLA_SUCCESS && off < own)
      memcpy(shm_staging(h->shm, ctx->rank), (const char *)send + off * es,
             (own - off < step ? own - off : step) * es);
    TPLA_TRY(off == 0 ? enter(ctx, &post, fn) : sync(ctx, fn));
    size_t at = 0;
    for (int r = 0; r < n; r++) {
      if (r != ctx->rank && off < counts[r]) {
        size_t len = counts[r] - off < step ? counts[r] - off : step;
        memcpy((char *)recv + (at + off) * es, shm_staging(h->shm, r), len * es);
      }
      at += counts[r];
    }
    TPLA_TRY(sync(ctx, fn));
  }
  if ((const char *)send != (char *)recv + own_at * es && own > 0)
    memcpy((char *)recv + own_at * es, send, own * es);
  return TPLA_SUCCESS;
}

tpla_status_t shm_broadcast(tpla_ctx_t ctx, void *buf, size_t count, tpla_dtype_t dtype,
                            int root, void *stream) {
  static const char fn[] = "tpla_broadcast";
  shm_ctx_t *h = impl(ctx);
  size_t es = tpla_dtype_size(dtype), step = chunk_elems(ctx, es);
  shm_post_t post = {.kind = HOST_OP_BROADCAST, .dtype = dtype, .count = count, .root = root};
  for (size_t off = 0; off < count; off += step) {
    size_t n = count - off < step ? count - off : step;
    if (ctx->rank == root)
      memcpy(shm_staging(h->shm, root), (const char *)buf + off * es, n * es);
    TPLA_TRY(off == 0 ? enter(ctx, &post, fn) : sync(ctx, fn));
    if (ctx->rank != root)
      memcpy((char *)buf + off * es, shm_staging(h->shm, root), n * es);
    TPLA_TRY(sync(ctx, fn));
  }
  return TPLA_SUCCESS;
}

tpla_status_t shm_barrier(tpla_ctx_t ctx, void *stream) {
  static const char fn[] = "tpla_barrier";
  shm_post_t post = {.kind = HOST_OP_BARRIER};
  TPLA_TRY(enter(ctx, &post, fn));
  return sync(ctx, fn); /* posts stay readable until all have compared */
}

tpla_status_t shm_sendrecv_m(tpla_ctx_t ctx, const void *send, size_t send_count, int dst,
                             void *recv, size_t recv_count, int src, tpla_dtype_t dtype,
                             void *stream) {
  static const char fn[] = "tpla_sendrecv";
  int me = ctx->rank;
  bool done;
  tpla_status_t local = host_sendrecv_check(ctx, fn, send, send_count, dst, recv, recv_count, src,
                                            dtype, &done);
  if (done)
    return local;
  /* A rejected call still meets its remote peers, so that they fail too. */
  return shm_sendrecv(impl(ctx)->shm, ctx->cfg.timeout_ms, fn, dtype, send, send_count,
                      dst == me ? -1 : dst, recv, recv_count, src == me ? -1 : src, local);
}

tpla_status_t shm_alltoallv(tpla_ctx_t ctx, void *recv, const size_t *recv_counts,
                            const size_t *recv_displs, const void *send,
                            const size_t *send_counts, const size_t *send_displs,
                            tpla_dtype_t dtype, void *stream) {
  static const char fn[] = "alltoallv";
  shm_group_t *g = impl(ctx)->shm;
  int n = ctx->nranks, me = ctx->rank;
  size_t es = tpla_dtype_size(dtype), send_end = 0, recv_end = 0;
  for (int r = 0; r < n; r++) {
    if (send_counts[r] > 0 && send_displs[r] + send_counts[r] > send_end)
      send_end = send_displs[r] + send_counts[r];
    if (recv_counts[r] > 0 && recv_displs[r] + recv_counts[r] > recv_end)
      recv_end = recv_displs[r] + recv_counts[r];
  }
  shm_post_t post = {.kind = HOST_OP_ALLTOALLV, .dtype = dtype};
  if (tpla_bytes_overlap(send, send_end * es, recv, recv_end * es))
    post.local_status = tpla_fail(TPLA_ERROR_INVALID_ARGUMENT, fn,
                                  "argument 'recv' overlaps 'send' (no in-place all-to-all)");
  uint64_t *staged = shm_staging(g, me); /* the send counts, for the peers to check */
  for (int r = 0; r < n; r++)
    staged[r] = send_counts[r];
  TPLA_TRY(enter(ctx, &post, fn));
  int bad_from = -1;
  size_t bad_count = 0;
  for (int r = 0; r < n && bad_from < 0; r++) {
    uint64_t theirs = ((const uint64_t *)shm_staging(g, r))[me];
    if (theirs != recv_counts[r]) {
      bad_from = r;
      bad_count = (size_t)theirs;
    }
  }
  int any = 0;
  TPLA_TRY(shm_sync(g, bad_from >= 0, &any, ctx->cfg.timeout_ms, fn));
  if (any) {
    if (bad_from >= 0)
      return tpla_fail(TPLA_ERROR_REMOTE, fn,
                       "ranks disagree: rank %d sends %zu elements here, recv_counts[%d] is %zu",
                       bad_from, bad_count, bad_from, recv_counts[bad_from]);
    return tpla_fail(TPLA_ERROR_REMOTE, fn, "ranks disagree on send and receive counts");
  }
  if (recv_counts[me] > 0)
    memmove((char *)recv + recv_displs[me] * es, (const char *)send + send_displs[me] * es,
            recv_counts[me] * es);
  for (int i = 1; i < n; i++) { /* shift i: to me + i, from me - i */
    int dst = (me + i) % n, src = (me - i + n) % n;
    TPLA_TRY(shm_sendrecv(g, ctx->cfg.timeout_ms, fn, dtype,
                          (const char *)send + send_displs[dst] * es, send_counts[dst], dst,
                          (char *)recv + recv_displs[src] * es, recv_counts[src], src,
                          TPLA_SUCCESS));
  }
  return TPLA_SUCCESS;
}
