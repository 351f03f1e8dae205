/*
 * ns_team.h - the ranks of test_gpu_ns.c: one thread per GPU, each with an
 * NCCL communicator (tpla_nccl_comm_create from one unique id) and a
 * context (tpla_ctx_create_nccl) on its own device and stream, a
 * rendezvous that spreads a "stop" flag (so that no rank enters a
 * collective its partner has left), and memory helpers that wait with a
 * timeout instead of hanging.
 *
 * With `host` set the same team runs on the host executor (one host group,
 * threads as ranks, host memory): test_gpu_ns.c uses it to check itself on
 * machines without GPUs (TPLA_NS_TEST_HOST=1).
 *
 * Header-only (static functions). Include only when TPLA_HAVE_CUDA is defined.
 */
#ifndef TPLA_NS_TEAM_H
#define TPLA_NS_TEAM_H

#include "gpu_util.h"

#include <inttypes.h>
#include <pthread.h>
#include <stdbool.h>

#define TEAM_MAX_RANKS 8
#define TEAM_TIMEOUT_MS 60000 /* collectives and the NCCL setup */
#define TEAM_DRAIN_S 120      /* longest wait for a stream */

/* The ranks a team can have: one per GPU, or up to TEAM_MAX_RANKS threads of the host
 * executor standing in for them (`host`). */
static inline int team_gpus(bool host) { return host ? TEAM_MAX_RANKS : gpu_count(); }

typedef struct team team_t;

typedef struct {
  int rank, nranks;
  bool host;             /* host executor: memory is host memory, stream NULL */
  tpla_ctx_t ctx;
  cudaStream_t stream;
  team_t *team;
} rank_env_t;

/* Body run by every rank; returns its number of failures. */
typedef int (*team_body_t)(rank_env_t *e, void *arg);

struct team {
  int nranks;
  bool host;
  pthread_barrier_t barrier;
  pthread_mutex_t lock;
  int stop; /* sticky: some rank cannot go on */
  int vote[TEAM_MAX_RANKS]; /* team_any */
  tpla_unique_id_t id;
  tpla_host_group_t group;
  team_body_t body;
  void *arg;
  int64_t timeout_ms[TEAM_MAX_RANKS]; /* each rank's cfg.timeout_ms; 0: TEAM_TIMEOUT_MS */
};

typedef struct {
  team_t *team;
  int rank, failures;
} team_thread_t;

/* All ranks meet; returns nonzero on every rank if any rank passed stop != 0
 * now or at an earlier rendezvous. Every rank must call it equally often. */
static inline int team_sync(rank_env_t *e, int stop) {
  team_t *t = e->team;
  pthread_mutex_lock(&t->lock);
  t->stop |= stop != 0;
  pthread_mutex_unlock(&t->lock);
  pthread_barrier_wait(&t->barrier);
  pthread_mutex_lock(&t->lock);
  int result = t->stop;
  pthread_mutex_unlock(&t->lock);
  /* nobody sets the flag for the next rendezvous before all have read it */
  pthread_barrier_wait(&t->barrier);
  return result;
}

/* All ranks meet; returns nonzero on every rank if any rank passed flag != 0
 * (this rendezvous only). Every rank must call it equally often. */
static inline int team_any(rank_env_t *e, int flag) {
  team_t *t = e->team;
  t->vote[e->rank] = flag != 0;
  pthread_barrier_wait(&t->barrier);
  int any = 0;
  for (int q = 0; q < t->nranks; q++)
    any |= t->vote[q];
  pthread_barrier_wait(&t->barrier); /* nobody votes again before all have counted */
  return any;
}

/* ---- memory on the rank's executor ----------------------------------------- */

/* Device memory (host memory on the host executor); NULL for 0 bytes, and
 * NULL with a message when the allocation fails. */
static inline void *team_alloc(rank_env_t *e, size_t bytes, bool *failed) {
  void *p = NULL;
  if (bytes == 0)
    return NULL;
  if (e->host)
    p = malloc(bytes);
  else if (CUDA_FAILED(cudaMalloc(&p, bytes)))
    p = NULL;
  if (p == NULL) {
    fprintf(stderr, "  rank %d: could not allocate %zu bytes\n", e->rank, bytes);
    *failed = true;
  }
  return p;
}

static inline void team_free(rank_env_t *e, void *p) {
  if (p == NULL)
    return;
  if (e->host)
    free(p);
  else
    cudaFree(p);
}

/* Wait for the rank's stream (at most TEAM_DRAIN_S); 0 when drained. */
static inline int team_drain(rank_env_t *e, const char *what) {
  return e->host ? 0 : sync_stream_timeout(e->stream, TEAM_DRAIN_S, what);
}

/* A copy ordered after the work on the rank's stream, then waited for. */
static inline int team_copy(rank_env_t *e, void *dst, const void *src, size_t bytes,
                            enum cudaMemcpyKind kind) {
  if (bytes == 0)
    return 0;
  if (e->host) {
    memcpy(dst, src, bytes);
    return 0;
  }
  if (CUDA_FAILED(cudaMemcpyAsync(dst, src, bytes, kind, e->stream)))
    return 1;
  return team_drain(e, "copy");
}

/* Set bytes of executor memory to `value`, then wait. */
static inline int team_fill(rank_env_t *e, void *dst, int value, size_t bytes) {
  if (bytes == 0)
    return 0;
  if (e->host) {
    memset(dst, value, bytes);
    return 0;
  }
  if (CUDA_FAILED(cudaMemsetAsync(dst, value, bytes, e->stream)))
    return 1;
  return team_drain(e, "fill");
}

/* True if all n bytes at p equal v (untouched padding, untouched outputs). */
static inline bool all_bytes(const unsigned char *p, size_t n, unsigned char v) {
  for (size_t i = 0; i < n; i++)
    if (p[i] != v)
      return false;
  return true;
}

/* ---- a rank's shard of a global matrix -------------------------------------------- */

/* Rank's part of a global row-major m x n matrix of doubles: rows (or
 * columns) [off, off + count) as an lr x lc view of `dtype` with rows ld
 * elements apart. */
typedef struct {
  bool rows;
  int64_t off, lr, lc, ld, n; /* n: the global matrix's columns */
  tpla_dtype_t dtype;
} team_shard_t;

static inline size_t team_shard_index(const team_shard_t *sh, int64_t i, int64_t j) {
  return (size_t)((sh->rows ? sh->off + i : i) * sh->n + (sh->rows ? j : sh->off + j));
}

/* The shard's image of g, its padding 0xFF (NaN in every dtype). */
static inline void team_shard_store(const team_shard_t *sh, unsigned char *img, const double *g) {
  memset(img, 0xFF, (size_t)(sh->lr * sh->ld) * tpla_dtype_size(sh->dtype));
  for (int64_t i = 0; i < sh->lr; i++)
    for (int64_t j = 0; j < sh->lc; j++)
      tpla_store_elem(img, sh->dtype, (size_t)(i * sh->ld + j), g[team_shard_index(sh, i, j)]);
}

/* The shard's elements from img into g; returns the number of rows whose
 * padding was written (each reported as rank's, `what`). */
static inline int team_shard_load(const team_shard_t *sh, const unsigned char *img, double *g,
                                  int rank, const char *what) {
  int failures = 0;
  size_t es = tpla_dtype_size(sh->dtype);
  for (int64_t i = 0; i < sh->lr; i++) {
    const unsigned char *pad = img + (size_t)(i * sh->ld + sh->lc) * es;
    CHECK(&failures, all_bytes(pad, (size_t)(sh->ld - sh->lc) * es, 0xFF),
          "rank %d: %s: padding of row %" PRId64 " was written", rank, what, i);
    for (int64_t j = 0; j < sh->lc; j++)
      g[team_shard_index(sh, i, j)] = tpla_load_elem(img, sh->dtype, (size_t)(i * sh->ld + j));
  }
  return failures;
}

/* ---- the threads ------------------------------------------------------------------ */

static inline int team_setup(rank_env_t *e, struct ncclComm **comm) {
  tpla_config_t cfg = TPLA_CONFIG_INIT;
  cfg.timeout_ms = TEAM_TIMEOUT_MS;
  if (!e->host &&
      (CUDA_FAILED(cudaSetDevice(e->rank)) ||
       TPLA_FAILED(tpla_nccl_comm_create(comm, &e->team->id, e->nranks, e->rank, e->rank, &cfg))))
    return 1;
  int64_t own = e->team->timeout_ms[e->rank]; /* the context's only */
  cfg.timeout_ms = own > 0 ? own : TEAM_TIMEOUT_MS;
  if (e->host)
    return TPLA_FAILED(tpla_ctx_create_host(&e->ctx, e->team->group, e->rank, &cfg));
  if (TPLA_FAILED(tpla_ctx_create_nccl(&e->ctx, *comm, &cfg)))
    return 1;
  return CUDA_FAILED(cudaStreamCreateWithFlags(&e->stream, cudaStreamNonBlocking));
}

static void *team_main(void *p) {
  team_thread_t *t = p;
  rank_env_t e = {t->rank, t->team->nranks, t->team->host, NULL, NULL, t->team};
  struct ncclComm *comm = NULL;
  int failed = team_setup(&e, &comm);
  if (team_sync(&e, failed) == 0)
    t->failures = t->team->body(&e, t->team->arg);
  else
    t->failures = failed;
  if (e.stream != NULL) {
    t->failures += team_drain(&e, "teardown");
    cudaStreamDestroy(e.stream);
  }
  t->failures += TPLA_FAILED(tpla_ctx_destroy(e.ctx));
  if (comm != NULL)
    t->failures += TPLA_FAILED(tpla_nccl_comm_destroy(comm));
  return NULL;
}

/* Run `body` on nranks ranks (GPU r for rank r, or host ranks); returns the
 * total number of failures, setup included. timeouts: each rank's
 * cfg.timeout_ms (NULL: TEAM_TIMEOUT_MS). */
static inline int team_run_timeouts(int nranks, bool host, team_body_t body, void *arg,
                                    const int64_t *timeouts) {
  team_t team;
  memset(&team, 0, sizeof team);
  for (int r = 0; timeouts != NULL && r < nranks && r < TEAM_MAX_RANKS; r++)
    team.timeout_ms[r] = timeouts[r];
  team.nranks = nranks;
  team.host = host;
  team.body = body;
  team.arg = arg;
  tpla_config_t cfg = TPLA_CONFIG_INIT;
  cfg.timeout_ms = TEAM_TIMEOUT_MS;
  if (nranks < 1 || nranks > TEAM_MAX_RANKS ||
      (host ? TPLA_FAILED(tpla_host_group_create(&team.group, nranks, &cfg))
            : TPLA_FAILED(tpla_nccl_get_unique_id(&team.id))))
    return 1;
  pthread_barrier_init(&team.barrier, NULL, (unsigned)nranks);
  pthread_mutex_init(&team.lock, NULL);
  team_thread_t threads[TEAM_MAX_RANKS];
  pthread_t ids[TEAM_MAX_RANKS];
  int failures = 0, started = 0;
  for (; started < nranks; started++) {
    threads[started] = (team_thread_t){&team, started, 0};
    if (pthread_create(&ids[started], NULL, team_main, &threads[started]) != 0) {
      /* the started ranks would wait at the barrier forever: give up */
      fprintf(stderr, "  could not start the thread of rank %d\n", started);
      _exit(1);
    }
  }
  for (int r = 0; r < started; r++) {
    pthread_join(ids[r], NULL);
    failures += threads[r].failures;
  }
  pthread_barrier_destroy(&team.barrier);
  pthread_mutex_destroy(&team.lock);
  if (host)
    failures += TPLA_FAILED(tpla_host_group_destroy(team.group));
  return failures;
}

static inline int team_run(int nranks, bool host, team_body_t body, void *arg) {
  return team_run_timeouts(nranks, host, body, arg, NULL);
}

#endif /* TPLA_NS_TEAM_H */
