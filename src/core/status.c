/*
 * status.c - status names, the thread-local last-error message and version.
 */
#include "internal.h"

#include <stdio.h>

static _Thread_local char last_error[1024];

const char *tpla_status_string(tpla_status_t status) {
  switch (status) {
  case TPLA_SUCCESS: return "TPLA_SUCCESS";
  case TPLA_ERROR_INVALID_ARGUMENT: return "TPLA_ERROR_INVALID_ARGUMENT";
  case TPLA_ERROR_INVALID_USAGE: return "TPLA_ERROR_INVALID_USAGE";
  case TPLA_ERROR_NOT_SUPPORTED: return "TPLA_ERROR_NOT_SUPPORTED";
  case TPLA_ERROR_OUT_OF_MEMORY: return "TPLA_ERROR_OUT_OF_MEMORY";
  case TPLA_ERROR_CUDA: return "TPLA_ERROR_CUDA";
  case TPLA_ERROR_NCCL: return "TPLA_ERROR_NCCL";
  case TPLA_ERROR_CUBLAS: return "TPLA_ERROR_CUBLAS";
  case TPLA_ERROR_REMOTE: return "TPLA_ERROR_REMOTE";
  case TPLA_ERROR_TIMEOUT: return "TPLA_ERROR_TIMEOUT";
  case TPLA_ERROR_INTERNAL: return "TPLA_ERROR_INTERNAL";
  case TPLA_ERROR_ABORTED: return "TPLA_ERROR_ABORTED";
  }
  return "TPLA_ERROR_UNKNOWN_STATUS";
}

const char *tpla_last_error(void) { return last_error; }

int tpla_version(void) { return TPLA_VERSION; }

void tpla_clear_error(void) { last_error[0] = '\0'; }

tpla_status_t tpla_fail_again(tpla_status_t status, const char *message) {
  if (message != last_error)
    snprintf(last_error, sizeof last_error, "%s", message);
  return status;
}

tpla_status_t tpla_msg(char *msg, size_t size, tpla_status_t status, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, size, fmt, ap);
  va_end(ap);
  return status;
}

tpla_status_t tpla_fail(tpla_status_t status, const char *fn, const char *fmt, ...) {
  int n = snprintf(last_error, sizeof last_error, "%s: ", fn ? fn : "tpla");
  if (n < 0 || (size_t)n >= sizeof last_error)
    n = 0;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(last_error + n, sizeof last_error - (size_t)n, fmt, ap);
  va_end(ap);
  return status;
}
