/*
 * ranks.c - helpers shared by the tests (see ranks.h): run a body on N host
 * ranks, a seeded xorshift generator, random fill, and a float64 GEMM
 * reference that reads tpla views of any float dtype.
 */
#include "ranks.h"

#include "internal.h"

#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

/* A failing test must fail fast, not after the default 5 minutes. */
#define TEST_GROUP_TIMEOUT_MS 30000

typedef struct {
  tpla_host_group_t group;
  int rank, nranks;
  rank_fn_t fn;
  void *arg;
  int failed;
} rank_thread_t;

static void *rank_main(void *p) {
  rank_thread_t *t = p;
  tpla_ctx_t ctx = NULL;
  tpla_status_t s = tpla_ctx_create_host(&ctx, t->group, t->rank, NULL);
  if (s != TPLA_SUCCESS) {
    fprintf(stderr, "  rank %d: tpla_ctx_create_host: %s (%s)\n", t->rank,
            tpla_status_string(s), tpla_last_error());
    t->failed = 1;
    return NULL;
  }
  t->failed = t->fn(ctx, t->rank, t->nranks, t->arg) != 0;
  s = tpla_ctx_destroy(ctx);
  if (s != TPLA_SUCCESS) {
    fprintf(stderr, "  rank %d: tpla_ctx_destroy: %s (%s)\n", t->rank, tpla_status_string(s),
            tpla_last_error());
    t->failed = 1;
  }
  return NULL;
}

int single_host_ctx(tpla_host_group_t *group, tpla_ctx_t *ctx) {
  if (tpla_host_group_create(group, 1, NULL) != TPLA_SUCCESS ||
      tpla_ctx_create_host(ctx, *group, 0, NULL) != TPLA_SUCCESS) {
    fprintf(stderr, "cannot create a host context: %s\n", tpla_last_error());
    return 1;
  }
  return 0;
}

int run_host_ranks(int nranks, rank_fn_t fn, void *arg) {
  return run_host_ranks_timeout(nranks, TEST_GROUP_TIMEOUT_MS, fn, arg);
}

int run_host_ranks_timeout(int nranks, int64_t timeout_ms, rank_fn_t fn, void *arg) {
  tpla_config_t cfg = TPLA_CONFIG_INIT;
  cfg.timeout_ms = timeout_ms;
  tpla_host_group_t group = NULL;
  if (tpla_host_group_create(&group, nranks, &cfg) != TPLA_SUCCESS) {
    fprintf(stderr, "  run_host_ranks: tpla_host_group_create(%d): %s\n", nranks,
            tpla_last_error());
    return -1;
  }
  rank_thread_t *threads = calloc((size_t)nranks, sizeof *threads);
  pthread_t *ids = calloc((size_t)nranks, sizeof *ids);
  int started = 0, failed = 0;
  if (threads && ids) {
    for (; started < nranks; started++) {
      threads[started] = (rank_thread_t){group, started, nranks, fn, arg, 0};
      if (pthread_create(&ids[started], NULL, rank_main, &threads[started]) != 0)
        break;
    }
  }
  for (int r = 0; r < started; r++) {
    pthread_join(ids[r], NULL);
    failed += threads[r].failed;
  }
  bool setup_ok = threads && ids && started == nranks;
  free(threads);
  free(ids);
  if (tpla_host_group_destroy(group) != TPLA_SUCCESS) {
    fprintf(stderr, "  run_host_ranks: tpla_host_group_destroy: %s\n", tpla_last_error());
    return -1;
  }
  if (!setup_ok) {
    fprintf(stderr, "  run_host_ranks: could not start %d threads\n", nranks);
    return -1;
  }
  return failed;
}

/* ---- random numbers ------------------------------------------------------ */

void rng_seed(rng_t *r, uint64_t seed) {
  /* splitmix64 of the seed: any seed, 0 included, gives a good state */
  uint64_t z = seed + 0x9e3779b97f4a7c15ull;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  z ^= z >> 31;
  r->s = z ? z : 0x2545f4914f6cdd1dull;
}

double rng_uniform(rng_t *r) {
  uint64_t x = r->s; /* xorshift64* */
  x ^= x >> 12;
  x ^= x << 25;
  x ^= x >> 27;
  r->s = x;
  uint64_t bits = (x * 0x2545f4914f6cdd1dull) >> 11; /* 53 random bits */
  return (double)bits * 0x1.0p-52 - 1.0;
}

uint64_t fresh_seed(const char *test_name) {
  uint64_t seed;
  const char *env = getenv("TPLA_TEST_SEED");
  if (env && *env) {
    seed = strtoull(env, NULL, 0);
  } else {
    struct timespec t;
    clock_gettime(CLOCK_REALTIME, &t);
    seed = ((uint64_t)t.tv_sec * 1000000007ull) ^ (uint64_t)t.tv_nsec ^
           ((uint64_t)getpid() << 32);
  }
  printf("  %s: seed %" PRIu64 " (replay with TPLA_TEST_SEED=%" PRIu64 ")\n", test_name, seed,
         seed);
  fflush(stdout);
  return seed;
}

void fill_random(tpla_matrix_t m, rng_t *r) {
  for (int64_t i = 0; i < m.rows; i++)
    for (int64_t j = 0; j < m.cols; j++)
      tpla_store_elem(m.data, m.dtype, (size_t)(i * m.ld + j), rng_uniform(r));
}

/* ---- float64 GEMM reference ---------------------------------------------- */

/* op(x)(i, j) of a view, as a double. */
static double op_elem(const tpla_matrix_t *x, tpla_op_t op, int64_t i, int64_t j) {
  int64_t r = op == TPLA_OP_N ? i : j, c = op == TPLA_OP_N ? j : i;
  return tpla_load_elem(x->data, x->dtype, (size_t)(r * x->ld + c));
}

void ref_gemm_f64(double *c, int64_t ldc, tpla_matrix_t a, tpla_op_t op_a, tpla_matrix_t b,
                  tpla_op_t op_b) {
  int64_t m = op_a == TPLA_OP_N ? a.rows : a.cols;
  int64_t k = op_a == TPLA_OP_N ? a.cols : a.rows;
  int64_t n = op_b == TPLA_OP_N ? b.cols : b.rows;
  /* op(B) as a dense k x n double matrix so the inner loop is contiguous */
  double *bd = malloc((size_t)(k * n + 1) * sizeof(double));
  if (bd == NULL) {
    fprintf(stderr, "ref_gemm_f64: out of memory\n");
    abort(); /* test code: nothing sensible to return */
  }
  for (int64_t p = 0; p < k; p++)
    for (int64_t j = 0; j < n; j++)
      bd[p * n + j] = op_elem(&b, op_b, p, j);
  for (int64_t i = 0; i < m; i++) {
    double *row = c + i * ldc;
    for (int64_t j = 0; j < n; j++)
      row[j] = 0.0;
    for (int64_t p = 0; p < k; p++) {
      double av = op_elem(&a, op_a, i, p);
      for (int64_t j = 0; j < n; j++)
        row[j] += av * bd[p * n + j];
    }
  }
  free(bd);
}
