/*
 * internal.h - what the core, the host executor and the CUDA executor share:
 * the context object, the executor ("backend") interface, error reporting
 * and argument validation. Not installed.
 *
 * The public entry points in src/core/api.c validate every argument once,
 * here, and then dispatch to the context's backend, so both executors reject
 * bad input identically and backends may assume valid arguments.
 */
#ifndef TPLA_INTERNAL_H
#define TPLA_INTERNAL_H

#include "tpla.h"

#include <stdarg.h>
#include <stdatomic.h>
#include <pthread.h>
#include <stdbool.h>
#include <time.h>

#define TPLA_DEFAULT_TIMEOUT_MS 300000
/* The longest timeout: now + timeout never overflows int64 milliseconds. */
#define TPLA_MAX_TIMEOUT_MS ((int64_t)1 << 50)
#define TPLA_DEFAULT_GEMM_WORKSPACE ((size_t)32 << 20)
#define TPLA_MAX_RANKS 1024

/* ---- errors (status.c) -------------------------------------------------- */

/* Record "fn: message" as the thread's last error and return `status`. */
tpla_status_t tpla_fail(tpla_status_t status, const char *fn, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Sets the last-error message back to `message` (saved from tpla_last_error()), word for
 * word: after cleanup that may have failed calls of its own. Returns status. */
tpla_status_t tpla_fail_again(tpla_status_t status, const char *message);
/* Clear the thread's last error (every public call starts with this). */
void tpla_clear_error(void);
/* msg[size] = the formatted text (a rank's reason, exchanged at plan
 * creation, not the thread's last error); returns `status`. */
tpla_status_t tpla_msg(char *msg, size_t size, tpla_status_t status, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* Evaluate a tpla call and return its status from the caller on failure. */
#define TPLA_TRY(expr)                  \
  do {                                  \
    tpla_status_t tpla_try_s_ = (expr); \
    if (tpla_try_s_ != TPLA_SUCCESS)    \
      return tpla_try_s_;               \
  } while (0)

/* ---- dtypes (dtype.c) --------------------------------------------------- */

bool tpla_dtype_valid(tpla_dtype_t dtype);
float tpla_half_to_float(uint16_t h);
uint16_t tpla_float_to_half(float f); /* round to nearest even */
float tpla_bf16_to_float(uint16_t b);
uint16_t tpla_float_to_bf16(float f); /* round to nearest even */
/* OCP FP8, fmt TPLA_FLOAT8_E4M3 or TPLA_FLOAT8_E5M2. Decoding is exact.
 * Encoding rounds to nearest even; finite values beyond the largest finite
 * one (448, 57344) saturate to it, as do E4M3's infinities (E5M2 keeps
 * them); NaN stays NaN (0x7f with the sign). */
float tpla_fp8_to_float(uint8_t code, tpla_dtype_t fmt);
uint8_t tpla_double_to_fp8(double v, tpla_dtype_t fmt);
/* Element `i` of a buffer of `dtype` (float types only) as a double. */
double tpla_load_elem(const void *buf, tpla_dtype_t dtype, size_t i);
/* Store `v` rounded to `dtype` at element `i`. */
void tpla_store_elem(void *buf, tpla_dtype_t dtype, size_t i, double v);

/* ---- validation (validate.c) -------------------------------------------- */

/* Checks a matrix view: dtype known, rows/cols >= 0, ld >= max(cols, 1),
 * data != NULL unless empty, byte extent representable. `fn` and `arg` name
 * the call and argument in the message. */
tpla_status_t tpla_check_matrix(const char *fn, const char *arg, const tpla_matrix_t *m);
/* Bytes from the first to one past the last element of a valid view. */
size_t tpla_matrix_extent_bytes(const tpla_matrix_t *m);
/* counts[0] + ... + counts[n - 1]. */
static inline size_t tpla_sum_counts(const size_t *counts, int n) {
  size_t s = 0;
  for (int i = 0; i < n; i++)
    s += counts[i];
  return s;
}

/* True if the byte ranges [a, a + na) and [b, b + nb) overlap. */
static inline bool tpla_bytes_overlap(const void *a, size_t na, const void *b, size_t nb) {
  uintptr_t x = (uintptr_t)a, y = (uintptr_t)b;
  return na > 0 && nb > 0 && x < y + nb && y < x + na;
}

/* The aliasing a collective allows between send and recv, one rule for every
 * executor (NCCL races on any other): none, or exactly the in-place position,
 * `at` elements into the larger buffer `q` (all-reduce: send == recv;
 * all-gather: send at recv + the rank's offset; reduce-scatter: recv at
 * send + the rank's offset). INVALID_ARGUMENT naming `small` otherwise. */
tpla_status_t tpla_check_in_place(const char *fn, const char *small, const void *p, size_t n,
                                  const char *large, const void *q, size_t total, size_t at,
                                  tpla_dtype_t dtype);
/* sendrecv: send and recv (of the counts it moves) apart, or equal in a self
 * exchange. */
tpla_status_t tpla_check_sendrecv_buffers(const char *fn, const void *send, size_t send_count,
                                          const void *recv, size_t recv_count, bool self,
                                          tpla_dtype_t dtype);

/* True if the byte ranges of two views overlap. */
bool tpla_matrices_overlap(const tpla_matrix_t *x, const tpla_matrix_t *y);
tpla_status_t tpla_check_config(const char *fn, const tpla_config_t *cfg, tpla_config_t *out);
/* now + ms on CLOCK_MONOTONIC, for pthread_cond_timedwait on a condition
 * variable made by tpla_cond_init_monotonic (false: not made). deadline.c */
struct timespec tpla_deadline_after(int64_t ms);
/* t + ms (ms >= 0) with tv_nsec kept below 10^9, as pthread_cond_timedwait
 * requires. */
struct timespec tpla_deadline_add(struct timespec t, int64_t ms);
bool tpla_cond_init_monotonic(pthread_cond_t *cv);
/* FP8 scale and amax pointers 16-byte aligned (cuBLASLt), else INVALID_ARGUMENT. */
tpla_status_t tpla_check_fp8_pointers(const char *fn, const tpla_fp8_scaling_t *f);

/* ---- the context and its executor --------------------------------------- */

/* `count` matrices laid out `stride` bytes apart: an operation on a batch
 * applies to the view given (matrix 0) and to the same view shifted by
 * j * stride bytes, j < count. count <= 1 is one matrix. The stride is a
 * multiple of 256 (every operand's alignment carries over). */
typedef struct {
  int count;
  size_t stride;
} tpla_batch_t;
#define TPLA_BATCH_MAX 65535 /* a CUDA grid's y extent */
#define TPLA_LIST_MAX 64     /* views of one normalize_list / store_list */

/* A validated GEMM: D(m x n) = alpha op(A)(m x k) op(B)(k x n) + beta C.
 * fp8 is TPLA_FP8_SCALING_INIT unless A is FP8 (then as tpla_gemm_args_t
 * says; scale_mode is TENSOR: MXFP8 is refused before any backend).
 * c NULL: C is D (tpla_gemm). Else (library-internal callers, half and fp32
 * only) C is m x n of D's dtype with its own ld, either the view D itself or
 * memory that does not overlap D; beta == 0 never reads it. */
typedef struct {
  tpla_matrix_t d, a, b;
  tpla_op_t op_a, op_b;
  int64_t m, n, k;
  float alpha, beta;
  int allow_tf32;
  tpla_fp8_scaling_t fp8;
  const tpla_matrix_t *c;
  tpla_batch_t batch; /* strided batch (Newton-Schulz groups); not FP8 */
} tpla_gemm_call_t;

typedef struct tpla_backend {
  const char *name;
  tpla_status_t (*destroy)(tpla_ctx_t ctx);
  tpla_status_t (*allreduce)(tpla_ctx_t ctx, void *recv, const void *send, size_t count,
                             tpla_dtype_t dtype, void *stream);
  tpla_status_t (*allgatherv)(tpla_ctx_t ctx, void *recv, const void *send, const size_t *counts,
                              tpla_dtype_t dtype, void *stream);
  tpla_status_t (*reduce_scatterv)(tpla_ctx_t ctx, void *recv, const void *send,
                                   const size_t *counts, tpla_dtype_t dtype, void *stream);
  tpla_status_t (*broadcast)(tpla_ctx_t ctx, void *buf, size_t count, tpla_dtype_t dtype,
                             int root, void *stream);
  tpla_status_t (*sendrecv)(tpla_ctx_t ctx, const void *send, size_t send_count, int dst,
                            void *recv, size_t recv_count, int src, tpla_dtype_t dtype,
                            void *stream);
  tpla_status_t (*barrier)(tpla_ctx_t ctx, void *stream);
  /* Overlap inside one rank: the executor's side stream i (0 or 1), or NULL
   * where every call completes before returning (host). */
  void *(*side_stream)(tpla_ctx_t ctx, int i);
  /* Order `waiter` after the work enqueued so far on `signaler` (CUDA: one
   * event record + stream wait); no-op on the host. */
  tpla_status_t (*stream_wait)(tpla_ctx_t ctx, void *waiter, void *signaler);
  /* Wait on the host until the device has finished the work enqueued on it
   * (CUDA: cudaDeviceSynchronize). NULL where every call completes before
   * returning (host). Plan creation only. */
  tpla_status_t (*quiesce)(tpla_ctx_t ctx);
  tpla_status_t (*gemm)(tpla_ctx_t ctx, const tpla_gemm_call_t *call, void *stream);
  size_t (*workspace_bytes)(tpla_ctx_t ctx);

  /* ---- building blocks of the algorithms (Newton-Schulz, overlap) ------
   * Memory is the executor's (device on CUDA, host on the host executor).
   * All are stream-ordered on CUDA and complete before returning on host. */

  /* Allocate/free plan memory. Only at plan creation/destruction, never on
   * an execute path (CUDA: cudaMalloc/cudaFree). */
  tpla_status_t (*mem_alloc)(tpla_ctx_t ctx, size_t bytes, void **ptr);
  void (*mem_free)(tpla_ctx_t ctx, void *ptr);
  /* y = alpha * x + beta * y elementwise over equal-shaped views of any
   * float dtypes (math in fp32; beta == 0 never reads y). With alpha = 1,
   * beta = 0 this is a strided copy with dtype conversion. Over a batch,
   * each pair of views the same way. */
  tpla_status_t (*axpby)(tpla_ctx_t ctx, tpla_matrix_t y, tpla_matrix_t x, float alpha,
                         float beta, tpla_batch_t batch, void *stream);
  /* *sumsq (one fp64 in executor memory) = sum of x(i,j)^2, summed in fp64:
   * the square of an fp32 entry above ~1.8e19 overflows fp32. */
  tpla_status_t (*sumsq)(tpla_ctx_t ctx, double *sumsq, tpla_matrix_t x, void *stream);
  /* y = x / (safety * sqrt(*sumsq) + eps), any float dtypes, y may be x;
   * the divisor is formed in fp64. */
  tpla_status_t (*scale_by_norm)(tpla_ctx_t ctx, tpla_matrix_t y, tpla_matrix_t x,
                                 const double *sumsq, float safety, float eps, void *stream);
  /* For j < batch.count (<= TPLA_LIST_MAX): sumsq[j] = the sum of squares
   * of x[j] (as sumsq), and member j of the batch at y = x[j] /
   * (safety[j] sqrt(sumsq[j]) + eps[j]) (as scale_by_norm). The x[j] have
   * y's shape, one float dtype (any, converted to y's) and any ld, anywhere;
   * sumsq: batch.count fp64 in executor memory. One pass for all (CUDA:
   * three launches; the sums' grid depends on the count, so their bits may
   * differ from sumsq's). */
  tpla_status_t (*normalize_list)(tpla_ctx_t ctx, tpla_matrix_t y, tpla_batch_t batch,
                                  const tpla_matrix_t *x, const float *safety, const float *eps,
                                  double *sumsq, void *stream);
  /* x[j] = member j of the batch at y, j < batch.count (<= TPLA_LIST_MAX);
   * the x[j] have y's shape and dtype, any ld, anywhere. */
  tpla_status_t (*store_list)(tpla_ctx_t ctx, const tpla_matrix_t *x, tpla_matrix_t y,
                              tpla_batch_t batch, void *stream);
  /* y = 0, any dtype; y is not read (it may hold NaN). */
  tpla_status_t (*zero)(tpla_ctx_t ctx, tpla_matrix_t y, void *stream);
  /* a(i, j) = a(j, i) for i > j in a's leading min(rows, cols) square
   * (complete a symmetric matrix of which the upper triangle, diagonal
   * included, was computed); each of a batch. whole > 0: the diagonal blocks of edge `whole` (rows and columns
   * [k whole, (k+1) whole)) were computed whole; their elements may be left
   * as they are (they need not be: an element rewritten gets a(j, i)). */
  tpla_status_t (*mirror_upper)(tpla_ctx_t ctx, tpla_matrix_t a, int64_t whole,
                                tpla_batch_t batch, void *stream);
  /* a(i, i) += value for i < min(rows, cols) (fp32 math, one rounding to
   * a's float dtype), each of a batch. */
  tpla_status_t (*add_diagonal)(tpla_ctx_t ctx, tpla_matrix_t a, float value,
                                tpla_batch_t batch, void *stream);
  /* Personalized all-to-all: rank r sends send_counts[q] elements from
   * send + send_displs[q] to rank q, and receives recv_counts[q] elements
   * from rank q into recv + recv_displs[q] (elements; nranks entries each). */
  tpla_status_t (*alltoallv)(tpla_ctx_t ctx, void *recv, const size_t *recv_counts,
                             const size_t *recv_displs, const void *send,
                             const size_t *send_counts, const size_t *send_displs,
                             tpla_dtype_t dtype, void *stream);
  /* Plan-time agreement: recv (nranks * bytes of HOST memory) = every
   * rank's `bytes` of HOST memory at send, in rank order. Blocking (the
   * data is in recv on return); used at plan creation only, never on an
   * execute path. CUDA: copy to the device, ncclAllGather, copy back. */
  tpla_status_t (*exchange)(tpla_ctx_t ctx, void *recv, const void *send, size_t bytes);

  /* The transport of the overlap plans (src/core/overlap.h): peer-mapped
   * windows, flags, lanes, GEMMs on lanes. NULL: overlap plans unsupported. */
  const struct tpla_xport_ops *xport;

  /* ---- failure handling (ctx_fail.c); any may be NULL ------------------
   * call_begin/call_end bracket a public call that enqueues work (CUDA: the
   * call holds the context's call lock, so an abort never frees the
   * communicator under it, and the watchdog tracks it on `stream`).
   * abort stops this rank's work in flight and makes the other ranks' waits
   * for it end (CUDA: releases the device waits, aborts the communicator,
   * marks this rank aborted in the peers' flags; host: breaks the group).
   * Called once, from any thread, after the failure is recorded.
   * poll_failure records a failure the backend learns of by asking (host:
   * the group broke). */
  tpla_status_t (*call_begin)(tpla_ctx_t ctx, const char *fn, bool on_device, void *stream);
  void (*call_end)(tpla_ctx_t ctx, bool on_device, void *stream);
  void (*abort)(tpla_ctx_t ctx);
  void (*poll_failure)(tpla_ctx_t ctx);
} tpla_backend_t;

/* Operations issued on a context (tpla_ctx_get_counters); zero at creation. */
typedef struct {
  uint64_t allgathers, reduce_scatters, allreduces, overlap_calls, gathered_views;
} tpla_ctx_counters_t;

/* Why a context stopped working: tpla_ctx_abort, the CUDA watchdog, a peer's
 * abort. Written once (state 0 -> 1 -> 2), read without a lock once 2. */
typedef struct {
  _Atomic int state; /* 0 healthy, 1 being recorded, 2 failed */
  tpla_status_t status;
  char why[720];
} tpla_ctx_failure_t;

/* ---- text for failure messages (word_runs.c) ----------------------------- */

/* printf onto the end of the NUL-terminated `out` (`size` bytes in all); a
 * cut text ends in "...". */
void tpla_appendf(char *out, size_t size, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* words[0..n) as runs of equal values: "0-3: 204, 4-7: 205, 8: 0". */
void tpla_append_word_runs(char *out, size_t size, const uint32_t *words, int n);

/* ---- plan-time agreement (plan_agree.c) ---------------------------------- */

/* The executor's plan-time all-gather of `bytes` of host memory from every
 * rank into recv (collective, blocking; NOT_SUPPORTED without one). */
tpla_status_t tpla_plan_exchange(tpla_ctx_t ctx, const char *fn, void *recv, const void *send,
                                 size_t bytes);
/* After a local step that may fail on some ranks (collective; allocates
 * nothing, so an out-of-memory rank takes part): every rank learns every
 * status; returns this rank's own failure with its message, or REMOTE
 * naming the first other rank that could not do `what`. */
tpla_status_t tpla_plan_agree(tpla_ctx_t ctx, const char *fn, tpla_status_t mine,
                              const char *what);
/* The same for the host memory a plan creation needs before its first
 * exchange of summaries (without it a rank could not take part in that). */
tpla_status_t tpla_plan_agree_memory(tpla_ctx_t ctx, const char *fn, bool allocated);

/* ---- failure of a context (ctx_fail.c) ----------------------------------- */

/* Record the context's failure and abort its work (backend->abort). The
 * first failure wins; later ones are dropped. Thread-safe. Returns true if
 * this call recorded it. */
bool tpla_ctx_fail(tpla_ctx_t ctx, tpla_status_t status, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* SUCCESS while the context is healthy, else its failure, reported as the
 * thread's last error from `fn`. */
tpla_status_t tpla_ctx_check(tpla_ctx_t ctx, const char *fn);
/* Around every public call that communicates or enqueues work (plan
 * creation included): fails with the context's failure, else lets the
 * backend serialize the call with an abort and, with `on_device`, watch the
 * work it enqueues on `stream` (call_begin). tpla_call_end follows every
 * successful tpla_call_begin. */
tpla_status_t tpla_call_begin(tpla_ctx_t ctx, const char *fn, bool on_device, void *stream);
void tpla_call_end(tpla_ctx_t ctx, bool on_device, void *stream);

struct tpla_ctx {
  const tpla_backend_t *backend;
  tpla_executor_t executor;
  int rank;
  int nranks;
  int device; /* CUDA ordinal, -1 on the host executor */
  tpla_config_t cfg;
  void *impl; /* the executor's own state */
  tpla_ctx_counters_t counters;
  struct ovl_group *ovl_groups; /* the overlap plans' window groups (src/core/overlap_group.c) */
  struct ns_share *ns_shares;   /* the Newton-Schulz plans' workspace groups (ns_share.c) */
  tpla_ctx_failure_t failure;   /* set once the context is aborted (ctx_fail.c) */
  /* The batch the Newton-Schulz engine's GEMMs, copies and mirrors apply to
   * (src/core/ns_iter.c): set by a batched plan's group run around its
   * iteration only, else {0}. A context serves one thread at a time. */
  tpla_batch_t ns_batch;
};

/* True once the context has failed (no message; tpla_ctx_check gives one). */
static inline bool tpla_ctx_failed(tpla_ctx_t ctx) { return atomic_load(&ctx->failure.state) != 0; }

#endif /* TPLA_INTERNAL_H */
