/*
 * fuzz_gpu_gemm.h - test_gpu_fuzz.c's GEMM kinds: random tpla_gemm calls in
 * fp32/fp16/bf16 (TF32 too) and FP8 (E4M3/E5M2, device scales, split and fast
 * accumulation, amax), a seventh of them calls the docs reject, each against a
 * float64 GEMM of the rounded or decoded inputs. Header-only, for that one
 * test; include only when TPLA_HAVE_CUDA is defined.
 */
#ifndef TPLA_FUZZ_GPU_GEMM_H
#define TPLA_FUZZ_GPU_GEMM_H

#include "fuzz_gpu_common.h"

/* ---- GEMM cases ------------------------------------------------------------------- */

/* Calls the docs reject; INV_NONE is a valid case. */
enum {
  INV_NONE,
  INV_D_DTYPE,     /* D neither the input dtype nor fp32 */
  INV_AB_DTYPE,    /* A and B of different half types */
  INV_F64,         /* fp64 inputs */
  INV_LD,          /* an ld < max(cols, 1) */
  INV_SHAPE,       /* D one row or column short */
  INV_SCALAR,      /* non-finite alpha or beta */
  INV_OP,          /* op 2 */
  INV_ARGS_SIZE,   /* args->size wrong */
  INV_FP8_ON_HALF, /* args->fp8 set for non-FP8 inputs */
  INV_E5M2_PAIR,   /* E5M2 x E5M2 */
  INV_FP8_MIX,     /* FP8 x bf16 */
  INV_FP8_D_BETA,  /* beta != 0 with an FP8 D */
  INV_D_SCALE,     /* d_scale with a non-FP8 D */
  INV_SCALE_ALIGN, /* a scale or amax pointer 4 bytes off 16 (CUDA only) */
  INV_MXFP8,       /* scale_mode MXFP8: NOT_SUPPORTED */
  INV_ACCUM,       /* an unknown accum */
  NINV
};
static const char *const inv_names[NINV] = {
    "valid",       "D dtype",      "A/B dtypes",   "fp64 inputs", "ld < cols",
    "D shape",     "non-finite scalar", "bad op",  "args size",   "fp8 args on half inputs",
    "e5m2 x e5m2", "fp8 x bf16",   "beta with FP8 D", "d_scale with non-FP8 D",
    "misaligned scale", "MXFP8",   "bad accum"};

typedef struct {
  uint64_t seed;
  bool fp8;
  int64_t m, n, k;
  tpla_dtype_t ta, tb, td;
  tpla_op_t op_a, op_b;
  int64_t lda, ldb, ldd;
  size_t off_a, off_b, off_d; /* bytes */
  float alpha, beta;
  int tf32;
  double range;                /* inputs uniform in [-range, range) */
  tpla_fp8_accum_t accum;
  float a_scale, b_scale;      /* 0: NULL (1) */
  int d_scale;                 /* FP8 D: a power of two filling a quarter of its range */
  int amax;                    /* pass d_amax */
  int invalid, inv_arg;        /* INV_*, and which operand or field it hits */
} gemm_case_t;

static void gemm_describe(char *buf, size_t size, const gemm_case_t *c) {
  int len = snprintf(buf, size,
                     "case seed 0x%016" PRIx64 " (%s): %s x %s -> %s, op %c%c, m=%" PRId64
                     " n=%" PRId64 " k=%" PRId64 ", ld %" PRId64 "/%" PRId64 "/%" PRId64
                     ", offsets %zu/%zu/%zu bytes, alpha %.9g beta %.9g, range %g%s",
                     c->seed, c->fp8 ? "fp8" : "gemm", tpla_dtype_name(c->ta),
                     tpla_dtype_name(c->tb), tpla_dtype_name(c->td), c->op_a ? 'T' : 'N',
                     c->op_b ? 'T' : 'N', c->m, c->n, c->k, c->lda, c->ldb, c->ldd, c->off_a,
                     c->off_b, c->off_d, (double)c->alpha, (double)c->beta, c->range,
                     c->tf32 ? ", tf32" : "");
  if (c->fp8 && len > 0 && (size_t)len < size)
    len += snprintf(buf + len, size - (size_t)len, ", %s, a_scale %.9g b_scale %.9g%s%s",
                    c->accum == TPLA_FP8_ACCUM_FAST ? "fast" : "split", (double)c->a_scale,
                    (double)c->b_scale, c->d_scale ? ", d_scale" : "", c->amax ? ", amax" : "");
  if (c->invalid && len > 0 && (size_t)len < size)
    snprintf(buf + len, size - (size_t)len, ", rejected: %s (variant %d)", inv_names[c->invalid],
             c->inv_arg);
}

/* Which rejection a case tests: non-FP8 or FP8 kinds each have their own. */
static int pick_invalid(fz_rng_t *r, bool fp8) {
  static const int half[] = {INV_D_DTYPE, INV_AB_DTYPE, INV_F64,    INV_LD,
                             INV_SHAPE,   INV_SCALAR,   INV_OP,     INV_ARGS_SIZE,
                             INV_FP8_ON_HALF};
  static const int eight[] = {INV_E5M2_PAIR, INV_FP8_MIX, INV_FP8_D_BETA, INV_D_SCALE,
                              INV_SCALE_ALIGN, INV_MXFP8, INV_ACCUM,   INV_LD,
                              INV_SHAPE,       INV_SCALAR};
  int v = fp8 ? FZ_PICK(r, eight) : FZ_PICK(r, half);
  if (v == INV_SCALE_ALIGN && g.host) /* the host executor does not need aligned scales */
    v = INV_ACCUM;
  return v;
}

static void gemm_make_case(gemm_case_t *c, uint64_t seed, bool fp8) {
  static const tpla_dtype_t halves[] = {TPLA_FLOAT32, TPLA_FLOAT16, TPLA_BFLOAT16};
  static const tpla_dtype_t pairs[][2] = {{E4M3, E4M3}, {E5M2, E4M3}, {E4M3, E5M2}};
  static const tpla_dtype_t fp8_outs[] = {TPLA_BFLOAT16, TPLA_FLOAT16, TPLA_FLOAT32, E4M3,
                                          E5M2};
  static const float alphas[] = {1.0f, 1.0f, -1.0f, 0.5f, 0.0f};
  static const float betas[] = {0.0f, 0.0f, 1.0f, -0.5f};
  fz_rng_t r = {seed};
  memset(c, 0, sizeof *c);
  c->seed = seed;
  c->fp8 = fp8;
  c->m = pick_dim(&r, FZ_MAX_DIM_GEMM);
  c->n = pick_dim(&r, FZ_MAX_DIM_GEMM);
  c->k = pick_dim(&r, FZ_MAX_DIM_GEMM);
  c->op_a = fz_chance(&r, 0.5) ? TPLA_OP_T : TPLA_OP_N;
  c->op_b = fz_chance(&r, 0.5) ? TPLA_OP_T : TPLA_OP_N;
  c->alpha = fz_chance(&r, 0.7) ? FZ_PICK(&r, alphas) : (float)(1.5 * fz_sym(&r));
  c->beta = fz_chance(&r, 0.7) ? FZ_PICK(&r, betas) : (float)(1.5 * fz_sym(&r));
  if (!fp8) {
    c->ta = c->tb = FZ_PICK(&r, halves);
    c->td = fz_chance(&r, 0.5) ? c->ta : TPLA_FLOAT32;
    c->tf32 = c->ta == TPLA_FLOAT32 && fz_chance(&r, 0.3);
    c->range = fz_chance(&r, 0.5) ? 1.0 : 3.0;
  } else {
    int p = (int)fz_range(&r, 0, 2);
    c->ta = pairs[p][0];
    c->tb = pairs[p][1];
    c->td = FZ_PICK(&r, fp8_outs);
    if (is_fp8(c->td))
      c->beta = 0.0f; /* documented: an FP8 D needs beta = 0 */
    c->accum = fz_chance(&r, 0.5) ? TPLA_FP8_ACCUM_FAST : TPLA_FP8_ACCUM_SPLIT;
    static const double ranges[] = {1.0, 4.0, 8.0};
    c->range = FZ_PICK(&r, ranges);
    c->a_scale = fz_chance(&r, 0.4) ? 0.0f : (float)(0.25 + 1.75 * fz_unit(&r));
    c->b_scale = fz_chance(&r, 0.4) ? 0.0f : (float)(0.25 + 1.75 * fz_unit(&r));
    c->d_scale = is_fp8(c->td) && fz_chance(&r, 0.7);
    c->amax = fz_chance(&r, 0.6);
  }
  /* leading dimensions of the stored operands: A is m x k (op N) or k x m */
  int64_t quantum = fp8 ? 16 : 8; /* elements per 16 bytes (fp32: 4; 8 still aligns it) */
  int64_t ac = c->op_a == TPLA_OP_N ? c->k : c->m, bc = c->op_b == TPLA_OP_N ? c->n : c->k;
  c->lda = pick_ld(&r, ac, quantum);
  c->ldb = pick_ld(&r, bc, quantum);
  c->ldd = pick_ld(&r, c->n, quantum);
  static const size_t offs_half[] = {0, 0, 0, 0, 0, 0, 1, 2, 3, 4, 8};
  static const size_t offs_fp8[] = {0, 0, 0, 0, 0, 0, 1, 3, 8, 15, 16};
  if (fp8) {
    c->off_a = FZ_PICK(&r, offs_fp8);
    c->off_b = FZ_PICK(&r, offs_fp8);
  } else {
    c->off_a = FZ_PICK(&r, offs_half) * tpla_dtype_size(c->ta);
    c->off_b = FZ_PICK(&r, offs_half) * tpla_dtype_size(c->tb);
  }
  c->off_d = FZ_PICK(&r, offs_half) * tpla_dtype_size(c->td);
  if (!fz_chance(&r, 1.0 / 7.0))
    return;
  /* a rejected call: change the dtypes here, as the buffers are made from them */
  c->invalid = pick_invalid(&r, fp8);
  c->inv_arg = (int)fz_range(&r, 0, 5);
  switch (c->invalid) {
  case INV_D_DTYPE:
    c->td = c->ta == TPLA_BFLOAT16 ? TPLA_FLOAT16 : TPLA_BFLOAT16;
    break;
  case INV_AB_DTYPE:
    c->ta = TPLA_BFLOAT16;
    c->tb = TPLA_FLOAT16;
    c->tf32 = 0;
    break;
  case INV_F64: c->ta = c->tb = c->td = TPLA_FLOAT64, c->tf32 = 0; break;
  case INV_E5M2_PAIR: c->ta = c->tb = E5M2; break;
  case INV_FP8_MIX: c->tb = TPLA_BFLOAT16; break;
  case INV_FP8_D_BETA:
    c->td = c->inv_arg % 2 ? E5M2 : E4M3;
    c->beta = 0.5f;
    c->d_scale = 0;
    break;
  case INV_D_SCALE:
    if (is_fp8(c->td))
      c->td = TPLA_BFLOAT16;
    c->d_scale = 1;
    break;
  default: break;
  }
  /* an ld chosen for the old dtype is still >= cols; offsets stay element-aligned */
  c->off_b = c->off_b / tpla_dtype_size(c->tb) * tpla_dtype_size(c->tb);
  c->off_d = c->off_d / tpla_dtype_size(c->td) * tpla_dtype_size(c->td);
  c->off_a = c->off_a / tpla_dtype_size(c->ta) * tpla_dtype_size(c->ta);
}

/* ---- FP8 helpers ------------------------------------------------------------------ */

static double fp8_max(tpla_dtype_t t) { return t == E5M2 ? 57344.0 : 448.0; }

/* One unit in the last place of an FP8 format at magnitude x >= 0. */
static double fp8_ulp(double x, tpla_dtype_t t) {
  int mbits = t == E5M2 ? 2 : 3, bias = t == E5M2 ? 15 : 7, e;
  if (x < ldexp(1.0, 1 - bias))
    return ldexp(1.0, 1 - bias - mbits); /* subnormal spacing */
  frexp(x, &e);                           /* x in [2^(e-1), 2^e) */
  return ldexp(1.0, e - 1 - mbits);
}

/* Accumulation error per unit of sum |products| (fp8_cases.h). */
static double fp8_u_acc(const gemm_case_t *c) {
  double split = ldexp(1.0, -9), fast = ceil((double)c->k / 32.0) * ldexp(1.0, -12);
  double tc = c->accum == TPLA_FP8_ACCUM_FAST ? fmax(split, fast) : split;
  return tc + (double)(c->k + 4) * ldexp(1.0, -24);
}

/* ---- the float64 reference ----------------------------------------------------------- */

/* want = f op(A) op(B) + beta D0 and scale = |f| sum |products|, m x n dense;
 * op(A) and op(B)^T are packed first so that every dot product runs over
 * contiguous rows. Returns false when out of memory. */
static bool gemm_reference(const gemm_case_t *c, const fmat_t *a, const fmat_t *b,
                           const fmat_t *d, double f, double *want, double *scale) {
  int64_t m = c->m, n = c->n, k = c->k;
  double *pa = malloc(sizeof(double) * (size_t)(m * k + 1));
  double *pb = malloc(sizeof(double) * (size_t)(n * k + 1));
  if (pa == NULL || pb == NULL) {
    free(pa);
    free(pb);
    return false;
  }
  for (int64_t i = 0; i < m; i++)
    for (int64_t p = 0; p < k; p++)
      pa[i * k + p] = c->op_a == TPLA_OP_N ? a->vals[i * c->lda + p] : a->vals[p * c->lda + i];
  for (int64_t j = 0; j < n; j++)
    for (int64_t p = 0; p < k; p++)
      pb[j * k + p] = c->op_b == TPLA_OP_N ? b->vals[p * c->ldb + j] : b->vals[j * c->ldb + p];
  for (int64_t i = 0; i < m; i++)
    for (int64_t j = 0; j < n; j++) {
      const double *x = pa + i * k, *y = pb + j * k;
      double s = 0.0, sabs = 0.0;
      for (int64_t p = 0; p < k; p++) {
        double t = x[p] * y[p];
        s += t;
        sabs += fabs(t);
      }
      double d0 = c->beta != 0.0f ? d->vals[i * c->ldd + j] : 0.0;
      want[i * n + j] = f * s + (double)c->beta * d0;
      scale[i * n + j] = fabs(f) * sabs;
    }
  free(pa);
  free(pb);
  return true;
}

/* ---- one GEMM case ---------------------------------------------------------------- */

/* Device scalars, 16 bytes apart as cuBLASLt wants: a_scale [0], b_scale
 * [4], d_scale [8], d_amax [12] (sentinel -1: never written). */
#define SC_A 0
#define SC_B 4
#define SC_D 8
#define SC_AMAX 12

/* Bytes of `got` outside the view's elements equal `host`'s: the prefix,
 * each row's padding and the guard. Returns the number of differing spots
 * (messages for the first few). */
static int check_untouched_outside(const fmat_t *b, const unsigned char *got, const char *name,
                                   const char *what) {
  size_t es = tpla_dtype_size(b->view.dtype), row = (size_t)b->view.ld * es;
  size_t cols = (size_t)b->view.cols * es, end = b->off + (size_t)b->view.rows * row;
  int bad = 0;
  if (memcmp(got, b->host, b->off) != 0 || memcmp(got + end, b->host + end, b->bytes - end) != 0) {
    fprintf(stderr, "  %s: bytes before or after %s were written\n", what, name);
    bad++;
  }
  for (int64_t i = 0; i < b->view.rows; i++) {
    size_t at = b->off + (size_t)i * row + cols;
    if (memcmp(got + at, b->host + at, row - cols) != 0 && bad++ < 3)
      fprintf(stderr, "  %s: padding of %s row %" PRId64 " was written\n", what, name, i);
  }
  return bad;
}

/* What the element checks of D measured. */
typedef struct {
  double ratio;    /* worst error / tolerance */
  double rel;      /* max error / max |want| */
  double max_have; /* max |stored D| */
  double amax_ref; /* max |want| before d_scale and rounding */
  double acc_max;  /* the largest accumulation bound (fp8_cases.h's amax slack) */
} dcheck_t;

/* D's elements against the reference; returns the number of bad elements. */
static int check_d_values(const gemm_case_t *c, const fmat_t *d, const unsigned char *got,
                          const double *want, const double *scale, double ds, dcheck_t *r,
                          const char *what) {
  const unsigned char *gv = got + d->off;
  bool fp8_in = is_fp8(c->ta), fp8_out = is_fp8(c->td);
  double u_out = fp8_out ? 0.0 : unit_roundoff(c->td);
  double u_in = c->tf32 ? 1.0 / 512 : 0.0; /* TF32: 10 mantissa bits per input */
  /* cuBLASLt may round to D's type twice (alpha op(A)op(B), then + beta C or
   * alpha times a rounded product): measured up to 1.9x one rounding's bound
   * (bf16 D, small k, alpha != 1 or beta != 0), so two are allowed */
  double u_acc = fp8_in ? fp8_u_acc(c) + u_out : (double)c->k / 8388608.0 + 2 * u_out + u_in;
  double tiny = c->td == TPLA_FLOAT16 ? 1.0 / 16777216 : 1e-37; /* fp16 subnormals */
  double max_err = 0.0, max_want = 0.0;
  int bad = 0;
  memset(r, 0, sizeof *r);
  for (int64_t i = 0; i < c->m; i++)
    for (int64_t j = 0; j < c->n; j++) {
      size_t e = (size_t)(i * c->ldd + j);
      double w = want[i * c->n + j], sc = scale[i * c->n + j];
      double d0 = c->beta != 0.0f ? d->vals[e] : 0.0; /* beta = 0: D was NaN */
      double bd = fabs((double)c->beta * d0), have = tpla_load_elem(gv, c->td, e), tol;
      r->amax_ref = fmax(r->amax_ref, fabs(w));
      r->acc_max = fmax(r->acc_max, sc * u_acc + bd * 0x1p-23);
      if (fp8_out) { /* the decoded value against ds * want, saturated */
        double acc = ds * sc * u_acc, top = fp8_max(c->td);
        w = fmax(-top, fmin(top, ds * w));
        tol = acc + fp8_ulp(fmin(fabs(w) + acc, top), c->td);
      } else if (fp8_in) {
        tol = sc * u_acc + bd * 0x1p-23 + fabs(w) * u_out + tiny;
      } else { /* beta D may be the sum's start, rounded with each of the k products added
                * (the host executor's loop: CI replay 0xfaf36fe0f51eb8c4, 1.7 ulp at k = 6) */
        tol = sc * u_acc + bd * (u_out + (double)(c->k + 2) * 0x1p-24) + tiny;
      }
      double err = fabs(have - w);
      if (!(err <= tol) && bad++ < 3)
        fprintf(stderr, "  %s: D(%" PRId64 ",%" PRId64 ") = %.9g, want %.9g (err %.3g > %.3g)\n",
                what, i, j, have, w, err, tol);
      if (isnan(err))
        err = INFINITY;
      max_err = fmax(max_err, err);
      max_want = fmax(max_want, fabs(w));
      r->ratio = fmax(r->ratio, err / tol);
      r->max_have = fmax(r->max_have, fabs(have));
    }
  r->rel = max_err / (max_want > 0 ? max_want : 1.0);
  return bad;
}

/* The amax written against max |want| (before d_scale; fp8_cases.h's
 * tolerance) and, where the CUDA executor takes it over the stored D
 * (bf16/fp16/fp32 D, docs/API.md), exactly max |stored D|. */
static int check_amax(const gemm_case_t *c, float amax_got, const dcheck_t *r,
                      const char *what) {
  double u_out = is_fp8(c->td) ? 0.0 : unit_roundoff(c->td);
  double tol = fmax(1e-2 * r->amax_ref, r->acc_max + r->amax_ref * u_out);
  int bad = 0;
  if (!(fabs((double)amax_got - r->amax_ref) <= tol)) {
    fprintf(stderr, "  %s: d_amax %.9g, want %.9g (tol %.3g)%s\n", what, (double)amax_got,
            r->amax_ref, tol, amax_got == -1.0f ? ": never written" : "");
    bad++;
  }
  if (!g.host && !is_fp8(c->td) && amax_got != (float)r->max_have) {
    fprintf(stderr, "  %s: d_amax %.9g is not max |D| of the stored D, %.9g\n", what,
            (double)amax_got, r->max_have);
    bad++;
  }
  return bad;
}

/* Views and args of the call, with the case's rejection applied. */
static void gemm_call_args(const gemm_case_t *c, fmat_t *a, fmat_t *b, fmat_t *d, float *scal,
                           tpla_matrix_t v[3], tpla_op_t ops[2], tpla_gemm_args_t *args) {
  v[0] = d->view, v[1] = a->view, v[2] = b->view;
  ops[0] = c->op_a, ops[1] = c->op_b;
  *args = (tpla_gemm_args_t)TPLA_GEMM_ARGS_INIT;
  args->alpha = c->alpha;
  args->beta = c->beta;
  args->allow_tf32 = c->tf32;
  if (c->fp8) {
    args->fp8.accum = c->accum;
    args->fp8.a_scale = c->a_scale != 0.0f ? scal + SC_A : NULL;
    args->fp8.b_scale = c->b_scale != 0.0f ? scal + SC_B : NULL;
    args->fp8.d_scale = c->d_scale ? scal + SC_D : NULL;
    args->fp8.d_amax = c->amax ? scal + SC_AMAX : NULL;
  }
  tpla_matrix_t *hit = &v[c->inv_arg % 3];
  switch (c->invalid) {
  case INV_LD: hit->ld = hit->cols >= 2 ? hit->cols - 1 : 0; break;
  case INV_SHAPE:
    if (c->inv_arg % 2)
      v[0].rows -= 1;
    else
      v[0].cols -= 1;
    break;
  case INV_SCALAR:
    if (c->inv_arg % 2)
      args->alpha = NAN;
    else
      args->beta = INFINITY;
    break;
  case INV_OP: ops[c->inv_arg % 2] = (tpla_op_t)2; break;
  case INV_ARGS_SIZE: args->size = 3; break;
  case INV_FP8_ON_HALF: args->fp8.accum = TPLA_FP8_ACCUM_FAST; break;
  case INV_D_SCALE: args->fp8.d_scale = scal + SC_D; break;
  case INV_SCALE_ALIGN: {
    static const int slot[3] = {SC_A, SC_B, SC_AMAX};
    float *p = scal + slot[c->inv_arg % 3] + 1;
    if (c->inv_arg % 3 == 0)
      args->fp8.a_scale = p;
    else if (c->inv_arg % 3 == 1)
      args->fp8.b_scale = p;
    else
      args->fp8.d_amax = p;
    break;
  }
  case INV_MXFP8: args->fp8.scale_mode = TPLA_FP8_SCALE_MXFP8; break;
  case INV_ACCUM: args->fp8.accum = (tpla_fp8_accum_t)7; break;
  default: break;
  }
}

typedef struct {
  fmat_t a, b, d;
  float *scal;
  double *want, *scale;
  unsigned char *got;
} gemm_bufs_t;

static void gemm_bufs_free(rank_env_t *e, gemm_bufs_t *x) {
  fmat_free(e, &x->a);
  fmat_free(e, &x->b);
  fmat_free(e, &x->d);
  team_free(e, x->scal);
  free(x->want);
  free(x->scale);
  free(x->got);
}

/* Runs one GEMM case; returns its number of failures. */
static int gemm_run(rank_env_t *e, phase_t *ph, const gemm_case_t *c) {
  char what[512];
  gemm_describe(what, sizeof what, c);
  if (g.verbose || g.replay) {
    printf("# %s\n", what);
    fflush(stdout);
  }
  fz_rng_t r = {c->seed ^ 0xD1B54A32D192ED03ull}; /* the data, apart from the parameters */
  int64_t ar = c->op_a == TPLA_OP_N ? c->m : c->k, ac = c->op_a == TPLA_OP_N ? c->k : c->m;
  int64_t br = c->op_b == TPLA_OP_N ? c->k : c->n, bc = c->op_b == TPLA_OP_N ? c->n : c->k;
  gemm_bufs_t x;
  memset(&x, 0, sizeof x);
  bool valid = c->invalid == INV_NONE, poison = c->beta == 0.0f || is_fp8(c->td);
  bool failed = false;
  int failures = 0;
  failed |= fmat_make(e, &x.a, ar, ac, c->lda, c->off_a, c->ta, &r, c->range, false) != 0;
  failed |= fmat_make(e, &x.b, br, bc, c->ldb, c->off_b, c->tb, &r, c->range, false) != 0;
  failed |= fmat_make(e, &x.d, c->m, c->n, c->ldd, c->off_d, c->td, &r, 2.0, poison) != 0;
  size_t mn = (size_t)(c->m * c->n) + 1, sbytes = 16 * sizeof(float);
  x.scal = team_alloc(e, sbytes, &failed);
  x.want = malloc(mn * sizeof(double));
  x.scale = malloc(mn * sizeof(double));
  size_t most = x.a.bytes > x.b.bytes ? x.a.bytes : x.b.bytes;
  x.got = malloc((most > x.d.bytes ? most : x.d.bytes) + sbytes);
  failed |= x.want == NULL || x.scale == NULL || x.got == NULL;
  double sa = c->a_scale != 0.0f ? c->a_scale : 1.0, sb = c->b_scale != 0.0f ? c->b_scale : 1.0;
  double f = (double)c->alpha * sa * sb, ds = 1.0;
  if (!failed && valid) {
    failed |= !gemm_reference(c, &x.a, &x.b, &x.d, f, x.want, x.scale);
    double amax_ref = 0.0;
    for (size_t i = 0; i + 1 < mn && !failed; i++)
      amax_ref = fmax(amax_ref, fabs(x.want[i]));
    if (c->d_scale && amax_ref > 0)
      ds = ldexp(1.0, (int)floor(log2(fp8_max(c->td) / 4 / amax_ref)));
  }
  float hs[16] = {0};
  hs[SC_A] = (float)sa, hs[SC_B] = (float)sb, hs[SC_D] = (float)ds, hs[SC_AMAX] = -1.0f;
  if (!failed)
    failed |= team_copy(e, x.scal, hs, sbytes, cudaMemcpyHostToDevice) != 0;
  if (failed) {
    fprintf(stderr, "  %s: setup failed\n", what);
    gemm_bufs_free(e, &x);
    return 1;
  }
  tpla_matrix_t v[3];
  tpla_op_t ops[2];
  tpla_gemm_args_t args;
  gemm_call_args(c, &x.a, &x.b, &x.d, x.scal, v, ops, &args);
  /* E4M3 x E4M3 -> E5M2: no cuBLASLt kernel, refused on every executor */
  bool no_kernel = c->td == E5M2 && c->ta == E4M3 && c->tb == E4M3;
  tpla_status_t want_st = valid ? (no_kernel ? TPLA_ERROR_NOT_SUPPORTED : TPLA_SUCCESS)
                          : c->invalid == INV_MXFP8 ? TPLA_ERROR_NOT_SUPPORTED
                                                    : TPLA_ERROR_INVALID_ARGUMENT;
  tpla_status_t st = tpla_gemm(e->ctx, v[0], v[1], ops[0], v[2], ops[1], &args, e->stream);
  if (st != want_st) {
    fprintf(stderr, "  %s: tpla_gemm returned %s, expected %s: %s\n", what,
            tpla_status_string(st), tpla_status_string(want_st), tpla_last_error());
    failures++;
  }
  if (team_drain(e, "tpla_gemm")) {
    gemm_bufs_free(e, &x);
    return failures + 1;
  }
  /* the inputs, always unchanged */
  const fmat_t *ins[2] = {&x.a, &x.b};
  for (int i = 0; i < 2; i++) {
    if (fmat_read(e, ins[i], x.got) != 0 || memcmp(x.got, ins[i]->host, ins[i]->bytes) != 0) {
      fprintf(stderr, "  %s: input %c was modified\n", what, i ? 'B' : 'A');
      failures++;
    }
  }
  float sc_got[16];
  if (team_copy(e, sc_got, x.scal, sbytes, cudaMemcpyDeviceToHost) != 0 ||
      fmat_read(e, &x.d, x.got) != 0) {
    gemm_bufs_free(e, &x);
    return failures + 1;
  }
  bool wrote = st == TPLA_SUCCESS;
  /* the scales are read only; the amax slot changes only when asked for */
  bool scal_changed = false;
  for (int i = 0; i < 16; i++)
    scal_changed |= memcmp(&sc_got[i], &hs[i], sizeof(float)) != 0 &&
                    !(i == SC_AMAX && wrote && c->amax);
  if (scal_changed) {
    fprintf(stderr, "  %s: the scales or an amax not asked for were written\n", what);
    failures++;
  }
  if (!wrote) { /* rejected (or NOT_SUPPORTED): D entirely as it was */
    if (memcmp(x.got, x.d.host, x.d.bytes) != 0) {
      fprintf(stderr, "  %s: D was written by a call that returned %s\n", what,
              tpla_status_string(st));
      failures++;
    }
    if (valid)
      ph->not_supported++;
    else
      ph->rejected++;
    gemm_bufs_free(e, &x);
    return failures;
  }
  if (!valid) { /* accepted by mistake: already counted; nothing to compare */
    gemm_bufs_free(e, &x);
    return failures;
  }
  failures += check_untouched_outside(&x.d, x.got, "D", what) != 0;
  dcheck_t dc;
  int bad = check_d_values(c, &x.d, x.got, x.want, x.scale, ds, &dc, what);
  if (bad)
    fprintf(stderr, "  %s: %d bad elements (worst err/tol %.3g)\n", what, bad, dc.ratio);
  failures += bad != 0;
  if (c->amax)
    failures += check_amax(c, sc_got[SC_AMAX], &dc, what) != 0;
  char key[48];
  snprintf(key, sizeof key, "%s%s%s->%s%s", tpla_dtype_name(c->ta), c->fp8 ? "x" : "",
           c->fp8 ? tpla_dtype_name(c->tb) : "", tpla_dtype_name(c->td),
           c->tf32 ? " tf32" : c->fp8 ? (c->accum == TPLA_FP8_ACCUM_FAST ? " fast" : " split")
                                      : "");
  worst_note(&ph->worst, key, dc.ratio, dc.rel);
  gemm_bufs_free(e, &x);
  return failures;
}

#endif /* TPLA_FUZZ_GPU_GEMM_H */
