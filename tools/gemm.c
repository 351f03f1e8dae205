/*
 * gemm.c - `tpla gemm`: the local GEMM D = alpha op(A) op(B) + beta D on
 * every rank at once (no communication), checked against a float64 host
 * reference and timed.
 *
 *   tpla gemm -d bf16 -t NT 8192 8192 8192      one shape on every GPU
 *   tpla gemm -x host -g 2 -b 64 -e 512 -f 2    a square sweep on 2 host ranks
 *   tpla gemm -d e4m3 -t NT --accum=fast 8192 8192 8192
 *                                               FP8 (bf16 out), fast accumulation
 *
 * FP8 (-d e4m3: E4M3 x E4M3; -d e5m2: E5M2 A x E4M3 B, the gradient x
 * weight pair, since E5M2 x E5M2 has no FP8 GEMM): D is bf16 unless
 * --out=fp16|fp32|e4m3|e5m2 (or -o fp32) says otherwise; --accum=split
 * (default) or fast picks the accumulation mode. -t NT (A m x k, B n x k) is
 * the layout cuBLASLt's FP8 kernels read directly; other layouts are
 * transposed by tpla first. The check allows FP8's accumulation error (see
 * check_fp8) instead of fp32's.
 *
 * Each call is timed alone (CUDA events on the GPU, the wall clock on the
 * host); the table shows the median over -n calls after -w warm-up calls,
 * the slowest rank's (time) and the fastest rank's (tmin). The inputs rotate
 * over enough buffer sets to exceed twice the last-level cache (at most 256
 * sets and 8 GiB; a row still under it gets a # NOTE), so the timed GEMMs
 * read their operands from memory, not from L2.
 */
#include "tool.h"

#include "internal.h" /* tpla_load_elem (linked statically) */

#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#define MAX_SWEEP 64 /* sizes of a -b/-e/-f sweep */

typedef struct {
  double time_us;
  size_t workspace;
  int sets;
  bool warm;
  tool_check_t check;
} gemm_result_t;

typedef struct {
  const tool_opts_t *opts;
  int64_t (*shapes)[3]; /* M N K */
  int nshapes;
  gemm_result_t *results; /* [shape][rank] */
  uint64_t seed;
  tpla_dtype_t a_dtype, b_dtype, d_dtype;
  tpla_fp8_accum_t accum; /* FP8 inputs */
} gemm_job_t;

static bool is_fp8(tpla_dtype_t t) { return t == TPLA_FLOAT8_E4M3 || t == TPLA_FLOAT8_E5M2; }

/* The matrices of one rank and shape: host copies plus `sets` executor sets. */
typedef struct {
  tpla_matrix_t a, b, d;         /* shapes and dtypes; data unused */
  tpla_matrix_t host_a, host_b, host_d_in, host_d_out;
  void *dev_a[TOOL_MAX_SETS], *dev_b[TOOL_MAX_SETS], *dev_d[TOOL_MAX_SETS];
  int sets;
  bool warm; /* the sets' A and B stay under twice the cache */
  tpla_gemm_args_t args;
  tpla_op_t op_a, op_b;
} gemm_bufs_t;

static tpla_matrix_t view(int64_t rows, int64_t cols, tpla_dtype_t dtype, void *data) {
  tpla_matrix_t m = {data, rows, cols, cols > 0 ? cols : 1, dtype};
  return m;
}

static size_t view_bytes(tpla_matrix_t m) {
  return (size_t)m.rows * (size_t)m.ld * tpla_dtype_size(m.dtype);
}

static tpla_matrix_t with_data(tpla_matrix_t m, void *data) {
  m.data = data;
  return m;
}

static tpla_status_t gemm_body(tool_rank_t *r, int iter, void *arg) {
  gemm_bufs_t *g = arg;
  int set = iter % g->sets;
  return tpla_gemm(r->ctx, with_data(g->d, g->dev_d[set]), with_data(g->a, g->dev_a[set]),
                   g->op_a, with_data(g->b, g->dev_b[set]), g->op_b, &g->args, r->stream);
}

static void free_bufs(tool_rank_t *r, gemm_bufs_t *g) {
  for (int s = 0; s < TOOL_MAX_SETS; s++) {
    tool_free(r, g->dev_a[s]);
    tool_free(r, g->dev_b[s]);
    tool_free(r, g->dev_d[s]);
  }
  free(g->host_a.data);
  free(g->host_b.data);
  free(g->host_d_in.data);
  free(g->host_d_out.data);
}

static int alloc_bufs(tool_rank_t *r, gemm_bufs_t *g, const gemm_job_t *job, const int64_t *mnk,
                      tool_rng_t *rng) {
  const tool_opts_t *o = job->opts;
  int64_t m = mnk[0], n = mnk[1], k = mnk[2];
  g->op_a = o->op_a;
  g->op_b = o->op_b;
  g->a = o->op_a == TPLA_OP_N ? view(m, k, job->a_dtype, NULL) : view(k, m, job->a_dtype, NULL);
  g->b = o->op_b == TPLA_OP_N ? view(k, n, job->b_dtype, NULL) : view(n, k, job->b_dtype, NULL);
  g->d = view(m, n, job->d_dtype, NULL);
  tpla_gemm_args_t args = TPLA_GEMM_ARGS_INIT;
  args.alpha = o->alpha;
  args.beta = o->beta;
  args.allow_tf32 = o->allow_tf32;
  if (is_fp8(job->a_dtype))
    args.fp8.accum = job->accum;
  g->args = args;
  size_t a_bytes = view_bytes(g->a), b_bytes = view_bytes(g->b), d_bytes = view_bytes(g->d);
  g->host_a = with_data(g->a, malloc(a_bytes + 1));
  g->host_b = with_data(g->b, malloc(b_bytes + 1));
  g->host_d_in = with_data(g->d, malloc(d_bytes + 1));
  g->host_d_out = with_data(g->d, malloc(d_bytes + 1));
  if (!g->host_a.data || !g->host_b.data || !g->host_d_in.data || !g->host_d_out.data)
    return tool_rank_error(r, "out of host memory for a %" PRId64 "x%" PRId64 "x%" PRId64
                              " GEMM", m, n, k);
  tool_fill_random(g->host_a, rng);
  tool_fill_random(g->host_b, rng);
  tool_fill_random(g->host_d_in, rng);
  g->sets = tool_rotation_sets(r, a_bytes + b_bytes, a_bytes + b_bytes + d_bytes, 1, &g->warm);
  for (int s = 0; s < g->sets; s++) {
    g->dev_a[s] = tool_alloc(r, a_bytes);
    g->dev_b[s] = tool_alloc(r, b_bytes);
    g->dev_d[s] = tool_alloc(r, d_bytes);
    if (!g->dev_a[s] || !g->dev_b[s] || !g->dev_d[s])
      return 1;
    int failed = s == 0 ? tool_upload(r, g->dev_a[0], g->host_a.data, a_bytes) ||
                              tool_upload(r, g->dev_b[0], g->host_b.data, b_bytes) ||
                              tool_upload(r, g->dev_d[0], g->host_d_in.data, d_bytes)
                        : tool_copy(r, g->dev_a[s], g->dev_a[0], a_bytes) ||
                              tool_copy(r, g->dev_b[s], g->dev_b[0], b_bytes) ||
                              tool_copy(r, g->dev_d[s], g->dev_d[0], d_bytes);
    if (failed)
      return 1;
  }
  return 0;
}

/* ---- the FP8 check ---------------------------------------------------------------- */

#define FP8_CHECK_ALL 512 /* check every row (column) up to this many */
#define FP8_CHECK_SAMPLE 256

/* All indices, or FP8_CHECK_SAMPLE evenly spaced ones (first and last). */
static int64_t spaced_indices(int64_t *idx, int64_t count) {
  int64_t n = count <= FP8_CHECK_ALL ? count : FP8_CHECK_SAMPLE;
  for (int64_t i = 0; i < n; i++)
    idx[i] = n == count ? i : i * (count - 1) / (n - 1);
  return n;
}

static double op_value(tpla_matrix_t x, tpla_op_t op, int64_t i, int64_t j) {
  int64_t r = op == TPLA_OP_N ? i : j, c = op == TPLA_OP_N ? j : i;
  return tpla_load_elem(x.data, x.dtype, (size_t)(r * x.ld + c));
}

/* One unit in the last place of an FP8 format at magnitude x >= 0. */
static double fp8_ulp(double x, tpla_dtype_t t) {
  int mbits = t == TPLA_FLOAT8_E5M2 ? 2 : 3, emin = t == TPLA_FLOAT8_E5M2 ? -14 : -6;
  if (x < ldexp(1.0, emin))
    return ldexp(1.0, emin - mbits);
  int e;
  frexp(x, &e);
  return ldexp(1.0, e - 1 - mbits);
}

/* FP8 GEMMs against float64 from the decoded inputs, on sampled rows and
 * columns. Products of FP8 numbers are exact in fp32; the tensor cores keep
 * about 14 bits while adding them, and cuBLASLt promotes the sums to fp32
 * every few MMAs of k = 32 (split) or never (fast). An element is wrong when
 *   |d - ref| > u_acc S + 2 u_d |ref|   (bf16/fp16/fp32 D; one FP8 ulp of
 *                                        |ref| + u_acc S for an FP8 D),
 * S = |alpha| sum |a b| + 2^-23 |beta c|, u_acc = 2^-9 (split) or
 * max(2^-9, ceil(k / 32) 2^-12) (fast), plus (k + 4) 2^-24 for fp32 steps
 * (the model of tests/gpu/test_gpu_fp8.c). */
static void check_fp8(tool_check_t *out, const gemm_bufs_t *g, const gemm_job_t *job,
                      float alpha, float beta) {
  int64_t m = g->d.rows, n = g->d.cols, k = g->op_a == TPLA_OP_N ? g->a.cols : g->a.rows;
  int64_t rows[FP8_CHECK_ALL], cols[FP8_CHECK_ALL];
  int64_t nr = spaced_indices(rows, m), nc = spaced_indices(cols, n);
  double split = 0x1.0p-9, fast = ceil((double)k / 32.0) * 0x1.0p-12;
  double u_acc = (job->accum == TPLA_FP8_ACCUM_FAST ? fmax(split, fast) : split) +
                 (double)(k + 4) * 0x1.0p-24;
  tpla_dtype_t dt = g->d.dtype;
  double u_d = dt == TPLA_FLOAT32 ? 0x1.0p-24 : dt == TPLA_FLOAT16 ? 0x1.0p-11 : 0x1.0p-8;
  double sumsq = 0, max_err_over = 0;
  out->checked = out->wrong = 0;
  out->max_rel = 0;
  double *ref = malloc((size_t)(nr * nc + 1) * sizeof(double));
  double *err = malloc((size_t)(nr * nc + 1) * sizeof(double));
  if (!ref || !err) {
    fprintf(stderr, "# check: out of host memory; counting every element as wrong\n");
    out->checked = out->wrong = nr * nc;
    out->max_rel = INFINITY;
    free(ref);
    free(err);
    return;
  }
  for (int64_t r = 0; r < nr; r++)
    for (int64_t c = 0; c < nc; c++) {
      int64_t i = rows[r], j = cols[c];
      double dot = 0, sabs = 0;
      for (int64_t l = 0; l < k; l++) {
        double p = op_value(g->host_a, g->op_a, i, l) * op_value(g->host_b, g->op_b, l, j);
        dot += p;
        sabs += fabs(p);
      }
      size_t e = (size_t)(i * g->d.ld + j);
      double cin = beta != 0.0f ? tpla_load_elem(g->host_d_in.data, dt, e) : 0.0;
      double v = (double)alpha * dot + (double)beta * cin;
      double acc = u_acc * fabs((double)alpha) * sabs + 0x1.0p-23 * fabs((double)beta * cin);
      double bound = is_fp8(dt) ? fp8_ulp(fabs(v) + acc, dt) + acc : acc + 2 * u_d * fabs(v);
      double d = tpla_load_elem(g->host_d_out.data, dt, e);
      double diff = fabs(d - v);
      ref[r * nc + c] = v;
      err[r * nc + c] = diff;
      sumsq += v * v;
      out->checked++;
      if (!(diff <= bound)) {
        out->wrong++;
        max_err_over = fmax(max_err_over, diff / bound);
      }
    }
  double rms = sqrt(sumsq / (double)(nr * nc > 0 ? nr * nc : 1));
  for (int64_t x = 0; x < nr * nc && !isnan(out->max_rel); x++) {
    double den = fabs(ref[x]) + rms;
    double rel = isnan(err[x]) ? NAN : den > 0 ? err[x] / den : err[x] > 0 ? INFINITY : 0.0;
    if (isnan(rel) || rel > out->max_rel)
      out->max_rel = rel;
  }
  if (out->wrong)
    fprintf(stderr, "# check: %" PRId64 " of %" PRId64 " FP8 elements outside the bound "
            "(worst %.3g x the bound)\n", out->wrong, out->checked, max_err_over);
  free(ref);
  free(err);
}

static int run_shape(tool_rank_t *r, const gemm_job_t *job, int shape, gemm_result_t *res) {
  const tool_opts_t *o = job->opts;
  tool_rng_t rng;
  tool_rng_seed(&rng, job->seed + 1000003ull * (uint64_t)r->rank + 7919ull * (uint64_t)shape);
  gemm_bufs_t g;
  memset(&g, 0, sizeof g);
  int failed = alloc_bufs(r, &g, job, job->shapes[shape], &rng);
  res->sets = g.sets;
  res->warm = g.warm;
  if (!failed && o->check) {
    /* set 0 still holds the uploaded inputs and D */
    tpla_status_t s = gemm_body(r, 0, &g);
    if (s != TPLA_SUCCESS)
      failed = tool_rank_fail(r, "tpla_gemm", s);
    else
      failed = tool_stream_sync(r) ||
               tool_download(r, g.host_d_out.data, g.dev_d[0], view_bytes(g.d));
    if (!failed && is_fp8(job->a_dtype))
      check_fp8(&res->check, &g, job, o->alpha, o->beta);
    else if (!failed)
      tool_check_gemm(&res->check, g.host_d_out, g.host_d_in, g.host_a, g.op_a, g.host_b, g.op_b,
                      o->alpha, o->beta, o->allow_tf32, &rng);
  }
  if (!failed)
    failed = tool_time(r, o->warmup, o->iters, gemm_body, &g, &res->time_us);
  if (!failed) {
    tpla_status_t s = tpla_ctx_workspace_bytes(r->ctx, &res->workspace);
    if (s != TPLA_SUCCESS)
      failed = tool_rank_fail(r, "tpla_ctx_workspace_bytes", s);
  }
  tool_stream_sync(r);
  free_bufs(r, &g);
  return failed;
}

static const char *op_name(tpla_op_t op_a, tpla_op_t op_b) {
  static const char *names[2][2] = {{"NN", "NT"}, {"TN", "TT"}};
  return names[op_a == TPLA_OP_T][op_b == TPLA_OP_T];
}

static void print_header(const gemm_job_t *job) {
  const tool_opts_t *o = job->opts;
  printf("# tpla gemm: D = alpha op(A) op(B) + beta D, on every rank alone (no communication)\n");
  printf("# executor %s, %d rank%s%s, %s x %s -> %s, op %s, alpha %g, beta %g, tf32 %d",
         tool_executor_name(o->executor), o->ranks, o->ranks == 1 ? "" : "s",
         o->executor == TOOL_EXEC_CUDA ? " (rank r on GPU r)" : " (threads)",
         tpla_dtype_name(job->a_dtype), tpla_dtype_name(job->b_dtype),
         tpla_dtype_name(job->d_dtype), op_name(o->op_a, o->op_b), (double)o->alpha,
         (double)o->beta, o->allow_tf32);
  if (is_fp8(job->a_dtype))
    printf(", fp8 %s accumulation, scales 1",
           job->accum == TPLA_FP8_ACCUM_FAST ? "fast" : "split");
  printf("\n");
  printf("# iters %d, warmup %d, check %d, seed %" PRIu64 "\n", o->iters, o->warmup, o->check,
         job->seed);
  printf("# time: median of each call alone (%s), slowest rank; tmin: fastest rank\n",
         o->executor == TOOL_EXEC_CUDA ? "CUDA events" : "wall clock");
  printf("# TFLOP/s: 2 M N K / time, per rank; sets: input buffers rotated (> 2x cache, else\n"
         "# a note); ws: context workspace; #wrong: elements outside the rounding-error bound\n"
         "# of a float64 reference (all up to 512 rows/cols, else 256x256 sampled), summed\n"
         "# over ranks (FP8: the FP8 accumulation bound of gemm.c's check_fp8); maxrel: max\n"
         "# |d - ref| / (|ref| + rms(ref))\n#\n");
  printf("# %5s %5s %5s %3s %7s %7s %7s %4s %8s %10s %10s %8s %7s %8s\n", "ranks", "dtype",
         "out", "op", "M", "N", "K", "sets", "ws(MiB)", "time(us)", "tmin(us)", "TFLOP/s",
         "#wrong", "maxrel");
  tool_flush();
}

static void print_line(const gemm_job_t *job, int shape, int64_t *wrong_total) {
  const tool_opts_t *o = job->opts;
  const gemm_result_t *res = job->results + (size_t)shape * (size_t)o->ranks;
  const int64_t *mnk = job->shapes[shape];
  double tmax = 0, tmin = INFINITY, maxrel = 0;
  int64_t wrong = 0;
  size_t ws = 0;
  for (int i = 0; i < o->ranks; i++) {
    tmax = fmax(tmax, res[i].time_us);
    tmin = fmin(tmin, res[i].time_us);
    wrong += res[i].check.wrong;
    if (isnan(res[i].check.max_rel) || res[i].check.max_rel > maxrel)
      maxrel = res[i].check.max_rel;
    if (res[i].workspace > ws)
      ws = res[i].workspace;
  }
  *wrong_total += wrong;
  double tflops = 2.0 * (double)mnk[0] * (double)mnk[1] * (double)mnk[2] / (tmax * 1e-6) / 1e12;
  printf("  %5d %5s %5s %3s %7" PRId64 " %7" PRId64 " %7" PRId64 " %4d %8.2f %10.2f %10.2f",
         o->ranks, tpla_dtype_name(job->a_dtype), tpla_dtype_name(job->d_dtype),
         op_name(o->op_a, o->op_b), mnk[0], mnk[1], mnk[2], res[0].sets, (double)ws / 1048576.0,
         tmax, tmin);
  printf(tflops >= 10 ? " %8.2f" : " %8.4f", tflops); /* host GEMMs: GFLOP/s digits */
  if (o->check)
    printf(" %7" PRId64 " %8.1e\n", wrong, maxrel);
  else
    printf(" %7s %8s\n", "N/A", "N/A");
  if (res[0].warm) {
    char row[80];
    snprintf(row, sizeof row, "%" PRId64 "x%" PRId64 "x%" PRId64, mnk[0], mnk[1], mnk[2]);
    tool_note_warm(row, res[0].sets);
  }
  tool_flush();
}

typedef struct {
  gemm_job_t *job;
  int64_t wrong_total;
} gemm_run_t;

static int gemm_rank(tool_rank_t *r, void *arg) {
  gemm_run_t *run = arg;
  gemm_job_t *job = run->job;
  for (int shape = 0; shape < job->nshapes; shape++) {
    gemm_result_t *res = job->results + (size_t)shape * (size_t)r->nranks + (size_t)r->rank;
    int failed = run_shape(r, job, shape, res);
    if (tool_team_sync(r, failed))
      return failed;
    if (r->rank == 0)
      print_line(job, shape, &run->wrong_total);
  }
  return 0;
}

/* The shapes to run: M N K from the command line, or a square sweep (at
 * most MAX_SWEEP sizes). 2 after a message on a usage error, 1 out of memory. */
static int make_shapes(const tool_opts_t *o, const int64_t *pos, int npos,
                       int64_t (**shapes)[3], int *count) {
  *shapes = NULL;
  if (npos != 0 && npos != 3) {
    fprintf(stderr, "tpla gemm: give M N K (three sizes) or none for a -b/-e/-f sweep\n");
    return 2;
  }
  int n = npos == 3 ? 1 : 0;
  for (double s = (double)o->min_size; npos == 0 && s <= (double)o->max_size;
       s *= o->step_factor)
    if (++n > MAX_SWEEP) {
      fprintf(stderr, "tpla gemm: the -b/-e/-f sweep has more than %d sizes\n", MAX_SWEEP);
      return 2;
    }
  *shapes = calloc((size_t)(n > 0 ? n : 1), sizeof **shapes);
  if (*shapes == NULL)
    return 1;
  double s = (double)o->min_size;
  for (int i = 0; i < n; i++, s *= o->step_factor) {
    int64_t *mnk = (*shapes)[i];
    if (npos == 3)
      memcpy(mnk, pos, sizeof **shapes);
    else
      mnk[0] = mnk[1] = mnk[2] = (int64_t)llround(s);
    if (!tool_matrix_fits(mnk[0], mnk[2]) || !tool_matrix_fits(mnk[2], mnk[1]) ||
        !tool_matrix_fits(mnk[0], mnk[1])) {
      fprintf(stderr, "tpla gemm: %" PRId64 "x%" PRId64 "x%" PRId64 ": a matrix of more than "
              "2^40 elements\n", mnk[0], mnk[1], mnk[2]);
      free(*shapes);
      *shapes = NULL;
      return 2;
    }
  }
  *count = n;
  return 0;
}

/* The mode's own words (tpla.c hands them over in o->extra, in order):
 * --accum=split|fast, --out=TYPE and the sizes M N K; then the dtypes of A,
 * B and D. False after a message. */
static bool parse_gemm_options(const tool_opts_t *o, gemm_job_t *job, int64_t *pos, int *npos) {
  const char *accum = NULL, *out = NULL;
  *npos = 0;
  for (int i = 0; i < o->npos; i++) /* from `tpla run`: none or three */
    pos[(*npos)++] = o->pos[i];
  for (int i = 0; i < o->nextra; i++) {
    const char *w = o->extra[i];
    if (strncmp(w, "--", 2) != 0) {
      if (*npos == 3 || !tool_parse_size(w, &pos[*npos])) {
        fprintf(stderr, "tpla gemm: '%s': expected M N K (three sizes > 0, e.g. 4096 or 4K)\n",
                w);
        return false;
      }
      (*npos)++;
      continue;
    }
    const char *eq = strchr(w, '=');
    size_t klen = eq ? (size_t)(eq - w) : strlen(w);
    const char **slot = klen == 7 && strncmp(w, "--accum", klen) == 0 ? &accum
                        : klen == 5 && strncmp(w, "--out", klen) == 0 ? &out
                                                                      : NULL;
    if (slot == NULL) {
      fprintf(stderr, "tpla gemm: unknown option '%s' (--accum=split|fast, --out=TYPE)\n", w);
      return false;
    }
    if (eq == NULL) { /* tpla.c moves "--" words ahead of the others: no "--accum fast" */
      fprintf(stderr, "tpla gemm: %s needs a value: %s=VALUE\n", w, w);
      return false;
    }
    *slot = eq + 1;
  }
  tpla_dtype_t in = o->dtype;
  bool fp8 = is_fp8(in);
  if (in != TPLA_FLOAT32 && in != TPLA_FLOAT16 && in != TPLA_BFLOAT16 && !fp8) {
    fprintf(stderr, "tpla gemm: -d %s: GEMM inputs are fp32, fp16, bf16, e4m3 or e5m2\n",
            tpla_dtype_name(in));
    return false;
  }
  job->a_dtype = in;
  job->b_dtype = fp8 ? TPLA_FLOAT8_E4M3 : in; /* E5M2 x E5M2 has no FP8 GEMM */
  job->d_dtype = o->out_fp32 ? TPLA_FLOAT32 : fp8 ? TPLA_BFLOAT16 : in;
  if (out != NULL) {
    tpla_dtype_t d;
    bool ok = tool_parse_dtype(out, &d) && (fp8 || d == in || d == TPLA_FLOAT32);
    if (!ok) {
      fprintf(stderr, "tpla gemm: --out=%s: D is %s\n", out,
              fp8 ? "bf16, fp16, fp32, e4m3 or e5m2 for FP8 inputs" : "the input dtype or fp32");
      return false;
    }
    job->d_dtype = d;
  }
  job->accum = TPLA_FP8_ACCUM_SPLIT;
  if (accum != NULL) {
    if (!fp8 || (strcmp(accum, "split") != 0 && strcmp(accum, "fast") != 0)) {
      fprintf(stderr, "tpla gemm: --accum=%s: split or fast, for FP8 inputs (-d e4m3|e5m2)\n",
              accum);
      return false;
    }
    job->accum = strcmp(accum, "fast") == 0 ? TPLA_FP8_ACCUM_FAST : TPLA_FP8_ACCUM_SPLIT;
  }
  if (is_fp8(job->d_dtype) && o->beta != 0.0f) {
    fprintf(stderr, "tpla gemm: an FP8 D (--out=%s) needs -B 0\n", tpla_dtype_name(job->d_dtype));
    return false;
  }
  return true;
}

int tool_mode_gemm(tool_opts_t *opts) {
  if (!tool_pick_executor(opts, NULL))
    return 2;
  bool cuda = opts->executor == TOOL_EXEC_CUDA;
  if (!opts->set_sizes) {
    opts->min_size = cuda ? 1024 : 64;
    opts->max_size = cuda ? 8192 : 256;
  }
  if (!opts->set_iters)
    opts->iters = cuda ? 20 : 5;
  if (!opts->set_warmup)
    opts->warmup = cuda ? 5 : 1;
  if (!opts->set_dtype)
    opts->dtype = TPLA_BFLOAT16;
  gemm_job_t job = {opts, NULL, 0, NULL, opts->seed ? opts->seed : tool_fresh_seed(),
                    opts->dtype, opts->dtype, opts->dtype, TPLA_FP8_ACCUM_SPLIT};
  int64_t pos[3];
  int npos = 0;
  if (!parse_gemm_options(opts, &job, pos, &npos))
    return 2;
  int rc = make_shapes(opts, pos, npos, &job.shapes, &job.nshapes);
  if (rc != 0) {
    if (rc == 1)
      fprintf(stderr, "tpla gemm: out of host memory\n");
    return rc;
  }
  job.results = calloc((size_t)job.nshapes * (size_t)opts->ranks, sizeof *job.results);
  if (job.results == NULL) {
    free(job.shapes);
    fprintf(stderr, "tpla gemm: out of host memory\n");
    return 1;
  }
  print_header(&job);
  gemm_run_t run = {&job, 0};
  int failures = tool_team_run(opts->executor, opts->ranks, 0, gemm_rank, &run);
  if (failures)
    printf("# FAILED: %d rank%s reported an error (see above)\n", failures,
           failures == 1 ? "" : "s");
  else if (opts->check)
    printf("# wrong elements: %" PRId64 " %s\n", run.wrong_total,
           run.wrong_total ? "FAILED" : "OK");
  tool_flush();
  free(job.results);
  free(job.shapes);
  return failures || run.wrong_total ? 1 : 0;
}
