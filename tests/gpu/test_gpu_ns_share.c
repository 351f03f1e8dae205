/*
 * test_gpu_ns_share.c - Newton-Schulz workspace groups on the CUDA executor
 * (tpla_ns_desc_t.workspace_group), on 1 GPU and on 2 GPUs (one thread per
 * GPU, NCCL contexts, pulled Gram sums):
 *   - plans of two shapes in one group, the smaller made first, give the
 *     results of the same plans alone, in an interleaved order of calls, and
 *     after the larger member is destroyed;
 *   - on one GPU the group holds the larger plan's workspace only: creating
 *     both members takes no more device memory than that plan alone (plus
 *     driver slack), both report it, and destroying both returns it all.
 * test_ns_share.c checks the same logic on the host executor in CI.
 *
 * Run: build-gpu/tests/test_gpu_ns_share (exits 77 without a GPU; the 2-GPU
 * test skips on one GPU). TPLA_NS_TEST_HOST=1 runs it on the host executor.
 */
#include "test.h"
#include "tpla.h"

#ifdef TPLA_HAVE_CUDA
#include "ns_team.h"

#define NMAT 2
#define GROUP 5
#define SLACK (4.0 * 1024 * 1024) /* cudaMalloc's granularity and the driver's own */
/* A member's result against the same plan alone: the same GEMMs on the same
 * data (bit for bit unless cuBLASLt picks another algorithm for other
 * addresses), far inside the bf16 accuracy tolerance (6e-2) */
#define TOL 1e-3

/* bf16, rows sharded; the smaller is created first, so the larger grows the
 * group (16x smaller sides on the host executor) */
static struct {
  int64_t m, n;
} mats[NMAT] = {{1024, 4096}, {2048, 4096}};

static struct {
  bool host;
  double *x[NMAT];
} fx;


typedef struct {
  team_shard_t sh;
  size_t bytes;
  unsigned char *want; /* the plan alone's result */
  void *dx, *dout;
  tpla_ns_desc_t desc;
} part_t;

static int part_open(rank_env_t *e, part_t *p, int i) {
  int P = e->nranks, r = e->rank;
  int64_t m = mats[i].m, n = mats[i].n, rows = m / P + (r < m % P);
  int64_t off = r * (m / P) + (r < m % P ? r : m % P);
  bool failed = false;
  memset(p, 0, sizeof *p);
  p->sh = (team_shard_t){true, off, rows, n, n, n, TPLA_BFLOAT16};
  p->bytes = (size_t)(rows * n) * 2;
  unsigned char *img = malloc(p->bytes + 2);
  p->want = malloc(p->bytes + 2);
  if (img != NULL)
    team_shard_store(&p->sh, img, fx.x[i]);
  p->dx = team_alloc(e, p->bytes, &failed);
  p->dout = team_alloc(e, p->bytes, &failed);
  p->desc = (tpla_ns_desc_t)TPLA_NS_DESC_INIT;
  p->desc.local_rows = rows;
  p->desc.local_cols = n;
  p->desc.dtype = TPLA_BFLOAT16;
  failed = failed || img == NULL || p->want == NULL ||
           team_copy(e, p->dx, img, p->bytes, cudaMemcpyHostToDevice);
  free(img);
  return failed;
}

static void part_close(rank_env_t *e, part_t *p) {
  team_free(e, p->dx);
  team_free(e, p->dout);
  free(p->want);
}

/* One call of plan into p->dout, drained and downloaded into img. */
static int call(rank_env_t *e, tpla_ns_plan_t plan, part_t *p, unsigned char *img) {
  tpla_matrix_t x = {p->dx, p->sh.lr, p->sh.lc, p->sh.ld, TPLA_BFLOAT16};
  tpla_matrix_t out = {p->dout, p->sh.lr, p->sh.lc, p->sh.ld, TPLA_BFLOAT16};
  tpla_status_t s = tpla_ns_execute_out(plan, out, x, e->stream);
  if (TPLA_FAILED(s)) {
    fprintf(stderr, "  rank %d: execute: %s: %s\n", e->rank, tpla_status_string(s),
            tpla_last_error());
    return 1;
  }
  return team_drain(e, "execute") || team_copy(e, img, p->dout, p->bytes, cudaMemcpyDeviceToHost);
}

/* Relative Frobenius difference of two bf16 images; *same: bit for bit. */
static double image_diff(const unsigned char *a, const unsigned char *b, size_t bytes,
                         bool *same) {
  double num = 0.0, den = 0.0;
  for (size_t i = 0; i < bytes / 2; i++) {
    double u = tpla_load_elem(a, TPLA_BFLOAT16, i), v = tpla_load_elem(b, TPLA_BFLOAT16, i);
    num += (u - v) * (u - v);
    den += v * v;
  }
  *same = memcmp(a, b, bytes) == 0;
  return den > 0.0 ? sqrt(num / den) : sqrt(num);
}

static size_t ws_of(tpla_ns_plan_t plan) {
  size_t b = 0;
  tpla_ns_plan_workspace_bytes(plan, &b);
  return b;
}

static tpla_ns_plan_t create(rank_env_t *e, const part_t *p, int group, bool *failed) {
  tpla_ns_desc_t d = p->desc;
  d.workspace_group = group;
  tpla_ns_plan_t plan = NULL;
  /* collective: a rank that failed before joins with NULL */
  tpla_status_t s = tpla_ns_plan_create(&plan, e->ctx, *failed ? NULL : &d);
  if (!*failed && TPLA_FAILED(s)) {
    fprintf(stderr, "  rank %d: create (group %d): %s: %s\n", e->rank, group,
            tpla_status_string(s), tpla_last_error());
    *failed = true;
  }
  return plan;
}

/* Free device memory when the device is quiet, else 0 (not judged). */
static size_t quiet_free(rank_env_t *e) {
  size_t f = 0;
  bool quiet = false;
  if (e->host || team_drain(e, "probe") || gpu_free_probe(&f, &quiet) || !quiet)
    return 0;
  return f;
}

static int share_body(rank_env_t *e, void *arg) {
  (void)arg;
  int failures = 0, r = e->rank, P = e->nranks;
  bool failed = false;
  part_t parts[NMAT];
  tpla_ns_plan_t alone[NMAT] = {0}, member[NMAT] = {0};
  size_t own[NMAT] = {0};
  unsigned char *got = malloc((size_t)(mats[NMAT - 1].m * mats[NMAT - 1].n) * 2 + 2);
  failed = got == NULL;
  for (int i = 0; i < NMAT; i++)
    failed |= part_open(e, &parts[i], i);
  for (int i = 0; i < NMAT; i++) {
    alone[i] = create(e, &parts[i], 0, &failed);
    if (!failed)
      failed = call(e, alone[i], &parts[i], parts[i].want);
    own[i] = alone[i] != NULL ? ws_of(alone[i]) : 0;
  }
  /* both alone plans exist here: a group that held both workspaces would take their sum */
  size_t before = failed ? 0 : quiet_free(e);
  for (int i = 0; i < NMAT; i++)
    member[i] = create(e, &parts[i], GROUP, &failed);
  size_t after = failed ? 0 : quiet_free(e);
  if (!failed && P == 1) { /* no pulled windows: the members hold the group's bytes alone */
    for (int i = 0; i < NMAT; i++)
      CHECK(&failures, ws_of(member[i]) == own[NMAT - 1],
            "member %d reports %zu bytes, the larger plan alone %zu", i, ws_of(member[i]),
            own[NMAT - 1]);
    if (before > 0 && after > 0)
      CHECK(&failures, (double)before - (double)after <= (double)own[NMAT - 1] + SLACK,
            "the group took %.1f MiB of device memory; the larger plan alone holds %.1f MiB, "
            "both %.1f MiB", ((double)before - (double)after) / 1048576.0,
            (double)own[NMAT - 1] / 1048576.0, (double)(own[0] + own[1]) / 1048576.0);
    else if (!e->host)
      printf("# device memory not judged: another process moved it\n");
    if (!e->host && before > 0 && after > 0)
      printf("# 1 GPU: alone %.1f + %.1f MiB; the group's members took %.1f MiB\n",
             (double)own[0] / 1048576.0, (double)own[1] / 1048576.0,
             ((double)before - (double)after) / 1048576.0);
  }
  static const int order[] = {0, 1, 0, 1, 1, 0, -1, 0}; /* -1: the larger member destroyed */
  for (size_t k = 0; k < sizeof order / sizeof order[0] && !failed; k++) {
    int i = order[k];
    if (i < 0) {
      tpla_ns_plan_destroy(member[1]);
      member[1] = NULL;
      continue;
    }
    failed = call(e, member[i], &parts[i], got);
    bool same = false;
    double d = failed ? 0.0 : image_diff(got, parts[i].want, parts[i].bytes, &same);
    CHECK(&failures, failed || d <= TOL,
          "rank %d: call %zu (%" PRId64 "x%" PRId64 ") differs from the plan alone by %.3e", r, k,
          mats[i].m, mats[i].n, d);
    if (r == 0 && !failed)
      printf("# %d GPU%s: call %zu, %" PRId64 "x%" PRId64 ": %s (%.2e)\n", P, P > 1 ? "s" : "",
             k, mats[i].m, mats[i].n, same ? "bit for bit" : "differs", d);
  }
  for (int i = 0; i < NMAT; i++)
    tpla_ns_plan_destroy(member[i]);
  size_t last = failed ? 0 : quiet_free(e);
  if (P == 1 && before > 0 && last > 0)
    CHECK(&failures, (double)before - (double)last <= SLACK,
          "the group's memory was not returned: free %zu bytes before, %zu after", before, last);
  for (int i = 0; i < NMAT; i++) {
    tpla_ns_plan_destroy(alone[i]);
    part_close(e, &parts[i]);
  }
  free(got);
  return failures + failed;
}

static void run_share(int P) {
  REQUIRE_GPUS(P, team_gpus(fx.host));
  ASSERT_EQ_INT(team_run(P, fx.host, share_body, NULL), 0);
}
static void test_ns_share_one_gpu(void) { run_share(1); }
static void test_ns_share_two_gpus(void) { run_share(2); }

int main(void) {
  fx.host = gpu_env_on("TPLA_NS_TEST_HOST");
  GPU_TEST_MAIN_SKIP_WITHOUT(team_gpus(fx.host));
  for (int i = 0; i < NMAT && fx.host; i++)
    mats[i].m /= 16, mats[i].n /= 16;
  watchdog_arm("test_gpu_ns_share", 600);
  gpu_rng_t rng;
  gpu_rng_seed(&rng, gpu_fresh_seed("test_gpu_ns_share"));
  for (int i = 0; i < NMAT; i++) {
    size_t count = (size_t)(mats[i].m * mats[i].n);
    fx.x[i] = malloc(sizeof(double) * count);
    if (fx.x[i] == NULL) {
      printf("FAIL setup: out of host memory\n0 passed, 1 failed\n");
      return 1;
    }
    for (size_t j = 0; j < count; j++)
      fx.x[i][j] = gpu_rng_uniform(&rng);
  }
  TEST(test_ns_share_one_gpu);
  TEST(test_ns_share_two_gpus);
  for (int i = 0; i < NMAT; i++)
    free(fx.x[i]);
  return test_summary();
}

#else /* a build without the CUDA executor */
TEST_MAIN_WITHOUT_CUDA()
#endif
