/*
 * consumer.c - a program that uses an INSTALLED tpla, built by
 * tests/install/run.sh through find_package(tpla) and through pkg-config,
 * against the shared and the static library. It runs two host ranks (one
 * thread each): an all-reduce and a GEMM with known answers, then prints
 * "consumer: OK" and exits 0, or says what differed and exits 1.
 *
 *   cc consumer.c $(pkg-config --cflags --libs tpla) -o consumer && ./consumer
 */
#include <tpla.h>

#include <math.h>
#include <pthread.h>
#include <stdio.h>

#define NRANKS 2

typedef struct {
  tpla_host_group_t group;
  int rank;
  int failed;
} rank_arg_t;

static int fail(rank_arg_t *r, const char *what, tpla_status_t s) {
  fprintf(stderr, "consumer: rank %d: %s: %s (%s)\n", r->rank, what, tpla_status_string(s),
          tpla_last_error());
  return 1;
}

static int rank_body(rank_arg_t *r, tpla_ctx_t ctx) {
  /* all-reduce: sum over ranks of (rank + 1) * [1 2 3] */
  float v[3] = {1.0f * (r->rank + 1), 2.0f * (r->rank + 1), 3.0f * (r->rank + 1)};
  tpla_status_t s = tpla_allreduce(ctx, v, v, 3, TPLA_FLOAT32, NULL);
  if (s != TPLA_SUCCESS)
    return fail(r, "tpla_allreduce", s);
  for (int i = 0; i < 3; i++)
    if (v[i] != 3.0f * (float)(i + 1)) {
      fprintf(stderr, "consumer: rank %d: allreduce[%d] = %g, expected %g\n", r->rank, i,
              (double)v[i], 3.0 * (i + 1));
      return 1;
    }
  /* GEMM: D (2x2) = A (2x3) B^T with B 2x3, row-major */
  float a[6] = {1, 2, 3, 4, 5, 6}, b[6] = {1, 0, -1, 2, 1, 0}, d[4] = {0};
  tpla_matrix_t dm = {d, 2, 2, 2, TPLA_FLOAT32}, am = {a, 2, 3, 3, TPLA_FLOAT32},
                bm = {b, 2, 3, 3, TPLA_FLOAT32};
  s = tpla_gemm(ctx, dm, am, TPLA_OP_N, bm, TPLA_OP_T, NULL, NULL);
  if (s != TPLA_SUCCESS)
    return fail(r, "tpla_gemm", s);
  const float want[4] = {-2, 4, -2, 13};
  for (int i = 0; i < 4; i++)
    if (fabsf(d[i] - want[i]) > 1e-5f) {
      fprintf(stderr, "consumer: rank %d: gemm d[%d] = %g, expected %g\n", r->rank, i,
              (double)d[i], (double)want[i]);
      return 1;
    }
  return 0;
}

static void *rank_main(void *p) {
  rank_arg_t *r = p;
  tpla_ctx_t ctx = NULL;
  tpla_status_t s = tpla_ctx_create_host(&ctx, r->group, r->rank, NULL);
  if (s != TPLA_SUCCESS) {
    r->failed = fail(r, "tpla_ctx_create_host", s);
    return NULL;
  }
  r->failed = rank_body(r, ctx);
  s = tpla_ctx_destroy(ctx);
  if (s != TPLA_SUCCESS)
    r->failed = fail(r, "tpla_ctx_destroy", s);
  return NULL;
}

int main(void) {
  tpla_features_t features = TPLA_FEATURES_INIT;
  tpla_status_t s = tpla_get_features(&features, -1);
  if (s != TPLA_SUCCESS || tpla_version() != TPLA_VERSION) {
    fprintf(stderr, "consumer: tpla_get_features: %s (%s); library %d, header %d\n",
            tpla_status_string(s), tpla_last_error(), tpla_version(), TPLA_VERSION);
    return 1;
  }
  /* A bad call into the CUDA executor: rejected (NOT_SUPPORTED in a host-only
   * build), and it makes a static link pull in the executor's objects. */
  tpla_ctx_t none = NULL;
  s = tpla_ctx_create_nccl(&none, NULL, NULL);
  if (s == TPLA_SUCCESS || none != NULL) {
    fprintf(stderr, "consumer: tpla_ctx_create_nccl accepted a NULL communicator\n");
    return 1;
  }
  printf("consumer: tpla %d, CUDA executor %s, %d GPU(s)\n", tpla_version(),
         features.cuda_executor ? "built" : "not built", features.device_count);
  tpla_host_group_t group = NULL;
  s = tpla_host_group_create(&group, NRANKS, NULL);
  if (s != TPLA_SUCCESS) {
    fprintf(stderr, "consumer: tpla_host_group_create: %s (%s)\n", tpla_status_string(s),
            tpla_last_error());
    return 1;
  }
  rank_arg_t ranks[NRANKS];
  pthread_t threads[NRANKS];
  int failed = 0;
  for (int i = 0; i < NRANKS; i++) {
    ranks[i] = (rank_arg_t){group, i, 0};
    if (pthread_create(&threads[i], NULL, rank_main, &ranks[i]) != 0) {
      fprintf(stderr, "consumer: pthread_create failed\n");
      return 1; /* the other rank would time out; do not wait for it */
    }
  }
  for (int i = 0; i < NRANKS; i++) {
    pthread_join(threads[i], NULL);
    failed |= ranks[i].failed;
  }
  s = tpla_host_group_destroy(group);
  if (s != TPLA_SUCCESS) {
    fprintf(stderr, "consumer: tpla_host_group_destroy: %s\n", tpla_status_string(s));
    failed = 1;
  }
  printf("consumer: %s\n", failed ? "FAILED" : "OK");
  return failed;
}
