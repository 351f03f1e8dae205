/*
 * test_gemm_c_operand.c - the backend GEMM with C apart from D
 * (tpla_gemm_call_t.c, internal.h) on the host executor, and its
 * Newton-Schulz users.
 *
 * GEMM: D = alpha op(A) op(B) + beta C with C != D and leading dimensions
 * that differ, every input dtype, D (and C) of the input dtype or fp32,
 * every op pair, odd shapes, beta != 0, against a float64 reference; D is
 * poisoned with NaN first (a separate C means D is never read), and C, A, B
 * and D's padding must be untouched. beta = 0 never reads C (NaN C); C that
 * is the view D itself is the ordinary accumulation; k = 0 gives beta C; a C
 * of the wrong dtype or shape is INTERNAL and leaves D alone.
 *
 * NS (ns.h): ns_gemm_c with a transposed D and C (the operand swap); the
 * ping-pong SQUARE update of ns_iterate started and ended in every
 * combination of X and the temp (with the one copy an odd step count needs
 * when start and end are equal), transposed and padded X, equal to the
 * chunked update and to a float64 iteration, X's padding untouched.
 * Fresh random inputs each run (seed printed).
 * Run: ./test_gemm_c_operand
 */
#include "test_ns_common.h" /* ref_ns_steps, rel_diff */

#include "ns.h"

static tpla_host_group_t group;
static tpla_ctx_t ctx;
static rng_t rng;

#define PAD_BYTE 0x5a /* bytes around the views, which must stay as they are */

static double tolerance(tpla_dtype_t d_dtype) {
  switch (d_dtype) {
  case TPLA_FLOAT16: return 0x1p-11 + 2e-5;
  case TPLA_BFLOAT16: return 0x1p-8 + 2e-5;
  default: return 1e-5;
  }
}

/* Bytes of a rows x cols view with leading dimension ld, plus one element. */
static size_t view_bytes(tpla_matrix_t m) {
  return (size_t)(m.rows * m.ld + 1) * tpla_dtype_size(m.dtype);
}

/* A random view (rows x cols, ld = cols + pad) in a fresh buffer whose
 * padding holds PAD_BYTE. */
static tpla_matrix_t random_view(int64_t rows, int64_t cols, int64_t pad, tpla_dtype_t dtype) {
  int64_t ld = cols + pad > 0 ? cols + pad : 1;
  tpla_matrix_t m = {NULL, rows, cols, ld, dtype};
  m.data = malloc(view_bytes(m));
  memset(m.data, PAD_BYTE, view_bytes(m));
  fill_random(m, &rng);
  return m;
}

static void *snapshot(tpla_matrix_t m) {
  void *copy = malloc(view_bytes(m));
  memcpy(copy, m.data, view_bytes(m));
  return copy;
}

static void fill_nan(tpla_matrix_t m) {
  for (int64_t i = 0; i < m.rows; i++)
    for (int64_t j = 0; j < m.cols; j++)
      tpla_store_elem(m.data, m.dtype, (size_t)(i * m.ld + j), NAN);
}

static double at(tpla_matrix_t m, int64_t i, int64_t j) {
  return tpla_load_elem(m.data, m.dtype, (size_t)(i * m.ld + j));
}

/* Element (i, j) of op(m). */
static double op_at(tpla_matrix_t m, tpla_op_t op, int64_t i, int64_t j) {
  return op == TPLA_OP_N ? at(m, i, j) : at(m, j, i);
}

/* True if the bytes of `now` outside its rows x cols elements equal `was`. */
static bool padding_kept(tpla_matrix_t now, const void *was) {
  size_t es = tpla_dtype_size(now.dtype), end = view_bytes(now);
  for (int64_t i = 0; i < now.rows; i++) {
    size_t from = (size_t)(i * now.ld + now.cols) * es;
    size_t to = i + 1 < now.rows ? (size_t)((i + 1) * now.ld) * es : end;
    if (memcmp((char *)now.data + from, (const char *)was + from, to - from) != 0)
      return false;
  }
  return true;
}

typedef struct {
  tpla_dtype_t in, out; /* A and B; C and D */
  tpla_op_t op_a, op_b;
  int64_t m, n, k, pad_c, pad_d;
  float alpha, beta;
} c_case_t;

/* One case; 0 when D is right and nothing else changed, else 1 (printed). */
static int run_case(const c_case_t *c) {
  int64_t ar = c->op_a == TPLA_OP_N ? c->m : c->k, ac = c->op_a == TPLA_OP_N ? c->k : c->m;
  int64_t br = c->op_b == TPLA_OP_N ? c->k : c->n, bc = c->op_b == TPLA_OP_N ? c->n : c->k;
  tpla_matrix_t a = random_view(ar, ac, 1, c->in), b = random_view(br, bc, 2, c->in);
  tpla_matrix_t cm = random_view(c->m, c->n, c->pad_c, c->out);
  tpla_matrix_t d = random_view(c->m, c->n, c->pad_d, c->out);
  fill_nan(d);
  void *a0 = snapshot(a), *b0 = snapshot(b), *c0 = snapshot(cm), *d0 = snapshot(d);
  tpla_gemm_call_t call = {.d = d, .a = a, .b = b, .op_a = c->op_a, .op_b = c->op_b, .m = c->m,
                           .n = c->n, .k = c->k, .alpha = c->alpha, .beta = c->beta,
                           .fp8 = TPLA_FP8_SCALING_INIT, .c = &cm};
  tpla_status_t s = ctx->backend->gemm(ctx, &call, NULL);
  /* Error against |alpha| |A| |B| + |beta| |C|, the scale of the roundings. */
  double err = 0.0, scale = 0.0;
  for (int64_t i = 0; i < c->m; i++)
    for (int64_t j = 0; j < c->n; j++) {
      double ref = 0.0, mag = 0.0;
      for (int64_t t = 0; t < c->k; t++) {
        double p = op_at(a, c->op_a, i, t) * op_at(b, c->op_b, t, j);
        ref += p;
        mag += fabs(p);
      }
      ref = c->alpha * ref + c->beta * at(cm, i, j);
      mag = fabs(c->alpha) * mag + fabs(c->beta * at(cm, i, j));
      double diff = at(d, i, j) - ref;
      err += diff * diff; /* NaN (D read) stays NaN and fails below */
      scale += mag * mag;
    }
  bool kept = memcmp(a.data, a0, view_bytes(a)) == 0 && memcmp(b.data, b0, view_bytes(b)) == 0 &&
              memcmp(cm.data, c0, view_bytes(cm)) == 0 && padding_kept(d, d0);
  double floor_abs = c->out == TPLA_FLOAT16 ? sqrt((double)(c->m * c->n)) * 0x1p-25 : 0.0;
  int bad = s != TPLA_SUCCESS || !(sqrt(err) <= tolerance(c->out) * sqrt(scale) + floor_abs) ||
            !kept;
  if (bad)
    fprintf(stderr,
            "  %s->%s op %c%c m=%lld n=%lld k=%lld ldc pad %lld ldd pad %lld alpha=%g beta=%g: "
            "%s %s, err %.3g (scale %.3g), others kept %d\n",
            tpla_dtype_name(c->in), tpla_dtype_name(c->out), c->op_a ? 'T' : 'N',
            c->op_b ? 'T' : 'N', (long long)c->m, (long long)c->n, (long long)c->k,
            (long long)c->pad_c, (long long)c->pad_d, (double)c->alpha, (double)c->beta,
            tpla_status_string(s), tpla_last_error(), sqrt(err), sqrt(scale), kept);
  free(a.data), free(b.data), free(cm.data), free(d.data);
  free(a0), free(b0), free(c0), free(d0);
  return bad;
}

static const tpla_dtype_t in_types[] = {TPLA_FLOAT32, TPLA_FLOAT16, TPLA_BFLOAT16};

static void test_c_apart_every_dtype_op_and_shape(void) {
  rng_seed(&rng, fresh_seed("test_c_apart_every_dtype_op_and_shape"));
  static const int64_t shapes[][3] = {{1, 1, 1}, {7, 5, 13}, {33, 17, 64}, {16, 40, 9}};
  static const float scalings[][2] = {{1.0f, 1.0f}, {-0.5f, 0.75f}, {2.0f, -1.25f}};
  int failures = 0, cases = 0;
  for (int t = 0; t < 3; t++)
    for (int same = 0; same < 2; same++) {
      tpla_dtype_t out = same ? in_types[t] : TPLA_FLOAT32;
      if (same && out == TPLA_FLOAT32)
        continue;
      for (int ops = 0; ops < 4; ops++)
        for (int sh = 0; sh < 4; sh++)
          for (int sc = 0; sc < 3; sc++, cases++) {
            c_case_t c = {in_types[t], out, (tpla_op_t)(ops & 1), (tpla_op_t)(ops >> 1),
                          shapes[sh][0], shapes[sh][1], shapes[sh][2], 3 + sc, (sh + sc) % 2 * 5,
                          scalings[sc][0], scalings[sc][1]};
            failures += run_case(&c);
          }
    }
  printf("  %d cases\n", cases);
  ASSERT_EQ_INT(failures, 0);
}

/* k = 0: D = beta C, D never read. */
static void test_c_apart_k_zero(void) {
  rng_seed(&rng, fresh_seed("test_c_apart_k_zero"));
  int failures = 0;
  for (int t = 0; t < 3; t++) {
    c_case_t c = {in_types[t], in_types[t], TPLA_OP_N, TPLA_OP_T, 6, 9, 0, 4, 1, 1.0f, -0.5f};
    failures += run_case(&c);
  }
  ASSERT_EQ_INT(failures, 0);
}

/* beta = 0: C is not read (NaN C gives no NaN); D = alpha A B. */
static void test_beta_zero_does_not_read_c(void) {
  rng_seed(&rng, fresh_seed("test_beta_zero_does_not_read_c"));
  tpla_matrix_t a = random_view(5, 7, 0, TPLA_FLOAT32), b = random_view(7, 4, 0, TPLA_FLOAT32);
  tpla_matrix_t cm = random_view(5, 4, 2, TPLA_FLOAT32), d = random_view(5, 4, 0, TPLA_FLOAT32);
  fill_nan(cm);
  fill_nan(d);
  tpla_gemm_call_t call = {.d = d, .a = a, .b = b, .m = 5, .n = 4, .k = 7, .alpha = 2.0f,
                           .beta = 0.0f, .fp8 = TPLA_FP8_SCALING_INIT, .c = &cm};
  tpla_status_t s = ctx->backend->gemm(ctx, &call, NULL);
  double worst = 0.0;
  for (int64_t i = 0; i < 5; i++)
    for (int64_t j = 0; j < 4; j++) {
      double ref = 0.0;
      for (int64_t t = 0; t < 7; t++)
        ref += at(a, i, t) * at(b, t, j);
      double e = fabs(at(d, i, j) - 2.0 * ref);
      worst = e > worst || isnan(e) ? e : worst;
    }
  free(a.data), free(b.data), free(cm.data), free(d.data);
  ASSERT_OK(s);
  ASSERT_LE(worst, 1e-5);
}

/* C given as the view D itself: D = alpha A B + beta D (the old meaning). */
static void test_c_that_is_d_accumulates(void) {
  rng_seed(&rng, fresh_seed("test_c_that_is_d_accumulates"));
  for (int t = 0; t < 3; t++) {
    tpla_matrix_t a = random_view(6, 5, 1, in_types[t]), b = random_view(5, 8, 0, in_types[t]);
    tpla_matrix_t d = random_view(6, 8, 3, in_types[t]);
    void *d0 = snapshot(d);
    tpla_matrix_t was = d, same = d;
    was.data = d0;
    tpla_gemm_call_t call = {.d = d, .a = a, .b = b, .m = 6, .n = 8, .k = 5, .alpha = 1.0f,
                             .beta = 0.5f, .fp8 = TPLA_FP8_SCALING_INIT, .c = &same};
    tpla_status_t s = ctx->backend->gemm(ctx, &call, NULL);
    double err = 0.0, norm = 0.0;
    for (int64_t i = 0; i < 6; i++)
      for (int64_t j = 0; j < 8; j++) {
        double ref = 0.5 * at(was, i, j);
        for (int64_t k = 0; k < 5; k++)
          ref += at(a, i, k) * at(b, k, j);
        err += (at(d, i, j) - ref) * (at(d, i, j) - ref);
        norm += ref * ref;
      }
    bool kept = padding_kept(d, d0);
    free(a.data), free(b.data), free(d.data), free(d0);
    ASSERT_OK(s);
    ASSERT_TRUE(kept);
    ASSERT_LE(sqrt(err / norm), 2 * tolerance(in_types[t]));
  }
}

/* A C of another dtype or shape is refused before D is written. */
static void test_bad_c_is_internal_error(void) {
  rng_seed(&rng, fresh_seed("test_bad_c_is_internal_error"));
  tpla_matrix_t a = random_view(4, 3, 0, TPLA_BFLOAT16), b = random_view(3, 5, 0, TPLA_BFLOAT16);
  tpla_matrix_t d = random_view(4, 5, 1, TPLA_BFLOAT16);
  tpla_matrix_t c_f32 = random_view(4, 5, 0, TPLA_FLOAT32);
  tpla_matrix_t c_small = random_view(4, 4, 1, TPLA_BFLOAT16);
  void *d0 = snapshot(d);
  tpla_gemm_call_t call = {.d = d, .a = a, .b = b, .m = 4, .n = 5, .k = 3, .alpha = 1.0f,
                           .beta = 1.0f, .fp8 = TPLA_FP8_SCALING_INIT, .c = &c_f32};
  tpla_status_t s1 = ctx->backend->gemm(ctx, &call, NULL);
  call.c = &c_small;
  tpla_status_t s2 = ctx->backend->gemm(ctx, &call, NULL);
  bool kept = memcmp(d.data, d0, view_bytes(d)) == 0;
  free(a.data), free(b.data), free(d.data), free(c_f32.data), free(c_small.data), free(d0);
  ASSERT_STATUS(s1, TPLA_ERROR_INTERNAL);
  ASSERT_STATUS(s2, TPLA_ERROR_INTERNAL);
  ASSERT_TRUE(kept);
}

/* ns_gemm_c with a transposed D: D^T = alpha A B^T + beta C^T, C stored as
 * D (n x m) with its own ld; C stored otherwise is INTERNAL. */
static void test_ns_gemm_c_transposed(void) {
  rng_seed(&rng, fresh_seed("test_ns_gemm_c_transposed"));
  const int64_t m = 9, n = 6, k = 11;
  tpla_matrix_t a = random_view(m, k, 2, TPLA_FLOAT32), b = random_view(n, k, 0, TPLA_FLOAT32);
  tpla_matrix_t cm = random_view(n, m, 4, TPLA_FLOAT32), d = random_view(n, m, 1, TPLA_FLOAT32);
  fill_nan(d);
  void *c0 = snapshot(cm), *d0 = snapshot(d);
  ns_opmat_t D = {d, true}, A = {a, false}, B = {b, true}, C = {cm, true};
  tpla_status_t s = ns_gemm_c(ctx, D, A, B, C, -1.5f, 0.25f, 0, NULL);
  double err = 0.0, norm = 0.0;
  for (int64_t i = 0; i < m; i++)
    for (int64_t j = 0; j < n; j++) {
      double ref = 0.0;
      for (int64_t t = 0; t < k; t++)
        ref += at(a, i, t) * at(b, j, t);
      ref = -1.5 * ref + 0.25 * at(cm, j, i);
      err += (at(d, j, i) - ref) * (at(d, j, i) - ref);
      norm += ref * ref;
    }
  bool kept = memcmp(cm.data, c0, view_bytes(cm)) == 0 && padding_kept(d, d0);
  ns_opmat_t C_plain = {cm, false};
  tpla_status_t bad = ns_gemm_c(ctx, D, A, B, C_plain, 1.0f, 1.0f, 0, NULL);
  free(a.data), free(b.data), free(cm.data), free(d.data), free(c0), free(d0);
  ASSERT_OK(s);
  ASSERT_TRUE(kept);
  ASSERT_LE(sqrt(err / norm), 1e-5);
  ASSERT_STATUS(bad, TPLA_ERROR_INTERNAL);
}

/* ---- ns_iterate: the ping-pong update ------------------------------------- */

/* An fp32 iteration on an s x l matrix whose temp holds temp_cap elements,
 * with its Gram buffers and temp allocated. */
typedef struct {
  ns_iter_t it;
  void *base, *temp;
} iter_t;

static void iter_make(iter_t *r, int64_t s, int64_t l, int64_t temp_cap) {
  ns_layout_t layout = {0};
  ns_iter_setup(&r->it, ns_machine(ctx), s, l, TPLA_FLOAT32, TPLA_FLOAT32, false, false,
                temp_cap, &layout);
  r->base = aligned_alloc(NS_ALIGN, (layout.bytes + NS_ALIGN - 1) / NS_ALIGN * NS_ALIGN);
  r->temp = malloc((size_t)temp_cap * sizeof(float));
  ns_iter_bind(&r->it, r->base, r->temp);
}

static void iter_free(iter_t *r) {
  ns_iter_free(&r->it);
  free(r->base);
  free(r->temp);
}

/* Element (i, j) of the oriented s x l matrix op(v). */
static double z_at(ns_opmat_t x, int64_t i, int64_t j) {
  return x.t ? at(x.v, j, i) : at(x.v, i, j);
}

/* Runs `steps` from `start` to `end` on a copy of z0 (s x l) held as x
 * (orientation t, padded rows); 0 if the result matches ref (and the
 * chunked result `chunked`, when given) and x's padding is kept. out gets
 * the result (s x l). */
static int run_iterate(iter_t *r, const double *z0, int64_t s, int64_t l, bool t,
                       const float *table, int steps, ns_where_t start, ns_where_t end,
                       const double *ref, double *out) {
  tpla_matrix_t v = random_view(t ? l : s, t ? s : l, 3, TPLA_FLOAT32);
  void *v0 = snapshot(v);
  ns_opmat_t x = {v, t}, place[2] = {x, ns_iter_temp(&r->it, x)};
  ns_opmat_t in = place[start == NS_IN_TEMP], res = place[end == NS_IN_TEMP];
  for (int64_t i = 0; i < s; i++)
    for (int64_t j = 0; j < l; j++) {
      int64_t si = t ? j : i, sj = t ? i : j;
      tpla_store_elem(in.v.data, TPLA_FLOAT32, (size_t)(si * in.v.ld + sj), z0[i * l + j]);
    }
  tpla_status_t st = ns_iterate(ctx, &r->it, x, start, end, table, steps, 1.0, NULL);
  for (int64_t i = 0; i < s; i++)
    for (int64_t j = 0; j < l; j++)
      out[i * l + j] = z_at(res, i, j);
  double e = rel_diff(out, ref, (size_t)(s * l));
  bool kept = padding_kept(v, v0);
  free(v.data), free(v0);
  int bad = st != TPLA_SUCCESS || !(e <= 1e-4) || !kept;
  if (bad)
    fprintf(stderr, "  %lldx%lld t=%d steps %d start %d end %d: %s %s, vs float64 %.3g, "
            "padding kept %d\n", (long long)s, (long long)l, t, steps, start, end,
            tpla_status_string(st), tpla_last_error(), e, kept);
  return bad;
}

/* Every start/end pair, odd and even step counts (Muon's quintic and the
 * cubic, c = 0), both orientations: ping-pong equals the chunked update
 * and float64. */
static void test_iterate_pingpong_every_start_and_end(void) {
  rng_seed(&rng, fresh_seed("test_iterate_pingpong_every_start_and_end"));
  const int64_t s = 40, l = 72; /* two symmetric blocks on the host machine */
  static const float muon[3] = {3.4445f, -4.7750f, 2.0315f}, cubic[3] = {1.5f, -0.5f, 0.0f};
  iter_t pp, chunked;
  iter_make(&pp, s, l, s * l);
  iter_make(&chunked, s, l, s * 7 + 3); /* 7 columns a chunk */
  ASSERT_EQ_INT(pp.it.update, NS_UPDATE_SQUARE);
  ASSERT_EQ_INT(chunked.it.update, NS_UPDATE_SQUARE);
  ASSERT_EQ_INT(chunked.it.chunk, 7);
  ASSERT_EQ_INT(ns_iter_end(&pp.it, 5, NS_IN_X), NS_IN_TEMP);
  ASSERT_EQ_INT(ns_iter_end(&pp.it, 5, NS_IN_TEMP), NS_IN_X);
  ASSERT_EQ_INT(ns_iter_end(&pp.it, 4, NS_IN_TEMP), NS_IN_TEMP);
  ASSERT_EQ_INT(ns_iter_end(&chunked.it, 5, NS_IN_X), NS_IN_X);
  size_t bytes = sizeof(double) * (size_t)(s * l);
  double *z0 = malloc(bytes), *ref = malloc(bytes), *got = malloc(bytes), *base = malloc(bytes);
  float table[3 * 6];
  int failures = 0, runs = 0;
  double ss = 0.0;
  for (int64_t i = 0; i < s * l; i++) {
    z0[i] = rng_uniform(&rng);
    ss += z0[i] * z0[i];
  }
  for (int64_t i = 0; i < s * l; i++)
    z0[i] = (double)(float)(z0[i] / sqrt(ss)); /* ||z0|| = 1: the iteration stays bounded */
  for (int poly = 0; poly < 2; poly++)
    for (int steps = 4; steps <= 5; steps++) {
      for (int k = 0; k < steps; k++)
        memcpy(table + 3 * k, poly ? cubic : muon, sizeof muon);
      memcpy(ref, z0, bytes);
      ref_ns_steps(ref, s, l, table, steps);
      for (int t = 0; t < 2; t++) {
        failures += run_iterate(&chunked, z0, s, l, t, table, steps, NS_IN_X, NS_IN_X, ref, base);
        for (int w = 0; w < 4; w++, runs++) {
          ns_where_t start = (ns_where_t)(w & 1), end = (ns_where_t)(w >> 1);
          failures += run_iterate(&pp, z0, s, l, t, table, steps, start, end, ref, got);
          double e = rel_diff(got, base, (size_t)(s * l));
          if (!(e <= 1e-5)) {
            fprintf(stderr, "  ping-pong vs chunked %.3g (steps %d t %d start %d end %d)\n", e,
                    steps, t, start, end);
            failures++;
          }
        }
      }
    }
  printf("  %d ping-pong runs\n", runs);
  /* The chunked iteration cannot keep X in its temp. */
  tpla_matrix_t v = random_view(s, l, 0, TPLA_FLOAT32);
  tpla_status_t bad = ns_iterate(ctx, &chunked.it, (ns_opmat_t){v, false}, NS_IN_TEMP, NS_IN_X,
                                 table, 1, 1.0, NULL);
  free(v.data), free(z0), free(ref), free(got), free(base);
  iter_free(&pp);
  iter_free(&chunked);
  ASSERT_EQ_INT(failures, 0);
  ASSERT_STATUS(bad, TPLA_ERROR_INTERNAL);
}

int main(void) {
  if (single_host_ctx(&group, &ctx) != 0)
    return 1;
  TEST(test_c_apart_every_dtype_op_and_shape);
  TEST(test_c_apart_k_zero);
  TEST(test_beta_zero_does_not_read_c);
  TEST(test_c_that_is_d_accumulates);
  TEST(test_bad_c_is_internal_error);
  TEST(test_ns_gemm_c_transposed);
  TEST(test_iterate_pingpong_every_start_and_end);
  tpla_ctx_destroy(ctx);
  tpla_host_group_destroy(group);
  return test_summary();
}
