/*
 * test_host_failures.c - how host collectives fail: a rank that never joins
 * (timeouts: the waiting ranks get TIMEOUT or REMOTE within the configured
 * time, and every later call REMOTE), a rank that destroys its context,
 * ranks that disagree (different counts, dtypes, roots or operations ->
 * REMOTE on every rank, outputs untouched, the group still usable), and a
 * rank that rejects its own arguments (it gets INVALID_ARGUMENT, its peers
 * REMOTE). Run: ./test_host_failures
 */
#include "test.h"

#include "internal.h"
#include "rank_check.h"
#include "ranks.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <time.h>

#define MAX_RANKS 8

static double now_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static void sleep_ms(int ms) {
  struct timespec t = {ms / 1000, (long)(ms % 1000) * 1000000L};
  nanosleep(&t, NULL);
}

typedef struct {
  atomic_int finished;             /* ranks past their failing call */
  tpla_status_t status[MAX_RANKS]; /* what each rank's first call returned */
  double waited[MAX_RANKS];        /* seconds each rank's failing call took */
} shared_t;

/* Wait (at most 10 s) until `count` ranks have finished. */
static void wait_finished(shared_t *s, int count) {
  for (int i = 0; i < 10000 && atomic_load(&s->finished) < count; i++)
    sleep_ms(1);
}

/* ---- a runner with explicit timeouts -------------------------------------- */

typedef struct {
  tpla_host_group_t group;
  int rank, nranks;
  const tpla_config_t *ctx_cfg;
  rank_fn_t fn;
  void *arg;
  int failed;
} thread_t;

static void *thread_main(void *p) {
  thread_t *t = p;
  tpla_ctx_t ctx = NULL;
  if (tpla_ctx_create_host(&ctx, t->group, t->rank, t->ctx_cfg) != TPLA_SUCCESS) {
    t->failed = 1;
    return NULL;
  }
  t->failed = t->fn(ctx, t->rank, t->nranks, t->arg);
  tpla_ctx_destroy(ctx);
  return NULL;
}

/* Like run_host_ranks, but the group gets `group_timeout_ms` and every
 * context `ctx_timeout_ms` (0: no configuration, inherit the group's). */
static int run_timed(int nranks, int64_t group_timeout_ms, int64_t ctx_timeout_ms, rank_fn_t fn,
                     void *arg) {
  tpla_config_t gcfg = TPLA_CONFIG_INIT, ccfg = TPLA_CONFIG_INIT;
  gcfg.timeout_ms = group_timeout_ms;
  ccfg.timeout_ms = ctx_timeout_ms;
  tpla_host_group_t group;
  if (tpla_host_group_create(&group, nranks, &gcfg) != TPLA_SUCCESS)
    return -1;
  thread_t t[MAX_RANKS];
  pthread_t id[MAX_RANKS];
  for (int r = 0; r < nranks; r++) {
    t[r] = (thread_t){group, r, nranks, ctx_timeout_ms ? &ccfg : NULL, fn, arg, 0};
    pthread_create(&id[r], NULL, thread_main, &t[r]);
  }
  int failed = 0;
  for (int r = 0; r < nranks; r++) {
    pthread_join(id[r], NULL);
    failed += t[r].failed;
  }
  if (tpla_host_group_destroy(group) != TPLA_SUCCESS)
    return -1;
  return failed;
}

/* ---- timeouts ---------------------------------------------------------------- */

/* Ranks 0 and 1 all-reduce; rank 2 only shows up after they gave up. */
static int absent_rank_body(tpla_ctx_t ctx, int rank, int nranks, void *arg) {
  shared_t *s = arg;
  float x[4] = {1, 2, 3, 4}, y[4] = {7, 7, 7, 7};
  if (rank == 2) {
    wait_finished(s, 2);
    RCHECK_STATUS(tpla_barrier(ctx, NULL), TPLA_ERROR_REMOTE);
    RCHECK(strstr(tpla_last_error(), "timed out") != NULL, "%s", tpla_last_error());
    return 0;
  }
  double t0 = now_s();
  s->status[rank] = tpla_allreduce(ctx, y, x, 4, TPLA_FLOAT32, NULL);
  double waited = now_s() - t0;
  s->waited[rank] = waited;
  atomic_fetch_add(&s->finished, 1);
  RCHECK(s->status[rank] == TPLA_ERROR_TIMEOUT || s->status[rank] == TPLA_ERROR_REMOTE, "got %s",
         tpla_status_string(s->status[rank]));
  RCHECK(strstr(tpla_last_error(), "tpla_allreduce") != NULL, "%s", tpla_last_error());
  RCHECK(waited < 5.0, "waited %.2f s with a 100 ms timeout", waited);
  RCHECK(y[0] == 7 && y[3] == 7, "recv written by a failed all-reduce");
  /* The group is broken for good: every later call fails at once. */
  RCHECK_STATUS(tpla_broadcast(ctx, x, 4, TPLA_FLOAT32, 0, NULL), TPLA_ERROR_REMOTE);
  RCHECK(strstr(tpla_last_error(), "broken") != NULL, "%s", tpla_last_error());
  RCHECK_STATUS(tpla_sendrecv(ctx, x, 4, 1 - rank, y, 4, 1 - rank, TPLA_FLOAT32, NULL),
                TPLA_ERROR_REMOTE);
  RCHECK_STATUS(tpla_barrier(ctx, NULL), TPLA_ERROR_REMOTE);
  return 0;
}

static void test_timeout_when_a_rank_never_joins(void) {
  shared_t s = {0};
  /* the contexts' own configuration (100 ms) overrides the group's 5 min */
  ASSERT_EQ_INT(run_timed(3, 0, 100, absent_rank_body, &s), 0);
  ASSERT_TRUE(s.status[0] == TPLA_ERROR_TIMEOUT || s.status[1] == TPLA_ERROR_TIMEOUT);
  /* not before the timeout either: the rank that timed out waited its 100 ms (the other
   * may have entered later and heard of the broken group at the same moment) */
  double longest = s.waited[0] > s.waited[1] ? s.waited[0] : s.waited[1];
  ASSERT_LE(0.095, longest);
}

static int absent_peer_body(tpla_ctx_t ctx, int rank, int nranks, void *arg) {
  shared_t *s = arg;
  double v[3] = {1, 2, 3}, w[3] = {0};
  if (rank == 1) {
    wait_finished(s, 1);
    RCHECK_STATUS(tpla_sendrecv(ctx, v, 3, 0, w, 3, 0, TPLA_FLOAT64, NULL), TPLA_ERROR_REMOTE);
    return 0;
  }
  double t0 = now_s();
  tpla_status_t st = tpla_sendrecv(ctx, v, 3, 1, w, 3, 1, TPLA_FLOAT64, NULL);
  atomic_fetch_add(&s->finished, 1);
  RCHECK(st == TPLA_ERROR_TIMEOUT, "got %s", tpla_status_string(st));
  RCHECK(strstr(tpla_last_error(), "rank 1") != NULL, "%s", tpla_last_error());
  double waited = now_s() - t0;
  RCHECK(waited < 5.0, "waited too long");
  RCHECK(waited >= 0.095, "gave up after %.4f s, before its 100 ms timeout", waited);
  RCHECK(w[0] == 0, "recv written");
  return 0;
}

static void test_sendrecv_timeout(void) {
  shared_t s = {0};
  /* contexts without configuration inherit the group's 100 ms */
  ASSERT_EQ_INT(run_timed(2, 100, 0, absent_peer_body, &s), 0);
}

/* A rank that leaves (destroys its context) fails the waiting ranks at
 * once, long before the 30 s timeout of run_host_ranks. */
static int leaving_rank_body(tpla_ctx_t ctx, int rank, int nranks, void *arg) {
  if (rank == 1)
    return 0;
  float x[2] = {1, 2};
  double t0 = now_s();
  RCHECK_STATUS(tpla_allreduce(ctx, x, x, 2, TPLA_FLOAT32, NULL), TPLA_ERROR_REMOTE);
  RCHECK(strstr(tpla_last_error(), "destroyed") != NULL, "%s", tpla_last_error());
  RCHECK(now_s() - t0 < 5.0, "waited too long");
  return 0;
}

static void test_departed_rank_fails_waiters(void) {
  ASSERT_EQ_INT(run_host_ranks(2, leaving_rank_body, NULL), 0);
}

/* ---- disagreements --------------------------------------------------------- */

/* After a disagreement the group still works. */
static int still_usable(tpla_ctx_t ctx, int rank, int nranks) {
  float x = 1.0f;
  RCHECK_STATUS(tpla_allreduce(ctx, &x, &x, 1, TPLA_FLOAT32, NULL), TPLA_SUCCESS);
  RCHECK(x == (float)nranks, "sum %g", (double)x);
  return 0;
}

#define EXPECT_REMOTE(expr)                                                         \
  do {                                                                              \
    RCHECK_STATUS(expr, TPLA_ERROR_REMOTE);                                         \
    RCHECK(strstr(tpla_last_error(), "disagree") != NULL, "%s", tpla_last_error()); \
    if (still_usable(ctx, rank, nranks))                                            \
      return 1;                                                                     \
  } while (0)

static int disagree_body(tpla_ctx_t ctx, int rank, int nranks, void *arg) {
  float send[64], recv[64];
  for (int i = 0; i < 64; i++)
    send[i] = (float)i, recv[i] = -1.0f;
  /* allreduce: rank 2 passes another count, then another dtype */
  EXPECT_REMOTE(tpla_allreduce(ctx, recv, send, rank == 2 ? 5 : 4, TPLA_FLOAT32, NULL));
  EXPECT_REMOTE(tpla_allreduce(ctx, recv, send, 4, rank == 1 ? TPLA_BFLOAT16 : TPLA_FLOAT32,
                               NULL));
  /* allgatherv: rank 2 believes rank 1 sends 1 element, rank 1 sends 3 */
  size_t counts[3] = {2, 3, 4}, other[3] = {2, 1, 4};
  const size_t *mine = rank == 2 ? other : counts;
  EXPECT_REMOTE(tpla_allgatherv(ctx, recv, send, mine, TPLA_FLOAT32, NULL));
  /* reduce_scatterv: rank 0's counts differ in a block that is not its own */
  size_t rs0[3] = {2, 3, 9}, rs[3] = {2, 3, 4};
  EXPECT_REMOTE(tpla_reduce_scatterv(ctx, recv, send, rank == 0 ? rs0 : rs, TPLA_FLOAT32, NULL));
  /* the same counts in another order on rank 1 (equal totals: an order-blind fingerprint
   * of the counts passes these, and a block goes astray) */
  size_t permuted[3] = {3, 2, 4};
  EXPECT_REMOTE(tpla_reduce_scatterv(ctx, recv, send, rank == 1 ? permuted : rs, TPLA_FLOAT32,
                                     NULL));
  EXPECT_REMOTE(tpla_allgatherv(ctx, recv, send, rank == 1 ? permuted : counts, TPLA_FLOAT32,
                                NULL));
  /* broadcast: different roots, then different counts */
  EXPECT_REMOTE(tpla_broadcast(ctx, recv, 4, TPLA_FLOAT32, rank == 1 ? 1 : 0, NULL));
  EXPECT_REMOTE(tpla_broadcast(ctx, recv, rank == 0 ? 8 : 4, TPLA_FLOAT32, 0, NULL));
  /* different operations */
  if (rank == 0)
    EXPECT_REMOTE(tpla_barrier(ctx, NULL));
  else
    EXPECT_REMOTE(tpla_broadcast(ctx, recv, 4, TPLA_FLOAT32, 0, NULL));
  for (int i = 0; i < 64; i++)
    RCHECK(recv[i] == -1.0f, "recv[%d] written by a failed collective", i);
  return 0;
}

static void test_disagreements_fail_every_rank(void) {
  ASSERT_EQ_INT(run_host_ranks(3, disagree_body, NULL), 0);
}

/* Ring on 3 ranks where rank 2 expects the wrong count from rank 1: the
 * link 1 -> 2 fails on both ends, the other links succeed. */
static int sendrecv_mismatch_body(tpla_ctx_t ctx, int rank, int nranks, void *arg) {
  int send[8] = {rank, rank, rank, rank, rank, rank, rank, rank}, recv[8] = {-1};
  int dst = (rank + 1) % 3, src = (rank + 2) % 3;
  size_t expect = rank == 2 ? 5 : 4;
  tpla_status_t st = tpla_sendrecv(ctx, send, 4, dst, recv, expect, src, TPLA_FLOAT32, NULL);
  if (rank == 0) {
    RCHECK_STATUS(st, TPLA_SUCCESS);
    RCHECK(recv[0] == 2 && recv[3] == 2, "data from rank 2");
  } else {
    RCHECK_STATUS(st, TPLA_ERROR_REMOTE);
    RCHECK(strstr(tpla_last_error(), rank == 1 ? "rank 2" : "rank 1") != NULL, "%s",
           tpla_last_error());
  }
  if (rank == 2)
    RCHECK(recv[0] == -1, "rejected data was written");
  return still_usable(ctx, rank, nranks);
}

static void test_sendrecv_count_mismatch(void) {
  ASSERT_EQ_INT(run_host_ranks(3, sendrecv_mismatch_body, NULL), 0);
}

static int alltoallv_mismatch_body(tpla_ctx_t ctx, int rank, int nranks, void *arg) {
  float send[8] = {0}, recv[8] = {-1, -1, -1, -1, -1, -1, -1, -1};
  size_t sc[2] = {2, 2}, sd[2] = {0, 2}, rc[2] = {2, 2}, rd[2] = {0, 2};
  if (rank == 1)
    rc[0] = 3; /* rank 0 sends 2 */
  RCHECK_STATUS(ctx->backend->alltoallv(ctx, recv, rc, rd, send, sc, sd, TPLA_FLOAT32, NULL),
                TPLA_ERROR_REMOTE);
  RCHECK(recv[0] == -1 && recv[3] == -1, "recv written");
  return still_usable(ctx, rank, nranks);
}

static void test_alltoallv_count_mismatch(void) {
  ASSERT_EQ_INT(run_host_ranks(2, alltoallv_mismatch_body, NULL), 0);
}

/* ---- a rank rejecting its own arguments ------------------------------------ */

static int local_reject_body(tpla_ctx_t ctx, int rank, int nranks, void *arg) {
  float buf[32] = {0}, in[4] = {1, 2, 3, 4};
  size_t counts[4] = {4, 4, 4, 4};
  /* rank 1's send overlaps its recv without being its in-place block */
  const float *send = rank == 1 ? buf + 1 : in;
  tpla_status_t st = tpla_allgatherv(ctx, buf, send, counts, TPLA_FLOAT32, NULL);
  if (rank == 1) {
    RCHECK_STATUS(st, TPLA_ERROR_INVALID_ARGUMENT);
    RCHECK(strstr(tpla_last_error(), "'send'") != NULL, "%s", tpla_last_error());
  } else {
    RCHECK_STATUS(st, TPLA_ERROR_REMOTE);
    RCHECK(strstr(tpla_last_error(), "rank 1") != NULL, "%s", tpla_last_error());
  }
  /* sendrecv between ranks 0 and 1 where rank 0's recv overlaps its send */
  if (rank < 2) {
    float *recv = rank == 0 ? buf + 2 : buf + 16;
    st = tpla_sendrecv(ctx, buf, 4, 1 - rank, recv, 4, 1 - rank, TPLA_FLOAT32, NULL);
    RCHECK_STATUS(st, rank == 0 ? TPLA_ERROR_INVALID_ARGUMENT : TPLA_ERROR_REMOTE);
  }
  return still_usable(ctx, rank, nranks);
}

static void test_local_rejection_fails_peers(void) {
  ASSERT_EQ_INT(run_host_ranks(4, local_reject_body, NULL), 0);
}

/* ---- membership ---------------------------------------------------------- */

static void test_group_destroy_refuses_live_contexts(void) {
  tpla_host_group_t g;
  tpla_ctx_t a, b;
  ASSERT_OK(tpla_host_group_create(&g, 2, NULL));
  ASSERT_OK(tpla_ctx_create_host(&a, g, 0, NULL));
  ASSERT_OK(tpla_ctx_create_host(&b, g, 1, NULL));
  ASSERT_STATUS(tpla_host_group_destroy(g), TPLA_ERROR_INVALID_USAGE);
  ASSERT_CONTAINS(tpla_last_error(), "2 context");
  ASSERT_OK(tpla_ctx_destroy(a));
  ASSERT_STATUS(tpla_host_group_destroy(g), TPLA_ERROR_INVALID_USAGE);
  ASSERT_CONTAINS(tpla_last_error(), "rank 1");
  ASSERT_OK(tpla_ctx_destroy(b));
  ASSERT_OK(tpla_host_group_destroy(g));
}

int main(void) {
  TEST(test_timeout_when_a_rank_never_joins);
  TEST(test_sendrecv_timeout);
  TEST(test_departed_rank_fails_waiters);
  TEST(test_disagreements_fail_every_rank);
  TEST(test_sendrecv_count_mismatch);
  TEST(test_alltoallv_count_mismatch);
  TEST(test_local_rejection_fails_peers);
  TEST(test_group_destroy_refuses_live_contexts);
  return test_summary();
}
