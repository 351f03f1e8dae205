/*
 * group.c - the host group: N ranks as N threads of one process.
 *
 * One mutex and one condition variable (on CLOCK_MONOTONIC) guard the
 * group. Group-wide collectives use a generation-counting rendezvous; the
 * entry rendezvous of each operation is timed, and a rank whose wait runs
 * out marks the group broken, so every rank still waiting, and every later
 * call on any rank, fails with TPLA_ERROR_REMOTE instead of hanging. A rank
 * that destroys its context while others wait for it breaks the group too,
 * and so does tpla_ctx_abort (host_group_break, from any thread).
 *
 * Point-to-point transfers use one outgoing mailbox per rank (a sendrecv
 * sends at most one message): post the send, receive (claim the peer's
 * message, copy it outside the lock, mark it done), then wait until the
 * own message was taken. Posting before receiving is what makes a ring
 * shift deadlock-free. A claimed message is never abandoned: the sender
 * waits for the copy to finish even past its deadline, because the
 * receiver is alive and reading the sender's buffer.
 */
#include "host.h"
#include "shm.h" /* shm_group_close */

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef enum { MAIL_EMPTY, MAIL_POSTED, MAIL_CLAIMED, MAIL_DONE, MAIL_REJECTED } mail_state_t;

typedef struct {
  /* group-wide collectives */
  uint64_t entered; /* collectives this rank has entered, over all its contexts */
  host_post_t post;
  /* this rank's outgoing point-to-point message */
  mail_state_t mail;
  int mail_dst;
  const void *mail_data;
  size_t mail_count;
  tpla_dtype_t mail_dtype;
  bool mail_poisoned;       /* the sender rejected its own call: no data */
  size_t mail_want_count;   /* set by a rejecting receiver, for the sender's message */
  tpla_dtype_t mail_want_dtype;
  /* membership */
  bool live;     /* a context of this rank exists */
  bool departed; /* a context existed and was destroyed */
} rank_slot_t;

struct tpla_host_group {
  int nranks;
  tpla_config_t cfg;
  pthread_mutex_t mu;
  pthread_cond_t cv;
  int arrived;         /* ranks inside the current rendezvous */
  uint64_t generation; /* completed rendezvous */
  int sync_flag;       /* OR of the flags of the current rendezvous */
  int last_sync_flag;  /* ... of the last completed one */
  int live;
  _Atomic bool broken; /* read without the lock by host_group_broken */
  char why[320];
  struct shm_group *shm; /* a cross-process group (shm_group.c): no slots here */
  rank_slot_t slots[];
};

/* ---- public: create / destroy ------------------------------------------- */

tpla_status_t tpla_host_group_create(tpla_host_group_t *group, int nranks,
                                     const tpla_config_t *cfg) {
  static const char fn[] = "tpla_host_group_create";
  tpla_clear_error();
  if (group == NULL)
    return tpla_fail(TPLA_ERROR_INVALID_ARGUMENT, fn, "argument 'group' is NULL");
  if (nranks < 1 || nranks > TPLA_MAX_RANKS)
    return tpla_fail(TPLA_ERROR_INVALID_ARGUMENT, fn, "argument 'nranks': %d is not in [1, %d]",
                     nranks, TPLA_MAX_RANKS);
  tpla_config_t conf;
  TPLA_TRY(tpla_check_config(fn, cfg, &conf));
  struct tpla_host_group *g = calloc(1, sizeof *g + (size_t)nranks * sizeof(rank_slot_t));
  if (g == NULL)
    return tpla_fail(TPLA_ERROR_OUT_OF_MEMORY, fn, "cannot allocate a group of %d ranks", nranks);
  g->nranks = nranks;
  g->cfg = conf;
  if (!tpla_cond_init_monotonic(&g->cv)) {
    free(g);
    return tpla_fail(TPLA_ERROR_INTERNAL, fn, "pthread_cond_init failed");
  }
  if (pthread_mutex_init(&g->mu, NULL) != 0) {
    pthread_cond_destroy(&g->cv);
    free(g);
    return tpla_fail(TPLA_ERROR_INTERNAL, fn, "pthread_mutex_init failed");
  }
  *group = g;
  return TPLA_SUCCESS;
}

tpla_status_t tpla_host_group_destroy(tpla_host_group_t g) {
  tpla_clear_error();
  if (g == NULL)
    return TPLA_SUCCESS;
  if (g->shm != NULL) {
    TPLA_TRY(shm_group_close(g->shm));
    free(g);
    return TPLA_SUCCESS;
  }
  pthread_mutex_lock(&g->mu);
  int live = g->live, first = -1;
  for (int r = 0; r < g->nranks && first < 0; r++)
    if (g->slots[r].live)
      first = r;
  pthread_mutex_unlock(&g->mu);
  if (live > 0)
    return tpla_fail(TPLA_ERROR_INVALID_USAGE, "tpla_host_group_destroy",
                     "argument 'group': %d context(s) still live (rank %d among them); destroy "
                     "every context first",
                     live, first);
  pthread_cond_destroy(&g->cv);
  pthread_mutex_destroy(&g->mu);
  free(g);
  return TPLA_SUCCESS;
}

/* ---- cross-process groups (shm_ctx.c makes them) ------------------------- */

tpla_status_t host_group_wrap_shared(tpla_host_group_t *out, struct shm_group *shm, int nranks,
                                     const tpla_config_t *conf, const char *fn) {
  struct tpla_host_group *g = calloc(1, sizeof *g);
  if (g == NULL)
    return tpla_fail(TPLA_ERROR_OUT_OF_MEMORY, fn, "out of host memory");
  g->nranks = nranks;
  g->cfg = *conf;
  g->shm = shm;
  *out = g;
  return TPLA_SUCCESS;
}

struct shm_group *host_group_shared(tpla_host_group_t g) { return g->shm; }

/* ---- membership ---------------------------------------------------------- */

int host_group_nranks(tpla_host_group_t g) { return g->nranks; }

const tpla_config_t *host_group_config(tpla_host_group_t g) { return &g->cfg; }

tpla_status_t host_group_join(tpla_host_group_t g, int rank, const char *fn) {
  pthread_mutex_lock(&g->mu);
  bool taken = g->slots[rank].live;
  if (!taken) {
    g->slots[rank].live = true;
    g->slots[rank].departed = false;
    g->live++;
  }
  pthread_mutex_unlock(&g->mu);
  if (taken)
    return tpla_fail(TPLA_ERROR_INVALID_USAGE, fn,
                     "argument 'rank': rank %d of the group already has a live context", rank);
  return TPLA_SUCCESS;
}

void host_group_leave(tpla_host_group_t g, int rank) {
  pthread_mutex_lock(&g->mu);
  g->slots[rank].live = false;
  g->slots[rank].departed = true;
  g->live--;
  pthread_cond_broadcast(&g->cv); /* waiters re-check for departed peers */
  pthread_mutex_unlock(&g->mu);
}

/* ---- broken groups ------------------------------------------------------- */

/* Called with the lock held. The first reason wins. */
static void break_group(struct tpla_host_group *g, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static void break_group(struct tpla_host_group *g, const char *fmt, ...) {
  if (!g->broken) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(g->why, sizeof g->why, fmt, ap);
    va_end(ap);
    g->broken = true;
  }
  pthread_cond_broadcast(&g->cv);
}

tpla_status_t host_group_break(tpla_host_group_t g, const char *why) {
  if (g->shm != NULL)
    return shm_group_break(g->shm, why);
  pthread_mutex_lock(&g->mu); /* waiters hold it only between their condition waits */
  break_group(g, "%s", why);
  pthread_mutex_unlock(&g->mu);
  return TPLA_SUCCESS;
}

bool host_group_broken(tpla_host_group_t g, char *why, size_t size) {
  if (g->shm != NULL)
    return shm_group_broken(g->shm, why, size);
  if (!atomic_load_explicit(&g->broken, memory_order_acquire))
    return false;
  pthread_mutex_lock(&g->mu);
  snprintf(why, size, "%s", g->why);
  pthread_mutex_unlock(&g->mu);
  return true;
}

static tpla_status_t fail_broken(struct tpla_host_group *g, const char *fn) {
  return tpla_fail(TPLA_ERROR_REMOTE, fn, "the host group is broken: %s", g->why);
}

/* Ranks that have not entered collective number `entry` yet, as text. */
static void list_stragglers(struct tpla_host_group *g, uint64_t entry, char *out, size_t size) {
  size_t used = 0;
  int shown = 0, total = 0;
  out[0] = '\0';
  for (int r = 0; r < g->nranks; r++) {
    if (g->slots[r].entered >= entry)
      continue;
    total++;
    if (shown < 8 && used < size) {
      int n = snprintf(out + used, size - used, "%s%d", shown ? ", " : "", r);
      used += n > 0 ? (size_t)n : 0;
      shown++;
    }
  }
  if (total > shown && used < size)
    snprintf(out + used, size - used, " and %d more", total - shown);
}

/* ---- group-wide rendezvous ----------------------------------------------- */

/* Called with the lock held: counts this rank in; returns true if it was
 * the last one (and completed the rendezvous). */
static bool arrive(struct tpla_host_group *g, int flag) {
  g->sync_flag |= flag;
  if (++g->arrived < g->nranks)
    return false;
  g->arrived = 0;
  g->last_sync_flag = g->sync_flag;
  g->sync_flag = 0;
  g->generation++;
  pthread_cond_broadcast(&g->cv);
  return true;
}

tpla_status_t host_group_enter(tpla_host_group_t g, int rank, const host_post_t *post,
                               int64_t timeout_ms, const char *fn) {
  pthread_mutex_lock(&g->mu);
  /* A broken group never completes a rendezvous: whoever broke it has left. */
  if (g->broken) {
    pthread_mutex_unlock(&g->mu);
    return fail_broken(g, fn);
  }
  g->slots[rank].post = *post;
  uint64_t entry = ++g->slots[rank].entered;
  uint64_t gen = g->generation;
  if (arrive(g, 0)) {
    pthread_mutex_unlock(&g->mu);
    return TPLA_SUCCESS;
  }
  struct timespec deadline = tpla_deadline_after(timeout_ms);
  tpla_status_t status = TPLA_SUCCESS;
  while (g->generation == gen) {
    if (g->broken) {
      status = fail_broken(g, fn);
      break;
    }
    int gone = -1;
    for (int r = 0; r < g->nranks && gone < 0; r++)
      if (g->slots[r].departed && g->slots[r].entered < entry)
        gone = r;
    if (gone >= 0) {
      break_group(g, "rank %d destroyed its context while rank %d waited for it in %s", gone,
                  rank, fn);
      status = fail_broken(g, fn);
      break;
    }
    int rc = pthread_cond_timedwait(&g->cv, &g->mu, &deadline);
    if (rc == ETIMEDOUT && g->generation == gen && !g->broken) {
      char missing[128];
      list_stragglers(g, entry, missing, sizeof missing);
      break_group(g, "rank %d timed out after %lld ms in %s waiting for rank(s) %s", rank,
                  (long long)timeout_ms, fn, missing);
      status = tpla_fail(TPLA_ERROR_TIMEOUT, fn,
                         "timed out after %lld ms waiting for rank(s) %s; the group is now "
                         "broken",
                         (long long)timeout_ms, missing);
      break;
    }
  }
  pthread_mutex_unlock(&g->mu);
  return status;
}

const host_post_t *host_group_post(tpla_host_group_t g, int rank) { return &g->slots[rank].post; }

int host_group_sync(tpla_host_group_t g, int flag) {
  pthread_mutex_lock(&g->mu);
  uint64_t gen = g->generation;
  if (!arrive(g, flag))
    while (g->generation == gen)
      pthread_cond_wait(&g->cv, &g->mu);
  int result = g->last_sync_flag;
  pthread_mutex_unlock(&g->mu);
  return result;
}

/* ---- point-to-point ------------------------------------------------------ */

typedef enum { WAIT_DONE, WAIT_PENDING, WAIT_BUSY } wait_state_t;
typedef wait_state_t (*wait_pred_t)(const struct tpla_host_group *g, int rank, int peer);

static wait_state_t peer_has_posted(const struct tpla_host_group *g, int rank, int peer) {
  const rank_slot_t *s = &g->slots[peer];
  return s->mail == MAIL_POSTED && s->mail_dst == rank ? WAIT_DONE : WAIT_PENDING;
}

/* A claimed message is being copied: the receiver is alive, so no timeout. */
static wait_state_t own_mail_taken(const struct tpla_host_group *g, int rank, int peer) {
  mail_state_t m = g->slots[rank].mail;
  if (m == MAIL_DONE || m == MAIL_REJECTED)
    return WAIT_DONE;
  return m == MAIL_CLAIMED ? WAIT_BUSY : WAIT_PENDING;
}

/* With the lock held: wait until `pred` says done, the group breaks, `peer`
 * departs or the deadline passes (then the group breaks). The failure
 * message is recorded only if `report`. */
static tpla_status_t wait_for(struct tpla_host_group *g, wait_pred_t pred, int rank, int peer,
                              const struct timespec *deadline, int64_t timeout_ms,
                              const char *fn, const char *what, bool report) {
  wait_state_t st;
  while ((st = pred(g, rank, peer)) != WAIT_DONE) {
    if (g->broken && st != WAIT_BUSY)
      return report ? fail_broken(g, fn) : TPLA_ERROR_REMOTE;
    if (g->slots[peer].departed && st != WAIT_BUSY) {
      break_group(g, "rank %d destroyed its context while rank %d waited for it in %s", peer,
                  rank, fn);
      return report ? fail_broken(g, fn) : TPLA_ERROR_REMOTE;
    }
    if (st == WAIT_BUSY) {
      pthread_cond_wait(&g->cv, &g->mu);
      continue;
    }
    int rc = pthread_cond_timedwait(&g->cv, &g->mu, deadline);
    if (rc == ETIMEDOUT && pred(g, rank, peer) == WAIT_PENDING && !g->broken) {
      break_group(g, "rank %d timed out after %lld ms in %s waiting for rank %d to %s", rank,
                  (long long)timeout_ms, fn, peer, what);
      if (!report)
        return TPLA_ERROR_TIMEOUT;
      return tpla_fail(TPLA_ERROR_TIMEOUT, fn,
                       "timed out after %lld ms waiting for rank %d to %s; the group is now "
                       "broken",
                       (long long)timeout_ms, peer, what);
    }
  }
  return TPLA_SUCCESS;
}

/* With the lock held: take the message of `src` (posted to `rank`) or
 * reject it. Returns the receive status; the message is reported if
 * `report`. The copy runs outside the lock. */
static tpla_status_t take_message(struct tpla_host_group *g, int rank, int src, void *recv,
                                  size_t recv_count, tpla_dtype_t dtype, bool poisoned,
                                  const char *fn) {
  rank_slot_t *in = &g->slots[src];
  tpla_status_t status = TPLA_SUCCESS;
  if (!poisoned && in->mail_poisoned)
    status = tpla_fail(TPLA_ERROR_REMOTE, fn, "rank %d (src) rejected its own call", src);
  else if (!poisoned && (in->mail_count != recv_count || in->mail_dtype != dtype))
    status = tpla_fail(TPLA_ERROR_REMOTE, fn,
                       "rank %d (src) sends %zu elements of %s but this rank expects %zu of %s",
                       src, in->mail_count, tpla_dtype_name(in->mail_dtype), recv_count,
                       tpla_dtype_name(dtype));
  if (poisoned || status != TPLA_SUCCESS) {
    in->mail_want_count = recv_count;
    in->mail_want_dtype = dtype;
    in->mail = MAIL_REJECTED;
    pthread_cond_broadcast(&g->cv);
    return status;
  }
  in->mail = MAIL_CLAIMED;
  pthread_mutex_unlock(&g->mu);
  if (recv_count > 0 && recv != in->mail_data)
    memmove(recv, in->mail_data, recv_count * tpla_dtype_size(dtype));
  pthread_mutex_lock(&g->mu);
  in->mail = MAIL_DONE;
  pthread_cond_broadcast(&g->cv);
  return TPLA_SUCCESS;
}

tpla_status_t host_group_sendrecv(tpla_host_group_t g, int rank, int64_t timeout_ms,
                                  const char *fn, tpla_dtype_t dtype, const void *send,
                                  size_t send_count, int dst, void *recv, size_t recv_count,
                                  int src, tpla_status_t local_status) {
  bool poisoned = local_status != TPLA_SUCCESS;
  tpla_status_t status = TPLA_SUCCESS; /* the first failure; its message stands */
  rank_slot_t *own = &g->slots[rank];
  struct timespec deadline = tpla_deadline_after(timeout_ms);

  pthread_mutex_lock(&g->mu);
  if (g->broken) {
    pthread_mutex_unlock(&g->mu);
    return poisoned ? local_status : fail_broken(g, fn);
  }
  if (dst >= 0) {
    own->mail = MAIL_POSTED;
    own->mail_dst = dst;
    own->mail_data = send;
    own->mail_count = send_count;
    own->mail_dtype = dtype;
    own->mail_poisoned = poisoned;
    pthread_cond_broadcast(&g->cv);
  }
  if (src >= 0) {
    status = wait_for(g, peer_has_posted, rank, src, &deadline, timeout_ms, fn, "send",
                      !poisoned);
    if (status == TPLA_SUCCESS)
      status = take_message(g, rank, src, recv, recv_count, dtype, poisoned, fn);
  }
  if (dst >= 0) {
    bool report = !poisoned && status == TPLA_SUCCESS;
    tpla_status_t s = wait_for(g, own_mail_taken, rank, dst, &deadline, timeout_ms, fn,
                               "receive", report);
    if (s == TPLA_SUCCESS && own->mail == MAIL_REJECTED && report)
      s = tpla_fail(TPLA_ERROR_REMOTE, fn,
                    "rank %d (dst) rejected the transfer: this rank sends %zu elements of %s, "
                    "it expects %zu of %s (or rejected its own call)",
                    dst, send_count, tpla_dtype_name(dtype), own->mail_want_count,
                    tpla_dtype_name(own->mail_want_dtype));
    else if (s == TPLA_SUCCESS && own->mail == MAIL_REJECTED)
      s = TPLA_ERROR_REMOTE;
    if (status == TPLA_SUCCESS)
      status = s;
    own->mail = MAIL_EMPTY; /* taken, or retracted unclaimed on failure */
  }
  pthread_mutex_unlock(&g->mu);
  return poisoned ? local_status : status;
}
