/*
 * ce_mech.c - tpla_ce_bench's GPU side: one rank's resources (peer access,
 * streams, events, the gathered buffer), the two NCCL communicators (default, and
 * zero-CTA with a symmetric window from ncclMemAlloc), the bf16 cuBLASLt GEMM that
 * the transfers run against, one batch of transfers by each mechanism, the check
 * that a transfer lands where it should, and the teardown.
 */
#include "ce_bench.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

_Static_assert(GEMM_M == GEMM_N, "A and B are filled from the same host values");
#define LT_WORKSPACE_BYTES ((size_t)32 << 20)

const char *const mech_name[NMECH] = {"ce_peer_push", "nccl_ag", "nccl_ag_zero_cta",
                                      "nccl_a2a_zero_cta"};

/* Set before the rank threads start, or written by each rank into its own slot and
 * read by both after a barrier. */
static struct {
  int zero_cta, max_rows;
  ncclUniqueId id, zero_id;
  uint16_t *host_bf16; /* GEMM operand data, GEMM_M * GEMM_K (== GEMM_K * GEMM_N) values */
  char *plain[NRANKS];
  int window_ok[NRANKS], check_ok[NRANKS];
} shared;

size_t slice_bytes(int rows) { return (size_t)rows * COLS * ELEM_BYTES; }

/* Random non-zero bf16 values, +-[0.5, 1), rounded to nearest even. */
static void fill_random_bf16(uint16_t *v, size_t n) {
  uint64_t x = 0x9e3779b97f4a7c15ull;
  for (size_t i = 0; i < n; i++) {
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    float f = (0.5f + (float)(x >> 40) * 0x1p-25f) * ((x & 1) ? -1.0f : 1.0f);
    uint32_t bits;
    memcpy(&bits, &f, sizeof bits);
    v[i] = (uint16_t)((bits + 0x7fffu + ((bits >> 16) & 1u)) >> 16);
  }
}

const char *mech_prepare(int zero_cta, int max_rows) {
  shared.zero_cta = zero_cta;
  shared.max_rows = max_rows;
  if (ncclGetUniqueId(&shared.id) != ncclSuccess ||
      ncclGetUniqueId(&shared.zero_id) != ncclSuccess)
    return "ncclGetUniqueId failed";
  size_t values = (size_t)GEMM_M * GEMM_K;
  shared.host_bf16 = malloc(values * sizeof *shared.host_bf16);
  if (!shared.host_bf16)
    return "out of host memory";
  fill_random_bf16(shared.host_bf16, values);
  return NULL;
}

void mech_release(void) {
  free(shared.host_bf16);
  shared.host_bf16 = NULL;
}

/* ---- the GEMM --------------------------------------------------------------- */

int gemm_run(rank_t *rk) {
  const float alpha = 1.0f, beta = 0.0f;
  LT(cublasLtMatmul(rk->lt, rk->op, &alpha, rk->a, rk->la, rk->b, rk->lb, &beta, rk->c, rk->lc,
                    rk->c, rk->lc, &rk->algo, rk->workspace, LT_WORKSPACE_BYTES, rk->gemm));
  return 0;
}

/* bf16 in, bf16 out, fp32 accumulation, column-major NN: C (m x n) = A (m x k) B (k x n). */
static int gemm_setup(rank_t *rk) {
  size_t ab_bytes = (size_t)GEMM_M * GEMM_K * ELEM_BYTES;
  CU(cudaMalloc(&rk->a, ab_bytes));
  CU(cudaMalloc(&rk->b, ab_bytes));
  CU(cudaMalloc(&rk->c, (size_t)GEMM_M * GEMM_N * ELEM_BYTES));
  CU(cudaMalloc(&rk->workspace, LT_WORKSPACE_BYTES));
  CU(cudaMemcpy(rk->a, shared.host_bf16, ab_bytes, cudaMemcpyHostToDevice));
  CU(cudaMemcpy(rk->b, shared.host_bf16, ab_bytes, cudaMemcpyHostToDevice));
  LT(cublasLtCreate(&rk->lt));
  LT(cublasLtMatmulDescCreate(&rk->op, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  cublasOperation_t no_transpose = CUBLAS_OP_N;
  LT(cublasLtMatmulDescSetAttribute(rk->op, CUBLASLT_MATMUL_DESC_TRANSA, &no_transpose,
                                    sizeof no_transpose));
  LT(cublasLtMatmulDescSetAttribute(rk->op, CUBLASLT_MATMUL_DESC_TRANSB, &no_transpose,
                                    sizeof no_transpose));
  LT(cublasLtMatrixLayoutCreate(&rk->la, CUDA_R_16BF, GEMM_M, GEMM_K, GEMM_M));
  LT(cublasLtMatrixLayoutCreate(&rk->lb, CUDA_R_16BF, GEMM_K, GEMM_N, GEMM_K));
  LT(cublasLtMatrixLayoutCreate(&rk->lc, CUDA_R_16BF, GEMM_M, GEMM_N, GEMM_M));
  cublasLtMatmulPreference_t pref;
  LT(cublasLtMatmulPreferenceCreate(&pref));
  size_t ws = LT_WORKSPACE_BYTES;
  cublasLtMatmulHeuristicResult_t best;
  int found = 0;
  cublasStatus_t s = cublasLtMatmulPreferenceSetAttribute(
      pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof ws);
  if (s == CUBLAS_STATUS_SUCCESS)
    s = cublasLtMatmulAlgoGetHeuristic(rk->lt, rk->op, rk->la, rk->lb, rk->lc, rk->lc, pref, 1,
                                       &best, &found);
  cublasLtMatmulPreferenceDestroy(pref);
  LT(s);
  if (found < 1)
    return fail(rk->rank, __FILE__, __LINE__, "cublasLtMatmulAlgoGetHeuristic", "no algorithm");
  rk->algo = best.algo;
  /* Load the GEMM's kernel now, while no peer can be waiting on this GPU. */
  if (gemm_run(rk))
    return -1;
  return wait_stream(rk, rk->gemm, rk->g1, "gemm setup");
}

/* ---- communicators and the symmetric window ------------------------------------- */

static int comms_init(rank_t *rk) {
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  set_step(rk, "ncclCommInitRankConfig (default)");
  NC(ncclCommInitRankConfig(&rk->comm, NRANKS, shared.id, rk->rank, &config));
#if CE_HAVE_ZERO_CTA
  if (shared.zero_cta) {
    ncclConfig_t zero = NCCL_CONFIG_INITIALIZER;
    zero.CTAPolicy = NCCL_CTA_POLICY_ZERO;
    set_step(rk, "ncclCommInitRankConfig (zero CTA)");
    NC(ncclCommInitRankConfig(&rk->zero_comm, NRANKS, shared.zero_id, rk->rank, &zero));
    rk->sym_bytes = 4 * slice_bytes(shared.max_rows);
    NC(ncclMemAlloc((void **)&rk->sym, rk->sym_bytes));
    set_step(rk, "ncclCommWindowRegister");
    NC(ncclCommWindowRegister(rk->zero_comm, rk->sym, rk->sym_bytes, &rk->window,
                              NCCL_WIN_COLL_SYMMETRIC));
    shared.window_ok[rk->rank] = rk->window != NULL;
  }
#endif
  return barrier(rk, "communicators ready");
}

int zero_cta_windows_ok(void) { return shared.window_ok[0] && shared.window_ok[1]; }

int rank_setup(rank_t *rk) {
  CU(cudaSetDevice(rk->rank));
  cudaError_t pe = cudaDeviceEnablePeerAccess(rk->peer, 0);
  if (pe == cudaErrorPeerAccessAlreadyEnabled) { /* fine; clear the last error */
    (void)cudaGetLastError();
    pe = cudaSuccess;
  }
  if (cuda_failed(rk->rank, pe, "cudaDeviceEnablePeerAccess", __FILE__, __LINE__))
    return -1;
  CU(cudaStreamCreateWithFlags(&rk->xfer, cudaStreamNonBlocking));
  CU(cudaStreamCreateWithFlags(&rk->gemm, cudaStreamNonBlocking));
  cudaEvent_t *events[] = {&rk->x0, &rk->x1, &rk->g0, &rk->g1};
  for (int i = 0; i < 4; i++)
    CU(cudaEventCreate(events[i]));
  CU(cudaMalloc((void **)&rk->plain, 2 * slice_bytes(shared.max_rows)));
  shared.plain[rk->rank] = rk->plain;
  if (gemm_setup(rk) || barrier(rk, "setup done"))
    return -1;
  return comms_init(rk);
}

/* ---- transfers -------------------------------------------------------------- */

int enqueue_transfer(rank_t *rk, mech_t m, size_t slice, int reps) {
  size_t count = slice / ELEM_BYTES, own = (size_t)rk->rank * slice;
  for (int i = 0; i < reps; i++) {
    switch (m) {
    case PEER_PUSH: /* the copy engine of the source GPU writes into the peer's memory */
      CU(cudaMemcpyPeerAsync(shared.plain[rk->peer] + own, rk->peer, rk->plain + own, rk->rank,
                             slice, rk->xfer));
      break;
    case NCCL_AG:
      NC(ncclAllGather(rk->plain + own, rk->plain, count, ncclBfloat16, rk->comm, rk->xfer));
      break;
#if CE_HAVE_ZERO_CTA
    case ZERO_AG:
      NC(ncclAllGather(rk->sym + own, rk->sym, count, ncclBfloat16, rk->zero_comm, rk->xfer));
      break;
    case ZERO_A2A:
      NC(ncclAlltoAll(rk->sym, rk->sym + 2 * slice, count, ncclBfloat16, rk->zero_comm, rk->xfer));
      break;
#else
    case ZERO_AG:
    case ZERO_A2A:
      return fail(rk->rank, __FILE__, __LINE__, mech_name[m], "not built (NCCL < 2.28)");
#endif
    default:
      return fail(rk->rank, __FILE__, __LINE__, "enqueue_transfer", "no such mechanism");
    }
  }
  return 0;
}

/* Every byte rank q sends is 0x11 + q, and the place where the peer's slice must
 * land starts zeroed; reads back 64 bytes at its start, middle and end. Catches a
 * transfer that does not land where it should. */
int check_transfer(rank_t *rk, mech_t m, size_t slice, int *both_ok) {
  char *base = (m == PEER_PUSH || m == NCCL_AG) ? rk->plain : rk->sym, *theirs;
  if (m == ZERO_A2A) {
    CU(cudaMemsetAsync(base, 0x11 + rk->rank, 2 * slice, rk->xfer));
    CU(cudaMemsetAsync(base + 2 * slice, 0, 2 * slice, rk->xfer));
    theirs = base + 2 * slice + (size_t)rk->peer * slice;
  } else {
    CU(cudaMemsetAsync(base, 0, 2 * slice, rk->xfer));
    CU(cudaMemsetAsync(base + (size_t)rk->rank * slice, 0x11 + rk->rank, slice, rk->xfer));
    theirs = base + (size_t)rk->peer * slice;
  }
  if (wait_stream(rk, rk->xfer, rk->x1, "check: set patterns") ||
      barrier(rk, "check: patterns set") || enqueue_transfer(rk, m, slice, 1) ||
      wait_stream(rk, rk->xfer, rk->x1, "check: transfer") || barrier(rk, "check: transfers done"))
    return -1;
  unsigned char got[3][64];
  size_t at[3] = {0, slice / 2, slice - sizeof got[0]};
  for (int i = 0; i < 3; i++)
    CU(cudaMemcpyAsync(got[i], theirs + at[i], sizeof got[i], cudaMemcpyDeviceToHost, rk->xfer));
  if (wait_stream(rk, rk->xfer, rk->x1, "check: read back"))
    return -1;
  int ok = 1;
  for (int i = 0; i < 3; i++)
    for (size_t j = 0; j < sizeof got[i]; j++)
      ok &= got[i][j] == (unsigned char)(0x11 + rk->peer);
  shared.check_ok[rk->rank] = ok;
  if (barrier(rk, "check: read back"))
    return -1;
  *both_ok = shared.check_ok[0] && shared.check_ok[1];
  return 0;
}

/* ---- teardown ------------------------------------------------------------------- */

/* After a failure a peer may wait forever on a flag this rank never writes: abort
 * the communicators and leave the memory to the process exit. Otherwise both GPUs
 * are idle (the last step was a barrier) and both ranks tear down in one order. */
int rank_cleanup(rank_t *rk, int failed) {
  set_step(rk, "cleanup");
  if (failed) {
    if (rk->zero_comm)
      ncclCommAbort(rk->zero_comm);
    if (rk->comm)
      ncclCommAbort(rk->comm);
    return -1;
  }
#if CE_HAVE_ZERO_CTA
  if (rk->window)
    NC(ncclCommWindowDeregister(rk->zero_comm, rk->window));
#endif
  if (rk->sym)
    NC(ncclMemFree(rk->sym));
  ncclComm_t comms[2] = {rk->zero_comm, rk->comm};
  for (int i = 0; i < 2; i++) {
    if (comms[i]) {
      NC(ncclCommFinalize(comms[i]));
      NC(ncclCommDestroy(comms[i]));
    }
  }
  void *buffers[] = {rk->plain, rk->a, rk->b, rk->c, rk->workspace};
  for (size_t i = 0; i < sizeof buffers / sizeof buffers[0]; i++)
    CU(cudaFree(buffers[i]));
  cublasLtMatrixLayoutDestroy(rk->la);
  cublasLtMatrixLayoutDestroy(rk->lb);
  cublasLtMatrixLayoutDestroy(rk->lc);
  cublasLtMatmulDescDestroy(rk->op);
  cublasLtDestroy(rk->lt);
  return 0;
}
