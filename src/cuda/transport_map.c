/*
 * transport_map.c - creation and destruction of the CUDA overlap transport
 * (see transport.h), and the stream memory operations it orders GPUs with.
 *
 * Creation is collective and runs in rounds over the backend's plan-time
 * exchange; every rank takes part in every round even after a local
 * failure, so all ranks reach the same verdict at once:
 *   1. each rank allocates [flags][window] (flags zeroed and synchronized
 *      before anyone can learn the address), creates its streams and events,
 *      tests the stream memory operations on its own spare flag word, and
 *      sends a record: status, process identity (host name, boot id, pid, a
 *      random per-process nonce), GPU (ordinal, PCI bus id), the base pointer
 *      and a CUDA IPC handle of the allocation;
 *   2. (PEER or AUTO) each rank judges whether it can map every peer: same
 *      host, stream memory operations on both sides, and in the same process
 *      cudaDeviceCanAccessPeer, across processes the peer's GPU visible here
 *      (cudaDeviceGetByPCIBusId) and peer-capable; the verdicts are
 *      exchanged: all yes gives PEER, else AUTO gives SENDRECV and a forced
 *      PEER fails with NOT_SUPPORTED on every rank, naming the rank and why;
 *   3. (PEER) each rank maps every peer: in the same process it enables
 *      peer access and uses the peer's pointer, across processes it opens the
 *      IPC handle; then it writes a spare flag word of every peer with
 *      cuStreamWriteValue32, as calls will. The outcomes are exchanged; if any
 *      rank failed, AUTO falls back to SENDRECV on every rank and a forced
 *      PEER fails on every rank.
 */
#include "transport.h"
#include "local_meet.h" /* tpla_process_nonce */
#include "watchdog.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* ---- driver entry points ----------------------------------------------------------- */

static pthread_once_t driver_once = PTHREAD_ONCE_INIT;
static xp_write_value_fn driver_write;
static xp_wait_value_fn driver_wait;
static const char *driver_why = "not loaded";

static void load_driver_ops(void) {
  void *w = NULL, *v = NULL;
  enum cudaDriverEntryPointQueryResult qw = cudaDriverEntryPointSymbolNotFound, qv = qw;
  cudaError_t ew = cudaGetDriverEntryPointByVersion("cuStreamWriteValue32", &w, 12000,
                                                    cudaEnableDefault, &qw);
  cudaError_t ev = cudaGetDriverEntryPointByVersion("cuStreamWaitValue32", &v, 12000,
                                                    cudaEnableDefault, &qv);
  if (ew != cudaSuccess || ev != cudaSuccess || qw != cudaDriverEntryPointSuccess ||
      qv != cudaDriverEntryPointSuccess || w == NULL || v == NULL) {
    (void)cudaGetLastError();
    driver_why = "the driver provides no cuStreamWriteValue32/cuStreamWaitValue32 "
                 "(cudaGetDriverEntryPointByVersion failed)";
    return;
  }
  driver_write = (xp_write_value_fn)w;
  driver_wait = (xp_wait_value_fn)v;
  driver_why = NULL;
}

void xp_driver_ops(xp_write_value_fn *write, xp_wait_value_fn *wait, const char **why) {
  pthread_once(&driver_once, load_driver_ops);
  *write = driver_write;
  *wait = driver_wait;
  *why = driver_why;
}

static tpla_status_t driver_status(CUresult r, const tpla_xport_t *xp, const char *call,
                                   const char *what) {
  if (r == CUDA_SUCCESS)
    return TPLA_SUCCESS;
  return tpla_fail(TPLA_ERROR_CUDA, xp->fn, "%s (%s) failed: CUresult %d on device %d, rank %d",
                   call, what, (int)r, xp->device, xp->rank);
}

tpla_status_t xp_write(const tpla_xport_t *xp, cudaStream_t stream, uint32_t *addr,
                       uint32_t value, const char *what) {
  xp_write_value_fn write;
  xp_wait_value_fn wait;
  const char *why;
  xp_driver_ops(&write, &wait, &why);
  if (write == NULL)
    return tpla_fail(TPLA_ERROR_NOT_SUPPORTED, xp->fn, "%s", why);
  return driver_status(write((CUstream)stream, (CUdeviceptr)(uintptr_t)addr, value,
                             CU_STREAM_WRITE_VALUE_DEFAULT),
                       xp, "cuStreamWriteValue32", what);
}

tpla_status_t xp_wait(const tpla_xport_t *xp, cudaStream_t stream, uint32_t *addr, uint32_t value,
                      const char *what) {
  xp_write_value_fn write;
  xp_wait_value_fn wait;
  const char *why;
  xp_driver_ops(&write, &wait, &why);
  if (wait == NULL)
    return tpla_fail(TPLA_ERROR_NOT_SUPPORTED, xp->fn, "%s", why);
  return driver_status(wait((CUstream)stream, (CUdeviceptr)(uintptr_t)addr, value,
                            CU_STREAM_WAIT_VALUE_GEQ),
                       xp, "cuStreamWaitValue32", what);
}

/* ---- identity ----------------------------------------------------------------------- */

/* One rank's record. int32 fields, then 8-byte fields, then bytes: no
 * padding, the same layout in every process. */
typedef struct {
  int32_t status, device, pid, memops_ok, ipc_ok, unused;
  uint64_t nonce, base;
  char ipc[64]; /* cudaIpcMemHandle_t */
  char host[64], boot_id[48], pci[32];
  char message[192];
} rec_t;
_Static_assert(sizeof(cudaIpcMemHandle_t) == 64, "cudaIpcMemHandle_t is 64 bytes");
_Static_assert(sizeof(rec_t) == 24 + 16 + 64 + 64 + 48 + 32 + 192, "rec_t has padding");

typedef struct {
  int32_t ok;
  char why[252];
} verdict_t;

static void fill_identity(rec_t *rec, int device) {
  rec->nonce = tpla_process_nonce();
  rec->pid = (int32_t)getpid();
  rec->device = device;
  if (gethostname(rec->host, sizeof rec->host - 1) != 0)
    snprintf(rec->host, sizeof rec->host, "?");
  FILE *f = fopen("/proc/sys/kernel/random/boot_id", "r");
  if (f != NULL) {
    if (fgets(rec->boot_id, sizeof rec->boot_id, f) == NULL)
      rec->boot_id[0] = '\0';
    fclose(f);
  }
  if (cudaDeviceGetPCIBusId(rec->pci, (int)sizeof rec->pci, device) != cudaSuccess) {
    (void)cudaGetLastError();
    snprintf(rec->pci, sizeof rec->pci, "?");
  }
}

/* ---- teardown ---------------------------------------------------------------------------- */

void xp_destroy(tpla_xport_t *xp) {
  if (xp == NULL)
    return;
  tpla_device_guard_t guard;
  bool entered = tpla_device_guard_enter(&guard, xp->device, "tpla overlap plan destroy") ==
                 TPLA_SUCCESS;
  /* Drained while the watchdog still knows the transport: after an abort it
   * releases the flags again if a peer's late write lowered one (watchdog.h). */
  for (int s = 0; s < XP_STREAMS; s++)
    if (xp->streams[s])
      (void)cudaStreamSynchronize(xp->streams[s]);
  tpla_wd_remove_xport(xp->impl, xp);
  for (int q = 0; xp->ipc_opened && q < xp->nranks; q++)
    if (xp->ipc_opened[q])
      (void)cudaIpcCloseMemHandle(xp->ipc_opened[q]);
  if (xp->alloc)
    (void)cudaFree(xp->alloc);
  for (int f = 0; xp->flag_events && f < xp->nflags; f++)
    if (xp->flag_events[f])
      (void)cudaEventDestroy(xp->flag_events[f]);
  for (int s = 0; s < XP_STREAMS; s++) {
    if (xp->ev[s])
      (void)cudaEventDestroy(xp->ev[s]);
    if (xp->streams[s])
      (void)cudaStreamDestroy(xp->streams[s]);
  }
  if (xp->fork)
    (void)cudaEventDestroy(xp->fork);
  if (xp->joined)
    (void)cudaEventDestroy(xp->joined);
  for (int i = 0; i < XP_IN_FLIGHT_MAX; i++)
    if (xp->ended[i])
      (void)cudaEventDestroy(xp->ended[i]);
  (void)cudaGetLastError(); /* teardown errors have nowhere to go */
  if (entered)
    tpla_device_guard_exit(&guard);
  xg_cache_destroy(xp->gemm_cache);
  free(xp->flag_events);
  free(xp->flag_pull);
  free(xp->peer_base);
  free(xp->ipc_opened);
  free(xp);
}

/* ---- creation ---------------------------------------------------------------------------- */

/* XP_IN_FLIGHT_DEFAULT, or TPLA_XPORT_MAX_IN_FLIGHT (0 .. XP_IN_FLIGHT_MAX; 0: no bound). */
static int xp_in_flight_bound(void) {
  const char *v = getenv("TPLA_XPORT_MAX_IN_FLIGHT");
  if (v == NULL || *v == '\0')
    return XP_IN_FLIGHT_DEFAULT;
  char *end = NULL;
  long n = strtol(v, &end, 10);
  if (*end != '\0' || n < 0)
    return XP_IN_FLIGHT_DEFAULT;
  return n > XP_IN_FLIGHT_MAX ? XP_IN_FLIGHT_MAX : (int)n;
}

#define STEP(call)                                                 \
  do {                                                             \
    if (s == TPLA_SUCCESS)                                         \
      s = tpla_cuda_status((call), fn, #call);                     \
  } while (0)

/* This rank's resources; on failure the message is this thread's last error. */
static tpla_status_t create_local(tpla_xport_t *xp, bool want_ipc, rec_t *rec, const char *fn) {
  tpla_status_t s = TPLA_SUCCESS;
  xp->peer_base = calloc((size_t)xp->nranks, sizeof *xp->peer_base);
  xp->ipc_opened = calloc((size_t)xp->nranks, sizeof *xp->ipc_opened);
  xp->flag_events = calloc((size_t)xp->nflags + 1, sizeof *xp->flag_events);
  xp->flag_pull = calloc((size_t)xp->nflags + 1, 1);
  if (!xp->peer_base || !xp->ipc_opened || !xp->flag_events || !xp->flag_pull)
    return tpla_fail(TPLA_ERROR_OUT_OF_MEMORY, fn, "out of host memory");
  if (want_ipc) /* a PEER transport goes into the watchdog's list once created */
    TPLA_TRY(tpla_wd_reserve_xport(xp->impl, fn));
  /* compute stream 0 (GEMM+RS/AR: the partials the peers wait for) gets the
   * highest priority; copy engines ignore priorities */
  int least = 0, greatest = 0;
  STEP(cudaDeviceGetStreamPriorityRange(&least, &greatest));
  for (int i = 0; i < XP_STREAMS; i++) {
    STEP(cudaStreamCreateWithPriority(&xp->streams[i], cudaStreamNonBlocking,
                                      i == 0 ? greatest : least));
    STEP(cudaEventCreateWithFlags(&xp->ev[i], cudaEventDisableTiming));
  }
  STEP(cudaEventCreateWithFlags(&xp->fork, cudaEventDisableTiming));
  STEP(cudaEventCreateWithFlags(&xp->joined, cudaEventDisableTiming));
  xp->in_flight = want_ipc ? xp_in_flight_bound() : 0; /* used once the kind is PEER */
  const char *tune = getenv("TPLA_OVERLAP_TUNE"); /* checked by overlap_desc.c */
  xp->tune = tune != NULL && strcmp(tune, "1") == 0;
  for (int i = 0; i < xp->in_flight; i++)
    STEP(cudaEventCreateWithFlags(&xp->ended[i], cudaEventDisableTiming));
  for (int f = 0; f < xp->nflags; f++)
    STEP(cudaEventCreateWithFlags(&xp->flag_events[f], cudaEventDisableTiming));
  size_t words = (size_t)(2 * xp->nranks + xp->nflags + 1);
  xp->flag_bytes = (words * sizeof(uint32_t) + OVL_ALIGN - 1) / OVL_ALIGN * OVL_ALIGN;
  if (s == TPLA_SUCCESS && xp->window_bytes > SIZE_MAX - xp->flag_bytes)
    return tpla_fail(TPLA_ERROR_OUT_OF_MEMORY, fn, "a window of %zu bytes", xp->window_bytes);
  if (s == TPLA_SUCCESS) {
    cudaError_t e = cudaMalloc(&xp->alloc, xp->flag_bytes + xp->window_bytes);
    if (e != cudaSuccess) {
      xp->alloc = NULL;
      (void)cudaGetLastError();
      return tpla_fail(e == cudaErrorMemoryAllocation ? TPLA_ERROR_OUT_OF_MEMORY
                                                      : TPLA_ERROR_CUDA,
                       fn, "cudaMalloc of the %zu-byte transfer window (+ %zu bytes of flags) on "
                       "device %d failed: %s", xp->window_bytes, xp->flag_bytes, xp->device,
                       cudaGetErrorString(e));
    }
  }
  cudaStream_t st = xp->streams[0];
  STEP(cudaMemsetAsync(xp->alloc, 0, xp->flag_bytes, st));
  STEP(cudaStreamSynchronize(st));
  if (s != TPLA_SUCCESS)
    return s;
  xp->peer_base[xp->rank] = xp->alloc;
  xp->gemm_ws_bytes = xp->impl->gemm_ws_bytes / 2 / OVL_ALIGN * OVL_ALIGN;
  xp->gemm_ws[0] = xp->impl->gemm_ws;
  xp->gemm_ws[1] = (char *)xp->impl->gemm_ws + xp->gemm_ws_bytes;
  TPLA_TRY(xg_cache_create(&xp->gemm_cache, fn));
  rec->base = (uint64_t)(uintptr_t)xp->alloc;
  if (want_ipc) {
    /* not fatal: only a peer in another process needs the handle, and judge()
     * then turns AUTO into SENDRECV on every rank (a forced PEER fails there) */
    cudaIpcMemHandle_t h;
    cudaError_t e = cudaIpcGetMemHandle(&h, xp->alloc);
    rec->ipc_ok = e == cudaSuccess;
    if (e == cudaSuccess)
      memcpy(rec->ipc, &h, sizeof h);
    else
      (void)cudaGetLastError();
    /* the self test of the stream memory operations, on the spare word */
    uint32_t *spare = xp_step_word(xp, xp->rank, xp->nflags);
    if (s == TPLA_SUCCESS && xp->nranks > 1) {
      tpla_status_t t = xp_write(xp, st, spare, 0u, "self test");
      if (t == TPLA_SUCCESS)
        t = xp_wait(xp, st, spare, 0u, "self test");
      if (t == TPLA_SUCCESS)
        t = tpla_cuda_status(cudaStreamSynchronize(st), fn, "self test of cuStreamWaitValue32");
      rec->memops_ok = t == TPLA_SUCCESS;
      if (t != TPLA_SUCCESS)
        tpla_clear_error(); /* not fatal: AUTO falls back to SENDRECV */
    } else {
      rec->memops_ok = 1;
    }
  }
  return s;
}

/* Can this rank map every peer? Fills v->why when not. */
static void judge(const tpla_xport_t *xp, const rec_t *all, verdict_t *v) {
  const rec_t *me = &all[xp->rank];
  v->ok = 1;
  for (int q = 0; q < xp->nranks && v->ok; q++) {
    if (q == xp->rank)
      continue;
    const rec_t *o = &all[q];
    int can = 0, dev = -1;
    if (!me->memops_ok || !o->memops_ok) {
      snprintf(v->why, sizeof v->why, "stream memory operations do not work on rank %d",
               me->memops_ok ? q : xp->rank);
    } else if (strcmp(me->host, o->host) != 0 || strcmp(me->boot_id, o->boot_id) != 0) {
      snprintf(v->why, sizeof v->why, "rank %d is on host %.40s, rank %d on %.40s", q, o->host,
               xp->rank, me->host);
    } else if (o->nonce == me->nonce) {
      dev = o->device;
    } else if (!o->ipc_ok) {
      snprintf(v->why, sizeof v->why, "rank %d could not export its transfer window "
               "(cudaIpcGetMemHandle failed)", q);
    } else if (cudaDeviceGetByPCIBusId(&dev, o->pci) != cudaSuccess) {
      (void)cudaGetLastError();
      snprintf(v->why, sizeof v->why, "GPU %.31s of rank %d is not visible to rank %d's process "
               "(CUDA_VISIBLE_DEVICES?)", o->pci, q, xp->rank);
      dev = -1;
    }
    if (v->why[0] == '\0' && (cudaDeviceCanAccessPeer(&can, xp->device, dev) != cudaSuccess ||
                              !can)) {
      (void)cudaGetLastError();
      snprintf(v->why, sizeof v->why, "device %d (rank %d) cannot access device %d (rank %d) "
               "as a peer", xp->device, xp->rank, dev, q);
    }
    v->ok = v->why[0] == '\0';
  }
}

/* Map every peer's allocation (round 3, local part), then write the spare
 * flag word of every peer the way calls will (cuStreamWriteValue32 to a
 * peer-mapped address), so a driver that refuses it fails here, at plan
 * creation, where AUTO can still fall back to SENDRECV. */
static tpla_status_t map_peers(tpla_xport_t *xp, const rec_t *all, const char *fn) {
  for (int q = 0; q < xp->nranks; q++) {
    if (q == xp->rank)
      continue;
    if (all[q].nonce == all[xp->rank].nonce) {
      cudaError_t e = cudaDeviceEnablePeerAccess(all[q].device, 0);
      if (e == cudaErrorPeerAccessAlreadyEnabled) {
        (void)cudaGetLastError();
        e = cudaSuccess;
      }
      TPLA_TRY(tpla_cuda_status(e, fn, "cudaDeviceEnablePeerAccess"));
      xp->peer_base[q] = (char *)(uintptr_t)all[q].base;
    } else {
      cudaIpcMemHandle_t h;
      memcpy(&h, all[q].ipc, sizeof h);
      void *p = NULL;
      TPLA_TRY(tpla_cuda_status(cudaIpcOpenMemHandle(&p, h, cudaIpcMemLazyEnablePeerAccess), fn,
                                "cudaIpcOpenMemHandle (a peer's transfer window)"));
      xp->ipc_opened[q] = p;
      xp->peer_base[q] = p;
    }
  }
  cudaStream_t st = xp->streams[0];
  tpla_status_t s = TPLA_SUCCESS;
  for (int q = 0; q < xp->nranks && s == TPLA_SUCCESS; q++)
    if (q != xp->rank)
      s = xp_write(xp, st, xp_step_word(xp, q, xp->nflags), 0u, "test write to a peer");
  /* drained even after a failed enqueue: the caller unmaps the peers next */
  tpla_status_t synced = tpla_cuda_status(cudaStreamSynchronize(st), fn,
                                          "cudaStreamSynchronize (test writes to the peers' flags)");
  return s != TPLA_SUCCESS ? s : synced;
}

/* Undo map_peers (IPC mappings only; peer access stays enabled). */
static void unmap_peers(tpla_xport_t *xp) {
  for (int q = 0; q < xp->nranks; q++) {
    if (xp->ipc_opened[q])
      (void)cudaIpcCloseMemHandle(xp->ipc_opened[q]);
    xp->ipc_opened[q] = NULL;
    if (q != xp->rank)
      xp->peer_base[q] = NULL;
  }
  (void)cudaGetLastError();
}

/* One agreement round on a status: own failure first, else REMOTE naming
 * the first failed rank, with its message when it sent one. all: room for
 * every rank's record (its contents are replaced). */
static tpla_status_t agree(tpla_xport_t *xp, tpla_status_t mine, rec_t *all, const char *what,
                           const char *fn) {
  rec_t r;
  memset(&r, 0, sizeof r);
  r.status = (int32_t)mine;
  snprintf(r.message, sizeof r.message, "%s", mine ? tpla_last_error() : "");
  tpla_status_t s = xp->ctx->backend->exchange(xp->ctx, all, &r, sizeof r);
  for (int q = 0; s == TPLA_SUCCESS && q < xp->nranks; q++)
    if (all[q].status != 0 && q != xp->rank)
      s = tpla_fail(TPLA_ERROR_REMOTE, fn, "rank %d could not %s: %s", q, what, all[q].message);
  if (mine != TPLA_SUCCESS)
    return tpla_fail(mine, fn, "%s", r.message);
  return s;
}

tpla_status_t xp_create(tpla_ctx_t ctx, const ovl_xport_desc_t *desc, tpla_xport_t **out) {
  const char *fn = desc->fn;
  *out = NULL;
  tpla_xport_t *xp = calloc(1, sizeof *xp);
  rec_t mine, *all = calloc((size_t)ctx->nranks, sizeof *all);
  verdict_t *vs = calloc((size_t)ctx->nranks, sizeof *vs);
  tpla_status_t r = tpla_plan_agree_memory(ctx, fn, xp && all && vs);
  if (r != TPLA_SUCCESS) { /* every rank knows: none goes on into round 1 */
    free(xp);
    free(all);
    free(vs);
    return r;
  }
  xp->ctx = ctx;
  xp->impl = tpla_cuda_impl(ctx);
  xp->kind = desc->kind;
  xp->rank = ctx->rank;
  xp->nranks = ctx->nranks;
  xp->nflags = desc->nflags;
  xp->device = ctx->device;
  xp->window_bytes = desc->window_bytes;
  xp->fn = fn;
  xp->ncopy = ctx->nranks - 1 < XP_COPY_STREAMS ? ctx->nranks - 1 : XP_COPY_STREAMS;
  xp->ncopy = xp->ncopy < 1 ? 1 : xp->ncopy;
  tpla_device_guard_t guard;
  tpla_status_t s = tpla_device_guard_enter(&guard, ctx->device, fn);
  bool maybe_peer = desc->kind == OVL_XPORT_AUTO || desc->kind == OVL_XPORT_PEER;
  memset(&mine, 0, sizeof mine);
  fill_identity(&mine, ctx->device);
  if (s == TPLA_SUCCESS)
    s = create_local(xp, maybe_peer, &mine, fn);
  mine.status = (int32_t)s;
  if (s != TPLA_SUCCESS)
    snprintf(mine.message, sizeof mine.message, "%s", tpla_last_error());
  r = ctx->backend->exchange(ctx, all, &mine, sizeof mine); /* round 1 */
  if (s != TPLA_SUCCESS)
    r = tpla_fail(s, fn, "%s", mine.message);
  for (int q = 0; r == TPLA_SUCCESS && q < ctx->nranks; q++)
    if (all[q].status != 0)
      r = tpla_fail(TPLA_ERROR_REMOTE, fn, "rank %d could not set up its transport: %s", q,
                    all[q].message);
  if (r == TPLA_SUCCESS && maybe_peer) { /* round 2: PEER or not */
    verdict_t v;
    memset(&v, 0, sizeof v);
    judge(xp, all, &v);
    r = ctx->backend->exchange(ctx, vs, &v, sizeof v);
    int bad = -1;
    for (int q = 0; r == TPLA_SUCCESS && q < ctx->nranks && bad < 0; q++)
      bad = vs[q].ok ? -1 : q;
    if (r == TPLA_SUCCESS)
      xp->kind = bad < 0 ? OVL_XPORT_PEER : OVL_XPORT_SENDRECV;
    if (r == TPLA_SUCCESS && bad >= 0 && desc->kind == OVL_XPORT_PEER)
      r = tpla_fail(TPLA_ERROR_NOT_SUPPORTED, fn, "transport PEER is not possible: %s (use "
                    "TPLA_TRANSPORT_AUTO or SENDRECV)", vs[bad].why);
    if (r == TPLA_SUCCESS && xp->kind == OVL_XPORT_PEER) { /* round 3: map */
      tpla_status_t mapped = map_peers(xp, all, fn); /* done with all[]: agree's room */
      r = agree(xp, mapped, all, "map its peers' transfer windows", fn);
      if (r != TPLA_SUCCESS && r != TPLA_ERROR_TIMEOUT && desc->kind == OVL_XPORT_AUTO &&
          !xp->impl->comm_aborted) { /* every rank got the same verdict: fall back together */
        unmap_peers(xp);
        xp->kind = OVL_XPORT_SENDRECV;
        tpla_clear_error();
        r = TPLA_SUCCESS;
      }
    }
  }
  free(all);
  free(vs);
  tpla_device_guard_exit(&guard); /* also right after a failed enter */
  if (r != TPLA_SUCCESS) {
    char saved[512];
    snprintf(saved, sizeof saved, "%s", tpla_last_error());
    xp_destroy(xp);
    return tpla_fail(r, fn, "%s", strncmp(saved, fn, strlen(fn)) == 0 &&
                                      strncmp(saved + strlen(fn), ": ", 2) == 0
                                  ? saved + strlen(fn) + 2
                                  : saved);
  }
  tpla_wd_add_xport(xp->impl, xp);
  *out = xp;
  return TPLA_SUCCESS;
}
