/*
 * test_alloc_failures.c - host memory running out on one rank in the middle
 * of a collective plan creation. The test is linked with the allocator
 * wrapped (-Wl,--wrap=malloc,...; tests/CMakeLists.txt), so the N-th
 * allocation the library makes on one rank's thread fails, for N = 1, 2, ...
 * until a creation goes through: every allocation of Newton-Schulz plans
 * (each algorithm, a batch, two in a workspace group) and of the three
 * overlapped plans (and two AG+GEMM plans in a window group), in turn, on
 * three ranks and on two (where the Gram sums go by pulls), failing on rank
 * 0 and on the last rank.
 * Each time:
 *   - no rank succeeds unless all do, the failing rank says OUT_OF_MEMORY
 *     and the others REMOTE ("rank q could not ...": no rank waits for the
 *     timeout or runs into the next collective alone);
 *   - afterwards the ranks are still in step: a barrier, and the same
 *     creation without the failure succeeds on every rank and its plan runs,
 *     twice: the second call allocates nothing (calls create nothing).
 *
 *   ./test_alloc_failures       (CTest: test_alloc_failures)
 */
#include "test_ns_common.h"

#include <execinfo.h>
#include <pthread.h>
#include <time.h>

/* ---- the wrapped allocator ------------------------------------------------ */

void *__real_malloc(size_t n);
void *__real_calloc(size_t n, size_t s);
void *__real_realloc(void *p, size_t n);
void *__real_aligned_alloc(size_t a, size_t n);

/* > 0 on a rank's thread: the allocation that brings it to 0 fails */
static _Thread_local long countdown;

/* while a call runs a second time: the allocations it makes (calls allocate nothing) */
static _Thread_local bool in_call;
static _Thread_local long call_allocs;

/* TPLA_ALLOC_TRACE=1 prints where each failing allocation (and each one made by a call)
 * was made (addr2line -f -e ...) */
static bool fail_now(void) {
  if (in_call) {
    call_allocs++;
    if (getenv("TPLA_ALLOC_TRACE") != NULL) {
      void *frames[12];
      backtrace_symbols_fd(frames, backtrace(frames, 12), 2);
    }
  }
  if (!(countdown > 0 && --countdown == 0))
    return false;
  if (getenv("TPLA_ALLOC_TRACE") != NULL) {
    void *frames[12];
    backtrace_symbols_fd(frames, backtrace(frames, 12), 2);
  }
  return true;
}

void *__wrap_malloc(size_t n) { return fail_now() ? NULL : __real_malloc(n); }
void *__wrap_calloc(size_t n, size_t s) { return fail_now() ? NULL : __real_calloc(n, s); }
void *__wrap_realloc(void *p, size_t n) { return fail_now() ? NULL : __real_realloc(p, n); }
void *__wrap_aligned_alloc(size_t a, size_t n) {
  return fail_now() ? NULL : __real_aligned_alloc(a, n);
}

/* ---- the creations ----------------------------------------------------------- */

#define MAX_ROUNDS 400 /* more allocations than any creation makes */
#define TIMEOUT_MS 4000 /* the group's: a rank left waiting shows as TIMEOUT */
#define QUICK_S 2.0     /* far below it */

typedef enum {
  NS_GRAM, NS_REDIST, NS_GATHER, NS_SHARDED, NS_BATCH, NS_SHARE, AG, RS, AR, AG_GROUP, KINDS
} kind_t;
static const char *const kind_names[KINDS] = {
    "NS GRAM_ALLREDUCE", "NS REDISTRIBUTE", "NS GATHER", "NS GRAM_SHARDED",
    "NS batch",          "NS workspace group", "AG+GEMM", "GEMM+RS",
    "GEMM+AR",           "AG+GEMM window group"};

typedef struct {
  kind_t kind;
  int victim; /* the rank whose allocations fail */
  pthread_barrier_t step;
  tpla_status_t status[8];
  double seconds[8];
} shared_t;

static tpla_ns_desc_t ns_desc(kind_t kind, int rank) {
  tpla_ns_desc_t d = TPLA_NS_DESC_INIT;
  static const tpla_ns_algorithm_t algos[] = {TPLA_NS_ALGO_GRAM_ALLREDUCE,
                                              TPLA_NS_ALGO_REDISTRIBUTE, TPLA_NS_ALGO_GATHER,
                                              TPLA_NS_ALGO_GRAM_SHARDED};
  d.local_rows = 5 + rank; /* uneven: 18 x 7 over three ranks */
  d.local_cols = 7;
  d.algorithm = kind < NS_BATCH ? algos[kind] : TPLA_NS_ALGO_AUTO;
  d.iteration = kind == NS_SHARDED ? TPLA_NS_ITERATE_GRAM : TPLA_NS_ITERATE_AUTO;
  return d;
}

/* the message of the last failure in create() (a destroy clears the last error) */
static _Thread_local char why[512];

static tpla_status_t kept(tpla_status_t st) {
  if (st != TPLA_SUCCESS)
    snprintf(why, sizeof why, "%s", tpla_last_error());
  return st;
}

/* A call made twice (collective: every rank makes both); the second must
 * allocate nothing, counted in call_allocs. */
static _Thread_local tpla_status_t call_status;
#define TWICE(call)                                                                          \
  (call_status = (call), call_status != TPLA_SUCCESS                                         \
                             ? call_status                                                   \
                             : (in_call = true, call_status = (call), in_call = false, call_status))

/* One creation (and, when it went through and run is set, two calls of the
 * plan on random data), then the plan destroyed. */
static tpla_status_t create(tpla_ctx_t ctx, kind_t kind, int rank, int nranks, bool run) {
  tpla_status_t st = TPLA_SUCCESS;
  rng_t rng;
  rng_seed(&rng, 11u + (uint64_t)rank);
  if (kind < NS_BATCH) {
    tpla_ns_desc_t d = ns_desc(kind, rank);
    tpla_ns_plan_t p = NULL;
    st = kept(tpla_ns_plan_create(&p, ctx, &d));
    if (st == TPLA_SUCCESS && run) {
      float x[8 * 8];
      tpla_matrix_t xm = {x, d.local_rows, d.local_cols, d.local_cols, TPLA_FLOAT32};
      fill_random(xm, &rng);
      st = kept(TWICE(tpla_ns_execute(p, xm, NULL)));
    }
    tpla_ns_plan_destroy(p);
  } else if (kind == NS_BATCH) {
    tpla_ns_desc_t d[3] = {ns_desc(kind, rank), ns_desc(kind, rank), ns_desc(kind, rank)};
    d[1].local_cols = 3, d[2].shard = TPLA_SHARD_COLS, d[2].local_rows = 4;
    tpla_ns_batch_plan_t p = NULL;
    st = kept(tpla_ns_batch_plan_create(&p, ctx, 3, d));
    if (st == TPLA_SUCCESS && run) {
      float x[3][8 * 8];
      tpla_matrix_t xm[3];
      for (int i = 0; i < 3; i++) {
        xm[i] = (tpla_matrix_t){x[i], d[i].local_rows, d[i].local_cols, d[i].local_cols,
                                TPLA_FLOAT32};
        fill_random(xm[i], &rng);
      }
      st = kept(TWICE(tpla_ns_batch_execute(p, xm, NULL)));
    }
    tpla_ns_batch_plan_destroy(p);
  } else if (kind == NS_SHARE) { /* the second plan grows the group's workspace */
    tpla_ns_desc_t d[2] = {ns_desc(NS_GRAM, rank), ns_desc(NS_GRAM, rank)};
    d[0].workspace_group = d[1].workspace_group = 5;
    d[1].local_cols = 8;
    tpla_ns_plan_t p[2] = {NULL, NULL};
    for (int i = 0; i < 2 && st == TPLA_SUCCESS; i++)
      st = kept(tpla_ns_plan_create(&p[i], ctx, &d[i]));
    for (int i = 0; i < 2 && st == TPLA_SUCCESS && run; i++) {
      float x[8 * 8];
      tpla_matrix_t xm = {x, d[i].local_rows, d[i].local_cols, d[i].local_cols, TPLA_FLOAT32};
      fill_random(xm, &rng);
      st = kept(TWICE(tpla_ns_execute(p[i], xm, NULL)));
    }
    tpla_ns_plan_destroy(p[0]);
    tpla_ns_plan_destroy(p[1]);
  } else if (kind == AG_GROUP) { /* the second plan grows the group's buffers */
    float a[6 * 8], b[8 * 6], d[18 * 6];
    tpla_matrix_t bm = {b, 8, 6, 6, TPLA_FLOAT32};
    fill_random(bm, &rng);
    tpla_ag_gemm_plan_t p[2] = {NULL, NULL};
    for (int i = 0; i < 2 && st == TPLA_SUCCESS; i++) {
      tpla_ag_gemm_desc_t dd = TPLA_AG_GEMM_DESC_INIT;
      dd.local_rows = 4 + 2 * i, dd.k = 8, dd.n = 6, dd.window_group = 3;
      st = kept(tpla_ag_gemm_plan_create(&p[i], ctx, &dd));
    }
    for (int i = 0; i < 2 && st == TPLA_SUCCESS && run; i++) {
      tpla_matrix_t am = {a, 4 + 2 * i, 8, 8, TPLA_FLOAT32};
      tpla_matrix_t dm = {d, (4 + 2 * i) * nranks, 6, 6, TPLA_FLOAT32};
      fill_random(am, &rng);
      st = kept(TWICE(tpla_ag_gemm(p[i], dm, am, bm, NULL, NULL)));
    }
    tpla_ag_gemm_plan_destroy(p[0]);
    tpla_ag_gemm_plan_destroy(p[1]);
  } else {
    /* 4 rows a rank x 8 (k) x 6 (n), in fp32 */
    const int64_t m = 4 * nranks;
    float a[12 * 8], b[8 * 6], d[12 * 6];
    tpla_matrix_t bm = {b, 8, 6, 6, TPLA_FLOAT32};
    fill_random(bm, &rng);
    if (kind == AG) {
      tpla_ag_gemm_desc_t dd = TPLA_AG_GEMM_DESC_INIT;
      dd.local_rows = 4, dd.k = 8, dd.n = 6;
      tpla_ag_gemm_plan_t p = NULL;
      st = kept(tpla_ag_gemm_plan_create(&p, ctx, &dd));
      tpla_matrix_t am = {a, 4, 8, 8, TPLA_FLOAT32}, dm = {d, m, 6, 6, TPLA_FLOAT32};
      fill_random(am, &rng);
      if (st == TPLA_SUCCESS && run)
        st = kept(TWICE(tpla_ag_gemm(p, dm, am, bm, NULL, NULL)));
      tpla_ag_gemm_plan_destroy(p);
    } else if (kind == RS) {
      tpla_gemm_rs_desc_t dd = TPLA_GEMM_RS_DESC_INIT;
      dd.m = m, dd.k = 8, dd.n = 6;
      tpla_gemm_rs_plan_t p = NULL;
      st = kept(tpla_gemm_rs_plan_create(&p, ctx, &dd));
      tpla_matrix_t am = {a, m, 8, 8, TPLA_FLOAT32}, dm = {d, 4, 6, 6, TPLA_FLOAT32};
      fill_random(am, &rng);
      if (st == TPLA_SUCCESS && run)
        st = kept(TWICE(tpla_gemm_rs(p, dm, am, bm, NULL, NULL)));
      tpla_gemm_rs_plan_destroy(p);
    } else {
      tpla_gemm_ar_desc_t dd = TPLA_GEMM_AR_DESC_INIT;
      dd.m = m, dd.k = 8, dd.n = 6;
      tpla_gemm_ar_plan_t p = NULL;
      st = kept(tpla_gemm_ar_plan_create(&p, ctx, &dd));
      tpla_matrix_t am = {a, m, 8, 8, TPLA_FLOAT32}, dm = {d, m, 6, 6, TPLA_FLOAT32};
      fill_random(am, &rng);
      if (st == TPLA_SUCCESS && run)
        st = kept(TWICE(tpla_gemm_ar(p, dm, am, bm, NULL, NULL)));
      tpla_gemm_ar_plan_destroy(p);
    }
  }
  return st;
}

static double now_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* Round n: the victim's n-th allocation fails. Returns the failures seen. */
static int round_checks(shared_t *sh, int rank, int nranks, long n) {
  int bad = 0;
  tpla_status_t v = sh->status[sh->victim];
  for (int r = 0; r < nranks; r++) {
    bool ok = sh->status[r] == TPLA_SUCCESS, want = v == TPLA_SUCCESS;
    if (ok != want || sh->seconds[r] > QUICK_S) {
      bad++;
      if (rank == 0)
        fprintf(stderr, "  %s, allocation %ld of rank %d failed: rank %d got %s after %.1f s\n",
                kind_names[sh->kind], n, sh->victim, r, tpla_status_string(sh->status[r]),
                sh->seconds[r]);
    }
  }
  if (v != TPLA_SUCCESS && rank != sh->victim && sh->status[rank] != TPLA_ERROR_REMOTE) {
    bad++;
    fprintf(stderr, "  %s, allocation %ld: rank %d got %s, not REMOTE: %s\n",
            kind_names[sh->kind], n, rank, tpla_status_string(sh->status[rank]), why);
  }
  if (v != TPLA_SUCCESS && rank == sh->victim && v != TPLA_ERROR_OUT_OF_MEMORY) {
    bad++;
    fprintf(stderr, "  %s, allocation %ld: the failing rank got %s: %s\n", kind_names[sh->kind],
            n, tpla_status_string(v), why);
  }
  return bad;
}

static int body(tpla_ctx_t ctx, int rank, int nranks, void *arg) {
  shared_t *sh = arg;
  int bad = 0;
  long n = 1;
  for (; n <= MAX_ROUNDS; n++) {
    double t0 = now_s();
    countdown = rank == sh->victim ? n : 0;
    sh->status[rank] = create(ctx, sh->kind, rank, nranks, false);
    countdown = 0;
    sh->seconds[rank] = now_s() - t0;
    pthread_barrier_wait(&sh->step);
    bad += round_checks(sh, rank, nranks, n);
    /* still in step: a barrier and the same creation, which must go through */
    tpla_status_t b = tpla_barrier(ctx, NULL);
    call_allocs = 0;
    tpla_status_t again = b == TPLA_SUCCESS ? create(ctx, sh->kind, rank, nranks, true) : b;
    if (again != TPLA_SUCCESS) {
      bad++;
      fprintf(stderr, "  %s, after allocation %ld failed: rank %d's %s: %s: %s\n",
              kind_names[sh->kind], n, rank, b == TPLA_SUCCESS ? "creation" : "barrier",
              tpla_status_string(again), b == TPLA_SUCCESS ? why : tpla_last_error());
    }
    if (call_allocs != 0) {
      bad++;
      fprintf(stderr, "  %s: rank %d's second call allocated %ld times\n", kind_names[sh->kind],
              rank, call_allocs);
    }
    bool last = sh->status[sh->victim] == TPLA_SUCCESS || bad > 0;
    pthread_barrier_wait(&sh->step); /* all have read status[] */
    if (last)
      break;
  }
  if (rank == 0)
    printf("  %-20s %d ranks: allocations 1..%ld of rank %d failed in turn\n",
           kind_names[sh->kind], nranks, n - 1, sh->victim);
  if (n > MAX_ROUNDS) {
    bad++;
    if (rank == 0)
      fprintf(stderr, "  %s never went through\n", kind_names[sh->kind]);
  }
  return bad;
}

/* Three ranks, and two: where Newton-Schulz sums its Grams by pulls through the
 * transport (created and rehearsed at plan creation). */
static void test_one_rank_out_of_memory(void) {
  for (int P = 3; P >= 2; P--)
    for (int victim = 0; victim < P; victim += P - 1) /* rank 0 and the last */
      for (int k = 0; k < KINDS; k++) {
        shared_t sh = {.kind = (kind_t)k, .victim = victim};
        pthread_barrier_init(&sh.step, NULL, (unsigned)P);
        ASSERT_EQ_INT(run_host_ranks_timeout(P, TIMEOUT_MS, body, &sh), 0);
        pthread_barrier_destroy(&sh.step);
      }
}

int main(void) {
  TEST(test_one_rank_out_of_memory);
  return test_summary();
}
