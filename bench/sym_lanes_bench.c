/*
 * sym_lanes_bench.c - would Newton-Schulz's symmetric products run faster with their block
 * rows on two streams? ns_sym_product computes the upper block rows of an s x s product one
 * GEMM after another on one stream: block row i is t x (s - i t) with t = s / nb, so the
 * narrow last rows fill a fraction of one wave of tiles each and the GPU idles through their
 * tails. Two streams (every other block row on the second, each stream with its own cuBLASLt
 * workspace, joined by an event) let one row's tiles fill the other's tail. Runs 187 and 189:
 * the TF32 square 8-11% faster that way at s = 4096-8192 in any order; run 188: no gain in
 * whole Newton-Schulz calls, so the library keeps one stream.
 *
 *   tpla_sym_lanes_bench [iters] [order]
 *
 * Per s in {2048, 4096, 8192} (nb = min(s / 1024, 8), as on CUDA) and three products with the
 * library's plans (tpla_lt_plan_build, heuristic result 0, 32 MiB of workspace per stream):
 * the Gram X X^T of an s x s X in bf16 (bf16 D) and with an fp32 D (the fp32 Gram), and the
 * square A A^T of an fp32 A in TF32 with C = A (beta -4.7, the fp32 Gram's P = c A^2 + b A).
 * Times: `full` one s x s GEMM (twice the triangle's FLOPs), `rows` the block rows on one
 * stream, `lanes` on two; median of `iters` (default 30) after 5, CUDA events on the first
 * stream around the whole product, random operands. Each round times the three in `order`
 * (default "frl": full, rows, lanes), so that a schedule's place after another's heavy
 * GEMMs (the power controller's clocks) can be swapped. TFLOP/s count the triangle's FLOPs
 * (2 s^2 k (nb + 1) / (2 nb)) for rows and lanes, 2 s^3 for full. Exits 0; 77 without a GPU.
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
      fprintf(stderr, "sym_lanes_bench: %s: %s\n", #call, cudaGetErrorString(e_));         \
      exit(1);                                                                             \
    }                                                                                      \
  } while (0)

#define WS_BYTES ((size_t)32 << 20)

typedef struct {
  const char *name;
  tpla_dtype_t in, out;
  int tf32, with_c; /* with_c: D = alpha X X^T + beta C, C a separate s x s matrix */
} product_t;

static int by_value(const void *a, const void *b) {
  float x = *(const float *)a, y = *(const float *)b;
  return (x > y) - (x < y);
}

/* Random values in [-1, 1) as bf16 or fp32. */
static void *random_matrix(size_t elems, tpla_dtype_t t, uint64_t seed) {
  size_t es = tpla_dtype_size(t);
  unsigned char *h = malloc(elems * es);
  for (size_t i = 0; i < elems; i++) {
    seed = seed * 6364136223846793005ull + 1442695040888963407ull;
    float f = (float)((seed >> 40) & 0xffffff) / (float)0x800000 - 1.0f;
    uint32_t u;
    memcpy(&u, &f, 4);
    if (t == TPLA_FLOAT32) {
      memcpy(h + 4 * i, &f, 4);
    } else {
      uint16_t b = (uint16_t)(u >> 16);
      memcpy(h + 2 * i, &b, 2);
    }
  }
  void *d = NULL;
  CHECK(cudaMalloc(&d, elems * es));
  CHECK(cudaMemcpy(d, h, elems * es, cudaMemcpyHostToDevice));
  free(h);
  return d;
}

/* The plan of D[r0 : r0 + h, c0 : s] = X[r0 : r0 + h, :] X[c0 : s, :]^T (ld s everywhere). */
static tpla_lt_plan_t plan_of(cublasLtHandle_t lt, const product_t *p, int64_t s, int64_t h,
                              int64_t n, const void *x, void *d) {
  tpla_lt_key_t k;
  memset(&k, 0, sizeof k);
  k.m = h, k.n = n, k.k = s;
  k.lda = k.ldb = k.ldc = k.ldd = s;
  k.op_a = TPLA_OP_N, k.op_b = TPLA_OP_T;
  k.a_dtype = k.b_dtype = p->in, k.d_dtype = p->out;
  size_t ld_in = (size_t)s * tpla_dtype_size(p->in), ld_out = (size_t)s * tpla_dtype_size(p->out);
  k.align_a = k.align_b = tpla_lt_alignment(x, ld_in);
  k.align_c = k.align_d = tpla_lt_alignment(d, ld_out);
  k.beta_zero = !p->with_c;
  k.tf32 = p->tf32;
  k.c_separate = p->with_c;
  tpla_lt_plan_t plan;
  if (tpla_lt_plan_build(&plan, lt, WS_BYTES, &k, NULL, "sym_lanes_bench", NULL) !=
      TPLA_SUCCESS) {
    fprintf(stderr, "sym_lanes_bench: no plan: %s\n", tpla_last_error());
    exit(1);
  }
  return plan;
}

typedef struct {
  int nb;
  int64_t s, t;
  tpla_lt_plan_t full, rows[8];
  void *x, *c, *d, *ws[2];
  cudaStream_t st[2];
  cudaEvent_t fork, join;
} setup_t;

static void run_row(cublasLtHandle_t lt, setup_t *u, const product_t *p, int i, int lane) {
  size_t ei = tpla_dtype_size(p->in), eo = tpla_dtype_size(p->out);
  int64_t r0 = i * u->t;
  size_t at = (size_t)(r0 * u->s + r0) * eo;
  tpla_lt_operands_t ops = {(char *)u->x + (size_t)(r0 * u->s) * ei,
                            (char *)u->x + (size_t)(r0 * u->s) * ei,
                            p->with_c ? (char *)u->c + at : NULL,
                            (char *)u->d + at,
                            1.0f,
                            p->with_c ? -4.7f : 0.0f,
                            NULL, NULL, NULL, NULL, NULL};
  if (tpla_lt_plan_run(&u->rows[i], lt, &ops, u->ws[lane], WS_BYTES, u->st[lane],
                       "sym_lanes_bench", NULL) != TPLA_SUCCESS) {
    fprintf(stderr, "sym_lanes_bench: %s\n", tpla_last_error());
    exit(1);
  }
}

/* 0 full, 1 rows on one stream, 2 rows on two */
static void product(cublasLtHandle_t lt, setup_t *u, const product_t *p, int how) {
  if (how == 0) {
    tpla_lt_operands_t ops = {u->x, u->x, p->with_c ? u->c : NULL, u->d, 1.0f,
                              p->with_c ? -4.7f : 0.0f, NULL, NULL, NULL, NULL, NULL};
    if (tpla_lt_plan_run(&u->full, lt, &ops, u->ws[0], WS_BYTES, u->st[0], "sym_lanes_bench",
                         NULL) != TPLA_SUCCESS)
      exit(1);
    return;
  }
  if (how == 2) {
    CHECK(cudaEventRecord(u->fork, u->st[0]));
    CHECK(cudaStreamWaitEvent(u->st[1], u->fork, 0));
  }
  for (int i = 0; i < u->nb; i++)
    run_row(lt, u, p, i, how == 2 ? i % 2 : 0);
  if (how == 2) {
    CHECK(cudaEventRecord(u->join, u->st[1]));
    CHECK(cudaStreamWaitEvent(u->st[0], u->join, 0));
  }
}

int main(int argc, char **argv) {
  int iters = argc > 1 ? atoi(argv[1]) : 30, ngpu = 0;
  const char *order = argc > 2 ? argv[2] : "frl";
  if (iters < 1)
    iters = 30;
  if (strlen(order) != 3 || !strchr(order, 'f') || !strchr(order, 'r') || !strchr(order, 'l')) {
    fprintf(stderr, "usage: tpla_sym_lanes_bench [iters] [order: f, r and l once each]\n");
    return 2;
  }
  if (cudaGetDeviceCount(&ngpu) != cudaSuccess || ngpu == 0) {
    printf("sym_lanes_bench: no GPU: skipped\n");
    return 77;
  }
  cublasLtHandle_t lt;
  if (cublasLtCreate(&lt) != CUBLAS_STATUS_SUCCESS)
    return 1;
  const product_t products[] = {{"gram bf16", TPLA_BFLOAT16, TPLA_BFLOAT16, 0, 0},
                                {"gram fp32", TPLA_BFLOAT16, TPLA_FLOAT32, 0, 0},
                                {"square tf32", TPLA_FLOAT32, TPLA_FLOAT32, 1, 1}};
  const int64_t sizes[] = {2048, 4096, 8192};
  printf("# order %s\n#     s nb product       full_us  rows_us lanes_us  lanes/rows  TFLOP/s full "
         "rows lanes\n", order);
  float *ms = malloc(sizeof(float) * (size_t)iters);
  for (int si = 0; si < 3; si++)
    for (int pi = 0; pi < 3; pi++) {
      const product_t *p = &products[pi];
      setup_t u;
      memset(&u, 0, sizeof u);
      u.s = sizes[si];
      u.nb = u.s / 1024 > 8 ? 8 : (int)(u.s / 1024);
      u.t = (u.s + u.nb - 1) / u.nb;
      size_t elems = (size_t)u.s * (size_t)u.s;
      u.x = random_matrix(elems, p->in, 1234 + (uint64_t)si);
      u.c = p->with_c ? random_matrix(elems, p->out, 99) : NULL;
      CHECK(cudaMalloc(&u.d, elems * tpla_dtype_size(p->out)));
      for (int l = 0; l < 2; l++) {
        CHECK(cudaMalloc(&u.ws[l], WS_BYTES));
        CHECK(cudaStreamCreateWithFlags(&u.st[l], cudaStreamNonBlocking));
      }
      CHECK(cudaEventCreateWithFlags(&u.fork, cudaEventDisableTiming));
      CHECK(cudaEventCreateWithFlags(&u.join, cudaEventDisableTiming));
      u.full = plan_of(lt, p, u.s, u.s, u.s, u.x, u.d);
      for (int i = 0; i < u.nb; i++)
        u.rows[i] = plan_of(lt, p, u.s, u.t, u.s - i * u.t, u.x, u.d);
      cudaEvent_t a, b;
      CHECK(cudaEventCreate(&a));
      CHECK(cudaEventCreate(&b));
      float med[3], *all[3]; /* each round times full, rows and lanes in turn */
      for (int how = 0; how < 3; how++)
        all[how] = malloc(sizeof(float) * (size_t)iters);
      for (int i = -5; i < iters; i++)
        for (int o = 0; o < 3; o++) {
          int how = order[o] == 'f' ? 0 : order[o] == 'r' ? 1 : 2;
          CHECK(cudaEventRecord(a, u.st[0]));
          product(lt, &u, p, how);
          CHECK(cudaEventRecord(b, u.st[0]));
          CHECK(cudaEventSynchronize(b));
          if (i >= 0)
            CHECK(cudaEventElapsedTime(&all[how][i], a, b));
        }
      for (int how = 0; how < 3; how++) {
        memcpy(ms, all[how], sizeof(float) * (size_t)iters);
        qsort(ms, (size_t)iters, sizeof(float), by_value);
        med[how] = 1000.0f * ms[iters / 2];
        free(all[how]);
      }
      double s3 = (double)u.s * (double)u.s * (double)u.s;
      double tri = 2.0 * s3 * (u.nb + 1) / (2.0 * u.nb);
      printf("%7lld %2d %-12s %8.1f %8.1f %8.1f  %10.3f  %12.0f %4.0f %5.0f\n",
             (long long)u.s, u.nb, p->name, med[0], med[1], med[2], med[2] / med[1],
             2.0 * s3 / (med[0] * 1e6), tri / (med[1] * 1e6), tri / (med[2] * 1e6));
      fflush(stdout);
      CHECK(cudaEventDestroy(a));
      CHECK(cudaEventDestroy(b));
      tpla_lt_plan_release(&u.full);
      for (int i = 0; i < u.nb; i++)
        tpla_lt_plan_release(&u.rows[i]);
      CHECK(cudaEventDestroy(u.fork));
      CHECK(cudaEventDestroy(u.join));
      for (int l = 0; l < 2; l++) {
        CHECK(cudaFree(u.ws[l]));
        CHECK(cudaStreamDestroy(u.st[l]));
      }
      CHECK(cudaFree(u.x));
      if (u.c)
        CHECK(cudaFree(u.c));
      CHECK(cudaFree(u.d));
    }
  free(ms);
  cublasLtDestroy(lt);
  printf("sym_lanes_bench: done\n");
  return 0;
}
