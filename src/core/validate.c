/*
 * validate.c - argument checks shared by every entry point: matrix views,
 * configuration structs.
 */
#include "internal.h"

#include <inttypes.h>

/* Largest byte extent we accept: keeps every offset computation in int64. */
#define MAX_EXTENT_BYTES ((int64_t)1 << 62)

tpla_status_t tpla_check_matrix(const char *fn, const char *arg, const tpla_matrix_t *m) {
  if (!tpla_dtype_valid(m->dtype))
    return tpla_fail(TPLA_ERROR_INVALID_ARGUMENT, fn, "argument '%s': unknown dtype %d", arg,
                     (int)m->dtype);
  if (m->rows < 0 || m->cols < 0)
    return tpla_fail(TPLA_ERROR_INVALID_ARGUMENT, fn,
                     "argument '%s': negative size (rows %" PRId64 ", cols %" PRId64 ")", arg,
                     m->rows, m->cols);
  int64_t min_ld = m->cols > 1 ? m->cols : 1;
  if (m->ld < min_ld)
    return tpla_fail(TPLA_ERROR_INVALID_ARGUMENT, fn,
                     "argument '%s': ld (%" PRId64 ") < max(cols, 1) (%" PRId64 ")", arg, m->ld,
                     min_ld);
  int64_t esize = (int64_t)tpla_dtype_size(m->dtype);
  /* the row pitch in bytes must be addressable too, one row or not */
  if (m->ld > MAX_EXTENT_BYTES / esize)
    return tpla_fail(TPLA_ERROR_INVALID_ARGUMENT, fn,
                     "argument '%s': ld (%" PRId64 ") is too large to address", arg, m->ld);
  if (m->rows > 0 && m->cols > 0) {
    /* extent = ((rows-1)*ld + cols) * esize, checked without overflow */
    if (m->rows - 1 > (MAX_EXTENT_BYTES / esize - m->cols) / m->ld)
      return tpla_fail(TPLA_ERROR_INVALID_ARGUMENT, fn,
                       "argument '%s': %" PRId64 "x%" PRId64 " (ld %" PRId64
                       ") %s matrix is too large to address",
                       arg, m->rows, m->cols, m->ld, tpla_dtype_name(m->dtype));
    if (m->data == NULL)
      return tpla_fail(TPLA_ERROR_INVALID_ARGUMENT, fn,
                       "argument '%s': data is NULL for a %" PRId64 "x%" PRId64 " matrix", arg,
                       m->rows, m->cols);
  }
  return TPLA_SUCCESS;
}

size_t tpla_matrix_extent_bytes(const tpla_matrix_t *m) {
  if (m->rows == 0 || m->cols == 0)
    return 0;
  return (size_t)((m->rows - 1) * m->ld + m->cols) * tpla_dtype_size(m->dtype);
}

static bool ranges_intersect(int64_t a0, int64_t a1, int64_t b0, int64_t b1) {
  return a0 < b1 && b0 < a1; /* [a0, a1) and [b0, b1) */
}

/* Exact for two views with the same row pitch (column blocks of one buffer
 * do not overlap); conservative (byte extents) otherwise. */
bool tpla_matrices_overlap(const tpla_matrix_t *x, const tpla_matrix_t *y) {
  size_t nx = tpla_matrix_extent_bytes(x), ny = tpla_matrix_extent_bytes(y);
  if (nx == 0 || ny == 0)
    return false;
  uintptr_t x0 = (uintptr_t)x->data, y0 = (uintptr_t)y->data;
  if (!(x0 < y0 + ny && y0 < x0 + nx))
    return false;
  int64_t pitch = x->ld * (int64_t)tpla_dtype_size(x->dtype);
  if (pitch != y->ld * (int64_t)tpla_dtype_size(y->dtype))
    return true;
  int64_t xb = x->cols * (int64_t)tpla_dtype_size(x->dtype);
  int64_t yb = y->cols * (int64_t)tpla_dtype_size(y->dtype);
  int64_t delta = (int64_t)(y0 - x0); /* y's start relative to x's, in bytes */
  int64_t q = delta / pitch, r = delta % pitch;
  if (r < 0) {
    r += pitch;
    q -= 1;
  }
  /* y's row j starts in x's row j+q at byte r and may spill into row j+q+1. */
  if (r < xb && ranges_intersect(q, q + y->rows, 0, x->rows))
    return true;
  return r + yb > pitch && ranges_intersect(q + 1, q + 1 + y->rows, 0, x->rows);
}

tpla_status_t tpla_check_config(const char *fn, const tpla_config_t *cfg, tpla_config_t *out) {
  tpla_config_t def = TPLA_CONFIG_INIT;
  if (cfg) {
    if (cfg->size != sizeof(tpla_config_t))
      return tpla_fail(TPLA_ERROR_INVALID_ARGUMENT, fn,
                       "argument 'cfg': size field is %zu, expected %zu (initialize with "
                       "TPLA_CONFIG_INIT)",
                       cfg->size, sizeof(tpla_config_t));
    if (cfg->timeout_ms < 0)
      return tpla_fail(TPLA_ERROR_INVALID_ARGUMENT, fn,
                       "argument 'cfg': timeout_ms is negative (%" PRId64 ")", cfg->timeout_ms);
    def = *cfg;
  }
  if (def.timeout_ms == 0)
    def.timeout_ms = TPLA_DEFAULT_TIMEOUT_MS;
  if (def.timeout_ms > TPLA_MAX_TIMEOUT_MS) /* "never": deadlines must not overflow */
    def.timeout_ms = TPLA_MAX_TIMEOUT_MS;
  if (def.gemm_workspace_bytes == 0)
    def.gemm_workspace_bytes = TPLA_DEFAULT_GEMM_WORKSPACE;
  *out = def;
  return TPLA_SUCCESS;
}

tpla_status_t tpla_check_in_place(const char *fn, const char *small, const void *p, size_t n,
                                  const char *large, const void *q, size_t total, size_t at,
                                  tpla_dtype_t dtype) {
  size_t es = tpla_dtype_size(dtype);
  if ((const char *)p == (const char *)q + at * es || !tpla_bytes_overlap(p, n * es, q, total * es))
    return TPLA_SUCCESS;
  return tpla_fail(TPLA_ERROR_INVALID_ARGUMENT, fn,
                   "argument '%s' overlaps '%s' but is not the in-place position %s + %zu "
                   "elements",
                   small, large, large, at);
}

tpla_status_t tpla_check_sendrecv_buffers(const char *fn, const void *send, size_t send_count,
                                          const void *recv, size_t recv_count, bool self,
                                          tpla_dtype_t dtype) {
  size_t es = tpla_dtype_size(dtype);
  if ((self && recv == send) || !tpla_bytes_overlap(send, send_count * es, recv, recv_count * es))
    return TPLA_SUCCESS;
  return tpla_fail(TPLA_ERROR_INVALID_ARGUMENT, fn,
                   "argument 'recv' overlaps 'send' (only a self exchange may be in place, "
                   "with recv == send)");
}
