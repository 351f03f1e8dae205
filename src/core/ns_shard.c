/*
 * ns_shard.c - GRAM_SHARDED: the s x s products of the iteration split
 * across the ranks instead of computed on each.
 *
 * Every rank holds the whole (all-reduced) s x s Gram A, as with
 * GRAM_ALLREDUCE, but computes only its block rows of each product, and only
 * their upper part (ns.h, ns_split_t: pairs of block rows i and nbk-1-i give
 * every rank the same share of the triangle). A product of commuting
 * symmetric matrices, D = alpha X Y + beta C, per own block row (rows
 * o..o+h):
 *   S = alpha X[o:o+h, :] Y[o:, :]^T + beta C[o:o+h, o:]
 *                                   (h x (s-o), in the Gram dtype, C as the
 *                                    GEMM's C; TF32 for an fp32 Gram of a
 *                                    half input; alpha = 0: S = beta C[..])
 *   slot = S in the packed dtype    (its place in the packed triangle)
 * Round 0 (the rank's wide rows) is all-gathered on a side stream while
 * the rank computes its narrow rows; round 1 follows. The rows are then
 * unpacked into D and mirrored. At P = 2 with pulled Gram sums (ns_pull.c)
 * the rows travel by copy-engine pulls instead: each rank computes its rows
 * into its window and the peer pulls them straight into their place in D,
 * with no NCCL kernel beside the GEMMs (run 44, 16384x4096 bf16: a round's
 * all-gather took 75-600 us beside them, the products 197-709 us against
 * ~160 for a redundant product and its mirror).
 *
 * The X iteration's polynomial is computed in the window itself, unpacked:
 * the own rows at their place in P, the peer's pulled beside them, so no
 * rows are placed after the GEMMs (run 60, 8192^2 bf16: 43 us a product).
 * The Gram iteration's products likewise, in its four s x s matrices, which
 * then live in the transport memory past the windows (ns_pull_create; run
 * 60, 16384x4096: 17-19 us of placing a product), where s is too small for
 * ns_rowsplit.c's split by halves of rows, which they take otherwise. The mirror rewrites the
 * lower part of the own diagonal blocks, which the peer pulls, so it waits
 * until the peer has read them (the exchange is closed first). Whatever
 * writes such a matrix again (the update reads P in the window first) comes
 * after that closed exchange.
 *
 * The X iteration has one product per step, its polynomial P = b A + c A^2,
 * packed in the input dtype into g3 for the update X <- a X + P X (one GEMM
 * per chunk, as for the SQUARE update). The Gram iteration
 * (ns_gram_iter.c) runs all its products so, packed in the Gram dtype.
 *
 * Why not consume P block row by block row during the update: a full row of
 * P needs the transposed upper blocks of every earlier row (the mirror), so
 * only the last row would be complete early; computing full rows instead
 * costs 2 s^3 / nranks instead of about s^3 (nbk+1) / (nbk nranks) FLOPs.
 */
#include "ns.h"
#include "overlap.h" /* the lanes of the pulled products */

#include <stdlib.h>

int ns_shard_blocks(const ns_machine_t *mach, int64_t s, int nranks) {
  /* Two pairs per rank when the blocks stay >= the machine's smallest
   * symmetric block: the triangle then costs (nbk+1)/nbk of half the square. */
  int64_t k = s / (2 * (int64_t)nranks * mach->sym_min_block);
  return 2 * nranks * (k >= 2 ? 2 : 1);
}

/* Block row i: rows [o, o + h), its upper part [o, s) is w wide. */
typedef struct {
  int64_t o, h, w;
} block_row_t;

static block_row_t block_row(const ns_split_t *sh, int64_t s, int i) {
  int64_t o = ns_shard_row(i, sh->nbk, s), e = ns_shard_row(i + 1, sh->nbk, s);
  return (block_row_t){o, e - o, s - o};
}

tpla_status_t ns_iter_setup_sharded(ns_iter_t *it, const ns_machine_t *mach, int64_t s,
                                    int64_t l, tpla_dtype_t dtype, tpla_dtype_t gram_dtype,
                                    ns_sum_t sum, bool gram_iter, int rank, int nranks,
                                    int64_t temp_cap, ns_layout_t *layout, const char *fn) {
  ns_iter_base(it, mach, s, l, dtype, gram_dtype, sum, temp_cap);
  it->update = NS_UPDATE_SQUARE;
  it->gram_iter = gram_iter;
  it->ops[0] = NS_OP_GRAM; /* all-reduced block row by block row */
  it->ops[1] = NS_OP_MIRROR_GRAM;
  it->ops[2] = NS_OP_SHARD_POLY;
  it->ops[3] = NS_OP_UPDATE_SQUARE;
  it->nops = gram_iter ? 0 : 4;

  ns_split_t *sh = &it->split;
  sh->rank = rank;
  sh->nranks = nranks;
  sh->dtype = gram_iter ? gram_dtype : dtype;
  sh->nbk = ns_shard_blocks(mach, s, nranks);
  sh->row_at = malloc(sizeof(int64_t) * (size_t)sh->nbk);
  sh->counts = calloc(2 * (size_t)nranks, sizeof(size_t));
  if (sh->row_at == NULL || sh->counts == NULL) {
    ns_iter_free(it);
    return tpla_fail(TPLA_ERROR_OUT_OF_MEMORY, fn, "out of host memory");
  }
  /* Packed order: round, then owner, then row. Every rank computes the same
   * table from (s, nbk, nranks). */
  size_t at = 0;
  for (int r = 0; r < 2; r++) {
    sh->round_at[r] = at;
    for (int q = 0; q < nranks; q++)
      for (int i = 0; i < sh->nbk; i++) {
        if (ns_shard_round(i, sh->nbk) != r || ns_shard_owner(i, sh->nbk, nranks) != q)
          continue;
        block_row_t b = block_row(sh, s, i);
        size_t piece = (size_t)(b.h * b.w);
        sh->row_at[i] = (int64_t)at;
        sh->counts[r * nranks + q] += piece;
        at += piece;
        if (q == rank)
          sh->own += piece;
      }
  }
  sh->total = at;

  bool cast = gram_dtype != dtype, staged = sum == NS_SUM_ALLREDUCE; /* pulls: no pk, arp */
  size_t gsz = tpla_dtype_size(gram_dtype), esz = tpla_dtype_size(dtype);
  if (gram_iter) { /* ns_iter_setup's Gram iteration buffers, and the packed triangle */
    /* with pulls they live in the transport memory (ns_pull_create) */
    it->grams_mapped = sum == NS_SUM_PULLED;
    size_t ss = (size_t)s * (size_t)s, g = it->grams_mapped ? 0 : ss * gsz;
    it->off_g1 = ns_layout_take(layout, g);
    it->off_g2 = ns_layout_take(layout, g); /* also the all-reduce's packed rows */
    it->off_g4 = ns_layout_take(layout, g);
    it->off_g5 = ns_layout_take(layout, g);
    it->off_g3 = ns_layout_take(layout, cast ? ss * esz : 0);
    it->off_pk = ns_layout_take(layout, staged ? sh->total * gsz : 0);
    it->off_arp = it->off_g2;
    return TPLA_SUCCESS;
  }
  /* g3 (P) and pk (the packed triangle) are one region, which the packed
   * Gram of the all-reduce borrows before the polynomial is computed. With
   * pulls, P lives in their window (ns_pull.c sizes it). */
  it->poly_in_window = sum == NS_SUM_PULLED;
  size_t g3 = it->poly_in_window ? 0
                                 : ((size_t)(s * s) * esz + NS_ALIGN - 1) / NS_ALIGN * NS_ALIGN;
  size_t region = g3 + (staged ? sh->total * esz : 0);
  size_t packed = staged ? ns_iter_allreduce_bytes(s, it->nblocks, gram_dtype) : 0;
  it->off_g1 = ns_layout_take(layout, (size_t)(s * s) * gsz);
  it->off_g2 = ns_layout_take(layout, cast ? sh->own * gsz : 0);
  it->off_g3 = ns_layout_take(layout, region > packed ? region : packed);
  it->off_pk = it->off_g3 + g3;
  it->off_arp = it->off_g3;
  return TPLA_SUCCESS;
}

void ns_iter_free(ns_iter_t *it) {
  free(it->split.row_at);
  free(it->split.counts);
  it->split.row_at = NULL;
  it->split.counts = NULL;
}

/* ---- execute ------------------------------------------------------------- */

static void *elem(void *base, size_t i, tpla_dtype_t t) {
  return (char *)base + i * tpla_dtype_size(t);
}

/* D = alpha X Y + beta C for symmetric, commuting s x s operands (Gram dtype). */
typedef struct {
  tpla_matrix_t d, x, y, c;
  float alpha, beta;
} shard_product_t;

/* Where block row i's upper part goes: its slot in the packed triangle at
 * `packed`, or its place in `whole` (the product, unpacked) when packed is
 * NULL. */
static tpla_matrix_t row_slot(const ns_split_t *sh, void *packed, tpla_matrix_t whole, int i,
                              block_row_t br) {
  if (packed == NULL)
    return ns_sub(whole, br.o, br.h, br.o, br.w);
  return ns_dense(elem(packed, (size_t)sh->row_at[i], sh->dtype), br.h, br.w, sh->dtype);
}

/* This rank's block row i into its row_slot. *scratch walks the own rows'
 * gram-dtype scratch (g2) when the packed dtype differs. */
static tpla_status_t own_row(tpla_ctx_t ctx, const ns_iter_t *it, const shard_product_t *pr,
                             int i, int tf32, void *packed, size_t *scratch, void *stream) {
  const ns_split_t *sh = &it->split;
  int64_t s = it->s;
  bool cast = it->gram_dtype != sh->dtype;
  block_row_t br = block_row(sh, s, i);
  if (br.h == 0)
    return TPLA_SUCCESS;
  tpla_matrix_t slot = row_slot(sh, packed, pr->d, i, br);
  tpla_matrix_t S = cast ? ns_dense(elem(it->g2, *scratch, it->gram_dtype), br.h, br.w,
                                    it->gram_dtype)
                         : slot;
  *scratch += (size_t)(br.h * br.w);
  tpla_matrix_t Cb = ns_sub(pr->c, br.o, br.h, br.o, br.w); /* this block row's C */
  if (pr->alpha != 0.0f) /* S = alpha X Y^T + beta C, C as the GEMM's */
    TPLA_TRY(ns_gemm_c(ctx, (ns_opmat_t){S, false},
                       (ns_opmat_t){ns_sub(pr->x, br.o, br.h, 0, s), false},
                       (ns_opmat_t){ns_sub(pr->y, br.o, br.w, 0, s), true},
                       (ns_opmat_t){Cb, false}, pr->alpha, pr->beta, tf32, stream));
  else /* no product (the X iteration's cubic: P = b A) */
    TPLA_TRY(ns_axpby(ctx, S, Cb, pr->beta, 0.0f, stream));
  if (cast)
    TPLA_TRY(ns_axpby(ctx, slot, S, 1.0f, 0.0f, stream));
  return TPLA_SUCCESS;
}

/* This rank's block rows of round r, in order. */
static tpla_status_t own_rows(tpla_ctx_t ctx, const ns_iter_t *it, const shard_product_t *pr,
                              int r, int tf32, void *packed, size_t *scratch, void *stream) {
  const ns_split_t *sh = &it->split;
  for (int i = 0; i < sh->nbk; i++)
    if (ns_shard_round(i, sh->nbk) == r && ns_shard_owner(i, sh->nbk, sh->nranks) == sh->rank)
      TPLA_TRY(own_row(ctx, it, pr, i, tf32, packed, scratch, stream));
  return TPLA_SUCCESS;
}

/* All-gather round r of the packed triangle on `side` (the stream itself
 * where the executor has no side stream), after the rank's rows of it. */
static tpla_status_t gather_round(tpla_ctx_t ctx, const ns_iter_t *it, int r, void *side,
                                  void *stream) {
  const ns_split_t *sh = &it->split;
  const size_t *counts = sh->counts + (size_t)r * (size_t)sh->nranks;
  size_t total = 0, mine = sh->round_at[r];
  for (int q = 0; q < sh->nranks; q++) {
    total += counts[q];
    if (q < sh->rank)
      mine += counts[q];
  }
  if (total == 0) /* the same on every rank: nobody calls */
    return TPLA_SUCCESS;
  if (side != NULL)
    TPLA_TRY(ctx->backend->stream_wait(ctx, side, stream));
  return ctx->backend->allgatherv(ctx, elem(it->pk, sh->round_at[r], sh->dtype),
                                  elem(it->pk, mine, sh->dtype), counts, sh->dtype,
                                  side != NULL ? side : stream);
}

/* Place round r's rows (every rank's) from the packed triangle at `packed`
 * at their diagonals in d. */
static tpla_status_t unpack_round(tpla_ctx_t ctx, const ns_iter_t *it, tpla_matrix_t d, int r,
                                  const void *packed, void *stream) {
  const ns_split_t *sh = &it->split;
  int64_t s = it->s;
  for (int i = 0; i < sh->nbk; i++) {
    block_row_t br = block_row(sh, s, i);
    if (ns_shard_round(i, sh->nbk) != r || br.h == 0)
      continue;
    TPLA_TRY(ns_axpby(ctx, ns_sub(d, br.o, br.h, br.o, br.w),
                      ns_dense(elem((void *)packed, (size_t)sh->row_at[i], sh->dtype), br.h,
                               br.w, sh->dtype),
                      1.0f, 0.0f, stream));
  }
  return TPLA_SUCCESS;
}

/* By pulls (two ranks), block row by block row: this rank's computed in
 * place in d, which always lies in the pulls' memory (the X iteration's P is
 * the exchange's window, the Gram iteration's matrices are past it:
 * ns_iter_bind), each published under its own flag once its GEMM is done;
 * the peer's pulled from the same place in the peer's d once published. Each
 * rank computes its rows in index order, so the peer's become ready in that
 * order too, and only the last row's pull follows the GEMMs, not a round's
 * (run 60, 8192^2: the peer's round 1 arrived 88 us after the own round's
 * GEMMs). */
static tpla_status_t pulled_rows(tpla_ctx_t ctx, const ns_iter_t *it, const shard_product_t *pr,
                                 int tf32) {
  const ns_split_t *sh = &it->split;
  ns_pull_t *p = it->pull;
  void *lane0 = ns_pull_lane(p, OVL_LANE_COMPUTE0);
  if (!ns_pull_maps(p, pr->d.data)) /* the peer reads d itself */
    return tpla_fail(TPLA_ERROR_INTERNAL, "tpla_ns_execute",
                     "a pulled product into memory the peer does not map");
  const tpla_matrix_t none = {NULL, 0, 1, 1, sh->dtype};
  size_t scratch = 0;
  for (int i = 0; i < sh->nbk; i++) {
    block_row_t br = block_row(sh, it->s, i);
    if (br.h == 0)
      continue;
    if (ns_shard_owner(i, sh->nbk, sh->nranks) == sh->rank) {
      TPLA_TRY(own_row(ctx, it, pr, i, tf32, NULL, &scratch, lane0));
      TPLA_TRY(ns_pull_piece(p, i, true, none, NULL, 0, OVL_LANE_COMPUTE0));
      continue;
    }
    tpla_matrix_t place = ns_sub(pr->d, br.o, br.h, br.o, br.w);
    TPLA_TRY(ns_pull_piece(p, i, false, place, place.data, pr->d.ld, -1));
  }
  for (int i = 0; i < sh->nbk; i++)
    if (block_row(sh, it->s, i).h > 0 && ns_shard_owner(i, sh->nbk, sh->nranks) != sh->rank)
      TPLA_TRY(ns_pull_arrived(p, OVL_LANE_COMPUTE0, i));
  TPLA_TRY(ns_pull_close(p, OVL_LANE_COMPUTE0)); /* the peer has read the own diagonal blocks */
  return ctx->backend->mirror_upper(ctx, pr->d, 0, (tpla_batch_t){0}, lane0);
}

/* With it->poly_in_window, pr->d is replaced by the exchange's window. */
static tpla_status_t pulled_product(tpla_ctx_t ctx, const ns_iter_t *it, shard_product_t pr,
                                    int tf32, tpla_matrix_t *d, void *stream) {
  TPLA_TRY(ns_pull_begin(ctx, it->pull, stream));
  if (it->poly_in_window)
    pr.d = ns_dense(ns_pull_window(it->pull), it->s, it->s, pr.d.dtype);
  *d = pr.d;
  tpla_status_t st = TPLA_SUCCESS;
  if (pr.d.dtype != it->split.dtype) /* pulls copy bytes: D holds the packed dtype */
    st = tpla_fail(TPLA_ERROR_INTERNAL, "tpla_ns_execute",
                   "a pulled product into %s from a %s triangle", tpla_dtype_name(pr.d.dtype),
                   tpla_dtype_name(it->split.dtype));
  if (st == TPLA_SUCCESS)
    st = pulled_rows(ctx, it, &pr, tf32);
  return ns_pull_finish(it->pull, OVL_LANE_COMPUTE0, stream, st);
}

/* *d: where the product is (pr->d, or the pulls' window). */
static tpla_status_t shard_product(tpla_ctx_t ctx, const ns_iter_t *it,
                                   const shard_product_t *pr, int tf32, tpla_matrix_t *d,
                                   void *stream) {
  *d = pr->d;
  if (it->pull != NULL)
    return pulled_product(ctx, it, *pr, tf32, d, stream);
  void *side = ctx->backend->side_stream(ctx, 0);
  size_t scratch = 0;
  TPLA_TRY(own_rows(ctx, it, pr, 0, tf32, it->pk, &scratch, stream));
  TPLA_TRY(gather_round(ctx, it, 0, side, stream));
  TPLA_TRY(own_rows(ctx, it, pr, 1, tf32, it->pk, &scratch, stream)); /* behind round 0 */
  if (side != NULL) /* round 0 is in (one event: wait before round 1 is queued) */
    TPLA_TRY(ctx->backend->stream_wait(ctx, stream, side));
  TPLA_TRY(gather_round(ctx, it, 1, side, stream));
  TPLA_TRY(unpack_round(ctx, it, pr->d, 0, it->pk, stream)); /* behind round 1 */
  if (side != NULL)
    TPLA_TRY(ctx->backend->stream_wait(ctx, stream, side));
  TPLA_TRY(unpack_round(ctx, it, pr->d, 1, it->pk, stream));
  return ctx->backend->mirror_upper(ctx, pr->d, 0, (tpla_batch_t){0}, stream);
}

tpla_status_t ns_shard_poly(tpla_ctx_t ctx, const ns_iter_t *it, float b, float c, int tf32,
                            tpla_matrix_t *p, void *stream) {
  tpla_matrix_t A = ns_dense(it->g1, it->s, it->s, it->gram_dtype);
  shard_product_t pr = {ns_dense(it->g3, it->s, it->s, it->dtype), A, A, A, c, b};
  return shard_product(ctx, it, &pr, tf32, p, stream);
}

tpla_status_t ns_shard_product(tpla_ctx_t ctx, const ns_iter_t *it, tpla_matrix_t d,
                               tpla_matrix_t x, tpla_matrix_t y, tpla_matrix_t c, float alpha,
                               float beta, int tf32, void *stream) {
  shard_product_t pr = {d, x, y, c, alpha, beta};
  return shard_product(ctx, it, &pr, tf32, &d, stream);
}
