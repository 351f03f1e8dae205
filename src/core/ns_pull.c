/*
 * ns_pull.c - the distributed Gram's sum over two ranks as one-sided pulls
 * on the overlap transport (overlap.h), instead of NCCL all-reduces.
 *
 * Why: NCCL's all-reduce kernels share the SMs with the Gram's GEMMs. On 2
 * H200s (runs 37/38, 16384x4096 bf16) the first block row's all-reduce
 * (8 MiB) took 140 us beside the GEMMs, where the whole 20 MiB triangle
 * took ~96 us alone after them, and the Gram 400 us against 235 us of GEMMs;
 * all-reducing once after the GEMMs was barely better (371 us). A copy
 * engine moves the rows without an SM.
 *
 * One Gram is one transport call. Compute lane 0 computes each upper block
 * row of this rank's partial Gram packed into the window and signals it; a
 * copy engine pulls the peer's same row straight into its place in G; lane
 * 1 adds the own row to it (a fold: the two partials' sum in fp32, rounded
 * once, the same bits on both ranks). So the transfers hide behind the later
 * rows' GEMMs; only the last (smallest) row's pull and fold follow them.
 * Last, a row-less pull step: each rank signals that it has read the peer's
 * window, and its lanes wait for the peer's signal. Hence once a call
 * completed on a rank, its peer has finished reading that rank's window: the
 * next Gram may overwrite it and the plan may be destroyed (as with NCCL).
 *
 * Plan creation rehearses executes (ns_pull_rehearse) so that no call loads
 * a kernel: a first launch (a cuBLASLt kernel of a new GEMM configuration
 * included) waits for the device to idle, and in one process driving both
 * GPUs a rank holding cuBLASLt's loading lock while its copy engine waits
 * for the peer's row, whose GEMM waits for that lock, never returns
 * (docs/OVERLAP.md, "Lazy loading"). Run 41 located test_gpu_ns's hang (runs
 * 39, 40): the first case summing a bf16 Gram with 2-byte aligned rows (ld =
 * cols + 3; also the first such case with uneven rows), after a rehearsal on
 * dense rows only; so the rehearsal now runs rows of every alignment below
 * 16 bytes too (run 42: the test passed). Leading dimensions other than the
 * rehearsed ones may still select another kernel. Under compute-sanitizer
 * memcheck with lazy loading a pulled plan stalls (runs 42-45), but not with
 * CUDA_MODULE_LOADING=EAGER nor without this rehearsal (run 46: 0 errors
 * either way); the cause is not known.
 *
 * The default at P = 2 since run 42 (test_gpu_ns's 920 two-rank cases
 * passed with the pulls and this rehearsal); TPLA_NS_GRAM_SUM=nccl on any
 * rank keeps NCCL's all-reduce for every rank (the plan's summary carries
 * each rank's wish, and its cost model counts on the pulls when all want
 * them: ns_plan.c, ns_cost.c). Two ranks only (every rank
 * pulls every peer's whole partial: P - 1 times a ring all-reduce's bytes
 * per rank past P = 2), and a transport whose peers map each other's
 * windows (PEER). GRAM_SHARDED's products use the same transport
 * (ns_shard.c, through ns_pull_begin/piece/arrived/close/finish below).
 * Measured (runs 39 and 44, 2 H200s, bf16 Gram, AUTO): 8192^2 10.8-11.1 ms
 * against 11.4-11.8 with NCCL; 16384x4096 3.85-4.05 against 3.99-4.29.
 */
#include "ns.h"
#include "overlap.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

struct ns_pull {
  const struct tpla_xport_ops *x;
  tpla_xport_t *xp;
  int peer;
  uint32_t seq;
  bool broken; /* a Gram failed after it started: the ranks' calls may be out of step */
  int windows; /* 1, or 2 used in turn by odd and even exchanges */
  int nflags;  /* the last one closes exchanges */
  size_t half; /* bytes from one window to the next */
  size_t grams; /* with it->grams_mapped: where g1, g2, g4, g5 begin, s^2 apart */
  size_t gram_bytes; /* one of them */
  bool pulled; /* this exchange waited for a piece of the peer's */
  bool closed; /* this exchange was closed before its finish (ns_pull_close) */
  bool open;   /* the last exchange ended without closing (ns_pull_settle) */
};

static const char k_fn[] = "tpla_ns_execute";

int ns_pull_wish(void) {
  const char *sum = getenv("TPLA_NS_GRAM_SUM"), *windows = getenv("TPLA_NS_PULL_WINDOWS");
  if (sum != NULL && strcmp(sum, "nccl") == 0)
    return 0;
  return windows != NULL && strcmp(windows, "1") == 0 ? 1 : 2;
}

tpla_status_t ns_pull_create(tpla_ctx_t ctx, const ns_iter_t *it, int windows, const char *fn,
                             ns_pull_t **out) {
  *out = NULL;
  const struct tpla_xport_ops *x = ctx->backend->xport;
  if (ctx->nranks != 2 || !it->allreduce || x == NULL)
    return TPLA_SUCCESS;
  /* a window holds the packed partial Gram, or (GRAM_SHARDED) the X
   * iteration's whole polynomial (ns_shard.c); the Gram iteration's products
   * are computed in place in its matrices, past the windows; flags: one per
   * block row (of the Gram or of a product) or per row chunk of the row
   * split (ns_rowsplit.c), and the closing one */
  size_t gram = ns_iter_allreduce_bytes(it->s, it->nblocks, it->gram_dtype);
  size_t rows = it->grams_mapped     ? 0 /* computed in place */
                : it->poly_in_window ? (size_t)(it->s * it->s) * tpla_dtype_size(it->split.dtype)
                                     : it->split.total * tpla_dtype_size(it->split.dtype);
  size_t half = ((rows > gram ? rows : gram) + 255) / 256 * 256; /* the next one aligned */
  int nflags = it->nblocks > it->split.nbk ? it->nblocks : it->split.nbk;
  if (it->grams_mapped && nflags < 3 * NS_ROWSPLIT_CHUNKS) /* ns_rowsplit.c's three matrices */
    nflags = 3 * NS_ROWSPLIT_CHUNKS;
  nflags++; /* the closing one */
  /* past the windows, the Gram iteration's four s x s matrices: its
   * products are computed in place there and pulled from there (ns_shard.c) */
  size_t gram_bytes = it->grams_mapped ? (size_t)(it->s * it->s) * tpla_dtype_size(it->gram_dtype)
                                       : 0;
  gram_bytes = (gram_bytes + 255) / 256 * 256;
  ovl_xport_desc_t desc = {OVL_XPORT_AUTO, half * (size_t)windows + 4 * gram_bytes, nflags, fn};
  ns_pull_t *p = calloc(1, sizeof *p);
  tpla_xport_t *xp = NULL;
  tpla_status_t st = x->create(ctx, &desc, &xp); /* collective: every rank calls it */
  if (st == TPLA_SUCCESS && p == NULL)
    st = tpla_fail(TPLA_ERROR_OUT_OF_MEMORY, fn, "out of host memory");
  st = tpla_plan_agree(ctx, fn, st, "set up the Gram's peer transport");
  if (st != TPLA_SUCCESS || x->kind(xp) != OVL_XPORT_PEER) { /* the same verdict everywhere */
    x->destroy(xp);
    free(p);
    return st;
  }
  *p = (ns_pull_t){x,     xp,   1 - ctx->rank, 0,     false, windows, nflags,
                   half,  half * (size_t)windows, gram_bytes, false, false, false};
  *out = p;
  return TPLA_SUCCESS;
}

void ns_pull_destroy(ns_pull_t *p) {
  if (p == NULL)
    return;
  p->x->destroy(p->xp);
  free(p);
}

size_t ns_pull_bytes(const ns_pull_t *p) { return p != NULL ? p->x->bytes(p->xp) : 0; }

bool ns_pull_maps(const ns_pull_t *p, const void *ptr) {
  const char *base = p->x->window(p->xp), *c = ptr;
  return c >= base && c < base + p->grams + 4 * p->gram_bytes;
}

void *ns_pull_mapped(const ns_pull_t *p, int i) {
  return (char *)p->x->window(p->xp) + p->grams + (size_t)i * p->gram_bytes;
}

/* m = 0 by a GEMM with k = 0 and beta 0, which writes zeros without reading. */
static tpla_status_t zero(tpla_ctx_t ctx, tpla_matrix_t m, void *stream) {
  tpla_matrix_t a = {NULL, m.rows, 0, 1, m.dtype}, b = {NULL, 0, m.cols, m.cols, m.dtype};
  return ns_gemm(ctx, (ns_opmat_t){m, false}, (ns_opmat_t){a, false}, (ns_opmat_t){b, false},
                 1.0f, 0.0f, stream);
}

/* With no peer traffic the rehearsal's pulls never arrive, so what they
 * would fill is zeroed first (no read of uninitialised memory): G, whose
 * fold adds the own rows to what G held, and GRAM_SHARDED's products, whose
 * peer rows stay unwritten (in the windows for the X iteration's). */
static tpla_status_t zero_pulled_destinations(tpla_ctx_t ctx, const ns_iter_t *it,
                                              void *stream) {
  const int64_t s = it->s;
  const tpla_dtype_t gt = it->gram_dtype;
  TPLA_TRY(zero(ctx, ns_dense(it->g1, s, s, gt), stream));
  if (it->split.nranks == 0)
    return TPLA_SUCCESS;
  if (it->poly_in_window) {
    const ns_pull_t *p = it->pull;
    for (int w = 0; w < p->windows; w++)
      TPLA_TRY(zero(ctx, ns_dense((char *)p->x->window(p->xp) + (size_t)w * p->half, s, s,
                                  it->dtype), stream));
    return TPLA_SUCCESS;
  }
  TPLA_TRY(zero(ctx, ns_dense(it->g2, s, s, gt), stream));
  TPLA_TRY(zero(ctx, ns_dense(it->g4, s, s, gt), stream));
  return zero(ctx, ns_dense(it->g5, s, s, gt), stream);
}

tpla_status_t ns_pull_rehearse(tpla_ns_plan_t plan, const char *fn) {
  ns_pull_t *p = plan->iter.pull;
  const struct tpla_xport_ops *x = p->x;
  if (x->rehearse_begin == NULL) /* the same executor on every rank */
    return TPLA_SUCCESS;
  const tpla_ns_desc_t *d = &plan->desc;
  const size_t es = tpla_dtype_size(d->dtype);
  /* rows at every alignment a caller's view can have, from the element size
   * to 16 bytes (the offset of the view), and dense (offset 0, ld = cols):
   * cuBLASLt picks its kernels by the rows' alignment */
  const int64_t ld = (d->local_cols + 15) / 16 * 16 + 16;
  size_t bytes = (size_t)(d->local_rows * ld) * es + 16;
  void *scratch = NULL;
  tpla_status_t st = x->rehearse_begin(p->xp, bytes, &scratch);
  st = tpla_plan_agree(plan->ctx, fn, st, "start the plan-time rehearsal");
  uint32_t seq = p->seq;
  void *stream = x->stream(p->xp, OVL_LANE_COMPUTE0);
  for (size_t off = es; st == TPLA_SUCCESS && off <= 32; off *= 2) {
    bool dense = off == 32;
    tpla_matrix_t v = {d->local_rows > 0 ? (char *)scratch + (dense ? 0 : off) : NULL,
                       d->local_rows, d->local_cols,
                       dense ? (d->local_cols > 0 ? d->local_cols : 1) : ld, d->dtype};
    st = zero_pulled_destinations(plan->ctx, &plan->iter, stream);
    if (st == TPLA_SUCCESS)
      st = ns_plan_run(plan, v, v, stream);
  }
  p->seq = seq; /* no call: the peer counts from the same start */
  tpla_status_t ended = x->rehearse_end(p->xp, scratch);
  return tpla_plan_agree(plan->ctx, fn, st != TPLA_SUCCESS ? st : ended,
                         "rehearse an execute");
}

/* ---- one exchange: begin, pieces, finish -------------------------------- */

/* Both ranks make the same exchanges, so their numbers pick the same window. */
static size_t window_offset(const ns_pull_t *p) {
  return p->windows == 2 ? (size_t)(p->seq % 2) * p->half : 0;
}

void *ns_pull_window(const ns_pull_t *p) {
  return (char *)p->x->window(p->xp) + window_offset(p);
}
void *ns_pull_lane(const ns_pull_t *p, int lane) { return p->x->stream(p->xp, lane); }

bool ns_pull_cannot_capture(const ns_pull_t *p, void *stream) {
  return p->x->cannot_capture != NULL && p->x->cannot_capture(p->xp, stream);
}

tpla_status_t ns_pull_check(tpla_ctx_t ctx, const ns_pull_t *p, const char *fn) {
  if (!p->broken)
    return TPLA_SUCCESS;
  return tpla_fail(TPLA_ERROR_INVALID_USAGE, fn,
                   "the plan's exchange by pulls failed in an earlier call (rank %d, call %" PRIu32
                   "); destroy the plan on every rank and create a new one",
                   ctx->rank, p->seq);
}

tpla_status_t ns_pull_begin(tpla_ctx_t ctx, ns_pull_t *p, void *stream) {
  TPLA_TRY(ns_pull_check(ctx, p, k_fn));
  p->seq++;
  p->pulled = false;
  p->closed = false;
  tpla_status_t st = p->x->begin(p->xp, p->seq, stream, k_fn);
  p->broken = st != TPLA_SUCCESS;
  return st;
}

tpla_status_t ns_pull_piece(ns_pull_t *p, int flag, bool publish, tpla_matrix_t recv,
                            const void *from, int64_t from_ld, int after) {
  size_t from_offset = from != NULL ? (size_t)((const char *)from - (char *)p->x->window(p->xp))
                                    : 0;
  ovl_step_t step = {.to = publish ? p->peer : -1, .send = {p->x->window(p->xp), 0, 1, 1,
                                                             recv.dtype},
                     .from = recv.rows > 0 && recv.cols > 0 ? p->peer : -1, .recv = recv,
                     .from_offset = from_offset, .pull = 1, .flag = flag,
                     .after = after, .from_ld = from_ld};
  p->pulled = p->pulled || step.from >= 0;
  return p->x->step(p->xp, &step, p->seq);
}

tpla_status_t ns_pull_arrived(ns_pull_t *p, int lane, int flag) {
  return p->x->arrival(p->xp, lane, flag, p->seq);
}

/* Done reading the peer's window (a step with no rows, after every pull):
 * the peer may overwrite it once this call completed on this rank. */
tpla_status_t ns_pull_close(ns_pull_t *p, int after_lane) {
  const struct tpla_xport_ops *X = p->x;
  const int done_flag = p->nflags - 1;
  p->closed = true;
  TPLA_TRY(X->sync_lanes(p->xp, after_lane));
  tpla_matrix_t none = {X->window(p->xp), 0, 1, 1, TPLA_UINT8};
  ovl_step_t done = {.to = p->peer, .send = none, .from = p->peer, .recv = none, .pull = 1,
                     .flag = done_flag, .after = after_lane};
  TPLA_TRY(X->step(p->xp, &done, p->seq));
  return X->arrival(p->xp, after_lane, done_flag, p->seq);
}

/* With two windows an exchange needs no closing when it waited for one of
 * the peer's pieces: the peer published that piece after its previous
 * exchange had ended, its pulls from this rank's other window included, and
 * this rank writes that window again only after this exchange has ended.
 * The call's last exchange is closed by ns_pull_settle. */
tpla_status_t ns_pull_finish(ns_pull_t *p, int after_lane, void *stream,
                             tpla_status_t st) {
  p->open = st == TPLA_SUCCESS && p->windows == 2 && p->pulled && !p->closed;
  if (st == TPLA_SUCCESS && !p->open && !p->closed)
    st = ns_pull_close(p, after_lane);
  tpla_status_t ended = p->x->end(p->xp, stream); /* joins the lanes whatever happened */
  if (st == TPLA_SUCCESS)
    st = ended;
  p->broken = st != TPLA_SUCCESS;
  return st;
}

tpla_status_t ns_pull_settle(tpla_ctx_t ctx, ns_pull_t *p, void *stream) {
  if (p == NULL || !p->open)
    return TPLA_SUCCESS;
  TPLA_TRY(ns_pull_begin(ctx, p, stream)); /* an exchange of no pieces: finish closes it */
  return ns_pull_finish(p, OVL_LANE_COMPUTE0, stream, TPLA_SUCCESS);
}

/* ---- the Gram's sum ----------------------------------------------------- */

/* Each upper block row: its GEMM into the window on lane 0, published and
 * the peer's pulled into G; then lane 1 folds the own rows into G. */
static tpla_status_t gram_rows(tpla_ctx_t ctx, ns_pull_t *p, tpla_matrix_t g, ns_opmat_t x,
                               int nb) {
  const int64_t s = g.rows, t = ns_sym_edge(s, nb);
  const size_t es = tpla_dtype_size(g.dtype);
  char *win = ns_pull_window(p);
  void *lane0 = ns_pull_lane(p, OVL_LANE_COMPUTE0);
  size_t at = 0;
  int flag = 0;
  for (int64_t i0 = 0; i0 < s; i0 += t, flag++) {
    int64_t h = s - i0 < t ? s - i0 : t;
    TPLA_TRY(ns_gram_row(ctx, ns_dense(win + at * es, h, s - i0, g.dtype), x, i0, h, lane0));
    TPLA_TRY(ns_pull_piece(p, flag, true, ns_sub(g, i0, h, i0, s - i0), win + at * es, 0,
                           OVL_LANE_COMPUTE0));
    at += (size_t)(h * (s - i0));
  }
  at = 0;
  flag = 0;
  for (int64_t i0 = 0; i0 < s; i0 += t, flag++) {
    int64_t h = s - i0 < t ? s - i0 : t;
    TPLA_TRY(ns_pull_arrived(p, OVL_LANE_COMPUTE1, flag));
    ovl_fold_t fold = {ns_sub(g, i0, h, i0, s - i0), 1.0f, win + at * es, 0, 1, NULL,
                       {NULL, 0, 0, 1, g.dtype}};
    TPLA_TRY(p->x->fold(p->xp, OVL_LANE_COMPUTE1, &fold));
    at += (size_t)(h * (s - i0));
  }
  return TPLA_SUCCESS;
}

tpla_status_t ns_pull_gram(tpla_ctx_t ctx, ns_pull_t *p, tpla_matrix_t g, ns_opmat_t x, int nb,
                           void *stream) {
  TPLA_TRY(ns_pull_begin(ctx, p, stream));
  return ns_pull_finish(p, OVL_LANE_COMPUTE1, stream, gram_rows(ctx, p, g, x, nb));
}
