/*
 * info.c - `tpla info`: the library version, what this build contains, the
 * CUDA/NCCL/cuBLASLt versions, every GPU (name, compute capability, SMs,
 * FP8 support) and the peer-access matrix. Every line but the GPU and peer
 * rows starts with '#', so the rows can be picked out with awk:
 *
 *   tpla info | awk '$1 == "gpu"'      one row per GPU
 *   tpla info | awk '$1 == "peer"'     one row per GPU of the peer matrix
 */
#include "tool.h"

static void version3(char *buf, size_t size, long major, long minor, long patch) {
  snprintf(buf, size, "%ld.%ld.%ld", major, minor, patch);
}

/* cudaRuntimeGetVersion style: 1000 major + 10 minor, e.g. 13000 -> 13.0. */
static const char *cuda_version(char *buf, size_t size, int v) {
  if (v <= 0)
    snprintf(buf, size, "none");
  else
    snprintf(buf, size, "%d.%d", v / 1000, (v % 1000) / 10);
  return buf;
}

/* NCCL_VERSION_CODE: 10000 major + 100 minor + patch since 2.9, before it
 * 1000 major + 100 minor + patch. */
static const char *nccl_version(char *buf, size_t size, int v) {
  if (v <= 0)
    snprintf(buf, size, "none");
  else if (v >= 20900)
    version3(buf, size, v / 10000, (v % 10000) / 100, v % 100);
  else
    version3(buf, size, v / 1000, (v % 1000) / 100, v % 100);
  return buf;
}

/* cublasLtGetVersion: 10000 major + 100 minor + patch, e.g. 130100. */
static const char *cublaslt_version(char *buf, size_t size, size_t v) {
  if (v == 0)
    snprintf(buf, size, "none");
  else
    version3(buf, size, (long)(v / 10000), (long)(v % 10000 / 100), (long)(v % 100));
  return buf;
}

static int print_gpus(int count) {
  printf("# %-3s %4s %3s %4s %4s %5s  %s\n", "", "dev", "cc", "SMs", "fp8", "mxfp8", "name");
  int failed = 0;
  for (int dev = 0; dev < count; dev++) {
    tpla_features_t f = TPLA_FEATURES_INIT;
    tpla_status_t s = tpla_get_features(&f, dev);
    if (s != TPLA_SUCCESS) {
      printf("# device %d: %s (%s)\n", dev, tpla_status_string(s), tpla_last_error());
      failed = 1;
      continue;
    }
    printf("  gpu %4d %d.%d %4d %4s %5s  %s\n", dev, f.compute_capability / 10,
           f.compute_capability % 10, f.sm_count, f.fp8 ? "yes" : "no", f.mxfp8 ? "yes" : "no",
           f.device_name);
  }
  return failed;
}

static int print_peer_matrix(int count) {
  printf("# peer access: row = device, column = peer; 1 = can map the peer's memory\n");
  printf("# %-4s %3s", "", "dev");
  for (int peer = 0; peer < count; peer++)
    printf(" %3d", peer);
  printf("\n");
  int failed = 0;
  for (int dev = 0; dev < count; dev++) {
    printf("  peer %3d", dev);
    for (int peer = 0; peer < count; peer++) {
      if (peer == dev) {
        printf(" %3s", "-");
        continue;
      }
      int can = 0;
      tpla_status_t s = tpla_device_peer_access(&can, dev, peer);
      if (s != TPLA_SUCCESS) {
        printf(" %3s", "?");
        failed = 1;
      } else {
        printf(" %3d", can);
      }
    }
    printf("\n");
  }
  if (failed)
    printf("# '?': tpla_device_peer_access failed (%s)\n", tpla_last_error());
  return failed;
}

int tool_mode_info(tool_opts_t *opts) {
  (void)opts;
  tpla_features_t f = TPLA_FEATURES_INIT;
  tpla_status_t s = tpla_get_features(&f, -1);
  if (s != TPLA_SUCCESS) {
    fprintf(stderr, "tpla info: tpla_get_features: %s (%s)\n", tpla_status_string(s),
            tpla_last_error());
    return 1;
  }
  int v = tpla_version();
  printf("# tpla %d.%d.%d (library %d, header %d)\n", v / 10000, v / 100 % 100, v % 100, v,
         TPLA_VERSION);
  if (!f.cuda_executor) {
    printf("# executors: host only: this build has no CUDA executor (configured with "
           "TPLA_CUDA=OFF)\n");
    printf("# GPUs: not used by this build; everything runs on the host executor\n");
    tool_flush();
    return 0;
  }
  char b1[32], b2[32], b3[32], b4[32];
  printf("# executors: host, cuda (NCCL + cuBLASLt)\n");
  printf("# CUDA runtime %s, CUDA driver %s, NCCL %s, cuBLASLt %s\n",
         cuda_version(b1, sizeof b1, f.cuda_runtime_version),
         cuda_version(b2, sizeof b2, f.cuda_driver_version),
         nccl_version(b3, sizeof b3, f.nccl_version),
         cublaslt_version(b4, sizeof b4, f.cublaslt_version));
  if (f.device_count == 0) {
    printf("# GPUs: none found (no CUDA device or driver on this machine); the host executor "
           "runs everything\n");
    tool_flush();
    return 0;
  }
  printf("# GPUs: %d\n", f.device_count);
  int failed = print_gpus(f.device_count);
  failed |= print_peer_matrix(f.device_count);
  tool_flush();
  return failed;
}
