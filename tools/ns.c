/*
 * ns.c - `tpla ns`: distributed Newton-Schulz orthogonalization
 * (tpla_ns_execute_out) on every rank, timed per shape, with its error
 * against the exact polar factor.
 *
 *   tpla ns                                the DESIGN.md shapes (1 GPU; -g 2: the 2-GPU set)
 *   tpla ns -g 2 -n 10 -w 3 8192x8192 16384x4096
 *   tpla ns -g 1 --gram=both 4096x14336    fp32 and bf16 Gram in one run
 *   tpla ns -x host -g 3 --shard=cols 192x64    on host ranks (threads)
 *
 * Input: a global M x N matrix of normal-ish random values (Irwin-Hall of
 * four uniforms, a pure function of -s and the element's position, so any
 * rank count sees the same matrix), rows (--shard=cols: columns) split
 * evenly over the ranks, -d dtype (bf16), --steps steps (5) of --preset
 * (Muon), algorithm --algo (auto), Gram dtype --gram (fp32).
 * Timing: the plan is made once; each timed call is tpla_ns_execute_out
 * from one of `sets` >= 3 rotating inputs (together more than twice the L2
 * cache, or a note says not) into one output buffer, so nothing is copied
 * inside the timed region. After a host rendezvous and tpla_barrier on the stream, -w calls
 * warm up and -n calls are each timed alone (CUDA events on the rank's
 * stream; wall clock on the host); time_ms is rank 0's median, tmax_ms the
 * slowest rank's. TFLOP/s use DESIGN.md's count, 4 s^2 l + 2 s^3 a step
 * with s the short side (4 s^2 l where the step's c is 0), over tmax_ms.
 * Errors (-c 1, ns_check.c), from one extra call on input set 0, gathered
 * to rank 0 through host memory: when max(M, N) <= --svd-max (4096; errsrc
 * f64), from a float64 SVD of the input on the host (LAPACK), polar_rel =
 * ||Y - U V^T||_F / ||U V^T||_F, orth_max = max |Y Y^T - I| (short side) and
 * ns_rel, Y's distance from the steps in exact arithmetic; a row whose ns_rel
 * exceeds ns_rel_bound fails the run (exit 1). Above --svd-max polar_rel and
 * ns_rel are nan and orth_max comes from Y Y^T by tpla_gemm with fp32
 * accumulation on rank 0's executor (errsrc gemm32); there only a NaN or
 * Inf fails the run. TPLA_TOOL_NS_PERTURB=f scales the gathered result by
 * 1 + f before the check (the check's own test).
 * Output: the '#' header and table columns of bench/ns_torch.py (shape gpus
 * variant time_ms TFLOP/s polar_rel orth_max), then algorithm iter gram
 * ws_MiB sets tmax_ms errsrc ns_rel; --json=FILE appends one JSON object per row.
 */
#include "ns_tool.h"

#include "internal.h" /* tpla_load_elem / tpla_store_elem */
#include "ns.h"       /* NS_MAX_STEPS, ns_fill_coefficients */

#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

static const char *preset_name(tpla_ns_preset_t p) {
  static const char *names[] = {"muon", "muon5", "polar", "cubic", "user"};
  return p >= 0 && p <= TPLA_NS_USER ? names[p] : "?";
}

static const char *algo_name(tpla_ns_algorithm_t a) {
  static const char *names[] = {"AUTO", "GRAM_ALLREDUCE", "REDISTRIBUTE", "GATHER", "LOCAL",
                                "GRAM_SHARDED"};
  return a >= 0 && a <= TPLA_NS_ALGO_GRAM_SHARDED ? names[a] : "?";
}

void tool_ns_usage(FILE *out) {
  fprintf(out,
          "ns flags (tpla ns [flags] [MxN ...]; a plain size N means NxN):\n"
          "  --preset=P    muon (default), muon5, polar, cubic\n"
          "  --steps=N     Newton-Schulz steps (default 5)\n"
          "  --algo=A      auto (default), gram, sharded, redist, gather, local\n"
          "                (gram: GRAM_ALLREDUCE; sharded: GRAM_SHARDED, the Gram polynomial\n"
          "                split across the ranks)\n"
          "  --gram=G      Gram dtype: fp32 (default), input, or both (--gram alone: both)\n"
          "  --iterate=I   auto (default: the cost model's choice), x, or gram: the steps\n"
          "                applied to the Gram matrix between updates of X (TPLA_NS_ITERATE_GRAM)\n"
          "  --shard=S     rows (default) or cols: the dimension split evenly over the ranks\n"
          "  --svd-max=N   -c 1: float64 host SVD errors up to this dimension (default 4096;\n"
          "                above it polar_rel is nan and orth_max comes from an fp32 GEMM)\n"
          "  --json=FILE   also append one JSON object per table row to FILE\n");
}

/* ---- arguments -------------------------------------------------------------------- */

typedef struct {
  const char *name;
  int value;
} ns_name_t;

static bool pick(const char *v, const ns_name_t *names, int *out) {
  for (; names->name != NULL; names++)
    if (strcasecmp(v, names->name) == 0) {
      *out = names->value;
      return true;
    }
  return false;
}

static bool parse_shape(const char *w, int64_t *mn) {
  char buf[64];
  const char *x = strpbrk(w, "xX");
  if (x == NULL)
    return tool_parse_size(w, &mn[0]) && (mn[1] = mn[0]) > 0;
  if ((size_t)(x - w) >= sizeof buf)
    return false;
  memcpy(buf, w, (size_t)(x - w));
  buf[x - w] = '\0';
  return tool_parse_size(buf, &mn[0]) && tool_parse_size(x + 1, &mn[1]);
}

static int parse_ns_args(const tool_opts_t *o, ns_args_t *a) {
  static const ns_name_t presets[] = {
      {"muon", TPLA_NS_MUON}, {"muon5", TPLA_NS_MUON_SCHEDULE5},
      {"schedule5", TPLA_NS_MUON_SCHEDULE5}, {"polar", TPLA_NS_POLAR_EXPRESS},
      {"pe", TPLA_NS_POLAR_EXPRESS}, {"cubic", TPLA_NS_CUBIC}, {NULL, 0}};
  static const ns_name_t algos[] = {
      {"auto", TPLA_NS_ALGO_AUTO}, {"gram", TPLA_NS_ALGO_GRAM_ALLREDUCE},
      {"gram_allreduce", TPLA_NS_ALGO_GRAM_ALLREDUCE}, {"redist", TPLA_NS_ALGO_REDISTRIBUTE},
      {"redistribute", TPLA_NS_ALGO_REDISTRIBUTE}, {"gather", TPLA_NS_ALGO_GATHER},
      {"local", TPLA_NS_ALGO_LOCAL}, {"sharded", TPLA_NS_ALGO_GRAM_SHARDED},
      {"gram_sharded", TPLA_NS_ALGO_GRAM_SHARDED}, {NULL, 0}};
  /* --gram alone (no value) runs both */
  static const ns_name_t grams[] = {{"fp32", 0}, {"input", 1}, {"both", 2}, {"", 2}, {NULL, 0}};
  static const ns_name_t iterations[] = {{"auto", TPLA_NS_ITERATE_AUTO},
                                         {"x", TPLA_NS_ITERATE_X},
                                         {"gram", TPLA_NS_ITERATE_GRAM},
                                         {NULL, 0}};
  static const ns_name_t shards[] = {{"rows", TPLA_SHARD_ROWS}, {"cols", TPLA_SHARD_COLS},
                                     {NULL, 0}};
  memset(a, 0, sizeof *a);
  a->iteration = TPLA_NS_ITERATE_AUTO;
  a->steps = 5;
  a->svd_max = 4096;
  a->ngrams = 1;
  a->grams[0] = TPLA_FLOAT32;
  bool gram_input[2] = {false, false};
  for (int i = 0; i < o->nextra; i++) {
    const char *w = o->extra[i], *eq = strchr(w, '=');
    const char *v = eq ? eq + 1 : "";
    size_t klen = eq ? (size_t)(eq - w) : strlen(w);
    int k = 0;
    bool ok = true;
#define KEY(name) (klen == strlen(name) && strncmp(w, name, klen) == 0)
    if (strncmp(w, "--", 2) != 0) {
      if (a->nshapes == NS_MAX_SHAPES) {
        fprintf(stderr, "tpla ns: more than %d shapes\n", NS_MAX_SHAPES);
        return 2;
      }
      ok = parse_shape(w, a->shapes[a->nshapes]);
      if (ok)
        a->nshapes++;
    } else if (KEY("--preset")) {
      ok = pick(v, presets, &k);
      a->preset = (tpla_ns_preset_t)k;
    } else if (KEY("--steps")) {
      char *end = NULL;
      long s = strtol(v, &end, 10);
      ok = end != v && *end == '\0' && s >= 1 && s <= NS_MAX_STEPS;
      a->steps = (int)s;
    } else if (KEY("--algo")) {
      ok = pick(v, algos, &k);
      a->algo = (tpla_ns_algorithm_t)k;
    } else if (KEY("--gram")) {
      ok = pick(v, grams, &k);
      a->ngrams = k >= 2 ? 2 : 1;
      gram_input[0] = k == 1;
      gram_input[1] = true;
    } else if (KEY("--iterate")) {
      ok = pick(v, iterations, &k);
      a->iteration = (tpla_ns_iteration_t)k;
    } else if (KEY("--shard")) {
      ok = pick(v, shards, &k);
      a->shard = (tpla_shard_t)k;
    } else if (KEY("--svd-max")) {
      char *end = NULL;
      long long s = strtoll(v, &end, 10);
      ok = end != v && *end == '\0' && s >= 0 && s <= NS_MAX_SVD_DIM;
      a->svd_max = s;
    } else if (KEY("--json")) {
      ok = *v != '\0';
      a->json = v;
    } else {
      fprintf(stderr, "tpla ns: unknown option '%s'\n", w);
      return 2;
    }
#undef KEY
    if (!ok) {
      fprintf(stderr, "tpla ns: '%s': %s (see tpla -h)\n", w,
              strncmp(w, "--", 2) == 0 ? "bad value" : "expected a shape MxN or a size N");
      return 2;
    }
  }
  for (int g = 0; g < a->ngrams; g++)
    a->grams[g] = gram_input[g] ? o->dtype : TPLA_FLOAT32;
  if (a->ngrams == 2 && a->grams[1] == a->grams[0])
    a->ngrams = 1; /* fp32 input: the input dtype is fp32 */
  return 0;
}

/* The shapes to run when none were named: a -b/-e/-f sweep of squares, or
 * DESIGN.md's (small ones on the host). False after a message when the sweep
 * is too long or a shape too large. */
static bool settle_shapes(const tool_opts_t *o, ns_args_t *a) {
  static const int64_t gpu1[][2] = {{4096, 4096}, {4096, 14336}, {8192, 8192}, {16384, 16384}};
  static const int64_t gpu2[][2] = {{8192, 8192}, {16384, 4096}, {4096, 14336}, {14336, 4096}};
  static const int64_t host1[][2] = {{256, 256}, {256, 896}, {512, 512}};
  static const int64_t host2[][2] = {{512, 512}, {1024, 256}, {256, 896}, {896, 256}};
  if (a->nshapes == 0 && o->set_sizes) { /* a -b/-e/-f sweep of squares */
    for (double s = (double)o->min_size; s <= (double)o->max_size; s *= o->step_factor) {
      if (a->nshapes == NS_MAX_SHAPES) {
        fprintf(stderr, "tpla ns: the -b/-e/-f sweep has more than %d sizes\n", NS_MAX_SHAPES);
        return false;
      }
      a->shapes[a->nshapes][0] = a->shapes[a->nshapes][1] = (int64_t)llround(s);
      a->nshapes++;
    }
  } else if (a->nshapes == 0) {
    bool cuda = o->executor == TOOL_EXEC_CUDA, one = o->ranks == 1;
    const int64_t(*list)[2] = cuda ? (one ? gpu1 : gpu2) : (one ? host1 : host2);
    a->nshapes = cuda || !one ? 4 : 3;
    memcpy(a->shapes, list, sizeof(int64_t) * 2 * (size_t)a->nshapes);
  }
  for (int i = 0; i < a->nshapes; i++)
    if (!tool_matrix_fits(a->shapes[i][0], a->shapes[i][1])) {
      fprintf(stderr, "tpla ns: %" PRId64 "x%" PRId64 ": more than 2^40 elements\n",
              a->shapes[i][0], a->shapes[i][1]);
      return false;
    }
  return true;
}

/* ---- data ----------------------------------------------------------------------------- */

/* This rank's shard of shape (m, n): rows [off, off+lr) or columns. */
typedef struct {
  int64_t m, n, lr, lc, off;
  size_t bytes;
} ns_shard_t;

static ns_shard_t shard_of(const ns_args_t *a, int64_t m, int64_t n, int rank, int nranks) {
  int64_t g = a->shard == TPLA_SHARD_ROWS ? m : n;
  int64_t part = g / nranks + (rank < g % nranks);
  int64_t off = rank * (g / nranks) + (rank < g % nranks ? rank : g % nranks);
  ns_shard_t s = {m, n, a->shard == TPLA_SHARD_ROWS ? part : m,
                  a->shard == TPLA_SHARD_ROWS ? n : part, off, 0};
  return s;
}

/* Global (i, j) of local element (i, j) of the shard. */
static size_t global_index(const ns_args_t *a, const ns_shard_t *s, int64_t i, int64_t j) {
  return a->shard == TPLA_SHARD_ROWS ? (size_t)((s->off + i) * s->n + j)
                                     : (size_t)(i * s->n + s->off + j);
}

/* ---- one shape on one rank --------------------------------------------------------- */

typedef struct {
  ns_shard_t sh;
  void *host; /* the shard on the host: the input, later the result */
  void *sets[TOOL_MAX_SETS];
  int nsets;
  bool warm; /* the sets stay under twice the cache */
  void *out;
  tpla_matrix_t x, y; /* views of the shard (x.data set per call) */
  tpla_ns_plan_t plan;
} ns_bufs_t;

static tpla_status_t ns_body(tool_rank_t *r, int iter, void *arg) {
  ns_bufs_t *b = arg;
  tpla_matrix_t x = b->x;
  x.data = b->sets[iter % b->nsets];
  return tpla_ns_execute_out(b->plan, b->y, x, r->stream);
}

static void close_bufs(tool_rank_t *r, ns_bufs_t *b) {
  tpla_ns_plan_destroy(b->plan);
  b->plan = NULL;
  for (int s = 0; s < TOOL_MAX_SETS; s++)
    tool_free(r, b->sets[s]);
  tool_free(r, b->out);
  free(b->host);
  memset(b, 0, sizeof *b);
}

/* The shard's input in `sets` buffers (the first uploaded, the others
 * device copies of it: each timed call then reads memory the previous ones
 * did not leave in L2), and the output buffer. */
static int open_bufs(tool_rank_t *r, const ns_job_t *job, int shape, ns_bufs_t *b) {
  tpla_dtype_t dt = job->o->dtype;
  size_t e = tpla_dtype_size(dt);
  memset(b, 0, sizeof *b);
  b->sh = shard_of(job->a, job->a->shapes[shape][0], job->a->shapes[shape][1], r->rank,
                   r->nranks);
  ns_shard_t *s = &b->sh;
  s->bytes = (size_t)(s->lr * s->lc) * e;
  b->x = (tpla_matrix_t){NULL, s->lr, s->lc, s->lc > 0 ? s->lc : 1, dt};
  b->host = malloc(s->bytes + e);
  if (b->host == NULL)
    return tool_rank_error(r, "out of host memory (%zu bytes)", s->bytes);
  for (int64_t i = 0; i < s->lr; i++)
    for (int64_t j = 0; j < s->lc; j++)
      tpla_store_elem(b->host, dt, (size_t)(i * s->lc + j),
                      ns_normalish(job->seed, global_index(job->a, s, i, j)));
  b->nsets = tool_rotation_sets(r, s->bytes, s->bytes, 3, &b->warm);
  for (int k = 0; k < b->nsets; k++) {
    if ((b->sets[k] = tool_alloc(r, s->bytes)) == NULL)
      return 1;
    if (k == 0 ? tool_upload(r, b->sets[0], b->host, s->bytes)
               : tool_copy(r, b->sets[k], b->sets[0], s->bytes))
      return 1;
  }
  b->out = tool_alloc(r, s->bytes);
  b->y = b->x;
  b->y.data = b->out;
  return b->out == NULL;
}

/* One call on input set 0; its result goes to the shared job->y. */
static int check_call(tool_rank_t *r, ns_job_t *job, ns_bufs_t *b) {
  tpla_status_t st = ns_body(r, 0, b);
  if (st != TPLA_SUCCESS)
    return tool_rank_fail(r, "tpla_ns_execute_out", st);
  const ns_shard_t *s = &b->sh;
  if (tool_stream_sync(r) || tool_download(r, b->host, b->out, s->bytes))
    return 1;
  size_t e = tpla_dtype_size(job->o->dtype), row = (size_t)s->lc * e;
  for (int64_t i = 0; i < s->lr; i++)
    memcpy((char *)job->y + global_index(job->a, s, i, 0) * e, (char *)b->host + (size_t)i * row,
           row);
  return 0;
}

static ns_result_t *result_at(const ns_job_t *job, int shape, int g, int rank) {
  return job->results + ((size_t)shape * (size_t)job->a->ngrams + (size_t)g) *
                            (size_t)job->o->ranks + (size_t)rank;
}

/* Plan, check call, then timing of the gram variant g. Syncs the team once
 * between the check and the timing. */
static int run_variant(tool_rank_t *r, ns_job_t *job, ns_bufs_t *b, int shape, int g) {
  const ns_args_t *a = job->a;
  ns_result_t *res = result_at(job, shape, g, r->rank);
  tpla_ns_desc_t d = TPLA_NS_DESC_INIT;
  d.shard = a->shard;
  d.local_rows = b->sh.lr;
  d.local_cols = b->sh.lc;
  d.dtype = job->o->dtype;
  d.steps = a->steps;
  d.preset = a->preset;
  d.gram_dtype = a->grams[g];
  d.algorithm = a->algo;
  d.iteration = a->iteration;
  tpla_status_t st = tpla_ns_plan_create(&b->plan, r->ctx, &d);
  int failed = st != TPLA_SUCCESS ? tool_rank_fail(r, "tpla_ns_plan_create", st) : 0;
  if (!failed) {
    tpla_ns_plan_algorithm(b->plan, &res->algo);
    tpla_ns_plan_iteration(b->plan, &res->iteration);
    tpla_ns_plan_workspace_bytes(b->plan, &res->ws);
    res->sets = b->nsets;
    res->warm = b->warm;
    if (job->o->check)
      failed = check_call(r, job, b);
  }
  if (tool_team_sync(r, failed))
    return failed;
  /* every rank's earlier work is done before the first timed call */
  st = tpla_barrier(r->ctx, r->stream);
  if (st != TPLA_SUCCESS)
    failed = tool_rank_fail(r, "tpla_barrier", st);
  else
    failed = tool_time(r, job->o->warmup, job->o->iters, ns_body, b, &res->time_us);
  tpla_ns_plan_destroy(b->plan);
  b->plan = NULL;
  return failed;
}

/* ---- output --------------------------------------------------------------------------- */

static void json_num(FILE *f, const char *key, double v) {
  if (isnan(v))
    fprintf(f, ", \"%s\": NaN", key); /* as Python's json writes it */
  else if (isinf(v))
    fprintf(f, ", \"%s\": %sInfinity", key, v < 0 ? "-" : "");
  else
    fprintf(f, ", \"%s\": %.6g", key, v);
}

static const char *iterate_name(tpla_ns_iteration_t it) {
  return it == TPLA_NS_ITERATE_GRAM ? "the Gram matrix (--iterate=gram)"
         : it == TPLA_NS_ITERATE_X  ? "X (--iterate=x)"
                                    : "auto (the cost model's choice, column iter)";
}

static void print_header(const ns_job_t *job) {
  const tool_opts_t *o = job->o;
  const ns_args_t *a = job->a;
  bool cuda = o->executor == TOOL_EXEC_CUDA;
  printf("# tpla ns: Newton-Schulz orthogonalization, tpla_ns_execute_out on every rank\n");
  printf("# executor %s, %d rank%s%s, %s, %s sharded evenly, preset %s, %d steps, algorithm %s, "
         "gram %s%s, iterating on %s\n",
         tool_executor_name(o->executor), o->ranks, o->ranks == 1 ? "" : "s",
         cuda ? " (rank r on GPU r)" : " (threads)", tpla_dtype_name(o->dtype),
         a->shard == TPLA_SHARD_ROWS ? "rows" : "cols", preset_name(a->preset), a->steps,
         a->algo == TPLA_NS_ALGO_AUTO ? "auto" : algo_name(a->algo), tpla_dtype_name(a->grams[0]),
         a->ngrams == 2 ? (o->dtype == TPLA_FLOAT16 ? " and fp16" : " and bf16") : "",
         iterate_name(a->iteration));
  if (o->ranks == 2) { /* read by the plans at creation (src/core/ns_pull.c) */
    const char *sum = getenv("TPLA_NS_GRAM_SUM");
    bool nccl = sum != NULL && strcmp(sum, "nccl") == 0;
    printf("# distributed Gram sums: %s\n",
           nccl ? "the executor's all-reduce (NCCL on CUDA; TPLA_NS_GRAM_SUM=nccl)"
                : "pulls on the overlap transport where the GPUs map each other's memory "
                  "(the default; TPLA_NS_GRAM_SUM=nccl: the all-reduce)");
  }
  printf("# iters %d, warmup %d, check %d (float64 host SVD up to %" PRId64 "%s), seed %" PRIu64
         "\n", o->iters, o->warmup, o->check, a->svd_max,
#ifdef TPLA_HAVE_LAPACK
         "",
#else
         "; this build has no LAPACK: fp32 GEMM only",
#endif
         job->seed);
  printf("# time_ms: median of -n calls, each timed alone (%s) on rank 0's stream after a\n"
         "#   cross-rank barrier; tmax_ms: the slowest rank's median; sets: rotating inputs;\n"
         "#   TFLOP/s: DESIGN.md's count, 4 s^2 l + 2 s^3 a step (s: the short side; 4 s^2 l\n"
         "#   where c = 0), over tmax_ms\n", cuda ? "CUDA events" : "wall clock");
  printf("# polar_rel: ||Y - U V^T||_F / ||U V^T||_F; orth_max: max |Y Y^T - I| (short side);\n"
         "#   ns_rel: ||Y - U p(S) V^T||_F / ||U p(S) V^T||_F, p the steps in exact arithmetic\n"
         "#   (a row fails above %.1e); errsrc f64: all in float64 on the host; gemm32: only\n"
         "#   orth_max, from Y Y^T by tpla_gemm (fp32 accumulation), and only NaN/Inf fail;\n"
         "#   none: -c 0\n#\n", ns_rel_bound(o->dtype, a->grams[a->ngrams - 1]));
  printf("#%11s %6s %-15s %10s %9s %9s %9s %-14s %-4s %5s %8s %4s %10s %-6s %9s\n", "shape",
         "gpus", "variant", "time_ms", "TFLOP/s", "polar_rel", "orth_max", "algorithm", "iter",
         "gram", "ws_MiB", "sets", "tmax_ms", "errsrc", "ns_rel");
  tool_flush();
}

/* DESIGN.md's FLOP count of the steps: 4 s^2 l + 2 s^3 each, without the
 * square of the Gram (2 s^3) where the step's c is 0 (e.g. cubic). */
static double ns_flops(const ns_args_t *a, int64_t s, int64_t l) {
  tpla_ns_desc_t d = TPLA_NS_DESC_INIT;
  d.preset = a->preset;
  d.steps = a->steps;
  float table[3 * NS_MAX_STEPS];
  ns_fill_coefficients(&d, table);
  double sd = (double)s, flops = 0.0;
  for (int k = 0; k < a->steps; k++)
    flops += 4.0 * sd * sd * (double)l + (table[3 * k + 2] != 0.0f ? 2.0 * sd * sd * sd : 0.0);
  return flops;
}

/* Rank 0, after every rank's result of (shape, g) is in: errors, the table
 * row and the JSON object. A non-finite result counts as a bad row. */
static int report(tool_rank_t *r, ns_job_t *job, int shape, int g) {
  const tool_opts_t *o = job->o;
  const ns_args_t *a = job->a;
  ns_err_t e;
  int failed = ns_compute_errors(r, job, shape, &e);
  if (failed)
    return failed;
  int64_t m = a->shapes[shape][0], n = a->shapes[shape][1];
  int64_t s = m < n ? m : n, l = m < n ? n : m;
  const ns_result_t *res = result_at(job, shape, g, 0);
  double tmax = 0;
  size_t ws = 0;
  bool agree = true;
  for (int q = 0; q < o->ranks; q++) {
    tmax = fmax(tmax, res[q].time_us);
    ws = res[q].ws > ws ? res[q].ws : ws;
    agree = agree && res[q].algo == res[0].algo && res[q].iteration == res[0].iteration;
  }
  double ms = res[0].time_us * 1e-3, tflops = ns_flops(a, s, l) / (tmax * 1e-6) / 1e12;
  char name[48];
  snprintf(name, sizeof name, "%" PRId64 "x%" PRId64, m, n);
  printf(" %11s %6d %-15s %10.3f", name, o->ranks, "tpla", ms);
  printf(tflops >= 10 ? " %9.1f" : " %9.4f", tflops);
  const char *iter = res[0].iteration == TPLA_NS_ITERATE_GRAM ? "gram" : "x";
  printf(" %9.3e %9.3e %-14s %-4s %5s %8.1f %4d %10.3f %-6s %9.3e\n", e.polar_rel, e.orth_max,
         algo_name(res[0].algo), iter, tpla_dtype_name(a->grams[g]), (double)ws / 1048576.0,
         res[0].sets, tmax * 1e-3, e.src, e.ns_rel);
  bool f64 = strcmp(e.src, "f64") == 0;
  double bound = ns_rel_bound(o->dtype, a->grams[g]);
  bool off = f64 && !(e.ns_rel <= bound); /* NaN too */
  bool bad = e.nonfinite > 0 || (o->check && !isfinite(e.orth_max)) || off;
  if (e.nonfinite > 0)
    printf("# BAD: %s: %" PRId64 " non-finite elements in the result\n", name, e.nonfinite);
  else if (off)
    printf("# BAD: %s: ns_rel %.3e above its bound %.3e: the result is not the iteration's\n",
           name, e.ns_rel, bound);
  else if (bad)
    printf("# BAD: %s: orth_max is not finite\n", name);
  if (res[0].warm)
    tool_note_warm(name, res[0].sets);
  if (!agree)
    printf("# NOTE: %s: the ranks' plans run different algorithms or iterations\n", name);
  if (e.seconds >= 1.0)
    printf("#   (%s: the %s check took %.1f s on rank 0)\n", name, e.src, e.seconds);
  job->bad_rows += bad;
  if (job->json != NULL) {
    FILE *f = job->json;
    fprintf(f, "{\"shape\": \"%s\", \"gpus\": %d, \"variant\": \"tpla\", \"executor\": \"%s\", "
            "\"dtype\": \"%s\", \"gram\": \"%s\", \"preset\": \"%s\", \"steps\": %d, "
            "\"shard\": \"%s\", \"algorithm\": \"%s\", \"iteration\": \"%s\", \"errsrc\": \"%s\"",
            name, o->ranks, tool_executor_name(o->executor), tpla_dtype_name(o->dtype),
            tpla_dtype_name(a->grams[g]), preset_name(a->preset), a->steps,
            a->shard == TPLA_SHARD_ROWS ? "rows" : "cols", algo_name(res[0].algo),
            iter, e.src);
    json_num(f, "time_ms", ms);
    json_num(f, "tmax_ms", tmax * 1e-3);
    json_num(f, "tflops", tflops);
    json_num(f, "polar_rel", e.polar_rel);
    json_num(f, "orth_max", e.orth_max);
    json_num(f, "ns_rel", e.ns_rel);
    json_num(f, "check_s", e.seconds);
    fprintf(f, ", \"nonfinite\": %" PRId64 ", \"ws_bytes\": %zu, \"sets\": %d, \"iters\": %d, "
            "\"warmup\": %d, \"seed\": %" PRIu64 "}\n", e.nonfinite, ws, res[0].sets, o->iters,
            o->warmup, job->seed);
    fflush(f);
  }
  tool_flush();
  return 0;
}

/* Per shape: buffers, then per Gram variant the plan, check call and timing
 * (run_variant), then rank 0's report. The rendezvous after each phase
 * spreads a failure, and keeps job->y unchanged while rank 0 reads it. */
static int ns_rank(tool_rank_t *r, void *arg) {
  ns_job_t *job = arg;
  for (int shape = 0; shape < job->a->nshapes; shape++) {
    ns_bufs_t b;
    int mine = open_bufs(r, job, shape, &b);
    int stop = tool_team_sync(r, mine);
    for (int g = 0; !stop && g < job->a->ngrams; g++) {
      mine = run_variant(r, job, &b, shape, g);
      stop = tool_team_sync(r, mine);
      if (!stop) {
        mine = r->rank == 0 ? report(r, job, shape, g) : 0;
        stop = tool_team_sync(r, mine);
      }
    }
    close_bufs(r, &b);
    if (stop)
      return mine;
  }
  return 0;
}

/* ---- the mode ------------------------------------------------------------------------- */

int tool_mode_ns(tool_opts_t *opts) {
  ns_args_t a;
  int rc = parse_ns_args(opts, &a);
  if (rc != 0)
    return rc;
  if (!tool_pick_executor(opts, NULL))
    return 2;
  bool cuda = opts->executor == TOOL_EXEC_CUDA;
  if (!opts->set_iters)
    opts->iters = cuda ? 20 : 5;
  if (!opts->set_warmup)
    opts->warmup = cuda ? 5 : 1;
  if (opts->dtype != TPLA_FLOAT32 && opts->dtype != TPLA_FLOAT16 &&
      opts->dtype != TPLA_BFLOAT16) {
    fprintf(stderr, "tpla ns: -d %s: inputs are fp32, fp16 or bf16\n",
            tpla_dtype_name(opts->dtype));
    return 2;
  }
  if (!settle_shapes(opts, &a))
    return 2;
  ns_job_t job = {opts, &a, opts->seed ? opts->seed : tool_fresh_seed(), NULL, NULL, NULL, NULL,
                  -1, NULL, 0};
  size_t ybytes = 0;
  for (int i = 0; opts->check && i < a.nshapes; i++) {
    size_t b = (size_t)(a.shapes[i][0] * a.shapes[i][1]) * tpla_dtype_size(opts->dtype);
    ybytes = b > ybytes ? b : ybytes;
  }
  job.results = calloc((size_t)a.nshapes * (size_t)a.ngrams * (size_t)opts->ranks,
                       sizeof *job.results);
  job.y = ybytes > 0 ? malloc(ybytes) : NULL;
  if (job.results == NULL || (ybytes > 0 && job.y == NULL)) {
    fprintf(stderr, "tpla ns: out of host memory\n");
    free(job.results);
    free(job.y);
    return 1;
  }
  if (a.json != NULL && (job.json = fopen(a.json, "a")) == NULL) {
    fprintf(stderr, "tpla ns: --json=%s: cannot open for appending\n", a.json);
    free(job.results);
    free(job.y);
    return 2;
  }
  print_header(&job);
  int failures = tool_team_run(opts->executor, opts->ranks, 0, ns_rank, &job);
  if (failures)
    printf("# FAILED: %d rank%s reported an error (see above)\n", failures,
           failures == 1 ? "" : "s");
  else if (job.bad_rows)
    printf("# FAILED: %d row%s with wrong or non-finite results\n", job.bad_rows,
           job.bad_rows == 1 ? "" : "s");
  else
    printf("# tpla ns: OK\n");
  tool_flush();
  if (job.json != NULL)
    fclose(job.json);
  free(job.results);
  free(job.y);
  free(job.polar);
  free(job.nsref);
  return failures || job.bad_rows ? 1 : 0;
}
