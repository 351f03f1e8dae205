/*
 * shm.h - the cross-process host group (tpla_host_group_create_shared):
 * ranks are processes of one machine that share one POSIX shared-memory
 * segment. Internal to the host executor:
 *   shm_group.c  the segment (create/attach/unlink), the robust process-
 *                shared lock, the futex "bell" waits, the timed rendezvous,
 *                liveness of peer processes, broken-group bookkeeping;
 *   shm_p2p.c    point-to-point transfers through per-rank mailboxes;
 *   shm_coll.c   the collectives;
 *   shm_ctx.c    tpla_host_group_create_shared, contexts, the backend table.
 *
 * Unlike the thread group (group.c), no rank ever reads another rank's
 * buffers: every rank owns a staging area in the segment, a collective
 * copies its data there in chunks of at most shm_staging_bytes(), meets the
 * others at a rendezvous, and reads the peers' staging areas. Reductions
 * add the ranks in order in fp32 (fp64 for fp64) and round once, so results
 * are bit-identical to the thread group's.
 *
 * Every wait is bounded: by the configured timeout, and every 50 ms by a
 * check that the awaited peers' processes are still alive and have not left
 * the group; either failure breaks the group for every rank (REMOTE), as
 * in the thread group.
 */
#ifndef TPLA_SHM_H
#define TPLA_SHM_H

#include "host.h"

typedef struct shm_group shm_group_t;

/* Attach this process as `rank` to the group `name` of `nranks` (rank 0
 * creates the segment) and wait until every rank has attached; rank 0 then
 * unlinks the name. conf holds the defaults already applied. */
tpla_status_t shm_group_open(shm_group_t **out, const char *name, int nranks, int rank,
                             const tpla_config_t *conf, const char *fn);
/* Detach (INVALID_USAGE while this process still has a live context). */
tpla_status_t shm_group_close(shm_group_t *g);
int shm_group_rank(const shm_group_t *g);

/* The context of this process's rank appears / goes (a departed rank
 * breaks the waits of peers that still expect it, as in group.c). */
tpla_status_t shm_group_join(shm_group_t *g, const char *fn);
void shm_group_leave(shm_group_t *g);

/* host_group_break and host_group_broken of a cross-process group: the
 * break is seen by every process of the group. */
tpla_status_t shm_group_break(shm_group_t *g, const char *why);
bool shm_group_broken(shm_group_t *g, char *why, size_t size);

/* Staging area of `rank` (ours to write, the peers' to read) and its size. */
void *shm_staging(shm_group_t *g, int rank);
size_t shm_staging_bytes(const shm_group_t *g);

/* ---- rendezvous (shm_group.c) ---------------------------------------------- */

/* What a rank posts when it enters a collective: no pointers, only what the
 * ranks must agree on. Unused fields stay zero. */
typedef struct {
  int32_t kind; /* host_op_kind_t */
  int32_t dtype;
  uint64_t count;
  uint64_t total;
  uint64_t counts_hash;
  int32_t root;
  int32_t local_status; /* not SUCCESS: this rank rejected its own call */
} shm_post_t;

/* Post and wait (at most timeout_ms) until every rank has posted. On
 * SUCCESS every post can be read with shm_post() until the next
 * shm_sync(). TIMEOUT (the group breaks) or REMOTE (it is or becomes
 * broken: a peer timed out, exited, died or destroyed its context). */
tpla_status_t shm_enter(shm_group_t *g, const shm_post_t *post, int64_t timeout_ms,
                        const char *fn);
const shm_post_t *shm_post(shm_group_t *g, int rank);
/* Wait until every rank reaches this point; *any = OR of every rank's
 * `flag` (any may be NULL). Bounded like shm_enter. */
tpla_status_t shm_sync(shm_group_t *g, int flag, int *any, int64_t timeout_ms, const char *fn);

/* ---- point-to-point (shm_p2p.c) --------------------------------------------- */

/* Send send_count elements to `dst` and receive recv_count from `src`
 * (-1: none; both differ from this rank) as one operation, chunked through
 * the sender's staging area. A rank that rejected its own call passes its
 * status as local_status: it moves no data, its peers get REMOTE and it
 * gets local_status back. Count or dtype mismatches: REMOTE on both sides,
 * the group stays usable. */
tpla_status_t shm_sendrecv(shm_group_t *g, int64_t timeout_ms, const char *fn,
                           tpla_dtype_t dtype, const void *send, size_t send_count, int dst,
                           void *recv, size_t recv_count, int src, tpla_status_t local_status);

/* ---- contexts (shm_ctx.c) and collectives (shm_coll.c) ---------------------- */

/* ctx->impl of a context on a shared group: the host context's fields
 * (so the host GEMM and building blocks apply) and the segment. */
typedef struct {
  host_ctx_t base;
  shm_group_t *shm;
} shm_ctx_t;

/* tpla_ctx_create_host for a shared group (arguments validated but rank). */
tpla_status_t shm_ctx_create(tpla_ctx_t *ctx, tpla_host_group_t group, int rank,
                             const tpla_config_t *cfg, const char *fn);

tpla_status_t shm_allreduce(tpla_ctx_t ctx, void *recv, const void *send, size_t count,
                            tpla_dtype_t dtype, void *stream);
tpla_status_t shm_allgatherv(tpla_ctx_t ctx, void *recv, const void *send, const size_t *counts,
                             tpla_dtype_t dtype, void *stream);
tpla_status_t shm_reduce_scatterv(tpla_ctx_t ctx, void *recv, const void *send,
                                  const size_t *counts, tpla_dtype_t dtype, void *stream);
tpla_status_t shm_broadcast(tpla_ctx_t ctx, void *buf, size_t count, tpla_dtype_t dtype,
                            int root, void *stream);
tpla_status_t shm_sendrecv_m(tpla_ctx_t ctx, const void *send, size_t send_count, int dst,
                             void *recv, size_t recv_count, int src, tpla_dtype_t dtype,
                             void *stream);
tpla_status_t shm_barrier(tpla_ctx_t ctx, void *stream);
tpla_status_t shm_alltoallv(tpla_ctx_t ctx, void *recv, const size_t *recv_counts,
                            const size_t *recv_displs, const void *send,
                            const size_t *send_counts, const size_t *send_displs,
                            tpla_dtype_t dtype, void *stream);

/* ---- shared by shm_group.c and shm_p2p.c (hold the lock) --------------------- */

typedef struct {
  int64_t deadline_ms; /* CLOCK_MONOTONIC */
  int64_t timeout_ms;
  const char *fn;
} shm_wait_t;

shm_wait_t shm_wait_start(int64_t timeout_ms, const char *fn);
void shm_lock(shm_group_t *g);
void shm_unlock(shm_group_t *g);
/* Ring the bell: wake every rank waiting in shm_wait_bell (lock held). */
void shm_ring(shm_group_t *g);
/* Drop the lock, sleep until the bell rings or at most 50 ms, retake it. */
void shm_wait_bell(shm_group_t *g, const shm_wait_t *w);
/* With the lock held: SUCCESS while the wait may go on; else the failure
 * (recorded if `report`): the group is broken (REMOTE), `peer` (or, for
 * peer < 0, a rank that has not arrived at this rendezvous) left or died
 * (REMOTE; breaks the group), or the deadline passed (TIMEOUT; breaks
 * it). `what` says what this rank waits for, e.g. "to send". */
tpla_status_t shm_check_wait(shm_group_t *g, const shm_wait_t *w, int peer, const char *what,
                             bool check_deadline, bool report);

/* With the lock held: break the group for every rank (the first reason is
 * kept) and ring the bell. */
void shm_break_locked(shm_group_t *g, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* With the lock held: why rank q has left the group or died, or NULL. */
const char *shm_peer_gone(shm_group_t *g, int q);

/* Mailbox of `rank` (its outgoing point-to-point message). */
typedef enum {
  SHM_MAIL_EMPTY,
  SHM_MAIL_POSTED,
  SHM_MAIL_CLAIMED,
  SHM_MAIL_TAKEN,
  SHM_MAIL_REJECTED
} shm_mail_state_t;
typedef struct {
  int32_t state; /* shm_mail_state_t */
  int32_t dst;
  int32_t dtype;
  int32_t poisoned;       /* the sender rejected its own call: no data */
  uint64_t count;         /* elements of the whole message */
  uint64_t offset;        /* byte offset of the posted chunk in the message */
  uint64_t bytes;         /* bytes of the posted chunk (in the sender's staging) */
  uint64_t want_count;    /* set by a rejecting receiver */
  int32_t want_dtype;
  int32_t unused;
} shm_mail_t;
shm_mail_t *shm_mail(shm_group_t *g, int rank);

#endif /* TPLA_SHM_H */
