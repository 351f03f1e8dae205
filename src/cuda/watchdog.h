/*
 * watchdog.h - how a CUDA-executor context stops instead of hanging
 * (tpla_ctx_abort, include/tpla.h): the call lock, the watchdog thread that
 * watches the calls in flight, and the abort that releases their device
 * waits. watchdog.c.
 *
 * A call that waits for a peer which never comes waits on the device: in
 * cuStreamWaitValue32 on one of its transport's flag words (PEER), or in an
 * NCCL kernel. Nothing on the host notices, so the watchdog does: every
 * public call records an event before and after its work on the caller's
 * stream, and a thread polls them. A call whose start event completed more
 * than cfg.timeout_ms ago and whose end event has not aborts the context.
 * While calls are in flight the thread also watches the communicator's
 * asynchronous error and, once the oldest call has run for 100 ms, reads the
 * abort marks that peers write into this rank's flags. With no call in
 * flight it sleeps; it polls every min(timeout_ms / 10, 20 ms).
 *
 * The abort: (1) this rank's mark goes into every peer's flags; (2) every
 * flag word of this rank gets a value past any call's number, so every
 * cuStreamWaitValue32 of this rank is satisfied and the streams drain (the
 * work that follows runs on stale data: the calls' outputs are undefined);
 * (3) under the call lock, so that no thread is inside an NCCL call at that
 * moment, ncclCommAbort ends the NCCL kernels. Steps 1-2 go through a
 * stream of the watchdog's own, which nothing else waits on. Until every
 * call in flight has drained, the thread repeats step 2 each poll: a peer's
 * write that lands after it would otherwise lower a flag word below a
 * queued wait again.
 */
#ifndef TPLA_CUDA_WATCHDOG_H
#define TPLA_CUDA_WATCHDOG_H

#include "cuda_ctx.h"

struct tpla_xport;

/* Create the call lock and, for 2 or more ranks, the watchdog thread. */
tpla_status_t tpla_wd_create(tpla_ctx_t ctx, tpla_cuda_ctx_t *impl, const char *fn);
/* Stop the thread and release everything (any subset may exist). */
void tpla_wd_destroy(tpla_cuda_ctx_t *impl);

/* The backend's call_begin / call_end / abort (internal.h). call_begin
 * waits while 256 watched calls are in flight (until the oldest ends, or
 * the context fails: then its failure). */
tpla_status_t tpla_wd_call_begin(tpla_ctx_t ctx, const char *fn, bool on_device, void *stream);
void tpla_wd_call_end(tpla_ctx_t ctx, bool on_device, void *stream);
void tpla_wd_abort(tpla_ctx_t ctx);
/* Wait until every watched call has ended, or return the context's failure
 * once the watchdog has failed it (a caller holding the call lock must then
 * let it go: the abort needs it). Before a device-wide synchronization
 * (quiesce, destroy), which could otherwise wait forever on a stuck call. */
tpla_status_t tpla_wd_wait_calls(tpla_ctx_t ctx, const char *fn);

/* The transports whose flags an abort releases and whose marks the
 * watchdog reads: added once created, removed before destruction. */
void tpla_wd_add_xport(tpla_cuda_ctx_t *impl, struct tpla_xport *xp);
/* Room for one more transport in the list, made by a creation before its
 * collective rounds (so that a failure is agreed like any other there):
 * tpla_wd_add_xport then cannot fail. */
tpla_status_t tpla_wd_reserve_xport(tpla_cuda_ctx_t *impl, const char *fn);
void tpla_wd_remove_xport(tpla_cuda_ctx_t *impl, struct tpla_xport *xp);

#endif /* TPLA_CUDA_WATCHDOG_H */
