/*
 * test_host_gemm.c - tpla_gemm on the host executor against a float64
 * reference: every input dtype x D dtype x op_a x op_b, odd shapes, padded
 * leading dimensions, alpha/beta (beta = 1 accumulation, beta = 0 over a
 * NaN-poisoned D), k = 0, column blocks of one allocation, a leading
 * dimension beyond 2^31. The measure is the Frobenius norm of the error
 * relative to that of |alpha| |op(A)| |op(B)| + |beta| |D| (the scale of
 * the roundings), bounded by the output rounding (fp32: 1e-5; fp16: 2^-11,
 * bf16: 2^-8, plus fp32 accumulation). Padding, inputs and everything around D must
 * be untouched. Fresh random inputs each run (seed printed).
 * Run: ./test_host_gemm
 */
#include "test.h"

#include "internal.h"
#include "ranks.h"

#include <stdlib.h>

static tpla_host_group_t group;
static tpla_ctx_t ctx;
static rng_t rng;

#define PAD_BYTE 0x6b /* bytes around D that must stay as they are */

static double tolerance(tpla_dtype_t d_dtype) {
  switch (d_dtype) {
  case TPLA_FLOAT16: return 0x1p-11 + 2e-5;
  case TPLA_BFLOAT16: return 0x1p-8 + 2e-5;
  default: return 1e-5;
  }
}

static void store_nan(void *buf, tpla_dtype_t dtype, size_t i) {
  if (dtype == TPLA_FLOAT32)
    ((float *)buf)[i] = NAN;
  else
    ((uint16_t *)buf)[i] = dtype == TPLA_FLOAT16 ? 0x7e00 : 0x7fc0;
}

/* A random view (rows x cols, ld = cols + pad) in a fresh buffer. */
static tpla_matrix_t random_view(int64_t rows, int64_t cols, int64_t pad, tpla_dtype_t dtype) {
  int64_t ld = cols + pad > 0 ? cols + pad : 1;
  size_t bytes = (size_t)(rows * ld + 1) * tpla_dtype_size(dtype);
  tpla_matrix_t m = {malloc(bytes), rows, cols, ld, dtype};
  memset(m.data, PAD_BYTE, bytes);
  fill_random(m, &rng);
  return m;
}

/* |m| as a dense fp64 view. */
static tpla_matrix_t abs_copy(tpla_matrix_t m) {
  int64_t ld = m.cols > 0 ? m.cols : 1;
  tpla_matrix_t r = {malloc((size_t)(m.rows * ld + 1) * sizeof(double)), m.rows, m.cols, ld,
                     TPLA_FLOAT64};
  for (int64_t i = 0; i < m.rows; i++)
    for (int64_t j = 0; j < m.cols; j++)
      ((double *)r.data)[i * ld + j] =
          fabs(tpla_load_elem(m.data, m.dtype, (size_t)(i * m.ld + j)));
  return r;
}

typedef struct {
  tpla_dtype_t in, out;
  tpla_op_t op_a, op_b;
  int64_t m, n, k, pad;
  float alpha, beta;
  int poison_d; /* fill D with NaN (only with beta = 0) */
} gemm_case_t;

/* Runs one case; returns 0 if the result is within tolerance and nothing
 * outside D changed, else prints why and returns 1. */
static int run_case(const gemm_case_t *c) {
  int64_t ar = c->op_a == TPLA_OP_N ? c->m : c->k, ac = c->op_a == TPLA_OP_N ? c->k : c->m;
  int64_t br = c->op_b == TPLA_OP_N ? c->k : c->n, bc = c->op_b == TPLA_OP_N ? c->n : c->k;
  tpla_matrix_t a = random_view(ar, ac, c->pad, c->in), b = random_view(br, bc, c->pad + 1, c->in);
  tpla_matrix_t d = random_view(c->m, c->n, c->pad, c->out);
  size_t es = tpla_dtype_size(c->out);
  size_t a_bytes = (size_t)(a.rows * a.ld + 1) * tpla_dtype_size(c->in);
  size_t b_bytes = (size_t)(b.rows * b.ld + 1) * tpla_dtype_size(c->in);
  size_t d_bytes = (size_t)(d.rows * d.ld + 1) * es;
  if (c->poison_d)
    for (int64_t i = 0; i < c->m; i++)
      for (int64_t j = 0; j < c->n; j++)
        store_nan(d.data, c->out, (size_t)(i * d.ld + j));
  void *a0 = malloc(a_bytes), *b0 = malloc(b_bytes), *d0 = malloc(d_bytes);
  memcpy(a0, a.data, a_bytes);
  memcpy(b0, b.data, b_bytes);
  memcpy(d0, d.data, d_bytes);
  double *ref = malloc((size_t)(c->m * c->n + 1) * sizeof(double));
  double *mag = malloc((size_t)(c->m * c->n + 1) * sizeof(double));
  ref_gemm_f64(ref, c->n, a, c->op_a, b, c->op_b);
  tpla_matrix_t abs_a = abs_copy(a), abs_b = abs_copy(b);
  ref_gemm_f64(mag, c->n, abs_a, c->op_a, abs_b, c->op_b);
  free(abs_a.data), free(abs_b.data);
  /* Errors are measured against |alpha| |A| |B| + |beta| |D|, the scale of
   * every rounding in the computation: a cancelling sum cannot be expected
   * to come out with a small error relative to itself. */
  double ref_norm = 0.0;
  for (int64_t i = 0; i < c->m; i++)
    for (int64_t j = 0; j < c->n; j++) {
      double *r = &ref[i * c->n + j], *g = &mag[i * c->n + j];
      *r *= c->alpha;
      *g *= fabs(c->alpha);
      if (c->beta != 0.0f) {
        double d_ij = tpla_load_elem(d0, c->out, (size_t)(i * d.ld + j));
        *r += c->beta * d_ij;
        *g += fabs(c->beta * d_ij);
      }
      ref_norm += *g * *g;
    }

  tpla_gemm_args_t args = TPLA_GEMM_ARGS_INIT;
  args.alpha = c->alpha;
  args.beta = c->beta;
  tpla_status_t s = tpla_gemm(ctx, d, a, c->op_a, b, c->op_b, &args, NULL);

  double err = 0.0;
  int outside_changed = 0;
  for (int64_t i = 0; i < c->m; i++) {
    for (int64_t j = 0; j < c->n; j++) {
      double diff = tpla_load_elem(d.data, c->out, (size_t)(i * d.ld + j)) - ref[i * c->n + j];
      err += diff * diff; /* NaN stays NaN and fails the comparison below */
    }
    size_t pad_at = (size_t)(i * d.ld + c->n) * es, pad_len = (size_t)(d.ld - c->n) * es;
    if (i == c->m - 1)
      pad_len = d_bytes - pad_at; /* everything after the last row */
    outside_changed |= memcmp((char *)d.data + pad_at, (char *)d0 + pad_at, pad_len) != 0;
  }
  outside_changed |= memcmp(a.data, a0, a_bytes) != 0 || memcmp(b.data, b0, b_bytes) != 0;
  double rel = ref_norm > 0 ? sqrt(err / ref_norm) : sqrt(err);
  /* fp16 subnormals have an absolute quantum of 2^-24 */
  double floor_abs = c->out == TPLA_FLOAT16 ? sqrt((double)(c->m * c->n)) * 0x1p-25 : 0.0;
  int bad = s != TPLA_SUCCESS || !(sqrt(err) <= tolerance(c->out) * sqrt(ref_norm) + floor_abs) ||
            outside_changed;
  if (bad)
    fprintf(stderr,
            "  %s->%s op %c%c m=%lld n=%lld k=%lld pad=%lld alpha=%g beta=%g poison=%d: %s %s, "
            "rel err %.3g (tol %.3g), outside changed %d\n",
            tpla_dtype_name(c->in), tpla_dtype_name(c->out), c->op_a ? 'T' : 'N',
            c->op_b ? 'T' : 'N', (long long)c->m, (long long)c->n, (long long)c->k,
            (long long)c->pad, (double)c->alpha, (double)c->beta, c->poison_d,
            tpla_status_string(s), tpla_last_error(), rel, tolerance(c->out), outside_changed);
  free(a.data), free(b.data), free(d.data), free(a0), free(b0), free(d0), free(ref), free(mag);
  return bad;
}

static const struct {
  float alpha, beta;
  int poison;
} scalings[] = {{1.0f, 0.0f, 1}, {-0.5f, 1.0f, 0}, {2.0f, 0.75f, 0}, {1.0f, 0.0f, 0}};

static const tpla_dtype_t in_types[] = {TPLA_FLOAT32, TPLA_FLOAT16, TPLA_BFLOAT16};

static void test_gemm_every_dtype_op_and_odd_shape(void) {
  rng_seed(&rng, fresh_seed("test_gemm_every_dtype_op_and_odd_shape"));
  static const int64_t shapes[][3] = {{1, 1, 1},   {1, 7, 33},   {7, 1, 130}, {33, 130, 7},
                                      {130, 33, 1}, {64, 64, 64}, {5, 9, 300}};
  int failures = 0, cases = 0;
  for (int t = 0; t < 3; t++)
    for (int same = 0; same < 2; same++) {
      tpla_dtype_t out = same ? in_types[t] : TPLA_FLOAT32;
      if (same && out == TPLA_FLOAT32)
        continue;
      for (int ops = 0; ops < 4; ops++)
        for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
          for (size_t sc = 0; sc < sizeof scalings / sizeof scalings[0]; sc++) {
            gemm_case_t c = {in_types[t], out, (tpla_op_t)(ops & 1), (tpla_op_t)(ops >> 1),
                             shapes[s][0], shapes[s][1], shapes[s][2], (int64_t)((s + sc) % 3) * 3,
                             scalings[sc].alpha, scalings[sc].beta, scalings[sc].poison};
            failures += run_case(&c);
            cases++;
          }
    }
  printf("  %d cases\n", cases);
  ASSERT_EQ_INT(failures, 0);
}

static void test_gemm_k_zero_scales_d(void) {
  rng_seed(&rng, fresh_seed("test_gemm_k_zero_scales_d"));
  int failures = 0;
  for (int t = 0; t < 3; t++)
    for (int same = 0; same < 2; same++)
      for (size_t sc = 0; sc < sizeof scalings / sizeof scalings[0]; sc++) {
        tpla_dtype_t out = same ? in_types[t] : TPLA_FLOAT32;
        gemm_case_t c = {in_types[t], out, (tpla_op_t)same, TPLA_OP_N, 9, 4, 0, 2,
                         scalings[sc].alpha, scalings[sc].beta, scalings[sc].poison};
        failures += run_case(&c);
      }
  ASSERT_EQ_INT(failures, 0);
  /* beta = 0 over NaN gives exact zeros, not NaN */
  float d[6] = {NAN, NAN, NAN, NAN, NAN, NAN}, one = 1.0f;
  tpla_matrix_t dv = {d, 2, 3, 3, TPLA_FLOAT32}, av = {&one, 2, 0, 1, TPLA_FLOAT32};
  tpla_matrix_t bv = {&one, 0, 3, 3, TPLA_FLOAT32};
  ASSERT_OK(tpla_gemm(ctx, dv, av, TPLA_OP_N, bv, TPLA_OP_N, NULL, NULL));
  for (int i = 0; i < 6; i++)
    ASSERT_TRUE(d[i] == 0.0f && !signbit(d[i]));
}

/* wgrad style: two half products accumulated into an fp32 D with beta = 1. */
static void test_gemm_accumulates_into_fp32(void) {
  rng_seed(&rng, fresh_seed("test_gemm_accumulates_into_fp32"));
  for (int t = 1; t < 3; t++) {
    tpla_matrix_t a = random_view(40, 50, 0, in_types[t]), b = random_view(50, 30, 0, in_types[t]);
    float *d = calloc(40 * 30, sizeof(float));
    double *ref = malloc(40 * 30 * sizeof(double));
    tpla_matrix_t dv = {d, 40, 30, 30, TPLA_FLOAT32};
    tpla_gemm_args_t acc = TPLA_GEMM_ARGS_INIT;
    acc.beta = 1.0f;
    ASSERT_OK(tpla_gemm(ctx, dv, a, TPLA_OP_N, b, TPLA_OP_N, &acc, NULL));
    ASSERT_OK(tpla_gemm(ctx, dv, a, TPLA_OP_N, b, TPLA_OP_N, &acc, NULL));
    ref_gemm_f64(ref, 30, a, TPLA_OP_N, b, TPLA_OP_N);
    double err = 0, norm = 0;
    for (int i = 0; i < 40 * 30; i++) {
      err += (d[i] - 2 * ref[i]) * (d[i] - 2 * ref[i]);
      norm += 4 * ref[i] * ref[i];
    }
    free(a.data), free(b.data), free(d), free(ref);
    ASSERT_LE(sqrt(err / norm), 2e-6);
  }
}

/* A, B and D as column blocks of one allocation with one pitch: they do
 * not overlap, so the call must be accepted and touch only D's columns. */
static void test_gemm_column_blocks_of_one_buffer(void) {
  rng_seed(&rng, fresh_seed("test_gemm_column_blocks_of_one_buffer"));
  for (int t = 0; t < 3; t++) {
    const int64_t m = 13, n = 11, k = 17, rows = 17, ld = k + n + n + 2;
    tpla_matrix_t w = random_view(rows, ld, 0, in_types[t]);
    size_t es = tpla_dtype_size(in_types[t]), bytes = (size_t)(rows * ld) * es;
    tpla_matrix_t a = {w.data, m, k, ld, in_types[t]};
    tpla_matrix_t d = {(char *)w.data + (size_t)k * es, m, n, ld, in_types[t]};
    tpla_matrix_t b = {(char *)w.data + (size_t)(k + n) * es, k, n, ld, in_types[t]};
    unsigned char *w0 = malloc(bytes);
    memcpy(w0, w.data, bytes);
    double *ref = malloc((size_t)(m * n) * sizeof(double));
    ref_gemm_f64(ref, n, a, TPLA_OP_N, b, TPLA_OP_N);
    ASSERT_OK(tpla_gemm(ctx, d, a, TPLA_OP_N, b, TPLA_OP_N, NULL, NULL));
    double err = 0, norm = 0;
    int others_changed = 0;
    for (int64_t i = 0; i < rows; i++)
      for (int64_t j = 0; j < ld; j++) {
        size_t at = (size_t)(i * ld + j);
        if (i < m && j >= k && j < k + n) {
          double diff = tpla_load_elem(w.data, in_types[t], at) - ref[i * n + j - k];
          err += diff * diff;
          norm += ref[i * n + j - k] * ref[i * n + j - k];
        } else {
          others_changed |= memcmp((char *)w.data + at * es, w0 + at * es, es) != 0;
        }
      }
    free(w.data), free(w0), free(ref);
    ASSERT_TRUE(!others_changed);
    ASSERT_LE(sqrt(err / norm), tolerance(in_types[t]));
  }
}

/* ld beyond 2^31 (one-row views, so little memory): BLAS takes 32-bit
 * leading dimensions, so this must take the C loop and still be right. */
static void test_gemm_leading_dimension_beyond_int(void) {
  rng_seed(&rng, fresh_seed("test_gemm_leading_dimension_beyond_int"));
  const int64_t big = ((int64_t)1 << 31) + 7, k = 5, n = 4;
  float a[5], d[4] = {NAN, NAN, NAN, NAN};
  tpla_matrix_t av = {a, 1, k, big, TPLA_FLOAT32}, dv = {d, 1, n, big, TPLA_FLOAT32};
  tpla_matrix_t b = random_view(k, n, 0, TPLA_FLOAT32);
  fill_random(av, &rng);
  ASSERT_OK(tpla_gemm(ctx, dv, av, TPLA_OP_N, b, TPLA_OP_N, NULL, NULL));
  double ref[4];
  ref_gemm_f64(ref, n, av, TPLA_OP_N, b, TPLA_OP_N);
  free(b.data);
  for (int j = 0; j < n; j++)
    ASSERT_NEAR(d[j], ref[j], 1e-5);
  /* transposed operands on the same path (BLAS takes no such ld): a one-row stored view
   * with the huge ld, the other operand and D dense. op(A) T: A is 1 x 4 (k = 1); op(B) T:
   * B is 1 x 5 (n = 1); both: A 1 x 4 and B 3 x 1 (k = 1). */
  static const struct {
    tpla_op_t op_a, op_b;
    int64_t m, n, k;
  } cases[] = {{TPLA_OP_T, TPLA_OP_N, 4, 3, 1}, {TPLA_OP_N, TPLA_OP_T, 3, 1, 5},
               {TPLA_OP_T, TPLA_OP_T, 4, 3, 1}};
  for (int c = 0; c < 3; c++) {
    int64_t m = cases[c].m, nn = cases[c].n, kk = cases[c].k;
    bool ta = cases[c].op_a == TPLA_OP_T, tb = cases[c].op_b == TPLA_OP_T;
    float wide[5];
    tpla_matrix_t huge = {wide, 1, ta ? m : (tb ? kk : 0), big, TPLA_FLOAT32}; /* 1 row */
    tpla_matrix_t a2 = ta ? huge : random_view(m, kk, 0, TPLA_FLOAT32);
    tpla_matrix_t b2 = ta ? random_view(tb ? nn : kk, tb ? kk : nn, 0, TPLA_FLOAT32) : huge;
    fill_random(huge, &rng);
    tpla_matrix_t d2 = random_view(m, nn, 0, TPLA_FLOAT32);
    ASSERT_OK(tpla_gemm(ctx, d2, a2, cases[c].op_a, b2, cases[c].op_b, NULL, NULL));
    double want[12];
    ref_gemm_f64(want, nn, a2, cases[c].op_a, b2, cases[c].op_b);
    for (int64_t i = 0; i < m; i++)
      for (int64_t j = 0; j < nn; j++)
        ASSERT_NEAR(((float *)d2.data)[i * d2.ld + j], want[i * nn + j], 1e-5);
    free(ta ? b2.data : a2.data), free(d2.data);
  }
}

static void test_gemm_workspace_is_grow_only(void) {
  tpla_host_group_t g;
  tpla_ctx_t c;
  ASSERT_OK(tpla_host_group_create(&g, 1, NULL));
  ASSERT_OK(tpla_ctx_create_host(&c, g, 0, NULL));
  size_t before, after_big, after_small;
  ASSERT_OK(tpla_ctx_workspace_bytes(c, &before));
  tpla_matrix_t a = random_view(30, 20, 0, TPLA_BFLOAT16), b = random_view(20, 10, 0,
                                                                            TPLA_BFLOAT16);
  tpla_matrix_t d = random_view(30, 10, 0, TPLA_BFLOAT16);
  ASSERT_OK(tpla_gemm(c, d, a, TPLA_OP_N, b, TPLA_OP_N, NULL, NULL));
  ASSERT_OK(tpla_ctx_workspace_bytes(c, &after_big));
  /* fp32 copies of A, B and D at least */
  ASSERT_TRUE(after_big >= (30 * 20 + 20 * 10 + 30 * 10) * sizeof(float));
  for (int i = 0; i < 20; i++) { /* repeated and smaller calls do not grow it */
    tpla_matrix_t a2 = a, d2 = d;
    a2.rows = d2.rows = 1 + i;
    ASSERT_OK(tpla_gemm(c, d2, a2, TPLA_OP_N, b, TPLA_OP_N, NULL, NULL));
  }
  ASSERT_OK(tpla_ctx_workspace_bytes(c, &after_small));
  ASSERT_EQ_INT(after_small, after_big);
  free(a.data), free(b.data), free(d.data);
  ASSERT_OK(tpla_ctx_destroy(c));
  ASSERT_OK(tpla_host_group_destroy(g));
  (void)before;
}

int main(void) {
  if (single_host_ctx(&group, &ctx) != 0)
    return 1;
  TEST(test_gemm_every_dtype_op_and_odd_shape);
  TEST(test_gemm_k_zero_scales_d);
  TEST(test_gemm_accumulates_into_fp32);
  TEST(test_gemm_column_blocks_of_one_buffer);
  TEST(test_gemm_leading_dimension_beyond_int);
  TEST(test_gemm_workspace_is_grow_only);
  tpla_ctx_destroy(ctx);
  tpla_host_group_destroy(group);
  return test_summary();
}
