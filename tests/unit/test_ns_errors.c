/*
 * test_ns_errors.c - every bad input of the Newton-Schulz API gets its own
 * status and message, on every rank, without hanging, and leaves the
 * caller's matrices untouched (compared byte for byte): coefficient counts,
 * descriptors that disagree across ranks (REMOTE everywhere, one message),
 * unsupported dtypes, bad values, NULLs, empty matrices, wrong struct
 * sizes, and bad views at execute.
 *
 *   ./test_ns_errors      (CTest: test_ns_errors)
 */
#include "test_ns_common.h"

#define MAXR 4

typedef struct {
  tpla_ns_desc_t desc[MAXR];
  bool null_plan[MAXR], null_desc[MAXR];
  tpla_status_t st[MAXR];
  char msg[MAXR][400];
  bool leaked[MAXR]; /* a failed create that set *plan */
} create_case_t;

static int create_body(tpla_ctx_t ctx, int rank, int nranks, void *arg) {
  create_case_t *c = arg;
  tpla_ns_plan_t plan = (tpla_ns_plan_t)(uintptr_t)1; /* must be reset to NULL */
  c->st[rank] = tpla_ns_plan_create(c->null_plan[rank] ? NULL : &plan, ctx,
                                    c->null_desc[rank] ? NULL : &c->desc[rank]);
  snprintf(c->msg[rank], sizeof c->msg[rank], "%s", tpla_last_error());
  if (c->st[rank] == TPLA_SUCCESS)
    tpla_ns_plan_destroy(plan);
  else
    c->leaked[rank] = !c->null_plan[rank] && plan != NULL;
  return 0;
}

/* A valid 12 x 8 fp32 descriptor for rank r of P (rows sharded). */
static tpla_ns_desc_t good_desc(int r, int P) {
  tpla_ns_desc_t d = TPLA_NS_DESC_INIT;
  d.local_rows = 12 / P + (r < 12 % P);
  d.local_cols = 8;
  return d;
}

static void init_case(create_case_t *c, int P) {
  memset(c, 0, sizeof *c);
  for (int r = 0; r < P; r++)
    c->desc[r] = good_desc(r, P);
}

/* Runs the case; every rank must fail, with `want` on the ranks in
 * own_mask and REMOTE elsewhere (own_mask 0: everyone gets `want`). */
static int expect(create_case_t *c, int P, tpla_status_t want, unsigned own_mask,
                  const char *needle) {
  if (run_host_ranks(P, create_body, c) != 0)
    return 1;
  int bad = 0;
  for (int r = 0; r < P; r++) {
    tpla_status_t w = (own_mask == 0 || (own_mask >> r & 1)) ? want : TPLA_ERROR_REMOTE;
    if (c->st[r] != w || c->leaked[r] || (needle && !strstr(c->msg[r], needle))) {
      fprintf(stderr, "  rank %d: got %s \"%s\", want %s containing \"%s\"%s\n", r,
              tpla_status_string(c->st[r]), c->msg[r], tpla_status_string(w),
              needle ? needle : "", c->leaked[r] ? " (plan not reset)" : "");
      bad = 1;
    }
  }
  return bad;
}

static void test_user_coefficient_count(void) {
  create_case_t c;
  float coef[14] = {0};
  init_case(&c, 1);
  c.desc[0].preset = TPLA_NS_USER;
  c.desc[0].coefficients = coef;
  c.desc[0].ncoefficients = 14;
  ASSERT_EQ_INT(expect(&c, 1, TPLA_ERROR_INVALID_ARGUMENT, 0,
                       "ncoefficients is 14, expected 3 * steps = 15"), 0);
  /* only rank 1 is wrong: it says why, the others name it */
  init_case(&c, 3);
  for (int r = 0; r < 3; r++) {
    c.desc[r].preset = TPLA_NS_USER;
    c.desc[r].coefficients = coef;
    c.desc[r].ncoefficients = r == 1 ? 14 : 15;
  }
  float full[15] = {3, -4, 2, 3, -4, 2, 3, -4, 2, 3, -4, 2, 3, -4, 2};
  for (int r = 0; r < 3; r++)
    c.desc[r].coefficients = r == 1 ? coef : full;
  ASSERT_EQ_INT(expect(&c, 3, TPLA_ERROR_INVALID_ARGUMENT, 1u << 1, NULL), 0);
  ASSERT_CONTAINS(c.msg[0], "rank 1 rejected its arguments");
  ASSERT_CONTAINS(c.msg[2], "ncoefficients is 14");
  init_case(&c, 1);
  c.desc[0].preset = TPLA_NS_USER;
  c.desc[0].ncoefficients = 15;
  ASSERT_EQ_INT(expect(&c, 1, TPLA_ERROR_INVALID_ARGUMENT, 0, "coefficients is NULL"), 0);
  full[4] = NAN;
  init_case(&c, 1);
  c.desc[0].preset = TPLA_NS_USER;
  c.desc[0].coefficients = full;
  c.desc[0].ncoefficients = 15;
  ASSERT_EQ_INT(expect(&c, 1, TPLA_ERROR_INVALID_ARGUMENT, 0, "coefficients[4] is not finite"),
                0);
}

/* One field differs on one rank: REMOTE on every rank, the same message. */
static void test_disagreement_is_remote_everywhere(void) {
  for (int field = 0; field < 12; field++) {
    create_case_t c;
    init_case(&c, 3);
    tpla_ns_desc_t *d = &c.desc[2];
    const char *needle = NULL;
    switch (field) {
    case 0:
      d->local_cols = 9, needle = "rank 2 has local_cols (not sharded) = 9, rank 0 has 8";
      break;
    case 1: d->dtype = TPLA_BFLOAT16, needle = "rank 2 has dtype = bf16, rank 0 has fp32"; break;
    case 2: d->preset = TPLA_NS_CUBIC, needle = "rank 2 has coefficients"; break;
    case 3: d->steps = 4, needle = "rank 2 has steps = 4"; break;
    case 4: d->shard = TPLA_SHARD_COLS, d->local_rows = 8, d->local_cols = 4,
            needle = "rank 2 has shard = COLS"; break;
    case 5: d->algorithm = TPLA_NS_ALGO_GATHER, needle = "rank 2 has algorithm = GATHER"; break;
    case 6: d->eps = 1e-6f, needle = "rank 2 has eps"; break;
    case 7: d->gram_dtype = TPLA_BFLOAT16, d->dtype = TPLA_BFLOAT16, c.desc[1] = *d,
            c.desc[1].local_rows = 4, needle = "rank 1 has dtype = bf16"; break;
    case 8: d->algorithm = TPLA_NS_ALGO_GRAM_SHARDED, c.desc[0].algorithm = d->algorithm,
            c.desc[1].algorithm = TPLA_NS_ALGO_GRAM_ALLREDUCE,
            needle = "rank 1 has algorithm = GRAM_ALLREDUCE, rank 0 has GRAM_SHARDED"; break;
    case 9: d->iteration = TPLA_NS_ITERATE_GRAM, needle = "rank 2 has iteration = GRAM, rank 0 "
            "has AUTO"; break;
    /* each alone: a plan that took them would normalize or sum differently on one rank */
    case 10: d->safety = 1.5f, needle = "rank 2 has safety = 1.5"; break;
    case 11:
      for (int r = 0; r < 3; r++)
        c.desc[r].dtype = c.desc[r].gram_dtype = TPLA_BFLOAT16;
      d->gram_dtype = TPLA_FLOAT32, needle = "rank 2 has gram_dtype = fp32, rank 0 has bf16";
      break;
    }
    ASSERT_EQ_INT(expect(&c, 3, TPLA_ERROR_REMOTE, 0, needle), 0);
    ASSERT_TRUE(strcmp(c.msg[0], c.msg[1]) == 0 && strcmp(c.msg[0], c.msg[2]) == 0);
  }
}

static void test_unsupported_dtypes(void) {
  static const tpla_dtype_t bad[] = {TPLA_FLOAT64, TPLA_UINT8, (tpla_dtype_t)99};
  for (int i = 0; i < 3; i++) {
    create_case_t c;
    init_case(&c, 2);
    c.desc[0].dtype = c.desc[1].dtype = bad[i];
    ASSERT_EQ_INT(expect(&c, 2, TPLA_ERROR_INVALID_ARGUMENT, 0, "is not supported"), 0);
  }
  create_case_t c;
  init_case(&c, 2);
  c.desc[0].gram_dtype = c.desc[1].gram_dtype = TPLA_BFLOAT16; /* input fp32 */
  ASSERT_EQ_INT(expect(&c, 2, TPLA_ERROR_INVALID_ARGUMENT, 0, "gram_dtype bf16 must be fp32"), 0);
}

static void test_bad_values(void) {
  struct {
    int field;
    const char *needle;
  } cases[] = {{0, "steps 0 is not in [1, 1000]"},    {1, "steps 1001"},
               {2, "eps -1 must be finite"},          {3, "eps nan"},
               {4, "safety -2"},                      {5, "unknown coefficient preset 9"},
               {6, "unknown algorithm 9"},            {7, "shard 5 is neither"},
               {8, "negative shard size -3x8"},       {9, "coefficients given (3) with a preset"},
               {10, "algorithm LOCAL needs 1 rank"},  {11, "size field is 8, expected"},
               {12, "has 0 columns"},                 {13, "unknown algorithm 6"},
               {14, "unknown algorithm -1"},          {15, "iteration 3 is none of"},
               {16, "iteration -1 is none of"},
               {17, "makes the preset's coefficient 2 (step 0) non-finite"},
               {18, "gram_sum 2 is neither"},
               {19, "workspace_group -1 is negative"}};
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    create_case_t c;
    init_case(&c, 2);
    for (int r = 0; r < 2; r++) {
      tpla_ns_desc_t *d = &c.desc[r];
      static const float three[3] = {1, 2, 3};
      switch (cases[i].field) {
      case 0: d->steps = 0; break;
      case 1: d->steps = 1001; break;
      case 2: d->eps = -1.0f; break;
      case 3: d->eps = NAN; break;
      case 4: d->safety = -2.0f; break;
      case 5: d->preset = (tpla_ns_preset_t)9; break;
      case 6: d->algorithm = (tpla_ns_algorithm_t)9; break;
      case 7: d->shard = (tpla_shard_t)5; break;
      case 8: d->local_rows = -3; break;
      case 9: d->coefficients = three, d->ncoefficients = 3; break;
      case 10: d->algorithm = TPLA_NS_ALGO_LOCAL; break;
      case 11: d->size = 8; break;
      case 12: d->local_cols = 0; break;
      case 13: d->algorithm = (tpla_ns_algorithm_t)(TPLA_NS_ALGO_GRAM_SHARDED + 1); break;
      case 14: d->algorithm = (tpla_ns_algorithm_t)-1; break;
      case 15: d->iteration = (tpla_ns_iteration_t)3; break;
      case 16: d->iteration = (tpla_ns_iteration_t)-1; break;
      case 17: d->preset = TPLA_NS_POLAR_EXPRESS, d->safety = 1e-12f, d->steps = 8; break;
      case 18: d->gram_sum = (tpla_ns_gram_sum_t)2; break;
      case 19: d->workspace_group = -1; break;
      }
    }
    if (expect(&c, 2, TPLA_ERROR_INVALID_ARGUMENT, 0, cases[i].needle))
      ASSERT_TRUE(!"bad value accepted or misreported");
  }
}

/* An unknown TPLA_NS_GRAM_SUM (a misspelt opt-out of the pulled Gram sums)
 * or TPLA_NS_PULL_WINDOWS is an error on the rank that set it, REMOTE on the
 * others, never the default in disguise. */
static void test_bad_gram_sum_environment(void) {
  create_case_t c;
  init_case(&c, 2);
  setenv("TPLA_NS_GRAM_SUM", "NCCL", 1); /* one process: every rank sees it */
  int failed = expect(&c, 2, TPLA_ERROR_INVALID_ARGUMENT, 0, "TPLA_NS_GRAM_SUM=NCCL");
  setenv("TPLA_NS_GRAM_SUM", "nccl", 1);
  init_case(&c, 2);
  failed |= run_host_ranks(2, create_body, &c) != 0 || c.st[0] != TPLA_SUCCESS ||
            c.st[1] != TPLA_SUCCESS;
  unsetenv("TPLA_NS_GRAM_SUM");
  setenv("TPLA_NS_PULL_WINDOWS", "3", 1);
  init_case(&c, 2);
  failed |= expect(&c, 2, TPLA_ERROR_INVALID_ARGUMENT, 0, "TPLA_NS_PULL_WINDOWS=3");
  unsetenv("TPLA_NS_PULL_WINDOWS");
  ASSERT_EQ_INT(failed, 0);
}

static void test_null_arguments(void) {
  tpla_ns_desc_t d = good_desc(0, 1);
  tpla_ns_plan_t plan = (tpla_ns_plan_t)(uintptr_t)1; /* must be reset to NULL */
  ASSERT_STATUS(tpla_ns_plan_create(&plan, NULL, &d), TPLA_ERROR_INVALID_ARGUMENT);
  ASSERT_CONTAINS(tpla_last_error(), "argument 'ctx' is NULL");
  ASSERT_TRUE(plan == NULL);
  create_case_t c;
  init_case(&c, 2);
  c.null_plan[0] = true;
  ASSERT_EQ_INT(expect(&c, 2, TPLA_ERROR_INVALID_ARGUMENT, 1u << 0, NULL), 0);
  ASSERT_CONTAINS(c.msg[0], "argument 'plan' is NULL");
  ASSERT_CONTAINS(c.msg[1], "rank 0 rejected its arguments: argument 'plan' is NULL");
  init_case(&c, 2);
  c.null_desc[1] = true;
  ASSERT_EQ_INT(expect(&c, 2, TPLA_ERROR_INVALID_ARGUMENT, 1u << 1, NULL), 0);
  ASSERT_CONTAINS(c.msg[1], "argument 'desc' is NULL");
  ASSERT_STATUS(tpla_ns_plan_destroy(NULL), TPLA_SUCCESS);
  size_t bytes;
  tpla_ns_algorithm_t algo;
  ASSERT_STATUS(tpla_ns_plan_workspace_bytes(NULL, &bytes), TPLA_ERROR_INVALID_ARGUMENT);
  ASSERT_STATUS(tpla_ns_plan_algorithm(NULL, &algo), TPLA_ERROR_INVALID_ARGUMENT);
  tpla_ns_iteration_t iter = TPLA_NS_ITERATE_X;
  ASSERT_STATUS(tpla_ns_plan_iteration(NULL, &iter), TPLA_ERROR_INVALID_ARGUMENT);
  ASSERT_CONTAINS(tpla_last_error(), "argument 'plan' is NULL");
  ASSERT_EQ_INT(iter, TPLA_NS_ITERATE_X);
  float buf[4] = {0};
  tpla_matrix_t x = {buf, 2, 2, 2, TPLA_FLOAT32};
  ASSERT_STATUS(tpla_ns_execute(NULL, x, NULL), TPLA_ERROR_INVALID_ARGUMENT);
  ASSERT_STATUS(tpla_ns_execute_out(NULL, x, x, NULL), TPLA_ERROR_INVALID_ARGUMENT);
}

static void test_zero_size(void) {
  create_case_t c;
  init_case(&c, 2);
  c.desc[0].local_rows = c.desc[1].local_rows = 0;
  ASSERT_EQ_INT(expect(&c, 2, TPLA_ERROR_INVALID_ARGUMENT, 0, "every rank's shard is empty"), 0);
  ASSERT_CONTAINS(c.msg[0], "0x8");
}

/* ---- execute ---------------------------------------------------------------- */

enum { X_NULL_DATA, X_LD, X_SHAPE, X_DTYPE, X_OUT_OVERLAP, X_OUT_PITCH, X_OUT_SHAPE, X_CASES };

typedef struct {
  int which;
  int bad; /* ranks that failed the check */
  tpla_ns_algorithm_t algo;
} exec_case_t;

static int exec_body(tpla_ctx_t ctx, int rank, int nranks, void *arg) {
  exec_case_t *c = arg;
  tpla_ns_desc_t d = good_desc(rank, nranks);
  d.algorithm = c->algo;
  tpla_ns_plan_t plan = NULL;
  tpla_ns_algorithm_t got = TPLA_NS_ALGO_AUTO;
  if (tpla_ns_plan_create(&plan, ctx, &d) != TPLA_SUCCESS ||
      tpla_ns_plan_algorithm(plan, &got) != TPLA_SUCCESS ||
      tpla_ns_plan_algorithm(plan, NULL) != TPLA_ERROR_INVALID_ARGUMENT ||
      tpla_ns_plan_iteration(plan, NULL) != TPLA_ERROR_INVALID_ARGUMENT ||
      !strstr(tpla_last_error(), "argument 'iteration' is NULL") ||
      (c->algo != TPLA_NS_ALGO_AUTO && got != (nranks == 1 ? TPLA_NS_ALGO_LOCAL : c->algo))) {
    tpla_ns_plan_destroy(plan);
    return 1;
  }
  enum { LD = 10, N = 16 * LD };
  float buf[N], copy[N], out[N], out_copy[N];
  rng_t r;
  rng_seed(&r, 42 + (uint64_t)rank);
  for (int i = 0; i < N; i++)
    buf[i] = out[i] = (float)rng_uniform(&r);
  memcpy(copy, buf, sizeof buf);
  memcpy(out_copy, out, sizeof out);
  tpla_matrix_t x = {buf, d.local_rows, d.local_cols, LD, TPLA_FLOAT32}, o = x;
  o.data = out;
  const char *needle = "";
  switch (c->which) {
  case X_NULL_DATA: x.data = NULL, needle = "data is NULL"; break;
  case X_LD: x.ld = 7, needle = "ld (7) < max(cols, 1) (8)"; break;
  case X_SHAPE: x.cols = 7, needle = "the plan's shard is"; break;
  case X_DTYPE: x.dtype = TPLA_BFLOAT16, needle = "dtype bf16, the plan's is fp32"; break;
  case X_OUT_OVERLAP: o.data = buf + 1, needle = "argument 'out' overlaps 'x'"; break;
  /* x's own memory with another pitch: not the in-place call, its rows interleave */
  case X_OUT_PITCH: o.data = buf, o.ld = LD - 1, needle = "argument 'out' overlaps 'x'"; break;
  case X_OUT_SHAPE: o.rows += 1, needle = "argument 'out'"; break;
  }
  bool use_out = c->which >= X_OUT_OVERLAP;
  tpla_status_t s =
      use_out ? tpla_ns_execute_out(plan, o, x, NULL) : tpla_ns_execute(plan, x, NULL);
  int bad = s != TPLA_ERROR_INVALID_ARGUMENT || !strstr(tpla_last_error(), needle) ||
            memcmp(buf, copy, sizeof buf) != 0 || memcmp(out, out_copy, sizeof out) != 0;
  if (bad)
    fprintf(stderr, "  case %d rank %d: %s \"%s\" (want \"%s\"), input %s\n", c->which, rank,
            tpla_status_string(s), tpla_last_error(), needle,
            memcmp(buf, copy, sizeof buf) ? "MODIFIED" : "untouched");
  tpla_ns_plan_destroy(plan);
  return bad;
}

/* Every rank passes the same bad view (a rank alone would leave the others
 * waiting in the collective until the timeout); AUTO and every forced
 * distributed algorithm. */
static void test_execute_rejects_bad_views(void) {
  static const tpla_ns_algorithm_t algos[] = {
      TPLA_NS_ALGO_AUTO, TPLA_NS_ALGO_GRAM_ALLREDUCE, TPLA_NS_ALGO_REDISTRIBUTE,
      TPLA_NS_ALGO_GATHER, TPLA_NS_ALGO_GRAM_SHARDED};
  for (int a = 0; a < 5; a++)
    for (int P = 1; P <= 3; P += 1 + (a > 0))
      for (int which = 0; which < X_CASES; which++) {
        exec_case_t c = {which, 0, algos[a]};
        ASSERT_EQ_INT(run_host_ranks(P, exec_body, &c), 0);
      }
}

/* ---- batched ---------------------------------------------------------------- */

typedef struct {
  int which;
} batch_case_t;

static int batch_body(tpla_ctx_t ctx, int rank, int nranks, void *arg) {
  batch_case_t *c = arg;
  tpla_ns_desc_t d[3] = {good_desc(rank, nranks), good_desc(rank, nranks), good_desc(rank, nranks)};
  tpla_ns_batch_plan_t plan = NULL;
  int count = 3, bad = 0;
  tpla_status_t want = TPLA_ERROR_INVALID_ARGUMENT, s;
  const char *needle = "";
  switch (c->which) {
  case 0: count = 0, needle = "argument 'count': 0 is not in"; break;
  case 1: count = rank == 1 ? 2 : 3, want = TPLA_ERROR_REMOTE, needle = "rank 1 has count = 2";
    break;
  case 2: d[1].steps = 0, needle = "argument 'descs[1]': steps 0"; break;
  case 3: d[2].local_cols = rank == 0 ? 8 : 6, want = TPLA_ERROR_REMOTE,
          needle = "argument 'descs[2]': ranks disagree: rank 1 has local_cols"; break;
  case 4: d[1].workspace_group = 2, needle = "argument 'descs[1]': workspace_group 2 in a batch";
    break;
  }
  if (c->which < 5) {
    s = tpla_ns_batch_plan_create(&plan, ctx, count, d);
    bad = s != want || plan != NULL || !strstr(tpla_last_error(), needle);
  } else {
    if (tpla_ns_batch_plan_create(&plan, ctx, 3, d) != TPLA_SUCCESS)
      return 1;
    float buf[3][128], copy[3][128];
    for (int i = 0; i < 3 * 128; i++)
      buf[i / 128][i % 128] = (float)i;
    memcpy(copy, buf, sizeof buf);
    tpla_matrix_t xs[3];
    for (int i = 0; i < 3; i++)
      xs[i] = (tpla_matrix_t){buf[i], d[i].local_rows, 8, 8, TPLA_FLOAT32};
    if (c->which == 5) {
      xs[1].rows += 1, needle = "argument 'xs[1]'";
    } else if (c->which == 6) {
      xs[2].data = buf[0] + 8, needle = "argument 'xs[2]' overlaps xs[0]";
    } else { /* rows of 16 floats: xs[1] between the others in start order, interleaved
              * with both and overlapping neither, xs[2] inside xs[0] (review 99) */
      for (int i = 0; i < 3; i++)
        xs[i] = (tpla_matrix_t){buf[0] + 8 * i, d[i].local_rows, 8, 16, TPLA_FLOAT32};
      needle = "argument 'xs[2]' overlaps xs[0]";
    }
    s = tpla_ns_batch_execute(plan, xs, NULL);
    bad = s != want || !strstr(tpla_last_error(), needle) || memcmp(buf, copy, sizeof buf);
    int owner = 0;
    bad |= tpla_ns_batch_plan_owner(plan, 3, &owner) != TPLA_ERROR_INVALID_ARGUMENT;
    tpla_ns_iteration_t it = TPLA_NS_ITERATE_AUTO;
    bad |= tpla_ns_batch_plan_iteration(plan, 3, &it) != TPLA_ERROR_INVALID_ARGUMENT ||
           tpla_ns_batch_plan_iteration(plan, 0, NULL) != TPLA_ERROR_INVALID_ARGUMENT ||
           tpla_ns_batch_plan_iteration(NULL, 0, &it) != TPLA_ERROR_INVALID_ARGUMENT ||
           it != TPLA_NS_ITERATE_AUTO;
  }
  if (bad)
    fprintf(stderr, "  batch case %d rank %d: %s \"%s\" (want \"%s\")\n", c->which, rank,
            tpla_status_string(s), tpla_last_error(), needle);
  tpla_ns_batch_plan_destroy(plan);
  return bad;
}

/* Sixteen matrices, each within the per-matrix limits, whose owner-phase
 * workspace sums past 2^64 bytes: refused before any allocation (the sum
 * once wrapped to 64 MiB and the plan was created). */
static int huge_batch_body(tpla_ctx_t ctx, int rank, int nranks, void *arg) {
  (void)nranks;
  tpla_status_t *st = arg;
  tpla_ns_desc_t d[16];
  for (int i = 0; i < 16; i++) {
    d[i] = (tpla_ns_desc_t)TPLA_NS_DESC_INIT;
    d[i].local_rows = 67109880, d[i].local_cols = 1420449111;
    d[i].algorithm = TPLA_NS_ALGO_LOCAL;
  }
  tpla_ns_batch_plan_t plan = (tpla_ns_batch_plan_t)(uintptr_t)1;
  st[rank] = tpla_ns_batch_plan_create(&plan, ctx, 16, d);
  if (st[rank] != TPLA_SUCCESS && !strstr(tpla_last_error(), "exceeds the address space"))
    st[rank] = TPLA_ERROR_INTERNAL, fprintf(stderr, "  rank %d: %s\n", rank, tpla_last_error());
  tpla_ns_batch_plan_destroy(st[rank] == TPLA_SUCCESS ? plan : NULL);
  return plan != NULL && st[rank] != TPLA_SUCCESS;
}

static void test_batch_workspace_past_2_64(void) {
  tpla_status_t st[2] = {TPLA_SUCCESS, TPLA_SUCCESS};
  ASSERT_EQ_INT(run_host_ranks(2, huge_batch_body, st), 0);
  for (int r = 0; r < 2; r++)
    ASSERT_TRUE(st[r] == TPLA_ERROR_NOT_SUPPORTED || st[r] == TPLA_ERROR_REMOTE);
  ASSERT_TRUE(st[0] == TPLA_ERROR_NOT_SUPPORTED || st[1] == TPLA_ERROR_NOT_SUPPORTED);
}

static void test_batch_errors(void) {
  for (int which = 0; which < 8; which++) {
    batch_case_t c = {which};
    ASSERT_EQ_INT(run_host_ranks(2, batch_body, &c), 0);
  }
  tpla_ns_batch_plan_t plan = (tpla_ns_batch_plan_t)(uintptr_t)1; /* must be reset */
  ASSERT_STATUS(tpla_ns_batch_plan_create(&plan, NULL, 1, NULL), TPLA_ERROR_INVALID_ARGUMENT);
  ASSERT_TRUE(plan == NULL);
  ASSERT_STATUS(tpla_ns_batch_execute(NULL, NULL, NULL), TPLA_ERROR_INVALID_ARGUMENT);
  ASSERT_STATUS(tpla_ns_batch_plan_destroy(NULL), TPLA_SUCCESS);
}

int main(void) {
  TEST(test_user_coefficient_count);
  TEST(test_disagreement_is_remote_everywhere);
  TEST(test_unsupported_dtypes);
  TEST(test_bad_values);
  TEST(test_bad_gram_sum_environment);
  TEST(test_null_arguments);
  TEST(test_zero_size);
  TEST(test_execute_rejects_bad_views);
  TEST(test_batch_errors);
  TEST(test_batch_workspace_past_2_64);
  return test_summary();
}
