/*
 * fuzz_gpu_common.h - what test_gpu_fuzz.c's case kinds share: the run's
 * switches (TPLA_FUZZ_*), splitmix64 choices of dimensions and leading
 * dimensions, the worst errors per dtype, one kind's run shared by its ranks,
 * and device matrices with host twins and guard bytes. Header-only, for that
 * one test; include only when TPLA_HAVE_CUDA is defined.
 */
#ifndef TPLA_FUZZ_GPU_COMMON_H
#define TPLA_FUZZ_GPU_COMMON_H

#include "test.h"
#include "tpla.h"
#include "ns_ref.h"
#include "ns_team.h"
#include "ranks.h"

#define FZ_GUARD 64           /* bytes after every view, which nobody may write */
#define FZ_MAX_NS_STEPS 8
#define FZ_MIN_CASES 10       /* per kind, whatever the time budget */
#define FZ_MAX_FAILED 5       /* failed cases before a kind stops */
#define FZ_MAX_DIM_GEMM 700
#define FZ_MAX_DIM_NS 600

enum { K_GEMM, K_FP8, K_NS1, K_NS2, NKINDS };
static const char *const kind_names[NKINDS] = {"gemm", "fp8", "ns1", "ns2"};

static struct {
  bool host;        /* TPLA_FUZZ_HOST: the host executor stands in for the GPUs */
  bool verbose;     /* TPLA_FUZZ_VERBOSE */
  bool replay;      /* TPLA_FUZZ_SEED: one case only */
  bool strict;      /* TPLA_FUZZ_STRICT: no allowance for casting P or W (cast_rounding) */
  uint64_t replay_seed;
  double seconds;   /* TPLA_FUZZ_SECONDS */
  uint64_t base_seed;
  int fp8;          /* device 0 has FP8 GEMMs */
} g;

#define E4M3 TPLA_FLOAT8_E4M3
#define E5M2 TPLA_FLOAT8_E5M2

static bool is_fp8(tpla_dtype_t t) { return t == E4M3 || t == E5M2; }

static double now_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* ---- random choices (splitmix64: any seed, 0 included, is a fine state) ------ */

typedef struct {
  uint64_t s;
} fz_rng_t;

static uint64_t fz_next(fz_rng_t *r) {
  uint64_t z = (r->s += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}
/* Uniform in [lo, hi]. */
static int64_t fz_range(fz_rng_t *r, int64_t lo, int64_t hi) {
  return lo + (int64_t)(fz_next(r) % (uint64_t)(hi - lo + 1));
}
static double fz_unit(fz_rng_t *r) { return (double)(fz_next(r) >> 11) / 9007199254740992.0; }
static double fz_sym(fz_rng_t *r) { return 2.0 * fz_unit(r) - 1.0; }
static bool fz_chance(fz_rng_t *r, double p) { return fz_unit(r) < p; }
#define FZ_PICK(r, arr) ((arr)[fz_range((r), 0, (int64_t)(sizeof(arr) / sizeof((arr)[0])) - 1)])

static int64_t round_up(int64_t x, int64_t q) { return (x + q - 1) / q * q; }

/* A dimension in 1..max, biased toward the sizes that change kernels and
 * alignment: 1 and tiny ones, primes, odd ones, near multiples of 64/128/256. */
static int64_t pick_dim(fz_rng_t *r, int64_t max) {
  static const int64_t primes[] = {2, 3, 5, 7, 11, 13, 17, 31, 61, 97, 127, 131, 191, 251,
                                   257, 383, 509, 521, 599, 613, 691};
  static const int64_t mults[] = {64, 128, 256};
  static const int64_t deltas[] = {-8, -7, -2, -1, 0, 0, 0, 1, 2, 7, 8};
  int64_t v;
  switch (fz_range(r, 0, 9)) {
  case 0:
  case 1: v = fz_range(r, 1, 8); break;
  case 2:
  case 3: v = FZ_PICK(r, primes); break;
  case 4:
  case 5:
  case 6: {
    int64_t q = FZ_PICK(r, mults);
    v = q * fz_range(r, 1, max / q > 0 ? max / q : 1) + FZ_PICK(r, deltas);
    break;
  }
  case 7: v = fz_range(r, 1, max) | 1; break;
  default: v = fz_range(r, 1, max); break;
  }
  return v < 1 ? 1 : v > max ? max : v;
}

/* A leading dimension >= max(cols, 1): mostly cols, else odd paddings, rows
 * aligned to `quantum` elements, or both. */
static int64_t pick_ld(fz_rng_t *r, int64_t cols, int64_t quantum) {
  static const int64_t odd[] = {5, 7, 9, 13, 15, 17, 31};
  int64_t base = cols > 1 ? cols : 1;
  switch (fz_range(r, 0, 7)) {
  case 0:
  case 1:
  case 2: return base;
  case 3: return round_up(base, quantum);
  case 4: return base + fz_range(r, 1, 3);
  case 5: return base + FZ_PICK(r, odd);
  case 6: return round_up(base, quantum) + quantum;
  default: return base + fz_range(r, 0, 40);
  }
}

/* ---- worst errors per dtype ------------------------------------------------------- */

typedef struct {
  char name[48];
  int cases;
  double ratio; /* worst error / tolerance */
  double err;   /* worst error (GEMM: max|err| / max|want|; NS: relative Frobenius) */
} worst_t;

#define MAX_WORST 48
typedef struct {
  worst_t w[MAX_WORST];
  int n;
} worst_table_t;

static void worst_note(worst_table_t *t, const char *name, double ratio, double err) {
  worst_t *w = NULL;
  for (int i = 0; i < t->n && w == NULL; i++)
    if (strcmp(t->w[i].name, name) == 0)
      w = &t->w[i];
  if (w == NULL && t->n < MAX_WORST) {
    w = &t->w[t->n++];
    memset(w, 0, sizeof *w);
    snprintf(w->name, sizeof w->name, "%s", name);
  }
  if (w == NULL)
    return;
  w->cases++;
  if (ratio > w->ratio || isnan(ratio))
    w->ratio = ratio;
  if (err > w->err || isnan(err))
    w->err = err;
}

/* ---- one kind's run, shared by its ranks ------------------------------------------ */

typedef struct {
  uint64_t seed;
  int64_t m, n;
  tpla_dtype_t dtype, gram;
  tpla_ns_preset_t preset;
  int steps;
  float user[3 * FZ_MAX_NS_STEPS]; /* TPLA_NS_USER's table */
  float safety, eps;
  tpla_shard_t shard;
  int64_t sizes[2]; /* of the sharded dimension, per rank */
  int64_t pad[2];   /* ld - max(cols, 1), per rank */
  tpla_ns_algorithm_t algo;
  tpla_ns_iteration_t iter;
  bool use_out, zero;
  double scale; /* magnitude of the input's entries */
  int share;    /* a workspace group with a neighbour plan made 1: before, 2: after this one */
} ns_case_t;

typedef struct {
  int kind, P;
  double deadline;
  fz_rng_t seeds;
  /* written by rank 0 before a rendezvous, read by every rank after it */
  bool go;
  uint64_t case_seed;
  ns_case_t ns;
  double *gx, *gout; /* NS: the global input (rounded) and result, m x n */
  /* per rank, for rank 0's verdict */
  bool rank_failed[2];
  tpla_ns_algorithm_t picked[2];
  tpla_ns_iteration_t picked_iter[2];
  /* rank 0's tallies */
  int cases, failed_cases, rejected, not_supported;
  int cast_cases;    /* NS cases that needed cast_rounding's allowance */
  double cast_worst; /* their worst error / the plain tolerance */
  worst_table_t worst;
  double seconds;
} phase_t;

static phase_t g_phase[NKINDS];

/* ---- matrices with host twins ----------------------------------------------------- */

typedef struct {
  tpla_matrix_t view;  /* executor view: data = alloc + off */
  void *alloc;         /* executor memory, `bytes` long */
  unsigned char *host; /* the allocation as uploaded */
  double *vals;        /* rows x ld values of the view (padding NaN) */
  size_t bytes, off;
} fmat_t;

static void fmat_free(rank_env_t *e, fmat_t *b) {
  team_free(e, b->alloc);
  free(b->host);
  free(b->vals);
  memset(b, 0, sizeof *b);
}

/* rows x cols of dtype t with leading dimension ld, `off` bytes into its
 * allocation, FZ_GUARD bytes after it; everything but the elements is 0xFF
 * (NaN in every float dtype, FP8 included), and with `poison` the elements
 * too; else uniform in [-range, range) rounded to t. 0 on success. */
static int fmat_make(rank_env_t *e, fmat_t *b, int64_t rows, int64_t cols, int64_t ld, size_t off,
                     tpla_dtype_t t, fz_rng_t *r, double range, bool poison) {
  memset(b, 0, sizeof *b);
  size_t es = tpla_dtype_size(t), n = (size_t)(rows * ld);
  bool failed = false;
  b->off = off;
  b->bytes = off + n * es + FZ_GUARD;
  b->host = malloc(b->bytes);
  b->vals = malloc((n + 1) * sizeof(double));
  if (b->host == NULL || b->vals == NULL)
    return 1;
  b->alloc = team_alloc(e, b->bytes, &failed);
  if (failed)
    return 1;
  memset(b->host, 0xFF, b->bytes);
  unsigned char *el = b->host + off;
  for (int64_t i = 0; i < rows && !poison; i++)
    for (int64_t j = 0; j < cols; j++)
      tpla_store_elem(el, t, (size_t)(i * ld + j), fz_sym(r) * range);
  for (size_t i = 0; i < n; i++)
    b->vals[i] = tpla_load_elem(el, t, i);
  b->view = (tpla_matrix_t){(char *)b->alloc + off, rows, cols, ld, t};
  return team_copy(e, b->alloc, b->host, b->bytes, cudaMemcpyHostToDevice);
}

/* The whole allocation back into `got` (b->bytes); 0 on success. */
static int fmat_read(rank_env_t *e, const fmat_t *b, unsigned char *got) {
  return team_copy(e, got, b->alloc, b->bytes, cudaMemcpyDeviceToHost);
}

#endif /* TPLA_FUZZ_GPU_COMMON_H */
