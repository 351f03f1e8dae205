/*
 * shm_group.c - the cross-process host group: one POSIX shared-memory
 * segment that N processes map, one rank each (see shm.h).
 *
 * Segment: a header (a robust process-shared mutex, a futex "bell", the
 * rendezvous counters, the broken flag and its reason, one slot per rank:
 * pid, membership, post, mailbox), then one staging area per rank.
 * Rank 0 creates it (O_EXCL; a leftover segment whose creator is dead is
 * replaced), the other ranks open it, every rank registers its pid, and once
 * all have attached rank 0 unlinks the name: from then on the segment lives
 * only as long as the processes' mappings, so a crash leaves nothing in
 * /dev/shm.
 *
 * Waiting: a waiter reads the bell, drops the lock and sleeps on the bell
 * word (FUTEX_WAIT, at most 50 ms); every state change under the lock rings
 * it (increment + FUTEX_WAKE). No pthread condition variable is shared, so
 * a process that dies while waiting leaves no state behind; a process that
 * dies holding the lock is detected by the robust mutex (EOWNERDEAD).
 */
#include "shm.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/futex.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define SHM_MAGIC 0x74706c61u /* "tpla" */
#define SHM_NAME_MAX 200
#define SHM_DEFAULT_STAGING ((size_t)1 << 20)
#define SHM_MIN_STAGING ((size_t)4096)
#define SHM_POLL_MS 50

typedef struct {
  int32_t pid;
  int32_t attached; /* the process opened the group */
  int32_t live;     /* it has a context */
  int32_t departed; /* it destroyed its context or closed the group */
  uint64_t pidns;    /* pid's namespace (pid_namespace) */
  uint64_t arrivals; /* rendezvous it arrived at */
  shm_post_t post;
  shm_mail_t mail;
} shm_slot_t;

typedef struct {
  _Atomic uint32_t magic; /* stored last by the creator */
  int32_t version;        /* TPLA_VERSION */
  uint32_t header_size, slot_size, mutex_size, unused;
  int32_t nranks, creator_pid;
  uint64_t creator_pidns, staging_bytes, staging_offset, total_bytes;
  pthread_mutex_t mu;
  _Atomic uint32_t bell;
  int32_t attached;
  int32_t arrived; /* ranks inside the current rendezvous */
  int32_t sync_flag, last_sync_flag;
  _Atomic int32_t broken; /* read without the lock by shm_group_broken */
  uint64_t generation; /* completed rendezvous */
  char why[320];
  shm_slot_t slots[];
} shm_header_t;

/* What this process knows of a peer's process. */
typedef struct {
  bool pid_visible;   /* its pid names it here (one pid namespace) */
  int64_t last_check; /* ms: when its liveness was last probed */
} peer_watch_t;

struct shm_group {
  shm_header_t *hdr;
  size_t map_bytes;
  int rank, nranks;
  char path[SHM_NAME_MAX + 2];
  bool unlinked; /* or never ours to unlink */
  peer_watch_t peers[];
};

static int64_t now_ms(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (int64_t)t.tv_sec * 1000 + t.tv_nsec / 1000000;
}

static void sleep_ms(int ms) {
  struct timespec t = {ms / 1000, (long)(ms % 1000) * 1000000L};
  nanosleep(&t, NULL);
}

/* ---- process liveness -------------------------------------------------------- */

/* This process's pid namespace: the inode of /proc/self/ns/pid (0 if unknown). Ranks in
 * other containers that share /dev/shm may live in other namespaces, where their pids name
 * nothing, or another process. */
static uint64_t pid_namespace(void) {
  struct stat st;
  return stat("/proc/self/ns/pid", &st) == 0 ? (uint64_t)st.st_ino : 0;
}

/* True if `pid` no longer runs (gone, or a zombie awaiting its parent). */
static bool process_gone(int32_t pid) {
  if (pid <= 0)
    return false;
  if (kill((pid_t)pid, 0) != 0 && errno == ESRCH)
    return true;
  char path[64], buf[512];
  snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
  FILE *f = fopen(path, "r");
  if (f == NULL)
    return errno == ENOENT;
  size_t n = fread(buf, 1, sizeof buf - 1, f);
  fclose(f);
  buf[n] = '\0';
  const char *paren = strrchr(buf, ')'); /* the command name may hold anything */
  return paren != NULL && paren[1] == ' ' && (paren[2] == 'Z' || paren[2] == 'X');
}

/* ---- lock, bell, broken --------------------------------------------------------- */

void shm_break_locked(shm_group_t *g, const char *fmt, ...) {
  shm_header_t *h = g->hdr;
  if (!h->broken) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(h->why, sizeof h->why, fmt, ap);
    va_end(ap);
    h->broken = 1;
  }
  shm_ring(g);
}

void shm_lock(shm_group_t *g) {
  int rc = pthread_mutex_lock(&g->hdr->mu);
  if (rc == EOWNERDEAD) {
    pthread_mutex_consistent(&g->hdr->mu);
    shm_break_locked(g, "a process died while holding the group's lock");
  }
}

void shm_unlock(shm_group_t *g) { pthread_mutex_unlock(&g->hdr->mu); }

void shm_ring(shm_group_t *g) {
  atomic_fetch_add_explicit(&g->hdr->bell, 1u, memory_order_release);
  syscall(SYS_futex, (uint32_t *)&g->hdr->bell, FUTEX_WAKE, INT_MAX, NULL, NULL, 0);
}

shm_wait_t shm_wait_start(int64_t timeout_ms, const char *fn) {
  shm_wait_t w = {now_ms() + timeout_ms, timeout_ms, fn};
  return w;
}

void shm_wait_bell(shm_group_t *g, const shm_wait_t *w) {
  uint32_t seen = atomic_load_explicit(&g->hdr->bell, memory_order_acquire);
  int64_t left = w->deadline_ms - now_ms();
  int64_t ms = left < 1 ? 1 : left > SHM_POLL_MS ? SHM_POLL_MS : left;
  struct timespec t = {(time_t)(ms / 1000), (long)(ms % 1000) * 1000000L};
  shm_unlock(g);
  syscall(SYS_futex, (uint32_t *)&g->hdr->bell, FUTEX_WAIT, seen, &t, NULL, 0);
  shm_lock(g);
}

tpla_status_t shm_group_break(shm_group_t *g, const char *why) {
  shm_lock(g); /* waiters drop it while they sleep on the bell */
  shm_break_locked(g, "%s", why);
  shm_unlock(g);
  return TPLA_SUCCESS;
}

bool shm_group_broken(shm_group_t *g, char *why, size_t size) {
  if (atomic_load_explicit(&g->hdr->broken, memory_order_acquire) == 0)
    return false;
  shm_lock(g);
  snprintf(why, size, "%s", g->hdr->why);
  shm_unlock(g);
  return true;
}

static tpla_status_t fail_broken(shm_group_t *g, const char *fn) {
  return tpla_fail(TPLA_ERROR_REMOTE, fn, "the host group is broken: %s", g->hdr->why);
}

const char *shm_peer_gone(shm_group_t *g, int q) {
  const shm_slot_t *s = &g->hdr->slots[q];
  if (s->departed)
    return "left the group (destroyed its context)";
  if (g->peers[q].pid_visible && s->attached && process_gone(s->pid))
    return "exited or died";
  return NULL;
}

tpla_status_t shm_check_wait(shm_group_t *g, const shm_wait_t *w, int peer, const char *what,
                             bool check_deadline, bool report) {
  shm_header_t *h = g->hdr;
  if (h->broken)
    return report ? fail_broken(g, w->fn) : TPLA_ERROR_REMOTE;
  int64_t now = now_ms();
  uint64_t mine = h->slots[g->rank].arrivals;
  char missing[96] = "";
  size_t used = 0;
  for (int q = 0; q < g->nranks; q++) {
    bool awaited = peer >= 0 ? q == peer : q != g->rank && h->slots[q].arrivals < mine;
    if (!awaited)
      continue;
    /* each peer's process probed every 50 ms (a throttle per peer: a
     * sendrecv waits on two, and one must not use up the other's turn) */
    bool look = now - g->peers[q].last_check >= SHM_POLL_MS;
    if (look)
      g->peers[q].last_check = now;
    const char *why = h->slots[q].departed || look ? shm_peer_gone(g, q) : NULL;
    if (why != NULL) {
      shm_break_locked(g, "rank %d %s while rank %d waited for it %s in %s", q, why, g->rank, what,
                   w->fn);
      return report ? fail_broken(g, w->fn) : TPLA_ERROR_REMOTE;
    }
    if (used + 16 < sizeof missing)
      used += (size_t)snprintf(missing + used, sizeof missing - used, "%s%d", used ? ", " : "", q);
  }
  if (check_deadline && now >= w->deadline_ms) {
    shm_break_locked(g, "rank %d timed out after %lld ms in %s waiting for rank(s) %s %s", g->rank,
                 (long long)w->timeout_ms, w->fn, missing, what);
    if (!report)
      return TPLA_ERROR_TIMEOUT;
    return tpla_fail(TPLA_ERROR_TIMEOUT, w->fn,
                     "timed out after %lld ms waiting for rank(s) %s %s; the group is now broken",
                     (long long)w->timeout_ms, missing, what);
  }
  return TPLA_SUCCESS;
}

/* ---- rendezvous ------------------------------------------------------------------ */

static tpla_status_t rendezvous(shm_group_t *g, const shm_post_t *post, int flag, int *any,
                                int64_t timeout_ms, const char *fn) {
  shm_header_t *h = g->hdr;
  shm_wait_t w = shm_wait_start(timeout_ms, fn);
  shm_lock(g);
  if (h->broken) {
    tpla_status_t s = fail_broken(g, fn);
    shm_unlock(g);
    return s;
  }
  if (post != NULL)
    h->slots[g->rank].post = *post;
  uint64_t gen = h->generation;
  h->sync_flag |= flag;
  h->slots[g->rank].arrivals++;
  if (++h->arrived == g->nranks) {
    h->arrived = 0;
    h->last_sync_flag = h->sync_flag;
    h->sync_flag = 0;
    h->generation++;
    shm_ring(g);
  }
  tpla_status_t s = TPLA_SUCCESS;
  while (h->generation == gen) {
    s = shm_check_wait(g, &w, -1, "to arrive", true, true);
    if (s != TPLA_SUCCESS)
      break;
    shm_wait_bell(g, &w);
  }
  if (s == TPLA_SUCCESS && any != NULL)
    *any = h->last_sync_flag;
  shm_unlock(g);
  return s;
}

tpla_status_t shm_enter(shm_group_t *g, const shm_post_t *post, int64_t timeout_ms,
                        const char *fn) {
  return rendezvous(g, post, 0, NULL, timeout_ms, fn);
}

const shm_post_t *shm_post(shm_group_t *g, int rank) { return &g->hdr->slots[rank].post; }

tpla_status_t shm_sync(shm_group_t *g, int flag, int *any, int64_t timeout_ms, const char *fn) {
  return rendezvous(g, NULL, flag, any, timeout_ms, fn);
}

/* ---- accessors, membership ---------------------------------------------------------- */

int shm_group_rank(const shm_group_t *g) { return g->rank; }

void *shm_staging(shm_group_t *g, int rank) {
  return (char *)g->hdr + g->hdr->staging_offset + (size_t)rank * g->hdr->staging_bytes;
}

size_t shm_staging_bytes(const shm_group_t *g) { return g->hdr->staging_bytes; }

shm_mail_t *shm_mail(shm_group_t *g, int rank) { return &g->hdr->slots[rank].mail; }

tpla_status_t shm_group_join(shm_group_t *g, const char *fn) {
  shm_lock(g);
  shm_slot_t *s = &g->hdr->slots[g->rank];
  bool taken = s->live;
  if (!taken) {
    s->live = 1;
    s->departed = 0;
  }
  shm_unlock(g);
  if (taken)
    return tpla_fail(TPLA_ERROR_INVALID_USAGE, fn,
                     "argument 'rank': rank %d of the group already has a live context", g->rank);
  return TPLA_SUCCESS;
}

void shm_group_leave(shm_group_t *g) {
  shm_lock(g);
  g->hdr->slots[g->rank].live = 0;
  g->hdr->slots[g->rank].departed = 1;
  shm_ring(g); /* waiters re-check for departed peers */
  shm_unlock(g);
}

/* ---- create / attach ----------------------------------------------------------------- */

static size_t align_up(size_t x, size_t a) { return (x + a - 1) / a * a; }

/* The staging size a creator uses: TPLA_SHM_STAGING_BYTES (for tests of the
 * chunking) or 1 MiB, at least 4 KiB and room for an all-to-all's counts. */
static size_t staging_size(int nranks) {
  size_t bytes = SHM_DEFAULT_STAGING;
  const char *env = getenv("TPLA_SHM_STAGING_BYTES");
  if (env != NULL && *env != '\0') {
    char *end = NULL;
    unsigned long long v = strtoull(env, &end, 10);
    if (end != NULL && *end == '\0' && v > 0 && v <= ((size_t)1 << 30))
      bytes = (size_t)v;
  }
  size_t need = (size_t)nranks * sizeof(uint64_t);
  if (bytes < need)
    bytes = need;
  if (bytes < SHM_MIN_STAGING)
    bytes = SHM_MIN_STAGING;
  return align_up(bytes, 64);
}

static bool layout_matches(const shm_header_t *h) {
  return h->version == TPLA_VERSION && h->header_size == sizeof(shm_header_t) &&
         h->slot_size == sizeof(shm_slot_t) && h->mutex_size == sizeof(pthread_mutex_t);
}

/* Rank 0: an existing segment of this name is either a live group (the
 * name is taken) or a leftover of a crashed run (replace it). */
static tpla_status_t check_leftover(const char *path, const char *fn) {
  int fd = shm_open(path, O_RDWR, 0);
  if (fd < 0)
    return TPLA_SUCCESS; /* gone meanwhile */
  struct stat st;
  int32_t creator = 0;
  uint64_t creator_ns = 0;
  if (fstat(fd, &st) == 0 && (size_t)st.st_size >= sizeof(shm_header_t)) {
    shm_header_t *h = mmap(NULL, sizeof *h, PROT_READ, MAP_SHARED, fd, 0);
    if (h != MAP_FAILED) {
      if (atomic_load(&h->magic) == SHM_MAGIC)
        creator = h->creator_pid, creator_ns = h->creator_pidns;
      munmap(h, sizeof *h);
    }
  }
  close(fd);
  /* a creator in another pid namespace cannot be checked: taken as alive */
  if (creator > 0 && (creator_ns != pid_namespace() || !process_gone(creator)))
    return tpla_fail(TPLA_ERROR_INVALID_USAGE, fn,
                     "argument 'name': \"%s\" is in use by a live group (created by pid %d)",
                     path + 1, (int)creator);
  shm_unlink(path);
  return TPLA_SUCCESS;
}

static tpla_status_t create_segment(shm_group_t *g, const char *fn) {
  g->unlinked = true; /* the name is not ours to unlink before our O_EXCL open succeeds */
  int fd = shm_open(g->path, O_RDWR | O_CREAT | O_EXCL, 0600);
  if (fd < 0 && errno == EEXIST) {
    TPLA_TRY(check_leftover(g->path, fn));
    fd = shm_open(g->path, O_RDWR | O_CREAT | O_EXCL, 0600);
  }
  if (fd < 0)
    return tpla_fail(TPLA_ERROR_INVALID_USAGE, fn, "shm_open(\"%s\") failed: %s", g->path,
                     strerror(errno));
  g->unlinked = false;
  size_t staging = staging_size(g->nranks);
  size_t offset = align_up(sizeof(shm_header_t) + (size_t)g->nranks * sizeof(shm_slot_t), 64);
  size_t total = offset + (size_t)g->nranks * staging;
  int rc = posix_fallocate(fd, 0, (off_t)total); /* ENOSPC now, not SIGBUS later */
  void *p = rc == 0 ? mmap(NULL, total, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0) : MAP_FAILED;
  close(fd);
  if (p == MAP_FAILED) {
    shm_unlink(g->path);
    g->unlinked = true;
    return tpla_fail(TPLA_ERROR_OUT_OF_MEMORY, fn,
                     "cannot reserve a %zu-byte shared segment \"%s\" (%s); is /dev/shm full?",
                     total, g->path, strerror(rc ? rc : errno));
  }
  shm_header_t *h = p;
  g->hdr = h;
  g->map_bytes = total;
  pthread_mutexattr_t attr;
  bool ok = pthread_mutexattr_init(&attr) == 0;
  if (ok) {
    ok = pthread_mutexattr_setpshared(&attr, PTHREAD_PROCESS_SHARED) == 0 &&
         pthread_mutexattr_setrobust(&attr, PTHREAD_MUTEX_ROBUST) == 0 &&
         pthread_mutex_init(&h->mu, &attr) == 0;
    pthread_mutexattr_destroy(&attr);
  }
  if (!ok) {
    munmap(p, total);
    g->hdr = NULL;
    shm_unlink(g->path);
    g->unlinked = true;
    return tpla_fail(TPLA_ERROR_INTERNAL, fn, "cannot create a process-shared robust mutex");
  }
  h->version = TPLA_VERSION;
  h->header_size = sizeof(shm_header_t);
  h->slot_size = sizeof(shm_slot_t);
  h->mutex_size = sizeof(pthread_mutex_t);
  h->nranks = g->nranks;
  h->creator_pid = (int32_t)getpid();
  h->creator_pidns = pid_namespace();
  h->staging_bytes = staging;
  h->staging_offset = offset;
  h->total_bytes = total;
  atomic_store_explicit(&h->magic, SHM_MAGIC, memory_order_release);
  return TPLA_SUCCESS;
}

/* Ranks > 0: open the segment rank 0 creates, retrying until the deadline.
 * A segment of another tpla build may be a crashed run's leftover, which
 * rank 0, perhaps not started yet, replaces: it is an error only if it is
 * still there at the deadline. */
static tpla_status_t open_segment(shm_group_t *g, const shm_wait_t *w) {
  bool other_build = false;
  for (;;) {
    int fd = shm_open(g->path, O_RDWR, 0);
    if (fd < 0 && errno != ENOENT)
      return tpla_fail(TPLA_ERROR_INVALID_USAGE, w->fn, "shm_open(\"%s\") failed: %s", g->path,
                       strerror(errno));
    struct stat st;
    if (fd >= 0 && fstat(fd, &st) == 0 && (size_t)st.st_size >= sizeof(shm_header_t)) {
      size_t size = (size_t)st.st_size;
      shm_header_t *h = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
      close(fd);
      fd = -1;
      if (h != MAP_FAILED) {
        bool ready = atomic_load_explicit(&h->magic, memory_order_acquire) == SHM_MAGIC;
        other_build = ready && !layout_matches(h);
        if (ready && !other_build && h->total_bytes == size &&
            (h->creator_pidns != pid_namespace() || !process_gone(h->creator_pid))) {
          g->hdr = h;
          g->map_bytes = size;
          return TPLA_SUCCESS;
        }
        munmap(h, size); /* not ready yet, or a leftover rank 0 will replace */
      }
    }
    if (fd >= 0)
      close(fd);
    if (now_ms() >= w->deadline_ms && other_build)
      return tpla_fail(TPLA_ERROR_INVALID_USAGE, w->fn,
                       "the group \"%s\" was created by another tpla build (version or layout "
                       "differs) and no rank 0 of this one replaced it within %lld ms",
                       g->path + 1, (long long)w->timeout_ms);
    if (now_ms() >= w->deadline_ms)
      return tpla_fail(TPLA_ERROR_TIMEOUT, w->fn,
                       "rank %d timed out after %lld ms waiting for rank 0 to create the group "
                       "\"%s\"",
                       g->rank, (long long)w->timeout_ms, g->path + 1);
    sleep_ms(2);
  }
}

static void unmap(shm_group_t *g) {
  if (g->rank == 0 && !g->unlinked) /* a name it created */
    shm_unlink(g->path);
  g->unlinked = true;
  if (g->hdr != NULL)
    munmap(g->hdr, g->map_bytes);
  g->hdr = NULL;
}

/* Register this rank, then wait until all have. */
static tpla_status_t attach(shm_group_t *g, const shm_wait_t *w) {
  shm_header_t *h = g->hdr;
  shm_lock(g);
  if (h->nranks != g->nranks) {
    int theirs = h->nranks;
    shm_break_locked(g, "rank %d passed nranks %d but rank 0 created the group with %d", g->rank,
                 g->nranks, theirs);
    shm_unlock(g);
    return tpla_fail(TPLA_ERROR_INVALID_ARGUMENT, w->fn,
                     "argument 'nranks': %d, but rank 0 created the group with %d ranks",
                     g->nranks, theirs);
  }
  shm_slot_t *own = &h->slots[g->rank];
  if (own->attached) {
    int other = own->pid;
    shm_unlock(g);
    return tpla_fail(TPLA_ERROR_INVALID_USAGE, w->fn,
                     "argument 'rank': rank %d of \"%s\" is already taken by pid %d", g->rank,
                     g->path + 1, other);
  }
  own->pid = (int32_t)getpid();
  own->pidns = pid_namespace();
  own->attached = 1;
  h->attached++;
  shm_ring(g);
  tpla_status_t s = TPLA_SUCCESS;
  while (h->attached < g->nranks && s == TPLA_SUCCESS) {
    if (h->broken) {
      s = fail_broken(g, w->fn);
    } else if (now_ms() >= w->deadline_ms) {
      char missing[96] = "";
      size_t used = 0;
      for (int q = 0; q < g->nranks; q++)
        if (!h->slots[q].attached && used + 16 < sizeof missing)
          used += (size_t)snprintf(missing + used, sizeof missing - used, "%s%d",
                                   used ? ", " : "", q);
      shm_break_locked(g, "rank %d timed out after %lld ms waiting for rank(s) %s to join \"%s\"",
                   g->rank, (long long)w->timeout_ms, missing, g->path + 1);
      s = tpla_fail(TPLA_ERROR_TIMEOUT, w->fn,
                    "timed out after %lld ms waiting for rank(s) %s to join \"%s\"",
                    (long long)w->timeout_ms, missing, g->path + 1);
    } else {
      shm_wait_bell(g, w);
    }
  }
  if (s == TPLA_SUCCESS && h->broken) /* the last to come, after another gave up */
    s = fail_broken(g, w->fn);
  if (s != TPLA_SUCCESS)
    own->departed = 1;
  shm_unlock(g);
  return s;
}

tpla_status_t shm_group_open(shm_group_t **out, const char *name, int nranks, int rank,
                             const tpla_config_t *conf, const char *fn) {
  shm_group_t *g = calloc(1, sizeof *g + (size_t)nranks * sizeof(peer_watch_t));
  if (g == NULL)
    return tpla_fail(TPLA_ERROR_OUT_OF_MEMORY, fn, "out of host memory");
  g->rank = rank;
  g->nranks = nranks;
  snprintf(g->path, sizeof g->path, "/%s", name[0] == '/' ? name + 1 : name);
  shm_wait_t w = shm_wait_start(conf->timeout_ms, fn);
  tpla_status_t s = rank == 0 ? create_segment(g, fn) : open_segment(g, &w);
  if (s == TPLA_SUCCESS)
    s = attach(g, &w);
  if (s != TPLA_SUCCESS) {
    unmap(g);
    free(g);
    return s;
  }
  if (rank == 0) { /* everyone has it mapped: the name is no longer needed */
    shm_unlink(g->path);
    g->unlinked = true;
  }
  /* A liveness check needs the peer's pid to mean that peer here (one pid
   * namespace); for the others departures and the timeouts alone tell. */
  for (int q = 0; q < nranks; q++)
    g->peers[q].pid_visible = g->hdr->slots[q].pidns == pid_namespace();
  *out = g;
  return TPLA_SUCCESS;
}

tpla_status_t shm_group_close(shm_group_t *g) {
  if (g == NULL)
    return TPLA_SUCCESS;
  shm_lock(g);
  bool live = g->hdr->slots[g->rank].live;
  if (!live) {
    g->hdr->slots[g->rank].departed = 1;
    shm_ring(g);
  }
  shm_unlock(g);
  if (live)
    return tpla_fail(TPLA_ERROR_INVALID_USAGE, "tpla_host_group_destroy",
                     "argument 'group': the context of rank %d still lives; destroy it first",
                     g->rank);
  unmap(g);
  free(g);
  return TPLA_SUCCESS;
}
