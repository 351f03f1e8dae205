/*
 * remote_d_bench.c - can a two-rank GEMM+ReduceScatter drop its chunks by letting the GEMM of
 * the peer's rows write them straight into the peer's memory?
 *
 * tpla's schedule (src/core/overlap_exec.c) cuts each half of the local product into chunks so
 * that each chunk's push hides behind the next GEMM; the chunk GEMMs alone cost 1.08-1.17x the
 * unchunked GEMM, which holds FP8 GEMM+RS (8192, 4096, 8192) at eff 0.85-0.88 (issue #5; runs
 * 30-136). Here no chunk is cut and no copy engine moves a byte: the peer's half is one GEMM
 * whose D is the peer's receive buffer (its epilogue's stores cross NVLink while later tiles
 * compute), then, once the peer's GEMM into this GPU has ended, the own half is one GEMM that
 * adds the received partial in its epilogue (C = the receive buffer, beta 1). Two GEMM launches,
 * as many waves as the unchunked GEMM; the open question is what the remote stores cost.
 *
 * One rank's problem, as bench/chunk_bench.c's: D (M x N, bf16) = A (M x K) B^T (B N x K, the
 * layout cuBLASLt's FP8 kernels read), M 8192, N 8192, K 4096; rank g owns rows
 * [g M/2, (g+1) M/2). Plans come from the library's builder (tpla_lt_plan_build), so the
 * algorithms are the library's. Modes, each timed on every GPU at once (one process, a stream
 * per GPU, peer access on):
 *   full     the unchunked GEMM (the efficiency baseline's)
 *   half     the peer's half alone, D local
 *   halves   the peer's half (D local), then the own half with C = the receive buffer
 *   remote   the peer's half alone, D = the peer's receive buffer (2 GPUs)
 *   sched    remote, then (cross-GPU event) the own half with C = the receive buffer (2 GPUs)
 *   halves*, sched*   the same with the own half under the fastest of the heuristic's results
 *            for its key (below; run 139: result 0 is 25% slower than C = D at 4096 rows)
 *   halves/2, sched/2, halves/4, sched/4   the own half as two GEMMs of 2048 rows, four of
 *            1024 (result 0): the library with direct partials and 2 or 4 chunks
 * Each round starts every GPU behind a 512 MiB memset (so the host has issued the round before
 * either GPU reaches it, and L2 holds no operand) and times from an event after it; a round's
 * time is the slowest GPU's. Median of `iters` rounds (default 30) after 5, the modes
 * interleaved per round, three operand sets rotating (each set over the L2 cache). Before
 * timing, sched's reduced rows are checked against the two GPUs' `full` products summed on the
 * host (bf16 rounding of a partial and of the sum allowed).
 *
 * Then, on GPU 0, the own rows' GEMM alone (4096, 2048 and 1024 rows), each timed as it follows
 * another and after an L2 flush: beta 0, beta 1 with C = D, and beta 1 with a separate C (the
 * library's fused reduction); then, flushed, the separate C under each of the cuBLASLt
 * heuristic's next 7 results; each with its algorithm's tile / stages / cluster shape enum
 * values. Run 137 read E4M3's two halves at 1.129x the unchunked GEMM (bf16 1.005x).
 *
 *   tpla_remote_d_bench [iters]
 *
 * E4M3 with split and with fast accumulation, then bf16. Exits 0, or 77 without a GPU.
 */
#include "lt_plan.h"

#include <cuda_runtime.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CHECK(call)                                                                        \
  do {                                                                                     \
    cudaError_t e_ = (call);                                                               \
    if (e_ != cudaSuccess) {                                                               \
      fprintf(stderr, "remote_d_bench: %s: %s\n", #call, cudaGetErrorString(e_));          \
      exit(1);                                                                             \
    }                                                                                      \
  } while (0)
#define TRY(call)                                                                          \
  do {                                                                                     \
    if ((call) != TPLA_SUCCESS) {                                                          \
      fprintf(stderr, "remote_d_bench: %s: %s\n", #call, tpla_last_error());               \
      exit(1);                                                                             \
    }                                                                                      \
  } while (0)

enum { M = 8192, N = 8192, K = 4096, H = M / 2, SETS = 3, GPUS = 2, WARMUP = 5 };
#define WS_BYTES ((size_t)32 << 20)
#define GATE_BYTES ((size_t)512 << 20)

/* How a mode runs the peer's half (none for `full`: one GEMM of all rows), whether the own
 * half waits for the peer's GEMM into this GPU, and in how many GEMMs it runs the own half
 * (0: none), under the heuristic's result 0 for their key or ("*") the fastest of its results
 * (own_variants). "/4" is what the library runs with direct partials and 4 chunks. */
typedef enum { PEER_NONE, PEER_LOCAL, PEER_REMOTE } peer_half_t;
typedef struct {
  const char *name;
  peer_half_t peer;
  int meet;  /* the own half waits for the peer's GEMM into this GPU */
  int parts; /* GEMMs of the own half: 0, 1, 2 or 4 */
  int best;  /* one part: the fastest of the heuristic's results */
} bench_mode_t;
/* the modes before REMOTE need one GPU */
enum {
  FULL, HALF, HALVES, HALVES_BEST, HALVES_TWO, HALVES_FOUR,
  REMOTE, SCHED, SCHED_BEST, SCHED_TWO, SCHED_FOUR, MODES
};
static const bench_mode_t modes_of[MODES] = {
    {"full", PEER_NONE, 0, 0, 0},       {"half", PEER_LOCAL, 0, 0, 0},
    {"halves", PEER_LOCAL, 0, 1, 0},    {"halves*", PEER_LOCAL, 0, 1, 1},
    {"halves/2", PEER_LOCAL, 0, 2, 0},  {"halves/4", PEER_LOCAL, 0, 4, 0},
    {"remote", PEER_REMOTE, 0, 0, 0},   {"sched", PEER_REMOTE, 1, 1, 0},
    {"sched*", PEER_REMOTE, 1, 1, 1},   {"sched/2", PEER_REMOTE, 1, 2, 0},
    {"sched/4", PEER_REMOTE, 1, 4, 0}};

typedef struct {
  tpla_dtype_t in;
  int fast;
  const char *name;
} config_t;

typedef struct {
  cudaStream_t st;
  cublasLtHandle_t lt;
  void *a[SETS], *b[SETS];
  void *d;    /* M x N */
  void *recv; /* H x N: the peer's partial of this GPU's rows, written by the peer */
  void *send; /* H x N: the peer's half when it stays local */
  void *ws, *gate;
  float *one; /* the FP8 scales */
  tpla_lt_plan_t full, half, own, own2, own4; /* own2, own4: H / 2, H / 4 rows */
  cublasLtMatmulAlgo_t own_first, own_best; /* the heuristic's result 0, the fastest */
  cudaEvent_t start, end, done;
} gpu_t;

static gpu_t gpu[GPUS];
static int ngpus;

static void describe(char *buf, size_t size, const void *arg) {
  snprintf(buf, size, "remote_d_bench's %s GEMM", (const char *)arg);
}

static uint64_t next(uint64_t *seed) {
  *seed = *seed * 6364136223846793005ull + 1442695040888963407ull;
  return *seed >> 33;
}

/* Random values of magnitude 1/8 .. 2: E4M3 codes with exponent field 4..8, or bf16 in [-1, 1). */
static void *random_matrix(size_t elems, tpla_dtype_t t, uint64_t *seed) {
  size_t es = tpla_dtype_size(t);
  unsigned char *h = malloc(elems * es);
  for (size_t i = 0; i < elems; i++) {
    uint64_t r = next(seed);
    if (es == 1) {
      h[i] = (unsigned char)(((r & 1) << 7) | ((4 + (r >> 1) % 5) << 3) | ((r >> 8) & 7));
    } else {
      float f = (float)(r & 0xffffff) / (float)0x800000 - 1.0f;
      uint32_t u;
      memcpy(&u, &f, 4);
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

static tpla_lt_key_t key_of(const config_t *c, int64_t rows, int own) {
  tpla_lt_key_t k;
  memset(&k, 0, sizeof k);
  k.m = rows, k.n = N, k.k = K;
  k.lda = K, k.ldb = K, k.ldd = N, k.ldc = N;
  k.op_a = TPLA_OP_N, k.op_b = TPLA_OP_T;
  k.a_dtype = k.b_dtype = c->in, k.d_dtype = TPLA_BFLOAT16;
  k.align_a = k.align_b = k.align_c = k.align_d = 256;
  k.beta_zero = !own;
  k.c_separate = own;
  if (tpla_lt_is_fp8(c->in)) {
    k.fast_accum = c->fast;
    k.fp8_pointers = TPLA_LT_A_SCALE | TPLA_LT_B_SCALE;
  }
  return k;
}

static void run_gemm(gpu_t *g, tpla_lt_plan_t *p, const void *a, const void *b, const void *c,
                     void *d, const char *what) {
  tpla_lt_operands_t ops = {a, b, c, d, 1.0f, c ? 1.0f : 0.0f, NULL, g->one, g->one, NULL, NULL};
  tpla_lt_what_t w = {describe, what};
  TRY(tpla_lt_plan_run(p, g->lt, &ops, g->ws, WS_BYTES, g->st, "remote_d_bench", &w));
}

static size_t row_bytes(void) { return (size_t)N * 2; }
static char *rows_of(void *base, int64_t row) { return (char *)base + (size_t)row * row_bytes(); }

/* Rank q's rows of A (set s). */
static const char *rows_of_a(const gpu_t *x, int s, int q) {
  return (const char *)x->a[s] + (size_t)q * H * K * tpla_dtype_size(x->full.key.a_dtype);
}

/* One round of `mode` with operand set s on every GPU; returns the slowest GPU's time (us). */
static float round_of(int mode, int s) {
  for (int g = 0; g < ngpus; g++) {
    CHECK(cudaSetDevice(g));
    CHECK(cudaMemsetAsync(gpu[g].gate, g + 1, GATE_BYTES, gpu[g].st));
    CHECK(cudaEventRecord(gpu[g].start, gpu[g].st));
  }
  const bench_mode_t *md = &modes_of[mode];
  for (int g = 0; g < ngpus; g++) { /* the peer's rows (and `full`) */
    gpu_t *x = &gpu[g];
    int peer = (g + 1) % ngpus;
    const char *a_peer = rows_of_a(x, s, peer);
    CHECK(cudaSetDevice(g));
    if (md->peer == PEER_NONE)
      run_gemm(x, &x->full, x->a[s], x->b[s], NULL, x->d, "full");
    else if (md->peer == PEER_LOCAL)
      run_gemm(x, &x->half, a_peer, x->b[s], NULL, x->send, "half");
    else
      run_gemm(x, &x->half, a_peer, x->b[s], NULL, gpu[peer].recv, "remote half");
    CHECK(cudaEventRecord(x->done, x->st));
  }
  for (int g = 0; g < ngpus; g++) { /* the own rows */
    gpu_t *x = &gpu[g];
    CHECK(cudaSetDevice(g));
    const char *a_own = rows_of_a(x, s, g);
    char *d_own = rows_of(x->d, (int64_t)g * H);
    if (md->meet)
      CHECK(cudaStreamWaitEvent(x->st, gpu[(g + 1) % ngpus].done, 0));
    x->own.algo = md->best ? x->own_best : x->own_first;
    tpla_lt_plan_t *part = md->parts == 1 ? &x->own : md->parts == 2 ? &x->own2 : &x->own4;
    for (int h = 0; h < md->parts; h++) {
      int64_t r0 = (int64_t)h * (H / md->parts);
      run_gemm(x, part, a_own + (size_t)r0 * K * tpla_dtype_size(part->key.a_dtype), x->b[s],
               rows_of(x->recv, r0), d_own + (size_t)r0 * row_bytes(), "own rows");
    }
    CHECK(cudaEventRecord(x->end, x->st));
  }
  float worst = 0;
  for (int g = 0; g < ngpus; g++) {
    CHECK(cudaSetDevice(g));
    CHECK(cudaEventSynchronize(gpu[g].end));
    float ms = 0;
    CHECK(cudaEventElapsedTime(&ms, gpu[g].start, gpu[g].end));
    if (1000.0f * ms > worst)
      worst = 1000.0f * ms;
  }
  return worst;
}

static float bf16_to_float(uint16_t b) {
  uint32_t u = (uint32_t)b << 16;
  float f;
  memcpy(&f, &u, 4);
  return f;
}

static uint16_t *to_host(int g, const void *d, size_t elems) {
  uint16_t *h = malloc(elems * 2);
  CHECK(cudaSetDevice(g));
  CHECK(cudaMemcpy(h, d, elems * 2, cudaMemcpyDeviceToHost));
  return h;
}

/* sched's (mode's) reduced rows of every GPU against the sum of the GPUs' full products (set 0). */
static long check_sched(int mode) {
  uint16_t *full[GPUS];
  for (int g = 0; g < ngpus; g++) {
    CHECK(cudaSetDevice(g));
    CHECK(cudaMemset(gpu[g].d, 0xff, (size_t)M * N * 2));
    CHECK(cudaDeviceSynchronize());
  }
  round_of(FULL, 0);
  for (int g = 0; g < ngpus; g++) {
    full[g] = to_host(g, gpu[g].d, (size_t)M * N);
    CHECK(cudaMemset(gpu[g].d, 0xff, (size_t)M * N * 2)); /* NaN: rows never written show */
    CHECK(cudaDeviceSynchronize());
  }
  round_of(mode, 0);
  long bad = 0;
  for (int g = 0; g < ngpus; g++) {
    uint16_t *got = to_host(g, rows_of(gpu[g].d, (int64_t)g * H), (size_t)H * N);
    for (size_t i = 0; i < (size_t)H * N; i++) {
      size_t at = (size_t)g * H * N + i;
      float p0 = bf16_to_float(full[0][at]), p1 = bf16_to_float(full[1][at]);
      float want = p0 + p1, v = bf16_to_float(got[i]);
      float tol = 0.016f * (fabsf(p0) + fabsf(p1)) + 1e-3f;
      if (!(fabsf(v - want) <= tol))
        bad++;
    }
    free(got);
  }
  for (int g = 0; g < ngpus; g++)
    free(full[g]);
  return bad;
}

static int by_value(const void *a, const void *b) {
  float x = *(const float *)a, y = *(const float *)b;
  return (x > y) - (x < y);
}

/* ---- the own rows' GEMM alone: what adding a received partial in the epilogue costs ---- */

/* cuBLASLt's tile, stages and cluster shape enum values of an algorithm. */
static void algo_ids(const cublasLtMatmulAlgo_t *a, int *tile, int *stages, int *cluster) {
  uint32_t v = 0;
  size_t got = 0;
  *tile = *stages = *cluster = -1;
  if (cublasLtMatmulAlgoConfigGetAttribute(a, CUBLASLT_ALGO_CONFIG_TILE_ID, &v, sizeof v, &got) ==
      CUBLAS_STATUS_SUCCESS)
    *tile = (int)v;
  if (cublasLtMatmulAlgoConfigGetAttribute(a, CUBLASLT_ALGO_CONFIG_STAGES_ID, &v, sizeof v,
                                           &got) == CUBLAS_STATUS_SUCCESS)
    *stages = (int)v;
  if (cublasLtMatmulAlgoConfigGetAttribute(a, CUBLASLT_ALGO_CONFIG_CLUSTER_SHAPE_ID, &v,
                                           sizeof v, &got) == CUBLAS_STATUS_SUCCESS)
    *cluster = (int)v;
}

/* Median time (us) of `iters` GEMMs of plan p on GPU 0 (operand sets rotating): rows of A from
 * row 0, D = x->d, C = x->recv when c_sep, else D; with `flush`, a 512 MiB memset before each
 * (run 138 timed without: C = D then finds part of C in L2, written by the call before). */
static float time_gemm(tpla_lt_plan_t *p, int c_sep, int flush, int iters) {
  gpu_t *x = &gpu[0];
  float *t = malloc(sizeof(float) * (size_t)iters);
  for (int i = -WARMUP; i < iters; i++) {
    int s = (i + WARMUP) % SETS;
    tpla_lt_operands_t ops = {x->a[s], x->b[s], c_sep ? x->recv : NULL, x->d,
                              1.0f,    p->key.beta_zero ? 0.0f : 1.0f, NULL,
                              x->one,  x->one, NULL, NULL};
    tpla_lt_what_t w = {describe, "variant"};
    if (flush) /* no C (nor D) left in L2 by the previous call */
      CHECK(cudaMemsetAsync(x->gate, i & 0xff, GATE_BYTES, x->st));
    CHECK(cudaEventRecord(x->start, x->st));
    TRY(tpla_lt_plan_run(p, x->lt, &ops, x->ws, WS_BYTES, x->st, "remote_d_bench", &w));
    CHECK(cudaEventRecord(x->end, x->st));
    CHECK(cudaEventSynchronize(x->end));
    float ms = 0;
    CHECK(cudaEventElapsedTime(&ms, x->start, x->end));
    if (i >= 0)
      t[i] = 1000.0f * ms;
  }
  qsort(t, (size_t)iters, sizeof(float), by_value);
  float med = t[iters / 2];
  free(t);
  return med;
}

/* The own rows' GEMM (rows x N x K) with beta 0, with beta 1 and C = D, and with beta 1 and a
 * separate C (the library's fused reduction) under each of the heuristic's first results;
 * returns the fastest of those (flushed). */
static cublasLtMatmulAlgo_t own_variants(const config_t *c, int64_t rows, int iters) {
  gpu_t *x = &gpu[0];
  cublasLtMatmulAlgo_t best;
  float best_us = -1;
  CHECK(cudaSetDevice(0));
  static const char *names[3] = {"beta0", "C=D", "C apart"};
  tpla_lt_operands_t first = {NULL, NULL, NULL,   NULL,   1.0f, 0.0f,
                              NULL, x->one, x->one, NULL, NULL};
  printf("  %-10s %5lld rows:", c->name, (long long)rows);
  for (int v = 0; v < 3; v++) {
    tpla_lt_key_t k = key_of(c, rows, v == 2);
    k.beta_zero = v == 0;
    tpla_lt_plan_t p;
    TRY(tpla_lt_plan_build(&p, x->lt, WS_BYTES, &k, &first, "remote_d_bench", NULL));
    int tile, stages, cluster;
    algo_ids(&p.algo, &tile, &stages, &cluster);
    float warm = time_gemm(&p, v == 2, 0, iters), flushed = time_gemm(&p, v == 2, 1, iters);
    printf(" %s %.1f / flushed %.1f (tile %d stages %d cluster %d);", names[v], warm, flushed,
           tile, stages, cluster);
    if (v == 2)
      best = p.algo, best_us = flushed;
    if (v == 2) { /* the heuristic's other results for the library's key */
      enum { RESULTS = 8 };
      cublasLtMatmulHeuristicResult_t res[RESULTS];
      cublasLtMatmulPreference_t pref;
      uint64_t ws = WS_BYTES;
      uint32_t al = 256;
      int got = 0;
      cublasLtMatmulPreferenceCreate(&pref);
      cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws,
                                           sizeof ws);
      cublasLtMatmulPreferenceAttributes_t als[4] = {
          CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
          CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES};
      for (int i = 0; i < 4; i++)
        cublasLtMatmulPreferenceSetAttribute(pref, als[i], &al, sizeof al);
      if (cublasLtMatmulAlgoGetHeuristic(x->lt, p.desc, p.lay_a, p.lay_b, p.lay_c, p.lay_d, pref,
                                         RESULTS, res, &got) != CUBLAS_STATUS_SUCCESS)
        got = 0;
      cublasLtMatmulPreferenceDestroy(pref);
      printf("\n  %-10s %5lld rows, C apart, results 1..%d:", c->name, (long long)rows, got - 1);
      for (int r = 1; r < got; r++) {
        if (res[r].state != CUBLAS_STATUS_SUCCESS || res[r].workspaceSize > WS_BYTES)
          continue;
        p.algo = res[r].algo;
        algo_ids(&p.algo, &tile, &stages, &cluster);
        float us = time_gemm(&p, 1, 1, iters);
        printf(" %d: %.1f (%d/%d/%d);", r, us, tile, stages, cluster);
        if (us < best_us)
          best = p.algo, best_us = us;
      }
    }
    tpla_lt_plan_release(&p);
  }
  printf("\n");
  fflush(stdout);
  return best;
}

static void bench_config(const config_t *c, int iters, uint64_t *seed) {
  for (int g = 0; g < ngpus; g++) {
    gpu_t *x = &gpu[g];
    CHECK(cudaSetDevice(g));
    for (int s = 0; s < SETS; s++) {
      x->a[s] = random_matrix((size_t)M * K, c->in, seed);
      x->b[s] = random_matrix((size_t)N * K, c->in, seed);
    }
    tpla_lt_key_t kf = key_of(c, M, 0), kh = key_of(c, H, 0), ko = key_of(c, H, 1);
    tpla_lt_operands_t first = {NULL, NULL, NULL,   NULL,   1.0f, 0.0f,
                                NULL, x->one, x->one, NULL, NULL};
    TRY(tpla_lt_plan_build(&x->full, x->lt, WS_BYTES, &kf, &first, "remote_d_bench", NULL));
    TRY(tpla_lt_plan_build(&x->half, x->lt, WS_BYTES, &kh, &first, "remote_d_bench", NULL));
    TRY(tpla_lt_plan_build(&x->own, x->lt, WS_BYTES, &ko, &first, "remote_d_bench", NULL));
    tpla_lt_key_t ko2 = key_of(c, H / 2, 1), ko4 = key_of(c, H / 4, 1);
    TRY(tpla_lt_plan_build(&x->own2, x->lt, WS_BYTES, &ko2, &first, "remote_d_bench", NULL));
    TRY(tpla_lt_plan_build(&x->own4, x->lt, WS_BYTES, &ko4, &first, "remote_d_bench", NULL));
  }
  cublasLtMatmulAlgo_t best = own_variants(c, H, iters);
  (void)own_variants(c, H / 2, iters);
  (void)own_variants(c, 1024, iters);
  for (int g = 0; g < ngpus; g++)
    gpu[g].own_first = gpu[g].own.algo, gpu[g].own_best = best;
  int modes = ngpus > 1 ? MODES : REMOTE;
  if (ngpus > 1)
    printf("  %-10s check: %ld / %ld / %ld / %ld wrong of %lld reduced elements (sched, *, /2, "
           "/4)\n", c->name, check_sched(SCHED), check_sched(SCHED_BEST), check_sched(SCHED_TWO),
           check_sched(SCHED_FOUR), (long long)M * N);
  float *t[MODES];
  for (int m = 0; m < modes; m++)
    t[m] = malloc(sizeof(float) * (size_t)iters);
  for (int i = -WARMUP; i < iters; i++)
    for (int m = 0; m < modes; m++) {
      float us = round_of(m, (i + WARMUP) % SETS);
      if (i >= 0)
        t[m][i] = us;
    }
  float med[MODES];
  for (int m = 0; m < modes; m++) {
    qsort(t[m], (size_t)iters, sizeof(float), by_value);
    med[m] = t[m][iters / 2];
  }
  printf("  %-10s", c->name);
  for (int m = 0; m < modes; m++)
    printf(" %s %.1f (%.3f)", modes_of[m].name, med[m], med[m] / med[FULL]);
  printf("\n");
  if (ngpus > 1)
    printf("  %-10s remote/half %.3f; predicted eff (full / sched) %.3f, * %.3f, /2 %.3f, /4 "
           "%.3f\n", c->name, med[REMOTE] / med[HALF], med[FULL] / med[SCHED],
           med[FULL] / med[SCHED_BEST], med[FULL] / med[SCHED_TWO], med[FULL] / med[SCHED_FOUR]);
  fflush(stdout);
  for (int m = 0; m < modes; m++)
    free(t[m]);
  for (int g = 0; g < ngpus; g++) {
    gpu_t *x = &gpu[g];
    CHECK(cudaSetDevice(g));
    CHECK(cudaDeviceSynchronize());
    for (int s = 0; s < SETS; s++)
      cudaFree(x->a[s]), cudaFree(x->b[s]);
    tpla_lt_plan_release(&x->full);
    tpla_lt_plan_release(&x->half);
    tpla_lt_plan_release(&x->own);
    tpla_lt_plan_release(&x->own2);
    tpla_lt_plan_release(&x->own4);
  }
}

int main(int argc, char **argv) {
  int iters = argc > 1 ? atoi(argv[1]) : 30;
  if (iters < 1)
    iters = 30;
  if (cudaGetDeviceCount(&ngpus) != cudaSuccess || ngpus < 1) {
    printf("remote_d_bench: no GPU, skipped\n");
    return 77;
  }
  if (ngpus > GPUS)
    ngpus = GPUS;
  for (int g = 0; g < ngpus; g++) {
    CHECK(cudaSetDevice(g));
    if (ngpus > 1) {
      int can = 0;
      CHECK(cudaDeviceCanAccessPeer(&can, g, 1 - g));
      if (!can) {
        printf("remote_d_bench: GPU %d cannot access GPU %d, one GPU only\n", g, 1 - g);
        ngpus = 1;
        break;
      }
      CHECK(cudaDeviceEnablePeerAccess(1 - g, 0));
    }
  }
  uint64_t seed = 1234;
  for (int g = 0; g < ngpus; g++) {
    gpu_t *x = &gpu[g];
    CHECK(cudaSetDevice(g));
    CHECK(cudaStreamCreateWithFlags(&x->st, cudaStreamNonBlocking));
    if (cublasLtCreate(&x->lt) != CUBLAS_STATUS_SUCCESS)
      return 1;
    CHECK(cudaMalloc(&x->d, (size_t)M * N * 2));
    x->recv = random_matrix((size_t)H * N, TPLA_BFLOAT16, &seed); /* until a peer writes it */
    CHECK(cudaMalloc(&x->send, (size_t)H * N * 2));
    CHECK(cudaMalloc(&x->ws, WS_BYTES));
    CHECK(cudaMalloc(&x->gate, GATE_BYTES));
    CHECK(cudaMalloc((void **)&x->one, sizeof(float)));
    float one = 1.0f;
    CHECK(cudaMemcpy(x->one, &one, sizeof one, cudaMemcpyHostToDevice));
    CHECK(cudaEventCreate(&x->start));
    CHECK(cudaEventCreate(&x->end));
    CHECK(cudaEventCreateWithFlags(&x->done, cudaEventDisableTiming));
  }
  printf("# remote_d_bench: %d GPU(s); D %d x %d bf16 = A %d x %d op(B) T; median of %d rounds "
         "after %d; us (over full)\n",
         ngpus, M, N, M, K, iters, WARMUP);
  static const config_t configs[] = {{TPLA_FLOAT8_E4M3, 0, "e4m3-split"},
                                     {TPLA_FLOAT8_E4M3, 1, "e4m3-fast"},
                                     {TPLA_BFLOAT16, 0, "bf16"}};
  for (size_t i = 0; i < sizeof configs / sizeof configs[0]; i++)
    bench_config(&configs[i], iters, &seed);
  printf("remote_d_bench: done\n");
  return 0;
}
