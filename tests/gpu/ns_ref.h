/*
 * ns_ref.h - the float64 host side of test_gpu_ns.c, independent of the
 * library's Newton-Schulz code: the coefficient sets and the scalar map
 * (ns_presets_ref.h), a float64 Newton-Schulz iteration (the same map,
 * computed as X <- a X + (b A + c A^2) X on the short-side Gram), relative
 * Frobenius differences, and (with LAPACK) singular values, the
 * interval the scalar polynomial predicts for them, and the polar factor.
 *
 * Header-only (static functions), host memory only, no CUDA.
 */
#ifndef TPLA_NS_REF_H
#define TPLA_NS_REF_H

#include "ns_presets_ref.h"
#include "tpla.h"

#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* ---- float64 Newton-Schulz ----------------------------------------------------- */

/* y[0..n) += alpha x[0..n): the inner loop of every product below (rows
 * stay contiguous, so the compiler vectorizes it). */
static inline void ref_axpy(double *y, const double *x, double alpha, int64_t n) {
  for (int64_t j = 0; j < n; j++)
    y[j] += alpha * x[j];
}

/* c (r x q) = a (r x k) b (k x q), all row-major and dense. */
static inline void ref_matmul(double *c, const double *a, const double *b, int64_t r, int64_t k,
                              int64_t q) {
  memset(c, 0, sizeof(double) * (size_t)(r * q));
  for (int64_t i = 0; i < r; i++)
    for (int64_t t = 0; t < k; t++)
      ref_axpy(c + i * q, b + t * q, a[i * k + t], q);
}

/* x (m x n, row-major) <- Newton-Schulz of x: divide by safety ||x||_F + eps,
 * then per step X <- a X + (b A + c A^2) X with A the Gram of the short
 * side (A = X X^T when m <= n, else the transposed form). Returns false
 * when out of memory (x untouched). */
static inline bool ref_ns_f64(double *x, int64_t m, int64_t n, const float *table, int steps,
                              double safety, double eps) {
  bool wide = m <= n;
  int64_t s = wide ? m : n, l = wide ? n : m;
  size_t ss = (size_t)(s * s), sl = (size_t)(s * l);
  double *z = malloc(sizeof(double) * sl), *zt = malloc(sizeof(double) * sl);
  double *y = malloc(sizeof(double) * sl), *a = malloc(sizeof(double) * ss);
  double *p = malloc(sizeof(double) * ss);
  bool ok = z && zt && y && a && p;
  if (ok) {
    double sumsq = 0.0;
    for (size_t i = 0; i < sl; i++)
      sumsq += x[i] * x[i];
    double scale = 1.0 / (safety * sqrt(sumsq) + eps);
    for (int64_t i = 0; i < m; i++) /* Z = X (s x l) or X^T */
      for (int64_t j = 0; j < n; j++)
        z[wide ? i * n + j : j * m + i] = x[i * n + j] * scale;
    for (int k = 0; k < steps; k++) {
      double ca = table[3 * k], cb = table[3 * k + 1], cc = table[3 * k + 2];
      for (int64_t i = 0; i < s; i++) /* Z^T, so that A = Z Z^T is row-by-row */
        for (int64_t j = 0; j < l; j++)
          zt[j * s + i] = z[i * l + j];
      ref_matmul(a, z, zt, s, l, s);
      ref_matmul(p, a, a, s, s, s);
      for (size_t i = 0; i < ss; i++)
        p[i] = cb * a[i] + cc * p[i];
      for (int64_t i = 0; i < s; i++) {
        double *yi = y + i * l;
        for (int64_t j = 0; j < l; j++)
          yi[j] = ca * z[i * l + j];
        for (int64_t t = 0; t < s; t++)
          ref_axpy(yi, z + t * l, p[i * s + t], l);
      }
      double *swap = z;
      z = y;
      y = swap;
    }
    for (int64_t i = 0; i < m; i++)
      for (int64_t j = 0; j < n; j++)
        x[i * n + j] = z[wide ? i * n + j : j * m + i];
  }
  free(z);
  free(zt);
  free(y);
  free(a);
  free(p);
  return ok;
}

/* ||a - b||_F / ||b||_F (NaN anywhere gives NaN). */
static inline double ref_rel_diff(const double *a, const double *b, size_t n) {
  double d = 0.0, r = 0.0;
  for (size_t i = 0; i < n; i++) {
    d += (a[i] - b[i]) * (a[i] - b[i]);
    r += b[i] * b[i];
  }
  return sqrt(d / (r > 0 ? r : 1.0));
}

/* ---- singular values (LAPACK) ------------------------------------------------------ */

#ifdef TPLA_HAVE_LAPACK
/* Fortran LAPACK, column-major; the trailing arguments are the lengths of
 * the character arguments. */
void dgesvd_(const char *jobu, const char *jobvt, const int *m, const int *n, double *a,
             const int *lda, double *s, double *u, const int *ldu, double *vt, const int *ldvt,
             double *work, const int *lwork, int *info, size_t jobu_len, size_t jobvt_len);

static int ref_desc_cmp(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? 1 : x > y ? -1 : 0;
}

/* The min(m, n) singular values (descending) of x (m x n row-major);
 * false if LAPACK fails or memory runs out. */
static inline bool ref_singular_values(const double *x, int64_t m, int64_t n, double *sv) {
  int im = (int)m, in = (int)n, one = 1, info = 0, lwork = -1;
  double query = 0.0, dummy = 0.0;
  double *a = malloc(sizeof(double) * (size_t)(m * n));
  if (a == NULL)
    return false;
  memcpy(a, x, sizeof(double) * (size_t)(m * n)); /* column-major n x m: X^T, same values */
  dgesvd_("N", "N", &in, &im, a, &in, sv, &dummy, &one, &dummy, &one, &query, &lwork, &info, 1,
          1);
  lwork = info == 0 ? (int)query + 1 : 0;
  double *work = lwork > 0 ? malloc(sizeof(double) * (size_t)lwork) : NULL;
  if (work != NULL)
    dgesvd_("N", "N", &in, &im, a, &in, sv, &dummy, &one, &dummy, &one, work, &lwork, &info, 1,
            1);
  bool ok = work != NULL && info == 0;
  free(a);
  free(work);
  return ok;
}

/* The polar factor U V^T of x (m x n row-major, full rank) from its SVD
 * x = U S V^T, into out (m x n row-major); false if LAPACK fails or memory
 * runs out. Read column-major, x is A = X^T (n x m) = V S U^T, whose
 * U_A VT_A (n x m, column-major) is V U^T: in memory, X's polar factor
 * row-major. */
static inline bool ref_polar_factor(const double *x, int64_t m, int64_t n, double *out) {
  int im = (int)m, in = (int)n, k = (int)(m < n ? m : n), info = 0, lwork = -1;
  double query = 0.0;
  double *a = malloc(sizeof(double) * (size_t)(m * n)), *sv = malloc(sizeof(double) * (size_t)k);
  double *u = malloc(sizeof(double) * (size_t)(n * k)), *vt = malloc(sizeof(double) * (size_t)(k * m));
  bool ok = a && sv && u && vt;
  if (ok) {
    memcpy(a, x, sizeof(double) * (size_t)(m * n));
    dgesvd_("S", "S", &in, &im, a, &in, sv, u, &in, vt, &k, &query, &lwork, &info, 1, 1);
    lwork = info == 0 ? (int)query + 1 : 0;
  }
  double *work = ok && lwork > 0 ? malloc(sizeof(double) * (size_t)lwork) : NULL;
  if (work != NULL)
    dgesvd_("S", "S", &in, &im, a, &in, sv, u, &in, vt, &k, work, &lwork, &info, 1, 1);
  ok = work != NULL && info == 0;
  for (int64_t j = 0; ok && j < m; j++) /* column j of U_A VT_A: out[j * n .. + n) */
    for (int64_t i = 0; i < n; i++) {
      double acc = 0.0;
      for (int t = 0; t < k; t++)
        acc += u[(int64_t)t * n + i] * vt[j * k + t];
      out[j * n + i] = acc;
    }
  free(a);
  free(sv);
  free(u);
  free(vt);
  free(work);
  return ok;
}

/* The singular values the map predicts from the input's: sv_out[i] =
 * |p_k(...p_1(sv_in[i] / norm))| sorted descending, and [lo, hi], the
 * image of the whole interval [min sv_in, max sv_in] / norm (scanned
 * finely: the composed polynomial is not monotonic). */
static inline void ref_predict(const double *sv_in, int64_t k, double norm, const float *table,
                               int steps, double *sv_out, double *lo, double *hi) {
  double smin = sv_in[k - 1] / norm, smax = sv_in[0] / norm;
  for (int64_t i = 0; i < k; i++) {
    double v = sv_in[i] / norm;
    for (int t = 0; t < steps; t++)
      v = ref_poly(table + 3 * t, v);
    sv_out[i] = fabs(v);
  }
  qsort(sv_out, (size_t)k, sizeof(double), ref_desc_cmp);
  *lo = INFINITY;
  *hi = -INFINITY;
  for (int i = 0; i <= 20000; i++) {
    double v = smin + (smax - smin) * i / 20000.0;
    for (int t = 0; t < steps; t++)
      v = ref_poly(table + 3 * t, v);
    v = fabs(v);
    *lo = v < *lo ? v : *lo;
    *hi = v > *hi ? v : *hi;
  }
}
#endif /* TPLA_HAVE_LAPACK */

#endif /* TPLA_NS_REF_H */
