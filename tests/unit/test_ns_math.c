/*
 * test_ns_math.c - Newton-Schulz against known spectra (host executor):
 * inputs X = U diag(sigma) V^T built from random orthogonal U, V (LAPACK
 * QR); after k steps the singular values of the result (LAPACK SVD) are the
 * scalar polynomials applied to sigma / (safety ||X||_F + eps) and lie in
 * the interval predicted from [sigma_min, sigma_max]; a converging schedule
 * reaches the exact polar factor U V^T; bf16 and fp16 runs stay within
 * their rounding of the fp32 run. Skips without LAPACK.
 *
 *   ./test_ns_math        (CTest: test_ns_math)
 */
#include "test_ns_common.h"

#ifdef TPLA_HAVE_LAPACK
/* Fortran LAPACK, column-major; trailing lengths of the character args. */
void dgeqrf_(const int *m, const int *n, double *a, const int *lda, double *tau, double *work,
             const int *lwork, int *info);
void dorgqr_(const int *m, const int *n, const int *k, double *a, const int *lda,
             const double *tau, double *work, const int *lwork, int *info);
void dgesvd_(const char *jobu, const char *jobvt, const int *m, const int *n, double *a,
             const int *lda, double *s, double *u, const int *ldu, double *vt, const int *ldvt,
             double *work, const int *lwork, int *info, size_t, size_t);

static uint64_t seed;

/* A random k x k orthogonal matrix (Q of the QR of a random matrix). */
static double *random_orthogonal(int k, rng_t *r) {
  double *q = malloc(sizeof(double) * (size_t)(k * k)), *tau = malloc(sizeof(double) * k);
  int lwork = 64 * k, info = 0;
  double *work = malloc(sizeof(double) * (size_t)lwork);
  for (int i = 0; i < k * k; i++)
    q[i] = rng_uniform(r);
  dgeqrf_(&k, &k, q, &k, tau, work, &lwork, &info);
  if (info == 0)
    dorgqr_(&k, &k, &k, q, &k, tau, work, &lwork, &info);
  free(tau);
  free(work);
  if (info != 0) {
    free(q);
    return NULL;
  }
  return q;
}

typedef struct {
  double *x;     /* m x n row-major, U diag(sigma) V^T */
  double *polar; /* U V^T */
} spectral_t;

/* sigma: min(m, n) values. */
static spectral_t make_matrix(int m, int n, const double *sigma, uint64_t s) {
  rng_t r;
  rng_seed(&r, s);
  double *u = random_orthogonal(m, &r), *v = random_orthogonal(n, &r);
  spectral_t out = {calloc((size_t)(m * n), sizeof(double)),
                    calloc((size_t)(m * n), sizeof(double))};
  int k = m < n ? m : n;
  for (int i = 0; i < m; i++)
    for (int j = 0; j < n; j++)
      for (int t = 0; t < k; t++) { /* U(i, t) = u[i + t m], V(j, t) = v[j + t n] */
        out.x[i * n + j] += u[i + t * m] * sigma[t] * v[j + t * n];
        out.polar[i * n + j] += u[i + t * m] * v[j + t * n];
      }
  free(u);
  free(v);
  return out;
}

/* Singular values (descending) of an m x n row-major matrix. */
static void singular_values(const double *x, int m, int n, double *s) {
  double *a = malloc(sizeof(double) * (size_t)(m * n));
  memcpy(a, x, sizeof(double) * (size_t)(m * n)); /* column-major n x m: X^T, same values */
  int lwork = 10 * (m + n) + 64, info = 0, one = 1;
  double *work = malloc(sizeof(double) * (size_t)lwork), dummy = 0;
  dgesvd_("N", "N", &n, &m, a, &n, s, &dummy, &one, &dummy, &one, work, &lwork, &info, 1, 1);
  free(a);
  free(work);
}

static int desc_cmp(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? 1 : x > y ? -1 : 0;
}

/* Run X on P ranks (rows or columns sharded, uneven) and return the result. */
static double *run_ns(const double *x, int m, int n, int P, tpla_shard_t shard,
                      tpla_ns_algorithm_t algo, tpla_ns_preset_t preset, int steps,
                      tpla_dtype_t dt) {
  double *out = calloc((size_t)(m * n), sizeof(double));
  ns_run_t run = {.P = P, .desc = TPLA_NS_DESC_INIT, .m = m, .n = n, .x = x, .out = out};
  run.desc.shard = shard;
  run.desc.preset = preset;
  run.desc.steps = steps;
  run.desc.dtype = dt;
  run.desc.algorithm = algo;
  run.ld_pad = 1;
  split(shard == TPLA_SHARD_ROWS ? m : n, P, true, run.sizes);
  if (ns_run(&run) != 0) {
    free(out);
    return NULL;
  }
  return out;
}

/* After `steps`, every singular value is the composed polynomial of its
 * normalized input value, and all lie in the image of [lo, hi]. */
static int check_spectrum(int m, int n, int P, tpla_shard_t shard, tpla_ns_algorithm_t algo,
                          tpla_ns_preset_t preset, int steps) {
  int k = m < n ? m : n;
  double sigma[128], got[128], want[128], ss = 0.0;
  for (int i = 0; i < k; i++) { /* 0.01 .. 1, times 3.7 */
    sigma[i] = 3.7 * pow(0.01, (double)i / (k - 1));
    ss += sigma[i] * sigma[i];
  }
  spectral_t in = make_matrix(m, n, sigma, seed + (uint64_t)(m * n + P));
  double *x = run_ns(in.x, m, n, P, shard, algo, preset, steps, TPLA_FLOAT32);
  float table[3 * 64];
  double safety = ref_preset_table(preset, steps, table), norm = safety * sqrt(ss) + 1e-7;
  double lo = 1e300, hi = -1e300, a = sigma[k - 1] / norm, b = sigma[0] / norm;
  for (int i = 0; i <= 20000; i++) {
    double v = a + (b - a) * i / 20000.0;
    for (int t = 0; t < steps; t++)
      v = ref_poly(table + 3 * t, v);
    lo = v < lo ? v : lo;
    hi = v > hi ? v : hi;
  }
  for (int i = 0; i < k; i++) {
    double v = sigma[i] / norm;
    for (int t = 0; t < steps; t++)
      v = ref_poly(table + 3 * t, v);
    want[i] = v;
  }
  qsort(want, (size_t)k, sizeof(double), desc_cmp);
  int bad = x == NULL;
  if (!bad)
    singular_values(x, m, n, got);
  double worst = 0.0;
  for (int i = 0; i < k && !bad; i++) {
    double d = fabs(got[i] - want[i]);
    worst = d > worst ? d : worst;
    if (d > 2e-4 * (1.0 + fabs(want[i])) || got[i] < lo - 2e-4 || got[i] > hi + 2e-4) {
      fprintf(stderr, "  sigma[%d] = %.6f, predicted %.6f, interval [%.6f, %.6f]\n", i, got[i],
              want[i], lo, hi);
      bad = 1;
    }
  }
  printf("  %dx%d P=%d preset %d, %d steps: interval [%.4f, %.4f], worst |sigma - p(sigma)| "
         "%.2e\n", m, n, P, preset, steps, lo, hi, worst);
  free(in.x);
  free(in.polar);
  free(x);
  return bad;
}

static void test_singular_values_follow_polynomial(void) {
  int failures = 0;
  failures += check_spectrum(48, 24, 1, TPLA_SHARD_ROWS, TPLA_NS_ALGO_AUTO, TPLA_NS_MUON, 5);
  failures += check_spectrum(48, 24, 3, TPLA_SHARD_ROWS, TPLA_NS_ALGO_GRAM_ALLREDUCE,
                             TPLA_NS_MUON, 5);
  failures += check_spectrum(24, 40, 4, TPLA_SHARD_COLS, TPLA_NS_ALGO_REDISTRIBUTE,
                             TPLA_NS_MUON_SCHEDULE5, 5);
  failures += check_spectrum(24, 40, 2, TPLA_SHARD_ROWS, TPLA_NS_ALGO_REDISTRIBUTE,
                             TPLA_NS_POLAR_EXPRESS, 8);
  failures += check_spectrum(40, 40, 3, TPLA_SHARD_COLS, TPLA_NS_ALGO_GATHER, TPLA_NS_CUBIC, 12);
  failures += check_spectrum(72, 36, 3, TPLA_SHARD_ROWS, TPLA_NS_ALGO_GRAM_SHARDED,
                             TPLA_NS_MUON, 5);
  failures += check_spectrum(30, 44, 2, TPLA_SHARD_ROWS, TPLA_NS_ALGO_GRAM_SHARDED,
                             TPLA_NS_POLAR_EXPRESS, 8); /* redistributed, the 30 x 30 Gram */
  ASSERT_EQ_INT(failures, 0);
}

/* The scalar map of DESIGN.md: Muon's 5 steps send [0.01, 1] to about
 * [0.68, 1.13] (checks the typed-in table and the interval code). */
static void test_muon_interval_of_design(void) {
  float table[15];
  ref_preset_table(TPLA_NS_MUON, 5, table);
  double lo = 1e300, hi = -1e300;
  for (int i = 0; i <= 100000; i++) {
    double v = 0.01 + 0.99 * i / 100000.0;
    for (int t = 0; t < 5; t++)
      v = ref_poly(table + 3 * t, v);
    lo = v < lo ? v : lo;
    hi = v > hi ? v : hi;
  }
  ASSERT_NEAR(lo, 0.68, 0.02);
  ASSERT_NEAR(hi, 1.13, 0.02);
}

/* Converging schedules reach U V^T. */
static int check_polar(int m, int n, int P, tpla_shard_t shard, tpla_ns_preset_t preset,
                       int steps, double tol) {
  int k = m < n ? m : n;
  double sigma[128];
  for (int i = 0; i < k; i++)
    sigma[i] = 2.0 * pow(0.1, (double)i / (k - 1));
  spectral_t in = make_matrix(m, n, sigma, seed + 77 + (uint64_t)m);
  double *x = run_ns(in.x, m, n, P, shard, TPLA_NS_ALGO_AUTO, preset, steps, TPLA_FLOAT32);
  int bad = x == NULL;
  double err = bad ? 1.0 : rel_diff(x, in.polar, (size_t)(m * n)), s[128], spec = 0.0;
  if (!bad) {
    singular_values(x, m, n, s);
    for (int i = 0; i < k; i++)
      spec = fabs(s[i] - 1.0) > spec ? fabs(s[i] - 1.0) : spec;
  }
  printf("  polar %dx%d P=%d preset %d, %d steps: relative Frobenius error %.2e, max |sigma-1| "
         "%.2e\n", m, n, P, preset, steps, err, spec);
  bad = bad || err > tol || spec > tol;
  free(in.x);
  free(in.polar);
  free(x);
  return bad;
}

static void test_converges_to_polar_factor(void) {
  int failures = 0;
  failures += check_polar(40, 24, 1, TPLA_SHARD_ROWS, TPLA_NS_CUBIC, 30, 1e-5);
  failures += check_polar(24, 40, 3, TPLA_SHARD_ROWS, TPLA_NS_CUBIC, 30, 1e-5);
  failures += check_polar(40, 24, 4, TPLA_SHARD_COLS, TPLA_NS_CUBIC, 30, 1e-5);
  failures += check_polar(32, 32, 2, TPLA_SHARD_COLS, TPLA_NS_POLAR_EXPRESS, 12, 1e-4);
  ASSERT_EQ_INT(failures, 0);
}

/* Half inputs: within the dtype's rounding of the fp32 run on the same
 * (rounded) input, distributed or not. */
static void test_half_precision(void) {
  static const tpla_dtype_t dts[] = {TPLA_BFLOAT16, TPLA_FLOAT16};
  static const double tol[] = {5e-2, 8e-3}; /* ~ 13-16 units of rounding (Muon amplifies) */
  for (int d = 0; d < 2; d++) {
    double *x = random_matrix(40, 24, dts[d], seed + 5 + (uint64_t)d);
    double *f32 = run_ns(x, 40, 24, 1, TPLA_SHARD_ROWS, TPLA_NS_ALGO_AUTO, TPLA_NS_MUON, 5,
                         TPLA_FLOAT32);
    double *one = run_ns(x, 40, 24, 1, TPLA_SHARD_ROWS, TPLA_NS_ALGO_AUTO, TPLA_NS_MUON, 5,
                         dts[d]);
    double *rows = run_ns(x, 40, 24, 3, TPLA_SHARD_ROWS, TPLA_NS_ALGO_GRAM_ALLREDUCE,
                          TPLA_NS_MUON, 5, dts[d]);
    double *cols = run_ns(x, 40, 24, 4, TPLA_SHARD_COLS, TPLA_NS_ALGO_REDISTRIBUTE,
                          TPLA_NS_MUON, 5, dts[d]);
    ASSERT_TRUE(f32 && one && rows && cols);
    double e1 = rel_diff(one, f32, 960), e2 = rel_diff(rows, f32, 960);
    double e3 = rel_diff(cols, f32, 960), e4 = rel_diff(rows, one, 960);
    printf("  %s vs fp32: 1 rank %.2e, rows %.2e, cols %.2e; rows vs 1 rank %.2e\n",
           tpla_dtype_name(dts[d]), e1, e2, e3, e4);
    ASSERT_LE(e1, tol[d]);
    ASSERT_LE(e2, tol[d]);
    ASSERT_LE(e3, tol[d]);
    ASSERT_LE(e4, tol[d]);
    free(x);
    free(f32);
    free(one);
    free(rows);
    free(cols);
  }
}

/* A low-stable-rank input (one dominant singular value over a floor at a
 * tenth of it, as a momentum matrix) with a bf16 Gram and Polar Express: the
 * Gram iteration, which forms G_1 = P_0 G P_0 from the rounded G, pushes the
 * floor past Polar Express's overshoot and diverges (3e3 to 4e8 from the
 * float64 iteration in 20 seeds; in an emulation 20 of 144 inputs 4x16 to
 * 64x256 did, with Muon's tables none: docs/ALGORITHMS.md). AUTO must take
 * the X iteration there, on one rank and on two (the distributed plan
 * resolves its own; the old rule fails both); a forced GRAM still runs (the
 * caller's choice); Muon's table, and Polar Express with an fp32 Gram, keep
 * the Gram iteration AUTO finds cheaper (review 104: nothing pinned that). */
static void test_half_gram_steep_table_keeps_x(void) {
  enum { M = 16, N = 64 };
  double sigma[M];
  rng_t r;
  rng_seed(&r, seed + 31);
  for (int i = 0; i < M; i++)
    sigma[i] = i == 0 ? 1.0 : 0.1 * (1.0 + 0.05 * rng_uniform(&r));
  spectral_t sp = make_matrix(M, N, sigma, seed + 32);
  float table[3 * 5];
  double safety = ref_preset_table(TPLA_NS_POLAR_EXPRESS, 5, table);
  double *ref = malloc(sizeof(double) * M * N);
  for (int i = 0; i < M * N; i++) /* the float64 iteration of the bf16-rounded input */
    ref[i] = tpla_load_elem(&(uint16_t){tpla_float_to_bf16((float)sp.x[i])}, TPLA_BFLOAT16, 0);
  double *x = malloc(sizeof(double) * M * N);
  memcpy(x, ref, sizeof(double) * M * N);
  ref_ns(ref, M, N, table, 5, safety, 1e-7);
  static const char *what[] = {"Polar Express, AUTO", "Polar Express, AUTO, 2 ranks",
                               "Polar Express, GRAM forced", "Muon, AUTO",
                               "Polar Express, fp32 Gram, AUTO"};
  for (int c = 0; c < 5; c++) {
    double *out = calloc(M * N, sizeof(double));
    ns_run_t run = {.P = c == 1 ? 2 : 1, .desc = TPLA_NS_DESC_INIT, .m = M, .n = N, .x = x,
                    .out = out};
    run.desc.dtype = TPLA_BFLOAT16;
    run.desc.gram_dtype = c == 4 ? TPLA_FLOAT32 : TPLA_BFLOAT16; /* the rule is the half Gram's */
    run.desc.preset = c == 3 ? TPLA_NS_MUON : TPLA_NS_POLAR_EXPRESS;
    run.desc.iteration = c == 2 ? TPLA_NS_ITERATE_GRAM : TPLA_NS_ITERATE_AUTO;
    split(M, run.P, false, run.sizes);
    ASSERT_EQ_INT(ns_run(&run), 0);
    double e = rel_diff(out, ref, M * N);
    printf("  %s: %s iteration, %.3e from Polar Express's float64 iteration\n", what[c],
           run.iter[0] == TPLA_NS_ITERATE_X ? "X" : "GRAM", e);
    for (int r = 0; r < run.P; r++) /* the distributed plan's own resolution, on every rank */
      ASSERT_EQ_INT(run.iter[r], c < 2 ? TPLA_NS_ITERATE_X : TPLA_NS_ITERATE_GRAM);
    if (c < 2 || c == 4)
      ASSERT_LE(e, 0.15); /* 20 seeds: X in bf16 2.9-5.9e-2, GRAM, fp32 Gram 3.7-7.4e-2 */
    free(out);
  }
  free(x), free(ref), free(sp.x), free(sp.polar);
}

/* A zero matrix (a frozen layer's gradient) comes back as zeros on every
 * algorithm, also with eps = 0, where the normalization divides 0 by 0. */
static void test_zero_matrix_gives_zeros(void) {
  static const tpla_ns_algorithm_t algos[] = {TPLA_NS_ALGO_AUTO, TPLA_NS_ALGO_GRAM_SHARDED,
                                              TPLA_NS_ALGO_GATHER};
  double *zero = calloc(12 * 7, sizeof(double));
  for (int e = 0; e < 2; e++)
    for (int P = 1; P <= 2; P++)
      for (int a = 0; a < 3; a++) {
        double *out = calloc(12 * 7, sizeof(double));
        ns_run_t run = {.P = P, .desc = TPLA_NS_DESC_INIT, .m = 12, .n = 7, .x = zero,
                        .out = out, .ld_pad = 2};
        run.desc.eps = e == 0 ? 0.0f : 1e-7f;
        run.desc.algorithm = algos[a];
        for (int i = 0; i < 12 * 7; i++)
          out[i] = NAN; /* every element must be written, and be 0 */
        split(12, P, true, run.sizes);
        ASSERT_EQ_INT(ns_run(&run), 0);
        int bad = 0;
        for (int i = 0; i < 12 * 7; i++)
          bad += out[i] != 0.0;
        if (bad)
          printf("  eps %g, P=%d, algorithm %d: %d of 84 elements not 0\n", (double)run.desc.eps,
                 P, (int)algos[a], bad);
        ASSERT_EQ_INT(bad, 0);
        free(out);
      }
  free(zero);
}
#endif

int main(void) {
#ifdef TPLA_HAVE_LAPACK
  seed = fresh_seed("test_ns_math");
  TEST(test_zero_matrix_gives_zeros);
  TEST(test_muon_interval_of_design);
  TEST(test_singular_values_follow_polynomial);
  TEST(test_converges_to_polar_factor);
  TEST(test_half_precision);
  TEST(test_half_gram_steep_table_keeps_x);
#else
  printf("skip test_ns_math: built without LAPACK\n");
  return 77;
#endif
  return test_summary();
}
