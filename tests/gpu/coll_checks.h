/*
 * coll_checks.h - per-rank checks of the CUDA executor's collectives and
 * GEMM, shared by the thread-per-GPU test and the MPI test. Values are
 * quarter-integers in [-2, 2], exact in fp16/bf16/fp32, so every sum and
 * the GEMM's products are exact and results are compared exactly with a
 * host reference. A check never returns early past a collective, so a
 * failing rank still meets the others in every later collective.
 *
 * Header-only (static functions); include after gpu_util.h.
 */
#ifndef TPLA_COLL_CHECKS_H
#define TPLA_COLL_CHECKS_H

#include "gpu_util.h"

#define COLL_MAX_RANKS 8
#define COLL_TIMEOUT_S 60

/* Quarter-integers in [-2, 2]: exact in fp16/bf16/fp32, and so are sums of
 * a few of them. */
static double value(int rank, size_t i, int salt) {
  return (double)((int)((rank * 7 + i * 3 + (size_t)salt * 5) % 17) - 8) * 0.25;
}

static void *upload(const double *vals, size_t n, tpla_dtype_t dt) {
  size_t es = tpla_dtype_size(dt);
  void *host = malloc((n + 1) * es), *dev = NULL;
  if (host == NULL)
    return NULL;
  pack(host, dt, vals, n);
  if (CUDA_FAILED(cudaMalloc(&dev, (n + 1) * es)) ||
      CUDA_FAILED(gpu_upload(dev, host, n * es))) {
    cudaFree(dev);
    dev = NULL;
  }
  free(host);
  return dev;
}

/* n elements of -7, a value no check expects: an output that starts as it
 * (never as the expected answer) shows a call that wrote nothing. */
static void *upload_poison(size_t n, tpla_dtype_t dt) {
  double *vals = malloc((n + 1) * sizeof(double));
  if (vals == NULL)
    return NULL;
  for (size_t i = 0; i <= n; i++)
    vals[i] = -7.0;
  void *dev = upload(vals, n, dt);
  free(vals);
  return dev;
}

/* Counts elements of dev[0..n) that differ from want (exactly). */
static int expect(const void *dev, size_t n, tpla_dtype_t dt, const double *want, int rank,
                  const char *what) {
  size_t es = tpla_dtype_size(dt);
  void *host = malloc((n + 1) * es);
  double *got = malloc((n + 1) * sizeof(double));
  int bad = 0;
  if (!host || !got || CUDA_FAILED(cudaMemcpy(host, dev, n * es, cudaMemcpyDeviceToHost))) {
    bad = 1;
  } else {
    unpack(got, host, dt, n);
    for (size_t i = 0; i < n; i++)
      if (got[i] != want[i] && bad++ < 3)
        fprintf(stderr, "  rank %d: %s [%zu] = %g, want %g\n", rank, what, i, got[i], want[i]);
  }
  if (bad)
    fprintf(stderr, "  rank %d: %s: %d wrong of %zu\n", rank, what, bad, n);
  free(host);
  free(got);
  return bad != 0;
}

/* ---- the collectives, per rank ----------------------------------------------- */

typedef struct {
  tpla_ctx_t ctx;
  cudaStream_t stream;
  int rank, nranks;
} rank_env_t;

static int sync_env(rank_env_t *e, const char *what) {
  return sync_stream_timeout(e->stream, COLL_TIMEOUT_S, what);
}

static int check_allreduce(rank_env_t *e, tpla_dtype_t dt, size_t count, int in_place) {
  int failures = 0;
  double *mine = malloc(count * sizeof(double)), *want = malloc(count * sizeof(double));
  for (size_t i = 0; i < count; i++) {
    mine[i] = value(e->rank, i, 1);
    want[i] = 0;
    for (int q = 0; q < e->nranks; q++)
      want[i] += value(q, i, 1);
  }
  void *send = upload(mine, count, dt), *recv = in_place ? send : upload_poison(count, dt);
  CHECK(&failures, send && recv, "upload");
  if (send && recv) {
    failures += TPLA_FAILED(tpla_allreduce(e->ctx, recv, send, count, dt, e->stream));
    failures += sync_env(e, "allreduce");
    failures +=
        expect(recv, count, dt, want, e->rank, in_place ? "allreduce in place" : "allreduce");
  }
  if (recv != send)
    cudaFree(recv);
  cudaFree(send);
  free(mine);
  free(want);
  return failures;
}

/* counts[q] for a pattern: 0 even, 1 uneven, 2 uneven with rank 0 empty. */
static void make_counts(size_t *counts, int nranks, int pattern) {
  for (int q = 0; q < nranks; q++)
    counts[q] = pattern == 0 ? 300 : pattern == 1 ? 101 + 37 * (size_t)q
                                   : (q == 0 ? 0 : 64 * (size_t)q + 3);
}

static int check_allgatherv(rank_env_t *e, tpla_dtype_t dt, int pattern, int in_place) {
  int failures = 0;
  size_t counts[COLL_MAX_RANKS], total = 0, mine_off = 0;
  make_counts(counts, e->nranks, pattern);
  for (int q = 0; q < e->nranks; q++) {
    if (q < e->rank)
      mine_off += counts[q];
    total += counts[q];
  }
  if (total == 0)
    return 0;
  double *want = malloc(total * sizeof(double));
  size_t o = 0;
  for (int q = 0; q < e->nranks; q++)
    for (size_t i = 0; i < counts[q]; i++)
      want[o++] = value(q, i, 2);
  /* in place: our block already sits at its offset of recv */
  double *init = malloc(total * sizeof(double));
  for (size_t i = 0; i < total; i++)
    init[i] = in_place && i >= mine_off && i < mine_off + counts[e->rank] ? want[i] : -7.0;
  void *recv = upload(init, total, dt);
  void *send = in_place ? (recv ? (char *)recv + mine_off * tpla_dtype_size(dt) : NULL)
                        : upload(want + mine_off, counts[e->rank], dt);
  CHECK(&failures, recv && (send || counts[e->rank] == 0), "upload");
  if (recv) {
    char what[96];
    snprintf(what, sizeof what, "allgatherv %s pattern %d%s", tpla_dtype_name(dt), pattern,
             in_place ? " in place" : "");
    failures += TPLA_FAILED(tpla_allgatherv(e->ctx, recv, send, counts, dt, e->stream));
    failures += sync_env(e, what);
    failures += expect(recv, total, dt, want, e->rank, what);
  }
  if (!in_place)
    cudaFree(send);
  cudaFree(recv);
  free(want);
  free(init);
  return failures;
}

static int check_reduce_scatterv(rank_env_t *e, tpla_dtype_t dt, int pattern, int in_place) {
  int failures = 0;
  size_t counts[COLL_MAX_RANKS], total = 0, mine_off = 0;
  make_counts(counts, e->nranks, pattern);
  for (int q = 0; q < e->nranks; q++) {
    if (q < e->rank)
      mine_off += counts[q];
    total += counts[q];
  }
  if (total == 0)
    return 0;
  size_t mine = counts[e->rank];
  double *send_vals = malloc((total + 1) * sizeof(double));
  double *want = malloc((mine + 1) * sizeof(double));
  for (size_t i = 0; i < total; i++)
    send_vals[i] = value(e->rank, i, 3);
  for (size_t i = 0; i < mine; i++) {
    want[i] = 0;
    for (int q = 0; q < e->nranks; q++)
      want[i] += value(q, mine_off + i, 3);
  }
  void *send = upload(send_vals, total, dt);
  void *recv = in_place ? (send ? (char *)send + mine_off * tpla_dtype_size(dt) : NULL)
                        : upload_poison(mine + 1, dt);
  CHECK(&failures, send && recv, "upload");
  if (send && recv) {
    char what[96];
    snprintf(what, sizeof what, "reduce_scatterv %s pattern %d%s", tpla_dtype_name(dt), pattern,
             in_place ? " in place" : "");
    failures += TPLA_FAILED(tpla_reduce_scatterv(e->ctx, recv, send, counts, dt, e->stream));
    failures += sync_env(e, what);
    failures += expect(recv, mine, dt, want, e->rank, what);
  }
  if (!in_place)
    cudaFree(recv);
  cudaFree(send);
  free(send_vals);
  free(want);
  return failures;
}

static int check_broadcast(rank_env_t *e, int root) {
  const size_t count = 777;
  const tpla_dtype_t dt = TPLA_FLOAT16;
  int failures = 0;
  double *mine = malloc(count * sizeof(double)), *want = malloc(count * sizeof(double));
  for (size_t i = 0; i < count; i++) {
    mine[i] = value(e->rank, i, 4);
    want[i] = value(root, i, 4);
  }
  void *buf = upload(mine, count, dt);
  CHECK(&failures, buf != NULL, "upload");
  if (buf) {
    failures += TPLA_FAILED(tpla_broadcast(e->ctx, buf, count, dt, root, e->stream));
    failures += sync_env(e, "broadcast");
    failures += expect(buf, count, dt, want, e->rank, "broadcast");
  }
  cudaFree(buf);
  free(mine);
  free(want);
  return failures;
}

/* A ring shift: rank r sends 100 + r elements to r + 1 and receives
 * 100 + (r - 1) from r - 1 (with one rank: a copy to itself). */
static int check_sendrecv_ring(rank_env_t *e) {
  const tpla_dtype_t dt = TPLA_FLOAT32;
  int failures = 0, n = e->nranks, r = e->rank;
  int dst = (r + 1) % n, src = (r + n - 1) % n;
  size_t send_count = 100 + (size_t)r, recv_count = 100 + (size_t)src;
  double *mine = malloc(send_count * sizeof(double)), *want = malloc(recv_count * sizeof(double));
  for (size_t i = 0; i < send_count; i++)
    mine[i] = value(r, i, 5);
  for (size_t i = 0; i < recv_count; i++)
    want[i] = value(src, i, 5);
  void *send = upload(mine, send_count, dt), *recv = upload_poison(recv_count, dt);
  CHECK(&failures, send && recv, "upload");
  if (send && recv) {
    failures += TPLA_FAILED(
        tpla_sendrecv(e->ctx, send, send_count, dst, recv, recv_count, src, dt, e->stream));
    failures += sync_env(e, "sendrecv ring");
    failures += expect(recv, recv_count, dt, want, r, "sendrecv ring");
  }
  /* One-directional: rank 0 sends to rank 1, which receives; others idle. */
  if (n >= 2 && send && recv && r < 2) {
    CHECK(&failures, !CUDA_FAILED(gpu_fill(recv, 0xFF, recv_count * 4)), "fill"); /* NaN */
    if (r == 0)
      failures += TPLA_FAILED(tpla_sendrecv(e->ctx, send, 64, 1, NULL, 0, -1, dt, e->stream));
    else
      failures += TPLA_FAILED(tpla_sendrecv(e->ctx, NULL, 0, -1, recv, 64, 0, dt, e->stream));
    failures += sync_env(e, "one-way sendrecv");
    if (r == 1) {
      for (size_t i = 0; i < 64; i++)
        want[i] = value(0, i, 5);
      failures += expect(recv, 64, dt, want, r, "one-way sendrecv");
    }
  }
  /* A send to self must be received from self. */
  if (n >= 2)
    CHECK(&failures,
          tpla_sendrecv(e->ctx, send, 4, r, recv, 4, src, dt, e->stream) ==
              TPLA_ERROR_INVALID_ARGUMENT,
          "mixed self/peer sendrecv accepted (%s)", tpla_last_error());
  cudaFree(send);
  cudaFree(recv);
  free(mine);
  free(want);
  return failures;
}

static int check_gemm(rank_env_t *e) {
  const int64_t m = 96, n = 80, k = 130;
  int failures = 0;
  double *a = malloc(sizeof(double) * m * k), *b = malloc(sizeof(double) * k * n);
  double *ref = malloc(sizeof(double) * m * n), *absr = malloc(sizeof(double) * m * n);
  for (int64_t i = 0; i < m * k; i++)
    a[i] = value(e->rank, (size_t)i, 6);
  for (int64_t i = 0; i < k * n; i++)
    b[i] = value(e->rank + 3, (size_t)i, 7);
  gemm_ref_f64(ref, absr, n, m, n, k, a, k, TPLA_OP_N, b, n, TPLA_OP_N);
  void *da = upload(a, (size_t)(m * k), TPLA_BFLOAT16);
  void *db = upload(b, (size_t)(k * n), TPLA_BFLOAT16);
  void *dd = upload_poison((size_t)(m * n), TPLA_FLOAT32);
  CHECK(&failures, da && db && dd, "upload");
  if (da && db && dd) {
    tpla_matrix_t ma = {da, m, k, k, TPLA_BFLOAT16}, mb = {db, k, n, n, TPLA_BFLOAT16};
    tpla_matrix_t md = {dd, m, n, n, TPLA_FLOAT32};
    failures += TPLA_FAILED(tpla_gemm(e->ctx, md, ma, TPLA_OP_N, mb, TPLA_OP_N, NULL, e->stream));
    failures += sync_env(e, "gemm");
    /* products of quarter-integers summed in fp32: exact here */
    failures += expect(dd, (size_t)(m * n), TPLA_FLOAT32, ref, e->rank, "gemm");
  }
  cudaFree(da);
  cudaFree(db);
  cudaFree(dd);
  free(a);
  free(b);
  free(ref);
  free(absr);
  return failures;
}

/* Every check in order; every rank runs every step, whatever failed
 * before, so the ranks' collectives stay matched. */
static int run_collective_checks(rank_env_t *e) {
  int failures = 0;
  failures += check_allreduce(e, TPLA_FLOAT32, 1037, 0);
  failures += check_allreduce(e, TPLA_BFLOAT16, 515, 1);
  for (int pattern = 0; pattern < 3; pattern++)
    for (int t = 0; t < 2; t++) {
      tpla_dtype_t dt = t ? TPLA_BFLOAT16 : TPLA_FLOAT32;
      failures += check_allgatherv(e, dt, pattern, 0);
      failures += check_allgatherv(e, dt, pattern, 1);
      failures += check_reduce_scatterv(e, dt, pattern, 0);
      failures += check_reduce_scatterv(e, dt, pattern, 1);
    }
  for (int root = 0; root < e->nranks; root++)
    failures += check_broadcast(e, root);
  failures += check_sendrecv_ring(e);
  failures += TPLA_FAILED(tpla_barrier(e->ctx, e->stream));
  failures += TPLA_FAILED(tpla_barrier(e->ctx, NULL)); /* the legacy default stream */
  failures += sync_env(e, "barrier");
  failures += CUDA_FAILED(cudaDeviceSynchronize());
  failures += check_gemm(e);
  return failures;
}

#endif /* TPLA_COLL_CHECKS_H */
