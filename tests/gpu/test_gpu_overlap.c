/*
 * test_gpu_overlap.c - AllGather+GEMM, GEMM+ReduceScatter and GEMM+AllReduce
 * on the CUDA executor, one thread per GPU (1 GPU, then 2 if present),
 * against a float64 reference within the rounding-error bound of every
 * element: bf16/fp16/fp32 inputs, op(B) = N and T, even and uneven slices
 * (an empty one included), bias, alpha/beta (beta = 1 accumulates), fp32
 * outputs of half inputs, padded and misaligned leading dimensions, 1 to 3
 * chunks and automatic chunking, the PEER (copy engines) and SENDRECV
 * (NCCL) transports and SERIAL mode, several calls per plan with A negated
 * between them, and the gathered view bit for bit. Then 200 calls enqueued
 * back to back with no host synchronization (the per-call flags and the
 * back-pressure must keep them apart) with no device memory growth, and the
 * transport the plans resolve to (printed: PEER expected on NVLink peers).
 *
 * Run: build/tests/test_gpu_overlap (exits 77 without a GPU). A hang is
 * turned into a failure by a watchdog (TPLA_TEST_NO_WATCHDOG=1 disarms it,
 * e.g. under compute-sanitizer, with TPLA_TEST_QUICK=1 for a subset).
 */
#include "test.h"
#include "tpla.h"

#ifdef TPLA_HAVE_CUDA
#include "test_gpu_overlap_util.h"

static uint64_t seed;
/* TPLA_TEST_QUICK=1 (e.g. under compute-sanitizer): bf16 and op(B) = N only,
 * 20 back-to-back calls */
static int quick;

typedef struct {
  int kind; /* 0 AG, 1 RS, 2 AR */
  tpla_dtype_t dtype, d_dtype;
  tpla_op_t op_b;
  tpla_overlap_mode_t mode;
  tpla_transport_t transport;
  int chunks, bias, pad, calls;
  float alpha, beta;
  int64_t rows[GT_MAX_RANKS]; /* AG: local rows; RS: slice rows */
  int64_t m, k[GT_MAX_RANKS], n;
  uint64_t seed;
} gcase_t;

static const char *kind_name(int k) { return k == 0 ? "AG+GEMM" : k == 1 ? "GEMM+RS" : "GEMM+AR"; }

/* Every rank's inputs, generated identically on every rank. */
typedef struct {
  double *a[GT_MAX_RANKS], *b[GT_MAX_RANKS], *bias[GT_MAX_RANKS], *d0[GT_MAX_RANKS];
  int64_t m, arows[GT_MAX_RANKS], drows[GT_MAX_RANKS], doff[GT_MAX_RANKS];
} inputs_t;

static void make_inputs(const gcase_t *c, int P, inputs_t *in) {
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
    in->b[q] = gt_random(&g, k * c->n, c->dtype);
    in->bias[q] = gt_random(&g, c->n, c->d_dtype);
    in->d0[q] = gt_random(&g, in->drows[q] * c->n, c->d_dtype);
  }
}

static void free_inputs(inputs_t *in) {
  for (int q = 0; q < GT_MAX_RANKS; q++)
    free(in->a[q]), free(in->b[q]), free(in->bias[q]), free(in->d0[q]);
}

static double unit(tpla_dtype_t t) { return unit_roundoff(t); }

/* Max over rank r's output of |d - ref| / bound (> 1: wrong). sign: of A. */
static double check_output(const gcase_t *c, int P, int r, const inputs_t *in, const double *d,
                           double sign) {
  int64_t ktot = 0;
  for (int q = 0; q < P; q++)
    ktot += c->kind == 0 ? 0 : c->k[q];
  ktot = c->kind == 0 ? c->k[0] : ktot;
  double factor = (P + 4) * unit(c->d_dtype) + (ktot + 4) * 0x1p-24, worst = 0;
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
        for (int64_t p = 0; p < k; p++) {
          double bv = c->op_b == TPLA_OP_N ? b[p * c->n + j] : b[j * k + p];
          double x = sign * a[row * k + p] * bv;
          s += x;
          sa += fabs(x);
        }
      }
      double d0 = in->d0[r][i * c->n + j], bias = c->bias ? in->bias[r][j] : 0;
      double ref = c->alpha * s + c->beta * d0 + bias;
      double scale = fabs(c->alpha) * sa + fabs(c->beta * d0) + fabs(bias) + 1e-30;
      double err = fabs(d[i * c->n + j] - ref) / (factor * scale);
      worst = isnan(err) ? INFINITY : fmax(worst, err);
    }
  return worst;
}

static void describe(const gcase_t *c, int P) {
  fprintf(stderr, "  case %s P=%d %s->%s op_b=%c mode=%d transport=%d chunks=%d bias=%d pad=%d "
          "alpha=%g beta=%g rows0=%lld k0=%lld n=%lld calls=%d seed=%llu\n",
          kind_name(c->kind), P, tpla_dtype_name(c->dtype), tpla_dtype_name(c->d_dtype),
          c->op_b == TPLA_OP_N ? 'N' : 'T', (int)c->mode, (int)c->transport, c->chunks, c->bias,
          c->pad, (double)c->alpha, (double)c->beta, (long long)c->rows[0], (long long)c->k[0],
          (long long)c->n, c->calls, (unsigned long long)c->seed);
}

/* One case on one rank; returns failures. Collective. */
static int run_case(gt_rank_t *r, const gcase_t *c, tpla_overlap_info_t *info_out) {
  const int P = r->nranks, me = r->rank;
  int failures = 0;
  inputs_t in;
  make_inputs(c, P, &in);
  int64_t k = c->kind == 0 ? c->k[0] : c->k[me];
  tpla_matrix_t a[2], b, d, bias;
  double *neg = malloc(sizeof *neg * (size_t)(in.arows[me] * k + 1));
  for (int64_t i = 0; i < in.arows[me] * k; i++)
    neg[i] = -in.a[me][i];
  a[0] = gt_upload(in.a[me], in.arows[me], k, c->pad, c->dtype, &failures);
  a[1] = gt_upload(neg, in.arows[me], k, c->pad, c->dtype, &failures);
  b = c->op_b == TPLA_OP_N ? gt_upload(in.b[me], k, c->n, c->pad, c->dtype, &failures)
                           : gt_upload(in.b[me], c->n, k, c->pad, c->dtype, &failures);
  d = gt_upload(in.d0[me], in.drows[me], c->n, c->pad, c->d_dtype, &failures);
  bias = gt_upload(in.bias[me], 1, c->n, 0, c->d_dtype, &failures);
  free(neg);
  tpla_ag_gemm_plan_t ag = NULL;
  tpla_gemm_rs_plan_t rs = NULL;
  tpla_gemm_ar_plan_t ar = NULL;
  tpla_status_t st;
  if (c->kind == 0) {
    tpla_ag_gemm_desc_t x = TPLA_AG_GEMM_DESC_INIT;
    x.local_rows = c->rows[me], x.k = k, x.n = c->n, x.op_b = c->op_b, x.dtype = c->dtype;
    x.d_dtype = c->d_dtype, x.bias = c->bias, x.mode = c->mode, x.transport = c->transport;
    x.chunks = c->chunks;
    st = tpla_ag_gemm_plan_create(&ag, r->ctx, &x);
  } else if (c->kind == 1) {
    tpla_gemm_rs_desc_t x = TPLA_GEMM_RS_DESC_INIT;
    x.m = c->m, x.local_rows = c->rows[me], x.k = k, x.n = c->n, x.op_b = c->op_b;
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
  tpla_overlap_args_t args = TPLA_OVERLAP_ARGS_INIT;
  args.alpha = c->alpha, args.beta = c->beta, args.bias = c->bias ? bias.data : NULL;
  size_t free_early = 0, free_late = 0, total = 0, ws_early = 0, ws_late = 0;
  for (int call = 0; st == TPLA_SUCCESS && failures == 0 && call < c->calls; call++) {
    if (call == 10 && c->calls > 10) { /* steady state: memory must not move from here */
      failures += sync_stream_timeout(r->stream, 120, "the first ten calls");
      failures += CUDA_FAILED(cudaMemGetInfo(&free_early, &total));
      tpla_ctx_workspace_bytes(r->ctx, &ws_early);
    }
    if (call > 0 && c->beta != 0.0f) { /* D back to D0, so every call sees the same D */
      tpla_matrix_t d0 = gt_upload(in.d0[me], in.drows[me], c->n, c->pad, c->d_dtype, &failures);
      size_t bytes = (size_t)(in.drows[me] > 0 ? in.drows[me] : 1) * d.ld *
                     tpla_dtype_size(c->d_dtype);
      failures += CUDA_FAILED(cudaMemcpyAsync(d.data, d0.data, bytes, cudaMemcpyDeviceToDevice,
                                              r->stream));
      failures += sync_stream_timeout(r->stream, 120, "reset of D");
      cudaFree(d0.data);
    }
    tpla_matrix_t av = a[call % 2];
    st = c->kind == 0   ? tpla_ag_gemm(ag, d, av, b, &args, r->stream)
         : c->kind == 1 ? tpla_gemm_rs(rs, d, av, b, &args, r->stream)
                        : tpla_gemm_ar(ar, d, av, b, &args, r->stream);
    failures += TPLA_FAILED(st);
  }
  failures += sync_stream_timeout(r->stream, 120, kind_name(c->kind));
  if (c->calls > 10 && failures == 0) {
    failures += CUDA_FAILED(cudaMemGetInfo(&free_late, &total));
    tpla_ctx_workspace_bytes(r->ctx, &ws_late);
    if (free_late != free_early || ws_late != ws_early) {
      fprintf(stderr, "  rank %d: device memory moved over %d calls: free %zu -> %zu, context "
              "workspace %zu -> %zu\n", me, c->calls - 10, free_early, free_late, ws_early,
              ws_late);
      failures++;
    }
  }
  double sign = c->calls % 2 ? 1.0 : -1.0;
  if (failures == 0) {
    double *out = gt_download(d, &failures);
    double worst = check_output(c, P, me, &in, out, sign);
    if (!(worst <= 1.0)) {
      fprintf(stderr, "  rank %d: error %.3g x the rounding bound\n", me, worst);
      failures++;
    }
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
  gt_barrier(r); /* every rank's calls are complete before any plan goes */
  tpla_ag_gemm_plan_destroy(ag);
  tpla_gemm_rs_plan_destroy(rs);
  tpla_gemm_ar_plan_destroy(ar);
  cudaFree(a[0].data), cudaFree(a[1].data), cudaFree(b.data), cudaFree(d.data);
  cudaFree(bias.data);
  free_inputs(&in);
  if (failures)
    describe(c, P);
  return failures;
}

/* ---- the cases --------------------------------------------------------------------------- */

#define VARIANTS 5
#define MAX_CASES (3 * 3 * 2 * VARIANTS)

static void set_sizes(gcase_t *c, int P, int64_t r0, int64_t r1, int64_t k0, int64_t k1,
                      int64_t n) {
  c->m = 0;
  for (int q = 0; q < P; q++) {
    c->rows[q] = q == 0 ? r0 : r1;
    c->k[q] = c->kind == 0 ? k0 : (q == 0 ? k0 : k1);
    c->m += c->rows[q];
  }
  c->n = n;
}

/* Five variants of every operation, dtype and op(B); see the switch. */
static int make_cases(int P, gcase_t *out) {
  static const tpla_dtype_t dtypes[3] = {TPLA_BFLOAT16, TPLA_FLOAT16, TPLA_FLOAT32};
  int count = 0;
  for (int kind = 0; kind < 3; kind++)
    for (int di = 0; di < (quick ? 1 : 3); di++)
      for (int op = 0; op < (quick ? 1 : 2); op++)
        for (int v = 0; v < VARIANTS; v++) {
          gcase_t c;
          memset(&c, 0, sizeof c);
          c.kind = kind;
          c.dtype = c.d_dtype = dtypes[di];
          c.op_b = op ? TPLA_OP_T : TPLA_OP_N;
          c.alpha = 1.0f;
          c.calls = 1;
          c.mode = TPLA_OVERLAP_OVERLAP;
          c.transport = TPLA_TRANSPORT_AUTO;
          c.seed = seed + 7919ull * (uint64_t)count;
          switch (v) {
          case 0: /* even slices, one chunk */
            c.chunks = 1;
            set_sizes(&c, P, 256, 256, 192, 192, 160);
            break;
          case 1: /* uneven, three chunks, bias, accumulate, padded rows, three calls */
            c.chunks = 3, c.bias = 1, c.beta = 1.0f, c.pad = 8, c.calls = 3;
            set_sizes(&c, P, 300, 212, 136, 72, 200);
            break;
          case 2: /* NCCL send/recv transport, an empty slice, 128-row chunks */
            c.transport = P > 1 ? TPLA_TRANSPORT_SENDRECV : TPLA_TRANSPORT_AUTO;
            c.chunks = 2, c.bias = 1, c.alpha = -1.5f, c.beta = 0.5f, c.calls = 2;
            set_sizes(&c, P, 520, 0, 64, 160, 96);
            break;
          case 3: /* the serial reference mode */
            c.mode = TPLA_OVERLAP_SERIAL, c.bias = 1, c.beta = 1.0f, c.calls = 2;
            set_sizes(&c, P, 129, 383, 200, 56, 144);
            break;
          default: /* automatic chunks, fp32 output, odd leading dimensions */
            c.chunks = 0, c.alpha = 0.5f, c.pad = 3;
            c.d_dtype = TPLA_FLOAT32;
            set_sizes(&c, P, 256, 256, 100, 100, 120);
            break;
          }
          out[count++] = c;
        }
  return count;
}

static const char *transport_name(tpla_transport_t t) {
  return t == TPLA_TRANSPORT_PEER ? "PEER" : t == TPLA_TRANSPORT_SENDRECV ? "SENDRECV" : "NONE";
}

static int cases_body(gt_rank_t *r, void *arg) {
  gcase_t *cases = malloc(sizeof *cases * MAX_CASES);
  if (cases == NULL)
    return 1;
  int n = make_cases(r->nranks, cases), failures = 0;
  for (int i = 0; i < n; i++) {
    tpla_overlap_info_t info = TPLA_OVERLAP_INFO_INIT;
    failures += run_case(r, &cases[i], &info);
    if (r->rank == 0 && cases[i].dtype == TPLA_BFLOAT16 && cases[i].op_b == TPLA_OP_N)
      printf("# %d GPU%s %s variant %d: mode %s, transport %s, chunks %d, workspace %zu\n",
             r->nranks, r->nranks > 1 ? "s" : "", kind_name(cases[i].kind), i % VARIANTS,
             info.mode == TPLA_OVERLAP_SERIAL ? "SERIAL" : "OVERLAP",
             transport_name(info.transport), info.chunks, info.workspace_bytes);
  }
  free(cases);
  return failures;
}

static void run_cases(int P) {
  if (gpu_count() < P)
    SKIP("needs %d GPUs, found %d", P, gpu_count());
  ASSERT_EQ_INT(gt_run(P, cases_body, NULL), 0);
}

static void test_cases_1gpu(void) { run_cases(1); }
static void test_cases_2gpus(void) { run_cases(2); }

/* 200 calls per plan enqueued with no host synchronization between them
 * (A and -A alternate; the last one is checked), no device memory growth. */
static int back_to_back_body(gt_rank_t *r, void *arg) {
  int failures = 0;
  for (int kind = 0; kind < 3; kind++) {
    gcase_t c;
    memset(&c, 0, sizeof c);
    c.kind = kind;
    c.dtype = c.d_dtype = TPLA_BFLOAT16;
    c.op_b = TPLA_OP_T;
    c.alpha = 1.0f;
    c.mode = TPLA_OVERLAP_OVERLAP;
    c.chunks = 4;
    c.bias = 1;
    c.calls = quick ? 20 : 200;
    c.seed = seed + 31ull * (uint64_t)kind;
    set_sizes(&c, r->nranks, 1024, 768, 512, 384, 384);
    tpla_overlap_info_t info = TPLA_OVERLAP_INFO_INIT;
    failures += run_case(r, &c, &info);
    if (r->rank == 0)
      printf("# back to back, %d GPU%s, %s: transport %s, chunks %d\n", r->nranks,
             r->nranks > 1 ? "s" : "", kind_name(kind), transport_name(info.transport),
             info.chunks);
  }
  return failures;
}

static void test_back_to_back_calls(void) {
  int P = gpu_count() >= 2 ? 2 : 1;
  ASSERT_EQ_INT(gt_run(P, back_to_back_body, NULL), 0);
}

/* Two GPUs that are peers: AUTO resolves to PEER and a forced PEER works;
 * otherwise AUTO resolves to SENDRECV and a forced PEER is NOT_SUPPORTED. */
typedef struct {
  int can_peer;
  tpla_status_t forced[2];
  tpla_transport_t resolved[2];
} choice_t;

static int choice_body(gt_rank_t *r, void *arg) {
  choice_t *ch = arg;
  tpla_ag_gemm_desc_t x = TPLA_AG_GEMM_DESC_INIT;
  x.local_rows = 64, x.k = 64, x.n = 64, x.dtype = x.d_dtype = TPLA_BFLOAT16;
  tpla_ag_gemm_plan_t p = NULL;
  int failures = TPLA_FAILED(tpla_ag_gemm_plan_create(&p, r->ctx, &x));
  tpla_overlap_info_t info = TPLA_OVERLAP_INFO_INIT;
  if (p != NULL)
    tpla_ag_gemm_plan_get_info(p, &info);
  ch->resolved[r->rank] = info.transport;
  tpla_ag_gemm_plan_destroy(p);
  p = NULL;
  x.transport = TPLA_TRANSPORT_PEER;
  ch->forced[r->rank] = tpla_ag_gemm_plan_create(&p, r->ctx, &x);
  if (ch->forced[r->rank] != TPLA_SUCCESS)
    printf("# forced PEER on rank %d: %s\n", r->rank, tpla_last_error());
  tpla_ag_gemm_plan_destroy(p);
  return failures;
}

static void test_transport_choice(void) {
  if (gpu_count() < 2)
    SKIP("needs 2 GPUs");
  choice_t ch;
  memset(&ch, 0, sizeof ch);
  ASSERT_OK(tpla_device_peer_access(&ch.can_peer, 0, 1));
  ASSERT_EQ_INT(gt_run(2, choice_body, &ch), 0);
  printf("# GPUs 0 and 1 %s peers: AUTO resolved to %s\n", ch.can_peer ? "are" : "are not",
         transport_name(ch.resolved[0]));
  for (int q = 0; q < 2; q++) {
    ASSERT_EQ_INT(ch.resolved[q], ch.can_peer ? TPLA_TRANSPORT_PEER : TPLA_TRANSPORT_SENDRECV);
    ASSERT_EQ_INT(ch.forced[q], ch.can_peer ? TPLA_SUCCESS : TPLA_ERROR_NOT_SUPPORTED);
  }
}

static void test_requires_gpu(void) { SKIP("no CUDA device (cudaGetDeviceCount gives 0)"); }

int main(void) {
  if (gpu_count() == 0) {
    TEST(test_requires_gpu);
    return test_summary();
  }
  seed = gpu_fresh_seed("test_gpu_overlap");
  quick = getenv("TPLA_TEST_QUICK") != NULL;
  watchdog_arm("test_gpu_overlap", 1500);
  TEST(test_transport_choice);
  TEST(test_cases_1gpu);
  TEST(test_cases_2gpus);
  TEST(test_back_to_back_calls);
  return test_summary();
}

#else /* a build without the CUDA executor */

static void test_requires_cuda_build(void) { SKIP("built without the CUDA executor"); }

int main(void) {
  TEST(test_requires_cuda_build);
  return test_summary();
}
#endif
