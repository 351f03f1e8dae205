/*
 * overlap_data.c - the data of `tpla ag-gemm|gemm-rs|gemm-ar` (mode_overlap.c):
 * inputs from a counter-based generator (any element from its indices, so a
 * rank rebuilds every other rank's inputs), this rank's buffers, and the
 * check of sampled outputs against a float64 reference over every rank's
 * inputs, within the rounding bound described at overlap_check.
 */
#include "overlap_tool.h"

#include "internal.h" /* tpla_load_elem / tpla_store_elem */

#include <math.h>
#include <stdlib.h>

/* ---- inputs: element (i, j) of matrix `which` of rank `rank`, from its indices ---- */

/* The element before rounding to the matrix dtype: uniform in [-1, 1). */
static double hraw(uint64_t seed, int which, int rank, int64_t i, int64_t j) {
  uint64_t z = seed ^ ((uint64_t)which << 58) ^ ((uint64_t)rank << 46) ^
               ((uint64_t)i * 0x9e3779b97f4a7c15ull) ^ ((uint64_t)j * 0xc2b2ae3d27d4eb4full);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  z ^= z >> 31;
  return (double)(z >> 11) * 0x1.0p-52 - 1.0;
}

/* The value the executor sees. */
static double hval(uint64_t seed, int which, int rank, int64_t i, int64_t j, tpla_dtype_t t) {
  uint32_t cell[2];
  tpla_store_elem(cell, t, 0, hraw(seed, which, rank, i, j));
  return tpla_load_elem(cell, t, 0);
}


/* FP8: rank r's per-tensor scales (A, B); exact in binary, different per rank. */
static float a_scale_of(int rank) { return 0.5f + 0.25f * (float)rank; }
static const float b_scale = 0.75f;

static tpla_matrix_t shape_of(int64_t rows, int64_t cols, tpla_dtype_t t) {
  tpla_matrix_t m = {NULL, rows, cols, cols > 0 ? cols : 1, t};
  return m;
}

static size_t bytes_of(tpla_matrix_t m) {
  return (size_t)(m.rows > 0 ? m.rows : 1) * (size_t)m.ld * tpla_dtype_size(m.dtype);
}

int overlap_fill(tool_rank_t *r, tpla_matrix_t *m, uint64_t seed, int which, int rank) {
  void *host = calloc(1, bytes_of(*m));
  if (host == NULL)
    return tool_rank_error(r, "out of host memory (%zu bytes)", bytes_of(*m));
  for (int64_t i = 0; which >= 0 && i < m->rows; i++)
    for (int64_t j = 0; j < m->cols; j++)
      tpla_store_elem(host, m->dtype, (size_t)(i * m->ld + j), hraw(seed, which, rank, i, j));
  int failed = tool_upload(r, m->data, host, bytes_of(*m));
  free(host);
  return failed;
}

/* Allocate m in executor memory and fill it. */
static int make(tool_rank_t *r, tpla_matrix_t *m, uint64_t seed, int which, int rank) {
  m->data = tool_alloc(r, bytes_of(*m));
  return m->data == NULL || overlap_fill(r, m, seed, which, rank);
}

void overlap_free_bufs(tool_rank_t *r, bufs_t *b) {
  for (int s = 0; s < TOOL_MAX_SETS; s++) {
    tool_free(r, b->a[s].data);
    tool_free(r, b->b[s].data);
  }
  tool_free(r, b->bt.data);
  tool_free(r, b->d.data);
  tool_free(r, b->full.data);
  tool_free(r, b->dloc.data);
  tool_free(r, b->scales);
}

int overlap_alloc_bufs(tool_rank_t *r, const job_t *job, const int64_t *mkn, bufs_t *b,
                       uint64_t seed) {
  const tool_opts_t *o = job->o;
  int P = r->nranks;
  int64_t M = mkn[0], K = mkn[1], N = mkn[2];
  tpla_dtype_t in = o->dtype, out = out_dtype(o), bt = b_dtype(o);
  b->rows = M / P + (r->rank < M % P);
  b->off = (M / P) * r->rank + (r->rank < M % P ? r->rank : M % P);
  tpla_matrix_t a = shape_of(job->kind == OP_AG ? b->rows : M, K, in);
  tpla_matrix_t bm = o->op_b == TPLA_OP_N ? shape_of(K, N, bt) : shape_of(N, K, bt);
  size_t set_bytes = bytes_of(a) + bytes_of(bm);
  b->sets = tool_rotation_sets(r, set_bytes, set_bytes, 1, &b->warm);
  int failed = 0;
  for (int s = 0; s < b->sets && !failed; s++) {
    b->a[s] = a;
    b->b[s] = bm;
    /* every set holds the same values: the check reads set 0, timing rotates */
    failed = make(r, &b->a[s], seed, M_A, r->rank) || make(r, &b->b[s], seed, M_B, r->rank);
  }
  b->d = shape_of(job->kind == OP_RS ? b->rows : M, N, out);
  b->full = job->kind == OP_AG ? shape_of(M, K, in) : shape_of(M, N, out);
  b->dloc = shape_of(b->rows, N, out);
  if (!failed)
    failed = make(r, &b->d, seed, M_D, r->rank) || make(r, &b->full, seed, -1, 0) ||
             make(r, &b->dloc, seed, -1, 0);
  if (!failed && job->cache_b) { /* timed only: any values of B's size */
    b->bt = shape_of(N, K, bt);
    failed = make(r, &b->bt, seed, M_B, r->rank);
  }
  if (!failed && is_fp8(in)) { /* the scales, in executor memory */
    float host[2 * TPLA_FP8_SCALE_STRIDE] = {a_scale_of(r->rank)}; /* 16 bytes apart */
    host[TPLA_FP8_SCALE_STRIDE] = b_scale;
    b->scales = tool_alloc(r, sizeof host);
    failed = b->scales == NULL || tool_upload(r, b->scales, host, sizeof host);
  }
  return failed;
}

/* ---- the check ------------------------------------------------------------------------ */

int overlap_check(tool_rank_t *r, bench_t *x, int64_t *checked, int64_t *wrong) {
  const job_t *job = x->job;
  const tool_opts_t *o = job->o;
  bufs_t *b = x->b;
  const int P = r->nranks;
  const int64_t M = x->M, K = x->K, N = x->N, drows = b->d.rows;
  tpla_dtype_t in = o->dtype, out = b->d.dtype, bt = b_dtype(o);
  bool fp8 = is_fp8(in);
  int64_t rows[SAMPLE], cols[SAMPLE], nr = drows < SAMPLE ? drows : SAMPLE;
  int64_t nc = N < SAMPLE ? N : SAMPLE;
  for (int64_t i = 0; i < nr; i++)
    rows[i] = nr > 1 ? i * (drows - 1) / (nr - 1) : 0;
  for (int64_t j = 0; j < nc; j++)
    cols[j] = nc > 1 ? j * (N - 1) / (nc - 1) : 0;
  int nq = job->kind == OP_AG ? 1 : P; /* ranks whose products add up */
  double *arow = malloc(sizeof(double) * (size_t)(nq * nr * K + 1));
  double *bcol = malloc(sizeof(double) * (size_t)(nq * nc * K + 1));
  void *host = malloc(bytes_of(b->d));
  if (!arow || !bcol || !host || tool_download(r, host, b->d.data, bytes_of(b->d))) {
    free(arow), free(bcol), free(host);
    return tool_rank_error(r, "check: out of host memory or download failed");
  }
  for (int q = 0; q < nq; q++)
    for (int64_t i = 0; i < nr; i++) {
      int64_t gi = rows[i] + (job->kind == OP_RS ? b->off : 0), owner = q, li = gi;
      if (job->kind == OP_AG) { /* the gathered row gi is row li of rank owner */
        int64_t base = M / P, extra = M % P;
        int64_t split = extra * (base + 1); /* the first `extra` ranks hold base + 1 rows */
        owner = gi < split ? gi / (base + 1) : extra + (gi - split) / base;
        li = gi - (base * owner + (owner < extra ? owner : extra));
      }
      double sa = fp8 ? (double)a_scale_of((int)owner) : 1.0;
      for (int64_t p = 0; p < K; p++)
        arow[(q * nr + i) * K + p] = sa * hval(job->seed, M_A, (int)owner, li, p, in);
    }
  for (int q = 0; q < nq; q++) {
    int brank = job->kind == OP_AG ? r->rank : q;
    for (int64_t j = 0; j < nc; j++)
      for (int64_t p = 0; p < K; p++)
        bcol[(q * nc + j) * K + p] = (fp8 ? (double)b_scale : 1.0) *
                                     (o->op_b == TPLA_OP_N
                                          ? hval(job->seed, M_B, brank, p, cols[j], bt)
                                          : hval(job->seed, M_B, brank, cols[j], p, bt));
  }
  /* The bound, as tool_check_gemm's (data.c): D's roundings, each of a rank's partial (RS and
   * AR reduce rounded partials) and of the result, so (P + 4) u_d (|ref| + sum_q |partial_q|);
   * the accumulation's, random in sign, 8 u_acc sqrt(terms) ||ab||_2. A bound over sum |ab|
   * instead (until session 32) let through results 25-50% off at K = 8192 in bf16. */
  double u_d = out == TPLA_FLOAT32 ? 0x1.0p-24 : out == TPLA_FLOAT16 ? 0x1.0p-11 : 0x1.0p-8;
  /* FP8 tensor cores add with about 14 bits kept, between promotions to fp32 (split) or
   * all along (fast; undocumented width): 13 fraction bits for both; TF32 rounds inputs */
  double u_acc = o->allow_tf32 && in == TPLA_FLOAT32 ? 0x1.0p-11 : fp8 ? 0x1.0p-13 : 0x1.0p-24;
  double alpha = fabs((double)x->args.alpha);
  for (int64_t i = 0; i < nr; i++)
    for (int64_t j = 0; j < nc; j++) {
      double s = 0, parts = 0, s2 = 0;
      for (int q = 0; q < nq; q++) {
        const double *av = arow + (q * nr + i) * K, *bv = bcol + (q * nc + j) * K;
        double sq = 0;
        for (int64_t p = 0; p < K; p++) {
          sq += av[p] * bv[p];
          s2 += av[p] * bv[p] * av[p] * bv[p];
        }
        s += sq;
        parts += fabs(sq);
      }
      double d0 = hval(job->seed, M_D, r->rank, rows[i], cols[j], out);
      double ref = (double)x->args.alpha * s + (double)x->args.beta * d0;
      double bound = (P + 4) * u_d * (fabs(ref) + alpha * parts + fabs((double)x->args.beta * d0)) +
                     8.0 * u_acc * alpha * sqrt((double)(nq * K + 4) * s2);
      double got = tpla_load_elem(host, out, (size_t)(rows[i] * b->d.ld + cols[j]));
      (*checked)++;
      if (!(fabs(got - ref) <= bound))
        (*wrong)++;
    }
  free(arow), free(bcol), free(host);
  return 0;
}
