/*
 * test_bad_inputs.c - the bad-input matrix: at least one bad value for
 * every argument of every public function. Each case checks the specific
 * status, that tpla_last_error() names the function and the argument, and
 * that no output was written (outputs are pre-filled with a sentinel).
 * The CUDA entry points are checked for what each build must return: a
 * host-only build answers NOT_SUPPORTED (see src/nocuda/nocuda.c); a CUDA
 * build checks arguments before any CUDA call, so it answers
 * INVALID_ARGUMENT even without a GPU. Run: ./test_bad_inputs
 */
#include "test.h"
#include "tpla.h"

#include <stdint.h>
#include <stdlib.h>

#define IA TPLA_ERROR_INVALID_ARGUMENT

/* Status, function and 'argument' in the message. */
#define ASSERT_FAILS(expr, want, fn, arg)                 \
  do {                                                    \
    ASSERT_STATUS(expr, want);                            \
    ASSERT_CONTAINS(tpla_last_error(), fn);               \
    ASSERT_CONTAINS(tpla_last_error(), "'" arg "'");      \
  } while (0)

/* INVALID_ARGUMENT naming `arg` on a CUDA build; `host_status` (as
 * nocuda.c answers) on a host-only build. */
#define ASSERT_CUDA_FAILS(expr, fn, arg, host_status)     \
  do {                                                    \
    if (cuda_built()) {                                   \
      ASSERT_FAILS(expr, IA, fn, arg);                    \
    } else {                                              \
      ASSERT_STATUS(expr, host_status);                   \
      ASSERT_CONTAINS(tpla_last_error(), fn);             \
    }                                                     \
  } while (0)

#define SENTINEL 0x5a
static _Alignas(64) unsigned char out[4096]; /* output buffer for the collectives */

static void poison(void) { memset(out, SENTINEL, sizeof out); }

static int untouched(void) {
  for (size_t i = 0; i < sizeof out; i++)
    if (out[i] != SENTINEL)
      return 0;
  return 1;
}

static int cuda_built(void) {
  tpla_features_t f = TPLA_FEATURES_INIT;
  return tpla_get_features(&f, -1) == TPLA_SUCCESS && f.cuda_executor;
}

/* A one-rank host context for the tests that need one. */
static tpla_host_group_t group_;
static tpla_ctx_t open_ctx(void) {
  tpla_ctx_t ctx = NULL;
  if (tpla_host_group_create(&group_, 1, NULL) != TPLA_SUCCESS ||
      tpla_ctx_create_host(&ctx, group_, 0, NULL) != TPLA_SUCCESS) {
    fprintf(stderr, "  cannot open a host context: %s\n", tpla_last_error());
    exit(1);
  }
  return ctx;
}

static void close_ctx(tpla_ctx_t ctx) {
  tpla_ctx_destroy(ctx);
  tpla_host_group_destroy(group_);
}

/* ---- status, dtype, features ---------------------------------------------- */

static void test_value_functions_with_unknown_values(void) {
  ASSERT_TRUE(tpla_status_string((tpla_status_t)777) != NULL);
  ASSERT_EQ_INT(tpla_dtype_size((tpla_dtype_t)77), 0);
  ASSERT_TRUE(strcmp(tpla_dtype_name((tpla_dtype_t)77), "?") == 0);
  ASSERT_TRUE(tpla_last_error() != NULL);
  ASSERT_TRUE(tpla_version() == TPLA_VERSION);
}

static void test_get_features_bad_args(void) {
  static const char fn[] = "tpla_get_features";
  ASSERT_FAILS(tpla_get_features(NULL, -1), IA, fn, "features");
  tpla_features_t f, copy;
  memset(&f, SENTINEL, sizeof f);
  f.size = sizeof f - 8; /* a caller built against another header */
  copy = f;
  ASSERT_FAILS(tpla_get_features(&f, -1), IA, fn, "features");
  ASSERT_TRUE(memcmp(&f, &copy, sizeof f) == 0);
  memset(&f, SENTINEL, sizeof f);
  f.size = sizeof f;
  copy = f;
  ASSERT_FAILS(tpla_get_features(&f, 1 << 20), IA, fn, "device");
  ASSERT_FAILS(tpla_get_features(&f, -2), IA, fn, "device"); /* both builds: only -1 */
  ASSERT_TRUE(memcmp(&f, &copy, sizeof f) == 0);
}

static void test_device_peer_access_bad_args(void) {
  static const char fn[] = "tpla_device_peer_access";
  ASSERT_FAILS(tpla_device_peer_access(NULL, 0, 0), IA, fn, "can_access");
  int can = 12345;
  ASSERT_CUDA_FAILS(tpla_device_peer_access(&can, -1, 0), fn, "device", TPLA_ERROR_NOT_SUPPORTED);
  ASSERT_EQ_INT(can, 12345);
  ASSERT_CUDA_FAILS(tpla_device_peer_access(&can, 0, -1), fn, "peer", TPLA_ERROR_NOT_SUPPORTED);
  ASSERT_EQ_INT(can, 12345);
}

static void test_nccl_unique_id_bad_args(void) {
  ASSERT_CUDA_FAILS(tpla_nccl_get_unique_id(NULL), "tpla_nccl_get_unique_id", "id",
                    TPLA_ERROR_NOT_SUPPORTED);
}

static void test_nccl_comm_create_bad_args(void) {
  static const char fn[] = "tpla_nccl_comm_create";
  const tpla_status_t ns = TPLA_ERROR_NOT_SUPPORTED;
  struct ncclComm *const fake = (struct ncclComm *)(uintptr_t)0x5a5a5a50;
  struct ncclComm *comm = fake;
  tpla_unique_id_t id;
  memset(&id, 0, sizeof id);
  tpla_config_t bad_cfg = TPLA_CONFIG_INIT;
  bad_cfg.size = 1;
  ASSERT_CUDA_FAILS(tpla_nccl_comm_create(NULL, &id, 2, 0, 0, NULL), fn, "comm", ns);
  ASSERT_CUDA_FAILS(tpla_nccl_comm_create(&comm, NULL, 2, 0, 0, NULL), fn, "id", ns);
  ASSERT_CUDA_FAILS(tpla_nccl_comm_create(&comm, &id, 0, 0, 0, NULL), fn, "nranks", ns);
  ASSERT_CUDA_FAILS(tpla_nccl_comm_create(&comm, &id, -3, 0, 0, NULL), fn, "nranks", ns);
  ASSERT_CUDA_FAILS(tpla_nccl_comm_create(&comm, &id, 2, -1, 0, NULL), fn, "rank", ns);
  ASSERT_CUDA_FAILS(tpla_nccl_comm_create(&comm, &id, 2, 2, 0, NULL), fn, "rank", ns);
  ASSERT_CUDA_FAILS(tpla_nccl_comm_create(&comm, &id, 2, 0, -1, NULL), fn, "device", ns);
  ASSERT_CUDA_FAILS(tpla_nccl_comm_create(&comm, &id, 2, 0, 0, &bad_cfg), fn, "cfg", ns);
  ASSERT_TRUE(comm == fake);
  ASSERT_OK(tpla_nccl_comm_destroy(NULL)); /* destroy accepts NULL */
}

static void test_ctx_create_nccl_bad_args(void) {
  static const char fn[] = "tpla_ctx_create_nccl";
  tpla_ctx_t ctx = (tpla_ctx_t)(uintptr_t)0x5a5a5a50;
  if (cuda_built()) {
    ASSERT_STATUS(tpla_ctx_create_nccl(NULL, NULL, NULL), IA); /* 'ctx' or 'comm' */
    ASSERT_CONTAINS(tpla_last_error(), fn);
  } else {
    ASSERT_STATUS(tpla_ctx_create_nccl(NULL, NULL, NULL), TPLA_ERROR_NOT_SUPPORTED);
  }
  ASSERT_CUDA_FAILS(tpla_ctx_create_nccl(&ctx, NULL, NULL), fn, "comm", TPLA_ERROR_NOT_SUPPORTED);
  ASSERT_TRUE(ctx == (tpla_ctx_t)(uintptr_t)0x5a5a5a50);
}

/* ---- host groups and contexts ---------------------------------------------- */

static void test_host_group_create_bad_args(void) {
  static const char fn[] = "tpla_host_group_create";
  tpla_host_group_t const fake = (tpla_host_group_t)(uintptr_t)0x5a5a5a50;
  tpla_host_group_t g = fake;
  ASSERT_FAILS(tpla_host_group_create(NULL, 2, NULL), IA, fn, "group");
  ASSERT_FAILS(tpla_host_group_create(&g, 0, NULL), IA, fn, "nranks");
  ASSERT_FAILS(tpla_host_group_create(&g, -1, NULL), IA, fn, "nranks");
  ASSERT_FAILS(tpla_host_group_create(&g, 1025, NULL), IA, fn, "nranks");
  tpla_config_t cfg = TPLA_CONFIG_INIT;
  cfg.size = sizeof cfg + 8;
  ASSERT_FAILS(tpla_host_group_create(&g, 2, &cfg), IA, fn, "cfg");
  cfg = (tpla_config_t)TPLA_CONFIG_INIT;
  cfg.timeout_ms = -5;
  ASSERT_FAILS(tpla_host_group_create(&g, 2, &cfg), IA, fn, "cfg");
  ASSERT_TRUE(g == fake);
  ASSERT_OK(tpla_host_group_create(&g, 1024, NULL)); /* the upper bound is allowed */
  ASSERT_OK(tpla_host_group_destroy(g));
}

static void test_host_group_destroy_with_live_context(void) {
  ASSERT_OK(tpla_host_group_destroy(NULL));
  tpla_host_group_t g = NULL;
  tpla_ctx_t ctx = NULL;
  ASSERT_OK(tpla_host_group_create(&g, 1, NULL));
  ASSERT_OK(tpla_ctx_create_host(&ctx, g, 0, NULL));
  ASSERT_FAILS(tpla_host_group_destroy(g), TPLA_ERROR_INVALID_USAGE, "tpla_host_group_destroy",
               "group");
  ASSERT_OK(tpla_barrier(ctx, NULL)); /* nothing was freed: the group still works */
  ASSERT_OK(tpla_ctx_destroy(ctx));
  ASSERT_OK(tpla_host_group_destroy(g));
}

static void test_ctx_create_host_bad_args(void) {
  static const char fn[] = "tpla_ctx_create_host";
  tpla_ctx_t const fake = (tpla_ctx_t)(uintptr_t)0x5a5a5a50;
  tpla_host_group_t g = NULL;
  ASSERT_OK(tpla_host_group_create(&g, 2, NULL));
  tpla_ctx_t ctx = fake, first = NULL;
  tpla_config_t cfg = TPLA_CONFIG_INIT;
  cfg.size = 0;
  ASSERT_FAILS(tpla_ctx_create_host(NULL, g, 0, NULL), IA, fn, "ctx");
  ASSERT_FAILS(tpla_ctx_create_host(&ctx, NULL, 0, NULL), IA, fn, "group");
  ASSERT_FAILS(tpla_ctx_create_host(&ctx, g, -1, NULL), IA, fn, "rank");
  ASSERT_FAILS(tpla_ctx_create_host(&ctx, g, 2, NULL), IA, fn, "rank");
  ASSERT_FAILS(tpla_ctx_create_host(&ctx, g, 0, &cfg), IA, fn, "cfg");
  cfg = (tpla_config_t)TPLA_CONFIG_INIT;
  cfg.timeout_ms = -1;
  ASSERT_FAILS(tpla_ctx_create_host(&ctx, g, 0, &cfg), IA, fn, "cfg");
  ASSERT_TRUE(ctx == fake);
  ASSERT_OK(tpla_ctx_create_host(&first, g, 1, NULL));
  ASSERT_FAILS(tpla_ctx_create_host(&ctx, g, 1, NULL), TPLA_ERROR_INVALID_USAGE, fn, "rank");
  ASSERT_TRUE(ctx == fake);
  ASSERT_OK(tpla_ctx_destroy(first));
  ASSERT_OK(tpla_ctx_create_host(&first, g, 1, NULL)); /* the rank is free again */
  ASSERT_OK(tpla_ctx_destroy(first));
  ASSERT_OK(tpla_host_group_destroy(g));
}

static void test_ctx_queries_bad_args(void) {
  int rank = -7, nranks = -7, device = -7;
  tpla_executor_t ex = (tpla_executor_t)77;
  ASSERT_FAILS(tpla_ctx_get_info(NULL, &rank, &nranks, &ex, &device), IA, "tpla_ctx_get_info",
               "ctx");
  ASSERT_TRUE(rank == -7 && nranks == -7 && device == -7 && ex == (tpla_executor_t)77);
  size_t bytes = 777;
  ASSERT_FAILS(tpla_ctx_workspace_bytes(NULL, &bytes), IA, "tpla_ctx_workspace_bytes", "ctx");
  ASSERT_EQ_INT(bytes, 777);
  tpla_ctx_t ctx = open_ctx();
  ASSERT_FAILS(tpla_ctx_workspace_bytes(ctx, NULL), IA, "tpla_ctx_workspace_bytes", "bytes");
  ASSERT_OK(tpla_ctx_get_info(ctx, NULL, NULL, NULL, NULL)); /* every output is optional */
  ASSERT_OK(tpla_ctx_get_info(ctx, &rank, &nranks, &ex, &device));
  ASSERT_TRUE(rank == 0 && nranks == 1 && ex == TPLA_EXECUTOR_HOST && device == -1);
  close_ctx(ctx);
  ASSERT_OK(tpla_ctx_destroy(NULL));
}

/* ---- collectives ------------------------------------------------------------ */

static void test_allreduce_bad_args(void) {
  static const char fn[] = "tpla_allreduce";
  tpla_ctx_t ctx = open_ctx();
  float in[4] = {1, 2, 3, 4};
  poison();
  ASSERT_FAILS(tpla_allreduce(NULL, out, in, 4, TPLA_FLOAT32, NULL), IA, fn, "ctx");
  ASSERT_FAILS(tpla_allreduce(ctx, NULL, in, 4, TPLA_FLOAT32, NULL), IA, fn, "recv");
  ASSERT_FAILS(tpla_allreduce(ctx, out, NULL, 4, TPLA_FLOAT32, NULL), IA, fn, "send");
  ASSERT_FAILS(tpla_allreduce(ctx, out, in, SIZE_MAX, TPLA_FLOAT32, NULL), IA, fn, "recv");
  ASSERT_FAILS(tpla_allreduce(ctx, out, in, SIZE_MAX / 8, TPLA_FLOAT32, NULL), IA, fn, "recv");
  ASSERT_FAILS(tpla_allreduce(ctx, out, in, 4, (tpla_dtype_t)9, NULL), IA, fn, "dtype");
  ASSERT_FAILS(tpla_allreduce(ctx, out, in, 4, TPLA_UINT8, NULL), IA, fn, "dtype");
  /* in place means send == recv: a partial overlap races on NCCL, so no executor takes it */
  ASSERT_FAILS(tpla_allreduce(ctx, (float *)out + 1, out, 4, TPLA_FLOAT32, NULL), IA, fn, "send");
  ASSERT_TRUE(untouched());
  ASSERT_OK(tpla_allreduce(ctx, NULL, NULL, 0, TPLA_FLOAT32, NULL)); /* empty is fine */
  close_ctx(ctx);
}

static void test_allgatherv_bad_args(void) {
  static const char fn[] = "tpla_allgatherv";
  tpla_ctx_t ctx = open_ctx();
  float in[4] = {1, 2, 3, 4};
  size_t counts[1] = {4}, huge[1] = {SIZE_MAX};
  poison();
  ASSERT_FAILS(tpla_allgatherv(NULL, out, in, counts, TPLA_FLOAT32, NULL), IA, fn, "ctx");
  ASSERT_FAILS(tpla_allgatherv(ctx, NULL, in, counts, TPLA_FLOAT32, NULL), IA, fn, "recv");
  ASSERT_FAILS(tpla_allgatherv(ctx, out, NULL, counts, TPLA_FLOAT32, NULL), IA, fn, "send");
  ASSERT_FAILS(tpla_allgatherv(ctx, out, in, NULL, TPLA_FLOAT32, NULL), IA, fn, "counts");
  ASSERT_FAILS(tpla_allgatherv(ctx, out, in, huge, TPLA_FLOAT32, NULL), IA, fn, "counts");
  ASSERT_FAILS(tpla_allgatherv(ctx, out, in, counts, (tpla_dtype_t)-2, NULL), IA, fn, "dtype");
  /* send overlapping recv anywhere but at the in-place position */
  ASSERT_FAILS(tpla_allgatherv(ctx, out, out + 4, counts, TPLA_FLOAT32, NULL), IA, fn, "send");
  ASSERT_TRUE(untouched());
  ASSERT_OK(tpla_allgatherv(ctx, out, out, counts, TPLA_FLOAT32, NULL)); /* in place */
  ASSERT_TRUE(untouched());
  close_ctx(ctx);
}

static void test_reduce_scatterv_bad_args(void) {
  static const char fn[] = "tpla_reduce_scatterv";
  tpla_ctx_t ctx = open_ctx();
  float in[4] = {1, 2, 3, 4};
  size_t counts[1] = {4}, huge[1] = {SIZE_MAX / 2};
  poison();
  ASSERT_FAILS(tpla_reduce_scatterv(NULL, out, in, counts, TPLA_FLOAT32, NULL), IA, fn, "ctx");
  ASSERT_FAILS(tpla_reduce_scatterv(ctx, NULL, in, counts, TPLA_FLOAT32, NULL), IA, fn, "recv");
  ASSERT_FAILS(tpla_reduce_scatterv(ctx, out, NULL, counts, TPLA_FLOAT32, NULL), IA, fn, "send");
  ASSERT_FAILS(tpla_reduce_scatterv(ctx, out, in, NULL, TPLA_FLOAT32, NULL), IA, fn, "counts");
  ASSERT_FAILS(tpla_reduce_scatterv(ctx, out, in, huge, TPLA_FLOAT32, NULL), IA, fn, "counts");
  ASSERT_FAILS(tpla_reduce_scatterv(ctx, out, in, counts, (tpla_dtype_t)5, NULL), IA, fn,
               "dtype");
  ASSERT_FAILS(tpla_reduce_scatterv(ctx, out, in, counts, TPLA_UINT8, NULL), IA, fn, "dtype");
  /* recv inside send anywhere but at this rank's block (NCCL's in-place position) */
  ASSERT_FAILS(tpla_reduce_scatterv(ctx, (float *)out + 1, out, counts, TPLA_FLOAT32, NULL), IA,
               fn, "recv");
  ASSERT_TRUE(untouched());
  close_ctx(ctx);
}

static void test_broadcast_bad_args(void) {
  static const char fn[] = "tpla_broadcast";
  tpla_ctx_t ctx = open_ctx();
  poison();
  ASSERT_FAILS(tpla_broadcast(NULL, out, 4, TPLA_FLOAT32, 0, NULL), IA, fn, "ctx");
  ASSERT_FAILS(tpla_broadcast(ctx, NULL, 4, TPLA_FLOAT32, 0, NULL), IA, fn, "buf");
  ASSERT_FAILS(tpla_broadcast(ctx, out, SIZE_MAX / 2, TPLA_FLOAT32, 0, NULL), IA, fn, "buf");
  ASSERT_FAILS(tpla_broadcast(ctx, out, 4, (tpla_dtype_t)99, 0, NULL), IA, fn, "dtype");
  ASSERT_FAILS(tpla_broadcast(ctx, out, 4, TPLA_FLOAT32, -1, NULL), IA, fn, "root");
  ASSERT_FAILS(tpla_broadcast(ctx, out, 4, TPLA_FLOAT32, 1, NULL), IA, fn, "root");
  ASSERT_TRUE(untouched());
  close_ctx(ctx);
}

static void test_sendrecv_bad_args(void) {
  static const char fn[] = "tpla_sendrecv";
  const tpla_dtype_t f32 = TPLA_FLOAT32;
  tpla_ctx_t ctx = open_ctx();
  float in[4] = {1, 2, 3, 4};
  poison();
  ASSERT_FAILS(tpla_sendrecv(NULL, in, 4, 0, out, 4, 0, f32, NULL), IA, fn, "ctx");
  ASSERT_FAILS(tpla_sendrecv(ctx, NULL, 4, 0, out, 4, 0, f32, NULL), IA, fn, "send");
  ASSERT_FAILS(tpla_sendrecv(ctx, in, SIZE_MAX, 0, out, 4, 0, f32, NULL), IA, fn, "send");
  ASSERT_FAILS(tpla_sendrecv(ctx, in, 4, -2, out, 4, 0, f32, NULL), IA, fn, "dst");
  ASSERT_FAILS(tpla_sendrecv(ctx, in, 4, 1, out, 4, 0, f32, NULL), IA, fn, "dst");
  ASSERT_FAILS(tpla_sendrecv(ctx, in, 4, 0, NULL, 4, 0, f32, NULL), IA, fn, "recv");
  ASSERT_FAILS(tpla_sendrecv(ctx, in, 4, 0, out, SIZE_MAX / 2, 0, f32, NULL), IA, fn, "recv");
  ASSERT_FAILS(tpla_sendrecv(ctx, in, 4, 0, out, 4, -5, f32, NULL), IA, fn, "src");
  ASSERT_FAILS(tpla_sendrecv(ctx, in, 4, 0, out, 4, 1, f32, NULL), IA, fn, "src");
  ASSERT_FAILS(tpla_sendrecv(ctx, in, 4, 0, out, 4, 0, (tpla_dtype_t)8, NULL), IA, fn, "dtype");
  /* a self send must be a self exchange of equal counts */
  ASSERT_FAILS(tpla_sendrecv(ctx, in, 4, 0, out, 4, -1, f32, NULL), IA, fn, "src");
  ASSERT_FAILS(tpla_sendrecv(ctx, in, 4, -1, out, 4, 0, f32, NULL), IA, fn, "dst");
  ASSERT_FAILS(tpla_sendrecv(ctx, in, 4, 0, out, 3, 0, f32, NULL), IA, fn, "recv_count");
  /* a self exchange may be in place, but not overlap otherwise */
  ASSERT_FAILS(tpla_sendrecv(ctx, out, 4, 0, (float *)out + 1, 4, 0, f32, NULL), IA, fn, "recv");
  ASSERT_TRUE(untouched());
  /* unused buffers may be NULL */
  ASSERT_OK(tpla_sendrecv(ctx, NULL, 4, -1, NULL, 4, -1, f32, NULL));
  close_ctx(ctx);
}

static void test_barrier_bad_args(void) {
  ASSERT_FAILS(tpla_barrier(NULL, NULL), IA, "tpla_barrier", "ctx");
}

/* ---- GEMM ------------------------------------------------------------------- */

/* Valid operands D (4x5, ld 6) = A (4x3, ld 3) B (3x5, ld 5) in fp32; the
 * cases below break one thing at a time. */
enum { AN = 4 * 3, BN = 3 * 5, DN = 4 * 6 };
static float a_buf[AN + 16], b_buf[BN + 16], d_buf[DN + 16];
static float a_copy[AN + 16], b_copy[BN + 16], d_copy[DN + 16];

static tpla_matrix_t gm_a(void) { return (tpla_matrix_t){a_buf, 4, 3, 3, TPLA_FLOAT32}; }
static tpla_matrix_t gm_b(void) { return (tpla_matrix_t){b_buf, 3, 5, 5, TPLA_FLOAT32}; }
static tpla_matrix_t gm_d(void) { return (tpla_matrix_t){d_buf, 4, 5, 6, TPLA_FLOAT32}; }

static void gemm_reset(void) {
  for (size_t i = 0; i < sizeof a_buf / sizeof a_buf[0]; i++)
    a_buf[i] = (float)i;
  for (size_t i = 0; i < sizeof b_buf / sizeof b_buf[0]; i++)
    b_buf[i] = (float)i * 0.5f;
  memset(d_buf, SENTINEL, sizeof d_buf);
  memcpy(a_copy, a_buf, sizeof a_buf);
  memcpy(b_copy, b_buf, sizeof b_buf);
  memcpy(d_copy, d_buf, sizeof d_buf);
}

static int gemm_untouched(void) {
  return memcmp(a_buf, a_copy, sizeof a_buf) == 0 && memcmp(b_buf, b_copy, sizeof b_buf) == 0 &&
         memcmp(d_buf, d_copy, sizeof d_buf) == 0;
}

#define ASSERT_GEMM_FAILS(ctx, d, a, opa, b, opb, args, want, arg)                         \
  do {                                                                                    \
    ASSERT_FAILS(tpla_gemm(ctx, d, a, opa, b, opb, args, NULL), want, "tpla_gemm", arg);  \
    ASSERT_TRUE(gemm_untouched());                                                        \
  } while (0)

/* Every way one matrix view can be malformed; `which` is 'd', 'a' or 'b'. */
static void gemm_bad_view(tpla_ctx_t ctx, char which) {
  const tpla_op_t N = TPLA_OP_N;
  const char *name = which == 'd' ? "'d'" : which == 'a' ? "'a'" : "'b'";
  for (int c = 0; c < 9; c++) {
    tpla_matrix_t d = gm_d(), a = gm_a(), b = gm_b();
    tpla_matrix_t *m = which == 'd' ? &d : which == 'a' ? &a : &b;
    switch (c) {
    case 0: m->dtype = (tpla_dtype_t)42; break;
    case 1: m->rows = -1; break;
    case 2: m->cols = -2; break;
    case 3: m->ld = m->cols - 1; break;                 /* ld < cols */
    case 4: m->cols = 0, m->ld = 0; break;             /* ld < max(cols, 1) */
    case 5: m->data = NULL; break;
    case 6: m->rows = INT64_MAX / 4, m->ld = 1 << 20; break; /* not addressable */
    case 7: m->rows = 1, m->ld = INT64_MAX / 2; break;        /* one row, pitch not either */
    case 8: m->rows = 1, m->ld = m->cols - 1; break;          /* ld < cols with one row too */
    }
    ASSERT_STATUS(tpla_gemm(ctx, d, a, N, b, N, NULL, NULL), IA);
    ASSERT_CONTAINS(tpla_last_error(), "tpla_gemm");
    ASSERT_CONTAINS(tpla_last_error(), name);
    if (c == 6 || c == 7) /* found by the view check, not by a later shape check */
      ASSERT_CONTAINS(tpla_last_error(), "too large to address");
    if (c == 3 || c == 4 || c == 8) /* likewise */
      ASSERT_CONTAINS(tpla_last_error(), "ld (");
    ASSERT_TRUE(gemm_untouched());
  }
}

static void test_gemm_bad_views(void) {
  tpla_ctx_t ctx = open_ctx();
  gemm_reset();
  gemm_bad_view(ctx, 'd');
  gemm_bad_view(ctx, 'a');
  gemm_bad_view(ctx, 'b');
  close_ctx(ctx);
}

static void test_gemm_bad_ops_and_dtypes(void) {
  const tpla_op_t N = TPLA_OP_N, T = TPLA_OP_T;
  tpla_ctx_t ctx = open_ctx();
  gemm_reset();
  tpla_matrix_t d = gm_d(), a = gm_a(), b = gm_b();
  ASSERT_FAILS(tpla_gemm(NULL, d, a, N, b, N, NULL, NULL), IA, "tpla_gemm", "ctx");
  ASSERT_GEMM_FAILS(ctx, d, a, (tpla_op_t)2, b, N, NULL, IA, "op_a");
  ASSERT_GEMM_FAILS(ctx, d, a, N, b, (tpla_op_t)-1, NULL, IA, "op_b");
  tpla_matrix_t a64 = a, b64 = b, d64 = d;
  a64.dtype = b64.dtype = d64.dtype = TPLA_FLOAT64; /* fp64 is for collectives only */
  ASSERT_GEMM_FAILS(ctx, d64, a64, N, b64, N, NULL, IA, "a");
  tpla_matrix_t a8 = a, b8 = b;
  a8.dtype = b8.dtype = TPLA_UINT8;
  ASSERT_GEMM_FAILS(ctx, d, a8, N, b8, N, NULL, IA, "a");
  tpla_matrix_t b16 = b;
  b16.dtype = TPLA_FLOAT16; /* A and B must match */
  ASSERT_GEMM_FAILS(ctx, d, a, N, b16, N, NULL, IA, "b");
  tpla_matrix_t ah = a, bh = b, dbf = d, dh = d;
  ah.dtype = bh.dtype = TPLA_FLOAT16;
  dbf.dtype = TPLA_BFLOAT16; /* D is the input dtype or fp32 */
  ASSERT_GEMM_FAILS(ctx, dbf, ah, N, bh, N, NULL, IA, "d");
  dh.dtype = TPLA_FLOAT16;
  ASSERT_GEMM_FAILS(ctx, dh, a, N, b, N, NULL, IA, "d");
  (void)T;
  close_ctx(ctx);
}

static void test_gemm_bad_shapes(void) {
  const tpla_op_t N = TPLA_OP_N, T = TPLA_OP_T;
  tpla_ctx_t ctx = open_ctx();
  gemm_reset();
  tpla_matrix_t d = gm_d(), a = gm_a(), b = gm_b();
  tpla_matrix_t b_wrong = {b_buf, 4, 3, 3, TPLA_FLOAT32}; /* k = 4, A has k = 3 */
  ASSERT_GEMM_FAILS(ctx, d, a, N, b_wrong, N, NULL, IA, "b");
  ASSERT_GEMM_FAILS(ctx, d, a, T, b, N, NULL, IA, "b"); /* op(A) is 3x4: k = 4 */
  ASSERT_GEMM_FAILS(ctx, d, a, N, b, T, NULL, IA, "b"); /* op(B) is 5x3 */
  tpla_matrix_t d_wide = d, d_tall = d;
  d_wide.cols = 6;
  ASSERT_GEMM_FAILS(ctx, d_wide, a, N, b, N, NULL, IA, "d");
  d_tall.rows = 3;
  ASSERT_GEMM_FAILS(ctx, d_tall, a, N, b, N, NULL, IA, "d");
  /* m beyond 2^31-1: valid views that no executor takes (never touched) */
  tpla_matrix_t big_a = {a_buf, (int64_t)1 << 31, 1, 1, TPLA_FLOAT32};
  tpla_matrix_t big_b = {b_buf, 1, 1, 1, TPLA_FLOAT32};
  tpla_matrix_t big_d = {d_buf, (int64_t)1 << 31, 1, 1, TPLA_FLOAT32};
  ASSERT_STATUS(tpla_gemm(ctx, big_d, big_a, N, big_b, N, NULL, NULL), TPLA_ERROR_NOT_SUPPORTED);
  ASSERT_CONTAINS(tpla_last_error(), "tpla_gemm");
  ASSERT_CONTAINS(tpla_last_error(), "m=2147483648");
  ASSERT_TRUE(gemm_untouched());
  close_ctx(ctx);
}

static void test_gemm_bad_args_struct(void) {
  const tpla_op_t N = TPLA_OP_N;
  tpla_ctx_t ctx = open_ctx();
  gemm_reset();
  tpla_matrix_t d = gm_d(), a = gm_a(), b = gm_b();
  tpla_gemm_args_t args = TPLA_GEMM_ARGS_INIT;
  args.size = sizeof args - 4;
  ASSERT_GEMM_FAILS(ctx, d, a, N, b, N, &args, IA, "args");
  args = (tpla_gemm_args_t)TPLA_GEMM_ARGS_INIT;
  args.alpha = NAN;
  ASSERT_GEMM_FAILS(ctx, d, a, N, b, N, &args, IA, "args");
  args = (tpla_gemm_args_t)TPLA_GEMM_ARGS_INIT;
  args.beta = INFINITY;
  ASSERT_GEMM_FAILS(ctx, d, a, N, b, N, &args, IA, "args");
  close_ctx(ctx);
}

static void test_gemm_output_overlaps_input(void) {
  const tpla_op_t N = TPLA_OP_N;
  tpla_ctx_t ctx = open_ctx();
  gemm_reset();
  tpla_matrix_t a = gm_a(), b = gm_b();
  tpla_matrix_t d_on_a = {a_buf + 1, 4, 5, 6, TPLA_FLOAT32}; /* inside A's extent */
  tpla_matrix_t d_on_b = {b_buf, 4, 5, 5, TPLA_FLOAT32};     /* exactly B's memory */
  ASSERT_GEMM_FAILS(ctx, d_on_a, a, N, b, N, NULL, IA, "d");
  ASSERT_GEMM_FAILS(ctx, d_on_b, a, N, b, N, NULL, IA, "d");
  /* same pitch, interleaved columns that collide: A cols [0,3), D cols [2,7) of ld 7 */
  static float wide[4 * 7];
  memset(wide, SENTINEL, sizeof wide);
  float wide_copy[4 * 7];
  memcpy(wide_copy, wide, sizeof wide);
  tpla_matrix_t a7 = {wide, 4, 3, 7, TPLA_FLOAT32}, d7 = {wide + 2, 4, 5, 7, TPLA_FLOAT32};
  ASSERT_FAILS(tpla_gemm(ctx, d7, a7, N, b, N, NULL, NULL), IA, "tpla_gemm", "d");
  ASSERT_TRUE(memcmp(wide, wide_copy, sizeof wide) == 0);
  /* same pitch (8), different rows: A's one row, floats [6, 10), runs past the end of its
   * pitch row into the next one, where D's row, floats [8, 10), lies */
  static float spill[16];
  memset(spill, SENTINEL, sizeof spill);
  float spill_copy[16];
  memcpy(spill_copy, spill, sizeof spill);
  tpla_matrix_t a_sp = {spill + 6, 1, 4, 8, TPLA_FLOAT32};
  tpla_matrix_t d_sp = {spill + 8, 1, 2, 8, TPLA_FLOAT32};
  tpla_matrix_t b_sp = {b_buf, 4, 2, 5, TPLA_FLOAT32};
  ASSERT_FAILS(tpla_gemm(ctx, d_sp, a_sp, N, b_sp, N, NULL, NULL), IA, "tpla_gemm", "d");
  ASSERT_TRUE(memcmp(spill, spill_copy, sizeof spill) == 0);
  /* different pitches: D's rows at floats 0, 10, 20, 30 (ld 10), A's at 4, 7, 10, 13 (ld 3):
   * A's row 2 lies in D's row 1 (the same-pitch walk alone would miss it) */
  static float pitches[40];
  memset(pitches, SENTINEL, sizeof pitches);
  float pitches_copy[40];
  memcpy(pitches_copy, pitches, sizeof pitches);
  tpla_matrix_t d10 = {pitches, 4, 4, 10, TPLA_FLOAT32}, a3 = {pitches + 4, 4, 3, 3, TPLA_FLOAT32};
  tpla_matrix_t b34 = {b_buf, 3, 4, 5, TPLA_FLOAT32};
  ASSERT_FAILS(tpla_gemm(ctx, d10, a3, N, b34, N, NULL, NULL), IA, "tpla_gemm", "d");
  ASSERT_TRUE(memcmp(pitches, pitches_copy, sizeof pitches) == 0);
  close_ctx(ctx);
}

int main(void) {
  TEST(test_value_functions_with_unknown_values);
  TEST(test_get_features_bad_args);
  TEST(test_device_peer_access_bad_args);
  TEST(test_nccl_unique_id_bad_args);
  TEST(test_nccl_comm_create_bad_args);
  TEST(test_ctx_create_nccl_bad_args);
  TEST(test_host_group_create_bad_args);
  TEST(test_host_group_destroy_with_live_context);
  TEST(test_ctx_create_host_bad_args);
  TEST(test_ctx_queries_bad_args);
  TEST(test_allreduce_bad_args);
  TEST(test_allgatherv_bad_args);
  TEST(test_reduce_scatterv_bad_args);
  TEST(test_broadcast_bad_args);
  TEST(test_sendrecv_bad_args);
  TEST(test_barrier_bad_args);
  TEST(test_gemm_bad_views);
  TEST(test_gemm_bad_ops_and_dtypes);
  TEST(test_gemm_bad_shapes);
  TEST(test_gemm_bad_args_struct);
  TEST(test_gemm_output_overlaps_input);
  return test_summary();
}
