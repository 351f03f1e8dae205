/*
 * overlap_exec.c - the schedules of the three tensor-parallel plans, written
 * once on the transport operations of overlap.h, so the CUDA executor
 * (copy engines, streams) and the host executor (threads) run the same
 * steps in the same order. Each schedule is issued in an order that is
 * itself a valid sequential execution (sends before the waits that depend
 * on them), which is what the host runs.
 *
 * Ring order: at step i (1..P-1) rank r sends to r+i and receives from r-i;
 * every rank's slice is cut into the same number of row chunks, and step
 * (i, c) moves chunk c. Both sides of a pair compute the same pieces from
 * the agreed slices, so they skip the same empty ones.
 *
 * AllGather+GEMM (D = AG(A) op(B)): push every chunk of A_local into every
 * peer's gathered buffer (PEER: straight from A_local, then A_local is
 * copied into the own rows of the gathered buffer, the reusable view;
 * SENDRECV: the copy first, then sends from the own rows); GEMM the own
 * rows from A_local at once; then, chunk by chunk and peer by peer, wait
 * for the chunk and GEMM its rows, alternating two compute lanes so one
 * GEMM's tail overlaps the next one's start.
 *
 * GEMM+ReduceScatter: for each destination in ring order (rank+1 first),
 * chunk by chunk: GEMM the partial of its rows into its send slot (compute
 * lane 0, the high-priority stream on CUDA), send the chunk into the
 * destination's receive slot for this rank (the send follows the GEMM; the
 * next GEMM proceeds meanwhile); with p->direct one GEMM of the
 * destination's rows writes into that receive slot itself and the steps only
 * set the destination's chunk flags. Then the own rows on lane 1, which fill
 * the SMs the partials leave idle and hide the last transfer: with beta = 0,
 * chunk by chunk, each GEMM adding the partial from rank - 1 (the first one
 * computed there) as its C operand, and for P > 2 one fold per chunk of the
 * other P - 2 partials; with beta != 0, one GEMM into D_local (alpha, beta,
 * bias) and one fold of all P - 1.
 *
 * GEMM+AllReduce: the same reduction into a published slice of the window
 * (s, without beta D and bias); then every rank fetches every peer's
 * published slice (PEER with beta = 0 and no bias: chunk by chunk, a
 * copy-engine read of the peer's window straight into D as soon as the peer
 * finished that chunk, so only the last chunk's read is exposed; otherwise
 * whole slices into the send slots, then folded; SENDRECV: send/recv into
 * the send slots, then folded) while D's own rows become beta D + s + bias
 * (a copy when that is s). The published
 * slice is overwritten only after every peer announced the next call, i.e.
 * finished reading it.
 *
 * SERIAL: one NCCL collective (the executor's allgatherv, reduce_scatterv
 * or allreduce) and one GEMM, on one lane.
 */
#include "overlap.h"

tpla_matrix_t ovl_rows_of(tpla_matrix_t m, int64_t r0, int64_t nr) {
  tpla_matrix_t s = m;
  s.rows = nr;
  s.data = NULL;
  if (nr > 0 && m.cols > 0 && m.data != NULL)
    s.data = (char *)m.data + (size_t)(r0 * m.ld) * tpla_dtype_size(m.dtype);
  return s;
}

tpla_matrix_t ovl_dense(void *base, size_t offset, int64_t rows, int64_t cols,
                        tpla_dtype_t dtype) {
  tpla_matrix_t m = {NULL, rows, cols, cols > 0 ? cols : 1, dtype};
  if (rows > 0 && cols > 0 && base != NULL)
    m.data = (char *)base + offset;
  return m;
}

/* d = alpha a op(B) + beta (c ? c : d) (+ bias) on a lane; skips empty
 * products. FP8: `a` is dequantized by a_scale (the scale of the rank whose
 * rows `a` holds), B by the call's b_scale. */
static tpla_status_t gemm_sc(const ovl_plan_t *p, int lane, tpla_matrix_t d, tpla_matrix_t a,
                             tpla_matrix_t b, float alpha, float beta, const void *bias,
                             const tpla_matrix_t *c, const float *a_scale) {
  if (d.rows == 0 || d.cols == 0)
    return TPLA_SUCCESS;
  tpla_gemm_call_t call = {.d = d, .a = a, .b = b, .op_a = TPLA_OP_N, .op_b = p->cur_op_b,
                           .m = d.rows, .n = d.cols, .k = a.cols, .alpha = alpha, .beta = beta,
                           .allow_tf32 = p->allow_tf32, .fp8 = TPLA_FP8_SCALING_INIT};
  if (p->fp8) {
    call.fp8.a_scale = a_scale;
    call.fp8.b_scale = p->cur_fp8.b_scale;
    call.fp8.accum = p->cur_fp8.accum;
  }
  return p->ops->gemm(p->xp, lane, &call, bias, c);
}

/* With this rank's own A scale. */
static tpla_status_t gemm_c(const ovl_plan_t *p, int lane, tpla_matrix_t d, tpla_matrix_t a,
                            tpla_matrix_t b, float alpha, float beta, const void *bias,
                            const tpla_matrix_t *c) {
  return gemm_sc(p, lane, d, a, b, alpha, beta, bias, c, p->cur_fp8.a_scale);
}

static tpla_status_t gemm(const ovl_plan_t *p, int lane, tpla_matrix_t d, tpla_matrix_t a,
                          tpla_matrix_t b, float alpha, float beta, const void *bias) {
  return gemm_c(p, lane, d, a, b, alpha, beta, bias, NULL);
}

/* FP8 AllGather+GEMM: the A scale of rank q's rows, in the window. */
static float *scale_of(const ovl_plan_t *p, int q) {
  return p->fp8 ? (float *)((char *)p->ops->window(p->xp) + p->scales_off) +
                       (size_t)q * TPLA_FP8_SCALE_STRIDE
                 : NULL;
}

/* The first chunk of a slice of `rows` rows that holds any: the step that
 * carries the slice's FP8 scale. */
static int first_chunk(const ovl_plan_t *p, int64_t rows) {
  for (int ci = 0; ci < p->chunks; ci++) {
    int64_t r0, nr;
    ovl_chunk(rows, p->chunks, p->tail, ci, &r0, &nr);
    if (nr > 0)
      return ci;
  }
  return -1;
}

static tpla_status_t fold(const ovl_plan_t *p, int lane, tpla_matrix_t y, float beta,
                          const void *slots, size_t stride, int nslots, const void *bias,
                          tpla_matrix_t y2) {
  if (y.rows == 0 || y.cols == 0)
    return TPLA_SUCCESS;
  ovl_fold_t f = {y, beta, slots, stride, nslots, bias, y2};
  return p->ops->fold(p->xp, lane, &f);
}

static const tpla_matrix_t no_view = {NULL, 0, 0, 1, TPLA_FLOAT32};

/* ---- AllGather+GEMM ----------------------------------------------------------- */

static tpla_status_t ag_overlap(ovl_plan_t *p, const ovl_call_t *c) {
  const struct tpla_xport_ops *x = p->ops;
  const int P = p->nranks, r = p->rank, C = p->chunks;
  const bool peer = p->xkind == OVL_XPORT_PEER;
  const size_t row_bytes = (size_t)p->k * tpla_dtype_size(p->dtype);
  tpla_matrix_t gathered = ovl_dense(x->window(p->xp), 0, p->m, p->k, p->dtype);
  tpla_matrix_t own = ovl_rows_of(gathered, p->offs[r], ovl_rows(p, r));
  /* SENDRECV sends from the own rows of the window; PEER pushes from A_local
   * and copies the own rows after the pushes, so they do not wait for it */
  if (own.rows > 0 && !peer)
    TPLA_TRY(x->copy(p->xp, OVL_LANE_COPY, -1, own, c->a));
  /* The own rows' scale, for the gathered view and sent from there. Its
   * 4-byte device copy may run as a kernel: on the copy lane it waited for an
   * SM behind the own rows' GEMM (the highest-priority lane) and held back
   * every push, ~60 us at (16384, 8192, 1024) (runs 29-30). First on compute
   * lane 0 it runs before that GEMM; the scale's step follows it there. */
  const int scale_lane = peer ? OVL_LANE_COMPUTE0 : OVL_LANE_COPY;
  if (p->fp8)
    TPLA_TRY(x->set_scale(p->xp, scale_lane, scale_of(p, r), c->fp8.a_scale));
  const int my_first = first_chunk(p, ovl_rows(p, r));
  for (int ci = 0; ci < C; ci++)
    for (int i = 1; i < P; i++) {
      int to = (r + i) % P, from = (r - i + P) % P;
      int64_t s0, sn, f0, fnr;
      ovl_chunk(ovl_rows(p, r), C, p->tail, ci, &s0, &sn);
      ovl_chunk(ovl_rows(p, from), C, p->tail, ci, &f0, &fnr);
      if (sn == 0 && fnr == 0)
        continue;
      ovl_step_t st = {sn > 0 ? to : -1,
                       ovl_rows_of(peer ? c->a : own, s0, sn),
                       (size_t)(p->offs[r] + s0) * row_bytes,
                       fnr > 0 ? from : -1,
                       ovl_rows_of(gathered, p->offs[from] + f0, fnr),
                       0,
                       0,
                       ovl_flag(p, 0, i, ci),
                       /* after a fence its pushes follow it too: the streams of
                        * pushes two or more ranks away are none of its lanes */
                       peer && !p->fence_peers ? -1 : OVL_LANE_COPY,
                       NULL,
                       0,
                       NULL,
                       0,
                       0};
      if (p->fp8 && ci == my_first && sn > 0) { /* after set_scale */
        st.scale_send = scale_of(p, r);
        st.scale_to_offset = p->scales_off + (size_t)r * TPLA_FP8_SCALE_STRIDE * sizeof(float);
        st.after = scale_lane;
      }
      if (p->fp8 && ci == first_chunk(p, ovl_rows(p, from)))
        st.scale_recv = scale_of(p, from);
      TPLA_TRY(x->step(p->xp, &st, p->seq));
    }
  if (own.rows > 0 && peer)
    TPLA_TRY(x->copy(p->xp, OVL_LANE_COPY, -1, own, c->a));
  int lane = OVL_LANE_COMPUTE0;
  TPLA_TRY(gemm(p, lane, ovl_rows_of(c->d, p->offs[r], own.rows), c->a, c->b, c->alpha,
                c->beta, c->bias));
  for (int ci = 0; ci < C; ci++)
    for (int i = 1; i < P; i++) {
      int from = (r - i + P) % P;
      int64_t f0, fnr;
      ovl_chunk(ovl_rows(p, from), C, p->tail, ci, &f0, &fnr);
      if (fnr == 0)
        continue;
      lane ^= 1;
      TPLA_TRY(x->arrival(p->xp, lane, ovl_flag(p, 0, i, ci), p->seq));
      int64_t row0 = p->offs[from] + f0;
      TPLA_TRY(gemm_sc(p, lane, ovl_rows_of(c->d, row0, fnr), ovl_rows_of(gathered, row0, fnr),
                       c->b, c->alpha, c->beta, c->bias, NULL, scale_of(p, from)));
    }
  return TPLA_SUCCESS;
}

static tpla_status_t ag_serial(ovl_plan_t *p, const ovl_call_t *c) {
  const struct tpla_xport_ops *x = p->ops;
  const int lane = OVL_LANE_COMPUTE0;
  void *win = x->window(p->xp);
  tpla_matrix_t gathered = ovl_dense(win, 0, p->m, p->k, p->dtype);
  tpla_matrix_t own = ovl_rows_of(gathered, p->offs[p->rank], ovl_rows(p, p->rank));
  if (own.rows > 0)
    TPLA_TRY(x->copy(p->xp, lane, -1, own, c->a));
  /* in place: this rank's block already sits at its offset */
  char *send = (char *)win + (size_t)p->offs[p->rank] * (size_t)p->k * tpla_dtype_size(p->dtype);
  TPLA_TRY(p->ctx->backend->allgatherv(p->ctx, win, send, p->counts,
                                       p->fp8 ? TPLA_UINT8 : p->dtype, x->stream(p->xp, lane)));
  if (!p->fp8)
    return gemm(p, lane, c->d, gathered, c->b, c->alpha, c->beta, c->bias);
  /* FP8: every rank's scale too, then one GEMM per rank's rows with its scale */
  size_t ones[TPLA_MAX_RANKS]; /* one 16-byte slot per rank */
  for (int q = 0; q < p->nranks; q++)
    ones[q] = TPLA_FP8_SCALE_STRIDE;
  TPLA_TRY(x->set_scale(p->xp, lane, scale_of(p, p->rank), c->fp8.a_scale));
  TPLA_TRY(p->ctx->backend->allgatherv(p->ctx, scale_of(p, 0), scale_of(p, p->rank), ones,
                                       TPLA_FLOAT32, x->stream(p->xp, lane)));
  for (int q = 0; q < p->nranks; q++) {
    int64_t r0 = p->offs[q], nr = ovl_rows(p, q);
    TPLA_TRY(gemm_sc(p, lane, ovl_rows_of(c->d, r0, nr), ovl_rows_of(gathered, r0, nr), c->b,
                     c->alpha, c->beta, c->bias, NULL, scale_of(p, q)));
  }
  return TPLA_SUCCESS;
}

/* ---- GEMM+ReduceScatter and the first phase of GEMM+AllReduce ------------------- */

/* Byte offset of step i's receive slot in the window of a rank with `rows`
 * rows (AR keeps its published slice in slot 0). */
static size_t slot_offset(const ovl_plan_t *p, int i, int64_t rows) {
  size_t slice = (size_t)rows * (size_t)p->n * tpla_dtype_size(p->d_dtype);
  return (size_t)(p->kind == OVL_AR ? i : i - 1) * slice;
}

/* The partials for every peer, sent as they are computed, all on compute
 * lane 0: the CUDA transport gives it the highest stream priority, so the
 * peers' inputs are ready as early as possible while the own rows (lane 1)
 * fill the SMs the partials leave idle, their wave tails included. */
static tpla_status_t send_partials(ovl_plan_t *p, const ovl_call_t *c) {
  const struct tpla_xport_ops *x = p->ops;
  const int P = p->nranks, r = p->rank, C = p->chunks;
  const size_t row_bytes = (size_t)p->n * tpla_dtype_size(p->d_dtype);
  void *win = x->window(p->xp);
  const int lane = OVL_LANE_COMPUTE0;
  for (int i = 1; i < P; i++) {
    int to = (r + i) % P, from = (r - i + P) % P;
    tpla_matrix_t slot = ovl_dense(p->staging, p->stage_off[to], ovl_rows(p, to), p->n,
                                   p->d_dtype);
    /* direct: one GEMM of all of `to`'s rows, written into its receive slot once `to` has
     * begun this call, then every chunk's flag. With no copy to hide there is nothing to
     * chunk, and one launch costs less than C. The rehearsal, which touches no peer, writes
     * the staging and pushes from there (no-ops then), as would any transport without a
     * peer window. */
    char *remote = NULL;
    if (p->direct && ovl_rows(p, to) > 0) {
      remote = x->peer_window(p->xp, to);
      if (remote != NULL) {
        TPLA_TRY(x->wait_ready(p->xp, lane, to, p->seq));
        slot = ovl_dense(remote, slot_offset(p, i, ovl_rows(p, to)), ovl_rows(p, to), p->n,
                         p->d_dtype);
      }
      TPLA_TRY(gemm(p, lane, slot, ovl_rows_of(c->a, p->offs[to], ovl_rows(p, to)), c->b,
                    c->alpha, 0.0f, NULL));
    }
    for (int ci = 0; ci < C; ci++) {
      int64_t t0, tn, m0, mn;
      ovl_chunk(ovl_rows(p, to), C, p->tail, ci, &t0, &tn);
      ovl_chunk(ovl_rows(p, r), C, p->tail, ci, &m0, &mn);
      if (tn == 0 && mn == 0)
        continue;
      if (!p->direct)
        TPLA_TRY(gemm(p, lane, ovl_rows_of(slot, t0, tn),
                      ovl_rows_of(c->a, p->offs[to] + t0, tn), c->b, c->alpha, 0.0f, NULL));
      ovl_step_t st = {tn > 0 ? to : -1,
                       ovl_rows_of(slot, t0, tn),
                       slot_offset(p, i, ovl_rows(p, to)) + (size_t)t0 * row_bytes,
                       mn > 0 ? from : -1,
                       ovl_dense(win, slot_offset(p, i, ovl_rows(p, r)) + (size_t)m0 * row_bytes,
                                 mn, p->n, p->d_dtype),
                       0,
                       0,
                       ovl_flag(p, 0, i, ci),
                       lane,
                       NULL,
                       0,
                       NULL,
                       0,
                       remote != NULL};
      TPLA_TRY(x->step(p->xp, &st, p->seq));
    }
  }
  return TPLA_SUCCESS;
}

/* `lane` waits for the partials of steps first_i.. sent to this rank. */
static tpla_status_t wait_partials(ovl_plan_t *p, int lane, int first_i) {
  const int P = p->nranks, C = p->chunks;
  for (int i = first_i; i < P; i++)
    for (int ci = 0; ci < C; ci++) {
      int64_t m0, mn;
      ovl_chunk(ovl_rows(p, p->rank), C, p->tail, ci, &m0, &mn);
      if (mn > 0)
        TPLA_TRY(p->ops->arrival(p->xp, lane, ovl_flag(p, 0, i, ci), p->seq));
    }
  return TPLA_SUCCESS;
}

/* The receive slot of step i in this rank's window (rows x n, dense). */
static tpla_matrix_t slot(const ovl_plan_t *p, int i) {
  int64_t rows = ovl_rows(p, p->rank);
  return ovl_dense(p->ops->window(p->xp), slot_offset(p, i, rows), rows, p->n, p->d_dtype);
}

/* Phase 2 of GEMM+AllReduce for row chunk ci (-1: whole slices): this
 * rank's published chunk goes to every peer and every peer's published
 * chunk comes into `into(from)` rows [f0, f0 + fn). */
static tpla_status_t publish_steps(ovl_plan_t *p, int ci, int lane, bool direct,
                                   const ovl_call_t *c) {
  const int P = p->nranks, r = p->rank;
  const bool peer = p->xkind == OVL_XPORT_PEER;
  const size_t row_bytes = (size_t)p->n * tpla_dtype_size(p->d_dtype);
  tpla_matrix_t publish = slot(p, 0);
  for (int i = 1; i < P; i++) {
    int to = (r + i) % P, from = (r - i + P) % P;
    int64_t m0 = 0, mn = ovl_rows(p, r), f0 = 0, fn = ovl_rows(p, from);
    if (ci >= 0) {
      ovl_chunk(ovl_rows(p, r), p->chunks, p->tail, ci, &m0, &mn);
      ovl_chunk(ovl_rows(p, from), p->chunks, p->tail, ci, &f0, &fn);
    }
    if (mn == 0 && fn == 0)
      continue;
    tpla_matrix_t into = direct ? ovl_rows_of(c->d, p->offs[from] + f0, fn)
                                : ovl_dense(p->staging, p->stage_off[from] + (size_t)f0 * row_bytes,
                                            fn, p->n, p->d_dtype);
    ovl_step_t st = {mn > 0 ? to : -1,
                     ovl_rows_of(publish, m0, mn),
                     0,
                     fn > 0 ? from : -1,
                     into,
                     (size_t)f0 * row_bytes,
                     peer,
                     ovl_flag(p, 1, i, ci < 0 ? 0 : ci),
                     lane,
                     NULL,
                     0,
                     NULL,
                     0,
                     0};
    if (peer && st.to >= 0 && st.from >= 0) {
      /* PEER: the publication on its own first, a flag written on `lane` as soon as the chunk
       * is there, not on the pull's copy stream behind the previous chunk's pull (run 85: the
       * last chunk's flag 19 us after its GEMM, all of it on the call's tail) */
      ovl_step_t publication = st;
      publication.from = -1;
      TPLA_TRY(p->ops->step(p->xp, &publication, p->seq));
      st.to = -1; /* then the pull, whose completion the flag's arrival waits for */
    }
    TPLA_TRY(p->ops->step(p->xp, &st, p->seq));
  }
  return TPLA_SUCCESS;
}

/* out = alpha A_own op(B) + (partials of steps 1..P-1) + bias, chunk by
 * chunk: each chunk's GEMM adds the partial that arrived from rank - 1 (the
 * first one computed there) in its epilogue (C = the slot); for P > 2 one
 * fold per chunk adds the other P - 2. `publish` (GEMM+AllReduce over PEER):
 * each finished chunk is offered to the peers at once, and the peers'
 * chunks are pulled into D (`mirror`: this rank has no beta or bias; the
 * finished chunk is then also copied into *mirror, D's own rows, on the
 * copy lane, off the GEMMs' way) or else into the staging. */
static tpla_status_t own_rows_fused(ovl_plan_t *p, const ovl_call_t *c, int lane,
                                    tpla_matrix_t out, const void *bias, bool publish,
                                    const tpla_matrix_t *mirror) {
  const int64_t rows = ovl_rows(p, p->rank);
  const size_t stride = (size_t)rows * (size_t)p->n;
  tpla_matrix_t first = slot(p, 1), rest = slot(p, 2);
  tpla_matrix_t a = ovl_rows_of(c->a, p->offs[p->rank], rows);
  for (int ci = 0; ci < p->chunks; ci++) {
    int64_t m0, mn;
    ovl_chunk(rows, p->chunks, p->tail, ci, &m0, &mn);
    if (mn > 0) {
      TPLA_TRY(p->ops->arrival(p->xp, lane, ovl_flag(p, 0, 1, ci), p->seq));
      tpla_matrix_t cin = ovl_rows_of(first, m0, mn);
      TPLA_TRY(gemm_c(p, lane, ovl_rows_of(out, m0, mn), ovl_rows_of(a, m0, mn), c->b, c->alpha,
                      1.0f, bias, &cin));
      for (int i = 2; i < p->nranks; i++)
        TPLA_TRY(p->ops->arrival(p->xp, lane, ovl_flag(p, 0, i, ci), p->seq));
      if (p->nranks > 2)
        TPLA_TRY(fold(p, lane, ovl_rows_of(out, m0, mn), 1.0f,
                      (char *)rest.data + (size_t)m0 * (size_t)p->n *
                                              tpla_dtype_size(p->d_dtype),
                      stride, p->nranks - 2, NULL, no_view));
    }
    if (publish)
      TPLA_TRY(publish_steps(p, ci, lane, mirror != NULL, c));
    if (mirror != NULL)
      TPLA_TRY(p->ops->copy(p->xp, OVL_LANE_COPY, lane, ovl_rows_of(*mirror, m0, mn),
                            ovl_rows_of(out, m0, mn)));
  }
  return TPLA_SUCCESS;
}

static tpla_status_t rs_overlap(ovl_plan_t *p, const ovl_call_t *c) {
  const int r = p->rank, lane = OVL_LANE_COMPUTE1;
  TPLA_TRY(send_partials(p, c));
  if (p->nranks > 1 && c->beta == 0.0f) /* D's old values are not needed: fuse */
    return own_rows_fused(p, c, lane, c->d, c->bias, false, NULL);
  TPLA_TRY(gemm(p, lane, c->d, ovl_rows_of(c->a, p->offs[r], ovl_rows(p, r)), c->b, c->alpha,
                c->beta, c->bias));
  if (p->nranks == 1)
    return TPLA_SUCCESS;
  TPLA_TRY(wait_partials(p, lane, 1));
  return fold(p, lane, c->d, 1.0f, p->ops->window(p->xp), (size_t)ovl_rows(p, r) * (size_t)p->n,
              p->nranks - 1, NULL, no_view);
}

static tpla_status_t rs_serial(ovl_plan_t *p, const ovl_call_t *c) {
  const int lane = OVL_LANE_COMPUTE0;
  const size_t ed = tpla_dtype_size(p->d_dtype);
  size_t full_bytes = (size_t)p->m * (size_t)p->n * ed;
  tpla_matrix_t full = ovl_dense(p->staging, 0, p->m, p->n, p->d_dtype);
  char *reduced = (char *)p->staging + (full_bytes + OVL_ALIGN - 1) / OVL_ALIGN * OVL_ALIGN;
  TPLA_TRY(gemm(p, lane, full, c->a, c->b, c->alpha, 0.0f, NULL));
  TPLA_TRY(p->ctx->backend->reduce_scatterv(p->ctx, reduced, p->staging, p->counts, p->d_dtype,
                                            p->ops->stream(p->xp, lane)));
  return fold(p, lane, c->d, c->beta, reduced, 0, 1, c->bias, no_view);
}

/* ---- GEMM+AllReduce ------------------------------------------------------------- */

static tpla_status_t ar_overlap(ovl_plan_t *p, const ovl_call_t *c) {
  const struct tpla_xport_ops *x = p->ops;
  const int P = p->nranks, r = p->rank;
  const int64_t rows = ovl_rows(p, r);
  const bool peer = p->xkind == OVL_XPORT_PEER;
  if (P == 1)
    return gemm(p, OVL_LANE_COMPUTE0, c->d, c->a, c->b, c->alpha, c->beta, c->bias);
  tpla_matrix_t publish = slot(p, 0), own_d = ovl_rows_of(c->d, p->offs[r], rows);
  int lane = OVL_LANE_COMPUTE1;
  TPLA_TRY(send_partials(p, c));
  /* peers read the published slice of the previous call until they start this one */
  for (int q = 0; q < P && peer; q++)
    if (q != r)
      TPLA_TRY(x->wait_ready(p->xp, lane, q, p->seq));
  /* publish = s, this rank's reduced slice without beta D and bias. Over
   * PEER every rank publishes it chunk by chunk, whatever its own beta and
   * bias (they are per rank: the peers' protocol must not depend on them);
   * with beta = 0 and no bias the peers' chunks are pulled straight into D,
   * else into the staging and folded below. Other transports send whole
   * slices once their sends are done. */
  bool direct = peer && c->beta == 0.0f && c->bias == NULL;
  TPLA_TRY(own_rows_fused(p, c, lane, publish, NULL, peer, direct ? &own_d : NULL));
  if (direct)
    return TPLA_SUCCESS;
  if (!peer) {
    TPLA_TRY(x->sync_lanes(p->xp, lane));
    TPLA_TRY(publish_steps(p, -1, lane, false, c));
  }
  /* D's own rows, while the peers read the published slice */
  if (c->beta == 0.0f && c->bias == NULL)
    TPLA_TRY(x->copy(p->xp, lane, -1, own_d, publish));
  else
    TPLA_TRY(fold(p, lane, own_d, c->beta, publish.data, 0, 1, c->bias, no_view));
  for (int i = 1; i < P; i++) {
    int from = (r - i + P) % P;
    if (ovl_rows(p, from) == 0)
      continue;
    lane ^= 1;
    for (int ci = 0; ci < (peer ? p->chunks : 1); ci++) {
      int64_t f0, fn;
      ovl_chunk(ovl_rows(p, from), p->chunks, p->tail, ci, &f0, &fn);
      if (fn > 0 || !peer)
        TPLA_TRY(x->arrival(p->xp, lane, ovl_flag(p, 1, i, ci), p->seq));
    }
    TPLA_TRY(fold(p, lane, ovl_rows_of(c->d, p->offs[from], ovl_rows(p, from)), c->beta,
                  (char *)p->staging + p->stage_off[from], 0, 1, c->bias, no_view));
  }
  return TPLA_SUCCESS;
}

static tpla_status_t ar_serial(ovl_plan_t *p, const ovl_call_t *c) {
  const int lane = OVL_LANE_COMPUTE0;
  tpla_matrix_t full = ovl_dense(p->staging, 0, p->m, p->n, p->d_dtype);
  TPLA_TRY(gemm(p, lane, full, c->a, c->b, c->alpha, 0.0f, NULL));
  TPLA_TRY(p->ctx->backend->allreduce(p->ctx, p->staging, p->staging,
                                      (size_t)p->m * (size_t)p->n, p->d_dtype,
                                      p->ops->stream(p->xp, lane)));
  return fold(p, lane, c->d, c->beta, p->staging, 0, 1, c->bias, no_view);
}

/* ---- one call -------------------------------------------------------------------- */

/* FP8 with op_b N: Hopper's FP8 GEMMs take B as n x k, so the call's B is
 * transposed once into the plan's staging, ahead of every GEMM lane, unless
 * the staging already holds this B (same pointer, ld and nonzero b_version).
 * The lanes are the plan's own streams, so a later call's GEMMs are ordered
 * after the transpose an earlier call enqueued. A captured call always
 * transposes (its graph holds its own B^T), and once any call of the plan or
 * of its window group was captured, no call reuses one: every replay
 * rewrites the staging without the host knowing. */
static tpla_status_t stage_b(ovl_plan_t *p, ovl_call_t *c) {
  p->cur_op_b = p->op_b;
  bool captured = p->ops->capturing != NULL && p->ops->capturing(c->stream);
  if (captured) /* any member's graph rewrites the group's staging when it replays */
    ovl_group_mark_graph(p);
  if (p->bt_off == SIZE_MAX)
    return TPLA_SUCCESS;
  tpla_matrix_t bt = ovl_dense(p->staging, p->bt_off, p->n, p->k, c->b.dtype);
  bool held = !captured && !ovl_group_in_graph(p) && c->b_version != 0 &&
              p->bt_of.b_version == c->b_version && p->bt_of.data == c->b.data &&
              p->bt_of.ld == c->b.ld;
  if (!held) {
    p->bt_of.b_version = 0; /* until the transpose is enqueued */
    TPLA_TRY(p->ops->transpose(p->xp, OVL_LANE_COMPUTE0, bt, c->b));
    TPLA_TRY(p->ops->sync_lanes(p->xp, OVL_LANE_COMPUTE1));
    p->bt_of.data = c->b.data;
    p->bt_of.ld = c->b.ld;
    p->bt_of.b_version = ovl_group_in_graph(p) ? 0 : c->b_version;
  }
  c->b = bt;
  p->cur_op_b = TPLA_OP_T;
  return TPLA_SUCCESS;
}

/* FP8 d_amax: max |D| over this rank's output, once every lane is done. */
static tpla_status_t output_amax(ovl_plan_t *p, const ovl_call_t *c) {
  if (c->fp8.d_amax == NULL)
    return TPLA_SUCCESS;
  TPLA_TRY(p->ops->sync_lanes(p->xp, OVL_LANE_COMPUTE0));
  return p->ops->amax(p->xp, OVL_LANE_COMPUTE0, c->d, c->fp8.d_amax);
}

/* A window group's call that follows another member's: every lane waits until every peer
 * has begun this call, so none of them still reads what the other member left in this
 * rank's window (overlap_group.c); AG+GEMM's pushes follow the COPY lane then. */
static tpla_status_t fence_peers(ovl_plan_t *p) {
  for (int lane = 0; lane < OVL_LANES; lane++)
    for (int q = 0; q < p->nranks; q++)
      if (q != p->rank)
        TPLA_TRY(p->ops->wait_ready(p->xp, lane, q, p->seq));
  return TPLA_SUCCESS;
}

tpla_status_t ovl_run(ovl_plan_t *p, const ovl_call_t *call, const char *fn) {
  static tpla_status_t (*const schedules[3][2])(ovl_plan_t *, const ovl_call_t *) = {
      {ag_overlap, ag_serial}, {rs_overlap, rs_serial}, {ar_overlap, ar_serial}};
  ovl_call_t c_staged = *call, *c = &c_staged;
  p->seq++;
  p->has_gathered = false;
  p->cur_fp8 = c->fp8;
  tpla_status_t st = p->ops->begin(p->xp, p->seq, c->stream, fn);
  if (st == TPLA_SUCCESS) { /* begun: end() below runs whatever fails after this */
    if (p->fence_peers)
      st = fence_peers(p);
    if (st == TPLA_SUCCESS)
      st = stage_b(p, c);
    if (st == TPLA_SUCCESS)
      st = schedules[p->kind][p->mode == TPLA_OVERLAP_SERIAL](p, c);
    p->fence_peers = false; /* this call's alone */
    if (st == TPLA_SUCCESS)
      st = output_amax(p, c);
    /* join the lanes whatever happened, so the caller's stream stays ordered */
    tpla_status_t joined = p->ops->end(p->xp, c->stream);
    if (st == TPLA_SUCCESS)
      st = joined;
  }
  if (st != TPLA_SUCCESS) {
    p->broken = true;
    return st;
  }
  p->has_gathered = p->kind == OVL_AG;
  return TPLA_SUCCESS;
}
