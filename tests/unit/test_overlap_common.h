/*
 * test_overlap_common.h - helpers of the overlap tests (test_overlap_*.c):
 * a case description for AllGather+GEMM, GEMM+ReduceScatter and
 * GEMM+AllReduce, a runner that executes a case on N host ranks through
 * the public API (random inputs, optional ld padding, several calls with
 * the inputs negated in between so stale chunks of an earlier call would
 * show), and a float64 reference with a rounding-error bound per element.
 */
#ifndef TEST_OVERLAP_COMMON_H
#define TEST_OVERLAP_COMMON_H

#include "ranks.h"
#include "test.h"

#include "internal.h" /* tpla_load_elem / tpla_store_elem */
#include "overlap.h"  /* the plans' structs: the direct-partials check */

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define OC_MAX_RANKS 8

typedef enum { OC_AG = 0, OC_RS = 1, OC_AR = 2 } oc_kind_t;

typedef struct {
  oc_kind_t kind;
  int P;
  int64_t m;                  /* RS/AR: global rows (AG: derived) */
  int64_t rows[OC_MAX_RANKS]; /* AG: local rows; RS: slice rows (all -1: even) */
  int64_t k[OC_MAX_RANKS];    /* AG: k[0] for every rank; RS/AR: local k */
  int64_t n[OC_MAX_RANKS];    /* AG: per-rank n; RS/AR: n[0] */
  tpla_op_t op_b;
  tpla_dtype_t dtype, d_dtype;
  int bias;
  float alpha, beta;
  int beta_per_rank; /* even ranks pass beta 0, odd ones `beta` (each rank's own D) */
  tpla_overlap_mode_t mode;
  tpla_transport_t transport;
  int chunks;
  int pad;   /* extra elements per row of every caller view */
  int calls; /* consecutive calls; A is negated before each one after the first */
  int window_group; /* tpla_*_desc_t.window_group */
  uint64_t seed;
} ocase_t;

/* One rank's buffers (host memory: the host executor's). */
typedef struct {
  tpla_matrix_t a, b, d, d0, bias;
  float a_scale, b_scale, amax; /* FP8 cases: this rank's scales (different per rank), d_amax */
  tpla_matrix_t gathered; /* AG: copy of the plan's gathered view after the last call */
  tpla_overlap_info_t info;
  size_t ws;
  tpla_status_t status;
  char error[512];
  int has_gathered;
  int direct; /* RS/AR: the plan's partials were written by its GEMMs (TPLA_OVERLAP_DIRECT) */
  int rank;
} orank_t;

/* The beta rank r passes. */
static inline float oc_beta(const ocase_t *c, int rank) {
  return c->beta_per_rank && rank % 2 == 0 ? 0.0f : c->beta;
}

typedef struct {
  const ocase_t *c;
  orank_t r[OC_MAX_RANKS];
  int64_t m; /* global rows */
} orun_t;

static inline tpla_matrix_t oc_alloc(int64_t rows, int64_t cols, int pad, tpla_dtype_t t) {
  tpla_matrix_t v = {NULL, rows, cols, cols + pad > 0 ? cols + pad : 1, t};
  v.data = calloc((size_t)(rows > 0 ? rows : 1) * (size_t)v.ld + 1, tpla_dtype_size(t));
  return v;
}

static inline bool oc_fp8(tpla_dtype_t t) {
  return t == TPLA_FLOAT8_E4M3 || t == TPLA_FLOAT8_E5M2;
}

/* Rank r's rows of the even split of m: FP8 deals 16-row blocks when m is a multiple of 16. */
static inline int64_t oc_even(int64_t m, int P, int r, tpla_dtype_t t) {
  if (oc_fp8(t) && m % 16 == 0)
    return 16 * oc_even(m / 16, P, r, TPLA_FLOAT32);
  return m / P + (r < m % P);
}
/* B's dtype: the plan's, except E4M3 with an E5M2 A (E5M2 x E5M2 is no product) */
static inline tpla_dtype_t oc_b_dtype(const ocase_t *c) {
  return c->dtype == TPLA_FLOAT8_E5M2 ? TPLA_FLOAT8_E4M3 : c->dtype;
}

static inline int64_t oc_slice_rows(const orun_t *run, int r) {
  const ocase_t *c = run->c;
  if (c->kind == OC_AG)
    return c->rows[r];
  if (c->kind == OC_RS && c->rows[0] >= 0)
    return c->rows[r];
  return oc_even(c->m, c->P, r, c->dtype);
}

static inline int64_t oc_slice_offset(const orun_t *run, int r) {
  int64_t o = 0;
  for (int q = 0; q < r; q++)
    o += oc_slice_rows(run, q);
  return o;
}

static inline void oc_negate(tpla_matrix_t v) {
  for (int64_t i = 0; i < v.rows; i++)
    for (int64_t j = 0; j < v.cols; j++) {
      size_t at = (size_t)(i * v.ld + j);
      tpla_store_elem(v.data, v.dtype, at, -tpla_load_elem(v.data, v.dtype, at));
    }
}

static inline void oc_copy(tpla_matrix_t dst, tpla_matrix_t src) {
  for (int64_t i = 0; i < src.rows; i++)
    memcpy((char *)dst.data + (size_t)(i * dst.ld) * tpla_dtype_size(dst.dtype),
           (const char *)src.data + (size_t)(i * src.ld) * tpla_dtype_size(src.dtype),
           (size_t)src.cols * tpla_dtype_size(src.dtype));
}

/* Allocate and fill every rank's inputs. */
static inline void oc_setup(orun_t *run, const ocase_t *c) {
  memset(run, 0, sizeof *run);
  run->c = c;
  rng_t rng;
  rng_seed(&rng, c->seed);
  run->m = 0;
  for (int r = 0; r < c->P; r++)
    run->m += c->kind == OC_AG ? c->rows[r] : 0;
  if (c->kind != OC_AG)
    run->m = c->m;
  for (int r = 0; r < c->P; r++) {
    orank_t *o = &run->r[r];
    int64_t k = c->kind == OC_AG ? c->k[0] : c->k[r];
    int64_t n = c->kind == OC_AG ? c->n[r] : c->n[0];
    int64_t arows = c->kind == OC_AG ? c->rows[r] : run->m;
    int64_t drows = c->kind == OC_RS ? oc_slice_rows(run, r) : run->m;
    o->a = oc_alloc(arows, k, c->pad, c->dtype);
    o->b = c->op_b == TPLA_OP_N ? oc_alloc(k, n, c->pad, oc_b_dtype(c))
                                : oc_alloc(n, k, c->pad, oc_b_dtype(c));
    o->a_scale = oc_fp8(c->dtype) ? 0.25f * (float)(r + 1) : 1.0f; /* exact, rank-dependent */
    o->b_scale = oc_fp8(c->dtype) ? 0.5f + 0.125f * (float)r : 1.0f;
    o->amax = -1.0f;
    o->d = oc_alloc(drows, n, c->pad, c->d_dtype);
    o->d0 = oc_alloc(drows, n, c->pad, c->d_dtype);
    o->bias = oc_alloc(1, n, 0, c->d_dtype);
    fill_random(o->a, &rng);
    fill_random(o->b, &rng);
    fill_random(o->d0, &rng);
    fill_random(o->bias, &rng);
    if (c->kind == OC_AG)
      o->gathered = oc_alloc(run->m, k, 0, c->dtype);
  }
}

static inline void oc_free(orun_t *run) {
  for (int r = 0; r < run->c->P; r++) {
    orank_t *o = &run->r[r];
    free(o->a.data);
    free(o->b.data);
    free(o->d.data);
    free(o->d0.data);
    free(o->bias.data);
    free(o->gathered.data);
  }
}

/* ---- the rank body ------------------------------------------------------------ */

static inline tpla_status_t oc_note(orank_t *o, tpla_status_t s) {
  if (s != TPLA_SUCCESS && o->status == TPLA_SUCCESS) {
    o->status = s;
    snprintf(o->error, sizeof o->error, "%s", tpla_last_error());
  }
  return s;
}

/* Create the plan of the case on this rank; one of the three outputs is set. */
static inline tpla_status_t oc_create(const ocase_t *c, tpla_ctx_t ctx, int rank,
                                      tpla_ag_gemm_plan_t *ag, tpla_gemm_rs_plan_t *rs,
                                      tpla_gemm_ar_plan_t *ar) {
  if (c->kind == OC_AG) {
    tpla_ag_gemm_desc_t d = TPLA_AG_GEMM_DESC_INIT;
    d.local_rows = c->rows[rank];
    d.k = c->k[0];
    d.n = c->n[rank];
    d.op_b = c->op_b, d.dtype = c->dtype, d.d_dtype = c->d_dtype, d.bias = c->bias;
    d.mode = c->mode, d.transport = c->transport, d.chunks = c->chunks;
    d.window_group = c->window_group;
    return tpla_ag_gemm_plan_create(ag, ctx, &d);
  }
  if (c->kind == OC_RS) {
    tpla_gemm_rs_desc_t d = TPLA_GEMM_RS_DESC_INIT;
    d.m = c->m;
    d.local_rows = c->rows[0] >= 0 ? c->rows[rank] : -1;
    d.k = c->k[rank];
    d.n = c->n[0];
    d.op_b = c->op_b, d.dtype = c->dtype, d.d_dtype = c->d_dtype, d.bias = c->bias;
    d.mode = c->mode, d.transport = c->transport, d.chunks = c->chunks;
    d.window_group = c->window_group;
    return tpla_gemm_rs_plan_create(rs, ctx, &d);
  }
  tpla_gemm_ar_desc_t d = TPLA_GEMM_AR_DESC_INIT;
  d.m = c->m;
  d.k = c->k[rank];
  d.n = c->n[0];
  d.op_b = c->op_b, d.dtype = c->dtype, d.d_dtype = c->d_dtype, d.bias = c->bias;
  d.mode = c->mode, d.transport = c->transport, d.chunks = c->chunks;
  d.window_group = c->window_group;
  return tpla_gemm_ar_plan_create(ar, ctx, &d);
}

/* One call of the case's plan (the one of the three that is set) on this rank's buffers. */
static inline tpla_status_t oc_call(const ocase_t *c, tpla_ag_gemm_plan_t ag,
                                    tpla_gemm_rs_plan_t rs, tpla_gemm_ar_plan_t ar, orank_t *o) {
  tpla_overlap_args_t args = TPLA_OVERLAP_ARGS_INIT;
  args.alpha = c->alpha;
  args.beta = oc_beta(c, o->rank);
  args.bias = c->bias ? o->bias.data : NULL;
  if (oc_fp8(c->dtype)) {
    args.fp8.a_scale = &o->a_scale;
    args.fp8.b_scale = &o->b_scale;
    args.fp8.d_amax = &o->amax;
  }
  if (c->kind == OC_AG)
    return tpla_ag_gemm(ag, o->d, o->a, o->b, &args, NULL);
  if (c->kind == OC_RS)
    return tpla_gemm_rs(rs, o->d, o->a, o->b, &args, NULL);
  return tpla_gemm_ar(ar, o->d, o->a, o->b, &args, NULL);
}

static inline int oc_body(tpla_ctx_t ctx, int rank, int nranks, void *arg) {
  orun_t *run = arg;
  const ocase_t *c = run->c;
  orank_t *o = &run->r[rank];
  o->rank = rank;
  tpla_ag_gemm_plan_t ag = NULL;
  tpla_gemm_rs_plan_t rs = NULL;
  tpla_gemm_ar_plan_t ar = NULL;
  if (oc_note(o, oc_create(c, ctx, rank, &ag, &rs, &ar)) != TPLA_SUCCESS)
    return 0; /* the test inspects o->status */
  o->info = (tpla_overlap_info_t)TPLA_OVERLAP_INFO_INIT;
  for (int call = 0; call < c->calls && o->status == TPLA_SUCCESS; call++) {
    if (call > 0)
      oc_negate(o->a);
    oc_copy(o->d, o->d0);
    oc_note(o, oc_call(c, ag, rs, ar, o));
  }
  if (c->kind == OC_AG) {
    tpla_matrix_t view;
    oc_note(o, tpla_ag_gemm_plan_has_gathered(ag, &o->has_gathered));
    if (o->status == TPLA_SUCCESS && oc_note(o, tpla_ag_gemm_gathered(ag, &view)) == 0)
      oc_copy(o->gathered, view);
    const float *scales = NULL;
    if (oc_fp8(c->dtype) && o->status == TPLA_SUCCESS &&
        oc_note(o, tpla_ag_gemm_gathered_scales(ag, &scales)) == 0)
      for (int q = 0; q < nranks; q++)
        if (c->rows[q] > 0 && scales[q * TPLA_FP8_SCALE_STRIDE] != 0.25f * (float)(q + 1))
          oc_note(o, tpla_fail(TPLA_ERROR_INTERNAL, "test", "gathered scale %d is %g", q,
                               (double)scales[q * TPLA_FP8_SCALE_STRIDE]));
    oc_note(o, tpla_ag_gemm_plan_get_info(ag, &o->info));
    oc_note(o, tpla_ag_gemm_plan_workspace_bytes(ag, &o->ws));
  } else if (c->kind == OC_RS) {
    o->direct = rs->p.direct;
    oc_note(o, tpla_gemm_rs_plan_get_info(rs, &o->info));
    oc_note(o, tpla_gemm_rs_plan_workspace_bytes(rs, &o->ws));
  } else {
    o->direct = ar->p.direct;
    oc_note(o, tpla_gemm_ar_plan_get_info(ar, &o->info));
    oc_note(o, tpla_gemm_ar_plan_workspace_bytes(ar, &o->ws));
  }
  /* every rank's calls are complete (host calls finish before returning),
   * but a peer may still be inside its last call reading our window */
  tpla_barrier(ctx, NULL);
  tpla_ag_gemm_plan_destroy(ag);
  tpla_gemm_rs_plan_destroy(rs);
  tpla_gemm_ar_plan_destroy(ar);
  return 0;
}

/* ---- the float64 reference ------------------------------------------------------- */

static inline double oc_at(tpla_matrix_t v, int64_t i, int64_t j) {
  return tpla_load_elem(v.data, v.dtype, (size_t)(i * v.ld + j));
}
static inline double oc_opb(tpla_matrix_t b, tpla_op_t op, int64_t p, int64_t j) {
  return op == TPLA_OP_N ? oc_at(b, p, j) : oc_at(b, j, p);
}

static inline double oc_unit(tpla_dtype_t t) {
  return t == TPLA_FLOAT16 ? 0x1p-11 : t == TPLA_BFLOAT16 ? 0x1p-8 : 0x1p-24;
}

/* Max over every rank's output of |d - ref| / bound, where bound is the
 * rounding-error bound of the element; > 1 means wrong. The inputs are the
 * ones after the last call (A already negated as many times as it was). */
static inline double oc_check(const orun_t *run, double *max_rel) {
  const ocase_t *c = run->c;
  double worst = 0.0, rel = 0.0;
  int64_t ktot = 0;
  for (int q = 0; q < c->P; q++)
    ktot += c->kind == OC_AG ? 0 : c->k[q];
  if (c->kind == OC_AG)
    ktot = c->k[0];
  double u = oc_unit(c->d_dtype), ua = 0x1p-24;
  double factor = (c->P + 4) * u + (ktot + 4) * ua;
  for (int r = 0; r < c->P; r++) {
    const orank_t *o = &run->r[r];
    int64_t r0 = c->kind == OC_RS ? oc_slice_offset(run, r) : 0;
    for (int64_t i = 0; i < o->d.rows; i++)
      for (int64_t j = 0; j < o->d.cols; j++) {
        double s = 0.0, sa = 0.0, gi = (double)(r0 + i);
        if (c->kind == OC_AG) { /* row gi of the gathered A lives on some rank */
          int q = 0;
          int64_t base = 0;
          while (gi >= (double)(base + c->rows[q]))
            base += c->rows[q++];
          double sc = (double)run->r[q].a_scale * (double)o->b_scale;
          for (int64_t p = 0; p < c->k[0]; p++) {
            double x = sc * oc_at(run->r[q].a, (int64_t)gi - base, p) *
                       oc_opb(o->b, c->op_b, p, j);
            s += x;
            sa += fabs(x);
          }
        } else {
          for (int q = 0; q < c->P; q++)
            for (int64_t p = 0; p < c->k[q]; p++) {
              double x = (double)run->r[q].a_scale * (double)run->r[q].b_scale *
                         oc_at(run->r[q].a, (int64_t)gi, p) * oc_opb(run->r[q].b, c->op_b, p, j);
              s += x;
              sa += fabs(x);
            }
        }
        double d0 = oc_at(o->d0, i, j), bias = c->bias ? oc_at(o->bias, 0, j) : 0.0;
        double beta = oc_beta(c, r);
        double ref = c->alpha * s + beta * d0 + bias;
        double scale = fabs(c->alpha) * sa + fabs(beta * d0) + fabs(bias) + 1e-30;
        double err = fabs(oc_at(o->d, i, j) - ref);
        double ratio = isnan(err) ? INFINITY : err / (factor * scale); /* NaN is wrong */
        worst = ratio > worst ? ratio : worst;
        rel = err / scale > rel ? err / scale : rel;
      }
  }
  if (max_rel)
    *max_rel = rel;
  return worst;
}

/* The gathered views equal the stacked A_local bit for bit. */
static inline int oc_gathered_ok(const orun_t *run) {
  const ocase_t *c = run->c;
  size_t es = tpla_dtype_size(c->dtype);
  for (int r = 0; r < c->P; r++) {
    int64_t base = 0;
    for (int q = 0; q < c->P; q++) {
      tpla_matrix_t a = run->r[q].a, g = run->r[r].gathered;
      for (int64_t i = 0; i < a.rows; i++)
        if (memcmp((char *)g.data + (size_t)((base + i) * g.ld) * es,
                   (char *)a.data + (size_t)(i * a.ld) * es, (size_t)a.cols * es) != 0) {
          fprintf(stderr, "  rank %d: gathered row %lld (rank %d's row %lld) differs\n", r,
                  (long long)(base + i), q, (long long)i);
          return 0;
        }
      base += run->r[q].a.rows;
    }
  }
  return 1;
}

static inline const char *oc_kind_name(oc_kind_t k) {
  return k == OC_AG ? "AG+GEMM" : k == OC_RS ? "GEMM+RS" : "GEMM+AR";
}

static inline void oc_describe(const ocase_t *c) {
  fprintf(stderr, "  case %s P=%d m=%lld rows0=%lld k0=%lld n0=%lld op_b=%c %s->%s bias=%d "
          "alpha=%g beta=%g%s mode=%d transport=%d chunks=%d pad=%d calls=%d seed=%llu\n",
          oc_kind_name(c->kind), c->P, (long long)c->m, (long long)c->rows[0],
          (long long)c->k[0], (long long)c->n[0], c->op_b == TPLA_OP_N ? 'N' : 'T',
          tpla_dtype_name(c->dtype), tpla_dtype_name(c->d_dtype), c->bias, (double)c->alpha,
          (double)c->beta, c->beta_per_rank ? " (odd ranks; even ranks 0)" : "", (int)c->mode, (int)c->transport, c->chunks, c->pad, c->calls,
          (unsigned long long)c->seed);
}

/* Run a case end to end: 0 when every rank succeeded and every output is
 * within its bound (and, for AG, the gathered views are exact). */
static inline int oc_run_case(const ocase_t *c, orun_t *keep) {
  orun_t run;
  oc_setup(&run, c);
  int bad = run_host_ranks(c->P, oc_body, &run) != 0;
  for (int r = 0; r < c->P && !bad; r++)
    if (run.r[r].status != TPLA_SUCCESS) {
      fprintf(stderr, "  rank %d: %s: %s\n", r, tpla_status_string(run.r[r].status),
              run.r[r].error);
      bad = 1;
    }
  double rel = 0;
  double worst = bad ? 0 : oc_check(&run, &rel);
  if (!bad && worst > 1.0) {
    fprintf(stderr, "  error %.3g x the rounding bound (max rel %.3g)\n", worst, rel);
    bad = 1;
  }
  for (int r = 0; r < c->P && !bad && oc_fp8(c->dtype); r++) { /* d_amax = max |D| exactly */
    double a = 0;
    tpla_matrix_t d = run.r[r].d;
    for (int64_t i = 0; i < d.rows; i++)
      for (int64_t j = 0; j < d.cols; j++)
        a = fmax(a, fabs(oc_at(d, i, j)));
    if ((double)run.r[r].amax != a) {
      fprintf(stderr, "  rank %d: d_amax %g, max |D| %g\n", r, (double)run.r[r].amax, a);
      bad = 1;
    }
  }
  if (!bad && c->kind == OC_AG) {
    for (int r = 0; r < c->P; r++)
      if (!run.r[r].has_gathered) {
        fprintf(stderr, "  rank %d: has_gathered is 0 after a successful call\n", r);
        bad = 1;
      }
    bad = bad || !oc_gathered_ok(&run);
  }
  /* with TPLA_OVERLAP_DIRECT=1 every overlapped RS/AR over PEER writes its partials directly */
  const char *direct = getenv("TPLA_OVERLAP_DIRECT");
  for (int r = 0; r < c->P && !bad && c->kind != OC_AG; r++) {
    const tpla_overlap_info_t *info = &run.r[r].info;
    int want = direct != NULL && strcmp(direct, "1") == 0 && c->P > 1 &&
               info->mode == TPLA_OVERLAP_OVERLAP && info->transport == TPLA_TRANSPORT_PEER;
    if (run.r[r].direct != want) {
      fprintf(stderr, "  rank %d: direct partials %d, expected %d\n", r, run.r[r].direct, want);
      bad = 1;
    }
  }
  if (bad)
    oc_describe(c);
  if (keep)
    *keep = run;
  else
    oc_free(&run);
  return bad;
}

#endif /* TEST_OVERLAP_COMMON_H */
