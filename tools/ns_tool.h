/*
 * ns_tool.h - what the two files of `tpla ns` share: ns.c (arguments,
 * buffers, timing, the table) and ns_check.c (the errors against the exact
 * polar factor, on rank 0).
 */
#ifndef TPLA_NS_TOOL_H
#define TPLA_NS_TOOL_H

#include "tool.h"

#define NS_MAX_SHAPES 64
#define NS_MAX_SVD_DIM 16384 /* largest --svd-max */

/* The ns flags (--preset ... --json) and the shapes, parsed. */
typedef struct {
  tpla_ns_preset_t preset;
  int steps;
  tpla_ns_algorithm_t algo;
  tpla_ns_iteration_t iteration;
  tpla_shard_t shard;
  int ngrams;             /* Gram variants to run: 1, or 2 for --gram=both */
  tpla_dtype_t grams[2];
  int64_t svd_max;        /* largest dimension for the float64 host check */
  const char *json;       /* NULL: no JSON lines */
  int64_t shapes[NS_MAX_SHAPES][2]; /* M x N */
  int nshapes;
} ns_args_t;

/* One rank's outcome for one shape and Gram variant. */
typedef struct {
  double time_us;           /* median of the timed calls */
  size_t ws;                /* the plan's workspace */
  tpla_ns_algorithm_t algo; /* what the plan runs */
  tpla_ns_iteration_t iteration;
  int sets;                 /* rotating input buffers */
  bool warm;                /* they stay under twice the cache */
} ns_result_t;

typedef struct {
  const tool_opts_t *o;
  const ns_args_t *a;
  uint64_t seed;
  ns_result_t *results; /* [shape][gram][rank] */
  void *y;              /* the gathered result (rank 0 reads it), dtype, M x N */
  double *polar;        /* U V^T of the shape polar_of (f64 checks), M x N */
  double *nsref;        /* U p(S) V^T of that shape: the steps in exact arithmetic */
  int polar_of;
  FILE *json;
  int bad_rows;
} ns_job_t;

typedef struct {
  double polar_rel, orth_max, ns_rel, seconds;
  int64_t nonfinite;
  const char *src;
} ns_err_t;

/* Element `index` (row-major, global) of the input: a pure function of
 * (seed, index), so every rank count sees the same matrix. Normal-ish:
 * four 16-bit uniforms (k + 0.5) / 65536, centred, scaled to variance 1. */
static inline double ns_normalish(uint64_t seed, uint64_t index) {
  uint64_t z = seed + (index + 1) * 0x9e3779b97f4a7c15ull; /* splitmix64 */
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  z ^= z >> 31;
  double sum = (double)(z & 0xffff) + (double)((z >> 16) & 0xffff) +
               (double)((z >> 32) & 0xffff) + (double)(z >> 48);
  return (sum + 2.0 - 131072.0) * (1.7320508075688772 / 65536.0);
}

/* The largest ns_rel of a correct result: 8 u with an fp32 Gram, 24 u with a
 * half-precision one, u = 2^-8 for bf16 and 2^-10 (twice fp16's unit
 * roundoff) for fp16; 2^-12 for fp32 inputs. Measured at most: bf16 2.9 and
 * 12 unit roundoffs, fp16 6.9 and 12, fp32 213 (2^-24 each; the host
 * executor, about 2,000 rows over presets, algorithms, iterations, shardings
 * and 1-3 ranks, and cuBLASLt on one H200, run 210). */
double ns_rel_bound(tpla_dtype_t dtype, tpla_dtype_t gram);

/* Rank 0, with the result of `shape` gathered in job->y: fill *e (-c 0:
 * nan, src "none"). Nonzero (after printing why) on a failure. */
int ns_compute_errors(tool_rank_t *r, ns_job_t *job, int shape, ns_err_t *e);

#endif /* TPLA_NS_TOOL_H */
