/*
 * test_gpu_ns.c - Newton-Schulz (tpla_ns_*) on the CUDA executor, on 1 GPU
 * and on 2 GPUs (one thread per GPU, NCCL contexts), against a float64 host
 * reference of the same iteration (ns_ref.h, independent of the library):
 *   - fp32 and bf16 inputs (bf16 with an fp32 or a bf16 Gram), Muon and
 *     Polar Express, tall / wide / square / odd shapes, rows and columns
 *     sharded, even, uneven and empty shards, every algorithm (1 GPU: LOCAL,
 *     also when another one is asked for; 2 GPUs: GRAM_ALLREDUCE,
 *     REDISTRIBUTE, GATHER, GRAM_SHARDED, AUTO), ld > cols, in place and execute_out: the
 *     relative Frobenius error against the reference, padding and (for
 *     execute_out) x left untouched;
 *   - the singular values of the result are the composed scalar polynomial
 *     of the input's and lie in the interval it predicts (LAPACK; skipped
 *     without it);
 *   - 2 GPUs equal 1 GPU to bf16 (fp32) rounding;
 *   - enough steps of a converging schedule (the cubic, POLAR_STEPS steps)
 *     reach the polar factor U V^T from LAPACK's SVD of the input, on the
 *     rectangular shapes (a random square one is too ill-conditioned).
 * test_gpu_ns_api.c covers the 200-call loop and the rejected calls.
 *
 * Run: build-gpu/tests/test_gpu_ns (exits 77 without a GPU; the 2-GPU tests
 * skip on one GPU). The seed is printed; TPLA_TEST_SEED replays it.
 * TPLA_NS_TEST_HOST=1 runs everything on the host executor (threads as
 * ranks), which checks the test itself where there is no GPU;
 * TPLA_NS_TEST_STRIDE=k runs every k-th case only (e.g. under
 * compute-sanitizer or valgrind).
 */
#include "test.h"
#include "tpla.h"

#ifdef TPLA_HAVE_CUDA
#include "ns_ref.h"
#include "ns_team.h"

#define STEPS 5
#define EPS 1e-7f
/* Relative Frobenius error against the float64 reference of the same
 * iteration on the same rounded input. bf16: every step rounds X to 8 bits
 * and Muon's steps amplify early rounding (~10x); a bf16 Gram adds its own
 * rounding. fp32: full fp32 GEMMs (no TF32 for fp32 inputs). The printed
 * summary shows how close the worst case came. */
#define TOL_FP32 1e-4   /* the Gram iteration's; the X iteration's is TOL_FP32_X */
#define TOL_FP32_X 3e-5 /* runs to 214 on 1 and 2 GPUs: at most 6.7e-6, 8.0e-6 vs 1 GPU */
#define TOL_BF16 6e-2
#define TOL_BF16_GRAM 8e-2
/* Singular values: their distance to the prediction is at most the spectral
 * norm of the rounding error E (Weyl); for an s x l E with random-like
 * entries, ||E||_2 ~ ||E||_F (1/sqrt(s) + 1/sqrt(l)) ~ rel_F * 2 here
 * (||Y||_F ~ sqrt(s)). Host runs: at most 0.7x the relative error. */
#define SV_FACTOR 2.0
/* The polar cases: X <- 1.5 X - 0.5 X X^T X for POLAR_STEPS steps. The
 * normalized singular values of the rectangular inputs lie in about
 * [0.03, 0.1] (aspect 4) and [0.07, 0.15] (aspect 10): ~9 steps of growth
 * by 1.5 and ~6 of quadratic convergence, so 30 leave only rounding, ~u per
 * entry relative to 1/sqrt(min(m, n)). TOL_POLAR_*: relative Frobenius. */
#define POLAR_STEPS 30
#define TOL_POLAR_FP32 2e-5
#define TOL_POLAR_BF16 3e-2

typedef struct {
  int64_t m, n;
} shape_t;
static const shape_t shapes[] = {{256, 1024}, {1024, 256}, {512, 512}, {96, 1000}};
#define NSHAPES 4

typedef struct {
  tpla_dtype_t dtype, gram;
  int input; /* index of the rounded input: 0 fp32, 1 bf16 */
  double tol;
  const char *name;
} dcfg_t;
static const dcfg_t dcfgs[] = {{TPLA_FLOAT32, TPLA_FLOAT32, 0, TOL_FP32, "fp32"},
                               {TPLA_BFLOAT16, TPLA_FLOAT32, 1, TOL_BF16, "bf16"},
                               {TPLA_BFLOAT16, TPLA_BFLOAT16, 1, TOL_BF16_GRAM, "bf16+bf16 Gram"}};
#define NDCFG 3
static const tpla_ns_preset_t presets[] = {TPLA_NS_MUON, TPLA_NS_POLAR_EXPRESS};

enum { EVEN, UNEVEN, FIRST_EMPTY, LAST_EMPTY, NLAYOUTS };
static const char *const layout_names[] = {"even", "uneven", "first rank empty",
                                           "last rank empty"};

/* ---- fixtures: inputs, references, 1-GPU results (host, float64) ------------- */

static struct {
  uint64_t seed;
  bool host;  /* TPLA_NS_TEST_HOST: the host executor stands in for the GPUs */
  int stride; /* TPLA_NS_TEST_STRIDE */
  double *x[NSHAPES][2];             /* input rounded to fp32 / bf16 */
  double norm[NSHAPES][2];           /* ||x||_F */
  double *ref[NSHAPES][2][2];        /* [shape][input][preset] */
  double *one[NSHAPES][NDCFG][2];    /* the 1-GPU result, rows sharded */
  double *sv[NSHAPES][2];            /* singular values of the input (LAPACK) */
  double *polar[NSHAPES][2];         /* its polar factor U V^T (LAPACK) */
} fx;

typedef struct {
  int shape, input, preset;
} ref_job_t;

static void *ref_thread(void *p) {
  const ref_job_t *j = p;
  const shape_t *s = &shapes[j->shape];
  float table[3 * STEPS];
  double safety = ref_preset_table(presets[j->preset], STEPS, table);
  size_t mn = (size_t)(s->m * s->n);
  double *r = malloc(sizeof(double) * mn);
  if (r != NULL) {
    memcpy(r, fx.x[j->shape][j->input], sizeof(double) * mn);
    if (!ref_ns_f64(r, s->m, s->n, table, STEPS, safety, (double)EPS)) {
      free(r);
      r = NULL;
    }
  }
  fx.ref[j->shape][j->input][j->preset] = r;
  return NULL;
}

/* Random inputs in [-1, 1) rounded to fp32 and bf16, their references (one
 * thread each) and singular values. 0 on success. */
static int make_fixtures(void) {
  gpu_rng_t rng;
  gpu_rng_seed(&rng, fx.seed);
  for (int s = 0; s < NSHAPES; s++)
    for (int d = 0; d < 2; d++) {
      size_t mn = (size_t)(shapes[s].m * shapes[s].n);
      if ((fx.x[s][d] = malloc(sizeof(double) * mn)) == NULL)
        return 1;
      double ss = 0.0;
      for (size_t i = 0; i < mn; i++) {
        double v = d == 0 ? gpu_rng_uniform(&rng) : fx.x[s][0][i];
        float f;
        tpla_store_elem(&f, d == 0 ? TPLA_FLOAT32 : TPLA_BFLOAT16, 0, v);
        fx.x[s][d][i] = tpla_load_elem(&f, d == 0 ? TPLA_FLOAT32 : TPLA_BFLOAT16, 0);
        ss += fx.x[s][d][i] * fx.x[s][d][i];
      }
      fx.norm[s][d] = sqrt(ss);
    }
  ref_job_t jobs[NSHAPES * 4];
  pthread_t ids[NSHAPES * 4];
  int n = 0;
  for (int s = 0; s < NSHAPES; s++)
    for (int d = 0; d < 2; d++)
      for (int p = 0; p < 2; p++) {
        jobs[n] = (ref_job_t){s, d, p};
        if (pthread_create(&ids[n], NULL, ref_thread, &jobs[n]) != 0)
          ref_thread(&jobs[n]); /* run it here instead */
        else
          n++;
      }
  for (int i = 0; i < n; i++)
    pthread_join(ids[i], NULL);
  int failed = 0;
  for (int s = 0; s < NSHAPES; s++)
    for (int d = 0; d < 2; d++) {
      failed += fx.ref[s][d][0] == NULL || fx.ref[s][d][1] == NULL;
#ifdef TPLA_HAVE_LAPACK
      int64_t k = shapes[s].m < shapes[s].n ? shapes[s].m : shapes[s].n;
      fx.sv[s][d] = malloc(sizeof(double) * (size_t)k);
      failed += fx.sv[s][d] == NULL ||
                !ref_singular_values(fx.x[s][d], shapes[s].m, shapes[s].n, fx.sv[s][d]);
      fx.polar[s][d] = malloc(sizeof(double) * (size_t)(shapes[s].m * shapes[s].n));
      failed += fx.polar[s][d] == NULL ||
                !ref_polar_factor(fx.x[s][d], shapes[s].m, shapes[s].n, fx.polar[s][d]);
#endif
    }
  return failed;
}

static void free_fixtures(void) {
  for (int s = 0; s < NSHAPES; s++)
    for (int d = 0; d < 2; d++) {
      free(fx.x[s][d]);
      free(fx.sv[s][d]);
      free(fx.polar[s][d]);
      for (int p = 0; p < 2; p++)
        free(fx.ref[s][d][p]);
    }
  for (int s = 0; s < NSHAPES; s++)
    for (int c = 0; c < NDCFG; c++)
      for (int p = 0; p < 2; p++)
        free(fx.one[s][c][p]);
}

/* ---- one case ----------------------------------------------------------------- */

typedef struct {
  int shape, dcfg, preset, layout, pad;
  tpla_shard_t shard;
  tpla_ns_algorithm_t algo;
  bool use_out, spectrum;
  bool gram_iter; /* TPLA_NS_ITERATE_GRAM */
  bool polar;     /* POLAR_STEPS cubic steps, checked against the polar factor */
  /* outcome: per rank, then rank 0's verdict */
  bool failed[TEAM_MAX_RANKS];
  tpla_ns_algorithm_t picked[TEAM_MAX_RANKS];
  tpla_ns_iteration_t picked_iter[TEAM_MAX_RANKS];
  size_t ws[TEAM_MAX_RANKS];
  double err_ref, err_one, sv_dev, sv_out; /* -1: not measured */
} ns_case_t;

static void describe(char *buf, size_t size, const ns_case_t *c, int nranks) {
  const char *algo = c->algo == TPLA_NS_ALGO_AUTO ? "AUTO"
                     : c->algo == TPLA_NS_ALGO_GRAM_ALLREDUCE ? "GRAM_ALLREDUCE"
                     : c->algo == TPLA_NS_ALGO_REDISTRIBUTE ? "REDISTRIBUTE"
                     : c->algo == TPLA_NS_ALGO_GATHER ? "GATHER"
                     : c->algo == TPLA_NS_ALGO_GRAM_SHARDED ? "GRAM_SHARDED" : "LOCAL";
  snprintf(buf, size, "%" PRId64 "x%" PRId64 " %s %s, %d rank%s, %s sharded (%s), %s%s, pad %d%s",
           shapes[c->shape].m, shapes[c->shape].n, dcfgs[c->dcfg].name,
           c->polar ? "cubic to the polar factor" : c->preset ? "polar express" : "muon", nranks, nranks > 1 ? "s" : "",
           c->shard == TPLA_SHARD_ROWS ? "rows" : "cols", layout_names[c->layout], algo,
           c->gram_iter ? " (Gram iteration)" : "", c->pad,
           c->use_out ? ", execute_out" : "");
}

/* Sizes of the sharded dimension g over P ranks. */
static void split(int64_t g, int P, int layout, int64_t *sizes) {
  for (int r = 0; r < P; r++)
    sizes[r] = g / P + (r < g % P);
  if (P == 1 || layout == EVEN)
    return;
  if (layout == UNEVEN) { /* rank 0 about 3/10, the rest on the last rank */
    for (int r = 0; r < P; r++)
      sizes[r] = r == 0 ? g * 3 / 10 : r == P - 1 ? 0 : g / P;
    int64_t used = 0;
    for (int r = 0; r < P - 1; r++)
      used += sizes[r];
    sizes[P - 1] = g - used;
    return;
  }
  int empty = layout == FIRST_EMPTY ? 0 : P - 1, heir = layout == FIRST_EMPTY ? 1 : 0;
  sizes[heir] += sizes[empty];
  sizes[empty] = 0;
}

/* This rank's part of case c: shard, plan, execute, checks of what this
 * rank can see; writes its part of the result into gout. *stop is set when
 * the communicator may be out of step (an execute failed). */
static int run_case_rank(rank_env_t *e, ns_case_t *c, double *gout, int *stop) {
  const shape_t *sh = &shapes[c->shape];
  const dcfg_t *dc = &dcfgs[c->dcfg];
  int P = e->nranks, r = e->rank, failures = 0;
  bool rows = c->shard == TPLA_SHARD_ROWS, failed = false;
  int64_t sizes[TEAM_MAX_RANKS], off = 0;
  split(rows ? sh->m : sh->n, P, c->layout, sizes);
  for (int q = 0; q < r; q++)
    off += sizes[q];
  int64_t lr = rows ? sizes[r] : sh->m, lc = rows ? sh->n : sizes[r];
  int64_t ld = (lc > 0 ? lc : 1) + c->pad;
  size_t es = tpla_dtype_size(dc->dtype), bytes = (size_t)(lr * ld) * es;
  const team_shard_t part = {rows, off, lr, lc, ld, sh->n, dc->dtype};
  unsigned char *hx = malloc(bytes + es), *hy = malloc(bytes + es), *ho = malloc(bytes + es);
  failed = !hx || !hy || !ho;
  if (!failed)
    team_shard_store(&part, hx, fx.x[c->shape][dc->input]);
  void *dx = team_alloc(e, bytes, &failed), *dout = c->use_out ? team_alloc(e, bytes, &failed)
                                                               : NULL;
  failed = failed || team_copy(e, dx, hx, bytes, cudaMemcpyHostToDevice);
  if (!failed && dout != NULL)
    failed = team_fill(e, dout, 0xFF, bytes);
  tpla_ns_desc_t d = TPLA_NS_DESC_INIT;
  d.shard = c->shard;
  d.local_rows = lr;
  d.local_cols = lc;
  d.dtype = dc->dtype;
  d.gram_dtype = dc->gram;
  d.steps = STEPS;
  d.preset = presets[c->preset];
  float cubic[3 * POLAR_STEPS];
  if (c->polar) {
    for (int k = 0; k < POLAR_STEPS; k++)
      cubic[3 * k] = 1.5f, cubic[3 * k + 1] = -0.5f, cubic[3 * k + 2] = 0.0f;
    d.steps = POLAR_STEPS;
    d.preset = TPLA_NS_USER;
    d.coefficients = cubic;
    d.ncoefficients = 3 * POLAR_STEPS;
  }
  d.algorithm = c->algo;
  /* AUTO cases leave the iteration to the plan too, as the default does */
  d.iteration = c->gram_iter                    ? TPLA_NS_ITERATE_GRAM
                : c->algo == TPLA_NS_ALGO_AUTO ? TPLA_NS_ITERATE_AUTO
                                               : TPLA_NS_ITERATE_X;
  d.eps = EPS;
  tpla_ns_plan_t plan = NULL;
  /* every rank creates the plan (collective), even one that failed above */
  tpla_status_t s = tpla_ns_plan_create(&plan, e->ctx, failed ? NULL : &d);
  failed = failed || TPLA_FAILED(s);
  if (!failed) {
    tpla_ns_plan_algorithm(plan, &c->picked[r]);
    tpla_ns_plan_iteration(plan, &c->picked_iter[r]);
    tpla_ns_plan_workspace_bytes(plan, &c->ws[r]);
    tpla_matrix_t xv = {dx, lr, lc, ld, dc->dtype}, ov = {dout, lr, lc, ld, dc->dtype};
    s = c->use_out ? tpla_ns_execute_out(plan, ov, xv, e->stream)
                   : tpla_ns_execute(plan, xv, e->stream);
    if (TPLA_FAILED(s) || team_drain(e, "tpla_ns_execute")) {
      failed = true;
      *stop = 1;
    }
  }
  if (!failed)
    failed = team_copy(e, hy, dx, bytes, cudaMemcpyDeviceToHost) ||
             (dout && team_copy(e, ho, dout, bytes, cudaMemcpyDeviceToHost));
  if (!failed) {
    char what[200];
    describe(what, sizeof what, c, P);
    failures += team_shard_load(&part, c->use_out ? ho : hy, gout, r, what);
    if (c->use_out)
      CHECK(&failures, memcmp(hy, hx, bytes) == 0, "rank %d: %s: x was modified", r, what);
  }
  tpla_ns_plan_destroy(plan);
  team_free(e, dx);
  team_free(e, dout);
  free(hx);
  free(hy);
  free(ho);
  c->failed[r] = failed || failures > 0;
  return failures + failed;
}

/* ---- rank 0's verdict on a case --------------------------------------------- */

typedef struct {
  int cases;
  double err_ref, err_one, sv_dev, sv_out; /* worst seen */
} worst_t;

static void keep_worst(double *w, double v) {
  if (v > *w || isnan(v))
    *w = v;
}

static int judge_case(ns_case_t *c, const double *gout, int P, worst_t *worst) {
  for (int r = 0; r < P; r++)
    if (c->failed[r])
      return 0; /* counted by that rank */
  const shape_t *sh = &shapes[c->shape];
  const dcfg_t *dc = &dcfgs[c->dcfg];
  size_t mn = (size_t)(sh->m * sh->n);
  int failures = 0;
  char what[200];
  describe(what, sizeof what, c, P);
  for (int r = 0; r < P; r++) {
    tpla_ns_algorithm_t want = P == 1 ? TPLA_NS_ALGO_LOCAL : c->algo;
    if (want == TPLA_NS_ALGO_AUTO)
      CHECK(&failures, c->picked[r] == c->picked[0] && c->picked[r] != TPLA_NS_ALGO_AUTO &&
                       c->picked[r] != TPLA_NS_ALGO_LOCAL,
            "%s: rank %d's plan runs algorithm %d", what, r, (int)c->picked[r]);
    else
      CHECK(&failures, c->picked[r] == want, "%s: rank %d's plan runs algorithm %d", what, r,
            (int)c->picked[r]);
  }
  if (c->polar) {
#ifdef TPLA_HAVE_LAPACK
    double tol = dc->dtype == TPLA_FLOAT32 ? TOL_POLAR_FP32 : TOL_POLAR_BF16;
    c->err_ref = ref_rel_diff(gout, fx.polar[c->shape][dc->input], mn);
    CHECK(&failures, c->err_ref <= tol, "%s: relative error %.3e against the polar factor "
          "> %.1e", what, c->err_ref, tol);
    keep_worst(&worst->err_ref, c->err_ref);
#endif
    worst->cases++;
    return failures;
  }
  double tol = dc->tol;
  if (dc->dtype == TPLA_FLOAT32 && c->picked_iter[0] == TPLA_NS_ITERATE_X)
    tol = TOL_FP32_X;
  c->err_ref = ref_rel_diff(gout, fx.ref[c->shape][dc->input][c->preset], mn);
  CHECK(&failures, c->err_ref <= tol, "%s: relative error %.3e against float64 > %.1e",
        what, c->err_ref, tol);
  keep_worst(&worst->err_ref, c->err_ref);
  double **one = &fx.one[c->shape][c->dcfg][c->preset];
  if (P == 1 && *one == NULL && c->shard == TPLA_SHARD_ROWS) {
    if ((*one = malloc(sizeof(double) * mn)) != NULL)
      memcpy(*one, gout, sizeof(double) * mn);
  } else if (P > 1 && *one != NULL) {
    c->err_one = ref_rel_diff(gout, *one, mn);
    CHECK(&failures, c->err_one <= tol, "%s: relative difference %.3e to 1 GPU > %.1e",
          what, c->err_one, tol);
    keep_worst(&worst->err_one, c->err_one);
  }
#ifdef TPLA_HAVE_LAPACK
  if (c->spectrum) {
    int64_t k = sh->m < sh->n ? sh->m : sh->n;
    double *got = malloc(sizeof(double) * (size_t)k), *want = malloc(sizeof(double) * (size_t)k);
    float table[3 * STEPS];
    double safety = ref_preset_table(presets[c->preset], STEPS, table), lo = 0, hi = 0;
    bool ok = got && want && ref_singular_values(gout, sh->m, sh->n, got);
    CHECK(&failures, ok, "%s: LAPACK dgesvd of the result failed", what);
    if (ok) {
      ref_predict(fx.sv[c->shape][dc->input], k, safety * fx.norm[c->shape][dc->input] + EPS,
                  table, STEPS, want, &lo, &hi);
      c->sv_dev = c->sv_out = 0.0;
      for (int64_t i = 0; i < k; i++) {
        keep_worst(&c->sv_dev, fabs(got[i] - want[i]));
        keep_worst(&c->sv_out, got[i] < lo ? lo - got[i] : got[i] > hi ? got[i] - hi : 0.0);
      }
      double sv_tol = SV_FACTOR * dc->tol;
      CHECK(&failures, c->sv_dev <= sv_tol,
            "%s: singular values differ from the predicted ones by %.3e > %.1e", what,
            c->sv_dev, sv_tol);
      CHECK(&failures, c->sv_out <= sv_tol,
            "%s: singular values [%.4f, %.4f] leave the predicted [%.4f, %.4f] by %.3e", what,
            got[k - 1], got[0], lo, hi, c->sv_out);
      keep_worst(&worst->sv_dev, c->sv_dev);
      keep_worst(&worst->sv_out, c->sv_out);
    }
    free(got);
    free(want);
  }
#endif
  worst->cases++;
  return failures;
}

/* ---- the case lists ------------------------------------------------------------ */

/* Error summaries per requested algorithm (tpla_ns_algorithm_t), and one for
 * the Gram iteration's cases whatever their algorithm. */
#define NBUCKETS 8
static int bucket(const ns_case_t *c) {
  return c->polar ? NBUCKETS - 1 : c->gram_iter ? NBUCKETS - 2 : (int)c->algo;
}

typedef struct {
  ns_case_t *cases;
  int ncases;
  double *out;                 /* the global result of the current case */
  worst_t worst[NDCFG][NBUCKETS]; /* [dcfg][requested algorithm, or the Gram iteration] */
} case_run_t;

static int cases_body(rank_env_t *e, void *arg) {
  case_run_t *run = arg;
  int failures = 0;
  const bool trace = getenv("TPLA_NS_TEST_TRACE") != NULL; /* which case a hang is in */
  for (int i = 0; i < run->ncases; i++) {
    ns_case_t *c = &run->cases[i];
    int stop = 0;
    if (trace) {
      char what[200];
      describe(what, sizeof what, c, e->nranks);
      printf("# rank %d starts case %d: %s\n", e->rank, i, what);
      fflush(stdout);
    }
    failures += run_case_rank(e, c, run->out, &stop);
    if (team_sync(e, stop))
      return failures + 1; /* the communicator may be out of step: stop here */
    if (e->rank == 0)
      failures += judge_case(c, run->out, e->nranks, &run->worst[c->dcfg][bucket(c)]);
    team_sync(e, 0);
  }
  return failures;
}

/* Every combination for P ranks (P = 1: the layout does not matter, and
 * LOCAL, AUTO and a forced algorithm must all run LOCAL). */
static int make_cases(int P, ns_case_t *cases) {
  static const tpla_ns_algorithm_t algos2[] = {TPLA_NS_ALGO_GRAM_ALLREDUCE,
                                               TPLA_NS_ALGO_REDISTRIBUTE, TPLA_NS_ALGO_GATHER,
                                               TPLA_NS_ALGO_AUTO, TPLA_NS_ALGO_GRAM_SHARDED};
  static const tpla_ns_algorithm_t algos1[] = {TPLA_NS_ALGO_LOCAL, TPLA_NS_ALGO_AUTO,
                                               TPLA_NS_ALGO_GRAM_ALLREDUCE};
  int n = 0, k = 0;
  for (int s = 0; s < NSHAPES; s++)
    for (int dc = 0; dc < NDCFG; dc++)
      for (int p = 0; p < 2; p++) {
        if (dc == 2 && p == 1)
          continue; /* the bf16 Gram with Muon only */
        for (int sh = 0; sh < 2; sh++)
          for (int lay = 0; lay < (P == 1 ? 1 : NLAYOUTS); lay++)
            for (int a = 0; a < (P == 1 ? 1 : 5); a++, k++) {
              if (k % fx.stride != 0)
                continue;
              ns_case_t c = {.shape = s, .dcfg = dc, .preset = p, .layout = lay,
                             .pad = (int[]){0, 3, 8}[(P == 1 ? k / 3 : k) % 3],
                             .shard = sh ? TPLA_SHARD_COLS : TPLA_SHARD_ROWS,
                             .algo = P == 1 ? algos1[k % 3] : algos2[a],
                             .use_out = k % 2 == 1,
                             .spectrum = P == 1 || (lay == EVEN && algos2[a] == TPLA_NS_ALGO_AUTO),
                             .err_ref = -1, .err_one = -1, .sv_dev = -1, .sv_out = -1};
              cases[n++] = c;
            }
      }
  /* TPLA_NS_ITERATE_GRAM: every shape, dtype and preset, both shardings,
   * AUTO on even shards, GRAM_ALLREDUCE and GRAM_SHARDED (its products split
   * across the ranks) on uneven ones (LOCAL on one GPU) */
  static const tpla_ns_algorithm_t gram_algos[] = {
      TPLA_NS_ALGO_AUTO, TPLA_NS_ALGO_GRAM_ALLREDUCE, TPLA_NS_ALGO_GRAM_SHARDED};
  for (int s = 0; s < NSHAPES; s++)
    for (int dc = 0; dc < NDCFG; dc++)
      for (int p = 0; p < 2; p++)
        for (int sh = 0; sh < 2 && !(dc == 2 && p == 1); sh++)
          for (int v = 0; v < (P == 1 ? 1 : 3); v++, k++) {
            if (k % fx.stride != 0)
              continue;
            ns_case_t c = {.shape = s, .dcfg = dc, .preset = p, .layout = v == 0 ? EVEN : UNEVEN,
                           .pad = k % 2 * 3, .shard = sh ? TPLA_SHARD_COLS : TPLA_SHARD_ROWS,
                           .algo = P == 1 ? TPLA_NS_ALGO_LOCAL : gram_algos[v],
                           .use_out = k % 2 == 0, .gram_iter = true, .err_ref = -1,
                           .err_one = -1, .sv_dev = -1, .sv_out = -1};
            cases[n++] = c;
          }
  /* to the polar factor: the rectangular shapes, fp32 and bf16 (fp32 Gram), both
   * shardings, AUTO and REDISTRIBUTE on uneven shards (LOCAL on one GPU) */
  for (int s = 0; s < NSHAPES; s++)
    for (int dc = 0; dc < 2 && shapes[s].m != shapes[s].n; dc++)
      for (int sh = 0; sh < 2; sh++)
        for (int v = 0; v < (P == 1 ? 1 : 2); v++, k++) {
          if (k % fx.stride != 0)
            continue;
          ns_case_t c = {.shape = s, .dcfg = dc, .layout = P == 1 ? EVEN : UNEVEN, .pad = k % 2,
                         .shard = sh ? TPLA_SHARD_COLS : TPLA_SHARD_ROWS,
                         .algo = P == 1 ? TPLA_NS_ALGO_LOCAL
                                 : v == 0 ? TPLA_NS_ALGO_AUTO : TPLA_NS_ALGO_REDISTRIBUTE,
                         .use_out = k % 2 == 1, .polar = true, .err_ref = -1, .err_one = -1,
                         .sv_dev = -1, .sv_out = -1};
          cases[n++] = c;
        }
  return n;
}

static void print_worst(const case_run_t *run, int P) {
  static const char *names[NBUCKETS] = {"AUTO",  "GRAM_ALLREDUCE", "REDISTRIBUTE",  "GATHER",
                                        "LOCAL", "GRAM_SHARDED",   "Gram iteration",
                                        "polar factor"};
  for (int dc = 0; dc < NDCFG; dc++)
    for (int a = 0; a < NBUCKETS; a++) {
      const worst_t *w = &run->worst[dc][a];
      if (w->cases == 0)
        continue;
      double tol = a == NBUCKETS - 1 ? (dc == 0 ? TOL_POLAR_FP32 : TOL_POLAR_BF16)
                   : dc == 0 && a != NBUCKETS - 2 ? TOL_FP32_X /* AUTO on the Gram: TOL_FP32 */
                                                  : dcfgs[dc].tol;
      printf("# %d rank%s, %-14s %-14s %3d cases: worst error %.2e (tol %.0e)", P,
             P > 1 ? "s" : " ", dcfgs[dc].name, names[a], w->cases, w->err_ref, tol);
      if (w->err_one >= 0)
        printf(", vs 1 GPU %.2e", w->err_one);
      if (w->sv_dev >= 0)
        printf(", singular values %.2e off, %.2e outside", w->sv_dev, w->sv_out);
      printf("\n");
    }
  /* what AUTO picked, per shape and sharding */
  for (int i = 0; P > 1 && i < run->ncases; i++) {
    const ns_case_t *c = &run->cases[i];
    if (c->algo == TPLA_NS_ALGO_AUTO && !c->gram_iter && c->layout == EVEN && c->dcfg == 1 &&
        c->preset == 0 && !c->failed[0])
      printf("# AUTO on %d ranks, %" PRId64 "x%" PRId64 " bf16 %s sharded: %s, %s iteration, "
             "workspace %zu bytes on rank 0\n", P, shapes[c->shape].m, shapes[c->shape].n,
             c->shard == TPLA_SHARD_ROWS ? "rows" : "cols", names[c->picked[0]],
             c->picked_iter[0] == TPLA_NS_ITERATE_GRAM ? "Gram" : "X", c->ws[0]);
  }
}


static void run_cases(int P) {
  REQUIRE_GPUS(P, team_gpus(fx.host));
  case_run_t run;
  memset(&run, 0, sizeof run);
  for (int dc = 0; dc < NDCFG; dc++)
    for (int a = 0; a < NBUCKETS; a++)
      run.worst[dc][a] = (worst_t){0, 0.0, -1.0, -1.0, -1.0};
  run.cases = calloc(NSHAPES * NDCFG * 2 * 2 * (NLAYOUTS * 5 + 3) + NSHAPES * 2 * 2 * 2,
                     sizeof *run.cases);
  run.out = malloc(sizeof(double) * 512 * 1024);
  ASSERT_TRUE(run.cases != NULL && run.out != NULL);
  run.ncases = make_cases(P, run.cases);
  int failures = team_run(P, fx.host, cases_body, &run);
  print_worst(&run, P);
  printf("# %d rank%s: %d cases, %d failures\n", P, P > 1 ? "s" : "", run.ncases, failures);
  free(run.cases);
  free(run.out);
  ASSERT_EQ_INT(failures, 0);
}

static void test_ns_one_gpu_matches_f64(void) { run_cases(1); }
static void test_ns_two_gpus_match_f64_and_one_gpu(void) { run_cases(2); }
/* Every GPU of a larger machine as one group (4 ranks on the host). */
static void test_ns_all_gpus_match_f64_and_one_gpu(void) {
  int P = fx.host ? 4 : gpu_count() < TEAM_MAX_RANKS ? gpu_count() : TEAM_MAX_RANKS;
  if (P <= 2)
    SKIP("needs more than 2 GPUs, found %d", P);
  run_cases(P);
}

int main(void) {
  const char *stride = getenv("TPLA_NS_TEST_STRIDE");
  fx.host = gpu_env_on("TPLA_NS_TEST_HOST");
  fx.stride = stride != NULL && atoi(stride) > 1 ? atoi(stride) : 1;
  GPU_TEST_MAIN_SKIP_WITHOUT(team_gpus(fx.host));
  watchdog_arm("test_gpu_ns", 850);
  fx.seed = gpu_fresh_seed("test_gpu_ns");
  if (fx.host)
    printf("# TPLA_NS_TEST_HOST: on the host executor (threads as ranks), every %d%s case\n",
           fx.stride, fx.stride == 1 ? "st" : "th");
#ifndef TPLA_HAVE_LAPACK
  printf("# built without LAPACK: singular values are not checked\n");
#endif
  if (make_fixtures() != 0) {
    printf("FAIL setup: out of host memory or LAPACK failed\n0 passed, 1 failed\n");
    return 1;
  }
  TEST(test_ns_one_gpu_matches_f64);
  TEST(test_ns_two_gpus_match_f64_and_one_gpu);
  TEST(test_ns_all_gpus_match_f64_and_one_gpu);
  free_fixtures();
  return test_summary();
}

#else /* a build without the CUDA executor */
TEST_MAIN_WITHOUT_CUDA()
#endif
