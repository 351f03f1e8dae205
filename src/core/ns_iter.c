/*
 * ns_iter.c - the Newton-Schulz iteration engine on one oriented matrix X
 * (s x l, Gram over s), shared by every algorithm: the local case, the Gram
 * all-reduce (X is a rank's part, the Gram is summed over ranks), and the
 * redistributed and gathered cases. Also the normalization and thin backend
 * wrappers. Only backend calls; no allocation.
 *
 * One step, X <- a X + (b A + c A^2) X with A = X X^T, runs as a list of ops
 * (ns_op_t) built at plan time:
 *   SQUARE update: GRAM, MIRROR, SQUARE, [CAST], UPDATE
 *   CHAIN update:  GRAM, MIRROR, [CAST], UPDATE_CHAIN
 *   GRAM_SHARDED:  GRAM, MIRROR, SHARD_POLY (ns_shard.c), UPDATE
 * (distributed, GRAM all-reduces each block row behind the next one)
 * SQUARE computes P = c A^2 + b A in the square's GEMMs (C = A's block,
 * beta = b), not in a pass of its own. The CHAIN update never forms A^2:
 * W = c A X + b X (one GEMM, C = X), X = a X + A W; cheaper when a rank's
 * l is small next to s (see ns_cost.c).
 *
 * The memory-bound passes left per step are the mirrors and casts; a
 * symmetric product of one block row (s below two sym_min_blocks) is whole
 * and gets no mirror. (The Gram iteration's products of commuting matrices
 * keep theirs: the mirror makes them exactly symmetric, and without it the
 * half-precision iteration drifts.) With HALF products (ns_products) no
 * fp32 matrix is mirrored in place: the square reads A's fp16 copy and P
 * reaches the input dtype by ns_sym_copy, each from the upper block rows,
 * mirrored whole in the narrower dtype. The
 * SQUARE update copies no X when the temp holds all of it: each step writes
 * X' = P X + a X into the other buffer (C = X), so X alternates between the
 * caller's matrix and the temp (ns_iter_end says where it ends); the
 * callers start where an odd number of steps ends in their matrix, e.g. by
 * normalizing into the temp. With a smaller temp the update runs over
 * column chunks, each copied to the temp first.
 */
#include "ns.h"

#include <inttypes.h>
#include <stdint.h>

size_t ns_layout_take(ns_layout_t *l, size_t bytes) {
  if (l->bytes > SIZE_MAX - NS_ALIGN || bytes > SIZE_MAX - NS_ALIGN - l->bytes) {
    l->bytes = SIZE_MAX; /* saturated: no allocation can be that large */
    return 0;
  }
  size_t off = (l->bytes + NS_ALIGN - 1) / NS_ALIGN * NS_ALIGN;
  l->bytes = off + bytes;
  return off;
}

tpla_matrix_t ns_dense(void *data, int64_t rows, int64_t cols, tpla_dtype_t dtype) {
  tpla_matrix_t m = {data, rows, cols, cols > 0 ? cols : 1, dtype};
  if (rows == 0 || cols == 0)
    m.data = NULL;
  return m;
}

tpla_matrix_t ns_sub(tpla_matrix_t m, int64_t r0, int64_t nr, int64_t c0, int64_t nc) {
  tpla_matrix_t s = {NULL, nr, nc, m.ld, m.dtype};
  if (nr > 0 && nc > 0 && m.data != NULL)
    s.data = (char *)m.data + (size_t)(r0 * m.ld + c0) * tpla_dtype_size(m.dtype);
  return s;
}

/* Rows [r0, r0+nr) and columns [c0, c0+nc) of op(x). */
static ns_opmat_t op_rows(ns_opmat_t x, int64_t r0, int64_t nr) {
  ns_opmat_t r = x;
  r.v = x.t ? ns_sub(x.v, 0, x.v.rows, r0, nr) : ns_sub(x.v, r0, nr, 0, x.v.cols);
  return r;
}
static ns_opmat_t op_cols(ns_opmat_t x, int64_t c0, int64_t nc) {
  ns_opmat_t r = x;
  r.v = x.t ? ns_sub(x.v, c0, nc, 0, x.v.cols) : ns_sub(x.v, 0, x.v.rows, c0, nc);
  return r;
}
static ns_opmat_t op_transpose(ns_opmat_t x) {
  x.t = !x.t;
  return x;
}
static ns_opmat_t plain(tpla_matrix_t v) { return (ns_opmat_t){v, false}; }

tpla_status_t ns_axpby(tpla_ctx_t ctx, tpla_matrix_t y, tpla_matrix_t x, float alpha, float beta,
                       void *stream) {
  if (y.rows == 0 || y.cols == 0)
    return TPLA_SUCCESS;
  return ctx->backend->axpby(ctx, y, x, alpha, beta, ctx->ns_batch, stream);
}

tpla_status_t ns_mirror(tpla_ctx_t ctx, tpla_matrix_t a, int64_t whole, void *stream) {
  return ctx->backend->mirror_upper(ctx, a, whole, ctx->ns_batch, stream);
}

tpla_status_t ns_add_diagonal(tpla_ctx_t ctx, tpla_matrix_t a, float value, void *stream) {
  return ctx->backend->add_diagonal(ctx, a, value, ctx->ns_batch, stream);
}

/* op(d) = alpha op(a) op(b) + beta op(c); c NULL: c is d. A separate c is
 * stored as d is (same transpose flag and stored shape), so the operand
 * swap of a transposed d carries over to it unchanged. */
static tpla_status_t gemm_op(tpla_ctx_t ctx, ns_opmat_t d, ns_opmat_t a, ns_opmat_t b,
                             const ns_opmat_t *c, float alpha, float beta, int tf32,
                             void *stream) {
  if (c != NULL && (c->t != d.t || c->v.rows != d.v.rows || c->v.cols != d.v.cols ||
                    c->v.dtype != d.v.dtype))
    return tpla_fail(TPLA_ERROR_INTERNAL, "ns_gemm_c",
                     "C (%" PRId64 "x%" PRId64 "%s) is not stored as D (%" PRId64 "x%" PRId64
                     "%s)", c->v.rows, c->v.cols, c->t ? "^T" : "", d.v.rows, d.v.cols,
                     d.t ? "^T" : "");
  if (d.t) { /* op(D) = op(A) op(B)  <=>  D = op(B)^T op(A)^T */
    ns_opmat_t a2 = op_transpose(b), b2 = op_transpose(a);
    a = a2;
    b = b2;
    d.t = false;
  }
  int64_t m = d.v.rows, n = d.v.cols, k = a.t ? a.v.rows : a.v.cols;
  if (m == 0 || n == 0)
    return TPLA_SUCCESS;
  tpla_gemm_call_t call = {.d = d.v, .a = a.v, .b = b.v, .op_a = a.t ? TPLA_OP_T : TPLA_OP_N,
                           .op_b = b.t ? TPLA_OP_T : TPLA_OP_N, .m = m, .n = n, .k = k,
                           .alpha = alpha, .beta = beta, .allow_tf32 = tf32, /* fp8: none */
                           .c = c != NULL ? &c->v : NULL, .batch = ctx->ns_batch};
  return ctx->backend->gemm(ctx, &call, stream);
}

tpla_status_t ns_gemm_tf32(tpla_ctx_t ctx, ns_opmat_t d, ns_opmat_t a, ns_opmat_t b, float alpha,
                           float beta, int tf32, void *stream) {
  return gemm_op(ctx, d, a, b, NULL, alpha, beta, tf32, stream);
}

tpla_status_t ns_gemm_c(tpla_ctx_t ctx, ns_opmat_t d, ns_opmat_t a, ns_opmat_t b, ns_opmat_t c,
                        float alpha, float beta, int tf32, void *stream) {
  return gemm_op(ctx, d, a, b, &c, alpha, beta, tf32, stream);
}

tpla_status_t ns_gemm(tpla_ctx_t ctx, ns_opmat_t d, ns_opmat_t a, ns_opmat_t b, float alpha,
                      float beta, void *stream) {
  return ns_gemm_tf32(ctx, d, a, b, alpha, beta, 0, stream);
}

int64_t ns_sym_edge(int64_t s, int nb) { return (s + nb - 1) / nb; }

/* Elements of the upper block rows of an s x s symmetric product in nb
 * blocks, packed (block row i: t x (s - i t), t = ceil(s / nb)). */
static size_t sym_packed_elems(int64_t s, int nb) {
  int64_t t = ns_sym_edge(s, nb);
  size_t n = 0;
  for (int64_t i0 = 0; i0 < s; i0 += t)
    n += (size_t)((s - i0 < t ? s - i0 : t) * (s - i0));
  return n;
}

/* dst (s x s) = X Y^T for op(x), op(y) s x k whose product is symmetric
 * (the Gram X X^T, or a product of commuting symmetric matrices, y = the
 * second factor, which equals its transpose): one GEMM per block row of the
 * upper triangle (block row i times block rows i..nb-1); the caller mirrors.
 * With `add` (s x s, not dst; pack NULL only): dst = alpha X Y^T + beta add,
 * each block row's C the same block of add.
 * With `pack` (the distributed Gram), each block row is computed packed
 * into `pack` (h x (s - i0), contiguous), summed over the ranks and placed
 * at its diagonal in dst on a side stream while the next block row is
 * computed; the stream joins the side stream at the end. So the per-step
 * collective hides behind the Gram and moves the upper triangle only
 * ((nb+1)/(2 nb) of the matrix, not its full block rows). */
tpla_status_t ns_sym_product(tpla_ctx_t ctx, tpla_matrix_t dst, ns_opmat_t x, ns_opmat_t y,
                             int nb, int tf32, void *pack, const tpla_matrix_t *add, float alpha,
                             float beta, void *stream) {
  int64_t s = dst.rows, t = ns_sym_edge(s, nb);
  if (pack != NULL && ctx->ns_batch.count > 1)
    return tpla_fail(TPLA_ERROR_INTERNAL, "ns_sym_product", "a batch is never all-reduced");
  void *side = pack != NULL ? ctx->backend->side_stream(ctx, 0) : NULL;
  size_t at = 0;
  for (int64_t i0 = 0; i0 < s; i0 += t) {
    int64_t h = s - i0 < t ? s - i0 : t;
    tpla_matrix_t d = ns_sub(dst, i0, h, i0, s - i0);
    if (pack == NULL) {
      ns_opmat_t c = plain(add != NULL ? ns_sub(*add, i0, h, i0, s - i0) : d);
      TPLA_TRY(gemm_op(ctx, plain(d), op_rows(x, i0, h), op_transpose(op_rows(y, i0, s - i0)),
                       add != NULL ? &c : NULL, alpha, beta, tf32, stream));
      continue;
    }
    tpla_matrix_t p = ns_dense((char *)pack + at * tpla_dtype_size(dst.dtype), h, s - i0,
                               dst.dtype);
    at += (size_t)(h * (s - i0));
    void *on = side != NULL ? side : stream;
    TPLA_TRY(ns_gemm_tf32(ctx, plain(p), op_rows(x, i0, h), op_transpose(op_rows(y, i0, s - i0)),
                          1.0f, 0.0f, tf32, stream));
    TPLA_TRY(ctx->backend->stream_wait(ctx, side, stream));
    TPLA_TRY(ctx->backend->allreduce(ctx, p.data, p.data, (size_t)(h * (s - i0)), dst.dtype, on));
    TPLA_TRY(ns_axpby(ctx, d, p, 1.0f, 0.0f, on));
  }
  if (pack != NULL)
    TPLA_TRY(ctx->backend->stream_wait(ctx, stream, side));
  return TPLA_SUCCESS;
}

tpla_status_t ns_sym_copy(tpla_ctx_t ctx, tpla_matrix_t dst, tpla_matrix_t src, float scale, int nb,
                          void *stream) {
  int64_t s = src.rows, t = ns_sym_edge(s, nb);
  for (int64_t i0 = 0; i0 < s; i0 += t) {
    int64_t h = s - i0 < t ? s - i0 : t;
    TPLA_TRY(ns_axpby(ctx, ns_sub(dst, i0, h, i0, s - i0), ns_sub(src, i0, h, i0, s - i0), scale,
                      0.0f, stream));
  }
  return ns_mirror(ctx, dst, 0, stream); /* all of it: exactly symmetric */
}

tpla_status_t ns_operand(tpla_ctx_t ctx, const ns_iter_t *it, ns_operand_t *o, tpla_matrix_t v,
                         void *at, double bound, int nb, void *stream) {
  *o = (ns_operand_t){v, v, 0.0f};
  if (it->products != NS_PRODUCTS_HALF)
    return TPLA_SUCCESS;
  if (at == NULL || (o->scale = ns_half_scale(bound)) == 0.0f)
    return ns_mirror(ctx, v, 0, stream); /* read whole by TF32 products */
  o->h = ns_dense(at, v.rows, v.cols, TPLA_FLOAT16);
  return ns_sym_copy(ctx, o->h, v, o->scale, nb, stream);
}

tpla_status_t ns_operand_product(tpla_ctx_t ctx, const ns_iter_t *it, tpla_matrix_t d,
                                 const ns_operand_t *x, const ns_operand_t *y, int nb,
                                 const tpla_matrix_t *add, float alpha, float beta,
                                 void *stream) {
  if (x->scale != 0.0f && y->scale != 0.0f) /* powers of two: exact */
    return ns_sym_product(ctx, d, plain(x->h), plain(y->h), nb, 0, NULL, add,
                          alpha / (x->scale * y->scale), beta, stream);
  if (x->scale != 0.0f) /* the other has none: both whole, in TF32 */
    TPLA_TRY(ns_mirror(ctx, x->v, 0, stream));
  if (y->scale != 0.0f && y->v.data != x->v.data)
    TPLA_TRY(ns_mirror(ctx, y->v, 0, stream));
  return ns_sym_product(ctx, d, plain(x->v), plain(y->v), nb,
                        it->products != NS_PRODUCTS_PLAIN, NULL, add, alpha, beta, stream);
}

tpla_status_t ns_gram_row(tpla_ctx_t ctx, tpla_matrix_t d, ns_opmat_t x, int64_t i0, int64_t h,
                          void *stream) {
  int64_t s = i0 + d.cols;
  return ns_gemm_tf32(ctx, plain(d), op_rows(x, i0, h), op_transpose(op_rows(x, i0, s - i0)),
                      1.0f, 0.0f, 0, stream);
}

tpla_status_t ns_gram(tpla_ctx_t ctx, const ns_iter_t *it, tpla_matrix_t g, ns_opmat_t x,
                      void *stream) {
  if (it->pull != NULL)
    return ns_pull_gram(ctx, it->pull, g, x, it->nblocks, stream);
  return ns_sym_product(ctx, g, x, x, it->nblocks, 0, it->allreduce ? it->arp : NULL, NULL, 1.0f,
                        0.0f, stream);
}

size_t ns_iter_allreduce_bytes(int64_t s, int nb, tpla_dtype_t gram_dtype) {
  return sym_packed_elems(s, nb) * tpla_dtype_size(gram_dtype);
}

void ns_iter_base(ns_iter_t *it, const ns_machine_t *mach, int64_t s, int64_t l,
                  tpla_dtype_t dtype, tpla_dtype_t gram_dtype, ns_sum_t sum,
                  int64_t temp_cap) {
  *it = (ns_iter_t){0};
  it->s = s;
  it->l = l;
  it->dtype = dtype;
  it->gram_dtype = gram_dtype;
  it->allreduce = sum != NS_SUM_NONE;
  it->products = ns_products(dtype, gram_dtype, s, sum == NS_SUM_NONE);
  it->nblocks = ns_sym_blocks(mach, s);
  if (l > 0) {
    int64_t w = temp_cap / (s > 0 ? s : 1);
    it->chunk = w < 1 ? 1 : w > l ? l : w;
  }
}

void ns_iter_setup(ns_iter_t *it, const ns_machine_t *mach, int64_t s, int64_t l,
                   tpla_dtype_t dtype, tpla_dtype_t gram_dtype, ns_sum_t sum, bool gram_iter,
                   int64_t temp_cap, ns_layout_t *layout) {
  ns_iter_base(it, mach, s, l, dtype, gram_dtype, sum, temp_cap);
  bool cast = gram_dtype != dtype;
  size_t ss = (size_t)s * (size_t)s, gsz = tpla_dtype_size(gram_dtype);
  if (gram_iter) { /* G, three s x s scratch matrices (ns_gram_iter.c), the cast */
    it->gram_iter = true;
    it->update = NS_UPDATE_SQUARE; /* X' = (alpha I + W) X, as P X + a X */
    it->off_g1 = ns_layout_take(layout, ss * gsz);
    it->off_g2 = ns_layout_take(layout, ss * gsz); /* also the all-reduce's packed rows */
    it->off_g4 = ns_layout_take(layout, ss * gsz);
    it->off_g5 = ns_layout_take(layout, ss * gsz);
    it->off_g3 = ns_layout_take(layout, cast ? ss * tpla_dtype_size(dtype) : 0);
    it->off_arp = it->off_g2;
    return;
  }
  ns_step_time(mach, s, l, dtype, gram_dtype, sum == NS_SUM_NONE, &it->update);
  ns_op_t *op = it->ops;
  *op++ = NS_OP_GRAM; /* all-reduced block row by block row when distributed */
  *op++ = NS_OP_MIRROR_GRAM;
  if (it->update == NS_UPDATE_SQUARE) {
    *op++ = NS_OP_SQUARE; /* the polynomial too */
    if (cast)
      *op++ = NS_OP_CAST_POLY;
    *op++ = NS_OP_UPDATE_SQUARE;
  } else {
    if (cast)
      *op++ = NS_OP_CAST_GRAM;
    *op++ = NS_OP_UPDATE_CHAIN;
  }
  it->nops = (int)(op - it->ops);
  /* The packed Gram of the all-reduce (ns_sym_product) borrows g2: the
   * square is computed after it, and CHAIN has no other use for g2. */
  size_t g2 = it->update == NS_UPDATE_SQUARE ? ss * gsz : 0;
  size_t packed = sum == NS_SUM_ALLREDUCE ? ns_iter_allreduce_bytes(s, it->nblocks, gram_dtype)
                                           : 0;
  it->off_g1 = ns_layout_take(layout, ss * gsz);
  it->off_g2 = ns_layout_take(layout, g2 > packed ? g2 : packed);
  it->off_g3 = ns_layout_take(layout, cast ? ss * tpla_dtype_size(dtype) : 0);
  it->off_arp = it->off_g2;
}

void ns_iter_bind(ns_iter_t *it, void *base, void *temp) {
  it->g1 = ns_at(base, it->off_g1);
  it->g2 = ns_at(base, it->off_g2);
  it->g3 = ns_at(base, it->off_g3);
  it->g4 = ns_at(base, it->off_g4);
  it->g5 = ns_at(base, it->off_g5);
  it->pk = ns_at(base, it->off_pk);
  it->arp = ns_at(base, it->off_arp);
  it->temp = temp;
  if (it->grams_mapped && it->pull != NULL) { /* ns_pull_create placed them */
    it->g1 = ns_pull_mapped(it->pull, 0);
    it->g2 = ns_pull_mapped(it->pull, 1);
    it->g4 = ns_pull_mapped(it->pull, 2);
    it->g5 = ns_pull_mapped(it->pull, 3);
  }
}

/* The SQUARE update alternates X and the temp when the temp holds all of X. */
static bool pingpong(const ns_iter_t *it) {
  return it->update == NS_UPDATE_SQUARE && it->l > 0 && it->chunk == it->l;
}

ns_where_t ns_iter_end(const ns_iter_t *it, int steps, ns_where_t start) {
  int moves = it->gram_iter ? ns_gram_segments(steps) : steps; /* X updates */
  if (!pingpong(it) || moves % 2 == 0)
    return start;
  return start == NS_IN_X ? NS_IN_TEMP : NS_IN_X;
}

ns_opmat_t ns_iter_temp(const ns_iter_t *it, ns_opmat_t x) {
  return (ns_opmat_t){ns_dense(it->temp, x.v.rows, x.v.cols, it->dtype), x.t};
}

/* P (SQUARE) or A (CHAIN) in the input dtype; GRAM_SHARDED gathers P in g3. */
static tpla_matrix_t update_operand(const ns_iter_t *it) {
  bool cast = it->gram_dtype != it->dtype || it->split.nranks > 0;
  return ns_dense(it->update == NS_UPDATE_SQUARE ? (cast ? it->g3 : it->g2)
                                                 : (cast ? it->g3 : it->g1),
                  it->s, it->s, it->dtype);
}

/* The update of X by chunks of columns (they are independent: the Gram-side
 * matrix multiplies from the left), so the temp holds one chunk only. */
static tpla_status_t update_chunks(tpla_ctx_t ctx, const ns_iter_t *it, ns_opmat_t x,
                                   tpla_matrix_t g, float a, float b, float c, void *stream) {
  for (int64_t j0 = 0; j0 < it->l; j0 += it->chunk) {
    int64_t w = it->l - j0 < it->chunk ? it->l - j0 : it->chunk;
    ns_opmat_t xc = op_cols(x, j0, w);
    ns_opmat_t tc = {ns_dense(it->temp, xc.v.rows, xc.v.cols, it->dtype), xc.t};
    if (it->update == NS_UPDATE_SQUARE) {
      /* T = X_c; X_c = a X_c + P T with P = b A + c A^2 */
      TPLA_TRY(ns_axpby(ctx, tc.v, xc.v, 1.0f, 0.0f, stream));
      TPLA_TRY(ns_gemm(ctx, xc, plain(g), tc, 1.0f, a, stream));
    } else if (c != 0.0f) {
      /* Horner: W = c A X_c + b X_c (one GEMM, C = X_c); X_c = a X_c + A W.
       * One rounding of W instead of separate b Y and c A Y terms keeps the
       * half-precision error near the SQUARE update's. */
      TPLA_TRY(ns_gemm_c(ctx, tc, plain(g), xc, xc, c, b, 0, stream));
      TPLA_TRY(ns_gemm(ctx, xc, plain(g), tc, 1.0f, a, stream));
    } else { /* c = 0: Y = A X_c; X_c = a X_c + b Y */
      TPLA_TRY(ns_gemm(ctx, tc, plain(g), xc, 1.0f, 0.0f, stream));
      TPLA_TRY(ns_axpby(ctx, xc.v, tc.v, b, a, stream));
    }
  }
  return TPLA_SUCCESS;
}

bool ns_update_pingpong(const ns_iter_t *it) { return pingpong(it); }

tpla_status_t ns_update_rows(tpla_ctx_t ctx, const ns_iter_t *it, ns_opmat_t place[2], int at,
                             tpla_matrix_t p, float a, int64_t r0, int64_t h, void *stream) {
  return ns_gemm_c(ctx, op_rows(place[!at], r0, h), plain(ns_sub(p, r0, h, 0, it->s)), place[at],
                   op_rows(place[at], r0, h), 1.0f, a, 0, stream);
}

tpla_status_t ns_update_square(tpla_ctx_t ctx, const ns_iter_t *it, ns_opmat_t place[2], int *at,
                               tpla_matrix_t p, float a, void *stream) {
  if (!pingpong(it))
    return update_chunks(ctx, it, place[*at], p, a, 0.0f, 0.0f, stream);
  /* X' = P X + a X into the other place: no copy of X */
  TPLA_TRY(ns_gemm_c(ctx, place[!*at], plain(p), place[*at], place[*at], 1.0f, a, 0, stream));
  *at = !*at;
  return TPLA_SUCCESS;
}

tpla_status_t ns_iterate(tpla_ctx_t ctx, const ns_iter_t *it, ns_opmat_t x, ns_where_t start,
                         ns_where_t end, const float *table, int steps, double sigma0,
                         void *stream) {
  int64_t s = it->s;
  bool pp = pingpong(it);
  if ((start == NS_IN_TEMP || end == NS_IN_TEMP) && !pp && it->l > 0)
    return tpla_fail(TPLA_ERROR_INTERNAL, "ns_iterate",
                     "X (%" PRId64 "x%" PRId64 ") cannot live in the update temp: it holds "
                     "%" PRId64 " of its columns, or the update is CHAIN", s, it->l, it->chunk);
  tpla_matrix_t g1 = ns_dense(it->g1, s, s, it->gram_dtype);
  tpla_matrix_t g2 = ns_dense(it->g2, s, s, it->gram_dtype);
  tpla_matrix_t g3 = ns_dense(it->g3, s, s, it->dtype);
  tpla_matrix_t p = update_operand(it); /* SHARD_POLY may put it elsewhere */
  /* The two places X can be; `at` indexes the current one. */
  ns_opmat_t place[2] = {x, ns_iter_temp(it, x)};
  int at = start == NS_IN_TEMP;
  if (ns_iter_end(it, steps, start) != end) { /* one copy, so that the last step lands at end */
    TPLA_TRY(ns_axpby(ctx, place[!at].v, place[at].v, 1.0f, 0.0f, stream));
    at = !at;
  }
  if (it->gram_iter)
    return ns_gram_iterate(ctx, it, place, at, table, steps, sigma0, stream);
  int tf32 = it->products != NS_PRODUCTS_PLAIN; /* SHARD_POLY's: never HALF */
  /* HALF: the square reads A's fp16 copy and its C A's upper block rows, so
   * neither A nor P (copied into g3 in the input dtype) is mirrored in place */
  const bool half = it->products == NS_PRODUCTS_HALF && it->update == NS_UPDATE_SQUARE;
  double sigma = sigma0; /* bounds this step's singular values */
  /* Every block row's GEMM computes its diagonal block whole (ns_sym_product,
   * the all-reduced and the pulled Gram alike): the mirrors skip them. */
  int64_t edge = ns_sym_edge(s, it->nblocks);
  for (int k = 0; k < steps; k++) {
    float a = table[3 * k], b = table[3 * k + 1], c = table[3 * k + 2];
    for (int i = 0; i < it->nops; i++) {
      switch (it->ops[i]) {
      case NS_OP_GRAM:
        TPLA_TRY(ns_gram(ctx, it, g1, place[at], stream));
        break;
      case NS_OP_MIRROR_GRAM:
        if (it->nblocks > 1 && !half) /* one block row: the whole Gram */
          TPLA_TRY(ns_mirror(ctx, g1, edge, stream));
        break;
      case NS_OP_SQUARE:
        if (c != 0.0f) { /* P = c A^2 + b A: beta = b with C = A's block */
          ns_operand_t A; /* in fp16: g3, free until the cast of P */
          TPLA_TRY(ns_operand(ctx, it, &A, g1, it->g3, sigma * sigma, it->nblocks, stream));
          TPLA_TRY(ns_operand_product(ctx, it, g2, &A, &A, it->nblocks, &g1, c, b, stream));
          if (it->nblocks > 1 && !half)
            TPLA_TRY(ns_mirror(ctx, g2, edge, stream));
        } else { /* c = 0 (cubic): P = b A, no square */
          TPLA_TRY(ns_axpby(ctx, g2, g1, b, 0.0f, stream));
        }
        break;
      case NS_OP_CAST_POLY:
        if (half)
          TPLA_TRY(ns_sym_copy(ctx, g3, g2, 1.0f, it->nblocks, stream));
        else
          TPLA_TRY(ns_axpby(ctx, g3, g2, 1.0f, 0.0f, stream));
        break;
      case NS_OP_CAST_GRAM:
        TPLA_TRY(ns_axpby(ctx, g3, g1, 1.0f, 0.0f, stream));
        break;
      case NS_OP_SHARD_POLY:
        TPLA_TRY(ns_shard_poly(ctx, it, b, c, tf32, &p, stream));
        break;
      case NS_OP_UPDATE_SQUARE:
        TPLA_TRY(ns_update_square(ctx, it, place, &at, p, a, stream));
        break;
      case NS_OP_UPDATE_CHAIN:
        TPLA_TRY(update_chunks(ctx, it, place[at], p, a, b, c, stream));
        break;
      }
    }
    sigma = ns_step_sup(table + 3 * k, sigma);
  }
  return TPLA_SUCCESS;
}

tpla_status_t ns_normalize(tpla_ctx_t ctx, tpla_matrix_t out, tpla_matrix_t in, double *sumsq,
                           bool allreduce, float safety, float eps, void *stream) {
  TPLA_TRY(ctx->backend->sumsq(ctx, sumsq, in, stream));
  if (allreduce)
    TPLA_TRY(ctx->backend->allreduce(ctx, sumsq, sumsq, 1, TPLA_FLOAT64, stream));
  if (out.rows == 0 || out.cols == 0)
    return TPLA_SUCCESS;
  return ctx->backend->scale_by_norm(ctx, out, in, sumsq, safety, eps, stream);
}
