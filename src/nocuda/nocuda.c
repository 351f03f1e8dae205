/*
 * nocuda.c - the CUDA-dependent entry points of a host-only build
 * (-DTPLA_CUDA=OFF): they report NOT_SUPPORTED, and the features query says
 * no CUDA executor was built.
 */
#include "internal.h"

#include <string.h>

static tpla_status_t no_cuda(const char *fn) {
  return tpla_fail(TPLA_ERROR_NOT_SUPPORTED, fn,
                   "this build of tpla has no CUDA executor (configured with TPLA_CUDA=OFF)");
}

tpla_status_t tpla_get_features(tpla_features_t *features, int device) {
  tpla_clear_error();
  if (features == NULL)
    return tpla_fail(TPLA_ERROR_INVALID_ARGUMENT, "tpla_get_features",
                     "argument 'features' is NULL");
  if (features->size != sizeof(tpla_features_t))
    return tpla_fail(TPLA_ERROR_INVALID_ARGUMENT, "tpla_get_features",
                     "argument 'features': size field is %zu, expected %zu (initialize with "
                     "TPLA_FEATURES_INIT)",
                     features->size, sizeof(tpla_features_t));
  if (device < -1)
    return tpla_fail(TPLA_ERROR_INVALID_ARGUMENT, "tpla_get_features",
                     "argument 'device': %d is not a CUDA ordinal or -1", device);
  if (device >= 0)
    return tpla_fail(TPLA_ERROR_INVALID_ARGUMENT, "tpla_get_features",
                     "argument 'device': %d, but there are 0 CUDA devices (host-only build)",
                     device);
  tpla_features_t f = TPLA_FEATURES_INIT;
  f.version = TPLA_VERSION;
  *features = f;
  return TPLA_SUCCESS;
}

tpla_status_t tpla_device_peer_access(int *can_access, int device, int peer) {
  tpla_clear_error();
  if (can_access == NULL)
    return tpla_fail(TPLA_ERROR_INVALID_ARGUMENT, "tpla_device_peer_access",
                     "argument 'can_access' is NULL");
  return no_cuda("tpla_device_peer_access");
}

tpla_status_t tpla_nccl_get_unique_id(tpla_unique_id_t *id) {
  tpla_clear_error();
  return no_cuda("tpla_nccl_get_unique_id");
}

tpla_status_t tpla_nccl_comm_create(struct ncclComm **comm, const tpla_unique_id_t *id,
                                    int nranks, int rank, int device, const tpla_config_t *cfg) {
  tpla_clear_error();
  return no_cuda("tpla_nccl_comm_create");
}

tpla_status_t tpla_nccl_comm_destroy(struct ncclComm *comm) {
  tpla_clear_error();
  return comm == NULL ? TPLA_SUCCESS : no_cuda("tpla_nccl_comm_destroy");
}

tpla_status_t tpla_ctx_create_nccl(tpla_ctx_t *ctx, struct ncclComm *comm,
                                   const tpla_config_t *cfg) {
  tpla_clear_error();
  return no_cuda("tpla_ctx_create_nccl");
}
