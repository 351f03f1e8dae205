/*
 * test_overlap_fp8.c - FP8 AllGather+GEMM, GEMM+ReduceScatter and
 * GEMM+AllReduce on the host executor (FP8 emulated): 1..4 ranks whose A
 * and B scales all differ (so a rank's scale must travel with its gathered
 * rows), E4M3 x E4M3 and E5M2 x E4M3, op(B) = T and N (the plan transposes
 * B per call), PEER, SENDRECV and SERIAL, uneven and empty slices, against
 * a float64 reference on the dequantized inputs; d_amax equals max |D|; the
 * gathered view keeps the FP8 bytes and every rank's scale; the even split
 * deals FP8 rows in 16-row blocks. Then the FP8 argument errors, which leave
 * D untouched.
 */
#include "test_overlap_common.h"

static uint64_t seed;

static void make_case(ocase_t *c, oc_kind_t kind, int P, int v) {
  memset(c, 0, sizeof *c);
  c->kind = kind;
  c->P = P;
  c->seed = seed + (uint64_t)(1000 * P + 17 * v + 5 * kind);
  c->alpha = 1.0f;
  c->calls = 2;
  c->dtype = TPLA_FLOAT8_E4M3;
  c->d_dtype = TPLA_BFLOAT16;
  c->op_b = TPLA_OP_T;
  c->mode = TPLA_OVERLAP_OVERLAP;
  c->transport = TPLA_TRANSPORT_PEER;
  c->chunks = 3;
  int64_t rows[4] = {7, 5, 9, 6}, k = 32, n = 16;
  switch (v) {
  case 0: /* E4M3, PEER, op T, bf16 out, three chunks */
    break;
  case 1: /* E5M2 gradients x E4M3 weights, op N (B transposed), SENDRECV, fp32 out, bias, beta */
    c->dtype = TPLA_FLOAT8_E5M2, c->d_dtype = TPLA_FLOAT32, c->op_b = TPLA_OP_N;
    c->transport = TPLA_TRANSPORT_SENDRECV, c->bias = 1, c->beta = 1.0f, c->chunks = 2;
    c->pad = 16;
    break;
  case 2: /* the serial reference mode, op N, fp16 out */
    c->mode = TPLA_OVERLAP_SERIAL, c->op_b = TPLA_OP_N, c->d_dtype = TPLA_FLOAT16;
    c->alpha = 0.5f;
    break;
  default: /* uneven slices with an empty one, automatic chunks, one call */
    c->chunks = 0, c->calls = 1;
    rows[0] = 0, rows[1] = 11, rows[2] = 3, rows[3] = 13;
    break;
  }
  c->m = 0;
  for (int r = 0; r < P; r++) {
    c->rows[r] = rows[r];
    c->k[r] = kind == OC_AG ? k : 16 * (r + 1);
    c->n[r] = n;
    c->m += rows[r];
  }
  if (c->m == 0)
    c->rows[0] = 4, c->m = 4;
}

static void run_kind(oc_kind_t kind) {
  int failures = 0;
  for (int P = 1; P <= 4; P++)
    for (int v = 0; v < 4; v++) {
      ocase_t c;
      make_case(&c, kind, P, v);
      failures += oc_run_case(&c, NULL);
    }
  ASSERT_EQ_INT(failures, 0);
}

/* The even split of GEMM+RS (local_rows -1) and GEMM+AR deals FP8 rows in 16-row blocks when
 * m allows (Hopper's FP8 GEMMs take row slices in multiples of 16): 928 rows on 4 ranks are
 * 240, 240, 224, 224, where bf16 gets 232 each and FP8 with m = 930 gets 233, 233, 232, 232.
 * The slices come from the plans' info; the outputs are checked as in every case. */
static void test_fp8_even_split_in_16_row_units(void) {
  static const struct {
    tpla_dtype_t dtype;
    int64_t m, rows[4];
  } want[] = {{TPLA_FLOAT8_E4M3, 928, {240, 240, 224, 224}},
              {TPLA_BFLOAT16, 928, {232, 232, 232, 232}},
              {TPLA_FLOAT8_E4M3, 930, {233, 233, 232, 232}}};
  for (int kind = OC_RS; kind <= OC_AR; kind++)
    for (size_t w = 0; w < sizeof want / sizeof want[0]; w++) {
      ocase_t c;
      make_case(&c, (oc_kind_t)kind, 4, 0);
      c.dtype = c.d_dtype = want[w].dtype;
      if (oc_fp8(c.dtype))
        c.d_dtype = TPLA_BFLOAT16;
      c.m = want[w].m;
      for (int r = 0; r < 4; r++)
        c.rows[r] = -1;
      orun_t run;
      ASSERT_EQ_INT(oc_run_case(&c, &run), 0);
      int64_t offset = 0;
      for (int r = 0; r < 4; r++) {
        ASSERT_EQ_INT(run.r[r].info.rows, want[w].rows[r]);
        ASSERT_EQ_INT(run.r[r].info.row_offset, offset);
        offset += want[w].rows[r];
      }
      oc_free(&run);
    }
}

static void test_fp8_ag_gemm(void) { run_kind(OC_AG); }
static void test_fp8_gemm_rs(void) { run_kind(OC_RS); }
static void test_fp8_gemm_ar(void) { run_kind(OC_AR); }

/* ---- b_version: the transposed B is reused only for the same B ------------------- */

/* Random E4M3 bytes without the NaN codes (0x7f, 0xff). */
static void fill_e4m3(tpla_matrix_t m, uint64_t *state) {
  unsigned char *p = m.data;
  for (int64_t i = 0; i < m.rows * m.ld; i++) {
    *state = *state * 6364136223846793005ull + 1442695040888963407ull;
    unsigned char v = (unsigned char)(*state >> 56);
    p[i] = (v & 0x7f) == 0x7f ? 0x3f : v;
  }
}

typedef struct {
  int failures;
} ver_t;

/* AllGather+GEMM, FP8, op_b N (the plan transposes B), on every rank: the
 * outputs of calls whose B content changed but whose b_version did not
 * equal the previous call's (the staged transpose was reused, as the
 * contract says); a new version, version 0 (also twice in a row), another B
 * pointer or the same pointer with another ld transposes again. Outputs are
 * compared with each other (the products themselves are checked against
 * float64 by run_kind). */
static int version_body(tpla_ctx_t ctx, int rank, int nranks, void *arg) {
  ver_t *e = arg;
  (void)nranks;
  const int64_t rows = 8, k = 32, n = 16;
  tpla_ag_gemm_desc_t desc = TPLA_AG_GEMM_DESC_INIT;
  desc.local_rows = rows, desc.k = k, desc.n = n, desc.op_b = TPLA_OP_N;
  desc.dtype = TPLA_FLOAT8_E4M3, desc.d_dtype = TPLA_FLOAT32;
  tpla_ag_gemm_plan_t plan = NULL;
  if (tpla_ag_gemm_plan_create(&plan, ctx, &desc) != TPLA_SUCCESS) {
    fprintf(stderr, "  rank %d: plan: %s\n", rank, tpla_last_error());
    __atomic_add_fetch(&e->failures, 1, __ATOMIC_RELAXED);
    return 1;
  }
  uint64_t state = seed + (uint64_t)rank;
  tpla_matrix_t a = oc_alloc(rows, k, 0, TPLA_FLOAT8_E4M3);
  tpla_matrix_t b = oc_alloc(k, n, 0, TPLA_FLOAT8_E4M3), b2 = oc_alloc(k, n, 0, TPLA_FLOAT8_E4M3);
  tpla_matrix_t b3 = oc_alloc(k, n, 16, TPLA_FLOAT8_E4M3); /* rows n + 16 apart */
  int64_t m = rows * 2; /* run on 2 ranks */
  size_t dbytes = (size_t)(m * n) * sizeof(float);
  enum { CALLS = 9 };
  float *d[CALLS];
  fill_e4m3(a, &state);
  fill_e4m3(b, &state);
  fill_e4m3(b3, &state);
  static const uint64_t versions[CALLS] = {5, 5, 6, 0, 0, 6, 6, 7, 7};
  for (int i = 0; i < CALLS; i++) {
    if (i == 1 || i == 3 || i == 4) /* new contents in the same B */
      fill_e4m3(b, &state);
    if (i == 6) /* another B with the contents of b */
      memcpy(b2.data, b.data, (size_t)(k * n));
    d[i] = calloc(1, dbytes);
    tpla_matrix_t dv = {d[i], m, n, n, TPLA_FLOAT32};
    tpla_overlap_args_t args = TPLA_OVERLAP_ARGS_INIT;
    args.b_version = versions[i];
    /* 7 and 8: one pointer, read with ld n (dense), then with its own ld n + 16 */
    tpla_matrix_t bv = i == 6 ? b2 : i >= 7 ? b3 : b;
    if (i == 7)
      bv.ld = n;
    if (tpla_ag_gemm(plan, dv, a, bv, &args, NULL) != TPLA_SUCCESS) {
      fprintf(stderr, "  rank %d call %d: %s\n", rank, i, tpla_last_error());
      __atomic_add_fetch(&e->failures, 1, __ATOMIC_RELAXED);
    }
  }
  bool same[CALLS];
  for (int i = 1; i < CALLS; i++)
    same[i] = memcmp(d[i], d[i - 1], dbytes) == 0;
  /* 1: B changed, same version: the old transpose (= call 0's product);
   * 2: new version: B's new contents (differs); 3: B changed again, version 0:
   * transposed (differs); 4: B changed again, version 0 again: transposed
   * again (differs); 5: version 6 again, but call 4's version 0 left nothing
   * to reuse: transposed, same contents as call 4; 6: another pointer with
   * the same contents: the same product; 7: a third pointer (differs); 8: its
   * pointer and version, another ld, so other contents: transposed (differs) */
  static const bool want[CALLS] = {false, true, false, false, false, true, true, false, false};
  for (int i = 1; i < CALLS; i++)
    if (same[i] != want[i]) {
      fprintf(stderr, "  rank %d: call %d %s call %d, expected %s\n", rank, i,
              same[i] ? "equals" : "differs from", i - 1, want[i] ? "equal" : "different");
      __atomic_add_fetch(&e->failures, 1, __ATOMIC_RELAXED);
    }
  for (int i = 0; i < CALLS; i++)
    free(d[i]);
  free(a.data), free(b.data), free(b2.data), free(b3.data);
  tpla_ag_gemm_plan_destroy(plan);
  return 0;
}

static void test_fp8_b_version_reuses_the_transpose(void) {
  ver_t e = {0};
  ASSERT_EQ_INT(run_host_ranks(2, version_body, &e), 0);
  ASSERT_EQ_INT(e.failures, 0);
}

/* ---- d_amax: a NaN in D makes it NaN, as the local FP8 GEMM's --------------------- */

typedef struct {
  int failures;
} amax_t;

/* AllGather+GEMM, E4M3 ones x E4M3 ones (k = 16, op_b T, fp32 D), overlapped and serial:
 * rank 1's first row holds one NaN code, so row 4 of every rank's D is NaN and d_amax must be
 * NaN on every rank; without the NaN, d_amax is max |D| = 16. */
static int amax_nan_body(tpla_ctx_t ctx, int rank, int nranks, void *arg) {
  amax_t *e = arg;
  enum { ROWS = 4, K = 16, N = 8 };
  const int64_t m = ROWS * nranks;
  for (int mode = 0; mode < 2; mode++) {
    tpla_ag_gemm_desc_t desc = TPLA_AG_GEMM_DESC_INIT;
    desc.local_rows = ROWS, desc.k = K, desc.n = N, desc.op_b = TPLA_OP_T;
    desc.dtype = TPLA_FLOAT8_E4M3, desc.d_dtype = TPLA_FLOAT32, desc.chunks = 2;
    desc.mode = mode ? TPLA_OVERLAP_SERIAL : TPLA_OVERLAP_OVERLAP;
    tpla_ag_gemm_plan_t plan = NULL;
    if (tpla_ag_gemm_plan_create(&plan, ctx, &desc) != TPLA_SUCCESS) {
      fprintf(stderr, "  rank %d: plan: %s\n", rank, tpla_last_error());
      __atomic_add_fetch(&e->failures, 1, __ATOMIC_RELAXED);
      return 1;
    }
    tpla_matrix_t a = oc_alloc(ROWS, K, 0, TPLA_FLOAT8_E4M3);
    tpla_matrix_t b = oc_alloc(N, K, 0, TPLA_FLOAT8_E4M3);
    tpla_matrix_t d = oc_alloc(m, N, 0, TPLA_FLOAT32);
    memset(a.data, 0x38, ROWS * K); /* 1.0 */
    memset(b.data, 0x38, N * K);
    for (int nan = 1; nan >= 0; nan--) {
      ((unsigned char *)a.data)[0] = rank == 1 && nan ? 0x7f : 0x38;
      _Alignas(16) float amax[TPLA_FP8_SCALE_STRIDE] = {-1.0f};
      tpla_overlap_args_t args = TPLA_OVERLAP_ARGS_INIT;
      args.fp8.d_amax = amax;
      tpla_status_t s = tpla_ag_gemm(plan, d, a, b, &args, NULL);
      const float *dv = d.data;
      double want = nan ? NAN : (double)K, d_row4 = dv[ROWS * N], d_row0 = dv[0];
      bool ok = s == TPLA_SUCCESS && (nan ? isnan(amax[0]) : amax[0] == (float)K) &&
                (nan ? isnan(d_row4) : d_row4 == K) && d_row0 == K;
      if (!ok) {
        fprintf(stderr, "  rank %d %s, NaN %d: %s, d_amax %g (want %g), D[4][0] %g, D[0][0] %g "
                "(%s)\n", rank, mode ? "SERIAL" : "OVERLAP", nan, tpla_status_string(s),
                (double)amax[0], want, d_row4, d_row0, tpla_last_error());
        __atomic_add_fetch(&e->failures, 1, __ATOMIC_RELAXED);
      }
    }
    free(a.data), free(b.data), free(d.data);
    tpla_ag_gemm_plan_destroy(plan);
  }
  return 0;
}

static void test_fp8_amax_of_nan_is_nan(void) {
  amax_t e = {0};
  ASSERT_EQ_INT(run_host_ranks(2, amax_nan_body, &e), 0);
  ASSERT_EQ_INT(e.failures, 0);
}

/* ---- errors: one rank, D untouched --------------------------------------------- */

typedef struct {
  int failures;
} err_t;

#define EXPECT(call, want)                                                                  \
  do {                                                                                      \
    tpla_status_t got_ = (call);                                                            \
    if (got_ != (want)) {                                                                   \
      fprintf(stderr, "  %s: %s, expected %s (%s)\n", #call, tpla_status_string(got_),     \
              tpla_status_string(want), tpla_last_error());                                 \
      __atomic_add_fetch(&e->failures, 1, __ATOMIC_RELAXED);                                \
    }                                                                                       \
  } while (0)

static int errors_body(tpla_ctx_t ctx, int rank, int nranks, void *arg) {
  err_t *e = arg;
  tpla_ag_gemm_desc_t desc = TPLA_AG_GEMM_DESC_INIT;
  desc.local_rows = 4, desc.k = 16, desc.n = 8, desc.op_b = TPLA_OP_T;
  desc.dtype = TPLA_FLOAT8_E4M3, desc.d_dtype = TPLA_FLOAT8_E4M3;
  tpla_ag_gemm_plan_t plan = NULL;
  EXPECT(tpla_ag_gemm_plan_create(&plan, ctx, &desc), TPLA_ERROR_INVALID_ARGUMENT); /* FP8 D */
  desc.d_dtype = TPLA_BFLOAT16;
  EXPECT(tpla_ag_gemm_plan_create(&plan, ctx, &desc), TPLA_SUCCESS);
  tpla_matrix_t a = oc_alloc(4, 16, 0, TPLA_FLOAT8_E4M3), b = oc_alloc(8, 16, 0, TPLA_FLOAT8_E4M3);
  tpla_matrix_t b52 = oc_alloc(8, 16, 0, TPLA_FLOAT8_E5M2), d = oc_alloc(4, 8, 0, TPLA_BFLOAT16);
  memset(d.data, 0x5a, 4 * 8 * 2);
  float scale = 1.0f;
  tpla_overlap_args_t args = TPLA_OVERLAP_ARGS_INIT;
  args.fp8.d_scale = &scale; /* the output is bf16 */
  EXPECT(tpla_ag_gemm(plan, d, a, b, &args, NULL), TPLA_ERROR_INVALID_ARGUMENT);
  args = (tpla_overlap_args_t)TPLA_OVERLAP_ARGS_INIT;
  args.fp8.scale_mode = TPLA_FP8_SCALE_MXFP8;
  EXPECT(tpla_ag_gemm(plan, d, a, b, &args, NULL), TPLA_ERROR_NOT_SUPPORTED);
  args = (tpla_overlap_args_t)TPLA_OVERLAP_ARGS_INIT;
  args.fp8.accum = (tpla_fp8_accum_t)7;
  EXPECT(tpla_ag_gemm(plan, d, a, b, &args, NULL), TPLA_ERROR_INVALID_ARGUMENT);
  const float *scales = NULL;
  EXPECT(tpla_ag_gemm_gathered_scales(plan, &scales), TPLA_ERROR_INVALID_USAGE); /* no call yet */
  /* the gathered scales passed back in, as the next call's a_scale: the call rewrites them
   * while it reads them (review 92) */
  tpla_matrix_t d_out = oc_alloc(4 * nranks, 8, 0, TPLA_BFLOAT16);
  args = (tpla_overlap_args_t)TPLA_OVERLAP_ARGS_INIT;
  args.fp8.a_scale = args.fp8.b_scale = &scale;
  EXPECT(tpla_ag_gemm(plan, d_out, a, b, &args, NULL), TPLA_SUCCESS);
  EXPECT(tpla_ag_gemm_gathered_scales(plan, &scales), TPLA_SUCCESS);
  args.fp8.a_scale = scales;
  EXPECT(tpla_ag_gemm(plan, d_out, a, b, &args, NULL), TPLA_ERROR_INVALID_ARGUMENT);
  args.fp8.a_scale = &scale;
  args.fp8.d_amax = (float *)scales + TPLA_FP8_SCALE_STRIDE * (nranks - 1);
  EXPECT(tpla_ag_gemm(plan, d_out, a, b, &args, NULL), TPLA_ERROR_INVALID_ARGUMENT);
  free(d_out.data);
  tpla_ag_gemm_plan_destroy(plan);
  /* E5M2 x E5M2 */
  desc.dtype = TPLA_FLOAT8_E5M2;
  EXPECT(tpla_ag_gemm_plan_create(&plan, ctx, &desc), TPLA_SUCCESS);
  tpla_matrix_t a52 = oc_alloc(4, 16, 0, TPLA_FLOAT8_E5M2);
  EXPECT(tpla_ag_gemm(plan, d, a52, b52, NULL, NULL), TPLA_ERROR_INVALID_ARGUMENT);
  tpla_ag_gemm_plan_destroy(plan);
  /* fp8 fields on a bf16 plan; scales of a bf16 plan */
  desc.dtype = TPLA_BFLOAT16;
  EXPECT(tpla_ag_gemm_plan_create(&plan, ctx, &desc), TPLA_SUCCESS);
  tpla_matrix_t ab = oc_alloc(4, 16, 0, TPLA_BFLOAT16), bb = oc_alloc(8, 16, 0, TPLA_BFLOAT16);
  args = (tpla_overlap_args_t)TPLA_OVERLAP_ARGS_INIT;
  args.fp8.a_scale = &scale;
  EXPECT(tpla_ag_gemm(plan, d, ab, bb, &args, NULL), TPLA_ERROR_INVALID_ARGUMENT);
  EXPECT(tpla_ag_gemm_gathered_scales(plan, &scales), TPLA_ERROR_INVALID_USAGE);
  /* args of callers built before the FP8 fields or before b_version still work */
  tpla_matrix_t d2 = oc_alloc(4, 8, 0, TPLA_BFLOAT16);
  static const size_t old_sizes[2] = {offsetof(tpla_overlap_args_t, fp8),
                                      offsetof(tpla_overlap_args_t, b_version)};
  for (int i = 0; i < 2; i++) {
    args = (tpla_overlap_args_t)TPLA_OVERLAP_ARGS_INIT;
    args.size = old_sizes[i];
    EXPECT(tpla_ag_gemm(plan, d2, ab, bb, &args, NULL), TPLA_SUCCESS);
  }
  args = (tpla_overlap_args_t)TPLA_OVERLAP_ARGS_INIT;
  args.size = offsetof(tpla_overlap_args_t, bias);
  EXPECT(tpla_ag_gemm(plan, d, ab, bb, &args, NULL), TPLA_ERROR_INVALID_ARGUMENT);
  free(d2.data);
  tpla_ag_gemm_plan_destroy(plan);
  for (int i = 0; i < 4 * 8 * 2; i++)
    if (((unsigned char *)d.data)[i] != 0x5a) {
      fprintf(stderr, "  a rejected call wrote into D (byte %d)\n", i);
      __atomic_add_fetch(&e->failures, 1, __ATOMIC_RELAXED);
      break;
    }
  free(a.data), free(b.data), free(b52.data), free(d.data), free(a52.data), free(ab.data);
  free(bb.data);
  return 0;
}

static void test_fp8_errors(void) {
  err_t e = {0};
  ASSERT_EQ_INT(run_host_ranks(1, errors_body, &e), 0);
  ASSERT_EQ_INT(e.failures, 0);
}

int main(void) {
  seed = fresh_seed("test_overlap_fp8");
  TEST(test_fp8_ag_gemm);
  TEST(test_fp8_gemm_rs);
  TEST(test_fp8_gemm_ar);
  TEST(test_fp8_b_version_reuses_the_transpose);
  TEST(test_fp8_amax_of_nan_is_nan);
  TEST(test_fp8_even_split_in_16_row_units);
  TEST(test_fp8_errors);
  return test_summary();
}
