/*
 * features.c - what this build and a device can do: tpla_get_features and
 * tpla_device_peer_access for the CUDA build. Arguments are checked before
 * any CUDA call, so a machine without a GPU or driver gives the same
 * answers to bad input as a GPU machine, and no GPU is simply
 * device_count 0.
 */
#include "cuda_util.h"

#include <string.h>

#define CUBLASLT_FP8_VERSION 111100 /* cublasLtGetVersion() of cuBLAS 11.11 */

/* Visible devices; 0 (not an error) when there is no driver or no GPU. */
static int device_count(void) {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    (void)cudaGetLastError();
    n = 0;
  }
  return n;
}

tpla_status_t tpla_get_features(tpla_features_t *features, int device) {
  static const char fn[] = "tpla_get_features";
  tpla_clear_error();
  if (features == NULL)
    return tpla_fail(TPLA_ERROR_INVALID_ARGUMENT, fn, "argument 'features' is NULL");
  if (features->size != sizeof(tpla_features_t))
    return tpla_fail(TPLA_ERROR_INVALID_ARGUMENT, fn,
                     "argument 'features': size field is %zu, expected %zu (initialize with "
                     "TPLA_FEATURES_INIT)",
                     features->size, sizeof(tpla_features_t));
  if (device < -1)
    return tpla_fail(TPLA_ERROR_INVALID_ARGUMENT, fn,
                     "argument 'device': %d is not a CUDA ordinal or -1", device);

  tpla_features_t f = TPLA_FEATURES_INIT;
  f.version = TPLA_VERSION;
  f.cuda_executor = 1;
  f.device_count = device_count();
  if (device >= f.device_count)
    return tpla_fail(TPLA_ERROR_INVALID_ARGUMENT, fn,
                     "argument 'device': %d, but there are %d CUDA devices", device,
                     f.device_count);
  /* Versions are known without a GPU; a missing driver reads 0. */
  if (cudaRuntimeGetVersion(&f.cuda_runtime_version) != cudaSuccess)
    f.cuda_runtime_version = 0;
  if (cudaDriverGetVersion(&f.cuda_driver_version) != cudaSuccess)
    f.cuda_driver_version = 0;
  (void)cudaGetLastError();
  if (ncclGetVersion(&f.nccl_version) != ncclSuccess)
    f.nccl_version = 0;
  f.cublaslt_version = cublasLtGetVersion();

  if (device >= 0) {
    int major = 0, minor = 0;
    CUDA_TRY(fn, cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device));
    CUDA_TRY(fn, cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device));
    CUDA_TRY(fn, cudaDeviceGetAttribute(&f.sm_count, cudaDevAttrMultiProcessorCount, device));
    struct cudaDeviceProp prop;
    CUDA_TRY(fn, cudaGetDeviceProperties(&prop, device));
    f.device = device;
    f.compute_capability = major * 10 + minor;
    /* FP8 tensor cores: Ada (8.9) and Hopper (9.0) on; cuBLASLt has FP8
     * matmuls since cuBLAS 11.11 (CUDA 11.8). */
    f.fp8 = f.compute_capability >= 89 && f.cublaslt_version >= CUBLASLT_FP8_VERSION;
    /* tpla implements per-tensor FP8 scaling only: MXFP8 block scaling (one
     * E8M0 scale per 32 K elements) is a cuBLASLt feature of Blackwell
     * (compute capability >= 10.0) that tpla does not drive, so no device
     * reports it. */
    f.mxfp8 = 0;
    size_t n = strnlen(prop.name, sizeof prop.name);
    if (n >= sizeof f.device_name)
      n = sizeof f.device_name - 1;
    memcpy(f.device_name, prop.name, n);
    f.device_name[n] = '\0';
  }
  *features = f;
  return TPLA_SUCCESS;
}

tpla_status_t tpla_device_peer_access(int *can_access, int device, int peer) {
  static const char fn[] = "tpla_device_peer_access";
  tpla_clear_error();
  if (can_access == NULL)
    return tpla_fail(TPLA_ERROR_INVALID_ARGUMENT, fn, "argument 'can_access' is NULL");
  if (device < 0)
    return tpla_fail(TPLA_ERROR_INVALID_ARGUMENT, fn, "argument 'device': %d is negative",
                     device);
  if (peer < 0)
    return tpla_fail(TPLA_ERROR_INVALID_ARGUMENT, fn, "argument 'peer': %d is negative", peer);
  int n = device_count();
  if (device >= n)
    return tpla_fail(TPLA_ERROR_INVALID_ARGUMENT, fn,
                     "argument 'device': %d, but there are %d CUDA devices", device, n);
  if (peer >= n)
    return tpla_fail(TPLA_ERROR_INVALID_ARGUMENT, fn,
                     "argument 'peer': %d, but there are %d CUDA devices", peer, n);
  int ok = 0;
  if (device != peer)
    CUDA_TRY(fn, cudaDeviceCanAccessPeer(&ok, device, peer));
  *can_access = ok;
  return TPLA_SUCCESS;
}
