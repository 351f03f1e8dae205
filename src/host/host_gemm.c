/*
 * host_gemm.c - the host executor's GEMM: D = alpha op(A) op(B) + beta C
 * (C is D, or a separate matrix of D's shape and dtype: internal.h),
 * row-major views, fp32/fp16/bf16 inputs, D of the input dtype or fp32,
 * fp32 accumulation; and FP8 emulated on the same path.
 *
 * Half and FP8 operands are widened into fp32 copies in the context's
 * grow-only scratch (FP8 decodes exactly); a non-fp32 D is computed in fp32
 * scratch and rounded once at the end. The fp32 product runs on the Fortran
 * BLAS sgemm_ when CMake found a BLAS (TPLA_HAVE_BLAS), else on a
 * cache-blocked C loop. Row-major is handled with the usual swap: row-major
 * D = op(A) op(B) is column-major D^T = op(B)^T op(A)^T, and a row-major
 * matrix is its transpose in column-major, so sgemm_ gets (B, A) with
 * unchanged transpose flags. beta = 0 never reads D: D is zeroed first (it
 * may hold NaN garbage). A separate C is loaded (widened) into D's fp32 view
 * where D would have been, so the rest is the C = D path.
 *
 * FP8 (tpla.h): D = d_scale (alpha a_scale b_scale op(A) op(B) + beta D).
 * The input scales fold into alpha (one fp32 rounding, as a GPU epilogue
 * does), d_amax is the max |.| of the fp32 result before d_scale, and an FP8
 * D is d_scale times that result in fp32, rounded to nearest even with
 * saturation. The scales and d_amax are host pointers here. Both
 * accumulation modes are the same fp32 sgemm on the host: SPLIT and FAST
 * differ only in how often the GPU's tensor cores promote partial sums.
 */
#include "host.h"

#include <float.h>
#include <limits.h>
#include <math.h>
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

static bool is_fp8(tpla_dtype_t t) { return t == TPLA_FLOAT8_E4M3 || t == TPLA_FLOAT8_E5M2; }

/* Widen a half or FP8 view into contiguous fp32 (ld = cols). */
static void widen(float *dst, const tpla_matrix_t *m) {
  if (m->cols == 0)
    return; /* data may be NULL */
  float fp8_value[256];
  if (is_fp8(m->dtype))
    for (int c = 0; c < 256; c++)
      fp8_value[c] = tpla_fp8_to_float((uint8_t)c, m->dtype);
  for (int64_t i = 0; i < m->rows; i++) {
    float *out = dst + i * m->cols;
    if (is_fp8(m->dtype)) {
      const uint8_t *row = (const uint8_t *)m->data + i * m->ld;
      for (int64_t j = 0; j < m->cols; j++)
        out[j] = fp8_value[row[j]];
      continue;
    }
    const uint16_t *row = (const uint16_t *)m->data + i * m->ld;
    if (m->dtype == TPLA_FLOAT16)
      for (int64_t j = 0; j < m->cols; j++)
        out[j] = tpla_half_to_float(row[j]);
    else
      for (int64_t j = 0; j < m->cols; j++)
        out[j] = tpla_bf16_to_float(row[j]);
  }
}

/* Round contiguous fp32 (ld = cols) into a half or FP8 view; FP8 values are
 * multiplied by `scale` (d_scale) in fp32 first and saturate as cuBLASLt's
 * do: infinities too become the largest finite value, in E5M2 as well. */
static void narrow(tpla_matrix_t *m, const float *src, float scale) {
  for (int64_t i = 0; i < m->rows; i++) {
    const float *in = src + i * m->cols;
    if (is_fp8(m->dtype)) {
      uint8_t *row = (uint8_t *)m->data + i * m->ld;
      for (int64_t j = 0; j < m->cols; j++) {
        float v = scale * in[j];
        row[j] = tpla_double_to_fp8(isinf(v) ? copysign(DBL_MAX, v) : v, m->dtype);
      }
      continue;
    }
    uint16_t *row = (uint16_t *)m->data + i * m->ld;
    if (m->dtype == TPLA_FLOAT16)
      for (int64_t j = 0; j < m->cols; j++)
        row[j] = tpla_float_to_half(in[j]);
    else
      for (int64_t j = 0; j < m->cols; j++)
        row[j] = tpla_float_to_bf16(in[j]);
  }
}

/* max |d| over a rows x cols fp32 view; NaN if any element is NaN. */
static float abs_max(const float *d, int64_t ldd, int64_t rows, int64_t cols) {
  float amax = 0.0f;
  for (int64_t i = 0; i < rows; i++)
    for (int64_t j = 0; j < cols; j++) {
      float v = fabsf(d[i * ldd + j]);
      if (isnan(v))
        return v;
      if (v > amax)
        amax = v;
    }
  return amax;
}

/* The fp32 D view (rows x cols) = C, a separate fp32 matrix. */
static void copy_rows(float *d, int64_t ldd, const tpla_matrix_t *c) {
  for (int64_t i = 0; i < c->rows; i++)
    memcpy(d + i * ldd, (const float *)c->data + i * c->ld, (size_t)c->cols * sizeof(float));
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
  /* Inputs: A and B are both fp32 or both widened (half or FP8, maybe mixed). */
  bool wide_in = c->a.dtype != TPLA_FLOAT32, wide_d = c->d.dtype != TPLA_FLOAT32;
  /* C apart from D; NULL when it is D or is not read (beta = 0) */
  const tpla_matrix_t *cm = c->c;
  if (cm != NULL && (c->beta == 0.0f || (cm->data == c->d.data && cm->ld == c->d.ld)))
    cm = NULL;
  if (cm != NULL && (cm->dtype != c->d.dtype || cm->rows != c->m || cm->cols != c->n))
    return tpla_fail(TPLA_ERROR_INTERNAL, fn,
                     "C (%lldx%lld %s) must be m x n = %lldx%lld of D's dtype %s",
                     (long long)cm->rows, (long long)cm->cols, tpla_dtype_name(cm->dtype),
                     (long long)c->m, (long long)c->n, tpla_dtype_name(c->d.dtype));
  const tpla_fp8_scaling_t *f8 = &c->fp8; /* default unless A is FP8 */
  /* alpha a_scale b_scale, rounded once to fp32 */
  double scales = (f8->a_scale ? (double)*f8->a_scale : 1.0) *
                  (f8->b_scale ? (double)*f8->b_scale : 1.0);
  float alpha = (float)((double)c->alpha * scales);
  bool use_blas = false;
#ifdef TPLA_HAVE_BLAS
  /* BLAS takes 32-bit sizes; huge leading dimensions take the C loop. A
   * zero alpha from nonzero alpha and FP8 scales (a zero scale, an fp32
   * underflow) takes it too: sgemm would skip the product, and on CUDA the
   * scales, read on the device, cannot skip it, so NaN and infinity in A or
   * B still reach D (0 * inf) and the amax. */
  use_blas = c->k > 0 && (wide_in || (fits_int(c->a.ld) && fits_int(c->b.ld))) &&
             (wide_d || fits_int(c->d.ld)) && (alpha != 0.0f || c->alpha == 0.0f);
#endif
  /* Scratch layout in floats: [A copy][B copy][D copy][packed panel]. */
  size_t a_off = 0, b_off = 0, d_off = 0, panel_off = 0, total = 0;
  bool ok = true;
  if (wide_in) {
    ok = add_floats(&total, c->a.rows, c->a.cols);
    b_off = total;
    ok = ok && add_floats(&total, c->b.rows, c->b.cols);
  }
  d_off = total;
  if (wide_d)
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
  if (wide_in) {
    a = (f32_view_t){base + a_off, c->a.cols > 0 ? c->a.cols : 1};
    b = (f32_view_t){base + b_off, c->b.cols > 0 ? c->b.cols : 1};
    widen(a.p, &c->a);
    widen(b.p, &c->b);
  }
  if (wide_d) {
    d = (f32_view_t){base + d_off, c->n};
    if (c->beta != 0.0f)
      widen(d.p, cm != NULL ? cm : &c->d);
  } else if (cm != NULL) {
    copy_rows(d.p, d.ld, cm);
  }

  scale_rows(d.p, d.ld, c->m, c->n, c->beta); /* beta = 0: D (or C) is never read */
  if (c->k > 0 && c->alpha != 0.0f) {
#ifdef TPLA_HAVE_BLAS
    if (use_blas) {
      int m = (int)c->m, n = (int)c->n, k = (int)c->k;
      int lda = (int)a.ld, ldb = (int)b.ld, ldd = (int)d.ld;
      float one = 1.0f;
      sgemm_(tb ? "T" : "N", ta ? "T" : "N", &n, &m, &k, &alpha, b.p, &ldb, a.p, &lda, &one,
             d.p, &ldd, 1, 1);
    }
#endif
    if (!use_blas)
      gemm_loops(ta, tb, c->m, c->n, c->k, alpha, a, b, d, base + panel_off);
  }
  if (f8->d_amax) /* before d_scale and before rounding to D's dtype */
    *f8->d_amax = abs_max(d.p, d.ld, c->m, c->n);
  if (wide_d) {
    tpla_matrix_t out = c->d;
    narrow(&out, d.p, f8->d_scale ? *f8->d_scale : 1.0f);
  }
  return TPLA_SUCCESS;
}
