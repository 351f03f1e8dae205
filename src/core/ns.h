/*
 * ns.h - internals of the Newton-Schulz plans, shared by src/core/ns_*.c.
 *
 *   ns_coeffs.c  coefficient presets, the effective (a, b, c) table, hashing
 *   ns_cost.c    machine model and cost model (which algorithm, which update)
 *   ns_iter.c    the iteration engine: normalization and the per-step op
 *                schedule on one oriented matrix (local or Gram all-reduce)
 *   ns_gram_iter.c  TPLA_NS_ITERATE_GRAM: steps applied to the Gram matrix
 *                between updates of X (the engine's other mode)
 *   ns_shard.c   GRAM_SHARDED's split of the Gram polynomial: each rank
 *                computes its block rows, an all-gather completes it
 *   ns_dist.c    the distributed algorithms: layouts and runs of LOCAL,
 *                GRAM_ALLREDUCE, GRAM_SHARDED, REDISTRIBUTE and GATHER
 *   ns_plan.c    the public plan API: validation, the collective agreement,
 *                workspace, execute
 *   ns_batch.c   the batched plan (whole matrices to owners, or per matrix)
 *
 * Everything here only calls the context's backend (internal.h), so the same
 * plans run on the CUDA and the host executor.
 */
#ifndef TPLA_NS_H
#define TPLA_NS_H

#include "internal.h"

#define NS_MAX_STEPS 1000
#define NS_MAX_BATCH 65536
#define NS_ALIGN 256 /* byte alignment of every workspace buffer */

/* A matrix used through an optional transpose: op(v) = t ? v^T : v. */
typedef struct {
  tpla_matrix_t v;
  bool t;
} ns_opmat_t;

/* ---- coefficients (ns_coeffs.c) ----------------------------------------- */

/* The effective safety factor of a descriptor (its preset's default for 0). */
float ns_effective_safety(const tpla_ns_desc_t *desc);
/* Fill table[0 .. 3*steps) with the (a, b, c) triples a plan applies: the
 * preset (last triple repeated) or the user table, with the Polar Express
 * safety deflation. The descriptor must have been validated. */
void ns_fill_coefficients(const tpla_ns_desc_t *desc, float *table);
/* Whether AUTO must keep a table of a half-precision Gram off the Gram
 * iteration: a step whose |a| + |b| + |c| passes 16 (Polar Express's first,
 * 48; Muon's 10.3, its 5-step schedule's 13.9). The Gram iteration applies
 * two steps to one rounded Gram, and after such a step that can diverge
 * (docs/ALGORITHMS.md). */
bool ns_steep_for_half_gram(const float *table, int steps);
/* The largest |a x + b x^3 + c x^5| for x in [0, bound], abc = (a, b, c):
 * a bound on the singular values one step leaves from ones <= bound. */
double ns_step_sup(const float *abc, double bound);
/* The largest |b y + c y^2| for y in [0, bound]: a bound on the spectral
 * norm of b G + c G^2 for symmetric G with eigenvalues in [0, bound]. */
double ns_quad_sup(double b, double c, double bound);
/* The power of two that scales a matrix of spectral norm <= bound (so
 * entries <= bound) to entries <= 2^12 in fp16, at most 2^40; 0 for a bound
 * past 2^8 (or not a number), which the products then leave to TF32: the
 * bounds grow loose once they leave a table's stable range (Muon with
 * safety 0.6: 1.67, 9.8, 1.8e5 while the spectrum stays near 1), and a
 * loose bound would scale real entries down into fp16's subnormals. Up to
 * 2^8 they keep a scale of at least 2^4 (review 105). */
float ns_half_scale(double bound);
/* FNV-1a over bytes, chained through h (start with NS_HASH_INIT). */
#define NS_HASH_INIT 1469598103934665603ull
uint64_t ns_hash_bytes(uint64_t h, const void *p, size_t n);
const char *ns_algorithm_name(tpla_ns_algorithm_t a);
const char *ns_iteration_name(tpla_ns_iteration_t it);

/* ---- cost model (ns_cost.c) ---------------------------------------------- */

typedef struct {
  double flops;         /* sustained GEMM FLOP/s (half types)               */
  double fp32_factor;   /* fp32 GEMMs (fp32 input) run this many times slower */
  double tf32_factor;   /* the fp32 Gram square of a half input (TF32)      */
  double allreduce_bw;  /* all-reduce bus bandwidth, bytes/s                 */
  double alltoall_bw;   /* per-rank all-to-all / all-gather bandwidth, B/s   */
  double latency;       /* seconds per collective call                      */
  int64_t sym_min_block; /* symmetric products: smallest block-row height   */
  double pull_latency;  /* seconds a pulled transfer adds past its bytes (flags) */
  double mirror_bw;     /* bytes/s of a mirror pass (s^2 elements read or written) */
} ns_machine_t;

const ns_machine_t *ns_machine(const tpla_ctx_t ctx);

typedef enum { NS_UPDATE_SQUARE = 0, NS_UPDATE_CHAIN = 1 } ns_update_t;

/* Number of block rows for a symmetric s x s product (1..TPLA_NS_SYM_MAX_BLOCKS, 8). */
int ns_sym_blocks(const ns_machine_t *mach, int64_t s);
/* FLOPs of one step on an s x l matrix (Gram over s), per update variant. */
double ns_step_flops(int64_t s, int64_t l, int nblocks, ns_update_t update);
/* Seconds of one step on an s x l matrix with the cheaper update; `whole`:
 * the matrix is iterated whole on one rank (its products are, see
 * ns_products). */
double ns_step_time(const ns_machine_t *mach, int64_t s, int64_t l, tpla_dtype_t dtype,
                    tpla_dtype_t gram_dtype, bool whole, ns_update_t *update);
/* The Gram iteration (ns_gram_iter.c): steps are done in segments of at most
 * NS_GRAM_SEGMENT; each forms the Gram of X once and updates X once. */
#define NS_GRAM_SEGMENT 2

/* How the s x s products of the Gram dtype run (the X iteration's square,
 * the Gram iteration's five):
 * - PLAIN: in the Gram dtype (a half Gram, an fp32 input, or s <=
 *   NS_TF32_MIN_SIDE, where they cost microseconds either way);
 * - TF32: fp32 operands on TF32 tensor cores (the iterations of a Gram
 *   summed over ranks: GRAM_ALLREDUCE's and REDISTRIBUTE's products on
 *   every rank, GRAM_SHARDED's split ones; and a HALF product whose operand
 *   has no scale);
 * - HALF: fp16 copies of the operands, each scaled by a power of two that
 *   its spectral-norm bound maps to 2^12 (ns_half_scale), fp32 results
 *   (matrices one rank iterates whole: LOCAL, GATHER, a batch's owned
 *   ones).
 * TF32 and fp16 both keep 11 significant bits: 8x finer than bf16's, only as
 * fine as an fp16 input's, which loses 4-10x in accuracy through them
 * (bench/ns_tf32_half_study.py); fp16 runs at twice TF32's rate, and the
 * scale leaves entries 16x below its largest finite value. HALF is a
 * build-time constant to measure with (-DTPLA_NS_HALF_PRODUCTS=0: TF32). */
#define NS_TF32_MIN_SIDE 256
#ifndef TPLA_NS_HALF_PRODUCTS
#define TPLA_NS_HALF_PRODUCTS 1
#endif
typedef enum { NS_PRODUCTS_PLAIN = 0, NS_PRODUCTS_TF32 = 1, NS_PRODUCTS_HALF = 2 } ns_products_t;
static inline ns_products_t ns_products(tpla_dtype_t dtype, tpla_dtype_t gram_dtype, int64_t s,
                                        bool whole) {
  if (gram_dtype != TPLA_FLOAT32 || dtype == TPLA_FLOAT32 || s <= NS_TF32_MIN_SIDE)
    return NS_PRODUCTS_PLAIN;
  return whole && TPLA_NS_HALF_PRODUCTS ? NS_PRODUCTS_HALF : NS_PRODUCTS_TF32;
}
static inline int ns_gram_segments(int steps) {
  return (steps + NS_GRAM_SEGMENT - 1) / NS_GRAM_SEGMENT;
}
/* Seconds of `steps` steps of the Gram iteration on an s x l matrix. */
double ns_gram_iter_time(const ns_machine_t *mach, int64_t s, int64_t l, int steps,
                         tpla_dtype_t dtype, tpla_dtype_t gram_dtype, bool whole);

/* Global facts every rank knows after the agreement, for the cost model. */
typedef struct {
  int nranks;
  int64_t M, N;          /* canonical Y (rows sharded): M x N              */
  const int64_t *rows;   /* rows of Y per rank (nranks)                    */
  tpla_dtype_t dtype, gram_dtype;
  int steps;
  bool gram_iter;        /* TPLA_NS_ITERATE_GRAM (ns_gram_iter.c)           */
  bool pulled;           /* two ranks whose sums and products travel by pulls (ns_pull.c) */
  bool ring;             /* columns sharded: GATHER passes the blocks around a ring of
                            P - 1 sendrecv hops (ns_dist.c), not one all-gather */
  bool half_gram_steep;  /* AUTO keeps the X iteration (ns_steep_for_half_gram) */
} ns_shape_t;

/* Estimated seconds of one execute with algorithm `a` (never AUTO); LOCAL:
 * the whole M x N matrix on one rank. */
double ns_cost(const ns_machine_t *mach, const ns_shape_t *sh, tpla_ns_algorithm_t a);
/* The cheapest distributed algorithm (nranks >= 2). */
tpla_ns_algorithm_t ns_choose(const ns_machine_t *mach, const ns_shape_t *sh, double *cost);
/* The algorithm and iteration of a plan: `algo` and `iter` where given,
 * else the cheapest per the model (X on ties; X for sh->half_gram_steep).
 * Ignores sh->gram_iter; `algo` LOCAL (the only one for one rank) costs the
 * whole matrix. */
tpla_ns_algorithm_t ns_resolve(const ns_machine_t *mach, const ns_shape_t *sh,
                               tpla_ns_algorithm_t algo, tpla_ns_iteration_t iter,
                               bool *gram_iter, double *cost);

/* ---- workspace layout ---------------------------------------------------- */

/* Buffers are laid out at plan time as byte offsets from a base; binding a
 * base turns them into pointers (batched plans share one base). */
typedef struct {
  size_t bytes;
} ns_layout_t;
size_t ns_layout_take(ns_layout_t *l, size_t bytes);
static inline void *ns_at(void *base, size_t off) { return (char *)base + off; }

/* ---- the iteration engine (ns_iter.c) ----------------------------------- */

/* One step is this list of ops, run in order. The list is built at plan
 * time (ns_iter_setup) so that an executor can reorder or split it, e.g.
 * into Gram block rows each all-reduced while the next one is computed. */
typedef enum {
  NS_OP_GRAM,           /* g1 = X X^T: upper block rows, one GEMM each,     */
                        /* each all-reduced (gram dtype) when distributed */
  NS_OP_MIRROR_GRAM,    /* complete g1's lower triangle                    */
  NS_OP_SQUARE,         /* g2 = c g1 g1 + b g1 (symmetric, blocked, the    */
                        /* polynomial in the GEMMs' beta) + mirror;        */
                        /* c = 0: g2 = b g1                                */
  NS_OP_CAST_POLY,      /* g3 = g2 in the input dtype                      */
  NS_OP_CAST_GRAM,      /* g3 = g1 in the input dtype                      */
  NS_OP_UPDATE_SQUARE,  /* X' = a X + P X into the other buffer when the   */
                        /* temp holds X (ping-pong), else per chunk:       */
                        /* T = X_c; X_c = a X_c + P T                      */
  NS_OP_UPDATE_CHAIN,   /* per chunk: W = c G X_c + b X_c; X_c = a X_c + G W */
  NS_OP_SHARD_POLY      /* g3 = b g1 + c g1 g1, this rank's block rows only,  */
                        /* all-gathered (GRAM_SHARDED, ns_shard.c)          */
} ns_op_t;
#define NS_MAX_OPS 8

/* GRAM_SHARDED: the s x s polynomial P = b A + c A^2 is cut into nbk =
 * 2 nranks k block rows (row i: [i s / nbk, (i+1) s / nbk)). Only the upper
 * part of a block row (from its diagonal to column s) is computed. Pair j
 * is rows j and nbk-1-j, together nbk+1 blocks of the triangle whatever j,
 * and rank q owns pairs q, q + nranks, ...: the triangle splits evenly.
 * Each rank sends its rows packed (h x (s - o) each), in two all-gather
 * rounds: first its upper-half rows (i < nbk/2, the wide ones), then the
 * others. The packed buffer holds round 0 (rank 0's rows, rank 1's, ...)
 * then round 1. */
typedef struct {
  int rank, nranks, nbk; /* nranks = 0: not sharded */
  tpla_dtype_t dtype;    /* of the packed triangle: the input's (X iteration), else the Gram's */
  int64_t *row_at;       /* packed offset (elements) of block row i (nbk) */
  size_t *counts;        /* [2][nranks] elements each rank sends per round */
  size_t round_at[2];    /* packed offset of each round */
  size_t total;          /* elements of the packed triangle */
  size_t own;            /* elements of this rank's rows (cast scratch) */
} ns_split_t;

/* Block rows of the sharded polynomial (a multiple of 2 nranks). */
int ns_shard_blocks(const ns_machine_t *mach, int64_t s, int nranks);
static inline int64_t ns_shard_row(int i, int nbk, int64_t s) { return (int64_t)i * s / nbk; }
static inline int ns_shard_owner(int i, int nbk, int nranks) {
  int pair = i < nbk - 1 - i ? i : nbk - 1 - i;
  return pair % nranks;
}
static inline int ns_shard_round(int i, int nbk) { return i < nbk / 2 ? 0 : 1; }

/* The distributed Gram's sum over two ranks by copy-engine pulls (ns_pull.c). */
typedef struct ns_pull ns_pull_t;

typedef struct {
  int64_t s, l; /* X (the oriented matrix iterated on) is s x l; Gram s x s */
  tpla_dtype_t dtype, gram_dtype;
  int nblocks;
  ns_update_t update;
  bool allreduce;
  int64_t chunk; /* columns of X per update chunk (0 when l == 0) */
  ns_op_t ops[NS_MAX_OPS];
  int nops;
  bool gram_iter;                /* TPLA_NS_ITERATE_GRAM: ns_gram_iterate runs it */
  ns_products_t products;        /* how the s x s products run (ns_products) */
  size_t off_g1, off_g2, off_g3; /* layout offsets of the Gram buffers */
  size_t off_g4, off_g5;         /* the Gram iteration's other s x s scratch */
  void *g1, *g2, *g3;            /* bound: gram, square/poly, input-dtype copy */
  void *g4, *g5;
  void *temp;                    /* bound: >= s * chunk elements of dtype */
  ns_split_t split;              /* GRAM_SHARDED: g2 = own rows' scratch (gram
                                    dtype, cast only), g3 = the whole P */
  size_t off_pk, off_arp;
  void *pk;                      /* bound: the packed triangle (dtype) */
  void *arp;                     /* bound: the packed Gram block rows of the
                                    all-reduce (gram dtype; aliases g2, or
                                    g3 and pk for GRAM_SHARDED) */
  ns_pull_t *pull;               /* non-NULL: the Gram is summed by pulls, not arp,
                                    and GRAM_SHARDED's products are pulled */
  bool poly_in_window;           /* GRAM_SHARDED's X iteration, pulled: P is
                                    computed in the pulls' window, no g3 */
  bool grams_mapped;             /* GRAM_SHARDED's Gram iteration, pulled: g1,
                                    g2, g4, g5 live in the pulls' transport
                                    memory (ns_pull_mapped), not the workspace */
} ns_iter_t;

/* How the ranks' partial Grams are summed: not at all (one rank's whole
 * matrix), by the executor's all-reduce (staged in arp; GRAM_SHARDED's
 * triangle packed in pk for its all-gathers), or by pulls (ns_pull.c, in the
 * transport's window: neither arp nor pk is laid out). */
typedef enum { NS_SUM_NONE = 0, NS_SUM_ALLREDUCE = 1, NS_SUM_PULLED = 2 } ns_sum_t;

/* The fields every iteration sets: shape, dtypes, symmetric blocks and the
 * chunking for a temp buffer of temp_cap elements (ns_iter.c). */
void ns_iter_base(ns_iter_t *it, const ns_machine_t *mach, int64_t s, int64_t l,
                  tpla_dtype_t dtype, tpla_dtype_t gram_dtype, ns_sum_t sum,
                  int64_t temp_cap);
/* Configure an iteration on an s x l matrix (update variant, blocks,
 * chunking for a temp buffer of temp_cap elements, op schedule; or the Gram
 * iteration) and reserve its Gram buffers in *layout. */
void ns_iter_setup(ns_iter_t *it, const ns_machine_t *mach, int64_t s, int64_t l,
                   tpla_dtype_t dtype, tpla_dtype_t gram_dtype, ns_sum_t sum, bool gram_iter,
                   int64_t temp_cap, ns_layout_t *layout);
/* The same for GRAM_SHARDED: rank `rank` of `nranks` computes its block
 * rows of the polynomial (X iteration) or of every s x s product (the Gram
 * iteration); the update is SQUARE. Allocates the host tables of it->split
 * (OUT_OF_MEMORY, naming `fn`); ns_iter_free releases them. */
tpla_status_t ns_iter_setup_sharded(ns_iter_t *it, const ns_machine_t *mach, int64_t s,
                                    int64_t l, tpla_dtype_t dtype, tpla_dtype_t gram_dtype,
                                    ns_sum_t sum, bool gram_iter, int rank, int nranks,
                                    int64_t temp_cap, ns_layout_t *layout, const char *fn);
void ns_iter_free(ns_iter_t *it);
/* Bytes of the packed upper block rows the distributed Gram all-reduces. */
size_t ns_iter_allreduce_bytes(int64_t s, int nb, tpla_dtype_t gram_dtype);
/* Point the Gram buffers at base + offsets and the temp at `temp`. */
void ns_iter_bind(ns_iter_t *it, void *base, void *temp);
/* Where the iterated matrix is: the caller's x, or the update temp laid out
 * as x (ns_iter_temp). */
typedef enum { NS_IN_X = 0, NS_IN_TEMP = 1 } ns_where_t;
/* Where `steps` steps that start at `start` end without a copy: the other
 * place when the SQUARE update ping-pongs (the temp holds all of X) an odd
 * number of steps, else start. Symmetric: it is also where the steps must
 * start to end at `start`. NS_IN_TEMP is only ever returned for a ping-pong
 * iteration, the only kind that accepts it. */
ns_where_t ns_iter_end(const ns_iter_t *it, int steps, ns_where_t start);
/* The temp as a dense matrix stored as x is (x.v's rows and cols, x.t);
 * holds all of x only when the iteration ping-pongs. */
ns_opmat_t ns_iter_temp(const ns_iter_t *it, ns_opmat_t x);
/* Run `steps` steps on the matrix at `start` (op(x.v) is s x l, or the temp
 * laid out as x), coefficients table[3*steps], leaving the result at `end`.
 * One copy first when ns_iter_end(it, steps, start) != end. sigma0 bounds
 * the singular values at the start (1 / safety after ns_normalize): HALF
 * products scale their operands by it (ns_half_scale). */
tpla_status_t ns_iterate(tpla_ctx_t ctx, const ns_iter_t *it, ns_opmat_t x, ns_where_t start,
                         ns_where_t end, const float *table, int steps, double sigma0,
                         void *stream);
/* out = in / (safety * ||in||_F + eps), the norm summed over ranks when
 * `allreduce`. sumsq: one double of executor memory. */
tpla_status_t ns_normalize(tpla_ctx_t ctx, tpla_matrix_t out, tpla_matrix_t in, double *sumsq,
                           bool allreduce, float safety, float eps, void *stream);

/* Backend wrappers that skip empty views. */
/* The engine's backend calls: each applies to ctx->ns_batch (internal.h). */
tpla_status_t ns_axpby(tpla_ctx_t ctx, tpla_matrix_t y, tpla_matrix_t x, float alpha, float beta,
                       void *stream);
/* whole > 0: a's diagonal blocks of that edge were computed whole (see
 * the backend's mirror_upper) */
tpla_status_t ns_mirror(tpla_ctx_t ctx, tpla_matrix_t a, int64_t whole, void *stream);
/* a(i, i) += value */
tpla_status_t ns_add_diagonal(tpla_ctx_t ctx, tpla_matrix_t a, float value, void *stream);
/* op(d) = alpha op(a) op(b) + beta op(d); ns_gemm_tf32 may use TF32 for
 * fp32 operands when tf32 != 0 */
tpla_status_t ns_gemm(tpla_ctx_t ctx, ns_opmat_t d, ns_opmat_t a, ns_opmat_t b, float alpha,
                      float beta, void *stream);
tpla_status_t ns_gemm_tf32(tpla_ctx_t ctx, ns_opmat_t d, ns_opmat_t a, ns_opmat_t b, float alpha,
                           float beta, int tf32, void *stream);
/* op(d) = alpha op(a) op(b) + beta op(c): c of d's dtype stored as d is
 * (same flag and stored shape, INTERNAL otherwise; its own ld), either d
 * itself or memory that does not overlap d; beta = 0 does not read c. */
tpla_status_t ns_gemm_c(tpla_ctx_t ctx, ns_opmat_t d, ns_opmat_t a, ns_opmat_t b, ns_opmat_t c,
                        float alpha, float beta, int tf32, void *stream);
/* The edge of a symmetric product's nb block rows (the last may be short). */
int64_t ns_sym_edge(int64_t s, int nb);
/* dst (s x s) = alpha X Y^T + beta add (add NULL: beta scales dst) for a
 * symmetric product: upper block rows only, each with its diagonal block
 * whole, the caller mirrors; with `pack`
 * (distributed Gram, add NULL) each block row is all-reduced (ns_iter.c). */
tpla_status_t ns_sym_product(tpla_ctx_t ctx, tpla_matrix_t dst, ns_opmat_t x, ns_opmat_t y,
                             int nb, int tf32, void *pack, const tpla_matrix_t *add, float alpha,
                             float beta, void *stream);
/* An operand of a symmetric product: v (Gram dtype) and, for HALF
 * products, its fp16 copy h = scale v (scale 0: none, the product reads v). */
typedef struct {
  tpla_matrix_t v, h;
  float scale;
} ns_operand_t;
/* dst = scale src, both s x s symmetric, from src's upper block rows of nb
 * (its lower triangle is never read), mirrored whole: exactly symmetric. */
tpla_status_t ns_sym_copy(tpla_ctx_t ctx, tpla_matrix_t dst, tpla_matrix_t src, float scale, int nb,
                          void *stream);
/* The operand of v (s x s, its upper block rows of nb valid) for
 * it->products: for HALF its fp16 copy at `at` (s x s fp16 of scratch) by
 * ns_sym_copy, scaled for a spectral norm <= bound (ns_half_scale); with no
 * scratch or scale, v mirrored in place for TF32; else v itself. */
tpla_status_t ns_operand(tpla_ctx_t ctx, const ns_iter_t *it, ns_operand_t *o, tpla_matrix_t v,
                         void *at, double bound, int nb, void *stream);
/* ns_sym_product of two operands (d = alpha x y + beta add, upper block
 * rows; the caller mirrors): from their fp16 copies when both have one,
 * else from v (TF32 unless the products are PLAIN; a copied operand's v is
 * mirrored first, as HALF leaves it unmirrored). */
tpla_status_t ns_operand_product(tpla_ctx_t ctx, const ns_iter_t *it, tpla_matrix_t d,
                                 const ns_operand_t *x, const ns_operand_t *y, int nb,
                                 const tpla_matrix_t *add, float alpha, float beta,
                                 void *stream);
/* X' = P X + a X (P s x s, input dtype) for X at place[*at]: into the other
 * place when the iteration ping-pongs (*at flips), else in place by chunks. */
bool ns_update_pingpong(const ns_iter_t *it);
/* Rows [r0, r0 + h) of the ping-pong update into place[!at]: they read only
 * rows [r0, r0 + h) of P (the caller flips at after the last rows). */
tpla_status_t ns_update_rows(tpla_ctx_t ctx, const ns_iter_t *it, ns_opmat_t place[2], int at,
                             tpla_matrix_t p, float a, int64_t r0, int64_t h, void *stream);
tpla_status_t ns_update_square(tpla_ctx_t ctx, const ns_iter_t *it, ns_opmat_t place[2], int *at,
                               tpla_matrix_t p, float a, void *stream);
/* The Gram iteration's steps from X at place[at] (ns_gram_iter.c). */
tpla_status_t ns_gram_iterate(tpla_ctx_t ctx, const ns_iter_t *it, ns_opmat_t place[2], int at,
                              const float *table, int steps, double sigma0, void *stream);
/* Step op SHARD_POLY (ns_shard.c): *p = b g1 + c g1^2 in the input dtype
 * from this rank's block rows and everyone else's; p is g3, or with pulls
 * this exchange's window (it->poly_in_window), valid until the next one. */
tpla_status_t ns_shard_poly(tpla_ctx_t ctx, const ns_iter_t *it, float b, float c, int tf32,
                            tpla_matrix_t *p, void *stream);
/* d = alpha x y + beta c for commuting symmetric s x s matrices in the Gram
 * dtype, from this rank's block rows and everyone else's, mirrored (the
 * Gram iteration's products under GRAM_SHARDED; ns_shard.c). */
tpla_status_t ns_shard_product(tpla_ctx_t ctx, const ns_iter_t *it, tpla_matrix_t d,
                               tpla_matrix_t x, tpla_matrix_t y, tpla_matrix_t c, float alpha,
                               float beta, int tf32, void *stream);
/* The Gram iteration's s x s matrices (ns_gram_iter.c): G, whole when a
 * segment's products begin, and three scratch matrices. */
typedef struct {
  tpla_matrix_t g, s1, s2, s3;
} ns_gram_mats_t;
/* GRAM_SHARDED's Gram iteration on two ranks with pulls and
 * it->grams_mapped (ns_rowsplit.c): the products of a segment split by
 * halves of rows, published in NS_ROWSPLIT_CHUNKS row chunks. A build-time
 * constant (-DTPLA_NS_ROWSPLIT_CHUNKS=n), the same on every rank; one
 * measured 1% faster than two over the three Gram-iteration shapes on 2
 * H200s, 2.3% at 16384x4096 (run 77). */
#ifndef TPLA_NS_ROWSPLIT_CHUNKS
#define TPLA_NS_ROWSPLIT_CHUNKS 1
#endif
#define NS_ROWSPLIT_CHUNKS TPLA_NS_ROWSPLIT_CHUNKS
/* Whether s gives every chunk of both ranks a row. */
bool ns_rowsplit_fits(int64_t s);
/* One segment from G (t1 NULL: a one-step segment): its products and the
 * update X' = W X + alpha X of X at place[*at] (cast: the update operand in
 * the input dtype when it differs from the Gram's, else data NULL; it then
 * holds W + alpha I, as ns_gram_iter.c says why). */
tpla_status_t ns_rowsplit_segment(tpla_ctx_t ctx, const ns_iter_t *it, const ns_gram_mats_t *m,
                                  tpla_matrix_t cast, const float *t0, const float *t1,
                                  float alpha, int tf32, ns_opmat_t place[2], int *at,
                                  void *stream);
/* g (s x s) = X X^T for op(x.v) s x k, its upper block rows, summed over the
 * ranks when the iteration all-reduces (by it->pull, else by NCCL through
 * it->arp); the caller mirrors. */
tpla_status_t ns_gram(tpla_ctx_t ctx, const ns_iter_t *it, tpla_matrix_t g, ns_opmat_t x,
                      void *stream);
/* d (h x (s - i0)) = rows [i0, i0 + h) of op(x) times rows [i0, s) of op(x), transposed:
 * the upper part of one block row of X X^T. */
tpla_status_t ns_gram_row(tpla_ctx_t ctx, tpla_matrix_t d, ns_opmat_t x, int64_t i0, int64_t h,
                          void *stream);

/* ---- the Gram sum by pulls (ns_pull.c) ------------------------------------- */

/* This rank's wish: 0 for NCCL's sums (TPLA_NS_GRAM_SUM=nccl), else the
 * number of windows (TPLA_NS_PULL_WINDOWS, 2 unless 1). The plans agree on
 * the least wish of all ranks (one rank's nccl keeps NCCL's sums for all). */
int ns_pull_wish(void);
/* Collective over the context's ranks, for a plan whose ranks all want pulls
 * through `windows` windows (when it->allreduce and two ranks): a PEER
 * transport whose window holds a packed Gram, else *out = NULL (also for
 * more ranks or no peer mapping). Every rank gets the same verdict. */
tpla_status_t ns_pull_create(tpla_ctx_t ctx, const ns_iter_t *it, int windows, const char *fn,
                             ns_pull_t **out);
void ns_pull_destroy(ns_pull_t *p); /* accepts NULL */
size_t ns_pull_bytes(const ns_pull_t *p); /* executor memory held; 0 for NULL */
/* Plan creation, collective, once the pulls are set up: executes of the
 * plan on zeroed scratch with no peer traffic (the transport's rehearsal;
 * NCCL's collectives run), dense and with rows of every alignment below 16
 * bytes, so the kernels a call launches are loaded before any call. */
tpla_status_t ns_pull_rehearse(tpla_ns_plan_t plan, const char *fn);
/* The distributed Gram into g (upper block rows, nb of them), on `stream`. */
tpla_status_t ns_pull_gram(tpla_ctx_t ctx, ns_pull_t *p, tpla_matrix_t g, ns_opmat_t x, int nb,
                           void *stream);
/* One exchange (a transport call) inside an execute, as GRAM_SHARDED's
 * products use it (ns_shard.c): begin on `stream`; compute this rank's
 * pieces into the window on lane 0 (lanes: overlap.h's OVL_LANE_*); per
 * flag (0 <= flag < the larger of it->nblocks and split.nbk), publish them
 * and/or pull the peer's (recv with no rows: publish only; `from`: where the
 * piece lies in this rank's transport memory, the same place in the peer's,
 * rows from_ld elements apart, 0: dense), after the work
 * enqueued on lane `after` (-1: none; publish after the pieces' lane); a
 * lane waits for a flag's pulls with arrived; finish closes the exchange
 * (the peer has read this rank's window: the last flag, after the work on
 * after_lane; with two windows, which exchanges use in turn, no closing is
 * needed) and joins the lanes into `stream`, also after a failure `st`,
 * which marks the plan broken. A failed begin needs no finish.
 * ns_pull_window is this exchange's window (call it after begin). */
tpla_status_t ns_pull_begin(tpla_ctx_t ctx, ns_pull_t *p, void *stream);
void *ns_pull_window(const ns_pull_t *p);
void *ns_pull_lane(const ns_pull_t *p, int lane);
/* INVALID_USAGE once an exchange of the plan has failed (the ranks' calls
 * may be out of step): checked before a call writes anything. */
tpla_status_t ns_pull_check(tpla_ctx_t ctx, const ns_pull_t *p, const char *fn);
/* Whether `stream` is being captured into a CUDA graph, which the pulls
 * cannot be replayed from (their flags carry each call's number). */
bool ns_pull_cannot_capture(const ns_pull_t *p, void *stream);
tpla_status_t ns_pull_piece(ns_pull_t *p, int flag, bool publish, tpla_matrix_t recv,
                            const void *from, int64_t from_ld, int after);
/* Whether `ptr` lies in this rank's transport memory, which the peer maps
 * (the windows, and with it->grams_mapped the Gram iteration's matrices). */
bool ns_pull_maps(const ns_pull_t *p, const void *ptr);
/* The Gram iteration's s x s matrix i (0..3: g1, g2, g4, g5) in the
 * transport memory, with it->grams_mapped. */
void *ns_pull_mapped(const ns_pull_t *p, int i);
tpla_status_t ns_pull_arrived(ns_pull_t *p, int lane, int flag);
/* Close the exchange now, on after_lane (finish then closes nothing): once
 * the lane passes it, the peer has read this rank's window. */
tpla_status_t ns_pull_close(ns_pull_t *p, int after_lane);
tpla_status_t ns_pull_finish(ns_pull_t *p, int after_lane, void *stream, tpla_status_t st);
/* At the end of an execute (collective; accepts NULL): with two windows,
 * close the call's last exchange if it ended open, so that a completed call
 * still means the peer has read this rank's windows (the plan may go). */
tpla_status_t ns_pull_settle(tpla_ctx_t ctx, ns_pull_t *p, void *stream);

/* A view of rows [r0, r0+nr) and columns [c0, c0+nc) of a row-major view. */
tpla_matrix_t ns_sub(tpla_matrix_t m, int64_t r0, int64_t nr, int64_t c0, int64_t nc);
/* A contiguous (ld = cols, or 1 when cols = 0) view of rows x cols at data. */
tpla_matrix_t ns_dense(void *data, int64_t rows, int64_t cols, tpla_dtype_t dtype);

/* ---- plans (ns_plan.c, ns_dist.c) ------------------------------------------- */

struct tpla_ns_plan {
  tpla_ctx_t ctx;
  int rank, nranks;
  tpla_ns_desc_t desc; /* the caller's, with coefficients pointing at `table` */
  float *table;        /* 3 * steps effective coefficients (host memory) */
  float safety, eps;
  tpla_ns_algorithm_t algo;
  bool gram_iter;      /* the iteration algo runs: TPLA_NS_ITERATE_GRAM */
  double cost;         /* the cost model's estimate in seconds */
  bool whole_gram_iter; /* the same for the whole matrix on one rank (a   */
  double whole_cost;    /* batch's owner runs it so), and its estimate    */
  bool pulls_planned;   /* sums and products by pulls (ns_pull.c): chosen for them,
                           and no all-reduce staging laid out */
  int pull_windows;     /* the ranks' agreed ns_pull_wish when pulls_planned */

  int64_t m, n;        /* global shape */
  int64_t *offs;       /* start of each rank's part of the sharded dim (nranks+1) */
  bool trans;          /* COLS: the stored shard is Y_p^T */
  int64_t M, N;        /* canonical Y = trans ? X^T : X, rows sharded */

  /* algorithm state */
  ns_iter_t iter;
  int64_t *part;       /* REDISTRIBUTE: partition of N (nranks+1) */
  size_t *a2a;         /* REDISTRIBUTE: send counts, send displs, recv counts,
                          recv displs (4 x nranks elements) of the forward move */
  int64_t buf_elems;   /* elements of w1/w2 (REDISTRIBUTE, GATHER temps) */
  size_t off_sumsq, off_w1, off_w2, off_wg;

  ns_layout_t layout;  /* workspace bytes */
  void *ws;            /* the base everything is bound to */
  bool owns_ws;
  struct ns_share *share; /* the workspace group it shares ws with (ns_share.c), or NULL */
  bool share_joined;      /* a member; false: reserved until its creation succeeds */
  void *share_grown;      /* reserved: the larger workspace it brings the group, or NULL */
  double *sumsq;
  void *w1, *w2, *wg;
};

/* Validate, agree with the other ranks (collective), choose the algorithm
 * and lay out the workspace; allocates no executor memory. `where` prefixes
 * messages (e.g. "argument 'descs[3]'"); in_batch allows LOCAL on several
 * ranks; pulls: the choice and the layout may count on pulled sums and
 * products where every rank wants them (two ranks, an executor with a
 * transport, not in a batch, an algorithm that sums a Gram).
 * out == NULL takes part in the agreement as a failure. */
tpla_status_t ns_plan_prepare(tpla_ns_plan_t *out, tpla_ctx_t ctx, const tpla_ns_desc_t *desc,
                              const char *fn, const char *where, bool in_batch, bool pulls);
/* Bind the workspace base (the plan does not own it). */
void ns_plan_bind(tpla_ns_plan_t p, void *base);
/* Free the plan's host memory, and its workspace if owned. */
void ns_plan_free(tpla_ns_plan_t p);
/* ---- workspace groups (ns_share.c) ------------------------------------------ */

/* Bind p (prepared, not bound) to the workspace of its context's group id,
 * or to a new one of p->layout.bytes where the group has none that large;
 * the group itself does not change. Waits for the device's work in flight
 * first where the group exists and grows or p is pulled. On failure p is
 * in no group. Not collective. */
tpla_status_t ns_share_reserve(tpla_ns_plan_t p, int id, const char *fn);
/* p, reserved and created, becomes a member: its larger workspace, if it
 * brought one, replaces the group's and every member is rebound to it. */
void ns_share_commit(tpla_ns_plan_t p);
/* Take p out of its group (if any), freeing the workspace with the last
 * member; a plan only reserved frees what it brought, the group as it was. */
void ns_share_leave(tpla_ns_plan_t p);
/* The group's workspace bytes. */
size_t ns_share_bytes(const struct ns_share *g);

/* Validate x against the plan's local shape ("x" or e.g. "xs[3]"). */
tpla_status_t ns_check_x(const char *fn, const char *arg, tpla_ns_plan_t p,
                         const tpla_matrix_t *x);

/* INVALID_USAGE, before the call writes anything, when the plan exchanges
 * by pulls and `stream` is captured into a CUDA graph or an earlier call's
 * exchange failed. */
tpla_status_t ns_check_call(const char *fn, tpla_ns_plan_t p, void *stream);

/* Normalize x into out and run the plan's algorithm on out (validated). */
tpla_status_t ns_plan_run(tpla_ns_plan_t p, tpla_matrix_t out, tpla_matrix_t x, void *stream);

/* ---- a batch's whole matrices iterated together (ns_group.c) ------------ */

typedef struct ns_groups ns_groups_t;
/* Groups among the plans with whole[i] (orthogonalized whole on this rank);
 * plans must outlive the groups. */
tpla_status_t ns_groups_create(ns_groups_t **out, tpla_ctx_t ctx, tpla_ns_plan_t *plans,
                               const bool *whole, int count, const char *fn);
void ns_groups_free(ns_groups_t *gs); /* accepts NULL */
size_t ns_groups_bytes(const ns_groups_t *gs); /* the workspace the groups need */
bool ns_groups_has(const ns_groups_t *gs, int i); /* matrix i runs in a group */
void ns_groups_bind(ns_groups_t *gs, void *base); /* ns_groups_bytes at base */
/* Every group's matrices, matrix i from and back to views[i] (its whole
 * matrix, m x n). */
tpla_status_t ns_groups_run(ns_groups_t *gs, const tpla_matrix_t *views, void *stream);

/* ns_dist.c: setup of the chosen algorithm (iteration, buffers, counts)
 * and its run on a normalized shard (at `start`: x or the temp), the
 * result in x. */
tpla_status_t ns_dist_setup(tpla_ns_plan_t p);
void ns_dist_bind(tpla_ns_plan_t p);
tpla_status_t ns_dist_run(tpla_ns_plan_t p, tpla_matrix_t x, ns_where_t start, void *stream);
/* Where ns_dist_run wants the normalized shard so that the result ends in
 * x without a copy: x, or the update temp laid out as x when the plan
 * iterates on x itself and ping-pongs an odd number of steps. */
ns_where_t ns_dist_start(tpla_ns_plan_t p);

/* Elements of this rank's part of the sharded dimension. */
static inline int64_t ns_part(const int64_t *offs, int r) { return offs[r + 1] - offs[r]; }

#endif /* TPLA_NS_H */
