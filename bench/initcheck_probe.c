/*
 * initcheck_probe.c - does compute-sanitizer's initcheck see cuBLASLt's GEMMs
 * write their output? Run 147 (one H200) reported uninitialized reads only of
 * memory that cuBLASLt's GEMMs alone had written. Each case allocates D, lets
 * one thing write it (nothing, a memset, or one cuBLASLt GEMM with beta 0 on
 * initialized A and B), then copies D to the host; under initcheck, a report
 * between a case's two marker lines means the sanitizer took D as unwritten.
 * Not part of the library; built by hand on the GPU machine:
 *   nvcc -O2 -o probe bench/initcheck_probe.c -lcublasLt
 *   compute-sanitizer --tool initcheck ./probe [case]
 * Run 149 ran every case in one process; its print limit hid which case
 * reported what, so run 150 runs each case alone.
 */
#include <cublasLt.h>
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>

#define CHECK(call)                                                                      \
  do {                                                                                   \
    if ((call) != 0) {                                                                   \
      fprintf(stderr, "%s:%d: %s failed\n", __FILE__, __LINE__, #call);                  \
      exit(1);                                                                           \
    }                                                                                    \
  } while (0)

static cublasLtHandle_t lt;
static void *workspace;
static const size_t kWorkspace = 32u << 20;

/* D (m x n, column-major) = A^T B with A k x m, B k x n, all of `type`. */
static void gemm(cudaDataType_t type, cublasComputeType_t compute, int m, int n, int k, void *d) {
  size_t es = type == CUDA_R_32F ? 4 : 2;
  void *a, *b;
  CHECK(cudaMalloc(&a, (size_t)k * m * es));
  CHECK(cudaMalloc(&b, (size_t)k * n * es));
  CHECK(cudaMemset(a, 0x3c, (size_t)k * m * es)); /* small non-zero values */
  CHECK(cudaMemset(b, 0x3c, (size_t)k * n * es));
  cublasLtMatmulDesc_t op;
  cublasLtMatrixLayout_t la, lb, ld;
  cublasOperation_t t = CUBLAS_OP_T;
  CHECK(cublasLtMatmulDescCreate(&op, compute, CUDA_R_32F));
  CHECK(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSA, &t, sizeof t));
  CHECK(cublasLtMatrixLayoutCreate(&la, type, k, m, k));
  CHECK(cublasLtMatrixLayoutCreate(&lb, type, k, n, k));
  CHECK(cublasLtMatrixLayoutCreate(&ld, type, m, n, m));
  cublasLtMatmulPreference_t pref;
  CHECK(cublasLtMatmulPreferenceCreate(&pref));
  CHECK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                             &kWorkspace, sizeof kWorkspace));
  cublasLtMatmulHeuristicResult_t h;
  int found = 0;
  CHECK(cublasLtMatmulAlgoGetHeuristic(lt, op, la, lb, ld, ld, pref, 1, &h, &found));
  CHECK(found != 1);
  float alpha = 1.0f, beta = 0.0f;
  CHECK(cublasLtMatmul(lt, op, &alpha, a, la, b, lb, &beta, d, ld, d, ld, &h.algo, workspace,
                       kWorkspace, 0));
  CHECK(cudaDeviceSynchronize());
  cublasLtMatmulPreferenceDestroy(pref);
  cublasLtMatrixLayoutDestroy(la);
  cublasLtMatrixLayoutDestroy(lb);
  cublasLtMatrixLayoutDestroy(ld);
  cublasLtMatmulDescDestroy(op);
  cudaFree(a);
  cudaFree(b);
}

enum writer { NOTHING, MEMSET, GEMM_BF16, GEMM_TF32 };

static void probe(const char *name, enum writer w, int m, int n, int k) {
  size_t es = w == GEMM_TF32 ? 4 : 2, bytes = (size_t)m * n * es;
  void *d, *host = malloc(bytes);
  CHECK(host == NULL);
  CHECK(cudaMalloc(&d, bytes));
  printf("probe %s: begin\n", name);
  fflush(stdout);
  if (w == MEMSET)
    CHECK(cudaMemset(d, 0, bytes));
  else if (w == GEMM_BF16)
    gemm(CUDA_R_16BF, CUBLAS_COMPUTE_32F, m, n, k, d);
  else if (w == GEMM_TF32)
    gemm(CUDA_R_32F, CUBLAS_COMPUTE_32F_FAST_TF32, m, n, k, d);
  CHECK(cudaMemcpy(host, d, bytes, cudaMemcpyDeviceToHost));
  printf("probe %s: end\n", name);
  fflush(stdout);
  cudaFree(d);
  free(host);
}

static const struct {
  const char *name;
  enum writer w;
  int m, n, k;
} kCases[] = {
    {"unwritten (expect a report)", NOTHING, 64, 64, 64},
    {"memset (expect none)", MEMSET, 64, 64, 64},
    {"bf16 GEMM 64x48x96", GEMM_BF16, 64, 48, 96},
    {"bf16 GEMM 1024^3", GEMM_BF16, 1024, 1024, 1024},
    {"bf16 GEMM 4096^3", GEMM_BF16, 4096, 4096, 4096},
    {"tf32 GEMM 64^3", GEMM_TF32, 64, 64, 64},
    {"tf32 GEMM 1024^3", GEMM_TF32, 1024, 1024, 1024},
};

/* probe [case]: every case, or only the one numbered (from 0) */
int main(int argc, char **argv) {
  int only = argc > 1 ? atoi(argv[1]) : -1, ncases = (int)(sizeof kCases / sizeof kCases[0]);
  CHECK(cublasLtCreate(&lt));
  CHECK(cudaMalloc(&workspace, kWorkspace));
  CHECK(cudaMemset(workspace, 0, kWorkspace));
  for (int i = 0; i < ncases; i++)
    if (only < 0 || only == i)
      probe(kCases[i].name, kCases[i].w, kCases[i].m, kCases[i].n, kCases[i].k);
  cudaFree(workspace);
  cublasLtDestroy(lt);
  return 0;
}
