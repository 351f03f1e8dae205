/*
 * test_gpu_overlap_util.h - helpers of the GPU overlap tests
 * (test_gpu_overlap*.c): a team of ranks, one thread per GPU, each with its
 * NCCL communicator, tpla context and non-blocking stream, that runs a body
 * and can meet at a barrier; checked device buffers filled from float64
 * host data through the library's own dtype conversions.
 *
 * Header-only (static functions); include after gpu_util.h.
 */
#ifndef TPLA_TEST_GPU_OVERLAP_UTIL_H
#define TPLA_TEST_GPU_OVERLAP_UTIL_H

#include "gpu_util.h"

#include <pthread.h>

#define GT_MAX_RANKS 8

typedef struct gt_team gt_team_t;

typedef struct {
  int rank, nranks, device;
  tpla_ctx_t ctx;
  cudaStream_t stream;
  gt_team_t *team;
} gt_rank_t;

/* Returns the number of failures of this rank. */
typedef int (*gt_body_t)(gt_rank_t *r, void *arg);

struct gt_team {
  int nranks;
  tpla_unique_id_t id;
  pthread_barrier_t barrier;
  gt_body_t body;
  void *arg;
  int failures[GT_MAX_RANKS];
  int setup_failed[GT_MAX_RANKS];
};

static inline void gt_barrier(gt_rank_t *r) { pthread_barrier_wait(&r->team->barrier); }

typedef struct {
  gt_team_t *team;
  int rank;
} gt_start_t;

static void *gt_main(void *p) {
  gt_start_t *s = p;
  gt_team_t *t = s->team;
  gt_rank_t r = {s->rank, t->nranks, s->rank, NULL, NULL, t};
  struct ncclComm *comm = NULL;
  tpla_config_t cfg = TPLA_CONFIG_INIT;
  cfg.timeout_ms = 60000;
  int bad = CUDA_FAILED(cudaSetDevice(r.device));
  bad = bad || TPLA_FAILED(tpla_nccl_comm_create(&comm, &t->id, t->nranks, r.rank, r.device, &cfg));
  bad = bad || TPLA_FAILED(tpla_ctx_create_nccl(&r.ctx, comm, &cfg));
  bad = bad || CUDA_FAILED(cudaStreamCreateWithFlags(&r.stream, cudaStreamNonBlocking));
  t->setup_failed[r.rank] = bad;
  gt_barrier(&r); /* every rank knows whether the team is complete */
  int complete = 1;
  for (int q = 0; q < t->nranks; q++)
    complete &= !t->setup_failed[q];
  if (complete)
    t->failures[r.rank] = t->body(&r, t->arg);
  if (r.stream)
    cudaStreamDestroy(r.stream);
  if (r.ctx)
    t->failures[r.rank] += TPLA_FAILED(tpla_ctx_destroy(r.ctx));
  if (comm)
    t->failures[r.rank] += TPLA_FAILED(tpla_nccl_comm_destroy(comm));
  return NULL;
}

/* Run `body` on ranks 0..nranks-1 (rank r on GPU r). Returns the total of
 * failures, setup failures included. */
static inline int gt_run(int nranks, gt_body_t body, void *arg) {
  gt_team_t *t = calloc(1, sizeof *t);
  if (t == NULL || nranks > GT_MAX_RANKS)
    return 1;
  t->nranks = nranks;
  t->body = body;
  t->arg = arg;
  int failures = TPLA_FAILED(tpla_nccl_get_unique_id(&t->id));
  pthread_barrier_init(&t->barrier, NULL, (unsigned)nranks);
  pthread_t ids[GT_MAX_RANKS];
  gt_start_t starts[GT_MAX_RANKS];
  int started = 0;
  for (; failures == 0 && started < nranks; started++) {
    starts[started] = (gt_start_t){t, started};
    if (pthread_create(&ids[started], NULL, gt_main, &starts[started]) != 0)
      break;
  }
  if (failures == 0 && started < nranks) {
    fprintf(stderr, "  gt_run: could not start %d threads (the started ones will hang)\n",
            nranks);
    return 1;
  }
  for (int q = 0; q < started; q++) {
    pthread_join(ids[q], NULL);
    failures += t->failures[q] + t->setup_failed[q];
  }
  pthread_barrier_destroy(&t->barrier);
  free(t);
  return failures;
}

/* ---- device buffers ------------------------------------------------------------------ */

/* A device matrix (rows x cols, ld = cols + pad) of `dtype`, filled from
 * the row-major doubles h (ld cols) rounded to the dtype; NULL h: zeros. */
static inline tpla_matrix_t gt_upload(const double *h, int64_t rows, int64_t cols, int pad,
                                      tpla_dtype_t dtype, int *failures) {
  tpla_matrix_t m = {NULL, rows, cols, cols + pad > 0 ? cols + pad : 1, dtype};
  size_t es = tpla_dtype_size(dtype), bytes = (size_t)(rows > 0 ? rows : 1) * (size_t)m.ld * es;
  void *host = calloc(1, bytes);
  if (host == NULL || CUDA_FAILED(cudaMalloc(&m.data, bytes))) {
    (*failures)++;
    free(host);
    m.data = NULL;
    return m;
  }
  for (int64_t i = 0; h != NULL && i < rows; i++)
    pack((char *)host + (size_t)(i * m.ld) * es, dtype, h + i * cols, (size_t)cols);
  *failures += CUDA_FAILED(cudaMemcpy(m.data, host, bytes, cudaMemcpyHostToDevice));
  free(host);
  return m;
}

/* The doubles of a device matrix (rows x cols, dense result). */
static inline double *gt_download(tpla_matrix_t m, int *failures) {
  size_t es = tpla_dtype_size(m.dtype), bytes = (size_t)(m.rows > 0 ? m.rows : 1) * m.ld * es;
  void *host = malloc(bytes);
  double *out = calloc((size_t)(m.rows * m.cols + 1), sizeof *out);
  if (host == NULL || out == NULL || CUDA_FAILED(cudaMemcpy(host, m.data, bytes,
                                                            cudaMemcpyDeviceToHost))) {
    (*failures)++;
  } else {
    for (int64_t i = 0; i < m.rows; i++)
      unpack(out + i * m.cols, (char *)host + (size_t)(i * m.ld) * es, m.dtype, (size_t)m.cols);
  }
  free(host);
  return out;
}

/* Uniform [-1, 1) doubles, already rounded to `dtype` (so they are the exact inputs). */
static inline double *gt_random(gpu_rng_t *g, int64_t count, tpla_dtype_t dtype) {
  double *v = malloc(sizeof *v * (size_t)(count > 0 ? count : 1));
  uint32_t tmp[2];
  for (int64_t i = 0; v != NULL && i < count; i++) {
    tpla_store_elem(tmp, dtype, 0, gpu_rng_uniform(g));
    v[i] = tpla_load_elem(tmp, dtype, 0);
  }
  return v;
}

#endif /* TPLA_TEST_GPU_OVERLAP_UTIL_H */
