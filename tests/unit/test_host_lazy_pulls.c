/*
 * test_host_lazy_pulls.c - the host transport's pulls (src/host/host_transport.c)
 * on two thread ranks, eager and lazy (TPLA_HOST_LAZY_PULLS=1):
 *   - eager: a pull's rows are in place when the step returns;
 *   - lazy: until a lane waits for the flag, the destination holds NaN bytes;
 *     after the wait, the peer's rows;
 *   - lazy: the copy reads the source when waited for, so a source the peer
 *     overwrote before that wait shows its new rows (what makes early
 *     overwrites visible to the tests that run with lazy pulls).
 * Run: ./test_host_lazy_pulls
 */
#include "test.h"

#include "internal.h"
#include "overlap.h"
#include "ranks.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

enum { ROWS = 3, COLS = 5, N = ROWS * COLS };

static float value(int rank, int i, int version) { return (float)(1000 * version + 100 * rank + i); }

typedef struct {
  tpla_xport_t *xp;
  const struct tpla_xport_ops *x;
  float recv[N];
} side_t;

static int open_side(tpla_ctx_t ctx, side_t *s) {
  s->x = ctx->backend->xport;
  ovl_xport_desc_t desc = {OVL_XPORT_PEER, sizeof(float) * N, 3, "test_host_lazy_pulls"};
  if (s->x == NULL || s->x->create(ctx, &desc, &s->xp) != TPLA_SUCCESS) {
    printf("  rank %d: no transport: %s\n", ctx->rank, tpla_last_error());
    return 1;
  }
  return s->x->begin(s->xp, 1, NULL, desc.fn) != TPLA_SUCCESS;
}

/* End the call; destroy once the peer is done reading this rank's window. */
static int close_side(tpla_ctx_t ctx, side_t *s, int bad) {
  if (s->xp == NULL)
    return 1;
  bad |= s->x->end(s->xp, NULL) != TPLA_SUCCESS;
  bad |= tpla_barrier(ctx, NULL) != TPLA_SUCCESS;
  s->x->destroy(s->xp);
  return bad;
}

/* Publish this rank's window under `flag` and pull the peer's into recv. */
static int pull(side_t *s, int peer, int flag, bool from_peer) {
  tpla_matrix_t window = {s->x->window(s->xp), ROWS, COLS, COLS, TPLA_FLOAT32};
  tpla_matrix_t recv = {s->recv, from_peer ? ROWS : 0, COLS, COLS, TPLA_FLOAT32};
  ovl_step_t step = {.to = peer, .send = window, .from = from_peer ? peer : -1, .recv = recv,
                     .pull = 1, .flag = flag, .after = OVL_LANE_COMPUTE0};
  return s->x->step(s->xp, &step, 1) != TPLA_SUCCESS;
}

static int all_nan_bytes(const float *v) {
  const unsigned char *b = (const unsigned char *)v;
  for (size_t i = 0; i < sizeof(float) * N; i++)
    if (b[i] != 0xff)
      return 0;
  return isnan(v[0]);
}

static int holds(const float *v, int rank, int version) {
  for (int i = 0; i < N; i++)
    if (v[i] != value(rank, i, version))
      return 0;
  return 1;
}

static void fill(side_t *s, int rank, int version) {
  float *w = s->x->window(s->xp);
  for (int i = 0; i < N; i++)
    w[i] = value(rank, i, version);
}

/* Both ranks publish and pull each other's window. */
static int both_pull(tpla_ctx_t ctx, int rank, int nranks, void *arg) {
  const bool lazy = *(const bool *)arg;
  side_t s = {0};
  int bad = open_side(ctx, &s);
  if (!bad) {
    fill(&s, rank, 1);
    bad = pull(&s, 1 - rank, 0, true);
  }
  if (!bad && lazy && !all_nan_bytes(s.recv)) {
    printf("  rank %d: a lazy pull's rows before the wait are not NaN bytes\n", rank);
    bad = 1;
  }
  if (!bad && !lazy && !holds(s.recv, 1 - rank, 1)) {
    printf("  rank %d: an eager pull's rows are not the peer's after the step\n", rank);
    bad = 1;
  }
  if (!bad)
    bad = s.x->arrival(s.xp, OVL_LANE_COMPUTE0, 0, 1) != TPLA_SUCCESS;
  if (!bad && !holds(s.recv, 1 - rank, 1)) {
    printf("  rank %d: after the wait the rows are not the peer's\n", rank);
    bad = 1;
  }
  return close_side(ctx, &s, bad);
}

/* Rank 1 publishes its window (flag 0), then overwrites it (too early) once
 * rank 0 issued its pull (flag 1), and says so (flag 2); rank 0 waits for
 * that, then for its pull. Eager, the pull copied the first rows. */
static int early_overwrite(tpla_ctx_t ctx, int rank, int nranks, void *arg) {
  side_t s = {0};
  int bad = open_side(ctx, &s);
  if (!bad && rank == 1) {
    fill(&s, rank, 1);
    bad = pull(&s, 0, 0, false) || s.x->arrival(s.xp, OVL_LANE_COMPUTE0, 1, 1) != TPLA_SUCCESS;
    fill(&s, rank, 2);
    bad = bad || pull(&s, 0, 2, false);
  } else if (!bad) {
    bad = pull(&s, 1, 0, true) || pull(&s, 1, 1, false) ||
          s.x->arrival(s.xp, OVL_LANE_COMPUTE0, 2, 1) != TPLA_SUCCESS ||
          s.x->arrival(s.xp, OVL_LANE_COMPUTE0, 0, 1) != TPLA_SUCCESS;
    if (!bad && !holds(s.recv, 1, 2)) {
      printf("  a lazy pull did not read its source when waited for\n");
      bad = 1;
    }
  }
  return close_side(ctx, &s, bad);
}

static void test_eager_pull(void) {
  unsetenv("TPLA_HOST_LAZY_PULLS");
  bool lazy = false;
  ASSERT_EQ_INT(run_host_ranks(2, both_pull, &lazy), 0);
}

static void test_lazy_pull_nan_until_waited(void) {
  setenv("TPLA_HOST_LAZY_PULLS", "1", 1);
  bool lazy = true;
  ASSERT_EQ_INT(run_host_ranks(2, both_pull, &lazy), 0);
  unsetenv("TPLA_HOST_LAZY_PULLS");
}

static void test_lazy_pull_reads_source_when_waited(void) {
  setenv("TPLA_HOST_LAZY_PULLS", "1", 1);
  ASSERT_EQ_INT(run_host_ranks(2, early_overwrite, NULL), 0);
  unsetenv("TPLA_HOST_LAZY_PULLS");
}

int main(void) {
  TEST(test_eager_pull);
  TEST(test_lazy_pull_nan_until_waited);
  TEST(test_lazy_pull_reads_source_when_waited);
  return test_summary();
}
