/*
 * dtype.c - element types: sizes, names, and the scalar conversions the host
 * executor and the tests use: IEEE half and bfloat16 (round to nearest
 * even), and the OCP FP8 formats E4M3 and E5M2 (exact decode; encode rounds
 * to nearest even and saturates).
 */
#include "internal.h"

#include <math.h>
#include <string.h>

bool tpla_dtype_valid(tpla_dtype_t dtype) { return tpla_dtype_size(dtype) != 0; }

size_t tpla_dtype_size(tpla_dtype_t dtype) {
  switch (dtype) {
  case TPLA_FLOAT32: return 4;
  case TPLA_FLOAT16: return 2;
  case TPLA_BFLOAT16: return 2;
  case TPLA_FLOAT64: return 8;
  case TPLA_UINT8: return 1;
  case TPLA_FLOAT8_E4M3: return 1;
  case TPLA_FLOAT8_E5M2: return 1;
  }
  return 0;
}

const char *tpla_dtype_name(tpla_dtype_t dtype) {
  switch (dtype) {
  case TPLA_FLOAT32: return "fp32";
  case TPLA_FLOAT16: return "fp16";
  case TPLA_BFLOAT16: return "bf16";
  case TPLA_FLOAT64: return "fp64";
  case TPLA_UINT8: return "u8";
  case TPLA_FLOAT8_E4M3: return "e4m3";
  case TPLA_FLOAT8_E5M2: return "e5m2";
  }
  return "?";
}

static uint32_t float_bits(float f) {
  uint32_t u;
  memcpy(&u, &f, sizeof u);
  return u;
}

static float bits_float(uint32_t u) {
  float f;
  memcpy(&f, &u, sizeof f);
  return f;
}

float tpla_bf16_to_float(uint16_t b) { return bits_float((uint32_t)b << 16); }

uint16_t tpla_float_to_bf16(float f) {
  uint32_t u = float_bits(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) /* NaN: keep it quiet, keep the sign */
    return (uint16_t)((u >> 16) | 0x40);
  u += 0x7fffu + ((u >> 16) & 1u);
  return (uint16_t)(u >> 16);
}

float tpla_half_to_float(uint16_t h) {
  uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1fu;
  uint32_t man = h & 0x3ffu;
  if (exp == 0) /* zero or subnormal: man * 2^-24 */
    return sign ? -ldexpf((float)man, -24) : ldexpf((float)man, -24);
  if (exp == 31)
    return bits_float(sign | 0x7f800000u | (man << 13));
  return bits_float(sign | ((exp + 112u) << 23) | (man << 13));
}

uint16_t tpla_float_to_half(float f) {
  uint32_t u = float_bits(f);
  uint16_t sign = (uint16_t)((u >> 16) & 0x8000u);
  float a = fabsf(f);
  if (isnan(f))
    return (uint16_t)(sign | 0x7e00u);
  if (a >= 65520.0f) /* rounds to infinity */
    return (uint16_t)(sign | 0x7c00u);
  if (a < 6.103515625e-05f) { /* subnormal range: quantum 2^-24 */
    float x = a * 16777216.0f, q = floorf(x), rest = x - q; /* all exact */
    /* nearest even by hand: nearbyintf would follow the thread's rounding mode */
    if (rest > 0.5f || (rest == 0.5f && fmodf(q, 2.0f) == 1.0f))
      q += 1.0f;
    return (uint16_t)(sign | (uint16_t)q);
  }
  uint32_t au = float_bits(a);
  uint32_t exp = (au >> 23) - 112u;
  uint32_t man = au & 0x7fffffu;
  uint32_t h = (exp << 10) | (man >> 13);
  uint32_t rest = man & 0x1fffu;
  if (rest > 0x1000u || (rest == 0x1000u && (h & 1u)))
    h++; /* a carry into the exponent is the right result */
  return (uint16_t)(sign | h);
}

/* ---- OCP FP8 -------------------------------------------------------------
 * E4M3: bias 7, 3 mantissa bits, no infinities, S.1111.111 is NaN, largest
 * finite 448 (S.1111.110). E5M2: bias 15, 2 mantissa bits, IEEE-like (exponent
 * 31: infinity or NaN), largest finite 57344. Both have subnormals. Within a
 * sign, the codes 0..largest are ordered by value and evenly spaced inside
 * each binade, which the encoder below relies on. */

typedef struct {
  int man_bits;      /* mantissa bits */
  int bias;
  uint8_t max_code;  /* largest finite magnitude code */
  double max;        /* its value */
  uint8_t nan_code;  /* the NaN the encoder produces (sign added) */
  bool has_inf;      /* E5M2: 0x7c is infinity */
} fp8_format_t;

static const fp8_format_t E4M3 = {3, 7, 0x7e, 448.0, 0x7f, false};
static const fp8_format_t E5M2 = {2, 15, 0x7b, 57344.0, 0x7f, true};

static const fp8_format_t *fp8_format(tpla_dtype_t fmt) {
  return fmt == TPLA_FLOAT8_E5M2 ? &E5M2 : &E4M3;
}

float tpla_fp8_to_float(uint8_t code, tpla_dtype_t fmt) {
  const fp8_format_t *f = fp8_format(fmt);
  uint32_t sign = (uint32_t)(code & 0x80u) << 24;
  uint32_t mag = code & 0x7fu;
  uint32_t exp = mag >> f->man_bits, man = mag & ((1u << f->man_bits) - 1u);
  if (mag > f->max_code) { /* E4M3: only 0x7f; E5M2: 0x7c is infinity, 0x7d..0x7f NaN */
    if (f->has_inf && man == 0)
      return bits_float(sign | 0x7f800000u);
    return bits_float(sign | 0x7fc00000u);
  }
  if (exp == 0) { /* zero or subnormal: man * 2^(1 - bias - man_bits), exact in fp32 */
    float v = ldexpf((float)man, 1 - f->bias - f->man_bits);
    return sign ? -v : v;
  }
  return bits_float(sign | ((exp - (uint32_t)f->bias + 127u) << 23) |
                    (man << (23 - f->man_bits)));
}

uint8_t tpla_double_to_fp8(double v, tpla_dtype_t fmt) {
  const fp8_format_t *f = fp8_format(fmt);
  uint8_t sign = signbit(v) ? 0x80 : 0;
  if (isnan(v))
    return (uint8_t)(sign | f->nan_code);
  double a = fabs(v);
  if (isinf(v) && f->has_inf)
    return (uint8_t)(sign | 0x7c);
  if (a >= f->max) /* finite overflow (and E4M3's infinities) saturate */
    return (uint8_t)(sign | f->max_code);
  if (a == 0.0) /* frexp would put 0 in binade -1 */
    return sign;
  /* Quantum of |v|'s binade (the subnormals share the first normal binade's). */
  int e;
  frexp(a, &e); /* a = m 2^e, m in [0.5, 1): the binade's exponent is e - 1 */
  int binade = e - 1 < 1 - f->bias ? 1 - f->bias : e - 1;
  /* x = a / quantum is exact (a power-of-two scaling); round it to nearest
   * even by hand, whatever the thread's rounding mode. */
  double x = ldexp(a, f->man_bits - binade), q = floor(x), rest = x - q;
  if (rest > 0.5 || (rest == 0.5 && fmod(q, 2.0) != 0.0))
    q += 1.0;
  /* q in [0, 2^(man_bits+1)]; code = the binade's first code + (q - 2^man_bits),
   * where q = 2^(man_bits+1) carries into the next binade correctly; in the
   * subnormal binade this is q itself (exponent field 0, or 1 after rounding up). */
  int code = (binade + f->bias) * (1 << f->man_bits) + (int)q - (1 << f->man_bits);
  if (code > f->max_code) /* cannot happen for a < max, kept as a guard */
    code = f->max_code;
  return (uint8_t)(sign | (uint8_t)code);
}

double tpla_load_elem(const void *buf, tpla_dtype_t dtype, size_t i) {
  switch (dtype) {
  case TPLA_FLOAT32: return ((const float *)buf)[i];
  case TPLA_FLOAT16: return tpla_half_to_float(((const uint16_t *)buf)[i]);
  case TPLA_BFLOAT16: return tpla_bf16_to_float(((const uint16_t *)buf)[i]);
  case TPLA_FLOAT64: return ((const double *)buf)[i];
  case TPLA_UINT8: return ((const uint8_t *)buf)[i];
  case TPLA_FLOAT8_E4M3:
  case TPLA_FLOAT8_E5M2: return tpla_fp8_to_float(((const uint8_t *)buf)[i], dtype);
  }
  return 0.0;
}

void tpla_store_elem(void *buf, tpla_dtype_t dtype, size_t i, double v) {
  switch (dtype) {
  case TPLA_FLOAT32: ((float *)buf)[i] = (float)v; break;
  case TPLA_FLOAT16: ((uint16_t *)buf)[i] = tpla_float_to_half((float)v); break;
  case TPLA_BFLOAT16: ((uint16_t *)buf)[i] = tpla_float_to_bf16((float)v); break;
  case TPLA_FLOAT64: ((double *)buf)[i] = v; break;
  case TPLA_UINT8: ((uint8_t *)buf)[i] = (uint8_t)v; break;
  case TPLA_FLOAT8_E4M3:
  case TPLA_FLOAT8_E5M2: ((uint8_t *)buf)[i] = tpla_double_to_fp8(v, dtype); break;
  }
}
