/*
 * test_ns_common.h - helpers of the Newton-Schulz tests (test_ns_*.c):
 * the coefficient sets and the scalar map (ns_presets_ref.h), a float64
 * reference iteration, uneven shard layouts, and a runner that
 * orthogonalizes a global matrix on N host ranks through the public API and
 * returns the global result in float64.
 */
#ifndef TEST_NS_COMMON_H
#define TEST_NS_COMMON_H

#include "ns_presets_ref.h"
#include "ranks.h"
#include "test.h"

#include "internal.h" /* tpla_load_elem / tpla_store_elem */

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ---- float64 reference ------------------------------------------------------ */

/* g (s x s) = z z^T, z s x l row-major */
static inline void ref_gram(double *g, const double *z, int64_t s, int64_t l) {
  for (int64_t i = 0; i < s; i++)
    for (int64_t j = 0; j < s; j++) {
      double acc = 0.0;
      for (int64_t t = 0; t < l; t++)
        acc += z[i * l + t] * z[j * l + t];
      g[i * s + j] = acc;
    }
}

/* y (s x l) = a z + p z, p s x s */
static inline void ref_apply(double *y, const double *p, const double *z, double a, int64_t s,
                             int64_t l) {
  for (int64_t i = 0; i < s; i++)
    for (int64_t j = 0; j < l; j++) {
      double acc = a * z[i * l + j];
      for (int64_t t = 0; t < s; t++)
        acc += p[i * s + t] * z[t * l + j];
      y[i * l + j] = acc;
    }
}

/* c (n x n) = a b */
static inline void mul_square(double *c, const double *a, const double *b, int64_t n) {
  for (int64_t i = 0; i < n; i++)
    for (int64_t j = 0; j < n; j++) {
      double acc = 0.0;
      for (int64_t t = 0; t < n; t++)
        acc += a[i * n + t] * b[t * n + j];
      c[i * n + j] = acc;
    }
}

/* z = b g + c g g (s x s), tmp scratch */
static inline void gram_poly(double *z, const double *g, double b, double c, double *tmp,
                             int64_t s) {
  mul_square(tmp, g, g, s);
  for (int64_t i = 0; i < s * s; i++)
    z[i] = b * g[i] + c * tmp[i];
}

/* z (s x l, row-major) <- `steps` steps of table: z <- a z + (b A + c A^2) z
 * with A = z z^T. */
static inline void ref_ns_steps(double *z, int64_t s, int64_t l, const float *table, int steps) {
  size_t ss = sizeof(double) * (size_t)(s * s), sl = sizeof(double) * (size_t)(s * l);
  double *A = malloc(ss), *P = malloc(ss), *T = malloc(ss), *Y = malloc(sl);
  for (int k = 0; k < steps; k++) {
    double a = table[3 * k], b = table[3 * k + 1], c = table[3 * k + 2];
    ref_gram(A, z, s, l);
    gram_poly(P, A, b, c, T, s);
    ref_apply(Y, P, z, a, s, l);
    memcpy(z, Y, sl);
  }
  free(A), free(P), free(T), free(Y);
}

/* x (m x n, row-major) <- Newton-Schulz of x, with the short-side Gram. */
static inline void ref_ns(double *x, int64_t m, int64_t n, const float *table, int steps,
                          double safety, double eps) {
  double ss = 0.0;
  for (int64_t i = 0; i < m * n; i++)
    ss += x[i] * x[i];
  double scale = 1.0 / (safety * sqrt(ss) + eps);
  for (int64_t i = 0; i < m * n; i++)
    x[i] *= scale;
  if (m <= n) { /* wide: x itself is the s x l matrix */
    ref_ns_steps(x, m, n, table, steps);
    return;
  }
  double *z = malloc(sizeof(double) * (size_t)(m * n)); /* tall: iterate on x^T */
  for (int64_t i = 0; i < m; i++)
    for (int64_t j = 0; j < n; j++)
      z[j * m + i] = x[i * n + j];
  ref_ns_steps(z, n, m, table, steps);
  for (int64_t i = 0; i < m; i++)
    for (int64_t j = 0; j < n; j++)
      x[i * n + j] = z[j * m + i];
  free(z);
}

/* ||a - b||_F / ||b||_F */
static inline double rel_diff(const double *a, const double *b, size_t n) {
  double d = 0.0, r = 0.0;
  for (size_t i = 0; i < n; i++) {
    d += (a[i] - b[i]) * (a[i] - b[i]);
    r += b[i] * b[i];
  }
  return sqrt(d / (r > 0 ? r : 1.0));
}

/* ---- shards and the distributed runner ------------------------------------- */

/* Split g into P parts: even, or uneven with rank 1 (when P > 1) empty. */
static inline void split(int64_t g, int P, bool uneven, int64_t *sizes) {
  if (!uneven) {
    for (int r = 0; r < P; r++)
      sizes[r] = g / P + (r < g % P);
    return;
  }
  int64_t left = g, wsum = 0;
  for (int r = 0; r < P; r++)
    wsum += r == 1 ? 0 : r + 2;
  for (int r = 0; r < P; r++) {
    sizes[r] = r == 1 ? 0 : g * (r + 2) / wsum;
    left -= sizes[r];
  }
  sizes[0] += left;
}

typedef struct {
  int P;
  tpla_ns_desc_t desc; /* shard, dtype, steps, preset ...; local sizes set per rank */
  int64_t m, n;
  int64_t sizes[8];    /* of the sharded dimension */
  int ld_pad;          /* ld = cols + ld_pad */
  bool use_out;        /* tpla_ns_execute_out into a second buffer */
  bool alias_out;      /* tpla_ns_execute_out with out == x */
  int user_rank;       /* this rank (if > 0) passes the preset's table as TPLA_NS_USER */
  int collective_rank; /* this rank (if > 0) asks for gram_sum COLLECTIVE */
  const float *user_table;
  const double *x;     /* global input, m x n (rounded to dtype on the way in) */
  double *out;         /* global output */
  tpla_ns_algorithm_t algo[8];
  tpla_ns_iteration_t iter[8]; /* what each rank's plan runs */
  size_t ws[8];
} ns_run_t;

static inline int ns_rank_body(tpla_ctx_t ctx, int rank, int nranks, void *arg) {
  ns_run_t *run = arg;
  bool rows = run->desc.shard == TPLA_SHARD_ROWS;
  int64_t off = 0;
  for (int r = 0; r < rank; r++)
    off += run->sizes[r];
  int64_t lr = rows ? run->sizes[rank] : run->m, lc = rows ? run->n : run->sizes[rank];
  int64_t ld = (lc > 0 ? lc : 1) + run->ld_pad;
  tpla_dtype_t dt = run->desc.dtype;
  size_t bytes = (size_t)((lr > 0 ? lr : 1) * ld) * tpla_dtype_size(dt);
  void *buf = calloc(1, bytes), *out = calloc(1, bytes);
  for (int64_t i = 0; i < lr; i++)
    for (int64_t j = 0; j < lc; j++) {
      int64_t gi = rows ? off + i : i, gj = rows ? j : off + j;
      tpla_store_elem(buf, dt, (size_t)(i * ld + j), run->x[gi * run->n + gj]);
    }
  tpla_ns_desc_t d = run->desc;
  d.local_rows = lr;
  d.local_cols = lc;
  if (run->user_rank > 0 && rank == run->user_rank) {
    d.preset = TPLA_NS_USER;
    d.coefficients = run->user_table;
    d.ncoefficients = 3 * (size_t)d.steps;
  }
  if (run->collective_rank > 0 && rank == run->collective_rank)
    d.gram_sum = TPLA_NS_GRAM_SUM_COLLECTIVE;
  tpla_ns_plan_t plan = NULL;
  int fail = 0;
  tpla_status_t s = tpla_ns_plan_create(&plan, ctx, &d);
  if (s == TPLA_SUCCESS) {
    tpla_matrix_t x = {lr > 0 ? buf : NULL, lr, lc, ld, dt};
    tpla_matrix_t o = {lr > 0 ? out : NULL, lr, lc, ld, dt};
    tpla_ns_plan_algorithm(plan, &run->algo[rank]);
    tpla_ns_plan_iteration(plan, &run->iter[rank]);
    tpla_ns_plan_workspace_bytes(plan, &run->ws[rank]);
    if (run->alias_out)
      s = tpla_ns_execute_out(plan, x, x, NULL);
    else
      s = run->use_out ? tpla_ns_execute_out(plan, o, x, NULL) : tpla_ns_execute(plan, x, NULL);
  }
  if (s != TPLA_SUCCESS) {
    fprintf(stderr, "  rank %d: %s: %s\n", rank, tpla_status_string(s), tpla_last_error());
    fail = 1;
  }
  const void *res = run->use_out ? out : buf;
  for (int64_t i = 0; i < lr && !fail; i++)
    for (int64_t j = 0; j < lc; j++) {
      int64_t gi = rows ? off + i : i, gj = rows ? j : off + j;
      run->out[gi * run->n + gj] = tpla_load_elem(res, dt, (size_t)(i * ld + j));
    }
  tpla_ns_plan_destroy(plan);
  free(buf);
  free(out);
  return fail;
}

/* Orthogonalize run->x on run->P ranks; 0 on success. */
static inline int ns_run(ns_run_t *run) { return run_host_ranks(run->P, ns_rank_body, run); }

/* A random m x n matrix in [-1, 1), rounded to dtype. */
static inline double *random_matrix(int64_t m, int64_t n, tpla_dtype_t dt, uint64_t seed) {
  rng_t r;
  rng_seed(&r, seed);
  double *x = malloc(sizeof(double) * (size_t)(m * n));
  for (int64_t i = 0; i < m * n; i++) {
    float v = (float)rng_uniform(&r);
    tpla_store_elem(&v, dt, 0, v);
    x[i] = tpla_load_elem(&v, dt, 0);
  }
  return x;
}

#endif /* TEST_NS_COMMON_H */
