/*
 * ns_fuzz_model.h - test_ns_fuzz's float64 model of the rounding a
 * Newton-Schulz run suffers (sensitivity()), from which its tolerances scale
 * (ns_fuzz_cases.h, "tolerances"): the X iteration's steps, the Gram
 * iteration's own products with a half-precision Gram, and the partial sums
 * of a distributed half-precision Gram. Independent of the library: it knows
 * the algorithms' rounding points (docs/ALGORITHMS.md), not their code.
 */
#ifndef TPLA_NS_FUZZ_MODEL_H
#define TPLA_NS_FUZZ_MODEL_H

#include "ns_fuzz_cases.h"

/* The normalized input in the wide orientation (s x l), as ref_ns iterates. */
static double *normalized_wide(const mat_t *mt, const double *x, double safety) {
  int64_t s = mt->m <= mt->n ? mt->m : mt->n, l = mt->m <= mt->n ? mt->n : mt->m;
  double *z = malloc(sizeof(double) * (size_t)(s * l)), ss = 0.0;
  for (int64_t i = 0; i < s * l; i++)
    ss += x[i] * x[i];
  double scale = 1.0 / (safety * sqrt(ss) + mt->desc.eps);
  for (int64_t i = 0; i < s; i++)
    for (int64_t j = 0; j < l; j++)
      z[i * l + j] = scale * (mt->m <= mt->n ? x[i * l + j] : x[j * s + i]);
  return z;
}

/* The direction of a perturbation in the model's order `order` (below) at
 * step or segment k: uniform random for order -1 (a draw per entry), else
 * +1 or -1, every entry alike (orders 2 and 3 alternate from step to step). */
static double direction(rng_t *r, int order, int k) {
  if (order < 0)
    return rng_uniform(r);
  double sign = order % 2 == 0 ? 1.0 : -1.0;
  return order >= 2 && k % 2 == 1 ? -sign : sign;
}

/* The larger model difference; one that diverged (NaN) is infinite: the case
 * is then too ill-conditioned to compare (fmax would drop the NaN). */
static double worse(double d, double e) { return e == e ? fmax(d, e) : INFINITY; }

/* m (n x n, symmetric) rounded, in the model's order `order` at segment k:
 * orders -1..3 perturb every entry by u |m_ij| in direction(), alike on both
 * sides of the diagonal; orders 4 and 5 move every eigenvalue of a Gram by
 * +-u ||m||_F (a bound on what the entries' rounding can do to them, felt by
 * the small ones: u ||G|| is kappa^2 u relative to the smallest) and leave
 * the other products alone. */
static void round_sym(double *m, int64_t n, double u, rng_t *r, int order, int k, bool gram) {
  if (order >= 4) {
    double f = 0.0;
    for (int64_t i = 0; i < n * n; i++)
      f += m[i] * m[i];
    for (int64_t i = 0; gram && i < n; i++)
      m[i * n + i] += (order == 4 ? u : -u) * sqrt(f);
    return;
  }
  for (int64_t i = 0; i < n; i++)
    for (int64_t j = i; j < n; j++)
      m[j * n + i] = m[i * n + j] *= 1.0 + u * direction(r, order, k);
}

/* The Gram iteration's own rounding with a half-precision Gram
 * (ns_gram_iter.c): a segment of two steps stores G, Z_0, H, G_1, Z_1 and W
 * in the half dtype before X' = alpha X + W X, and where X's top singular
 * values sit these are the sums of terms up to alpha (Polar Express's 34)
 * times larger (W is about -alpha there, X' O(1)), which the X iteration,
 * whose one product per step holds |b| + |c|, never pays
 * (TPLA_FUZZ_SEED=6538956484097252622: a 2 x 2 bf16 matrix of singular
 * values 1 and 0.02 after normalization, 65x the X iteration's error; in an
 * emulation of that matrix rounding Z_0 alone costs 0.07, H 0.06, W 0.03).
 * And G_1 is formed from the rounded G, not from X, so G's rounding, u ||G||
 * on every eigenvalue, reaches the small ones as kappa^2 u: Polar Express's
 * first segment then sends the smallest singular values past the top of its
 * overshoot (~2), from where its later steps diverge (TPLA_FUZZ_SEED=
 * 3580301203882501667: a 4 x 4 bf16 matrix of condition 8.7 gave NaN).
 * Modelled in float64 from z0: each of them rounded by round_sym() in the
 * orders of sensitivity() and two more, the Gram formed from X by u_gram
 * (u, or more for a distributed sum); returns how far that moves the result
 * z, relative (infinite if it diverges). */
static double gram_segment_rounding(const double *z0, const double *z, int64_t s, int64_t l,
                                    const float *table, int steps, double u, double u_gram,
                                    rng_t *r) {
  size_t ss = sizeof(double) * (size_t)(s * s), sl = sizeof(double) * (size_t)(s * l);
  double *y = malloc(sl), *y2 = malloc(sl), *g = malloc(ss), *z0m = malloc(ss), *z1 = malloc(ss);
  double *h = malloc(ss), *w = malloc(ss), *tmp = malloc(ss), d = 0.0;
  for (int order = -1; order < 6; order++) {
    memcpy(y, z0, sl);
    for (int k = 0; k < steps; k += 2) {
      const float *t0 = table + 3 * k, *t1 = k + 1 < steps ? t0 + 3 : NULL;
      int seg = k / 2;
      ref_gram(g, y, s, l);
      round_sym(g, s, u_gram, r, order, seg, true); /* the formed (summed) Gram */
      gram_poly(z0m, g, t0[1], t0[2], tmp, s); /* Z_0 */
      round_sym(z0m, s, u, r, order, seg, false);
      double alpha = t0[0];
      memcpy(w, z0m, ss);
      if (t1 != NULL) { /* H = G Z_0 + a_0 G, G_1 = Z_0 H + a_0 H, Z_1 of G_1, W */
        mul_square(h, g, z0m, s);
        for (int64_t i = 0; i < s * s; i++)
          h[i] += t0[0] * g[i];
        round_sym(h, s, u, r, order, seg, false);
        mul_square(g, z0m, h, s);
        for (int64_t i = 0; i < s * s; i++)
          g[i] += t0[0] * h[i];
        round_sym(g, s, u, r, order, seg, true);
        gram_poly(z1, g, t1[1], t1[2], tmp, s);
        round_sym(z1, s, u, r, order, seg, false);
        mul_square(w, z0m, z1, s);
        for (int64_t i = 0; i < s * s; i++)
          w[i] += t1[0] * z0m[i] + t0[0] * z1[i];
        round_sym(w, s, u, r, order, seg, false);
        alpha *= t1[0];
      }
      ref_apply(y2, w, y, alpha, s, l);
      memcpy(y, y2, sl);
    }
    d = worse(d, rel_diff(y, z, (size_t)(s * l)));
  }
  free(y), free(y2), free(g), free(z0m), free(z1), free(h), free(w), free(tmp);
  return d;
}

/* A bound on how many roundings of its own size a distributed run's half-
 * precision Gram carries beyond one rank's one: every rank's partial Gram is
 * rounded before the sum, and partials of rows (or columns) are positive
 * semidefinite and add up to G, so their roundings sum to at most
 * u sum_q ||G_q||_F <= u tr(G) = u ||X||_F^2, whatever the partition and the
 * algorithm, with the sum itself rounded once (the host executor sums in
 * fp32; NCCL's ring in the half dtype rounds P - 1 times, left out here)
 * (TPLA_FUZZ_SEED=9020143837651327437: a 2 x 2 fp16 matrix of one column per
 * rank, whose distributed result was 4.8x sensitivity() from one rank's).
 * Returns ||X||_F^2 / ||X X^T||_F (1 for rank one, up to sqrt(s)). */
static double partial_gram_roundings(const double *z0, int64_t s, int64_t l) {
  double *g = malloc(sizeof(double) * (size_t)(s * s)), tr = 0.0, fro = 0.0;
  ref_gram(g, z0, s, l);
  for (int64_t i = 0; i < s * s; i++)
    fro += g[i] * g[i];
  for (int64_t i = 0; i < s; i++)
    tr += g[i * s + i];
  free(g);
  return fro > 0.0 ? tr / sqrt(fro) : 0.0;
}

/* How a result was computed, for its model. */
typedef struct {
  bool same;   /* the distributed run forms one rank's products (tol_vs_one) */
  bool summed; /* its Gram is a sum of the ranks' partial Grams */
  bool gram_iteration;
} ran_t;

/* A model of the rounding a run of mt suffers, in float64: the normalized
 * matrix rounded to the dtype, then after each step every entry perturbed by
 * one unit roundoff times |a| + n (|b| + |c|) (the size of the terms that
 * cancel into the result; the Gram enters through b and c, rounded n times:
 * 1 on one rank, 1 + partial_gram_roundings() for a distributed half Gram),
 * at random (y), and every entry alike (w: every singular value moves, as a
 * rounded Gram moves them; for a matrix of one singular value random
 * perturbations would average out). Rounding need not change direction at
 * random from step to step, and a table whose steps undo each other's gains
 * can be sensitive to one order of directions only
 * (TPLA_FUZZ_SEED=4385759160738018935: a 1 x 81 bf16 matrix whose error was
 * 6x what a random order predicted), so w takes the worst of four orders:
 * always up, always down, alternating from either. A Gram iteration with a
 * half Gram adds gram_segment_rounding(). Returns how far that moves the
 * result, relative: the gain the case applies to rounding; *dist: the same
 * for the distributed run (= the result where no Gram is summed). */
static double sensitivity(const mat_t *mt, const double *x, const float *table, double safety,
                          ran_t ran, double *dist) {
  int64_t s = mt->m <= mt->n ? mt->m : mt->n, l = mt->m <= mt->n ? mt->n : mt->m;
  size_t count = (size_t)(s * l);
  double *z0 = normalized_wide(mt, x, safety), *z = malloc(sizeof(double) * count);
  double *y = malloc(sizeof(double) * count), u = unit_roundoff(mt->desc.dtype);
  bool half_gram = mt->desc.gram_dtype != TPLA_FLOAT32;
  rng_t r;
  rng_seed(&r, (uint64_t)count * 7919u + (uint64_t)mt->desc.steps);
  memcpy(z, z0, sizeof(double) * count);
  ref_ns_steps(z, s, l, table, mt->desc.steps);
  double extra = half_gram && ran.summed ? partial_gram_roundings(z0, s, l) : 0.0, d[2] = {0, 0};
  for (int run = 0; run < (extra > 0.0 ? 2 : 1); run++) /* one rank's; the distributed one's */
    for (int order = -1; order < 4; order++) { /* random; up, down, up-down.., down-up.. */
      for (size_t i = 0; i < count; i++)
        y[i] = z0[i] * (1.0 + u * direction(&r, order, 0));
      for (int k = 0; k < mt->desc.steps; k++) {
        const float *t = table + 3 * k;
        double du = u * (fabs(t[0]) + (1.0 + run * extra) * (fabs(t[1]) + fabs(t[2])));
        ref_ns_steps(y, s, l, t, 1);
        for (size_t i = 0; i < count; i++)
          y[i] *= 1.0 + du * direction(&r, order, k);
      }
      d[run] = worse(d[run], rel_diff(y, z, count));
    }
  double w[2] = {0, 0};
  for (int run = 0; run < (extra > 0.0 ? 2 : 1) && half_gram && ran.gram_iteration; run++)
    w[run] = gram_segment_rounding(z0, z, s, l, table, mt->desc.steps, u, u * (1.0 + run * extra),
                                   &r);
  *dist = fmax(d[0] + w[0], d[1] + w[1]);
  free(z0);
  free(z);
  free(y);
  return d[0] + w[0];
}

#endif
