/*
 * chunk_bench.c - what do the chunks of an overlapped GEMM+ReduceScatter cost
 * in compute alone, on one GPU, without any transfer? Runs 30 and 85 timed
 * 1024-row FP8 chunk GEMMs (E4M3, K 4096, N 8192) at 55-63 us inside the
 * overlapped call against 49 us per 1024 rows of the unchunked GEMM, and both
 * lanes' GEMMs together at ~450 us per rank against ~390: the chunking, not
 * the link, is what FP8 GEMM+RS (8192, 4096, 8192) loses (eff 0.87-0.88).
 * This separates the GEMMs' own cost from the transfers' interference and
 * tries the other ways to cut the same work into chunks.
 *
 * The problem is one rank's: D (8192 x 8192, bf16) = A (8192 x 4096) B^T
 * (B 8192 x 4096, op T: the layout cuBLASLt's FP8 kernels read), its rows
 * 0..4095 the "partials" (beta 0, what a rank sends), rows 4096.. the "own"
 * rows (beta 1 with a separate C: the received partial folded in the
 * epilogue, as tpla's schedule does). Schedules, each timed as a whole:
 *   full        one GEMM of all rows (the efficiency baseline's GEMM)
 *   m<c> seq    each half in c chunks of rows, all on one stream
 *   m<c> lanes  the partial chunks on lane 0, the own chunks on lane 1, both
 *               lanes running at once (the overlapped schedule's steady state)
 *   n<c> lanes  the same with each half cut into c blocks of columns
 *               (4096 x N/c chunks: B read once per chunk, A per chunk)
 *   ... sm<s>   every GEMM with CUBLASLT_MATMUL_DESC_SM_COUNT_TARGET = s
 *
 *   tpla_chunk_bench [iters]
 *
 * For E4M3 (split accumulation) and bf16: median of `iters` (default 30)
 * CUDA-event times after 5 warm-ups, the inputs random, two operand sets
 * alternating (each over the L2 cache). Prints one line per schedule, its
 * time over `full`'s, and exits 0; 77 without a GPU.
 */
#include <cublasLt.h>
#include <cuda_runtime.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CHECK(call)                                                                        \
  do {                                                                                     \
    cudaError_t e_ = (call);                                                               \
    if (e_ != cudaSuccess) {                                                               \
      fprintf(stderr, "chunk_bench: %s: %s\n", #call, cudaGetErrorString(e_));             \
      exit(1);                                                                             \
    }                                                                                      \
  } while (0)
#define LT(call)                                                                           \
  do {                                                                                     \
    cublasStatus_t s_ = (call);                                                            \
    if (s_ != CUBLAS_STATUS_SUCCESS) {                                                     \
      fprintf(stderr, "chunk_bench: %s: %s\n", #call, cublasLtGetStatusString(s_));        \
      exit(1);                                                                             \
    }                                                                                      \
  } while (0)

enum { M = 8192, K = 4096, N = 8192, SETS = 2, LANES = 2 };
#define WS_BYTES ((size_t)32 << 20)

typedef struct {
  int fp8;
  void *a[SETS], *b[SETS], *d[SETS], *c[SETS]; /* c: the received partials (M/2 x N) */
  float *one;                                   /* the FP8 scales */
  void *ws[LANES];
  cudaStream_t lane[LANES];
  cudaEvent_t fork, join;
  cublasLtHandle_t lt;
} bench_t;

/* A GEMM's cuBLASLt objects, made once per shape (the heuristic query costs
 * more host time than a chunk's GEMM lasts on the GPU). */
typedef struct {
  int64_t rows, cols;
  int own, sm_target;
  cublasLtMatmulDesc_t desc;
  cublasLtMatrixLayout_t la, lb, lc, ld;
  cublasLtMatmulAlgo_t algo;
} lt_plan_t;

enum { MAX_PLANS = 64 };
static lt_plan_t plans[MAX_PLANS];
static int nplans;

static const lt_plan_t *plan_for(bench_t *bb, int64_t rows, int64_t cols, int own,
                                 int sm_target) {
  for (int i = 0; i < nplans; i++)
    if (plans[i].rows == rows && plans[i].cols == cols && plans[i].own == own &&
        plans[i].sm_target == sm_target)
      return &plans[i];
  if (nplans == MAX_PLANS) {
    fprintf(stderr, "chunk_bench: too many shapes\n");
    exit(1);
  }
  lt_plan_t *p = &plans[nplans++];
  p->rows = rows, p->cols = cols, p->own = own, p->sm_target = sm_target;
  cudaDataType_t in = bb->fp8 ? CUDA_R_8F_E4M3 : CUDA_R_16BF;
  LT(cublasLtMatmulDescCreate(&p->desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  int32_t t = CUBLAS_OP_T, n = CUBLAS_OP_N;
  LT(cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_TRANSA, &t, sizeof t));
  LT(cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_TRANSB, &n, sizeof n));
  if (bb->fp8) {
    LT(cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, &bb->one,
                                      sizeof bb->one));
    LT(cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, &bb->one,
                                      sizeof bb->one));
  }
  if (sm_target > 0)
    LT(cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_SM_COUNT_TARGET, &sm_target,
                                      sizeof sm_target));
  /* column-major: cuBLASLt's A = our B (k x cols, op T), B = our A (k x rows), D cols x rows */
  LT(cublasLtMatrixLayoutCreate(&p->la, in, K, (uint64_t)cols, K));
  LT(cublasLtMatrixLayoutCreate(&p->lb, in, K, (uint64_t)rows, K));
  LT(cublasLtMatrixLayoutCreate(&p->lc, CUDA_R_16BF, (uint64_t)cols, (uint64_t)rows, N));
  LT(cublasLtMatrixLayoutCreate(&p->ld, CUDA_R_16BF, (uint64_t)cols, (uint64_t)rows, N));
  cublasLtMatmulPreference_t pref;
  uint64_t ws = WS_BYTES;
  LT(cublasLtMatmulPreferenceCreate(&pref));
  LT(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws,
                                          sizeof ws));
  cublasLtMatmulHeuristicResult_t h;
  int got = 0;
  LT(cublasLtMatmulAlgoGetHeuristic(bb->lt, p->desc, p->la, p->lb, p->lc, p->ld, pref, 1, &h,
                                    &got));
  cublasLtMatmulPreferenceDestroy(pref);
  if (got < 1) {
    fprintf(stderr, "chunk_bench: no algorithm for %lld x %lld\n", (long long)rows,
            (long long)cols);
    exit(1);
  }
  p->algo = h.algo;
  return p;
}

static void plans_release(void) {
  for (int i = 0; i < nplans; i++) {
    cublasLtMatrixLayoutDestroy(plans[i].la);
    cublasLtMatrixLayoutDestroy(plans[i].lb);
    cublasLtMatrixLayoutDestroy(plans[i].lc);
    cublasLtMatrixLayoutDestroy(plans[i].ld);
    cublasLtMatmulDescDestroy(plans[i].desc);
  }
  nplans = 0;
}

/* One GEMM: D[r0.., c0..] (rows x cols) = A[r0..] B[c0..]^T + beta C. */
static void gemm(bench_t *bb, int set, int lane, int64_t r0, int64_t rows, int64_t c0,
                 int64_t cols, int own, int sm_target) {
  const lt_plan_t *p = plan_for(bb, rows, cols, own, sm_target);
  size_t e = bb->fp8 ? 1 : 2;
  float alpha = 1.0f, beta = own ? 1.0f : 0.0f;
  const char *a = (const char *)bb->a[set] + (size_t)r0 * K * e;
  const char *b = (const char *)bb->b[set] + (size_t)c0 * K * e;
  char *d = (char *)bb->d[set] + ((size_t)r0 * N + (size_t)c0) * 2;
  const char *c =
      own ? (const char *)bb->c[set] + ((size_t)(r0 - M / 2) * N + (size_t)c0) * 2 : d;
  LT(cublasLtMatmul(bb->lt, p->desc, &alpha, b, p->la, a, p->lb, &beta, c, p->lc, d, p->ld,
                    &p->algo, bb->ws[lane], WS_BYTES, bb->lane[lane]));
}

typedef struct {
  const char *name;
  char cut;  /* 'f' full, 'm' rows, 'n' columns */
  int chunks; /* per half */
  int lanes;  /* 1: all on lane 0; 2: partials lane 0, own rows lane 1 */
  int sm_target;
} schedule_t;

static void issue(bench_t *bb, int set, const schedule_t *s) {
  if (s->cut == 'f') {
    gemm(bb, set, 0, 0, M, 0, N, 0, s->sm_target);
    return;
  }
  CHECK(cudaEventRecord(bb->fork, bb->lane[0]));
  CHECK(cudaStreamWaitEvent(bb->lane[1], bb->fork, 0));
  for (int half = 0; half < 2; half++)
    for (int i = 0; i < s->chunks; i++) {
      int lane = s->lanes == 2 ? half : 0;
      int64_t r0 = half * (M / 2), rows = M / 2, c0 = 0, cols = N;
      if (s->cut == 'm') {
        rows = M / 2 / s->chunks;
        r0 += i * rows;
      } else {
        cols = N / s->chunks;
        c0 = i * cols;
      }
      gemm(bb, set, lane, r0, rows, c0, cols, half, s->sm_target);
    }
  CHECK(cudaEventRecord(bb->join, bb->lane[1]));
  CHECK(cudaStreamWaitEvent(bb->lane[0], bb->join, 0));
}

static int by_value(const void *a, const void *b) {
  float x = *(const float *)a, y = *(const float *)b;
  return (x > y) - (x < y);
}

static float median_us(bench_t *bb, const schedule_t *s, int iters) {
  float *ms = malloc(sizeof(float) * (size_t)iters);
  cudaEvent_t t0, t1;
  CHECK(cudaEventCreate(&t0));
  CHECK(cudaEventCreate(&t1));
  for (int i = -5; i < iters; i++) {
    CHECK(cudaEventRecord(t0, bb->lane[0]));
    issue(bb, (i + 5) % SETS, s);
    CHECK(cudaEventRecord(t1, bb->lane[0]));
    CHECK(cudaEventSynchronize(t1));
    if (i >= 0)
      CHECK(cudaEventElapsedTime(&ms[i], t0, t1));
  }
  qsort(ms, (size_t)iters, sizeof(float), by_value);
  float med = 1000.0f * ms[iters / 2];
  free(ms);
  CHECK(cudaEventDestroy(t0));
  CHECK(cudaEventDestroy(t1));
  return med;
}

/* Random bytes: for E4M3 every byte that is not NaN (0x7f / 0xff), for bf16 the
 * values in [-1, 1). */
static void fill(void *dev, size_t elems, int fp8, uint64_t *seed) {
  size_t bytes = elems * (fp8 ? 1 : 2);
  unsigned char *h = malloc(bytes);
  for (size_t i = 0; i < elems; i++) {
    *seed = *seed * 6364136223846793005ull + 1442695040888963407ull;
    uint32_t r = (uint32_t)(*seed >> 33);
    if (fp8) {
      uint8_t v = (uint8_t)(r & 0x77); /* |x| <= 0x77: finite, at most 240 */
      h[i] = (uint8_t)(v | ((r >> 8) & 0x80));
    } else {
      float f = (float)(r & 0xffffff) / (float)0x800000 - 1.0f;
      uint32_t u;
      memcpy(&u, &f, 4);
      uint16_t hb = (uint16_t)(u >> 16);
      memcpy(h + 2 * i, &hb, 2);
    }
  }
  CHECK(cudaMemcpy(dev, h, bytes, cudaMemcpyHostToDevice));
  free(h);
}

int main(int argc, char **argv) {
  int iters = argc > 1 ? atoi(argv[1]) : 30;
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices < 1) {
    printf("chunk_bench: no GPU, skipped\n");
    return 77;
  }
  if (iters < 1)
    iters = 30;
  int sms = 0;
  CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  const schedule_t schedules[] = {
      {"full", 'f', 1, 1, 0},           {"m4 seq", 'm', 4, 1, 0},
      {"m4 lanes", 'm', 4, 2, 0},       {"m4 lanes sm/2", 'm', 4, 2, -2},
      {"m2 lanes", 'm', 2, 2, 0},       {"n4 lanes", 'n', 4, 2, 0},
      {"n2 lanes", 'n', 2, 2, 0},       {"n4 seq", 'n', 4, 1, 0},
      {"m8 lanes", 'm', 8, 2, 0},       {"full again", 'f', 1, 1, 0},
  };
  printf("# chunk_bench: D (%d x %d, bf16) = A (%d x %d) B^T, partial rows beta 0, own rows "
         "beta 1 with C; %d SMs; median of %d after 5, CUDA events\n",
         M, N, M, K, sms, iters);
  printf("# %-5s %-16s %10s %8s\n", "dtype", "schedule", "time_us", "vs_full");
  uint64_t seed = 1234;
  for (int fp8 = 1; fp8 >= 0; fp8--) {
    bench_t bb;
    memset(&bb, 0, sizeof bb);
    bb.fp8 = fp8;
    size_t e = fp8 ? 1 : 2;
    for (int s = 0; s < SETS; s++) {
      CHECK(cudaMalloc(&bb.a[s], (size_t)M * K * e));
      CHECK(cudaMalloc(&bb.b[s], (size_t)N * K * e));
      CHECK(cudaMalloc(&bb.d[s], (size_t)M * N * 2));
      CHECK(cudaMalloc(&bb.c[s], (size_t)M / 2 * N * 2));
      fill(bb.a[s], (size_t)M * K, fp8, &seed);
      fill(bb.b[s], (size_t)N * K, fp8, &seed);
      fill(bb.c[s], (size_t)M / 2 * N, 0, &seed);
    }
    float one = 1.0f;
    CHECK(cudaMalloc((void **)&bb.one, sizeof one));
    CHECK(cudaMemcpy(bb.one, &one, sizeof one, cudaMemcpyHostToDevice));
    for (int l = 0; l < LANES; l++) {
      CHECK(cudaMalloc(&bb.ws[l], WS_BYTES));
      CHECK(cudaStreamCreateWithFlags(&bb.lane[l], cudaStreamNonBlocking));
    }
    CHECK(cudaEventCreateWithFlags(&bb.fork, cudaEventDisableTiming));
    CHECK(cudaEventCreateWithFlags(&bb.join, cudaEventDisableTiming));
    LT(cublasLtCreate(&bb.lt));
    float full = 0.0f;
    for (size_t i = 0; i < sizeof schedules / sizeof schedules[0]; i++) {
      schedule_t s = schedules[i];
      if (s.sm_target < 0)
        s.sm_target = sms / -s.sm_target;
      float us = median_us(&bb, &s, iters);
      if (i == 0)
        full = us;
      printf("  %-5s %-16s %10.1f %8.3f\n", fp8 ? "e4m3" : "bf16", s.name, us, us / full);
      fflush(stdout);
    }
    CHECK(cudaDeviceSynchronize());
    plans_release();
    LT(cublasLtDestroy(bb.lt));
    for (int s = 0; s < SETS; s++) {
      cudaFree(bb.a[s]);
      cudaFree(bb.b[s]);
      cudaFree(bb.d[s]);
      cudaFree(bb.c[s]);
    }
    for (int l = 0; l < LANES; l++) {
      cudaFree(bb.ws[l]);
      cudaStreamDestroy(bb.lane[l]);
    }
    cudaFree(bb.one);
    cudaEventDestroy(bb.fork);
    cudaEventDestroy(bb.join);
  }
  printf("chunk_bench: done\n");
  return 0;
}
