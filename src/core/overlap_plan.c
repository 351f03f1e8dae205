/*
 * overlap_plan.c - creation of the AllGather+GEMM, GEMM+ReduceScatter and
 * GEMM+AllReduce plans: the collective agreement on the descriptors' summaries
 * (overlap_desc.c checks and summarizes them), row slices and chunks, buffer
 * layout, the transport (allocated, mapped and exchanged here, once), and
 * the plan queries.
 *
 * Agreement protocol (as the Newton-Schulz plans): every rank, even one
 * whose arguments are bad, sends a fixed-size summary of its descriptor with
 * its own status and message through the backend's plan-time exchange; all
 * ranks reach the same verdict from the same data. A rank with bad
 * arguments returns its own status, the others REMOTE naming it; a
 * disagreement is REMOTE with the same message on every rank.
 */
#include "overlap_desc.h"

#include <inttypes.h>
#include <stddef.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- agreement ---------------------------------------------------------------- */

/* Row slices from the agreed summaries into p->offs; REMOTE if they do
 * not add up. */
static tpla_status_t slices(ovl_plan_t *p, const ovl_summary_t *all, const char *fn) {
  int P = p->nranks;
  p->offs[0] = 0;
  if (p->kind == OVL_AG) {
    for (int r = 0; r < P; r++)
      p->offs[r + 1] = p->offs[r] + all[r].rows;
    if (p->offs[P] > INT32_MAX)
      return tpla_fail(TPLA_ERROR_NOT_SUPPORTED, fn, "the gathered A has %" PRId64 " rows "
                       "(> 2^31-1)", p->offs[P]);
    if (p->offs[P] == 0)
      return tpla_fail(TPLA_ERROR_INVALID_ARGUMENT, fn, "argument 'desc': every rank has "
                       "local_rows 0: the gathered A would be empty");
    return TPLA_SUCCESS;
  }
  bool even = all[0].rows < 0;
  /* the even split deals rows in units: 16 for FP8 when m allows, since Hopper's FP8 GEMMs
   * take row slices in multiples of 16 (m = 928 at P = 4: 240, 240, 224, 224, not 232 each) */
  const int64_t unit = p->fp8 && p->m % 16 == 0 ? 16 : 1, units = p->m / unit;
  for (int r = 0; r < P; r++) {
    if ((all[r].rows < 0) != even)
      return tpla_fail(TPLA_ERROR_REMOTE, fn, "ranks disagree: rank %d has local_rows = %" PRId64
                       ", rank 0 has %" PRId64 " (-1, the even split, must be on every rank "
                       "or none)", r, all[r].rows, all[0].rows);
    int64_t rows = even ? (units / P + (r < units % P)) * unit : all[r].rows;
    p->offs[r + 1] = p->offs[r] + rows;
  }
  if (p->offs[P] != p->m)
    return tpla_fail(TPLA_ERROR_REMOTE, fn, "the ranks' local_rows add up to %" PRId64
                     ", not m = %" PRId64, p->offs[P], p->m);
  return TPLA_SUCCESS;
}

void ovl_chunk(int64_t rows, int chunks, int tail, int c, int64_t *r0, int64_t *nr) {
  /* chunks - 1 equal pieces and a last one 1/tail of them: what follows the
   * last chunk's arrival (its GEMM, or GEMM+AllReduce's read of it) shrinks */
  int64_t size;
  if (chunks > 1 && tail > 1) {
    double unit = (double)rows * tail / ((double)(chunks - 1) * tail + 1.0);
    size = unit > 128 ? (int64_t)(unit / 128.0 + 0.5) * 128 : (int64_t)ceil(unit / 16.0) * 16;
  } else {
    size = (rows + chunks - 1) / chunks;
    size = size > 128 ? (size + 127) / 128 * 128 : (size + 15) / 16 * 16;
  }
  /* whole GEMM tiles, except in the last chunk; at least multiples of 16
   * rows, which Hopper's FP8 GEMMs need (a slice of 16k rows gives chunks
   * of 16j rows) */
  int64_t a = (int64_t)c * size, b = c == chunks - 1 ? rows : a + size;
  a = a < rows ? a : rows;
  b = b < rows ? b : rows;
  *r0 = a;
  *nr = b - a;
}

/* Transfer time over GEMM time for one slice, with H200-class constants
 * (GEMM 700 TFLOP/s, copy engine 350 GB/s): AG moves a slice (k columns)
 * to every peer while each receiver multiplies it by n columns; RS/AR send
 * an n-column partial per peer computed over k. For FP8 this is not the
 * true ratio (RS/AR move bf16 partials and FP8 GEMMs run ~1.7x faster), but
 * the true one would pick 7 chunks at AG (16384, 8192, 1024) and 8 at RS/AR
 * (16384, 1024, 8192), where 8 measured slower or equal (run 84, 2 H200s:
 * 330 against 302 us, 506-511 against 508-510, 925-926 against 882-884). */
static double transfer_ratio(ovl_kind_t kind, int nranks, int64_t k, int64_t n,
                             tpla_dtype_t dtype) {
  double e = (double)tpla_dtype_size(dtype), flops = 700e12, bw = 350e9;
  return kind == OVL_AG ? e * (nranks - 1) * flops / (2.0 * (double)(n > 0 ? n : 1) * bw)
                        : e * flops / (2.0 * (double)(k > 0 ? k : 1) * bw);
}

/* Above a ratio of 1/2 the transfer is chunked, so a GEMM waits only for its
 * own chunk (about 4 chunks per unit of the ratio, at most 8, never below
 * 128 rows); GEMM+RS/AR and FP8 AllGather+GEMM take at least 4. */
int ovl_auto_chunks(ovl_kind_t kind, int nranks, int64_t max_rows, int64_t k, int64_t n,
                    tpla_dtype_t dtype) {
  if (nranks < 2 || max_rows < 256)
    return 1;
  double ratio = transfer_ratio(kind, nranks, k, n, dtype);
  /* GEMM+RS/AR always gain: the own rows' GEMM of chunk c waits only for the
   * peers' partials of chunk c (not a whole slice), and GEMM+AllReduce's
   * all-gather half reads each reduced chunk while the next one is computed.
   * FP8 AllGather+GEMM too: with one chunk, (8192, 8192, 4096) took 487 us
   * against 437 us with four when the GEMMs start at once (op(B) T, or a
   * cached B^T; run 19, 2 H200s) */
  int c = ratio <= 0.5 ? 1 : (int)ceil(4.0 * ratio);
  bool fp8 = dtype == TPLA_FLOAT8_E4M3 || dtype == TPLA_FLOAT8_E5M2;
  if ((kind != OVL_AG || fp8) && c < 4)
    c = 4;
  int64_t by_rows = max_rows / 128;
  c = c < 8 ? c : 8;
  c = c < by_rows ? c : (int)by_rows;
  return c > 1 ? c : 1;
}

/* GEMM+AllReduce's last chunk half the others where the GEMM outlasts the
 * transfer: after the last GEMM only that chunk's reduced rows still travel
 * to the peers (run 78, 2 H200s, (8192, 4096, 8192): 844.0-852.0 us against
 * 866.7-867.6, three rounds; runs 11 and 71 alike). Where the transfer
 * dominates, the larger other chunks cost more than the tail saves
 * ((16384, 1024, 8192): 930-936 us against 915-922); GEMM+RS measured no
 * gain (run 11; FP8 op(B) T 491 us against 454, run 71). */
int ovl_auto_tail(ovl_kind_t kind, int nranks, int64_t k, int64_t n, tpla_dtype_t dtype) {
  return kind == OVL_AR && nranks > 1 && transfer_ratio(kind, nranks, k, n, dtype) < 1.0 ? 2 : 1;
}

static size_t align_up(size_t x) { return (x + OVL_ALIGN - 1) / OVL_ALIGN * OVL_ALIGN; }

/* Window and staging sizes and the staging offsets, from the plan's shape. */
static void layout(ovl_plan_t *p) {
  int P = p->nranks, r = p->rank;
  size_t es = tpla_dtype_size(p->dtype), ed = tpla_dtype_size(p->d_dtype);
  size_t slice = (size_t)ovl_rows(p, r) * (size_t)p->n * ed;
  bool serial = p->mode == TPLA_OVERLAP_SERIAL;
  p->window_bytes = 0;
  p->staging_bytes = 0;
  p->bt_off = SIZE_MAX;
  if (p->kind == OVL_AG) {
    p->window_bytes = (size_t)p->m * (size_t)p->k * es;
    if (p->fp8) { /* the A scale of every rank's rows, after the gathered A */
      p->scales_off = align_up(p->window_bytes);
      p->window_bytes = p->scales_off + (size_t)P * TPLA_FP8_SCALE_STRIDE * sizeof(float);
    }
  } else if (serial) {
    /* the full partial product, and (RS) the reduced slice before the fold */
    p->staging_bytes = align_up((size_t)p->m * (size_t)p->n * ed);
    if (p->kind == OVL_RS)
      p->staging_bytes += slice;
  } else {
    /* RS: a receive slot per peer; AR: the published slice + a slot per peer */
    p->window_bytes = (size_t)(p->kind == OVL_AR ? P : P - 1) * slice;
    for (int q = 0; q < P; q++) { /* a send slot per peer */
      p->stage_off[q] = p->staging_bytes;
      if (q != r)
        p->staging_bytes += align_up((size_t)ovl_rows(p, q) * (size_t)p->n * ed);
    }
  }
  if (p->fp8 && p->op_b == TPLA_OP_N) { /* Hopper FP8 GEMMs take B as n x k: a B^T per call */
    p->bt_off = align_up(p->staging_bytes);
    p->staging_bytes = p->bt_off + align_up((size_t)p->n * (size_t)p->k);
  }
}

void ovl_plan_free(ovl_plan_t *p) {
  if (p == NULL)
    return;
  if (p->group != NULL) {
    ovl_group_leave(p);
  } else {
    if (p->ops != NULL)
      p->ops->destroy(p->xp);
    if (p->staging != NULL)
      p->ctx->backend->mem_free(p->ctx, p->staging);
  }
  free(p->offs);
  free(p->stage_off);
  free(p->counts);
  free(p);
}

/* Plan-time rehearsal (transports with rehearse_begin: CUDA; the host's, so
 * that CI runs this code): calls of the
 * real schedule with no peer traffic, on zeroed scratch operands shaped
 * like dense caller views, with beta = 0, beta = 1 and a general alpha and
 * beta (FP8: each with split and with fast accumulation), so every kernel a
 * later call launches (the fold kernels, the cuBLASLt kernel of each GEMM
 * configuration) is loaded, and every cuBLASLt plan built, before any call
 * can wait on a peer (an FP8 call with the accumulation the rehearsal had
 * not run hung on 2 H200s: runs 9, 11, 12).
 * Why: CUDA lazy loading (docs/OVERLAP.md "Lazy loading"). The operands
 * are disjoint zeroed regions of one scratch buffer.
 * Caller operands with other leading dimensions or alignments may select
 * other cuBLASLt kernels, which are not covered (nor are cuBLASLt's own
 * library loads by CUDA_MODULE_LOADING=EAGER: run 38 hung with it set).
 * SERIAL plans run NCCL collectives, so only the fold kernels load. */
static tpla_status_t rehearse(ovl_plan_t *p, const char *fn) {
  const struct tpla_xport_ops *x = p->ops;
  if (x->rehearse_begin == NULL)
    return TPLA_SUCCESS;
  const int64_t own = ovl_rows(p, p->rank);
  const int64_t a_rows = p->kind == OVL_AG ? own : p->m;
  const int64_t d_rows = p->kind == OVL_RS ? own : p->m;
  const size_t ei = tpla_dtype_size(p->dtype), ed = tpla_dtype_size(p->d_dtype);
  size_t a_bytes = (size_t)a_rows * (size_t)p->k * ei, b_bytes = (size_t)p->k * (size_t)p->n * ei;
  size_t d_bytes = (size_t)d_rows * (size_t)p->n * ed, bias_bytes = (size_t)p->n * ed;
  /* separate regions: cuBLASLt's output must not alias its inputs */
  const size_t off_b = align_up(a_bytes), off_d = off_b + align_up(b_bytes);
  const size_t off_bias = off_d + align_up(d_bytes), bytes = off_bias + align_up(bias_bytes);
  bool run = p->mode == TPLA_OVERLAP_OVERLAP;
  void *scratch = NULL;
  TPLA_TRY(x->rehearse_begin(p->xp, run ? bytes : 0, &scratch));
  tpla_status_t st = TPLA_SUCCESS;
  if (run) {
    uint32_t seq = p->seq;
    char *base = scratch;
    /* FP8: E5M2 x E5M2 is no tensor-core product, so an E5M2 plan's B is E4M3 */
    tpla_dtype_t bt = p->dtype == TPLA_FLOAT8_E5M2 ? TPLA_FLOAT8_E4M3 : p->dtype;
    tpla_matrix_t b = p->op_b == TPLA_OP_T ? ovl_dense(base + off_b, 0, p->n, p->k, bt)
                                           : ovl_dense(base + off_b, 0, p->k, p->n, bt);
    ovl_call_t call = {ovl_dense(base + off_d, 0, d_rows, p->n, p->d_dtype),
                       ovl_dense(base, 0, a_rows, p->k, p->dtype),
                       b,
                       1.0f,
                       0.0f,
                       p->bias ? base + off_bias : NULL,
                       x->stream(p->xp, OVL_LANE_COMPUTE0),
                       TPLA_FP8_SCALING_INIT,
                       0 /* b_version: transpose, and keep nothing staged */};
    /* FP8: fast and split accumulation are different cuBLASLt kernels.
     * beta 0, 1 and a general alpha and beta: run 38's hang was a first
     * call with beta 0.5 loading a kernel library after a rehearsal with
     * beta 0 and 1 only (suspected: kernels specialized on beta). */
    static const float alphas[] = {1.0f, 1.0f, -1.5f}, betas[] = {0.0f, 1.0f, 0.5f};
    for (int fast = 0; fast < (p->fp8 ? 2 : 1) && st == TPLA_SUCCESS; fast++)
      for (int pass = 0; pass < 3 && st == TPLA_SUCCESS; pass++) {
        call.alpha = alphas[pass];
        call.beta = betas[pass];
        call.fp8.accum = fast ? TPLA_FP8_ACCUM_FAST : TPLA_FP8_ACCUM_SPLIT;
        st = ovl_run(p, &call, fn);
      }
    p->seq = seq; /* the rehearsal is no call: peers count from the same start */
    p->has_gathered = false;
    p->broken = false;
  }
  tpla_status_t ended = x->rehearse_end(p->xp, scratch);
  return st != TPLA_SUCCESS ? st : ended;
}

/* Hopper's FP8 GEMMs take 16-byte aligned rows and dimensions that are
 * multiples of 16: every slice's rows, k and n (every rank's, from the
 * agreed summaries, so all ranks give the same verdict). */
static tpla_status_t fp8_shapes(const ovl_plan_t *p, const ovl_summary_t *all, const char *fn) {
  for (int r = 0; r < p->nranks; r++) {
    int64_t rows = ovl_rows(p, r), k = all[r].k, n = all[r].n;
    if (rows % 16 || k % 16 || n % 16)
      return tpla_fail(TPLA_ERROR_NOT_SUPPORTED, fn, "FP8 on the CUDA executor needs row "
                       "slices, k and n that are multiples of 16 (Hopper FP8 GEMMs); rank %d "
                       "has rows %" PRId64 ", k %" PRId64 ", n %" PRId64, r, rows, k, n);
  }
  return TPLA_SUCCESS;
}

/* GEMM+RS and GEMM+AR over PEER with TPLA_OVERLAP_DIRECT=1 (checked by overlap_desc.c): each
 * partial's GEMM writes into its destination's window, where a copy engine would otherwise
 * push it from the staging. A rank's own choice: its peers see the same flags either way. */
static bool direct_partials(const ovl_plan_t *p) {
  const char *v = getenv("TPLA_OVERLAP_DIRECT");
  if (v == NULL || strcmp(v, "1") != 0 || p->nranks < 2 || p->mode != TPLA_OVERLAP_OVERLAP ||
      p->kind == OVL_AG || p->xkind != OVL_XPORT_PEER || p->ops->peer_window == NULL)
    return false;
  /* CUDA: the rehearsal's GEMMs write into the staging (no peer is touched then), so every
   * receive slot must be aligned as the staging's slots are, or a real call's GEMM could need
   * a kernel the rehearsal did not load (docs/OVERLAP.md "Lazy loading"). */
  for (int q = 0; q < p->nranks && p->ctx->executor == TPLA_EXECUTOR_CUDA; q++)
    if ((size_t)ovl_rows(p, q) * (size_t)p->n * tpla_dtype_size(p->d_dtype) % OVL_ALIGN != 0)
      return false;
  return true;
}

/* Everything after a successful agreement: shape, transport, buffers. */
static tpla_status_t build(ovl_plan_t *p, const ovl_summary_t *all, const char *fn) {
  const ovl_summary_t *s = &all[p->rank];
  p->ops = p->ctx->backend->xport;
  p->m = s->m;
  p->k = s->k;
  p->n = s->n;
  p->op_b = (tpla_op_t)s->op_b;
  p->dtype = (tpla_dtype_t)s->dtype;
  p->d_dtype = (tpla_dtype_t)s->d_dtype;
  p->bias = s->bias != 0;
  p->allow_tf32 = s->allow_tf32;
  p->fp8 = ovl_fp8_dtype(p->dtype);
  TPLA_TRY(slices(p, all, fn));
  if (p->fp8 && p->ctx->executor == TPLA_EXECUTOR_CUDA)
    TPLA_TRY(fp8_shapes(p, all, fn));
  if (p->kind == OVL_AG)
    p->m = p->offs[p->nranks];
  p->mode = s->mode == TPLA_OVERLAP_SERIAL ? TPLA_OVERLAP_SERIAL : TPLA_OVERLAP_OVERLAP;
  int64_t max_rows = 0, max_n = 0, max_k = 0;
  for (int r = 0; r < p->nranks; r++) {
    max_rows = ovl_rows(p, r) > max_rows ? ovl_rows(p, r) : max_rows;
    max_n = all[r].n > max_n ? all[r].n : max_n;
    max_k = all[r].k > max_k ? all[r].k : max_k;
  }
  if (p->mode == TPLA_OVERLAP_SERIAL)
    p->chunks = 1;
  else if (s->chunks > 0)
    p->chunks = s->chunks;
  else /* agreed values only, so every rank picks the same */
    p->chunks = ovl_auto_chunks(p->kind, p->nranks, max_rows, max_k,
                                p->kind == OVL_AG ? max_n : p->n, p->dtype);
  p->tail = s->tail > 0 ? s->tail : ovl_auto_tail(p->kind, p->nranks, max_k, p->n, p->dtype);
  double total = (double)p->m * (double)(p->kind == OVL_AG ? p->k : p->n) *
                 (double)tpla_dtype_size(p->kind == OVL_AG ? p->dtype : p->d_dtype);
  if (total * (p->kind == OVL_AR ? 2.0 : 1.0) > 0x1p60)
    return tpla_fail(TPLA_ERROR_NOT_SUPPORTED, fn, "the %s buffers (%g bytes) are too large",
                     ovl_kind_name[p->kind], total);
  /* the rehearsal's operands, at the largest rank's sizes (the same verdict everywhere) */
  double ei = (double)tpla_dtype_size(p->dtype), ed = (double)tpla_dtype_size(p->d_dtype);
  double operands = (double)(p->kind == OVL_AG ? max_rows : p->m) * (double)max_k * ei +
                    (double)max_k * (double)max_n * ei +
                    (double)(p->kind == OVL_RS ? max_rows : p->m) * (double)max_n * ed;
  if (operands > 0x1p60)
    return tpla_fail(TPLA_ERROR_NOT_SUPPORTED, fn, "the %s operands (%g bytes) are too large",
                     ovl_kind_name[p->kind], operands);
  layout(p);
  for (int r = 0; r < p->nranks; r++)
    p->counts[r] = (size_t)ovl_rows(p, r) * (size_t)(p->kind == OVL_AG ? p->k : p->n);

  ovl_xport_desc_t xd = {OVL_XPORT_LOCAL, p->window_bytes, 0, fn};
  if (p->mode == TPLA_OVERLAP_OVERLAP) {
    xd.kind = s->transport == TPLA_TRANSPORT_PEER       ? OVL_XPORT_PEER
              : s->transport == TPLA_TRANSPORT_SENDRECV ? OVL_XPORT_SENDRECV
                                                        : OVL_XPORT_AUTO;
    xd.nflags = (p->kind == OVL_AR ? 2 : 1) * (p->nranks - 1) * p->chunks;
  }
  tpla_status_t st;
  if (s->window_group > 0) { /* the group's buffers, created or enlarged collectively */
    TPLA_TRY(ovl_group_join(p, s->window_group, &xd, fn));
    p->xkind = p->ops->kind(p->xp);
    p->direct = direct_partials(p);
    st = rehearse(p, fn);
  } else {
    TPLA_TRY(p->ops->create(p->ctx, &xd, &p->xp));
    p->xkind = p->ops->kind(p->xp);
    p->direct = direct_partials(p);
    st = p->ctx->backend->mem_alloc(p->ctx, p->staging_bytes, &p->staging);
    if (st != TPLA_SUCCESS)
      p->staging = NULL;
    else
      st = rehearse(p, fn);
  }
  st = tpla_plan_agree(p->ctx, fn, st, "allocate its staging buffers and load its kernels");
  if (st == TPLA_SUCCESS && p->group != NULL)
    ovl_group_commit(p); /* a member only now: a failure above left the group as it was */
  return st;
}

/* The common create: validate (summary already filled, status in st),
 * agree, build. *out is NULL on failure. */
static tpla_status_t create(ovl_plan_t **out, tpla_ctx_t ctx, ovl_kind_t kind,
                            ovl_summary_t *mine, tpla_status_t st, const char *fn) {
  if (ctx->backend->xport == NULL)
    return tpla_fail(TPLA_ERROR_NOT_SUPPORTED, fn, "the %s executor has no overlap transport",
                     ctx->backend->name);
  ovl_plan_t *p = calloc(1, sizeof *p);
  ovl_summary_t *all = calloc((size_t)ctx->nranks, sizeof *all);
  tpla_status_t got = tpla_plan_agree_memory(ctx, fn, p && all);
  if (got != TPLA_SUCCESS) {
    free(all);
    free(p);
    return got;
  }
  if (st == TPLA_SUCCESS) {
    p->offs = calloc((size_t)ctx->nranks + 1, sizeof *p->offs);
    p->stage_off = calloc((size_t)ctx->nranks, sizeof *p->stage_off);
    p->counts = calloc((size_t)ctx->nranks, sizeof *p->counts);
  }
  if (st == TPLA_SUCCESS && (p->offs == NULL || p->stage_off == NULL || p->counts == NULL))
    st = ovl_bad(mine->message, TPLA_ERROR_OUT_OF_MEMORY, "out of host memory");
  mine->status = (int32_t)st;
  mine->kind = (int32_t)kind;
  st = tpla_plan_exchange(ctx, fn, all, mine, sizeof *mine);
  if (st == TPLA_SUCCESS && mine->status != 0)
    st = tpla_fail((tpla_status_t)mine->status, fn, "%s", mine->message);
  for (int r = 0; st == TPLA_SUCCESS && r < ctx->nranks; r++)
    if (all[r].status != 0)
      st = tpla_fail(TPLA_ERROR_REMOTE, fn, "rank %d rejected its arguments: %s", r,
                     all[r].message);
  char msg[OVL_MSG_LEN];
  for (int r = 1; st == TPLA_SUCCESS && r < ctx->nranks; r++)
    if (ovl_differs(msg, &all[0], &all[r], r))
      st = tpla_fail(TPLA_ERROR_REMOTE, fn, "%s", msg);
  if (st == TPLA_SUCCESS) {
    p->kind = kind;
    p->ctx = ctx;
    p->rank = ctx->rank;
    p->nranks = ctx->nranks;
    st = build(p, all, fn);
  }
  free(all);
  if (st != TPLA_SUCCESS) {
    ovl_plan_free(p);
    return st;
  }
  *out = p;
  return TPLA_SUCCESS;
}

/* ---- public: create, destroy, queries ------------------------------------------- */

#define CREATE(kind_, summarize, plan_t)                                                  \
  do {                                                                                    \
    tpla_clear_error();                                                                   \
    if (plan != NULL)                                                                     \
      *plan = NULL;                                                                       \
    if (ctx == NULL)                                                                      \
      return tpla_fail(TPLA_ERROR_INVALID_ARGUMENT, fn, "argument 'ctx' is NULL");        \
    ovl_summary_t mine;                                                                   \
    memset(&mine, 0, sizeof mine);                                                        \
    /* a NULL plan pointer still takes part, as a failure, so nobody waits */             \
    tpla_status_t st = plan == NULL ? ovl_bad(mine.message, TPLA_ERROR_INVALID_ARGUMENT,   \
                                              "argument 'plan' is NULL")                  \
                                    : summarize(&mine, desc);                             \
    ovl_plan_t *p = NULL;                                                                 \
    TPLA_TRY(tpla_call_begin(ctx, fn, false, NULL));                                      \
    st = create(&p, ctx, kind_, &mine, st, fn);                                           \
    tpla_call_end(ctx, false, NULL);                                                      \
    TPLA_TRY(st);                                                                         \
    *plan = (plan_t)p; /* the public struct wraps ovl_plan_t as its first member */       \
    return TPLA_SUCCESS;                                                                  \
  } while (0)

tpla_status_t tpla_ag_gemm_plan_create(tpla_ag_gemm_plan_t *plan, tpla_ctx_t ctx,
                                       const tpla_ag_gemm_desc_t *desc) {
  static const char fn[] = "tpla_ag_gemm_plan_create";
  CREATE(OVL_AG, ovl_summarize_ag, tpla_ag_gemm_plan_t);
}

tpla_status_t tpla_gemm_rs_plan_create(tpla_gemm_rs_plan_t *plan, tpla_ctx_t ctx,
                                       const tpla_gemm_rs_desc_t *desc) {
  static const char fn[] = "tpla_gemm_rs_plan_create";
  CREATE(OVL_RS, ovl_summarize_rs, tpla_gemm_rs_plan_t);
}

tpla_status_t tpla_gemm_ar_plan_create(tpla_gemm_ar_plan_t *plan, tpla_ctx_t ctx,
                                       const tpla_gemm_ar_desc_t *desc) {
  static const char fn[] = "tpla_gemm_ar_plan_create";
  CREATE(OVL_AR, ovl_summarize_ar, tpla_gemm_ar_plan_t);
}

size_t ovl_plan_bytes(const ovl_plan_t *p) {
  if (p->group != NULL)
    return ovl_group_bytes(p);
  return p->staging_bytes + (p->xp != NULL ? p->ops->bytes(p->xp) : 0);
}

void ovl_plan_info(const ovl_plan_t *p, tpla_overlap_info_t *info) {
  info->mode = p->mode;
  info->transport = p->xkind == OVL_XPORT_PEER       ? TPLA_TRANSPORT_PEER
                    : p->xkind == OVL_XPORT_SENDRECV ? TPLA_TRANSPORT_SENDRECV
                                                     : TPLA_TRANSPORT_NONE;
  info->chunks = p->chunks;
  info->m = p->m;
  info->row_offset = p->offs[p->rank];
  info->rows = ovl_rows(p, p->rank);
  info->workspace_bytes = ovl_plan_bytes(p);
}

#define QUERIES(prefix, plan_t)                                                            \
  tpla_status_t prefix##_plan_destroy(plan_t plan) {                                       \
    tpla_clear_error();                                                                    \
    ovl_plan_free(plan == NULL ? NULL : &plan->p);                                         \
    return TPLA_SUCCESS;                                                                   \
  }                                                                                        \
  tpla_status_t prefix##_plan_workspace_bytes(plan_t plan, size_t *bytes) {                \
    static const char fn[] = #prefix "_plan_workspace_bytes";                              \
    tpla_clear_error();                                                                    \
    if (plan == NULL || bytes == NULL)                                                     \
      return tpla_fail(TPLA_ERROR_INVALID_ARGUMENT, fn, "argument '%s' is NULL",           \
                       plan == NULL ? "plan" : "bytes");                                   \
    *bytes = ovl_plan_bytes(&plan->p);                                                     \
    return TPLA_SUCCESS;                                                                   \
  }                                                                                        \
  tpla_status_t prefix##_plan_get_info(plan_t plan, tpla_overlap_info_t *info) {           \
    static const char fn[] = #prefix "_plan_get_info";                                     \
    tpla_clear_error();                                                                    \
    if (plan == NULL || info == NULL)                                                      \
      return tpla_fail(TPLA_ERROR_INVALID_ARGUMENT, fn, "argument '%s' is NULL",           \
                       plan == NULL ? "plan" : "info");                                    \
    if (info->size != sizeof *info)                                                        \
      return tpla_fail(TPLA_ERROR_INVALID_ARGUMENT, fn,                                    \
                       "argument 'info': size field is %zu, expected %zu (initialize with " \
                       "TPLA_OVERLAP_INFO_INIT)", info->size, sizeof *info);               \
    ovl_plan_info(&plan->p, info);                                                         \
    return TPLA_SUCCESS;                                                                   \
  }

QUERIES(tpla_ag_gemm, tpla_ag_gemm_plan_t)
QUERIES(tpla_gemm_rs, tpla_gemm_rs_plan_t)
QUERIES(tpla_gemm_ar, tpla_gemm_ar_plan_t)
