/*
 * dtype.c - element types: sizes, names, and the scalar conversions the host
 * executor and the tests use (IEEE half and bfloat16, round to nearest even).
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
    float q = nearbyintf(a * 16777216.0f); /* default rounding: nearest even */
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

double tpla_load_elem(const void *buf, tpla_dtype_t dtype, size_t i) {
  switch (dtype) {
  case TPLA_FLOAT32: return ((const float *)buf)[i];
  case TPLA_FLOAT16: return tpla_half_to_float(((const uint16_t *)buf)[i]);
  case TPLA_BFLOAT16: return tpla_bf16_to_float(((const uint16_t *)buf)[i]);
  case TPLA_FLOAT64: return ((const double *)buf)[i];
  case TPLA_UINT8: return ((const uint8_t *)buf)[i];
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
  }
}
