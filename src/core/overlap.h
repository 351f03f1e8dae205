/*
 * overlap.h - internals of the tensor-parallel communication + GEMM plans
 * (AllGather+GEMM, GEMM+ReduceScatter, GEMM+AllReduce), shared by
 * src/core/overlap_*.c and by the two executors' transports.
 *
 *   overlap_plan.c   descriptors, the collective agreement, chunking, layout,
 *                    plan creation and the plan queries
 *   overlap_exec.c   the schedules (overlapped and serial) of the three plans,
 *                    written once on the transport operations below
 *   overlap_api.c    execute-time validation, the gathered-operand view, the
 *                    plain row gather, the context counters
 *
 * The schedules only call a transport (struct tpla_xport_ops, reached through
 * ctx->backend->xport), so the CUDA executor (src/cuda/transport*.c: copy
 * engines, stream memory operations, cuBLASLt on side streams) and the host
 * executor (src/host/host_transport.c: threads, memcpy, atomics with timed
 * waits) run the same schedule, and CI tests it on the CPU.
 *
 * Model. Work goes onto "lanes": ordered queues (CUDA streams; the host
 * runs every lane in program order). A schedule is written so that program
 * order is itself a valid execution (every send is issued before the waits
 * that could depend on it), which is what makes the host run deadlock-free.
 * Each rank's transport owns a "window": memory its peers can write into
 * (PEER) or that it posts receives into (SENDRECV), plus flags. Calls are
 * numbered (seq, from 1, wrapping, compared cyclically); flags are never
 * reset: a step's flag holds the seq of the last call whose piece arrived.
 * Back-pressure: at the start of call seq every rank announces "ready for
 * seq" to every peer; a rank writes into a peer's window (or overwrites a
 * region peers read from) only after that peer announced the same call.
 */
#ifndef TPLA_OVERLAP_H
#define TPLA_OVERLAP_H

#include "internal.h"

#define OVL_MAX_CHUNKS 16 /* TPLA_OVERLAP_MAX_CHUNKS */
#define OVL_ALIGN 256     /* byte alignment of every buffer in a window or staging area */

/* ---- the transport (implemented by each executor) ------------------------ */

typedef struct tpla_xport tpla_xport_t;

/* How a transport moves pieces between ranks. */
typedef enum {
  OVL_XPORT_AUTO = 0,    /* create: PEER if every rank can map every peer, else SENDRECV */
  OVL_XPORT_PEER = 1,    /* one-sided: copy into / out of peer-mapped windows + flags */
  OVL_XPORT_SENDRECV = 2, /* two-sided point-to-point (NCCL send/recv, host sendrecv) */
  OVL_XPORT_LOCAL = 3    /* no peer traffic (serial mode): memory, lanes, GEMM only */
} ovl_xport_kind_t;

/* Lanes a schedule names. The transport adds its own copy/communication
 * lanes for steps (one per peer, or one NCCL lane). */
enum { OVL_LANE_COMPUTE0 = 0, OVL_LANE_COMPUTE1 = 1, OVL_LANE_COPY = 2, OVL_LANES = 3 };

typedef struct {
  ovl_xport_kind_t kind;
  size_t window_bytes; /* this rank's window (may differ between ranks; may be 0) */
  int nflags;          /* step flags (0 <= flag < nflags) */
  const char *fn;      /* the public function, for messages */
} ovl_xport_desc_t;

/* One transfer step, described alike by both ranks of each pair: this rank
 * sends `send` to rank `to` and receives a piece from rank `from` (at step
 * i of a ring schedule, to = rank + i and from = rank - i). -1: no piece.
 *   PEER push (pull == 0): after `to` announced `seq`, `send` is copied to
 *     `to`'s window at to_offset (dense rows, ld = send.cols) and `to`'s
 *     flag `flag` set to seq; the receiving side does nothing here and
 *     waits with arrival().
 *   PEER pull (pull == 1): this rank sets `to`'s flag (its piece, which
 *     must be in this rank's window, is ready) and, once `from` set ours,
 *     copies `from`'s window at from_offset (rows from_ld elements apart;
 *     0: dense) into `recv`. A step that only publishes (from = -1) runs on
 *     lane `after` itself, so that no pull queued before it delays it.
 *   SENDRECV: `send` to `to` and `recv` from `from` as one point-to-point
 *     exchange; both views dense.
 * The step runs on a lane of the transport's choice after the work already
 * enqueued on lane `after` (-1: none). */
typedef struct {
  int to;
  tpla_matrix_t send;
  size_t to_offset;
  int from;
  tpla_matrix_t recv;
  size_t from_offset;
  int pull;
  int flag;
  int after;
  /* FP8 AllGather+GEMM: the sender's A scale (one float) travels with its
   * first non-empty chunk, before the data: PEER pushes scale_send to
   * `to`'s window at scale_to_offset; SENDRECV sends it to `to` and
   * receives `from`'s into scale_recv. NULL: no scale this step. */
  const float *scale_send;
  size_t scale_to_offset;
  float *scale_recv;
  int64_t from_ld; /* PEER pull: the source's row pitch (elements); 0: recv.cols */
  /* PEER push whose piece this rank already wrote into `to`'s window (a GEMM
   * whose D was peer_window(to), after wait_ready(to)): only `to`'s flag is
   * set, on lane `after` itself, behind the writes. */
  int written;
} ovl_step_t;

/* y = beta * y + s + bias and, when y2.data != NULL, y2 = s, where
 * s = sum of nslots dense slots (y's shape and dtype, ld = y.cols) starting
 * at `slots`, slot_stride elements apart. bias: NULL or y.cols elements of
 * y's dtype added to every row. beta == 0 never reads y. y2 may be slot 0. */
typedef struct {
  tpla_matrix_t y;
  float beta;
  const void *slots;
  size_t slot_stride;
  int nslots;
  const void *bias;
  tpla_matrix_t y2;
} ovl_fold_t;

struct tpla_xport_ops {
  /* Collective over the context's ranks: allocate and (PEER) map the
   * windows, resolve AUTO identically on every rank. Every rank reaches the
   * same verdict: a rank whose own part failed returns its status, the
   * others REMOTE naming it. */
  tpla_status_t (*create)(tpla_ctx_t ctx, const ovl_xport_desc_t *desc, tpla_xport_t **out);
  /* Not collective; call only when no call of the plan is in flight on any
   * rank (synchronizes this rank's lanes). Accepts NULL. */
  void (*destroy)(tpla_xport_t *xp);
  ovl_xport_kind_t (*kind)(const tpla_xport_t *xp);
  void *(*window)(const tpla_xport_t *xp);
  size_t (*bytes)(const tpla_xport_t *xp); /* executor memory held (window + flags) */
  void *(*stream)(const tpla_xport_t *xp, int lane); /* CUDA: the lane's stream; host: NULL */
  /* PEER: rank q's window as this rank's GEMMs may write into it (mapped
   * memory of q); NULL for other kinds and during a rehearsal, when no peer
   * is touched. */
  void *(*peer_window)(const tpla_xport_t *xp, int q);
  /* Optional (NULL: never). Whether `stream` is being captured into a CUDA
   * graph that this transport's calls cannot be replayed from (PEER: each
   * call's flags carry its number). Asked before a call is counted. */
  bool (*cannot_capture)(const tpla_xport_t *xp, void *stream);
  /* Optional (NULL: never). Whether `stream` is being captured into a CUDA graph. */
  bool (*capturing)(void *stream);
  /* Start call `seq` of public function `fn` (named by the messages of the
   * call's operations): lanes follow the work on `stream`; PEER: announce
   * "ready for seq" to every peer. REMOTE once a peer aborted. */
  tpla_status_t (*begin)(tpla_xport_t *xp, uint32_t seq, void *stream, const char *fn);
  /* End the call: `stream` follows all lanes. Run even after a failure. */
  tpla_status_t (*end)(tpla_xport_t *xp, void *stream);
  tpla_status_t (*step)(tpla_xport_t *xp, const ovl_step_t *step, uint32_t seq);
  /* `lane` waits until the piece of step `flag` of call seq is in place. */
  tpla_status_t (*arrival)(tpla_xport_t *xp, int lane, int flag, uint32_t seq);
  /* `lane` waits until `peer` announced call seq (PEER; no-op otherwise). */
  tpla_status_t (*wait_ready)(tpla_xport_t *xp, int lane, int peer, uint32_t seq);
  /* `lane` waits for the work enqueued so far on every other lane. */
  tpla_status_t (*sync_lanes)(tpla_xport_t *xp, int lane);
  /* The host waits until the work enqueued on every lane is done (a window
   * group's buffers change hands: overlap_group.c). */
  tpla_status_t (*quiesce)(tpla_xport_t *xp);
  /* A validated GEMM (m, n > 0; k may be 0) on `lane`:
   *   D = alpha op(A) op(B) + beta C + bias,
   * C = D when c is NULL, else *c (D's shape and dtype, any ld, not
   * overlapping D); bias: NULL or n elements of D's dtype for every row. */
  tpla_status_t (*gemm)(tpla_xport_t *xp, int lane, const tpla_gemm_call_t *call,
                        const void *bias, const tpla_matrix_t *c);
  tpla_status_t (*fold)(tpla_xport_t *xp, int lane, const ovl_fold_t *fold);
  /* dst = src, equal shapes and dtypes, any lds; after >= 0: `lane` first
   * follows the work enqueued so far on lane `after`. */
  tpla_status_t (*copy)(tpla_xport_t *xp, int lane, int after, tpla_matrix_t dst,
                        tpla_matrix_t src);
  /* *dst = *src, one float in executor memory; src NULL: *dst = 1. */
  tpla_status_t (*set_scale)(tpla_xport_t *xp, int lane, float *dst, const float *src);
  /* FP8: dst (src.cols x src.rows) = src^T, one-byte elements, any lds. */
  tpla_status_t (*transpose)(tpla_xport_t *xp, int lane, tpla_matrix_t dst, tpla_matrix_t src);
  /* *amax = max |m| over a bf16/fp16/fp32 matrix (0 when empty); amax is
   * executor memory (device on CUDA). */
  tpla_status_t (*amax)(tpla_xport_t *xp, int lane, tpla_matrix_t m, float *amax);
  /* Optional (NULL: no rehearsal, as the shared-memory host transport; the
   * threads' host transport has them so that CI runs the plans' rehearsal
   * code). Plan creation rehearses calls so that every kernel the schedule
   * launches is loaded before any real call (CUDA lazy loading: see
   * docs/OVERLAP.md "Lazy loading"). rehearse_begin loads the transport's
   * own kernels, zeroes the window and, when scratch_bytes > 0, returns
   * zeroed executor scratch; until rehearse_end, begin announces nothing and step,
   * arrival and wait_ready do nothing (no peer is touched or waited for).
   * rehearse_end waits for the lanes and frees the scratch; NULL accepted. */
  tpla_status_t (*rehearse_begin)(tpla_xport_t *xp, size_t scratch_bytes, void **scratch);
  tpla_status_t (*rehearse_end)(tpla_xport_t *xp, void *scratch);
};

/* The executors' tables (src/cuda/transport.c, src/host/host_transport.c). */
extern const struct tpla_xport_ops tpla_cuda_xport_ops;
extern const struct tpla_xport_ops tpla_host_xport_ops;

/* Cyclic "a is at or after b" for call numbers. */
static inline bool ovl_seq_reached(uint32_t a, uint32_t b) { return (int32_t)(a - b) >= 0; }

/* ---- plans ------------------------------------------------------------------ */

typedef enum { OVL_AG = 0, OVL_RS = 1, OVL_AR = 2 } ovl_kind_t;

typedef struct {
  ovl_kind_t kind;
  tpla_ctx_t ctx;
  const struct tpla_xport_ops *ops;
  int rank, nranks;
  tpla_overlap_mode_t mode;   /* OVERLAP or SERIAL */
  ovl_xport_kind_t xkind;     /* resolved transport */
  int chunks;                 /* row chunks per rank's slice */
  int tail;                   /* the last chunk is 1/tail of the others (1: equal) */

  /* AG: m = sum of rows, k agreed, n local. RS/AR: m agreed, k local, n agreed. */
  int64_t m, k, n;
  int64_t *offs;              /* nranks + 1 row offsets of the slices */
  tpla_op_t op_b;
  tpla_dtype_t dtype, d_dtype;
  bool bias;
  int allow_tf32;
  bool fp8;                   /* dtype is E4M3/E5M2 */
  bool direct;                /* RS/AR over PEER: the partials' GEMMs write into the peers'
                                 windows, no copy (TPLA_OVERLAP_DIRECT=1; this rank's choice) */
  size_t bt_off;              /* FP8 with op_b N: staging offset of B^T (n x k), else SIZE_MAX */
  struct {                    /* which B the staged B^T holds (valid: b_version != 0) */
    const void *data;
    int64_t ld;
    uint64_t b_version;
  } bt_of;
  bool bt_in_graph;           /* a call was captured: graph replays rewrite the staging unseen,
                                 so no staged B^T is reused any more (group: the group's) */
  size_t scales_off;          /* FP8 AG: window offset of the nranks A scales */

  tpla_xport_t *xp;
  void *staging;              /* local executor memory (RS/AR partials, serial buffers) */
  size_t staging_bytes;
  size_t *stage_off;          /* RS/AR overlapped: byte offset of the send slot for rank q */
  size_t *counts;             /* SERIAL: elements of each rank's slice (AG: rows k, else rows n) */
  size_t window_bytes;
  /* the call in progress: B's dtype, op(B) and scaling as the GEMMs see them */
  tpla_dtype_t cur_b_dtype;
  tpla_op_t cur_op_b;
  tpla_fp8_scaling_t cur_fp8;
  uint32_t seq;               /* calls issued (in a window group: the group's calls) */
  struct ovl_group *group;    /* window_group > 0: the shared buffers (overlap_group.c) */
  bool group_joined;          /* a member; false while its creation may still fail */
  bool fence_peers;           /* this call follows another member's: wait for the peers first
                               * (set by the group, cleared after the call's schedule) */
  bool has_gathered;          /* AG: the window holds the last call's gathered A */
  bool broken;                /* an execute failed after it started: unusable */
} ovl_plan_t;

struct tpla_ag_gemm_plan { ovl_plan_t p; };
struct tpla_gemm_rs_plan { ovl_plan_t p; };
struct tpla_gemm_ar_plan { ovl_plan_t p; };

static inline int64_t ovl_rows(const ovl_plan_t *p, int r) { return p->offs[r + 1] - p->offs[r]; }

/* Rows [*r0, *r0 + *nr) of chunk c of a slice of `rows` rows cut into
 * `chunks` pieces, the last about 1/tail of the others (the same on every
 * rank for a given slice). */
void ovl_chunk(int64_t rows, int chunks, int tail, int c, int64_t *r0, int64_t *nr);
/* The tail AUTO chooses from agreed values (TPLA_OVERLAP_TAIL overrides;
 * see overlap_plan.c). */
int ovl_auto_tail(ovl_kind_t kind, int nranks, int64_t k, int64_t n, tpla_dtype_t dtype);
/* The chunk count AUTO chooses from agreed values (see overlap_plan.c). */
int ovl_auto_chunks(ovl_kind_t kind, int nranks, int64_t max_rows, int64_t k, int64_t n,
                    tpla_dtype_t dtype);
/* Flag of step (i, c) of phase `phase` (AR has two). */
static inline int ovl_flag(const ovl_plan_t *p, int phase, int i, int c) {
  return (phase * (p->nranks - 1) + (i - 1)) * p->chunks + c;
}

/* overlap_plan.c */
void ovl_plan_free(ovl_plan_t *p);
void ovl_plan_info(const ovl_plan_t *p, tpla_overlap_info_t *info);
size_t ovl_plan_bytes(const ovl_plan_t *p);

/* overlap_group.c: window groups (plans sharing their buffers).
 * join: collective; the plan (p->mode, p->staging_bytes and p->ops set, `xd` its
 * transport's needs) takes the group's buffers, or larger ones made for it
 * (every rank, or none); p->xp, p->staging and p->seq are then those.
 * commit: once the plan's creation has succeeded, it becomes a member, and
 * larger buffers made for it replace the group's; a plan that leaves
 * without it (its creation failed) frees what was made for it, and the
 * group is as it was but for a zeroed window (the rehearsal's).
 * leave: the last member releases the buffers. enter/exit bracket a call:
 * enter fails (INVALID_USAGE) once a call of the group failed, and forgets
 * what another member's call overwrote (gathered view, staged B^T); exit
 * (after a call that began) carries the call count back to the group.
 * holds: no other member used the buffers since this plan's last call.
 * bytes: the group's executor memory. xport: the transport the plan's next
 * call will use (the group's, for a member). */
typedef struct ovl_group ovl_group_t;
tpla_status_t ovl_group_join(ovl_plan_t *p, int id, const ovl_xport_desc_t *xd, const char *fn);
void ovl_group_commit(ovl_plan_t *p);
void ovl_group_leave(ovl_plan_t *p);
tpla_status_t ovl_group_enter(ovl_plan_t *p, const char *fn);
void ovl_group_exit(ovl_plan_t *p, bool failed);
bool ovl_group_holds(const ovl_plan_t *p);
/* A call was captured: the plan's (or its group's) staging is a graph's from now on. */
void ovl_group_mark_graph(ovl_plan_t *p);
bool ovl_group_in_graph(const ovl_plan_t *p);
size_t ovl_group_bytes(const ovl_plan_t *p);
tpla_xport_t *ovl_group_xport(const ovl_plan_t *p);
/* The memory the plan's calls write (its group's, in a group): this rank's
 * transfer window and staging, as byte rows (0 rows where there is none). */
void ovl_plan_memory(const ovl_plan_t *p, tpla_matrix_t *window, tpla_matrix_t *staging);

/* overlap_exec.c: run a validated call (views checked against the plan). */
typedef struct {
  tpla_matrix_t d, a, b;
  float alpha, beta;
  const void *bias;
  void *stream;
  tpla_fp8_scaling_t fp8; /* FP8 plans; TPLA_FP8_SCALING_INIT otherwise */
  uint64_t b_version;     /* tpla_overlap_args_t.b_version */
} ovl_call_t;
tpla_status_t ovl_run(ovl_plan_t *p, const ovl_call_t *call, const char *fn);

/* A view of rows [r0, r0 + nr) of m (data NULL when empty). */
tpla_matrix_t ovl_rows_of(tpla_matrix_t m, int64_t r0, int64_t nr);
/* A dense rows x cols view at base + offset bytes. */
tpla_matrix_t ovl_dense(void *base, size_t offset, int64_t rows, int64_t cols,
                        tpla_dtype_t dtype);

#endif /* TPLA_OVERLAP_H */
