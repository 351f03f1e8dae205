/*
 * test_gpu_overlap_mlp.c - a tensor-parallel MLP forward and backward on 1
 * and 2 GPUs (one thread per GPU): sequence-parallel input x, a
 * column-parallel linear (W1 split by output features) then a row-parallel
 * one (W2 split by input features), no activation:
 *   forward   h_p   = AG(x) W1_p^T     tpla_ag_gemm (gathers x)
 *             y_p   = RS(h_p W2_p^T)   tpla_gemm_rs
 *   backward  dh_p  = AG(dy) W2_p      tpla_ag_gemm (gathers dy)
 *             dW2_p = AG(dy)^T h_p     tpla_gemm on tpla_ag_gemm_gathered: the gathered dy
 *             dx_p  = RS(dh_p W1_p)    tpla_gemm_rs
 *             dW1_p = dh_p^T AG(x)     tpla_gemm on the forward plan's gathered x
 * Every shard is compared with the same MLP computed on one GPU with plain
 * tpla_gemm calls on whole matrices (within a few roundings of the dtype,
 * relative to the output's largest element), for bf16 and fp32, with
 * uneven sequence and feature splits; the context counters must show one
 * all-gather and one reduce-scatter per pass: the wgrads gather nothing.
 * A warm-up runs each wgrad GEMM once first (why: see tp_body), on -x and -dy, and the
 * outputs are NaN before the checked pass: nothing it leaves passes for a result.
 *
 * Run: build/tests/test_gpu_overlap_mlp (exits 77 without a GPU).
 */
#include "test.h"
#include "tpla.h"

#ifdef TPLA_HAVE_CUDA
#include "test_gpu_overlap_util.h"

#define S 1000
#define H 512
#define F 1536
#define NOUT 6 /* h, y, dh, dW2, dx, dW1 */

static const char *out_name[NOUT] = {"h", "y", "dh", "dW2", "dx", "dW1"};

typedef struct {
  tpla_dtype_t dtype;
  int P;
  int64_t s_rows[2], s_off[2], f_cols[2], f_off[2];
  double *X, *W1, *W2, *dY;    /* global inputs, exact in dtype */
  double *full[NOUT];          /* the single-GPU results (whole matrices) */
  double *shard[2][NOUT];      /* each rank's results */
  uint64_t gathers[2][2], reduce_scatters[2][2]; /* [rank][pass] */
} mlp_t;

/* Rows [r0, r0+rows) x cols [c0, c0+cols) of a row-major global (ld). */
static double *block(const double *g, int64_t ld, int64_t r0, int64_t rows, int64_t c0,
                     int64_t cols) {
  double *v = malloc(sizeof *v * (size_t)(rows * cols + 1));
  for (int64_t i = 0; i < rows; i++)
    memcpy(v + i * cols, g + (r0 + i) * ld + c0, sizeof *v * (size_t)cols);
  return v;
}

static tpla_matrix_t dev(const double *h, int64_t rows, int64_t cols, tpla_dtype_t t, int *f) {
  return gt_upload(h, rows, cols, 0, t, f);
}

/* ---- the single-GPU computation --------------------------------------------------- */

static int single_body(gt_rank_t *r, void *arg) {
  mlp_t *m = arg;
  int f = 0;
  tpla_dtype_t t = m->dtype;
  tpla_matrix_t x = dev(m->X, S, H, t, &f), w1 = dev(m->W1, F, H, t, &f);
  tpla_matrix_t w2 = dev(m->W2, H, F, t, &f), dy = dev(m->dY, S, H, t, &f);
  tpla_matrix_t o[NOUT] = {dev(NULL, S, F, t, &f), dev(NULL, S, H, t, &f), dev(NULL, S, F, t, &f),
                           dev(NULL, H, F, t, &f), dev(NULL, S, H, t, &f), dev(NULL, F, H, t, &f)};
  void *st = r->stream;
  const tpla_op_t N = TPLA_OP_N, T = TPLA_OP_T;
  f += TPLA_FAILED(tpla_gemm(r->ctx, o[0], x, N, w1, T, NULL, st));     /* h = x W1^T */
  f += TPLA_FAILED(tpla_gemm(r->ctx, o[1], o[0], N, w2, T, NULL, st));  /* y = h W2^T */
  f += TPLA_FAILED(tpla_gemm(r->ctx, o[2], dy, N, w2, N, NULL, st));    /* dh = dy W2 */
  f += TPLA_FAILED(tpla_gemm(r->ctx, o[3], dy, T, o[0], N, NULL, st));  /* dW2 = dy^T h */
  f += TPLA_FAILED(tpla_gemm(r->ctx, o[4], o[2], N, w1, N, NULL, st));  /* dx = dh W1 */
  f += TPLA_FAILED(tpla_gemm(r->ctx, o[5], o[2], T, x, N, NULL, st));   /* dW1 = dh^T x */
  f += sync_stream_timeout(r->stream, 120, "single-GPU MLP");
  for (int i = 0; i < NOUT; i++) {
    m->full[i] = f == 0 ? gt_download(o[i], &f) : NULL;
    cudaFree(o[i].data);
  }
  cudaFree(x.data), cudaFree(w1.data), cudaFree(w2.data), cudaFree(dy.data);
  return f;
}

/* ---- the tensor-parallel computation ------------------------------------------------ */

static int tp_body(gt_rank_t *r, void *arg) {
  mlp_t *m = arg;
  const int me = r->rank;
  const int64_t sp = m->s_rows[me], so = m->s_off[me], fp = m->f_cols[me], fo = m->f_off[me];
  tpla_dtype_t t = m->dtype;
  int f = 0;
  gt_step(r, "MLP: uploads");
  double *hx = block(m->X, H, so, sp, 0, H), *hw1 = block(m->W1, H, fo, fp, 0, H);
  double *hw2 = block(m->W2, F, 0, H, fo, fp), *hdy = block(m->dY, H, so, sp, 0, H);
  tpla_matrix_t x = dev(hx, sp, H, t, &f), w1 = dev(hw1, fp, H, t, &f);
  tpla_matrix_t w2 = dev(hw2, H, fp, t, &f), dy = dev(hdy, sp, H, t, &f);
  for (int64_t i = 0; i < sp * H; i++)
    hx[i] = -hx[i], hdy[i] = -hdy[i];
  /* the warm-up's inputs: -x and -dy, so that what it leaves behind (outputs, gathered
   * views) is wrong for the pass that is checked */
  tpla_matrix_t neg_x = dev(hx, sp, H, t, &f), neg_dy = dev(hdy, sp, H, t, &f);
  free(hx), free(hw1), free(hw2), free(hdy);
  tpla_matrix_t h = dev(NULL, S, fp, t, &f), y = dev(NULL, sp, H, t, &f);
  tpla_matrix_t dh = dev(NULL, S, fp, t, &f), dw2 = dev(NULL, H, fp, t, &f);
  tpla_matrix_t dx = dev(NULL, sp, H, t, &f), dw1 = dev(NULL, fp, H, t, &f);
  /* The uploads allocate and copy (pageable, synchronous) while a faster
   * peer would already be spinning in the first plan's exchange: in one
   * process that can wait on the peer's GPU, which waits on this rank --
   * the 20 s hang reported as "host barrier: after the contexts" (the last
   * step recorded; both ranks had passed it). Everyone finishes first. */
  f += CUDA_FAILED(cudaDeviceSynchronize());
  gt_barrier_at(r, "after the uploads");

  gt_step(r, "MLP: create the plans");
  tpla_ag_gemm_desc_t ag = TPLA_AG_GEMM_DESC_INIT;
  ag.local_rows = sp, ag.k = H, ag.n = fp, ag.op_b = TPLA_OP_T, ag.dtype = ag.d_dtype = t;
  tpla_gemm_rs_desc_t rs = TPLA_GEMM_RS_DESC_INIT;
  rs.m = S, rs.local_rows = sp, rs.k = fp, rs.n = H, rs.op_b = TPLA_OP_T;
  rs.dtype = rs.d_dtype = t;
  tpla_ag_gemm_plan_t fwd_ag = NULL, bwd_ag = NULL;
  tpla_gemm_rs_plan_t fwd_rs = NULL, bwd_rs = NULL;
  f += TPLA_FAILED(tpla_ag_gemm_plan_create(&fwd_ag, r->ctx, &ag));
  f += TPLA_FAILED(tpla_gemm_rs_plan_create(&fwd_rs, r->ctx, &rs));
  ag.op_b = TPLA_OP_N; /* dh = AG(dy) W2_p: W2_p is H x F_p */
  rs.op_b = TPLA_OP_N; /* dx = RS(dh_p W1_p): W1_p is F_p x H */
  f += TPLA_FAILED(tpla_ag_gemm_plan_create(&bwd_ag, r->ctx, &ag));
  f += TPLA_FAILED(tpla_gemm_rs_plan_create(&bwd_rs, r->ctx, &rs));
  void *st = r->stream;
  /* cuBLASLt loads a kernel's library (cuLibraryLoadData, whatever
   * CUDA_MODULE_LOADING says) at the first cublasLtMatmul of a
   * configuration, under a process-wide lock, and the load waits for the
   * device. Mid-backward that deadlocked (run 15): one rank's first wgrad
   * GEMM loaded while its GPU waited in GEMM+RS for the peer's partials, and
   * the peer's own first wgrad GEMM queued on that lock. So each wgrad GEMM
   * runs once on its plan's gathered view first, while no GPU waits. */
  for (int pass = 0; pass < 2 && f == 0; pass++) {
    gt_step(r, pass ? "MLP: warm-up, wgrad on x" : "MLP: warm-up, wgrad on dy");
    tpla_ag_gemm_plan_t agp = pass ? fwd_ag : bwd_ag;
    tpla_matrix_t g;
    f += TPLA_FAILED(
        tpla_ag_gemm(agp, pass ? h : dh, pass ? neg_x : neg_dy, pass ? w1 : w2, NULL, st));
    f += sync_stream_timeout(r->stream, 60, "warm-up all-gather");
    gt_barrier(r);
    f += TPLA_FAILED(tpla_ag_gemm_gathered(agp, &g));
    if (f == 0)
      f += TPLA_FAILED(pass ? tpla_gemm(r->ctx, dw1, dh, TPLA_OP_T, g, TPLA_OP_N, NULL, st)
                            : tpla_gemm(r->ctx, dw2, g, TPLA_OP_T, h, TPLA_OP_N, NULL, st));
    f += sync_stream_timeout(r->stream, 60, "warm-up wgrad");
    gt_barrier(r);
  }
  tpla_matrix_t outs[NOUT] = {h, y, dh, dw2, dx, dw1};
  for (int i = 0; i < NOUT; i++) /* NaN: an output the checked pass does not write fails */
    f += CUDA_FAILED(gpu_fill(outs[i].data, 0xFF, (size_t)(outs[i].rows * outs[i].ld) *
                                                      tpla_dtype_size(t)));
  tpla_counters_t c0 = TPLA_COUNTERS_INIT, c1 = TPLA_COUNTERS_INIT, c2 = TPLA_COUNTERS_INIT;
  tpla_ctx_get_counters(r->ctx, &c0);
  if (f == 0) { /* forward */
    gt_step(r, "MLP: forward AG+GEMM");
    gw_plan(gt_watch(r), me, &fwd_ag->p);
    f += TPLA_FAILED(tpla_ag_gemm(fwd_ag, h, x, w1, NULL, st));
    gt_step(r, "MLP: forward GEMM+RS");
    gw_plan(gt_watch(r), me, &fwd_rs->p);
    f += TPLA_FAILED(tpla_gemm_rs(fwd_rs, y, h, w2, NULL, st));
  }
  tpla_ctx_get_counters(r->ctx, &c1);
  if (f == 0) { /* backward */
    tpla_matrix_t gdy, gx;
    int has = 0;
    gt_step(r, "MLP: dgrad AG+GEMM");
    gw_plan(gt_watch(r), me, &bwd_ag->p);
    f += TPLA_FAILED(tpla_ag_gemm(bwd_ag, dh, dy, w2, NULL, st));
    f += TPLA_FAILED(tpla_ag_gemm_plan_has_gathered(bwd_ag, &has)) || !has;
    f += TPLA_FAILED(tpla_ag_gemm_gathered(bwd_ag, &gdy));
    gt_step(r, "MLP: wgrad GEMM on the gathered dy");
    if (f == 0)
      f += TPLA_FAILED(tpla_gemm(r->ctx, dw2, gdy, TPLA_OP_T, h, TPLA_OP_N, NULL, st));
    gt_step(r, "MLP: dgrad GEMM+RS");
    gw_plan(gt_watch(r), me, &bwd_rs->p);
    f += TPLA_FAILED(tpla_gemm_rs(bwd_rs, dx, dh, w1, NULL, st));
    f += TPLA_FAILED(tpla_ag_gemm_gathered(fwd_ag, &gx)); /* the forward's x, still there */
    gt_step(r, "MLP: wgrad GEMM on the gathered x");
    if (f == 0)
      f += TPLA_FAILED(tpla_gemm(r->ctx, dw1, dh, TPLA_OP_T, gx, TPLA_OP_N, NULL, st));
  }
  tpla_ctx_get_counters(r->ctx, &c2);
  m->gathers[me][0] = c1.allgathers - c0.allgathers;
  m->gathers[me][1] = c2.allgathers - c1.allgathers;
  m->reduce_scatters[me][0] = c1.reduce_scatters - c0.reduce_scatters;
  m->reduce_scatters[me][1] = c2.reduce_scatters - c1.reduce_scatters;
  gt_step(r, "MLP: sync and downloads");
  f += sync_stream_timeout(r->stream, 120, "tensor-parallel MLP");
  for (int i = 0; i < NOUT; i++)
    m->shard[me][i] = f == 0 ? gt_download(outs[i], &f) : NULL;
  gt_barrier(r); /* no plan goes while a peer may still use it */
  tpla_ag_gemm_plan_destroy(fwd_ag);
  tpla_ag_gemm_plan_destroy(bwd_ag);
  tpla_gemm_rs_plan_destroy(fwd_rs);
  tpla_gemm_rs_plan_destroy(bwd_rs);
  for (int i = 0; i < NOUT; i++)
    cudaFree(outs[i].data);
  cudaFree(x.data), cudaFree(w1.data), cudaFree(w2.data), cudaFree(dy.data);
  cudaFree(neg_x.data), cudaFree(neg_dy.data);
  gt_barrier_at(r, "after the frees"); /* cudaFree waits for peer GPUs in one process */
  return f;
}

/* The block of output i that rank q holds: rows/cols of the whole matrix. */
static void shard_block(const mlp_t *m, int i, int q, int64_t *r0, int64_t *rows, int64_t *c0,
                        int64_t *cols, int64_t *ld) {
  static const int64_t whole_cols[NOUT] = {F, H, F, F, H, H};
  *ld = whole_cols[i];
  switch (i) {
  case 0: case 2: *r0 = 0, *rows = S, *c0 = m->f_off[q], *cols = m->f_cols[q]; break;
  case 3: *r0 = 0, *rows = H, *c0 = m->f_off[q], *cols = m->f_cols[q]; break;
  case 5: *r0 = m->f_off[q], *rows = m->f_cols[q], *c0 = 0, *cols = H; break;
  default: *r0 = m->s_off[q], *rows = m->s_rows[q], *c0 = 0, *cols = H; break;
  }
}

static void run_mlp(int P, tpla_dtype_t dtype) {
  REQUIRE_GPUS(P, gpu_count());
  mlp_t *m = calloc(1, sizeof *m);
  ASSERT_TRUE(m != NULL);
  m->dtype = dtype;
  m->P = P;
  const int64_t s_split[2] = {560, 440}, f_split[2] = {832, 704};
  for (int q = 0; q < P; q++) {
    m->s_rows[q] = P == 1 ? S : s_split[q];
    m->f_cols[q] = P == 1 ? F : f_split[q];
    m->s_off[q] = q == 0 ? 0 : m->s_rows[0];
    m->f_off[q] = q == 0 ? 0 : m->f_cols[0];
  }
  gpu_rng_t g;
  gpu_rng_seed(&g, seed + (uint64_t)(P * 10 + (int)dtype));
  m->X = gt_random(&g, S * H, dtype);
  m->W1 = gt_random(&g, F * H, dtype);
  m->W2 = gt_random(&g, H * F, dtype);
  m->dY = gt_random(&g, S * H, dtype);
  int single = gt_run(1, single_body, m), tp = gt_run(P, tp_body, m);
  double tol = dtype == TPLA_FLOAT32 ? 1e-4 : 4.0 * unit_roundoff(dtype), worst = 0;
  for (int q = 0; q < P && single == 0 && tp == 0; q++) {
    for (int i = 0; i < NOUT; i++) {
      int64_t r0, rows, c0, cols, ld;
      shard_block(m, i, q, &r0, &rows, &c0, &cols, &ld);
      double err = 0, big = 1e-30;
      for (int64_t a = 0; a < rows; a++)
        for (int64_t b = 0; b < cols; b++) {
          double ref = m->full[i][(r0 + a) * ld + c0 + b];
          err = fmax(err, fabs(m->shard[q][i][a * cols + b] - ref));
          big = fmax(big, fabs(ref));
        }
      double rel = isnan(err) ? INFINITY : err / big;
      if (!(rel <= tol))
        fprintf(stderr, "  P=%d %s rank %d %s: max error %.3g of max |single-GPU| %.3g\n", P,
                tpla_dtype_name(dtype), q, out_name[i], err, big);
      worst = fmax(worst, rel);
    }
    if (m->gathers[q][0] != 1 || m->gathers[q][1] != 1 || m->reduce_scatters[q][0] != 1 ||
        m->reduce_scatters[q][1] != 1) {
      fprintf(stderr, "  rank %d: all-gathers %llu + %llu, reduce-scatters %llu + %llu "
              "(forward + backward; 1 + 1 expected)\n", q,
              (unsigned long long)m->gathers[q][0], (unsigned long long)m->gathers[q][1],
              (unsigned long long)m->reduce_scatters[q][0],
              (unsigned long long)m->reduce_scatters[q][1]);
      worst = INFINITY;
    }
  }
  if (single == 0 && tp == 0)
    printf("# MLP %d GPU%s %s: max error / max |single-GPU| %.3g (bound %.3g), all-gathers in "
           "backward: %llu\n", P, P > 1 ? "s" : "", tpla_dtype_name(dtype), worst, tol,
           (unsigned long long)m->gathers[0][1]);
  for (int i = 0; i < NOUT; i++) {
    free(m->full[i]);
    for (int q = 0; q < 2; q++)
      free(m->shard[q][i]);
  }
  free(m->X), free(m->W1), free(m->W2), free(m->dY);
  free(m);
  ASSERT_EQ_INT(single, 0);
  ASSERT_EQ_INT(tp, 0);
  ASSERT_LE(worst, tol);
}

static void test_mlp_1gpu_fp32(void) { run_mlp(1, TPLA_FLOAT32); }
static void test_mlp_2gpus_fp32(void) { run_mlp(2, TPLA_FLOAT32); }
static void test_mlp_2gpus_bf16(void) { run_mlp(2, TPLA_BFLOAT16); }

int main(void) {
  gpu_eager_loading();
  GPU_TEST_MAIN_SKIP_WITHOUT(gpu_count());
  seed = gpu_fresh_seed("test_gpu_overlap_mlp");
  watchdog_arm("test_gpu_overlap_mlp", 600);
  TEST(test_mlp_1gpu_fp32);
  TEST(test_mlp_2gpus_fp32);
  TEST(test_mlp_2gpus_bf16);
  return test_summary();
}

#else /* a build without the CUDA executor */
TEST_MAIN_WITHOUT_CUDA()
#endif
