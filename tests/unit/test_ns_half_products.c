/*
 * test_ns_half_products.c - the s x s products of an fp32 Gram of a half
 * input run in fp16, on copies scaled by powers of two (ns_products HALF:
 * matrices one rank iterates whole, s > 256). The bounds the scales come
 * from hold against dense grids; plans of both iterations stay as close to
 * the float64 iteration as their rounding allows, also when the table moves
 * the spectrum far below fp16's normal range or past the bounds HALF takes
 * (2^8: those products, and a product one of whose operands is past it, run
 * in TF32, fp32 on the host), and with safety factors below 1 (whose bounds
 * grow loose); batches scale for each matrix's own safety, a group for the
 * largest spectrum among its members, an owner for its matrix's.
 *
 *   ./test_ns_half_products   (CTest: test_ns_half_products)
 */
#include "ns.h"
#include "test_ns_common.h"

enum { S = 264, L = 288 }; /* s past NS_TF32_MIN_SIDE: HALF products */

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
  ASSERT_TRUE(ns_half_scale(0x1p8) == 0x1p4f);
  ASSERT_TRUE(ns_half_scale(0x1p8 * 1.01) == 0.0f); /* past 2^8: TF32 instead */
  ASSERT_TRUE(ns_half_scale(INFINITY) == 0.0f);
  ASSERT_TRUE(ns_half_scale(NAN) == 0.0f);
}

/* One rank, S x L, fp32 Gram, a user table: the distance of the result from
 * ref (the float64 iteration of the rounded input with the same safety). */
static double run_vs_float64(const double *x, const double *ref, tpla_dtype_t dt,
                             tpla_ns_iteration_t iter, const float *table, float safety) {
  double *out = calloc(S * L, sizeof(double));
  ns_run_t run = {.P = 1, .desc = TPLA_NS_DESC_INIT, .m = S, .n = L, .x = x, .out = out};
  run.desc.dtype = dt;
  run.desc.gram_dtype = TPLA_FLOAT32;
  run.desc.preset = TPLA_NS_USER;
  run.desc.coefficients = table;
  run.desc.ncoefficients = 15;
  run.desc.steps = 5;
  run.desc.safety = safety;
  run.desc.iteration = iter;
  split(S, 1, false, run.sizes);
  double e = INFINITY; /* failed, or another iteration than asked */
  if (ns_run(&run) == 0 && run.iter[0] == iter)
    e = rel_diff(out, ref, S * L);
  free(out);
  return e;
}

/* 5 steps of: Muon; Muon with steps 2-3 as f p(x) and p(x / f), p Muon's
 * step (their composition is two Muon steps), f = 2^-10 (the Gram down to
 * ~2^-28: unscaled fp16 copies lose it) or 2^6 (G_1's bound past 2^8: TF32,
 * beside scaled operands in the same segment); the step pair (1, 2^51, 0),
 * (2^-42, 0, 0) then Muon (Z_0's bound 2^51 against G's 1: mixed products,
 * bf16 only: an fp16 X overflows); Muon with safety 0.6 and 0.3 (the bounds
 * pass 2^8 where the spectrum stays near 1); fp16 inputs the first two.
 * Even step indices put the scaling in a Gram segment's first step, odd
 * ones in its second. */
static void test_plans_near_float64(void) {
  ASSERT_EQ_INT(ns_products(TPLA_BFLOAT16, TPLA_FLOAT32, S, true),
                TPLA_NS_HALF_PRODUCTS ? NS_PRODUCTS_HALF : NS_PRODUCTS_TF32);
  const float m[3] = {3.4445f, -4.775f, 2.0315f};
  enum { NT = 6 };
  float tables[NT][15];
  for (int t = 0; t < NT; t++)
    for (int k = 0; k < 5; k++)
      memcpy(tables[t] + 3 * k, m, sizeof m);
  for (int t = 1; t < 3; t++) {
    double f = t == 1 ? 0x1p-10 : 0x1p6;
    float *tb = tables[t] + 6;
    tb[0] = (float)(f * m[0]), tb[1] = (float)(f * m[1]), tb[2] = (float)(f * m[2]);
    tb[3] = (float)(m[0] / f), tb[4] = (float)(m[1] / (f * f * f));
    tb[5] = (float)(m[2] / (f * f * f * f * f));
  }
  const float mixed[6] = {1.0f, 0x1p51f, 0.0f, 0x1p-42f, 0.0f, 0.0f};
  memcpy(tables[3], mixed, sizeof mixed);
  static const float safety[NT] = {1.0f, 1.0f, 1.0f, 1.0f, 0.6f, 0.3f};
  static const char *what[NT] = {"Muon", "steps 2-3 scaled by 2^-10", "steps 2-3 scaled by 2^6",
                                 "Z_0 bound 2^51 (mixed)", "Muon, safety 0.6",
                                 "Muon, safety 0.3"};
  static const tpla_dtype_t dts[] = {TPLA_BFLOAT16, TPLA_FLOAT16};
  static const double tol[] = {2.5e-2, 6e-3}; /* observed: 6.6e-3-1.5e-2 (bf16), 1.1-2.6e-3 */
  double *ref = malloc(sizeof(double) * S * L);
  for (int d = 0; d < 2; d++) {
    double *x = random_matrix(S, L, dts[d], 11 + (uint64_t)d);
    for (int t = 0; t < (dts[d] == TPLA_BFLOAT16 ? NT : 2); t++) { /* fp16: the first two */
      memcpy(ref, x, sizeof(double) * S * L);
      ref_ns(ref, S, L, tables[t], 5, safety[t], 1e-7);
      for (int g = 0; g < 2; g++) {
        tpla_ns_iteration_t it = g ? TPLA_NS_ITERATE_GRAM : TPLA_NS_ITERATE_X;
        double e = run_vs_float64(x, ref, dts[d], it, tables[t], safety[t]);
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
  int owner[2][2]; /* per rank: each rank's answer */
} batch_t;

static int batch_body(tpla_ctx_t ctx, int rank, int nranks, void *arg) {
  batch_t *b = arg;
  int64_t rows[8], off = 0;
  split(S, nranks, false, rows);
  for (int r = 0; r < rank; r++)
    off += rows[r];
  tpla_ns_desc_t d[2];
  tpla_matrix_t xs[2];
  for (int i = 0; i < 2; i++) {
    d[i] = (tpla_ns_desc_t)TPLA_NS_DESC_INIT;
    d[i].local_rows = rows[rank], d[i].local_cols = L;
    d[i].dtype = TPLA_BFLOAT16, d[i].gram_dtype = TPLA_FLOAT32;
    d[i].preset = TPLA_NS_USER, d[i].coefficients = b->table, d[i].ncoefficients = 15;
    d[i].steps = 5, d[i].safety = b->safety[i], d[i].iteration = b->iteration;
    if (nranks > 1)
      d[i].algorithm = TPLA_NS_ALGO_LOCAL; /* whole on an owner */
    xs[i] = (tpla_matrix_t){malloc(sizeof(uint16_t) * rows[rank] * L), rows[rank], L, L,
                            TPLA_BFLOAT16};
    for (int k = 0; k < rows[rank] * L; k++)
      tpla_store_elem(xs[i].data, TPLA_BFLOAT16, (size_t)k, b->x[i][off * L + k]);
  }
  tpla_ns_batch_plan_t plan = NULL;
  tpla_status_t s = tpla_ns_batch_plan_create(&plan, ctx, 2, d);
  for (int i = 0; i < 2 && s == TPLA_SUCCESS; i++)
    s = tpla_ns_batch_plan_owner(plan, i, &b->owner[rank][i]);
  if (s == TPLA_SUCCESS)
    s = tpla_ns_batch_execute(plan, xs, NULL);
  if (s != TPLA_SUCCESS)
    fprintf(stderr, "  %s: %s\n", tpla_status_string(s), tpla_last_error());
  for (int i = 0; i < 2; i++) {
    for (int k = 0; k < rows[rank] * L && s == TPLA_SUCCESS; k++)
      b->out[i][off * L + k] = tpla_load_elem(xs[i].data, TPLA_BFLOAT16, (size_t)k);
    free(xs[i].data);
  }
  tpla_ns_batch_plan_destroy(plan);
  return s != TPLA_SUCCESS;
}

/* One plan (one rank) with safety 1/16 on a matrix with one heavy row (half
 * of its Frobenius norm in the top singular value, so the normalized one is
 * ~8 and the Gram's (0, 0) entry near its spectral norm); the table's first
 * step divides by 16. Scaled for safety 1, that entry (~2^-2 after step 0,
 * ~2^6 before) would overflow the fp16 copy by 2^2 or more. */
static void test_plan_scales_for_its_safety(void) {
  float table[15] = {1.0f / 16.0f, 0.0f, 0.0f};
  for (int k = 1; k < 5; k++)
    table[3 * k] = 3.4445f, table[3 * k + 1] = -4.775f, table[3 * k + 2] = 2.0315f;
  double *x = random_matrix(S, L, TPLA_BFLOAT16, 31), *ref = malloc(sizeof(double) * S * L);
  for (int j = 0; j < L; j++) /* row 0 = 9.4 v, v the first row: ~half the norm */
    x[j] = tpla_load_elem(&(uint16_t){tpla_float_to_bf16((float)(9.4 * x[j]))}, TPLA_BFLOAT16, 0);
  memcpy(ref, x, sizeof(double) * S * L);
  ref_ns(ref, S, L, table, 5, 1.0 / 16.0, 1e-7);
  for (int g = 0; g < 2; g++) {
    tpla_ns_iteration_t it = g ? TPLA_NS_ITERATE_GRAM : TPLA_NS_ITERATE_X;
    double e = run_vs_float64(x, ref, TPLA_BFLOAT16, it, table, 1.0f / 16.0f);
    printf("  safety 1/16, a heavy row, %s iteration: %.3e from float64\n", g ? "GRAM" : "X", e);
    ASSERT_LE(e, 2.5e-2);
  }
  free(x), free(ref);
}

/* A batch of two same-shape random matrices with safety 1 and 1/256: the
 * second's normalized spectrum reaches ~30, and the table's first step
 * divides by 256. On one rank they run as one group; on two, each whole on
 * its own owner. Scaled for safety 1, the second's Gram would overflow its
 * fp16 copy after step 0 (entries ~2^-8 scaled by 2^28). */
static void test_batch_scales_for_each_safety(void) {
  float table[15] = {1.0f / 256.0f, 0.0f, 0.0f};
  for (int k = 1; k < 5; k++)
    table[3 * k] = 3.4445f, table[3 * k + 1] = -4.775f, table[3 * k + 2] = 2.0315f;
  double *x[2] = {random_matrix(S, L, TPLA_BFLOAT16, 21), random_matrix(S, L, TPLA_BFLOAT16, 22)};
  double *ref[2];
  for (int i = 0; i < 2; i++) {
    ref[i] = malloc(sizeof(double) * S * L);
    memcpy(ref[i], x[i], sizeof(double) * S * L);
    ref_ns(ref[i], S, L, table, 5, i == 0 ? 1.0 : 1.0 / 256.0, 1e-7);
  }
  batch_t b = {table, {1.0f, 1.0f / 256.0f}, {x[0], x[1]}, {0}, TPLA_NS_ITERATE_X, {{0}}};
  for (int P = 1; P <= 2; P++)
    for (int g = 0; g < 2; g++) {
      b.iteration = g ? TPLA_NS_ITERATE_GRAM : TPLA_NS_ITERATE_X;
      for (int i = 0; i < 2; i++)
        b.out[i] = calloc(S * L, sizeof(double));
      ASSERT_EQ_INT(run_host_ranks(P, batch_body, &b), 0);
      if (P == 2) /* whole on two owners: no group; both ranks say so */
        ASSERT_TRUE(b.owner[0][0] >= 0 && b.owner[0][1] >= 0 && b.owner[0][0] != b.owner[0][1] &&
                    b.owner[1][0] == b.owner[0][0] && b.owner[1][1] == b.owner[0][1]);
      for (int i = 0; i < 2; i++) {
        double e = rel_diff(b.out[i], ref[i], S * L);
        printf("  batch on %d rank(s), %s iteration, safety %g: %.3e from float64\n", P,
               g ? "GRAM" : "X", (double)b.safety[i], e);
        ASSERT_LE(e, 2.5e-2);
        free(b.out[i]);
      }
    }
  free(x[0]), free(x[1]), free(ref[0]), free(ref[1]);
}

int main(void) {
  TEST(test_bounds_hold);
  TEST(test_plans_near_float64);
  TEST(test_plan_scales_for_its_safety);
  TEST(test_batch_scales_for_each_safety);
  return test_summary();
}
