/*
 * ns_rowsplit.c - GRAM_SHARDED's Gram iteration on two ranks with pulls:
 * each s x s product split by halves of whole rows, not by block rows of
 * its upper triangle.
 *
 * The triangle (ns_shard.c) costs each rank about (nbk+1)/(2 nbk) of the
 * square's FLOPs, but in narrow GEMMs (run 60, 16384x4096 bf16: ~320
 * TFLOP/s for the smallest row), and every product then waits for the
 * peer's last row and mirrors (run 72: ~133 us a product of s = 4096, its
 * own GEMMs 80 us of it). Whole rows cost half the square, in one or two
 * wide GEMMs, need no mirror, and a product whose result is not read next
 * hides its pull behind the next product. Each rank computes its rows
 * D[own, :] = alpha X[own, :] Y + beta C[own, :], and since the matrices
 * are symmetric and commute, a product may take either factor as X: the
 * one whose rows are here. A segment (ns_gram_iter.c's notation):
 *   Z_0 = c_0 G G + b_0 G    published (G is whole on both ranks)
 *   H   = Z_0 G + a_0 G      rows only: the peer never needs H
 *   G_1 = H Z_0 + a_0 H      needs all of Z_0 (pulled during H); published
 *   Z_1 = c_1 G_1 G_1 + b_1 G_1   by halves of K: the own half first, while
 *                                 the peer's rows of G_1 arrive
 *   W   = Z_1 Z_0 + a_1 Z_0 + a_0 Z_1   published; the update waits for it
 * The matrices live in the pulls' transport memory (ns_pull_mapped): each
 * rank's rows are pulled from their place into the same place on the peer.
 * A published matrix is published in NS_ROWSPLIT_CHUNKS row chunks (one by
 * default: each pull has a GEMM to hide behind, Z_0's H, G_1's the first half
 * of Z_1 (in part: run 77 shows up to ~17 us a segment), W's the first half of
 * the update, and a single GEMM of the half runs faster than two; run 77).
 * One exchange per segment.
 *
 * Why it is safe to write a matrix again: the peer's pulls of a segment end
 * before its exchange ends, and this rank writes any of these matrices
 * again only after it waited, in the next Gram's sum, for rows the peer
 * published after that.
 */
#include "ns.h"
#include "overlap.h" /* OVL_LANE_COMPUTE0 */

/* d = alpha x y + beta c + gamma e + delta I (gamma 0: no e), all s x s. */
typedef struct {
  tpla_matrix_t d, x, y, c, e;
  float alpha, beta, gamma, delta;
} rs_product_t;

typedef struct {
  tpla_ctx_t ctx;
  ns_pull_t *p;
  void *lane;
  int64_t s;
  int rank, tf32;
} rs_t;

/* Rank q's rows [*r0, *r1), chunk j of n. */
static void rows_of(const rs_t *rs, int q, int j, int n, int64_t *r0, int64_t *r1) {
  int64_t lo = q == 0 ? 0 : rs->s / 2, hi = q == 0 ? rs->s / 2 : rs->s;
  *r0 = lo + (hi - lo) * j / n;
  *r1 = lo + (hi - lo) * (j + 1) / n;
}

bool ns_rowsplit_fits(int64_t s) { return s / 2 >= NS_ROWSPLIT_CHUNKS; }

/* Rows [r0, r1) of d = alpha x[:, k0:k1] y[k0:k1, :] + beta c. y is symmetric:
 * when all of it is here (y_whole), its rows k0..k1 are read as the
 * transpose of its columns k0..k1, as the triangle's GEMMs read it (B
 * transposed); otherwise as rows, since its columns cross the peer's rows. */
static tpla_status_t rows_gemm(const rs_t *rs, const rs_product_t *pr, tpla_matrix_t c,
                               float beta, int64_t r0, int64_t r1, int64_t k0, int64_t k1,
                               bool y_whole) {
  int64_t s = rs->s, h = r1 - r0, k = k1 - k0;
  tpla_matrix_t D = ns_sub(pr->d, r0, h, 0, s), C = ns_sub(c, r0, h, 0, s);
  if (pr->alpha == 0.0f || k <= 0)
    return ns_axpby(rs->ctx, D, C, beta, 0.0f, rs->lane);
  ns_opmat_t y = y_whole ? (ns_opmat_t){ns_sub(pr->y, 0, s, k0, k), true}
                         : (ns_opmat_t){ns_sub(pr->y, k0, k, 0, s), false};
  return ns_gemm_c(rs->ctx, (ns_opmat_t){D, false}, (ns_opmat_t){ns_sub(pr->x, r0, h, k0, k), false},
                   y, (ns_opmat_t){C, false}, pr->alpha, beta, rs->tf32, rs->lane);
}

/* This rank's rows of the product; flag >= 0: published chunk by chunk
 * under flags flag.., and the peer's chunks pulled into their place. */
static tpla_status_t product(const rs_t *rs, const rs_product_t *pr, int flag) {
  const int n = flag >= 0 ? NS_ROWSPLIT_CHUNKS : 1;
  const tpla_matrix_t none = {NULL, 0, 1, 1, pr->d.dtype};
  for (int j = 0; j < n; j++) {
    int64_t r0, r1, p0, p1;
    rows_of(rs, rs->rank, j, n, &r0, &r1);
    TPLA_TRY(rows_gemm(rs, pr, pr->c, pr->beta, r0, r1, 0, rs->s, true));
    if (pr->gamma != 0.0f)
      TPLA_TRY(ns_axpby(rs->ctx, ns_sub(pr->d, r0, r1 - r0, 0, rs->s),
                        ns_sub(pr->e, r0, r1 - r0, 0, rs->s), pr->gamma, 1.0f, rs->lane));
    if (pr->delta != 0.0f) /* before the rows are published */
      TPLA_TRY(ns_add_diagonal(rs->ctx, ns_sub(pr->d, r0, r1 - r0, r0, r1 - r0), pr->delta,
                               rs->lane));
    if (flag < 0)
      continue;
    TPLA_TRY(ns_pull_piece(rs->p, flag + j, true, none, NULL, 0, OVL_LANE_COMPUTE0));
    rows_of(rs, 1 - rs->rank, j, n, &p0, &p1);
    tpla_matrix_t place = ns_sub(pr->d, p0, p1 - p0, 0, rs->s);
    /* after lane 0: nothing here reads the old rows any more */
    TPLA_TRY(ns_pull_piece(rs->p, flag + j, false, place, place.data, rs->s, OVL_LANE_COMPUTE0));
  }
  return TPLA_SUCCESS;
}

/* Lane 0 waits for the peer's chunks published under flags flag.. */
static tpla_status_t arrived(const rs_t *rs, int flag) {
  for (int j = 0; j < NS_ROWSPLIT_CHUNKS; j++)
    TPLA_TRY(ns_pull_arrived(rs->p, OVL_LANE_COMPUTE0, flag + j));
  return TPLA_SUCCESS;
}

enum { FLAG_Z0 = 0, FLAG_G1 = NS_ROWSPLIT_CHUNKS, FLAG_W = 2 * NS_ROWSPLIT_CHUNKS };

/* The products; *w: W (Z_0 for a one-step segment) plus shift I, whose peer
 * rows are pulled under flags *flag.. */
static tpla_status_t segment(const rs_t *rs, const ns_gram_mats_t *m, const float *t0,
                             const float *t1, float shift, tpla_matrix_t *w, int *flag) {
  const tpla_matrix_t G = m->g, Z0 = m->s1, H = m->s2, Z1 = m->s2, W = m->s3;
  const rs_product_t z0 = {Z0, G, G, G, G, t0[2], t0[1], 0.0f, t1 == NULL ? shift : 0.0f};
  TPLA_TRY(product(rs, &z0, FLAG_Z0));
  *w = Z0;
  *flag = FLAG_Z0;
  if (t1 == NULL)
    return TPLA_SUCCESS;
  const rs_product_t h = {H, Z0, G, G, G, 1.0f, t0[0], 0.0f, 0.0f};
  TPLA_TRY(product(rs, &h, -1));
  TPLA_TRY(arrived(rs, FLAG_Z0));
  /* G's old rows: read by H only */
  const rs_product_t g1 = {G, H, Z0, H, H, 1.0f, t0[0], 0.0f, 0.0f};
  TPLA_TRY(product(rs, &g1, FLAG_G1));
  /* Z_1 by halves of K: the own rows of G_1 are here, the peer's arrive */
  const rs_product_t z1 = {Z1, G, G, G, G, t1[2], t1[1], 0.0f, 0.0f};
  int64_t o0, o1, p0, p1;
  rows_of(rs, rs->rank, 0, 1, &o0, &o1);
  rows_of(rs, 1 - rs->rank, 0, 1, &p0, &p1);
  TPLA_TRY(rows_gemm(rs, &z1, G, t1[1], o0, o1, o0, o1, false));
  TPLA_TRY(arrived(rs, FLAG_G1));
  TPLA_TRY(rows_gemm(rs, &z1, Z1, 1.0f, o0, o1, p0, p1, true));
  const rs_product_t wp = {W, Z1, Z0, Z0, Z1, 1.0f, t1[0], t0[0], shift};
  TPLA_TRY(product(rs, &wp, FLAG_W));
  *w = W;
  *flag = FLAG_W;
  return TPLA_SUCCESS;
}

/* X' = W X + alpha X by halves of W's rows (the ping-pong update): rows of
 * X' from the own rows of W while the peer's arrive, then the rest. */
static tpla_status_t update_by_halves(const rs_t *rs, const ns_iter_t *it, tpla_matrix_t w,
                                      int flag, tpla_matrix_t cast, float alpha,
                                      ns_opmat_t place[2], int at) {
  for (int half = 0; half < 2; half++) {
    int64_t r0, r1;
    rows_of(rs, half == 0 ? rs->rank : 1 - rs->rank, 0, 1, &r0, &r1);
    if (half == 1)
      TPLA_TRY(arrived(rs, flag));
    tpla_matrix_t p = w;
    if (cast.data != NULL) { /* W in the input dtype, these rows */
      TPLA_TRY(ns_axpby(rs->ctx, ns_sub(cast, r0, r1 - r0, 0, rs->s),
                        ns_sub(w, r0, r1 - r0, 0, rs->s), 1.0f, 0.0f, rs->lane));
      p = cast;
    }
    TPLA_TRY(ns_update_rows(rs->ctx, it, place, at, p, alpha, r0, r1 - r0, rs->lane));
  }
  return TPLA_SUCCESS;
}

tpla_status_t ns_rowsplit_segment(tpla_ctx_t ctx, const ns_iter_t *it, const ns_gram_mats_t *m,
                                  tpla_matrix_t cast, const float *t0, const float *t1,
                                  float alpha, int tf32, ns_opmat_t place[2], int *at,
                                  void *stream) {
  ns_pull_t *p = it->pull;
  const rs_t rs = {ctx, p, ns_pull_lane(p, OVL_LANE_COMPUTE0), it->s, ctx->rank, tf32};
  const bool halves = ns_update_pingpong(it);
  tpla_matrix_t w;
  int flag;
  /* with a cast the operand is W + alpha I (ns_gram_iter.c), each rank adding
   * alpha to its own rows before it publishes them */
  const float shift = cast.data != NULL ? alpha : 0.0f;
  alpha -= shift;
  TPLA_TRY(ns_pull_begin(ctx, p, stream));
  tpla_status_t st = segment(&rs, m, t0, t1, shift, &w, &flag);
  if (st == TPLA_SUCCESS)
    st = halves ? update_by_halves(&rs, it, w, flag, cast, alpha, place, *at) : arrived(&rs, flag);
  TPLA_TRY(ns_pull_finish(p, OVL_LANE_COMPUTE0, stream, st));
  if (halves) {
    *at = !*at;
    return TPLA_SUCCESS;
  }
  if (cast.data != NULL) {
    TPLA_TRY(ns_axpby(ctx, cast, w, 1.0f, 0.0f, stream));
    w = cast;
  }
  return ns_update_square(ctx, it, place, at, w, alpha, stream);
}
