/*
 * overlap_tool.h - what the two files of `tpla ag-gemm|gemm-rs|gemm-ar` share:
 * mode_overlap.c (arguments, plans, timing, the table) and overlap_data.c (the
 * generated inputs, the buffers and the float64 check of sampled outputs).
 */
#ifndef TPLA_OVERLAP_TOOL_H
#define TPLA_OVERLAP_TOOL_H

#include "tool.h"

#define MAX_SHAPES 16
#define SAMPLE 48 /* rows and columns checked per rank */

typedef enum { OP_AG = 0, OP_RS = 1, OP_AR = 2 } op_kind_t;

typedef struct {
  double time, serial, gemm, comm; /* microseconds */
  size_t ws;
  int chunks, sets;
  bool warm;
  tpla_transport_t transport;
  int64_t checked, wrong;
} result_t;

typedef struct {
  op_kind_t kind;
  tool_opts_t *o;
  int64_t shapes[MAX_SHAPES][3]; /* M K N */
  int nshapes;
  int chunks;
  tpla_transport_t transport;
  tpla_fp8_accum_t accum; /* FP8 inputs: --accum=fast|split */
  bool cache_b;           /* --cache-b: one B with b_version 1 (a weight between updates) */
  uint64_t seed;
  result_t *res; /* [shape][rank] */
  int64_t wrong_total;
} job_t;

/* Which generated matrix (overlap_data.c). */
enum { M_A = 0, M_B = 1, M_D = 2 };

typedef struct {
  tpla_matrix_t a[TOOL_MAX_SETS], b[TOOL_MAX_SETS], d; /* executor memory */
  tpla_matrix_t bt; /* --cache-b: B^T, what the baseline GEMM reads (op T) */
  tpla_matrix_t full;                        /* AG: M x K gathered; RS/AR: M x N partial */
  tpla_matrix_t dloc;                        /* RS: the comm's output slice */
  int sets;
  bool warm;         /* the sets' A and B stay under twice the cache */
  int64_t rows, off; /* this rank's slice */
  float *scales;     /* FP8: A scale, B scale (16 bytes apart) in executor memory */
} bufs_t;

typedef struct {
  const job_t *job;
  bufs_t *b;
  tpla_ag_gemm_plan_t ag;
  tpla_gemm_rs_plan_t rs;
  tpla_gemm_ar_plan_t ar;
  tpla_overlap_args_t args;
  size_t *counts;
  int64_t M, K, N;
} bench_t;

static inline bool is_fp8(tpla_dtype_t t) {
  return t == TPLA_FLOAT8_E4M3 || t == TPLA_FLOAT8_E5M2;
}

/* D's dtype: -o fp32, else the input's (FP8 inputs: bf16). B's: the input's
 * (E5M2 inputs: E4M3 weights, as in a backward pass). */
static inline tpla_dtype_t out_dtype(const tool_opts_t *o) {
  return o->out_fp32 ? TPLA_FLOAT32 : is_fp8(o->dtype) ? TPLA_BFLOAT16 : o->dtype;
}
static inline tpla_dtype_t b_dtype(const tool_opts_t *o) {
  return o->dtype == TPLA_FLOAT8_E5M2 ? TPLA_FLOAT8_E4M3 : o->dtype;
}

/* overlap_data.c */
/* Upload into m's executor memory the generated matrix `which` of `rank`
 * (zeros for which < 0). */
int overlap_fill(tool_rank_t *r, tpla_matrix_t *m, uint64_t seed, int which, int rank);
/* This rank's buffers for one shape (mkn = M K N): the rotated input sets,
 * D, the serial/comm buffers and, for FP8, the scales. Nonzero on failure. */
int overlap_alloc_bufs(tool_rank_t *r, const job_t *job, const int64_t *mkn, bufs_t *b,
                       uint64_t seed);
void overlap_free_bufs(tool_rank_t *r, bufs_t *b);
/* Sampled elements of D (this rank's output after one call on set 0 from
 * the generated D) against float64; adds to *checked and *wrong. */
int overlap_check(tool_rank_t *r, bench_t *x, int64_t *checked, int64_t *wrong);

#endif /* TPLA_OVERLAP_TOOL_H */
