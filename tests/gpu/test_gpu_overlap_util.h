/*
 * test_gpu_overlap_util.h - helpers of the GPU overlap tests
 * (test_gpu_overlap*.c): a team of ranks, one thread per GPU, each with its
 * NCCL communicator, tpla context and non-blocking stream, that runs a body
 * and can meet at a host barrier; checked device buffers filled from
 * float64 host data through the library's own dtype conversions; one case
 * of a plan against float64, with progress lines and a hang report
 * (test_gpu_overlap_watch.h).
 *
 * One process, a thread per GPU: once peer access is enabled between the
 * GPUs (NCCL enables it for its P2P transport in one process, and so do the
 * PEER plans), cudaFree on one GPU waits for the work of its peer GPUs. A
 * rank that frees (plan destroy, test buffers) while another rank's NCCL
 * kernel (a plan's creation-time exchange, tpla_barrier, a collective)
 * spins waiting for this very rank deadlocks both. So the team meets at a
 * host barrier after every phase that frees or allocates and before the
 * next collective: after the communicators, after the uploads, after the
 * frees of every case, before the teardown.
 *
 * Header-only (static functions); include after gpu_util.h.
 */
#ifndef TPLA_TEST_GPU_OVERLAP_UTIL_H
#define TPLA_TEST_GPU_OVERLAP_UTIL_H

#include "gpu_util.h"
#include "test_gpu_overlap_watch.h"

#include <pthread.h>

#define GT_MAX_RANKS GW_MAX_RANKS

typedef struct gt_team gt_team_t;

/* team == NULL: a rank of its own process (test_gpu_overlap_procs.c). */
typedef struct {
  int rank, nranks, device;
  tpla_ctx_t ctx;
  cudaStream_t stream;
  gt_team_t *team;
} gt_rank_t;

/* Returns the number of failures of this rank. */
typedef int (*gt_body_t)(gt_rank_t *r, void *arg);

struct gt_team {
  int nranks;
  tpla_unique_id_t id;
  pthread_barrier_t barrier;
  gt_body_t body;
  void *arg;
  int failures[GT_MAX_RANKS];
  int vote[GT_MAX_RANKS]; /* gt_any */
  int comm_failed[GT_MAX_RANKS];
  int setup_failed[GT_MAX_RANKS];
  gw_watch_t watch;
};

/* The progress record of r's team, or of this process for a lone rank. */
static inline gw_watch_t *gt_watch(gt_rank_t *r) {
  static gw_watch_t solo;
  static int solo_ready;
  if (r->team != NULL)
    return &r->team->watch;
  if (!solo_ready) {
    gw_init(&solo, r->nranks < GW_MAX_RANKS ? r->nranks : GW_MAX_RANKS);
    for (int q = 0; q < solo.nranks; q++)
      if (q != r->rank) {
        solo.rank[q].active = 0;
        snprintf(solo.rank[q].step, sizeof solo.rank[q].step, "(another process)");
      }
    solo_ready = 1;
  }
  return &solo;
}

#define gt_step(r, ...) gw_step(gt_watch(r), (r)->rank, __VA_ARGS__)

/* Waits for r's stream with the hang deadline; 0 when drained. */
static inline int gt_sync(gt_rank_t *r, const char *what) {
  return gw_sync(gt_watch(r), r->rank, r->stream, what);
}

/* Host barrier of the team (a no-op for a lone rank: other processes'
 * frees do not wait for this process's GPUs). */
static inline void gt_barrier_at(gt_rank_t *r, const char *what) {
  if (r->team == NULL)
    return;
  gt_step(r, "host barrier: %s", what);
  pthread_barrier_wait(&r->team->barrier);
}
static inline void gt_barrier(gt_rank_t *r) { gt_barrier_at(r, "(body)"); }

/* The bitwise OR of every rank's flags (this rendezvous only); a lone rank's own. */
static inline int gt_any(gt_rank_t *r, int flags) {
  if (r->team == NULL)
    return flags;
  r->team->vote[r->rank] = flags;
  gt_barrier_at(r, "vote");
  int any = 0;
  for (int q = 0; q < r->nranks; q++)
    any |= r->team->vote[q];
  gt_barrier_at(r, "votes counted"); /* nobody votes again before all have counted */
  return any;
}

typedef struct {
  gt_team_t *team;
  int rank;
} gt_start_t;

static inline int gt_all_ok(const int *failed, int n) {
  for (int q = 0; q < n; q++)
    if (failed[q])
      return 0;
  return 1;
}

/* Every rank passes the same barriers, whatever failed. */
static void *gt_main(void *p) {
  gt_start_t *s = p;
  gt_team_t *t = s->team;
  gt_rank_t r = {s->rank, t->nranks, s->rank, NULL, NULL, t};
  struct ncclComm *comm = NULL;
  tpla_config_t cfg = TPLA_CONFIG_INIT;
  cfg.timeout_ms = 60000;
  gt_step(&r, "setup: NCCL communicator on device %d", r.device);
  int bad = CUDA_FAILED(cudaSetDevice(r.device));
  bad = bad || TPLA_FAILED(tpla_nccl_comm_create(&comm, &t->id, t->nranks, r.rank, r.device, &cfg));
  t->comm_failed[r.rank] = bad;
  /* NCCL's initialization allocates and frees: nobody's first collective
   * (the context's exchange) may spin before every rank is out of it */
  gt_barrier_at(&r, "after the communicators");
  if (gt_all_ok(t->comm_failed, t->nranks)) {
    gt_step(&r, "setup: context and stream");
    bad = bad || TPLA_FAILED(tpla_ctx_create_nccl(&r.ctx, comm, &cfg));
    bad = bad || CUDA_FAILED(cudaStreamCreateWithFlags(&r.stream, cudaStreamNonBlocking));
  }
  t->setup_failed[r.rank] = bad;
  gt_barrier_at(&r, "after the contexts"); /* every rank knows whether the team is complete */
  if (gt_all_ok(t->setup_failed, t->nranks))
    t->failures[r.rank] = t->body(&r, t->arg);
  gt_barrier_at(&r, "before the teardown"); /* no collective of a body is left */
  if (r.stream)
    cudaStreamDestroy(r.stream);
  if (r.ctx)
    t->failures[r.rank] += TPLA_FAILED(tpla_ctx_destroy(r.ctx));
  gt_barrier_at(&r, "before the communicators go");
  if (comm)
    t->failures[r.rank] += TPLA_FAILED(tpla_nccl_comm_destroy(comm));
  gw_done(&t->watch, r.rank);
  return NULL;
}

/* Run `body` on ranks 0..nranks-1 (rank r on GPU r), watched for hangs.
 * Returns the total of failures, setup failures included. */
static inline int gt_run(int nranks, gt_body_t body, void *arg) {
  gt_team_t *t = calloc(1, sizeof *t);
  if (t == NULL || nranks > GT_MAX_RANKS)
    return 1;
  t->nranks = nranks;
  t->body = body;
  t->arg = arg;
  gw_init(&t->watch, nranks);
  int failures = TPLA_FAILED(tpla_nccl_get_unique_id(&t->id));
  pthread_barrier_init(&t->barrier, NULL, (unsigned)nranks);
  gw_monitor_start(&t->watch);
  pthread_t ids[GT_MAX_RANKS];
  gt_start_t starts[GT_MAX_RANKS];
  int started = 0;
  for (; failures == 0 && started < nranks; started++) {
    starts[started] = (gt_start_t){t, started};
    if (pthread_create(&ids[started], NULL, gt_main, &starts[started]) != 0)
      break;
  }
  if (failures == 0 && started < nranks) {
    fprintf(stderr, "  gt_run: could not start %d threads (the started ones will hang)\n",
            nranks);
    return 1;
  }
  for (int q = 0; q < started; q++) {
    pthread_join(ids[q], NULL);
    failures += t->failures[q] + t->setup_failed[q];
  }
  gw_monitor_stop(&t->watch);
  pthread_barrier_destroy(&t->barrier);
  pthread_mutex_destroy(&t->watch.lock);
  free(t);
  return failures;
}

/* ---- device buffers ------------------------------------------------------------------ */

/* A device matrix (rows x cols, ld = cols + pad) of `dtype`, filled from
 * the row-major doubles h (ld cols) rounded to the dtype; NULL h: zeros. */
static inline tpla_matrix_t gt_upload(const double *h, int64_t rows, int64_t cols, int pad,
                                      tpla_dtype_t dtype, int *failures) {
  tpla_matrix_t m = {NULL, rows, cols, cols + pad > 0 ? cols + pad : 1, dtype};
  size_t es = tpla_dtype_size(dtype), bytes = (size_t)(rows > 0 ? rows : 1) * (size_t)m.ld * es;
  void *host = calloc(1, bytes);
  if (host == NULL || CUDA_FAILED(cudaMalloc(&m.data, bytes))) {
    (*failures)++;
    free(host);
    m.data = NULL;
    return m;
  }
  for (int64_t i = 0; h != NULL && i < rows; i++)
    pack((char *)host + (size_t)(i * m.ld) * es, dtype, h + i * cols, (size_t)cols);
  *failures += CUDA_FAILED(gpu_upload(m.data, host, bytes));
  free(host);
  return m;
}

/* The doubles of a device matrix (rows x cols, dense result). */
static inline double *gt_download(tpla_matrix_t m, int *failures) {
  size_t es = tpla_dtype_size(m.dtype), bytes = (size_t)(m.rows > 0 ? m.rows : 1) * m.ld * es;
  void *host = malloc(bytes);
  double *out = calloc((size_t)(m.rows * m.cols + 1), sizeof *out);
  if (host == NULL || out == NULL || CUDA_FAILED(cudaMemcpy(host, m.data, bytes,
                                                            cudaMemcpyDeviceToHost))) {
    (*failures)++;
  } else {
    for (int64_t i = 0; i < m.rows; i++)
      unpack(out + i * m.cols, (char *)host + (size_t)(i * m.ld) * es, m.dtype, (size_t)m.cols);
  }
  free(host);
  return out;
}

/* Uniform [-1, 1) doubles, already rounded to `dtype` (so they are the exact inputs). */
static inline double *gt_random(gpu_rng_t *g, int64_t count, tpla_dtype_t dtype) {
  double *v = malloc(sizeof *v * (size_t)(count > 0 ? count : 1));
  uint32_t tmp[2];
  for (int64_t i = 0; v != NULL && i < count; i++) {
    tpla_store_elem(tmp, dtype, 0, gpu_rng_uniform(g));
    v[i] = tpla_load_elem(tmp, dtype, 0);
  }
  return v;
}

/* ---- one case of an overlap plan, checked against float64 --------------------------- */

/* Seed of the cases (set by the test's main). */
static uint64_t seed; /* of the cases (set by the test's main) */

typedef struct {
  int kind; /* 0 AG, 1 RS, 2 AR */
  tpla_dtype_t dtype, d_dtype;
  tpla_op_t op_b;
  tpla_overlap_mode_t mode;
  tpla_transport_t transport;
  int chunks, bias, pad, calls;
  float alpha, beta;
  int64_t rows[GT_MAX_RANKS]; /* AG: local rows; RS: slice rows */
  int even_split;             /* RS: local_rows -1, the library's even split equal to rows */
  int64_t m, k[GT_MAX_RANKS], n;
  uint64_t seed;
  tpla_fp8_accum_t accum; /* FP8 cases */
  int amax;               /* FP8 cases: ask for d_amax */
} gcase_t;

static inline bool gt_fp8(tpla_dtype_t t) {
  return t == TPLA_FLOAT8_E4M3 || t == TPLA_FLOAT8_E5M2;
}
/* B's dtype (E4M3 with an E5M2 A) and the FP8 scales of rank q (A differs per rank) */
static inline tpla_dtype_t gt_b_dtype(const gcase_t *c) {
  return c->dtype == TPLA_FLOAT8_E5M2 ? TPLA_FLOAT8_E4M3 : c->dtype;
}
static inline double gt_a_scale(const gcase_t *c, int q) {
  return gt_fp8(c->dtype) ? 0.5 + 2.0 * q : 1.0; /* rank 1's above 1 (2.5) */
}
static inline double gt_b_scale(const gcase_t *c) { return gt_fp8(c->dtype) ? 0.75 : 1.0; }

static inline const char *kind_name(int k) {
  return k == 0 ? "AG+GEMM" : k == 1 ? "GEMM+RS" : "GEMM+AR";
}

/* Every rank's inputs, generated identically on every rank. */
typedef struct {
  double *a[GT_MAX_RANKS], *b[GT_MAX_RANKS], *bias[GT_MAX_RANKS], *d0[GT_MAX_RANKS];
  int64_t m, arows[GT_MAX_RANKS], drows[GT_MAX_RANKS], doff[GT_MAX_RANKS];
} inputs_t;

static inline void make_inputs(const gcase_t *c, int P, inputs_t *in) {
  gpu_rng_t g;
  gpu_rng_seed(&g, c->seed);
  memset(in, 0, sizeof *in);
  in->m = c->kind == 0 ? 0 : c->m;
  for (int q = 0; q < P && c->kind == 0; q++)
    in->m += c->rows[q];
  int64_t off = 0;
  for (int q = 0; q < P; q++) {
    int64_t k = c->kind == 0 ? c->k[0] : c->k[q];
    in->arows[q] = c->kind == 0 ? c->rows[q] : in->m;
    in->drows[q] = c->kind == 1 ? c->rows[q] : in->m;
    in->doff[q] = off;
    off += c->kind == 1 ? c->rows[q] : 0;
    in->a[q] = gt_random(&g, in->arows[q] * k, c->dtype);
    in->b[q] = gt_random(&g, k * c->n, gt_b_dtype(c));
    in->bias[q] = gt_random(&g, c->n, c->d_dtype);
    in->d0[q] = gt_random(&g, in->drows[q] * c->n, c->d_dtype);
  }
}

static inline void free_inputs(inputs_t *in) {
  for (int q = 0; q < GT_MAX_RANKS; q++)
    free(in->a[q]), free(in->b[q]), free(in->bias[q]), free(in->d0[q]);
}

static inline double unit(tpla_dtype_t t) { return unit_roundoff(t); }

/* The mean signed rounding error of half-precision outputs over every case
 * checked so far (all ranks): sum of (d - ref) sign(ref) / (u |ref|) over the
 * elements whose rounding dominates (|ref| at least half the sum of |terms|,
 * in the normal range) and whose value is mostly a sum of at least 4 products
 * (see test_overlap_fuzz.c). Round to nearest even keeps it near 0; a truncating
 * epilogue or fold store drifts toward -0.5 while the per-element bound still
 * passes it (review 87). gt_rounding_drift_ok() judges it. */
static pthread_mutex_t gt_drift_mu = PTHREAD_MUTEX_INITIALIZER;
static double gt_drift_sum;
static long long gt_drift_n;

static inline void gt_drift_add(double sum, long long n) {
  pthread_mutex_lock(&gt_drift_mu);
  gt_drift_sum += sum, gt_drift_n += n;
  pthread_mutex_unlock(&gt_drift_mu);
}

/* 1 if the mean drift is within 0.01 u plus 4 standard deviations of a mean
 * of errors of 0.6 u each (or too few elements to judge: under 200, said so). */
static inline int gt_rounding_drift_ok(void) {
  double n = (double)gt_drift_n, mean = n > 0 ? gt_drift_sum / n : 0.0;
  double limit = 0.01 + 4.0 * 0.6 / sqrt(n > 0 ? n : 1.0);
  printf("  rounding drift of half outputs: %+.4f u over %lld elements (limit %.4f%s)\n", mean,
         gt_drift_n, limit, gt_drift_n < 200 ? "; too few to judge" : "");
  return gt_drift_n < 200 || fabs(mean) <= limit;
}

/* Max over rank r's output of |d - ref| / bound (> 1: wrong). sign: of A. */
static inline double check_output(const gcase_t *c, int P, int r, const inputs_t *in,
                                  const double *d, double sign) {
  int64_t ktot = 0;
  for (int q = 0; q < P; q++)
    ktot += c->kind == 0 ? 0 : c->k[q];
  ktot = c->kind == 0 ? c->k[0] : ktot;
  /* FP8 fast accumulation: partial sums in the tensor cores' reduced
   * precision (undocumented): a loose 2^-13 per addition */
  double u_acc = gt_fp8(c->dtype) && c->accum == TPLA_FP8_ACCUM_FAST ? 0x1p-13 : 0x1p-24;
  double factor = (P + 4) * unit(c->d_dtype) + (ktot + 4) * u_acc, worst = 0, drift = 0;
  long long drift_n = 0;
  bool half = c->d_dtype == TPLA_FLOAT16 || c->d_dtype == TPLA_BFLOAT16;
  for (int64_t i = 0; i < in->drows[r]; i++)
    for (int64_t j = 0; j < c->n; j++) {
      double s = 0, sa = 0;
      int64_t gi = in->doff[r] + i;
      for (int q = 0; q < P; q++) {
        int64_t k = c->kind == 0 ? c->k[0] : c->k[q], row = gi;
        const double *a = in->a[q], *b = c->kind == 0 ? in->b[r] : in->b[q];
        if (c->kind == 0) { /* the gathered row gi lives on rank q if it is in q's block */
          int64_t base = 0;
          for (int t = 0; t < q; t++)
            base += c->rows[t];
          if (gi < base || gi >= base + c->rows[q])
            continue;
          row = gi - base;
        }
        double sc = gt_a_scale(c, q) * gt_b_scale(c);
        for (int64_t p = 0; p < k; p++) {
          double bv = c->op_b == TPLA_OP_N ? b[p * c->n + j] : b[j * k + p];
          double x = sc * sign * a[row * k + p] * bv;
          s += x;
          sa += fabs(x);
        }
      }
      double d0 = in->d0[r][i * c->n + j], bias = c->bias ? in->bias[r][j] : 0;
      double ref = c->alpha * s + c->beta * d0 + bias;
      double scale = fabs(c->alpha) * sa + fabs(c->beta * d0) + fabs(bias) + 1e-30;
      double err = fabs(d[i * c->n + j] - ref) / (factor * scale);
      worst = isnan(err) ? INFINITY : fmax(worst, err);
      if (half && err <= 1.0 && ktot >= 4 && fabs(c->alpha * s) >= 0.5 * scale &&
          fabs(ref) >= 0.5 * scale && fabs(ref) >= 0x1p-14) { /* why: test_overlap_fuzz.c */
        double signed_err = (d[i * c->n + j] - ref) * (ref > 0 ? 1.0 : -1.0);
        drift += signed_err / (unit(c->d_dtype) * fabs(ref));
        drift_n++;
      }
    }
  gt_drift_add(drift, drift_n);
  return worst;
}

static inline void describe(const gcase_t *c, int P) {
  fprintf(stderr, "  case %s P=%d %s->%s op_b=%c mode=%d transport=%d chunks=%d bias=%d pad=%d "
          "alpha=%g beta=%g rows0=%lld k0=%lld n=%lld calls=%d seed=%llu\n",
          kind_name(c->kind), P, tpla_dtype_name(c->dtype), tpla_dtype_name(c->d_dtype),
          c->op_b == TPLA_OP_N ? 'N' : 'T', (int)c->mode, (int)c->transport, c->chunks, c->bias,
          c->pad, (double)c->alpha, (double)c->beta, (long long)c->rows[0], (long long)c->k[0],
          (long long)c->n, c->calls, (unsigned long long)c->seed);
}

/* The plan inside a public handle, for the hang report. */
static inline const ovl_plan_t *gt_plan_of(tpla_ag_gemm_plan_t ag, tpla_gemm_rs_plan_t rs,
                                           tpla_gemm_ar_plan_t ar) {
  return ag ? &ag->p : rs ? &rs->p : ar ? &ar->p : NULL;
}

/* One case on one rank; returns failures. Collective: every rank passes
 * the same plan creation, calls, barriers and syncs whatever failed (a
 * rank that stops calling leaves its peers waiting: the hang report ends
 * the process then). */
static inline int run_case(gt_rank_t *r, const gcase_t *c, tpla_overlap_info_t *info_out) {
  const int P = r->nranks, me = r->rank;
  int failures = 0;
  char label[160];
  snprintf(label, sizeof label, "%s %s->%s op_b %c %s transport %d chunks %d calls %d seed %llu",
           kind_name(c->kind), tpla_dtype_name(c->dtype), tpla_dtype_name(c->d_dtype),
           c->op_b == TPLA_OP_N ? 'N' : 'T', c->mode == TPLA_OVERLAP_SERIAL ? "SERIAL" : "OVERLAP",
           (int)c->transport, c->chunks, c->calls, (unsigned long long)c->seed);
  gt_step(r, "case %s: uploads", label);
  inputs_t in;
  make_inputs(c, P, &in);
  int64_t k = c->kind == 0 ? c->k[0] : c->k[me];
  tpla_matrix_t a[2], b, d, d0, bias;
  double *neg = malloc(sizeof *neg * (size_t)(in.arows[me] * k + 1));
  for (int64_t i = 0; i < in.arows[me] * k; i++)
    neg[i] = -in.a[me][i];
  a[0] = gt_upload(in.a[me], in.arows[me], k, c->pad, c->dtype, &failures);
  a[1] = gt_upload(neg, in.arows[me], k, c->pad, c->dtype, &failures);
  b = c->op_b == TPLA_OP_N ? gt_upload(in.b[me], k, c->n, c->pad, gt_b_dtype(c), &failures)
                           : gt_upload(in.b[me], c->n, k, c->pad, gt_b_dtype(c), &failures);
  /* A, B, d_amax: 16 bytes apart (cuBLASLt's scale pointers) */
  const double scales[9] = {gt_a_scale(c, me), 0, 0, 0, gt_b_scale(c), 0, 0, 0, -1.0};
  tpla_matrix_t sc = gt_upload(scales, 1, 9, 0, TPLA_FLOAT32, &failures);
  d = gt_upload(in.d0[me], in.drows[me], c->n, c->pad, c->d_dtype, &failures);
  d0 = gt_upload(in.d0[me], in.drows[me], c->n, c->pad, c->d_dtype, &failures); /* for resets */
  bias = gt_upload(in.bias[me], 1, c->n, 0, c->d_dtype, &failures);
  free(neg);
  /* a pageable cudaMemcpy may return before its DMA lands, and the calls
   * run on non-blocking streams; nothing else runs on this GPU now */
  failures += CUDA_FAILED(cudaDeviceSynchronize());
  gt_barrier_at(r, "after the uploads"); /* no rank allocates while a peer's exchange spins */
  tpla_ag_gemm_plan_t ag = NULL;
  tpla_gemm_rs_plan_t rs = NULL;
  tpla_gemm_ar_plan_t ar = NULL;
  tpla_status_t st;
  gt_step(r, "create plan");
  if (c->kind == 0) {
    tpla_ag_gemm_desc_t x = TPLA_AG_GEMM_DESC_INIT;
    x.local_rows = c->rows[me], x.k = k, x.n = c->n, x.op_b = c->op_b, x.dtype = c->dtype;
    x.d_dtype = c->d_dtype, x.bias = c->bias, x.mode = c->mode, x.transport = c->transport;
    x.chunks = c->chunks;
    st = tpla_ag_gemm_plan_create(&ag, r->ctx, &x);
  } else if (c->kind == 1) {
    tpla_gemm_rs_desc_t x = TPLA_GEMM_RS_DESC_INIT;
    x.m = c->m, x.local_rows = c->even_split ? -1 : c->rows[me], x.k = k, x.n = c->n;
    x.op_b = c->op_b;
    x.dtype = c->dtype, x.d_dtype = c->d_dtype, x.bias = c->bias, x.mode = c->mode;
    x.transport = c->transport, x.chunks = c->chunks;
    st = tpla_gemm_rs_plan_create(&rs, r->ctx, &x);
  } else {
    tpla_gemm_ar_desc_t x = TPLA_GEMM_AR_DESC_INIT;
    x.m = c->m, x.k = k, x.n = c->n, x.op_b = c->op_b, x.dtype = c->dtype;
    x.d_dtype = c->d_dtype, x.bias = c->bias, x.mode = c->mode, x.transport = c->transport;
    x.chunks = c->chunks;
    st = tpla_gemm_ar_plan_create(&ar, r->ctx, &x);
  }
  failures += TPLA_FAILED(st);
  gw_plan(gt_watch(r), me, gt_plan_of(ag, rs, ar));
  gt_step(r, "plan created: %s", tpla_status_string(st));
  tpla_overlap_args_t args = TPLA_OVERLAP_ARGS_INIT;
  args.alpha = c->alpha, args.beta = c->beta, args.bias = c->bias ? bias.data : NULL;
  if (gt_fp8(c->dtype)) {
    float *sv = sc.data;
    args.fp8.a_scale = sv, args.fp8.b_scale = sv + 4, args.fp8.accum = c->accum;
    args.fp8.d_amax = c->amax ? sv + 8 : NULL;
  }
  size_t ws_early = 0, ws_late = 0;
  size_t d_bytes = (size_t)(in.drows[me] > 0 ? in.drows[me] : 1) * d.ld *
                   tpla_dtype_size(c->d_dtype);
  bool chatty = c->calls <= 10; /* 200 back-to-back calls: one line for all */
  /* Past ten calls, the steady state: device memory may not grow from call 10 to the end
   * (gpu_steady_t). While a rank needs another window, one more of as many calls, an even
   * number so that the last call's sign stays; not across processes, which have no vote. */
  const int steady_from = 10, window_calls = (c->calls - steady_from + 1) / 2 * 2;
  const bool may_repeat = r->team != NULL || P == 1;
  gpu_steady_t g = {0};
  int begin = steady_from, end = c->calls;
  for (int call = 0;;) {
    for (; st == TPLA_SUCCESS && failures == 0 && call < end; call++) {
      if (call == begin && c->calls > steady_from) {
        failures += gt_sync(r, "the first ten calls");
        failures += gpu_steady_begin(&g);
        tpla_ctx_workspace_bytes(r->ctx, &ws_early);
      }
      if (args.fp8.d_amax != NULL) /* 3.4e38, above any result: the amax is overwritten */
        failures += CUDA_FAILED(cudaMemsetAsync(args.fp8.d_amax, 0x7F, 4, r->stream));
      if (call > 0 && c->beta != 0.0f) /* D back to D0 (stream-ordered): every call sees it */
        failures += CUDA_FAILED(cudaMemcpyAsync(d.data, d0.data, d_bytes,
                                                cudaMemcpyDeviceToDevice, r->stream));
      if (chatty || call == 0)
        gt_step(r, "call %d of %d", call + 1, end);
      tpla_matrix_t av = a[call % 2];
      st = c->kind == 0   ? tpla_ag_gemm(ag, d, av, b, &args, r->stream)
           : c->kind == 1 ? tpla_gemm_rs(rs, d, av, b, &args, r->stream)
                          : tpla_gemm_ar(ar, d, av, b, &args, r->stream);
      failures += TPLA_FAILED(st);
      if (chatty)
        gt_step(r, "call %d enqueued: %s", call + 1, tpla_status_string(st));
    }
    failures += gt_sync(r, "the calls");
    if (c->calls <= steady_from)
      break;
    if (failures == 0) {
      failures += gpu_steady_end(&g, me);
      tpla_ctx_workspace_bytes(r->ctx, &ws_late);
    }
    /* 1: some rank needs another window; 2: some rank failed or its context workspace
     * (the library's own count, which no other process moves) changed: every rank stops */
    int vote = gt_any(r, failures || ws_late != ws_early ? 2 : gpu_steady_more(&g));
    if (vote != 1 || !may_repeat)
      break;
    begin = end, end += window_calls;
  }
  if (c->calls > steady_from && failures == 0 &&
      (!gpu_steady_ok(&g, me) || ws_late != ws_early)) {
    fprintf(stderr, "  rank %d: device memory grew over the calls: free %zu -> %zu (the last "
            "window), context workspace %zu -> %zu\n", me, g.before, g.after, ws_early,
            ws_late);
    failures++;
  }
  gt_step(r, "check against float64");
  double sign = c->calls % 2 ? 1.0 : -1.0;
  if (failures == 0) {
    double *out = gt_download(d, &failures);
    double worst = check_output(c, P, me, &in, out, sign);
    if (!(worst <= 1.0)) {
      fprintf(stderr, "  rank %d: error %.3g x the rounding bound\n", me, worst);
      failures++;
    }
    if (gt_fp8(c->dtype) && c->amax && failures == 0) { /* d_amax = max |D| exactly */
      double *sv = gt_download(sc, &failures), want = 0;
      for (int64_t i = 0; i < in.drows[me] * c->n; i++)
        want = fmax(want, fabs(out[i]));
      if (sv[8] != want) {
        fprintf(stderr, "  rank %d: d_amax %g, max |D| %g\n", me, sv[8], want);
        failures++;
      }
      free(sv);
    }
    if (gt_fp8(c->dtype) && r->rank == 0)
      printf("# FP8 %s %s accumulation: error %.3g of the bound (u_acc %s)\n", kind_name(c->kind),
             c->accum == TPLA_FP8_ACCUM_FAST ? "fast" : "split", worst,
             c->accum == TPLA_FP8_ACCUM_FAST ? "2^-13" : "2^-24");
    free(out);
  }
  if (failures == 0 && c->kind == 0) { /* the gathered view, bit for bit */
    tpla_matrix_t g;
    int has = 0;
    failures += TPLA_FAILED(tpla_ag_gemm_plan_has_gathered(ag, &has)) || !has;
    failures += TPLA_FAILED(tpla_ag_gemm_gathered(ag, &g));
    if (failures == 0) {
      double *gv = gt_download(g, &failures);
      int64_t base = 0;
      for (int q = 0; q < P; q++) {
        for (int64_t i = 0; i < c->rows[q] * k && failures == 0; i++)
          if (gv[base * k + i] != sign * in.a[q][i]) {
            fprintf(stderr, "  rank %d: gathered element %lld of rank %d's block differs\n", me,
                    (long long)i, q);
            failures++;
          }
        base += c->rows[q];
      }
      free(gv);
    }
    const float *scales = NULL; /* FP8: every rank's A scale next to its rows */
    if (failures == 0 && gt_fp8(c->dtype) &&
        !TPLA_FAILED(tpla_ag_gemm_gathered_scales(ag, &scales))) {
      const int stride = TPLA_FP8_SCALE_STRIDE;
      tpla_matrix_t sv = {(void *)scales, 1, P * stride, P * stride, TPLA_FLOAT32};
      double *got = gt_download(sv, &failures);
      for (int q = 0; q < P && failures == 0; q++)
        if (c->rows[q] > 0 && got[q * stride] != gt_a_scale(c, q)) {
          fprintf(stderr, "  rank %d: gathered scale of rank %d is %g, not %g\n", me, q,
                  got[q * stride], gt_a_scale(c, q));
          failures++;
        }
      free(got);
    } else if (gt_fp8(c->dtype)) {
      failures++;
    }
  }
  if (info_out != NULL && st == TPLA_SUCCESS) {
    *info_out = (tpla_overlap_info_t)TPLA_OVERLAP_INFO_INIT;
    if (c->kind == 0)
      tpla_ag_gemm_plan_get_info(ag, info_out);
    else if (c->kind == 1)
      tpla_gemm_rs_plan_get_info(rs, info_out);
    else
      tpla_gemm_ar_plan_get_info(ar, info_out);
  }
  /* every rank's calls are complete before any plan goes (a context
   * collective: works for threads and for processes) */
  gt_step(r, "tpla_barrier before destroying the plan");
  failures += TPLA_FAILED(tpla_barrier(r->ctx, r->stream));
  failures += gt_sync(r, "tpla_barrier");
  gw_plan(gt_watch(r), me, NULL);
  gt_step(r, "destroy plan, free buffers");
  tpla_ag_gemm_plan_destroy(ag);
  tpla_gemm_rs_plan_destroy(rs);
  tpla_gemm_ar_plan_destroy(ar);
  cudaFree(a[0].data), cudaFree(a[1].data), cudaFree(b.data), cudaFree(d.data);
  cudaFree(d0.data), cudaFree(bias.data), cudaFree(sc.data);
  free_inputs(&in);
  /* cudaFree waits for the peer GPUs: no rank's next collective may start
   * (and spin, waiting for this one) before every rank is out of it */
  gt_barrier_at(r, "after the frees");
  gt_step(r, "case done: %d failure%s", failures, failures == 1 ? "" : "s");
  if (failures)
    describe(c, P);
  return failures;
}

#endif /* TPLA_TEST_GPU_OVERLAP_UTIL_H */
