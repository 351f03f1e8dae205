/*
 * test_ns_share.c - Newton-Schulz workspace groups on the host executor
 * (tpla_ns_desc_t.workspace_group, src/core/ns_share.c): plans of three
 * shapes in one group hold one workspace at the largest one's size (a
 * larger member grows it for the members made before it), give bit for bit
 * the results of the same plans alone in any order of calls, keep the
 * workspace until their last member goes, and leave other groups alone; a
 * creation that fails on one rank leaves the group as it was on every rank;
 * on 1, 2 (NCCL-style sums and pulls) and 3 ranks.
 *
 *   ./test_ns_share       (CTest: test_ns_share)
 */
#include "test_ns_common.h"

#define NSHAPES 3
#define GROUP 7

typedef struct {
  int64_t m, n;
  tpla_shard_t shard;
  tpla_dtype_t dtype;
  tpla_ns_iteration_t iteration;
} shape_t;

/* created in this order: small, the largest, between */
static const shape_t shapes[NSHAPES] = {
    {12, 20, TPLA_SHARD_ROWS, TPLA_FLOAT32, TPLA_NS_ITERATE_AUTO},
    {40, 56, TPLA_SHARD_COLS, TPLA_BFLOAT16, TPLA_NS_ITERATE_GRAM},
    {36, 24, TPLA_SHARD_ROWS, TPLA_FLOAT32, TPLA_NS_ITERATE_X}};

typedef struct {
  bool collective; /* gram_sum COLLECTIVE: no pulls, so the bytes are the workspace's alone */
  double *x[NSHAPES];
} share_case_t;

/* One rank's shard of a shape: descriptor and its input. */
typedef struct {
  tpla_ns_desc_t desc;
  tpla_matrix_t x; /* the input, kept */
  size_t bytes;
} part_t;

static void make_part(part_t *pt, const share_case_t *c, int i, int rank, int P) {
  const shape_t *sh = &shapes[i];
  bool rows = sh->shard == TPLA_SHARD_ROWS;
  int64_t sizes[8], off = 0;
  split(rows ? sh->m : sh->n, P, false, sizes);
  for (int r = 0; r < rank; r++)
    off += sizes[r];
  pt->desc = (tpla_ns_desc_t)TPLA_NS_DESC_INIT;
  pt->desc.shard = sh->shard;
  pt->desc.local_rows = rows ? sizes[rank] : sh->m;
  pt->desc.local_cols = rows ? sh->n : sizes[rank];
  pt->desc.dtype = sh->dtype;
  pt->desc.iteration = sh->iteration;
  if (c->collective)
    pt->desc.gram_sum = TPLA_NS_GRAM_SUM_COLLECTIVE;
  int64_t ld = pt->desc.local_cols + 3;
  pt->bytes = (size_t)(pt->desc.local_rows * ld) * tpla_dtype_size(sh->dtype);
  pt->x = (tpla_matrix_t){malloc(pt->bytes + 1), pt->desc.local_rows, pt->desc.local_cols, ld,
                          sh->dtype};
  memset(pt->x.data, 0xFF, pt->bytes);
  for (int64_t r = 0; r < pt->x.rows; r++)
    for (int64_t k = 0; k < pt->x.cols; k++)
      tpla_store_elem(pt->x.data, sh->dtype, (size_t)(r * ld + k),
                      c->x[i][(rows ? off + r : r) * sh->n + (rows ? k : off + k)]);
}

/* Runs `plan` on a copy of the part's input into *out (malloc'd); 0 on success. */
static int run(tpla_ns_plan_t plan, const part_t *pt, unsigned char **out) {
  *out = malloc(pt->bytes + 1);
  memcpy(*out, pt->x.data, pt->bytes);
  tpla_matrix_t x = pt->x;
  x.data = *out;
  tpla_status_t s = tpla_ns_execute(plan, x, NULL);
  if (s != TPLA_SUCCESS)
    fprintf(stderr, "  execute: %s: %s\n", tpla_status_string(s), tpla_last_error());
  return s != TPLA_SUCCESS;
}

static size_t ws_of(tpla_ns_plan_t plan) {
  size_t b = 0;
  tpla_ns_plan_workspace_bytes(plan, &b);
  return b;
}

static tpla_ns_plan_t create(tpla_ctx_t ctx, const part_t *pt, int group, int *failures) {
  tpla_ns_desc_t d = pt->desc;
  d.workspace_group = group;
  tpla_ns_plan_t plan = NULL;
  tpla_status_t s = tpla_ns_plan_create(&plan, ctx, &d);
  if (s != TPLA_SUCCESS) {
    fprintf(stderr, "  create (group %d): %s: %s\n", group, tpla_status_string(s),
            tpla_last_error());
    ++*failures;
  }
  return plan;
}

#define EXPECT(cond, ...)                                          \
  do {                                                             \
    if (!(cond)) {                                                 \
      fprintf(stderr, "  rank %d: %s failed: ", rank, #cond);      \
      fprintf(stderr, __VA_ARGS__);                                \
      fprintf(stderr, "\n");                                       \
      failures++;                                                  \
    }                                                              \
  } while (0)

static int share_body(tpla_ctx_t ctx, int rank, int nranks, void *arg) {
  const share_case_t *c = arg;
  int failures = 0;
  part_t pt[NSHAPES];
  tpla_ns_plan_t alone[NSHAPES] = {0}, member[NSHAPES] = {0};
  unsigned char *want[NSHAPES] = {0};
  size_t own[NSHAPES] = {0}, most = 0;
  for (int i = 0; i < NSHAPES; i++) {
    make_part(&pt[i], c, i, rank, nranks);
    alone[i] = create(ctx, &pt[i], 0, &failures);
    if (alone[i] == NULL || run(alone[i], &pt[i], &want[i]))
      return 1; /* every rank fails alike: no collective is left waiting */
    own[i] = ws_of(alone[i]);
  }
  /* made small, large, middle: the large one grows the group for the first */
  for (int i = 0; i < NSHAPES && failures == 0; i++) {
    member[i] = create(ctx, &pt[i], GROUP, &failures);
    most = own[i] > most ? own[i] : most;
    for (int j = 0; j <= i && member[j] != NULL && c->collective; j++)
      EXPECT(ws_of(member[j]) == most, "member %d after %d made: %zu bytes, the largest %zu", j,
             i, ws_of(member[j]), most);
  }
  /* calls in any order, each after another member's, give the lone plans' bits */
  static const int order[] = {0, 1, 2, 0, 2, 1, 1, 0, 2};
  for (size_t k = 0; k < sizeof order / sizeof order[0] && failures == 0; k++) {
    int i = order[k];
    unsigned char *got = NULL;
    failures += run(member[i], &pt[i], &got);
    EXPECT(failures > 0 || memcmp(got, want[i], pt[i].bytes) == 0,
           "call %zu (shape %d) differs from the plan alone", k, i);
    free(got);
  }
  /* another group has a workspace of its own */
  tpla_ns_plan_t other = failures == 0 ? create(ctx, &pt[0], GROUP + 1, &failures) : NULL;
  if (other != NULL && c->collective)
    EXPECT(ws_of(other) == own[0], "group %d: %zu bytes, its plan alone %zu", GROUP + 1,
           ws_of(other), own[0]);
  tpla_ns_plan_destroy(other);
  /* the largest member gone, the group keeps its workspace for the others */
  tpla_ns_plan_destroy(member[1]);
  member[1] = NULL;
  for (int i = 0; i < NSHAPES && failures == 0; i += 2) {
    unsigned char *got = NULL;
    failures += run(member[i], &pt[i], &got);
    EXPECT(failures > 0 || memcmp(got, want[i], pt[i].bytes) == 0,
           "shape %d after the largest member went", i);
    if (c->collective)
      EXPECT(ws_of(member[i]) == most, "shape %d: %zu bytes after the largest member went", i,
             ws_of(member[i]));
    free(got);
  }
  for (int i = 0; i < NSHAPES; i++)
    tpla_ns_plan_destroy(member[i]);
  /* with the last member the group went: a new one is the new member's size */
  tpla_ns_plan_t again = failures == 0 ? create(ctx, &pt[0], GROUP, &failures) : NULL;
  if (again != NULL && c->collective)
    EXPECT(ws_of(again) == own[0], "the group made again: %zu bytes, its plan alone %zu",
           ws_of(again), own[0]);
  tpla_ns_plan_destroy(again);
  for (int i = 0; i < NSHAPES; i++) {
    tpla_ns_plan_destroy(alone[i]);
    free(want[i]);
    free(pt[i].x.data);
  }
  return failures > 0;
}

/* The last rank's executor refuses allocations above a size: a creation
 * that fails there after the other ranks allocated a larger workspace for
 * the group. */
static const tpla_backend_t *real_backend;
static size_t refuse_above;
static tpla_status_t refusing_alloc(tpla_ctx_t ctx, size_t bytes, void **ptr) {
  if (bytes > refuse_above)
    return tpla_fail(TPLA_ERROR_OUT_OF_MEMORY, "test", "refused %zu bytes", bytes);
  return real_backend->mem_alloc(ctx, bytes, ptr);
}

static int failed_create_body(tpla_ctx_t ctx, int rank, int nranks, void *arg) {
  const share_case_t *c = arg;
  int failures = 0;
  part_t pt[2];
  unsigned char *want = NULL, *got = NULL;
  for (int i = 0; i < 2; i++)
    make_part(&pt[i], c, i, rank, nranks);
  tpla_ns_plan_t alone = create(ctx, &pt[0], 0, &failures);
  tpla_ns_plan_t member = create(ctx, &pt[0], GROUP, &failures);
  if (alone == NULL || member == NULL || run(alone, &pt[0], &want))
    return 1; /* every rank fails alike */
  size_t bytes = ws_of(member);
  tpla_backend_t refusing;
  if (rank == nranks - 1) {
    real_backend = ctx->backend;
    refusing = *ctx->backend;
    refusing.mem_alloc = refusing_alloc;
    refuse_above = bytes;
    ctx->backend = &refusing;
  }
  tpla_ns_desc_t d = pt[1].desc;
  d.workspace_group = GROUP;
  tpla_ns_plan_t larger = (tpla_ns_plan_t)(uintptr_t)1;
  tpla_status_t s = tpla_ns_plan_create(&larger, ctx, &d);
  if (rank == nranks - 1)
    ctx->backend = real_backend;
  EXPECT(s == (rank == nranks - 1 ? TPLA_ERROR_OUT_OF_MEMORY : TPLA_ERROR_REMOTE) &&
             larger == NULL, "the larger plan's creation: %s", tpla_status_string(s));
  EXPECT(ws_of(member) == bytes, "the member's bytes went from %zu to %zu", bytes, ws_of(member));
  failures += run(member, &pt[0], &got);
  EXPECT(failures > 0 || memcmp(got, want, pt[0].bytes) == 0,
         "the member's result differs from the plan alone after the failed creation");
  /* and the group still grows for a creation that succeeds */
  larger = create(ctx, &pt[1], GROUP, &failures);
  EXPECT(larger != NULL && ws_of(member) > bytes, "no growth: %zu bytes", ws_of(member));
  tpla_ns_plan_destroy(larger);
  tpla_ns_plan_destroy(member);
  tpla_ns_plan_destroy(alone);
  free(want);
  free(got);
  for (int i = 0; i < 2; i++)
    free(pt[i].x.data);
  return failures > 0;
}

static void run_case(int P, bool collective) {
  share_case_t c = {collective, {0}};
  for (int i = 0; i < NSHAPES; i++)
    c.x[i] = random_matrix(shapes[i].m, shapes[i].n, shapes[i].dtype, 100 + (uint64_t)i);
  int bad = run_host_ranks(P, share_body, &c);
  if (P > 1)
    bad += run_host_ranks(P, failed_create_body, &c);
  for (int i = 0; i < NSHAPES; i++)
    free(c.x[i]);
  if (bad != 0)
    fprintf(stderr, "  %d ranks%s: %d failed\n", P, collective ? " (collective sums)" : "", bad);
  ASSERT_EQ_INT(bad, 0);
}

static void test_one_rank(void) { run_case(1, true); }
static void test_two_ranks_collective_sums(void) { run_case(2, true); }
static void test_two_ranks_pulled_sums(void) { run_case(2, false); }
static void test_three_ranks(void) { run_case(3, true); }

int main(void) {
  TEST(test_one_rank);
  TEST(test_two_ranks_collective_sums);
  TEST(test_two_ranks_pulled_sums);
  TEST(test_three_ranks);
  return test_summary();
}
