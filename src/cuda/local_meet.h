/*
 * local_meet.h - the plan-time exchange of an NCCL context whose ranks are
 * all threads of this process, done on the host.
 *
 * Why: in one process, once the GPUs are peers, cudaMalloc and cudaFree
 * (and first-time module loads) take driver locks that wait for the peer
 * GPUs. A plan-time exchange through an ncclAllGather keeps a kernel
 * spinning on this rank's GPU until the slowest rank arrives; if that rank
 * is still allocating its plan buffers, its cudaMalloc waits for our GPU
 * and our GPU waits for it: both hang (seen on 2 H200s in plan creation).
 * A host rendezvous never occupies a GPU, so plan creation cannot deadlock
 * that way. Ranks in other processes keep the NCCL exchange.
 */
#ifndef TPLA_CUDA_LOCAL_MEET_H
#define TPLA_CUDA_LOCAL_MEET_H

#include "internal.h"

typedef struct local_meet local_meet_t;

/* A random number drawn once per process (never 0): equal in two rank
 * records exactly when the ranks share a process. */
uint64_t tpla_process_nonce(void);

/* A key no other call in this process returned. */
uint64_t local_meet_new_key(void);

/* Join the meeting point `key` of `nranks` ranks (created by the first
 * rank that joins; released when the last leaves). */
tpla_status_t local_meet_join(local_meet_t **meet, uint64_t key, int nranks, const char *fn);
void local_meet_leave(local_meet_t *meet);

/* recv (nranks * bytes) = every rank's `bytes` at send, in rank order.
 * Every rank must pass the same `bytes`. A rank that waits longer than
 * timeout_ms fails with TIMEOUT and breaks the meeting point: every later
 * exchange on it fails with REMOTE. */
tpla_status_t local_meet_allgather(local_meet_t *meet, int rank, void *recv, const void *send,
                                   size_t bytes, int64_t timeout_ms, const char *fn);

#endif /* TPLA_CUDA_LOCAL_MEET_H */
