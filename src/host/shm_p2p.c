/*
 * shm_p2p.c - point-to-point transfers of the cross-process host group.
 *
 * Every rank has one outgoing mailbox (its slot's shm_mail_t) and its
 * staging area. A message of B bytes travels in chunks of at most the
 * staging size: the sender copies a chunk into its own staging area and
 * marks it POSTED (to dst, with the whole message's count and dtype); the
 * receiver CLAIMs it, copies it out without the lock, and marks it TAKEN;
 * the sender then posts the next chunk. A message always has at least one
 * chunk, so a 0-element transfer still meets its peer and checks counts.
 *
 * One loop drives both directions of a sendrecv (post what can be posted,
 * take what has arrived, else sleep on the bell), so a ring shift cannot
 * deadlock. A claimed chunk is waited for while its copy runs, within the
 * call's deadline (a receiver stopped or gone unseen mid-copy times out and
 * breaks the group, whose later calls then all fail).
 */
#include "shm.h"

#include <string.h>

typedef struct {
  shm_group_t *g;
  int rank;
  bool poisoned;
  tpla_status_t status; /* the first failure; its message stands */
  /* sending */
  const char *send;
  size_t send_bytes, sent;
  size_t send_count;
  int dst;
  bool posted, send_done;
  /* receiving */
  char *recv;
  size_t recv_bytes, got;
  size_t recv_count;
  int src;
  bool first_seen, recv_done;
  tpla_dtype_t dtype;
  const char *fn;
} xfer_t;

static void set_status(xfer_t *x, tpla_status_t s) {
  if (x->status == TPLA_SUCCESS)
    x->status = s;
}

/* Sender side; returns true if something changed. Lock held. */
static bool progress_send(xfer_t *x) {
  shm_mail_t *m = shm_mail(x->g, x->rank);
  if (x->posted && m->state == SHM_MAIL_REJECTED) {
    if (!x->poisoned && x->status == TPLA_SUCCESS)
      set_status(x, tpla_fail(TPLA_ERROR_REMOTE, x->fn,
                              "rank %d (dst) rejected the transfer: this rank sends %zu "
                              "elements of %s, it expects %llu of %s (or rejected its own call)",
                              x->dst, x->send_count, tpla_dtype_name(x->dtype),
                              (unsigned long long)m->want_count,
                              tpla_dtype_name((tpla_dtype_t)m->want_dtype)));
    m->state = SHM_MAIL_EMPTY;
    x->send_done = true;
    return true;
  }
  if (x->posted && m->state != SHM_MAIL_TAKEN)
    return false; /* POSTED or CLAIMED: wait */
  if (x->posted && (x->sent >= x->send_bytes || x->poisoned)) {
    m->state = SHM_MAIL_EMPTY;
    x->send_done = true;
    return true;
  }
  size_t chunk = x->poisoned ? 0 : x->send_bytes - x->sent;
  if (chunk > shm_staging_bytes(x->g))
    chunk = shm_staging_bytes(x->g);
  if (chunk > 0) { /* our staging area is ours while the mailbox is not POSTED */
    shm_unlock(x->g);
    memcpy(shm_staging(x->g, x->rank), x->send + x->sent, chunk);
    shm_lock(x->g);
  }
  m->dst = x->dst;
  m->dtype = (int32_t)x->dtype;
  m->poisoned = x->poisoned;
  m->count = x->send_count;
  m->offset = x->sent;
  m->bytes = chunk;
  m->state = SHM_MAIL_POSTED;
  x->sent += chunk;
  x->posted = true;
  shm_ring(x->g);
  return true;
}

/* Receiver side; returns true if something changed. Lock held. */
static bool progress_recv(xfer_t *x) {
  shm_mail_t *m = shm_mail(x->g, x->src);
  if (m->state != SHM_MAIL_POSTED || m->dst != x->rank)
    return false;
  if (!x->first_seen) {
    x->first_seen = true;
    tpla_status_t s = TPLA_SUCCESS;
    if (!x->poisoned && m->poisoned)
      s = tpla_fail(TPLA_ERROR_REMOTE, x->fn, "rank %d (src) rejected its own call", x->src);
    else if (!x->poisoned && (m->count != x->recv_count || m->dtype != (int32_t)x->dtype))
      s = tpla_fail(TPLA_ERROR_REMOTE, x->fn,
                    "rank %d (src) sends %llu elements of %s but this rank expects %zu of %s",
                    x->src, (unsigned long long)m->count,
                    tpla_dtype_name((tpla_dtype_t)m->dtype), x->recv_count,
                    tpla_dtype_name(x->dtype));
    if (x->poisoned || s != TPLA_SUCCESS || m->offset != 0) {
      if (s == TPLA_SUCCESS && !x->poisoned)
        s = tpla_fail(TPLA_ERROR_INTERNAL, x->fn, "rank %d's message starts mid-way", x->src);
      set_status(x, s);
      m->want_count = x->recv_count;
      m->want_dtype = (int32_t)x->dtype;
      m->state = SHM_MAIL_REJECTED;
      x->recv_done = true;
      shm_ring(x->g);
      return true;
    }
  }
  size_t bytes = m->bytes;
  if (m->offset != x->got || x->got + bytes > x->recv_bytes) {
    set_status(x, tpla_fail(TPLA_ERROR_INTERNAL, x->fn, "rank %d's chunks are out of order",
                            x->src));
    m->state = SHM_MAIL_REJECTED;
    x->recv_done = true;
    shm_ring(x->g);
    return true;
  }
  m->state = SHM_MAIL_CLAIMED;
  if (bytes > 0) {
    shm_unlock(x->g);
    memcpy(x->recv + x->got, shm_staging(x->g, x->src), bytes);
    shm_lock(x->g);
  }
  x->got += bytes;
  m->state = SHM_MAIL_TAKEN;
  x->recv_done = x->got >= x->recv_bytes;
  shm_ring(x->g);
  return true;
}

tpla_status_t shm_sendrecv(shm_group_t *g, int64_t timeout_ms, const char *fn,
                           tpla_dtype_t dtype, const void *send, size_t send_count, int dst,
                           void *recv, size_t recv_count, int src, tpla_status_t local_status) {
  size_t es = tpla_dtype_size(dtype);
  xfer_t x = {.g = g, .rank = shm_group_rank(g), .poisoned = local_status != TPLA_SUCCESS,
              .send = send, .send_bytes = send_count * es, .send_count = send_count, .dst = dst,
              .send_done = dst < 0, .recv = recv, .recv_bytes = recv_count * es,
              .recv_count = recv_count, .src = src, .recv_done = src < 0, .dtype = dtype,
              .fn = fn};
  shm_wait_t w = shm_wait_start(timeout_ms, fn);
  shm_lock(g);
  while (!(x.send_done && x.recv_done)) {
    bool moved = false;
    if (!x.send_done)
      moved |= progress_send(&x);
    if (!x.recv_done)
      moved |= progress_recv(&x);
    if (moved)
      continue;
    bool report = !x.poisoned && x.status == TPLA_SUCCESS;
    /* A chunk of ours is being copied out of our staging area: wait for the
     * copy, within the deadline and while the group holds and the reader
     * lives. A reader stopped mid-copy (SIGSTOP, a debugger) or gone
     * unseen (another pid namespace) then times out here like any peer:
     * the group breaks, so no later call rewrites the staging area it may
     * still read into its (failed) call's recv. */
    if (!x.send_done && shm_mail(g, x.rank)->state == SHM_MAIL_CLAIMED) {
      tpla_status_t s = shm_check_wait(g, &w, dst, "to copy a chunk out", true, report);
      if (s != TPLA_SUCCESS) {
        set_status(&x, s);
        break;
      }
      shm_wait_bell(g, &w);
      continue;
    }
    tpla_status_t s = TPLA_SUCCESS;
    if (!x.recv_done)
      s = shm_check_wait(g, &w, src, "to send", true, report);
    if (s == TPLA_SUCCESS && !x.send_done)
      s = shm_check_wait(g, &w, dst, "to receive", true, report);
    if (s != TPLA_SUCCESS) {
      set_status(&x, s);
      break;
    }
    shm_wait_bell(g, &w);
  }
  /* Retract an unclaimed chunk; a failed exchange leaves the mailbox empty. */
  shm_mail_t *own = shm_mail(g, x.rank);
  if (own->state != SHM_MAIL_CLAIMED)
    own->state = SHM_MAIL_EMPTY;
  shm_unlock(g);
  return x.poisoned ? local_status : x.status;
}
