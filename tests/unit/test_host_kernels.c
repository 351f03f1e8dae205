/*
 * test_host_kernels.c - the host executor's algorithm building blocks
 * (backend axpby, sumsq, scale_by_norm, zero, mirror_upper, mem_alloc/free)
 * against float64 references, over dtype combinations and padded views.
 * Run: ./test_host_kernels
 */
#include "test.h"

#include "internal.h"
#include "ranks.h"

#include <stdlib.h>

static tpla_host_group_t group;
static tpla_ctx_t ctx;
static rng_t rng;

static const tpla_dtype_t types[] = {TPLA_FLOAT32, TPLA_FLOAT16, TPLA_BFLOAT16};

/* Unit roundoff of a dtype's storage (fp32 math on top). */
static double unit(tpla_dtype_t t) {
  return t == TPLA_FLOAT16 ? 0x1p-11 : t == TPLA_BFLOAT16 ? 0x1p-8 : 0x1p-24;
}

static tpla_matrix_t view(int64_t rows, int64_t cols, int64_t ld, tpla_dtype_t t) {
  tpla_matrix_t m = {calloc((size_t)(rows * ld + 1), tpla_dtype_size(t)), rows, cols, ld, t};
  fill_random(m, &rng);
  return m;
}

static double at(const tpla_matrix_t *m, int64_t i, int64_t j) {
  return tpla_load_elem(m->data, m->dtype, (size_t)(i * m->ld + j));
}

static void test_axpby_every_dtype_pair(void) {
  rng_seed(&rng, fresh_seed("test_axpby_every_dtype_pair"));
  for (int ty = 0; ty < 3; ty++)
    for (int tx = 0; tx < 3; tx++)
      for (int b = 0; b < 2; b++) {
        const int64_t rows = 9, cols = 13;
        float alpha = -1.25f, beta = b ? 0.5f : 0.0f;
        tpla_matrix_t y = view(rows, cols, cols + 3, types[ty]), x = view(rows, cols, cols,
                                                                          types[tx]);
        size_t ybytes = (size_t)(rows * y.ld + 1) * tpla_dtype_size(y.dtype);
        unsigned char *y0 = malloc(ybytes);
        if (!b) /* beta = 0 must not read y */
          for (int64_t i = 0; i < rows; i++)
            for (int64_t j = 0; j < cols; j++)
              tpla_store_elem(y.data, y.dtype, (size_t)(i * y.ld + j), NAN);
        memcpy(y0, y.data, ybytes);
        ASSERT_OK(ctx->backend->axpby(ctx, y, x, alpha, beta, (tpla_batch_t){0}, NULL));
        tpla_matrix_t yref = y;
        yref.data = y0;
        for (int64_t i = 0; i < rows; i++) {
          for (int64_t j = 0; j < cols; j++) {
            double ax = alpha * at(&x, i, j), by = b ? beta * at(&yref, i, j) : 0.0;
            /* rounding of the result, fp32 math on the terms, fp16 subnormals */
            double tol = (2 * unit(types[ty]) + 4 * 0x1p-24) * (fabs(ax) + fabs(by)) + 0x1p-24;
            ASSERT_NEAR(at(&y, i, j), ax + by, tol);
          }
          size_t pad = (size_t)(i * y.ld + cols) * tpla_dtype_size(y.dtype);
          ASSERT_TRUE(memcmp((char *)y.data + pad, y0 + pad, 3 * tpla_dtype_size(y.dtype)) == 0);
        }
        free(y.data), free(x.data), free(y0);
      }
}

static void test_sumsq_and_scale_by_norm(void) {
  rng_seed(&rng, fresh_seed("test_sumsq_and_scale_by_norm"));
  for (int t = 0; t < 3; t++) {
    tpla_matrix_t x = view(17, 23, 30, types[t]);
    double want = 0;
    for (int64_t i = 0; i < x.rows; i++)
      for (int64_t j = 0; j < x.cols; j++)
        want += at(&x, i, j) * at(&x, i, j);
    double got = -1.0;
    ASSERT_OK(ctx->backend->sumsq(ctx, &got, x, NULL));
    ASSERT_NEAR(got, want, 1e-12 * want);
    /* in place: x / (1.01 * ||x|| + 1e-7) has norm just under 1/1.01 */
    tpla_matrix_t x0 = view(17, 23, 30, types[t]);
    memcpy(x0.data, x.data, (size_t)(17 * 30) * tpla_dtype_size(types[t]));
    ASSERT_OK(ctx->backend->scale_by_norm(ctx, x, x, &got, 1.01f, 1e-7f, NULL));
    double scale = 1.0 / (1.01 * sqrt((double)got) + 1e-7), norm = 0;
    for (int64_t i = 0; i < x.rows; i++)
      for (int64_t j = 0; j < x.cols; j++) {
        double w = at(&x0, i, j) * scale;
        ASSERT_NEAR(at(&x, i, j), w, (2 * unit(types[t]) + 4 * 0x1p-24) * fabs(w) + 0x1p-24);
        norm += at(&x, i, j) * at(&x, i, j);
      }
    ASSERT_NEAR(sqrt(norm), 1 / 1.01, 4 * unit(types[t]));
    free(x.data), free(x0.data);
  }
}

/* Entries whose squares overflow fp32 (bf16 and fp32 reach 3.4e38): the sum
 * of squares is right and the normalized matrix has norm 1/1.01, not zeros
 * (an fp32 sum of squares made the divisor infinite). */
static void test_norm_of_huge_entries(void) {
  rng_seed(&rng, fresh_seed("test_norm_of_huge_entries"));
  const tpla_dtype_t big[] = {TPLA_FLOAT32, TPLA_BFLOAT16};
  for (int t = 0; t < 2; t++) {
    tpla_matrix_t x = view(20, 31, 33, big[t]);
    double want = 0;
    for (int64_t i = 0; i < x.rows; i++)
      for (int64_t j = 0; j < x.cols; j++) {
        double v = at(&x, i, j) * (i == 3 && j == 5 ? 3e38 : 1e30);
        tpla_store_elem(x.data, x.dtype, (size_t)(i * x.ld + j), v);
        want += at(&x, i, j) * at(&x, i, j);
      }
    double got = -1.0;
    ASSERT_OK(ctx->backend->sumsq(ctx, &got, x, NULL));
    ASSERT_TRUE(isfinite(want));
    ASSERT_NEAR(got, want, 1e-12 * want);
    ASSERT_OK(ctx->backend->scale_by_norm(ctx, x, x, &got, 1.01f, 1e-7f, NULL));
    double norm = 0;
    for (int64_t i = 0; i < x.rows; i++)
      for (int64_t j = 0; j < x.cols; j++)
        norm += at(&x, i, j) * at(&x, i, j);
    ASSERT_NEAR(sqrt(norm), 1 / 1.01, 4 * unit(big[t]));
    free(x.data);
  }
}

/* Norms below fp32's normal range: x / D, and zeros for X = 0 with a tiny
 * eps (the CUDA kernels once gave inf and NaN here: test_gpu_norm). */
static void test_norm_of_tiny_entries(void) {
  for (int c = 0; c < 4; c++) {
    tpla_matrix_t x = view(5, 7, 7, c & 1 ? TPLA_BFLOAT16 : TPLA_FLOAT32);
    bool zero = c >= 2;
    float eps = zero ? 1e-40f : 0.0f;
    double want = 0;
    for (int64_t i = 0; i < 35; i++) {
      tpla_store_elem(x.data, x.dtype, (size_t)i, zero ? 0.0 : 1e-40 * (1 + i % 3));
      want += at(&x, 0, i) * at(&x, 0, i);
    }
    tpla_matrix_t x0 = view(5, 7, 7, x.dtype);
    memcpy(x0.data, x.data, 35 * tpla_dtype_size(x.dtype));
    double got = -1.0;
    ASSERT_OK(ctx->backend->sumsq(ctx, &got, x, NULL));
    ASSERT_NEAR(got, want, 1e-12 * want);
    ASSERT_OK(ctx->backend->scale_by_norm(ctx, x, x, &got, 1.0f, eps, NULL));
    for (int64_t i = 0; i < 35; i++) {
      double ref = at(&x0, 0, i) / (sqrt(want) + (double)eps);
      ASSERT_TRUE(isfinite(at(&x, 0, i)));
      ASSERT_NEAR(at(&x, 0, i), ref, (unit(x.dtype) + 8 * 0x1p-24) * fabs(ref));
    }
    free(x.data), free(x0.data);
  }
}

/* zero writes 0 over NaN (it never reads y) and leaves the padding alone. */
static void test_zero(void) {
  for (int t = 0; t < 3; t++) {
    tpla_matrix_t y = view(5, 6, 9, types[t]);
    for (int64_t i = 0; i < 5; i++)
      for (int64_t j = 0; j < 9; j++)
        tpla_store_elem(y.data, y.dtype, (size_t)(i * y.ld + j), j < 6 ? NAN : 7.0);
    ASSERT_OK(ctx->backend->zero(ctx, y, NULL));
    for (int64_t i = 0; i < 5; i++)
      for (int64_t j = 0; j < 9; j++)
        ASSERT_TRUE(at(&y, i, j) == (j < 6 ? 0.0 : 7.0));
    free(y.data);
  }
}

/* whole > 0: the diagonal blocks of that edge (the last one short) are
 * left as they are, every other element below the diagonal is mirrored;
 * only the leading min(rows, cols) square, as the CUDA kernel does. */
static void test_mirror_upper(void) {
  rng_seed(&rng, fresh_seed("test_mirror_upper"));
  static const int64_t wholes[] = {0, 1, 3, 4, 10, 11, 20};
  static const int64_t shapes[][3] = {{11, 11, 14}, {11, 7, 9}, {7, 11, 14}}; /* rows cols ld */
  for (int t = 0; t < 3; t++)
    for (int k = 0; k < 3; k++)
      for (size_t w = 0; w < sizeof wholes / sizeof wholes[0]; w++) {
        int64_t whole = wholes[w], r = shapes[k][0], c = shapes[k][1], ld = shapes[k][2];
        int64_t n = r < c ? r : c;
        tpla_matrix_t a = view(r, c, ld, types[t]);
        size_t bytes = (size_t)(r * ld + 1) * tpla_dtype_size(types[t]);
        unsigned char *a0 = malloc(bytes);
        memcpy(a0, a.data, bytes);
        tpla_matrix_t before = a;
        before.data = a0;
        ASSERT_OK(ctx->backend->mirror_upper(ctx, a, whole, (tpla_batch_t){0}, NULL));
        for (int64_t i = 0; i < r; i++)
          for (int64_t j = 0; j < ld; j++) {
            bool in_block = whole > 0 && i / whole == j / whole;
            double want = i >= n || j >= n          ? at(&before, i, j) /* outside, padding */
                          : j >= i || in_block      ? at(&before, i, j) /* upper, blocks kept */
                                                    : at(&before, j, i); /* lower mirrored */
            ASSERT_TRUE(at(&a, i, j) == want);
          }
        free(a.data), free(a0);
      }
}

/* a(i, i) += value over min(rows, cols), in fp32 and rounded once to the
 * dtype; off-diagonal elements and padding untouched; each of a batch. */
static void test_add_diagonal(void) {
  rng_seed(&rng, fresh_seed("test_add_diagonal"));
  static const int64_t shapes[][3] = {{11, 11, 14}, {5, 9, 9}, {9, 5, 7}, {1, 1, 1}};
  for (int t = 0; t < 3; t++)
    for (int k = 0; k < 4; k++) {
      int64_t r = shapes[k][0], c = shapes[k][1], ld = shapes[k][2];
      size_t member = (size_t)(r * ld), bytes = (2 * member + 1) * tpla_dtype_size(types[t]);
      tpla_matrix_t a = view(2 * r, c, ld, types[t]); /* two members of r rows */
      unsigned char *a0 = malloc(bytes);
      memcpy(a0, a.data, bytes);
      tpla_matrix_t before = a, one = a;
      before.data = a0;
      one.rows = r;
      tpla_batch_t batch = {2, member * tpla_dtype_size(types[t])};
      ASSERT_OK(ctx->backend->add_diagonal(ctx, one, -11.875f, batch, NULL));
      for (int64_t i = 0; i < 2 * r; i++)
        for (int64_t j = 0; j < ld; j++) {
          double want = at(&before, i, j);
          if (j == i % r && j < c) { /* one rounding of the fp32 sum */
            float v = (float)want - 11.875f;
            tpla_store_elem(&v, types[t], 0, v);
            want = tpla_load_elem(&v, types[t], 0);
          }
          ASSERT_TRUE(at(&a, i, j) == want);
        }
      free(a.data), free(a0);
    }
}

static void test_mem_alloc_and_free(void) {
  void *p = NULL;
  ASSERT_OK(ctx->backend->mem_alloc(ctx, 1000, &p));
  ASSERT_TRUE(p != NULL && ((uintptr_t)p % 64) == 0);
  memset(p, 1, 1000);
  ctx->backend->mem_free(ctx, p);
  ASSERT_OK(ctx->backend->mem_alloc(ctx, 0, &p)); /* zero bytes: a valid pointer */
  ASSERT_TRUE(p != NULL);
  ctx->backend->mem_free(ctx, p);
  ctx->backend->mem_free(ctx, NULL);
  void *q = (void *)&p;
  ASSERT_STATUS(ctx->backend->mem_alloc(ctx, SIZE_MAX - 8, &q), TPLA_ERROR_OUT_OF_MEMORY);
  ASSERT_TRUE(q == (void *)&p);
}

int main(void) {
  if (single_host_ctx(&group, &ctx) != 0)
    return 1;
  TEST(test_axpby_every_dtype_pair);
  TEST(test_sumsq_and_scale_by_norm);
  TEST(test_norm_of_huge_entries);
  TEST(test_norm_of_tiny_entries);
  TEST(test_zero);
  TEST(test_mirror_upper);
  TEST(test_add_diagonal);
  TEST(test_mem_alloc_and_free);
  tpla_ctx_destroy(ctx);
  tpla_host_group_destroy(group);
  return test_summary();
}
