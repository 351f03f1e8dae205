/*
 * team.c - the ranks of the `tpla` tool: one thread per rank, each with its
 * own tpla context (NCCL on GPU r, or rank r of one host group), a
 * rendezvous that also spreads failures (so no rank waits for one that gave
 * up), and the choice of executor behind -x/-g.
 */
#include "tool.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#ifdef TPLA_HAVE_CUDA
#include <cuda_runtime.h>
#endif

#define TOOL_DEFAULT_TIMEOUT_MS 120000

struct tool_team {
  pthread_mutex_t mutex;
  pthread_cond_t cond;
  int active;         /* ranks still inside their body; a sync waits for these */
  int arrived;        /* ranks waiting in the current sync */
  unsigned generation;
  int pending_failed; /* a failure reported since the last completed sync */
  int failed;         /* published when a sync completes; sticky */
  tool_exec_t executor;
  int nranks;
  int64_t timeout_ms;
  tpla_host_group_t group;
  tpla_unique_id_t nccl_id;
  tool_rank_fn_t fn;
  void *arg;
};

typedef struct {
  struct tool_team *team;
  int rank;
  int result;
  pthread_t thread;
} rank_thread_t;

const char *tool_executor_name(tool_exec_t executor) {
  switch (executor) {
  case TOOL_EXEC_HOST: return "host";
  case TOOL_EXEC_CUDA: return "cuda";
  case TOOL_EXEC_AUTO: return "auto";
  }
  return "?";
}

bool tool_pick_executor(tool_opts_t *opts, int *gpus_out) {
  tpla_features_t features = TPLA_FEATURES_INIT;
  int gpus = 0, built = 0;
  if (tpla_get_features(&features, -1) == TPLA_SUCCESS) {
    gpus = features.device_count;
    built = features.cuda_executor;
  }
  if (gpus_out)
    *gpus_out = gpus;
  if (opts->executor == TOOL_EXEC_AUTO)
    opts->executor = built && gpus > 0 ? TOOL_EXEC_CUDA : TOOL_EXEC_HOST;
  if (opts->executor == TOOL_EXEC_CUDA) {
    if (!built) {
      fprintf(stderr, "tpla: -x cuda: this build has no CUDA executor (configured with "
                      "TPLA_CUDA=OFF); use -x host\n");
      return false;
    }
    if (gpus == 0) {
      fprintf(stderr, "tpla: -x cuda: no CUDA GPU found; use -x host\n");
      return false;
    }
    if (opts->ranks == 0)
      opts->ranks = gpus;
    if (opts->ranks > gpus) {
      fprintf(stderr, "tpla: -g %d: only %d GPU%s visible\n", opts->ranks, gpus,
              gpus == 1 ? "" : "s");
      return false;
    }
  } else {
    if (opts->ranks == 0)
      opts->ranks = 2;
    if (opts->ranks > 1024) {
      fprintf(stderr, "tpla: -g %d: a host group has at most 1024 ranks\n", opts->ranks);
      return false;
    }
  }
  return true;
}

/* ---- errors ------------------------------------------------------------------ */

int tool_rank_fail(tool_rank_t *r, const char *what, tpla_status_t status) {
  fprintf(stderr, "# rank %d: %s: %s (%s)\n", r->rank, what, tpla_status_string(status),
          tpla_last_error());
  return 1;
}

int tool_rank_error(tool_rank_t *r, const char *fmt, ...) {
  char line[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(line, sizeof line, fmt, ap);
  va_end(ap);
  fprintf(stderr, "# rank %d: %s\n", r->rank, line);
  return 1;
}

int64_t tool_rank_timeout_ms(const tool_rank_t *r) { return r->team->timeout_ms; }

/* ---- rendezvous ----------------------------------------------------------------- */

/* Complete the current sync (mutex held): publish failures, wake waiters. */
static void complete_sync(struct tool_team *team) {
  team->failed |= team->pending_failed;
  team->arrived = 0;
  team->generation++;
  pthread_cond_broadcast(&team->cond);
}

int tool_team_sync(tool_rank_t *r, int failed) {
  struct tool_team *team = r->team;
  pthread_mutex_lock(&team->mutex);
  if (failed)
    team->pending_failed = 1;
  unsigned generation = team->generation;
  if (++team->arrived >= team->active)
    complete_sync(team);
  else
    while (generation == team->generation)
      pthread_cond_wait(&team->cond, &team->mutex);
  /* `failed` changes only when a sync completes, and the next one cannot
   * complete before this rank arrives at it. */
  int result = team->failed;
  pthread_mutex_unlock(&team->mutex);
  return result;
}

/* A rank left its body: later syncs stop waiting for it, and its failure
 * (if any) reaches the ranks that still wait. */
static void depart(struct tool_team *team, int failed) {
  pthread_mutex_lock(&team->mutex);
  if (failed)
    team->pending_failed = 1;
  team->active--;
  if (team->arrived > 0 && team->arrived >= team->active)
    complete_sync(team);
  pthread_mutex_unlock(&team->mutex);
}

/* ---- per-rank setup ---------------------------------------------------------- */

#ifdef TPLA_HAVE_CUDA
static int setup_cuda(tool_rank_t *r, struct ncclComm **comm, const tpla_config_t *cfg) {
  cudaError_t e = cudaSetDevice(r->device);
  if (e != cudaSuccess)
    return tool_rank_error(r, "cudaSetDevice(%d): %s", r->device, cudaGetErrorString(e));
  tpla_status_t s = tpla_nccl_comm_create(comm, &r->team->nccl_id, r->nranks, r->rank,
                                          r->device, cfg);
  if (s != TPLA_SUCCESS)
    return tool_rank_fail(r, "tpla_nccl_comm_create", s);
  s = tpla_ctx_create_nccl(&r->ctx, *comm, cfg);
  if (s != TPLA_SUCCESS)
    return tool_rank_fail(r, "tpla_ctx_create_nccl", s);
  cudaStream_t stream;
  e = cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking);
  if (e != cudaSuccess)
    return tool_rank_error(r, "cudaStreamCreateWithFlags: %s", cudaGetErrorString(e));
  r->stream = stream;
  return 0;
}

static void teardown_cuda(tool_rank_t *r, struct ncclComm *comm) {
  if (r->stream)
    cudaStreamDestroy((cudaStream_t)r->stream);
  tpla_status_t s = tpla_ctx_destroy(r->ctx);
  if (s != TPLA_SUCCESS)
    tool_rank_fail(r, "tpla_ctx_destroy", s);
  s = tpla_nccl_comm_destroy(comm);
  if (s != TPLA_SUCCESS)
    tool_rank_fail(r, "tpla_nccl_comm_destroy", s);
}
#endif

static void *rank_main(void *p) {
  rank_thread_t *t = p;
  struct tool_team *team = t->team;
  tool_rank_t r = {t->rank, team->nranks, team->executor, -1, NULL, NULL, team};
  tpla_config_t cfg = TPLA_CONFIG_INIT;
  cfg.timeout_ms = team->timeout_ms;
  int failed = 0;
#ifdef TPLA_HAVE_CUDA
  struct ncclComm *comm = NULL;
  if (team->executor == TOOL_EXEC_CUDA) {
    r.device = t->rank;
    failed = setup_cuda(&r, &comm, &cfg);
  }
#endif
  if (team->executor == TOOL_EXEC_HOST) {
    tpla_status_t s = tpla_ctx_create_host(&r.ctx, team->group, t->rank, &cfg);
    if (s != TPLA_SUCCESS)
      failed = tool_rank_fail(&r, "tpla_ctx_create_host", s);
  }
  int result = failed;
  if (tool_team_sync(&r, failed) == 0)
    result = team->fn(&r, team->arg);
  else if (!failed)
    result = 0; /* another rank's setup failed; it reported why */
  depart(team, result != 0);
#ifdef TPLA_HAVE_CUDA
  if (team->executor == TOOL_EXEC_CUDA) {
    teardown_cuda(&r, comm);
  }
#endif
  if (team->executor == TOOL_EXEC_HOST) {
    tpla_status_t s = tpla_ctx_destroy(r.ctx);
    if (s != TPLA_SUCCESS)
      result = tool_rank_fail(&r, "tpla_ctx_destroy", s);
  }
  t->result = result;
  return NULL;
}

int tool_team_run(tool_exec_t executor, int nranks, int64_t timeout_ms, tool_rank_fn_t fn,
                  void *arg) {
  struct tool_team team;
  memset(&team, 0, sizeof team);
  pthread_mutex_init(&team.mutex, NULL);
  pthread_cond_init(&team.cond, NULL);
  team.active = nranks;
  team.executor = executor;
  team.nranks = nranks;
  /* TPLA_TOOL_TIMEOUT_MS: a shorter wait for a stopped call (hang hunts, bench/run134_round.sh) */
  const char *env = getenv("TPLA_TOOL_TIMEOUT_MS");
  long long env_ms = env != NULL ? strtoll(env, NULL, 10) : 0;
  team.timeout_ms = timeout_ms > 0 ? timeout_ms : env_ms > 0 ? env_ms : TOOL_DEFAULT_TIMEOUT_MS;
  team.fn = fn;
  team.arg = arg;
  tpla_config_t cfg = TPLA_CONFIG_INIT;
  cfg.timeout_ms = team.timeout_ms;
  tpla_status_t s = TPLA_SUCCESS;
  const char *what = "";
  if (executor == TOOL_EXEC_HOST) {
    what = "tpla_host_group_create";
    s = tpla_host_group_create(&team.group, nranks, &cfg);
  } else {
    what = "tpla_nccl_get_unique_id";
    s = tpla_nccl_get_unique_id(&team.nccl_id);
  }
  if (s != TPLA_SUCCESS) {
    fprintf(stderr, "# %s: %s (%s)\n", what, tpla_status_string(s), tpla_last_error());
    return nranks;
  }
  rank_thread_t *threads = calloc((size_t)nranks, sizeof *threads);
  int failures = 0, started = 0;
  if (threads == NULL) {
    fprintf(stderr, "# out of host memory for %d rank threads\n", nranks);
    failures = nranks;
  }
  for (int i = 0; threads && i < nranks; i++) {
    threads[i].team = &team;
    threads[i].rank = i;
    if (pthread_create(&threads[i].thread, NULL, rank_main, &threads[i]) != 0) {
      /* The ranks started so far would wait for this one: let them time
       * out in their collectives and report it. */
      fprintf(stderr, "# could not start the thread of rank %d\n", i);
      depart(&team, 1);
      failures++;
      for (int j = i + 1; j < nranks; j++, failures++)
        depart(&team, 1);
      break;
    }
    started++;
  }
  for (int i = 0; i < started; i++) {
    pthread_join(threads[i].thread, NULL);
    failures += threads[i].result != 0;
  }
  free(threads);
  if (team.group) {
    s = tpla_host_group_destroy(team.group);
    if (s != TPLA_SUCCESS) {
      fprintf(stderr, "# tpla_host_group_destroy: %s (%s)\n", tpla_status_string(s),
              tpla_last_error());
      failures++;
    }
  }
  pthread_cond_destroy(&team.cond);
  pthread_mutex_destroy(&team.mutex);
  return failures;
}
