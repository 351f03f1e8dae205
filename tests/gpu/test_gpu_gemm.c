/*
 * test_gpu_gemm.c - tpla_gemm on cuBLASLt against a float64 host reference:
 * every input dtype x output dtype x op_a x op_b (and TF32), odd shapes
 * (1, 17, 130, 1000+), leading dimensions larger than the row, misaligned
 * pointers, beta = 0 into a NaN-poisoned D, beta = 1 accumulation, k = 0;
 * then the plan cache (a repeated shape is a hit), a 1000-call loop that
 * must not grow memory, two streams sharing the workspace, the scratch
 * workspace, features and device checks.
 *
 * Run: build-gpu/tests/test_gpu_gemm (exits 77 without a GPU). A one-rank
 * NCCL communicator on device 0 provides the context.
 */
#include "test.h"
#include "tpla.h"

#ifdef TPLA_HAVE_CUDA
#include "../../src/cuda/lt_gemm.h"
#include "gpu_util.h"

static struct ncclComm *g_comm;
static tpla_ctx_t g_ctx;
static cudaStream_t g_stream;
static uint64_t g_seed;

/* ---- one GEMM case against the reference ------------------------------------ */

typedef struct {
  int64_t m, n, k;
  tpla_dtype_t in, out;
  tpla_op_t op_a, op_b;
  int pad_a, pad_b, pad_d; /* ld = cols + pad */
  int off_a, off_b, off_d; /* data pointer offset in elements (alignment) */
  float alpha, beta;
  int tf32;
  int poison; /* D starts as NaN (only with beta == 0) */
} gemm_case_t;

static void describe_case(char *buf, size_t size, const gemm_case_t *c) {
  snprintf(buf, size,
           "m=%" PRId64 " n=%" PRId64 " k=%" PRId64 " %s->%s op_a=%c op_b=%c pads %d/%d/%d "
           "offsets %d/%d/%d alpha %g beta %g%s%s",
           c->m, c->n, c->k, tpla_dtype_name(c->in), tpla_dtype_name(c->out),
           c->op_a ? 'T' : 'N', c->op_b ? 'T' : 'N', c->pad_a, c->pad_b, c->pad_d, c->off_a,
           c->off_b, c->off_d, (double)c->alpha, (double)c->beta, c->tf32 ? " tf32" : "",
           c->poison ? " NaN-poisoned D" : "");
}

/* A device matrix with its host twin: `bytes` covers offset + rows*ld. */
typedef struct {
  tpla_matrix_t view; /* device view */
  void *dev_base;     /* allocation start */
  unsigned char *host; /* packed host copy of the whole allocation */
  double *vals;       /* view values as doubles (rounded to dtype) */
  size_t bytes, offset_bytes;
} buf_t;

static int buf_make(buf_t *b, int64_t rows, int64_t cols, int pad, int off, tpla_dtype_t dt,
                    gpu_rng_t *rng, double padding_value, int nan_fill) {
  memset(b, 0, sizeof *b);
  int64_t ld = (cols > 1 ? cols : 1) + pad;
  size_t es = tpla_dtype_size(dt), n = (size_t)(rows * ld);
  b->offset_bytes = (size_t)off * es;
  b->bytes = b->offset_bytes + n * es + es;
  b->host = malloc(b->bytes);
  b->vals = malloc((n + 1) * sizeof(double));
  if (!b->host || !b->vals || CUDA_FAILED(cudaMalloc(&b->dev_base, b->bytes)))
    return 1;
  memset(b->host, 0xFF, b->bytes); /* all-ones: NaN in every float dtype */
  void *elems = b->host + b->offset_bytes;
  if (!nan_fill)
    for (int64_t i = 0; i < rows; i++)
      for (int64_t j = 0; j < ld; j++) {
        double v = j < cols ? gpu_rng_uniform(rng) : padding_value;
        tpla_store_elem(elems, dt, (size_t)(i * ld + j), v);
      }
  unpack(b->vals, elems, dt, n);
  b->view = (tpla_matrix_t){(char *)b->dev_base + b->offset_bytes, rows, cols, ld, dt};
  return CUDA_FAILED(gpu_upload(b->dev_base, b->host, b->bytes));
}

static void buf_free(buf_t *b) {
  cudaFree(b->dev_base);
  free(b->host);
  free(b->vals);
}

/* Runs one case; 0 if every element is within its error bound, the padding
 * of D is untouched and nothing is NaN. */
static int run_case(const gemm_case_t *c, gpu_rng_t *rng) {
  char what[300];
  describe_case(what, sizeof what, c);
  int64_t ar = c->op_a == TPLA_OP_N ? c->m : c->k, ac = c->op_a == TPLA_OP_N ? c->k : c->m;
  int64_t br = c->op_b == TPLA_OP_N ? c->k : c->n, bc = c->op_b == TPLA_OP_N ? c->n : c->k;
  buf_t a, b, d;
  int failed = buf_make(&a, ar, ac, c->pad_a, c->off_a, c->in, rng, 777.0, 0);
  failed += buf_make(&b, br, bc, c->pad_b, c->off_b, c->in, rng, -555.0, 0);
  failed += buf_make(&d, c->m, c->n, c->pad_d, c->off_d, c->out, rng, 333.0, c->poison);
  tpla_gemm_args_t args = TPLA_GEMM_ARGS_INIT;
  args.alpha = c->alpha;
  args.beta = c->beta;
  args.allow_tf32 = c->tf32;
  if (!failed)
    failed += TPLA_FAILED(tpla_gemm(g_ctx, d.view, a.view, c->op_a, b.view, c->op_b, &args,
                                    g_stream));
  unsigned char *got = malloc(d.bytes);
  double *ref = malloc(sizeof(double) * (size_t)(c->m * c->n + 1));
  double *absr = malloc(sizeof(double) * (size_t)(c->m * c->n + 1));
  if (!got || !ref || !absr)
    failed++;
  if (!failed)
    failed += CUDA_FAILED(cudaStreamSynchronize(g_stream)) ||
              CUDA_FAILED(cudaMemcpy(got, d.dev_base, d.bytes, cudaMemcpyDeviceToHost));
  if (!failed) {
    gemm_ref_f64(ref, absr, c->n, c->m, c->n, c->k, a.vals, a.view.ld, c->op_a, b.vals,
                 b.view.ld, c->op_b);
    double u_out = unit_roundoff(c->out);
    /* TF32 keeps 10 mantissa bits of each input: 2^-10 relative if it
     * truncates, so 2^-9 for a product */
    double u_in = c->tf32 ? 1.0 / 512 : 0.0;
    double u_acc = (double)c->k / 8388608.0;  /* k * 2^-23: fp32 accumulation */
    double tiny = c->out == TPLA_FLOAT16 ? 1.0 / 16777216 : 1e-37; /* fp16 subnormals */
    int bad = 0;
    const void *gv = got + d.offset_bytes;
    for (int64_t i = 0; i < c->m; i++)
      for (int64_t j = 0; j < d.view.ld; j++) {
        size_t e = (size_t)(i * d.view.ld + j);
        if (j >= c->n) { /* padding must be left exactly as it was */
          size_t es = tpla_dtype_size(c->out);
          if (memcmp((const char *)gv + e * es, d.host + d.offset_bytes + e * es, es) != 0 &&
              bad++ < 3)
            fprintf(stderr, "  %s: D padding (%" PRId64 ",%" PRId64 ") was written\n", what, i,
                    j);
          continue;
        }
        double d0 = c->poison ? 0.0 : d.vals[e];
        double want = (double)c->alpha * ref[i * c->n + j] + (double)c->beta * d0;
        double tol = fabs((double)c->alpha) * absr[i * c->n + j] * (u_out + u_in + u_acc) +
                     fabs((double)c->beta * d0) * (u_out + 1.0 / 8388608) + tiny;
        double have = tpla_load_elem(gv, c->out, e);
        if (!(fabs(have - want) <= tol) && bad++ < 3)
          fprintf(stderr, "  %s: D(%" PRId64 ",%" PRId64 ") = %.9g, want %.9g (tol %.3g)\n",
                  what, i, j, have, want, tol);
      }
    if (bad)
      fprintf(stderr, "  %s: %d bad elements\n", what, bad);
    failed += bad != 0;
  }
  free(got);
  free(ref);
  free(absr);
  buf_free(&a);
  buf_free(&b);
  buf_free(&d);
  return failed;
}

/* ---- tests ----------------------------------------------------------------------------- */

static void test_gemm_matches_f64_reference(void) {
  static const int64_t shapes[][3] = {{1, 1, 1},     {17, 130, 1},  {130, 17, 1031},
                                      {1000, 33, 130}, {1, 1001, 17}, {33, 1, 257}};
  static const struct {
    tpla_dtype_t in, out;
    int tf32;
  } types[] = {{TPLA_FLOAT32, TPLA_FLOAT32, 0}, {TPLA_FLOAT32, TPLA_FLOAT32, 1},
               {TPLA_FLOAT16, TPLA_FLOAT16, 0}, {TPLA_FLOAT16, TPLA_FLOAT32, 0},
               {TPLA_BFLOAT16, TPLA_BFLOAT16, 0}, {TPLA_BFLOAT16, TPLA_FLOAT32, 0}};
  static const int pads[] = {0, 3, 8};
  gpu_rng_t rng;
  gpu_rng_seed(&rng, g_seed);
  int cases = 0, failures = 0;
  for (size_t t = 0; t < sizeof types / sizeof types[0]; t++)
    for (int op_a = 0; op_a < 2; op_a++)
      for (int op_b = 0; op_b < 2; op_b++)
        for (int s = 0; s < (int)(sizeof shapes / sizeof shapes[0]); s++) {
          gemm_case_t c = {shapes[s][0], shapes[s][1], shapes[s][2], types[t].in, types[t].out,
                           (tpla_op_t)op_a, (tpla_op_t)op_b, pads[s % 3], pads[(s + 1) % 3],
                           pads[(s + op_a + op_b) % 3], s % 3 == 2, s % 3 == 1,
                           (s + op_a) % 4 == 3, 1.0f, 0.0f, types[t].tf32, 1};
          failures += run_case(&c, &rng);
          cases++;
          if (types[t].out == TPLA_FLOAT32) { /* accumulate into an fp32 main grad */
            c.beta = 1.0f;
            c.poison = 0;
            failures += run_case(&c, &rng);
            cases++;
          }
        }
  printf("# %d GEMM cases, %d failed\n", cases, failures);
  ASSERT_EQ_INT(failures, 0);
}

/* One operand 2 bytes off 16-byte alignment, the other and every ld aligned: the
 * heuristic must be told which one (cuBLASLt's A is our B: the row-major swap). */
static void test_gemm_one_operand_misaligned(void) {
  gpu_rng_t rng;
  gpu_rng_seed(&rng, g_seed + 6);
  int failures = 0;
  for (int which = 0; which < 2; which++)
    for (int op_a = 0; op_a < 2; op_a++)
      for (int op_b = 0; op_b < 2; op_b++) {
        gemm_case_t c = {256, 192, 320, TPLA_BFLOAT16, TPLA_BFLOAT16, (tpla_op_t)op_a,
                         (tpla_op_t)op_b, 0, 0, 0, which == 0, which == 1, 0, 1.0f, 0.0f, 0, 1};
        failures += run_case(&c, &rng);
      }
  ASSERT_EQ_INT(failures, 0);
}

static void test_gemm_alpha_beta_half_output(void) {
  gpu_rng_t rng;
  gpu_rng_seed(&rng, g_seed + 1);
  int failures = 0;
  for (int t = 0; t < 2; t++) {
    tpla_dtype_t dt = t ? TPLA_BFLOAT16 : TPLA_FLOAT16;
    gemm_case_t c = {131, 67, 45, dt, dt, TPLA_OP_T, TPLA_OP_N, 1, 0, 5, 0, 1, 1,
                     0.5f, -0.25f, 0, 0};
    failures += run_case(&c, &rng);
  }
  ASSERT_EQ_INT(failures, 0);
}

static void test_gemm_k_zero(void) {
  gpu_rng_t rng;
  gpu_rng_seed(&rng, g_seed + 2);
  gemm_case_t scale = {19, 23, 0, TPLA_BFLOAT16, TPLA_FLOAT32, TPLA_OP_N, TPLA_OP_N, 0, 0, 2,
                       0, 0, 0, 1.0f, 0.5f, 0, 0};
  ASSERT_EQ_INT(run_case(&scale, &rng), 0);
  gemm_case_t zero = {19, 23, 0, TPLA_FLOAT16, TPLA_FLOAT16, TPLA_OP_T, TPLA_OP_N, 0, 0, 3,
                      0, 0, 1, 1.0f, 0.0f, 0, 1};
  ASSERT_EQ_INT(run_case(&zero, &rng), 0); /* NaN-poisoned D becomes exact zeros */
  /* more columns and rows than one block walks: every block scales its own part once */
  gemm_case_t wide = {300, 700, 0, TPLA_BFLOAT16, TPLA_FLOAT32, TPLA_OP_N, TPLA_OP_N, 0, 0, 2,
                      0, 0, 0, 1.0f, 0.5f, 0, 0};
  ASSERT_EQ_INT(run_case(&wide, &rng), 0);
}

/* Device buffers for the cache and loop tests: bf16 A (m x k), B (k x n),
 * fp32 D (m x n), contents irrelevant. */
typedef struct {
  void *a, *b, *d;
} trio_t;
static int trio_alloc(trio_t *t, int64_t m, int64_t n, int64_t k) {
  memset(t, 0, sizeof *t);
  return CUDA_FAILED(cudaMalloc(&t->a, (size_t)(m * k + 8) * 2)) ||
         CUDA_FAILED(cudaMalloc(&t->b, (size_t)(k * n + 8) * 2)) ||
         CUDA_FAILED(cudaMalloc(&t->d, (size_t)(m * n + 8) * 4)) ||
         CUDA_FAILED(gpu_fill(t->a, 0, (size_t)(m * k + 8) * 2)) ||
         CUDA_FAILED(gpu_fill(t->b, 0, (size_t)(k * n + 8) * 2));
}
static void trio_free(trio_t *t) {
  cudaFree(t->a);
  cudaFree(t->b);
  cudaFree(t->d);
}
static tpla_status_t trio_gemm(trio_t *t, int64_t m, int64_t n, int64_t k, int shift,
                               const tpla_gemm_args_t *args, cudaStream_t stream) {
  tpla_matrix_t a = {(char *)t->a + 2 * shift, m, k, k, TPLA_BFLOAT16};
  tpla_matrix_t b = {t->b, k, n, n, TPLA_BFLOAT16};
  tpla_matrix_t d = {t->d, m, n, n, TPLA_FLOAT32};
  return tpla_gemm(g_ctx, d, a, TPLA_OP_N, b, TPLA_OP_N, args, stream);
}

static void test_gemm_cache_hits(void) {
  /* a shape no other test uses; A's rows 16-byte aligned (k = 40), so a 2-byte shift
   * of its pointer changes the alignment the plan is keyed with */
  const int64_t m = 77, n = 55, k = 40;
  trio_t t;
  ASSERT_EQ_INT(trio_alloc(&t, m, n, k), 0);
  tpla_lt_cache_stats_t s0, s1, s2, s3;
  ASSERT_OK(tpla_cuda_gemm_cache_stats(g_ctx, &s0));
  ASSERT_OK(trio_gemm(&t, m, n, k, 0, NULL, g_stream));
  ASSERT_OK(tpla_cuda_gemm_cache_stats(g_ctx, &s1));
  ASSERT_EQ_INT(s1.misses, s0.misses + 1);
  ASSERT_EQ_INT(s1.hits, s0.hits);
  ASSERT_OK(trio_gemm(&t, m, n, k, 0, NULL, g_stream)); /* same shape: a hit */
  ASSERT_OK(tpla_cuda_gemm_cache_stats(g_ctx, &s2));
  ASSERT_EQ_INT(s2.misses, s1.misses);
  ASSERT_EQ_INT(s2.hits, s1.hits + 1);
  ASSERT_EQ_INT(s2.entries, s1.entries);
  ASSERT_OK(trio_gemm(&t, m, n, k, 1, NULL, g_stream)); /* A only 2-byte aligned: new plan */
  tpla_gemm_args_t beta1 = TPLA_GEMM_ARGS_INIT;
  beta1.beta = 1.0f;
  ASSERT_OK(trio_gemm(&t, m, n, k, 0, &beta1, g_stream)); /* beta != 0: new plan */
  ASSERT_OK(tpla_cuda_gemm_cache_stats(g_ctx, &s3));
  ASSERT_EQ_INT(s3.misses, s2.misses + 2);
  ASSERT_EQ_INT(s3.entries, s2.entries + 2);
  ASSERT_EQ_INT(cudaStreamSynchronize(g_stream), cudaSuccess);
  trio_free(&t);
}

/* More distinct shapes than the cache holds: it flushes instead of
 * growing, and GEMMs stay right across the flush. */
static void test_gemm_cache_is_bounded(void) {
  const int64_t n = 8, k = 8, shapes = TPLA_LT_CACHE_MAX_ENTRIES + 20;
  trio_t t;
  ASSERT_EQ_INT(trio_alloc(&t, shapes, n, k), 0);
  tpla_lt_cache_stats_t s0, s1;
  ASSERT_OK(tpla_cuda_gemm_cache_stats(g_ctx, &s0));
  for (int64_t m = 1; m <= shapes; m++)
    ASSERT_OK(trio_gemm(&t, m, n, k, 0, NULL, g_stream));
  ASSERT_OK(tpla_cuda_gemm_cache_stats(g_ctx, &s1));
  ASSERT_TRUE(s1.flushes >= s0.flushes + 1);
  ASSERT_TRUE(s1.entries <= TPLA_LT_CACHE_MAX_ENTRIES);
  ASSERT_EQ_INT(cudaStreamSynchronize(g_stream), cudaSuccess);
  trio_free(&t);
  gpu_rng_t rng;
  gpu_rng_seed(&rng, g_seed + 5);
  gemm_case_t c = {33, 17, 130, TPLA_BFLOAT16, TPLA_BFLOAT16, TPLA_OP_T, TPLA_OP_T, 1, 2, 3,
                   0, 0, 0, 1.0f, 0.0f, 0, 1};
  ASSERT_EQ_INT(run_case(&c, &rng), 0);
}

static void test_gemm_loop_no_growth(void) {
  const int64_t m = 256, n = 192, k = 320;
  trio_t t;
  ASSERT_EQ_INT(trio_alloc(&t, m, n, k), 0);
  ASSERT_OK(trio_gemm(&t, m, n, k, 0, NULL, g_stream)); /* warm: plan + lazy module load */
  ASSERT_EQ_INT(cudaStreamSynchronize(g_stream), cudaSuccess);
  size_t ws0 = 0, ws1 = 0;
  tpla_lt_cache_stats_t s0, s1;
  gpu_steady_t g = {0}; /* no device allocation per call */
  while (gpu_steady_more(&g)) {
    ASSERT_OK(tpla_ctx_workspace_bytes(g_ctx, &ws0));
    ASSERT_OK(tpla_cuda_gemm_cache_stats(g_ctx, &s0));
    ASSERT_EQ_INT(gpu_steady_begin(&g), 0);
    for (int i = 0; i < 1000; i++)
      ASSERT_OK(trio_gemm(&t, m, n, k, 0, NULL, g_stream));
    ASSERT_EQ_INT(cudaStreamSynchronize(g_stream), cudaSuccess);
    ASSERT_EQ_INT(gpu_steady_end(&g, 0), 0);
    ASSERT_OK(tpla_ctx_workspace_bytes(g_ctx, &ws1));
    ASSERT_OK(tpla_cuda_gemm_cache_stats(g_ctx, &s1));
    ASSERT_EQ_INT(ws1, ws0);
    ASSERT_EQ_INT(s1.misses, s0.misses);
    ASSERT_EQ_INT(s1.hits, s0.hits + 1000);
    ASSERT_EQ_INT(s1.entries, s0.entries);
  }
  ASSERT_TRUE(gpu_steady_ok(&g, 0));
  trio_free(&t);
}

/* Two streams, one workspace: big GEMMs (which may use split-K workspace)
 * alternating streams must both be right. */
static void test_gemm_two_streams(void) {
  cudaStream_t other;
  ASSERT_EQ_INT(cudaStreamCreateWithFlags(&other, cudaStreamNonBlocking), cudaSuccess);
  gpu_rng_t rng;
  gpu_rng_seed(&rng, g_seed + 3);
  cudaStream_t saved = g_stream;
  int failures = 0;
  for (int i = 0; i < 4; i++) {
    g_stream = i % 2 ? other : saved;
    gemm_case_t c = {64, 48, 4099, TPLA_BFLOAT16, TPLA_FLOAT32, TPLA_OP_N, TPLA_OP_T, 0, 0, 0,
                     0, 0, 0, 1.0f, 0.0f, 0, 1};
    failures += run_case(&c, &rng);
  }
  g_stream = saved;
  cudaStreamDestroy(other);
  ASSERT_EQ_INT(failures, 0);
}

/* The context's device is made current for the call and restored after. */
static void test_gemm_other_device_current(void) {
  REQUIRE_GPUS(2, gpu_count());
  gpu_rng_t rng;
  gpu_rng_seed(&rng, g_seed + 4);
  gemm_case_t c = {40, 30, 20, TPLA_FLOAT32, TPLA_FLOAT32, TPLA_OP_N, TPLA_OP_N, 0, 0, 0,
                   0, 0, 0, 1.0f, 0.0f, 0, 1};
  buf_t a, b, d;
  ASSERT_EQ_INT(buf_make(&a, 40, 20, 0, 0, TPLA_FLOAT32, &rng, 0, 0), 0);
  ASSERT_EQ_INT(buf_make(&b, 20, 30, 0, 0, TPLA_FLOAT32, &rng, 0, 0), 0);
  ASSERT_EQ_INT(buf_make(&d, 40, 30, 0, 0, TPLA_FLOAT32, &rng, 0, 1), 0);
  ASSERT_EQ_INT(cudaSetDevice(1), cudaSuccess);
  tpla_status_t s = tpla_gemm(g_ctx, d.view, a.view, TPLA_OP_N, b.view, TPLA_OP_N, NULL,
                              g_stream);
  int current = -1;
  cudaGetDevice(&current);
  cudaSetDevice(0);
  ASSERT_OK(s);
  ASSERT_EQ_INT(current, 1);
  ASSERT_EQ_INT(cudaStreamSynchronize(g_stream), cudaSuccess);
  buf_free(&a);
  buf_free(&b);
  buf_free(&d);
  ASSERT_EQ_INT(run_case(&c, &rng), 0); /* and the device-0 path still works */
}

static void test_scratch_workspace_grows_only(void) {
  size_t base = 0, bytes = 0;
  ASSERT_OK(tpla_ctx_workspace_bytes(g_ctx, &base));
  void *p1 = NULL, *p2 = NULL, *p3 = NULL;
  ASSERT_OK(tpla_cuda_ctx_scratch(g_ctx, 1000, g_stream, &p1));
  ASSERT_TRUE(p1 != NULL);
  ASSERT_EQ_INT(cudaMemsetAsync(p1, 0x5A, 1000, g_stream), cudaSuccess);
  ASSERT_OK(tpla_ctx_workspace_bytes(g_ctx, &bytes));
  ASSERT_TRUE(bytes >= base + 1000);
  size_t grown = bytes;
  ASSERT_OK(tpla_cuda_ctx_scratch(g_ctx, 500, g_stream, &p2)); /* smaller: same buffer */
  ASSERT_TRUE(p2 == p1);
  ASSERT_OK(tpla_ctx_workspace_bytes(g_ctx, &bytes));
  ASSERT_EQ_INT(bytes, grown);
  size_t big = (grown - base) + 3 * 1024 * 1024;
  ASSERT_OK(tpla_cuda_ctx_scratch(g_ctx, big, g_stream, &p3)); /* larger: grows */
  ASSERT_EQ_INT(cudaMemsetAsync(p3, 0, big, g_stream), cudaSuccess);
  ASSERT_OK(tpla_ctx_workspace_bytes(g_ctx, &bytes));
  ASSERT_TRUE(bytes >= base + big);
  ASSERT_EQ_INT(cudaStreamSynchronize(g_stream), cudaSuccess);
}

static void test_features_on_gpu(void) {
  tpla_features_t f = TPLA_FEATURES_INIT;
  ASSERT_OK(tpla_get_features(&f, -1));
  ASSERT_EQ_INT(f.cuda_executor, 1);
  ASSERT_EQ_INT(f.device, -1);
  ASSERT_EQ_INT(f.device_count, gpu_count());
  ASSERT_TRUE(f.nccl_version > 0 && f.cuda_runtime_version > 0 && f.cublaslt_version > 0);
  ASSERT_TRUE(f.cuda_driver_version > 0);
  ASSERT_OK(tpla_get_features(&f, 0));
  int major = 0, minor = 0;
  cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, 0);
  cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, 0);
  ASSERT_EQ_INT(f.device, 0);
  ASSERT_EQ_INT(f.compute_capability, major * 10 + minor);
  ASSERT_TRUE(f.sm_count > 0);
  ASSERT_EQ_INT(f.fp8, f.compute_capability >= 89);
  ASSERT_EQ_INT(f.mxfp8, 0); /* tpla does not implement block scaling */
  ASSERT_TRUE(f.device_name[0] != '\0');
  printf("# device 0: %s, cc %d, %d SMs, runtime %d, driver %d, NCCL %d, cuBLASLt %zu\n",
         f.device_name, f.compute_capability, f.sm_count, f.cuda_runtime_version,
         f.cuda_driver_version, f.nccl_version, f.cublaslt_version);
  tpla_features_t untouched = TPLA_FEATURES_INIT;
  ASSERT_STATUS(tpla_get_features(&untouched, f.device_count), TPLA_ERROR_INVALID_ARGUMENT);
  ASSERT_EQ_INT(untouched.device_count, 0);
  int can = -1;
  ASSERT_OK(tpla_device_peer_access(&can, 0, 0));
  ASSERT_EQ_INT(can, 0);
  if (f.device_count >= 2) {
    ASSERT_OK(tpla_device_peer_access(&can, 0, 1));
    printf("# peer access 0 -> 1: %d\n", can);
  }
}

static void test_ctx_info(void) {
  int rank = -1, nranks = -1, device = -2;
  tpla_executor_t ex = TPLA_EXECUTOR_HOST;
  ASSERT_OK(tpla_ctx_get_info(g_ctx, &rank, &nranks, &ex, &device));
  ASSERT_EQ_INT(rank, 0);
  ASSERT_EQ_INT(nranks, 1);
  ASSERT_EQ_INT(ex, TPLA_EXECUTOR_CUDA);
  ASSERT_EQ_INT(device, 0);
}

/* Bad arguments are rejected before any NCCL call and leave *comm alone. */
static void test_comm_create_bad_args(void) {
  tpla_unique_id_t id;
  ASSERT_OK(tpla_nccl_get_unique_id(&id));
  struct ncclComm *comm = (struct ncclComm *)&id; /* a sentinel, never dereferenced */
  ASSERT_STATUS(tpla_nccl_comm_create(&comm, &id, 2, 2, 0, NULL), TPLA_ERROR_INVALID_ARGUMENT);
  ASSERT_CONTAINS(tpla_last_error(), "rank");
  ASSERT_STATUS(tpla_nccl_comm_create(&comm, &id, 1, 0, gpu_count(), NULL),
                TPLA_ERROR_INVALID_ARGUMENT);
  ASSERT_CONTAINS(tpla_last_error(), "device");
  ASSERT_STATUS(tpla_nccl_comm_create(&comm, NULL, 1, 0, 0, NULL), TPLA_ERROR_INVALID_ARGUMENT);
  ASSERT_TRUE(comm == (struct ncclComm *)&id);
  tpla_ctx_t ctx = (tpla_ctx_t)&id;
  ASSERT_STATUS(tpla_ctx_create_nccl(&ctx, NULL, NULL), TPLA_ERROR_INVALID_ARGUMENT);
  tpla_config_t bad = TPLA_CONFIG_INIT;
  bad.size = 3;
  ASSERT_STATUS(tpla_ctx_create_nccl(&ctx, g_comm, &bad), TPLA_ERROR_INVALID_ARGUMENT);
  ASSERT_TRUE(ctx == (tpla_ctx_t)&id);
}

/* A workspace no GPU has: OUT_OF_MEMORY naming it, nothing written, and
 * the communicator still serves a second context. */
static void test_ctx_create_out_of_memory(void) {
  tpla_config_t cfg = TPLA_CONFIG_INIT;
  cfg.gemm_workspace_bytes = (size_t)1 << 50;
  tpla_ctx_t ctx = (tpla_ctx_t)&cfg;
  ASSERT_STATUS(tpla_ctx_create_nccl(&ctx, g_comm, &cfg), TPLA_ERROR_OUT_OF_MEMORY);
  ASSERT_CONTAINS(tpla_last_error(), "GEMM workspace");
  ASSERT_TRUE(ctx == (tpla_ctx_t)&cfg);
  cfg.gemm_workspace_bytes = 1 << 20;
  ctx = NULL;
  ASSERT_OK(tpla_ctx_create_nccl(&ctx, g_comm, &cfg));
  size_t bytes = 0;
  ASSERT_OK(tpla_ctx_workspace_bytes(ctx, &bytes));
  ASSERT_TRUE(bytes >= (size_t)1 << 20 && bytes < (size_t)2 << 20);
  ASSERT_OK(tpla_ctx_destroy(ctx));
}

/* tpla_ctx_create_nccl must be called on the communicator's device. */
static void test_ctx_create_wrong_device(void) {
  REQUIRE_GPUS(2, gpu_count());
  tpla_ctx_t ctx = NULL;
  ASSERT_EQ_INT(cudaSetDevice(1), cudaSuccess);
  tpla_status_t s = tpla_ctx_create_nccl(&ctx, g_comm, NULL);
  cudaSetDevice(0);
  ASSERT_STATUS(s, TPLA_ERROR_INVALID_USAGE);
  ASSERT_CONTAINS(tpla_last_error(), "cudaSetDevice(0)");
  ASSERT_TRUE(ctx == NULL);
}

int main(void) {
  GPU_TEST_MAIN_SKIP_WITHOUT(gpu_count());
  watchdog_arm("test_gpu_gemm", 800);
  g_seed = gpu_fresh_seed("test_gpu_gemm");
  if (CUDA_FAILED(cudaSetDevice(0)) ||
      CUDA_FAILED(cudaStreamCreateWithFlags(&g_stream, cudaStreamNonBlocking)) ||
      open_single_ctx(0, &g_comm, &g_ctx) != 0) {
    printf("FAIL setup (see above)\n0 passed, 1 failed\n");
    return 1;
  }
  TEST(test_features_on_gpu);
  TEST(test_ctx_info);
  TEST(test_comm_create_bad_args);
  TEST(test_ctx_create_wrong_device);
  TEST(test_ctx_create_out_of_memory);
  TEST(test_gemm_cache_hits); /* first: counts entries of a young cache */
  TEST(test_gemm_loop_no_growth);
  TEST(test_gemm_matches_f64_reference);
  TEST(test_gemm_alpha_beta_half_output);
  TEST(test_gemm_one_operand_misaligned);
  TEST(test_gemm_k_zero);
  TEST(test_gemm_cache_is_bounded);
  TEST(test_gemm_two_streams);
  TEST(test_gemm_other_device_current);
  TEST(test_scratch_workspace_grows_only);
  if (close_single_ctx(g_comm, g_ctx) != 0)
    test_failed_++;
  cudaStreamDestroy(g_stream);
  return test_summary();
}

#else /* a build without the CUDA executor */
TEST_MAIN_WITHOUT_CUDA()
#endif
