/*
 * test_overlap_failures.c - an overlapped call that fails on one rank after
 * it began (its executor's GEMM refuses, a transport wait cannot be
 * enqueued): the peers, whose calls wait for that rank's steps, must stop
 * at once with TPLA_ERROR_REMOTE, not after their timeout, and the failing
 * rank keeps its own status and message; the transport's end() still runs,
 * so the caller's stream stays ordered (review 92).
 *
 *   ./test_overlap_failures     (CTest: test_overlap_failures)
 */
#include "ranks.h"
#include "test.h"

#include "internal.h"
#include "overlap.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <time.h>

#define TIMEOUT_MS 20000 /* the peers' calls must end long before this */
#define PROMPT_S 5.0

static double now_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static tpla_matrix_t host_matrix(int64_t rows, int64_t cols, float value) {
  tpla_matrix_t m = {calloc((size_t)(rows * cols + 1), sizeof(float)), rows, cols, cols,
                     TPLA_FLOAT32};
  for (int64_t i = 0; m.data != NULL && i < rows * cols; i++)
    ((float *)m.data)[i] = value;
  return m;
}

/* ---- a GEMM that fails mid-call on one rank ------------------------------------- */

typedef enum { OP_AG, OP_RS } op_kind_t;

typedef struct {
  op_kind_t kind;
  tpla_transport_t transport;
  tpla_status_t st[3];
  char msg[3][400];
  double seconds[3];
  tpla_status_t later[3]; /* a collective afterwards */
} midcall_t;

static const tpla_backend_t *real_backend;
static _Atomic int gemms_left;

static tpla_status_t failing_gemm(tpla_ctx_t ctx, const tpla_gemm_call_t *call, void *stream) {
  if (atomic_fetch_sub(&gemms_left, 1) == 0)
    return tpla_fail(TPLA_ERROR_OUT_OF_MEMORY, "gemm", "injected: out of memory");
  return real_backend->gemm(ctx, call, stream);
}

static int midcall_body(tpla_ctx_t ctx, int rank, int nranks, void *arg) {
  midcall_t *t = arg;
  enum { ROWS = 16, K = 8, N = 8 };
  tpla_matrix_t a = host_matrix(t->kind == OP_AG ? ROWS : ROWS * nranks, K, 1.0f);
  tpla_matrix_t b = host_matrix(K, N, 0.5f), d = host_matrix(ROWS * nranks, N, 0.0f);
  void *plan = NULL;
  tpla_status_t st;
  if (t->kind == OP_AG) {
    tpla_ag_gemm_desc_t desc = TPLA_AG_GEMM_DESC_INIT;
    desc.local_rows = ROWS, desc.k = K, desc.n = N, desc.chunks = 2;
    desc.transport = t->transport;
    st = tpla_ag_gemm_plan_create((tpla_ag_gemm_plan_t *)&plan, ctx, &desc);
  } else {
    tpla_gemm_rs_desc_t desc = TPLA_GEMM_RS_DESC_INIT;
    desc.m = ROWS * nranks, desc.k = K, desc.n = N, desc.chunks = 2;
    desc.transport = t->transport;
    st = tpla_gemm_rs_plan_create((tpla_gemm_rs_plan_t *)&plan, ctx, &desc);
    d.rows = ROWS;
  }
  if (st != TPLA_SUCCESS || !a.data || !b.data || !d.data) {
    fprintf(stderr, "  rank %d: setup: %s\n", rank, tpla_last_error());
    return 1;
  }
  tpla_backend_t failing;
  if (rank == 1) { /* its second GEMM of the call fails */
    real_backend = ctx->backend;
    failing = *real_backend;
    failing.gemm = failing_gemm;
    atomic_store(&gemms_left, 1);
    ctx->backend = &failing;
  }
  double t0 = now_s();
  st = t->kind == OP_AG ? tpla_ag_gemm(plan, d, a, b, NULL, NULL)
                                       : tpla_gemm_rs(plan, d, a, b, NULL, NULL);
  t->seconds[rank] = now_s() - t0;
  t->st[rank] = st;
  snprintf(t->msg[rank], sizeof t->msg[rank], "%s", tpla_last_error());
  if (rank == 1)
    ctx->backend = real_backend;
  t->later[rank] = tpla_barrier(ctx, NULL);
  if (t->kind == OP_AG)
    tpla_ag_gemm_plan_destroy(plan);
  else
    tpla_gemm_rs_plan_destroy(plan);
  free(a.data), free(b.data), free(d.data);
  return 0;
}

static void test_mid_call_failure_stops_peers(void) {
  static const tpla_transport_t transports[] = {TPLA_TRANSPORT_PEER, TPLA_TRANSPORT_SENDRECV};
  static const op_kind_t kinds[] = {OP_AG, OP_RS};
  for (int x = 0; x < 2; x++)
    for (int k = 0; k < 2; k++) {
      midcall_t t = {.kind = kinds[k], .transport = transports[x]};
      ASSERT_EQ_INT(run_host_ranks_timeout(3, TIMEOUT_MS, midcall_body, &t), 0);
      for (int r = 0; r < 3; r++)
        printf("# %s over %s: rank %d %s after %.2f s: %s\n",
               k ? "GEMM+RS" : "AG+GEMM", x ? "SENDRECV" : "PEER", r,
               tpla_status_string(t.st[r]), t.seconds[r], t.msg[r]);
      ASSERT_EQ_INT(t.st[1], TPLA_ERROR_OUT_OF_MEMORY);
      ASSERT_CONTAINS(t.msg[1], "injected: out of memory");
      for (int r = 0; r < 3; r += 2) { /* a peer that needed nothing more may succeed */
        ASSERT_TRUE(t.st[r] == TPLA_ERROR_REMOTE || t.st[r] == TPLA_SUCCESS);
        ASSERT_LE(t.seconds[r], PROMPT_S);
      }
      for (int r = 0; r < 3; r++) /* every context has stopped */
        ASSERT_TRUE(t.later[r] != TPLA_SUCCESS);
    }
}

/* ---- a failed fence still ends the call ------------------------------------------- */

static struct tpla_xport_ops counting_ops;
static _Atomic int begins, ends, fail_waits;

static tpla_status_t counting_begin(tpla_xport_t *xp, uint32_t seq, void *stream,
                                    const char *fn) {
  tpla_status_t st = tpla_host_xport_ops.begin(xp, seq, stream, fn);
  if (st == TPLA_SUCCESS)
    atomic_fetch_add(&begins, 1);
  return st;
}

static tpla_status_t counting_end(tpla_xport_t *xp, void *stream) {
  atomic_fetch_add(&ends, 1);
  return tpla_host_xport_ops.end(xp, stream);
}

static tpla_status_t failing_wait_ready(tpla_xport_t *xp, int lane, int peer, uint32_t seq) {
  if (atomic_load(&fail_waits))
    return tpla_fail(TPLA_ERROR_CUDA, "wait_ready", "injected: a wait not enqueued");
  return tpla_host_xport_ops.wait_ready(xp, lane, peer, seq);
}

static int fence_body(tpla_ctx_t ctx, int rank, int nranks, void *arg) {
  int *counts = arg;
  enum { ROWS = 4, K = 4 };
  static tpla_backend_t backends[2];
  backends[rank] = *ctx->backend;
  backends[rank].xport = &counting_ops;
  const tpla_backend_t *real = ctx->backend;
  ctx->backend = &backends[rank];
  tpla_ag_gemm_desc_t first = TPLA_AG_GEMM_DESC_INIT, second;
  first.local_rows = ROWS, first.k = K, first.n = 3, first.window_group = 1;
  first.transport = TPLA_TRANSPORT_PEER;
  second = first;
  second.n = 5;
  tpla_ag_gemm_plan_t p1 = NULL, p2 = NULL;
  tpla_matrix_t a = host_matrix(ROWS, K, 1.0f), b1 = host_matrix(K, 3, 1.0f);
  tpla_matrix_t b2 = host_matrix(K, 5, 1.0f), d1 = host_matrix(ROWS * nranks, 3, 0.0f);
  tpla_matrix_t d2 = host_matrix(ROWS * nranks, 5, 0.0f);
  int bad = tpla_ag_gemm_plan_create(&p1, ctx, &first) != TPLA_SUCCESS ||
            tpla_ag_gemm_plan_create(&p2, ctx, &second) != TPLA_SUCCESS ||
            tpla_ag_gemm(p1, d1, a, b1, NULL, NULL) != TPLA_SUCCESS;
  tpla_barrier(ctx, NULL);
  if (rank == 0 && !bad) { /* p2 follows p1 in the group: its call is fenced */
    atomic_store(&begins, 0), atomic_store(&ends, 0), atomic_store(&fail_waits, 1);
    counts[2] = tpla_ag_gemm(p2, d2, a, b2, NULL, NULL);
    counts[0] = atomic_load(&begins), counts[1] = atomic_load(&ends);
    atomic_store(&fail_waits, 0);
  }
  tpla_barrier(ctx, NULL);
  tpla_ag_gemm_plan_destroy(p1);
  tpla_ag_gemm_plan_destroy(p2);
  ctx->backend = real;
  free(a.data), free(b1.data), free(b2.data), free(d1.data), free(d2.data);
  return bad;
}

static void test_failed_fence_still_ends_the_call(void) {
  int counts[3] = {-1, -1, -1};
  counting_ops = tpla_host_xport_ops;
  counting_ops.begin = counting_begin;
  counting_ops.end = counting_end;
  counting_ops.wait_ready = failing_wait_ready;
  ASSERT_EQ_INT(run_host_ranks_timeout(2, TIMEOUT_MS, fence_body, counts), 0);
  ASSERT_EQ_INT(counts[2], TPLA_ERROR_CUDA);
  ASSERT_EQ_INT(counts[0], 1);
  ASSERT_EQ_INT(counts[1], 1);
}

int main(void) {
  TEST(test_mid_call_failure_stops_peers);
  TEST(test_failed_fence_still_ends_the_call);
  return test_summary();
}
