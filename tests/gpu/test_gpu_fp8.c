/*
 * test_gpu_fp8.c - FP8 tpla_gemm on cuBLASLt against a float64 host GEMM of
 * the dequantized inputs: E4M3 x E4M3, E5M2 x E4M3 and E4M3 x E5M2, all four
 * op_a/op_b (the library stages every layout but A m x k, B n x k), outputs
 * bf16, fp16, fp32 and E4M3 (with a d_scale; compared after decoding, one
 * FP8 ulp allowed), E5M2 from an E5M2 input (from two E4M3 inputs
 * refused), per-tensor scales, the
 * amax, split and fast accumulation (split at least as accurate), beta = 1
 * into fp32, m, n, k not multiples of 16, odd leading dimensions and
 * misaligned pointers, k = 0, saturation, infinity and NaN in an FP8 D, D
 * in rows more than 2 GiB apart,
 * and two streams sharing the staging scratch.
 * test_gpu_fp8_kernels.c has the plan cache, the memory loop and the
 * staging and amax kernels on their own.
 *
 * Error bounds, per element, with S = |alpha a_scale b_scale| sum_p |a_p b_p|:
 * FP8 products are exact in fp32; the tensor cores add them with about 14
 * bits kept (DeepSeek-V3 report, sec. 3.3.2) and cuBLASLt's split mode
 * promotes the partial sums to fp32 every few MMAs of k = 32, so split gets
 * 2^-9 S; fast promotes never, one 2^-13 truncation per MMA step, doubled:
 * ceil(k / 32) 2^-12 S (at least the split bound). Plus fp32 terms
 * (k + 4) 2^-24 S, the output rounding u_out |ref| (one FP8 ulp at |ref|
 * for an FP8 D) and beta's. Every case prints one line with its largest
 * error, its bound and the rms error. Replay a run with TPLA_TEST_SEED.
 *
 * Run: build/tests/test_gpu_fp8 (exits 77 without a GPU; skips the FP8
 * GEMMs on a GPU without FP8 tensor cores).
 */
#include "test.h"
#include "tpla.h"

#ifdef TPLA_HAVE_CUDA
#include "gpu_util.h"

static struct ncclComm *g_comm;
static tpla_ctx_t g_ctx;
static cudaStream_t g_stream;
static uint64_t g_seed;
static float *g_scalars; /* device: a_scale, b_scale, d_scale, amax, 16 bytes apart */
static int g_fp8;        /* the device has FP8 GEMMs (tpla_features_t.fp8) */

#define E4M3 TPLA_FLOAT8_E4M3
#define E5M2 TPLA_FLOAT8_E5M2

/* ---- a tiny OCP FP8 codec (independent of the library's) ------------------- */

static double g_decode[2][256]; /* [0] E4M3, [1] E5M2 */

static int fmt_bits(tpla_dtype_t t, int *bias) {
  *bias = t == E5M2 ? 15 : 7;
  return t == E5M2 ? 2 : 3;
}

static void fp8_tables(void) {
  for (int f = 0; f < 2; f++)
    for (int c = 0; c < 256; c++) {
      int bias, mbits = fmt_bits(f ? E5M2 : E4M3, &bias);
      int e = (c & 0x7f) >> mbits, man = c & ((1 << mbits) - 1);
      double v;
      if (f == 0 && (c & 0x7f) == 0x7f)
        v = NAN; /* E4M3: S.1111.111 only; no infinities */
      else if (f == 1 && e == 31)
        v = man ? NAN : INFINITY;
      else
        v = e == 0 ? ldexp(man, 1 - bias - mbits) : ldexp((1 << mbits) + man, e - bias - mbits);
      g_decode[f][c] = c & 0x80 ? -v : v;
    }
}

static double fp8_value(uint8_t code, tpla_dtype_t t) { return g_decode[t == E5M2][code]; }

/* Round to nearest, ties to even (the even code), saturating to the
 * largest finite value: by search, which is obviously right. */
static uint8_t fp8_encode(double v, tpla_dtype_t t) {
  int best = 0;
  double best_err = INFINITY;
  for (int c = 0; c < 256; c++) {
    double d = fp8_value((uint8_t)c, t);
    if (!isfinite(d))
      continue;
    double e = fabs(d - v);
    if (e < best_err || (e == best_err && (c & 1) == 0)) {
      best = c;
      best_err = e;
    }
  }
  return (uint8_t)best;
}

/* One unit in the last place at magnitude x (>= 0). */
static double fp8_ulp(double x, tpla_dtype_t t) {
  int bias, mbits = fmt_bits(t, &bias);
  if (x < ldexp(1, 1 - bias))
    return ldexp(1, 1 - bias - mbits); /* subnormal spacing */
  int e;
  frexp(x, &e); /* x in [2^(e-1), 2^e) */
  return ldexp(1, e - 1 - mbits);
}

static double fp8_max(tpla_dtype_t t) { return t == E5M2 ? 57344.0 : 448.0; }
static bool is_fp8(tpla_dtype_t t) { return t == E4M3 || t == E5M2; }

/* ---- matrices with host twins ------------------------------------------------- */

typedef struct {
  tpla_matrix_t view;
  void *dev;
  unsigned char *host; /* the whole allocation as uploaded */
  double *vals;        /* rows x ld values (padding: NaN) */
  size_t bytes, off_bytes;
} mat_t;

static double elem(const void *buf, tpla_dtype_t t, size_t i) {
  return is_fp8(t) ? fp8_value(((const uint8_t *)buf)[i], t) : tpla_load_elem(buf, t, i);
}

/* rows x cols of dtype t, ld = cols + pad, data `off` elements past an
 * aligned allocation; padding and (poison) every element NaN; values
 * uniform in [-range, range) rounded to t. */
static int mat_make(mat_t *b, int64_t rows, int64_t cols, int pad, int off, tpla_dtype_t t,
                    gpu_rng_t *rng, double range, int poison) {
  memset(b, 0, sizeof *b);
  int64_t ld = (cols > 1 ? cols : 1) + pad;
  size_t es = tpla_dtype_size(t), n = (size_t)(rows * ld);
  b->off_bytes = (size_t)off * es;
  b->bytes = b->off_bytes + n * es + 16;
  b->host = malloc(b->bytes);
  b->vals = malloc((n + 1) * sizeof(double));
  if (!b->host || !b->vals || CUDA_FAILED(cudaMalloc(&b->dev, b->bytes)))
    return 1;
  memset(b->host, 0xFF, b->bytes); /* NaN in every float dtype, FP8 included */
  unsigned char *e = b->host + b->off_bytes;
  for (int64_t i = 0; i < rows && !poison; i++)
    for (int64_t j = 0; j < cols; j++) {
      double v = gpu_rng_uniform(rng) * range;
      if (is_fp8(t))
        e[i * ld + j] = fp8_encode(v, t);
      else
        tpla_store_elem(e, t, (size_t)(i * ld + j), v);
    }
  for (size_t i = 0; i < n; i++)
    b->vals[i] = elem(e, t, i);
  b->view = (tpla_matrix_t){e - b->host + (char *)b->dev, rows, cols, ld, t};
  return CUDA_FAILED(gpu_upload(b->dev, b->host, b->bytes));
}

static void mat_free(mat_t *b) {
  cudaFree(b->dev);
  free(b->host);
  free(b->vals);
}

/* ---- one case against the float64 reference -------------------------------------- */

typedef struct {
  int64_t m, n, k;
  tpla_dtype_t ta, tb, td;
  tpla_op_t op_a, op_b;
  int pad_a, pad_b, pad_d, off_a, off_b, off_d;
  float alpha, beta;
  tpla_fp8_accum_t accum;
  float a_scale, b_scale; /* 0: NULL (1) */
  int d_scale;            /* FP8 D: 1 passes a power of two that fills a quarter of the range */
  int amax;               /* pass d_amax */
} fp8_case_t;

typedef struct {
  double max_err, worst_ratio, rms_err, rms_ref;
  int not_supported;
} fp8_result_t;

static double u_acc(const fp8_case_t *c) {
  double split = ldexp(1, -9), fast = ceil((double)c->k / 32.0) * ldexp(1, -12);
  double tc = c->accum == TPLA_FP8_ACCUM_FAST ? fmax(split, fast) : split;
  return tc + (double)(c->k + 4) * ldexp(1, -24);
}

static void case_name(char *buf, size_t size, const fp8_case_t *c) {
  snprintf(buf, size,
           "%s x %s -> %s %c%c m=%" PRId64 " n=%" PRId64 " k=%" PRId64 " pad %d/%d/%d off "
           "%d/%d/%d alpha %g beta %g %s%s%s",
           tpla_dtype_name(c->ta), tpla_dtype_name(c->tb), tpla_dtype_name(c->td),
           c->op_a ? 'T' : 'N', c->op_b ? 'T' : 'N', c->m, c->n, c->k, c->pad_a, c->pad_b,
           c->pad_d, c->off_a, c->off_b, c->off_d, (double)c->alpha, (double)c->beta,
           c->accum == TPLA_FP8_ACCUM_FAST ? "fast" : "split",
           c->a_scale || c->b_scale ? " scaled" : "", c->d_scale ? " d_scale" : "");
}

/* Runs one case; returns the number of failures (0 when every element is
 * within its bound, D's padding is untouched and the amax is right).
 * allow_ns: NOT_SUPPORTED counts as no failure (res->not_supported = 1). */
static int run_case(const fp8_case_t *c, gpu_rng_t *rng, fp8_result_t *res, int allow_ns) {
  char name[256];
  case_name(name, sizeof name, c);
  memset(res, 0, sizeof *res);
  int64_t ar = c->op_a == TPLA_OP_N ? c->m : c->k, ac = c->op_a == TPLA_OP_N ? c->k : c->m;
  int64_t br = c->op_b == TPLA_OP_N ? c->k : c->n, bc = c->op_b == TPLA_OP_N ? c->n : c->k;
  mat_t a, b, d;
  int failed = mat_make(&a, ar, ac, c->pad_a, c->off_a, c->ta, rng, 4.0, 0);
  failed += mat_make(&b, br, bc, c->pad_b, c->off_b, c->tb, rng, 4.0, 0);
  failed += mat_make(&d, c->m, c->n, c->pad_d, c->off_d, c->td, rng, 2.0, c->beta == 0.0f);
  size_t mn = (size_t)(c->m * c->n) + 1;
  double *want = malloc(mn * sizeof(double)), *scale = malloc(mn * sizeof(double));
  unsigned char *got = malloc(d.bytes + 1);
  if (failed || !want || !scale || !got) {
    fprintf(stderr, "  %s: setup failed\n", name);
    failed = 1;
    goto done;
  }
  double sa = c->a_scale ? c->a_scale : 1.0, sb = c->b_scale ? c->b_scale : 1.0;
  double f = (double)c->alpha * sa * sb, amax_ref = 0, acc_max = 0;
  for (int64_t i = 0; i < c->m; i++)
    for (int64_t j = 0; j < c->n; j++) {
      double s = 0, sabs = 0;
      for (int64_t p = 0; p < c->k; p++) {
        double x = c->op_a == TPLA_OP_N ? a.vals[i * a.view.ld + p] : a.vals[p * a.view.ld + i];
        double y = c->op_b == TPLA_OP_N ? b.vals[p * b.view.ld + j] : b.vals[j * b.view.ld + p];
        s += x * y;
        sabs += fabs(x * y);
      }
      double d0 = c->beta != 0.0f ? d.vals[i * d.view.ld + j] : 0.0;
      want[i * c->n + j] = f * s + (double)c->beta * d0;
      scale[i * c->n + j] = fabs(f) * sabs;
      amax_ref = fmax(amax_ref, fabs(want[i * c->n + j]));
      acc_max = fmax(acc_max, fabs(f) * sabs * u_acc(c) + fabs((double)c->beta * d0) * 0x1p-23);
    }
  double ds = 1.0;
  if (is_fp8(c->td) && c->d_scale && amax_ref > 0)
    ds = ldexp(1, (int)floor(log2(fp8_max(c->td) / 4 / amax_ref)));
  /* 16 bytes apart (cuBLASLt); amax starts above any result: one kept = never written,
   * and a max with what the slot held (an amax that accumulates) fails too */
  float scalars[16] = {(float)sa};
  scalars[4] = (float)sb, scalars[8] = (float)ds, scalars[12] = 1e30f;
  failed += CUDA_FAILED(gpu_upload(g_scalars, scalars, sizeof scalars));
  tpla_gemm_args_t args = TPLA_GEMM_ARGS_INIT;
  args.alpha = c->alpha;
  args.beta = c->beta;
  args.fp8.accum = c->accum;
  args.fp8.a_scale = c->a_scale ? g_scalars + 0 : NULL;
  args.fp8.b_scale = c->b_scale ? g_scalars + 4 : NULL;
  args.fp8.d_scale = is_fp8(c->td) && c->d_scale ? g_scalars + 8 : NULL;
  args.fp8.d_amax = c->amax ? g_scalars + 12 : NULL;
  tpla_status_t st = failed ? TPLA_ERROR_INTERNAL
                            : tpla_gemm(g_ctx, d.view, a.view, c->op_a, b.view, c->op_b, &args,
                                        g_stream);
  if (st == TPLA_ERROR_NOT_SUPPORTED && allow_ns) {
    printf("# %s: NOT_SUPPORTED (%s)\n", name, tpla_last_error());
    res->not_supported = 1;
    goto done;
  }
  if (st != TPLA_SUCCESS) {
    fprintf(stderr, "  %s: tpla_gemm returned %s: %s\n", name, tpla_status_string(st),
            tpla_last_error());
    failed = 1;
    goto done;
  }
  float amax_got = 0;
  if (CUDA_FAILED(cudaStreamSynchronize(g_stream)) ||
      CUDA_FAILED(cudaMemcpy(got, d.dev, d.bytes, cudaMemcpyDeviceToHost)) ||
      CUDA_FAILED(cudaMemcpy(&amax_got, g_scalars + 12, sizeof amax_got, cudaMemcpyDeviceToHost))) {
    failed = 1;
    goto done;
  }
  double u_out = is_fp8(c->td) ? 0.0 : unit_roundoff(c->td);
  double tiny = c->td == TPLA_FLOAT16 ? 0x1p-24 : 1e-30;
  int bad = 0;
  double sum_err2 = 0, sum_ref2 = 0;
  const unsigned char *gv = got + d.off_bytes;
  size_t es = tpla_dtype_size(c->td);
  for (int64_t i = 0; i < c->m; i++)
    for (int64_t j = 0; j < d.view.ld; j++) {
      size_t e = (size_t)(i * d.view.ld + j);
      if (j >= c->n) { /* padding must be left exactly as it was */
        if (memcmp(gv + e * es, d.host + d.off_bytes + e * es, es) != 0 && bad++ < 3)
          fprintf(stderr, "  %s: D padding (%" PRId64 ",%" PRId64 ") was written\n", name, i, j);
        continue;
      }
      double w = want[i * c->n + j], sc = scale[i * c->n + j], have = elem(gv, c->td, e);
      double d0 = c->beta != 0.0f ? d.vals[e] : 0.0; /* D is NaN-poisoned when beta = 0 */
      double acc = sc * u_acc(c) + fabs((double)c->beta * d0) * 0x1p-23;
      double tol;
      if (is_fp8(c->td)) { /* compare the decoded value with ds * want: 1 ulp + accumulation */
        w *= ds;
        tol = ds * acc + fp8_ulp(fabs(w) + ds * acc, c->td);
      } else {
        tol = acc + fabs(w) * u_out + tiny;
      }
      double err = fabs(have - w);
      if (!(err <= tol) && bad++ < 3)
        fprintf(stderr,
                "  %s: D(%" PRId64 ",%" PRId64 ") = %.9g, want %.9g (err %.3g > tol %.3g)\n",
                name, i, j, have, w, err, tol);
      if (!isnan(err)) {
        res->max_err = fmax(res->max_err, err);
        res->worst_ratio = fmax(res->worst_ratio, err / tol);
      }
      sum_err2 += err * err;
      sum_ref2 += w * w;
    }
  res->rms_err = sqrt(sum_err2 / (double)(c->m * c->n));
  res->rms_ref = sqrt(sum_ref2 / (double)(c->m * c->n));
  printf("# %s: max|err| %.3g, worst err/bound %.3f, rms err %.3g (rms ref %.3g)", name,
         res->max_err, res->worst_ratio, res->rms_err, res->rms_ref);
  if (c->amax) {
    /* before d_scale; a bf16/fp16/fp32 D's amax is of its rounded values */
    double amax_tol = fmax(1e-2 * amax_ref, acc_max + amax_ref * u_out);
    printf(", amax %.7g vs ref %.7g (tol %.3g)", (double)amax_got, amax_ref, amax_tol);
    if (!(fabs((double)amax_got - amax_ref) <= amax_tol)) {
      fprintf(stderr, "\n  %s: d_amax %.9g, want %.9g (tol %.3g)%s\n", name, (double)amax_got,
              amax_ref, amax_tol, amax_got == 1e30f ? ": never written, or a max with the old value" : "");
      bad++;
    }
  }
  printf("\n");
  if (bad)
    fprintf(stderr, "  %s: %d bad elements\n", name, bad);
  failed += bad != 0;
done:
  fflush(stdout);
  free(want);
  free(scale);
  free(got);
  mat_free(&a);
  mat_free(&b);
  mat_free(&d);
  return failed;
}

#define NEED_FP8()                                                        \
  do {                                                                    \
    if (!g_fp8)                                                           \
      SKIP("device 0 has no FP8 GEMMs (tpla_features_t.fp8 = 0)");        \
  } while (0)

/* ---- tests ----------------------------------------------------------------------- */

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

/* NULL scales mean 1; no amax requested leaves it alone. */
static void test_fp8_null_scales(void) {
  NEED_FP8();
  gpu_rng_t rng;
  gpu_rng_seed(&rng, g_seed + 4);
  fp8_result_t r;
  fp8_case_t c = {32, 64, 48, E4M3, E4M3, E4M3, TPLA_OP_N, TPLA_OP_T, 0, 0, 0, 0, 0, 0,
                  0.125f, 0.0f, TPLA_FP8_ACCUM_SPLIT, 0, 0, 0, 0};
  ASSERT_EQ_INT(run_case(&c, &rng, &r, 0), 0);
  float amax = 0;
  ASSERT_EQ_INT(cudaMemcpy(&amax, g_scalars + 12, sizeof amax, cudaMemcpyDeviceToHost),
                cudaSuccess);
  ASSERT_EQ_INT(amax == 1e30f, 1); /* as run_case left it: not written */
}

/* cuBLASLt takes only 16-byte aligned scale pointers: a scale 4 bytes into
 * an array is INVALID_ARGUMENT naming it, and D stays untouched. */
static void test_fp8_misaligned_scale(void) {
  NEED_FP8();
  void *a = NULL, *b = NULL, *d = NULL;
  ASSERT_EQ_INT(cudaMalloc(&a, 64 * 64), cudaSuccess);
  ASSERT_EQ_INT(cudaMalloc(&b, 64 * 64), cudaSuccess);
  ASSERT_EQ_INT(cudaMalloc(&d, 64 * 64 * 2), cudaSuccess);
  ASSERT_EQ_INT(gpu_fill(d, 0x5a, 64 * 64 * 2), cudaSuccess);
  tpla_matrix_t am = {a, 64, 64, 64, E4M3}, bm = {b, 64, 64, 64, E4M3};
  tpla_matrix_t dm = {d, 64, 64, 64, TPLA_BFLOAT16};
  tpla_gemm_args_t args = TPLA_GEMM_ARGS_INIT;
  args.fp8.b_scale = g_scalars + 1;
  ASSERT_EQ_INT(tpla_gemm(g_ctx, dm, am, TPLA_OP_N, bm, TPLA_OP_T, &args, NULL),
                TPLA_ERROR_INVALID_ARGUMENT);
  ASSERT_CONTAINS(tpla_last_error(), "fp8.b_scale");
  unsigned char host[64];
  ASSERT_EQ_INT(cudaMemcpy(host, d, sizeof host, cudaMemcpyDeviceToHost), cudaSuccess);
  for (size_t i = 0; i < sizeof host; i++)
    ASSERT_EQ_INT(host[i], 0x5a);
  cudaFree(a), cudaFree(b), cudaFree(d);
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

/* k = 0: D = beta D (an FP8 D: zeros over NaN), the amax of that. */
static void test_fp8_k_zero(void) {
  NEED_FP8();
  gpu_rng_t rng;
  gpu_rng_seed(&rng, g_seed + 6);
  fp8_result_t r;
  fp8_case_t c = {19, 23, 0, E4M3, E5M2, TPLA_FLOAT32, TPLA_OP_T, TPLA_OP_N, 0, 0, 2, 0, 0, 0,
                  1.0f, 0.5f, TPLA_FP8_ACCUM_SPLIT, 0, 0, 0, 1};
  ASSERT_EQ_INT(run_case(&c, &rng, &r, 0), 0);
  c.td = E4M3;
  c.beta = 0.0f; /* NaN-poisoned D becomes zeros, amax 0 */
  c.d_scale = 1;
  ASSERT_EQ_INT(run_case(&c, &rng, &r, 0), 0);
  c.td = TPLA_BFLOAT16;
  ASSERT_EQ_INT(run_case(&c, &rng, &r, 0), 0);
}

/* One small FP8 GEMM from host bytes: D (m x n) = A (m x k) B (k x n), each
 * at most 256 bytes, no scales, d_amax into g_scalars[12]; D's bytes and
 * the amax come back. */
static int tiny_fp8_gemm(const uint8_t *a, tpla_dtype_t ta, const uint8_t *b, tpla_dtype_t tb,
                         uint8_t *d, tpla_dtype_t td, int m, int n, int k, float *amax) {
  uint8_t *dev = NULL;
  float minus_one = -1.0f;
  if (m * k > 256 || k * n > 256 || m * n > 256 ||
      CUDA_FAILED(cudaMalloc((void **)&dev, 3 * 256)) ||
      CUDA_FAILED(cudaMemcpy(dev, a, (size_t)(m * k), cudaMemcpyHostToDevice)) ||
      CUDA_FAILED(cudaMemcpy(dev + 256, b, (size_t)(k * n), cudaMemcpyHostToDevice)) ||
      CUDA_FAILED(cudaMemcpy(g_scalars + 12, &minus_one, sizeof(float), cudaMemcpyHostToDevice))) {
    cudaFree(dev);
    return 1;
  }
  tpla_gemm_args_t args = TPLA_GEMM_ARGS_INIT;
  args.fp8.d_amax = g_scalars + 12;
  tpla_matrix_t av = {dev, m, k, k, ta}, bv = {dev + 256, k, n, n, tb};
  tpla_matrix_t dv = {dev + 512, m, n, n, td};
  tpla_status_t st = tpla_gemm(g_ctx, dv, av, TPLA_OP_N, bv, TPLA_OP_N, &args, g_stream);
  int bad = st != TPLA_SUCCESS;
  if (bad)
    fprintf(stderr, "  tpla_gemm: %s: %s\n", tpla_status_string(st), tpla_last_error());
  bad = bad || CUDA_FAILED(cudaStreamSynchronize(g_stream)) ||
        CUDA_FAILED(cudaMemcpy(d, dev + 512, (size_t)(m * n), cudaMemcpyDeviceToHost)) ||
        CUDA_FAILED(cudaMemcpy(amax, g_scalars + 12, sizeof(float), cudaMemcpyDeviceToHost));
  cudaFree(dev);
  return bad;
}

/* An FP8 D as docs/API.md says, the host executor's test_saturation_and_nan
 * on cuBLASLt: overflow saturates to the largest finite value (E4M3 448,
 * E5M2 57344), an infinite product too (run 205: cuBLASLt's conversion is
 * saturating), a NaN input gives NaN, and the amax is of the unrounded
 * values: NaN for a NaN, not finite for an infinite product (cuBLASLt's
 * AMAX_D gives NaN, run 206). */
static void test_fp8_saturation_inf_nan(void) {
  NEED_FP8();
  const uint8_t a[4] = {0x7e, 0xfe, 0x38, 0x7f};  /* E4M3 448, -448, 1, NaN (1 x k) */
  const uint8_t b3[3 * 2] = {0x7e, 0x38, 0x00, 0x38, 0x00, 0x38};      /* k = 3 rows of 2 */
  const uint8_t b4[4 * 2] = {0x7e, 0x38, 0x00, 0x38, 0x00, 0x38, 0x38, 0x38};
  uint8_t d[2];
  float amax;
  /* D = [448 * 448 = 200704 -> 448, 448 - 448 + 1 = 1] */
  ASSERT_EQ_INT(tiny_fp8_gemm(a, E4M3, b3, E4M3, d, E4M3, 1, 2, 3, &amax), 0);
  printf("# E4M3 overflow: D bytes 0x%02x 0x%02x, amax %g\n", d[0], d[1], (double)amax);
  ASSERT_EQ_INT(d[0], 0x7e);
  ASSERT_EQ_INT(d[1], 0x38);
  ASSERT_TRUE(amax == 200704.0f);
  /* the NaN joins both columns */
  ASSERT_EQ_INT(tiny_fp8_gemm(a, E4M3, b4, E4M3, d, E4M3, 1, 2, 4, &amax), 0);
  printf("# E4M3 NaN input: D bytes 0x%02x 0x%02x, amax %g\n", d[0], d[1], (double)amax);
  ASSERT_TRUE(isnan(fp8_value(d[0], E4M3)) && isnan(fp8_value(d[1], E4M3)));
  ASSERT_TRUE(isnan(amax));
  /* E5M2 A [[inf, 0], [57344, 57344]] x E4M3 B [[1], [448]]: [inf, 25.7e6 -> 57344] */
  const uint8_t a5[4] = {0x7c, 0x00, 0x7b, 0x7b}, b5[2] = {0x38, 0x7e};
  ASSERT_EQ_INT(tiny_fp8_gemm(a5, E5M2, b5, E4M3, d, E5M2, 2, 1, 2, &amax), 0);
  printf("# E5M2 infinity and overflow: D bytes 0x%02x 0x%02x, amax %g\n", d[0], d[1],
         (double)amax);
  ASSERT_EQ_INT(d[0], 0x7b);
  ASSERT_EQ_INT(d[1], 0x7b);
  ASSERT_TRUE(!isfinite(amax));
  /* unpadded (16 x 16 x 16): A's first row [inf, 0, ...], B's first row all 1: D's first
   * row infinite (stored 57344), the others 0; cuBLASLt's own amax: NaN (run 206) */
  uint8_t a16[16 * 16] = {0x7c}, b16[16 * 16] = {0}, d16[16 * 16];
  memset(b16, 0x38, 16);
  ASSERT_EQ_INT(tiny_fp8_gemm(a16, E5M2, b16, E4M3, d16, E5M2, 16, 16, 16, &amax), 0);
  printf("# E5M2 infinity, 16 x 16 x 16: D[0][0] 0x%02x, D[1][0] 0x%02x, amax %g\n", d16[0],
         d16[16], (double)amax);
  ASSERT_EQ_INT(d16[0], 0x7b);
  ASSERT_EQ_INT(d16[16], 0x00);
  ASSERT_TRUE(!isfinite(amax));
}

/* D inside rows of more than 2 GiB (pitch past what cudaMemcpy2D and cudaMemset2D take):
 * a bf16 D through the padded copy (n = 24), and an E4M3 D zeroed by k = 0. */
static void test_fp8_huge_pitch(void) {
  NEED_FP8();
  const int64_t m = 2, n = 24, k = 32, ld = ((int64_t)1 << 30) + 64; /* bf16: 2^31 + 128 B */
  uint8_t ones[32 * 24], *a = NULL, *b = NULL, *d = NULL;
  memset(ones, 0x38, sizeof ones); /* E4M3 1.0 */
  size_t dbytes = (size_t)((m - 1) * ld + n) * 2;
  ASSERT_EQ_INT(cudaMalloc((void **)&a, 256 + 1024) == cudaSuccess &&
                    cudaMalloc((void **)&d, dbytes) == cudaSuccess,
                1);
  b = a + 256;
  ASSERT_EQ_INT(cudaMemcpy(a, ones, (size_t)(m * k), cudaMemcpyHostToDevice), cudaSuccess);
  ASSERT_EQ_INT(cudaMemcpy(b, ones, (size_t)(k * n), cudaMemcpyHostToDevice), cudaSuccess);
  for (int64_t i = 0; i < m; i++)
    ASSERT_EQ_INT(cudaMemset(d + (size_t)(i * ld) * 2, 0xff, (size_t)n * 2), cudaSuccess);
  tpla_matrix_t av = {a, m, k, k, E4M3}, bv = {b, k, n, n, E4M3};
  tpla_matrix_t dv = {d, m, n, ld, TPLA_BFLOAT16};
  ASSERT_OK(tpla_gemm(g_ctx, dv, av, TPLA_OP_N, bv, TPLA_OP_N, NULL, g_stream));
  ASSERT_EQ_INT(cudaStreamSynchronize(g_stream), cudaSuccess);
  uint16_t row[24];
  for (int64_t i = 0; i < m; i++) {
    ASSERT_EQ_INT(cudaMemcpy(row, d + (size_t)(i * ld) * 2, sizeof row, cudaMemcpyDeviceToHost),
                  cudaSuccess);
    for (int j = 0; j < 24; j++)
      ASSERT_EQ_INT(row[j], 0x4200); /* bf16 32 */
  }
  /* k = 0 into an E4M3 D whose rows are 2^31 + 128 bytes apart: zeros */
  const int64_t ld8 = ((int64_t)1 << 31) + 128;
  cudaFree(d);
  ASSERT_EQ_INT(cudaMalloc((void **)&d, (size_t)((m - 1) * ld8 + n)), cudaSuccess);
  for (int64_t i = 0; i < m; i++)
    ASSERT_EQ_INT(cudaMemset(d + (size_t)(i * ld8), 0x5a, (size_t)n), cudaSuccess);
  tpla_matrix_t a0 = {a, m, 0, 1, E4M3}, b0 = {b, 0, n, n, E4M3}, d8 = {d, m, n, ld8, E4M3};
  ASSERT_OK(tpla_gemm(g_ctx, d8, a0, TPLA_OP_N, b0, TPLA_OP_N, NULL, g_stream));
  ASSERT_EQ_INT(cudaStreamSynchronize(g_stream), cudaSuccess);
  for (int64_t i = 0; i < m; i++) {
    uint8_t r8[24];
    ASSERT_EQ_INT(cudaMemcpy(r8, d + (size_t)(i * ld8), sizeof r8, cudaMemcpyDeviceToHost),
                  cudaSuccess);
    for (int j = 0; j < 24; j++)
      ASSERT_EQ_INT(r8[j], 0);
  }
  cudaFree(a);
  cudaFree(d);
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

static void test_fp8_features(void) {
  tpla_features_t f = TPLA_FEATURES_INIT;
  ASSERT_OK(tpla_get_features(&f, 0));
  printf("# device 0: %s, cc %d, cuBLASLt %zu: fp8 %d, mxfp8 %d\n", f.device_name,
         f.compute_capability, f.cublaslt_version, f.fp8, f.mxfp8);
  ASSERT_EQ_INT(f.mxfp8, 0);
  if (f.compute_capability >= 89)
    ASSERT_EQ_INT(f.fp8, 1);
  g_fp8 = f.fp8;
}

int main(void) {
  GPU_TEST_MAIN_SKIP_WITHOUT(gpu_count());
  watchdog_arm("test_gpu_fp8", 220);
  g_seed = gpu_fresh_seed("test_gpu_fp8");
  fp8_tables();
  if (CUDA_FAILED(cudaSetDevice(0)) ||
      CUDA_FAILED(cudaStreamCreateWithFlags(&g_stream, cudaStreamNonBlocking)) ||
      CUDA_FAILED(cudaMalloc((void **)&g_scalars, 16 * sizeof(float))) ||
      open_single_ctx(0, &g_comm, &g_ctx) != 0) {
    printf("FAIL setup (see above)\n0 passed, 1 failed\n");
    return 1;
  }
  TEST(test_fp8_features);
  TEST(test_fp8_types_ops_outputs);
  TEST(test_fp8_odd_shapes);
  TEST(test_fp8_split_vs_fast);
  TEST(test_fp8_beta_one_fp32);
  TEST(test_fp8_tn_with_misaligned_b);
  TEST(test_fp8_null_scales);
  TEST(test_fp8_misaligned_scale);
  TEST(test_fp8_e5m2_output);
  TEST(test_fp8_k_zero);
  TEST(test_fp8_saturation_inf_nan);
  TEST(test_fp8_huge_pitch);
  TEST(test_fp8_two_streams);
  if (close_single_ctx(g_comm, g_ctx) != 0)
    test_failed_++;
  cudaFree(g_scalars);
  cudaStreamDestroy(g_stream);
  return test_summary();
}

#else /* a build without the CUDA executor */
TEST_MAIN_WITHOUT_CUDA()
#endif
