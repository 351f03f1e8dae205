/*
 * test_gpu_overlap_groups.c - window groups on the CUDA executor: an
 * AllGather+GEMM, a GEMM+ReduceScatter and a GEMM+AllReduce of different
 * shapes (bf16) share one set of buffers (window_group 1; created smallest
 * first, so the buffers are replaced twice), their calls enqueued
 * interleaved and back to back with no host synchronization (so a call runs
 * while the peers may still pull the previous member's published slice:
 * the group's fence must hold them apart), A and -A alternating; every
 * output is checked against the float64 reference, the gathered view of the
 * last call bit for bit, and the group reports one workspace, smaller than
 * the plans' own. On 2 GPUs (PEER on NVLink peers), then on 1.
 *
 * Run: build/tests/test_gpu_overlap_groups (exits 77 without a GPU; TPLA_TEST_QUICK=1: two
 * rounds instead of twelve, e.g. under compute-sanitizer).
 */
#include "test.h"
#include "tpla.h"

#ifdef TPLA_HAVE_CUDA
#include "test_gpu_overlap_util.h"

enum { NPLANS = 3 };
static int rounds = 12; /* TPLA_TEST_QUICK=1 (e.g. under compute-sanitizer): 2 */

typedef struct {
  tpla_matrix_t a[2], b, d, bias;
  tpla_ag_gemm_plan_t ag;
  tpla_gemm_rs_plan_t rs;
  tpla_gemm_ar_plan_t ar;
  size_t ws;
} member_t;

static gcase_t group_case(int P, int kind) {
  gcase_t c;
  memset(&c, 0, sizeof c);
  c.kind = kind;
  c.dtype = c.d_dtype = TPLA_BFLOAT16;
  c.op_b = TPLA_OP_T;
  c.mode = TPLA_OVERLAP_OVERLAP;
  c.alpha = 1.0f;
  c.bias = kind == 0;
  c.chunks = kind == 1 ? 3 : 2;
  c.seed = seed + 101ull * (uint64_t)kind;
  int64_t rows = kind == 2 ? 256 : kind == 0 ? 512 : 1024, k = kind == 0 ? 384 : 256;
  c.m = 0;
  for (int q = 0; q < P; q++) {
    c.rows[q] = rows + 64 * q;
    c.k[q] = k + (kind == 0 ? 0 : 32 * q);
    c.m += c.rows[q];
  }
  c.n = kind == 1 ? 640 : 320;
  return c;
}

static tpla_status_t create(gt_rank_t *r, const gcase_t *c, member_t *mb, int group) {
  const int me = r->rank;
  if (c->kind == 0) {
    tpla_ag_gemm_desc_t x = TPLA_AG_GEMM_DESC_INIT;
    x.local_rows = c->rows[me], x.k = c->k[0], x.n = c->n, x.op_b = c->op_b;
    x.dtype = c->dtype, x.d_dtype = c->d_dtype, x.bias = c->bias, x.mode = c->mode;
    x.chunks = c->chunks, x.window_group = group;
    return tpla_ag_gemm_plan_create(&mb->ag, r->ctx, &x);
  }
  if (c->kind == 1) {
    tpla_gemm_rs_desc_t x = TPLA_GEMM_RS_DESC_INIT;
    x.m = c->m, x.local_rows = c->rows[me], x.k = c->k[me], x.n = c->n, x.op_b = c->op_b;
    x.dtype = c->dtype, x.d_dtype = c->d_dtype, x.mode = c->mode, x.chunks = c->chunks;
    x.window_group = group;
    return tpla_gemm_rs_plan_create(&mb->rs, r->ctx, &x);
  }
  tpla_gemm_ar_desc_t x = TPLA_GEMM_AR_DESC_INIT;
  x.m = c->m, x.k = c->k[me], x.n = c->n, x.op_b = c->op_b, x.dtype = c->dtype;
  x.d_dtype = c->d_dtype, x.mode = c->mode, x.chunks = c->chunks, x.window_group = group;
  return tpla_gemm_ar_plan_create(&mb->ar, r->ctx, &x);
}

static void destroy(member_t *mb) {
  tpla_ag_gemm_plan_destroy(mb->ag);
  tpla_gemm_rs_plan_destroy(mb->rs);
  tpla_gemm_ar_plan_destroy(mb->ar);
  mb->ag = NULL, mb->rs = NULL, mb->ar = NULL;
}

static size_t workspace(const member_t *mb) {
  size_t ws = 0;
  if (mb->ag)
    tpla_ag_gemm_plan_workspace_bytes(mb->ag, &ws);
  else if (mb->rs)
    tpla_gemm_rs_plan_workspace_bytes(mb->rs, &ws);
  else
    tpla_gemm_ar_plan_workspace_bytes(mb->ar, &ws);
  return ws;
}

static int body(gt_rank_t *r, void *arg) {
  (void)arg;
  const int P = r->nranks, me = r->rank;
  int failures = 0;
  gcase_t cases[NPLANS];
  inputs_t in[NPLANS];
  member_t mb[NPLANS];
  memset(mb, 0, sizeof mb);
  size_t alone = 0;
  for (int i = 0; i < NPLANS; i++) { /* AR (smallest window), AG, RS */
    cases[i] = group_case(P, (2 + i) % 3);
    const gcase_t *c = &cases[i];
    make_inputs(c, P, &in[i]);
    int64_t k = c->kind == 0 ? c->k[0] : c->k[me];
    double *neg = malloc(sizeof *neg * (size_t)(in[i].arows[me] * k + 1));
    for (int64_t e = 0; e < in[i].arows[me] * k; e++)
      neg[e] = -in[i].a[me][e];
    mb[i].a[0] = gt_upload(in[i].a[me], in[i].arows[me], k, 0, c->dtype, &failures);
    mb[i].a[1] = gt_upload(neg, in[i].arows[me], k, 0, c->dtype, &failures);
    mb[i].b = gt_upload(in[i].b[me], c->n, k, 0, c->dtype, &failures);
    mb[i].d = gt_upload(in[i].d0[me], in[i].drows[me], c->n, 0, c->d_dtype, &failures);
    mb[i].bias = gt_upload(in[i].bias[me], 1, c->n, 0, c->d_dtype, &failures);
    free(neg);
  }
  failures += CUDA_FAILED(cudaDeviceSynchronize());
  gt_barrier_at(r, "after the uploads");
  for (int i = 0; i < NPLANS && failures == 0; i++) { /* each alone: its own buffers */
    gt_step(r, "plan %d alone", i);
    failures += TPLA_FAILED(create(r, &cases[i], &mb[i], 0));
    alone += failures ? 0 : workspace(&mb[i]);
    failures += TPLA_FAILED(tpla_barrier(r->ctx, r->stream)) + gt_sync(r, "barrier");
    destroy(&mb[i]);
  }
  for (int i = 0; i < NPLANS && failures == 0; i++) {
    gt_step(r, "create plan %d in window group 1", i);
    failures += TPLA_FAILED(create(r, &cases[i], &mb[i], 1));
  }
  tpla_overlap_args_t args[NPLANS];
  for (int i = 0; i < NPLANS; i++) {
    args[i] = (tpla_overlap_args_t)TPLA_OVERLAP_ARGS_INIT;
    args[i].bias = cases[i].bias ? mb[i].bias.data : NULL;
  }
  gt_step(r, "%d rounds of the three calls, back to back", rounds);
  for (int round = 0; round < rounds && failures == 0; round++)
    for (int i = 0; i < NPLANS && failures == 0; i++) {
      tpla_matrix_t a = mb[i].a[round % 2];
      tpla_status_t st =
          cases[i].kind == 0   ? tpla_ag_gemm(mb[i].ag, mb[i].d, a, mb[i].b, &args[i], r->stream)
          : cases[i].kind == 1 ? tpla_gemm_rs(mb[i].rs, mb[i].d, a, mb[i].b, &args[i], r->stream)
                               : tpla_gemm_ar(mb[i].ar, mb[i].d, a, mb[i].b, &args[i], r->stream);
      failures += TPLA_FAILED(st);
    }
  /* the AG plan once more, last, on the other sign (a call that wrote nothing would leave
   * the last round's D): its gathered view is then the group's */
  int ag = 1;
  if (failures == 0)
    failures += TPLA_FAILED(tpla_ag_gemm(mb[ag].ag, mb[ag].d, mb[ag].a[rounds % 2], mb[ag].b,
                                         &args[ag], r->stream));
  failures += gt_sync(r, "the calls");
  double last_round = rounds % 2 ? 1.0 : -1.0, sign = -last_round; /* sign: the AG's */
  for (int i = 0; i < NPLANS && failures == 0; i++) {
    double *out = gt_download(mb[i].d, &failures);
    double worst = out ? check_output(&cases[i], P, me, &in[i], out, i == ag ? sign : last_round)
                       : INFINITY;
    if (!(worst <= 1.0)) {
      fprintf(stderr, "  rank %d: %s in the group: error %.3g x the rounding bound\n", me,
              kind_name(cases[i].kind), worst);
      failures++;
    }
    free(out);
  }
  tpla_matrix_t g;
  int has = 0;
  if (failures == 0) {
    failures += TPLA_FAILED(tpla_ag_gemm_plan_has_gathered(mb[ag].ag, &has)) || !has;
    failures += TPLA_FAILED(tpla_ag_gemm_gathered(mb[ag].ag, &g));
  }
  if (failures == 0) {
    double *gv = gt_download(g, &failures);
    int64_t base = 0, k = cases[ag].k[0];
    for (int q = 0; q < P && failures == 0; q++) {
      for (int64_t e = 0; e < cases[ag].rows[q] * k && failures == 0; e++)
        if (gv[base * k + e] != sign * in[ag].a[q][e]) {
          fprintf(stderr, "  rank %d: gathered element %lld of rank %d differs\n", me,
                  (long long)e, q);
          failures++;
        }
      base += cases[ag].rows[q];
    }
    free(gv);
  }
  size_t ws[NPLANS] = {0};
  for (int i = 0; i < NPLANS && failures == 0; i++)
    ws[i] = workspace(&mb[i]);
  if (failures == 0 && (ws[0] != ws[1] || ws[1] != ws[2] || !(ws[0] < alone))) {
    fprintf(stderr, "  rank %d: group workspace %zu / %zu / %zu, the plans alone %zu\n", me,
            ws[0], ws[1], ws[2], alone);
    failures++;
  }
  if (me == 0 && failures == 0)
    printf("# %d GPU%s: window group of 3 plans holds %zu bytes, the plans alone %zu\n", P,
           P > 1 ? "s" : "", ws[0], alone);
  gt_step(r, "tpla_barrier before destroying the plans");
  failures += TPLA_FAILED(tpla_barrier(r->ctx, r->stream));
  failures += gt_sync(r, "tpla_barrier");
  for (int i = 0; i < NPLANS; i++) {
    destroy(&mb[i]);
    cudaFree(mb[i].a[0].data), cudaFree(mb[i].a[1].data), cudaFree(mb[i].b.data);
    cudaFree(mb[i].d.data), cudaFree(mb[i].bias.data);
    free_inputs(&in[i]);
  }
  gt_barrier_at(r, "after the frees");
  return failures;
}

static void run(int P) {
  REQUIRE_GPUS(P, gpu_count());
  ASSERT_EQ_INT(gt_run(P, body, NULL), 0);
}

static void test_group_2gpus(void) { run(2); }
static void test_group_1gpu(void) { run(1); }

int main(void) {
  gpu_eager_loading();
  GPU_TEST_MAIN_SKIP_WITHOUT(gpu_count());
  seed = gpu_fresh_seed("test_gpu_overlap_groups");
  gw_test_name = "test_gpu_overlap_groups";
  rounds = getenv("TPLA_TEST_QUICK") != NULL ? 2 : 12;
  watchdog_arm("test_gpu_overlap_groups", 600);
  TEST(test_group_2gpus);
  TEST(test_group_1gpu);
  return test_summary();
}

#else /* a build without the CUDA executor */
TEST_MAIN_WITHOUT_CUDA()
#endif
