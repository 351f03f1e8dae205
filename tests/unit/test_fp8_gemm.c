/*
 * test_fp8_gemm.c - tpla_gemm with FP8 inputs on the host executor (one
 * rank) against a float64 reference on the dequantized inputs (decoded by
 * test_fp8_ref.h, not by the library):
 *   D = d_scale (alpha a_scale b_scale op(A) op(B) + beta D),
 *   d_amax = max |alpha a_scale b_scale op(A) op(B) + beta D|.
 * Every op_a x op_b, E4M3 x E4M3, E5M2 x E4M3 and E4M3 x E5M2, outputs
 * bf16/fp32/E4M3 (and fp16/E5M2), with and without scales; beta
 * accumulation into fp32; k = 0; saturation and NaN; every bad input gets
 * its status and leaves D and d_amax untouched; callers built against the
 * header before FP8 (args of the old size) keep working.
 * fp32/half outputs must be within the fp32 accumulation bound (plus the
 * output rounding); FP8 outputs must equal the reference rounded to FP8,
 * except one ulp where the reference lies within that bound of a rounding
 * boundary. Fresh random inputs each run (seed printed).
 * Run: ./test_fp8_gemm
 */
#include "test.h"

#include "ranks.h"
#include "test_fp8_ref.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdlib.h>

static tpla_ctx_t ctx;
static rng_t rng;

#define PAD_BYTE 0x6b
#define IA TPLA_ERROR_INVALID_ARGUMENT

static bool fp8(tpla_dtype_t t) { return t == TPLA_FLOAT8_E4M3 || t == TPLA_FLOAT8_E5M2; }

/* A rows x cols view (ld = cols + pad) over a buffer of PAD_BYTE, filled
 * with random finite FP8 codes of magnitude <= bound. */
static tpla_matrix_t fp8_view(int64_t rows, int64_t cols, int64_t pad, tpla_dtype_t t,
                              double bound) {
  int64_t ld = cols + pad > 0 ? cols + pad : 1;
  size_t bytes = (size_t)(rows * ld + 1);
  tpla_matrix_t m = {malloc(bytes), rows, cols, ld, t};
  memset(m.data, PAD_BYTE, bytes);
  for (int64_t i = 0; i < rows; i++)
    for (int64_t j = 0; j < cols; j++) {
      uint8_t c;
      do
        c = (uint8_t)((rng_uniform(&rng) + 1) * 128);
      while (!(fabs(ref_fp8_value(c, t)) <= bound)); /* also rejects NaN and infinities */
      ((uint8_t *)m.data)[i * ld + j] = c;
    }
  return m;
}

static size_t view_bytes(tpla_matrix_t m) {
  return (size_t)(m.rows * m.ld + 1) * tpla_dtype_size(m.dtype);
}

/* op(x)(i, j), decoded by the reference */
static double op_value(tpla_matrix_t x, tpla_op_t op, int64_t i, int64_t j) {
  int64_t r = op == TPLA_OP_N ? i : j, c = op == TPLA_OP_N ? j : i;
  return ref_fp8_value(((const uint8_t *)x.data)[r * x.ld + c], x.dtype);
}

/* A D element of any output dtype (fp32, bf16 and fp16 are exact in double). */
static double d_value(tpla_matrix_t d, int64_t i, int64_t j) {
  const char *p = (const char *)d.data + (size_t)(i * d.ld + j) * tpla_dtype_size(d.dtype);
  uint32_t u = 0;
  float f;
  switch (d.dtype) {
  case TPLA_FLOAT32: memcpy(&f, p, 4); return f;
  case TPLA_BFLOAT16: memcpy(&u, p, 2); u <<= 16; memcpy(&f, &u, 4); return f;
  case TPLA_FLOAT16: {
    uint16_t h;
    memcpy(&h, p, 2);
    int e = (h >> 10) & 31, m = h & 1023;
    double v = e == 0 ? ldexp(m, -24) : e == 31 ? (m ? NAN : INFINITY) : ldexp(1024 + m, e - 25);
    return (h & 0x8000) ? -v : v;
  }
  default: return ref_fp8_value(*(const uint8_t *)p, d.dtype);
  }
}

typedef struct {
  tpla_dtype_t ta, tb, td;
  tpla_op_t op_a, op_b;
  int64_t m, n, k;
  int scaled;  /* a_scale, b_scale (and d_scale for an FP8 D) */
  float alpha, beta;
} fp8_case_t;

/* Runs one case; returns 0 on success, else prints why and returns 1. */
static int run_case(const fp8_case_t *c) {
  int64_t ar = c->op_a == TPLA_OP_N ? c->m : c->k, ac = c->op_a == TPLA_OP_N ? c->k : c->m;
  int64_t br = c->op_b == TPLA_OP_N ? c->k : c->n, bc = c->op_b == TPLA_OP_N ? c->n : c->k;
  tpla_matrix_t a = fp8_view(ar, ac, 3, c->ta, 6.0), b = fp8_view(br, bc, 0, c->tb, 6.0);
  int64_t ldd = c->n + 2;
  size_t es = tpla_dtype_size(c->td), d_bytes = (size_t)(c->m * ldd + 1) * es;
  tpla_matrix_t d = {malloc(d_bytes), c->m, c->n, ldd, c->td};
  memset(d.data, PAD_BYTE, d_bytes);
  double *d0 = calloc((size_t)(c->m * c->n + 1), sizeof(double));
  if (c->beta != 0.0f) /* fp32 D: random old values */
    for (int64_t i = 0; i < c->m; i++)
      for (int64_t j = 0; j < c->n; j++) {
        float v = (float)(rng_uniform(&rng) * 50);
        memcpy((char *)d.data + (size_t)(i * ldd + j) * 4, &v, 4);
        d0[i * c->n + j] = v;
      }
  unsigned char *d_before = malloc(d_bytes), *a_before = malloc(view_bytes(a)),
                *b_before = malloc(view_bytes(b));
  memcpy(d_before, d.data, d_bytes);
  memcpy(a_before, a.data, view_bytes(a));
  memcpy(b_before, b.data, view_bytes(b));

  float a_scale = 0.375f, b_scale = 3.0f, d_scale = 0.0625f, amax = -1.0f;
  tpla_gemm_args_t args = TPLA_GEMM_ARGS_INIT;
  args.alpha = c->alpha, args.beta = c->beta;
  args.fp8.d_amax = &amax;
  args.fp8.accum = c->k % 2 ? TPLA_FP8_ACCUM_FAST : TPLA_FP8_ACCUM_SPLIT; /* same on the host */
  if (c->scaled) {
    args.fp8.a_scale = &a_scale, args.fp8.b_scale = &b_scale;
    if (fp8(c->td))
      args.fp8.d_scale = &d_scale;
  }
  double s_in = c->scaled ? (double)a_scale * b_scale : 1.0;
  double s_out = c->scaled && fp8(c->td) ? d_scale : 1.0;
  int bad = 0;
  tpla_status_t st = tpla_gemm(ctx, d, a, c->op_a, b, c->op_b, &args, NULL);
  if (st != TPLA_SUCCESS) {
    printf("    tpla_gemm: %s (%s)\n", tpla_status_string(st), tpla_last_error());
    bad = 1;
  }
  double amax_ref = 0, worst_bound = 0;
  for (int64_t i = 0; i < c->m && !bad; i++)
    for (int64_t j = 0; j < c->n && !bad; j++) {
      double sum = 0, abs_sum = 0;
      for (int64_t p = 0; p < c->k; p++) {
        double x = op_value(a, c->op_a, i, p) * op_value(b, c->op_b, p, j);
        sum += x, abs_sum += fabs(x);
      }
      double beta_d = c->beta * d0[i * c->n + j];
      double want = c->alpha * s_in * sum + beta_d; /* before d_scale */
      /* fp32 accumulation and scaling: (k + 4) roundings at most, each 2^-24 */
      double bound = (double)(c->k + 4) * 0x1p-24 * (fabs(c->alpha) * s_in * abs_sum +
                                                       fabs(beta_d)) + 1e-30;
      amax_ref = fmax(amax_ref, fabs(want));
      worst_bound = fmax(worst_bound, bound);
      double got = d_value(d, i, j);
      if (!fp8(c->td)) {
        double out_ulp = c->td == TPLA_BFLOAT16 ? 0x1p-8 : c->td == TPLA_FLOAT16 ? 0x1p-11 : 0;
        if (!(fabs(got - want) <= bound + out_ulp * fabs(want))) {
          printf("    D(%lld,%lld) = %.9g, reference %.9g (bound %.3g)\n", (long long)i,
                 (long long)j, got, want, bound + out_ulp * fabs(want));
          bad = 1;
        }
        continue;
      }
      double scaled = s_out * want;
      uint8_t gc = ((const uint8_t *)d.data)[i * ldd + j], wc = ref_fp8_encode(scaled, c->td);
      if (gc == wc || ((gc & 0x7f) == 0 && (wc & 0x7f) == 0)) /* +-0 alike */
        continue;
      /* one ulp apart, and the reference within the bound of their midpoint */
      double mid = (ref_fp8_value(gc, c->td) + ref_fp8_value(wc, c->td)) / 2;
      if (abs(ref_fp8_ordinal(gc) - ref_fp8_ordinal(wc)) != 1 ||
          !(fabs(scaled - mid) <= s_out * bound)) {
        printf("    D(%lld,%lld) = 0x%02x (%g), reference %.9g rounds to 0x%02x (%g)\n",
               (long long)i, (long long)j, gc, ref_fp8_value(gc, c->td), scaled, wc,
               ref_fp8_value(wc, c->td));
        bad = 1;
      }
    }
  if (!bad && !(fabs(amax - amax_ref) <= worst_bound)) {
    printf("    d_amax %.9g, reference %.9g\n", (double)amax, amax_ref);
    bad = 1;
  }
  /* inputs, D's padding and the bytes after D unchanged */
  if (!bad && (memcmp(a.data, a_before, view_bytes(a)) || memcmp(b.data, b_before, view_bytes(b))))
    printf("    an input changed\n"), bad = 1;
  for (int64_t i = 0; i < c->m && !bad; i++) {
    size_t from = (size_t)(i * ldd + c->n) * es, to = (size_t)((i + 1) * ldd) * es;
    if (i == c->m - 1)
      to = d_bytes;
    if (memcmp((char *)d.data + from, d_before + from, to - from))
      printf("    D's padding changed in row %lld\n", (long long)i), bad = 1;
  }
  if (bad)
    printf("    case: %s x %s -> %s, op %c%c, %lldx%lldx%lld, scaled %d, alpha %g beta %g\n",
           tpla_dtype_name(c->ta), tpla_dtype_name(c->tb), tpla_dtype_name(c->td),
           "NT"[c->op_a], "NT"[c->op_b], (long long)c->m, (long long)c->n, (long long)c->k,
           c->scaled, (double)c->alpha, (double)c->beta);
  free(a.data), free(b.data), free(d.data), free(d0), free(d_before), free(a_before),
      free(b_before);
  return bad;
}

static void test_every_op_input_pair_output_and_scaling(void) {
  const tpla_dtype_t pairs[3][2] = {{TPLA_FLOAT8_E4M3, TPLA_FLOAT8_E4M3},
                                    {TPLA_FLOAT8_E5M2, TPLA_FLOAT8_E4M3},
                                    {TPLA_FLOAT8_E4M3, TPLA_FLOAT8_E5M2}};
  const tpla_dtype_t outs[5] = {TPLA_BFLOAT16, TPLA_FLOAT32, TPLA_FLOAT8_E4M3, TPLA_FLOAT16,
                                TPLA_FLOAT8_E5M2};
  int failed = 0, cases = 0;
  for (int p = 0; p < 3; p++)
    for (int o = 0; o < 5; o++)
      for (int ops = 0; ops < 4; ops++)
        for (int scaled = 0; scaled < 2; scaled++) {
          if (p == 2 && ops != 1)
            continue; /* E4M3 x E5M2: one op combination is enough */
          if (p == 0 && outs[o] == TPLA_FLOAT8_E5M2)
            continue; /* E4M3 x E4M3 -> E5M2: refused (test_bad_inputs_are_rejected_untouched) */
          fp8_case_t c = {pairs[p][0], pairs[p][1], outs[o], (tpla_op_t)(ops & 1),
                          (tpla_op_t)(ops >> 1), 13 + ops, 11, 37 + scaled, scaled,
                          scaled ? 0.75f : 1.0f, 0.0f};
          failed += run_case(&c);
          cases++;
        }
  ASSERT_EQ_INT(cases, 4 * 4 * 2 + 5 * 4 * 2 + 5 * 2);
  ASSERT_EQ_INT(failed, 0);
}

/* beta accumulates into an fp32 D (scales apply to the product only). */
static void test_beta_accumulates_into_fp32(void) {
  const float betas[3] = {1.0f, -0.5f, 2.0f};
  int failed = 0;
  for (int i = 0; i < 3; i++)
    for (int ops = 0; ops < 4; ops++) {
      fp8_case_t c = {TPLA_FLOAT8_E5M2, TPLA_FLOAT8_E4M3, TPLA_FLOAT32, (tpla_op_t)(ops & 1),
                      (tpla_op_t)(ops >> 1), 9, 17, 64, i != 1, 1.5f, betas[i]};
      failed += run_case(&c);
    }
  ASSERT_EQ_INT(failed, 0);
}

/* k = 0: D = beta D (fp32), zeros (FP8, which needs beta = 0); amax of that. */
static void test_k_zero(void) {
  fp8_case_t c = {TPLA_FLOAT8_E4M3, TPLA_FLOAT8_E4M3, TPLA_FLOAT32, TPLA_OP_N, TPLA_OP_N,
                  5, 6, 0, 1, 1.0f, 0.5f};
  ASSERT_EQ_INT(run_case(&c), 0);
  c.td = TPLA_FLOAT8_E4M3, c.beta = 0.0f;
  ASSERT_EQ_INT(run_case(&c), 0);
}

/* An empty D (m = 0) still writes d_amax: 0, the amax of no elements, not a stale value. */
static void test_empty_output_amax_is_zero(void) {
  static uint8_t a[3], b[3 * 4];
  float amax = -1.0f;
  tpla_matrix_t d = {NULL, 0, 4, 4, TPLA_FLOAT32}, am = {a, 0, 3, 3, TPLA_FLOAT8_E4M3};
  tpla_matrix_t bm = {b, 3, 4, 4, TPLA_FLOAT8_E4M3};
  tpla_gemm_args_t args = TPLA_GEMM_ARGS_INIT;
  args.fp8.d_amax = &amax;
  ASSERT_OK(tpla_gemm(ctx, d, am, TPLA_OP_N, bm, TPLA_OP_N, &args, NULL));
  ASSERT_TRUE(amax == 0.0f);
}

/* Large products saturate an FP8 D at +-448 (an infinite E5M2 one at
 * 57344); a NaN input gives NaN (and a NaN amax); the saturated values
 * count in amax unscaled. */
static void test_saturation_and_nan(void) {
  uint8_t a[4] = {0x7e, 0xfe, 0x38, 0x7f}; /* 448, -448, 1, NaN (1 x 4, k = 4) */
  uint8_t b[4 * 2] = {0x7e, 0x38, 0x00, 0x38, 0x00, 0x38, 0x38, 0x38}; /* 4 x 2 */
  uint8_t d[2];
  float amax = 0;
  tpla_matrix_t av = {a, 1, 3, 4, TPLA_FLOAT8_E4M3}, bv = {b, 3, 2, 2, TPLA_FLOAT8_E4M3};
  tpla_matrix_t dv = {d, 1, 2, 2, TPLA_FLOAT8_E4M3};
  tpla_gemm_args_t args = TPLA_GEMM_ARGS_INIT;
  args.fp8.d_amax = &amax;
  /* D = [448*448, 448 - 448 + 1] = [200704 -> 448, 1] */
  ASSERT_OK(tpla_gemm(ctx, dv, av, TPLA_OP_N, bv, TPLA_OP_N, &args, NULL));
  ASSERT_EQ_INT(d[0], 0x7e);
  ASSERT_EQ_INT(d[1], 0x38);
  ASSERT_TRUE(amax == 200704.0f);
  av.cols = 4, bv.rows = 4; /* the NaN joins: both columns NaN */
  ASSERT_OK(tpla_gemm(ctx, dv, av, TPLA_OP_N, bv, TPLA_OP_N, &args, NULL));
  ASSERT_TRUE(isnan(ref_fp8_value(d[0], TPLA_FLOAT8_E4M3)));
  ASSERT_TRUE(isnan(ref_fp8_value(d[1], TPLA_FLOAT8_E4M3)));
  ASSERT_TRUE(isnan(amax));
  /* an infinite product saturates too, in E5M2 (cuBLASLt's conversion; run 205) */
  uint8_t a5[2] = {0x7c, 0x00}, b5[2] = {0x38, 0x7e}, d5 = 0; /* E5M2 [inf, 0] x E4M3 [1; 448] */
  tpla_matrix_t a5v = {a5, 1, 2, 2, TPLA_FLOAT8_E5M2}, b5v = {b5, 2, 1, 1, TPLA_FLOAT8_E4M3};
  tpla_matrix_t d5v = {&d5, 1, 1, 1, TPLA_FLOAT8_E5M2};
  ASSERT_OK(tpla_gemm(ctx, d5v, a5v, TPLA_OP_N, b5v, TPLA_OP_N, &args, NULL));
  ASSERT_EQ_INT(d5, 0x7b); /* 57344, not 0x7c (inf) */
  ASSERT_TRUE(isinf(amax) && amax > 0);
  /* a zero scale does not skip the product (CUDA reads the scales on the
   * device and cannot): 0 * NaN is NaN, in an fp32 D and its amax too */
  _Alignas(16) float zero[4] = {0.0f};
  float d32[2] = {5.0f, 5.0f};
  tpla_matrix_t d32v = {d32, 1, 2, 2, TPLA_FLOAT32};
  args.fp8.a_scale = zero;
  ASSERT_OK(tpla_gemm(ctx, d32v, av, TPLA_OP_N, bv, TPLA_OP_N, &args, NULL));
  ASSERT_TRUE(isnan(d32[0]) && isnan(d32[1]));
  ASSERT_TRUE(isnan(amax));
  av.cols = 3, bv.rows = 3; /* without the NaN: zeros */
  ASSERT_OK(tpla_gemm(ctx, d32v, av, TPLA_OP_N, bv, TPLA_OP_N, &args, NULL));
  ASSERT_TRUE(d32[0] == 0.0f && d32[1] == 0.0f && amax == 0.0f);
}

/* The two fp32 roundings of the scaling, where rounding once or twice differs: alpha a_scale
 * b_scale is rounded to fp32 once (3 (1 + 2^-12)^2 = 3 + 3 2^-11 + 3 2^-24, 3/4 of an ulp
 * above 3 + 3 2^-11: up; rounding the scales' product first gives 1 + 2^-11, a tie, and
 * 3 + 3 2^-11); and an FP8 D is d_scale times the fp32 result, rounded to fp32 before FP8
 * ((1 + 2^-23)(1.0625 - 2^-23) is 1.0625 in fp32, an E4M3 tie between 1 and 1.125 that goes
 * to even, 1; unrounded it lies above the tie: 1.125). D = 1 x 1 x 1, A = B = 1. */
static void test_scalings_round_in_fp32(void) {
  uint8_t one[2] = {0x38, 0x38};
  tpla_matrix_t av = {one, 1, 1, 1, TPLA_FLOAT8_E4M3}, bv = {one + 1, 1, 1, 1, TPLA_FLOAT8_E4M3};
  _Alignas(16) float sa[4] = {1.0f + 0x1p-12f}, sb[4] = {1.0f + 0x1p-12f};
  float d32 = 0.0f;
  tpla_matrix_t dv = {&d32, 1, 1, 1, TPLA_FLOAT32};
  tpla_gemm_args_t args = TPLA_GEMM_ARGS_INIT;
  args.alpha = 3.0f;
  args.fp8.a_scale = sa;
  args.fp8.b_scale = sb;
  ASSERT_OK(tpla_gemm(ctx, dv, av, TPLA_OP_N, bv, TPLA_OP_N, &args, NULL));
  const float want = 3.0f + 3.0f * 0x1p-11f + 0x1p-22f; /* exact in fp32 */
  ASSERT_TRUE((double)want == (double)(float)(3.0 * (double)sa[0] * (double)sb[0]));
  ASSERT_NEAR(d32, want, 0.0);
  uint8_t d8 = 0;
  tpla_matrix_t d8v = {&d8, 1, 1, 1, TPLA_FLOAT8_E4M3};
  _Alignas(16) float ds[4] = {1.0f + 0x1p-23f};
  args = (tpla_gemm_args_t)TPLA_GEMM_ARGS_INIT;
  args.alpha = 1.0625f - 0x1p-23f;
  args.fp8.d_scale = ds;
  ASSERT_TRUE(ds[0] * args.alpha == 1.0625f); /* the fp32 product: the E4M3 tie */
  ASSERT_OK(tpla_gemm(ctx, d8v, av, TPLA_OP_N, bv, TPLA_OP_N, &args, NULL));
  ASSERT_EQ_INT(d8, 0x38); /* 1.0, not 0x39 (1.125) */
}

/* ---- bad inputs: status, message, nothing written ------------------------- */

/* room for views of any dtype over them */
static uint8_t ga[4 * 3 * 8], gb[3 * 5 * 8], gd[4 * 5 * 8], gd_copy[sizeof gd];
static float g_amax, g_scale = 2.0f;

static tpla_matrix_t m8(void *p, int64_t r, int64_t c, tpla_dtype_t t) {
  return (tpla_matrix_t){p, r, c, c, t};
}

#define ASSERT_REJECTED(d, a, b, args, want, needle)                                     \
  do {                                                                                   \
    g_amax = -7.0f;                                                                      \
    ASSERT_STATUS(tpla_gemm(ctx, d, a, TPLA_OP_N, b, TPLA_OP_N, args, NULL), want);     \
    ASSERT_CONTAINS(tpla_last_error(), "tpla_gemm: ");                                   \
    ASSERT_CONTAINS(tpla_last_error(), needle);                                          \
    ASSERT_TRUE(memcmp(gd, gd_copy, sizeof gd) == 0);                                    \
    ASSERT_TRUE(g_amax == -7.0f);                                                        \
  } while (0)

static void test_bad_inputs_are_rejected_untouched(void) {
  const tpla_dtype_t e4 = TPLA_FLOAT8_E4M3, e5 = TPLA_FLOAT8_E5M2;
  memset(ga, 0x38, sizeof ga), memset(gb, 0x38, sizeof gb), memset(gd, 0x5a, sizeof gd);
  memcpy(gd_copy, gd, sizeof gd);
  tpla_matrix_t a = m8(ga, 4, 3, e4), b = m8(gb, 3, 5, e4), d = m8(gd, 4, 5, TPLA_FLOAT32);
  tpla_matrix_t a_bf = m8(ga, 4, 3, TPLA_BFLOAT16), b_bf = m8(gb, 3, 5, TPLA_BFLOAT16);
  tpla_matrix_t a5 = m8(ga, 4, 3, e5), b5 = m8(gb, 3, 5, e5);
  tpla_gemm_args_t args = TPLA_GEMM_ARGS_INIT;
  args.fp8.d_amax = &g_amax;
  /* inputs: both FP8, not both E5M2 */
  ASSERT_REJECTED(d, a, b_bf, &args, IA, "arguments 'a' and 'b'");
  ASSERT_REJECTED(d, a_bf, b, NULL, IA, "arguments 'a' and 'b'");
  ASSERT_REJECTED(d, a5, b5, &args, IA, "both are e5m2");
  /* an E5M2 D needs an E5M2 input (no cuBLASLt kernel for E4M3 x E4M3) */
  tpla_matrix_t d5 = m8(gd, 4, 5, e5);
  ASSERT_REJECTED(d5, a, b, &args, TPLA_ERROR_NOT_SUPPORTED,
                  "argument 'd': an e5m2 D needs an e5m2 input");
  /* D: bf16/fp16/fp32/e4m3/e5m2 */
  tpla_matrix_t d64 = m8(gd, 4, 5, TPLA_FLOAT64), du8 = m8(gd, 4, 5, TPLA_UINT8);
  ASSERT_REJECTED(d64, a, b, &args, IA, "argument 'd': dtype fp64 is not an FP8 GEMM output");
  ASSERT_REJECTED(du8, a, b, &args, IA, "argument 'd'");
  tpla_matrix_t d8 = m8(gd, 4, 5, e4), d_bf = m8(gd, 4, 5, TPLA_BFLOAT16);
  ASSERT_REJECTED(d8, a_bf, b_bf, NULL, IA, "argument 'd'"); /* FP8 out needs FP8 in */
  /* an FP8 D needs beta = 0; d_scale only with an FP8 D */
  tpla_gemm_args_t x = args;
  x.beta = 1.0f;
  ASSERT_REJECTED(d8, a, b, &x, IA, "needs beta = 0");
  x = args, x.fp8.d_scale = &g_scale;
  ASSERT_REJECTED(d_bf, a, b, &x, IA, "fp8.d_scale is only for an FP8 output");
  /* fp8 fields with other inputs */
  tpla_gemm_args_t y = TPLA_GEMM_ARGS_INIT;
  y.fp8.a_scale = &g_scale;
  ASSERT_REJECTED(d, a_bf, b_bf, &y, IA, "args->fp8 is only for FP8 inputs");
  y = (tpla_gemm_args_t)TPLA_GEMM_ARGS_INIT, y.fp8.d_amax = &g_amax;
  ASSERT_REJECTED(d_bf, a_bf, b_bf, &y, IA, "args->fp8 is only for FP8 inputs");
  y = (tpla_gemm_args_t)TPLA_GEMM_ARGS_INIT, y.fp8.accum = TPLA_FP8_ACCUM_FAST;
  ASSERT_REJECTED(d, a_bf, b_bf, &y, IA, "args->fp8 is only for FP8 inputs");
  /* unknown enums; MXFP8 */
  x = args, x.fp8.accum = (tpla_fp8_accum_t)7;
  ASSERT_REJECTED(d, a, b, &x, IA, "fp8.accum 7");
  x = args, x.fp8.scale_mode = (tpla_fp8_scale_mode_t)-1;
  ASSERT_REJECTED(d, a, b, &x, IA, "fp8.scale_mode -1");
  x = args, x.fp8.scale_mode = TPLA_FP8_SCALE_MXFP8;
  ASSERT_REJECTED(d, a, b, &x, TPLA_ERROR_NOT_SUPPORTED, "MXFP8");
  ASSERT_CONTAINS(tpla_last_error(), "Blackwell (compute capability >= 100)");
  ASSERT_CONTAINS(tpla_last_error(), "Hopper");
  ASSERT_CONTAINS(tpla_last_error(), "host executor");
  /* a wrong size; overlapping D */
  x = args, x.size = sizeof x - 8;
  ASSERT_REJECTED(d, a, b, &x, IA, "argument 'args': size field");
  uint8_t a_copy[sizeof ga];
  memcpy(a_copy, ga, sizeof ga);
  tpla_matrix_t d_on_a = m8(ga, 2, 5, e4); /* bytes 0..9, A's are 5 and 6 */
  ASSERT_STATUS(tpla_gemm(ctx, d_on_a, m8(ga + 5, 2, 1, e4), TPLA_OP_N, m8(gb, 1, 5, e4),
                          TPLA_OP_N, &args, NULL), IA);
  ASSERT_CONTAINS(tpla_last_error(), "overlaps");
  ASSERT_TRUE(memcmp(ga, a_copy, sizeof ga) == 0 && g_amax == -7.0f);
}

/* Callers compiled against the header before FP8 pass the shorter struct:
 * accepted, the fp8 block read as its defaults. The struct is allocated at
 * its old size so that ASan catches a read beyond it. */
static void test_args_of_the_pre_fp8_size_work(void) {
  const size_t old_size = offsetof(tpla_gemm_args_t, fp8);
  tpla_gemm_args_t full = TPLA_GEMM_ARGS_INIT;
  full.size = old_size, full.alpha = 2.0f, full.beta = 1.0f;
  tpla_gemm_args_t *old = malloc(old_size);
  memcpy(old, &full, old_size);
  float a[2 * 3] = {1, 2, 3, 4, 5, 6}, b[3 * 2] = {1, 0, 0, 1, 1, 1}, d[2 * 2] = {1, 1, 1, 1};
  tpla_matrix_t av = {a, 2, 3, 3, TPLA_FLOAT32}, bv = {b, 3, 2, 2, TPLA_FLOAT32};
  tpla_matrix_t dv = {d, 2, 2, 2, TPLA_FLOAT32};
  ASSERT_OK(tpla_gemm(ctx, dv, av, TPLA_OP_N, bv, TPLA_OP_N, old, NULL));
  /* A B = [[4, 5], [10, 11]]; D = 2 A B + D */
  ASSERT_TRUE(d[0] == 9 && d[1] == 11 && d[2] == 21 && d[3] == 23);
  uint8_t a8[2 * 3] = {0x38, 0x40, 0x44, 0x48, 0x4a, 0x4c}; /* 1 2 3 4 5 6 in E4M3 */
  uint8_t b8[3 * 2] = {0x38, 0x00, 0x00, 0x38, 0x38, 0x38};
  tpla_matrix_t a8v = {a8, 2, 3, 3, TPLA_FLOAT8_E4M3}, b8v = {b8, 3, 2, 2, TPLA_FLOAT8_E4M3};
  ASSERT_OK(tpla_gemm(ctx, dv, a8v, TPLA_OP_N, b8v, TPLA_OP_N, old, NULL)); /* scales 1 */
  ASSERT_TRUE(d[0] == 17 && d[1] == 21 && d[2] == 41 && d[3] == 45);
  free(old);
}

int main(void) {
  tpla_host_group_t group;
  if (single_host_ctx(&group, &ctx) != 0)
    return 1;
  rng_seed(&rng, fresh_seed("test_fp8_gemm"));
  TEST(test_every_op_input_pair_output_and_scaling);
  TEST(test_beta_accumulates_into_fp32);
  TEST(test_k_zero);
  TEST(test_empty_output_amax_is_zero);
  TEST(test_saturation_and_nan);
  TEST(test_scalings_round_in_fp32);
  TEST(test_bad_inputs_are_rejected_untouched);
  TEST(test_args_of_the_pre_fp8_size_work);
  tpla_ctx_destroy(ctx);
  tpla_host_group_destroy(group);
  return test_summary();
}
