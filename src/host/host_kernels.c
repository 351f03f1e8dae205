/*
 * host_kernels.c - the elementwise building blocks of the algorithms on the
 * host executor (the backend's axpby, sumsq, scale_by_norm, zero,
 * mirror_upper, add_diagonal; see internal.h). Views are validated by their callers.
 * Math is fp32 like the CUDA kernels', except the norm's: the sum of
 * squares, the divisor D and x (1/D) are fp64 there and here (the CUDA
 * kernels sum in another order).
 */
#include "host.h"

#include <math.h>
#include <string.h>

static inline float load(const tpla_matrix_t *m, int64_t i, int64_t j) {
  size_t at = (size_t)(i * m->ld + j);
  switch (m->dtype) {
  case TPLA_FLOAT32: return ((const float *)m->data)[at];
  case TPLA_FLOAT16: return tpla_half_to_float(((const uint16_t *)m->data)[at]);
  case TPLA_BFLOAT16: return tpla_bf16_to_float(((const uint16_t *)m->data)[at]);
  case TPLA_FLOAT64: return (float)((const double *)m->data)[at];
  case TPLA_UINT8: return ((const uint8_t *)m->data)[at];
  case TPLA_FLOAT8_E4M3:
  case TPLA_FLOAT8_E5M2: return tpla_fp8_to_float(((const uint8_t *)m->data)[at], m->dtype);
  }
  return 0.0f;
}

static inline void store(const tpla_matrix_t *m, int64_t i, int64_t j, float v) {
  size_t at = (size_t)(i * m->ld + j);
  switch (m->dtype) {
  case TPLA_FLOAT32: ((float *)m->data)[at] = v; break;
  case TPLA_FLOAT16: ((uint16_t *)m->data)[at] = tpla_float_to_half(v); break;
  case TPLA_BFLOAT16: ((uint16_t *)m->data)[at] = tpla_float_to_bf16(v); break;
  case TPLA_FLOAT64: ((double *)m->data)[at] = v; break;
  case TPLA_UINT8: ((uint8_t *)m->data)[at] = (uint8_t)v; break;
  case TPLA_FLOAT8_E4M3:
  case TPLA_FLOAT8_E5M2: ((uint8_t *)m->data)[at] = tpla_double_to_fp8(v, m->dtype); break;
  }
}

tpla_status_t host_axpby(tpla_matrix_t y, tpla_matrix_t x, float alpha, float beta) {
  if (y.rows == 0 || y.cols == 0)
    return TPLA_SUCCESS; /* data may be NULL */
  for (int64_t i = 0; i < y.rows; i++) {
    if (beta == 0.0f && x.dtype == TPLA_FLOAT32 && y.dtype == TPLA_FLOAT32 && alpha == 1.0f) {
      memmove((float *)y.data + i * y.ld, (const float *)x.data + i * x.ld,
              (size_t)y.cols * sizeof(float));
      continue;
    }
    for (int64_t j = 0; j < y.cols; j++) {
      float v = alpha * load(&x, i, j);
      if (beta != 0.0f) /* beta = 0 never reads y */
        v += beta * load(&y, i, j);
      store(&y, i, j, v);
    }
  }
  return TPLA_SUCCESS;
}

tpla_status_t host_sumsq(double *sumsq, tpla_matrix_t x) {
  double acc = 0.0;
  for (int64_t i = 0; i < x.rows; i++)
    for (int64_t j = 0; j < x.cols; j++) {
      double v = load(&x, i, j);
      acc += v * v;
    }
  *sumsq = acc;
  return TPLA_SUCCESS;
}

tpla_status_t host_scale_by_norm(tpla_matrix_t y, tpla_matrix_t x, const double *sumsq,
                                 float safety, float eps) {
  if (y.rows == 0 || y.cols == 0)
    return TPLA_SUCCESS;
  double divisor = safety * sqrt(*sumsq) + eps;
  double scale = divisor == 0.0 ? 0.0 : 1.0 / divisor; /* X = 0, eps = 0: zeros */
  for (int64_t i = 0; i < y.rows; i++)
    for (int64_t j = 0; j < y.cols; j++)
      store(&y, i, j, (float)(load(&x, i, j) * scale));
  return TPLA_SUCCESS;
}

tpla_status_t host_zero(tpla_matrix_t y) {
  size_t es = tpla_dtype_size(y.dtype);
  for (int64_t i = 0; i < y.rows && y.cols > 0; i++)
    memset((char *)y.data + (size_t)(i * y.ld) * es, 0, (size_t)y.cols * es);
  return TPLA_SUCCESS;
}

/* Every element below the diagonal blocks of edge `whole` (0: below the
 * diagonal); the blocks' own lower parts are left as computed. */
tpla_status_t host_add_diagonal(tpla_matrix_t a, float value) {
  for (int64_t i = 0; i < a.rows && i < a.cols; i++) {
    size_t at = (size_t)(i * a.ld + i);
    float v = (float)tpla_load_elem(a.data, a.dtype, at) + value;
    tpla_store_elem(a.data, a.dtype, at, v);
  }
  return TPLA_SUCCESS;
}

tpla_status_t host_mirror_upper(tpla_matrix_t a, int64_t whole) {
  if (a.rows == 0 || a.cols == 0)
    return TPLA_SUCCESS;
  size_t es = tpla_dtype_size(a.dtype);
  char *base = a.data;
  int64_t n = a.rows < a.cols ? a.rows : a.cols; /* the leading square, as on CUDA */
  for (int64_t i = 1; i < n; i++) {
    int64_t end = whole > 0 ? i / whole * whole : i; /* the row's diagonal block starts there */
    for (int64_t j = 0; j < end; j++)
      memcpy(base + (size_t)(i * a.ld + j) * es, base + (size_t)(j * a.ld + i) * es, es);
  }
  return TPLA_SUCCESS;
}
