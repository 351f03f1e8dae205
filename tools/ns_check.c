/*
 * ns_check.c - the errors of `tpla ns -c 1` on rank 0, from the result
 * gathered in host memory (job->y):
 *   f64     max(M, N) <= --svd-max and LAPACK: from a float64 SVD (dgesdd)
 *           X = U S V^T of the input, regenerated and rounded as the ranks
 *           rounded it: polar_rel = ||Y - U V^T||_F / ||U V^T||_F,
 *           orth_max = max |Y Y^T - I| (short side, dsyrk) and
 *           ns_rel = ||Y - Y_ns||_F / ||Y_ns||_F, where Y_ns = U p(S) V^T is
 *           the iteration in exact arithmetic (p: the plan's steps applied to
 *           each singular value after the normalization), all in float64.
 *           ns_rel is what the run is judged on: rounding error only, so a
 *           wrong result stands out even where polar_rel (mostly the
 *           polynomial's own distance from the polar factor) would not;
 *   gemm32  otherwise: orth_max from Y Y^T computed by tpla_gemm with fp32
 *           accumulation on rank 0's executor (bf16 products are exact in
 *           fp32), polar_rel nan.
 * Also counts the result's NaN and Inf elements.
 */
#include "ns_tool.h"

#include "internal.h" /* tpla_load_elem / tpla_store_elem */
#include "ns.h"       /* ns_fill_coefficients, ns_effective_safety */

#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#ifdef TPLA_HAVE_LAPACK
/* Fortran BLAS/LAPACK (column-major); trailing: lengths of the char args. */
void dgesdd_(const char *jobz, const int *m, const int *n, double *a, const int *lda, double *s,
             double *u, const int *ldu, double *vt, const int *ldvt, double *work,
             const int *lwork, int *iwork, int *info, size_t jobz_len);
void dgemm_(const char *ta, const char *tb, const int *m, const int *n, const int *k,
            const double *alpha, const double *a, const int *lda, const double *b,
            const int *ldb, const double *beta, double *c, const int *ldc, size_t, size_t);
void dsyrk_(const char *uplo, const char *trans, const int *n, const int *k, const double *alpha,
            const double *a, const int *lda, const double *beta, double *c, const int *ldc,
            size_t, size_t);
#endif

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* orth_max from Y Y^T (short side) computed by tpla_gemm in fp32 on rank
 * 0's executor from the gathered result. */
static int orth_gemm32(tool_rank_t *r, const ns_job_t *job, int64_t m, int64_t n, double *orth) {
  tpla_dtype_t dt = job->o->dtype;
  int64_t s = m < n ? m : n;
  size_t ybytes = (size_t)(m * n) * tpla_dtype_size(dt), gbytes = (size_t)(s * s) * 4;
  void *dy = tool_alloc(r, ybytes), *dg = tool_alloc(r, gbytes);
  float *hg = malloc(gbytes);
  int failed = !dy || !dg || !hg || tool_upload(r, dy, job->y, ybytes);
  if (!failed) {
    tpla_matrix_t y = {dy, m, n, n, dt}, g = {dg, s, s, s, TPLA_FLOAT32};
    tpla_status_t st = m <= n ? tpla_gemm(r->ctx, g, y, TPLA_OP_N, y, TPLA_OP_T, NULL, r->stream)
                              : tpla_gemm(r->ctx, g, y, TPLA_OP_T, y, TPLA_OP_N, NULL, r->stream);
    failed = st != TPLA_SUCCESS ? tool_rank_fail(r, "tpla_gemm (Y Y^T)", st)
                                : tool_stream_sync(r) || tool_download(r, hg, dg, gbytes);
  }
  double worst = 0.0;
  for (int64_t i = 0; !failed && i < s; i++)
    for (int64_t j = 0; j < s; j++) {
      double d = fabs((double)hg[i * s + j] - (i == j ? 1.0 : 0.0));
      if (!(d <= worst)) /* NaN sticks */
        worst = d;
    }
  *orth = worst;
  tool_free(r, dy);
  tool_free(r, dg);
  free(hg);
  return failed;
}

#ifdef TPLA_HAVE_LAPACK
/* The map of the plan's steps on one singular value of the input: the
 * normalization by (safety ||X||_F + eps), then a s + b s^3 + c s^5 per step
 * with the plan's (float) coefficients. */
static void ns_map_singular_values(const ns_job_t *job, double *sv, int k, double norm) {
  tpla_ns_desc_t d = TPLA_NS_DESC_INIT;
  d.preset = job->a->preset;
  d.steps = job->a->steps;
  float table[3 * NS_MAX_STEPS];
  ns_fill_coefficients(&d, table);
  double scale = (double)ns_effective_safety(&d) * norm + (double)d.eps;
  for (int i = 0; i < k; i++) {
    double x = scale > 0.0 ? sv[i] / scale : 0.0;
    for (int st = 0; st < d.steps; st++) {
      double x2 = x * x;
      x *= (double)table[3 * st] + x2 * ((double)table[3 * st + 1] +
                                        x2 * (double)table[3 * st + 2]);
    }
    sv[i] = x;
  }
}

/* job->polar = U V^T and job->nsref = U p(S) V^T of the global input
 * X = U S V^T (float64 SVD of the input as the ranks rounded it to dtype). */
static int make_refs(tool_rank_t *r, ns_job_t *job, int64_t m, int64_t n) {
  int M = (int)n, N = (int)m, k = m < n ? (int)m : (int)n, lwork = -1, info = 0;
  size_t mn = (size_t)(m * n);
  double *a = malloc(sizeof(double) * mn), *u = malloc(sizeof(double) * (size_t)M * k);
  double *vt = malloc(sizeof(double) * (size_t)k * N), *sv = malloc(sizeof(double) * k);
  int *iwork = malloc(sizeof(int) * 8 * (size_t)k);
  double query = 0.0, *work = NULL, one = 1.0, zero = 0.0, norm2 = 0.0;
  free(job->polar);
  free(job->nsref);
  job->polar = malloc(sizeof(double) * mn);
  job->nsref = malloc(sizeof(double) * mn);
  job->polar_of = -1;
  int failed = !a || !u || !vt || !sv || !iwork || !job->polar || !job->nsref;
  for (size_t i = 0; !failed && i < mn; i++) { /* row-major X = column-major X^T */
    uint16_t h[2];
    tpla_store_elem(h, job->o->dtype, 0, ns_normalish(job->seed, i));
    a[i] = tpla_load_elem(h, job->o->dtype, 0);
    norm2 += a[i] * a[i];
  }
  if (!failed)
    dgesdd_("S", &M, &N, a, &M, sv, u, &M, vt, &k, &query, &lwork, iwork, &info, 1);
  lwork = !failed && info == 0 && query < 2e9 ? (int)query + 1 : 0;
  work = lwork > 0 ? malloc(sizeof(double) * (size_t)lwork) : NULL;
  if (work != NULL)
    dgesdd_("S", &M, &N, a, &M, sv, u, &M, vt, &k, work, &lwork, iwork, &info, 1);
  failed = failed || work == NULL || info != 0;
  if (!failed) { /* X^T = U_a S V_a^T, so U_a V_a^T (column-major) is U V^T row-major */
    dgemm_("N", "N", &M, &N, &k, &one, u, &M, vt, &k, &zero, job->polar, &M, 1, 1);
    ns_map_singular_values(job, sv, k, sqrt(norm2));
    for (int j = 0; j < k; j++)
      for (int i = 0; i < M; i++)
        u[i + (size_t)j * M] *= sv[j];
    dgemm_("N", "N", &M, &N, &k, &one, u, &M, vt, &k, &zero, job->nsref, &M, 1, 1);
  }
  if (failed)
    tool_rank_error(r, "float64 SVD of the %" PRId64 "x%" PRId64 " input failed (info %d, or "
                    "out of host memory)", m, n, info);
  free(a);
  free(u);
  free(vt);
  free(sv);
  free(iwork);
  free(work);
  return failed;
}

/* polar_rel, orth_max and ns_rel in float64 from the gathered result. */
static int errors_f64(tool_rank_t *r, ns_job_t *job, int shape, int64_t m, int64_t n,
                      ns_err_t *e) {
  if (job->polar_of != shape) {
    if (m * n >= ((int64_t)1 << 22)) {
      printf("#   (%" PRId64 "x%" PRId64 ": float64 SVD of the input on the host...)\n", m, n);
      tool_flush();
    }
    if (make_refs(r, job, m, n))
      return 1;
    job->polar_of = shape;
  }
  size_t mn = (size_t)(m * n);
  int s = m < n ? (int)m : (int)n, l = m < n ? (int)n : (int)m, ldb = (int)n;
  double *y = malloc(sizeof(double) * mn), *g = malloc(sizeof(double) * (size_t)s * s);
  if (!y || !g) {
    free(y);
    free(g);
    return tool_rank_error(r, "out of host memory for the float64 check");
  }
  double num = 0.0, den = 0.0, ns_num = 0.0, ns_den = 0.0, one = 1.0, zero = 0.0;
  for (size_t i = 0; i < mn; i++) {
    y[i] = tpla_load_elem(job->y, job->o->dtype, i);
    num += (y[i] - job->polar[i]) * (y[i] - job->polar[i]);
    den += job->polar[i] * job->polar[i];
    ns_num += (y[i] - job->nsref[i]) * (y[i] - job->nsref[i]);
    ns_den += job->nsref[i] * job->nsref[i];
  }
  e->polar_rel = sqrt(num / den);
  e->ns_rel = sqrt(ns_num / ns_den);
  /* Y row-major is B = Y^T column-major (n x m, ld n): Y Y^T = B^T B */
  dsyrk_("U", m <= n ? "T" : "N", &s, &l, &one, y, &ldb, &zero, g, &s, 1, 1);
  double worst = 0.0;
  for (int j = 0; j < s; j++)
    for (int i = 0; i <= j; i++) {
      double d = fabs(g[i + (size_t)j * s] - (i == j ? 1.0 : 0.0));
      if (!(d <= worst))
        worst = d;
    }
  e->orth_max = worst;
  free(y);
  free(g);
  return 0;
}
#endif

double ns_rel_bound(tpla_dtype_t dtype, tpla_dtype_t gram) {
  if (dtype == TPLA_FLOAT32)
    return 0x1p-12;
  double u = dtype == TPLA_FLOAT16 ? 0x1p-10 : 0x1p-8; /* fp16: twice its unit roundoff */
  return (gram == TPLA_FLOAT32 ? 8.0 : 24.0) * u;
}

int ns_compute_errors(tool_rank_t *r, ns_job_t *job, int shape, ns_err_t *e) {
  int64_t m = job->a->shapes[shape][0], n = job->a->shapes[shape][1];
  double t0 = now_s();
  *e = (ns_err_t){NAN, NAN, NAN, 0.0, 0, "none"};
  if (!job->o->check)
    return 0;
  const char *perturb = getenv("TPLA_TOOL_NS_PERTURB");
  double f = perturb != NULL ? atof(perturb) : 0.0;
  for (size_t i = 0; i < (size_t)(m * n); i++) {
    double v = tpla_load_elem(job->y, job->o->dtype, i);
    if (f != 0.0) /* the check's own test: a result off by the factor 1 + f */
      tpla_store_elem(job->y, job->o->dtype, i, v *= 1.0 + f);
    e->nonfinite += !isfinite(v);
  }
  int failed;
#ifdef TPLA_HAVE_LAPACK
  if ((m > n ? m : n) <= job->a->svd_max) {
    e->src = "f64";
    failed = errors_f64(r, job, shape, m, n, e);
    e->seconds = now_s() - t0;
    return failed;
  }
#endif
  e->src = "gemm32";
  failed = orth_gemm32(r, job, m, n, &e->orth_max);
  e->seconds = now_s() - t0;
  return failed;
}

