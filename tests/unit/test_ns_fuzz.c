/*
 * test_ns_fuzz.c - randomized Newton-Schulz on the host executor. Each case,
 * drawn from one 64-bit case seed, picks what the systematic tests
 * (test_ns_dist.c, test_ns_batch.c) fix: the shape (a side of 1 included),
 * 1..8 ranks, rows or columns sharded with random uneven shards (several
 * empty ranks, a single nonempty one, shards of one), random ld padding,
 * fp32/bf16/fp16 input with an fp32 or input-dtype Gram, the X, Gram or
 * AUTO iteration, AUTO or a forced algorithm, a preset or a random user
 * table, 1..7 steps, safety and eps, tpla_ns_execute or tpla_ns_execute_out
 * (separate or aliased output), one call or two on the same plan; one plan in
 * four shares a workspace group with a neighbour plan of another random
 * matrix, made before or after it and called before each of its calls.
 * About one case in four is a batch (tpla_ns_batch_*) of such matrices.
 * Checked:
 *   - the distributed result equals one rank's (same desc, the iteration the
 *     distributed plan resolved to) to the rounding of the dtype;
 *   - one rank's result equals the float64 X iteration (ref_ns; the Gram
 *     iteration is the same polynomial map); tolerances scale with a float64
 *     model of the case's sensitivity to rounding (see "tolerances");
 *   - execute_out leaves its input unchanged, and no call writes the padding
 *     beyond cols of a row or anything of an empty shard: buffers start
 *     filled with 0xff bytes, NaN in every dtype, so a read of padding shows
 *     as a NaN result too.
 *
 *   ./test_ns_fuzz                          (CTest: test_ns_fuzz; ~8 s of cases)
 *   TPLA_FUZZ_SECONDS=600 ./test_ns_fuzz    a longer soak (at least 20 cases)
 *   TPLA_FUZZ_SEED=<seed> ./test_ns_fuzz    replay one case (printed on failure)
 *   TPLA_TEST_SEED=<seed> ./test_ns_fuzz    replay a run's sequence of cases
 *   TPLA_FUZZ_VERBOSE=1                     print every case and comparison
 */
#include "ns_fuzz_model.h"

#include <time.h>

/* ---- a rank's buffers ---------------------------------------------------- */

/* A rank's shard of one matrix in a buffer of whole rows (at least one) plus
 * a guard, everything not written by the fill SENTINEL. */
typedef struct {
  tpla_matrix_t view; /* data NULL for an empty shard passed so */
  unsigned char *buf;
  size_t bytes;
  int64_t off; /* of the shard in the sharded dimension */
  bool rows;   /* rows sharded */
} shard_t;

static int shard_alloc(shard_t *s, const mat_t *mt, int rank, int pad, bool null_empty) {
  const tpla_ns_desc_t *d = &mt->desc;
  s->rows = d->shard == TPLA_SHARD_ROWS;
  s->off = 0;
  for (int q = 0; q < rank; q++)
    s->off += mt->sizes[q];
  int64_t lr = s->rows ? mt->sizes[rank] : mt->m, lc = s->rows ? mt->n : mt->sizes[rank];
  int64_t ld = (lc > 0 ? lc : 1) + pad;
  s->bytes = (size_t)((lr > 0 ? lr : 1) * ld + GUARD) * tpla_dtype_size(d->dtype);
  s->buf = malloc(s->bytes);
  if (s->buf == NULL)
    return 1;
  memset(s->buf, SENTINEL, s->bytes);
  bool empty = lr == 0 || lc == 0;
  s->view = (tpla_matrix_t){empty && null_empty ? NULL : s->buf, lr, lc, ld, d->dtype};
  return 0;
}

/* Global (i, j) of the shard's element (i, j). */
static int64_t global_index(const shard_t *s, const mat_t *mt, int64_t i, int64_t j) {
  return s->rows ? (s->off + i) * mt->n + j : i * mt->n + s->off + j;
}

static void shard_fill(shard_t *s, const mat_t *mt, const double *x) {
  for (int64_t i = 0; i < s->view.rows; i++)
    for (int64_t j = 0; j < s->view.cols; j++)
      tpla_store_elem(s->buf, s->view.dtype, (size_t)(i * s->view.ld + j),
                      x[global_index(s, mt, i, j)]);
}

static void shard_read(const shard_t *s, const mat_t *mt, double *out) {
  for (int64_t i = 0; i < s->view.rows; i++)
    for (int64_t j = 0; j < s->view.cols; j++)
      out[global_index(s, mt, i, j)] =
          tpla_load_elem(s->buf, s->view.dtype, (size_t)(i * s->view.ld + j));
}

/* Element index of the first byte outside the elements that is not
 * SENTINEL, or -1. */
static int64_t shard_pad_written(const shard_t *s) {
  size_t es = tpla_dtype_size(s->view.dtype);
  for (size_t b = 0; b < s->bytes; b++) {
    int64_t e = (int64_t)(b / es), i = e / s->view.ld, j = e % s->view.ld;
    bool element = i < s->view.rows && j < s->view.cols;
    if (!element && s->buf[b] != SENTINEL)
      return e;
  }
  return -1;
}

/* ---- one plan, run on P ranks -------------------------------------------- */

enum { OUT_NONE, OUT_SEPARATE, OUT_ALIASED };

/* A workspace group (tpla_ns_desc_t.workspace_group): the plan shares its
 * workspace with a neighbour plan of another random matrix, made first or
 * after it and called before each of its calls (ns_share.c). */
enum { SHARE_NONE, SHARE_NEIGHBOUR_FIRST, SHARE_NEIGHBOUR_AFTER };

typedef struct {
  const mat_t *mt;
  int P;
  int share;              /* SHARE_* */
  const mat_t *nb;        /* the neighbour's matrix and input */
  const double *nb_x;
  int out_mode; /* OUT_*: tpla_ns_execute, or tpla_ns_execute_out */
  int calls;    /* 2: a first call on `first`, then one on `x` */
  bool null_empty;
  const double *x, *first;
  double *out;
  tpla_ns_algorithm_t algo[MAXP];
  tpla_ns_iteration_t iter[MAXP];
} plan_run_t;

/* Checks a shard after a call; prints why and returns 1 if it fails. */
static int check_after(const shard_t *x, const shard_t *out, const unsigned char *x_before,
                       int out_mode, int rank, int call) {
  int64_t e = shard_pad_written(x);
  if (e >= 0) {
    fprintf(stderr, "  rank %d call %d: padding element %" PRId64 " of x written (ld %" PRId64
            ")\n", rank, call, e, x->view.ld);
    return 1;
  }
  if (out_mode != OUT_SEPARATE)
    return 0;
  if (memcmp(x->buf, x_before, x->bytes) != 0) {
    fprintf(stderr, "  rank %d call %d: tpla_ns_execute_out changed its input\n", rank, call);
    return 1;
  }
  e = shard_pad_written(out);
  if (e >= 0) {
    fprintf(stderr, "  rank %d call %d: padding element %" PRId64 " of out written (ld %" PRId64
            ")\n", rank, call, e, out->view.ld);
    return 1;
  }
  return 0;
}

static tpla_status_t execute(tpla_ns_plan_t plan, int out_mode, tpla_matrix_t x,
                             tpla_matrix_t out) {
  if (out_mode == OUT_NONE)
    return tpla_ns_execute(plan, x, NULL);
  return tpla_ns_execute_out(plan, out_mode == OUT_ALIASED ? x : out, x, NULL);
}

/* The plan of mt for this rank's shard x, in workspace group `group`. */
static tpla_status_t create(tpla_ctx_t ctx, const mat_t *mt, const shard_t *x, int group,
                            tpla_ns_plan_t *plan) {
  tpla_ns_desc_t d = mt->desc;
  d.local_rows = x->view.rows;
  d.local_cols = x->view.cols;
  d.workspace_group = group;
  return tpla_ns_plan_create(plan, ctx, &d);
}

static int plan_rank_body(tpla_ctx_t ctx, int rank, int nranks, void *arg) {
  (void)nranks;
  plan_run_t *run = arg;
  const mat_t *mt = run->mt;
  shard_t x = {0}, out = {0}, nx = {0};
  unsigned char *before = NULL;
  tpla_ns_plan_t plan = NULL, neighbour = NULL;
  int fail = shard_alloc(&x, mt, rank, mt->pad[rank], run->null_empty);
  fail = fail || shard_alloc(&out, mt, rank, mt->out_pad[rank], run->null_empty);
  fail = fail || (before = malloc(x.bytes)) == NULL;
  if (run->share != SHARE_NONE)
    fail = fail || shard_alloc(&nx, run->nb, rank, run->nb->pad[rank], false);
  int group = run->share != SHARE_NONE ? 1 : 0;
  tpla_status_t s = fail ? TPLA_ERROR_OUT_OF_MEMORY : TPLA_SUCCESS;
  if (s == TPLA_SUCCESS && run->share == SHARE_NEIGHBOUR_FIRST)
    s = create(ctx, run->nb, &nx, group, &neighbour);
  if (s == TPLA_SUCCESS)
    s = create(ctx, mt, &x, group, &plan);
  if (s == TPLA_SUCCESS && run->share == SHARE_NEIGHBOUR_AFTER)
    s = create(ctx, run->nb, &nx, group, &neighbour);
  if (s == TPLA_SUCCESS) {
    tpla_ns_plan_algorithm(plan, &run->algo[rank]);
    tpla_ns_plan_iteration(plan, &run->iter[rank]);
  }
  for (int call = 0; call < run->calls && s == TPLA_SUCCESS && !fail; call++) {
    if (neighbour != NULL) { /* the group's workspace used by another plan in between */
      shard_fill(&nx, run->nb, run->nb_x);
      s = tpla_ns_execute(neighbour, nx.view, NULL);
      if (s != TPLA_SUCCESS)
        break;
      fail = check_after(&nx, NULL, NULL, OUT_NONE, rank, call);
    }
    shard_fill(&x, mt, call + 1 < run->calls ? run->first : run->x);
    memcpy(before, x.buf, x.bytes);
    s = execute(plan, run->out_mode, x.view, out.view);
    if (s == TPLA_SUCCESS)
      fail = check_after(&x, &out, before, run->out_mode, rank, call);
  }
  if (s != TPLA_SUCCESS) {
    fprintf(stderr, "  rank %d: %s: %s\n", rank, tpla_status_string(s), tpla_last_error());
    fail = 1;
  }
  if (!fail)
    shard_read(run->out_mode == OUT_SEPARATE ? &out : &x, mt, run->out);
  tpla_ns_plan_destroy(plan);
  tpla_ns_plan_destroy(neighbour);
  free(x.buf);
  free(out.buf);
  free(nx.buf);
  free(before);
  return fail;
}

/* ---- the checks of one case ---------------------------------------------- */

typedef struct {
  int cases, batches, mats;
  /* worst, by dtype: differences, and their share of the tolerance */
  double vs_one[4], vs_f64[4], of_tol_one[4], of_tol_f64[4];
  uint64_t worst_case[4]; /* the case nearest its tolerance, either one, to replay */
  double worst_of_tol[4];
  double of_sens[4]; /* the largest difference / sensitivity: SENS_FACTOR's calibration */
  int compared, ill_conditioned; /* matrices whose values were (not) compared */
} stats_t;

static stats_t stats;
static uint64_t current_case; /* the seed of the case being run */

static void note(double *worst, tpla_dtype_t dt, double e) {
  if (e > worst[dt])
    worst[dt] = e;
}

/* Compares a result with one rank's and one rank's with float64; prints and
 * returns 1 on failure. */
static int compare(const mat_t *mt, const double *x, const double *got, const double *one,
                   ran_t ran, const char *what) {
  size_t count = (size_t)(mt->m * mt->n);
  tpla_dtype_t dt = mt->desc.dtype;
  double *ref = calloc(count, sizeof(double)), sens = 0.0, sens_dist = 0.0;
  float table[3 * MAXSTEPS];
  double safety = expected_table(mt, table);
  if (!mt->zero) { /* zeros give zeros, also with eps = 0, where ref_ns divides by 0 */
    memcpy(ref, x, sizeof(double) * count);
    ref_ns(ref, mt->m, mt->n, table, mt->desc.steps, safety, mt->desc.eps);
    sens = sensitivity(mt, x, table, safety, ran, &sens_dist);
  }
  double e1 = rel_diff(got, one, count), e2 = rel_diff(one, ref, count);
  double t1 = tol_vs_one(dt, sens_dist, ran.same), t2 = tol_vs_f64(dt, sens);
  free(ref);
  if (getenv("TPLA_FUZZ_VERBOSE"))
    fprintf(stderr, "  cmp %s %s gram %s: vs one %.3e, vs float64 %.3e, sensitivity %.3e "
            "(distributed %.3e)\n", what, dt_name(dt), dt_name(mt->desc.gram_dtype), e1, e2,
            sens, sens_dist);
  if (dt != TPLA_FLOAT32 && !(fmax(t1, t2) <= TOL_CAP)) {
    stats.ill_conditioned++;
    return 0;
  }
  stats.compared++;
  note(stats.vs_one, dt, e1);
  note(stats.vs_f64, dt, e2);
  note(stats.of_tol_one, dt, e1 / t1);
  note(stats.of_tol_f64, dt, e2 / t2);
  if (sens > 0.0)
    note(stats.of_sens, dt, fmax(e1 / sens_dist, e2 / sens));
  if (fmax(e1 / t1, e2 / t2) > stats.worst_of_tol[dt]) {
    stats.worst_of_tol[dt] = fmax(e1 / t1, e2 / t2);
    stats.worst_case[dt] = current_case;
  }
  if (e1 <= t1 && e2 <= t2)
    return 0;
  fprintf(stderr, "  %s: vs one rank %.3e (tolerance %.2e), one rank vs float64 %.3e (%.2e); "
          "sensitivity %.3e (distributed %.3e)\n", what, e1, t1, e2, t2, sens, sens_dist);
  return 1;
}

/* Whether a distributed plan iterates on the long side's Gram: a forced
 * GRAM_ALLREDUCE whose non-sharded dimension is the long one, a forced
 * REDISTRIBUTE whose sharded one is (docs/ALGORITHMS.md): other products
 * than one rank's. */
static bool long_gram(const mat_t *mt, tpla_ns_algorithm_t algo) {
  bool rows = mt->desc.shard == TPLA_SHARD_ROWS;
  int64_t g = rows ? mt->m : mt->n, k = rows ? mt->n : mt->m;
  return (algo == TPLA_NS_ALGO_GRAM_ALLREDUCE && k > g) ||
         (algo == TPLA_NS_ALGO_REDISTRIBUTE && g > k);
}

/* One rank, plain buffers, execute in place: the baseline. */
static double *run_single(const mat_t *mt, const double *x, tpla_ns_iteration_t iteration) {
  mat_t one = *mt;
  one.desc.iteration = iteration;
  memset(one.sizes, 0, sizeof one.sizes);
  one.sizes[0] = one.desc.shard == TPLA_SHARD_ROWS ? mt->m : mt->n;
  one.pad[0] = one.out_pad[0] = 0;
  double *out = calloc((size_t)(mt->m * mt->n), sizeof(double));
  plan_run_t run = {.mt = &one, .P = 1, .out_mode = OUT_NONE, .calls = 1, .x = x, .out = out};
  if (out == NULL || run_host_ranks(1, plan_rank_body, &run) != 0) {
    free(out);
    return NULL;
  }
  return out;
}

/* Whether AUTO must resolve mt to the X iteration: a half-precision Gram and
 * a step of |a| + |b| + |c| past 16 (Polar Express's first), where the Gram
 * iteration can diverge (docs/ALGORITHMS.md). */
static bool auto_keeps_x(const mat_t *mt) {
  float table[3 * MAXSTEPS];
  expected_table(mt, table);
  for (int k = 0; k < mt->desc.steps && mt->desc.gram_dtype != TPLA_FLOAT32; k++)
    if (fabsf(table[3 * k]) + fabsf(table[3 * k + 1]) + fabsf(table[3 * k + 2]) > 16.0f)
      return true;
  return false;
}

/* The ranks report one algorithm and iteration, the forced ones if forced,
 * X where auto_keeps_x. */
static int check_resolved(const plan_run_t *run) {
  const tpla_ns_desc_t *d = &run->mt->desc;
  tpla_ns_algorithm_t want = run->P == 1 ? TPLA_NS_ALGO_LOCAL : d->algorithm;
  for (int q = 0; q < run->P; q++) {
    bool algo_ok = run->algo[q] == run->algo[0] && run->algo[q] != TPLA_NS_ALGO_AUTO &&
                   (want == TPLA_NS_ALGO_AUTO || run->algo[q] == want);
    tpla_ns_iteration_t want_it = d->iteration == TPLA_NS_ITERATE_AUTO && auto_keeps_x(run->mt)
                                      ? TPLA_NS_ITERATE_X : d->iteration;
    bool iter_ok = run->iter[q] == run->iter[0] && run->iter[q] != TPLA_NS_ITERATE_AUTO &&
                   (want_it == TPLA_NS_ITERATE_AUTO || run->iter[q] == want_it);
    if (!algo_ok || !iter_ok) {
      fprintf(stderr, "  rank %d runs %s, %s iteration (rank 0: %s, %s)\n", q,
              ns_algorithm_name(run->algo[q]), ns_iteration_name(run->iter[q]), ns_algorithm_name(run->algo[0]),
              ns_iteration_name(run->iter[0]));
      return 1;
    }
  }
  return 0;
}

static const char *out_mode_name(int m) {
  return m == OUT_NONE ? "execute" : m == OUT_SEPARATE ? "execute_out" : "execute_out aliased";
}

/* A single plan on P ranks against one rank and float64. */
static int plan_case(rng_t *r, uint64_t seed, char *desc, size_t size) {
  int P = (int)pick(r, 1, MAXP);
  mat_t mt;
  random_mat(r, &mt, P, false, false);
  plan_run_t run = {.mt = &mt, .P = P};
  run.out_mode = (int)pick(r, 0, 2);
  run.calls = chance(r, 0.25) ? 2 : 1;
  run.null_empty = chance(r, 0.5);
  mat_t nb;
  double *nb_x = NULL;
  if (chance(r, 0.25)) {
    run.share = chance(r, 0.5) ? SHARE_NEIGHBOUR_FIRST : SHARE_NEIGHBOUR_AFTER;
    random_mat(r, &nb, P, false, false);
    nb_x = make_input(&nb, splitmix(seed ^ 3));
    run.nb = &nb, run.nb_x = nb_x;
  }
  cat(desc, size, "plan on %d ranks, %s x %d%s: ", P, out_mode_name(run.out_mode), run.calls,
      run.null_empty ? ", empty shards NULL" : "");
  describe_mat(desc, size, &mt, P);
  if (run.share != SHARE_NONE) {
    cat(desc, size, "; in a workspace group with a neighbour made %s it: ",
        run.share == SHARE_NEIGHBOUR_FIRST ? "before" : "after");
    describe_mat(desc, size, &nb, P);
  }
  double *x = make_input(&mt, splitmix(seed ^ 1)), *first = make_input(&mt, splitmix(seed ^ 2));
  double *dist = calloc((size_t)(mt.m * mt.n), sizeof(double)), *one = NULL;
  run.x = x, run.first = first, run.out = dist;
  int bad = run_host_ranks(P, plan_rank_body, &run) != 0 || check_resolved(&run);
  if (!bad) { /* baseline: the iteration the ranks ran, on one rank */
    one = run_single(&mt, x, run.iter[0]);
    bad = one == NULL;
  }
  if (!bad) {
    cat(desc, size, "; ran %s, %s iteration", ns_algorithm_name(run.algo[0]), ns_iteration_name(run.iter[0]));
    tpla_ns_algorithm_t a = run.algo[0];
    ran_t ran = {!long_gram(&mt, a), P > 1 && a != TPLA_NS_ALGO_GATHER,
                 run.iter[0] == TPLA_NS_ITERATE_GRAM};
    bad = compare(&mt, x, dist, one, ran, "result");
  }
  stats.mats++;
  free(x);
  free(first);
  free(nb_x);
  free(dist);
  free(one);
  return bad;
}

/* ---- batches ------------------------------------------------------------- */

typedef struct {
  int P, count, calls;
  mat_t mats[MAXMATS];
  const double *x[MAXMATS], *first[MAXMATS];
  double *out[MAXMATS];
  int owner[MAXP][MAXMATS];
  tpla_ns_iteration_t iter[MAXP][MAXMATS];
} batch_run_t;

static int batch_rank_body(tpla_ctx_t ctx, int rank, int nranks, void *arg) {
  (void)nranks;
  batch_run_t *b = arg;
  shard_t sh[MAXMATS];
  memset(sh, 0, sizeof sh);
  tpla_ns_desc_t d[MAXMATS];
  tpla_matrix_t xs[MAXMATS];
  int fail = 0;
  for (int i = 0; i < b->count; i++) {
    fail |= shard_alloc(&sh[i], &b->mats[i], rank, b->mats[i].pad[rank], false);
    d[i] = b->mats[i].desc;
    d[i].local_rows = sh[i].view.rows;
    d[i].local_cols = sh[i].view.cols;
    xs[i] = sh[i].view;
  }
  tpla_ns_batch_plan_t plan = NULL;
  tpla_status_t s = fail ? TPLA_ERROR_OUT_OF_MEMORY
                         : tpla_ns_batch_plan_create(&plan, ctx, b->count, d);
  for (int i = 0; i < b->count && s == TPLA_SUCCESS; i++)
    s = tpla_ns_batch_plan_owner(plan, i, &b->owner[rank][i]);
  for (int i = 0; i < b->count && s == TPLA_SUCCESS; i++)
    s = tpla_ns_batch_plan_iteration(plan, i, &b->iter[rank][i]);
  for (int call = 0; call < b->calls && s == TPLA_SUCCESS && !fail; call++) {
    for (int i = 0; i < b->count; i++)
      shard_fill(&sh[i], &b->mats[i], call + 1 < b->calls ? b->first[i] : b->x[i]);
    s = tpla_ns_batch_execute(plan, xs, NULL);
    for (int i = 0; i < b->count && s == TPLA_SUCCESS && !fail; i++) {
      int64_t e = shard_pad_written(&sh[i]);
      if (e >= 0) {
        fprintf(stderr, "  rank %d call %d: matrix %d: padding element %" PRId64 " written\n",
                rank, call, i, e);
        fail = 1;
      }
    }
  }
  if (s != TPLA_SUCCESS) {
    fprintf(stderr, "  rank %d: %s: %s\n", rank, tpla_status_string(s), tpla_last_error());
    fail = 1;
  }
  for (int i = 0; i < b->count; i++) {
    if (!fail)
      shard_read(&sh[i], &b->mats[i], b->out[i]);
    free(sh[i].buf);
  }
  tpla_ns_batch_plan_destroy(plan);
  return fail;
}

/* Every rank names the same owner and iteration; LOCAL matrices have an
 * owner, forced distributed ones none; a forced iteration is the one run, X
 * where auto_keeps_x. */
static int check_owners(const batch_run_t *b) {
  for (int i = 0; i < b->count; i++) {
    tpla_ns_algorithm_t a = b->mats[i].desc.algorithm;
    int o = b->owner[0][i];
    bool ok = o >= -1 && o < b->P;
    if (a == TPLA_NS_ALGO_LOCAL && b->P > 1)
      ok = ok && o >= 0;
    else if (a != TPLA_NS_ALGO_AUTO && a != TPLA_NS_ALGO_LOCAL)
      ok = ok && o == -1;
    tpla_ns_iteration_t it = b->mats[i].desc.iteration;
    if (it == TPLA_NS_ITERATE_AUTO && auto_keeps_x(&b->mats[i]))
      it = TPLA_NS_ITERATE_X;
    ok = ok && (it == TPLA_NS_ITERATE_AUTO || b->iter[0][i] == it);
    for (int q = 1; q < b->P; q++)
      ok = ok && b->owner[q][i] == o && b->iter[q][i] == b->iter[0][i];
    if (!ok) {
      fprintf(stderr, "  matrix %d (%s, %s iteration asked): owner %d, %s iteration on rank 0\n",
              i, ns_algorithm_name(a), ns_iteration_name(it), o, ns_iteration_name(b->iter[0][i]));
      return 1;
    }
  }
  return 0;
}

/* A batch of differently shaped matrices on P ranks, each against itself
 * alone on one rank (same desc, the iteration the batch reports). */
static int batch_case(rng_t *r, uint64_t seed, char *desc, size_t size) {
  batch_run_t b = {.P = (int)pick(r, 1, MAXP), .count = (int)pick(r, 1, MAXMATS)};
  b.calls = chance(r, 0.25) ? 2 : 1;
  cat(desc, size, "batch of %d on %d ranks, %d call(s):", b.count, b.P, b.calls);
  for (int i = 0; i < b.count; i++) {
    random_mat(r, &b.mats[i], b.P, true, true);
    if (b.mats[i].desc.preset == TPLA_NS_USER) /* the copy's own table */
      b.mats[i].desc.coefficients = b.mats[i].table;
    cat(desc, size, "\n    [%d] ", i);
    describe_mat(desc, size, &b.mats[i], b.P);
    b.x[i] = make_input(&b.mats[i], splitmix(seed ^ (uint64_t)(16 + 2 * i)));
    b.first[i] = make_input(&b.mats[i], splitmix(seed ^ (uint64_t)(17 + 2 * i)));
    b.out[i] = calloc((size_t)(b.mats[i].m * b.mats[i].n), sizeof(double));
  }
  int bad = run_host_ranks(b.P, batch_rank_body, &b) != 0 || check_owners(&b);
  for (int i = 0; i < b.count && !bad; i++) {
    double *one = run_single(&b.mats[i], b.x[i], b.iter[0][i]);
    char what[32];
    snprintf(what, sizeof what, "matrix %d (owner %d)", i, b.owner[0][i]);
    tpla_ns_algorithm_t a = b.mats[i].desc.algorithm; /* forced, or AUTO */
    bool owned = b.owner[0][i] >= 0;
    ran_t ran = {owned || !long_gram(&b.mats[i], a), !owned && b.P > 1 && a != TPLA_NS_ALGO_GATHER,
                 b.iter[0][i] == TPLA_NS_ITERATE_GRAM};
    bad = one == NULL || compare(&b.mats[i], b.x[i], b.out[i], one, ran, what);
    free(one);
  }
  for (int i = 0; i < b.count; i++) {
    free((void *)b.x[i]);
    free((void *)b.first[i]);
    free(b.out[i]);
  }
  stats.batches++;
  stats.mats += b.count;
  return bad;
}

/* ---- the driver ---------------------------------------------------------- */

/* Runs the case of `seed`; prints it with every parameter on failure. */
static int run_case(uint64_t seed) {
  rng_t r;
  rng_seed(&r, seed);
  current_case = seed;
  static char desc[8192];
  desc[0] = '\0';
  int bad = chance(&r, 0.25) ? batch_case(&r, seed, desc, sizeof desc)
                             : plan_case(&r, seed, desc, sizeof desc);
  stats.cases++;
  if (bad)
    fprintf(stderr, "  FAILED case %s\n    replay: TPLA_FUZZ_SEED=%" PRIu64 " ./test_ns_fuzz\n",
            desc, seed);
  else if (getenv("TPLA_FUZZ_VERBOSE"))
    fprintf(stderr, "  case %" PRIu64 ": %s\n", seed, desc);
  return bad;
}

static double now_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* Cases until the time budget is spent (at least 20), or the one case of
 * TPLA_FUZZ_SEED. Stops after 5 failures. */
static void test_ns_fuzz(void) {
  const char *replay = getenv("TPLA_FUZZ_SEED"), *secs = getenv("TPLA_FUZZ_SECONDS");
  int failures = 0;
  if (replay && *replay) {
    uint64_t seed = strtoull(replay, NULL, 0);
    printf("  replaying case %" PRIu64 "\n", seed);
    failures = run_case(seed);
  } else {
    double budget = secs && *secs ? atof(secs) : 8.0, t0 = now_s();
    uint64_t base = splitmix(fresh_seed("test_ns_fuzz")); /* seeds s and s + 1: other cases */
    for (uint64_t i = 0; failures < 5 && (i < 20 || now_s() - t0 < budget); i++)
      failures += run_case(splitmix(base + i));
    printf("  %d cases (%d batches, %d matrices) in %.1f s; values compared for %d matrices, "
           "%d half-precision ones too ill-conditioned to compare\n", stats.cases,
           stats.batches, stats.mats, now_s() - t0, stats.compared, stats.ill_conditioned);
  }
  static const tpla_dtype_t dts[] = {TPLA_FLOAT32, TPLA_BFLOAT16, TPLA_FLOAT16};
  for (int k = 0; k < 3; k++) {
    tpla_dtype_t dt = dts[k];
    printf("  %-4s worst: vs one rank %.2e (%.0f%% of its tolerance), one rank vs float64 "
           "%.2e (%.0f%%), difference / sensitivity up to %.2f; nearest its tolerance: "
           "TPLA_FUZZ_SEED=%" PRIu64 "\n", dt_name(dt), stats.vs_one[dt],
           100.0 * stats.of_tol_one[dt], stats.vs_f64[dt], 100.0 * stats.of_tol_f64[dt],
           stats.of_sens[dt], stats.worst_case[dt]);
  }
  ASSERT_EQ_INT(failures, 0);
}

int main(void) {
  TEST(test_ns_fuzz);
  return test_summary();
}
