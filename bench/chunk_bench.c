/*
 * chunk_bench.c - what does an overlapped GEMM+ReduceScatter's chunk schedule
 * cost in compute, on one GPU, with the link modelled? Runs 30 and 85 timed
 * 1024-row FP8 chunk GEMMs (E4M3, K 4096, N 8192) at 55-63 us inside the
 * overlapped call against 49 us per 1024 rows of the unchunked GEMM, and FP8
 * GEMM+RS (8192, 4096, 8192) stays at eff 0.87-0.88 (op(B) T: 454-468 us
 * against a 390-408 us GEMM). This separates the chunked GEMMs' own cost and
 * the waits for arrivals from the transfers themselves, and ranks other
 * schedules of the same work.
 *
 * The problem is one rank's: D (8192 x 8192, bf16) = A (8192 x 4096) B^T
 * (B 8192 x 4096, op T: the layout cuBLASLt's FP8 kernels read), its rows
 * 0..4095 the "partials" (beta 0, what a rank sends), rows 4096.. the "own"
 * rows (beta 1 with a separate C: the received partial folded in the
 * epilogue, as tpla's schedule does). Partials in p chunks on lane 0, own
 * rows in o chunks on lane 1 (cut as the library's ovl_chunk cuts them, the
 * last one 1/tail of the others); own chunk j needs every partial chunk that
 * overlaps its rows. GEMM+AR ("ar") then sends each reduced own chunk over
 * the link too (the peer's pull), and ends when the link is done. Modes:
 *   full      one GEMM of all rows (the efficiency baseline's GEMM)
 *   free      the lanes at once from the start, no waits, no link
 *   ev / val / watch   the peer's partial chunk i "arrives" after a link
 *             stream, which takes the chunks in order, has spun for its push
 *             time (bf16 rows x N x 2 bytes at `gbs` GB/s, a one-thread
 *             kernel reading %globaltimer) after partial chunk i was computed
 *             here (the peer is symmetric); lane 1 waits for it by an event,
 *             by a stream memory value (cuStreamWaitValue32 on a value the
 *             link writes with cuStreamWriteValue32: what tpla's peer
 *             transport does; run 85 saw lane 1 lose 7-20 us at each), or by
 *             an event of a watcher stream that waits for the value.
 * Lane 0 has the highest stream priority (prio 1, the default: as tpla's
 * transport creates it) or the default one (prio 0). A schedule may cut the
 * halves explicitly ("1536,1536,1024" rows). After each dtype the plans'
 * tiles, stages and cluster shapes (cuBLASLt's enum values) are printed. The
 * model leaves out the copy engines' memory traffic and any latency of a real
 * transfer beyond its bytes / bandwidth. Run 93's version (db831d0) also held
 * own chunks to an SM count target ("o-sm<s>").
 * What it showed on one H200 (runs 89-93, bench/results/2026-11-30-run89..93): the
 * model reproduces the 2-GPU calls of runs 71 and 81 (the library's schedules
 * 1.12-1.17x the unchunked GEMM for FP8 GEMM+RS and 1.08-1.15x for bf16
 * GEMM+AR, at 380-300 GB/s, against 1.15-1.17x measured) and their ranking
 * of chunk counts and tails; the library's choices are the fastest of every
 * split tried. FP8 GEMM+RS's 1024-row chunk GEMMs cost 1.08-1.11x the full
 * GEMM with no wait at all (an eff bound of 0.90-0.92), and the waits for the
 * link's arrivals bring it to 1.12-1.17x (0.85-0.89; measured 0.87-0.88).
 * Neither waits by event or by a watcher instead of stream values, nor lane
 * 0's stream priority (the persistent GEMM kernels hold their SMs), nor an
 * SM count target (both lanes at SMs / 2: 1.37-1.42x; own chunks at 66-100
 * SMs: 1.09-1.51x) gain anything; explicit cuts (run 95: three larger chunks,
 * head and tail chunks) stay within the model's error of the library's.
 *
 * Run 99 (one H200) added one-lane schedules ("1lane"/"1l": the own chunks on lane 0 after the
 * partials, no two GEMMs at once): 1.15-1.32x for E4M3 GEMM+RS, far above the two-lane ones. Run
 * 100 timed them for real on 2 H200s (a patched library, bench/run100_one_lane_patch.py): 4
 * chunks 491 us against the library's 478, so the model is wrong here by much more than its
 * error elsewhere: its link is a kernel, which gets an SM only between back-to-back GEMMs that
 * hold them all, while a real push runs on a copy engine beside them. Read one-lane rows as an
 * upper bound only.
 *
 *   tpla_chunk_bench [iters] [gbs] [prio]
 *
 * For E4M3 (split accumulation) and bf16: median of `iters` (default 30)
 * rounds after 5 warm-up rounds, one sample of every schedule per round (a
 * drift of the clocks falls on all alike; run 89's first version timed each
 * back to back, and its last `full` read 16-17% above its first), CUDA events,
 * random inputs, two operand sets alternating (each over the L2 cache); `gbs`
 * defaults to 300 (runs 82-85: one copy engine moved 240-380 GB/s). One line
 * per schedule with its time over `full`'s; exits 0, or 77 without a GPU.
 */
#include <cublasLt.h>
#include <cuda.h>
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

typedef CUresult (*value_op_fn)(CUstream, CUdeviceptr, cuuint32_t, unsigned int);

/* chunk_delay.cu: a one-thread kernel that spins for `ns` nanoseconds */
cudaError_t chunk_bench_spin(cudaStream_t stream, unsigned long long ns);

enum { MAX_CHUNKS = 8 };

typedef struct {
  int fp8;
  void *a[SETS], *b[SETS], *d[SETS], *c[SETS]; /* c: the received partials (M/2 x N) */
  float *one;                                   /* the FP8 scales */
  void *ws[LANES];
  cudaStream_t lane[LANES], link, watch;
  cudaEvent_t fork, join, done[MAX_CHUNKS], arrived[MAX_CHUNKS], reduced[MAX_CHUNKS];
  double gbs; /* the modelled link's bandwidth */
  uint32_t *flag, flag_value; /* the stream memory value, and the last one written */
  value_op_fn write_value, wait_value; /* cuStreamWriteValue32, cuStreamWaitValue32 */
  cublasLtHandle_t lt;
} bench_t;

/* A GEMM's cuBLASLt objects, made once per shape (the heuristic query costs
 * more host time than a chunk's GEMM lasts on the GPU). */
typedef struct {
  int64_t rows;
  int own;
  int tile, stages, cluster; /* the heuristic's choice (cublasLtMatmulTile_t, ...) */
  cublasLtMatmulDesc_t desc;
  cublasLtMatrixLayout_t la, lb, lc, ld;
  cublasLtMatmulAlgo_t algo;
} lt_plan_t;

enum { MAX_PLANS = 64 };
static lt_plan_t plans[MAX_PLANS];
static int nplans;

static const lt_plan_t *plan_for(bench_t *bb, int64_t rows, int own) {
  for (int i = 0; i < nplans; i++)
    if (plans[i].rows == rows && plans[i].own == own)
      return &plans[i];
  if (nplans == MAX_PLANS) {
    fprintf(stderr, "chunk_bench: too many shapes\n");
    exit(1);
  }
  lt_plan_t *p = &plans[nplans++];
  p->rows = rows, p->own = own;
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
  /* column-major: cuBLASLt's A = our B (k x N, op T), B = our A (k x rows), D N x rows */
  LT(cublasLtMatrixLayoutCreate(&p->la, in, K, N, K));
  LT(cublasLtMatrixLayoutCreate(&p->lb, in, K, (uint64_t)rows, K));
  LT(cublasLtMatrixLayoutCreate(&p->lc, CUDA_R_16BF, N, (uint64_t)rows, N));
  LT(cublasLtMatrixLayoutCreate(&p->ld, CUDA_R_16BF, N, (uint64_t)rows, N));
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
    fprintf(stderr, "chunk_bench: no algorithm for %lld x %d\n", (long long)rows, N);
    exit(1);
  }
  p->algo = h.algo;
  uint32_t v = 0;
  size_t got_bytes = 0;
  p->tile = p->stages = p->cluster = -1;
  if (cublasLtMatmulAlgoConfigGetAttribute(&p->algo, CUBLASLT_ALGO_CONFIG_TILE_ID, &v, sizeof v,
                                           &got_bytes) == CUBLAS_STATUS_SUCCESS)
    p->tile = (int)v;
  if (cublasLtMatmulAlgoConfigGetAttribute(&p->algo, CUBLASLT_ALGO_CONFIG_STAGES_ID, &v,
                                           sizeof v, &got_bytes) == CUBLAS_STATUS_SUCCESS)
    p->stages = (int)v;
  if (cublasLtMatmulAlgoConfigGetAttribute(&p->algo, CUBLASLT_ALGO_CONFIG_CLUSTER_SHAPE_ID, &v,
                                           sizeof v, &got_bytes) == CUBLAS_STATUS_SUCCESS)
    p->cluster = (int)v;
  return p;
}

static void plans_release(int fp8) {
  for (int i = 0; i < nplans; i++) {
    printf("# %s plan %lld x %d%s: cublasLtMatmulTile_t %d, stages %d, cluster shape %d\n",
           fp8 ? "e4m3" : "bf16", (long long)plans[i].rows, N,
           plans[i].own ? " beta 1" : "", plans[i].tile, plans[i].stages, plans[i].cluster);
    cublasLtMatrixLayoutDestroy(plans[i].la);
    cublasLtMatrixLayoutDestroy(plans[i].lb);
    cublasLtMatrixLayoutDestroy(plans[i].lc);
    cublasLtMatrixLayoutDestroy(plans[i].ld);
    cublasLtMatmulDescDestroy(plans[i].desc);
  }
  nplans = 0;
}

/* One GEMM: D[r0..] (rows x N) = A[r0..] B^T + beta C (own rows: the received partial). */
static void gemm(bench_t *bb, int set, int lane, int64_t r0, int64_t rows, int own) {
  const lt_plan_t *p = plan_for(bb, rows, own);
  size_t e = bb->fp8 ? 1 : 2;
  float alpha = 1.0f, beta = own ? 1.0f : 0.0f;
  const char *a = (const char *)bb->a[set] + (size_t)r0 * K * e;
  const char *b = (const char *)bb->b[set];
  char *d = (char *)bb->d[set] + (size_t)r0 * N * 2;
  const char *c =
      own ? (const char *)bb->c[set] + (size_t)(r0 - M / 2) * N * 2 : d;
  LT(cublasLtMatmul(bb->lt, p->desc, &alpha, b, p->la, a, p->lb, &beta, c, p->lc, d, p->ld,
                    &p->algo, bb->ws[lane], WS_BYTES, bb->lane[lane]));
}

typedef struct {
  const char *name;
  char kind;          /* 'f' one GEMM of all rows, 'r' GEMM+RS, 'a' GEMM+AR */
  int partials, owns; /* chunks of each half */
  int tail;           /* the last chunk 1/tail of the others (TPLA_OVERLAP_TAIL) */
  char mode;          /* 'f' free, 'e' link ev, 'v' link val, 'w' link watch */
  const char *cut;    /* non-NULL: both halves cut into these row counts ("1536,1536,1024") */
  int one_lane;       /* the own chunks on lane 0 too, after every partial: no GEMMs overlap */
} schedule_t;

/* The chunks of a half (starts and lengths, at most MAX_CHUNKS): the
 * schedule's explicit cut, or as the library's ovl_chunk cuts them: chunks -
 * 1 equal pieces in whole 128-row tiles and a last one about 1/tail of them. */
static int chunk_cut(const schedule_t *s, int chunks, int64_t *start, int64_t *len) {
  const int64_t rows = M / 2;
  if (s->cut) {
    int n = 0;
    int64_t at = 0;
    for (const char *p = s->cut; *p && n < MAX_CHUNKS; n++) {
      char *end;
      start[n] = at;
      len[n] = strtoll(p, &end, 10);
      at += len[n];
      p = *end == ',' ? end + 1 : end;
    }
    if (at != rows) {
      fprintf(stderr, "chunk_bench: cut \"%s\" covers %lld rows, not %lld\n", s->cut,
              (long long)at, (long long)rows);
      exit(1);
    }
    return n;
  }
  int64_t size;
  if (chunks > 1 && s->tail > 1) {
    double unit = (double)rows * s->tail / ((double)(chunks - 1) * s->tail + 1.0);
    size = (int64_t)(unit / 128.0 + 0.5) * 128;
  } else {
    size = ((rows + chunks - 1) / chunks + 127) / 128 * 128;
  }
  for (int c = 0; c < chunks; c++) {
    int64_t a = (int64_t)c * size, b = c == chunks - 1 ? rows : a + size;
    start[c] = a < rows ? a : rows;
    len[c] = (b < rows ? b : rows) - start[c];
  }
  return chunks;
}

/* The link moves `rows` bf16 rows after `after` is reached on `from`: it
 * spins for their push time (one direction; the peer is symmetric). */
static void link_move(bench_t *bb, cudaStream_t from, cudaEvent_t after, int64_t rows) {
  CHECK(cudaEventRecord(after, from));
  CHECK(cudaStreamWaitEvent(bb->link, after, 0));
  CHECK(chunk_bench_spin(bb->link, (unsigned long long)((double)rows * N * 2 / bb->gbs)));
}

/* The peer's partial chunk i has arrived: say so the way `mode` waits. */
static void link_arrived(bench_t *bb, const schedule_t *s, int i) {
  if (s->mode == 'e') {
    CHECK(cudaEventRecord(bb->arrived[i], bb->link));
    return;
  }
  if (bb->write_value((CUstream)bb->link, (CUdeviceptr)(uintptr_t)bb->flag, ++bb->flag_value,
                      CU_STREAM_WRITE_VALUE_DEFAULT) != CUDA_SUCCESS)
    exit(1);
  if (s->mode == 'w') {
    if (bb->wait_value((CUstream)bb->watch, (CUdeviceptr)(uintptr_t)bb->flag, bb->flag_value,
                       CU_STREAM_WAIT_VALUE_GEQ) != CUDA_SUCCESS)
      exit(1);
    CHECK(cudaEventRecord(bb->arrived[i], bb->watch));
  }
}

static void await_arrival(bench_t *bb, const schedule_t *s, int i, uint32_t first, int lane) {
  if (s->mode == 'v') {
    if (bb->wait_value((CUstream)bb->lane[lane], (CUdeviceptr)(uintptr_t)bb->flag,
                       first + (uint32_t)i, CU_STREAM_WAIT_VALUE_GEQ) != CUDA_SUCCESS)
      exit(1);
  } else {
    CHECK(cudaStreamWaitEvent(bb->lane[lane], bb->arrived[i], 0));
  }
}

/* Partial chunks on lane 0, each pushed over the link; own chunk j on lane 1
 * (or 0: one_lane) after the arrival of the last partial chunk that overlaps its rows; for
 * GEMM+AR each reduced own chunk then crosses the link too (the peer's pull),
 * and the call ends with the link. */
static void issue(bench_t *bb, int set, const schedule_t *s) {
  if (s->kind == 'f') {
    gemm(bb, set, 0, 0, M, 0);
    return;
  }
  CHECK(cudaEventRecord(bb->fork, bb->lane[0]));
  CHECK(cudaStreamWaitEvent(bb->lane[1], bb->fork, 0));
  CHECK(cudaStreamWaitEvent(bb->link, bb->fork, 0));
  CHECK(cudaStreamWaitEvent(bb->watch, bb->fork, 0));
  uint32_t first = bb->flag_value + 1; /* the value partial chunk 0's arrival writes */
  int64_t pstart[MAX_CHUNKS], plen[MAX_CHUNKS], ostart[MAX_CHUNKS], olen[MAX_CHUNKS];
  const int np = chunk_cut(s, s->partials, pstart, plen);
  const int no = chunk_cut(s, s->owns, ostart, olen);
  const int ol = s->one_lane ? 0 : 1;
  for (int i = 0; i < np; i++) {
    gemm(bb, set, 0, pstart[i], plen[i], 0);
    if (s->mode != 'f') {
      link_move(bb, bb->lane[0], bb->done[i], plen[i]);
      link_arrived(bb, s, i);
    }
  }
  for (int j = 0; j < no; j++) {
    if (s->mode != 'f') {
      int last = 0;
      while (last + 1 < np && pstart[last + 1] < ostart[j] + olen[j])
        last++;
      await_arrival(bb, s, last, first, ol);
    }
    gemm(bb, set, ol, M / 2 + ostart[j], olen[j], 1);
    if (s->kind == 'a' && s->mode != 'f')
      link_move(bb, bb->lane[ol], bb->reduced[j], olen[j]);
  }
  CHECK(cudaEventRecord(bb->join, bb->lane[1]));
  CHECK(cudaStreamWaitEvent(bb->lane[0], bb->join, 0));
  CHECK(cudaEventRecord(bb->join, bb->link));
  CHECK(cudaStreamWaitEvent(bb->lane[0], bb->join, 0));
  CHECK(cudaEventRecord(bb->join, bb->watch));
  CHECK(cudaStreamWaitEvent(bb->lane[0], bb->join, 0));
}

static int by_value(const void *a, const void *b) {
  float x = *(const float *)a, y = *(const float *)b;
  return (x > y) - (x < y);
}

/* One sample of each schedule per round, so that a drift of the clocks over
 * the run (run 89's first version timed each schedule's samples back to back:
 * its last `full` read 16-17% above its first) falls on all of them alike. */
static void median_us(bench_t *bb, const schedule_t *sched, int count, int iters, float *out) {
  float *ms = malloc(sizeof(float) * (size_t)iters * (size_t)count);
  cudaEvent_t t0, t1;
  CHECK(cudaEventCreate(&t0));
  CHECK(cudaEventCreate(&t1));
  for (int i = -5; i < iters; i++)
    for (int k = 0; k < count; k++) {
      CHECK(cudaEventRecord(t0, bb->lane[0]));
      issue(bb, (i + 5 + k) % SETS, &sched[k]);
      CHECK(cudaEventRecord(t1, bb->lane[0]));
      CHECK(cudaEventSynchronize(t1));
      if (i >= 0)
        CHECK(cudaEventElapsedTime(&ms[k * iters + i], t0, t1));
    }
  for (int k = 0; k < count; k++) {
    qsort(ms + k * iters, (size_t)iters, sizeof(float), by_value);
    out[k] = 1000.0f * ms[k * iters + iters / 2];
  }
  free(ms);
  CHECK(cudaEventDestroy(t0));
  CHECK(cudaEventDestroy(t1));
}

static void *driver_entry(const char *name) {
  void *fn = NULL;
  enum cudaDriverEntryPointQueryResult q;
  CHECK(cudaGetDriverEntryPointByVersion(name, &fn, 12000, cudaEnableDefault, &q));
  if (q != cudaDriverEntryPointSuccess || fn == NULL) {
    fprintf(stderr, "chunk_bench: no %s\n", name);
    exit(1);
  }
  return fn;
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
  double gbs = argc > 2 ? atof(argv[2]) : 300.0;
  int prio = argc > 3 ? atoi(argv[3]) : 1; /* 0: both lanes at the default priority (run 92) */
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices < 1) {
    printf("chunk_bench: no GPU, skipped\n");
    return 77;
  }
  if (iters < 1)
    iters = 30;
  if (!(gbs > 0.0))
    gbs = 300.0;
  /* run 71 timed the rows marked * on 2 H200s (FP8 RS op(B) T, bf16 AR), run 81 those
   * marked +: the model is read against them (runs 92-93). The explicit cuts keep E4M3's
   * chunk GEMMs near whole waves (1024 rows: 256 tiles of 128 x 256 on 132 SMs, 1152
   * rows: 288, 2.2 waves) */
  const schedule_t schedules[] = {
      {"full", 'f', 0, 0, 1, 'f', NULL, 0},
      {"rs c4 free", 'r', 4, 4, 1, 'f', NULL, 0},
      {"rs c4 val *", 'r', 4, 4, 1, 'v', NULL, 0},
      {"rs 1536,1536,1024", 'r', 0, 0, 1, 'v', "1536,1536,1024", 0},
      {"rs c4 1lane", 'r', 4, 4, 1, 'v', NULL, 1},
      {"rs c3 1lane", 'r', 3, 3, 1, 'v', NULL, 1},
      {"rs c2 1lane", 'r', 2, 2, 1, 'v', NULL, 1},
      {"rs 1536,1536,1024 1l", 'r', 0, 0, 1, 'v', "1536,1536,1024", 1},
      {"rs 1024,1536,1536 1l", 'r', 0, 0, 1, 'v', "1024,1536,1536", 1},
      {"rs 2048,1024,1024 1l", 'r', 0, 0, 1, 'v', "2048,1024,1024", 1},
      {"rs 1536,1024,1024,512 1l", 'r', 0, 0, 1, 'v', "1536,1024,1024,512", 1},
      {"ar c4 t2 val *+", 'a', 4, 4, 2, 'v', NULL, 0},
      {"ar c4 t2 1lane", 'a', 4, 4, 2, 'v', NULL, 1},
      {"ar c3 t2 1lane", 'a', 3, 3, 2, 'v', NULL, 1},
      {"ar 1536,1536,768,256 1l", 'a', 0, 0, 1, 'v', "1536,1536,768,256", 1},
      {"ar 1024,1024,1536,512 1l", 'a', 0, 0, 1, 'v', "1024,1024,1536,512", 1},
  };
  enum { COUNT = sizeof schedules / sizeof schedules[0] };
  printf("# chunk_bench: D (%d x %d, bf16) = A (%d x %d) B^T, partial rows beta 0, own rows "
         "beta 1 with C; link %.0f GB/s; lane 0 priority %s; median of %d rounds after 5, CUDA events\n",
         M, N, M, K, gbs, prio ? "highest" : "default", iters);
  printf("# %-5s %-26s %10s %8s\n", "dtype", "schedule", "time_us", "vs_full");
  uint64_t seed = 1234;
  for (int fp8 = 1; fp8 >= 0; fp8--) {
    bench_t bb;
    memset(&bb, 0, sizeof bb);
    bb.fp8 = fp8;
    bb.gbs = gbs;
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
    int least = 0, greatest = 0; /* lane 0 at the highest priority, as tpla's transport has it */
    CHECK(cudaDeviceGetStreamPriorityRange(&least, &greatest));
    for (int l = 0; l < LANES; l++) {
      CHECK(cudaMalloc(&bb.ws[l], WS_BYTES));
      CHECK(cudaStreamCreateWithPriority(&bb.lane[l], cudaStreamNonBlocking,
                                         l == 0 && prio ? greatest : least));
    }
    CHECK(cudaEventCreateWithFlags(&bb.fork, cudaEventDisableTiming));
    CHECK(cudaEventCreateWithFlags(&bb.join, cudaEventDisableTiming));
    CHECK(cudaStreamCreateWithFlags(&bb.link, cudaStreamNonBlocking));
    CHECK(cudaStreamCreateWithFlags(&bb.watch, cudaStreamNonBlocking));
    for (int i = 0; i < MAX_CHUNKS; i++) {
      CHECK(cudaEventCreateWithFlags(&bb.done[i], cudaEventDisableTiming));
      CHECK(cudaEventCreateWithFlags(&bb.arrived[i], cudaEventDisableTiming));
      CHECK(cudaEventCreateWithFlags(&bb.reduced[i], cudaEventDisableTiming));
    }
    CHECK(cudaMalloc((void **)&bb.flag, sizeof *bb.flag));
    CHECK(cudaMemset(bb.flag, 0, sizeof *bb.flag));
    bb.write_value = (value_op_fn)driver_entry("cuStreamWriteValue32");
    bb.wait_value = (value_op_fn)driver_entry("cuStreamWaitValue32");
    LT(cublasLtCreate(&bb.lt));
    float us[COUNT];
    median_us(&bb, schedules, COUNT, iters, us);
    for (int k = 0; k < COUNT; k++)
      printf("  %-5s %-26s %10.1f %8.3f\n", fp8 ? "e4m3" : "bf16", schedules[k].name, us[k],
             us[k] / us[0]);
    fflush(stdout);
    CHECK(cudaDeviceSynchronize());
    plans_release(fp8);
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
    cudaStreamDestroy(bb.link);
    cudaStreamDestroy(bb.watch);
    for (int i = 0; i < MAX_CHUNKS; i++) {
      cudaEventDestroy(bb.done[i]);
      cudaEventDestroy(bb.arrived[i]);
      cudaEventDestroy(bb.reduced[i]);
    }
    cudaFree(bb.flag);
  }
  printf("chunk_bench: done\n");
  return 0;
}
