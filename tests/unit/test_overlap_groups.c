/*
 * test_overlap_groups.c - window groups (tpla_*_desc_t.window_group): the
 * overlap plans of a context that share one set of buffers. On 2 and 3 host
 * ranks, a group's plans (AllGather+GEMM, GEMM+ReduceScatter, GEMM+AllReduce
 * of different shapes, created smallest first so the group's buffers grow
 * twice) are called interleaved, several rounds, and every output is
 * checked against the float64 reference; the group holds less memory than
 * the plans alone; a gathered view lasts exactly until the group's next
 * call; a member destroyed early leaves the others working; ranks that
 * disagree on the group fail alike, and a group refuses a plan of another
 * mode or transport while its members keep working; a creation that fails
 * after buffers were grown for it leaves the group as it was.
 *
 *   ./test_overlap_groups     (CTest: test_overlap_groups, and with lazy pulls)
 */
#include "test_overlap_common.h"

#include <stddef.h>

enum { NPLANS = 3, ROUNDS = 3 };

typedef struct {
  orun_t runs[NPLANS];     /* the group's plans, in creation order */
  size_t alone[NPLANS];    /* each plan's workspace without a group (rank 0) */
  int early_destroy;       /* index of a plan destroyed after round 0, or -1 */
  int gathered_checks_ok;  /* set by rank 0's body */
} groups_t;

typedef struct {
  tpla_ag_gemm_plan_t ag;
  tpla_gemm_rs_plan_t rs;
  tpla_gemm_ar_plan_t ar;
} plans_t;

static tpla_status_t call(const ocase_t *c, plans_t *pl, orank_t *o) {
  return oc_call(c, pl->ag, pl->rs, pl->ar, o);
}

static void destroy(plans_t *pl) {
  tpla_ag_gemm_plan_destroy(pl->ag);
  tpla_gemm_rs_plan_destroy(pl->rs);
  tpla_gemm_ar_plan_destroy(pl->ar);
  memset(pl, 0, sizeof *pl);
}

static size_t workspace(const ocase_t *c, const plans_t *pl) {
  size_t ws = 0;
  if (c->kind == OC_AG)
    tpla_ag_gemm_plan_workspace_bytes(pl->ag, &ws);
  else if (c->kind == OC_RS)
    tpla_gemm_rs_plan_workspace_bytes(pl->rs, &ws);
  else
    tpla_gemm_ar_plan_workspace_bytes(pl->ar, &ws);
  return ws;
}

/* Rank 0 only: the AG plan's gathered view right after its call, and gone
 * after the next call of another member (the view equals the true gather:
 * oc_gathered_ok on the copy taken here). */
static int gathered_semantics(groups_t *g, int ag_index, plans_t *pl, int next, orank_t *o) {
  int avail = 0;
  tpla_matrix_t view;
  if (tpla_ag_gemm_plan_has_gathered(pl[ag_index].ag, &avail) != TPLA_SUCCESS || !avail ||
      tpla_ag_gemm_gathered(pl[ag_index].ag, &view) != TPLA_SUCCESS) {
    fprintf(stderr, "  the gathered view is missing right after its call: %s\n",
            tpla_last_error());
    return 0;
  }
  oc_copy(g->runs[ag_index].r[0].gathered, view);
  if (call(g->runs[next].c, &pl[next], o) != TPLA_SUCCESS)
    return 0;
  if (tpla_ag_gemm_plan_has_gathered(pl[ag_index].ag, &avail) != TPLA_SUCCESS || avail ||
      tpla_ag_gemm_gathered(pl[ag_index].ag, &view) != TPLA_ERROR_INVALID_USAGE) {
    fprintf(stderr, "  the gathered view outlived another member's call\n");
    return 0;
  }
  return 1;
}

/* Rank 0's copy of its gathered view equals every rank's A_local stacked, bit for bit. */
static int gathered_ok_rank0(const orun_t *run) {
  size_t es = tpla_dtype_size(run->c->dtype);
  int64_t base = 0;
  for (int q = 0; q < run->c->P; q++) {
    tpla_matrix_t a = run->r[q].a, view = run->r[0].gathered;
    for (int64_t i = 0; i < a.rows; i++)
      if (memcmp((char *)view.data + (size_t)((base + i) * view.ld) * es,
                 (char *)a.data + (size_t)(i * a.ld) * es, (size_t)a.cols * es) != 0) {
        fprintf(stderr, "  gathered row %lld (rank %d's row %lld) differs\n",
                (long long)(base + i), q, (long long)i);
        return 0;
      }
    base += a.rows;
  }
  return 1;
}

static int body(tpla_ctx_t ctx, int rank, int nranks, void *arg) {
  (void)nranks;
  groups_t *g = arg;
  plans_t pl[NPLANS];
  memset(pl, 0, sizeof pl);
  int ag_index = -1;
  for (int i = 0; i < NPLANS; i++) {
    orank_t *o = &g->runs[i].r[rank];
    if (oc_note(o, oc_create(g->runs[i].c, ctx, rank, &pl[i].ag, &pl[i].rs, &pl[i].ar)))
      return 0;
    ag_index = g->runs[i].c->kind == OC_AG ? i : ag_index;
  }
  for (int round = 0; round < ROUNDS; round++) {
    for (int i = 0; i < NPLANS; i++) {
      orank_t *o = &g->runs[i].r[rank];
      if (i == g->early_destroy && round > 0)
        continue;
      if (round > 0)
        oc_negate(o->a);
      oc_copy(o->d, o->d0);
      if (oc_note(o, call(g->runs[i].c, &pl[i], o)) != TPLA_SUCCESS)
        return 0;
    }
    if (round == 0 && g->early_destroy >= 0) {
      tpla_barrier(ctx, NULL); /* no call of the group in flight on any rank */
      destroy(&pl[g->early_destroy]);
    }
  }
  for (int i = 0; i < NPLANS; i++)
    g->runs[i].r[rank].ws = pl[i].ag || pl[i].rs || pl[i].ar ? workspace(g->runs[i].c, &pl[i])
                                                             : 0;
  /* the AG plan once more (its inputs unchanged: the outputs stay checkable), then its view */
  if (ag_index >= 0 && ag_index != g->early_destroy) {
    orank_t *o = &g->runs[ag_index].r[rank];
    oc_copy(o->d, o->d0);
    oc_note(o, call(g->runs[ag_index].c, &pl[ag_index], o));
    int next = (ag_index + 1) % NPLANS == g->early_destroy ? (ag_index + 2) % NPLANS
                                                            : (ag_index + 1) % NPLANS;
    orank_t *on = &g->runs[next].r[rank];
    oc_copy(on->d, on->d0);
    if (rank == 0)
      g->gathered_checks_ok = gathered_semantics(g, ag_index, pl, next, on);
    else
      oc_note(on, call(g->runs[next].c, &pl[next], on));
  }
  tpla_barrier(ctx, NULL);
  for (int i = 0; i < NPLANS; i++)
    destroy(&pl[i]);
  return 0;
}

/* Three plans of one group on P ranks: AR, AG, RS, each larger than the last. */
static void make_cases(ocase_t *c, int P, tpla_transport_t transport, int group) {
  memset(c, 0, NPLANS * sizeof *c);
  for (int i = 0; i < NPLANS; i++) {
    c[i].P = P;
    c[i].alpha = 1.0f;
    c[i].calls = ROUNDS;
    c[i].dtype = c[i].d_dtype = TPLA_FLOAT32;
    c[i].mode = TPLA_OVERLAP_OVERLAP;
    c[i].transport = transport;
    c[i].chunks = 2;
    c[i].window_group = group;
    c[i].seed = 4242 + 31 * (uint64_t)i + 7 * (uint64_t)P;
  }
  c[0].kind = OC_AR, c[0].m = 24, c[0].n[0] = 8;
  for (int r = 0; r < P; r++)
    c[0].k[r] = 5 + r;
  c[1].kind = OC_AG, c[1].k[0] = 12, c[1].op_b = TPLA_OP_T, c[1].bias = 1;
  for (int r = 0; r < P; r++)
    c[1].rows[r] = 16 + 8 * r, c[1].n[r] = 6 + r;
  c[2].kind = OC_RS, c[2].m = 96, c[2].n[0] = 20, c[2].beta = 1.0f, c[2].chunks = 3;
  for (int r = 0; r < P; r++)
    c[2].k[r] = 9, c[2].rows[r] = -1;
}

static int run_group(int P, tpla_transport_t transport, int early_destroy) {
  ocase_t cases[NPLANS];
  groups_t g;
  memset(&g, 0, sizeof g);
  g.early_destroy = early_destroy;
  make_cases(cases, P, transport, 0);
  for (int i = 0; i < NPLANS; i++) { /* each alone first: its own workspace */
    orun_t alone;
    cases[i].calls = 1;
    if (oc_run_case(&cases[i], &alone))
      return 1;
    g.alone[i] = alone.r[0].ws;
    oc_free(&alone);
  }
  make_cases(cases, P, transport, 7);
  for (int i = 0; i < NPLANS; i++)
    oc_setup(&g.runs[i], &cases[i]);
  int bad = run_host_ranks(P, body, &g) != 0;
  size_t sum = 0;
  for (int i = 0; i < NPLANS && !bad; i++) {
    for (int r = 0; r < P && !bad; r++)
      if (g.runs[i].r[r].status != TPLA_SUCCESS) {
        fprintf(stderr, "  plan %d rank %d: %s: %s\n", i, r,
                tpla_status_string(g.runs[i].r[r].status), g.runs[i].r[r].error);
        bad = 1;
      }
    if (i == early_destroy)
      continue;
    double rel = 0, worst = bad ? 0 : oc_check(&g.runs[i], &rel);
    if (worst > 1.0) {
      fprintf(stderr, "  plan %d: error %.3g x the rounding bound\n", i, worst);
      bad = 1;
    }
    sum += g.alone[i];
    if (g.runs[i].r[0].ws != g.runs[(i + 1) % NPLANS == early_destroy ? (i + 2) % NPLANS
                                                                       : (i + 1) % NPLANS]
                                 .r[0]
                                 .ws) {
      fprintf(stderr, "  plan %d reports %zu bytes, another member of its group differs\n", i,
              g.runs[i].r[0].ws);
      bad = 1;
    }
  }
  if (!bad && early_destroy < 0 && !(g.runs[0].r[0].ws < sum)) {
    fprintf(stderr, "  the group holds %zu bytes, the plans alone %zu\n", g.runs[0].r[0].ws, sum);
    bad = 1;
  }
  if (!bad && early_destroy != 1 && !g.gathered_checks_ok) {
    fprintf(stderr, "  the gathered view's lifetime is wrong\n");
    bad = 1;
  }
  if (!bad && early_destroy != 1 && !gathered_ok_rank0(&g.runs[1]))
    bad = 1;
  if (bad)
    fprintf(stderr, "  P=%d transport %d early_destroy %d\n", P, (int)transport, early_destroy);
  for (int i = 0; i < NPLANS; i++)
    oc_free(&g.runs[i]);
  return bad;
}

static void test_group_one_rank(void) { ASSERT_EQ_INT(run_group(1, TPLA_TRANSPORT_AUTO, -1), 0); }
static void test_group_two_ranks_peer(void) {
  ASSERT_EQ_INT(run_group(2, TPLA_TRANSPORT_PEER, -1), 0);
}
static void test_group_three_ranks_peer(void) {
  ASSERT_EQ_INT(run_group(3, TPLA_TRANSPORT_PEER, -1), 0);
}
static void test_group_two_ranks_sendrecv(void) {
  ASSERT_EQ_INT(run_group(2, TPLA_TRANSPORT_SENDRECV, -1), 0);
}
static void test_group_member_destroyed_early(void) {
  ASSERT_EQ_INT(run_group(2, TPLA_TRANSPORT_PEER, 0), 0);
  ASSERT_EQ_INT(run_group(3, TPLA_TRANSPORT_PEER, 2), 0);
}

/* ---- what a group refuses ----------------------------------------------------------- */

typedef struct {
  int case_id;
  tpla_status_t first[OC_MAX_RANKS], second[OC_MAX_RANKS], after[OC_MAX_RANKS];
  double worst;
  orun_t run; /* the first plan's buffers: still called after the refusal */
} refuse_t;

/* Case 0: ranks name different groups. 1: a negative group on rank 1. 2: a SERIAL plan into
 * an OVERLAP group. 3: a SENDRECV plan into a PEER group. 2 and 3 then call the first plan. */
static int refuse_body(tpla_ctx_t ctx, int rank, int nranks, void *arg) {
  (void)nranks;
  refuse_t *t = arg;
  const ocase_t *c = t->run.c;
  tpla_gemm_rs_desc_t d = TPLA_GEMM_RS_DESC_INIT;
  d.m = c->m, d.k = c->k[rank], d.n = c->n[0], d.dtype = d.d_dtype = TPLA_FLOAT32;
  d.transport = TPLA_TRANSPORT_PEER, d.chunks = 2;
  plans_t pl = {0}, other = {0};
  if (t->case_id < 2) {
    d.window_group = t->case_id == 0 ? 3 + rank : (rank == 1 ? -2 : 3);
    t->first[rank] = tpla_gemm_rs_plan_create(&pl.rs, ctx, &d);
    destroy(&pl);
    return 0;
  }
  d.window_group = 5;
  t->first[rank] = tpla_gemm_rs_plan_create(&pl.rs, ctx, &d);
  tpla_gemm_ar_desc_t e = TPLA_GEMM_AR_DESC_INIT;
  e.m = 8, e.k = 4, e.n = 4, e.dtype = e.d_dtype = TPLA_FLOAT32, e.window_group = 5;
  if (t->case_id == 2)
    e.mode = TPLA_OVERLAP_SERIAL;
  else
    e.transport = TPLA_TRANSPORT_SENDRECV;
  t->second[rank] = tpla_gemm_ar_plan_create(&other.ar, ctx, &e);
  orank_t *o = &t->run.r[rank];
  oc_copy(o->d, o->d0);
  tpla_overlap_args_t args = TPLA_OVERLAP_ARGS_INIT;
  t->after[rank] = pl.rs ? tpla_gemm_rs(pl.rs, o->d, o->a, o->b, &args, NULL) : TPLA_ERROR_INTERNAL;
  tpla_barrier(ctx, NULL);
  destroy(&pl);
  destroy(&other);
  return 0;
}

static void test_group_refusals(void) {
  ocase_t c;
  memset(&c, 0, sizeof c);
  c.kind = OC_RS, c.P = 2, c.m = 32, c.k[0] = 6, c.k[1] = 7, c.n[0] = 5, c.rows[0] = -1;
  c.dtype = c.d_dtype = TPLA_FLOAT32, c.alpha = 1.0f, c.calls = 1, c.seed = 99;
  for (int id = 0; id < 4; id++) {
    refuse_t t;
    memset(&t, 0, sizeof t);
    t.case_id = id;
    oc_setup(&t.run, &c);
    ASSERT_EQ_INT(run_host_ranks(2, refuse_body, &t), 0);
    if (id == 0) { /* every rank names the disagreement */
      ASSERT_EQ_INT(t.first[0], TPLA_ERROR_REMOTE);
      ASSERT_EQ_INT(t.first[1], TPLA_ERROR_REMOTE);
    } else if (id == 1) { /* the rank with the bad value, and the other */
      ASSERT_EQ_INT(t.first[0], TPLA_ERROR_REMOTE);
      ASSERT_EQ_INT(t.first[1], TPLA_ERROR_INVALID_ARGUMENT);
    } else { /* the same verdict on both ranks; the group's plan still works */
      ASSERT_EQ_INT(t.first[0], TPLA_SUCCESS);
      ASSERT_EQ_INT(t.first[1], TPLA_SUCCESS);
      ASSERT_EQ_INT(t.second[0], TPLA_ERROR_INVALID_ARGUMENT);
      ASSERT_EQ_INT(t.second[1], TPLA_ERROR_INVALID_ARGUMENT);
      ASSERT_EQ_INT(t.after[0], TPLA_SUCCESS);
      ASSERT_EQ_INT(t.after[1], TPLA_SUCCESS);
      double rel = 0;
      ASSERT_LE(oc_check(&t.run, &rel), 1.0);
    }
    oc_free(&t.run);
  }
}

/* Plan destruction is not collective, so a group may be empty on one rank and not on
 * another when a new member joins. Case 0: an AG member called 3 times, destroyed by rank 0
 * before and by rank 1 after a GEMM+RS member joins; the new member's calls must be numbered
 * alike (rank 1 once kept counting from 3: TIMEOUT and wrong values). Case 1: a SERIAL member
 * left on rank 0 only, and an OVERLAP one joins: rank 0 refuses it, rank 1 hears so at once
 * (it once waited in the plan's exchanges). Case 2: a SENDRECV member with 4 chunks left on
 * rank 0 only, and a member with an automatic transport and 2 chunks joins: both ranks' new
 * buffers are SENDRECV with the larger flag count (rank 1 once made PEER buffers with fewer
 * flags: a double free at destruction, flags addressed past the peer's). st[3 + rank]: the
 * new member's transport. */
static int uneven_destroy_body(tpla_ctx_t ctx, int rank, int nranks, void *arg) {
  tpla_status_t *st = arg;
  enum { M = 8, K = 4, N = 4 };
  float a[M * K], b[K * N], d[M * N];
  for (int i = 0; i < M * K; i++)
    a[i] = 1.0f;
  for (int i = 0; i < K * N; i++)
    b[i] = 1.0f;
  tpla_matrix_t a_own = {a, M / 2, K, K, TPLA_FLOAT32}, bm = {b, K, N, N, TPLA_FLOAT32};
  tpla_ag_gemm_desc_t xd = TPLA_AG_GEMM_DESC_INIT;
  xd.local_rows = M / 2, xd.k = K, xd.n = N, xd.window_group = 1, xd.chunks = 2;
  tpla_ag_gemm_plan_t x = NULL;
  if (st[2] == 1)
    xd.mode = TPLA_OVERLAP_SERIAL;
  if (st[2] == 2)
    xd.transport = TPLA_TRANSPORT_SENDRECV, xd.chunks = 4;
  if (tpla_ag_gemm_plan_create(&x, ctx, &xd) != TPLA_SUCCESS)
    return 1;
  int bad = 0;
  for (int call = 0; call < 3 && st[2] == 0; call++)
    bad |= tpla_ag_gemm(x, (tpla_matrix_t){d, M, N, N, TPLA_FLOAT32}, a_own, bm, NULL, NULL) !=
           TPLA_SUCCESS;
  tpla_barrier(ctx, NULL);
  if (rank == (st[2] == 0 ? 0 : 1))
    tpla_ag_gemm_plan_destroy(x), x = NULL;
  tpla_gemm_rs_desc_t zd = TPLA_GEMM_RS_DESC_INIT;
  zd.m = M, zd.k = K, zd.n = N, zd.window_group = 1, zd.chunks = 2;
  tpla_gemm_rs_plan_t z = NULL;
  st[rank] = tpla_gemm_rs_plan_create(&z, ctx, &zd);
  tpla_overlap_info_t info = TPLA_OVERLAP_INFO_INIT;
  if (z != NULL && tpla_gemm_rs_plan_get_info(z, &info) == TPLA_SUCCESS)
    st[3 + rank] = (tpla_status_t)info.transport;
  if (st[2] == 1 && !strstr(tpla_last_error(), rank == 0 ? "holds SERIAL plans"
                                                         : "rank 0 could not join"))
    bad = 1, fprintf(stderr, "  rank %d: %s\n", rank, tpla_last_error());
  tpla_ag_gemm_plan_destroy(x);
  for (int call = 0; call < 2 && z != NULL; call++) {
    for (int i = 0; i < M * N; i++)
      d[i] = -1.0f;
    tpla_status_t s = tpla_gemm_rs(z, (tpla_matrix_t){d, M / 2, N, N, TPLA_FLOAT32},
                                   (tpla_matrix_t){a, M, K, K, TPLA_FLOAT32}, bm, NULL, NULL);
    for (int i = 0; i < M / 2 * N; i++)
      bad |= d[i] != (float)(K * nranks);
    if (s != TPLA_SUCCESS || bad)
      bad = 1, fprintf(stderr, "  rank %d call %d: %s %s\n", rank, call, tpla_status_string(s),
                       tpla_last_error());
  }
  tpla_barrier(ctx, NULL);
  tpla_gemm_rs_plan_destroy(z);
  return bad;
}

static void test_group_emptied_on_one_rank(void) {
  for (int id = 0; id < 3; id++) {
    tpla_status_t st[5] = {TPLA_ERROR_INTERNAL, TPLA_ERROR_INTERNAL, (tpla_status_t)id, -1, -1};
    ASSERT_EQ_INT(run_host_ranks(2, uneven_destroy_body, st), 0);
    ASSERT_EQ_INT(st[0], id != 1 ? TPLA_SUCCESS : TPLA_ERROR_INVALID_ARGUMENT);
    ASSERT_EQ_INT(st[1], id != 1 ? TPLA_SUCCESS : TPLA_ERROR_REMOTE);
    if (id == 2) { /* the holder's transport on both ranks */
      ASSERT_EQ_INT(st[3], TPLA_TRANSPORT_SENDRECV);
      ASSERT_EQ_INT(st[4], TPLA_TRANSPORT_SENDRECV);
    }
  }
}

/* A creation that fails after the group's buffers were grown for it (the last rank's
 * executor refuses the rehearsal's GEMMs): the member made before it keeps its buffers, its
 * bytes and its gathered view on every rank, and its calls still compute the right values
 * (the larger buffers once stayed, and the view was lost). */
static const tpla_backend_t *real_backend;
static tpla_status_t refusing_gemm(tpla_ctx_t ctx, const tpla_gemm_call_t *call, void *stream) {
  (void)ctx, (void)call, (void)stream;
  return tpla_fail(TPLA_ERROR_OUT_OF_MEMORY, "test", "refused");
}

static int failed_growth_body(tpla_ctx_t ctx, int rank, int nranks, void *arg) {
  (void)arg;
  enum { ROWS = 16, K = 4, N = 4, K_BIG = 64 };
  float a[ROWS * K_BIG], b[K_BIG * N], d[ROWS * 8 * N];
  for (int i = 0; i < ROWS * K_BIG; i++)
    a[i] = 1.0f;
  for (int i = 0; i < K_BIG * N; i++)
    b[i] = 1.0f;
  tpla_ag_gemm_desc_t small = TPLA_AG_GEMM_DESC_INIT, big;
  small.local_rows = ROWS, small.k = K, small.n = N, small.window_group = 1;
  big = small;
  big.k = K_BIG;
  tpla_ag_gemm_plan_t member = NULL, larger = (tpla_ag_gemm_plan_t)(uintptr_t)1;
  if (tpla_ag_gemm_plan_create(&member, ctx, &small) != TPLA_SUCCESS)
    return 1;
  tpla_matrix_t dm = {d, ROWS * nranks, N, N, TPLA_FLOAT32}, am = {a, ROWS, K, K, TPLA_FLOAT32};
  tpla_matrix_t bm = {b, K, N, N, TPLA_FLOAT32};
  int bad = tpla_ag_gemm(member, dm, am, bm, NULL, NULL) != TPLA_SUCCESS;
  size_t before = 0, after = 0;
  int held = 0, still = 0;
  tpla_ag_gemm_plan_workspace_bytes(member, &before);
  tpla_ag_gemm_plan_has_gathered(member, &held);
  tpla_backend_t refusing;
  if (rank == nranks - 1) {
    real_backend = ctx->backend;
    refusing = *real_backend;
    refusing.gemm = refusing_gemm;
    ctx->backend = &refusing;
  }
  tpla_status_t s = tpla_ag_gemm_plan_create(&larger, ctx, &big);
  if (rank == nranks - 1)
    ctx->backend = real_backend;
  tpla_ag_gemm_plan_workspace_bytes(member, &after);
  tpla_ag_gemm_plan_has_gathered(member, &still);
  if (s != (rank == nranks - 1 ? TPLA_ERROR_OUT_OF_MEMORY : TPLA_ERROR_REMOTE) ||
      larger != NULL || after != before || !held || !still)
    bad = 1, fprintf(stderr, "  rank %d: %s (%s); bytes %zu -> %zu; gathered view %d -> %d\n",
                     rank, tpla_status_string(s), tpla_last_error(), before, after, held, still);
  for (int i = 0; i < ROWS * nranks * N; i++)
    d[i] = -1.0f;
  bad |= tpla_ag_gemm(member, dm, am, bm, NULL, NULL) != TPLA_SUCCESS;
  for (int i = 0; i < ROWS * nranks * N; i++)
    bad |= d[i] != (float)K;
  tpla_barrier(ctx, NULL);
  tpla_ag_gemm_plan_destroy(member);
  return bad;
}

static void test_group_failed_growth_leaves_it_as_it_was(void) {
  ASSERT_EQ_INT(run_host_ranks(2, failed_growth_body, NULL), 0);
  ASSERT_EQ_INT(run_host_ranks(3, failed_growth_body, NULL), 0);
}

/* A member that needs more staging than the group holds, but no larger window and no more
 * flags: an AG member (window 8 x 32 floats, no staging), then a GEMM+RS member (n = 64:
 * a 4 x 64 receive slot in the window, a 4 x 64 send slot in the staging). The group's
 * buffers grow to the largest plan's size, so the member reports at least what it holds
 * alone, and both members compute the right values. */
static int staging_growth_body(tpla_ctx_t ctx, int rank, int nranks, void *arg) {
  size_t *ws = arg; /* [rank]: alone, [nranks + rank]: in the group */
  enum { ROWS = 4, K = 32, N = 4, RK = 4, RN = 64 };
  const int64_t m = ROWS * nranks;
  float a[ROWS * K], b[K * N], d[ROWS * 2 * N];
  float ra[ROWS * 2 * RK], rb[RK * RN], rd[ROWS * RN];
  for (int i = 0; i < ROWS * K; i++)
    a[i] = 1.0f;
  for (int i = 0; i < K * N; i++)
    b[i] = 1.0f;
  for (int i = 0; i < ROWS * 2 * RK; i++)
    ra[i] = 1.0f;
  for (int i = 0; i < RK * RN; i++)
    rb[i] = 1.0f;
  tpla_ag_gemm_desc_t xd = TPLA_AG_GEMM_DESC_INIT;
  xd.local_rows = ROWS, xd.k = K, xd.n = N, xd.window_group = 1, xd.chunks = 2;
  tpla_ag_gemm_plan_t x = NULL;
  if (nranks != 2 || tpla_ag_gemm_plan_create(&x, ctx, &xd) != TPLA_SUCCESS)
    return 1;
  tpla_gemm_rs_desc_t zd = TPLA_GEMM_RS_DESC_INIT;
  zd.m = m, zd.k = RK, zd.n = RN, zd.chunks = 2;
  tpla_gemm_rs_plan_t z = NULL;
  int bad = tpla_gemm_rs_plan_create(&z, ctx, &zd) != TPLA_SUCCESS; /* alone */
  bad |= tpla_gemm_rs_plan_workspace_bytes(z, &ws[rank]) != TPLA_SUCCESS;
  tpla_gemm_rs_plan_destroy(z);
  z = NULL;
  zd.window_group = 1;
  bad |= tpla_gemm_rs_plan_create(&z, ctx, &zd) != TPLA_SUCCESS;
  bad |= tpla_gemm_rs_plan_workspace_bytes(z, &ws[nranks + rank]) != TPLA_SUCCESS;
  /* the same verdict on both ranks: then neither calls (into a staging too small) */
  const bool small = ws[nranks + rank] < ws[rank];
  if (small)
    bad = 1, fprintf(stderr, "  rank %d: the group holds %zu bytes, GEMM+RS alone %zu\n", rank,
                     ws[nranks + rank], ws[rank]);
  for (int call = 0; call < 2 && z != NULL && !small; call++) {
    for (int i = 0; i < ROWS * RN; i++)
      rd[i] = -1.0f;
    tpla_status_t s = tpla_gemm_rs(z, (tpla_matrix_t){rd, ROWS, RN, RN, TPLA_FLOAT32},
                                   (tpla_matrix_t){ra, m, RK, RK, TPLA_FLOAT32},
                                   (tpla_matrix_t){rb, RK, RN, RN, TPLA_FLOAT32}, NULL, NULL);
    for (int i = 0; i < ROWS * RN; i++)
      bad |= rd[i] != (float)(RK * nranks);
    if (s != TPLA_SUCCESS || bad)
      bad = 1, fprintf(stderr, "  rank %d, GEMM+RS call %d: %s %s\n", rank, call,
                       tpla_status_string(s), tpla_last_error());
  }
  for (int i = 0; i < ROWS * 2 * N; i++)
    d[i] = -1.0f;
  tpla_status_t s = small ? TPLA_ERROR_INTERNAL
                          : tpla_ag_gemm(x, (tpla_matrix_t){d, m, N, N, TPLA_FLOAT32},
                                         (tpla_matrix_t){a, ROWS, K, K, TPLA_FLOAT32},
                                         (tpla_matrix_t){b, K, N, N, TPLA_FLOAT32}, NULL, NULL);
  int wrong = 0;
  for (int i = 0; i < ROWS * 2 * N; i++)
    wrong |= d[i] != (float)K;
  if (s != TPLA_SUCCESS || wrong)
    bad = 1, fprintf(stderr, "  rank %d, AG after GEMM+RS: %s %s\n", rank,
                     tpla_status_string(s), tpla_last_error());
  tpla_barrier(ctx, NULL);
  tpla_gemm_rs_plan_destroy(z);
  tpla_ag_gemm_plan_destroy(x);
  return bad;
}

static void test_group_grows_for_staging(void) {
  size_t ws[4] = {0, 0, 0, 0};
  ASSERT_EQ_INT(run_host_ranks(2, staging_growth_body, ws), 0);
  for (int r = 0; r < 2; r++) {
    printf("  rank %d: GEMM+RS alone %zu bytes, in the group %zu\n", r, ws[r], ws[2 + r]);
    ASSERT_LE((double)ws[r], (double)ws[2 + r]);
  }
}

/* A caller built before window_group passes a smaller descriptor: accepted, no group. */
static int old_size_body(tpla_ctx_t ctx, int rank, int nranks, void *arg) {
  tpla_status_t *st = arg;
  tpla_gemm_ar_desc_t d = TPLA_GEMM_AR_DESC_INIT;
  d.size = offsetof(tpla_gemm_ar_desc_t, window_group);
  d.window_group = -5; /* beyond the caller's struct: never read */
  d.m = 8, d.k = 2 + rank, d.n = 4;
  tpla_gemm_ar_plan_t p = NULL;
  st[rank] = tpla_gemm_ar_plan_create(&p, ctx, &d);
  d.size = sizeof d + 4;
  tpla_gemm_ar_plan_t q = NULL;
  st[nranks + rank] = tpla_gemm_ar_plan_create(&q, ctx, &d);
  tpla_gemm_ar_plan_destroy(p);
  tpla_gemm_ar_plan_destroy(q);
  return 0;
}

static void test_descriptor_sizes(void) {
  tpla_status_t st[4] = {TPLA_ERROR_INTERNAL, TPLA_ERROR_INTERNAL, 0, 0};
  ASSERT_EQ_INT(run_host_ranks(2, old_size_body, st), 0);
  ASSERT_EQ_INT(st[0], TPLA_SUCCESS);
  ASSERT_EQ_INT(st[1], TPLA_SUCCESS);
  ASSERT_EQ_INT(st[2], TPLA_ERROR_INVALID_ARGUMENT);
  ASSERT_EQ_INT(st[3], TPLA_ERROR_INVALID_ARGUMENT);
}

int main(void) {
  TEST(test_group_one_rank);
  TEST(test_group_two_ranks_peer);
  TEST(test_group_three_ranks_peer);
  TEST(test_group_two_ranks_sendrecv);
  TEST(test_group_member_destroyed_early);
  TEST(test_group_refusals);
  TEST(test_group_emptied_on_one_rank);
  TEST(test_group_grows_for_staging);
  TEST(test_group_failed_growth_leaves_it_as_it_was);
  TEST(test_descriptor_sizes);
  return test_summary();
}
