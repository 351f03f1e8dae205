/*
 * test_host_collectives.c - every collective of the host executor on 1..8
 * ranks against a serial reference: all reducible dtypes (and u8 where
 * nothing is summed), uneven counts with zeros, in-place variants, ring and
 * self sendrecv, broadcast from every root, barrier ordering, alltoallv.
 * Inputs are fresh random numbers each run (the seed is printed; replay
 * with TPLA_TEST_SEED). Each rank regenerates every rank's input from the
 * seed, so it computes its reference alone. Reductions are checked bit for
 * bit: the executor sums in rank order in fp32 (fp64 for fp64).
 * Failure paths (timeouts, disagreements) are in test_host_failures.c.
 * Run: ./test_host_collectives
 */
#include "test.h"

#include "internal.h"
#include "rank_check.h"
#include "ranks.h"

#include <stdatomic.h>
#include <stdlib.h>

#define MAX_RANKS 8
#define TAIL 16 /* guard elements after every output, must stay untouched */
#define GUARD 0xa5

static const tpla_dtype_t reducible[] = {TPLA_FLOAT32, TPLA_FLOAT16, TPLA_BFLOAT16, TPLA_FLOAT64};
static const tpla_dtype_t movable[] = {TPLA_FLOAT32, TPLA_FLOAT16, TPLA_BFLOAT16, TPLA_FLOAT64,
                                       TPLA_UINT8};

typedef struct {
  uint64_t seed;
  atomic_int counter; /* barrier test */
} case_t;

/* Rank `r`'s input number `salt`: count elements of dtype, deterministic. */
static void gen(void *buf, tpla_dtype_t dtype, size_t count, uint64_t seed, int r, int salt) {
  rng_t g;
  rng_seed(&g, seed ^ ((uint64_t)r << 40) ^ ((uint64_t)salt * 0x9e3779b97f4a7c15ull));
  for (size_t i = 0; i < count; i++) {
    double u = rng_uniform(&g);
    if (dtype == TPLA_UINT8)
      ((uint8_t *)buf)[i] = (uint8_t)((u + 1.0) * 127.5);
    else
      tpla_store_elem(buf, dtype, i, u);
  }
}

/* Buffer of count elements plus a guard tail. */
static void *alloc_guarded(size_t count, tpla_dtype_t dtype) {
  size_t es = tpla_dtype_size(dtype);
  unsigned char *p = malloc((count + TAIL) * es);
  if (p)
    memset(p, GUARD, (count + TAIL) * es);
  return p;
}

static int tail_intact(const void *buf, size_t count, tpla_dtype_t dtype) {
  size_t es = tpla_dtype_size(dtype);
  const unsigned char *t = (const unsigned char *)buf + count * es;
  for (size_t i = 0; i < TAIL * es; i++)
    if (t[i] != GUARD)
      return 0;
  return 1;
}

/* out[i] = sum over ranks (in order) of element first+i of input `salt`,
 * summed in fp32 (fp64 for fp64) and rounded once: the executor's rule. */
static void ref_sum(void *out, tpla_dtype_t dtype, size_t first, size_t n, size_t len,
                    uint64_t seed, int nranks, int salt) {
  size_t es = tpla_dtype_size(dtype);
  void *in = malloc(len * es + 1);
  double *acc64 = calloc(n + 1, sizeof(double));
  float *acc32 = calloc(n + 1, sizeof(float));
  for (int r = 0; r < nranks; r++) {
    gen(in, dtype, len, seed, r, salt);
    for (size_t i = 0; i < n; i++) {
      double v = tpla_load_elem(in, dtype, first + i);
      if (dtype == TPLA_FLOAT64)
        acc64[i] = r == 0 ? v : acc64[i] + v;
      else
        acc32[i] = r == 0 ? (float)v : acc32[i] + (float)v;
    }
  }
  for (size_t i = 0; i < n; i++)
    tpla_store_elem(out, dtype, i, dtype == TPLA_FLOAT64 ? acc64[i] : (double)acc32[i]);
  free(in);
  free(acc64);
  free(acc32);
}

/* Same counts on every rank, some of them 0. */
static void random_counts(size_t *counts, int nranks, uint64_t seed, int salt) {
  rng_t g;
  rng_seed(&g, seed * 31 + (uint64_t)salt);
  for (int r = 0; r < nranks; r++) {
    double u = rng_uniform(&g);
    counts[r] = u < -0.5 ? 0 : (size_t)((u + 1.0) * 300.0);
  }
}

static size_t prefix(const size_t *counts, int r) {
  size_t s = 0;
  for (int i = 0; i < r; i++)
    s += counts[i];
  return s;
}

/* ---- allreduce ------------------------------------------------------------ */

static int allreduce_body(tpla_ctx_t ctx, int rank, int nranks, void *arg) {
  const case_t *c = arg;
  const size_t sizes[] = {1, 3, 7, 64, 1000, 4099};
  int salt = 0;
  for (size_t t = 0; t < sizeof reducible / sizeof reducible[0]; t++) {
    tpla_dtype_t dt = reducible[t];
    size_t es = tpla_dtype_size(dt);
    for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++) {
      for (int in_place = 0; in_place < 2; in_place++, salt++) {
        size_t n = sizes[s];
        void *send = alloc_guarded(n, dt), *recv = alloc_guarded(n, dt), *want = malloc(n * es);
        gen(send, dt, n, c->seed, rank, salt);
        if (in_place)
          memcpy(recv, send, n * es);
        ref_sum(want, dt, 0, n, n, c->seed, nranks, salt);
        RCHECK_OK(tpla_allreduce(ctx, recv, in_place ? recv : send, n, dt, NULL));
        RCHECK(memcmp(recv, want, n * es) == 0, "%s count %zu in_place %d", tpla_dtype_name(dt),
               n, in_place);
        RCHECK(tail_intact(recv, n, dt), "tail written");
        free(send);
        free(recv);
        free(want);
      }
    }
  }
  return 0;
}

static void test_allreduce(void) {
  case_t c = {.seed = fresh_seed("test_allreduce")};
  for (int n = 1; n <= MAX_RANKS; n++) {
    c.seed += 1;
    ASSERT_EQ_INT(run_host_ranks(n, allreduce_body, &c), 0);
  }
}

/* ---- allgatherv ----------------------------------------------------------- */

static int allgatherv_body(tpla_ctx_t ctx, int rank, int nranks, void *arg) {
  const case_t *c = arg;
  size_t counts[MAX_RANKS];
  int salt = 0;
  for (size_t t = 0; t < sizeof movable / sizeof movable[0]; t++) {
    tpla_dtype_t dt = movable[t];
    size_t es = tpla_dtype_size(dt);
    for (int rep = 0; rep < 3; rep++) {
      for (int in_place = 0; in_place < 2; in_place++, salt++) {
        random_counts(counts, nranks, c->seed, salt);
        if (rep == 0)
          counts[nranks - 1] = 0; /* always one empty contribution */
        size_t total = prefix(counts, nranks), mine = counts[rank], at = prefix(counts, rank);
        void *recv = alloc_guarded(total, dt), *send = alloc_guarded(mine, dt);
        unsigned char *want = malloc(total * es + 1);
        for (int r = 0; r < nranks; r++)
          gen(want + prefix(counts, r) * es, dt, counts[r], c->seed, r, salt);
        gen(send, dt, mine, c->seed, rank, salt);
        if (in_place)
          memcpy((char *)recv + at * es, send, mine * es);
        const void *src = in_place ? (char *)recv + at * es : send;
        if (total == 0)
          src = send;
        RCHECK_OK(tpla_allgatherv(ctx, recv, src, counts, dt, NULL));
        RCHECK(memcmp(recv, want, total * es) == 0, "%s total %zu in_place %d",
               tpla_dtype_name(dt), total, in_place);
        RCHECK(tail_intact(recv, total, dt), "tail written");
        free(recv);
        free(send);
        free(want);
      }
    }
  }
  return 0;
}

static void test_allgatherv(void) {
  case_t c = {.seed = fresh_seed("test_allgatherv")};
  for (int n = 1; n <= MAX_RANKS; n++) {
    c.seed += 1;
    ASSERT_EQ_INT(run_host_ranks(n, allgatherv_body, &c), 0);
  }
}

/* ---- reduce_scatterv ------------------------------------------------------ */

static int reduce_scatterv_body(tpla_ctx_t ctx, int rank, int nranks, void *arg) {
  const case_t *c = arg;
  size_t counts[MAX_RANKS];
  int salt = 0;
  for (size_t t = 0; t < sizeof reducible / sizeof reducible[0]; t++) {
    tpla_dtype_t dt = reducible[t];
    size_t es = tpla_dtype_size(dt);
    for (int rep = 0; rep < 3; rep++) {
      for (int in_place = 0; in_place < 2; in_place++, salt++) {
        random_counts(counts, nranks, c->seed, salt);
        if (rep == 0)
          counts[0] = 0;
        size_t total = prefix(counts, nranks), mine = counts[rank], at = prefix(counts, rank);
        void *send = alloc_guarded(total, dt), *recv = alloc_guarded(mine, dt);
        void *want = malloc(mine * es + 1);
        gen(send, dt, total, c->seed, rank, salt);
        ref_sum(want, dt, at, mine, total, c->seed, nranks, salt);
        /* in place: the result lands on this rank's own block of send */
        void *out = in_place ? (char *)send + at * es : recv;
        RCHECK_OK(tpla_reduce_scatterv(ctx, out, send, counts, dt, NULL));
        RCHECK(memcmp(out, want, mine * es) == 0, "%s mine %zu of %zu in_place %d",
               tpla_dtype_name(dt), mine, total, in_place);
        RCHECK(tail_intact(in_place ? send : recv, in_place ? total : mine, dt), "tail written");
        free(send);
        free(recv);
        free(want);
      }
    }
  }
  return 0;
}

static void test_reduce_scatterv(void) {
  case_t c = {.seed = fresh_seed("test_reduce_scatterv")};
  for (int n = 1; n <= MAX_RANKS; n++) {
    c.seed += 1;
    ASSERT_EQ_INT(run_host_ranks(n, reduce_scatterv_body, &c), 0);
  }
}

/* ---- broadcast -------------------------------------------------------------- */

static int broadcast_body(tpla_ctx_t ctx, int rank, int nranks, void *arg) {
  const case_t *c = arg;
  int salt = 0;
  for (int root = 0; root < nranks; root++) {
    for (size_t t = 0; t < sizeof movable / sizeof movable[0]; t++, salt++) {
      tpla_dtype_t dt = movable[t];
      size_t es = tpla_dtype_size(dt), n = 1 + (size_t)(salt * 37 % 500);
      void *buf = alloc_guarded(n, dt), *want = malloc(n * es);
      gen(want, dt, n, c->seed, root, salt);
      gen(buf, dt, n, c->seed, rank, rank == root ? salt : salt + 1000);
      RCHECK_OK(tpla_broadcast(ctx, buf, n, dt, root, NULL));
      RCHECK(memcmp(buf, want, n * es) == 0, "%s root %d count %zu", tpla_dtype_name(dt), root,
             n);
      RCHECK(tail_intact(buf, n, dt), "tail written");
      free(buf);
      free(want);
    }
  }
  return 0;
}

static void test_broadcast_from_every_root(void) {
  case_t c = {.seed = fresh_seed("test_broadcast_from_every_root")};
  for (int n = 1; n <= MAX_RANKS; n++) {
    c.seed += 1;
    ASSERT_EQ_INT(run_host_ranks(n, broadcast_body, &c), 0);
  }
}

/* ---- sendrecv --------------------------------------------------------------- */

/* Elements rank r sends in a ring of shift `shift` (uneven, sometimes 0). */
static size_t ring_count(int r, int shift, int salt) {
  return (size_t)(((r * 7 + shift * 3 + salt) % 11 + 11) % 11) * 13;
}

static int sendrecv_ring_body(tpla_ctx_t ctx, int rank, int nranks, void *arg) {
  const case_t *c = arg;
  int salt = 0;
  for (size_t t = 0; t < sizeof movable / sizeof movable[0]; t++) {
    tpla_dtype_t dt = movable[t];
    size_t es = tpla_dtype_size(dt);
    for (int shift = -2; shift <= 2; shift++, salt++) {
      int dst = ((rank + shift) % nranks + nranks) % nranks;
      int src = ((rank - shift) % nranks + nranks) % nranks;
      size_t ns = ring_count(rank, shift, salt), nr = ring_count(src, shift, salt);
      if (dst == rank) /* shift 0, or a multiple of nranks: a self exchange */
        nr = ns;
      void *send = alloc_guarded(ns, dt), *recv = alloc_guarded(nr, dt);
      void *want = malloc(nr * es + 1);
      gen(send, dt, ns, c->seed, rank, salt);
      gen(want, dt, nr, c->seed, src, salt);
      RCHECK_OK(tpla_sendrecv(ctx, send, ns, dst, recv, nr, src, dt, NULL));
      RCHECK(memcmp(recv, want, nr * es) == 0, "%s shift %d from %d", tpla_dtype_name(dt), shift,
             src);
      RCHECK(tail_intact(recv, nr, dt), "tail written");
      free(send);
      free(recv);
      free(want);
    }
  }
  /* Pairs: even ranks only send to rank+1, odd ranks only receive. */
  float msg[5] = {1, 2, 3, 4, 5}, got[5] = {0};
  int peer = rank ^ 1;
  if (peer < nranks) {
    if (rank % 2 == 0)
      RCHECK_OK(tpla_sendrecv(ctx, msg, 5, peer, NULL, 0, -1, TPLA_FLOAT32, NULL));
    else
      RCHECK_OK(tpla_sendrecv(ctx, NULL, 0, -1, got, 5, peer, TPLA_FLOAT32, NULL));
    if (rank % 2 == 1)
      RCHECK(memcmp(got, msg, sizeof msg) == 0, "pair message");
  }
  /* Self exchanges, in place and not. */
  double a[4] = {1, -2, 3, -4}, b[4] = {0};
  RCHECK_OK(tpla_sendrecv(ctx, a, 4, rank, b, 4, rank, TPLA_FLOAT64, NULL));
  RCHECK(memcmp(a, b, sizeof a) == 0, "self copy");
  RCHECK_OK(tpla_sendrecv(ctx, a, 4, rank, a, 4, rank, TPLA_FLOAT64, NULL));
  RCHECK(a[3] == -4.0, "self in place");
  return 0;
}

static void test_sendrecv_ring_and_self(void) {
  case_t c = {.seed = fresh_seed("test_sendrecv_ring_and_self")};
  for (int n = 1; n <= MAX_RANKS; n++) {
    c.seed += 1;
    ASSERT_EQ_INT(run_host_ranks(n, sendrecv_ring_body, &c), 0);
  }
}

/* ---- barrier ---------------------------------------------------------------- */

static int barrier_body(tpla_ctx_t ctx, int rank, int nranks, void *arg) {
  case_t *c = arg;
  for (int i = 0; i < 50; i++) {
    atomic_fetch_add(&c->counter, 1);
    RCHECK_OK(tpla_barrier(ctx, NULL));
    /* Between the two barriers everyone has counted round i and nobody
     * round i+1: a barrier that lets a rank through early breaks this. */
    int seen = atomic_load(&c->counter);
    RCHECK(seen == (i + 1) * nranks, "after barrier %d saw %d", i, seen);
    RCHECK_OK(tpla_barrier(ctx, NULL));
  }
  return 0;
}

static void test_barrier_orders_ranks(void) {
  for (int n = 1; n <= MAX_RANKS; n++) {
    case_t c = {.seed = 0};
    atomic_init(&c.counter, 0);
    ASSERT_EQ_INT(run_host_ranks(n, barrier_body, &c), 0);
  }
}

/* ---- alltoallv (backend building block) ------------------------------------ */

/* Elements rank `from` sends to rank `to` (salted, sometimes 0). */
static size_t a2a_count(int from, int to, int salt) {
  return (size_t)((from * 5 + to * 3 + salt) % 7) * 9;
}

static int alltoallv_body(tpla_ctx_t ctx, int rank, int nranks, void *arg) {
  const case_t *c = arg;
  for (int salt = 0; salt < 3; salt++) {
    tpla_dtype_t dt = reducible[salt % 4];
    size_t es = tpla_dtype_size(dt);
    size_t sc[MAX_RANKS], sd[MAX_RANKS], rc[MAX_RANKS], rd[MAX_RANKS], st = 0, rt = 0;
    for (int q = 0; q < nranks; q++) {
      sc[q] = a2a_count(rank, q, salt), sd[q] = st, st += sc[q] + 2; /* gaps between blocks */
      rc[q] = a2a_count(q, rank, salt), rd[q] = rt, rt += rc[q];
    }
    unsigned char *send = malloc(st * es + 1), *recv = alloc_guarded(rt, dt);
    unsigned char *want = malloc(rt * es + 1);
    for (int q = 0; q < nranks; q++) {
      gen(send + sd[q] * es, dt, sc[q], c->seed, rank * 64 + q, salt); /* rank -> q block */
      gen(want + rd[q] * es, dt, rc[q], c->seed, q * 64 + rank, salt);  /* q -> rank block */
    }
    RCHECK_OK(ctx->backend->alltoallv(ctx, recv, rc, rd, send, sc, sd, dt, NULL));
    RCHECK(memcmp(recv, want, rt * es) == 0, "%s salt %d", tpla_dtype_name(dt), salt);
    RCHECK(tail_intact(recv, rt, dt), "tail written");
    free(send);
    free(recv);
    free(want);
  }
  return 0;
}

static void test_alltoallv(void) {
  case_t c = {.seed = fresh_seed("test_alltoallv")};
  for (int n = 1; n <= MAX_RANKS; n++) {
    c.seed += 1;
    ASSERT_EQ_INT(run_host_ranks(n, alltoallv_body, &c), 0);
  }
}

/* ---- many ranks ------------------------------------------------------------- */

static int many_body(tpla_ctx_t ctx, int rank, int nranks, void *arg) {
  const case_t *c = arg;
  float x[5], want[5];
  gen(x, TPLA_FLOAT32, 5, c->seed, rank, 0);
  ref_sum(want, TPLA_FLOAT32, 0, 5, 5, c->seed, nranks, 0);
  RCHECK_OK(tpla_allreduce(ctx, x, x, 5, TPLA_FLOAT32, NULL)); /* fewer elements than ranks */
  RCHECK(memcmp(x, want, sizeof x) == 0, "sum over %d ranks", nranks);
  return 0;
}

static void test_more_ranks_than_elements(void) {
  case_t c = {.seed = fresh_seed("test_more_ranks_than_elements")};
  ASSERT_EQ_INT(run_host_ranks(33, many_body, &c), 0);
}

int main(void) {
  TEST(test_allreduce);
  TEST(test_allgatherv);
  TEST(test_reduce_scatterv);
  TEST(test_broadcast_from_every_root);
  TEST(test_sendrecv_ring_and_self);
  TEST(test_barrier_orders_ranks);
  TEST(test_alltoallv);
  TEST(test_more_ranks_than_elements);
  return test_summary();
}
