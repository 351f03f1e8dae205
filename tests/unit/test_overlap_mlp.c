/*
 * test_overlap_mlp.c - a tensor-parallel MLP (sequence-parallel input, a
 * column-parallel linear then a row-parallel one, no activation) forward
 * and backward on 1..4 host ranks, checked against the same computation on
 * the whole matrices in float64:
 *   forward   h_p  = AG(x) W1_p^T        AllGather+GEMM (gathers x)
 *             y_p  = RS(h_p W2_p^T)      GEMM+ReduceScatter
 *   backward  dh_p = AG(dy) W2_p         AllGather+GEMM (gathers dy)
 *             dW2_p = AG(dy)^T h_p       tpla_gemm on the gathered dy: no second gather
 *             dx_p = RS(dh_p W1_p)       GEMM+ReduceScatter
 *             dW1_p = dh_p^T AG(x)       tpla_gemm on the forward plan's gathered x
 * The counters must show one all-gather and one reduce-scatter per pass.
 * Sequence rows and FFN columns are split unevenly.
 *
 *   ./test_overlap_mlp        (CTest: test_overlap_mlp)
 */
#include "test_overlap_common.h"

#define S 23 /* sequence rows */
#define H 12 /* hidden */
#define F 17 /* FFN */

typedef struct {
  int P;
  int64_t s_rows[OC_MAX_RANKS], s_off[OC_MAX_RANKS], f_cols[OC_MAX_RANKS], f_off[OC_MAX_RANKS];
  double X[S * H], W1[F * H], W2[H * F], dY[S * H]; /* global, values exact in fp32 */
  /* references */
  double h[S * F], y[S * H], dh[S * F], dW2[H * F], dx[S * H], dW1[F * H];
  double worst[OC_MAX_RANKS]; /* per rank: max error / max |reference| over its outputs */
  int failures;
} mlp_t;

static void split(int64_t total, int P, int64_t *parts, int64_t *offs, int skew) {
  int64_t o = 0;
  for (int r = 0; r < P; r++) {
    parts[r] = total / P + (r < total % P) + (r == 0 ? skew : r == 1 ? -skew : 0);
    offs[r] = o;
    o += parts[r];
  }
}

static void reference(mlp_t *t) {
  memset(t->h, 0, sizeof t->h);
  memset(t->y, 0, sizeof t->y);
  memset(t->dh, 0, sizeof t->dh);
  memset(t->dW2, 0, sizeof t->dW2);
  memset(t->dx, 0, sizeof t->dx);
  memset(t->dW1, 0, sizeof t->dW1);
  for (int i = 0; i < S; i++)
    for (int f = 0; f < F; f++)
      for (int j = 0; j < H; j++) {
        t->h[i * F + f] += t->X[i * H + j] * t->W1[f * H + j];
        t->dh[i * F + f] += t->dY[i * H + j] * t->W2[j * F + f];
      }
  for (int i = 0; i < S; i++)
    for (int j = 0; j < H; j++)
      for (int f = 0; f < F; f++) {
        t->y[i * H + j] += t->h[i * F + f] * t->W2[j * F + f];
        t->dx[i * H + j] += t->dh[i * F + f] * t->W1[f * H + j];
      }
  for (int j = 0; j < H; j++)
    for (int f = 0; f < F; f++)
      for (int i = 0; i < S; i++) {
        t->dW2[j * F + f] += t->dY[i * H + j] * t->h[i * F + f];
        t->dW1[f * H + j] += t->dh[i * F + f] * t->X[i * H + j];
      }
}

/* A rows x cols fp32 buffer from rows [r0, r0+rows) and cols [c0, c0+cols) of g (ld). */
static float *take(const double *g, int ld, int64_t r0, int64_t rows, int64_t c0, int64_t cols) {
  float *v = calloc((size_t)(rows * cols + 1), sizeof *v);
  for (int64_t i = 0; i < rows; i++)
    for (int64_t j = 0; j < cols; j++)
      v[i * cols + j] = (float)g[(r0 + i) * ld + c0 + j];
  return v;
}

/* max |v - g block| over max |g block| folded into t->worst */
static void compare(mlp_t *t, const char *what, int rank, const float *v, const double *g, int ld,
                    int64_t r0, int64_t rows, int64_t c0, int64_t cols) {
  double err = 0, big = 1e-30;
  for (int64_t i = 0; i < rows; i++)
    for (int64_t j = 0; j < cols; j++) {
      double ref = g[(r0 + i) * ld + c0 + j];
      err = fmax(err, fabs(v[i * cols + j] - ref));
      big = fmax(big, fabs(ref));
    }
  double rel = err / big;
  if (!(rel <= 1e-5))
    fprintf(stderr, "  P=%d rank %d %s: max error %.3g of max |ref| %.3g\n", t->P, rank, what,
            err, big);
  t->worst[rank] = fmax(t->worst[rank], isnan(rel) ? INFINITY : rel);
}

static tpla_matrix_t mat(float *data, int64_t rows, int64_t cols) {
  tpla_matrix_t m = {data, rows, cols, cols > 0 ? cols : 1, TPLA_FLOAT32};
  return m;
}

static int mlp_body(tpla_ctx_t ctx, int rank, int nranks, void *arg) {
  mlp_t *t = arg;
  int64_t sp = t->s_rows[rank], so = t->s_off[rank], fp = t->f_cols[rank], fo = t->f_off[rank];
  float *x = take(t->X, H, so, sp, 0, H), *w1 = take(t->W1, H, fo, fp, 0, H);
  float *w2 = take(t->W2, F, 0, H, fo, fp), *dy = take(t->dY, H, so, sp, 0, H);
  float *h = calloc(S * F + 1, 4), *y = calloc(S * H + 1, 4), *dh = calloc(S * F + 1, 4);
  float *dx = calloc(S * H + 1, 4), *dw1 = calloc(F * H + 1, 4), *dw2 = calloc(H * F + 1, 4);
  int failures = 0;
  tpla_ag_gemm_desc_t ag = TPLA_AG_GEMM_DESC_INIT;
  ag.local_rows = sp, ag.k = H, ag.n = fp, ag.op_b = TPLA_OP_T, ag.chunks = 2;
  tpla_gemm_rs_desc_t rs = TPLA_GEMM_RS_DESC_INIT;
  rs.m = S, rs.local_rows = sp, rs.k = fp, rs.n = H, rs.op_b = TPLA_OP_T, rs.chunks = 2;
  tpla_ag_gemm_plan_t fwd_ag = NULL, bwd_ag = NULL;
  tpla_gemm_rs_plan_t fwd_rs = NULL, bwd_rs = NULL;
  failures += tpla_ag_gemm_plan_create(&fwd_ag, ctx, &ag) != TPLA_SUCCESS;
  failures += tpla_gemm_rs_plan_create(&fwd_rs, ctx, &rs) != TPLA_SUCCESS;
  ag.op_b = TPLA_OP_N; /* dh = AG(dy) W2_p, W2_p is H x F_p */
  rs.op_b = TPLA_OP_N; /* dx = RS(dh_p W1_p), W1_p is F_p x H */
  failures += tpla_ag_gemm_plan_create(&bwd_ag, ctx, &ag) != TPLA_SUCCESS;
  failures += tpla_gemm_rs_plan_create(&bwd_rs, ctx, &rs) != TPLA_SUCCESS;
  tpla_counters_t c0 = TPLA_COUNTERS_INIT, c1 = TPLA_COUNTERS_INIT, c2 = TPLA_COUNTERS_INIT;
  tpla_ctx_get_counters(ctx, &c0);
  if (failures == 0) { /* forward */
    failures += tpla_ag_gemm(fwd_ag, mat(h, S, fp), mat(x, sp, H), mat(w1, fp, H), NULL, NULL) !=
                TPLA_SUCCESS;
    failures += tpla_gemm_rs(fwd_rs, mat(y, sp, H), mat(h, S, fp), mat(w2, H, fp), NULL, NULL) !=
                TPLA_SUCCESS;
  }
  tpla_ctx_get_counters(ctx, &c1);
  tpla_matrix_t gx, gdy;
  int has = 0;
  if (failures == 0) { /* backward */
    failures += tpla_ag_gemm(bwd_ag, mat(dh, S, fp), mat(dy, sp, H), mat(w2, H, fp), NULL,
                             NULL) != TPLA_SUCCESS;
    failures += tpla_ag_gemm_plan_has_gathered(bwd_ag, &has) != TPLA_SUCCESS || !has;
    failures += tpla_ag_gemm_gathered(bwd_ag, &gdy) != TPLA_SUCCESS;
    failures += tpla_gemm(ctx, mat(dw2, H, fp), gdy, TPLA_OP_T, mat(h, S, fp), TPLA_OP_N, NULL,
                          NULL) != TPLA_SUCCESS;
    failures += tpla_gemm_rs(bwd_rs, mat(dx, sp, H), mat(dh, S, fp), mat(w1, fp, H), NULL,
                             NULL) != TPLA_SUCCESS;
    failures += tpla_ag_gemm_gathered(fwd_ag, &gx) != TPLA_SUCCESS; /* still the forward's x */
    failures += tpla_gemm(ctx, mat(dw1, fp, H), mat(dh, S, fp), TPLA_OP_T, gx, TPLA_OP_N, NULL,
                          NULL) != TPLA_SUCCESS;
  }
  if (failures)
    fprintf(stderr, "  rank %d: %s\n", rank, tpla_last_error());
  tpla_ctx_get_counters(ctx, &c2);
  /* one gather and one reduce-scatter per pass: the wgrads gathered nothing */
  failures += c1.allgathers - c0.allgathers != 1 || c1.reduce_scatters - c0.reduce_scatters != 1;
  failures += c2.allgathers - c1.allgathers != 1 || c2.reduce_scatters - c1.reduce_scatters != 1;
  failures += c2.gathered_views - c1.gathered_views != 2;
  if (failures == 0) {
    compare(t, "h", rank, h, t->h, F, 0, S, fo, fp);
    compare(t, "y", rank, y, t->y, H, so, sp, 0, H);
    compare(t, "dh", rank, dh, t->dh, F, 0, S, fo, fp);
    compare(t, "dW2", rank, dw2, t->dW2, F, 0, H, fo, fp);
    compare(t, "dx", rank, dx, t->dx, H, so, sp, 0, H);
    compare(t, "dW1", rank, dw1, t->dW1, H, fo, fp, 0, H);
  }
  tpla_barrier(ctx, NULL);
  tpla_ag_gemm_plan_destroy(fwd_ag);
  tpla_ag_gemm_plan_destroy(bwd_ag);
  tpla_gemm_rs_plan_destroy(fwd_rs);
  tpla_gemm_rs_plan_destroy(bwd_rs);
  free(x), free(w1), free(w2), free(dy), free(h), free(y), free(dh), free(dx), free(dw1);
  free(dw2);
  __atomic_add_fetch(&t->failures, failures, __ATOMIC_RELAXED);
  return 0;
}

static void test_mlp_forward_backward(void) {
  uint64_t seed = fresh_seed("test_mlp_forward_backward");
  for (int P = 1; P <= 4; P++) {
    mlp_t *t = calloc(1, sizeof *t);
    ASSERT_TRUE(t != NULL);
    t->P = P;
    split(S, P, t->s_rows, t->s_off, P > 1 ? 3 : 0);
    split(F, P, t->f_cols, t->f_off, P > 1 ? -2 : 0);
    rng_t g;
    rng_seed(&g, seed + (uint64_t)P);
    double *all[4] = {t->X, t->W1, t->W2, t->dY};
    size_t sizes[4] = {S * H, F * H, H * F, S * H};
    for (int a = 0; a < 4; a++)
      for (size_t i = 0; i < sizes[a]; i++)
        all[a][i] = (double)(float)rng_uniform(&g);
    reference(t);
    int ranks_failed = run_host_ranks(P, mlp_body, t);
    int failures = t->failures;
    double worst = 0;
    for (int r = 0; r < P; r++)
      worst = fmax(worst, t->worst[r]);
    free(t);
    ASSERT_EQ_INT(ranks_failed, 0);
    ASSERT_EQ_INT(failures, 0);
    ASSERT_LE(worst, 1e-5);
  }
}

int main(void) {
  TEST(test_mlp_forward_backward);
  return test_summary();
}
