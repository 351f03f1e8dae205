/*
 * test_host_shared_group.c - the cross-process host group
 * (tpla_host_group_create_shared) computing correctly: fork()ed processes as ranks.
 *   - every collective against a reference computed with the same fp32
 *     arithmetic (so results must match bit for bit), across staging-chunk
 *     boundaries (a 4 KiB staging area) and with the default one;
 *   - Newton-Schulz plans (single and batched) and the overlap plans (which
 *     run SENDRECV here) give the thread group's bits;
 *   - nothing is left in /dev/shm after any of it (run_procs checks).
 * Failures, timeouts and creation errors: test_host_shared_failures.c.
 * Run: ./test_host_shared_group
 */
#include "test.h"

#include "internal.h"
#include "ranks.h"
#include "test_ns_common.h" /* ns_run_t, ns_rank_body, split, random_matrix */
#include "host_shared_util.h"

#include <stdlib.h>
#include <string.h>


/* ---- collectives ----------------------------------------------------------------- */

/* Element i of rank r's data, rounded to dtype, as the library reads it. */
static double value(int r, size_t i, tpla_dtype_t dtype) {
  uint16_t h;
  float f = (float)((double)((i * 7919u + (size_t)r * 104729u) % 2001u) / 1000.0 - 1.0) *
            (1.0f + 0.25f * (float)r);
  switch (dtype) {
  case TPLA_BFLOAT16: h = tpla_float_to_bf16(f); return tpla_bf16_to_float(h);
  case TPLA_FLOAT16: h = tpla_float_to_half(f); return tpla_half_to_float(h);
  case TPLA_FLOAT64: return (double)f * (1.0 + 1e-12 * (double)i);
  default: return f;
  }
}

static void fill(void *buf, size_t n, int r, size_t first, tpla_dtype_t dtype) {
  for (size_t i = 0; i < n; i++)
    tpla_store_elem(buf, dtype, i, value(r, first + i, dtype));
}

/* The sum over ranks 0..n-1 of element i, with the library's arithmetic:
 * fp32 (fp64 for fp64) in rank order, one rounding to dtype. */
static double ref_sum(int nranks, size_t i, tpla_dtype_t dtype) {
  if (dtype == TPLA_FLOAT64) {
    double s = 0.0;
    for (int r = 0; r < nranks; r++)
      s += value(r, i, dtype);
    return s;
  }
  float s = 0.0f;
  for (int r = 0; r < nranks; r++)
    s = r == 0 ? (float)value(r, i, dtype) : s + (float)value(r, i, dtype);
  double out;
  tpla_store_elem(&out, dtype, 0, s);
  return tpla_load_elem(&out, dtype, 0);
}

static int check_allreduce(tpla_ctx_t ctx, int rank, int nranks, tpla_dtype_t dtype, size_t n,
                           bool in_place) {
  size_t es = tpla_dtype_size(dtype);
  char *send = malloc(n * es), *recv = in_place ? send : malloc(n * es);
  RCHECK(send && recv, "out of memory");
  fill(send, n, rank, 0, dtype);
  RCHECK_OK(tpla_allreduce(ctx, recv, send, n, dtype, NULL));
  for (size_t i = 0; i < n; i++) {
    double got = tpla_load_elem(recv, dtype, i), want = ref_sum(nranks, i, dtype);
    RCHECK(got == want, "%s allreduce element %zu: %.9g != %.9g", tpla_dtype_name(dtype), i,
           got, want);
  }
  if (!in_place)
    free(recv);
  free(send);
  return 0;
}

static int body_collectives(tpla_ctx_t ctx, int rank, int nranks, void *arg) {
  if (check_allreduce(ctx, rank, nranks, TPLA_FLOAT32, 2500, false) ||
      check_allreduce(ctx, rank, nranks, TPLA_BFLOAT16, 5000, true) ||
      check_allreduce(ctx, rank, nranks, TPLA_FLOAT16, 333, false) ||
      check_allreduce(ctx, rank, nranks, TPLA_FLOAT64, 700, false))
    return 1;
  /* allgatherv, uneven counts with an empty rank, in place and not */
  size_t counts[MAX_PROCS], total = 0, at = 0;
  for (int r = 0; r < nranks; r++) {
    counts[r] = r == 1 ? 0 : 1500 + 600 * (size_t)r;
    total += counts[r];
  }
  for (int r = 0; r < rank; r++)
    at += counts[r];
  float *all = malloc(total * sizeof(float)), *mine = malloc((counts[rank] + 1) * sizeof(float));
  RCHECK(all && mine, "out of memory");
  for (int pass = 0; pass < 2; pass++) {
    float *send = pass == 0 ? mine : all + at;
    for (size_t i = 0; i < total; i++)
      all[i] = -7.0f;
    fill(send, counts[rank], rank, 0, TPLA_FLOAT32);
    RCHECK_OK(tpla_allgatherv(ctx, all, send, counts, TPLA_FLOAT32, NULL));
    size_t k = 0;
    for (int r = 0; r < nranks; r++)
      for (size_t i = 0; i < counts[r]; i++, k++)
        RCHECK(all[k] == (float)value(r, i, TPLA_FLOAT32), "allgatherv pass %d rank %d elem %zu",
               pass, r, i);
  }
  /* reduce_scatterv with recv at its own block of send */
  for (int r = 0; r < nranks; r++)
    counts[r] = r == nranks - 1 ? 0 : 700 + 600 * (size_t)r;
  total = 0;
  at = 0;
  for (int r = 0; r < nranks; r++)
    total += counts[r];
  for (int r = 0; r < rank; r++)
    at += counts[r];
  float *big = realloc(all, (total + 1) * sizeof(float));
  RCHECK(big, "out of memory");
  all = big;
  fill(all, total, rank, 0, TPLA_FLOAT32);
  RCHECK_OK(tpla_reduce_scatterv(ctx, all + at, all, counts, TPLA_FLOAT32, NULL));
  for (size_t i = 0; i < counts[rank]; i++)
    RCHECK(all[at + i] == (float)ref_sum(nranks, at + i, TPLA_FLOAT32), "reduce_scatterv %zu", i);
  /* broadcast from the last rank */
  fill(all, 3000 < total ? 3000 : total, rank, 0, TPLA_FLOAT32);
  size_t nb = 3000 < total ? 3000 : total;
  RCHECK_OK(tpla_broadcast(ctx, all, nb, TPLA_FLOAT32, nranks - 1, NULL));
  for (size_t i = 0; i < nb; i++)
    RCHECK(all[i] == (float)value(nranks - 1, i, TPLA_FLOAT32), "broadcast %zu", i);
  free(all);
  free(mine);
  /* ring shift of uneven sizes, then an empty one */
  int next = (rank + 1) % nranks, prev = (rank + nranks - 1) % nranks;
  size_t ns = 2000 + 300 * (size_t)rank, nr = 2000 + 300 * (size_t)prev;
  double *s = malloc(ns * sizeof(double)), *rv = malloc(nr * sizeof(double));
  RCHECK(s && rv, "out of memory");
  fill(s, ns, rank, 0, TPLA_FLOAT64);
  RCHECK_OK(tpla_sendrecv(ctx, s, ns, next, rv, nr, prev, TPLA_FLOAT64, NULL));
  for (size_t i = 0; i < nr; i++)
    RCHECK(rv[i] == value(prev, i, TPLA_FLOAT64), "sendrecv element %zu from %d", i, prev);
  RCHECK_OK(tpla_sendrecv(ctx, s, 0, next, rv, 0, prev, TPLA_FLOAT64, NULL));
  free(s);
  free(rv);
  /* the internal all-to-all (Newton-Schulz batches use it) */
  size_t sc[MAX_PROCS], sd[MAX_PROCS], rc[MAX_PROCS], rd[MAX_PROCS], st = 0, rt = 0;
  for (int q = 0; q < nranks; q++) {
    sc[q] = (size_t)((rank + 1) * (q + 2) * 150 % 1100);
    rc[q] = (size_t)((q + 1) * (rank + 2) * 150 % 1100);
    sd[q] = st;
    rd[q] = rt;
    st += sc[q];
    rt += rc[q];
  }
  float *sb = malloc(st * sizeof(float) + 4), *rb = malloc(rt * sizeof(float) + 4);
  RCHECK(sb && rb, "out of memory");
  for (int q = 0; q < nranks; q++)
    fill(sb + sd[q], sc[q], rank * 16 + q, 0, TPLA_FLOAT32);
  RCHECK_OK(ctx->backend->alltoallv(ctx, rb, rc, rd, sb, sc, sd, TPLA_FLOAT32, NULL));
  for (int q = 0; q < nranks; q++)
    for (size_t i = 0; i < rc[q]; i++)
      RCHECK(rb[rd[q] + i] == (float)value(q * 16 + rank, i, TPLA_FLOAT32),
             "alltoallv from %d element %zu", q, i);
  free(sb);
  free(rb);
  RCHECK_OK(tpla_barrier(ctx, NULL));
  return 0;
}

static void test_collectives_small_staging(void) {
  proc_opts_t o = {0, 4096};
  ASSERT_EQ_INT(run_procs(2, body_collectives, NULL, &o), 0);
  ASSERT_EQ_INT(run_procs(3, body_collectives, NULL, &o), 0);
}

/* A timeout that means "never": deadlines are now + timeout, which must not
 * overflow (UBSan in CI; the CUDA executor's NCCL polls once timed out at
 * once with it). */
static void test_longest_timeout(void) {
  proc_opts_t o = {INT64_MAX, 4096};
  ASSERT_EQ_INT(run_procs(2, body_collectives, NULL, &o), 0);
}

static int body_big_allreduce(tpla_ctx_t ctx, int rank, int nranks, void *arg) {
  return check_allreduce(ctx, rank, nranks, TPLA_FLOAT32, 700000, false); /* 2.7 MiB */
}

static void test_collectives_default_staging(void) {
  ASSERT_EQ_INT(run_procs(3, body_big_allreduce, NULL, NULL), 0);
  ASSERT_EQ_INT(run_procs(1, body_collectives, NULL, NULL), 0);
}

/* ---- Newton-Schulz: the same bits as on a thread group ---------------------------- */

static void test_ns_matches_thread_group(void) {
  const int64_t m = 45, n = 32;
  double *x = random_matrix(m, n, TPLA_FLOAT32, fresh_seed("ns_matches_thread_group"));
  ns_run_t *run = shared_alloc(sizeof *run);
  double *out_proc = shared_alloc(sizeof(double) * (size_t)(m * n));
  double *out_thread = malloc(sizeof(double) * (size_t)(m * n));
  ASSERT_TRUE(x && run && out_proc && out_thread);
  tpla_ns_desc_t d = TPLA_NS_DESC_INIT;
  for (int shard = 0; shard < 2; shard++) {
    *run = (ns_run_t){.P = 3, .desc = d, .m = m, .n = n, .x = x};
    run->desc.shard = shard ? TPLA_SHARD_COLS : TPLA_SHARD_ROWS;
    split(shard ? n : m, 3, true, run->sizes);
    run->out = out_thread;
    ASSERT_EQ_INT(ns_run(run), 0);
    tpla_ns_algorithm_t algo = run->algo[0];
    run->out = out_proc;
    ASSERT_EQ_INT(run_procs(3, ns_rank_body, run, NULL), 0);
    ASSERT_EQ_INT(run->algo[0], algo);
    ASSERT_TRUE(memcmp(out_proc, out_thread, sizeof(double) * (size_t)(m * n)) == 0);
  }
  munmap(run, sizeof *run);
  munmap(out_proc, sizeof(double) * (size_t)(m * n));
  free(out_thread);
  free(x);
}

/* A plan whose choice counted on pulls (two ranks, forced GRAM_SHARDED: its
 * split Gram iteration only with pulled products) on a group whose
 * transport cannot map the peers (processes: SENDRECV) is prepared again
 * without them: the X iteration, the bits of a thread group's NCCL sums. */
static void test_ns_pulls_unavailable(void) {
  const int64_t m = 240, n = 40;
  double *x = random_matrix(m, n, TPLA_FLOAT32, fresh_seed("ns_pulls_unavailable"));
  ns_run_t *run = shared_alloc(sizeof *run);
  double *out_proc = shared_alloc(sizeof(double) * (size_t)(m * n));
  double *out_thread = malloc(sizeof(double) * (size_t)(m * n));
  ASSERT_TRUE(x && run && out_proc && out_thread);
  *run = (ns_run_t){.P = 2, .desc = TPLA_NS_DESC_INIT, .m = m, .n = n, .x = x};
  run->desc.algorithm = TPLA_NS_ALGO_GRAM_SHARDED;
  split(m, 2, false, run->sizes);
  run->out = out_thread;
  ASSERT_EQ_INT(ns_run(run), 0); /* threads: pulled, the Gram iteration */
  ASSERT_EQ_INT(run->iter[0], TPLA_NS_ITERATE_GRAM);
  const char *env = getenv("TPLA_NS_GRAM_SUM"); /* restored below */
  char *was = env != NULL ? strdup(env) : NULL;
  setenv("TPLA_NS_GRAM_SUM", "nccl", 1);
  int failed = ns_run(run);
  unsetenv("TPLA_NS_GRAM_SUM");
  ASSERT_EQ_INT(failed, 0);
  ASSERT_EQ_INT(run->iter[0], TPLA_NS_ITERATE_X);
  run->out = out_proc;
  failed = run_procs(2, ns_rank_body, run, NULL);
  if (was != NULL)
    setenv("TPLA_NS_GRAM_SUM", was, 1);
  free(was);
  ASSERT_EQ_INT(failed, 0);
  ASSERT_TRUE(run->iter[0] == TPLA_NS_ITERATE_X && run->iter[1] == TPLA_NS_ITERATE_X);
  ASSERT_TRUE(run->algo[0] == TPLA_NS_ALGO_GRAM_SHARDED);
  ASSERT_TRUE(memcmp(out_proc, out_thread, sizeof(double) * (size_t)(m * n)) == 0);
  munmap(run, sizeof *run);
  munmap(out_proc, sizeof(double) * (size_t)(m * n));
  free(out_thread);
  free(x);
}

/* A batch of three shapes, rows sharded unevenly; results to `out`
 * (3 matrices of up to 40 x 40 doubles each). */
typedef struct {
  double *out;
  int owners[3];
} batch_run_t;

static const int64_t batch_shapes[3][2] = {{40, 24}, {16, 40}, {33, 33}};

static int body_batch(tpla_ctx_t ctx, int rank, int nranks, void *arg) {
  batch_run_t *b = arg;
  tpla_ns_desc_t descs[3];
  tpla_matrix_t xs[3];
  float *bufs[3];
  int64_t offs[3];
  for (int k = 0; k < 3; k++) {
    int64_t sizes[MAX_PROCS], m = batch_shapes[k][0], n = batch_shapes[k][1];
    split(m, nranks, k == 1, sizes);
    offs[k] = 0;
    for (int r = 0; r < rank; r++)
      offs[k] += sizes[r];
    descs[k] = (tpla_ns_desc_t)TPLA_NS_DESC_INIT;
    descs[k].local_rows = sizes[rank];
    descs[k].local_cols = n;
    descs[k].preset = k == 2 ? TPLA_NS_POLAR_EXPRESS : TPLA_NS_MUON;
    bufs[k] = malloc(sizeof(float) * (size_t)(m * n));
    RCHECK(bufs[k] != NULL, "out of memory");
    for (int64_t i = 0; i < sizes[rank]; i++)
      for (int64_t j = 0; j < n; j++)
        bufs[k][i * n + j] = (float)value(k, (size_t)((offs[k] + i) * n + j), TPLA_FLOAT32);
    xs[k] = (tpla_matrix_t){sizes[rank] ? bufs[k] : NULL, sizes[rank], n, n, TPLA_FLOAT32};
  }
  tpla_ns_batch_plan_t plan = NULL;
  RCHECK_OK(tpla_ns_batch_plan_create(&plan, ctx, 3, descs));
  for (int k = 0, owner; k < 3; k++) { /* rank 0 reports (the ranks agree by design) */
    RCHECK_OK(tpla_ns_batch_plan_owner(plan, k, &owner));
    if (rank == 0)
      b->owners[k] = owner;
  }
  RCHECK_OK(tpla_ns_batch_execute(plan, xs, NULL));
  tpla_ns_batch_plan_destroy(plan);
  for (int k = 0; k < 3; k++) {
    for (int64_t i = 0; i < xs[k].rows; i++)
      for (int64_t j = 0; j < xs[k].cols; j++)
        b->out[k * 1600 + (offs[k] + i) * xs[k].cols + j] = bufs[k][i * xs[k].cols + j];
    free(bufs[k]);
  }
  return 0;
}

static void test_ns_batch_matches_thread_group(void) {
  size_t bytes = sizeof(double) * 3 * 1600;
  batch_run_t *proc = shared_alloc(sizeof *proc), thread = {calloc(1, bytes), {0}};
  ASSERT_TRUE(proc && thread.out);
  proc->out = shared_alloc(bytes);
  ASSERT_TRUE(proc->out != NULL);
  memset(proc->out, 0, bytes);
  ASSERT_EQ_INT(run_host_ranks(3, body_batch, &thread), 0);
  ASSERT_EQ_INT(run_procs(3, body_batch, proc, NULL), 0);
  for (int k = 0; k < 3; k++)
    ASSERT_EQ_INT(proc->owners[k], thread.owners[k]);
  ASSERT_TRUE(memcmp(proc->out, thread.out, bytes) == 0);
  bool any_owned = thread.owners[0] >= 0 || thread.owners[1] >= 0 || thread.owners[2] >= 0;
  if (!any_owned)
    printf("  note: the cost model ran every matrix distributed\n");
  munmap(proc->out, bytes);
  munmap(proc, sizeof *proc);
  free(thread.out);
}

/* ---- overlap plans: SENDRECV through the segment, the thread group's bits ---------- */

#define OV_K 12
#define OV_N 7
#define OV_M 20

/* Results of one run: AG output (every rank's m x n), RS slices, AR output,
 * the gathered A; plus the transports the plans chose. */
typedef struct {
  float ag[3][40 * OV_N], gathered[3][40 * OV_K], rs[OV_M * OV_N], ar[3][OV_M * OV_N];
  int ag_transport, rs_transport, force_sendrecv;
} ov_out_t;

static int body_overlap(tpla_ctx_t ctx, int rank, int nranks, void *arg) {
  ov_out_t *out = arg;
  int64_t rows = 5 + 2 * rank, m_ag = 0, off = 0;
  for (int r = 0; r < nranks; r++) {
    m_ag += 5 + 2 * r;
    off += r < rank ? 5 + 2 * r : 0;
  }
  float a[12 * OV_K], b[OV_N * 16], bias[OV_N], rsa[OV_M * 16];
  fill(a, (size_t)(rows * OV_K), rank, 0, TPLA_FLOAT32);
  fill(b, OV_N * 16, 99, 0, TPLA_FLOAT32);
  fill(bias, OV_N, 7, 0, TPLA_FLOAT32);
  fill(rsa, (size_t)OV_M * 16, 40 + rank, 0, TPLA_FLOAT32);
  tpla_overlap_info_t info = TPLA_OVERLAP_INFO_INIT;
  /* AllGather+GEMM, B transposed, with bias; then the gathered view */
  tpla_ag_gemm_desc_t ad = TPLA_AG_GEMM_DESC_INIT;
  ad.local_rows = rows, ad.k = OV_K, ad.n = OV_N, ad.op_b = TPLA_OP_T, ad.bias = 1;
  ad.transport = out->force_sendrecv ? TPLA_TRANSPORT_SENDRECV : TPLA_TRANSPORT_AUTO;
  tpla_ag_gemm_plan_t ag = NULL;
  RCHECK_OK(tpla_ag_gemm_plan_create(&ag, ctx, &ad));
  RCHECK_OK(tpla_ag_gemm_plan_get_info(ag, &info));
  if (rank == 0) /* every rank's plan has the same transport */
    out->ag_transport = info.transport;
  tpla_overlap_args_t args = TPLA_OVERLAP_ARGS_INIT;
  args.bias = bias;
  tpla_matrix_t d = {out->ag[rank], m_ag, OV_N, OV_N, TPLA_FLOAT32}, g;
  RCHECK_OK(tpla_ag_gemm(ag, d, (tpla_matrix_t){a, rows, OV_K, OV_K, TPLA_FLOAT32},
                         (tpla_matrix_t){b, OV_N, OV_K, OV_K, TPLA_FLOAT32}, &args, NULL));
  RCHECK_OK(tpla_ag_gemm_gathered(ag, &g));
  RCHECK(g.rows == m_ag && g.cols == OV_K, "gathered view %lld x %lld", (long long)g.rows,
         (long long)g.cols);
  memcpy(out->gathered[rank], g.data, sizeof(float) * (size_t)(m_ag * OV_K));
  tpla_ag_gemm_plan_destroy(ag);
  /* GEMM+ReduceScatter (even slices) and GEMM+AllReduce, this rank's k */
  int64_t k = 6 + rank, lr = OV_M / nranks + (rank < OV_M % nranks), ro = 0;
  for (int r = 0; r < rank; r++)
    ro += OV_M / nranks + (r < OV_M % nranks);
  tpla_gemm_rs_desc_t rd = TPLA_GEMM_RS_DESC_INIT;
  rd.m = OV_M, rd.k = k, rd.n = OV_N, rd.transport = ad.transport;
  tpla_gemm_rs_plan_t rs = NULL;
  RCHECK_OK(tpla_gemm_rs_plan_create(&rs, ctx, &rd));
  RCHECK_OK(tpla_gemm_rs_plan_get_info(rs, &info));
  if (rank == 0)
    out->rs_transport = info.transport;
  tpla_matrix_t am = {rsa, OV_M, k, 16, TPLA_FLOAT32}, bm = {b, k, OV_N, OV_N, TPLA_FLOAT32};
  RCHECK_OK(tpla_gemm_rs(rs, (tpla_matrix_t){out->rs + ro * OV_N, lr, OV_N, OV_N, TPLA_FLOAT32},
                         am, bm, NULL, NULL));
  tpla_gemm_rs_plan_destroy(rs);
  tpla_gemm_ar_desc_t ard = TPLA_GEMM_AR_DESC_INIT;
  ard.m = OV_M, ard.k = k, ard.n = OV_N, ard.transport = ad.transport;
  tpla_gemm_ar_plan_t ar = NULL;
  RCHECK_OK(tpla_gemm_ar_plan_create(&ar, ctx, &ard));
  RCHECK_OK(tpla_gemm_ar(ar, (tpla_matrix_t){out->ar[rank], OV_M, OV_N, OV_N, TPLA_FLOAT32}, am,
                         bm, NULL, NULL));
  tpla_gemm_ar_plan_destroy(ar);
  /* PEER cannot work across processes: NOT_SUPPORTED on every rank */
  if (!out->force_sendrecv) {
    ad.transport = TPLA_TRANSPORT_PEER;
    RCHECK_STATUS(tpla_ag_gemm_plan_create(&ag, ctx, &ad), TPLA_ERROR_NOT_SUPPORTED);
    RCHECK(strstr(tpla_last_error(), "cross-process") != NULL, "%s", tpla_last_error());
    RCHECK_OK(tpla_barrier(ctx, NULL));
  }
  return 0;
}

static void test_overlap_plans_match_thread_group(void) {
  ov_out_t *proc = shared_alloc(sizeof *proc), *thread = calloc(1, sizeof *thread);
  ASSERT_TRUE(proc && thread);
  memset(proc, 0, sizeof *proc);
  thread->force_sendrecv = 1; /* threads: force SENDRECV, the schedule the processes run */
  ASSERT_EQ_INT(run_host_ranks(3, body_overlap, thread), 0);
  ASSERT_EQ_INT(run_procs(3, body_overlap, proc, NULL), 0);
  ASSERT_EQ_INT(proc->ag_transport, TPLA_TRANSPORT_SENDRECV);
  ASSERT_EQ_INT(proc->rs_transport, TPLA_TRANSPORT_SENDRECV);
  ASSERT_TRUE(memcmp(proc->ag, thread->ag, sizeof proc->ag) == 0);
  ASSERT_TRUE(memcmp(proc->gathered, thread->gathered, sizeof proc->gathered) == 0);
  ASSERT_TRUE(memcmp(proc->rs, thread->rs, sizeof proc->rs) == 0);
  ASSERT_TRUE(memcmp(proc->ar, thread->ar, sizeof proc->ar) == 0);
  /* and the gathered A is every rank's A in rank order */
  size_t at = 0;
  for (int r = 0; r < 3; r++)
    for (size_t i = 0; i < (size_t)(5 + 2 * r) * OV_K; i++, at++)
      ASSERT_TRUE(proc->gathered[1][at] == (float)value(r, i, TPLA_FLOAT32));
  munmap(proc, sizeof *proc);
  free(thread);
}

int main(void) {
  TEST(test_collectives_small_staging);
  TEST(test_collectives_default_staging);
  TEST(test_longest_timeout);
  TEST(test_ns_matches_thread_group);
  TEST(test_ns_pulls_unavailable);
  TEST(test_ns_batch_matches_thread_group);
  TEST(test_overlap_plans_match_thread_group);
  return test_summary();
}
