/*
 * overlap_fuzz_cases.h - the random cases of test_overlap_fuzz.c: every dtype
 * decoded and encoded here (independent of src/core/dtype.c), the seeded
 * choices of a case (operation, ranks, row slices, shapes, dtypes, scalars,
 * modes, environment) and its printed description, and the buffers with their
 * snapshots. Header-only, for that one test.
 */
#ifndef TPLA_OVERLAP_FUZZ_CASES_H
#define TPLA_OVERLAP_FUZZ_CASES_H

#include "ranks.h"
#include "test.h"
#include "test_fp8_ref.h"

#include <inttypes.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>


#define FZ_MAX_P 8
#define FZ_MAX_CALLS 4
#define FZ_MAX_DIM 96
#define FZ_SENTINEL 0x5a /* D's padding */
#define FZ_AMAX_UNSET -7.0f

typedef enum { FZ_AG = 0, FZ_RS = 1, FZ_AR = 2 } fz_kind_t;
static const char *const fz_kind_name[] = {"AG+GEMM", "GEMM+RS", "GEMM+AR"};

/* Rejected calls: what is wrong with them. */
enum { RJ_NONE = -1, RJ_ALPHA_NAN, RJ_D_DTYPE, RJ_ARGS_SIZE, RJ_FP8_FIELD, RJ_BIAS, RJ_MXFP8,
       RJ_B_DTYPE, RJ_COUNT };

/* ---- dtypes, decoded and encoded here (independent of src/core/dtype.c) ------------ */

static bool is_fp8(tpla_dtype_t t) { return t == TPLA_FLOAT8_E4M3 || t == TPLA_FLOAT8_E5M2; }

static double dec_f16(uint16_t h) {
  int e = (h >> 10) & 31, f = h & 1023;
  double v = e == 0 ? ldexp(f, -24) : e == 31 ? (f ? NAN : INFINITY) : ldexp(1024 + f, e - 25);
  return (h & 0x8000) ? -v : v;
}

static double dec(const void *base, tpla_dtype_t t, size_t i) {
  const unsigned char *p = (const unsigned char *)base + i * tpla_dtype_size(t);
  if (t == TPLA_FLOAT32) {
    float f;
    memcpy(&f, p, 4);
    return f;
  }
  uint16_t h = 0;
  if (t == TPLA_FLOAT16 || t == TPLA_BFLOAT16)
    memcpy(&h, p, 2);
  if (t == TPLA_FLOAT16)
    return dec_f16(h);
  if (t == TPLA_BFLOAT16) {
    uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
  }
  return ref_fp8_value(*p, t);
}

/* x rounded to the nearest value of t (ties to even; |x| well inside t's range). */
static double quantize(double x, tpla_dtype_t t) {
  if (t == TPLA_FLOAT32)
    return (float)x;
  if (is_fp8(t))
    return ref_fp8_value(ref_fp8_encode(x, t), t);
  if (x == 0.0)
    return 0.0;
  if (t == TPLA_FLOAT16 && fabs(x) < 0x1p-14) /* subnormal: a fixed quantum */
    return nearbyint(x * 0x1p24) * 0x1p-24;
  int e;
  double m = frexp(x, &e), bits = t == TPLA_FLOAT16 ? 2048.0 : 256.0;
  return ldexp(nearbyint(m * bits) / bits, e);
}

/* Store x, a value of t. */
static void enc(void *base, tpla_dtype_t t, size_t i, double x) {
  unsigned char *p = (unsigned char *)base + i * tpla_dtype_size(t);
  if (t == TPLA_FLOAT32) {
    float f = (float)x;
    memcpy(p, &f, 4);
  } else if (t == TPLA_BFLOAT16) {
    float f = (float)x;
    uint32_t u;
    memcpy(&u, &f, 4);
    uint16_t h = (uint16_t)(u >> 16);
    memcpy(p, &h, 2);
  } else if (t == TPLA_FLOAT16) {
    uint16_t h = signbit(x) ? 0x8000 : 0;
    double a = fabs(x);
    if (a != 0.0 && a < 0x1p-14) {
      h |= (uint16_t)(a * 0x1p24);
    } else if (a != 0.0) {
      int e;
      double m = frexp(a, &e); /* a = 2m 2^(e-1), 2m in [1, 2) */
      h |= (uint16_t)((e - 1 + 15) << 10 | (uint16_t)((2 * m - 1) * 1024));
    }
    memcpy(p, &h, 2);
  } else {
    *p = ref_fp8_encode(x, t);
  }
}

/* Unit roundoff of an output type, as test_overlap_common.h's oc_unit. */
static double unit(tpla_dtype_t t) {
  return t == TPLA_FLOAT16 ? 0x1p-11 : t == TPLA_BFLOAT16 ? 0x1p-8 : 0x1p-24;
}

/* ---- random numbers ------------------------------------------------------------- */

static uint64_t mix64(uint64_t z) {
  z += 0x9e3779b97f4a7c15ull;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

static int64_t pick(rng_t *g, int64_t lo, int64_t hi) { /* uniform in [lo, hi] */
  double u = (rng_uniform(g) + 1.0) * 0.5;
  int64_t v = lo + (int64_t)(u * (double)(hi - lo + 1));
  return v > hi ? hi : v;
}
static bool chance(rng_t *g, double p) { return (rng_uniform(g) + 1.0) * 0.5 < p; }

/* A dimension up to FZ_MAX_DIM, small more often (fast cases, many shapes). */
static int64_t dim(rng_t *g, int64_t lo) {
  return chance(g, 0.5) ? pick(g, lo, 16) : pick(g, lo, FZ_MAX_DIM);
}

/* ---- the case ------------------------------------------------------------------- */

typedef struct { /* one rank's arguments of one call */
  float alpha, beta;
  float a_scale, b_scale; /* FP8 */
  bool a_scale_null, b_scale_null, amax_null;
  tpla_fp8_accum_t accum;
  tpla_dtype_t b_dtype;
  bool d_nan;  /* beta = 0: D holds NaN, which must not be read */
  int reject;  /* RJ_*: a rejected call before the real one */
  uint64_t value_seed;
} fz_call_t;

typedef struct {
  uint64_t seed;
  fz_kind_t kind;
  int P, calls;
  int64_t m;              /* global rows */
  bool even;              /* RS: local_rows -1 on every rank */
  int64_t rows[FZ_MAX_P]; /* AG: local rows; RS: slices (also when even); AR: even split */
  int64_t k[FZ_MAX_P], n[FZ_MAX_P];
  tpla_op_t op_b[FZ_MAX_P];
  tpla_dtype_t dtype, d_dtype[FZ_MAX_P];
  int bias[FZ_MAX_P], allow_tf32[FZ_MAX_P];
  int pad_a[FZ_MAX_P], pad_b[FZ_MAX_P], pad_d[FZ_MAX_P];
  tpla_overlap_mode_t mode;
  tpla_transport_t transport;
  int chunks, window_group;
  bool b_shared;       /* every call passes call 0's B (same pointer and contents) */
  uint64_t b_version;  /* for b_shared FP8 plans: nonzero reuses the transpose */
  char env_direct[4], env_lazy[4], env_tail[4]; /* "" unset; "-" set from outside */
  fz_call_t call[FZ_MAX_CALLS][FZ_MAX_P];
} fz_case_t;

/* Rank r's rows of the even split (GEMM+AR, GEMM+RS with -1): FP8 deals 16-row blocks
 * when m is a multiple of 16 (tpla.h, tpla_gemm_rs_desc_t). */
static int64_t even_rows(int64_t m, int P, int r, tpla_dtype_t t) {
  if (is_fp8(t) && m % 16 == 0)
    return 16 * even_rows(m / 16, P, r, TPLA_FLOAT32);
  return m / P + (r < m % P);
}

/* m rows over P ranks in one of several shapes. */
static void split_rows(rng_t *g, int64_t *rows, int P, int64_t m) {
  int shape = (int)pick(g, 0, 3);
  for (int r = 0; r < P; r++)
    rows[r] = 0;
  if (shape == 0) { /* all on one rank */
    rows[pick(g, 0, P - 1)] = m;
  } else if (shape == 1) { /* random cuts: uneven, often empty slices */
    for (int64_t i = 0; i < m; i++)
      rows[pick(g, 0, P - 1)]++;
    if (chance(g, 0.5)) /* skewed: pile a random share onto one rank */
      for (int r = 0, to = (int)pick(g, 0, P - 1); r < P; r++)
        if (r != to) {
          int64_t move = pick(g, 0, rows[r]);
          rows[r] -= move, rows[to] += move;
        }
  } else if (shape == 2) { /* contiguous cut points */
    int64_t cut[FZ_MAX_P + 1];
    cut[0] = 0, cut[P] = m;
    for (int r = 1; r < P; r++)
      cut[r] = pick(g, 0, m);
    for (int i = 1; i < P; i++) /* insertion sort of cut[1..P-1] */
      for (int j = i; j > 1 && cut[j - 1] > cut[j]; j--) {
        int64_t t = cut[j];
        cut[j] = cut[j - 1], cut[j - 1] = t;
      }
    for (int r = 0; r < P; r++)
      rows[r] = cut[r + 1] - cut[r];
  } else { /* the even split, then rotated */
    int rot = (int)pick(g, 0, P - 1);
    for (int r = 0; r < P; r++)
      rows[(r + rot) % P] = m / P + (r < m % P);
  }
}

static float pick_alpha(rng_t *g) {
  static const float table[] = {1.0f, -1.0f, 0.5f, 2.0f, -1.5f};
  if (chance(g, 0.03))
    return 0.0f; /* D = beta D + bias */
  return chance(g, 0.7) ? table[pick(g, 0, 4)] : (float)(2.0 * rng_uniform(g));
}
static float pick_beta(rng_t *g) {
  static const float table[] = {0.0f, 0.0f, 1.0f, 1.0f, 0.5f, -0.75f};
  return chance(g, 0.85) ? table[pick(g, 0, 5)] : (float)(2.0 * rng_uniform(g));
}

/* The variables the cases vary, and which of them were set from outside (at start). */
static const char *const env_names[3] = {"TPLA_OVERLAP_DIRECT", "TPLA_HOST_LAZY_PULLS",
                                         "TPLA_OVERLAP_TAIL"};
static bool env_outside[3];

static void env_choice(char *out, int which, rng_t *g, const char *const *values, int count) {
  int i = (int)pick(g, 0, count - 1); /* drawn either way: the case does not shift */
  snprintf(out, 4, "%s", env_outside[which] ? "-" : values[i]);
}

static void make_case(fz_case_t *c, uint64_t seed) {
  memset(c, 0, sizeof *c);
  c->seed = seed;
  rng_t g;
  rng_seed(&g, seed);
  c->kind = (fz_kind_t)pick(&g, 0, 2);
  c->P = (int)pick(&g, 1, FZ_MAX_P);
  c->calls = (int)pick(&g, 1, FZ_MAX_CALLS);
  int P = c->P;
  bool fp8 = chance(&g, 0.3);
  static const tpla_dtype_t halves[] = {TPLA_FLOAT32, TPLA_FLOAT16, TPLA_BFLOAT16};
  c->dtype = fp8 ? (chance(&g, 0.5) ? TPLA_FLOAT8_E4M3 : TPLA_FLOAT8_E5M2) : halves[pick(&g, 0, 2)];
  c->mode = (tpla_overlap_mode_t)pick(&g, 0, 2);
  c->transport = (tpla_transport_t)pick(&g, 0, 2);
  c->chunks = chance(&g, 0.4) ? 0 : (int)pick(&g, 1, 16);
  c->window_group = chance(&g, 0.7) ? 0 : (int)pick(&g, 1, 3);
  /* rows: AG's total may be 0 (every slice empty); RS/AR need m > 0 */
  bool ones = chance(&g, 0.15); /* slices of 0 or 1 rows */
  c->m = ones ? pick(&g, c->kind == FZ_AG ? 0 : 1, P) : dim(&g, c->kind == FZ_AG ? 0 : 1);
  if (fp8 && !ones && chance(&g, 0.3)) /* the FP8 even split's 16-row units */
    c->m = 16 * pick(&g, 1, 6);
  c->even = c->kind == FZ_AR || (c->kind == FZ_RS && chance(&g, 0.4));
  if (ones) {
    for (int r = 0; r < P; r++)
      c->rows[r] = 0;
    int64_t left = c->m; /* spread m single rows over random ranks */
    while (left > 0) {
      int r = (int)pick(&g, 0, P - 1);
      if (c->rows[r] == 0)
        c->rows[r] = 1, left--;
    }
  } else {
    split_rows(&g, c->rows, P, c->m);
  }
  if (c->even)
    for (int r = 0; r < P; r++)
      c->rows[r] = even_rows(c->m, P, r, c->dtype);
  /* shapes and per-rank choices (tpla.h says which may differ between ranks) */
  int64_t k = dim(&g, 1), n = dim(&g, 1);
  bool same_op = chance(&g, 0.5);
  tpla_op_t op = (tpla_op_t)pick(&g, 0, 1);
  tpla_dtype_t d_common = TPLA_FLOAT32;
  int bias_common = (int)pick(&g, 0, 1);
  for (int r = 0; r < P; r++) {
    tpla_dtype_t d = fp8 ? halves[pick(&g, 0, 2)] : chance(&g, 0.5) ? c->dtype : TPLA_FLOAT32;
    if (r == 0)
      d_common = d;
    c->d_dtype[r] = c->kind == FZ_AG ? d : d_common;
    c->k[r] = c->kind == FZ_AG ? k : chance(&g, 0.12) ? 0 : dim(&g, 1);
    c->n[r] = c->kind != FZ_AG ? n : chance(&g, 0.05) ? 0 : dim(&g, 1);
    c->op_b[r] = same_op ? op : (tpla_op_t)pick(&g, 0, 1);
    c->bias[r] = c->kind == FZ_AR ? bias_common : (int)pick(&g, 0, 1);
    c->allow_tf32[r] = c->dtype == TPLA_FLOAT32 ? (int)pick(&g, 0, 1) : 0;
    c->pad_a[r] = chance(&g, 0.5) ? 0 : (int)pick(&g, 1, 7);
    c->pad_b[r] = chance(&g, 0.5) ? 0 : (int)pick(&g, 1, 7);
    c->pad_d[r] = chance(&g, 0.5) ? 0 : (int)pick(&g, 1, 7);
  }
  c->b_shared = c->calls > 1 && chance(&g, 0.25);
  c->b_version = c->b_shared && chance(&g, 0.5) ? (uint64_t)pick(&g, 1, 1000) : 0;
  /* per call: alpha, beta, scales, B's type. RS/AR pass one alpha on every rank: tpla.h
   * does not say whether it must agree, and each rank's alpha scales its own partial */
  for (int i = 0; i < c->calls; i++) {
    float alpha = pick_alpha(&g);
    for (int r = 0; r < P; r++) {
      fz_call_t *a = &c->call[i][r];
      a->alpha = c->kind == FZ_AG ? pick_alpha(&g) : alpha;
      a->beta = pick_beta(&g);
      a->d_nan = a->beta == 0.0f && chance(&g, 0.5);
      a->value_seed = mix64(seed ^ mix64((uint64_t)(i * FZ_MAX_P + r + 1)));
      a->b_dtype = c->dtype;
      if (fp8) {
        a->a_scale_null = chance(&g, 0.1);
        a->b_scale_null = chance(&g, 0.1);
        a->amax_null = chance(&g, 0.1);
        a->a_scale = (float)ldexp(1.0 + 0.5 * rng_uniform(&g), (int)pick(&g, -3, 1));
        a->b_scale = (float)ldexp(1.0 + 0.5 * rng_uniform(&g), (int)pick(&g, -3, 1));
        a->accum = (tpla_fp8_accum_t)pick(&g, 0, 1);
        a->b_dtype = c->dtype == TPLA_FLOAT8_E5M2 ? TPLA_FLOAT8_E4M3
                     : chance(&g, 0.5)            ? TPLA_FLOAT8_E4M3
                                                  : TPLA_FLOAT8_E5M2;
      }
      if (c->b_shared && i > 0)
        a->b_dtype = c->call[0][r].b_dtype;
      a->reject = chance(&g, 0.1) ? (int)pick(&g, 0, RJ_COUNT - 1) : RJ_NONE;
    }
  }
  static const char *const onoff[] = {"", "1"}, *const tails[] = {"", "1", "2", "3", "4"};
  env_choice(c->env_direct, 0, &g, onoff, 2);
  env_choice(c->env_lazy, 1, &g, onoff, 2);
  env_choice(c->env_tail, 2, &g, tails, 5);
}

/* Set the case's environment (main thread, no rank thread running). */
static void apply_env(const fz_case_t *c) {
  const char *values[3] = {c->env_direct, c->env_lazy, c->env_tail};
  for (int i = 0; i < 3; i++) {
    if (strcmp(values[i], "-") == 0)
      continue; /* set from outside: left alone */
    if (values[i][0] == '\0')
      unsetenv(env_names[i]);
    else
      setenv(env_names[i], values[i], 1);
  }
}

static const char *env_show(const char *name, const char *v) {
  return strcmp(v, "-") == 0 ? (getenv(name) ? getenv(name) : "?") : v[0] ? v : "unset";
}

static void describe(const fz_case_t *c) {
  fprintf(stderr, "  case seed %" PRIu64 ": %s P=%d m=%" PRId64 "%s dtype=%s mode=%d transport=%d "
          "chunks=%d window_group=%d calls=%d b_shared=%d b_version=%" PRIu64
          " env DIRECT=%s LAZY_PULLS=%s TAIL=%s\n", c->seed, fz_kind_name[c->kind], c->P, c->m,
          c->even ? " (even split)" : "", tpla_dtype_name(c->dtype), (int)c->mode,
          (int)c->transport, c->chunks, c->window_group, c->calls, (int)c->b_shared, c->b_version,
          env_show("TPLA_OVERLAP_DIRECT", c->env_direct),
          env_show("TPLA_HOST_LAZY_PULLS", c->env_lazy),
          env_show("TPLA_OVERLAP_TAIL", c->env_tail));
  for (int r = 0; r < c->P; r++) {
    fprintf(stderr, "    rank %d: rows=%" PRId64 " k=%" PRId64 " n=%" PRId64 " op_b=%c d=%s bias=%d "
            "tf32=%d pads a/b/d=%d/%d/%d |", r, c->rows[r], c->k[r], c->n[r],
            c->op_b[r] == TPLA_OP_N ? 'N' : 'T', tpla_dtype_name(c->d_dtype[r]), c->bias[r],
            c->allow_tf32[r], c->pad_a[r], c->pad_b[r], c->pad_d[r]);
    for (int i = 0; i < c->calls; i++) {
      const fz_call_t *a = &c->call[i][r];
      fprintf(stderr, " [alpha %g beta %g%s", (double)a->alpha, (double)a->beta,
              a->d_nan ? " D=NaN" : "");
      if (is_fp8(c->dtype))
        fprintf(stderr, " B %s as %.9g%s bs %.9g%s%s acc %d", tpla_dtype_name(a->b_dtype),
                (double)a->a_scale, a->a_scale_null ? "(NULL)" : "", (double)a->b_scale,
                a->b_scale_null ? "(NULL)" : "", a->amax_null ? " no-amax" : "", (int)a->accum);
      if (a->reject != RJ_NONE)
        fprintf(stderr, " reject %d", a->reject);
      fprintf(stderr, "]");
    }
    fprintf(stderr, "\n");
  }
  fprintf(stderr, "  replay: TPLA_FUZZ_SEED=%" PRIu64 " ./test_overlap_fuzz\n", c->seed);
}

/* ---- buffers -------------------------------------------------------------------- */

typedef struct {
  unsigned char *p, *image; /* the bytes, and a copy taken before the run */
  size_t bytes;
  tpla_matrix_t v;
} fz_buf_t;

/* A rows x cols view with ld = cols + pad inside a buffer whose every byte is `fill`, with
 * one spare row's worth past the end (a write beyond the view shows there). */
static fz_buf_t buf_alloc(int64_t rows, int64_t cols, int pad, tpla_dtype_t t, int fill) {
  fz_buf_t b;
  int64_t ld = cols + pad > 0 ? cols + pad : 1;
  b.bytes = (size_t)((rows + 1) * ld) * tpla_dtype_size(t);
  b.p = malloc(b.bytes);
  b.image = malloc(b.bytes);
  memset(b.p, fill, b.bytes);
  b.v = (tpla_matrix_t){b.p, rows, cols, ld, t};
  return b;
}

static void buf_snap(fz_buf_t *b) { memcpy(b->image, b->p, b->bytes); }
static bool buf_same(const fz_buf_t *b) { return memcmp(b->image, b->p, b->bytes) == 0; }
static void buf_free(fz_buf_t *b) {
  free(b->p);
  free(b->image);
}

/* Random values of the view's dtype, `mag` times uniform [-1, 1) before rounding. */
static void fill_values(tpla_matrix_t v, rng_t *g, double mag) {
  for (int64_t i = 0; i < v.rows; i++)
    for (int64_t j = 0; j < v.cols; j++) {
      double x = mag * rng_uniform(g);
      if (is_fp8(v.dtype) && chance(g, 0.2)) /* a random code: subnormals, tiny values */
        x = ldexp(rng_uniform(g), (int)pick(g, -14, 0));
      enc(v.data, v.dtype, (size_t)(i * v.ld + j), quantize(x, v.dtype));
    }
}

static double at(tpla_matrix_t v, int64_t i, int64_t j) {
  return dec(v.data, v.dtype, (size_t)(i * v.ld + j));
}

typedef struct { /* one rank's buffers and results of one call */
  fz_buf_t a, b, d, bias;
  fz_buf_t *bp;   /* the B passed (b_shared: call 0's) */
  float *fp8;     /* 16-byte aligned: a_scale [0], b_scale [4], d_amax [8] */
  tpla_status_t status, reject_status;
  bool reject_wrote, reject_counted;
  int has_gathered;
  bool gathered_shape_ok;
  unsigned char *gathered; /* AG: copy of the gathered view after this call */
  float gscale[FZ_MAX_P];
  char error[256];
} fz_slot_t;

typedef struct {
  tpla_status_t status; /* plan creation or a query */
  bool plan_set;        /* the plan pointer after creation */
  char error[256];
  int has_gathered_before;
  tpla_overlap_info_t info;
  uint64_t calls_delta, kind_delta, views_delta;
  int views_taken;
} fz_rank_t;

typedef struct {
  const fz_case_t *c;
  fz_slot_t slot[FZ_MAX_CALLS][FZ_MAX_P];
  fz_rank_t rank[FZ_MAX_P];
} fz_run_t;

static int64_t a_rows(const fz_case_t *c, int r) { return c->kind == FZ_AG ? c->rows[r] : c->m; }
static int64_t d_rows(const fz_case_t *c, int r) { return c->kind == FZ_RS ? c->rows[r] : c->m; }
static int64_t row_offset(const fz_case_t *c, int r) {
  int64_t o = 0;
  for (int q = 0; q < r; q++)
    o += c->rows[q];
  return o;
}

static void setup(fz_run_t *run, const fz_case_t *c) {
  memset(run, 0, sizeof *run);
  run->c = c;
  for (int i = 0; i < c->calls; i++)
    for (int r = 0; r < c->P; r++) {
      fz_slot_t *s = &run->slot[i][r];
      const fz_call_t *a = &c->call[i][r];
      rng_t g;
      rng_seed(&g, a->value_seed);
      int64_t k = c->k[r], n = c->n[r];
      bool bt = c->op_b[r] == TPLA_OP_T;
      double mag = chance(&g, 0.8) ? 1.0 : chance(&g, 0.5) ? 0x1p-6 : 2.0;
      /* inputs: padding NaN (0xff in every dtype), so a read of it shows in D */
      s->a = buf_alloc(a_rows(c, r), k, c->pad_a[r], c->dtype, 0xff);
      s->b = buf_alloc(bt ? n : k, bt ? k : n, c->pad_b[r], a->b_dtype, 0xff);
      s->bias = buf_alloc(1, n, 0, c->d_dtype[r], 0xff);
      s->d = buf_alloc(d_rows(c, r), n, c->pad_d[r], c->d_dtype[r], FZ_SENTINEL);
      fill_values(s->a.v, &g, mag);
      fill_values(s->b.v, &g, is_fp8(a->b_dtype) ? 1.0 : mag);
      fill_values(s->bias.v, &g, 1.0);
      if (a->d_nan)
        for (int64_t row = 0; row < s->d.v.rows; row++)
          memset(s->d.p + (size_t)(row * s->d.v.ld) * tpla_dtype_size(s->d.v.dtype), 0xff,
                 (size_t)n * tpla_dtype_size(s->d.v.dtype));
      else
        fill_values(s->d.v, &g, 1.0);
      s->bp = c->b_shared ? &run->slot[0][r].b : &s->b;
      s->fp8 = aligned_alloc(16, 16 * sizeof(float));
      for (int j = 0; j < 16; j++)
        s->fp8[j] = 0.0f;
      s->fp8[0] = a->a_scale, s->fp8[4] = a->b_scale, s->fp8[8] = FZ_AMAX_UNSET;
      if (c->kind == FZ_AG)
        s->gathered = calloc((size_t)(c->m * c->k[0]) + 1, tpla_dtype_size(c->dtype));
      buf_snap(&s->a), buf_snap(&s->b), buf_snap(&s->bias), buf_snap(&s->d);
    }
}

static void teardown(fz_run_t *run) {
  for (int i = 0; i < run->c->calls; i++)
    for (int r = 0; r < run->c->P; r++) {
      fz_slot_t *s = &run->slot[i][r];
      buf_free(&s->a), buf_free(&s->b), buf_free(&s->bias), buf_free(&s->d);
      free(s->fp8);
      free(s->gathered);
    }
}

#endif /* TPLA_OVERLAP_FUZZ_CASES_H */
