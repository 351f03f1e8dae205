/*
 * host_gemm.c - the host executor's GEMM: D = alpha op(A) op(B) + beta D,
 * row-major views, fp32/fp16/bf16 inputs, D of the input dtype or fp32,
 * fp32 accumulation.
 *
 * Half operands are widened into fp32 copies in the context's grow-only
 * scratch; a half D is computed in fp32 scratch and rounded once at the
 * end. The fp32 product runs on the Fortran BLAS sgemm_ when CMake found a
 * BLAS (TPLA_HAVE_BLAS), else on a cache-blocked C loop. Row-major is
 * handled with the usual swap: row-major D = op(A) op(B) is column-major
 * D^T = op(B)^T op(A)^T, and a row-major matrix is its transpose in
 * column-major, so sgemm_ gets (B, A) with unchanged transpose flags.
 * beta = 0 never reads D: D is zeroed first (it may hold NaN garbage).
 */
#include "host.h"

#include <limits.h>
#include <string.h>

#ifdef TPLA_HAVE_BLAS
/* Fortran BLAS; the trailing lengths are gfortran's hidden CHARACTER
 * lengths (harmless for BLAS libraries written in C). */
void sgemm_(const char *transa, const char *transb, const int *m, const int *n, const int *k,
            const float *alpha, const float *a, const int *lda, const float *b, const int *ldb,
            const float *beta, float *c, const int *ldc, size_t transa_len, size_t transb_len);
#endif

/* Column panel of op(B) packed by the C loop: KC x NC floats. */
enum { KC = 256, NC = 512 };

/* An fp32 row-major operand: the caller's memory or a widened copy. */
typedef struct {
  float *p;
  int64_t ld;
} f32_view_t;

/* D = beta * D over the rows x cols view (beta = 0 writes zeros). */
static void scale_rows(float *d, int64_t ldd, int64_t rows, int64_t cols, float beta) {
  if (beta == 1.0f)
    return;
  for (int64_t i = 0; i < rows; i++) {
    float *row = d + i * ldd;
    if (beta == 0.0f)
      memset(row, 0, (size_t)cols * sizeof(float));
    else
      for (int64_t j = 0; j < cols; j++)
        row[j] *= beta;
  }
}

/* The fallback: D += alpha op(A) op(B) with op(B) packed panel by panel so
 * the inner loop runs over contiguous memory. D was already scaled. */
static void gemm_loops(bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha,
                       f32_view_t a, f32_view_t b, f32_view_t d, float *panel) {
  for (int64_t j0 = 0; j0 < n; j0 += NC) {
    int64_t nc = n - j0 < NC ? n - j0 : NC;
    for (int64_t p0 = 0; p0 < k; p0 += KC) {
      int64_t kc = k - p0 < KC ? k - p0 : KC;
      for (int64_t p = 0; p < kc; p++)
        for (int64_t j = 0; j < nc; j++)
          panel[p * nc + j] = tb ? b.p[(j0 + j) * b.ld + p0 + p] : b.p[(p0 + p) * b.ld + j0 + j];
      for (int64_t i = 0; i < m; i++) {
        float *drow = d.p + i * d.ld + j0;
        for (int64_t p = 0; p < kc; p++) {
          float av = alpha * (ta ? a.p[(p0 + p) * a.ld + i] : a.p[i * a.ld + p0 + p]);
          const float *brow = panel + p * nc;
          for (int64_t j = 0; j < nc; j++)
            drow[j] += av * brow[j];
        }
      }
    }
  }
}

#ifdef TPLA_HAVE_BLAS
static bool fits_int(int64_t v) { return v <= INT_MAX; }
#endif

/* Widen a half view into contiguous fp32 (ld = cols). */
static void widen(float *dst, const tpla_matrix_t *m) {
  if (m->cols == 0)
    return; /* data may be NULL */
  for (int64_t i = 0; i < m->rows; i++) {
    const uint16_t *row = (const uint16_t *)m->data + i * m->ld;
    float *out = dst + i * m->cols;
    if (m->dtype == TPLA_FLOAT16)
      for (int64_t j = 0; j < m->cols; j++)
        out[j] = tpla_half_to_float(row[j]);
    else
      for (int64_t j = 0; j < m->cols; j++)
        out[j] = tpla_bf16_to_float(row[j]);
  }
}

/* Round contiguous fp32 (ld = cols) into a half view. */
static void narrow(tpla_matrix_t *m, const float *src) {
  for (int64_t i = 0; i < m->rows; i++) {
    uint16_t *row = (uint16_t *)m->data + i * m->ld;
    const float *in = src + i * m->cols;
    if (m->dtype == TPLA_FLOAT16)
      for (int64_t j = 0; j < m->cols; j++)
        row[j] = tpla_float_to_half(in[j]);
    else
      for (int64_t j = 0; j < m->cols; j++)
        row[j] = tpla_float_to_bf16(in[j]);
  }
}

/* Adds rows*cols floats to *total; false on overflow. */
static bool add_floats(size_t *total, int64_t rows, int64_t cols) {
  size_t n;
  return !__builtin_mul_overflow((size_t)rows, (size_t)cols, &n) &&
         !__builtin_add_overflow(*total, n, total);
}

tpla_status_t host_gemm_run(host_scratch_t *scratch, const tpla_gemm_call_t *c) {
  static const char fn[] = "tpla_gemm";
  bool ta = c->op_a == TPLA_OP_T, tb = c->op_b == TPLA_OP_T;
  bool half_a = c->a.dtype != TPLA_FLOAT32, half_d = c->d.dtype != TPLA_FLOAT32;
  bool use_blas = false;
#ifdef TPLA_HAVE_BLAS
  /* BLAS takes 32-bit sizes; huge leading dimensions take the C loop. */
  use_blas = c->k > 0 && (half_a || (fits_int(c->a.ld) && fits_int(c->b.ld))) &&
             (half_d || fits_int(c->d.ld));
#endif
  /* Scratch layout in floats: [A copy][B copy][D copy][packed panel]. */
  size_t a_off = 0, b_off = 0, d_off = 0, panel_off = 0, total = 0;
  bool ok = true;
  if (half_a) {
    ok = add_floats(&total, c->a.rows, c->a.cols);
    b_off = total;
    ok = ok && add_floats(&total, c->b.rows, c->b.cols);
  }
  d_off = total;
  if (half_d)
    ok = ok && add_floats(&total, c->m, c->n);
  panel_off = total;
  if (!use_blas && c->k > 0)
    ok = ok && add_floats(&total, KC, NC);
  if (!ok || total > SIZE_MAX / sizeof(float))
    return tpla_fail(TPLA_ERROR_OUT_OF_MEMORY, fn,
                     "fp32 scratch for a %lldx%lldx%lld GEMM does not fit in memory",
                     (long long)c->m, (long long)c->n, (long long)c->k);
  TPLA_TRY(host_scratch_reserve(scratch, total * sizeof(float), fn));
  float *base = scratch->ptr;

  f32_view_t a = {c->a.data, c->a.ld}, b = {c->b.data, c->b.ld}, d = {c->d.data, c->d.ld};
  if (half_a) {
    a = (f32_view_t){base + a_off, c->a.cols > 0 ? c->a.cols : 1};
    b = (f32_view_t){base + b_off, c->b.cols > 0 ? c->b.cols : 1};
    widen(a.p, &c->a);
    widen(b.p, &c->b);
  }
  if (half_d) {
    d = (f32_view_t){base + d_off, c->n};
    if (c->beta != 0.0f)
      widen(d.p, &c->d);
  }

  scale_rows(d.p, d.ld, c->m, c->n, c->beta); /* beta = 0: D is never read */
  if (c->k > 0 && c->alpha != 0.0f) {
#ifdef TPLA_HAVE_BLAS
    if (use_blas) {
      int m = (int)c->m, n = (int)c->n, k = (int)c->k;
      int lda = (int)a.ld, ldb = (int)b.ld, ldd = (int)d.ld;
      float one = 1.0f;
      sgemm_(tb ? "T" : "N", ta ? "T" : "N", &n, &m, &k, &c->alpha, b.p, &ldb, a.p, &lda, &one,
             d.p, &ldd, 1, 1);
    }
#endif
    if (!use_blas)
      gemm_loops(ta, tb, c->m, c->n, c->k, c->alpha, a, b, d, base + panel_off);
  }
  if (half_d) {
    tpla_matrix_t out = c->d;
    narrow(&out, d.p);
  }
  return TPLA_SUCCESS;
}
