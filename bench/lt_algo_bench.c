/*
 * lt_algo_bench.c - does cuBLASLt's first heuristic result leave time on the table for the
 * GEMMs tpla runs? tpla takes result 0 of cublasLtMatmulAlgoGetHeuristic for every plan
 * (src/cuda/lt_plan.c). Runs 32 and 95 timed other results for the overlap's chunk GEMMs
 * (result 0 was the fastest); Newton-Schulz's GEMMs were never swept. This reads the keys a
 * run printed (bench/run102_lt_keys_patch.py: "LTKEY ..." lines in a log), builds each plan
 * exactly as the library does (tpla_lt_plan_build), asks the heuristic for up to 16 results
 * with the same preferences, and times each on random operands.
 *
 *   tpla_lt_algo_bench KEYS.log [iters] [upper]
 *
 * Per key (FP8 keys and keys with a bias are skipped): result 0's time, the fastest result's
 * time and its index, tile and stages (cuBLASLt's enum values), and their ratio; medians of
 * `iters` (default 15) calls after 3 warm-up, CUDA events, two operand sets alternating (each
 * over the L2 cache for the large keys). With `upper`, each key with a square D is also run
 * with CUBLASLT_MATMUL_DESC_FILL_MODE = upper (fill_upper). Exits 0, or 77 without a GPU.
 */
#include "lt_plan.h"

#include <cuda_runtime.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CHECK(call)                                                                        \
  do {                                                                                     \
    cudaError_t e_ = (call);                                                               \
    if (e_ != cudaSuccess) {                                                               \
      fprintf(stderr, "lt_algo_bench: %s: %s\n", #call, cudaGetErrorString(e_));           \
      exit(1);                                                                             \
    }                                                                                      \
  } while (0)

enum { MAX_KEYS = 256, MAX_ALGOS = 16, SETS = 2 };

typedef struct {
  tpla_lt_key_t key;
  size_t ws_bytes;
} entry_t;

static int read_keys(FILE *f, entry_t *keys) {
  char line[512];
  int n = 0;
  while (fgets(line, sizeof line, f) && n < MAX_KEYS) {
    const char *p = strstr(line, "LTKEY ");
    if (!p)
      continue;
    entry_t e;
    memset(&e, 0, sizeof e);
    tpla_lt_key_t *k = &e.key;
    long long m, nn, kk, lda, ldb, ldc, ldd;
    if (sscanf(p + 6,
               "%lld %lld %lld %lld %lld %lld %lld %d %d %d %d %d %u %u %u %u %d %d %d %d %d %d "
               "%zu",
               &m, &nn, &kk, &lda, &ldb, &ldc, &ldd, &k->op_a, &k->op_b, &k->a_dtype,
               &k->b_dtype, &k->d_dtype, &k->align_a, &k->align_b, &k->align_c, &k->align_d,
               &k->beta_zero, &k->tf32, &k->bias, &k->c_separate, &k->fast_accum,
               &k->fp8_pointers, &e.ws_bytes) != 23)
      continue;
    k->m = m, k->n = nn, k->k = kk, k->lda = lda, k->ldb = ldb, k->ldc = ldc, k->ldd = ldd;
    int seen = 0;
    for (int i = 0; i < n && !seen; i++)
      seen = memcmp(&keys[i].key, k, sizeof *k) == 0 && keys[i].ws_bytes == e.ws_bytes;
    if (!seen)
      keys[n++] = e;
  }
  return n;
}

/* Random values in [-1, 1) of the key's element type (bf16, fp16 or fp32). */
static void *random_matrix(size_t elems, int dtype, uint64_t *seed) {
  size_t es = tpla_dtype_size((tpla_dtype_t)dtype);
  unsigned char *h = malloc(elems * es);
  for (size_t i = 0; i < elems; i++) {
    *seed = *seed * 6364136223846793005ull + 1442695040888963407ull;
    float f = (float)((*seed >> 40) & 0xffffff) / (float)0x800000 - 1.0f;
    uint32_t u;
    memcpy(&u, &f, 4);
    if (dtype == TPLA_FLOAT32) {
      memcpy(h + 4 * i, &f, 4);
    } else if (dtype == TPLA_BFLOAT16) {
      uint16_t b = (uint16_t)(u >> 16);
      memcpy(h + 2 * i, &b, 2);
    } else { /* fp16: |f| < 1, a normal half for |f| >= 2^-14, else zero */
      uint32_t e = (u >> 23) & 0xff;
      uint16_t hb = (uint16_t)((u >> 16) & 0x8000);
      if (e >= 113)
        hb |= (uint16_t)(((e - 112) << 10) | ((u >> 13) & 0x3ff));
      memcpy(h + 2 * i, &hb, 2);
    }
  }
  void *d = NULL;
  CHECK(cudaMalloc(&d, elems * es));
  CHECK(cudaMemcpy(d, h, elems * es, cudaMemcpyHostToDevice));
  free(h);
  return d;
}

static int by_value(const void *a, const void *b) {
  float x = *(const float *)a, y = *(const float *)b;
  return (x > y) - (x < y);
}

typedef struct {
  void *a[SETS], *b[SETS], *c[SETS], *d[SETS], *ws;
  size_t ws_bytes;
} operands_t;

/* Up to MAX_ALGOS heuristic results for the plan's descriptor, with the library's preferences
 * (lt_plan.c), each timed: t_us[r] the median, or -1 when result r cannot run. Returns how many
 * results the heuristic gave. */
static int sweep(cublasLtHandle_t lt, const tpla_lt_plan_t *plan, const operands_t *o,
                 cudaStream_t st, int iters, cublasLtMatmulHeuristicResult_t *res, float *t_us) {
  const tpla_lt_key_t *k = &plan->key;
  cublasLtMatmulPreference_t pref;
  uint64_t max_ws = o->ws_bytes;
  uint32_t al_a = k->align_b, al_b = k->align_a, al_c = k->align_c, al_d = k->align_d;
  cublasLtMatmulPreferenceCreate(&pref);
  cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &max_ws,
                                       sizeof max_ws);
  cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &al_a,
                                       sizeof al_a);
  cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, &al_b,
                                       sizeof al_b);
  cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, &al_c,
                                       sizeof al_c);
  cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, &al_d,
                                       sizeof al_d);
  int got = 0;
  if (cublasLtMatmulAlgoGetHeuristic(lt, plan->desc, plan->lay_a, plan->lay_b,
                                     plan->lay_c ? plan->lay_c : plan->lay_d, plan->lay_d, pref,
                                     MAX_ALGOS, res, &got) != CUBLAS_STATUS_SUCCESS)
    got = 0;
  cublasLtMatmulPreferenceDestroy(pref);
  cudaEvent_t t0, t1;
  CHECK(cudaEventCreate(&t0));
  CHECK(cudaEventCreate(&t1));
  float alpha = 1.0f, beta = k->beta_zero ? 0.0f : 1.0f;
  float *ms = malloc(sizeof(float) * (size_t)iters);
  for (int r = 0; r < got; r++) {
    t_us[r] = -1.0f;
    if (res[r].state != CUBLAS_STATUS_SUCCESS || res[r].workspaceSize > o->ws_bytes)
      continue;
    int ok = 1;
    for (int i = -3; i < iters && ok; i++) {
      int s = (i + 3) % SETS;
      CHECK(cudaEventRecord(t0, st));
      ok = cublasLtMatmul(lt, plan->desc, &alpha, o->b[s], plan->lay_a, o->a[s], plan->lay_b,
                          &beta, o->c[s], plan->lay_c ? plan->lay_c : plan->lay_d, o->d[s],
                          plan->lay_d, &res[r].algo, o->ws, o->ws_bytes,
                          st) == CUBLAS_STATUS_SUCCESS;
      CHECK(cudaEventRecord(t1, st));
      CHECK(cudaEventSynchronize(t1));
      if (i >= 0)
        CHECK(cudaEventElapsedTime(&ms[i], t0, t1));
    }
    if (!ok)
      continue;
    qsort(ms, (size_t)iters, sizeof(float), by_value);
    t_us[r] = 1000.0f * ms[iters / 2];
  }
  free(ms);
  CHECK(cudaEventDestroy(t0));
  CHECK(cudaEventDestroy(t1));
  return got;
}

/* CUBLASLT_MATMUL_DESC_FILL_MODE = upper on a square D: does the heuristic give an algorithm,
 * how fast is it against the full product's result 0, and which part of D does it write (D
 * set to a sentinel first; the elements still holding it are counted above and below the
 * diagonal of the row-major D)? The symmetric products of Newton-Schulz want only a triangle. */
static void fill_upper(cublasLtHandle_t lt, tpla_lt_plan_t *plan, const operands_t *o,
                       cudaStream_t st, int iters, size_t d_elems, float full_us) {
  const tpla_lt_key_t *k = &plan->key;
  int32_t fill = CUBLAS_FILL_MODE_UPPER;
  if (cublasLtMatmulDescSetAttribute(plan->desc, CUBLASLT_MATMUL_DESC_FILL_MODE, &fill,
                                     sizeof fill) != CUBLAS_STATUS_SUCCESS) {
    printf("    fill upper: the descriptor refuses the attribute\n");
    return;
  }
  size_t es = tpla_dtype_size((tpla_dtype_t)k->d_dtype);
  CHECK(cudaMemset(o->d[0], 0x7f, d_elems * es)); /* also C when C is D: beta 1 reads it */
  CHECK(cudaMemset(o->d[1], 0x7f, d_elems * es));
  float t_us[MAX_ALGOS];
  cublasLtMatmulHeuristicResult_t res[MAX_ALGOS];
  int got = sweep(lt, plan, o, st, iters, res, t_us);
  int best = -1;
  for (int r = 0; r < got; r++)
    if (t_us[r] > 0 && (best < 0 || t_us[r] < t_us[best]))
      best = r;
  if (best < 0) {
    printf("    fill upper: %d algorithms, none ran\n", got);
    return;
  }
  unsigned char *h = malloc(d_elems * es);
  CHECK(cudaMemcpy(h, o->d[0], d_elems * es, cudaMemcpyDeviceToHost));
  size_t above = 0, below = 0, n_above = 0, n_below = 0;
  for (int64_t i = 0; i < k->m; i++)
    for (int64_t j = 0; j < k->n; j++) {
      if (i == j)
        continue;
      const unsigned char *e = h + ((size_t)i * (size_t)k->ldd + (size_t)j) * es;
      int sentinel = 1;
      for (size_t b = 0; b < es; b++)
        sentinel &= e[b] == 0x7f;
      if (i < j)
        n_above++, above += (size_t)sentinel;
      else
        n_below++, below += (size_t)sentinel;
    }
  free(h);
  printf("    fill upper: %d algorithms, result 0 %.1f us, best %.1f us (result %d), best/full "
         "%.3f; untouched: %zu of %zu above the diagonal, %zu of %zu below\n",
         got, t_us[0], t_us[best], best, full_us > 0 ? t_us[best] / full_us : 0.0, above,
         n_above, below, n_below);
}

int main(int argc, char **argv) {
  int iters = argc > 2 ? atoi(argv[2]) : 15;
  int fill = argc > 3 && strcmp(argv[3], "upper") == 0;
  if (iters < 1)
    iters = 15;
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices < 1) {
    printf("lt_algo_bench: no GPU, skipped\n");
    return 77;
  }
  FILE *f = argc > 1 ? fopen(argv[1], "r") : NULL;
  if (f == NULL) {
    fprintf(stderr, "usage: tpla_lt_algo_bench KEYS.log [iters] [upper]\n");
    return 2;
  }
  static entry_t keys[MAX_KEYS];
  int nkeys = read_keys(f, keys);
  fclose(f);
  printf("# lt_algo_bench: %d distinct keys; median of %d calls after 3, CUDA events\n", nkeys,
         iters);
  printf("# m n k opA opB dtype->d beta0 tf32 ws_MiB | algos result0_us best_us best_idx "
         "best_tile best_stages best/result0\n");
  cublasLtHandle_t lt;
  if (cublasLtCreate(&lt) != CUBLAS_STATUS_SUCCESS)
    return 1;
  cudaStream_t st;
  CHECK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
  uint64_t seed = 1234;
  double sum0 = 0, sumbest = 0;
  for (int ki = 0; ki < nkeys; ki++) {
    const tpla_lt_key_t *k = &keys[ki].key;
    if (tpla_lt_is_fp8((tpla_dtype_t)k->a_dtype) || k->bias)
      continue;
    tpla_lt_plan_t plan;
    if (tpla_lt_plan_build(&plan, lt, keys[ki].ws_bytes, k, NULL, "lt_algo_bench", NULL) !=
        TPLA_SUCCESS) {
      printf("# key %d: plan failed: %s\n", ki, tpla_last_error());
      continue;
    }
    /* stored shapes, row-major: A (op N: m x k), B (op N: k x n), C and D m rows */
    size_t a_elems = (size_t)(k->op_a == TPLA_OP_N ? k->m : k->k) * (size_t)k->lda;
    size_t b_elems = (size_t)(k->op_b == TPLA_OP_N ? k->k : k->n) * (size_t)k->ldb;
    size_t d_elems = (size_t)k->m * (size_t)k->ldd, c_elems = (size_t)k->m * (size_t)k->ldc;
    operands_t o;
    for (int s = 0; s < SETS; s++) {
      o.a[s] = random_matrix(a_elems, k->a_dtype, &seed);
      o.b[s] = random_matrix(b_elems, k->b_dtype, &seed);
      o.d[s] = random_matrix(d_elems, k->d_dtype, &seed);
      o.c[s] = k->c_separate ? random_matrix(c_elems, k->d_dtype, &seed) : o.d[s];
    }
    o.ws = NULL;
    o.ws_bytes = keys[ki].ws_bytes;
    if (o.ws_bytes)
      CHECK(cudaMalloc(&o.ws, o.ws_bytes));
    float t_us[MAX_ALGOS];
    cublasLtMatmulHeuristicResult_t res[MAX_ALGOS];
    int got = sweep(lt, &plan, &o, st, iters, res, t_us);
    int best = 0;
    for (int r = 1; r < got; r++)
      if (t_us[r] > 0 && (t_us[best] < 0 || t_us[r] < t_us[best]))
        best = r;
    uint32_t tile = 0, stages = 0;
    size_t sz = 0;
    if (got > 0) {
      cublasLtMatmulAlgoConfigGetAttribute(&res[best].algo, CUBLASLT_ALGO_CONFIG_TILE_ID, &tile,
                                           sizeof tile, &sz);
      cublasLtMatmulAlgoConfigGetAttribute(&res[best].algo, CUBLASLT_ALGO_CONFIG_STAGES_ID,
                                           &stages, sizeof stages, &sz);
    }
    printf("  %6lld %6lld %6lld %s %s %s->%s %d %d %4zu | %2d %9.1f %9.1f %2d %4u %4u %6.3f\n",
           (long long)k->m, (long long)k->n, (long long)k->k, k->op_a == TPLA_OP_T ? "T" : "N",
           k->op_b == TPLA_OP_T ? "T" : "N", tpla_dtype_name((tpla_dtype_t)k->a_dtype),
           tpla_dtype_name((tpla_dtype_t)k->d_dtype), k->beta_zero, k->tf32,
           keys[ki].ws_bytes >> 20, got, got ? t_us[0] : 0.0f, got ? t_us[best] : 0.0f, best,
           tile, stages, got && t_us[0] > 0 ? t_us[best] / t_us[0] : 0.0f);
    fflush(stdout);
    if (got && t_us[0] > 0) {
      sum0 += t_us[0];
      sumbest += t_us[best];
    }
    if (fill && k->m == k->n)
      fill_upper(lt, &plan, &o, st, iters, d_elems, got && t_us[0] > 0 ? t_us[0] : 0.0f);
    for (int s = 0; s < SETS; s++) {
      cudaFree(o.a[s]);
      cudaFree(o.b[s]);
      if (o.c[s] != o.d[s])
        cudaFree(o.c[s]);
      cudaFree(o.d[s]);
    }
    cudaFree(o.ws);
    tpla_lt_plan_release(&plan);
  }
  printf("# sum over keys (each once): result 0 %.1f us, best %.1f us (%.3f)\n", sum0, sumbest,
         sum0 > 0 ? sumbest / sum0 : 0.0);
  cublasLtDestroy(lt);
  printf("lt_algo_bench: done\n");
  return 0;
}
