/*
 * local_meet.c - process-local rendezvous for the plan-time exchange of
 * NCCL contexts whose ranks share one process (see local_meet.h).
 *
 * Meeting points live in a process-wide list keyed by a random 64-bit key
 * that rank 0 announces in the context's creation records. An exchange is
 * one generation of a counting rendezvous: each rank posts its send and
 * recv pointers; the last to arrive copies every send into every recv (all
 * of them are still waiting, so their buffers are alive) and starts the
 * next generation. A rank that times out withdraws its pointers before it
 * leaves and marks the point broken.
 */
#include "local_meet.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef struct {
  const void *send;
  void *recv;
  size_t bytes;
} post_t;

struct local_meet {
  struct local_meet *next;
  uint64_t key;
  int nranks, users;
  pthread_mutex_t mu;
  pthread_cond_t cv;
  int arrived;
  uint64_t generation;
  bool broken;
  char why[200];
  post_t posts[];
};

static pthread_mutex_t registry_mu = PTHREAD_MUTEX_INITIALIZER;
static local_meet_t *registry;

static pthread_once_t nonce_once = PTHREAD_ONCE_INIT;
static uint64_t nonce;

static void draw_nonce(void) {
  uint64_t n = 0;
  FILE *f = fopen("/dev/urandom", "rb");
  if (f != NULL) {
    if (fread(&n, sizeof n, 1, f) != 1)
      n = 0;
    fclose(f);
  }
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  n ^= (uint64_t)ts.tv_nsec ^ ((uint64_t)ts.tv_sec << 20) ^ (uint64_t)(uintptr_t)&n;
  nonce = n ? n : 1;
}

uint64_t tpla_process_nonce(void) {
  pthread_once(&nonce_once, draw_nonce);
  return nonce;
}

uint64_t local_meet_new_key(void) {
  static uint64_t last;
  pthread_mutex_lock(&registry_mu);
  uint64_t key = ++last;
  pthread_mutex_unlock(&registry_mu);
  return key;
}

static local_meet_t *meet_new(uint64_t key, int nranks) {
  local_meet_t *m = calloc(1, sizeof *m + (size_t)nranks * sizeof(post_t));
  if (m == NULL)
    return NULL;
  bool ok = tpla_cond_init_monotonic(&m->cv);
  if (!ok || pthread_mutex_init(&m->mu, NULL) != 0) {
    if (ok)
      pthread_cond_destroy(&m->cv);
    free(m);
    return NULL;
  }
  m->key = key;
  m->nranks = nranks;
  return m;
}

tpla_status_t local_meet_join(local_meet_t **meet, uint64_t key, int nranks, const char *fn) {
  pthread_mutex_lock(&registry_mu);
  local_meet_t *m = registry;
  while (m != NULL && m->key != key)
    m = m->next;
  if (m != NULL && m->nranks != nranks) {
    pthread_mutex_unlock(&registry_mu);
    return tpla_fail(TPLA_ERROR_INTERNAL, fn, "meeting point %016llx has %d ranks, not %d",
                     (unsigned long long)key, m->nranks, nranks);
  }
  if (m == NULL && (m = meet_new(key, nranks)) != NULL) {
    m->next = registry;
    registry = m;
  }
  if (m != NULL)
    m->users++;
  pthread_mutex_unlock(&registry_mu);
  if (m == NULL)
    return tpla_fail(TPLA_ERROR_OUT_OF_MEMORY, fn, "out of host memory for the local exchange");
  *meet = m;
  return TPLA_SUCCESS;
}

void local_meet_leave(local_meet_t *meet) {
  if (meet == NULL)
    return;
  pthread_mutex_lock(&registry_mu);
  bool last = --meet->users == 0;
  if (last)
    for (local_meet_t **p = &registry; *p != NULL; p = &(*p)->next)
      if (*p == meet) {
        *p = meet->next;
        break;
      }
  pthread_mutex_unlock(&registry_mu);
  if (last) {
    pthread_cond_destroy(&meet->cv);
    pthread_mutex_destroy(&meet->mu);
    free(meet);
  }
}

/* The last rank in: every post is live. Sizes that differ are a caller bug
 * on some rank; every rank then gets the same REMOTE verdict. */
static void deliver(local_meet_t *m) {
  for (int q = 1; q < m->nranks; q++)
    if (m->posts[q].bytes != m->posts[0].bytes) {
      m->broken = true;
      snprintf(m->why, sizeof m->why, "ranks 0 and %d exchanged %zu and %zu bytes", q,
               m->posts[0].bytes, m->posts[q].bytes);
      return;
    }
  for (int r = 0; r < m->nranks; r++)
    for (int q = 0; q < m->nranks; q++)
      memcpy((char *)m->posts[r].recv + (size_t)q * m->posts[q].bytes, m->posts[q].send,
             m->posts[q].bytes);
}

tpla_status_t local_meet_allgather(local_meet_t *m, int rank, void *recv, const void *send,
                                   size_t bytes, int64_t timeout_ms, const char *fn) {
  pthread_mutex_lock(&m->mu);
  tpla_status_t st = TPLA_SUCCESS;
  if (m->broken) {
    st = tpla_fail(TPLA_ERROR_REMOTE, fn, "the ranks' local exchange is broken: %s", m->why);
    pthread_mutex_unlock(&m->mu);
    return st;
  }
  m->posts[rank] = (post_t){send, recv, bytes};
  uint64_t gen = m->generation;
  if (++m->arrived == m->nranks) {
    deliver(m);
    m->arrived = 0;
    m->generation++;
    pthread_cond_broadcast(&m->cv);
  } else {
    struct timespec deadline = tpla_deadline_after(timeout_ms);
    while (m->generation == gen && !m->broken) {
      if (pthread_cond_timedwait(&m->cv, &m->mu, &deadline) == ETIMEDOUT &&
          m->generation == gen && !m->broken) {
        m->arrived--; /* withdraw: our buffers go with us */
        m->posts[rank] = (post_t){NULL, NULL, 0};
        m->broken = true;
        snprintf(m->why, sizeof m->why, "rank %d timed out after %lld ms waiting for the others",
                 rank, (long long)timeout_ms);
        pthread_cond_broadcast(&m->cv);
        st = tpla_fail(TPLA_ERROR_TIMEOUT, fn, "plan-time exchange: waited %lld ms for the "
                       "other ranks of this process", (long long)timeout_ms);
      }
    }
  }
  if (st == TPLA_SUCCESS && m->broken)
    st = tpla_fail(TPLA_ERROR_REMOTE, fn, "the ranks' local exchange is broken: %s", m->why);
  pthread_mutex_unlock(&m->mu);
  return st;
}
