/*
 * transport_gemm.c - GEMMs and folds on the lanes of the CUDA overlap
 * transport. A GEMM on compute lane L uses half L of the context's cuBLASLt
 * workspace, so the two compute lanes run GEMMs at the same time (a chunk's
 * tail overlaps the next chunk's start); transport.c orders the halves with
 * the context's own GEMMs. Plans are built by lt_plan.c (the builder
 * tpla_gemm uses too) and cached per transport, keyed with the bias
 * epilogue and a C apart from D: D = alpha op(A) op(B) + beta C + bias,
 * bias broadcast over rows (cuBLASLt's column vector of our n); C = a
 * received partial lets the GEMM of the own rows add it in its epilogue
 * instead of a separate pass. FP8 inputs (D bf16/fp16/fp32) run when the
 * chunk is in cuBLASLt's FP8 layout (A m x k, B n x k: op_b T), with the
 * call's scales; d_amax is max-combined over the chunks. The folds launch
 * transport_kernels.cu.
 */
#include "fp8_kernels.h"
#include "lt_plan.h"
#include "transport.h"
#include "transport_kernels.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A window group's members share one transport and so this cache: with a
 * layer stack's plans, their chunk sizes and alignments, that is tens to
 * hundreds of keys. 32 round-robin slots missed on every call of a cycle of
 * more (review 100), and an evicted tuned plan came back untuned, its kernel
 * maybe never loaded (the lazy load the rehearsal is there to avoid); the
 * rebuilds themselves cost little on one rank (run 224). So the cache grows
 * to XG_MAX keys and then evicts the least recently used. */
#define XG_FIRST 32
#define XG_MAX 1024

typedef struct {
  tpla_lt_key_t key;
  tpla_lt_plan_t plan;
  uint64_t used_at;  /* the cache's clock at its last lookup */
  bool unsupported; /* a bias-epilogue key without a kernel: the caller folds (asked once) */
} xg_slot_t;

struct xg_cache {
  xg_slot_t **slots; /* one allocation each: a plan stays put while the table grows */
  int count, cap;
  uint64_t clock;
};

tpla_status_t xg_cache_create(xg_cache_t **cache, const char *fn) {
  *cache = calloc(1, sizeof **cache);
  if (*cache != NULL && ((*cache)->slots = calloc(XG_FIRST, sizeof(xg_slot_t *))) == NULL) {
    free(*cache);
    *cache = NULL;
  }
  if (*cache == NULL)
    return tpla_fail(TPLA_ERROR_OUT_OF_MEMORY, fn, "out of host memory for GEMM plans");
  (*cache)->cap = XG_FIRST;
  return TPLA_SUCCESS;
}

void xg_cache_destroy(xg_cache_t *cache) {
  if (cache == NULL)
    return;
  for (int i = 0; i < cache->count; i++) {
    tpla_lt_plan_release(&cache->slots[i]->plan);
    free(cache->slots[i]);
  }
  free(cache->slots);
  free(cache);
}

/* For messages: which GEMM of which rank and lane. */
typedef struct {
  const tpla_xport_t *xp;
  int lane;
} xg_what_t;

static void describe_chunk(char *buf, size_t size, const void *arg) {
  const xg_what_t *w = arg;
  snprintf(buf, size, "an overlap GEMM chunk (rank %d, lane %d)", w->xp->rank, w->lane);
}

/* A slot for a new key: a fresh one while the cache may grow, else the
 * least recently used one's (its plan released: plans may go while their
 * GEMMs run, lt_plan.h). NULL when out of host memory. */
static xg_slot_t *free_slot(xg_cache_t *c) {
  if (c->count == c->cap && c->cap < XG_MAX) {
    xg_slot_t **more = realloc(c->slots, (size_t)(2 * c->cap) * sizeof *more);
    if (more != NULL) {
      c->slots = more;
      c->cap *= 2;
    }
  }
  if (c->count < c->cap) {
    xg_slot_t *s = calloc(1, sizeof *s);
    if (s != NULL)
      c->slots[c->count++] = s;
    return s;
  }
  xg_slot_t *lru = c->slots[0];
  for (int i = 1; i < c->count; i++)
    if (c->slots[i]->used_at < lru->used_at)
      lru = c->slots[i];
  tpla_lt_plan_release(&lru->plan);
  return lru;
}

/* The cached plan of `key`, or a new one (*built set). A bias-epilogue key
 * that has no kernel is NOT_SUPPORTED without a message, from the second
 * time on, for the caller to fold the bias. */
static tpla_status_t lookup(tpla_xport_t *xp, const tpla_lt_key_t *key,
                            const tpla_lt_operands_t *first, const tpla_lt_what_t *what,
                            tpla_lt_plan_t **out, bool *built) {
  xg_cache_t *c = xp->gemm_cache;
  *built = false;
  for (int i = 0; i < c->count; i++)
    if (memcmp(&c->slots[i]->key, key, sizeof *key) == 0) {
      c->slots[i]->used_at = ++c->clock;
      *out = &c->slots[i]->plan;
      return c->slots[i]->unsupported ? TPLA_ERROR_NOT_SUPPORTED : TPLA_SUCCESS;
    }
  tpla_lt_plan_t plan;
  tpla_status_t st = tpla_lt_plan_build(&plan, xp->impl->lt, xp->gemm_ws_bytes, key, first,
                                        xp->fn, what);
  if (st != TPLA_SUCCESS && !(st == TPLA_ERROR_NOT_SUPPORTED && key->bias))
    return st;
  xg_slot_t *s = free_slot(c);
  if (s == NULL) {
    if (st == TPLA_SUCCESS)
      tpla_lt_plan_release(&plan);
    return tpla_fail(TPLA_ERROR_OUT_OF_MEMORY, xp->fn, "out of host memory for GEMM plans");
  }
  s->key = *key;
  s->unsupported = st != TPLA_SUCCESS;
  s->plan = st == TPLA_SUCCESS ? plan : (tpla_lt_plan_t){0};
  s->used_at = ++c->clock;
  *out = &s->plan;
  *built = st == TPLA_SUCCESS;
  return st;
}

tpla_status_t xp_fold(tpla_xport_t *xp, int lane, const ovl_fold_t *f) {
  cudaError_t e = tpla_launch_fold(f->y, f->beta, f->slots, f->slot_stride, f->nslots, f->bias,
                                   f->y2, xp_lane_stream(xp, lane));
  if (e == cudaSuccess)
    return TPLA_SUCCESS;
  char what[160];
  snprintf(what, sizeof what, "the fold kernel (%lldx%lld %s, %d slots, rank %d)",
           (long long)f->y.rows, (long long)f->y.cols, tpla_dtype_name(f->y.dtype), f->nslots,
           xp->rank);
  return tpla_cuda_status(e, xp->fn, what);
}

/* amax of what this GEMM wrote, max-combined into *d_amax (the caller
 * resets it once per call: the chunks of one output share it). */
static tpla_status_t chunk_amax(tpla_xport_t *xp, int lane, const tpla_gemm_call_t *g) {
  if (g->fp8.d_amax == NULL)
    return TPLA_SUCCESS;
  cudaError_t e = tpla_cuda_amax(g->fp8.d_amax, g->d.data, g->d.dtype, g->m, g->n, g->d.ld, 1,
                                 xp_lane_stream(xp, lane));
  return tpla_cuda_status(e, xp->fn, "tpla_cuda_amax (FP8 d_amax of an overlap GEMM chunk)");
}

tpla_status_t xp_gemm(tpla_xport_t *xp, int lane, const tpla_gemm_call_t *g, const void *bias,
                      const tpla_matrix_t *c) {
  bool fp8 = tpla_lt_is_fp8(g->a.dtype);
  if (g->k == 0) { /* D = beta C + bias: a fold (C apart from D: a dense slot, beta 1) */
    if (c != NULL && (g->beta != 1.0f || (c->rows > 1 && c->ld != c->cols)))
      return tpla_fail(TPLA_ERROR_INTERNAL, xp->fn, "k = 0 with a C other than D needs a "
                       "dense C and beta 1");
    ovl_fold_t f = {g->d, c ? 0.0f : g->beta, c ? c->data : NULL, 0, c ? 1 : 0, bias,
                    {NULL, 0, 0, 1, g->d.dtype}};
    TPLA_TRY(xp_fold(xp, lane, &f));
    return chunk_amax(xp, lane, g);
  }
  if (fp8 && (g->op_a != TPLA_OP_N || g->op_b != TPLA_OP_T))
    return tpla_fail(TPLA_ERROR_NOT_SUPPORTED, xp->fn,
                     "an FP8 overlap GEMM chunk (rank %d) has op_a %s, op_b %s: cuBLASLt's FP8 "
                     "kernels read A stored m x k and B stored n x k only (op_a N, op_b T); "
                     "stage the operand (tpla_cuda_transpose_bytes) at plan time",
                     xp->rank, g->op_a == TPLA_OP_N ? "N" : "T", g->op_b == TPLA_OP_N ? "N" : "T");
  /* bias through the epilogue when its pointer suits TMA-era kernels, else
   * by a fold; with FP8 inputs cuBLASLt's bias is bf16 unless D is fp16, so
   * an fp32 D folds its bias */
  bool epi_bias = bias != NULL && ((uintptr_t)bias & 15) == 0 &&
                  (!fp8 || g->d.dtype == TPLA_BFLOAT16 || g->d.dtype == TPLA_FLOAT16);
  tpla_lt_key_t key;
  tpla_lt_key_from_call(&key, g);
  if (fp8) /* A and B scales always go in (NULL: the unit scale): one plan either way */
    key.fp8_pointers |= TPLA_LT_A_SCALE | TPLA_LT_B_SCALE;
  key.ldc = c ? c->ld : g->d.ld;
  key.c_separate = c != NULL;
  key.align_a = tpla_lt_alignment(g->a.data, (size_t)g->a.ld * tpla_dtype_size(g->a.dtype));
  key.align_b = tpla_lt_alignment(g->b.data, (size_t)g->b.ld * tpla_dtype_size(g->b.dtype));
  key.align_d = tpla_lt_alignment(g->d.data, (size_t)g->d.ld * tpla_dtype_size(g->d.dtype));
  key.align_c = c ? tpla_lt_alignment(c->data, (size_t)c->ld * tpla_dtype_size(g->d.dtype))
                  : key.align_d;
  key.bias = epi_bias;
  tpla_lt_operands_t ops = {.a = g->a.data, .b = g->b.data, .c = c ? c->data : NULL,
                            .d = g->d.data, .alpha = g->alpha, .beta = g->beta,
                            .bias = epi_bias ? bias : NULL,
                            .a_scale = tpla_cuda_fp8_scale(xp->impl, g->fp8.a_scale),
                            .b_scale = tpla_cuda_fp8_scale(xp->impl, g->fp8.b_scale),
                            .d_scale = tpla_cuda_fp8_scale(xp->impl, g->fp8.d_scale),
                            .d_amax = NULL /* D is never FP8 here: chunk_amax */};
  xg_what_t who = {xp, lane};
  tpla_lt_what_t what = {describe_chunk, &who};
  tpla_lt_plan_t *p;
  bool built;
  tpla_status_t found = lookup(xp, &key, &ops, &what, &p, &built);
  if (found == TPLA_ERROR_NOT_SUPPORTED && epi_bias) { /* no kernel with the epilogue: fold */
    tpla_clear_error();
    epi_bias = false;
    key.bias = 0;
    ops.bias = NULL;
    found = lookup(xp, &key, &ops, &what, &p, &built);
  }
  TPLA_TRY(found);
  int half = lane == OVL_LANE_COMPUTE1 ? 1 : 0;
  if (built && xp->rehearsal && xp->tune) { /* on the rehearsal's scratch, the lanes idle */
    TPLA_TRY(xp_sync_streams(xp, "cudaStreamSynchronize (GEMM tuning)"));
    TPLA_TRY(tpla_lt_plan_tune(p, xp->impl->lt, xp->gemm_ws_bytes, &ops, xp->gemm_ws[half],
                               xp_lane_stream(xp, lane), xp->fn));
  }
  void *ws = p->ws_needed > 0 ? xp->gemm_ws[half] : NULL;
  size_t ws_bytes = p->ws_needed > 0 ? xp->gemm_ws_bytes : 0;
  if (ws != NULL && lane != OVL_LANE_COMPUTE0 && lane != OVL_LANE_COMPUTE1)
    return tpla_fail(TPLA_ERROR_INTERNAL, xp->fn, "a GEMM needing workspace on lane %d", lane);
  TPLA_TRY(tpla_lt_plan_run(p, xp->impl->lt, &ops, ws, ws_bytes, xp_lane_stream(xp, lane),
                            xp->fn, &what));
  if (bias != NULL && !epi_bias) {
    ovl_fold_t f = {g->d, 1.0f, NULL, 0, 0, bias, {NULL, 0, 0, 1, g->d.dtype}};
    TPLA_TRY(xp_fold(xp, lane, &f));
  }
  return chunk_amax(xp, lane, g);
}
