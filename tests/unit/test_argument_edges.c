/*
 * test_argument_edges.c - argument checks at their edges, one test per check
 * that a mutation of it passed the rest of the suite (review 102, host
 * mutation round 3): a view's extent that counts its last row's columns and
 * no more (too large to address; no false overlap with D's last row's
 * padding), an in-place sendrecv only with oneself, src/dst below -1, an fp64
 * D, a k past 2^31-1, the collectives' counters, tpla_appendf's cut marker
 * and tiny buffers, tpla_fail_again's message, fp16 NaNs' sign, and
 * Newton-Schulz descriptors: ranks whose user tables differ in the last
 * coefficient's sign, too many or infinite user coefficients, a preset with
 * ncoefficients, infinite eps, NaN or infinite safety, a global matrix past
 * 2^60 bytes; an overlap plan's allow_tf32, FP8 fields and scales of a
 * non-FP8 plan, a view in its staging memory, tpla_allgather_rows' buffers;
 * and a host group broken twice (the first reason stays).
 *
 * Run: build/tests/test_argument_edges
 */
#include "internal.h"
#include "overlap.h" /* the plans' own memory (ovl_plan_memory) */
#include "rank_check.h"
#include "ranks.h"
#include "test.h"
#include "tpla.h"

#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>

#define IA TPLA_ERROR_INVALID_ARGUMENT

static tpla_host_group_t group_;
static tpla_ctx_t open_ctx(void) {
  tpla_ctx_t ctx = NULL;
  if (single_host_ctx(&group_, &ctx) != 0)
    exit(1);
  return ctx;
}
static void close_ctx(tpla_ctx_t ctx) {
  tpla_ctx_destroy(ctx);
  tpla_host_group_destroy(group_);
}

/* the extent check must count the last row's cols:
 * 2 x (2^59 + 1) fp32 with ld = cols spans (2^60 + 2) * 4 bytes > 2^62. */
static void test_extent_counts_last_row_cols(void) {
  tpla_ctx_t ctx = open_ctx();
  static float buf[16];
  int64_t c = ((int64_t)1 << 59) + 1;
  tpla_matrix_t d = {buf, 2, c, c, TPLA_FLOAT32};
  tpla_matrix_t a = {buf + 8, 2, 2, 2, TPLA_FLOAT32}, b = {buf + 12, 2, c, c, TPLA_FLOAT32};
  ASSERT_STATUS(tpla_gemm(ctx, d, a, TPLA_OP_N, b, TPLA_OP_N, NULL, NULL), IA);
  ASSERT_CONTAINS(tpla_last_error(), "'d'");
  ASSERT_CONTAINS(tpla_last_error(), "too large to address");
  close_ctx(ctx);
}

/* a view's byte extent ends at its last row's last
 * column, not at rows * ld: an input with another pitch placed in D's last
 * row's padding does not overlap D. */
static void test_view_in_last_row_padding_does_not_overlap(void) {
  tpla_ctx_t ctx = open_ctx();
  float buf[32] = {0};
  tpla_matrix_t d = {buf, 2, 2, 8, TPLA_FLOAT32};      /* elements 0,1 and 8,9 */
  tpla_matrix_t a = {buf + 10, 2, 2, 2, TPLA_FLOAT32}; /* elements 10..13, pitch 2 */
  tpla_matrix_t b = {buf + 16, 2, 2, 2, TPLA_FLOAT32};
  for (int i = 0; i < 4; i++)
    buf[10 + i] = (float)(i + 1), buf[16 + i] = (i == 0 || i == 3) ? 1.0f : 0.0f; /* B = I */
  ASSERT_OK(tpla_gemm(ctx, d, a, TPLA_OP_N, b, TPLA_OP_N, NULL, NULL));
  ASSERT_TRUE(buf[0] == 1.0f && buf[1] == 2.0f && buf[8] == 3.0f && buf[9] == 4.0f);
  close_ctx(ctx);
}

/* only a self exchange may pass recv == send. */
static int inplace_ring_body(tpla_ctx_t ctx, int rank, int nranks, void *arg) {
  float buf[4] = {1, 2, 3, 4};
  int peer = 1 - rank;
  RCHECK_STATUS(tpla_sendrecv(ctx, buf, 4, peer, buf, 4, peer, TPLA_FLOAT32, NULL), IA);
  RCHECK(strstr(tpla_last_error(), "'recv'") != NULL, "message: %s", tpla_last_error());
  RCHECK(buf[0] == 1 && buf[3] == 4, "buffer changed");
  return 0;
}
static void test_sendrecv_in_place_needs_self(void) {
  ASSERT_EQ_INT(run_host_ranks(2, inplace_ring_body, NULL), 0);
}

/* successful collectives are counted, rejected ones not. */
static void test_collectives_are_counted(void) {
  tpla_ctx_t ctx = open_ctx();
  float x[4] = {1, 2, 3, 4}, y[4];
  size_t counts[1] = {4};
  tpla_counters_t c0 = TPLA_COUNTERS_INIT, c1 = TPLA_COUNTERS_INIT;
  ASSERT_OK(tpla_ctx_get_counters(ctx, &c0));
  ASSERT_OK(tpla_allreduce(ctx, y, x, 4, TPLA_FLOAT32, NULL));
  ASSERT_OK(tpla_allgatherv(ctx, y, x, counts, TPLA_FLOAT32, NULL));
  ASSERT_OK(tpla_reduce_scatterv(ctx, y, x, counts, TPLA_FLOAT32, NULL));
  ASSERT_STATUS(tpla_allreduce(ctx, y, x, 4, TPLA_UINT8, NULL), IA);
  ASSERT_OK(tpla_ctx_get_counters(ctx, &c1));
  ASSERT_EQ_INT(c1.allreduces - c0.allreduces, 1);
  ASSERT_EQ_INT(c1.allgathers - c0.allgathers, 1);
  ASSERT_EQ_INT(c1.reduce_scatters - c0.reduce_scatters, 1);
  close_ctx(ctx);
}

/* dst = -2 is rejected even when src = -1 makes the call
 * otherwise a no-op (on one rank the executor's own check hides it). */
static void test_sendrecv_dst_below_minus_one(void) {
  tpla_ctx_t ctx = open_ctx();
  float x[4] = {0};
  ASSERT_STATUS(tpla_sendrecv(ctx, x, 4, -2, NULL, 0, -1, TPLA_FLOAT32, NULL), IA);
  ASSERT_CONTAINS(tpla_last_error(), "'dst'");
  ASSERT_STATUS(tpla_sendrecv(ctx, NULL, 0, -1, x, 4, -2, TPLA_FLOAT32, NULL), IA);
  ASSERT_CONTAINS(tpla_last_error(), "'src'");
  close_ctx(ctx);
}

/* D is a's dtype or fp32; fp64 (or u8) D is refused. */
static void test_gemm_d_dtype_fp64_refused(void) {
  tpla_ctx_t ctx = open_ctx();
  float a[4] = {1, 0, 0, 1}, b[4] = {1, 2, 3, 4};
  double d[4] = {-1, -1, -1, -1};
  tpla_matrix_t vd = {d, 2, 2, 2, TPLA_FLOAT64}, va = {a, 2, 2, 2, TPLA_FLOAT32},
                vb = {b, 2, 2, 2, TPLA_FLOAT32};
  ASSERT_STATUS(tpla_gemm(ctx, vd, va, TPLA_OP_N, vb, TPLA_OP_N, NULL, NULL), IA);
  ASSERT_CONTAINS(tpla_last_error(), "'d'");
  ASSERT_TRUE(d[0] == -1 && d[3] == -1);
  close_ctx(ctx);
}

/* k beyond 2^31-1 is NOT_SUPPORTED like m and n (only m was tested): A and B
 * are valid views of 2^31 columns (rows) that no check reads. Without the k
 * check (review 102, X01) the host GEMM reads them and the process crashes. */
static void test_gemm_k_beyond_int32(void) {
  tpla_ctx_t ctx = open_ctx();
  static float buf[64];
  int64_t k = (int64_t)1 << 31;
  tpla_matrix_t d = {buf, 2, 2, 2, TPLA_FLOAT32}, a = {buf + 8, 2, k, k, TPLA_FLOAT32},
                b = {buf + 16, k, 2, 2, TPLA_FLOAT32};
  ASSERT_STATUS(tpla_gemm(ctx, d, a, TPLA_OP_N, b, TPLA_OP_N, NULL, NULL),
                TPLA_ERROR_NOT_SUPPORTED);
  ASSERT_CONTAINS(tpla_last_error(), "k=2147483648");
  close_ctx(ctx);
}

/* a buffer under 4 bytes is left alone; the cut
 * marker must never be written before the buffer. */
static void test_appendf_tiny_buffer_stays_inside(void) {
  char raw[8];
  memset(raw, 'x', sizeof raw);
  char *out = raw + 1;
  out[0] = '\0';
  tpla_appendf(out, 3, "%s", "abcdef");
  ASSERT_TRUE(raw[0] == 'x'); /* nothing before the buffer */
  ASSERT_TRUE(raw[4] == 'x'); /* nor after it */
  ASSERT_TRUE(strlen(out) < 3);
}

/* a text one character too long (only its last
 * character is cut) is still marked as cut. */
static void test_appendf_cut_by_one_is_marked(void) {
  char out[16] = "abc";
  tpla_appendf(out, sizeof out, "%s", "0123456789abc"); /* 3 + 13 = 16 does not fit in 15 */
  ASSERT_EQ_INT((int)strlen(out), 15);
  ASSERT_TRUE(strcmp(out, "abc012345678...") == 0);
  char fits[16] = "abc";
  tpla_appendf(fits, sizeof fits, "%s", "0123456789ab"); /* exactly 15: not cut */
  ASSERT_TRUE(strcmp(fits, "abc0123456789ab") == 0);
}

/* A NaN keeps its sign through fp16, as through bf16: every NaN half back and
 * forth, and -NAN. The round trip in test_dtype.c checks NaN-ness only, so a
 * NaN always encoded as +NaN (review 102, X06) passed it. */
static void test_half_nan_keeps_sign(void) {
  int wrong = 0;
  for (uint32_t h = 0; h < 0x10000; h++) {
    float f = tpla_half_to_float((uint16_t)h);
    if (!isnan(f))
      continue;
    wrong += (tpla_float_to_half(f) & 0x8000u) != (h & 0x8000u);
    wrong += (tpla_float_to_bf16(f) & 0x8000u) != (h & 0x8000u);
  }
  ASSERT_EQ_INT(wrong, 0);
  ASSERT_EQ_INT(tpla_float_to_half(-NAN), 0xfe00);
  ASSERT_EQ_INT(tpla_float_to_half(NAN), 0x7e00);
}

/* ---- Newton-Schulz plans ---- */
typedef struct {
  tpla_ns_desc_t desc[4];
  tpla_status_t st[4];
  char msg[4][400];
} ns_case_t;

static int ns_create_body(tpla_ctx_t ctx, int rank, int nranks, void *arg) {
  ns_case_t *c = arg;
  tpla_ns_plan_t plan = NULL;
  c->st[rank] = tpla_ns_plan_create(&plan, ctx, &c->desc[rank]);
  snprintf(c->msg[rank], sizeof c->msg[rank], "%s", tpla_last_error());
  tpla_ns_plan_destroy(plan);
  return 0;
}

static tpla_ns_desc_t ns_desc(int r, int P) {
  tpla_ns_desc_t d = TPLA_NS_DESC_INIT;
  d.local_rows = 12 / P + (r < 12 % P);
  d.local_cols = 8;
  return d;
}

/* the coefficient hash covers every byte of the
 * table: ranks whose USER tables differ only in the sign of the very last
 * coefficient (the last byte of the table) disagree. */
static void test_ns_last_coefficient_sign_disagrees(void) {
  static float coef[2][6] = {{1.5f, -0.5f, 0.0f, 1.5f, -0.5f, 0.25f},
                             {1.5f, -0.5f, 0.0f, 1.5f, -0.5f, -0.25f}};
  ns_case_t c;
  memset(&c, 0, sizeof c);
  for (int r = 0; r < 2; r++) {
    c.desc[r] = ns_desc(r, 2);
    c.desc[r].steps = 2;
    c.desc[r].preset = TPLA_NS_USER;
    c.desc[r].coefficients = coef[r];
    c.desc[r].ncoefficients = 6;
  }
  ASSERT_EQ_INT(run_host_ranks(2, ns_create_body, &c), 0);
  for (int r = 0; r < 2; r++) {
    ASSERT_STATUS(c.st[r], TPLA_ERROR_REMOTE);
    ASSERT_CONTAINS(c.msg[r], "rank 1 has coefficients");
  }
}

/* One rank: the descriptor is refused with INVALID_ARGUMENT and `needle`. */
static int ns_refused(tpla_ns_desc_t d, const char *needle) {
  ns_case_t c;
  memset(&c, 0, sizeof c);
  c.desc[0] = d;
  if (run_host_ranks(1, ns_create_body, &c) != 0)
    return 1;
  if (c.st[0] != IA || strstr(c.msg[0], needle) == NULL) {
    fprintf(stderr, "  got %s \"%s\", want INVALID_ARGUMENT containing \"%s\"\n",
            tpla_status_string(c.st[0]), c.msg[0], needle);
    return 1;
  }
  return 0;
}

/* A one-rank TPLA_NS_USER descriptor of two steps with these coefficients. */
static tpla_ns_desc_t user_desc(const float *coef, int n) {
  tpla_ns_desc_t d = ns_desc(0, 1);
  d.steps = 2;
  d.preset = TPLA_NS_USER;
  d.coefficients = coef;
  d.ncoefficients = n;
  return d;
}

/* TPLA_NS_USER needs exactly 3 * steps coefficients, not at least. */
static void test_ns_too_many_user_coefficients(void) {
  static const float coef[9] = {1.5f, -0.5f, 0, 1.5f, -0.5f, 0, 1.5f, -0.5f, 0};
  ASSERT_EQ_INT(ns_refused(user_desc(coef, 9), "ncoefficients is 9, expected 3 * steps = 6"), 0);
}

/* an infinite USER coefficient is refused like a NaN. */
static void test_ns_infinite_user_coefficient(void) {
  static float coef[6] = {1.5f, -0.5f, 0, 1.5f, -0.5f, 0};
  coef[4] = -INFINITY;
  ASSERT_EQ_INT(ns_refused(user_desc(coef, 6), "coefficients[4] is not finite"), 0);
}

/* tpla_fail_again sets the last error to its message
 * (overlap_api.c restores a failed call's message with it after the abort;
 * on the host executor the abort sets none, so only a direct test sees it). */
static void test_fail_again_restores_message(void) {
  char saved[64];
  tpla_fail(IA, "f", "first");
  snprintf(saved, sizeof saved, "%s", tpla_last_error());
  tpla_fail(TPLA_ERROR_REMOTE, "g", "second");
  ASSERT_STATUS(tpla_fail_again(IA, saved), IA);
  ASSERT_TRUE(strcmp(tpla_last_error(), "f: first") == 0);
  ASSERT_STATUS(tpla_fail_again(IA, tpla_last_error()), IA); /* its own text: unchanged */
  ASSERT_TRUE(strcmp(tpla_last_error(), "f: first") == 0);
}


/* a preset with ncoefficients != 0 (coefficients NULL). */
static void test_ns_preset_with_ncoefficients(void) {
  tpla_ns_desc_t d = ns_desc(0, 1);
  d.ncoefficients = 15;
  ASSERT_EQ_INT(ns_refused(d, "coefficients given (15) with a preset"), 0);
}

/* eps = +inf. */
static void test_ns_infinite_eps(void) {
  tpla_ns_desc_t d = ns_desc(0, 1);
  d.eps = INFINITY;
  ASSERT_EQ_INT(ns_refused(d, "eps inf must be finite"), 0);
}

/* safety NaN or +inf. */
static void test_ns_nonfinite_safety(void) {
  tpla_ns_desc_t d = ns_desc(0, 1);
  d.safety = NAN;
  ASSERT_EQ_INT(ns_refused(d, "safety nan must be finite"), 0);
  d.safety = INFINITY;
  ASSERT_EQ_INT(ns_refused(d, "safety inf must be finite"), 0);
}

/* A global matrix past 2^60 bytes is NOT_SUPPORTED at creation, before any
 * allocation, though both dimensions fit int32: (2^31-1)^2 fp32 on one rank.
 * Without the byte check (review 102, X09) the plan tries to allocate it and
 * reports OUT_OF_MEMORY. */
static void test_ns_global_matrix_too_large(void) {
  ns_case_t c;
  memset(&c, 0, sizeof c);
  c.desc[0] = ns_desc(0, 1);
  c.desc[0].local_rows = INT32_MAX;
  c.desc[0].local_cols = INT32_MAX;
  ASSERT_EQ_INT(run_host_ranks(1, ns_create_body, &c), 0);
  ASSERT_STATUS(c.st[0], TPLA_ERROR_NOT_SUPPORTED);
  ASSERT_CONTAINS(c.msg[0], "is too large");
}

/* An overlap plan: allow_tf32 only 0 or 1; a non-FP8 plan refuses FP8 call
 * fields (the accumulation mode too) and has no gathered scales. */
static void test_overlap_plan_and_call_fields(void) {
  tpla_ctx_t ctx = open_ctx();
  tpla_ag_gemm_desc_t x = TPLA_AG_GEMM_DESC_INIT;
  x.local_rows = 2, x.k = 2, x.n = 2, x.allow_tf32 = 2;
  tpla_ag_gemm_plan_t plan = NULL;
  ASSERT_STATUS(tpla_ag_gemm_plan_create(&plan, ctx, &x), IA);
  ASSERT_CONTAINS(tpla_last_error(), "allow_tf32 2 is not 0 or 1");
  x.allow_tf32 = 0;
  ASSERT_OK(tpla_ag_gemm_plan_create(&plan, ctx, &x));
  float a[4] = {1, 2, 3, 4}, b[4] = {1, 0, 0, 1}, d[4] = {-1, -1, -1, -1};
  tpla_matrix_t am = {a, 2, 2, 2, TPLA_FLOAT32}, bm = {b, 2, 2, 2, TPLA_FLOAT32};
  tpla_matrix_t dm = {d, 2, 2, 2, TPLA_FLOAT32};
  tpla_overlap_args_t args = TPLA_OVERLAP_ARGS_INIT;
  args.fp8.accum = TPLA_FP8_ACCUM_FAST;
  ASSERT_STATUS(tpla_ag_gemm(plan, dm, am, bm, &args, NULL), IA);
  ASSERT_CONTAINS(tpla_last_error(), "fp8 fields set for a fp32 plan");
  ASSERT_TRUE(d[0] == -1 && d[3] == -1);
  ASSERT_OK(tpla_ag_gemm(plan, dm, am, bm, NULL, NULL));
  const float *scales = NULL;
  ASSERT_STATUS(tpla_ag_gemm_gathered_scales(plan, &scales), TPLA_ERROR_INVALID_USAGE);
  ASSERT_CONTAINS(tpla_last_error(), "has no scales");
  tpla_ag_gemm_plan_destroy(plan);
  close_ctx(ctx);
}

/* A view inside the plan's staging memory is refused like one inside its
 * window: the call overwrites both. White box, since the public API never hands
 * out staging (review 102, OA08: only the window was checked); a one-rank SERIAL
 * GEMM+AllReduce plan stages its partial product. */
static void test_overlap_view_in_staging_refused(void) {
  tpla_ctx_t ctx = open_ctx();
  tpla_gemm_ar_desc_t desc = TPLA_GEMM_AR_DESC_INIT;
  desc.m = 4, desc.k = 3, desc.n = 2, desc.mode = TPLA_OVERLAP_SERIAL;
  tpla_gemm_ar_plan_t p = NULL;
  ASSERT_OK(tpla_gemm_ar_plan_create(&p, ctx, &desc));
  tpla_matrix_t win, stg;
  ovl_plan_memory(&p->p, &win, &stg);
  ASSERT_TRUE(stg.data != NULL && stg.cols >= 6 * (int64_t)sizeof(float));
  float a[12] = {0}, d[8];
  tpla_matrix_t vd = {d, 4, 2, 2, TPLA_FLOAT32}, va = {a, 4, 3, 3, TPLA_FLOAT32},
                vb = {stg.data, 3, 2, 2, TPLA_FLOAT32};
  ASSERT_STATUS(tpla_gemm_ar(p, vd, va, vb, NULL, NULL), IA);
  ASSERT_CONTAINS(tpla_last_error(), "argument 'b' lies in the plan's own staging memory");
  tpla_gemm_ar_plan_destroy(p);
  close_ctx(ctx);
}

/* tpla_allgather_rows gathers into a dense buffer only, and refuses an
 * a_local that overlaps it away from its own place. */
static void test_allgather_rows_buffers(void) {
  tpla_ctx_t ctx = open_ctx();
  float buf[16] = {0};
  const int64_t rows[1] = {2};
  tpla_matrix_t strided = {buf, 2, 2, 4, TPLA_FLOAT32}, a = {buf + 8, 2, 2, 2, TPLA_FLOAT32};
  ASSERT_STATUS(tpla_allgather_rows(ctx, strided, a, rows, NULL), IA);
  ASSERT_CONTAINS(tpla_last_error(), "must equal cols");
  tpla_matrix_t gathered = {buf, 2, 2, 2, TPLA_FLOAT32}, shifted = {buf + 1, 2, 2, 2, TPLA_FLOAT32};
  ASSERT_STATUS(tpla_allgather_rows(ctx, gathered, shifted, rows, NULL), IA);
  ASSERT_CONTAINS(tpla_last_error(), "overlaps 'gathered' away from its place");
  close_ctx(ctx);
}

/* ---- a host group broken twice ---- */

/* The first reason a group broke is the one every rank reports: rank 0 aborts,
 * then rank 1, whose context has not looked yet, aborts too (recording its own
 * reason); rank 2 must still read rank 0's. A later break that overwrote the
 * first (review 102, X12) names rank 1. */
static pthread_barrier_t abort_bar_;
static int two_aborts_body(tpla_ctx_t ctx, int rank, int nranks, void *arg) {
  (void)nranks, (void)arg;
  /* every rank reaches every barrier, whatever fails: a failure, not a hang */
  pthread_barrier_wait(&abort_bar_);
  tpla_status_t s0 = rank == 0 ? tpla_ctx_abort(ctx) : TPLA_SUCCESS;
  pthread_barrier_wait(&abort_bar_);
  tpla_status_t s1 = rank == 1 ? tpla_ctx_abort(ctx) : TPLA_SUCCESS;
  pthread_barrier_wait(&abort_bar_);
  RCHECK_OK(s0);
  RCHECK_OK(s1);
  if (rank == 2) {
    RCHECK_STATUS(tpla_ctx_get_async_error(ctx), TPLA_ERROR_REMOTE);
    RCHECK(strstr(tpla_last_error(), "called on rank 0") != NULL, "message: %s",
           tpla_last_error());
  }
  return 0;
}

static void test_group_keeps_first_break_reason(void) {
  pthread_barrier_init(&abort_bar_, NULL, 3);
  ASSERT_EQ_INT(run_host_ranks(3, two_aborts_body, NULL), 0);
  pthread_barrier_destroy(&abort_bar_);
}

int main(void) {
  TEST(test_extent_counts_last_row_cols);
  TEST(test_view_in_last_row_padding_does_not_overlap);
  TEST(test_sendrecv_in_place_needs_self);
  TEST(test_collectives_are_counted);
  TEST(test_sendrecv_dst_below_minus_one);
  TEST(test_gemm_d_dtype_fp64_refused);
  TEST(test_gemm_k_beyond_int32);
  TEST(test_appendf_tiny_buffer_stays_inside);
  TEST(test_appendf_cut_by_one_is_marked);
  TEST(test_half_nan_keeps_sign);
  TEST(test_ns_last_coefficient_sign_disagrees);
  TEST(test_ns_too_many_user_coefficients);
  TEST(test_ns_infinite_user_coefficient);
  TEST(test_fail_again_restores_message);
  TEST(test_ns_preset_with_ncoefficients);
  TEST(test_ns_infinite_eps);
  TEST(test_ns_nonfinite_safety);
  TEST(test_ns_global_matrix_too_large);
  TEST(test_overlap_plan_and_call_fields);
  TEST(test_overlap_view_in_staging_refused);
  TEST(test_allgather_rows_buffers);
  TEST(test_group_keeps_first_break_reason);
  return test_summary();
}
