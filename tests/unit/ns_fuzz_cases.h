/*
 * ns_fuzz_cases.h - the random cases of test_ns_fuzz.c: tolerances scaled by a
 * case's float64 sensitivity to rounding, the seeded choices (shapes, uneven
 * shards, padding, tame random coefficient tables, descs) and their printed
 * description. Header-only, for that one test.
 */
#ifndef TPLA_NS_FUZZ_CASES_H
#define TPLA_NS_FUZZ_CASES_H

#include "test_ns_common.h"

#include "ns.h" /* ns_algorithm_name, ns_iteration_name */

#include <stdarg.h>

#define MAXP 8
#define MAXSTEPS 7
#define MAXMATS 6
#define SENTINEL 0xff /* 0xffff..: NaN in fp32, bf16 and fp16 */
#define GUARD 8       /* sentinel elements after each buffer */

/* ---- tolerances ---------------------------------------------------------- */
/* Relative Frobenius differences. A random shape and table can amplify
 * rounding far more than the systematic tests' (Polar Express's first triple
 * has a gain of ~21 at sigma = 1; a 1 x n matrix has no small singular value
 * to dilute it), so each comparison's tolerance is the larger of the
 * systematic tests' fixed one and a multiple of the case's own sensitivity
 * to rounding (sensitivity(): a float64 model, independent of the library,
 * with the Gram iteration's own products and a distributed half Gram's
 * partial sums where they apply; the multiple, 4, is about 2x the largest
 * difference / sensitivity ratio that a soak prints for half precision (1.9
 * in a 10,000-matrix soak; 2.7 in session 36's 200-s soaks); fp32's model
 * leaves out the sums' rounding, which its fixed floors cover, and keeps the
 * earlier calibration's 6; the floors of half results against float64 are
 * above the systematic tests' 6e-2 by the largest error of a 60,000-matrix
 * soak). Cases whose tolerance would pass 0.3 are too
 * ill-conditioned for their dtype (bf16 with Polar Express can diverge there,
 * in exact emulation of the Gram iteration too): their values are not
 * compared, only counted; the checks of buffers and plans still apply. fp32
 * input is always compared.
 * Wrong offsets, a missing rank's share or a wrong coefficient give
 * differences of order 1. */
static double sens_factor(tpla_dtype_t dt) { return dt == TPLA_FLOAT32 ? 6.0 : 4.0; }
#define TOL_CAP 0.3

static double unit_roundoff(tpla_dtype_t dt) {
  return dt == TPLA_FLOAT32 ? 0x1p-24 : dt == TPLA_FLOAT16 ? 0x1p-11 : 0x1p-8;
}
/* same: the distributed run computes what one rank computes (the same Gram
 * side and iteration), only summed in another order */
static double tol_vs_one(tpla_dtype_t dt, double sens, bool same) {
  double fixed = dt == TPLA_FLOAT32 ? (same ? 2e-5 : 2e-4) : dt == TPLA_FLOAT16 ? 1e-2 : 6e-2;
  return fmax(fixed, sens_factor(dt) * sens);
}
static double tol_vs_f64(tpla_dtype_t dt, double sens) {
  double fixed = dt == TPLA_FLOAT32 ? 2e-4 : dt == TPLA_FLOAT16 ? 2e-2 : 1e-1;
  return fmax(fixed, sens_factor(dt) * sens);
}

/* ---- random choices ------------------------------------------------------ */

static uint64_t splitmix(uint64_t z) {
  z += 0x9e3779b97f4a7c15ull;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

/* Uniform integer in [lo, hi]. */
static int64_t pick(rng_t *r, int64_t lo, int64_t hi) {
  int64_t v = lo + (int64_t)((rng_uniform(r) + 1.0) * 0.5 * (double)(hi - lo + 1));
  return v > hi ? hi : v;
}

static bool chance(rng_t *r, double p) { return (rng_uniform(r) + 1.0) * 0.5 < p; }

/* ---- one matrix's options ------------------------------------------------ */

typedef struct {
  int64_t m, n;
  tpla_ns_desc_t desc; /* everything but the local sizes */
  float table[3 * MAXSTEPS]; /* TPLA_NS_USER's */
  int64_t sizes[MAXP];       /* of the sharded dimension, per rank */
  int pad[MAXP], out_pad[MAXP];
  int scale_exp; /* the input is uniform [-1, 1) times 2^scale_exp */
  bool zero;     /* the input is all zeros */
} mat_t;

static const char *dt_name(tpla_dtype_t dt) { return tpla_dtype_name(dt); }

static const char *preset_name(tpla_ns_preset_t p) {
  static const char *names[] = {"MUON", "MUON_SCHEDULE5", "POLAR_EXPRESS", "CUBIC", "USER"};
  return p >= 0 && p <= 4 ? names[p] : "?";
}

/* Append printf output to a fixed buffer. */
static void cat(char *buf, size_t size, const char *fmt, ...) {
  size_t len = strlen(buf);
  if (len + 1 >= size)
    return;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(buf + len, size - len, fmt, ap);
  va_end(ap);
}

static void describe_mat(char *buf, size_t size, const mat_t *mt, int P) {
  const tpla_ns_desc_t *d = &mt->desc;
  cat(buf, size, "%" PRId64 "x%" PRId64 " %s-sharded %s gram %s %s %s iteration, %s x %d steps",
      mt->m, mt->n, d->shard == TPLA_SHARD_ROWS ? "rows" : "cols", dt_name(d->dtype),
      dt_name(d->gram_dtype), ns_algorithm_name(d->algorithm), ns_iteration_name(d->iteration),
      preset_name(d->preset), d->steps);
  if (d->preset == TPLA_NS_USER) {
    cat(buf, size, " {");
    for (int k = 0; k < 3 * d->steps; k++)
      cat(buf, size, "%s%.9g", k ? ", " : "", mt->table[k]);
    cat(buf, size, "}");
  }
  cat(buf, size, ", safety %.9g eps %.9g, input %s2^%d; sizes [", d->safety, d->eps,
      mt->zero ? "0 x " : "", mt->scale_exp);
  for (int r = 0; r < P; r++)
    cat(buf, size, "%s%" PRId64, r ? " " : "", mt->sizes[r]);
  cat(buf, size, "], ld pads [");
  for (int r = 0; r < P; r++)
    cat(buf, size, "%s%d/%d", r ? " " : "", mt->pad[r], mt->out_pad[r]);
  cat(buf, size, "]");
}

/* Split g over P ranks in one of several patterns, the uneven ones the
 * systematic tests miss. */
static void random_split(rng_t *r, int64_t g, int P, int64_t *sizes) {
  int kind = (int)pick(r, 0, 5);
  for (int q = 0; q < P; q++)
    sizes[q] = 0;
  if (kind == 0 || P == 1) { /* even */
    split(g, P, false, sizes);
  } else if (kind == 1) { /* one nonempty rank */
    sizes[pick(r, 0, P - 1)] = g;
  } else if (kind == 2) { /* ones on some ranks, the rest on one */
    int64_t left = g;
    for (int q = 0; q < P && left > 1; q++)
      if (chance(r, 0.6)) {
        sizes[q] = 1;
        left--;
      }
    sizes[pick(r, 0, P - 1)] += left;
  } else { /* random weights, several ranks empty */
    double w[MAXP], sum = 0.0;
    for (int q = 0; q < P; q++) {
      w[q] = chance(r, 0.35) ? 0.0 : (rng_uniform(r) + 1.0) * 0.5;
      sum += w[q];
    }
    if (sum == 0.0)
      w[pick(r, 0, P - 1)] = sum = 1.0;
    int64_t left = g;
    for (int q = 0; q < P; q++) {
      sizes[q] = (int64_t)((double)g * w[q] / sum);
      left -= sizes[q];
    }
    while (left > 0) { /* the remainder to ranks that have weight */
      int q = (int)pick(r, 0, P - 1);
      if (w[q] > 0.0) {
        sizes[q]++;
        left--;
      }
    }
  }
}

static int random_pad(rng_t *r) {
  static const int pads[] = {0, 0, 0, 1, 2, 3, 5, 8, 17};
  return pads[pick(r, 0, 8)];
}

/* The composed scalar map of a table stays bounded on [0, 1] and does not
 * amplify a perturbation by more than the presets do (Polar Express's 7 steps:
 * ~3.6e3), so that rounding stays comparable between runs. */
static bool table_is_tame(const float *table, int steps) {
  for (int i = 0; i <= 256; i++) {
    double x = i / 256.0, dx = 1.0;
    for (int k = 0; k < steps; k++) {
      const float *t = table + 3 * k;
      double x2 = x * x;
      dx *= t[0] + 3.0 * t[1] * x2 + 5.0 * t[2] * x2 * x2;
      x = ref_poly(t, x);
      if (!(fabs(x) <= 1.5) || !(fabs(dx) <= 4e3))
        return false;
    }
  }
  return true;
}

/* A random triple: a preset's, perturbed by a few percent, or a random
 * odd quintic with p(1) near 1. */
static void random_triple(rng_t *r, float *t) {
  static const double(*tables[])[3] = {ref_muon, ref_muon5, ref_polar_express, ref_cubic};
  static const int len[] = {1, 5, 8, 1};
  int k = (int)pick(r, 0, 4);
  if (k < 4) {
    const double *abc = tables[k][pick(r, 0, len[k] - 1)];
    for (int j = 0; j < 3; j++)
      t[j] = (float)(abc[j] * (1.0 + 0.05 * rng_uniform(r)));
    return;
  }
  double a = 1.0 + 1.5 * (rng_uniform(r) + 1.0) * 0.5, c = 0.5 * rng_uniform(r);
  if (chance(r, 0.2))
    c = 0.0;
  t[0] = (float)a;
  t[1] = (float)(1.0 - a - c + 0.1 * rng_uniform(r));
  t[2] = (float)c;
}

static void random_table(rng_t *r, float *table, int steps) {
  for (int tries = 0; tries < 200; tries++) {
    for (int k = 0; k < steps; k++)
      random_triple(r, table + 3 * k);
    if (table_is_tame(table, steps))
      return;
  }
  for (int k = 0; k < steps; k++) /* rarely reached: Muon's triple is tame */
    for (int j = 0; j < 3; j++)
      table[3 * k + j] = (float)ref_muon[0][j];
}

/* The triples a plan applies and its safety factor, as documented: presets
 * with a given safety deflate as with their default (Polar Express only). */
static double expected_table(const mat_t *mt, float *table) {
  const tpla_ns_desc_t *d = &mt->desc;
  if (d->preset == TPLA_NS_USER) {
    memcpy(table, mt->table, sizeof(float) * 3 * (size_t)d->steps);
    return d->safety > 0.0f ? d->safety : 1.0;
  }
  double s = ref_preset_table(d->preset, d->steps, table);
  if (d->safety <= 0.0f || d->preset != TPLA_NS_POLAR_EXPRESS)
    return d->safety > 0.0f ? (double)d->safety : s;
  s = d->safety;
  for (int k = 0; k < d->steps; k++) {
    int j = k < 8 ? k : 7;
    double f = j < 7 ? s : 1.0;
    table[3 * k] = (float)(ref_polar_express[j][0] / f);
    table[3 * k + 1] = (float)(ref_polar_express[j][1] / (f * f * f));
    table[3 * k + 2] = (float)(ref_polar_express[j][2] / (f * f * f * f * f));
  }
  return s;
}

/* Shape: a short side up to 80 (rarely 1..4, now and then up to 144 so that
 * GRAM_SHARDED on two ranks gets two pairs of block rows), a long side up to
 * 160; tall, wide or square. `small` keeps batches' matrices smaller. */
static void random_shape(rng_t *r, bool small, int64_t *m, int64_t *n) {
  int64_t s_max = small ? 40 : 80, l_max = small ? 96 : 160;
  int64_t s = chance(r, 0.15) ? pick(r, 1, 4) : pick(r, 1, s_max);
  if (!small && chance(r, 0.05))
    s = pick(r, 100, 144);
  int64_t l = chance(r, 0.2) ? s : pick(r, s, l_max > s ? l_max : s);
  bool tall = chance(r, 0.5);
  *m = tall ? l : s;
  *n = tall ? s : l;
}

static void random_mat(rng_t *r, mat_t *mt, int P, bool small, bool batch) {
  memset(mt, 0, sizeof *mt);
  random_shape(r, small, &mt->m, &mt->n);
  tpla_ns_desc_t *d = &mt->desc;
  *d = (tpla_ns_desc_t)TPLA_NS_DESC_INIT;
  d->shard = chance(r, 0.5) ? TPLA_SHARD_ROWS : TPLA_SHARD_COLS;
  static const tpla_dtype_t dts[] = {TPLA_FLOAT32, TPLA_FLOAT32, TPLA_BFLOAT16, TPLA_FLOAT16};
  d->dtype = dts[pick(r, 0, 3)];
  d->gram_dtype = chance(r, 0.5) ? TPLA_FLOAT32 : d->dtype;
  static const tpla_ns_iteration_t its[] = {TPLA_NS_ITERATE_X, TPLA_NS_ITERATE_GRAM,
                                            TPLA_NS_ITERATE_AUTO};
  d->iteration = its[pick(r, 0, 2)];
  /* AUTO as often as all forced ones; LOCAL only where allowed (one rank,
   * or a batch's owner) */
  static const tpla_ns_algorithm_t algos[] = {
      TPLA_NS_ALGO_GRAM_ALLREDUCE, TPLA_NS_ALGO_REDISTRIBUTE, TPLA_NS_ALGO_GATHER,
      TPLA_NS_ALGO_GRAM_SHARDED, TPLA_NS_ALGO_LOCAL};
  d->algorithm = TPLA_NS_ALGO_AUTO;
  if (chance(r, 0.6))
    d->algorithm = algos[pick(r, 0, P == 1 || batch ? 4 : 3)];
  d->steps = (int)pick(r, 1, MAXSTEPS);
  d->preset = (tpla_ns_preset_t)pick(r, 0, 4);
  if (d->preset == TPLA_NS_USER) {
    random_table(r, mt->table, d->steps);
    d->coefficients = mt->table;
    d->ncoefficients = 3 * (size_t)d->steps;
  }
  if (chance(r, 0.2))
    d->safety = (float)(1.0 + (rng_uniform(r) + 1.0) * 0.5);
  if (chance(r, 0.15))
    d->eps = chance(r, 0.5) ? 0.0f : (float)(0.3 * (rng_uniform(r) + 1.0) * 0.5);
  /* fp16 has 5 exponent bits: keep its entries normal and far from 65504 */
  int e = d->dtype == TPLA_FLOAT16 ? 4 : 12;
  mt->scale_exp = chance(r, 0.7) ? 0 : (int)pick(r, -e, e);
  mt->zero = chance(r, 0.02);
  random_split(r, d->shard == TPLA_SHARD_ROWS ? mt->m : mt->n, P, mt->sizes);
  for (int q = 0; q < P; q++) {
    mt->pad[q] = random_pad(r);
    mt->out_pad[q] = random_pad(r);
  }
}

/* The global input: uniform [-1, 1) times 2^scale_exp, rounded to the dtype. */
static double *make_input(const mat_t *mt, uint64_t seed) {
  double *x = random_matrix(mt->m, mt->n, TPLA_FLOAT32, seed);
  for (int64_t i = 0; i < mt->m * mt->n; i++) {
    float v = 0.0f;
    tpla_store_elem(&v, mt->desc.dtype, 0, mt->zero ? 0.0 : ldexp(x[i], mt->scale_exp));
    x[i] = tpla_load_elem(&v, mt->desc.dtype, 0);
  }
  return x;
}


#endif /* TPLA_NS_FUZZ_CASES_H */
