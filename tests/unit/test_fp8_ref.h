/*
 * test_fp8_ref.h - an independent reference for the OCP FP8 formats, for
 * test_fp8.c and test_fp8_gemm.c: values from the bit fields by the formula
 * of the specification (in double), and round-to-nearest-even with
 * saturation by searching the sorted table of finite values. Shares no code
 * with src/core/dtype.c.
 */
#ifndef TPLA_TEST_FP8_REF_H
#define TPLA_TEST_FP8_REF_H

#include "tpla.h"

#include <math.h>
#include <stdint.h>

/* E4M3: s eeee mmm, bias 7, S.1111.111 NaN, no infinity.
 * E5M2: s eeeee mm, bias 15, exponent 31: infinity (m = 0) or NaN. */
static inline double ref_fp8_value(uint8_t c, tpla_dtype_t t) {
  int e4 = t == TPLA_FLOAT8_E4M3;
  int exp = e4 ? (c >> 3) & 15 : (c >> 2) & 31;
  int man = e4 ? c & 7 : c & 3;
  double frac = e4 ? man / 8.0 : man / 4.0;
  int bias = e4 ? 7 : 15;
  double mag;
  if (e4 && exp == 15 && man == 7)
    return NAN;
  if (!e4 && exp == 31)
    mag = man == 0 ? INFINITY : NAN;
  else if (exp == 0)
    mag = frac * pow(2.0, 1 - bias);
  else
    mag = (1.0 + frac) * pow(2.0, exp - bias);
  return (c & 0x80) ? -mag : mag;
}

/* The largest finite positive code (448 and 57344). */
static inline int ref_fp8_max_code(tpla_dtype_t t) { return t == TPLA_FLOAT8_E4M3 ? 0x7e : 0x7b; }

/* Nearest finite value, ties to the even code; beyond the largest finite
 * value: that value (E5M2's infinities stay infinite); NaN: 0x7f | sign. */
static inline uint8_t ref_fp8_encode(double x, tpla_dtype_t t) {
  uint8_t sign = signbit(x) ? 0x80 : 0;
  int top = ref_fp8_max_code(t);
  if (isnan(x))
    return (uint8_t)(sign | 0x7f);
  if (isinf(x) && t == TPLA_FLOAT8_E5M2)
    return (uint8_t)(sign | 0x7c);
  double a = fabs(x);
  if (a >= ref_fp8_value((uint8_t)top, t))
    return (uint8_t)(sign | top);
  int lo = 0, hi = top; /* value(lo) <= a < value(hi) */
  while (hi - lo > 1) {
    int mid = (lo + hi) / 2;
    if (ref_fp8_value((uint8_t)mid, t) <= a)
      lo = mid;
    else
      hi = mid;
  }
  double dlo = a - ref_fp8_value((uint8_t)lo, t), dhi = ref_fp8_value((uint8_t)hi, t) - a;
  int pick = dlo < dhi ? lo : dhi < dlo ? hi : (lo % 2 == 0 ? lo : hi);
  return (uint8_t)(sign | pick);
}

/* Position of a finite code on the number line (adjacent values differ by 1;
 * +0 and -0 are both 0). */
static inline int ref_fp8_ordinal(uint8_t c) { return (c & 0x80) ? -(c & 0x7f) : c; }

#endif
