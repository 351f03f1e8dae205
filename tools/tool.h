/*
 * tool.h - what the files of the `tpla` command-line tool share: the options
 * (the same flags in every mode, nccl-tests style), the team of ranks (one
 * thread per rank, each with its own context on NCCL or on a host group),
 * memory and timing helpers that work on either executor, random data and
 * the float64 GEMM reference.
 *
 * A mode is a function `int mode(tool_opts_t *opts)` listed in the mode table
 * in tools/tpla.c; it returns 0 on success, 1 on a failure (wrong results,
 * a tpla error), 2 on a usage error. A typical mode:
 *   - tool_pick_executor() to settle -x and -g,
 *   - tool_team_run() with a per-rank function that allocates with
 *     tool_alloc(), fills with tool_fill_random(), checks against a float64
 *     reference and times with tool_time(); rank 0 prints the table line
 *     after tool_team_sync() made every rank's result visible.
 */
#ifndef TPLA_TOOL_H
#define TPLA_TOOL_H

#include "tpla.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

/* ---- options (tpla.c) ----------------------------------------------------- */

typedef enum { TOOL_EXEC_AUTO = 0, TOOL_EXEC_HOST, TOOL_EXEC_CUDA } tool_exec_t;

typedef struct {
  /* common flags */
  int64_t min_size, max_size; /* -b, -e: size sweep (0 = the mode's default) */
  double step_factor;         /* -f: multiply the size by this each step */
  int ranks;                  /* -g: ranks (GPUs); 0 = all GPUs / 2 host ranks */
  int iters;                  /* -n: timed iterations */
  int warmup;                 /* -w: untimed warm-up iterations */
  int check;                  /* -c: 1 = check against a float64 reference */
  tpla_dtype_t dtype;         /* -d: input dtype */
  tool_exec_t executor;       /* -x: host | cuda | auto */
  uint64_t seed;              /* -s: random seed (0 = derived from time) */
  /* GEMM flags (gemm and the modes that run GEMMs) */
  tpla_op_t op_a, op_b;       /* -t NN|NT|TN|TT */
  int out_fp32;               /* -o fp32: D in fp32 (default: D has the input dtype) */
  float alpha, beta;          /* -a, -B */
  int allow_tf32;             /* -T 1: fp32 GEMMs may use TF32 */
  /* positional numbers after the mode (e.g. gemm's M N K) */
  int64_t pos[8];
  int npos;
  /* modes that parse their own arguments (see tpla.c) get here, in order,
   * every "--name[=value]" and every positional word (e.g. ns's MxN) */
  const char *extra[32];
  int nextra;
  /* which flags the user gave, so modes can pick their own defaults */
  bool set_sizes, set_ranks, set_iters, set_warmup, set_dtype;
} tool_opts_t;

/* Parse "4096", "8K" (x1024), "1M", "1G" into *out (> 0). */
bool tool_parse_size(const char *text, int64_t *out);
/* Whether a rows x cols matrix is within the tool's bound of 2^40 elements
 * (far beyond any memory; byte counts of such matrices cannot overflow). A
 * mode checks every matrix of a shape before allocating. */
bool tool_matrix_fits(int64_t rows, int64_t cols);
/* Parse "fp32"/"f32"/"float", "fp16"/"half", "bf16", "e4m3"/"fp8", "e5m2"; false if
 * unknown. */
bool tool_parse_dtype(const char *text, tpla_dtype_t *out);

/* ---- modes ------------------------------------------------------------------ */

int tool_mode_info(tool_opts_t *opts);
int tool_mode_gemm(tool_opts_t *opts);
int tool_mode_run(tool_opts_t *opts);
int tool_mode_ns(tool_opts_t *opts);
/* The ns flags, for the usage text (ns.c). */
void tool_ns_usage(FILE *out);

/* ---- executor choice (team.c) ---------------------------------------------- */

/* Settles opts->executor into HOST or CUDA and opts->ranks (> 0): auto takes
 * CUDA when this build has it and a GPU is present, else the host. -x cuda
 * without a GPU, or -g above the GPU count, prints why and returns false.
 * *gpus (may be NULL) receives the number of GPUs visible. */
bool tool_pick_executor(tool_opts_t *opts, int *gpus);
const char *tool_executor_name(tool_exec_t executor);

/* ---- the team of ranks (team.c) ---------------------------------------------- */

struct tool_team;

typedef struct {
  int rank, nranks;
  tool_exec_t executor; /* HOST or CUDA */
  int device;           /* CUDA ordinal (== rank), -1 on the host */
  tpla_ctx_t ctx;
  void *stream;         /* the rank's cudaStream_t (non-blocking); NULL on the host */
  struct tool_team *team;
} tool_rank_t;

/* Per-rank body: returns 0 on success, nonzero on failure (after printing
 * why with tool_rank_fail or tool_rank_error). */
typedef int (*tool_rank_fn_t)(tool_rank_t *r, void *arg);

/* Run `fn` on `nranks` ranks of `executor`, one thread each. CUDA: rank r
 * uses GPU r, with an NCCL communicator made from one unique id
 * (tpla_nccl_comm_create) and tpla_ctx_create_nccl; host: one host group and
 * tpla_ctx_create_host. Contexts time out after timeout_ms (0: env TPLA_TOOL_TIMEOUT_MS,
 * else 120 s).
 * Returns the number of ranks that failed (setup included), 0 if none. */
int tool_team_run(tool_exec_t executor, int nranks, int64_t timeout_ms, tool_rank_fn_t fn,
                  void *arg);

/* A rendezvous of the ranks of the team that also ORs a failure flag: it
 * returns nonzero on every rank if any rank passed failed != 0 (now or at an
 * earlier sync) or returned failure from its body; each rank should then
 * return from its body. A rank that has returned from its body no longer
 * counts, so no rank waits for one that left (failing or not). */
int tool_team_sync(tool_rank_t *r, int failed);

/* Print "# rank R: <what>: <status> (<tpla_last_error()>)" to stderr and
 * return 1, for `return tool_rank_fail(r, "tpla_gemm", s);`. */
int tool_rank_fail(tool_rank_t *r, const char *what, tpla_status_t status);
/* printf-style error line prefixed with the rank; returns 1. */
int tool_rank_error(tool_rank_t *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* The team's timeout (tool_team_run's timeout_ms, or its default). */
int64_t tool_rank_timeout_ms(const tool_rank_t *r);

/* ---- memory and timing on either executor (mem.c) --------------------------- */

/* Executor memory: cudaMalloc on the rank's device, or aligned host memory.
 * NULL (with a message) on failure; tool_free accepts NULL. */
void *tool_alloc(tool_rank_t *r, size_t bytes);
void tool_free(tool_rank_t *r, void *ptr);
/* Copies between host memory and executor memory, and within executor
 * memory; they complete before returning. Return 0 on success. */
int tool_upload(tool_rank_t *r, void *dst, const void *host_src, size_t bytes);
int tool_download(tool_rank_t *r, void *host_dst, const void *src, size_t bytes);
int tool_copy(tool_rank_t *r, void *dst, const void *src, size_t bytes);
/* Wait for the rank's stream (no-op on the host). Returns 0 on success. */
int tool_stream_sync(tool_rank_t *r);
/* Bytes of last-level cache that inputs must exceed to be timed cold: the
 * GPU's L2 (60 MB on an H200), or 60 MB on the host. */
size_t tool_cache_bytes(tool_rank_t *r);

/* Input sets a timed loop rotates over, at most TOOL_MAX_SETS. */
#define TOOL_MAX_SETS 256

/* How many sets of inputs a timed loop rotates over: enough that the inputs
 * of all sets (input_bytes each) exceed twice the cache, at least min_sets,
 * at most TOOL_MAX_SETS and 8 GiB of sets (set_bytes each, outputs
 * included). *warm tells that these bounds left the inputs under twice the
 * cache, so timed calls may read cached operands (the modes print a note). */
int tool_rotation_sets(tool_rank_t *r, size_t input_bytes, size_t set_bytes, int min_sets,
                       bool *warm);

/* The note a table prints under a row whose inputs were rotated warm. */
void tool_note_warm(const char *row, int sets);

/* One timed operation: enqueue iteration `iter` on r->stream. */
typedef tpla_status_t (*tool_body_fn_t)(tool_rank_t *r, int iter, void *arg);

/* Run `body` warmup times untimed, then iters times, each timed alone (CUDA
 * events around each call on the stream; the wall clock on the host), and
 * store the median in *median_us. Returns 0 on success (1 after printing the
 * failing call). Iteration numbers continue across warm-up and timing so a
 * body can rotate buffers with iter % nsets. */
int tool_time(tool_rank_t *r, int warmup, int iters, tool_body_fn_t body, void *arg,
              double *median_us);

/* ---- random data and the float64 reference (data.c) -------------------------- */

typedef struct {
  uint64_t state;
} tool_rng_t;

void tool_rng_seed(tool_rng_t *rng, uint64_t seed);
/* Uniform in [-1, 1), never exactly 0. */
double tool_rng_uniform(tool_rng_t *rng);
/* A seed from the clock, for -s 0. */
uint64_t tool_fresh_seed(void);

/* Fill a host row-major view (rows x cols, ld) of a float dtype with uniform
 * [-1, 1) values rounded to the dtype; padding between rows is left alone. */
void tool_fill_random(tpla_matrix_t host_view, tool_rng_t *rng);

/* Result of comparing a GEMM output with the float64 reference. */
typedef struct {
  int64_t checked;  /* elements compared */
  int64_t wrong;    /* elements outside the error bound */
  double max_rel;   /* max |d - ref| / (|ref| + rms(ref)) over the checked elements */
} tool_check_t;

/* Compare host copies of a GEMM: d_out against alpha op(a) op(b) + beta d_in
 * computed in float64 from the (already rounded) inputs. All rows and
 * columns are checked when they number <= 512; otherwise a random sample
 * of 256 rows by 256 columns (first and last included). An element is wrong
 * when |d - ref| > 2 u_d |ref| + 8 (u_in + u32 sqrt(k)) |alpha| ||a b||_2
 *                  + 4 u32 (|alpha a.b| + |beta c|),
 * where ||a b||_2 is the 2-norm of the k products, u_d the unit roundoff of
 * d's dtype, u32 = 2^-24 (fp32 accumulation) and u_in = 2^-11 with TF32, else
 * 0 (fp16/bf16 products are exact in fp32). For random inputs this is about
 * 20 standard deviations of the rounding error of a correct fp32-accumulated
 * result, and far below the error of one missing product. */
void tool_check_gemm(tool_check_t *out, tpla_matrix_t d_out, tpla_matrix_t d_in, tpla_matrix_t a,
                     tpla_op_t op_a, tpla_matrix_t b, tpla_op_t op_b, float alpha, float beta,
                     int allow_tf32, tool_rng_t *rng);

/* ---- output -------------------------------------------------------------------- */

/* Flush stdout after every table line so a long run can be watched. */
void tool_flush(void);

#endif /* TPLA_TOOL_H */
