/*
 * ranks.h - run a test body on N host ranks (one thread each, one host
 * group), and small helpers the tests share: random fill, float64 GEMM
 * reference.
 */
#ifndef TPLA_TEST_RANKS_H
#define TPLA_TEST_RANKS_H

#include "tpla.h"

/* Body run by every rank; returns 0 on success, nonzero (and prints why) on
 * failure. ctx is that rank's host context. */
typedef int (*rank_fn_t)(tpla_ctx_t ctx, int rank, int nranks, void *arg);

/* Creates a host group of nranks, a thread and context per rank, runs fn on
 * each, and returns the number of ranks whose fn failed (or -1 if setup
 * failed). */
int run_host_ranks(int nranks, rank_fn_t fn, void *arg);
/* The same with the group's timeout (ms) instead of the tests' 30 s. */
int run_host_ranks_timeout(int nranks, int64_t timeout_ms, rank_fn_t fn, void *arg);

/* A one-rank host group and its context, for tests that call the executor
 * directly; 0 on success, else prints why and returns 1 (main's status). */
int single_host_ctx(tpla_host_group_t *group, tpla_ctx_t *ctx);

/* Deterministic pseudo-random numbers (xorshift), uniform in [-1, 1). */
typedef struct { uint64_t s; } rng_t;
void rng_seed(rng_t *r, uint64_t seed);
double rng_uniform(rng_t *r);
/* A seed that differs between runs (time and pid), printed for replay. */
uint64_t fresh_seed(const char *test_name);

/* Fill a row-major view with uniform [-1,1) values rounded to its dtype. */
void fill_random(tpla_matrix_t m, rng_t *r);

/* C (m x n, ldc) = op(A) op(B) in float64, reading tpla views of any float
 * dtype. */
void ref_gemm_f64(double *c, int64_t ldc, tpla_matrix_t a, tpla_op_t op_a, tpla_matrix_t b,
                  tpla_op_t op_b);

#endif
