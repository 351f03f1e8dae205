/*
 * host_coll.c - the host executor's collectives.
 *
 * Every group-wide collective follows one pattern (see host.h):
 *   post -> timed rendezvous -> agree -> (read peers' memory) -> sync -> ...
 * "agree" compares every rank's post with rank 0's, so every rank reaches
 * the same verdict and a disagreement (different counts, dtypes, roots or
 * operations, or a rank that rejected its own arguments) fails with
 * TPLA_ERROR_REMOTE everywhere before anything is read or written. On that
 * path every operation does exactly one sync, so ranks that called
 * different operations still leave together.
 *
 * Reductions are deterministic: element i is summed by one rank, over the
 * ranks in order, in fp32 (fp64 for fp64), and rounded once.
 */
#include "host.h"

#include <stdlib.h>
#include <string.h>

static host_ctx_t *impl(tpla_ctx_t ctx) { return (host_ctx_t *)ctx->impl; }

/* ---- agreement ----------------------------------------------------------- */

const char *host_op_name(int k) {
  switch (k) {
  case HOST_OP_BARRIER: return "tpla_barrier";
  case HOST_OP_ALLREDUCE: return "tpla_allreduce";
  case HOST_OP_ALLGATHERV: return "tpla_allgatherv";
  case HOST_OP_REDUCE_SCATTERV: return "tpla_reduce_scatterv";
  case HOST_OP_BROADCAST: return "tpla_broadcast";
  case HOST_OP_ALLTOALLV: return "alltoallv";
  }
  return "?";
}

/* After a successful rendezvous: the rank's own rejection, else REMOTE if
 * any post disagrees with rank 0's or any rank rejected its call. */
static tpla_status_t agree(tpla_ctx_t ctx, const char *fn) {
  tpla_host_group_t g = impl(ctx)->group;
  const host_post_t *mine = host_group_post(g, ctx->rank);
  if (mine->local_status != TPLA_SUCCESS)
    return mine->local_status; /* its message was recorded before posting */
  const host_post_t *p0 = host_group_post(g, 0);
  for (int r = 0; r < ctx->nranks; r++) {
    const host_post_t *p = host_group_post(g, r);
    if (p->local_status != TPLA_SUCCESS)
      return tpla_fail(TPLA_ERROR_REMOTE, fn, "rank %d rejected its arguments (%s)", r,
                       tpla_status_string(p->local_status));
    if (p->kind != p0->kind)
      return tpla_fail(TPLA_ERROR_REMOTE, fn, "ranks disagree: rank 0 called %s, rank %d %s",
                       host_op_name(p0->kind), r, host_op_name(p->kind));
    if (p->dtype != p0->dtype)
      return tpla_fail(TPLA_ERROR_REMOTE, fn, "ranks disagree: rank 0 passed dtype %s, rank %d %s",
                       tpla_dtype_name(p0->dtype), r, tpla_dtype_name(p->dtype));
    if (p->kind != HOST_OP_ALLGATHERV && p->count != p0->count)
      return tpla_fail(TPLA_ERROR_REMOTE, fn,
                       "ranks disagree: rank 0 passed count %zu, rank %d passed %zu", p0->count,
                       r, p->count);
    if (p->total != p0->total || p->counts_hash != p0->counts_hash)
      return tpla_fail(TPLA_ERROR_REMOTE, fn,
                       "ranks disagree: the counts arrays of rank 0 (total %zu) and rank %d "
                       "(total %zu) differ",
                       p0->total, r, p->total);
    if (p->root != p0->root)
      return tpla_fail(TPLA_ERROR_REMOTE, fn, "ranks disagree: rank 0 passed root %d, rank %d %d",
                       p0->root, r, p->root);
  }
  return TPLA_SUCCESS;
}

/* Fingerprint of a counts array (splitmix64 steps). */
static uint64_t hash_counts(const size_t *counts, int n) {
  uint64_t h = 0x9e3779b97f4a7c15ull;
  for (int i = 0; i < n; i++) {
    uint64_t z = (h ^ (uint64_t)counts[i]) + 0x9e3779b97f4a7c15ull;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    h = z ^ (z >> 31);
  }
  return h;
}

static tpla_status_t enter(tpla_ctx_t ctx, host_post_t *post, const char *fn) {
  return host_group_enter(impl(ctx)->group, ctx->rank, post, ctx->cfg.timeout_ms, fn);
}

/* ---- reductions ---------------------------------------------------------- */

void host_reduce_ranks(void *out, const void *(*rank_data)(void *group, int rank), void *group,
                       int nranks, size_t first, size_t n, tpla_dtype_t dtype) {
  size_t es = tpla_dtype_size(dtype);
  if (n == 0)
    return; /* out may be NULL */
  if (dtype == TPLA_FLOAT32 || dtype == TPLA_FLOAT64) {
    memmove(out, (const char *)rank_data(group, 0) + first * es, n * es);
    for (int r = 1; r < nranks; r++) {
      const char *in = (const char *)rank_data(group, r) + first * es;
      if (dtype == TPLA_FLOAT32)
        for (size_t i = 0; i < n; i++)
          ((float *)out)[i] += ((const float *)in)[i];
      else
        for (size_t i = 0; i < n; i++)
          ((double *)out)[i] += ((const double *)in)[i];
    }
    return;
  }
  /* fp16/bf16: fp32 accumulators over chunks, one rounding at the end */
  enum { CHUNK = 512 };
  float acc[CHUNK];
  for (size_t c0 = 0; c0 < n; c0 += CHUNK) {
    size_t len = n - c0 < CHUNK ? n - c0 : CHUNK;
    for (int r = 0; r < nranks; r++) {
      const uint16_t *in = (const uint16_t *)rank_data(group, r) + first + c0;
      for (size_t i = 0; i < len; i++) {
        float v = dtype == TPLA_FLOAT16 ? tpla_half_to_float(in[i]) : tpla_bf16_to_float(in[i]);
        acc[i] = r == 0 ? v : acc[i] + v;
      }
    }
    uint16_t *o = (uint16_t *)out + c0;
    for (size_t i = 0; i < len; i++)
      o[i] = dtype == TPLA_FLOAT16 ? tpla_float_to_half(acc[i]) : tpla_float_to_bf16(acc[i]);
  }
}

/* The posted send buffer of rank r of a thread group. */
static const void *posted_send(void *group, int r) {
  return host_group_post((tpla_host_group_t)group, r)->send;
}

/* out[0..n) = sum over ranks of their posted send buffers at `first`. */
static void reduce_block(void *out, tpla_host_group_t g, int nranks, size_t first, size_t n,
                         tpla_dtype_t dtype) {
  host_reduce_ranks(out, posted_send, g, nranks, first, n, dtype);
}

/* Rank r's slice [lo, hi) of count elements split over n ranks. */
static void slice(size_t count, int n, int r, size_t *lo, size_t *hi) {
  size_t base = count / (size_t)n, extra = count % (size_t)n, rr = (size_t)r;
  *lo = base * rr + (rr < extra ? rr : extra);
  *hi = *lo + base + (rr < extra ? 1 : 0);
}

tpla_status_t host_allreduce(tpla_ctx_t ctx, void *recv, const void *send, size_t count,
                                    tpla_dtype_t dtype, void *stream) {
  static const char fn[] = "tpla_allreduce";
  host_ctx_t *h = impl(ctx);
  size_t es = tpla_dtype_size(dtype), lo, hi;
  slice(count, ctx->nranks, ctx->rank, &lo, &hi);
  host_post_t post = {.kind = HOST_OP_ALLREDUCE, .dtype = dtype, .count = count, .send = send,
                      .recv = recv};
  post.local_status = tpla_check_in_place(fn, "send", send, count, "recv", recv, count, 0, dtype);
  if (post.local_status == TPLA_SUCCESS)
    post.local_status = host_scratch_reserve(&h->coll, (hi - lo) * es, fn);
  post.scratch = h->coll.ptr;
  TPLA_TRY(enter(ctx, &post, fn));
  tpla_status_t s = agree(ctx, fn);
  if (s != TPLA_SUCCESS) {
    host_group_sync(h->group, 0);
    return s;
  }
  /* Reduce our slice into our scratch; after the sync everyone has read
   * every send buffer, so recv (which may be send) can be written. */
  reduce_block(h->coll.ptr, h->group, ctx->nranks, lo, hi - lo, dtype);
  host_group_sync(h->group, 0);
  for (int r = 0; r < ctx->nranks; r++) {
    size_t rlo, rhi;
    slice(count, ctx->nranks, r, &rlo, &rhi);
    if (rhi > rlo)
      memcpy((char *)recv + rlo * es, host_group_post(h->group, r)->scratch, (rhi - rlo) * es);
  }
  host_group_sync(h->group, 0); /* peers' scratch stays valid until all have copied */
  return TPLA_SUCCESS;
}

tpla_status_t host_reduce_scatterv(tpla_ctx_t ctx, void *recv, const void *send,
                                          const size_t *counts, tpla_dtype_t dtype,
                                          void *stream) {
  static const char fn[] = "tpla_reduce_scatterv";
  host_ctx_t *h = impl(ctx);
  size_t es = tpla_dtype_size(dtype), mine = counts[ctx->rank];
  size_t first = tpla_sum_counts(counts, ctx->rank);
  host_post_t post = {.kind = HOST_OP_REDUCE_SCATTERV, .dtype = dtype, .send = send,
                      .recv = recv, .total = tpla_sum_counts(counts, ctx->nranks),
                      .counts_hash = hash_counts(counts, ctx->nranks)};
  post.local_status = tpla_check_in_place(fn, "recv", recv, mine, "send", send, post.total,
                                          first, dtype);
  if (post.local_status == TPLA_SUCCESS)
    post.local_status = host_scratch_reserve(&h->coll, mine * es, fn);
  TPLA_TRY(enter(ctx, &post, fn));
  tpla_status_t s = agree(ctx, fn);
  if (s != TPLA_SUCCESS) {
    host_group_sync(h->group, 0);
    return s;
  }
  /* Equal totals make every read below in bounds even if the hashes lied. */
  reduce_block(h->coll.ptr, h->group, ctx->nranks, first, mine, dtype);
  host_group_sync(h->group, 0);
  if (mine > 0)
    memcpy(recv, h->coll.ptr, mine * es); /* recv may lie inside any send */
  return TPLA_SUCCESS;
}

/* ---- data movement ------------------------------------------------------- */

tpla_status_t host_allgatherv(tpla_ctx_t ctx, void *recv, const void *send,
                                     const size_t *counts, tpla_dtype_t dtype, void *stream) {
  static const char fn[] = "tpla_allgatherv";
  host_ctx_t *h = impl(ctx);
  size_t es = tpla_dtype_size(dtype), total = tpla_sum_counts(counts, ctx->nranks);
  host_post_t post = {.kind = HOST_OP_ALLGATHERV, .dtype = dtype, .count = counts[ctx->rank],
                      .send = send, .recv = recv, .total = total,
                      .counts_hash = hash_counts(counts, ctx->nranks)};
  /* peers read our send while we write recv */
  post.local_status = tpla_check_in_place(fn, "send", send, counts[ctx->rank], "recv", recv,
                                          total, tpla_sum_counts(counts, ctx->rank), dtype);
  TPLA_TRY(enter(ctx, &post, fn));
  tpla_status_t s = agree(ctx, fn);
  for (int r = 0; r < ctx->nranks && s == TPLA_SUCCESS; r++)
    if (host_group_post(h->group, r)->count != counts[r])
      s = tpla_fail(TPLA_ERROR_REMOTE, fn,
                    "ranks disagree: counts[%d] is %zu here but rank %d sends %zu", r, counts[r],
                    r, host_group_post(h->group, r)->count);
  if (s == TPLA_SUCCESS) {
    size_t offset = 0;
    for (int r = 0; r < ctx->nranks; r++) {
      const void *src = host_group_post(h->group, r)->send;
      char *dst = (char *)recv + offset * es;
      if (counts[r] > 0 && (const void *)dst != src)
        memmove(dst, src, counts[r] * es);
      offset += counts[r];
    }
  }
  host_group_sync(h->group, 0); /* our send stays untouched until all have read it */
  return s;
}

tpla_status_t host_broadcast(tpla_ctx_t ctx, void *buf, size_t count,
                                    tpla_dtype_t dtype, int root, void *stream) {
  static const char fn[] = "tpla_broadcast";
  host_ctx_t *h = impl(ctx);
  host_post_t post = {.kind = HOST_OP_BROADCAST, .dtype = dtype, .count = count, .root = root,
                      .send = buf};
  TPLA_TRY(enter(ctx, &post, fn));
  tpla_status_t s = agree(ctx, fn);
  const void *src = host_group_post(h->group, root)->send;
  if (s == TPLA_SUCCESS && ctx->rank != root && src != buf)
    memmove(buf, src, count * tpla_dtype_size(dtype));
  host_group_sync(h->group, 0);
  return s;
}

tpla_status_t host_barrier(tpla_ctx_t ctx, void *stream) {
  static const char fn[] = "tpla_barrier";
  host_post_t post = {.kind = HOST_OP_BARRIER};
  TPLA_TRY(enter(ctx, &post, fn));
  tpla_status_t s = agree(ctx, fn);
  host_group_sync(impl(ctx)->group, 0); /* posts stay readable until all have compared */
  return s;
}

tpla_status_t host_sendrecv_check(tpla_ctx_t ctx, const char *fn, const void *send,
                                  size_t send_count, int dst, void *recv, size_t recv_count,
                                  int src, tpla_dtype_t dtype, bool *done) {
  int me = ctx->rank;
  size_t es = tpla_dtype_size(dtype);
  *done = dst == me && src == me;
  TPLA_TRY(tpla_check_sendrecv_buffers(fn, send, dst < 0 ? 0 : send_count, recv,
                                       src < 0 ? 0 : recv_count, *done, dtype));
  if (*done) {
    if (send_count != recv_count)
      return tpla_fail(TPLA_ERROR_INVALID_ARGUMENT, fn,
                       "argument 'recv_count': a self exchange sends %zu elements but receives "
                       "%zu",
                       send_count, recv_count);
    if (send_count > 0 && recv != send)
      memcpy(recv, send, send_count * es);
    return TPLA_SUCCESS;
  }
  if (dst == me)
    return tpla_fail(TPLA_ERROR_INVALID_ARGUMENT, fn,
                     "argument 'src': dst is the calling rank %d, so src must be too (it is %d)",
                     me, src);
  if (src == me)
    return tpla_fail(TPLA_ERROR_INVALID_ARGUMENT, fn,
                     "argument 'dst': src is the calling rank %d, so dst must be too (it is %d)",
                     me, dst);
  return TPLA_SUCCESS;
}

tpla_status_t host_sendrecv(tpla_ctx_t ctx, const void *send, size_t send_count, int dst,
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
  return host_group_sendrecv(impl(ctx)->group, me, ctx->cfg.timeout_ms, fn, dtype, send,
                             send_count, dst == me ? -1 : dst, recv, recv_count,
                             src == me ? -1 : src, local);
}

tpla_status_t host_alltoallv(tpla_ctx_t ctx, void *recv, const size_t *recv_counts,
                                    const size_t *recv_displs, const void *send,
                                    const size_t *send_counts, const size_t *send_displs,
                                    tpla_dtype_t dtype, void *stream) {
  static const char fn[] = "alltoallv";
  host_ctx_t *h = impl(ctx);
  int n = ctx->nranks, me = ctx->rank;
  size_t es = tpla_dtype_size(dtype), send_end = 0, recv_end = 0;
  for (int r = 0; r < n; r++) {
    if (send_counts[r] > 0 && send_displs[r] + send_counts[r] > send_end)
      send_end = send_displs[r] + send_counts[r];
    if (recv_counts[r] > 0 && recv_displs[r] + recv_counts[r] > recv_end)
      recv_end = recv_displs[r] + recv_counts[r];
  }
  host_post_t post = {.kind = HOST_OP_ALLTOALLV, .dtype = dtype, .send = send, .recv = recv,
                      .counts = send_counts, .displs = send_displs};
  if (tpla_bytes_overlap(send, send_end * es, recv, recv_end * es))
    post.local_status = tpla_fail(TPLA_ERROR_INVALID_ARGUMENT, fn,
                                  "argument 'recv' overlaps 'send' (no in-place all-to-all)");
  TPLA_TRY(enter(ctx, &post, fn));
  tpla_status_t s = agree(ctx, fn);
  if (s != TPLA_SUCCESS) {
    host_group_sync(h->group, 0);
    return s;
  }
  /* What rank r sends us must be what we expect from r; all learn of any
   * mismatch through the sync's OR. */
  int bad_from = -1;
  size_t bad_count = 0;
  for (int r = 0; r < n && bad_from < 0; r++)
    if (host_group_post(h->group, r)->counts[me] != recv_counts[r]) {
      bad_from = r;
      bad_count = host_group_post(h->group, r)->counts[me];
    }
  /* Past this sync peers may leave and their posts change: use copies. */
  if (host_group_sync(h->group, bad_from >= 0)) {
    if (bad_from >= 0)
      return tpla_fail(TPLA_ERROR_REMOTE, fn,
                       "ranks disagree: rank %d sends %zu elements here, recv_counts[%d] is %zu",
                       bad_from, bad_count, bad_from, recv_counts[bad_from]);
    return tpla_fail(TPLA_ERROR_REMOTE, fn, "ranks disagree on send and receive counts");
  }
  for (int r = 0; r < n; r++) {
    const host_post_t *p = host_group_post(h->group, r);
    if (recv_counts[r] > 0)
      memmove((char *)recv + recv_displs[r] * es,
              (const char *)p->send + p->displs[me] * es, recv_counts[r] * es);
  }
  host_group_sync(h->group, 0);
  return TPLA_SUCCESS;
}
