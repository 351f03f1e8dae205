/*
 * test_dtype.c - element types: sizes and names, and the fp16/bf16
 * conversions against an independent reference (decode by formula, encode
 * by searching the sorted table of representable values). Run: ./test_dtype
 */
#include "test.h"

#include "internal.h"
#include "ranks.h"

#include <fenv.h>
#include <float.h>
#include <stdint.h>

static float bits_to_float(uint32_t u) {
  float f;
  memcpy(&f, &u, sizeof f);
  return f;
}

/* ---- the reference ------------------------------------------------------- */

/* binary16 by formula; the pattern after the largest finite value (the
 * infinity) decodes as 2^16 so that rounding distances work at the top. */
static double ref_half_value(uint16_t h) {
  int exp = (h >> 10) & 0x1f, man = h & 0x3ff;
  double mag = exp == 0 ? ldexp(man, -24) : exp == 31 && man == 0 ? 65536.0
                                                                   : ldexp(1024 + man, exp - 25);
  return (h & 0x8000) ? -mag : mag;
}

static double ref_bf16_value(uint16_t b) {
  int exp = (b >> 7) & 0xff, man = b & 0x7f;
  double mag = exp == 0 ? ldexp(man, -133) : exp == 255 && man == 0 ? ldexp(1.0, 128)
                                                                     : ldexp(128 + man, exp - 134);
  return (b & 0x8000) ? -mag : mag;
}

/* Nearest of the positive patterns 0..inf_pattern to |x|, ties to the even
 * pattern, with the sign of x. */
static uint16_t ref_round(float x, double (*value)(uint16_t), uint16_t inf_pattern) {
  uint16_t sign = signbit(x) ? 0x8000 : 0;
  double a = fabs((double)x);
  if (a >= value(inf_pattern))
    return sign | inf_pattern;
  uint16_t lo = 0, hi = inf_pattern; /* value(lo) <= a < value(hi) */
  while (hi - lo > 1) {
    uint16_t mid = (uint16_t)((lo + hi) / 2);
    if (value(mid) <= a)
      lo = mid;
    else
      hi = mid;
  }
  double dlo = a - value(lo), dhi = value(hi) - a;
  uint16_t pick = dlo < dhi ? lo : dhi < dlo ? hi : (lo & 1) ? hi : lo;
  return sign | pick;
}

/* ---- tests --------------------------------------------------------------- */

static void test_sizes_and_names(void) {
  ASSERT_EQ_INT(tpla_dtype_size(TPLA_FLOAT32), 4);
  ASSERT_EQ_INT(tpla_dtype_size(TPLA_FLOAT16), 2);
  ASSERT_EQ_INT(tpla_dtype_size(TPLA_BFLOAT16), 2);
  ASSERT_EQ_INT(tpla_dtype_size(TPLA_FLOAT64), 8);
  ASSERT_EQ_INT(tpla_dtype_size(TPLA_UINT8), 1);
  ASSERT_EQ_INT(tpla_dtype_size((tpla_dtype_t)7), 0); /* 5, 6: FP8 (test_fp8.c) */
  ASSERT_EQ_INT(tpla_dtype_size((tpla_dtype_t)-1), 0);
  ASSERT_TRUE(strcmp(tpla_dtype_name(TPLA_FLOAT32), "fp32") == 0);
  ASSERT_TRUE(strcmp(tpla_dtype_name(TPLA_FLOAT16), "fp16") == 0);
  ASSERT_TRUE(strcmp(tpla_dtype_name(TPLA_BFLOAT16), "bf16") == 0);
  ASSERT_TRUE(strcmp(tpla_dtype_name(TPLA_FLOAT64), "fp64") == 0);
  ASSERT_TRUE(strcmp(tpla_dtype_name(TPLA_UINT8), "u8") == 0);
  ASSERT_TRUE(strcmp(tpla_dtype_name((tpla_dtype_t)99), "?") == 0);
}

static void test_half_decode_every_pattern(void) {
  for (uint32_t h = 0; h < 0x10000; h++) {
    float f = tpla_half_to_float((uint16_t)h);
    int exp = (h >> 10) & 0x1f, man = h & 0x3ff;
    if (exp == 31 && man != 0) {
      ASSERT_TRUE(isnan(f));
    } else if (exp == 31) {
      ASSERT_TRUE(isinf(f));
      ASSERT_EQ_INT(signbit(f) != 0, (h & 0x8000) != 0);
    } else {
      ASSERT_TRUE((double)f == ref_half_value((uint16_t)h));
      ASSERT_EQ_INT(signbit(f) != 0, (h & 0x8000) != 0); /* -0 stays -0 */
    }
  }
}

static void test_bf16_decode_every_pattern(void) {
  for (uint32_t b = 0; b < 0x10000; b++) {
    float f = tpla_bf16_to_float((uint16_t)b);
    int exp = (b >> 7) & 0xff, man = b & 0x7f;
    if (exp == 255 && man != 0)
      ASSERT_TRUE(isnan(f));
    else if (exp == 255)
      ASSERT_TRUE(isinf(f));
    else
      ASSERT_TRUE((double)f == ref_bf16_value((uint16_t)b));
  }
}

static void test_representable_values_round_trip_exactly(void) {
  for (uint32_t h = 0; h < 0x10000; h++) {
    float f = tpla_half_to_float((uint16_t)h);
    uint16_t back = tpla_float_to_half(f);
    if (isnan(f))
      ASSERT_TRUE((back & 0x7c00) == 0x7c00 && (back & 0x3ff) != 0);
    else
      ASSERT_EQ_INT(back, h);
    f = tpla_bf16_to_float((uint16_t)h);
    back = tpla_float_to_bf16(f);
    if (isnan(f))
      ASSERT_TRUE((back & 0x7f80) == 0x7f80 && (back & 0x7f) != 0);
    else
      ASSERT_EQ_INT(back, h);
  }
}

static void test_ties_round_to_even(void) {
  /* fp16: ulp(1) = 2^-10 */
  ASSERT_EQ_INT(tpla_float_to_half(1.0f + 0x1p-11f), 0x3c00);        /* 1, even */
  ASSERT_EQ_INT(tpla_float_to_half(1.0f + 3 * 0x1p-11f), 0x3c02);    /* up to even */
  ASSERT_EQ_INT(tpla_float_to_half(1.0f + 0x1p-11f + 0x1p-20f), 0x3c01); /* past the tie */
  ASSERT_EQ_INT(tpla_float_to_half(-(1.0f + 3 * 0x1p-11f)), 0xbc02);
  ASSERT_EQ_INT(tpla_float_to_half(2047.0f + 0.5f), 0x67ff + 1);     /* 2047.5 -> 2048 */
  /* subnormal ties: 2^-25 is halfway between 0 and 2^-24 */
  ASSERT_EQ_INT(tpla_float_to_half(0x1p-25f), 0x0000);
  ASSERT_EQ_INT(tpla_float_to_half(3 * 0x1p-25f), 0x0002);
  ASSERT_EQ_INT(tpla_float_to_half(5 * 0x1p-25f), 0x0002);
  /* the tie at the top rounds to infinity (the even pattern) */
  ASSERT_EQ_INT(tpla_float_to_half(65520.0f), 0x7c00);
  ASSERT_EQ_INT(tpla_float_to_half(65519.996f), 0x7bff);
  /* bf16: ulp(1) = 2^-7 */
  ASSERT_EQ_INT(tpla_float_to_bf16(1.0f + 0x1p-8f), 0x3f80);
  ASSERT_EQ_INT(tpla_float_to_bf16(1.0f + 3 * 0x1p-8f), 0x3f82);
  ASSERT_EQ_INT(tpla_float_to_bf16(1.0f + 0x1p-8f + 0x1p-20f), 0x3f81);
  ASSERT_EQ_INT(tpla_float_to_bf16(-(1.0f + 3 * 0x1p-8f)), 0xbf82);
}

static void test_specials(void) {
  ASSERT_EQ_INT(tpla_float_to_half(INFINITY), 0x7c00);
  ASSERT_EQ_INT(tpla_float_to_half(-INFINITY), 0xfc00);
  ASSERT_EQ_INT(tpla_float_to_half(1e10f), 0x7c00);
  ASSERT_EQ_INT(tpla_float_to_half(-0.0f), 0x8000);
  ASSERT_EQ_INT(tpla_float_to_half(1e-10f), 0x0000); /* underflow to +0 */
  ASSERT_EQ_INT(tpla_float_to_half(-1e-10f), 0x8000);
  ASSERT_EQ_INT(tpla_float_to_half(65504.0f), 0x7bff);
  ASSERT_EQ_INT(tpla_float_to_half(0x1p-14f), 0x0400);             /* smallest normal */
  ASSERT_EQ_INT(tpla_float_to_half(0x1p-14f - 0x1p-24f), 0x03ff);  /* largest subnormal */
  ASSERT_EQ_INT(tpla_float_to_half(0x1p-24f), 0x0001);             /* smallest subnormal */
  uint16_t hn = tpla_float_to_half(NAN);
  ASSERT_TRUE((hn & 0x7c00) == 0x7c00 && (hn & 0x3ff) != 0);
  ASSERT_TRUE(isnan(tpla_half_to_float(hn)));
  ASSERT_EQ_INT(tpla_float_to_bf16(INFINITY), 0x7f80);
  ASSERT_EQ_INT(tpla_float_to_bf16(-INFINITY), 0xff80);
  ASSERT_EQ_INT(tpla_float_to_bf16(FLT_MAX), 0x7f80); /* above the largest bf16 + half ulp */
  ASSERT_EQ_INT(tpla_float_to_bf16(-0.0f), 0x8000);
  ASSERT_EQ_INT(tpla_float_to_bf16(bits_to_float(0x00000001u)), 0x0000); /* float subnormals */
  ASSERT_EQ_INT(tpla_float_to_bf16(bits_to_float(0x00018000u)), 0x0002); /* tie, to even */
  ASSERT_EQ_INT(tpla_float_to_bf16(bits_to_float(0x00008000u)), 0x0000); /* tie, to even */
  ASSERT_EQ_INT(tpla_float_to_bf16(bits_to_float(0x00008001u)), 0x0001);
  uint16_t bn = tpla_float_to_bf16(NAN);
  ASSERT_TRUE((bn & 0x7f80) == 0x7f80 && (bn & 0x7f) != 0);
  /* a NaN whose payload sits in the low bits must not become infinity */
  bn = tpla_float_to_bf16(bits_to_float(0x7f800001u));
  ASSERT_TRUE((bn & 0x7f80) == 0x7f80 && (bn & 0x7f) != 0);
}

/* Every 7919th float bit pattern (both signs, all exponents) against the
 * reference rounding. */
static void test_rounding_sweep_matches_reference(void) {
  for (uint64_t u = 0; u <= 0xffffffffull; u += 7919) {
    float f = bits_to_float((uint32_t)u);
    if (isnan(f))
      continue;
    uint16_t want_h = ref_round(f, ref_half_value, 0x7c00);
    uint16_t want_b = ref_round(f, ref_bf16_value, 0x7f80);
    uint16_t got_h = tpla_float_to_half(f), got_b = tpla_float_to_bf16(f);
    if (got_h != want_h || got_b != want_b)
      fprintf(stderr, "  float 0x%08x (%.9g): half 0x%04x want 0x%04x, bf16 0x%04x want 0x%04x\n",
              (unsigned)u, (double)f, got_h, want_h, got_b, want_b);
    ASSERT_EQ_INT(got_h, want_h);
    ASSERT_EQ_INT(got_b, want_b);
  }
}

/* The encoders round to nearest even whatever the thread's rounding mode
 * (a caller may have changed it): the sweep again, every 7919th pattern from
 * an odd start, under each of the other modes. */
static void test_rounding_ignores_the_rounding_mode(void) {
  const int modes[] = {FE_UPWARD, FE_DOWNWARD, FE_TOWARDZERO};
  for (size_t m = 0; m < sizeof modes / sizeof modes[0]; m++) {
    ASSERT_EQ_INT(fesetround(modes[m]), 0);
    int bad = tpla_float_to_half(0x1p-25f) != 0x0000 ||      /* subnormal ties */
              tpla_float_to_half(3 * 0x1p-25f) != 0x0002;
    for (uint64_t u = 1; u <= 0xffffffffull && !bad; u += 7919) {
      float f = bits_to_float((uint32_t)u);
      bad = !isnan(f) && (tpla_float_to_half(f) != ref_round(f, ref_half_value, 0x7c00) ||
                          tpla_float_to_bf16(f) != ref_round(f, ref_bf16_value, 0x7f80));
      if (bad)
        fprintf(stderr, "  mode %d: float 0x%08x rounds differently\n", modes[m], (unsigned)u);
    }
    fesetround(FE_TONEAREST);
    ASSERT_TRUE(!bad);
  }
}

/* Random floats near the half range, where most rounding happens. */
static void test_rounding_random_matches_reference(void) {
  rng_t r;
  rng_seed(&r, fresh_seed("test_rounding_random_matches_reference"));
  for (int i = 0; i < 200000; i++) {
    float f = (float)ldexp(rng_uniform(&r), (int)(rng_uniform(&r) * 30.0));
    ASSERT_EQ_INT(tpla_float_to_half(f), ref_round(f, ref_half_value, 0x7c00));
    ASSERT_EQ_INT(tpla_float_to_bf16(f), ref_round(f, ref_bf16_value, 0x7f80));
  }
}

static void test_load_store_elements(void) {
  unsigned char buf[64];
  const tpla_dtype_t types[] = {TPLA_FLOAT32, TPLA_FLOAT16, TPLA_BFLOAT16, TPLA_FLOAT64};
  for (int t = 0; t < 4; t++) {
    memset(buf, 0xab, sizeof buf);
    tpla_store_elem(buf, types[t], 3, -1.5);
    ASSERT_TRUE(tpla_load_elem(buf, types[t], 3) == -1.5);
    size_t es = tpla_dtype_size(types[t]);
    for (size_t b = 0; b < sizeof buf; b++) /* only element 3 was written */
      if (b < 3 * es || b >= 4 * es)
        ASSERT_EQ_INT(buf[b], 0xab);
  }
  tpla_store_elem(buf, TPLA_FLOAT16, 0, 1.0 + 0x1p-11); /* rounds like the scalar path */
  ASSERT_TRUE(tpla_load_elem(buf, TPLA_FLOAT16, 0) == 1.0);
}

int main(void) {
  TEST(test_sizes_and_names);
  TEST(test_half_decode_every_pattern);
  TEST(test_bf16_decode_every_pattern);
  TEST(test_representable_values_round_trip_exactly);
  TEST(test_ties_round_to_even);
  TEST(test_specials);
  TEST(test_rounding_sweep_matches_reference);
  TEST(test_rounding_random_matches_reference);
  TEST(test_rounding_ignores_the_rounding_mode);
  TEST(test_load_store_elements);
  return test_summary();
}
