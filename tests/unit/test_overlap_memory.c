/*
 * test_overlap_memory.c - memory of the overlap plans on the host executor:
 * the workspace each plan reports stays within DESIGN.md's budget
 * (AllGather+GEMM: the gathered operand; GEMM+ReduceScatter: two output
 * chunks per peer; GEMM+AllReduce: those plus the published slice), and a
 * 1000-call loop of every plan kind, mode and transport grows neither the
 * plan's nor the context's workspace nor the process heap.
 *
 *   ./test_overlap_memory     (CTest: test_overlap_memory)
 */
#include "test_overlap_common.h"

#include <malloc.h>

#define LOOP_CALLS 1000

static uint64_t seed;

/* Heap bytes in use (glibc), or 0 where unknown (e.g. under a sanitizer). */
static size_t heap_in_use(void) {
#if defined(__GLIBC__) && (__GLIBC__ > 2 || (__GLIBC__ == 2 && __GLIBC_MINOR__ >= 33))
  struct mallinfo2 mi = mallinfo2();
  return mi.uordblks;
#else
  return 0;
#endif
}

typedef struct {
  ocase_t c;
  orun_t run;
  size_t ws_early[OC_MAX_RANKS], ws_late[OC_MAX_RANKS];
  size_t ctx_early[OC_MAX_RANKS], ctx_late[OC_MAX_RANKS];
  size_t heap_early, heap_late;
  int failures;
} loop_t;

static size_t plan_bytes(oc_kind_t kind, tpla_ag_gemm_plan_t ag, tpla_gemm_rs_plan_t rs,
                         tpla_gemm_ar_plan_t ar) {
  size_t b = 0;
  if (kind == OC_AG)
    tpla_ag_gemm_plan_workspace_bytes(ag, &b);
  else if (kind == OC_RS)
    tpla_gemm_rs_plan_workspace_bytes(rs, &b);
  else
    tpla_gemm_ar_plan_workspace_bytes(ar, &b);
  return b;
}

static int loop_body(tpla_ctx_t ctx, int rank, int nranks, void *arg) {
  loop_t *l = arg;
  const ocase_t *c = &l->c;
  orank_t *o = &l->run.r[rank];
  tpla_ag_gemm_plan_t ag = NULL;
  tpla_gemm_rs_plan_t rs = NULL;
  tpla_gemm_ar_plan_t ar = NULL;
  if (oc_create(c, ctx, rank, &ag, &rs, &ar) != TPLA_SUCCESS) {
    fprintf(stderr, "  rank %d: create: %s\n", rank, tpla_last_error());
    return 1;
  }
  tpla_overlap_args_t args = TPLA_OVERLAP_ARGS_INIT;
  args.beta = 1.0f; /* accumulate: the values grow, the memory must not */
  args.alpha = 1e-3f;
  int failures = 0;
  for (int call = 0; call < LOOP_CALLS && failures == 0; call++) {
    tpla_status_t s = c->kind == OC_AG   ? tpla_ag_gemm(ag, o->d, o->a, o->b, &args, NULL)
                      : c->kind == OC_RS ? tpla_gemm_rs(rs, o->d, o->a, o->b, &args, NULL)
                                         : tpla_gemm_ar(ar, o->d, o->a, o->b, &args, NULL);
    if (s != TPLA_SUCCESS) {
      fprintf(stderr, "  rank %d call %d: %s\n", rank, call, tpla_last_error());
      failures++;
    }
    if (call == 9 || call == LOOP_CALLS - 1) {
      bool early = call == 9;
      (early ? l->ws_early : l->ws_late)[rank] = plan_bytes(c->kind, ag, rs, ar);
      tpla_ctx_workspace_bytes(ctx, &(early ? l->ctx_early : l->ctx_late)[rank]);
      tpla_barrier(ctx, NULL); /* every rank at the same point */
      if (rank == 0)
        *(early ? &l->heap_early : &l->heap_late) = heap_in_use();
      tpla_barrier(ctx, NULL);
    }
  }
  tpla_barrier(ctx, NULL);
  tpla_ag_gemm_plan_destroy(ag);
  tpla_gemm_rs_plan_destroy(rs);
  tpla_gemm_ar_plan_destroy(ar);
  __atomic_add_fetch(&l->failures, failures, __ATOMIC_RELAXED);
  return 0;
}

static void test_thousand_calls_no_growth(void) {
  static const struct {
    oc_kind_t kind;
    tpla_overlap_mode_t mode;
    tpla_transport_t transport;
  } plans[] = {
      {OC_AG, TPLA_OVERLAP_OVERLAP, TPLA_TRANSPORT_PEER},
      {OC_AG, TPLA_OVERLAP_SERIAL, TPLA_TRANSPORT_AUTO},
      {OC_RS, TPLA_OVERLAP_OVERLAP, TPLA_TRANSPORT_PEER},
      {OC_RS, TPLA_OVERLAP_OVERLAP, TPLA_TRANSPORT_SENDRECV},
      {OC_AR, TPLA_OVERLAP_OVERLAP, TPLA_TRANSPORT_PEER},
      {OC_AR, TPLA_OVERLAP_SERIAL, TPLA_TRANSPORT_AUTO},
  };
  for (size_t i = 0; i < sizeof plans / sizeof plans[0]; i++) {
    loop_t *l = calloc(1, sizeof *l);
    ASSERT_TRUE(l != NULL);
    l->c = (ocase_t){.kind = plans[i].kind, .P = 2, .m = 9, .rows = {4, 5}, .k = {6, 6},
                     .n = {7, 7}, .dtype = TPLA_FLOAT32, .d_dtype = TPLA_FLOAT32,
                     .alpha = 1.0f, .mode = plans[i].mode, .transport = plans[i].transport,
                     .chunks = 2, .calls = 1, .seed = seed + i};
    oc_setup(&l->run, &l->c);
    int ranks_failed = run_host_ranks(2, loop_body, l);
    int failures = l->failures;
    size_t heap_early = l->heap_early, heap_late = l->heap_late;
    bool grew = false;
    for (int r = 0; r < 2; r++)
      grew |= l->ws_late[r] != l->ws_early[r] || l->ctx_late[r] != l->ctx_early[r];
    oc_free(&l->run);
    free(l);
    if (ranks_failed || failures || grew)
      fprintf(stderr, "  plan %zu: ranks failed %d, call failures %d, workspace grew %d\n", i,
              ranks_failed, failures, (int)grew);
    ASSERT_EQ_INT(ranks_failed, 0);
    ASSERT_EQ_INT(failures, 0);
    ASSERT_TRUE(!grew);
    if (heap_early != 0) /* glibc without a sanitizer: no heap growth either */
      ASSERT_LE((double)heap_late, (double)heap_early + 4096.0);
  }
}

/* ---- the budget -------------------------------------------------------------------- */

typedef struct {
  ocase_t c;
  size_t ws[OC_MAX_RANKS];
  int failed;
} budget_t;

static int budget_body(tpla_ctx_t ctx, int rank, int nranks, void *arg) {
  budget_t *b = arg;
  tpla_ag_gemm_plan_t ag = NULL;
  tpla_gemm_rs_plan_t rs = NULL;
  tpla_gemm_ar_plan_t ar = NULL;
  if (oc_create(&b->c, ctx, rank, &ag, &rs, &ar) != TPLA_SUCCESS) {
    fprintf(stderr, "  rank %d: %s\n", rank, tpla_last_error());
    return 1;
  }
  b->ws[rank] = plan_bytes(b->c.kind, ag, rs, ar);
  tpla_ag_gemm_plan_destroy(ag);
  tpla_gemm_rs_plan_destroy(rs);
  tpla_gemm_ar_plan_destroy(ar);
  return 0;
}

static void test_workspace_within_budget(void) {
  const int64_t rows = 64, k = 48, n = 32;
  const int ranks[] = {2, 3, 4, 8};
  for (size_t ri = 0; ri < sizeof ranks / sizeof ranks[0]; ri++)
    for (int kind = OC_AG; kind <= OC_AR; kind++) {
      int P = ranks[ri];
      budget_t b = {.c = {.kind = (oc_kind_t)kind, .P = P, .m = rows * P, .dtype = TPLA_FLOAT32,
                          .d_dtype = TPLA_FLOAT32, .mode = TPLA_OVERLAP_OVERLAP, .chunks = 4}};
      for (int r = 0; r < P; r++)
        b.c.rows[r] = rows, b.c.k[r] = k, b.c.n[r] = n;
      ASSERT_EQ_INT(run_host_ranks(P, budget_body, &b), 0);
      size_t slice = (size_t)(rows * n) * 4, flags = 4 * (size_t)(P + 2 * (P - 1) * 4 + 1);
      size_t budget = kind == OC_AG   ? (size_t)(rows * P * k) * 4
                      : kind == OC_RS ? 2 * (size_t)(P - 1) * slice
                                      : (2 * (size_t)(P - 1) + 1) * slice;
      budget += flags + 256 * (size_t)P; /* flags and buffer alignment */
      for (int r = 0; r < P; r++) {
        if (b.ws[r] > budget)
          fprintf(stderr, "  %s P=%d rank %d: %zu bytes > budget %zu\n",
                  oc_kind_name((oc_kind_t)kind), P, r, b.ws[r], budget);
        ASSERT_LE((double)b.ws[r], (double)budget);
        ASSERT_TRUE(b.ws[r] >= budget - flags - 256 * (size_t)P); /* and is what it says */
      }
    }
}

int main(void) {
  seed = fresh_seed("test_overlap_memory");
  TEST(test_workspace_within_budget);
  TEST(test_thousand_calls_no_growth);
  return test_summary();
}
