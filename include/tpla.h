/*
 * tpla.h - the public C API of tpla, tensor-parallel linear algebra on GPUs.
 *
 * tpla orthogonalizes sharded matrices (distributed Newton-Schulz, the core
 * of the Muon optimizer) and overlaps tensor-parallel communication with
 * GEMMs. Every operation runs on a context (one per rank) backed by one of
 * two executors:
 *   - the CUDA executor: NCCL for communication, cuBLASLt for GEMMs, work
 *     enqueued on the caller's cudaStream_t;
 *   - the host executor: N threads of one process (or N processes of one
 *     machine, tpla_host_group_create_shared) act as N ranks, host
 *     memory, BLAS GEMMs. It runs the same algorithms on the CPU so that
 *     every schedule is tested without a GPU.
 *
 * Conventions
 *   - Every function returns a tpla_status_t. On failure, tpla_last_error()
 *     returns a message (thread-local) naming the function, the argument and
 *     the shapes involved. A rejected call writes none of its outputs (a
 *     plan constructor sets *plan to NULL, as each says).
 *   - Outputs come before inputs; the stream comes last. A stream argument
 *     is a cudaStream_t passed as void* (NULL is the legacy default stream);
 *     the host executor ignores it and completes the call before returning.
 *   - Matrices are row-major views (tpla_matrix_t); `ld` is the distance in
 *     elements between the starts of consecutive rows and may exceed `cols`.
 *   - CUDA graphs: tpla_gemm, tpla_ns_execute(_out), tpla_ns_batch_execute,
 *     the collectives and the overlapped calls may be captured from the
 *     stream argument (any capture mode; several threads capturing: not
 *     global). Create contexts and plans, and make each call once, outside
 *     the capture first. A graph replays the calls as they were enqueued, on
 *     the same buffers, the plan's and the context's included: launch it in
 *     stream order with the context's other work, not beside it. A plan
 *     whose calls travel over the PEER transport between two or more ranks
 *     cannot be captured (INVALID_USAGE: each call's flags carry its
 *     number; overlap plans with SENDRECV or SERIAL can, and NS plans made
 *     with gram_sum TPLA_NS_GRAM_SUM_COLLECTIVE).
 *     Captured calls are not watched for timeouts. docs/API.md, "CUDA graphs".
 *   - *_destroy functions accept NULL.
 *   - Enumerations only grow at the end; struct arguments carry their size
 *     and must be initialized with their *_INIT macro.
 *
 * Threading: a context is used by one thread at a time, and creating or
 * destroying one of its plans counts as using it (a plan of a workspace or
 * window group changes the group's state). Different contexts (and so
 * different ranks of a host group, each on its own thread) may be used
 * concurrently.
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
  TPLA_ERROR_INTERNAL = 10,
  TPLA_ERROR_ABORTED = 11          /* tpla_ctx_abort was called on the context */
} tpla_status_t;

/* Name of a status, e.g. "TPLA_ERROR_INVALID_ARGUMENT". Never NULL. */
TPLA_API const char *tpla_status_string(tpla_status_t status);

/* Detail of the last failure on the calling thread: function, argument and
 * shapes, e.g. "tpla_gemm: argument 'a': ld (3) < max(cols, 1) (4)". Empty string
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
  TPLA_UINT8 = 4,    /* raw bytes: collectives that do not reduce */
  TPLA_FLOAT8_E4M3 = 5, /* OCP FP8 E4M3 (finite max 448, NaN, no infinity): GEMMs */
  TPLA_FLOAT8_E5M2 = 6  /* OCP FP8 E5M2 (finite max 57344, IEEE-like): GEMMs */
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
  int mxfp8;                /* block-scaled FP8 GEMMs: 0 (tpla implements none yet) */
  int cuda_runtime_version; /* cudaRuntimeGetVersion, e.g. 13000 */
  int cuda_driver_version;  /* cudaDriverGetVersion */
  int nccl_version;         /* ncclGetVersion, e.g. 22803 */
  size_t cublaslt_version;  /* cublasLtGetVersion */
  char device_name[96];
} tpla_features_t;
#define TPLA_FEATURES_INIT {sizeof(tpla_features_t), 0, 0, 0, -1, 0, 0, 0, 0, 0, 0, 0, 0, {0}}

/* Fill *features for `device` (a CUDA ordinal; -1 for build features
 * only). Without a GPU or a CUDA build, device fields read 0 and
 * device_count 0: this is not an error. Errors: INVALID_ARGUMENT for a NULL
 * pointer, a wrong size field, a device < -1 or a device >= device_count. */
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
                                  of the communicator), host-side or, for a
                                  call waiting on the device, as seen by the
                                  context's watchdog (tpla_ctx_abort);
                                  0 = 300000 (5 min); values above 2^50
                                  (35,000 years) are taken as 2^50 */
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
 * The timeouts (cfg->timeout_ms) bound host waits only on a non-blocking
 * communicator (NCCL's config blocking = 0, as tpla_nccl_comm_create makes
 * them): on a blocking one an NCCL call that waits for a missing peer
 * blocks inside NCCL. A timeout or tpla_ctx_abort aborts the communicator
 * (ncclCommAbort), so use it for nothing else while a context borrows it
 * (an ncclCommSplit child serves other work). cfg may be NULL. */
TPLA_API tpla_status_t tpla_ctx_create_nccl(tpla_ctx_t *ctx, struct ncclComm *comm,
                                            const tpla_config_t *cfg);

/* A group of `nranks` (1..1024) host ranks in this process. Each rank calls
 * tpla_ctx_create_host(&ctx, group, rank, cfg) on its own thread; the
 * contexts then communicate through shared memory. A collective waits at
 * most the rank's context timeout for the other ranks (the cfg given to
 * tpla_ctx_create_host, else this cfg->timeout_ms); on timeout the group is marked
 * broken and every later collective of every rank fails with
 * TPLA_ERROR_REMOTE, so no rank hangs. Destroy the group after all of its
 * contexts. cfg may be NULL. */
TPLA_API tpla_status_t tpla_host_group_create(tpla_host_group_t *group, int nranks,
                                              const tpla_config_t *cfg);
TPLA_API tpla_status_t tpla_host_group_destroy(tpla_host_group_t group);

/* A host group whose ranks are PROCESSES of one machine (e.g. the ranks of
 * a torch.distributed gloo group), joined through a POSIX shared-memory
 * segment called `name`: 1 to 200 characters of [A-Za-z0-9._-] after an
 * optional leading '/', unique per group (e.g. a random token that rank 0
 * sends to the others). Each of the `nranks` processes calls it once with
 * its own `rank`; collective: rank 0 creates the segment, the others attach
 * (waiting for it to appear), and every call returns once all nranks have
 * attached, or TIMEOUT after cfg->timeout_ms. Rank 0 then unlinks the name,
 * so nothing is left in /dev/shm when the processes exit, crashed or not;
 * a segment left by a crashed earlier run under the same name is replaced,
 * one held by a live group is refused (INVALID_USAGE).
 * The process then creates its one context with tpla_ctx_create_host(&ctx,
 * group, rank, cfg) (the same rank; INVALID_ARGUMENT for another). Every
 * collective and plan works as on a thread group, with the same results
 * bit for bit; data moves through per-rank staging areas in the segment
 * (1 MiB each, in chunks; TPLA_SHM_STAGING_BYTES in rank 0's environment
 * changes it, for tests), never through the peers' own buffers. Overlap
 * plans resolve TPLA_TRANSPORT_AUTO to SENDRECV; PEER is NOT_SUPPORTED.
 * Failures: as a thread group, and a peer process that exits or dies is
 * noticed within about 50 ms by the ranks waiting for it (the group breaks:
 * REMOTE); where the processes are in different pid namespaces (containers
 * sharing /dev/shm) pids cannot be checked, and such a death shows as
 * TIMEOUT after cfg.timeout_ms. Destroy with tpla_host_group_destroy
 * after the context (it unmaps the segment). Errors: INVALID_ARGUMENT
 * (NULL pointers, a bad name, nranks or rank, nranks differing from rank
 * 0's), INVALID_USAGE (the name is in use, the rank is taken, shm_open
 * failed), OUT_OF_MEMORY (/dev/shm full), TIMEOUT, REMOTE. Linux only. */
TPLA_API tpla_status_t tpla_host_group_create_shared(tpla_host_group_t *group, const char *name,
                                                     int nranks, int rank,
                                                     const tpla_config_t *cfg);

/* Create the context of rank `rank` of a host group. Not collective; each
 * rank of the group may create at most one live context. cfg may be NULL. */
TPLA_API tpla_status_t tpla_ctx_create_host(tpla_ctx_t *ctx, tpla_host_group_t group, int rank,
                                            const tpla_config_t *cfg);

/* Release a context and everything it owns. Synchronizes the context's own
 * streams (not the caller's). On the CUDA executor with 2 or more ranks it
 * first waits for its calls in flight to end, at most until the watchdog
 * times a stuck one out (cfg->timeout_ms) and aborts the context, so that
 * a peer that never comes cannot hang it. Accepts NULL. */
TPLA_API tpla_status_t tpla_ctx_destroy(tpla_ctx_t ctx);

/* Rank, number of ranks, executor and CUDA device (-1 on the host) of a
 * context. Any output pointer may be NULL. */
TPLA_API tpla_status_t tpla_ctx_get_info(tpla_ctx_t ctx, int *rank, int *nranks,
                                         tpla_executor_t *executor, int *device);

/* Device (or, on the host executor, host) workspace bytes the context holds
 * now: the GEMM workspace plus any grow-only scratch, including earlier
 * scratch kept for captured CUDA graphs until the context is destroyed. */
TPLA_API tpla_status_t tpla_ctx_workspace_bytes(tpla_ctx_t ctx, size_t *bytes);

/* Abort the context, so that a job whose peer died or hangs reports an
 * error instead of hanging: every call of this rank that is queued or
 * running ends early, and so do the other ranks' calls that wait for this
 * rank. Callable from any thread, also while another thread is inside a
 * call on the context or waits for a stream; returns once the waits are
 * released (the device may still be draining the calls). In detail:
 *  - CUDA executor: the device-side waits of the overlap and pulled
 *    Newton-Schulz plans are released, the borrowed communicator is aborted
 *    (ncclCommAbort: do not use it again; tpla_nccl_comm_destroy of it is
 *    then a no-op), and this rank is marked aborted in the flags of every
 *    peer it shares a PEER transport with, so that the peer's watchdog
 *    aborts the peer's context (TPLA_ERROR_REMOTE) once a call of the peer
 *    has run for 100 ms (as one waiting for this rank does).
 *  - host executor: the group breaks, so every rank's waits end with
 *    TPLA_ERROR_REMOTE.
 * The outputs of the calls in flight, on every rank, are undefined. Every
 * later call on the context or its plans fails with the context's failure
 * (tpla_ctx_get_async_error); queries and the destroy functions still
 * work: destroy the plans and the context on every rank, then build new ones
 * (on a new communicator). Destroy them only once every rank's streams have
 * drained (synchronize them, then agree out of band, e.g. a barrier of the
 * launcher): the released calls of a peer still running may write into this
 * rank's windows and flags, which the destroy frees. Aborting a context
 * that already failed does nothing. The CUDA executor's watchdog calls this
 * itself when a call has waited on the device for longer than
 * cfg.timeout_ms (see below). */
TPLA_API tpla_status_t tpla_ctx_abort(tpla_ctx_t ctx);

/* TPLA_SUCCESS while the context works; otherwise why it stopped, with
 * tpla_last_error() saying more. Cheap; poll it like
 * ncclCommGetAsyncError, e.g. after a stream synchronization.
 *  ABORTED  tpla_ctx_abort was called on this rank;
 *  TIMEOUT  the watchdog (CUDA executor, contexts of 2 or more ranks: a
 *           thread that polls the events around each call) found a call
 *           that had been running on the device for longer than
 *           cfg.timeout_ms, as when a peer never makes its matching call,
 *           and aborted the context;
 *  REMOTE   another rank aborted (CUDA: its mark in this rank's flags,
 *           seen by the watchdog; host: the group broke);
 *  NCCL     NCCL reported an asynchronous error on the communicator;
 *  CUDA     the device reported an error to the watchdog.
 * On TIMEOUT and REMOTE the message ends with each PEER transport's flag
 * words as this rank saw them ("ready from rank q: N" is the last call q
 * announced, "step flags" the calls whose chunks arrived): the words below
 * the stuck call's number say what it still waited for. */
TPLA_API tpla_status_t tpla_ctx_get_async_error(tpla_ctx_t ctx);

/* ------------------------------------------------------------------------ */
/* Collectives (on the context's ranks; NCCL or shared host memory)          */
/* ------------------------------------------------------------------------ */
/* Counts are in elements. Buffers are device memory (CUDA executor) or host
 * memory (host executor). All ranks must call each collective in the same
 * order with matching counts, dtypes and roots. Reductions are sums; half
 * types are summed in float. In-place use is allowed where noted. A call
 * with nothing to move (count 0, counts that sum to 0, tpla_sendrecv with
 * dst = src = -1) is a local no-op, as in NCCL: it is not matched with the
 * other ranks' calls, and on a failed context it returns the failure. */

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
 * nothing. dst and src may both be the calling rank (a local copy of equal
 * counts, which may be in place: recv == send); one alone may not. send and
 * recv must not overlap otherwise. When the peers disagree (a count or the
 * dtype), both calls fail with TPLA_ERROR_REMOTE and recv may already hold
 * the message received from src. */
TPLA_API tpla_status_t tpla_sendrecv(tpla_ctx_t ctx, const void *send, size_t send_count,
                                     int dst, void *recv, size_t recv_count, int src,
                                     tpla_dtype_t dtype, void *stream);

/* Returns once every rank has reached the barrier (host), or orders the
 * stream after every rank's earlier work on it (CUDA: a tiny all-reduce). */
TPLA_API tpla_status_t tpla_barrier(tpla_ctx_t ctx, void *stream);

/* ------------------------------------------------------------------------ */
/* Local GEMM                                                                */
/* ------------------------------------------------------------------------ */

/* FP8 GEMMs (A and B TPLA_FLOAT8_E4M3 or _E5M2; not both E5M2): per-tensor
 * scales, each a pointer to one float in executor memory (device memory on
 * CUDA), read when the GEMM runs, so they may be produced on the stream:
 *   D = d_scale * (alpha * a_scale * b_scale * op(A) op(B) + beta * D)
 * a_scale and b_scale dequantize the stored inputs (NULL: 1). d_scale
 * quantizes an FP8 output (NULL: 1; only for an FP8 D). d_amax, if not
 * NULL, receives max |alpha a_scale b_scale op(A) op(B) + beta D| before
 * d_scale (the amax recipes track; 0 for an empty D; for a bf16/fp16/fp32 D
 * on CUDA taken over the stored D, after its rounding). On the CUDA executor
 * the four pointers must be 16-byte aligned (cuBLASLt rejects others; a
 * float array of scales needs a stride of TPLA_FP8_SCALE_STRIDE floats, as
 * below).
 * An FP8 D needs beta = 0. Products
 * always accumulate in fp32 registers; the accumulation mode says how
 * often the tensor cores' partial sums are promoted into them: */
#define TPLA_FP8_SCALE_STRIDE 4 /* floats: 16 bytes between scales in an array */

typedef enum {
  TPLA_FP8_ACCUM_SPLIT = 0, /* promote often (cuBLASLt without FAST_ACCUM): backward, default */
  TPLA_FP8_ACCUM_FAST = 1   /* keep the tensor cores' partial sums (FAST_ACCUM): forward */
} tpla_fp8_accum_t;

/* How the scales apply. MXFP8 (one E8M0 scale per 32 consecutive K
 * elements) is a Blackwell (compute capability >= 100) cuBLASLt feature that
 * tpla does not implement: every FP8 entry point returns
 * TPLA_ERROR_NOT_SUPPORTED for it on every device and executor, saying why;
 * tpla_features_t.mxfp8 is 0. */
typedef enum {
  TPLA_FP8_SCALE_TENSOR = 0, /* one float per tensor */
  TPLA_FP8_SCALE_MXFP8 = 1   /* block scaling (not supported) */
} tpla_fp8_scale_mode_t;

/* FP8 scaling of one GEMM, as above. */
typedef struct {
  const float *a_scale;
  const float *b_scale;
  const float *d_scale;
  float *d_amax;
  tpla_fp8_accum_t accum;
  tpla_fp8_scale_mode_t scale_mode;
} tpla_fp8_scaling_t;
#define TPLA_FP8_SCALING_INIT                                                             \
  {NULL, NULL, NULL, NULL, TPLA_FP8_ACCUM_SPLIT, TPLA_FP8_SCALE_TENSOR}

typedef struct {
  size_t size;      /* sizeof(tpla_gemm_args_t); set by the INIT macro */
  float alpha;      /* D = alpha * op(A) op(B) + beta * D */
  float beta;       /* beta = 1 accumulates (wgrad into an fp32 main grad) */
  int allow_tf32;   /* fp32 inputs only: 1 lets the tensor cores use TF32 */
  tpla_fp8_scaling_t fp8; /* FP8 inputs only; must stay TPLA_FP8_SCALING_INIT otherwise */
} tpla_gemm_args_t;
#define TPLA_GEMM_ARGS_INIT {sizeof(tpla_gemm_args_t), 1.0f, 0.0f, 0, TPLA_FP8_SCALING_INIT}

/* D (m x n) = alpha * op(A) op(B) + beta * D on this rank alone, where
 * op(A) is m x k and op(B) is k x n; every matrix row-major with its own
 * leading dimension. A and B have the same dtype (fp32, fp16 or bf16); D
 * has that dtype or fp32. Products accumulate in fp32. FP8: A and B are
 * E4M3/E5M2 (mixed allowed, not both E5M2), D is bf16, fp16, fp32, E4M3
 * or E5M2 (E5M2 only with an E5M2 input: cuBLASLt has no E4M3 x E4M3 ->
 * E5M2, NOT_SUPPORTED on every executor), scaled as args->fp8 says; any op_a/op_b (Hopper's FP8 tensor
 * cores take only K-contiguous operands: the library transposes the others
 * into its grow-only scratch, no caller copy needed; the scratch cannot
 * grow while `stream` is captured, INVALID_USAGE then). A captured call's
 * cuBLASLt workspace is the context's: launch its graph in stream order with
 * the context's other GEMMs (see CUDA graphs above). Host: FP8 is emulated
 * (decode, fp32 math, round to the FP8 output with saturation). k = 0 gives
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
 * first divided by (safety * ||X||_F + eps) (X = 0 with eps = 0 gives
 * zeros, as with eps > 0), then each step applies
 *   X <- a X + b (X X^T) X + c (X X^T)^2 X
 * with one (a, b, c) triple per step; internally the Gram matrix of the
 * SHORT dimension is used (X X^T when m <= n, X^T X otherwise), but for
 * GRAM_ALLREDUCE, whose Gram is the non-sharded dimension's even where that
 * is the long side (the same map, at that side's cost; AUTO takes it there
 * only for nearly square matrices, where it costs less than redistributing). Each step
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
  TPLA_NS_MUON_SCHEDULE5 = 1,  /* 5 quintic steps: (4.0848, -6.8946, 2.9270)
                                  (3.9505, -6.3029, 2.6377) (3.7418, -5.5913,
                                  2.3037) (2.8769, -3.1427, 1.2046) (2.8366,
                                  -3.0525, 1.2012)                           */
  TPLA_NS_POLAR_EXPRESS = 2,   /* Polar Express, degree 5 (Amsel et al. 2025),
                                  8 published triples; default safety 1.01 */
  TPLA_NS_CUBIC = 3,           /* (1.5, -0.5, 0): classic Newton-Schulz      */
  TPLA_NS_USER = 4             /* desc.coefficients: exactly 3 * steps floats */
} tpla_ns_preset_t;

typedef enum {
  TPLA_NS_ALGO_AUTO = 0,           /* chosen by the cost model                */
  TPLA_NS_ALGO_GRAM_ALLREDUCE = 1, /* sum of local Grams of the non-sharded
                                      dimension, one all-reduce per step
                                      (AUTO takes it where that is the short
                                      side, or nearly so)                     */
  TPLA_NS_ALGO_REDISTRIBUTE = 2,   /* all-to-all to the other sharding, Gram
                                      all-reduce there, all-to-all back       */
  TPLA_NS_ALGO_GATHER = 3,         /* gather X on every rank, NS redundantly,
                                      keep the own shard                      */
  TPLA_NS_ALGO_LOCAL = 4,          /* one rank: no communication              */
  TPLA_NS_ALGO_GRAM_SHARDED = 5    /* Gram all-reduce of the short side (after
                                      REDISTRIBUTE's all-to-all when the short
                                      side is the sharded one); each rank
                                      computes only its block rows of the
                                      polynomial b G + c G^2 (with
                                      TPLA_NS_ITERATE_GRAM: of every s x s
                                      product), all-gathered                  */
} tpla_ns_algorithm_t;

/* What the steps iterate on. X: every step forms the Gram of X and updates X
 * (the reference iteration). GRAM: every second step only; in between, the
 * step polynomials are applied to the Gram matrix (s x s, s the short side)
 * and X is updated once per pair of steps (one polynomial of degree 25 for
 * the Muon quintic): fewer FLOPs when the long side exceeds the short one by
 * more than ~15%, the same polynomial map up to rounding. Restarting from X
 * every two steps keeps its rounding error at the X iteration's level
 * (bench/ns_gram_iteration_study.py) when the Gram is the short side's;
 * forced onto the long side's Gram (GRAM with GRAM_ALLREDUCE on a wide
 * rows-sharded matrix, or with REDISTRIBUTE on a tall one; AUTO never picks
 * that pair) with fp16/bf16 input, the update operand rounded to the input
 * type costs accuracy: 5-14x the X iteration's error measured at 1x53 to
 * 16x128 (review 94). With TPLA_NS_ALGO_GRAM_SHARDED every
 * s x s product is split across the ranks; AUTO takes that pair only on two
 * ranks whose Gram sums are pulls (tpla_ns_gram_sum_t; measured on 2 H200s,
 * docs/ALGORITHMS.md), otherwise it runs only when both are asked for.
 * AUTO (default): the one the cost model finds faster for the plan's shape,
 * ranks, algorithm and Gram dtype (measured on 1 and 2 H200s: GRAM for
 * rectangular matrices with a bf16 Gram, X for square ones; the model can
 * differ elsewhere); tpla_ns_plan_iteration says which. With a half Gram and
 * a steep table (a step with |a| + |b| + |c| > 16: Polar Express's first)
 * AUTO keeps X: GRAM applies two steps to one rounded Gram, and after a steep
 * step that can diverge (NaN) on low-stable-rank inputs, which a forced GRAM
 * then risks (docs/ALGORITHMS.md). */
typedef enum {
  TPLA_NS_ITERATE_X = 0,
  TPLA_NS_ITERATE_GRAM = 1,
  TPLA_NS_ITERATE_AUTO = 2 /* TPLA_NS_DESC_INIT's */
} tpla_ns_iteration_t;

/* How a plan of two ranks sums the distributed Gram (and exchanges
 * GRAM_SHARDED's products). AUTO: by copy-engine pulls on the PEER
 * transport where the ranks' GPUs map each other's memory (unless
 * TPLA_NS_GRAM_SUM=nccl is set on a rank), else by the executor's
 * all-reduce. COLLECTIVE: by the executor's all-reduce (NCCL) always: the
 * plan's calls can then be captured in CUDA graphs, which a plan with pulls
 * refuses. A rank that asks for COLLECTIVE makes every rank's plan
 * collective; the value need not agree. Other rank counts ignore it. */
typedef enum {
  TPLA_NS_GRAM_SUM_AUTO = 0, /* TPLA_NS_DESC_INIT's */
  TPLA_NS_GRAM_SUM_COLLECTIVE = 1
} tpla_ns_gram_sum_t;

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
                                   all-reduce (fp32 of a half input: products
                                   past 256 x 256 read 11-bit operands,
                                   docs/ALGORITHMS.md "Precision")            */
  tpla_ns_algorithm_t algorithm;
  tpla_ns_iteration_t iteration; /* TPLA_NS_ITERATE_AUTO (default), _X, _GRAM */
  tpla_ns_gram_sum_t gram_sum;   /* TPLA_NS_GRAM_SUM_AUTO (default), _COLLECTIVE */
  int workspace_group;           /* 0 (default): a workspace of the plan's own.
                                    g > 0: one workspace shared with the context's
                                    other plans in group g, at the largest size a
                                    member has needed (it never shrinks), so that
                                    a layer stack pays for it once. The group's
                                    calls must be one sequence, each after the
                                    previous in stream order (one stream, or the
                                    caller orders them). A member that needs more
                                    moves the group to a larger workspace and
                                    frees the old one, which a captured call may
                                    still use: create every member before
                                    capturing any of the group's calls in a CUDA
                                    graph. Creating a member that grows the group
                                    or pulls its Gram sums waits until the device
                                    has finished its work in flight. Need not
                                    agree across ranks; must be 0 in a batch */
} tpla_ns_desc_t;
#define TPLA_NS_DESC_INIT                                                                  \
  {sizeof(tpla_ns_desc_t), TPLA_SHARD_ROWS, 0, 0, TPLA_FLOAT32, 5, TPLA_NS_MUON, NULL, 0, \
   1e-7f, 0.0f, TPLA_FLOAT32, TPLA_NS_ALGO_AUTO, TPLA_NS_ITERATE_AUTO, TPLA_NS_GRAM_SUM_AUTO, 0}

typedef struct tpla_ns_plan *tpla_ns_plan_t;

/* Create a Newton-Schulz plan for this rank's shard described by *desc.
 * Collective over the context's ranks: every rank must call it (in the same
 * order as its other collectives). The ranks exchange a summary of their
 * descriptors once, so every rank learns all shard sizes; the plan then
 * chooses the algorithm (desc->algorithm, or the cost model for AUTO),
 * allocates its workspace with the executor and precomputes everything
 * execute needs. Nothing is allocated later. With two ranks whose GPUs map
 * each other's memory, the distributed Gram is summed (and GRAM_SHARDED's
 * products exchanged) by copy-engine pulls, and AUTO chooses for them
 * (desc->gram_sum COLLECTIVE, or TPLA_NS_GRAM_SUM=nccl, on any rank: NCCL's
 * collectives instead; a value
 * other than pull or nccl is INVALID_ARGUMENT; where the GPUs turn out not to
 * map each other's memory, a choice that counted on pulls is made again
 * without them; the pulls use two windows in turn, so that only a call's
 * last exchange waits for the peer to have read it; TPLA_NS_PULL_WINDOWS=1
 * on any rank: one window, one packed Gram less memory, each exchange closed
 * by a handshake; a value other than 1 or 2 is INVALID_ARGUMENT); creation
 * then also runs a few executes on temporary scratch, so that no call loads
 * a kernel while the peer waits (docs/ALGORITHMS.md).
 * Errors (*plan is set to NULL):
 *   INVALID_ARGUMENT  this rank's arguments are bad: NULL plan/ctx/desc, a
 *                     wrong size field, an unknown enum, a dtype other than
 *                     fp32/fp16/bf16, a gram_dtype other than fp32 or dtype,
 *                     negative sizes, a global size of 0, steps out of range,
 *                     a coefficient count that is not 3 * steps, non-finite
 *                     coefficients (a user table's, or a preset's divided
 *                     by a tiny safety), eps < 0, safety < 0, LOCAL with
 *                     > 1 rank, workspace_group < 0.
 *   REMOTE            another rank rejected its arguments, or the ranks
 *                     disagree (shard dimension, non-sharded size, dtype,
 *                     gram_dtype, steps, coefficients, eps, safety,
 *                     iteration, algorithm); every rank gets the same
 *                     message naming the first disagreeing rank and field;
 *                     or another rank failed below.
 *   NOT_SUPPORTED     a shard side or the global sharded size above
 *                     2^31 - 1, or the matrix above 2^60 bytes.
 *   OUT_OF_MEMORY     the workspace or host memory could not be allocated
 *                     (a group's workspace stays as it was); the other
 *                     ranks get REMOTE, none is left waiting.
 *   TIMEOUT/NCCL/...  the exchange failed. */
TPLA_API tpla_status_t tpla_ns_plan_create(tpla_ns_plan_t *plan, tpla_ctx_t ctx,
                                           const tpla_ns_desc_t *desc);
/* Release a plan and its workspace (a group's with its last member). Not
 * collective. Accepts NULL. The context must outlive its plans. Always
 * SUCCESS. */
TPLA_API tpla_status_t tpla_ns_plan_destroy(tpla_ns_plan_t plan);
/* Executor memory (device or host) the plan holds, in bytes; fixed for the
 * plan's life, but for a workspace group's member: its group's workspace
 * (which a larger member's creation grows) plus what it holds alone.
 * INVALID_ARGUMENT for a NULL argument (as for the next). */
TPLA_API tpla_status_t tpla_ns_plan_workspace_bytes(tpla_ns_plan_t plan, size_t *bytes);
/* The algorithm the plan runs (never AUTO; LOCAL on one rank). */
TPLA_API tpla_status_t tpla_ns_plan_algorithm(tpla_ns_plan_t plan,
                                              tpla_ns_algorithm_t *algorithm);
/* The iteration the plan runs (never AUTO). */
TPLA_API tpla_status_t tpla_ns_plan_iteration(tpla_ns_plan_t plan,
                                              tpla_ns_iteration_t *iteration);

/* Orthogonalize this rank's shard x in place. Collective: every rank of the
 * plan calls it with its own shard. x must have the plan's local shape and
 * dtype; its ld may exceed cols. Enqueued on `stream` (CUDA; returns without
 * waiting for the device) or completed before returning (host). Nothing is
 * allocated. A rank that rejects its arguments does not join the
 * collective, so the other ranks' calls then fail with TIMEOUT or REMOTE.
 * Errors: INVALID_ARGUMENT (NULL plan, x not a valid view, wrong shape or
 * dtype; x untouched), INVALID_USAGE (a plan that sums by pulls, called on
 * a stream being captured, or after an earlier call's exchange failed:
 * destroy it; x untouched), REMOTE/TIMEOUT/CUDA/NCCL/CUBLAS from the
 * executor (x then holds unspecified values). */
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
 * differ in shape, sharding, dtype, steps and coefficients. Small matrices
 * a rank orthogonalizes whole that share shape, dtypes, steps,
 * coefficients and iteration run together, by strided-batched GEMMs (up to
 * 512 MiB of the workspace; TPLA_NS_BATCH_GROUP=1 in the environment at
 * creation turns this off). One workspace serves the whole batch.
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
/* *owner = the rank that orthogonalizes matrix `index` whole after moving it
 * there, or -1 when it runs where it lies: distributed, or (one rank) on the
 * caller's view. INVALID_ARGUMENT for an index out of range. */
TPLA_API tpla_status_t tpla_ns_batch_plan_owner(tpla_ns_batch_plan_t plan, int index,
                                                int *owner);
/* *iteration = the iteration matrix `index` runs (TPLA_NS_ITERATE_X or _GRAM):
 * its owner's, or its distributed plan's; the same on every rank.
 * INVALID_ARGUMENT for NULL or an index out of range. */
TPLA_API tpla_status_t tpla_ns_batch_plan_iteration(tpla_ns_batch_plan_t plan, int index,
                                                    tpla_ns_iteration_t *iteration);
/* Orthogonalize xs[0..count) (this rank's shards, each as in
 * tpla_ns_execute) in place. Collective. All views are validated before
 * anything is written: INVALID_ARGUMENT (NULL plan or xs, a bad view,
 * naming its index, or two views that share memory); then the executor's
 * statuses as for tpla_ns_execute. */
TPLA_API tpla_status_t tpla_ns_batch_execute(tpla_ns_batch_plan_t plan, const tpla_matrix_t *xs,
                                             void *stream);

/* ------------------------------------------------------------------------ */
/* Tensor parallelism: communication + GEMM, overlapped                      */
/* ------------------------------------------------------------------------ */
/* The three products of tensor-parallel linear layers (PyTorch layouts,
 * y = x W^T, row-major), each a plan created collectively once and executed
 * many times on the caller's stream:
 *
 *   AllGather+GEMM     D = alpha allgather_rows(A_local) op(B) + beta D + bias
 *                      column-parallel forward AG(x) W_p^T, row-parallel
 *                      dgrad AG(dy) W_p. The gathered A stays in the plan
 *                      (tpla_ag_gemm_gathered) so the wgrad GEMM AG(dy)^T x_p
 *                      needs no second all-gather.
 *   GEMM+ReduceScatter D_local = alpha reduce_scatter_rows(A op(B)) + beta D_local + bias
 *                      row-parallel forward, column-parallel dgrad. A is
 *                      M x K_local on every rank; each rank reduces only its
 *                      own slice of rows.
 *   GEMM+AllReduce     D = alpha allreduce(A op(B)) + beta D + bias
 *
 * beta and bias are applied by each rank to its own output only (they are
 * not summed over ranks). Row slices may be uneven (and empty).
 *
 * Modes. OVERLAP (the default) cuts every rank's slice into row chunks and
 * pipelines their transfers with the GEMMs of the chunks already present:
 * AllGather+GEMM pushes A_local into every peer's gathered buffer while the
 * GEMM of the own rows runs, then multiplies each peer's chunk as it lands,
 * alternating two compute streams; GEMM+ReduceScatter computes the partial
 * for each peer in ring order (rank+1 first), sends it while the next one is
 * computed, and computes its own rows last, adding the received partials in
 * that GEMM's epilogue and (more than two ranks, or beta != 0) one fold pass;
 * GEMM+AllReduce is GEMM+ReduceScatter followed by an all-gather of the
 * reduced slices, chunk by chunk. SERIAL runs the collective, then the
 * GEMM (the reference and fallback; FP8 AllGather+GEMM gathers the bytes and
 * the scales, then runs one GEMM per rank's rows, each with its scale).
 *
 * Transports (OVERLAP). PEER: on the CUDA executor the copy engines write
 * into peer buffers mapped once at plan creation (CUDA peer access inside a
 * process, CUDA IPC between processes) and stream memory operations order
 * the GPUs; no SMs move data and NVLink multicast is never used. SENDRECV:
 * NCCL send/recv with the same schedule, for peers that cannot map each
 * other (another node). AUTO takes PEER when every pair of ranks can.
 * The host executor runs the same schedules with threads (memcpy and
 * atomic flags with timed waits; SENDRECV on its point-to-point exchange).
 *
 * Ordering. A call is collective: every rank calls it, in the same order
 * relative to the plan's other calls (calls of different plans of a
 * context may interleave). On the CUDA executor a call only enqueues work
 * on `stream` and returns; internal streams join back before the call
 * returns in stream order. With PEER, at most 16 calls of a plan are in
 * flight per rank (env TPLA_XPORT_MAX_IN_FLIGHT, 0..64, 0: no bound): the
 * next call first waits on the host until the oldest has finished on the
 * device (not while the stream is captured), so a thread that drives
 * several ranks must not run 16 calls of one rank ahead of the others.
 * Without the bound, hundreds of calls enqueued at once stopped for good
 * on 2 H200s (docs/OVERLAP.md). Like an NCCL collective, a call whose peers never
 * make their matching call waits on the device, until the context's
 * watchdog aborts the context after cfg.timeout_ms (tpla_ctx_abort; the
 * stream then drains, tpla_ctx_get_async_error says TIMEOUT); on the host
 * executor it fails with TPLA_ERROR_TIMEOUT after cfg.timeout_ms, the
 * waiting peers get TIMEOUT or REMOTE, and the plan is unusable afterwards.
 * A rank that rejects its arguments (INVALID_ARGUMENT) enqueues nothing and
 * does not count the call, so a corrected retry matches the peers' call.
 * Destroy plans only after every rank's calls have completed.
 *
 * Memory (tpla_*_plan_workspace_bytes): AllGather+GEMM holds the gathered
 * A (M x K); GEMM+ReduceScatter one receive slot (its own slice's rows) and
 * one send slot (that peer's slice) per peer, whatever the chunk count;
 * GEMM+AllReduce those plus one slice. SERIAL
 * plans hold the collective's buffers instead. GEMMs use the context's GEMM
 * workspace. Nothing is allocated by a call. */

#define TPLA_OVERLAP_MAX_CHUNKS 16

typedef enum {
  TPLA_OVERLAP_AUTO = 0,    /* OVERLAP */
  TPLA_OVERLAP_OVERLAP = 1, /* chunked transfers hidden behind chunked GEMMs */
  TPLA_OVERLAP_SERIAL = 2   /* the collective (NCCL), then the GEMM */
} tpla_overlap_mode_t;

typedef enum {
  TPLA_TRANSPORT_AUTO = 0,     /* PEER if every pair of ranks can map each other, else SENDRECV */
  TPLA_TRANSPORT_PEER = 1,     /* copy engines into peer-mapped buffers (host: shared memory) */
  TPLA_TRANSPORT_SENDRECV = 2, /* two-sided point-to-point (NCCL send/recv) */
  TPLA_TRANSPORT_NONE = 3      /* reported by SERIAL plans: collectives only */
} tpla_transport_t;

/* Arguments of one call. bias: NULL, or (plans created with bias = 1) a
 * vector of n elements of the plan's d_dtype in executor memory, added to
 * every row of this rank's output. */
/* FP8 plans (dtype E4M3/E5M2): fp8 carries this rank's scales of A and B
 * (a_scale of A_local for AllGather+GEMM: each rank's scale travels with
 * its rows, so the ranks may quantize with different scales), the
 * accumulation mode, and d_amax (max |D| over this rank's output). D is
 * bf16, fp16 or fp32 (d_scale must be NULL): reductions run in d_dtype,
 * never in FP8. */
typedef struct {
  size_t size;      /* sizeof(tpla_overlap_args_t); set by the INIT macro */
  float alpha;
  float beta;       /* 1 accumulates into D; 0 never reads D */
  const void *bias;
  tpla_fp8_scaling_t fp8; /* FP8 plans only; must stay TPLA_FP8_SCALING_INIT otherwise */
  /* FP8 plans with op_b N transpose B into the plan each call (Hopper's FP8
   * GEMMs read B as n x k). Nonzero: B holds what it held at this plan's
   * last call with the same b pointer, ld and b_version, so that transposed
   * copy is reused (e.g. a weight's update count: one transpose for the
   * forward and backward calls of a step). 0: always transpose. Ignored by
   * other plans, and once a call of the plan (or of its window group) was
   * captured into a CUDA graph (docs/API.md). */
  uint64_t b_version;
} tpla_overlap_args_t;
#define TPLA_OVERLAP_ARGS_INIT                                                            \
  {sizeof(tpla_overlap_args_t), 1.0f, 0.0f, NULL, TPLA_FP8_SCALING_INIT, 0}

/* Fields every descriptor below shares:
 *   op_b       B is k x n (TPLA_OP_N) or n x k (TPLA_OP_T, e.g. a weight W
 *              stored n x k for x W^T)
 *   dtype      A and B: TPLA_FLOAT32, TPLA_FLOAT16 or TPLA_BFLOAT16; or A
 *              FP8 (TPLA_FLOAT8_E4M3/E5M2), B then any FP8 type as its view
 *              says, call by call (E5M2 gradients x E4M3 weights), but not
 *              E5M2 x E5M2
 *   d_dtype    D: dtype or TPLA_FLOAT32; FP8 plans: bf16, fp16 or fp32
 *              (products accumulate in fp32; the partials a reduction
 *              exchanges have d_dtype)
 *   bias       1: calls pass args->bias (n elements of d_dtype); 0: none
 *   allow_tf32 fp32 inputs only: the tensor cores may use TF32
 *   mode, transport  see above
 *   chunks     row chunks per rank's slice, 1..TPLA_OVERLAP_MAX_CHUNKS, or
 *              0: chosen from the shape (more chunks when the transfer is
 *              long next to the GEMM); ignored by SERIAL
 *   window_group  0: the plan has buffers of its own. g > 0: the plan
 *              shares its buffers (peer-visible window, flags, staging,
 *              internal streams) with every other plan of the context in
 *              group g, which hold them once, at the largest plan's size,
 *              so a layer stack pays for one set. The plans of a group are
 *              one ordered sequence of calls: every rank issues them in
 *              the same order, each after the group's previous call in
 *              stream order (one stream, or the caller orders them).
 *              Creating a member waits for the group's calls enqueued so
 *              far (it may replace the buffers with larger ones; a
 *              creation that fails leaves the group's as they were; once
 *              a call of the group was captured into a CUDA graph, which
 *              keeps using the buffers, a member that needs larger ones
 *              is refused: INVALID_USAGE on every rank). A
 *              gathered view (and an FP8 plan's staged B^T) lasts until
 *              the group's next call or the creation of a member. A group holds plans of one mode and
 *              one transport (INVALID_ARGUMENT otherwise, on every rank
 *              whose group still holds such a plan, REMOTE on the others:
 *              destroying plans is not collective); once a call of a
 *              member failed after it started, it refuses new members
 *              (INVALID_USAGE, REMOTE on the others).
 *              Must agree. A descriptor whose size field ends before
 *              window_group (a caller built before it) has group 0. */

/* AllGather+GEMM. Rank r holds A_local (local_rows x k); the gathered A is
 * the rows of ranks 0, 1, ... in order (m = sum of local_rows). D is m x n
 * on every rank; n, op_b, bias, d_dtype and allow_tf32 may differ between
 * ranks (each rank multiplies by its own B into its own D), k, dtype, mode,
 * transport and chunks must agree. */
typedef struct {
  size_t size;          /* sizeof(tpla_ag_gemm_desc_t); set by the INIT macro */
  int64_t local_rows;   /* >= 0; may differ between ranks, but not be 0 on
                         * all of them (INVALID_ARGUMENT on every rank) */
  int64_t k;            /* > 0 */
  int64_t n;            /* >= 0 */
  tpla_op_t op_b;
  tpla_dtype_t dtype;
  tpla_dtype_t d_dtype;
  int bias;
  int allow_tf32;
  tpla_overlap_mode_t mode;
  tpla_transport_t transport; /* AUTO, PEER or SENDRECV */
  int chunks;
  int window_group;
} tpla_ag_gemm_desc_t;
#define TPLA_AG_GEMM_DESC_INIT                                                               \
  {sizeof(tpla_ag_gemm_desc_t), 0, 0, 0, TPLA_OP_N, TPLA_FLOAT32, TPLA_FLOAT32, 0, 0,       \
   TPLA_OVERLAP_AUTO, TPLA_TRANSPORT_AUTO, 0, 0}

/* GEMM+ReduceScatter. A is m x k (k = this rank's K_local, may differ
 * between ranks and be 0), D_local is local_rows x n: rows
 * [o_r, o_r + local_rows) of the reduced m x n product, o_r the sum of the
 * lower ranks' local_rows. local_rows = -1 (the INIT value) on every rank
 * splits m evenly (the first m % P ranks get one row more; with FP8 inputs
 * and m a multiple of 16, in units of 16 rows, which Hopper's FP8 GEMMs
 * need: the first (m / 16) % P ranks get 16 rows more). m, n, dtype,
 * d_dtype, mode, transport and chunks must agree; the local_rows must sum
 * to m. */
typedef struct {
  size_t size;          /* sizeof(tpla_gemm_rs_desc_t); set by the INIT macro */
  int64_t m;            /* > 0 */
  int64_t local_rows;   /* >= 0, or -1 on every rank: even split */
  int64_t k;            /* >= 0 */
  int64_t n;            /* > 0 */
  tpla_op_t op_b;
  tpla_dtype_t dtype;
  tpla_dtype_t d_dtype;
  int bias;
  int allow_tf32;
  tpla_overlap_mode_t mode;
  tpla_transport_t transport;
  int chunks;
  int window_group;
} tpla_gemm_rs_desc_t;
#define TPLA_GEMM_RS_DESC_INIT                                                               \
  {sizeof(tpla_gemm_rs_desc_t), 0, -1, 0, 0, TPLA_OP_N, TPLA_FLOAT32, TPLA_FLOAT32, 0, 0,   \
   TPLA_OVERLAP_AUTO, TPLA_TRANSPORT_AUTO, 0, 0}

/* GEMM+AllReduce. A is m x k (k local, may be 0), D is m x n on every rank.
 * Internally the rows are split evenly for the reduction (as GEMM+RS's
 * local_rows = -1, FP8's 16-row units included). m, n, dtype,
 * d_dtype, bias, mode, transport and chunks must agree. */
typedef struct {
  size_t size;          /* sizeof(tpla_gemm_ar_desc_t); set by the INIT macro */
  int64_t m;            /* > 0 */
  int64_t k;            /* >= 0 */
  int64_t n;            /* > 0 */
  tpla_op_t op_b;
  tpla_dtype_t dtype;
  tpla_dtype_t d_dtype;
  int bias;
  int allow_tf32;
  tpla_overlap_mode_t mode;
  tpla_transport_t transport;
  int chunks;
  int window_group;
} tpla_gemm_ar_desc_t;
#define TPLA_GEMM_AR_DESC_INIT                                                               \
  {sizeof(tpla_gemm_ar_desc_t), 0, 0, 0, TPLA_OP_N, TPLA_FLOAT32, TPLA_FLOAT32, 0, 0,       \
   TPLA_OVERLAP_AUTO, TPLA_TRANSPORT_AUTO, 0, 0}

/* What a plan resolved to. */
typedef struct {
  size_t size;                /* sizeof(tpla_overlap_info_t); set by the INIT macro */
  tpla_overlap_mode_t mode;   /* OVERLAP or SERIAL */
  tpla_transport_t transport; /* PEER or SENDRECV; NONE for SERIAL */
  int chunks;                 /* row chunks per slice (1 for SERIAL) */
  int64_t m;                  /* global rows */
  int64_t row_offset;         /* this rank's slice: rows [row_offset, row_offset + rows) */
  int64_t rows;
  size_t workspace_bytes;     /* as tpla_*_plan_workspace_bytes */
} tpla_overlap_info_t;
#define TPLA_OVERLAP_INFO_INIT {sizeof(tpla_overlap_info_t), 0, 0, 0, 0, 0, 0, 0}

typedef struct tpla_ag_gemm_plan *tpla_ag_gemm_plan_t;
typedef struct tpla_gemm_rs_plan *tpla_gemm_rs_plan_t;
typedef struct tpla_gemm_ar_plan *tpla_gemm_ar_plan_t;

/* Create a plan (collective over the context's ranks, in the same order as
 * the context's other collectives). The ranks exchange their descriptors
 * once; the plan sizes its buffers, allocates them and, for the PEER
 * transport, maps every peer's buffers and flags (CUDA peer access or IPC
 * handles), so calls allocate and exchange nothing.
 * Errors (*plan is set to NULL):
 *   INVALID_ARGUMENT  this rank's arguments are bad: NULL plan/ctx/desc, a
 *                     wrong size field, an unknown enum, a dtype the plan
 *                     does not take (see the descriptor), a negative or
 *                     out-of-range size, chunks out of range.
 *   REMOTE            another rank rejected its arguments, or the ranks
 *                     disagree (the message names the first disagreeing rank
 *                     and field, the same on every rank), or the row slices
 *                     do not add up; or another rank failed below.
 *   NOT_SUPPORTED     sizes above 2^31-1, or operands or buffers above 2^60
 *                     bytes; transport PEER forced where a pair of ranks
 *                     cannot map each other (the message says why).
 *   OUT_OF_MEMORY     the buffers could not be allocated.
 *   CUDA/NCCL/TIMEOUT the exchange or the mapping failed. */
TPLA_API tpla_status_t tpla_ag_gemm_plan_create(tpla_ag_gemm_plan_t *plan, tpla_ctx_t ctx,
                                                const tpla_ag_gemm_desc_t *desc);
TPLA_API tpla_status_t tpla_gemm_rs_plan_create(tpla_gemm_rs_plan_t *plan, tpla_ctx_t ctx,
                                                const tpla_gemm_rs_desc_t *desc);
TPLA_API tpla_status_t tpla_gemm_ar_plan_create(tpla_gemm_ar_plan_t *plan, tpla_ctx_t ctx,
                                                const tpla_gemm_ar_desc_t *desc);
/* Release a plan (not collective; accepts NULL). Every rank's calls of the
 * plan must have completed (peers write into this rank's buffers). The
 * context must outlive its plans. */
TPLA_API tpla_status_t tpla_ag_gemm_plan_destroy(tpla_ag_gemm_plan_t plan);
TPLA_API tpla_status_t tpla_gemm_rs_plan_destroy(tpla_gemm_rs_plan_t plan);
TPLA_API tpla_status_t tpla_gemm_ar_plan_destroy(tpla_gemm_ar_plan_t plan);
/* Executor memory the plan holds, in bytes (in a window group: the group's
 * buffers, held once for all of its plans). INVALID_ARGUMENT for NULL. */
TPLA_API tpla_status_t tpla_ag_gemm_plan_workspace_bytes(tpla_ag_gemm_plan_t plan, size_t *bytes);
TPLA_API tpla_status_t tpla_gemm_rs_plan_workspace_bytes(tpla_gemm_rs_plan_t plan, size_t *bytes);
TPLA_API tpla_status_t tpla_gemm_ar_plan_workspace_bytes(tpla_gemm_ar_plan_t plan, size_t *bytes);
/* Mode, transport, chunks and this rank's slice. INVALID_ARGUMENT for
 * NULL or a wrong size field. */
TPLA_API tpla_status_t tpla_ag_gemm_plan_get_info(tpla_ag_gemm_plan_t plan,
                                                  tpla_overlap_info_t *info);
TPLA_API tpla_status_t tpla_gemm_rs_plan_get_info(tpla_gemm_rs_plan_t plan,
                                                  tpla_overlap_info_t *info);
TPLA_API tpla_status_t tpla_gemm_ar_plan_get_info(tpla_gemm_ar_plan_t plan,
                                                  tpla_overlap_info_t *info);

/* D (m x n) = alpha allgather_rows(A_local) op(B) + beta D + bias. a_local
 * is local_rows x k, b is k x n (op_b N) or n x k (T), every view of the
 * plan's dtypes with any ld >= cols; d must not overlap a_local or b.
 * a_local and b must stay unchanged, and d untouched, until the call
 * completes in stream order. Errors: INVALID_ARGUMENT (NULL plan, a bad
 * view, shapes or dtypes other than the plan's, overlapping d, a view
 * inside the plan's (group's) own buffers, e.g. its gathered view, a bias
 * pointer missing or unexpected, a bad args size, non-finite alpha/beta;
 * nothing is written and the call does not count), INVALID_USAGE (the plan
 * failed in an earlier call), TIMEOUT/REMOTE (host: a peer did not make the
 * call), CUDA/NCCL/CUBLAS (D and the gathered view then hold unspecified
 * values and the plan is unusable). A call that fails after it began, on
 * a context of more than one rank, also stops the context, as a timeout
 * does (tpla_ctx_abort): the peers' calls that wait for its steps end at
 * once with REMOTE instead of at their timeout (not a call being captured
 * into a CUDA graph, which ran nothing). Calls of one plan may use
 * different streams: on the CUDA executor a call on another stream than
 * the plan's previous call waits, on the device, for that call to end (the
 * two share the plan's buffers). The same holds for tpla_gemm_rs and
 * tpla_gemm_ar. */
TPLA_API tpla_status_t tpla_ag_gemm(tpla_ag_gemm_plan_t plan, tpla_matrix_t d,
                                    tpla_matrix_t a_local, tpla_matrix_t b,
                                    const tpla_overlap_args_t *args, void *stream);
/* *available = 1 when the plan's buffer holds the gathered A of its last
 * call (after a successful tpla_ag_gemm; both modes keep it), 0 before the
 * first call, after a failed one, and in a window group once another plan
 * of the group was called or created, or its creation was attempted: one
 * that fits the group's buffers rehearses in them, so even a failed one
 * zeroes the view (one that made larger buffers and failed leaves it). A
 * plain field read: never fails on a
 * valid plan and never synchronizes. INVALID_ARGUMENT for NULL. */
TPLA_API tpla_status_t tpla_ag_gemm_plan_has_gathered(tpla_ag_gemm_plan_t plan, int *available);
/* *gathered = a dense view (m x k, ld k, the plan's dtype) of the gathered
 * A of the last call, in the plan's executor memory. Read it only in stream
 * order after that call and before the plan's next call (which overwrites
 * it; peers write into it from the start of their next call, which cannot
 * start before this rank's next call begins), or in a window group before
 * the group's next call. Do not write into it.
 * Errors: INVALID_ARGUMENT (NULL), INVALID_USAGE (not available: see
 * tpla_ag_gemm_plan_has_gathered; fall back to tpla_allgather_rows). */
TPLA_API tpla_status_t tpla_ag_gemm_gathered(tpla_ag_gemm_plan_t plan, tpla_matrix_t *gathered);
/* FP8 plans: *scales = the device (host executor: host) array holding the
 * a_scale of each rank's rows of the gathered view, rank q's at
 * scales[q * TPLA_FP8_SCALE_STRIDE] (16-byte aligned, as cuBLASLt wants),
 * valid as the view is (the entry of a rank without rows is unspecified).
 * A GEMM over the whole view needs one scale: when every rank quantized
 * with the same scale (e.g. an amax reduced over the group), the entry of
 * any rank with rows is it (scales + 0 when rank 0 has rows). Errors as
 * tpla_ag_gemm_gathered; INVALID_USAGE for a plan that is not FP8. */
TPLA_API tpla_status_t tpla_ag_gemm_gathered_scales(tpla_ag_gemm_plan_t plan,
                                                    const float **scales);

/* D_local (local_rows x n) = alpha [reduce_scatter_rows(sum over ranks of
 * A op(B))]_rank + beta D_local + bias. a is m x k (this rank's k), b is
 * k x n or n x k. alpha must be the same on every rank: each rank scales
 * its own partial by it. Errors as tpla_ag_gemm. */
TPLA_API tpla_status_t tpla_gemm_rs(tpla_gemm_rs_plan_t plan, tpla_matrix_t d_local,
                                    tpla_matrix_t a, tpla_matrix_t b,
                                    const tpla_overlap_args_t *args, void *stream);
/* D (m x n) = alpha (sum over ranks of A op(B)) + beta D + bias; alpha must
 * be the same on every rank, as tpla_gemm_rs's. Errors as tpla_ag_gemm. */
TPLA_API tpla_status_t tpla_gemm_ar(tpla_gemm_ar_plan_t plan, tpla_matrix_t d, tpla_matrix_t a,
                                    tpla_matrix_t b, const tpla_overlap_args_t *args,
                                    void *stream);

/* The plain row gather, for when no gathered operand is available (e.g.
 * delayed wgrad): gathered (sum of rows[] x cols, dense: ld == cols) = the
 * a_local of every rank stacked in rank order. rows has nranks entries,
 * identical on every rank, with rows[rank] == a_local.rows; a_local (any
 * ld) may already sit at its place inside gathered. Collective (one
 * all-gather, counted in tpla_counters_t.allgathers). Errors:
 * INVALID_ARGUMENT (NULL, bad views, shapes that do not add up, a dtype
 * that is not fp32/fp16/bf16, a_local overlapping gathered elsewhere than
 * at its place), and the collectives' errors. */
TPLA_API tpla_status_t tpla_allgather_rows(tpla_ctx_t ctx, tpla_matrix_t gathered,
                                           tpla_matrix_t a_local, const int64_t *rows,
                                           void *stream);

/* Operations issued on a context since its creation, for tests and
 * benchmarks (e.g. that a tensor-parallel backward gathers dy once). */
typedef struct {
  size_t size;              /* sizeof(tpla_counters_t); set by the INIT macro */
  uint64_t allgathers;      /* tpla_allgatherv, tpla_allgather_rows, tpla_ag_gemm calls */
  uint64_t reduce_scatters; /* tpla_reduce_scatterv, tpla_gemm_rs calls */
  uint64_t allreduces;      /* tpla_allreduce, tpla_gemm_ar calls */
  uint64_t overlap_calls;   /* calls of the three plans (either mode) */
  uint64_t gathered_views;  /* successful tpla_ag_gemm_gathered calls */
} tpla_counters_t;
#define TPLA_COUNTERS_INIT {sizeof(tpla_counters_t), 0, 0, 0, 0, 0}

/* Successful calls only. INVALID_ARGUMENT for NULL or a wrong size field. */
TPLA_API tpla_status_t tpla_ctx_get_counters(tpla_ctx_t ctx, tpla_counters_t *counters);

#ifdef __cplusplus
}
#endif
#endif /* TPLA_H */
