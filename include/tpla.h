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

/* ------------------------------------------------------------------------ */
/* Newton-Schulz orthogonalization (distributed)                             */
/* ------------------------------------------------------------------------ */
/* Approximates the polar factor U V^T of a global m x n matrix X = U S V^T
 * whose rows (or columns) are sharded across the context's ranks. X is
 * first divided by (safety * ||X||_F + eps), then each step applies
 *   X <- a X + b (X X^T) X + c (X X^T)^2 X
 * with one (a, b, c) triple per step; internally the Gram matrix of the
 * SHORT dimension is used (X X^T when m <= n, X^T X otherwise). Each step
 * maps every singular value sigma to a sigma + b sigma^3 + c sigma^5.
 * Inputs are fp32, fp16 or bf16; products accumulate in fp32.
 * See docs/ALGORITHMS.md for the algorithms and the cost model. */

/* Which dimension of the global matrix is split across ranks. */
typedef enum {
  TPLA_SHARD_ROWS = 0, /* rank r holds rows [o_r, o_r + local_rows) of X  */
  TPLA_SHARD_COLS = 1  /* rank r holds columns [o_r, o_r + local_cols)    */
} tpla_shard_t;

/* Coefficient sets. A schedule shorter than `steps` repeats its last triple. */
typedef enum {
  TPLA_NS_MUON = 0,            /* (3.4445, -4.7750, 2.0315) every step        */
  TPLA_NS_MUON_SCHEDULE5 = 1,  /* the 5-step quintic schedule of DESIGN.md    */
  TPLA_NS_POLAR_EXPRESS = 2,   /* Polar Express, degree 5 (Amsel et al. 2025),
                                  8 published triples; default safety 1.01 */
  TPLA_NS_CUBIC = 3,           /* (1.5, -0.5, 0): classic Newton-Schulz      */
  TPLA_NS_USER = 4             /* desc.coefficients: exactly 3 * steps floats */
} tpla_ns_preset_t;

typedef enum {
  TPLA_NS_ALGO_AUTO = 0,           /* chosen by the cost model                */
  TPLA_NS_ALGO_GRAM_ALLREDUCE = 1, /* sum of local Grams of the non-sharded
                                      dimension, one all-reduce per step      */
  TPLA_NS_ALGO_REDISTRIBUTE = 2,   /* all-to-all to the other sharding, Gram
                                      all-reduce there, all-to-all back       */
  TPLA_NS_ALGO_GATHER = 3,         /* gather X on every rank, NS redundantly,
                                      keep the own shard                      */
  TPLA_NS_ALGO_LOCAL = 4           /* one rank: no communication              */
} tpla_ns_algorithm_t;

typedef struct {
  size_t size;                  /* sizeof(tpla_ns_desc_t); set by the INIT macro */
  tpla_shard_t shard;           /* which global dimension is split            */
  int64_t local_rows;           /* this rank's shard; the non-sharded size must */
  int64_t local_cols;           /* be equal on all ranks, the sharded one may  */
                                /* differ and be 0 (global size: the sum)      */
  tpla_dtype_t dtype;           /* TPLA_FLOAT32, TPLA_FLOAT16 or TPLA_BFLOAT16 */
  int steps;                    /* 1..1000                                    */
  tpla_ns_preset_t preset;      /* coefficient set                            */
  const float *coefficients;    /* TPLA_NS_USER: a0 b0 c0 a1 b1 c1 ... (copied) */
  size_t ncoefficients;         /* TPLA_NS_USER: must be 3 * steps; else 0    */
  float eps;                    /* >= 0, added to the scaled norm (1e-7)      */
  float safety;                 /* > 0, or 0 for the preset's default: 1.01 for
                                   Polar Express (which also divides a, b, c of
                                   all but its last triple by s, s^3, s^5, as
                                   published), 1 otherwise                    */
  tpla_dtype_t gram_dtype;      /* TPLA_FLOAT32 (default) or `dtype`: precision
                                   of the Gram matrix, its square and their
                                   all-reduce                                 */
  tpla_ns_algorithm_t algorithm;
} tpla_ns_desc_t;
#define TPLA_NS_DESC_INIT                                                                  \
  {sizeof(tpla_ns_desc_t), TPLA_SHARD_ROWS, 0, 0, TPLA_FLOAT32, 5, TPLA_NS_MUON, NULL, 0, \
   1e-7f, 0.0f, TPLA_FLOAT32, TPLA_NS_ALGO_AUTO}

typedef struct tpla_ns_plan *tpla_ns_plan_t;

/* Create a Newton-Schulz plan for this rank's shard described by *desc.
 * Collective over the context's ranks: every rank must call it (in the same
 * order as its other collectives). The ranks exchange a summary of their
 * descriptors once, so every rank learns all shard sizes; the plan then
 * chooses the algorithm (desc->algorithm, or the cost model for AUTO),
 * allocates its workspace with the executor and precomputes everything
 * execute needs. Nothing is allocated later.
 * Errors (*plan is set to NULL):
 *   INVALID_ARGUMENT  this rank's arguments are bad: NULL plan/ctx/desc, a
 *                     wrong size field, an unknown enum, a dtype other than
 *                     fp32/fp16/bf16, a gram_dtype other than fp32 or dtype,
 *                     negative sizes, a global size of 0, steps out of range,
 *                     a coefficient count that is not 3 * steps, non-finite
 *                     coefficients, eps < 0, safety < 0, LOCAL with > 1 rank.
 *   REMOTE            another rank rejected its arguments, or the ranks
 *                     disagree (shard dimension, non-sharded size, dtype,
 *                     gram_dtype, steps, coefficients, eps, safety,
 *                     algorithm); every rank gets the same message naming
 *                     the first disagreeing rank and field.
 *   OUT_OF_MEMORY     the workspace could not be allocated.
 *   TIMEOUT/NCCL/...  the exchange failed. */
TPLA_API tpla_status_t tpla_ns_plan_create(tpla_ns_plan_t *plan, tpla_ctx_t ctx,
                                           const tpla_ns_desc_t *desc);
/* Release a plan and its workspace. Not collective. Accepts NULL. The
 * context must outlive its plans. Always SUCCESS. */
TPLA_API tpla_status_t tpla_ns_plan_destroy(tpla_ns_plan_t plan);
/* Executor memory (device or host) the plan holds, in bytes; fixed for the
 * plan's life. INVALID_ARGUMENT for a NULL argument (as for the next). */
TPLA_API tpla_status_t tpla_ns_plan_workspace_bytes(tpla_ns_plan_t plan, size_t *bytes);
/* The algorithm the plan runs (never AUTO; LOCAL on one rank). */
TPLA_API tpla_status_t tpla_ns_plan_algorithm(tpla_ns_plan_t plan,
                                              tpla_ns_algorithm_t *algorithm);

/* Orthogonalize this rank's shard x in place. Collective: every rank of the
 * plan calls it with its own shard. x must have the plan's local shape and
 * dtype; its ld may exceed cols. Enqueued on `stream` (CUDA; returns without
 * waiting for the device) or completed before returning (host). Nothing is
 * allocated. A rank that rejects its arguments does not join the
 * collective, so the other ranks' calls then fail with TIMEOUT or REMOTE.
 * Errors: INVALID_ARGUMENT (NULL plan, x not a valid view, wrong shape or
 * dtype; x untouched), REMOTE/TIMEOUT/CUDA/NCCL/CUBLAS from the executor
 * (x then holds unspecified values). */
TPLA_API tpla_status_t tpla_ns_execute(tpla_ns_plan_t plan, tpla_matrix_t x, void *stream);
/* Same, but writes the result to `out` (same shape and dtype as x, any
 * ld >= cols) and leaves x unchanged. out may be x itself (same data and
 * ld: in place) but must not otherwise overlap it (INVALID_ARGUMENT). */
TPLA_API tpla_status_t tpla_ns_execute_out(tpla_ns_plan_t plan, tpla_matrix_t out,
                                           tpla_matrix_t x, void *stream);

/* Batched Newton-Schulz: a list of `count` differently shaped sharded
 * matrices orthogonalized by one call, e.g. every layer of an optimizer
 * step. Collective, like tpla_ns_plan_create (count must agree too). For
 * matrices whose desc->algorithm is AUTO the plan compares, with the cost
 * model, running each matrix's distributed plan in turn against assigning
 * whole matrices to ranks (balanced by FLOPs), moving each matrix to its
 * owner with one all-to-all, orthogonalizing it there and sending the result
 * back with one all-to-all; it takes the cheaper. desc->algorithm = LOCAL
 * forces a matrix to one owner (allowed here with any number of ranks); any
 * other forced algorithm runs that matrix distributed. The matrices may
 * differ in shape, sharding, dtype, steps and coefficients. One workspace
 * serves the whole batch.
 * Errors: as tpla_ns_plan_create, naming the matrix ("descs[3]");
 * INVALID_ARGUMENT for a count outside 1..65536 or NULL descs; REMOTE when
 * the ranks' counts differ. */
typedef struct tpla_ns_batch_plan *tpla_ns_batch_plan_t;
TPLA_API tpla_status_t tpla_ns_batch_plan_create(tpla_ns_batch_plan_t *plan, tpla_ctx_t ctx,
                                                 int count, const tpla_ns_desc_t *descs);
/* Accepts NULL; always SUCCESS. */
TPLA_API tpla_status_t tpla_ns_batch_plan_destroy(tpla_ns_batch_plan_t plan);
/* The batch's one workspace, in bytes. INVALID_ARGUMENT for NULL. */
TPLA_API tpla_status_t tpla_ns_batch_plan_workspace_bytes(tpla_ns_batch_plan_t plan,
                                                          size_t *bytes);
/* *owner = the rank that orthogonalizes matrix `index` whole, or -1 when it
 * runs distributed. INVALID_ARGUMENT for an index out of range. */
TPLA_API tpla_status_t tpla_ns_batch_plan_owner(tpla_ns_batch_plan_t plan, int index,
                                                int *owner);
/* Orthogonalize xs[0..count) (this rank's shards, each as in
 * tpla_ns_execute) in place. Collective. All views are validated before
 * anything is written: INVALID_ARGUMENT (NULL plan or xs, a bad view,
 * naming its index, or two views that share memory); then the executor's
 * statuses as for tpla_ns_execute. */
TPLA_API tpla_status_t tpla_ns_batch_execute(tpla_ns_batch_plan_t plan, const tpla_matrix_t *xs,
                                             void *stream);

#ifdef __cplusplus
}
#endif
#endif /* TPLA_H */
