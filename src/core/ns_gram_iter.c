/*
 * ns_gram_iter.c - TPLA_NS_ITERATE_GRAM: Newton-Schulz steps applied to the
 * Gram matrix between updates of X, in segments of NS_GRAM_SEGMENT (2) steps.
 *
 * Step k maps X to P_k X with P_k = a_k I + Z_k, Z_k = b_k G_k + c_k G_k^2
 * and G_k = X_k X_k^T. Every P is a polynomial in G_0, so they commute, and
 * two steps are
 *   G_1 = P_0 G_0 P_0,   X_2 = P_1 P_0 X_0 = (alpha I + W) X_0,
 *   alpha = a_0 a_1,     W = Z_0 Z_1 + a_1 Z_0 + a_0 Z_1.
 * A segment forms one Gram of X (all-reduced when distributed, as the X
 * iteration's) and updates X once, with five s x s products in between:
 *   Z_0 = c_0 G G + b_0 G           H   = G Z_0 + a_0 G
 *   G   = Z_0 H + a_0 H  (= G_1)    Z_1 = c_1 G G + b_1 G
 *   W   = Z_0 Z_1 + a_1 Z_0, then W += a_0 Z_1
 * (a one-step segment: Z_0 only, X' = Z_0 X + a_0 X). All are products of
 * commuting symmetric matrices: each computes its upper block rows and is
 * mirrored. Per two steps that is 2 s^2 l (Gram, half of it by symmetry) +
 * 2 s^2 l (update) + 5 symmetric s^3 products, against twice (Gram + update +
 * one symmetric square) for the X iteration: fewer FLOPs when l > ~1.15 s.
 * Restarting from X every two steps keeps the rounding error at the X
 * iteration's level; longer segments let G drift from X's true Gram
 * (bench/ns_gram_iteration_study.py).
 *
 * When the update runs in a narrower dtype than the Gram's (a half input,
 * an fp32 Gram), its operand is M = W + alpha I, rounded once, and the
 * update is X' = M X. W's eigenvalues are those of M minus alpha, about
 * -alpha (Muon's 11.9, Polar Express's 34) where the top singular values
 * sit and M's are O(1): rounding W to bf16 there costs ~alpha 2^-9 against
 * a result of ~1, the update's cancellation amplifying it (a 2x larger
 * error than the X iteration's on Gaussian inputs;
 * bench/ns_update_operand_study.py).
 *
 * Buffers (ns_iter_setup): G in g1, scratch S1 = g2 (also the all-reduce's
 * packed rows, free once G is in), S2 = g4, S3 = g5, all in the Gram dtype,
 * and g3 for the update operand in the input dtype when they differ. HALF
 * products (ns_products) keep their fp16 copies in bytes free at the time
 * (products() says which) and mirror no fp32 matrix in place. On two
 * ranks with pulls (GRAM_SHARDED) ns_rowsplit.c computes a segment's
 * products by halves of rows instead.
 */
#include "ns.h"

/* Block rows of the s x s products: a build-time constant to measure with
 * (-DTPLA_NS_GRAM_PRODUCT_BLOCKS=n); 0, the default, takes the Gram's. */
#ifndef TPLA_NS_GRAM_PRODUCT_BLOCKS
#define TPLA_NS_GRAM_PRODUCT_BLOCKS 0
#endif

static int product_blocks(const ns_iter_t *it) {
  return TPLA_NS_GRAM_PRODUCT_BLOCKS > 0 ? TPLA_NS_GRAM_PRODUCT_BLOCKS : it->nblocks;
}

/* d = alpha x y + beta add (x, y, add symmetric and commuting; add != d),
 * mirrored (HALF: its upper block rows only); under GRAM_SHARDED each rank
 * computes its block rows of it. */
static tpla_status_t sym_mul(tpla_ctx_t ctx, const ns_iter_t *it, tpla_matrix_t d,
                             const ns_operand_t *x, const ns_operand_t *y, tpla_matrix_t add,
                             float alpha, float beta, int tf32, void *stream) {
  if (it->split.nranks > 0)
    return ns_shard_product(ctx, it, d, x->v, y->v, add, alpha, beta, tf32, stream);
  TPLA_TRY(ns_operand_product(ctx, it, d, x, y, product_blocks(it), &add, alpha, beta, stream));
  if (it->products == NS_PRODUCTS_HALF) /* read by upper block rows and ns_sym_copy only */
    return TPLA_SUCCESS;
  return ns_mirror(ctx, d, 0, stream); /* all of it: see ns_iter.c's head */
}

/* z = c g g + b g (c = 0: b g, no product) */
static tpla_status_t poly(tpla_ctx_t ctx, const ns_iter_t *it, tpla_matrix_t z,
                          const ns_operand_t *g, float b, float c, int tf32, void *stream) {
  if (c == 0.0f)
    return ns_axpby(ctx, z, g->v, b, 0.0f, stream);
  return sym_mul(ctx, it, z, g, g, g->v, c, b, tf32, stream);
}

/* One segment's products from G, triangle by triangle, each mirrored (for
 * HALF products, their copies are); *w: the W of the update
 * X' = W X + alpha X (t1 NULL: a one-step segment).
 * sigma bounds X's singular values, so G's eigenvalues lie in
 * [0, sigma^2]; every other matrix is a polynomial in G, whose bound
 * ns_operand scales HALF products' fp16 copies by. Those live in g3 (Z_0,
 * until the update's cast), S3's bytes (G, H, G_1, until W is computed
 * there) and G's (Z_1, once G_1 is spent). */
static tpla_status_t products(tpla_ctx_t ctx, const ns_iter_t *it, const ns_gram_mats_t *m,
                              const float *t0, const float *t1, double sigma, int tf32,
                              tpla_matrix_t *w, void *stream) {
  const tpla_matrix_t G = m->g, S1 = m->s1, S2 = m->s2, S3 = m->s3;
  const double sigma1 = ns_step_sup(t0, sigma); /* after step 0 */
  const int nb = product_blocks(it);
  ns_operand_t g, z0, h, g1, z1;
  TPLA_TRY(ns_operand(ctx, it, &g, G, S3.data, sigma * sigma, it->nblocks, stream));
  TPLA_TRY(poly(ctx, it, S1, &g, t0[1], t0[2], tf32, stream)); /* Z_0 */
  *w = S1;
  if (t1 == NULL)
    return TPLA_SUCCESS;
  TPLA_TRY(ns_operand(ctx, it, &z0, S1, it->g3, ns_quad_sup(t0[1], t0[2], sigma * sigma), nb,
                      stream));
  TPLA_TRY(sym_mul(ctx, it, S2, &g, &z0, G, 1.0f, t0[0], tf32, stream)); /* H */
  TPLA_TRY(ns_operand(ctx, it, &h, S2, S3.data, sigma * sigma1, nb, stream));
  TPLA_TRY(sym_mul(ctx, it, G, &z0, &h, S2, 1.0f, t0[0], tf32, stream)); /* G_1 */
  TPLA_TRY(ns_operand(ctx, it, &g1, G, S3.data, sigma1 * sigma1, nb, stream));
  TPLA_TRY(poly(ctx, it, S2, &g1, t1[1], t1[2], tf32, stream)); /* Z_1 */
  TPLA_TRY(ns_operand(ctx, it, &z1, S2, G.data, ns_quad_sup(t1[1], t1[2], sigma1 * sigma1), nb,
                      stream));
  TPLA_TRY(sym_mul(ctx, it, S3, &z0, &z1, S1, 1.0f, t1[0], tf32, stream)); /* W */
  *w = S3;
  return ns_axpby(ctx, S3, S2, t0[0], 1.0f, stream);
}

tpla_status_t ns_gram_iterate(tpla_ctx_t ctx, const ns_iter_t *it, ns_opmat_t place[2], int at,
                              const float *table, int steps, double sigma0, void *stream) {
  int64_t s = it->s;
  tpla_dtype_t gt = it->gram_dtype;
  tpla_matrix_t G = ns_dense(it->g1, s, s, gt);
  const ns_gram_mats_t m = {G, ns_dense(it->g2, s, s, gt), ns_dense(it->g4, s, s, gt),
                            ns_dense(it->g5, s, s, gt)};
  tpla_matrix_t cast = ns_dense(it->g3, s, s, it->dtype);
  int tf32 = it->products != NS_PRODUCTS_PLAIN; /* the split products' */
  double sigma = sigma0; /* bounds X's singular values at the next segment */
  const bool half = it->products == NS_PRODUCTS_HALF;
  /* two ranks with pulls: the products by halves of rows (ns_rowsplit.c) */
  const bool row_split = it->grams_mapped && it->pull != NULL && ns_rowsplit_fits(s);
  for (int k = 0; k < steps; k += NS_GRAM_SEGMENT) {
    const float *t0 = table + 3 * k, *t1 = k + 1 < steps ? t0 + 3 : NULL;
    const double sigma_k = sigma;
    sigma = ns_step_sup(t0, sigma);
    if (t1 != NULL)
      sigma = ns_step_sup(t1, sigma);
    TPLA_TRY(ns_gram(ctx, it, G, place[at], stream));
    /* HALF: read by upper block rows and ns_sym_copy only, unless the
     * products' block rows are not the Gram's (a measuring build) */
    if (!half || product_blocks(it) != it->nblocks)
      TPLA_TRY(ns_mirror(ctx, G, 0, stream));
    float alpha = t1 != NULL ? t0[0] * t1[0] : t0[0];
    if (row_split) { /* the update too, by halves of W where it can */
      tpla_matrix_t in_dtype = gt != it->dtype ? cast : (tpla_matrix_t){NULL, 0, 0, 1, gt};
      TPLA_TRY(ns_rowsplit_segment(ctx, it, &m, in_dtype, t0, t1, alpha, tf32, place, &at,
                                   stream));
      continue;
    }
    tpla_matrix_t w;
    TPLA_TRY(products(ctx, it, &m, t0, t1, sigma_k, tf32, &w, stream));
    if (gt != it->dtype) { /* X' = M X, M = W + alpha I in the input dtype */
      TPLA_TRY(ns_add_diagonal(ctx, w, alpha, stream));
      if (half)
        TPLA_TRY(ns_sym_copy(ctx, cast, w, 1.0f, product_blocks(it), stream));
      else
        TPLA_TRY(ns_axpby(ctx, cast, w, 1.0f, 0.0f, stream));
      w = cast;
      alpha = 0.0f;
    }
    TPLA_TRY(ns_update_square(ctx, it, place, &at, w, alpha, stream)); /* X' = W X + alpha X */
  }
  return TPLA_SUCCESS;
}
