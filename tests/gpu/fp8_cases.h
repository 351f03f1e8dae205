/*
 * fp8_cases.h - what the FP8 tpla_gemm tests share (test_gpu_fp8.c, test_gpu_fp8_edges.c):
 * a tiny OCP FP8 codec independent of the library's, device matrices with host twins, one
 * GEMM case run against a float64 host GEMM of the dequantized inputs, and the one-GPU
 * context each test opens.
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
 * Header-only (static functions): each test is one translation unit.
 * Include only when TPLA_HAVE_CUDA is defined.
 */
#ifndef TPLA_FP8_CASES_H
#define TPLA_FP8_CASES_H
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

/* The test's one-GPU context, stream, scalars and seed; 0 on success. */
static int fp8_open(const char *test, unsigned watchdog_s) {
  watchdog_arm(test, watchdog_s);
  g_seed = gpu_fresh_seed(test);
  fp8_tables();
  return CUDA_FAILED(cudaSetDevice(0)) ||
         CUDA_FAILED(cudaStreamCreateWithFlags(&g_stream, cudaStreamNonBlocking)) ||
         CUDA_FAILED(cudaMalloc((void **)&g_scalars, 16 * sizeof(float))) ||
         open_single_ctx(0, &g_comm, &g_ctx) != 0;
}

static void fp8_close(void) {
  if (close_single_ctx(g_comm, g_ctx) != 0)
    test_failed_++;
  cudaFree(g_scalars);
  cudaStreamDestroy(g_stream);
}

/* Whether the device has FP8 GEMMs (g_fp8, which NEED_FP8 reads); first in every test. */
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

#endif /* TPLA_FP8_CASES_H */
