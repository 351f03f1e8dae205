/*
 * ce_bench.h - what the three files of tpla_ce_bench share: ce_bench.c (options,
 * the measurements, the table and verdicts, main), ce_mech.c (one GPU's resources,
 * the NCCL communicators and windows, the GEMM, the transfer mechanisms) and
 * ce_sync.c (the bounded waits, the abort flag, the watchdog). Rank r is the thread
 * that drives GPU r.
 */
#ifndef TPLA_CE_BENCH_H
#define TPLA_CE_BENCH_H

#include <cublasLt.h>
#include <cuda_runtime.h>
#include <nccl.h>

#include <stddef.h>

/* NCCL 2.28 brought the zero-CTA policy, copy-engine collectives and ncclAlltoAll. */
#if defined(NCCL_CTA_POLICY_ZERO) && NCCL_VERSION_CODE >= 22800
#define CE_HAVE_ZERO_CTA 1
#else
#define CE_HAVE_ZERO_CTA 0
#endif

enum { NRANKS = 2, COLS = 8192 };
enum { GEMM_M = 8192, GEMM_N = 8192, GEMM_K = 4096 };
#define ELEM_BYTES ((size_t)2) /* bf16 */
#define MIB (1024.0 * 1024.0)

typedef enum { PEER_PUSH, NCCL_AG, ZERO_AG, ZERO_A2A, NMECH } mech_t;
extern const char *const mech_name[NMECH];

typedef struct {
  int rank, peer; /* rank r drives GPU r */
  cudaStream_t xfer, gemm;
  cudaEvent_t x0, x1, g0, g1;
  ncclComm_t comm, zero_comm;
#if CE_HAVE_ZERO_CTA
  ncclWindow_t window;
#endif
  char *plain; /* cudaMalloc: the gathered buffer (2 slices of the largest size) */
  char *sym;   /* ncclMemAlloc, 4 slices: AG gathers into [0, 2); A2A sends [0, 2) into [2, 4) */
  size_t sym_bytes;
  cublasLtHandle_t lt;
  cublasLtMatmulDesc_t op;
  cublasLtMatrixLayout_t la, lb, lc;
  cublasLtMatmulAlgo_t algo;
  void *a, *b, *c, *workspace;
} rank_t;

/* ---- ce_sync.c ------------------------------------------------------------------ */

/* Every wait below is bounded by `timeout_s`; the watchdog ends the process after
 * `limit_s`, or `timeout_s` after an abort. Called once, before any thread starts. */
void sync_init(double timeout_s, double limit_s);
int watchdog_start(void); /* 0, or -1 when its thread could not be created */
void watchdog_stop(void);

/* The step a rank is at, quoted by the peer's timeout message and the watchdog. */
void set_step(const rank_t *rk, const char *what);
/* Raises the abort flag and wakes every barrier waiter. */
void raise_abort(void);
int abort_raised(void);

/* Reports a failed call (and where) on stderr, raises the abort flag, returns -1. */
int fail(int rank, const char *file, int line, const char *call, const char *why);
int cuda_failed(int rank, cudaError_t e, const char *call, const char *file, int line);
int nccl_failed(int rank, ncclResult_t e, const char *call, const char *file, int line);
int lt_failed(int rank, cublasStatus_t e, const char *call, const char *file, int line);
/* In functions with a `rk`: return -1 from there when the call fails. */
#define CU(call) \
  do { if (cuda_failed(rk->rank, (call), #call, __FILE__, __LINE__)) return -1; } while (0)
#define NC(call) \
  do { if (nccl_failed(rk->rank, (call), #call, __FILE__, __LINE__)) return -1; } while (0)
#define LT(call) \
  do { if (lt_failed(rk->rank, (call), #call, __FILE__, __LINE__)) return -1; } while (0)

/* Both threads meet here, for at most the timeout. 0, or -1 after a timeout or an abort. */
int barrier(const rank_t *rk, const char *what);
/* Polls `ev` until it completes, for at most the timeout. */
int wait_event(const rank_t *rk, cudaEvent_t ev, const char *what);
/* Records `ev` on `stream` and waits for it: all work issued there so far is done. */
int wait_stream(const rank_t *rk, cudaStream_t stream, cudaEvent_t ev, const char *what);

/* ---- ce_mech.c ------------------------------------------------------------------ */

size_t slice_bytes(int rows);
/* Before the rank threads start: the NCCL unique ids and the GEMM's operand data.
 * NULL, or what failed. */
const char *mech_prepare(int zero_cta, int max_rows);
void mech_release(void);
/* Peer access, streams, events, buffers, the GEMM and the communicators of one rank;
 * ends on a barrier, so both ranks are ready when it returns 0. */
int rank_setup(rank_t *rk);
/* After rank_setup: 1 when both ranks got a symmetric window for the zero-CTA rows. */
int zero_cta_windows_ok(void);
int gemm_run(rank_t *rk);
/* Issues `reps` transfers of `slice` bytes per direction by mechanism `m` on rk->xfer. */
int enqueue_transfer(rank_t *rk, mech_t m, size_t slice, int reps);
/* One transfer on a known pattern; *both_ok: whether it landed right on both ranks. */
int check_transfer(rank_t *rk, mech_t m, size_t slice, int *both_ok);
/* Tears down what rank_setup built; after a failure only aborts the communicators. */
int rank_cleanup(rank_t *rk, int failed);

#endif
