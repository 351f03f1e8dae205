/*
 * tpla.h - the public C API of tpla, tensor-parallel linear algebra on GPUs.
 *
 * tpla orthogonalizes sharded matrices (distributed Newton-Schulz, the core
 * of the Muon optimizer) and overlaps tensor-parallel communication with
 * GEMMs. Every operation runs on a context (one per rank) backed by one of
 * two executors:
 *   - the CUDA executor: NCCL for communication, cuBLASLt for GEMMs, work
 *     enqueued on the caller's cudaStream_t;
 *   - the host executor: N threads of one process act as N ranks, host
 *     memory, BLAS GEMMs. It runs the same algorithms on the CPU so that
 *     every schedule is tested without a GPU.
 *
 * Conventions
 *   - Every function returns a tpla_status_t. On failure, tpla_last_error()
 *     returns a message (thread-local) naming the function, the argument and
 *     the shapes involved. A rejected call writes none of its outputs.
 *   - Outputs come before inputs; the stream comes last. A stream argument
 *     is a cudaStream_t passed as void* (NULL is the legacy default stream);
 *     the host executor ignores it and completes the call before returning.
 *   - Matrices are row-major views (tpla_matrix_t); `ld` is the distance in
 *     elements between the starts of consecutive rows and may exceed `cols`.
 *   - *_destroy functions accept NULL.
 *   - Enumerations only grow at the end; struct arguments carry their size
 *     and must be initialized with their *_INIT macro.
 *
 * Threading: a context is used by one thread at a time. Different contexts
 * (and so different ranks of a host group, each on its own thread) may be
 * used concurrently.
 */
#ifndef TPLA_H
#define TPLA_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define TPLA_VERSION_MAJOR 0
#define TPLA_VERSION_MINOR 1
#define TPLA_VERSION_PATCH 0
/* Encoded as MAJOR*10000 + MINOR*100 + PATCH. */
#define TPLA_VERSION \
  (TPLA_VERSION_MAJOR * 10000 + TPLA_VERSION_MINOR * 100 + TPLA_VERSION_PATCH)

#if defined(__GNUC__)
#define TPLA_API __attribute__((visibility("default")))
#else
#define TPLA_API
#endif

/* NCCL's communicator, declared here so this header needs no nccl.h.
 * ncclComm_t is `struct ncclComm *`. */
struct ncclComm;

/* ------------------------------------------------------------------------ */
/* Status and errors                                                         */
/* ------------------------------------------------------------------------ */

typedef enum {
  TPLA_SUCCESS = 0,
  TPLA_ERROR_INVALID_ARGUMENT = 1, /* a bad value: NULL, size, dtype, ld... */
  TPLA_ERROR_INVALID_USAGE = 2,    /* right values, wrong time or order */
  TPLA_ERROR_NOT_SUPPORTED = 3,    /* valid, but not on this build/device */
  TPLA_ERROR_OUT_OF_MEMORY = 4,
  TPLA_ERROR_CUDA = 5,             /* a CUDA runtime call failed */
  TPLA_ERROR_NCCL = 6,             /* an NCCL call failed */
  TPLA_ERROR_CUBLAS = 7,           /* a cuBLAS/cuBLASLt call failed */
  TPLA_ERROR_REMOTE = 8,           /* another rank failed or disagreed */
  TPLA_ERROR_TIMEOUT = 9,          /* a collective wait ran out of time */
  TPLA_ERROR_INTERNAL = 10
} tpla_status_t;

/* Name of a status, e.g. "TPLA_ERROR_INVALID_ARGUMENT". Never NULL. */
TPLA_API const char *tpla_status_string(tpla_status_t status);

/* Detail of the last failure on the calling thread: function, argument and
 * shapes, e.g. "tpla_gemm: argument 'a': ld (3) < cols (4)". Empty string
 * after a successful call. The pointer stays valid until the thread's next
 * tpla call. */
TPLA_API const char *tpla_last_error(void);

/* TPLA_VERSION of the library actually linked. */
TPLA_API int tpla_version(void);

/* ------------------------------------------------------------------------ */
/* Element types, operations, matrix views                                   */
/* ------------------------------------------------------------------------ */

typedef enum {
  TPLA_FLOAT32 = 0,
  TPLA_FLOAT16 = 1,  /* IEEE binary16 */
  TPLA_BFLOAT16 = 2,
  TPLA_FLOAT64 = 3,  /* collectives only */
  TPLA_UINT8 = 4     /* raw bytes: collectives that do not reduce */
} tpla_dtype_t;

/* Size of one element in bytes; 0 for an unknown dtype. */
TPLA_API size_t tpla_dtype_size(tpla_dtype_t dtype);
/* Name of a dtype, e.g. "bf16"; "?" for an unknown one. */
TPLA_API const char *tpla_dtype_name(tpla_dtype_t dtype);

typedef enum { TPLA_OP_N = 0, TPLA_OP_T = 1 } tpla_op_t;

/* A row-major matrix: element (i, j) is at data + (i*ld + j)*size(dtype).
 * rows, cols >= 0; ld >= max(cols, 1). data may be NULL only when the
 * matrix is empty (rows == 0 or cols == 0). Memory is device memory on the
 * CUDA executor and host memory on the host executor. */
typedef struct {
  void *data;
  int64_t rows;
  int64_t cols;
  int64_t ld;
  tpla_dtype_t dtype;
} tpla_matrix_t;

/* ------------------------------------------------------------------------ */
/* Build and device features                                                 */
/* ------------------------------------------------------------------------ */

typedef struct {
  size_t size;              /* sizeof(tpla_features_t); set by the INIT macro */
  int version;              /* tpla_version() */
  int cuda_executor;        /* 1 if the library was built with CUDA + NCCL */
  int device_count;         /* CUDA devices visible; 0 without CUDA/GPU */
  int device;               /* the device the fields below describe, or -1 */
  int compute_capability;   /* major*10 + minor, e.g. 90 */
  int sm_count;
  int fp8;                  /* FP8 (E4M3/E5M2) GEMMs: compute capability >= 89 */
  int mxfp8;                /* block-scaled FP8 GEMMs: compute capability >= 100 */
  int cuda_runtime_version; /* cudaRuntimeGetVersion, e.g. 13000 */
  int cuda_driver_version;  /* cudaDriverGetVersion */
  int nccl_version;         /* ncclGetVersion, e.g. 22803 */
  size_t cublaslt_version;  /* cublasLtGetVersion */
  char device_name[96];
} tpla_features_t;
#define TPLA_FEATURES_INIT {sizeof(tpla_features_t), 0, 0, 0, -1, 0, 0, 0, 0, 0, 0, 0, 0, {0}}

/* Fill *features for `device` (a CUDA ordinal; pass -1 for build features
 * only). Without a GPU or a CUDA build, device fields read 0 and
 * device_count 0: this is not an error. Errors: INVALID_ARGUMENT for a NULL
 * pointer, a wrong size field or a device >= device_count. */
TPLA_API tpla_status_t tpla_get_features(tpla_features_t *features, int device);

/* *can_access = 1 if `device` can map `peer`'s memory (CUDA peer access),
 * 0 otherwise (also for device == peer). */
TPLA_API tpla_status_t tpla_device_peer_access(int *can_access, int device, int peer);

/* ------------------------------------------------------------------------ */
/* Configuration                                                             */
/* ------------------------------------------------------------------------ */

typedef struct {
  size_t size;                 /* sizeof(tpla_config_t); set by the INIT macro */
  int64_t timeout_ms;          /* how long a collective wait may last before
                                  TPLA_ERROR_TIMEOUT (and, on NCCL, an abort
                                  of the communicator); 0 = 300000 (5 min) */
  size_t gemm_workspace_bytes; /* cuBLASLt workspace; 0 = 32 MiB */
} tpla_config_t;
#define TPLA_CONFIG_INIT {sizeof(tpla_config_t), 0, 0}

/* ------------------------------------------------------------------------ */
/* Contexts                                                                  */
/* ------------------------------------------------------------------------ */

typedef struct tpla_ctx *tpla_ctx_t;
typedef struct tpla_host_group *tpla_host_group_t;

typedef enum { TPLA_EXECUTOR_HOST = 0, TPLA_EXECUTOR_CUDA = 1 } tpla_executor_t;

/* NCCL unique id (NCCL_UNIQUE_ID_BYTES = 128), created on one rank and
 * shipped to the others by the caller (MPI_Bcast, a file, torch.distributed). */
typedef struct {
  char internal[128];
} tpla_unique_id_t;

/* ncclGetUniqueId. NOT_SUPPORTED without the CUDA executor. */
TPLA_API tpla_status_t tpla_nccl_get_unique_id(tpla_unique_id_t *id);

/* Create an NCCL communicator of `nranks` ranks on `device` from `id`, so
 * that C callers need no NCCL code. Collective over the ranks. The
 * initialization is non-blocking and polled: if the other ranks do not join
 * within cfg->timeout_ms it is aborted and TPLA_ERROR_TIMEOUT returned.
 * Sets the calling thread's current device to `device`. The caller owns
 * the communicator: destroy it with tpla_nccl_comm_destroy after every
 * context that borrows it. cfg may be NULL. */
TPLA_API tpla_status_t tpla_nccl_comm_create(struct ncclComm **comm, const tpla_unique_id_t *id,
                                             int nranks, int rank, int device,
                                             const tpla_config_t *cfg);
TPLA_API tpla_status_t tpla_nccl_comm_destroy(struct ncclComm *comm);

/* Create a context on the CUDA executor that borrows `comm` (the caller
 * keeps ownership and must keep it alive until tpla_ctx_destroy). Collective
 * over the communicator's ranks: the ranks exchange (rank, nranks, device,
 * tpla version) once and every rank fails with TPLA_ERROR_REMOTE if they
 * disagree (two ranks on one device, mismatched library versions). Must be
 * called with the communicator's device current. Creates the context's
 * side streams, events and cuBLASLt handle; nothing is created per call.
 * cfg may be NULL. */
TPLA_API tpla_status_t tpla_ctx_create_nccl(tpla_ctx_t *ctx, struct ncclComm *comm,
                                            const tpla_config_t *cfg);

/* A group of `nranks` (1..1024) host ranks in this process. Each rank calls
 * tpla_ctx_create_host(&ctx, group, rank, cfg) on its own thread; the
 * contexts then communicate through shared memory. A collective waits at
 * most cfg->timeout_ms for the other ranks; on timeout the group is marked
 * broken and every later collective of every rank fails with
 * TPLA_ERROR_REMOTE, so no rank hangs. Destroy the group after all of its
 * contexts. cfg may be NULL. */
TPLA_API tpla_status_t tpla_host_group_create(tpla_host_group_t *group, int nranks,
                                              const tpla_config_t *cfg);
TPLA_API tpla_status_t tpla_host_group_destroy(tpla_host_group_t group);

/* Create the context of rank `rank` of a host group. Not collective; each
 * rank of the group may create at most one live context. cfg may be NULL. */
TPLA_API tpla_status_t tpla_ctx_create_host(tpla_ctx_t *ctx, tpla_host_group_t group, int rank,
                                            const tpla_config_t *cfg);

/* Release a context and everything it owns. Synchronizes the context's own
 * streams (not the caller's). Accepts NULL. */
TPLA_API tpla_status_t tpla_ctx_destroy(tpla_ctx_t ctx);

/* Rank, number of ranks, executor and CUDA device (-1 on the host) of a
 * context. Any output pointer may be NULL. */
TPLA_API tpla_status_t tpla_ctx_get_info(tpla_ctx_t ctx, int *rank, int *nranks,
                                         tpla_executor_t *executor, int *device);

/* Device (or, on the host executor, host) workspace bytes the context holds
 * now: the GEMM workspace plus any grow-only scratch. */
TPLA_API tpla_status_t tpla_ctx_workspace_bytes(tpla_ctx_t ctx, size_t *bytes);

/* ------------------------------------------------------------------------ */
/* Collectives (on the context's ranks; NCCL or shared host memory)          */
/* ------------------------------------------------------------------------ */
/* Counts are in elements. Buffers are device memory (CUDA executor) or host
 * memory (host executor). All ranks must call each collective in the same
 * order with matching counts, dtypes and roots. Reductions are sums; half
 * types are summed in float. In-place use is allowed where noted. */

/* recv = sum over ranks of send (count elements). send == recv allowed. */
TPLA_API tpla_status_t tpla_allreduce(tpla_ctx_t ctx, void *recv, const void *send, size_t count,
                                      tpla_dtype_t dtype, void *stream);

/* recv (sum of counts elements) = concatenation of every rank's send, rank
 * r contributing counts[r] elements (counts may differ and be 0). counts
 * has nranks entries and must be identical on every rank. In place when
 * send == recv + (counts[0] + ... + counts[rank-1]). */
TPLA_API tpla_status_t tpla_allgatherv(tpla_ctx_t ctx, void *recv, const void *send,
                                       const size_t *counts, tpla_dtype_t dtype, void *stream);

/* send holds sum(counts) elements on every rank; recv (counts[rank]
 * elements) = sum over ranks of the block of send that belongs to this
 * rank. Each rank reduces only its own block. */
TPLA_API tpla_status_t tpla_reduce_scatterv(tpla_ctx_t ctx, void *recv, const void *send,
                                            const size_t *counts, tpla_dtype_t dtype,
                                            void *stream);

/* buf (count elements) on every rank = buf on `root`. */
TPLA_API tpla_status_t tpla_broadcast(tpla_ctx_t ctx, void *buf, size_t count, tpla_dtype_t dtype,
                                      int root, void *stream);

/* Point-to-point exchange: send send_count elements to rank `dst` and
 * receive recv_count elements from rank `src`, as one operation (so a ring
 * shift cannot deadlock). dst = -1 sends nothing, src = -1 receives
 * nothing. dst and src may be the calling rank (a local copy). */
TPLA_API tpla_status_t tpla_sendrecv(tpla_ctx_t ctx, const void *send, size_t send_count,
                                     int dst, void *recv, size_t recv_count, int src,
                                     tpla_dtype_t dtype, void *stream);

/* Returns once every rank has reached the barrier (host), or orders the
 * stream after every rank's earlier work on it (CUDA: a tiny all-reduce). */
TPLA_API tpla_status_t tpla_barrier(tpla_ctx_t ctx, void *stream);

/* ------------------------------------------------------------------------ */
/* Local GEMM                                                                */
/* ------------------------------------------------------------------------ */

typedef struct {
  size_t size;      /* sizeof(tpla_gemm_args_t); set by the INIT macro */
  float alpha;      /* D = alpha * op(A) op(B) + beta * D */
  float beta;       /* beta = 1 accumulates (wgrad into an fp32 main grad) */
  int allow_tf32;   /* fp32 inputs only: 1 lets the tensor cores use TF32 */
} tpla_gemm_args_t;
#define TPLA_GEMM_ARGS_INIT {sizeof(tpla_gemm_args_t), 1.0f, 0.0f, 0}

/* D (m x n) = alpha * op(A) op(B) + beta * D on this rank alone, where
 * op(A) is m x k and op(B) is k x n; every matrix row-major with its own
 * leading dimension. A and B have the same dtype (fp32, fp16 or bf16); D
 * has that dtype or fp32. Products accumulate in fp32. k = 0 gives
 * D = beta * D. D must not overlap A or B. args may be NULL (alpha 1,
 * beta 0). CUDA: cuBLASLt on `stream`; the algorithm is chosen once per
 * shape and cached in the context; the workspace is the context's. Host:
 * BLAS (sgemm on fp32 copies for half types). */
TPLA_API tpla_status_t tpla_gemm(tpla_ctx_t ctx, tpla_matrix_t d, tpla_matrix_t a, tpla_op_t op_a,
                                 tpla_matrix_t b, tpla_op_t op_b, const tpla_gemm_args_t *args,
                                 void *stream);

#ifdef __cplusplus
}
#endif
#endif /* TPLA_H */
