/*
 * test_static_interpose.c - a program with a function of its own named like
 * one of the library's internal functions (host_gemm_run, the host
 * executor's GEMM), linked with the static libtpla.a as a user links it:
 * the library must still call its own (review 101). Before libtpla.a's
 * internal symbols were made local, the linker bound the library's call to
 * this function: tpla_gemm returned SUCCESS and left D untouched.
 *
 *   ./test_static_interpose   (CTest: test_static_interpose)
 */
#include "tpla.h"

#include <stdio.h>

static int called;
int host_gemm_run(void *scratch, const void *call); /* the user's, unrelated */
int host_gemm_run(void *scratch, const void *call) {
  (void)scratch, (void)call;
  called = 1;
  return 0;
}

int main(void) {
  tpla_host_group_t group = NULL;
  tpla_ctx_t ctx = NULL;
  if (tpla_host_group_create(&group, 1, NULL) != TPLA_SUCCESS ||
      tpla_ctx_create_host(&ctx, group, 0, NULL) != TPLA_SUCCESS) {
    fprintf(stderr, "FAIL: %s\n", tpla_last_error());
    return 1;
  }
  float a[4] = {1, 2, 3, 4}, b[4] = {1, 0, 0, 1}, d[4] = {0, 0, 0, 0};
  tpla_matrix_t am = {a, 2, 2, 2, TPLA_FLOAT32}, bm = {b, 2, 2, 2, TPLA_FLOAT32};
  tpla_matrix_t dm = {d, 2, 2, 2, TPLA_FLOAT32};
  tpla_status_t st = tpla_gemm(ctx, dm, am, TPLA_OP_N, bm, TPLA_OP_N, NULL, NULL);
  int bad = st != TPLA_SUCCESS || called || d[0] != 1 || d[1] != 2 || d[2] != 3 || d[3] != 4;
  if (bad)
    fprintf(stderr, "FAIL: status %d, the user's host_gemm_run %s, D = %g %g %g %g "
            "(want 1 2 3 4)\n", (int)st, called ? "was called" : "was not called", d[0], d[1],
            d[2], d[3]);
  (void)tpla_ctx_destroy(ctx);
  (void)tpla_host_group_destroy(group);
  printf("%s\n", bad ? "1 failed" : "1 passed");
  return bad;
}
