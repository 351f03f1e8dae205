/*
 * test_fp8.c - the OCP FP8 formats (E4M3, E5M2): every code decoded against
 * values computed here from the bit fields, exact round trips, ties to
 * even, saturation, NaN, random values against a reference encoder (nearest
 * entry of the sorted table of values); and which collectives take FP8.
 * The FP8 GEMM of the host executor is tested in test_fp8_gemm.c.
 * Run: ./test_fp8
 */
#include "test.h"

#include "internal.h"
#include "ranks.h"
#include "test_fp8_ref.h"

#include <float.h>
#include <stdlib.h>

static const tpla_dtype_t FORMATS[2] = {TPLA_FLOAT8_E4M3, TPLA_FLOAT8_E5M2};

static void test_sizes_and_names(void) {
  ASSERT_EQ_INT(tpla_dtype_size(TPLA_FLOAT8_E4M3), 1);
  ASSERT_EQ_INT(tpla_dtype_size(TPLA_FLOAT8_E5M2), 1);
  ASSERT_EQ_INT(TPLA_FLOAT8_E4M3, 5);
  ASSERT_EQ_INT(TPLA_FLOAT8_E5M2, 6);
  ASSERT_TRUE(strcmp(tpla_dtype_name(TPLA_FLOAT8_E4M3), "e4m3") == 0);
  ASSERT_TRUE(strcmp(tpla_dtype_name(TPLA_FLOAT8_E5M2), "e5m2") == 0);
}

/* The reference itself, against values from the OCP specification. */
static void test_reference_matches_the_spec_tables(void) {
  const tpla_dtype_t e4 = TPLA_FLOAT8_E4M3, e5 = TPLA_FLOAT8_E5M2;
  ASSERT_TRUE(ref_fp8_value(0x7e, e4) == 448.0);
  ASSERT_TRUE(ref_fp8_value(0x08, e4) == 0x1p-6);  /* smallest normal */
  ASSERT_TRUE(ref_fp8_value(0x01, e4) == 0x1p-9);  /* smallest subnormal */
  ASSERT_TRUE(ref_fp8_value(0x38, e4) == 1.0);
  ASSERT_TRUE(isnan(ref_fp8_value(0x7f, e4)) && isnan(ref_fp8_value(0xff, e4)));
  ASSERT_TRUE(ref_fp8_value(0x78, e4) == 256.0); /* exponent 15 is finite in E4M3 */
  ASSERT_TRUE(ref_fp8_value(0x7b, e5) == 57344.0);
  ASSERT_TRUE(ref_fp8_value(0x04, e5) == 0x1p-14);
  ASSERT_TRUE(ref_fp8_value(0x01, e5) == 0x1p-16);
  ASSERT_TRUE(ref_fp8_value(0x3c, e5) == 1.0);
  ASSERT_TRUE(ref_fp8_value(0x7c, e5) == INFINITY && ref_fp8_value(0xfc, e5) == -INFINITY);
  ASSERT_TRUE(isnan(ref_fp8_value(0x7d, e5)) && isnan(ref_fp8_value(0xfe, e5)));
}

static void test_decode_every_code(void) {
  for (int f = 0; f < 2; f++) {
    int nans = 0, infs = 0;
    for (int c = 0; c < 256; c++) {
      double want = ref_fp8_value((uint8_t)c, FORMATS[f]);
      float got = tpla_fp8_to_float((uint8_t)c, FORMATS[f]);
      uint8_t byte = (uint8_t)c;
      double loaded = tpla_load_elem(&byte, FORMATS[f], 0);
      if (isnan(want)) {
        ASSERT_TRUE(isnan(got) && isnan(loaded));
        nans++;
        continue;
      }
      infs += isinf(want) != 0;
      if (!((double)got == want && loaded == want)) {
        TEST_FAIL_("%s code 0x%02x decodes to %.9g (load_elem %.9g), expected %.9g",
                   tpla_dtype_name(FORMATS[f]), c, (double)got, loaded, want);
        return;
      }
      ASSERT_EQ_INT(signbit(got) != 0, (c & 0x80) != 0); /* -0 stays -0 */
    }
    ASSERT_EQ_INT(nans, f == 0 ? 2 : 6); /* E4M3: S.1111.111; E5M2: S.11111.{01,10,11} */
    ASSERT_EQ_INT(infs, f == 0 ? 0 : 2);
  }
}

static void test_encode_decode_round_trips_every_code(void) {
  for (int f = 0; f < 2; f++)
    for (int c = 0; c < 256; c++) {
      float v = tpla_fp8_to_float((uint8_t)c, FORMATS[f]);
      uint8_t back = tpla_double_to_fp8(v, FORMATS[f]), stored = 0;
      tpla_store_elem(&stored, FORMATS[f], 0, v);
      if (isnan(v)) {
        ASSERT_TRUE(isnan(ref_fp8_value(back, FORMATS[f])));
        ASSERT_EQ_INT(back & 0x80, c & 0x80); /* the sign is kept */
        continue;
      }
      if (back != c || stored != c) {
        TEST_FAIL_("%s code 0x%02x (%.9g) encodes back to 0x%02x (store_elem 0x%02x)",
                   tpla_dtype_name(FORMATS[f]), c, (double)v, back, stored);
        return;
      }
    }
}

/* Between every two neighbouring finite values: the midpoint goes to the
 * even code, anything nearer one side to that side. */
static void test_ties_round_to_even(void) {
  for (int f = 0; f < 2; f++) {
    tpla_dtype_t t = FORMATS[f];
    for (int lo = 0; lo < ref_fp8_max_code(t); lo++)
      for (int s = 0; s < 2; s++) {
        double sign = s ? -1.0 : 1.0;
        double vlo = ref_fp8_value((uint8_t)lo, t), vhi = ref_fp8_value((uint8_t)(lo + 1), t);
        double mid = sign * (vlo + vhi) / 2;
        uint8_t even = (uint8_t)((lo % 2 == 0 ? lo : lo + 1) | (s ? 0x80 : 0));
        uint8_t lo_code = (uint8_t)(lo | (s ? 0x80 : 0)), hi_code = (uint8_t)(lo_code + 1);
        uint8_t got = tpla_double_to_fp8(mid, t);
        if (got != even) {
          TEST_FAIL_("%s: midpoint %.9g of codes 0x%02x/0x%02x encodes to 0x%02x, want 0x%02x",
                     tpla_dtype_name(t), mid, lo_code, hi_code, got, even);
          return;
        }
        double toward_lo = nextafter(mid, 0.0), toward_hi = nextafter(mid, sign * INFINITY);
        ASSERT_EQ_INT(tpla_double_to_fp8(toward_lo, t), lo_code);
        ASSERT_EQ_INT(tpla_double_to_fp8(toward_hi, t), hi_code);
        /* fp32 inputs: the midpoints are exact floats */
        ASSERT_EQ_INT(tpla_double_to_fp8((float)mid, t), even);
      }
  }
  /* spot checks written out */
  ASSERT_EQ_INT(tpla_double_to_fp8(1.0625, TPLA_FLOAT8_E4M3), 0x38);  /* 1 | 1.125 -> 1 */
  ASSERT_EQ_INT(tpla_double_to_fp8(1.1875, TPLA_FLOAT8_E4M3), 0x3a);  /* 1.125 | 1.25 -> 1.25 */
  ASSERT_EQ_INT(tpla_double_to_fp8(0x1p-10, TPLA_FLOAT8_E4M3), 0x00); /* 0 | 2^-9 -> 0 */
  ASSERT_EQ_INT(tpla_double_to_fp8(3 * 0x1p-10, TPLA_FLOAT8_E4M3), 0x02);
  ASSERT_EQ_INT(tpla_double_to_fp8(-0x1p-10, TPLA_FLOAT8_E4M3), 0x80);
  ASSERT_EQ_INT(tpla_double_to_fp8(1.125, TPLA_FLOAT8_E5M2), 0x3c);  /* 1 | 1.25 -> 1 */
  ASSERT_EQ_INT(tpla_double_to_fp8(1.375, TPLA_FLOAT8_E5M2), 0x3e);  /* 1.25 | 1.5 -> 1.5 */
  ASSERT_EQ_INT(tpla_double_to_fp8(15 * 0x1p-18, TPLA_FLOAT8_E5M2), 0x04); /* into normals */
}

static void test_values_beyond_the_range_saturate(void) {
  const tpla_dtype_t e4 = TPLA_FLOAT8_E4M3, e5 = TPLA_FLOAT8_E5M2;
  const double e4_big[] = {448.0, 449.0, 464.0, 479.0, 480.0, 1e6, DBL_MAX, INFINITY};
  for (size_t i = 0; i < sizeof e4_big / sizeof e4_big[0]; i++) {
    ASSERT_EQ_INT(tpla_double_to_fp8(e4_big[i], e4), 0x7e);
    ASSERT_EQ_INT(tpla_double_to_fp8(-e4_big[i], e4), 0xfe); /* no infinity in E4M3 */
  }
  ASSERT_EQ_INT(tpla_double_to_fp8(440.0, e4), 0x7e); /* nearer 448 than 416 */
  ASSERT_EQ_INT(tpla_double_to_fp8(431.0, e4), 0x7d);
  const double e5_big[] = {57344.0, 60000.0, 61440.0, 65536.0, 1e9, DBL_MAX};
  for (size_t i = 0; i < sizeof e5_big / sizeof e5_big[0]; i++) {
    ASSERT_EQ_INT(tpla_double_to_fp8(e5_big[i], e5), 0x7b);
    ASSERT_EQ_INT(tpla_double_to_fp8(-e5_big[i], e5), 0xfb);
  }
  ASSERT_EQ_INT(tpla_double_to_fp8(INFINITY, e5), 0x7c); /* E5M2 keeps its infinities */
  ASSERT_EQ_INT(tpla_double_to_fp8(-INFINITY, e5), 0xfc);
  ASSERT_EQ_INT(tpla_double_to_fp8(1e-300, e4), 0x00);  /* underflow to signed zero */
  ASSERT_EQ_INT(tpla_double_to_fp8(-1e-300, e5), 0x80);
}

static void test_nan_stays_nan(void) {
  for (int f = 0; f < 2; f++) {
    uint8_t p = tpla_double_to_fp8(NAN, FORMATS[f]), n = tpla_double_to_fp8(-NAN, FORMATS[f]);
    ASSERT_TRUE(isnan(ref_fp8_value(p, FORMATS[f])) && isnan(ref_fp8_value(n, FORMATS[f])));
    ASSERT_EQ_INT(p & 0x80, 0);
    ASSERT_EQ_INT(n & 0x80, 0x80);
    uint8_t s = 0;
    tpla_store_elem(&s, FORMATS[f], 0, NAN);
    ASSERT_TRUE(isnan(tpla_fp8_to_float(s, FORMATS[f])));
  }
}

/* Log-uniform magnitudes over and beyond each range, both signs. */
static void test_random_values_match_the_reference(void) {
  rng_t rng;
  rng_seed(&rng, fresh_seed("test_random_values_match_the_reference"));
  for (int f = 0; f < 2; f++)
    for (int i = 0; i < 200000; i++) {
      double e = (rng_uniform(&rng) + 1) / 2 * (f == 0 ? 34 : 50) - (f == 0 ? 22 : 34);
      double x = exp2(e) * (rng_uniform(&rng) < 0 ? -1 : 1);
      if (i % 2)
        x = (float)x; /* fp32 inputs too */
      uint8_t got = tpla_double_to_fp8(x, FORMATS[f]), want = ref_fp8_encode(x, FORMATS[f]);
      if (got != want) {
        TEST_FAIL_("%s: %.17g encodes to 0x%02x, the reference to 0x%02x",
                   tpla_dtype_name(FORMATS[f]), x, got, want);
        return;
      }
    }
}

/* ---- collectives: FP8 moves as bytes, is never summed -------------------- */

static void test_collectives_move_fp8_but_do_not_sum_it(void) {
  tpla_host_group_t g;
  tpla_ctx_t c;
  ASSERT_OK(tpla_host_group_create(&g, 1, NULL));
  ASSERT_OK(tpla_ctx_create_host(&c, g, 0, NULL));
  uint8_t send[8] = {0x38, 0x7e, 0x01, 0x80, 0xfe, 0x7f, 0x3c, 0x44}, recv[8];
  size_t counts[1] = {8};
  for (int f = 0; f < 2; f++) {
    tpla_dtype_t t = FORMATS[f];
    memset(recv, 0xaa, sizeof recv);
    ASSERT_STATUS(tpla_allreduce(c, recv, send, 8, t, NULL), TPLA_ERROR_INVALID_ARGUMENT);
    ASSERT_CONTAINS(tpla_last_error(), "tpla_allreduce: argument 'dtype'");
    ASSERT_CONTAINS(tpla_last_error(), tpla_dtype_name(t));
    ASSERT_CONTAINS(tpla_last_error(), "cannot be summed");
    ASSERT_STATUS(tpla_reduce_scatterv(c, recv, send, counts, t, NULL),
                  TPLA_ERROR_INVALID_ARGUMENT);
    ASSERT_CONTAINS(tpla_last_error(), "tpla_reduce_scatterv: argument 'dtype'");
    for (int i = 0; i < 8; i++)
      ASSERT_EQ_INT(recv[i], 0xaa); /* untouched */
    ASSERT_OK(tpla_allgatherv(c, recv, send, counts, t, NULL));
    ASSERT_TRUE(memcmp(recv, send, 8) == 0); /* bit for bit, NaN included */
    memset(recv, 0, sizeof recv);
    ASSERT_OK(tpla_sendrecv(c, send, 8, 0, recv, 8, 0, t, NULL));
    ASSERT_TRUE(memcmp(recv, send, 8) == 0);
    ASSERT_OK(tpla_broadcast(c, recv, 8, t, 0, NULL));
    ASSERT_TRUE(memcmp(recv, send, 8) == 0);
  }
  ASSERT_OK(tpla_ctx_destroy(c));
  ASSERT_OK(tpla_host_group_destroy(g));
}

int main(void) {
  TEST(test_sizes_and_names);
  TEST(test_reference_matches_the_spec_tables);
  TEST(test_decode_every_code);
  TEST(test_encode_decode_round_trips_every_code);
  TEST(test_ties_round_to_even);
  TEST(test_values_beyond_the_range_saturate);
  TEST(test_nan_stays_nan);
  TEST(test_random_values_match_the_reference);
  TEST(test_collectives_move_fp8_but_do_not_sum_it);
  return test_summary();
}
