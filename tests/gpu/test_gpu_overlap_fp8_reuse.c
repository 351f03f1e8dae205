/*
 * test_gpu_overlap_fp8_reuse.c - FP8 AllGather+GEMM and the reuse of its
 * gathered operand by the wgrad GEMM (tpla issue #5), on 1 GPU and on every
 * GPU present, one thread per GPU (test_gpu_overlap_util.h):
 *
 *   forward/dgrad  D  = alpha AG(A_local) op(B)      tpla_ag_gemm, E4M3 A and B
 *   wgrad          dW = AG(A_local)^T X              tpla_gemm on tpla_ag_gemm_gathered
 *
 * Every rank quantizes its A_local with its own scale, so each rank's rows
 * of the gathered view carry their own scale (tpla_ag_gemm_gathered_scales,
 * TPLA_FP8_SCALE_STRIDE floats apart): the wgrad runs one FP8 tpla_gemm per
 * rank's row block with that rank's scale, beta = 1 after the first (the
 * documented use); in the case where every rank shares one scale, one GEMM
 * over the whole view with scales[0]. Checked, per rank and call:
 *  - the gathered view is the concatenation of every rank's A_local bytes in
 *    rank order, exactly (m x k, ld k, E4M3), and its scales are every
 *    rank's a_scale, exactly, at 16-byte aligned slots;
 *  - D and dW against float64 GEMMs of the inputs dequantized on the host
 *    by a decoder of this file (not the library's codec), within the FP8
 *    bound of fp8_cases.h: S u_acc + |ref| u_out per element, S the
 *    scale of the sum (|alpha| sum |a_p b_p|, scales included), u_acc 2^-9
 *    for split accumulation (fast: ceil(K/32) 2^-12 if larger) + (K+4)
 *    2^-24, and S u_out for each extra rounding of a beta = 1 accumulation;
 *  - that bound can fail: the same results are compared with the references
 *    of a wrong scale (scales[0] for every rank's rows, or 1 where that is
 *    the right scale) and of a wrong row order (the ranks' blocks reversed),
 *    and each must exceed the bound;
 *  - the view stays valid until the plan's next call: it is read after the
 *    caller's stream has synchronized and after the wgrad GEMMs (which stage
 *    through the context's scratch), while rank 0 holds it 0.2 s with its
 *    peers already in their next call (enqueued, waiting for rank 0's); a
 *    second call with new bytes and new scales must then replace it.
 * Shapes: uneven row slices (one empty), op(B) N and T, bf16 and fp32
 * outputs, split and fast accumulation, 1 to 3 chunks and automatic, the
 * SENDRECV transport and SERIAL mode; FP8 plans on CUDA take slices, k and
 * n that are multiples of 16, tpla_gemm any shape (dW's n2 is not always).
 *
 * Run: build/tests/test_gpu_overlap_fp8_reuse (exits 77 without a GPU;
 * skips on GPUs without FP8 GEMMs). Replay with TPLA_TEST_SEED; progress
 * lines and hang reports as in test_gpu_overlap.c.
 */
#include "test.h"
#include "tpla.h"

#ifdef TPLA_HAVE_CUDA
#include "test_gpu_overlap_util.h"

#define E4M3 TPLA_FLOAT8_E4M3
#define CALLS 2 /* per plan: the second must replace the first's gathered view */
#define SLOT TPLA_FP8_SCALE_STRIDE

/* ---- E4M3 on the host (independent of the library's codec) --------------------- */

/* OCP E4M3: bias 7, 3 mantissa bits, S.1111.111 NaN, no infinities. */
static double e4m3(uint8_t c) {
  int e = (c >> 3) & 15, m = c & 7;
  if ((c & 0x7f) == 0x7f)
    return NAN;
  double v = e == 0 ? ldexp(m, -9) : ldexp(8 + m, e - 10); /* m/8 2^-6, (1 + m/8) 2^(e-7) */
  return c & 0x80 ? -v : v;
}

/* Random codes of magnitude at most 15 (exponent field <= 10; zeros and
 * subnormals included, never NaN), either sign. */
static uint8_t *random_codes(int64_t count, uint64_t s) {
  gpu_rng_t g;
  gpu_rng_seed(&g, s);
  uint8_t *v = malloc((size_t)count + 1);
  for (int64_t i = 0; v != NULL && i < count; i++) {
    int mag = (int)((gpu_rng_uniform(&g) + 1.0) * 0.5 * 0x58);
    v[i] = (uint8_t)((mag < 0x57 ? mag : 0x57) | (gpu_rng_uniform(&g) < 0 ? 0x80 : 0));
  }
  return v;
}

/* A device E4M3 matrix (rows x cols, dense) holding exactly these bytes:
 * uploaded as u8, relabelled. */
static tpla_matrix_t upload_codes(const uint8_t *codes, int64_t rows, int64_t cols, int *f) {
  double *v = malloc(sizeof *v * (size_t)(rows * cols + 1));
  for (int64_t i = 0; v != NULL && i < rows * cols; i++)
    v[i] = codes[i];
  tpla_matrix_t m = gt_upload(v, rows, cols, 0, TPLA_UINT8, f);
  free(v);
  m.dtype = E4M3;
  return m;
}

/* ---- the cases ------------------------------------------------------------------- */

typedef struct {
  const char *name;
  tpla_op_t op_b;
  tpla_dtype_t d_dtype, w_dtype;   /* D's and dW's */
  tpla_fp8_accum_t accum, w_accum; /* the plan call's and the wgrad's */
  tpla_overlap_mode_t mode;
  tpla_transport_t transport; /* SENDRECV is forced only with 2+ ranks */
  int chunks;
  int64_t rows0, rows1; /* rank 0's slice, every other rank's */
  int64_t k, n, n2;     /* A's columns, D's, dW's */
  float alpha;
  int same_scale; /* every rank one scale: one wgrad GEMM over the whole view */
} rcase_t;

static const rcase_t cases[] = {
    {"op T, bf16 D, one chunk", TPLA_OP_T, TPLA_BFLOAT16, TPLA_FLOAT32, TPLA_FP8_ACCUM_SPLIT,
     TPLA_FP8_ACCUM_SPLIT, TPLA_OVERLAP_OVERLAP, TPLA_TRANSPORT_AUTO, 1, 64, 112, 128, 80, 48,
     1.0f, 0},
    {"op N, fp32 D, fast, 3 chunks, bf16 dW", TPLA_OP_N, TPLA_FLOAT32, TPLA_BFLOAT16,
     TPLA_FP8_ACCUM_FAST, TPLA_FP8_ACCUM_SPLIT, TPLA_OVERLAP_OVERLAP, TPLA_TRANSPORT_AUTO, 3, 176,
     48, 96, 64, 40, -0.5f, 0},
    {"op T, SENDRECV, automatic chunks, fast", TPLA_OP_T, TPLA_FLOAT32, TPLA_FLOAT32,
     TPLA_FP8_ACCUM_FAST, TPLA_FP8_ACCUM_FAST, TPLA_OVERLAP_OVERLAP, TPLA_TRANSPORT_SENDRECV, 0,
     256, 384, 64, 128, 32, 1.0f, 0},
    {"op N, SERIAL", TPLA_OP_N, TPLA_BFLOAT16, TPLA_FLOAT32, TPLA_FP8_ACCUM_SPLIT,
     TPLA_FP8_ACCUM_SPLIT, TPLA_OVERLAP_SERIAL, TPLA_TRANSPORT_AUTO, 1, 128, 80, 112, 48, 64,
     1.0f, 0},
    {"op T, empty slices past rank 0", TPLA_OP_T, TPLA_BFLOAT16, TPLA_FLOAT32,
     TPLA_FP8_ACCUM_SPLIT, TPLA_FP8_ACCUM_SPLIT, TPLA_OVERLAP_OVERLAP, TPLA_TRANSPORT_AUTO, 2,
     128, 0, 64, 32, 16, 1.0f, 0},
    {"op N, one scale for all ranks, whole-view wgrad", TPLA_OP_N, TPLA_BFLOAT16, TPLA_FLOAT32,
     TPLA_FP8_ACCUM_SPLIT, TPLA_FP8_ACCUM_SPLIT, TPLA_OVERLAP_OVERLAP, TPLA_TRANSPORT_AUTO, 2,
     96, 160, 128, 96, 48, 1.0f, 1},
};
#define NCASES ((int)(sizeof cases / sizeof cases[0]))

/* Rank q's A scale in call `call`: ranks differ by factors of 2 and more;
 * exact in float, and products with E4M3 values are exact in double. */
static float a_scale(const rcase_t *c, int q, int call) {
  return (call ? 1.5f : 0.5f) * (float)(c->same_scale ? 1 : q + 1);
}
static const float b_scale = 0.75f, x_scale = 1.25f;

/* ---- the host side: every rank's bytes and the float64 references ---------------- */

typedef struct {
  double *want, *s;     /* the reference and the scale of its error (S) */
  double *mistake[2];   /* wrong scale, wrong row order (NULL: not distinct here) */
} expect_t;

typedef struct {
  const rcase_t *c;
  int P, me, nonempty; /* ranks with rows */
  int64_t rows[GT_MAX_RANKS], offs[GT_MAX_RANKS + 1], m, max_rows;
  uint8_t *a[CALLS][GT_MAX_RANKS]; /* every rank's A_local (rows x k) */
  uint8_t *b, *x[CALLS];           /* this rank's B (as op_b stores it), X (m x n2) */
  expect_t d[CALLS], dw[CALLS];
} host_t;

static uint64_t mix(uint64_t s, int tag, int call, int q) {
  return s * 1000003ull + (uint64_t)tag * 7919ull + (uint64_t)call * 131ull + (uint64_t)q;
}

/* The gathered A of `call` dequantized (m x k): each rank's block times its
 * scale. mistake 1: every block with the first non-empty rank's scale (what
 * scales[0] would give), or with 1 where that scale is the right one;
 * mistake 2: the blocks in reverse rank order. */
static double *gathered_f64(const host_t *h, int call, int mistake) {
  const int64_t k = h->c->k;
  double *g = malloc(sizeof *g * (size_t)(h->m * k + 1)), wrong = 1.0;
  for (int q = 0; q < h->P && h->nonempty > 1 && !h->c->same_scale; q++)
    if (h->rows[q] > 0) {
      wrong = a_scale(h->c, q, call);
      break;
    }
  int64_t row = 0;
  for (int i = 0; g != NULL && i < h->P; i++) {
    int q = mistake == 2 ? h->P - 1 - i : i;
    double s = mistake == 1 ? wrong : a_scale(h->c, q, call);
    for (int64_t e = 0; e < h->rows[q] * k; e++)
      g[row * k + e] = s * e4m3(h->a[call][q][e]);
    row += h->rows[q];
  }
  return g;
}

static double *decoded(const uint8_t *codes, int64_t count, double factor) {
  double *v = malloc(sizeof *v * (size_t)(count + 1));
  for (int64_t i = 0; v != NULL && i < count; i++)
    v[i] = factor * e4m3(codes[i]);
  return v;
}

/* D's and dW's references of `call`, right and with each mistake. */
static void make_expect(host_t *h, int call) {
  const rcase_t *c = h->c;
  const int64_t m = h->m, k = c->k, n = c->n, n2 = c->n2;
  double *bd = decoded(h->b, k * n, (double)c->alpha * b_scale);
  double *xd = decoded(h->x[call], m * n2, x_scale);
  for (int v = 0; v < 3; v++) {
    if (v == 2 && h->nonempty < 2)
      continue; /* one block: no order to get wrong */
    double *g = gathered_f64(h, call, v);
    double *dw = malloc(sizeof *dw * (size_t)(m * n + 1));
    double *ds = malloc(sizeof *ds * (size_t)(m * n + 1));
    double *ww = malloc(sizeof *ww * (size_t)(k * n2 + 1));
    double *ws = malloc(sizeof *ws * (size_t)(k * n2 + 1));
    gemm_ref_f64(dw, ds, n, m, n, k, g, k, TPLA_OP_N, bd, c->op_b == TPLA_OP_N ? n : k, c->op_b);
    gemm_ref_f64(ww, ws, n2, k, n2, m, g, k, TPLA_OP_T, xd, n2, TPLA_OP_N);
    if (v == 0) {
      h->d[call].want = dw, h->d[call].s = ds, h->dw[call].want = ww, h->dw[call].s = ws;
    } else {
      h->d[call].mistake[v - 1] = dw, h->dw[call].mistake[v - 1] = ww;
      free(ds), free(ws);
    }
    free(g);
  }
  free(bd), free(xd);
}

static void make_host(host_t *h, const rcase_t *c, int P, int me, uint64_t s) {
  memset(h, 0, sizeof *h);
  h->c = c, h->P = P, h->me = me;
  for (int q = 0; q < P; q++) {
    h->rows[q] = q == 0 ? c->rows0 : c->rows1;
    h->offs[q + 1] = h->offs[q] + h->rows[q];
    h->nonempty += h->rows[q] > 0;
    h->max_rows = h->rows[q] > h->max_rows ? h->rows[q] : h->max_rows;
  }
  h->m = h->offs[P];
  h->b = random_codes(c->k * c->n, mix(s, 1, 0, me));
  for (int call = 0; call < CALLS; call++) {
    for (int q = 0; q < P; q++)
      h->a[call][q] = random_codes(h->rows[q] * c->k, mix(s, 2, call, q));
    h->x[call] = random_codes(h->m * c->n2, mix(s, 3, call, me));
    make_expect(h, call);
  }
}

static void free_expect(expect_t *e) {
  free(e->want), free(e->s), free(e->mistake[0]), free(e->mistake[1]);
}

static void free_host(host_t *h) {
  for (int call = 0; call < CALLS; call++) {
    for (int q = 0; q < h->P; q++)
      free(h->a[call][q]);
    free(h->x[call]);
    free_expect(&h->d[call]);
    free_expect(&h->dw[call]);
  }
  free(h->b);
}

/* ---- the checks ------------------------------------------------------------------- */

/* fp8_cases.h's accumulation bound over K products, relative to S. */
static double fp8_u_acc(int64_t k, tpla_fp8_accum_t accum) {
  double split = 0x1p-9, fast = ceil((double)k / 32.0) * 0x1p-12;
  return (accum == TPLA_FP8_ACCUM_FAST ? fmax(split, fast) : split) + (double)(k + 4) * 0x1p-24;
}

/* Max over the elements of |got - ref| / tol, tol = S (u_acc + (roundings
 * - 1) u_out) + |ref| u_out: a beta = 1 accumulation rounds each partial
 * sum (at most S) once more. NaN counts as infinity. */
static double worst_ratio(const double *got, const double *ref, const double *s, int64_t count,
                          double u_acc, double u_out, int roundings) {
  double worst = 0;
  for (int64_t i = 0; i < count; i++) {
    double tol = s[i] * (u_acc + (roundings - 1) * u_out) + fabs(ref[i]) * u_out + 1e-30;
    double r = fabs(got[i] - ref[i]) / tol;
    worst = isnan(r) ? INFINITY : fmax(worst, r);
  }
  return worst;
}

/* got within the bound of the reference and outside it for each mistake;
 * appends the ratios to `line`. Returns failures. */
static int check_result(const char *what, const double *got, const expect_t *e, int64_t count,
                        double u_acc, tpla_dtype_t out, int roundings, char *line, size_t size) {
  static const char *mistake[2] = {"wrong scale", "wrong row order"};
  double u_out = unit_roundoff(out);
  double ratio = worst_ratio(got, e->want, e->s, count, u_acc, u_out, roundings);
  int failures = !(ratio <= 1.0);
  if (failures)
    fprintf(stderr, "  %s: error %.3g x the bound\n", what, ratio);
  size_t used = strlen(line);
  const char *sep = used > 0 && line[used - 1] != ':' ? ";" : ""; /* "D ...; dW ..." */
  snprintf(line + used, size - used, "%s %s %.3g of the bound", sep, what, ratio);
  for (int i = 0; i < 2; i++) {
    if (e->mistake[i] == NULL)
      continue;
    double r = worst_ratio(got, e->mistake[i], e->s, count, u_acc, u_out, roundings);
    if (!(r > 1.0)) {
      fprintf(stderr, "  %s: the bound does not tell a %s apart (%.3g x the bound)\n", what,
              mistake[i], r);
      failures++;
    }
    used = strlen(line);
    snprintf(line + used, size - used, " (%s: %.3g)", mistake[i], r);
  }
  return failures;
}

/* The view is the concatenation of every rank's A_local bytes and its
 * scales are every non-empty rank's a_scale, bit for bit. */
static int check_gathered(const host_t *h, int call, tpla_matrix_t g, const float *gs) {
  const int64_t k = h->c->k;
  int failures = 0;
  CHECK(&failures, g.rows == h->m && g.cols == k && g.ld == k && g.dtype == E4M3,
        "gathered view %lldx%lld ld %lld %s, want %lldx%lld ld %lld e4m3", (long long)g.rows,
        (long long)g.cols, (long long)g.ld, tpla_dtype_name(g.dtype), (long long)h->m,
        (long long)k, (long long)k);
  CHECK(&failures, (uintptr_t)gs % 16 == 0, "gathered scales at %p: not 16-byte aligned",
        (const void *)gs);
  if (failures)
    return failures;
  tpla_matrix_t bytes = g;
  bytes.dtype = TPLA_UINT8;
  double *got = gt_download(bytes, &failures);
  for (int q = 0; q < h->P && failures == 0; q++)
    for (int64_t e = 0; e < h->rows[q] * k; e++)
      if (got[h->offs[q] * k + e] != h->a[call][q][e]) {
        fprintf(stderr, "  rank %d, call %d: gathered byte %lld of rank %d's block is 0x%02x, "
                "not 0x%02x\n", h->me, call + 1, (long long)e, q,
                (unsigned)got[h->offs[q] * k + e], (unsigned)h->a[call][q][e]);
        failures++;
        break;
      }
  free(got);
  tpla_matrix_t sv = {(void *)gs, 1, h->P * SLOT, h->P * SLOT, TPLA_FLOAT32};
  double *scales = failures ? NULL : gt_download(sv, &failures);
  for (int q = 0; q < h->P && scales != NULL; q++)
    if (h->rows[q] > 0 && scales[q * SLOT] != a_scale(h->c, q, call)) {
      fprintf(stderr, "  rank %d, call %d: gathered scale of rank %d is %g, not %g\n", h->me,
              call + 1, q, scales[q * SLOT], (double)a_scale(h->c, q, call));
      failures++;
    }
  free(scales);
  return failures;
}

/* ---- one case on one rank ------------------------------------------------------------ */

/* dW = gathered^T X on the stream: one FP8 GEMM per non-empty rank's rows
 * with that rank's scale from the view (beta = 1 after the first), or with
 * one scale for every rank one GEMM over the view with scales[0]. Returns
 * the number of GEMMs (each rounds dW once). */
static int wgrad(gt_rank_t *r, const host_t *h, tpla_matrix_t dw, tpla_matrix_t g,
                 const float *gs, tpla_matrix_t x, const float *xs, int *failures) {
  tpla_gemm_args_t w = TPLA_GEMM_ARGS_INIT;
  w.fp8.b_scale = xs;
  w.fp8.accum = h->c->w_accum;
  if (h->c->same_scale) {
    w.fp8.a_scale = gs;
    *failures += TPLA_FAILED(tpla_gemm(r->ctx, dw, g, TPLA_OP_T, x, TPLA_OP_N, &w, r->stream));
    return 1;
  }
  int gemms = 0;
  for (int q = 0; q < h->P; q++) {
    if (h->rows[q] == 0)
      continue; /* its scale slot is unspecified, and it adds nothing */
    tpla_matrix_t gq = {(char *)g.data + h->offs[q] * g.ld, h->rows[q], g.cols, g.ld, g.dtype};
    tpla_matrix_t xq = {(char *)x.data + h->offs[q] * x.ld, h->rows[q], x.cols, x.ld, x.dtype};
    w.beta = gemms ? 1.0f : 0.0f;
    w.fp8.a_scale = gs + (size_t)q * SLOT;
    *failures += TPLA_FAILED(tpla_gemm(r->ctx, dw, gq, TPLA_OP_T, xq, TPLA_OP_N, &w, r->stream));
    gemms++;
  }
  return gemms;
}

/* Collective: every rank passes the same plan creation, calls, barriers
 * and syncs whatever its checks found. Returns failures. */
static int run_reuse(gt_rank_t *r, const rcase_t *c, uint64_t case_seed) {
  const int P = r->nranks, me = r->rank;
  int f = 0;
  gt_step(r, "%s: host data and float64 references", c->name);
  host_t *h = malloc(sizeof *h);
  if (h == NULL)
    return 1; /* before any collective: every rank fails alike or hangs visibly */
  make_host(h, c, P, me, case_seed);
  gt_step(r, "%s: uploads", c->name);
  tpla_matrix_t a[CALLS], x[CALLS];
  for (int call = 0; call < CALLS; call++) {
    a[call] = upload_codes(h->a[call][me], h->rows[me], c->k, &f);
    x[call] = upload_codes(h->x[call], h->m, c->n2, &f);
  }
  tpla_matrix_t b = c->op_b == TPLA_OP_N ? upload_codes(h->b, c->k, c->n, &f)
                                         : upload_codes(h->b, c->n, c->k, &f);
  tpla_matrix_t d = gt_upload(NULL, h->m, c->n, 0, c->d_dtype, &f);
  tpla_matrix_t dw = gt_upload(NULL, c->k, c->n2, 0, c->w_dtype, &f);
  /* this rank's A scale of each call, B's, X's: 16 bytes apart */
  double sh[(CALLS + 2) * SLOT] = {0};
  for (int call = 0; call < CALLS; call++)
    sh[call * SLOT] = a_scale(c, me, call);
  sh[CALLS * SLOT] = b_scale, sh[(CALLS + 1) * SLOT] = x_scale;
  tpla_matrix_t sc = gt_upload(sh, 1, (CALLS + 2) * SLOT, 0, TPLA_FLOAT32, &f);
  const float *scales = sc.data;
  f += CUDA_FAILED(cudaDeviceSynchronize()); /* pageable copies landed; nothing else runs */
  gt_barrier_at(r, "after the uploads");     /* no rank allocates while a peer's exchange spins */
  gt_step(r, "%s: create the plan", c->name);
  tpla_ag_gemm_desc_t desc = TPLA_AG_GEMM_DESC_INIT;
  desc.local_rows = h->rows[me], desc.k = c->k, desc.n = c->n, desc.op_b = c->op_b;
  desc.dtype = E4M3, desc.d_dtype = c->d_dtype, desc.mode = c->mode, desc.chunks = c->chunks;
  desc.transport = P > 1 ? c->transport : TPLA_TRANSPORT_AUTO;
  tpla_ag_gemm_plan_t plan = NULL;
  tpla_status_t st = tpla_ag_gemm_plan_create(&plan, r->ctx, &desc); /* agreed by every rank */
  f += TPLA_FAILED(st);
  gw_plan(gt_watch(r), me, gt_plan_of(plan, NULL, NULL));
  if (st == TPLA_SUCCESS) { /* nothing to reuse before the first call */
    int has = 1;
    tpla_matrix_t none;
    const float *no_scales;
    f += TPLA_FAILED(tpla_ag_gemm_plan_has_gathered(plan, &has));
    CHECK(&f, has == 0, "has_gathered %d before the first call", has);
    CHECK(&f, tpla_ag_gemm_gathered(plan, &none) == TPLA_ERROR_INVALID_USAGE, "%s",
          "tpla_ag_gemm_gathered before the first call is not INVALID_USAGE");
    CHECK(&f, tpla_ag_gemm_gathered_scales(plan, &no_scales) == TPLA_ERROR_INVALID_USAGE, "%s",
          "tpla_ag_gemm_gathered_scales before the first call is not INVALID_USAGE");
  }
  size_t d_bytes = (size_t)(h->m * c->n) * tpla_dtype_size(c->d_dtype);
  size_t dw_bytes = (size_t)(c->k * c->n2) * tpla_dtype_size(c->w_dtype);
  for (int call = 0; call < CALLS && st == TPLA_SUCCESS; call++) {
    gt_step(r, "%s: call %d", c->name, call + 1);
    /* NaN in D and dW: beta = 0 must not read them, and every element is written */
    f += CUDA_FAILED(cudaMemsetAsync(d.data, 0xFF, d_bytes, r->stream));
    f += CUDA_FAILED(cudaMemsetAsync(dw.data, 0xFF, dw_bytes, r->stream));
    tpla_overlap_args_t args = TPLA_OVERLAP_ARGS_INIT;
    args.alpha = c->alpha;
    args.fp8.a_scale = scales + call * SLOT;
    args.fp8.b_scale = scales + CALLS * SLOT;
    args.fp8.accum = c->accum;
    tpla_status_t cs = tpla_ag_gemm(plan, d, a[call], b, &args, r->stream);
    f += TPLA_FAILED(cs);
    tpla_matrix_t g = {NULL, 0, 0, 1, E4M3};
    const float *gs = NULL;
    int has = 0, gemms = 0, ok = cs == TPLA_SUCCESS;
    if (ok) { /* the reuse, in stream order behind the call */
      f += TPLA_FAILED(tpla_ag_gemm_plan_has_gathered(plan, &has));
      CHECK(&f, has == 1, "has_gathered %d after call %d", has, call + 1);
      ok = !TPLA_FAILED(tpla_ag_gemm_gathered(plan, &g)) &&
           !TPLA_FAILED(tpla_ag_gemm_gathered_scales(plan, &gs));
      f += !ok;
    }
    if (ok) {
      gt_step(r, "%s: call %d: wgrad on the gathered view", c->name, call + 1);
      gemms = wgrad(r, h, dw, g, gs, x[call], scales + (CALLS + 1) * SLOT, &f);
    }
    f += gt_sync(r, "the call and the wgrad");
    if (!ok)
      continue;
    if (P > 1 && me == 0) { /* the peers are in their next call by now */
      gt_step(r, "%s: call %d: holding the view 0.2 s", c->name, call + 1);
      usleep(200 * 1000);
    }
    gt_step(r, "%s: call %d: checks", c->name, call + 1);
    f += check_gathered(h, call, g, gs);
    char line[512];
    snprintf(line, sizeof line, "# %d GPU%s, %s, call %d:", P, P > 1 ? "s" : "", c->name,
             call + 1);
    double *got = gt_download(d, &f);
    f += check_result("D", got, &h->d[call], h->m * c->n, fp8_u_acc(c->k, c->accum),
                      c->d_dtype, 1, line, sizeof line);
    free(got);
    got = gt_download(dw, &f);
    int64_t wk = c->same_scale ? h->m : h->max_rows; /* the longest sum of one GEMM */
    f += check_result("dW", got, &h->dw[call], c->k * c->n2, fp8_u_acc(wk, c->w_accum),
                      c->w_dtype, gemms, line, sizeof line);
    free(got);
    if (me == 0) {
      printf("%s (dW in %d GEMM%s)\n", line, gemms, gemms == 1 ? "" : "s");
      fflush(stdout);
    }
  }
  /* every rank's calls are complete before any plan goes */
  gt_step(r, "%s: tpla_barrier before destroying the plan", c->name);
  f += TPLA_FAILED(tpla_barrier(r->ctx, r->stream));
  f += gt_sync(r, "tpla_barrier");
  gw_plan(gt_watch(r), me, NULL);
  tpla_ag_gemm_plan_destroy(plan);
  for (int call = 0; call < CALLS; call++)
    cudaFree(a[call].data), cudaFree(x[call].data);
  cudaFree(b.data), cudaFree(d.data), cudaFree(dw.data), cudaFree(sc.data);
  free_host(h);
  free(h);
  gt_barrier_at(r, "after the frees"); /* cudaFree waits for the peer GPUs */
  gt_step(r, "%s: done, %d failure%s", c->name, f, f == 1 ? "" : "s");
  if (f)
    fprintf(stderr, "  rank %d: case \"%s\" on %d GPU%s, seed %llu: %d failure%s\n", me,
            c->name, P, P > 1 ? "s" : "", (unsigned long long)case_seed, f, f == 1 ? "" : "s");
  return f;
}

static int reuse_body(gt_rank_t *r, void *arg) {
  (void)arg;
  int failures = 0;
  for (int i = 0; i < NCASES; i++)
    failures += run_reuse(r, &cases[i], seed + 7919ull * (uint64_t)i);
  return failures;
}

/* ---- tests ------------------------------------------------------------------------ */

static void run_on(int P) {
  for (int q = 0; q < P; q++) {
    tpla_features_t feat = TPLA_FEATURES_INIT;
    ASSERT_OK(tpla_get_features(&feat, q));
    if (!feat.fp8)
      SKIP("device %d (%s) has no FP8 GEMMs", q, feat.device_name);
  }
  ASSERT_EQ_INT(gt_run(P, reuse_body, NULL), 0);
}

static void test_fp8_reuse_1gpu(void) { run_on(1); }

static void test_fp8_reuse_every_gpu(void) {
  int n = gpu_count();
  REQUIRE_GPUS(2, n);
  run_on(n < GT_MAX_RANKS ? n : GT_MAX_RANKS);
}

int main(void) {
  gpu_eager_loading();
  GPU_TEST_MAIN_SKIP_WITHOUT(gpu_count());
  seed = gpu_fresh_seed("test_gpu_overlap_fp8_reuse");
  gw_test_name = "test_gpu_overlap_fp8_reuse";
  watchdog_arm("test_gpu_overlap_fp8_reuse", 220);
  TEST(test_fp8_reuse_1gpu);
  TEST(test_fp8_reuse_every_gpu);
  return test_summary();
}

#else /* a build without the CUDA executor */
TEST_MAIN_WITHOUT_CUDA()
#endif
