/*
 * test_ctx_abort.c - tpla_ctx_abort and tpla_ctx_get_async_error on the host
 * executor. A rank blocked in a call whose peer never comes (a collective,
 * an overlap call on the PEER or SENDRECV transport, a Newton-Schulz
 * execute) is released at once, with REMOTE, when another thread aborts its
 * context or the peer's, long before the contexts' 20 s timeout; the
 * aborted context then reports ABORTED and its peers REMOTE
 * (get_async_error, every later call, which fails at once and writes
 * nothing), while queries and destroy still work. Also on one rank (abort
 * twice, NULLs, a healthy context) and on the cross-process group (fork()ed
 * ranks). Run: ./test_ctx_abort
 */
#include "test.h"

#include "rank_check.h"
#include "ranks.h"
#include "host_shared_util.h" /* now_s, sleep_ms, shared_alloc, run_procs */

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#define MAX_RANKS 4
#define TIMEOUT_MS 20000  /* what a wait would last without the abort */
#define QUICK_S 5.0       /* a released wait must end well before that */
#define ABORT_AFTER_MS 200 /* the aborter's delay once the waiters are inside */

/* ---- the scene: rank threads, one absent rank, an aborting thread --------------- */

typedef enum { CALL_ALLREDUCE, CALL_SENDRECV, CALL_GEMM_AR, CALL_AG_GEMM, CALL_NS } call_kind_t;

typedef struct {
  int nranks;
  int absent;          /* the rank that never makes the call */
  int victim;          /* the rank whose context the aborting thread aborts */
  call_kind_t call;
  tpla_transport_t transport; /* overlap calls */
  tpla_host_group_t group;
  tpla_ctx_t ctx[MAX_RANKS];
  atomic_int created;  /* contexts published in ctx[] */
  atomic_int entered;  /* waiting ranks about to make the call */
  atomic_int released; /* waiting ranks whose call has returned */
  int failed[MAX_RANKS];
} scene_t;

/* Spin (1 ms steps, at most 30 s) until *counter reaches `count`. */
static void await_count(atomic_int *counter, int count) {
  for (int i = 0; i < 30000 && atomic_load(counter) < count; i++)
    sleep_ms(1);
}

/* Every later call on a failed context fails at once with `want`, writes
 * nothing and mentions tpla_ctx_abort; queries, a second abort and the
 * counters still work. */
static int check_dead_ctx(tpla_ctx_t ctx, int rank, int nranks, tpla_status_t want) {
  double t0 = now_s();
  RCHECK_STATUS(tpla_ctx_get_async_error(ctx), want);
  RCHECK(strstr(tpla_last_error(), "tpla_ctx_abort") != NULL, "%s", tpla_last_error());
  float send[4] = {1, 2, 3, 4}, recv[4] = {-7, -7, -7, -7};
  RCHECK_STATUS(tpla_allreduce(ctx, recv, send, 4, TPLA_FLOAT32, NULL), want);
  RCHECK(strstr(tpla_last_error(), "tpla_allreduce") != NULL, "%s", tpla_last_error());
  RCHECK(strstr(tpla_last_error(), "tpla_ctx_abort") != NULL, "%s", tpla_last_error());
  for (int i = 0; i < 4; i++)
    RCHECK(recv[i] == -7.0f, "recv[%d] = %g was written", i, recv[i]);
  RCHECK_STATUS(tpla_barrier(ctx, NULL), want);
  RCHECK_STATUS(tpla_sendrecv(ctx, send, 4, (rank + 1) % nranks, recv, 4,
                              (rank + nranks - 1) % nranks, TPLA_FLOAT32, NULL),
                want);
  for (int i = 0; i < 4; i++)
    RCHECK(recv[i] == -7.0f, "recv[%d] = %g was written by sendrecv", i, recv[i]);
  float a[6] = {1, 2, 3, 4, 5, 6}, b[6] = {1, 0, 0, 1, 1, 1}, d[4] = {9, 9, 9, 9};
  tpla_matrix_t dm = {d, 2, 2, 2, TPLA_FLOAT32}, am = {a, 2, 3, 3, TPLA_FLOAT32},
                bm = {b, 3, 2, 2, TPLA_FLOAT32};
  RCHECK_STATUS(tpla_gemm(ctx, dm, am, TPLA_OP_N, bm, TPLA_OP_N, NULL, NULL), want);
  for (int i = 0; i < 4; i++)
    RCHECK(d[i] == 9.0f, "d[%d] = %g was written by tpla_gemm", i, d[i]);
  tpla_ns_plan_t ns = (tpla_ns_plan_t)(uintptr_t)0x10; /* must come back NULL */
  tpla_ns_desc_t nd = TPLA_NS_DESC_INIT;
  nd.local_rows = 8;
  nd.local_cols = 4;
  RCHECK_STATUS(tpla_ns_plan_create(&ns, ctx, &nd), want);
  RCHECK(ns == NULL, "tpla_ns_plan_create left *plan = %p", (void *)ns);
  tpla_gemm_ar_plan_t ar = (tpla_gemm_ar_plan_t)(uintptr_t)0x10;
  tpla_gemm_ar_desc_t ad = TPLA_GEMM_AR_DESC_INIT;
  ad.m = 4;
  ad.k = 2;
  ad.n = 2;
  RCHECK_STATUS(tpla_gemm_ar_plan_create(&ar, ctx, &ad), want);
  RCHECK(ar == NULL, "tpla_gemm_ar_plan_create left *plan = %p", (void *)ar);
  RCHECK(now_s() - t0 < 1.0, "the failing calls took %.2f s", now_s() - t0);
  /* queries still work; aborting again changes nothing */
  int r = -1, n = -1, dev = 0;
  tpla_executor_t ex = TPLA_EXECUTOR_CUDA;
  RCHECK_OK(tpla_ctx_get_info(ctx, &r, &n, &ex, &dev));
  RCHECK(r == rank && n == nranks && ex == TPLA_EXECUTOR_HOST, "info %d %d %d", r, n, ex);
  size_t bytes = 0;
  RCHECK_OK(tpla_ctx_workspace_bytes(ctx, &bytes));
  tpla_counters_t c = TPLA_COUNTERS_INIT;
  RCHECK_OK(tpla_ctx_get_counters(ctx, &c));
  RCHECK_OK(tpla_ctx_abort(ctx));
  RCHECK_STATUS(tpla_ctx_get_async_error(ctx), want);
  return 0;
}

/* The blocked call of a waiting rank; plans were made before it. */
static tpla_status_t blocked_call(scene_t *s, tpla_ctx_t ctx, int rank, void *plan,
                                  float *buf) {
  int P = s->nranks;
  switch (s->call) {
  case CALL_ALLREDUCE:
    return tpla_allreduce(ctx, buf + 64, buf, 64, TPLA_FLOAT32, NULL);
  case CALL_SENDRECV: /* receive from the absent rank */
    return tpla_sendrecv(ctx, NULL, 0, -1, buf + 64, 64, s->absent, TPLA_FLOAT32, NULL);
  case CALL_GEMM_AR: { /* D (8 x 6) = sum of A (8 x 4) B (4 x 6) */
    tpla_matrix_t d = {buf + 64, 8, 6, 6, TPLA_FLOAT32}, a = {buf, 8, 4, 4, TPLA_FLOAT32},
                  b = {buf + 32, 4, 6, 6, TPLA_FLOAT32};
    return tpla_gemm_ar((tpla_gemm_ar_plan_t)plan, d, a, b, NULL, NULL);
  }
  case CALL_AG_GEMM: { /* D (4P x 6) = gathered A (4 rows a rank, k 4) B (4 x 6) */
    tpla_matrix_t d = {buf + 64, 4 * P, 6, 6, TPLA_FLOAT32}, a = {buf, 4, 4, 4, TPLA_FLOAT32},
                  b = {buf + 32, 4, 6, 6, TPLA_FLOAT32};
    return tpla_ag_gemm((tpla_ag_gemm_plan_t)plan, d, a, b, NULL, NULL);
  }
  case CALL_NS: {
    tpla_matrix_t x = {buf, 16, 8, 8, TPLA_FLOAT32};
    return tpla_ns_execute((tpla_ns_plan_t)plan, x, NULL);
  }
  }
  return TPLA_ERROR_INTERNAL;
}

/* Collective set-up of the call's plan (every rank). */
static tpla_status_t make_plan(scene_t *s, tpla_ctx_t ctx, void **plan) {
  *plan = NULL;
  if (s->call == CALL_GEMM_AR) {
    tpla_gemm_ar_desc_t d = TPLA_GEMM_AR_DESC_INIT;
    d.m = 8, d.k = 4, d.n = 6, d.mode = TPLA_OVERLAP_OVERLAP, d.transport = s->transport;
    return tpla_gemm_ar_plan_create((tpla_gemm_ar_plan_t *)plan, ctx, &d);
  }
  if (s->call == CALL_AG_GEMM) {
    tpla_ag_gemm_desc_t d = TPLA_AG_GEMM_DESC_INIT;
    d.local_rows = 4, d.k = 4, d.n = 6, d.mode = TPLA_OVERLAP_OVERLAP;
    d.transport = s->transport;
    return tpla_ag_gemm_plan_create((tpla_ag_gemm_plan_t *)plan, ctx, &d);
  }
  if (s->call == CALL_NS) { /* 16 P x 8, row-sharded: the Gram of the short side is summed */
    tpla_ns_desc_t d = TPLA_NS_DESC_INIT;
    d.local_rows = 16, d.local_cols = 8;
    return tpla_ns_plan_create((tpla_ns_plan_t *)plan, ctx, &d);
  }
  return TPLA_SUCCESS;
}

static void destroy_plan(scene_t *s, void *plan) {
  if (s->call == CALL_GEMM_AR)
    tpla_gemm_ar_plan_destroy(plan);
  else if (s->call == CALL_AG_GEMM)
    tpla_ag_gemm_plan_destroy(plan);
  else if (s->call == CALL_NS)
    tpla_ns_plan_destroy(plan);
}

static int scene_body(scene_t *s, tpla_ctx_t ctx, int rank) {
  int P = s->nranks;
  void *plan = NULL;
  RCHECK_OK(make_plan(s, ctx, &plan));
  RCHECK_OK(tpla_ctx_get_async_error(ctx)); /* healthy so far */
  tpla_status_t want = rank == s->victim ? TPLA_ERROR_ABORTED : TPLA_ERROR_REMOTE;
  if (rank == s->absent) {
    /* Stays (its context alive, so no departure breaks the group) until
     * every waiting rank was released by the abort. */
    await_count(&s->released, P - 1);
    int rc = check_dead_ctx(ctx, rank, P, want);
    destroy_plan(s, plan);
    return rc;
  }
  float buf[64 + 8 * MAX_RANKS * 6];
  rng_t rng;
  rng_seed(&rng, 7 + (uint64_t)rank);
  for (int i = 0; i < 64; i++)
    buf[i] = (float)rng_uniform(&rng);
  for (size_t i = 64; i < sizeof buf / sizeof buf[0]; i++)
    buf[i] = -7.0f;
  atomic_fetch_add(&s->entered, 1);
  double t0 = now_s();
  tpla_status_t st = blocked_call(s, ctx, rank, plan, buf);
  double waited = now_s() - t0;
  atomic_fetch_add(&s->released, 1);
  /* the group broke under the wait: REMOTE, also on the aborting rank */
  RCHECK_STATUS(st, TPLA_ERROR_REMOTE);
  RCHECK(strstr(tpla_last_error(), "tpla_ctx_abort") != NULL, "%s", tpla_last_error());
  RCHECK(waited >= 0.05 && waited < QUICK_S, "the call returned after %.3f s", waited);
  if (s->call == CALL_ALLREDUCE || s->call == CALL_SENDRECV) /* recv untouched */
    for (int i = 64; i < 128; i++)
      RCHECK(buf[i] == -7.0f, "recv[%d] = %g was written", i - 64, buf[i]);
  int rc = check_dead_ctx(ctx, rank, P, want);
  if (rc == 0 && plan != NULL) { /* the plan fails at once too, writing nothing */
    for (size_t i = 64; i < sizeof buf / sizeof buf[0]; i++)
      buf[i] = -7.0f;
    float x0 = buf[0];
    RCHECK_STATUS(blocked_call(s, ctx, rank, plan, buf), want);
    for (size_t i = 64; i < sizeof buf / sizeof buf[0]; i++)
      RCHECK(buf[i] == -7.0f, "buf[%zu] = %g was written by a call after the abort", i, buf[i]);
    RCHECK(buf[0] == x0, "x was written by a call after the abort");
  }
  /* A plan is destroyed once every rank's calls of it are over: a peer
   * released by the same abort may still be writing into our window. */
  await_count(&s->released, P - 1);
  destroy_plan(s, plan);
  return rc;
}

static void *scene_thread(void *p) {
  scene_t *s = ((void **)p)[0];
  int rank = (int)(intptr_t)((void **)p)[1];
  tpla_ctx_t ctx = NULL;
  if (tpla_ctx_create_host(&ctx, s->group, rank, NULL) != TPLA_SUCCESS) {
    fprintf(stderr, "  rank %d: %s\n", rank, tpla_last_error());
    s->failed[rank] = 1;
    atomic_fetch_add(&s->created, 1);
    return NULL;
  }
  s->ctx[rank] = ctx;
  atomic_fetch_add(&s->created, 1);
  s->failed[rank] = scene_body(s, ctx, rank);
  if (tpla_ctx_destroy(ctx) != TPLA_SUCCESS)
    s->failed[rank] = 1;
  return NULL;
}

/* Runs the scene; the calling thread is the aborter. Returns failed ranks
 * (+1 if the abort itself failed), or -1 if setup failed. */
static int run_scene(int nranks, int absent, int victim, call_kind_t call,
                     tpla_transport_t transport) {
  scene_t *s = calloc(1, sizeof *s);
  if (s == NULL)
    return -1;
  s->nranks = nranks, s->absent = absent, s->victim = victim;
  s->call = call, s->transport = transport;
  tpla_config_t cfg = TPLA_CONFIG_INIT;
  cfg.timeout_ms = TIMEOUT_MS;
  if (tpla_host_group_create(&s->group, nranks, &cfg) != TPLA_SUCCESS) {
    free(s);
    return -1;
  }
  pthread_t ids[MAX_RANKS];
  void *args[MAX_RANKS][2];
  for (int r = 0; r < nranks; r++) {
    args[r][0] = s;
    args[r][1] = (void *)(intptr_t)r;
    pthread_create(&ids[r], NULL, scene_thread, args[r]);
  }
  await_count(&s->created, nranks);
  await_count(&s->entered, nranks - 1);
  sleep_ms(ABORT_AFTER_MS); /* let the waiting ranks block inside their call */
  int failed = 0;
  if (s->ctx[victim] == NULL || tpla_ctx_abort(s->ctx[victim]) != TPLA_SUCCESS)
    failed++;
  for (int r = 0; r < nranks; r++) {
    pthread_join(ids[r], NULL);
    failed += s->failed[r];
  }
  if (tpla_host_group_destroy(s->group) != TPLA_SUCCESS)
    failed++;
  free(s);
  return failed;
}

/* ---- thread groups ---------------------------------------------------------------- */

/* Rank 0 (and rank 2 of 3) wait in an all-reduce that rank 1 never makes;
 * the waiting rank itself is aborted from another thread. */
static void test_collective_own_abort_releases_the_wait(void) {
  ASSERT_EQ_INT(run_scene(2, 1, 0, CALL_ALLREDUCE, 0), 0);
  ASSERT_EQ_INT(run_scene(3, 1, 0, CALL_ALLREDUCE, 0), 0);
}

/* The same, but the absent rank's context is the one aborted (as a job
 * would when that rank hangs): its peers' waits end. */
static void test_collective_peer_abort_releases_the_wait(void) {
  ASSERT_EQ_INT(run_scene(2, 1, 1, CALL_ALLREDUCE, 0), 0);
  ASSERT_EQ_INT(run_scene(3, 1, 1, CALL_ALLREDUCE, 0), 0);
}

/* A point-to-point receive from a rank that never sends. */
static void test_sendrecv_wait_released(void) {
  ASSERT_EQ_INT(run_scene(2, 1, 0, CALL_SENDRECV, 0), 0);
  ASSERT_EQ_INT(run_scene(3, 1, 1, CALL_SENDRECV, 0), 0);
}

/* Overlap calls waiting on the PEER transport's flags, or in SENDRECV
 * steps, for a peer that never calls. */
static void test_overlap_waits_released(void) {
  ASSERT_EQ_INT(run_scene(2, 1, 0, CALL_GEMM_AR, TPLA_TRANSPORT_PEER), 0);
  ASSERT_EQ_INT(run_scene(2, 1, 1, CALL_GEMM_AR, TPLA_TRANSPORT_PEER), 0);
  ASSERT_EQ_INT(run_scene(2, 1, 0, CALL_GEMM_AR, TPLA_TRANSPORT_SENDRECV), 0);
  ASSERT_EQ_INT(run_scene(3, 1, 1, CALL_AG_GEMM, TPLA_TRANSPORT_PEER), 0);
  ASSERT_EQ_INT(run_scene(3, 1, 0, CALL_AG_GEMM, TPLA_TRANSPORT_SENDRECV), 0);
}

/* A Newton-Schulz execute (2 ranks: the Gram summed by pulls through the
 * transport; with TPLA_NS_GRAM_SUM=nccl by the group's all-reduce). */
static void test_ns_execute_released(void) {
  ASSERT_EQ_INT(run_scene(2, 1, 0, CALL_NS, 0), 0);
  ASSERT_EQ_INT(run_scene(2, 1, 1, CALL_NS, 0), 0);
  setenv("TPLA_NS_GRAM_SUM", "nccl", 1); /* before the rank threads start */
  int failed = run_scene(2, 1, 0, CALL_NS, 0);
  failed += run_scene(3, 1, 1, CALL_NS, 0);
  unsetenv("TPLA_NS_GRAM_SUM");
  ASSERT_EQ_INT(failed, 0);
}

/* ---- one rank, arguments ---------------------------------------------------------- */

static int single_rank_body(tpla_ctx_t ctx) {
  int rank = 0;
  RCHECK_OK(tpla_ctx_get_async_error(ctx));
  /* plans made while healthy */
  tpla_ns_desc_t nd = TPLA_NS_DESC_INIT;
  nd.local_rows = 12, nd.local_cols = 6;
  tpla_ns_plan_t ns = NULL;
  RCHECK_OK(tpla_ns_plan_create(&ns, ctx, &nd));
  tpla_ag_gemm_desc_t agd = TPLA_AG_GEMM_DESC_INIT;
  agd.local_rows = 4, agd.k = 3, agd.n = 2;
  tpla_ag_gemm_plan_t ag = NULL;
  RCHECK_OK(tpla_ag_gemm_plan_create(&ag, ctx, &agd));
  float x[72], a[12], b[6], d[8];
  for (int i = 0; i < 72; i++)
    x[i] = (float)((i * 7) % 11) - 5.0f;
  for (int i = 0; i < 12; i++)
    a[i] = (float)i;
  for (int i = 0; i < 6; i++)
    b[i] = 1.0f;
  tpla_matrix_t xm = {x, 12, 6, 6, TPLA_FLOAT32}, am = {a, 4, 3, 3, TPLA_FLOAT32},
                bm = {b, 3, 2, 2, TPLA_FLOAT32}, dm = {d, 4, 2, 2, TPLA_FLOAT32};
  RCHECK_OK(tpla_ag_gemm(ag, dm, am, bm, NULL, NULL));
  int avail = 0;
  RCHECK_OK(tpla_ag_gemm_plan_has_gathered(ag, &avail));
  RCHECK(avail == 1, "no gathered view before the abort");

  RCHECK_OK(tpla_ctx_abort(ctx));
  RCHECK_STATUS(tpla_ctx_get_async_error(ctx), TPLA_ERROR_ABORTED);
  RCHECK(strstr(tpla_last_error(), "tpla_ctx_abort was called on rank 0") != NULL, "%s",
         tpla_last_error());
  if (check_dead_ctx(ctx, 0, 1, TPLA_ERROR_ABORTED) != 0) /* aborts twice, too */
    return 1;
  /* the plans fail at once and write nothing */
  float x0[72], d0[8];
  memcpy(x0, x, sizeof x);
  memcpy(d0, d, sizeof d);
  RCHECK_STATUS(tpla_ns_execute(ns, xm, NULL), TPLA_ERROR_ABORTED);
  RCHECK(memcmp(x, x0, sizeof x) == 0, "x was written by tpla_ns_execute after the abort");
  RCHECK_STATUS(tpla_ag_gemm(ag, dm, am, bm, NULL, NULL), TPLA_ERROR_ABORTED);
  RCHECK(memcmp(d, d0, sizeof d) == 0, "d was written by tpla_ag_gemm after the abort");
  RCHECK_OK(tpla_ag_gemm_plan_has_gathered(ag, &avail));
  RCHECK(avail == 0, "a gathered view is offered after the abort");
  tpla_matrix_t g;
  RCHECK_STATUS(tpla_ag_gemm_gathered(ag, &g), TPLA_ERROR_ABORTED);
  int64_t rows[1] = {4};
  float gathered[12];
  tpla_matrix_t gm = {gathered, 4, 3, 3, TPLA_FLOAT32};
  RCHECK_STATUS(tpla_allgather_rows(ctx, gm, am, rows, NULL), TPLA_ERROR_ABORTED);
  /* calls with nothing to do are no-ops, but not on a failed context */
  size_t none[1] = {0};
  RCHECK_STATUS(tpla_allreduce(ctx, x, x, 0, TPLA_FLOAT32, NULL), TPLA_ERROR_ABORTED);
  RCHECK_STATUS(tpla_allgatherv(ctx, x, x, none, TPLA_FLOAT32, NULL), TPLA_ERROR_ABORTED);
  RCHECK_STATUS(tpla_reduce_scatterv(ctx, x, x, none, TPLA_FLOAT32, NULL), TPLA_ERROR_ABORTED);
  RCHECK_STATUS(tpla_broadcast(ctx, x, 0, TPLA_FLOAT32, 0, NULL), TPLA_ERROR_ABORTED);
  RCHECK_STATUS(tpla_sendrecv(ctx, x, 0, -1, x, 0, -1, TPLA_FLOAT32, NULL), TPLA_ERROR_ABORTED);
  tpla_matrix_t empty_d = {d, 0, 2, 2, TPLA_FLOAT32}, empty_a = {x, 0, 3, 3, TPLA_FLOAT32};
  RCHECK_STATUS(tpla_gemm(ctx, empty_d, empty_a, TPLA_OP_N, bm, TPLA_OP_N, NULL, NULL),
                TPLA_ERROR_ABORTED);
  size_t bytes = 0;
  RCHECK_OK(tpla_ns_plan_workspace_bytes(ns, &bytes)); /* plan queries still work */
  RCHECK_OK(tpla_ns_plan_destroy(ns));
  RCHECK_OK(tpla_ag_gemm_plan_destroy(ag));
  return 0;
}

static void test_single_rank_abort(void) {
  tpla_host_group_t group;
  tpla_ctx_t ctx;
  ASSERT_EQ_INT(single_host_ctx(&group, &ctx), 0);
  int rc = single_rank_body(ctx);
  ASSERT_OK(tpla_ctx_destroy(ctx));
  ASSERT_OK(tpla_host_group_destroy(group));
  ASSERT_EQ_INT(rc, 0);
}

static void test_null_arguments(void) {
  ASSERT_STATUS(tpla_ctx_abort(NULL), TPLA_ERROR_INVALID_ARGUMENT);
  ASSERT_CONTAINS(tpla_last_error(), "tpla_ctx_abort: argument 'ctx' is NULL");
  ASSERT_STATUS(tpla_ctx_get_async_error(NULL), TPLA_ERROR_INVALID_ARGUMENT);
  ASSERT_CONTAINS(tpla_last_error(), "tpla_ctx_get_async_error: argument 'ctx' is NULL");
  ASSERT_TRUE(strcmp(tpla_status_string(TPLA_ERROR_ABORTED), "TPLA_ERROR_ABORTED") == 0);
}

/* A context of a healthy group stays healthy: abort is per group, and a
 * fresh group after an aborted one works. */
static int healthy_body(tpla_ctx_t ctx, int rank, int nranks, void *arg) {
  float v = 1.0f;
  RCHECK_OK(tpla_ctx_get_async_error(ctx));
  RCHECK_OK(tpla_allreduce(ctx, &v, &v, 1, TPLA_FLOAT32, NULL));
  RCHECK(v == (float)nranks, "sum %g", v);
  RCHECK_OK(tpla_ctx_get_async_error(ctx));
  return 0;
}

static void test_healthy_context(void) { ASSERT_EQ_INT(run_host_ranks(3, healthy_body, NULL), 0); }

/* ---- the cross-process group -------------------------------------------------------- */

typedef struct {
  atomic_int entered, released;
  int self_abort;  /* 1: rank 0's own context is aborted by a thread of its process */
  int overlap;     /* 1: the blocked call is a SENDRECV GEMM+AllReduce */
} shm_scene_t;

static void *abort_later(void *p) {
  sleep_ms(ABORT_AFTER_MS);
  tpla_ctx_abort((tpla_ctx_t)p);
  return NULL;
}

static int shm_body(tpla_ctx_t ctx, int rank, int nranks, void *arg) {
  shm_scene_t *s = arg;
  tpla_gemm_ar_plan_t ar = NULL;
  if (s->overlap) {
    tpla_gemm_ar_desc_t d = TPLA_GEMM_AR_DESC_INIT;
    d.m = 8, d.k = 4, d.n = 6, d.mode = TPLA_OVERLAP_OVERLAP;
    d.transport = TPLA_TRANSPORT_SENDRECV;
    RCHECK_OK(tpla_gemm_ar_plan_create(&ar, ctx, &d));
  }
  bool aborted_here = s->self_abort ? rank == 0 : rank == 1;
  tpla_status_t want = aborted_here ? TPLA_ERROR_ABORTED : TPLA_ERROR_REMOTE;
  if (rank == 1) { /* never makes the call; stays until rank 0 is released */
    await_count(&s->entered, 1);
    if (!s->self_abort) {
      sleep_ms(ABORT_AFTER_MS);
      RCHECK_OK(tpla_ctx_abort(ctx));
    }
    await_count(&s->released, 1);
  } else {
    pthread_t aborter;
    if (s->self_abort)
      pthread_create(&aborter, NULL, abort_later, ctx);
    float buf[128];
    for (int i = 0; i < 128; i++)
      buf[i] = i < 64 ? 0.5f : -7.0f;
    tpla_matrix_t dm = {buf + 64, 8, 6, 6, TPLA_FLOAT32}, am = {buf, 8, 4, 4, TPLA_FLOAT32},
                  bm = {buf + 32, 4, 6, 6, TPLA_FLOAT32};
    atomic_fetch_add(&s->entered, 1);
    double t0 = now_s();
    tpla_status_t st = s->overlap ? tpla_gemm_ar(ar, dm, am, bm, NULL, NULL)
                                  : tpla_allreduce(ctx, buf + 64, buf, 64, TPLA_FLOAT32, NULL);
    double waited = now_s() - t0;
    atomic_fetch_add(&s->released, 1);
    if (s->self_abort)
      pthread_join(aborter, NULL);
    RCHECK_STATUS(st, TPLA_ERROR_REMOTE);
    RCHECK(strstr(tpla_last_error(), "tpla_ctx_abort") != NULL, "%s", tpla_last_error());
    RCHECK(waited >= 0.05 && waited < QUICK_S, "the call returned after %.3f s", waited);
    for (int i = 64; i < 128 && !s->overlap; i++)
      RCHECK(buf[i] == -7.0f, "recv[%d] = %g was written", i - 64, buf[i]);
  }
  int rc = check_dead_ctx(ctx, rank, nranks, want);
  tpla_gemm_ar_plan_destroy(ar);
  return rc;
}

static int run_shm_scene(int self_abort, int overlap) {
  shm_scene_t *s = shared_alloc(sizeof *s);
  if (s == NULL)
    return -1;
  atomic_init(&s->entered, 0);
  atomic_init(&s->released, 0);
  s->self_abort = self_abort;
  s->overlap = overlap;
  proc_opts_t o = {TIMEOUT_MS, 0};
  int failed = run_procs(2, shm_body, s, &o);
  munmap(s, sizeof *s);
  return failed;
}

/* Rank 1's process aborts its context; rank 0's process, blocked in an
 * all-reduce (or a SENDRECV overlap call), ends with REMOTE at once. */
static void test_shared_group_peer_abort(void) {
  ASSERT_EQ_INT(run_shm_scene(0, 0), 0);
  ASSERT_EQ_INT(run_shm_scene(0, 1), 0);
}

/* A thread of rank 0's process aborts rank 0's context while it waits. */
static void test_shared_group_own_abort(void) { ASSERT_EQ_INT(run_shm_scene(1, 0), 0); }

int main(void) {
  TEST(test_null_arguments);
  TEST(test_single_rank_abort);
  TEST(test_healthy_context);
  TEST(test_collective_own_abort_releases_the_wait);
  TEST(test_collective_peer_abort_releases_the_wait);
  TEST(test_sendrecv_wait_released);
  TEST(test_overlap_waits_released);
  TEST(test_ns_execute_released);
  TEST(test_shared_group_peer_abort);
  TEST(test_shared_group_own_abort);
  return test_summary();
}
