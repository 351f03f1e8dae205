/*
 * transport.h - the CUDA executor's overlap transport (struct tpla_xport_ops
 * of src/core/overlap.h), shared by its files:
 *   transport.c        the per-call operations: lanes (streams) with fork and
 *                      join, PEER steps (copy-engine copies into or out of
 *                      peer-mapped windows, ordered by flags written and
 *                      waited with stream memory operations), SENDRECV steps
 *                      (NCCL send/recv), arrivals, copies, the ops table
 *   transport_map.c    creation: allocation, the plan-time exchange of
 *                      process/host/GPU identity and CUDA IPC handles, the
 *                      P2P reachability verdict (AUTO), peer access or IPC
 *                      mapping; destruction
 *   transport_gemm.c   cuBLASLt GEMMs on the compute lanes (each lane its own
 *                      half of the context's GEMM workspace, algorithms cached
 *                      per shape, bias epilogue) and the fold launcher
 *   transport_kernels.cu  the fold kernel (y = beta y + sum of slots + bias)
 *
 * Memory of one transport: one cudaMalloc holding [flags][window]. Flags
 * are uint32 words: [nranks] "ready for call" (word q written by rank q),
 * [nflags] step flags, one spare word (the creation-time self test),
 * [nranks] abort marks (word q set by rank q's abort, watchdog.h). Peers
 * write them with cuStreamWriteValue32 (which fences the copies before it
 * on the stream) and this rank's lanes wait with cuStreamWaitValue32 (GEQ,
 * cyclic), so no SM ever spins. The driver entry points come from
 * cudaGetDriverEntryPointByVersion: the library does not link libcuda.
 * NVLink multicast is never used.
 */
#ifndef TPLA_CUDA_TRANSPORT_H
#define TPLA_CUDA_TRANSPORT_H

#include "cuda_ctx.h"
#include "overlap.h"

#include <cuda.h> /* types of the driver entry points only (CUstream, CUdeviceptr) */

#define XP_COPY_STREAMS 4 /* PEER steps: one stream per peer distance, modulo this */
/* streams: 0, 1 compute; 2 .. 2 + XP_COPY_STREAMS - 1 copy; the last NCCL (SENDRECV) */
#define XP_STREAMS (2 + XP_COPY_STREAMS + 1)
#define XP_COMM_STREAM (XP_STREAMS - 1)
/* PEER calls a rank may have enqueued and not finished (xp_begin waits on the host
 * beyond that; TPLA_XPORT_MAX_IN_FLIGHT overrides, 0 = no bound), and the most it may be */
#define XP_IN_FLIGHT_DEFAULT 16
#define XP_IN_FLIGHT_MAX 64

typedef struct xg_cache xg_cache_t;

struct tpla_xport {
  tpla_ctx_t ctx;
  tpla_cuda_ctx_t *impl;
  ovl_xport_kind_t kind;
  int rank, nranks, nflags, device;
  int ncopy;                  /* copy streams in use: min(nranks - 1, XP_COPY_STREAMS), >= 1 */
  size_t window_bytes, flag_bytes;
  void *alloc;                /* cudaMalloc: flag_bytes of flags, then the window */
  char **peer_base;           /* nranks: every rank's allocation as mapped here (ours too) */
  void **ipc_opened;          /* nranks: cudaIpcOpenMemHandle results, closed at destroy */
  cudaStream_t streams[XP_STREAMS];
  cudaEvent_t fork, ev[XP_STREAMS];
  cudaEvent_t *flag_events;   /* nflags: completion of pull / SENDRECV steps */
  unsigned char *flag_pull;   /* nflags: the step of this flag was a pull (arrival by event) */
  void *gemm_ws[2];           /* compute lanes' halves of the context's GEMM workspace */
  size_t gemm_ws_bytes;
  xg_cache_t *gemm_cache;
  tpla_device_guard_t guard;  /* begin .. end */
  const char *fn;             /* the call's public function */
  int rehearsal;              /* plan-time rehearsal: no peer is announced, written or waited */
  _Atomic uint32_t last_seq;  /* the last call begun: an abort releases every wait up to it */
  int in_flight;              /* the bound on calls in flight (PEER), 0: none */
  int tune;                   /* TPLA_OVERLAP_TUNE=1: the rehearsal times cuBLASLt's first
                                 results for each GEMM shape and keeps the fastest */
  cudaEvent_t ended[XP_IN_FLIGHT_MAX]; /* call seq's end on the caller's stream: slot seq % */
  unsigned char ended_valid[XP_IN_FLIGHT_MAX]; /* in_flight; valid once recorded          */
  cudaEvent_t joined;         /* the last uncaptured call's end on its caller's stream */
  cudaStream_t joined_on;     /* that stream */
  bool joined_valid;          /* recorded */
};

/* ---- stream memory operations (transport_map.c) -------------------------- */

typedef CUresult (*xp_write_value_fn)(CUstream, CUdeviceptr, cuuint32_t, unsigned int);
typedef CUresult (*xp_wait_value_fn)(CUstream, CUdeviceptr, cuuint32_t, unsigned int);
/* The driver's cuStreamWriteValue32 / cuStreamWaitValue32, or NULL (with
 * *why set) when the driver does not provide them. Loaded once. */
void xp_driver_ops(xp_write_value_fn *write, xp_wait_value_fn *wait, const char **why);

/* flags of rank q as mapped here */
static inline uint32_t *xp_flags_of(const tpla_xport_t *xp, int q) {
  return (uint32_t *)xp->peer_base[q];
}
static inline uint32_t *xp_ready_word(const tpla_xport_t *xp, int owner, int writer) {
  return xp_flags_of(xp, owner) + writer;
}
static inline uint32_t *xp_step_word(const tpla_xport_t *xp, int owner, int flag) {
  return xp_flags_of(xp, owner) + xp->nranks + flag;
}
/* word `writer` of owner's abort marks (watchdog.h), after the spare word */
static inline uint32_t *xp_mark_word(const tpla_xport_t *xp, int owner, int writer) {
  return xp_flags_of(xp, owner) + xp->nranks + xp->nflags + 1 + writer;
}
static inline char *xp_window_of(const tpla_xport_t *xp, int q) {
  return xp->peer_base[q] + xp->flag_bytes;
}

/* The host waits for every stream of the transport (the device current; abort-aware). */
tpla_status_t xp_sync_streams(tpla_xport_t *xp, const char *what);
/* *addr = value on `stream` after the work before it (fenced). */
tpla_status_t xp_write(const tpla_xport_t *xp, cudaStream_t stream, uint32_t *addr,
                       uint32_t value, const char *what);
/* `stream` waits until (int32_t)(*addr - value) >= 0. */
tpla_status_t xp_wait(const tpla_xport_t *xp, cudaStream_t stream, uint32_t *addr, uint32_t value,
                      const char *what);

/* ---- creation (transport_map.c) ------------------------------------------- */

tpla_status_t xp_create(tpla_ctx_t ctx, const ovl_xport_desc_t *desc, tpla_xport_t **out);
void xp_destroy(tpla_xport_t *xp);

/* ---- GEMMs and folds (transport_gemm.c) --------------------------------- */

tpla_status_t xg_cache_create(xg_cache_t **cache, const char *fn);
void xg_cache_destroy(xg_cache_t *cache);
tpla_status_t xp_gemm(tpla_xport_t *xp, int lane, const tpla_gemm_call_t *call, const void *bias,
                      const tpla_matrix_t *c);
tpla_status_t xp_fold(tpla_xport_t *xp, int lane, const ovl_fold_t *fold);
/* The stream of a core-visible lane. */
cudaStream_t xp_lane_stream(const tpla_xport_t *xp, int lane);

#endif /* TPLA_CUDA_TRANSPORT_H */
