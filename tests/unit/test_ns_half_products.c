/*
 * test_ns_half_products.c - the s x s products of an fp32 Gram of a half
 * input run in fp16, on copies scaled by powers of two (ns_products HALF:
 * matrices one rank iterates whole, s > 256). The bounds the scales come
 * from hold against dense grids; plans of both iterations stay as close to
 * the float64 iteration as their rounding allows, also when the table moves
 * the spectrum past fp16's largest value (2^16) or below its normal range
 * (2^-14) and back, or so far (2^27) that no scale fits and the products
 * fall back to TF32 (fp32 on the host); a batch group whose members have different safety
 * factors scales for the largest spectrum among them.
 *
 *   ./test_ns_half_products   (CTest: test_ns_half_products)
 */
#include "ns.h"
#include "test_ns_common.h"

enum { S = 264, L = 320 }; /* s past NS_TF32_MIN_SIDE: HALF products */

/* The largest |f| on 100001 points of [0, bound]. */
static double grid_sup(double (*f)(const float *, double), const float *coef, double bound) {
  double best = 0.0;
  for (int i = 0; i <= 100000; i++)
    best = fmax(best, fabs(f(coef, bound * i / 100000.0)));
  return best;
}
static double quad_at(const float *bc, double y) { return y * (bc[0] + bc[1] * y); }

static void test_bounds_hold(void) {
  float tables[64][3] = {{3.4445f, -4.775f, 2.0315f}, {8.287212f, -23.595887f, 17.300388f},
                         {1.5f, -0.5f, 0.0f},         {2.0f, 0.0f, 0.0f},
                         {0.0f, 0.0f, 0.0f},          {-1.0f, 3.0f, -2.0f}};
  rng_t r;
  rng_seed(&r, 7);
  for (int t = 6; t < 64; t++)
    for (int j = 0; j < 3; j++)
      tables[t][j] = (float)(10.0 * (2.0 * rng_uniform(&r) - 1.0));
  static const double bounds[] = {0.3, 1.0, 1.3, 3.0};
  for (int t = 0; t < 64; t++)
    for (int b = 0; b < 4; b++) {
      double sup = ns_step_sup(tables[t], bounds[b]), grid = grid_sup(ref_poly, tables[t], bounds[b]);
      ASSERT_TRUE(grid <= sup * (1.0 + 1e-12) + 1e-300); /* a bound */
      ASSERT_TRUE(sup <= grid * (1.0 + 1e-6) + 1e-300);  /* and the least one */
      const float bc[2] = {tables[t][1], tables[t][2]};
      sup = ns_quad_sup(bc[0], bc[1], bounds[b]);
      grid = grid_sup(quad_at, bc, bounds[b]);
      ASSERT_TRUE(grid <= sup * (1.0 + 1e-12) + 1e-300);
      ASSERT_TRUE(sup <= grid * (1.0 + 1e-6) + 1e-300);
    }
  ASSERT_TRUE(ns_half_scale(1.0) == 0x1p12f);
  ASSERT_TRUE(ns_half_scale(1.5) == 0x1p11f);
  ASSERT_TRUE(ns_half_scale(0x1p-100) == 0x1p40f); /* at most 2^40 either way */
  ASSERT_TRUE(ns_half_scale(0.0) == 0x1p40f);
  ASSERT_TRUE(ns_half_scale(0x1p52) == 0x1p-40f);
  ASSERT_TRUE(ns_half_scale(0x1p53) == 0.0f); /* past 2^52: TF32 instead */
  ASSERT_TRUE(ns_half_scale(INFINITY) == 0.0f);
  ASSERT_TRUE(ns_half_scale(NAN) == 0.0f);
}

/* One rank, S x L, fp32 Gram, a user table: the distance of the result from
 * ref (the float64 iteration of the rounded input with the same safety). */
static double run_vs_float64(const double *x, const double *ref, tpla_dtype_t dt,
                             tpla_ns_iteration_t iter, const float *table, int steps) {
  double *out = calloc(S * L, sizeof(double));
  ns_run_t run = {.P = 1, .desc = TPLA_NS_DESC_INIT, .m = S, .n = L, .x = x, .out = out};
  run.desc.dtype = dt;
  run.desc.gram_dtype = TPLA_FLOAT32;
  run.desc.preset = TPLA_NS_USER;
  run.desc.coefficients = table;
  run.desc.ncoefficients = 3 * (size_t)steps;
  run.desc.steps = steps;
  run.desc.safety = 1.0f;
  run.desc.iteration = iter;
  split(S, 1, false, run.sizes);
  double e = INFINITY; /* failed, or another iteration than asked */
  if (ns_run(&run) == 0 && run.iter[0] == iter)
    e = rel_diff(out, ref, S * L);
  free(out);
  return e;
}

/* Muon's 5 steps, and two tables that take the spectrum out of fp16's range
 * for the last step, once Muon has brought it near 1 (where that step's
 * c x^5 term matters): step 3 scales it by 2^8 (the Gram's diagonal to
 * ~2^16, past 65504) or by 2^-10 (to ~2^-20, subnormal), or by 2^27 (a
 * bound past 2^52: no scale, TF32), step 4 is Muon's step on the scaled
 * values. In float64 all three give Muon's result;
 * unscaled fp16 copies would hold infinities or lose most bits of the Gram. */
static void test_plans_near_float64(void) {
  ASSERT_EQ_INT(ns_products(TPLA_BFLOAT16, TPLA_FLOAT32, S, true),
                TPLA_NS_HALF_PRODUCTS ? NS_PRODUCTS_HALF : NS_PRODUCTS_TF32);
  const float m[3] = {3.4445f, -4.775f, 2.0315f};
  float tables[4][15];
  for (int t = 0; t < 4; t++)
    for (int k = 0; k < 5; k++)
      memcpy(tables[t] + 3 * k, m, sizeof m);
  for (int t = 1; t < 4; t++) {
    double f = t == 1 ? 0x1p8 : t == 2 ? 0x1p-10 : 0x1p27;
    float *tb = tables[t] + 9;
    tb[0] = (float)f, tb[1] = 0.0f, tb[2] = 0.0f;
    tb[3] = (float)(m[0] / f), tb[4] = (float)(m[1] / (f * f * f));
    tb[5] = (float)(m[2] / (f * f * f * f * f));
  }
  static const char *what[] = {"Muon", "Muon, spectrum x2^8 at step 3",
                               "Muon, spectrum x2^-10 at step 3",
                               "Muon, spectrum x2^27 at step 3 (no scale: TF32)"};
  static const tpla_dtype_t dts[] = {TPLA_BFLOAT16, TPLA_FLOAT16};
  static const double tol[] = {4e-2, 8e-3}; /* observed: 6.6e-3-1.0e-2 (bf16), 1.1-2.5e-3 (fp16) */
  double *ref = malloc(sizeof(double) * S * L);
  for (int d = 0; d < 2; d++) {
    double *x = random_matrix(S, L, dts[d], 11 + (uint64_t)d);
    for (int t = 0; t < (dts[d] == TPLA_BFLOAT16 ? 4 : 3); t++) { /* 2^27 X: past fp16 */
      memcpy(ref, x, sizeof(double) * S * L);
      ref_ns(ref, S, L, tables[t], 5, 1.0, 1e-7);
      for (int g = 0; g < 2; g++) {
        tpla_ns_iteration_t it = g ? TPLA_NS_ITERATE_GRAM : TPLA_NS_ITERATE_X;
        double e = run_vs_float64(x, ref, dts[d], it, tables[t], 5);
        printf("  %s, %s iteration, %s: %.3e from float64\n", tpla_dtype_name(dts[d]),
               g ? "GRAM" : "X", what[t], e);
        ASSERT_LE(e, tol[d]);
      }
    }
    free(x);
  }
  free(ref);
}

typedef struct {
  const float *table;
  float safety[2];
  const double *x[2];
  double *out[2];
  tpla_ns_iteration_t iteration;
} batch_t;

static int batch_body(tpla_ctx_t ctx, int rank, int nranks, void *arg) {
  (void)rank, (void)nranks;
  batch_t *b = arg;
  tpla_ns_desc_t d[2];
  tpla_matrix_t xs[2];
  for (int i = 0; i < 2; i++) {
    d[i] = (tpla_ns_desc_t)TPLA_NS_DESC_INIT;
    d[i].local_rows = S, d[i].local_cols = L;
    d[i].dtype = TPLA_BFLOAT16, d[i].gram_dtype = TPLA_FLOAT32;
    d[i].preset = TPLA_NS_USER, d[i].coefficients = b->table, d[i].ncoefficients = 15;
    d[i].steps = 5, d[i].safety = b->safety[i], d[i].iteration = b->iteration;
    xs[i] = (tpla_matrix_t){malloc(sizeof(uint16_t) * S * L), S, L, L, TPLA_BFLOAT16};
    for (int k = 0; k < S * L; k++)
      tpla_store_elem(xs[i].data, TPLA_BFLOAT16, (size_t)k, b->x[i][k]);
  }
  tpla_ns_batch_plan_t plan = NULL;
  tpla_status_t s = tpla_ns_batch_plan_create(&plan, ctx, 2, d);
  if (s == TPLA_SUCCESS)
    s = tpla_ns_batch_execute(plan, xs, NULL);
  if (s != TPLA_SUCCESS)
    fprintf(stderr, "  %s: %s\n", tpla_status_string(s), tpla_last_error());
  for (int i = 0; i < 2; i++) {
    for (int k = 0; k < S * L && s == TPLA_SUCCESS; k++)
      b->out[i][k] = tpla_load_elem(xs[i].data, TPLA_BFLOAT16, (size_t)k);
    free(xs[i].data);
  }
  tpla_ns_batch_plan_destroy(plan);
  return s != TPLA_SUCCESS;
}

/* A batch of two same-shape random matrices (one group, one iteration),
 * safety 1 and 1/256: the second's normalized spectrum reaches ~30, and the
 * table's first step divides by 256. Scaled for the first member's bound,
 * the second's Gram would overflow its fp16 copy (entries ~2^-8 scaled by
 * 2^28 after step 0, ~2^8 by 2^12 before it). */
static void test_batch_group_takes_largest_spectrum(void) {
  float table[15] = {1.0f / 256.0f, 0.0f, 0.0f};
  for (int k = 1; k < 5; k++)
    table[3 * k] = 3.4445f, table[3 * k + 1] = -4.775f, table[3 * k + 2] = 2.0315f;
  double *x[2] = {random_matrix(S, L, TPLA_BFLOAT16, 21), random_matrix(S, L, TPLA_BFLOAT16, 22)};
  batch_t b = {table, {1.0f, 1.0f / 256.0f}, {x[0], x[1]}, {0}, TPLA_NS_ITERATE_X};
  for (int g = 0; g < 2; g++) {
    b.iteration = g ? TPLA_NS_ITERATE_GRAM : TPLA_NS_ITERATE_X;
    for (int i = 0; i < 2; i++)
      b.out[i] = calloc(S * L, sizeof(double));
    ASSERT_EQ_INT(run_host_ranks(1, batch_body, &b), 0);
    for (int i = 0; i < 2; i++) {
      double *ref = malloc(sizeof(double) * S * L);
      memcpy(ref, x[i], sizeof(double) * S * L);
      ref_ns(ref, S, L, table, 5, b.safety[i], 1e-7);
      double e = rel_diff(b.out[i], ref, S * L);
      printf("  batch, %s iteration, safety %g: %.3e from float64\n", g ? "GRAM" : "X",
             (double)b.safety[i], e);
      ASSERT_LE(e, 4e-2);
      free(ref), free(b.out[i]);
    }
  }
  free(x[0]), free(x[1]);
}

int main(void) {
  TEST(test_bounds_hold);
  TEST(test_plans_near_float64);
  TEST(test_batch_group_takes_largest_spectrum);
  return test_summary();
}
