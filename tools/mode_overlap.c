/*
 * mode_overlap.c - `tpla ag-gemm`, `tpla gemm-rs`, `tpla gemm-ar`: the
 * tensor-parallel communication + GEMM plans, checked against a float64
 * reference and timed next to their parts, all in the same run:
 *
 *   tpla ag-gemm -g 2                 DESIGN.md's AllGather+GEMM shapes on 2 GPUs
 *   tpla gemm-rs -g 2 16384 1024 8192 one GEMM+ReduceScatter shape (M, K per rank, N)
 *   tpla gemm-ar -x host -g 3         small shapes on 3 host ranks
 *
 * Sizes: M K N (ag-gemm: M global rows, K, N per rank; gemm-rs/ar: M, K per
 * rank, N), or DESIGN.md's shapes. Options after the common flags:
 *   --chunks=N  --transport=auto|peer|sendrecv  (TPLA_OVERLAP_CHUNKS /
 *   TPLA_OVERLAP_TRANSPORT in the environment are the defaults; an option
 *   wins); FP8: --accum=fast|split, --cache-b (op(B) N: one B, its
 *   transpose cached by the plan). -t NN/NT picks op(B); -b/-e/-f are
 *   refused. -n defaults to 20 on GPUs, 3 on the host.
 * One process, a thread per GPU: cudaFree (plan destroy included) waits for
 * the peer GPUs, so the ranks meet at a host barrier after every destroy
 * and free, before anyone's next collective could wait for a freeing rank.
 *
 * Per shape, every rank measures (median of -n calls after -w warm-up, each
 * timed alone with CUDA events, inputs rotated over enough buffer sets to
 * exceed twice the L2; the table shows the slowest rank):
 *   time    the overlapped plan;      serial  the SERIAL plan (collective, then GEMM);
 *   gemm    one unchunked tpla_gemm of the same local problem;
 *   comm    the collective of the same bytes (tpla_allgatherv / reduce_scatterv /
 *           allreduce, i.e. NCCL);
 *   eff     max(gemm, comm) / time, the overlap efficiency;
 *   TFLOP/s 2 M N K / time of the local problem; xfer: bytes this rank receives / time.
 * Inputs come from a counter-based generator (any element from its indices),
 * so each rank checks sampled outputs against a float64 reference that
 * covers every rank's inputs; #wrong counts elements outside the rounding
 * bound of overlap_data.c's check (D's roundings on |ref| and the ranks'
 * partials, the accumulation's as a random walk over ||ab||_2).
 */
#include "overlap_tool.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

static const char *op_names[3] = {"ag-gemm", "gemm-rs", "gemm-ar"};

/* ---- plans and timed bodies ----------------------------------------------------------- */

static tpla_status_t plan_create(tool_rank_t *r, bench_t *x, tpla_overlap_mode_t mode) {
  const tool_opts_t *o = x->job->o;
  tpla_dtype_t out = out_dtype(o);
  if (x->job->kind == OP_AG) {
    tpla_ag_gemm_desc_t d = TPLA_AG_GEMM_DESC_INIT;
    d.local_rows = x->b->rows, d.k = x->K, d.n = x->N, d.op_b = o->op_b, d.dtype = o->dtype;
    d.d_dtype = out, d.allow_tf32 = o->allow_tf32, d.mode = mode;
    d.transport = x->job->transport, d.chunks = x->job->chunks;
    return tpla_ag_gemm_plan_create(&x->ag, r->ctx, &d);
  }
  if (x->job->kind == OP_RS) {
    tpla_gemm_rs_desc_t d = TPLA_GEMM_RS_DESC_INIT;
    d.m = x->M, d.k = x->K, d.n = x->N, d.op_b = o->op_b, d.dtype = o->dtype;
    d.d_dtype = out, d.allow_tf32 = o->allow_tf32, d.mode = mode;
    d.transport = x->job->transport, d.chunks = x->job->chunks;
    return tpla_gemm_rs_plan_create(&x->rs, r->ctx, &d);
  }
  tpla_gemm_ar_desc_t d = TPLA_GEMM_AR_DESC_INIT;
  d.m = x->M, d.k = x->K, d.n = x->N, d.op_b = o->op_b, d.dtype = o->dtype;
  d.d_dtype = out, d.allow_tf32 = o->allow_tf32, d.mode = mode;
  d.transport = x->job->transport, d.chunks = x->job->chunks;
  return tpla_gemm_ar_plan_create(&x->ar, r->ctx, &d);
}

static void plan_destroy(bench_t *x) {
  tpla_ag_gemm_plan_destroy(x->ag);
  tpla_gemm_rs_plan_destroy(x->rs);
  tpla_gemm_ar_plan_destroy(x->ar);
  x->ag = NULL, x->rs = NULL, x->ar = NULL;
}

static tpla_status_t plan_body(tool_rank_t *r, int iter, void *arg) {
  bench_t *x = arg;
  int s = iter % x->b->sets;
  /* --cache-b: B stays the same (set 0) and says so, so FP8 plans with op(B)
   * N reuse its transposed copy; A still rotates */
  tpla_matrix_t b = x->b->b[x->job->cache_b ? 0 : s];
  x->args.b_version = x->job->cache_b ? 1 : 0;
  if (x->ag)
    return tpla_ag_gemm(x->ag, x->b->d, x->b->a[s], b, &x->args, r->stream);
  if (x->rs)
    return tpla_gemm_rs(x->rs, x->b->d, x->b->a[s], b, &x->args, r->stream);
  return tpla_gemm_ar(x->ar, x->b->d, x->b->a[s], b, &x->args, r->stream);
}

/* One unchunked GEMM of the same local problem. */
static tpla_status_t gemm_body(tool_rank_t *r, int iter, void *arg) {
  bench_t *x = arg;
  int s = iter % x->b->sets;
  tpla_gemm_args_t g = TPLA_GEMM_ARGS_INIT;
  g.alpha = x->args.alpha, g.beta = x->args.beta, g.allow_tf32 = x->job->o->allow_tf32;
  g.fp8 = x->args.fp8;
  /* --cache-b: the plan reads its cached transpose of B, so the baseline
   * reads a B^T as it is, not B transposed again every call */
  tpla_matrix_t b = x->job->cache_b ? x->b->bt : x->b->b[s];
  tpla_op_t op_b = x->job->cache_b ? TPLA_OP_T : x->job->o->op_b;
  if (x->job->kind == OP_AG) /* D = gathered A op(B); full holds M x K */
    return tpla_gemm(r->ctx, x->b->d, x->b->full, TPLA_OP_N, b, op_b, &g, r->stream);
  return tpla_gemm(r->ctx, x->b->full, x->b->a[s], TPLA_OP_N, b, op_b, &g, r->stream);
}

/* The collective of the same bytes. */
static tpla_status_t comm_body(tool_rank_t *r, int iter, void *arg) {
  bench_t *x = arg;
  bufs_t *b = x->b;
  size_t es = tpla_dtype_size(b->full.dtype);
  if (x->job->kind == OP_AG) {
    char *own = (char *)b->full.data + (size_t)b->off * (size_t)x->K * es;
    return tpla_allgatherv(r->ctx, b->full.data, own, x->counts,
                           is_fp8(b->full.dtype) ? TPLA_UINT8 : b->full.dtype, r->stream);
  }
  if (x->job->kind == OP_RS)
    return tpla_reduce_scatterv(r->ctx, b->dloc.data, b->full.data, x->counts, b->full.dtype,
                                r->stream);
  /* out of place: in place, every call would multiply the values by P */
  return tpla_allreduce(r->ctx, b->d.data, b->full.data, (size_t)(x->M * x->N), b->full.dtype,
                        r->stream);
}

/* ---- one shape on one rank -------------------------------------------------------------- */

static const char *transport_name(tpla_transport_t t) {
  return t == TPLA_TRANSPORT_PEER ? "peer" : t == TPLA_TRANSPORT_SENDRECV ? "sendrecv" : "none";
}

/* Create, optionally check, time and destroy a plan of `mode`. */
static int time_plan(tool_rank_t *r, bench_t *x, tpla_overlap_mode_t mode, double *us,
                     result_t *res) {
  const tool_opts_t *o = x->job->o;
  tpla_status_t s = plan_create(r, x, mode);
  if (s != TPLA_SUCCESS)
    return tool_rank_fail(r, "plan create", s);
  int failed = 0;
  if (o->check) { /* one call from the generated D, then compare */
    failed = overlap_fill(r, &x->b->d, x->job->seed, M_D, r->rank);
    s = failed ? TPLA_SUCCESS : plan_body(r, 0, x);
    if (s != TPLA_SUCCESS)
      failed = tool_rank_fail(r, op_names[x->job->kind], s);
    else if (!failed)
      failed = tool_stream_sync(r) || overlap_check(r, x, &res->checked, &res->wrong);
  }
  if (!failed)
    failed = tool_time(r, o->warmup, o->iters, plan_body, x, us);
  if (mode == TPLA_OVERLAP_OVERLAP && !failed) {
    tpla_overlap_info_t info = TPLA_OVERLAP_INFO_INIT;
    s = x->ag   ? tpla_ag_gemm_plan_get_info(x->ag, &info)
        : x->rs ? tpla_gemm_rs_plan_get_info(x->rs, &info)
                : tpla_gemm_ar_plan_get_info(x->ar, &info);
    res->ws = info.workspace_bytes;
    res->chunks = info.chunks;
    res->transport = info.transport;
  }
  tool_stream_sync(r);
  /* peers read this rank's buffers until their own last call is done */
  failed |= tool_team_sync(r, failed);
  plan_destroy(x);
  /* nobody's next exchange or collective spins while a rank is in cudaFree */
  failed |= tool_team_sync(r, failed);
  return failed;
}

static int run_shape(tool_rank_t *r, job_t *job, int shape, result_t *res) {
  const int64_t *mkn = job->shapes[shape];
  bufs_t b;
  memset(&b, 0, sizeof b);
  bench_t x = {job, &b, NULL, NULL, NULL, TPLA_OVERLAP_ARGS_INIT, NULL, mkn[0], mkn[1], mkn[2]};
  x.args.alpha = job->o->alpha;
  x.args.beta = job->o->beta;
  uint64_t seed = job->seed;
  int failed = overlap_alloc_bufs(r, job, mkn, &b, seed);
  res->sets = b.sets;
  res->warm = b.warm;
  if (!failed && is_fp8(job->o->dtype)) {
    x.args.fp8.a_scale = b.scales;
    x.args.fp8.b_scale = b.scales + TPLA_FP8_SCALE_STRIDE;
    x.args.fp8.accum = job->accum;
  }
  if (!failed && job->kind == OP_AG) /* the unchunked GEMM reads real values */
    failed = overlap_fill(r, &b.full, seed, M_A, 0);
  x.counts = calloc((size_t)r->nranks, sizeof *x.counts);
  if (x.counts == NULL)
    failed = tool_rank_error(r, "out of host memory");
  for (int q = 0; !failed && q < r->nranks; q++) {
    int64_t rows = x.M / r->nranks + (q < x.M % r->nranks);
    x.counts[q] = (size_t)rows * (size_t)(job->kind == OP_AG ? x.K : x.N);
  }
  failed |= tool_team_sync(r, failed);
  if (!failed)
    failed = time_plan(r, &x, TPLA_OVERLAP_OVERLAP, &res->time, res);
  if (!failed)
    failed = time_plan(r, &x, TPLA_OVERLAP_SERIAL, &res->serial, res);
  if (!failed)
    failed = tool_time(r, job->o->warmup, job->o->iters, gemm_body, &x, &res->gemm);
  if (!failed)
    failed = tool_time(r, job->o->warmup, job->o->iters, comm_body, &x, &res->comm);
  tool_stream_sync(r);
  free(x.counts);
  overlap_free_bufs(r, &b);
  return failed;
}

/* ---- the table ------------------------------------------------------------------------ */

static void print_header(const job_t *job) {
  const tool_opts_t *o = job->o;
  tpla_dtype_t out = out_dtype(o);
  static const char *what[3] = {
      "D (M x N) = allgather_rows(A_local) op(B): M global rows, K, N per rank",
      "D_local = reduce_scatter_rows(A op(B)): A is M x K per rank, D M x N",
      "D = allreduce(A op(B)): A is M x K per rank, D M x N"};
  printf("# tpla %s: %s\n", op_names[job->kind], what[job->kind]);
  char chunks[16] = "auto";
  if (job->chunks > 0)
    snprintf(chunks, sizeof chunks, "%d", job->chunks);
  printf("# executor %s, %d rank%s%s, %s -> %s, op(B) %s, alpha %g, beta %g, chunks %s, "
         "transport %s\n", tool_executor_name(o->executor), o->ranks, o->ranks == 1 ? "" : "s",
         o->executor == TOOL_EXEC_CUDA ? " (rank r on GPU r)" : " (threads)",
         tpla_dtype_name(o->dtype), tpla_dtype_name(out), o->op_b == TPLA_OP_N ? "N" : "T",
         (double)o->alpha, (double)o->beta, chunks,
         job->transport == TPLA_TRANSPORT_AUTO ? "auto" : transport_name(job->transport));
  if (is_fp8(o->dtype))
    printf("# FP8: B %s, per-tensor scales (A: 0.5 + 0.25 rank, B: 0.75), %s accumulation\n",
           tpla_dtype_name(b_dtype(o)), job->accum == TPLA_FP8_ACCUM_FAST ? "fast" : "split");
  if (job->cache_b)
    printf("# --cache-b: every call passes the same B with b_version 1 (A still rotates); the\n"
           "#   gemm baseline reads a B^T with op(B) T, as the plan reads its cached transpose\n");
  /* the library's tuning variables and experiments (docs/OVERLAP.md): a log says its mode */
  static const char *const knobs[] = {"TPLA_OVERLAP_TAIL", "TPLA_OVERLAP_DIRECT",
                                      "TPLA_OVERLAP_TUNE", "TPLA_XPORT_MAX_IN_FLIGHT"};
  for (size_t i = 0; i < sizeof knobs / sizeof knobs[0]; i++)
    if (getenv(knobs[i]) != NULL)
      printf("# environment: %s=%s\n", knobs[i], getenv(knobs[i]));
  printf("# iters %d, warmup %d, check %d, seed %" PRIu64 "; times: median, slowest rank\n",
         o->iters, o->warmup, o->check, job->seed);
  printf("# time: overlapped plan; serial: collective then GEMM (SERIAL plan); gemm: one "
         "unchunked\n# GEMM of the local problem; comm: the NCCL collective of the same bytes;"
         " eff = max(gemm,\n# comm) / time; TFLOP/s of the local problem; xfer: GB/s received "
         "per rank; ws: plan MiB\n#\n");
  printf("# %-7s %5s %5s %6s %6s %6s %6s %8s %9s %8s %8s %9s %9s %9s %5s %8s %7s\n", "op",
         "ranks", "dtype", "M", "K", "N", "chunks", "xport", "time(us)", "TFLOP/s", "xfer",
         "gemm(us)", "comm(us)", "serial(us)", "eff", "ws(MiB)", "#wrong");
  tool_flush();
}

static void print_line(job_t *job, int shape) {
  const tool_opts_t *o = job->o;
  const result_t *res = job->res + (size_t)shape * (size_t)o->ranks;
  const int64_t *mkn = job->shapes[shape];
  double t = 0, ser = 0, g = 0, c = 0;
  int64_t wrong = 0, checked = 0;
  size_t ws = 0;
  for (int q = 0; q < o->ranks; q++) {
    t = fmax(t, res[q].time), ser = fmax(ser, res[q].serial);
    g = fmax(g, res[q].gemm), c = fmax(c, res[q].comm);
    wrong += res[q].wrong, checked += res[q].checked;
    ws = res[q].ws > ws ? res[q].ws : ws;
  }
  job->wrong_total += wrong;
  double M = (double)mkn[0], K = (double)mkn[1], N = (double)mkn[2], P = o->ranks;
  tpla_dtype_t out = out_dtype(o);
  double elem = job->kind == OP_AG ? K * (double)tpla_dtype_size(o->dtype)
                                   : N * (double)tpla_dtype_size(out);
  double received = (M - floor(M / P)) * elem * (job->kind == OP_AR ? 2.0 : 1.0);
  double tflops = 2.0 * M * N * K / (t * 1e-6) / 1e12;
  printf("  %-7s %5d %5s %6" PRId64 " %6" PRId64 " %6" PRId64 " %6d %8s %9.1f", op_names[job->kind],
         o->ranks, tpla_dtype_name(o->dtype), mkn[0], mkn[1], mkn[2], res[0].chunks,
         transport_name(res[0].transport), t);
  printf(tflops >= 10 ? " %8.1f" : " %8.4f", tflops);
  printf(" %9.1f %9.1f %9.1f %9.1f %5.3f %8.1f", received / (t * 1e-6) / 1e9, g, c, ser,
         fmax(g, c) / t, (double)ws / 1048576.0);
  if (o->check)
    printf(" %7" PRId64 "\n", wrong);
  else
    printf(" %7s\n", "N/A");
  bool warm = false;
  for (int q = 0; q < o->ranks; q++)
    warm = warm || res[q].warm;
  if (warm) {
    char row[80];
    snprintf(row, sizeof row, "%s %" PRId64 " %" PRId64 " %" PRId64, op_names[job->kind],
             mkn[0], mkn[1], mkn[2]);
    tool_note_warm(row, res[0].sets);
  }
  tool_flush();
}

static int overlap_rank(tool_rank_t *r, void *arg) {
  job_t *job = arg;
  for (int shape = 0; shape < job->nshapes; shape++) {
    result_t *res = job->res + (size_t)shape * (size_t)r->nranks + (size_t)r->rank;
    int failed = run_shape(r, job, shape, res);
    if (tool_team_sync(r, failed))
      return failed;
    if (r->rank == 0)
      print_line(job, shape);
  }
  return 0;
}

/* DESIGN.md's shapes (M K N), and small ones for the host executor. */
static int default_shapes(op_kind_t kind, bool cuda, int64_t (*s)[3]) {
  static const int64_t ag[][3] = {{8192, 8192, 4096}, {16384, 8192, 14336}, {32768, 8192, 4096},
                                  {16384, 8192, 1024}};
  static const int64_t rs[][3] = {{8192, 4096, 8192}, {16384, 14336, 8192}, {16384, 1024, 8192}};
  static const int64_t host[][3] = {{256, 128, 64}, {512, 64, 96}};
  const int64_t(*src)[3] = !cuda ? host : kind == OP_AG ? ag : rs;
  int n = !cuda ? 2 : kind == OP_AG ? 4 : 3;
  memcpy(s, src, sizeof *s * (size_t)n);
  return n;
}

/* "auto", "peer", "sendrecv" (any case); false otherwise. */
static bool parse_transport(const char *v, tpla_transport_t *out) {
  bool a = strcasecmp(v, "auto") == 0, p = strcasecmp(v, "peer") == 0;
  bool s = strcasecmp(v, "sendrecv") == 0;
  *out = p ? TPLA_TRANSPORT_PEER : s ? TPLA_TRANSPORT_SENDRECV : TPLA_TRANSPORT_AUTO;
  return a || p || s;
}

/* "0".."TPLA_OVERLAP_MAX_CHUNKS" (0: automatic); false otherwise. */
static bool parse_chunks(const char *v, int *out) {
  char *end = NULL;
  errno = 0;
  long c = strtol(v, &end, 10);
  if (end == v || *end != '\0' || errno != 0 || c < 0 || c > TPLA_OVERLAP_MAX_CHUNKS)
    return false;
  *out = (int)c;
  return true;
}

/* The mode's own arguments (tpla.c hands them over in o->extra, in order):
 * --chunks=N, --transport=T and the positional sizes M K N. The
 * environment (TPLA_OVERLAP_CHUNKS, TPLA_OVERLAP_TRANSPORT) gives the
 * defaults. False (after a message) on a usage error. */
static bool parse_options(const tool_opts_t *o, op_kind_t kind, job_t *job, int64_t *sizes,
                          int *nsizes) {
  const char *name = op_names[kind], *env = getenv("TPLA_OVERLAP_CHUNKS");
  job->chunks = 0;
  job->transport = TPLA_TRANSPORT_AUTO;
  if (env != NULL && !parse_chunks(env, &job->chunks)) {
    fprintf(stderr, "tpla %s: TPLA_OVERLAP_CHUNKS=%s is not in 0..%d\n", name, env,
            TPLA_OVERLAP_MAX_CHUNKS);
    return false;
  }
  env = getenv("TPLA_OVERLAP_TRANSPORT");
  if (env != NULL && !parse_transport(env, &job->transport)) {
    fprintf(stderr, "tpla %s: TPLA_OVERLAP_TRANSPORT=%s is not auto, peer or sendrecv\n", name,
            env);
    return false;
  }
  for (int i = 0; i < o->npos && *nsizes < 3; i++) /* a mode without own arguments */
    sizes[(*nsizes)++] = o->pos[i];
  for (int i = 0; i < o->nextra; i++) {
    const char *w = o->extra[i], *eq = strchr(w, '=');
    if (strncmp(w, "--", 2) != 0) {
      if (*nsizes == 3 || !tool_parse_size(w, &sizes[*nsizes])) {
        fprintf(stderr, "tpla %s: '%s': expected M K N (three sizes > 0, e.g. 4096 or 4K)\n",
                name, w);
        return false;
      }
      (*nsizes)++;
      continue;
    }
    size_t klen = eq ? (size_t)(eq - w) : strlen(w);
    const char *v = eq ? eq + 1 : "";
    bool chunks = klen == 8 && strncmp(w, "--chunks", klen) == 0;
    if (klen == 7 && strncmp(w, "--accum", klen) == 0) {
      bool fast = strcasecmp(v, "fast") == 0;
      if ((!fast && strcasecmp(v, "split") != 0) || !is_fp8(o->dtype)) {
        fprintf(stderr, "tpla %s: '%s': expected --accum=fast|split, for FP8 inputs (-d "
                "e4m3|e5m2)\n", name, w);
        return false;
      }
      job->accum = fast ? TPLA_FP8_ACCUM_FAST : TPLA_FP8_ACCUM_SPLIT;
      continue;
    }
    if (klen == 9 && strncmp(w, "--cache-b", klen) == 0 && eq == NULL) {
      if (!is_fp8(o->dtype) || o->op_b != TPLA_OP_N) { /* elsewhere nothing is cached */
        fprintf(stderr, "tpla %s: --cache-b: for FP8 inputs with op(B) N (the plans cache "
                "only FP8's transpose of B)\n", name);
        return false;
      }
      job->cache_b = true;
      continue;
    }
    if (!chunks && !(klen == 11 && strncmp(w, "--transport", klen) == 0)) {
      fprintf(stderr, "tpla %s: unknown option '%s' (--chunks=N, --transport=T, --accum=A, "
              "--cache-b)\n",
              name, w);
      return false;
    }
    if (!(chunks ? parse_chunks(v, &job->chunks) : parse_transport(v, &job->transport))) {
      fprintf(stderr, "tpla %s: '%s': expected --chunks=0..%d (0: automatic) or "
              "--transport=auto|peer|sendrecv\n", name, w, TPLA_OVERLAP_MAX_CHUNKS);
      return false;
    }
  }
  return true;
}

static int overlap_mode(tool_opts_t *o, op_kind_t kind) {
  if (!tool_pick_executor(o, NULL))
    return 2;
  bool cuda = o->executor == TOOL_EXEC_CUDA;
  if (!o->set_iters)
    o->iters = cuda ? 20 : 3;
  if (!o->set_warmup)
    o->warmup = cuda ? 5 : 1;
  if (o->dtype != TPLA_FLOAT32 && o->dtype != TPLA_FLOAT16 && o->dtype != TPLA_BFLOAT16 &&
      !is_fp8(o->dtype)) {
    fprintf(stderr, "tpla %s: -d: inputs are fp32, fp16, bf16, e4m3 or e5m2\n", op_names[kind]);
    return 2;
  }
  job_t job;
  memset(&job, 0, sizeof job);
  job.kind = kind;
  job.o = o;
  job.seed = o->seed ? o->seed : tool_fresh_seed();
  if (o->set_sizes || o->op_a != TPLA_OP_N) {
    fprintf(stderr, "tpla %s: %s\n", op_names[kind],
            o->set_sizes ? "-b/-e/-f: give M K N, or none for DESIGN.md's shapes"
                         : "-t: op(A) is N here (-t NN or NT picks op(B))");
    return 2;
  }
  int64_t sizes[3];
  int nsizes = 0;
  if (!parse_options(o, kind, &job, sizes, &nsizes))
    return 2;
  if (nsizes == 3) {
    memcpy(job.shapes[0], sizes, sizeof job.shapes[0]);
    job.nshapes = 1;
  } else if (nsizes == 0) {
    job.nshapes = default_shapes(kind, cuda, job.shapes);
  } else {
    fprintf(stderr, "tpla %s: give M K N (three sizes) or none for DESIGN.md's shapes\n",
            op_names[kind]);
    return 2;
  }
  for (int i = 0; i < job.nshapes; i++) {
    const int64_t *mkn = job.shapes[i];
    if (!tool_matrix_fits(mkn[0], mkn[1]) || !tool_matrix_fits(mkn[1], mkn[2]) ||
        !tool_matrix_fits(mkn[0], mkn[2])) {
      fprintf(stderr, "tpla %s: %" PRId64 " %" PRId64 " %" PRId64 ": a matrix of more than 2^40 "
              "elements\n", op_names[kind], mkn[0], mkn[1], mkn[2]);
      return 2;
    }
  }
  job.res = calloc((size_t)job.nshapes * (size_t)o->ranks, sizeof *job.res);
  if (job.res == NULL)
    return 1;
  print_header(&job);
  int failures = tool_team_run(o->executor, o->ranks, 0, overlap_rank, &job);
  if (failures)
    printf("# FAILED: %d rank%s reported an error (see above)\n", failures,
           failures == 1 ? "" : "s");
  else if (o->check)
    printf("# wrong elements: %" PRId64 " %s\n", job.wrong_total,
           job.wrong_total ? "FAILED" : "OK");
  tool_flush();
  free(job.res);
  return failures || job.wrong_total ? 1 : 0;
}

int tool_mode_ag_gemm(tool_opts_t *opts) { return overlap_mode(opts, OP_AG); }
int tool_mode_gemm_rs(tool_opts_t *opts) { return overlap_mode(opts, OP_RS); }
int tool_mode_gemm_ar(tool_opts_t *opts) { return overlap_mode(opts, OP_AR); }
