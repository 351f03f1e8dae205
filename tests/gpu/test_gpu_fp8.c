/*
 * test_gpu_fp8.c - FP8 tpla_gemm on cuBLASLt against a float64 host GEMM of
 * the dequantized inputs (fp8_cases.h): E4M3 x E4M3, E5M2 x E4M3 and E4M3 x
 * E5M2, all four op_a/op_b (the library stages every layout but A m x k, B
 * n x k), outputs bf16, fp16, fp32 and E4M3 (with a d_scale; compared after
 * decoding, one FP8 ulp allowed), E5M2 from an E5M2 input (from two E4M3
 * inputs refused), per-tensor scales, the amax, split and fast accumulation
 * (split at least as accurate), beta = 1 into fp32, m, n, k not multiples
 * of 16, odd leading dimensions and misaligned pointers, and two streams
 * sharing the staging scratch. test_gpu_fp8_edges.c has NULL and misaligned
 * scales, k = 0, saturation, infinity and NaN, and D rows more than 2 GiB
 * apart; test_gpu_fp8_kernels.c the plan cache, the memory loop and the
 * staging and amax kernels on their own.
 *
 * Run: build/tests/test_gpu_fp8 (exits 77 without a GPU; skips the FP8
 * GEMMs on a GPU without FP8 tensor cores).
 */
#include "test.h"
#include "tpla.h"

#ifdef TPLA_HAVE_CUDA
#include "fp8_cases.h"

/* Every input pair x op pair x output, aligned shapes: the TN cases run
 * directly, the others through the transposes. */
static void test_fp8_types_ops_outputs(void) {
  NEED_FP8();
  static const tpla_dtype_t pairs[][2] = {{E4M3, E4M3}, {E5M2, E4M3}, {E4M3, E5M2}};
  static const tpla_dtype_t outs[] = {TPLA_BFLOAT16, TPLA_FLOAT16, TPLA_FLOAT32, E4M3};
  gpu_rng_t rng;
  gpu_rng_seed(&rng, g_seed);
  int cases = 0, failures = 0;
  fp8_result_t r;
  for (int p = 0; p < 3; p++)
    for (int op = 0; op < 4; op++)
      for (int o = 0; o < 4; o++) {
        fp8_case_t c = {64, 48, 96, pairs[p][0], pairs[p][1], outs[o], (tpla_op_t)(op >> 1),
                        (tpla_op_t)(op & 1), 0, 16, 0, 0, 0, 0, 1.0f, 0.0f,
                        TPLA_FP8_ACCUM_SPLIT, 0.5f, 0.375f, 1, 1};
        failures += run_case(&c, &rng, &r, 0);
        cases++;
      }
  printf("# %d FP8 cases, %d failed\n", cases, failures);
  ASSERT_EQ_INT(failures, 0);
}

/* m, n, k off multiples of 16, odd leading dimensions, misaligned
 * pointers: staged, and D through the padded buffer. */
static void test_fp8_odd_shapes(void) {
  NEED_FP8();
  static const int64_t shapes[][3] = {{1, 1, 1}, {17, 33, 45}, {130, 17, 1031}, {33, 1, 257},
                                      {48, 32, 20}};
  static const tpla_dtype_t outs[] = {TPLA_BFLOAT16, TPLA_FLOAT32, E4M3};
  gpu_rng_t rng;
  gpu_rng_seed(&rng, g_seed + 1);
  int cases = 0, failures = 0;
  fp8_result_t r;
  for (int s = 0; s < 5; s++)
    for (int op = 0; op < 4; op++) {
      fp8_case_t c = {shapes[s][0], shapes[s][1], shapes[s][2], s % 2 ? E5M2 : E4M3, E4M3,
                      outs[(s + op) % 3], (tpla_op_t)(op >> 1), (tpla_op_t)(op & 1), 1 + s % 3,
                      3, s % 2, op % 2, (s + 1) % 2, op == 3 ? 1 : 0, 1.0f, 0.0f,
                      op % 2 ? TPLA_FP8_ACCUM_FAST : TPLA_FP8_ACCUM_SPLIT, 0, 0.75f, 1, 1};
      failures += run_case(&c, &rng, &r, 0);
      cases++;
    }
  printf("# %d odd-shape FP8 cases, %d failed\n", cases, failures);
  ASSERT_EQ_INT(failures, 0);
}

/* The TN layout cuBLASLt reads directly (every size a multiple of 16) with B
 * off 16-byte alignment, by its pointer or by its ld: B must be staged, not
 * handed over as it is. */
static void test_fp8_tn_with_misaligned_b(void) {
  NEED_FP8();
  gpu_rng_t rng;
  gpu_rng_seed(&rng, g_seed + 7);
  int failures = 0;
  fp8_result_t r;
  static const int offs[][2] = {{0, 1}, {0, 8}, {8, 0}}; /* {pad_b, off_b} in bytes */
  for (int v = 0; v < 3; v++) {
    fp8_case_t c = {64, 48, 96, E4M3, E4M3, TPLA_BFLOAT16, TPLA_OP_N, TPLA_OP_T, 0,
                    offs[v][0], 0, 0, offs[v][1], 0, 1.0f, 0.0f, TPLA_FP8_ACCUM_SPLIT, 0.5f,
                    0.75f, 0, 1};
    failures += run_case(&c, &rng, &r, 0);
  }
  ASSERT_EQ_INT(failures, 0);
}

/* Both accumulation modes on a long k into fp32: each within its bound,
 * and split no less accurate than fast. */
static void test_fp8_split_vs_fast(void) {
  NEED_FP8();
  gpu_rng_t rng;
  fp8_result_t split, fast;
  fp8_case_t c = {128, 128, 8192, E4M3, E4M3, TPLA_FLOAT32, TPLA_OP_N, TPLA_OP_T, 0, 0, 0,
                  0, 0, 0, 1.0f, 0.0f, TPLA_FP8_ACCUM_SPLIT, 0, 0, 0, 1};
  gpu_rng_seed(&rng, g_seed + 2);
  ASSERT_EQ_INT(run_case(&c, &rng, &split, 0), 0);
  c.accum = TPLA_FP8_ACCUM_FAST;
  gpu_rng_seed(&rng, g_seed + 2); /* the same inputs */
  ASSERT_EQ_INT(run_case(&c, &rng, &fast, 0), 0);
  printf("# k=%" PRId64 " fp32 out: rms err split %.3g, fast %.3g; max err split %.3g, fast "
         "%.3g\n", c.k, split.rms_err, fast.rms_err, split.max_err, fast.max_err);
  ASSERT_LE(split.rms_err, 1.25 * fast.rms_err + 1e-7 * split.rms_ref);
  c.td = TPLA_BFLOAT16; /* through a rounding output too: both in bound */
  c.accum = TPLA_FP8_ACCUM_SPLIT;
  ASSERT_EQ_INT(run_case(&c, &rng, &split, 0), 0);
  c.accum = TPLA_FP8_ACCUM_FAST;
  ASSERT_EQ_INT(run_case(&c, &rng, &fast, 0), 0);
}

/* beta = 1 accumulates into an fp32 D (a main grad), both modes, scaled. */
static void test_fp8_beta_one_fp32(void) {
  NEED_FP8();
  gpu_rng_t rng;
  gpu_rng_seed(&rng, g_seed + 3);
  fp8_result_t r;
  int failures = 0;
  for (int mode = 0; mode < 2; mode++)
    for (int op = 0; op < 4; op += 3) {
      fp8_case_t c = {80, 96, 160, E5M2, E4M3, TPLA_FLOAT32, (tpla_op_t)(op >> 1),
                      (tpla_op_t)(op & 1), 0, 0, 4, 0, 0, 0, 0.5f, 1.0f,
                      (tpla_fp8_accum_t)mode, 0.25f, 2.0f, 0, 1};
      failures += run_case(&c, &rng, &r, 0);
      c.m = 37; /* and through the padded D: D is read in first */
      c.pad_d = 1;
      failures += run_case(&c, &rng, &r, 0);
    }
  ASSERT_EQ_INT(failures, 0);
}

/* An E5M2 output: right from E4M3 x E5M2; E4M3 x E4M3 -> E5M2 (no cuBLASLt
 * kernel on Hopper) refused up front, NOT_SUPPORTED naming argument 'd'. */
static void test_fp8_e5m2_output(void) {
  NEED_FP8();
  gpu_rng_t rng;
  gpu_rng_seed(&rng, g_seed + 5);
  fp8_result_t r;
  for (int p = 0; p < 2; p++) {
    fp8_case_t c = {64, 32, 64, E4M3, p ? E5M2 : E4M3, E5M2, TPLA_OP_N, TPLA_OP_T, 0, 0, 0,
                    0, 0, 0, 1.0f, 0.0f, TPLA_FP8_ACCUM_SPLIT, 0.5f, 0, 1, 1};
    ASSERT_EQ_INT(run_case(&c, &rng, &r, 1), 0);
    ASSERT_EQ_INT(r.not_supported, p == 0);
    if (p == 0)
      ASSERT_CONTAINS(tpla_last_error(), "argument 'd': an e5m2 D needs an e5m2 input");
  }
}

/* Staged calls alternating two streams share the scratch safely. */
static void test_fp8_two_streams(void) {
  NEED_FP8();
  cudaStream_t other;
  ASSERT_EQ_INT(cudaStreamCreateWithFlags(&other, cudaStreamNonBlocking), cudaSuccess);
  gpu_rng_t rng;
  gpu_rng_seed(&rng, g_seed + 7);
  cudaStream_t saved = g_stream;
  fp8_result_t r;
  int failures = 0;
  for (int i = 0; i < 4; i++) {
    g_stream = i % 2 ? other : saved;
    fp8_case_t c = {96 + 16 * i, 64, 2048, E4M3, E4M3, TPLA_FLOAT32, TPLA_OP_T, TPLA_OP_N, 0,
                    0, 0, 0, 0, 0, 1.0f, 0.0f, TPLA_FP8_ACCUM_SPLIT, 0, 0, 0, 1};
    failures += run_case(&c, &rng, &r, 0);
  }
  g_stream = saved;
  cudaStreamDestroy(other);
  ASSERT_EQ_INT(failures, 0);
}

int main(void) {
  GPU_TEST_MAIN_SKIP_WITHOUT(gpu_count());
  if (fp8_open("test_gpu_fp8", 220) != 0) {
    printf("FAIL setup (see above)\n0 passed, 1 failed\n");
    return 1;
  }
  TEST(test_fp8_features);
  TEST(test_fp8_types_ops_outputs);
  TEST(test_fp8_odd_shapes);
  TEST(test_fp8_split_vs_fast);
  TEST(test_fp8_beta_one_fp32);
  TEST(test_fp8_tn_with_misaligned_b);
  TEST(test_fp8_e5m2_output);
  TEST(test_fp8_two_streams);
  fp8_close();
  return test_summary();
}

#else /* a build without the CUDA executor */
TEST_MAIN_WITHOUT_CUDA()
#endif
