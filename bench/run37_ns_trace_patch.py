"""run37_ns_trace_patch.py - the experiment patch of bench/device_run37.sh, applied
to a copy of the tree (argv[1]): a per-call timeline of Newton-Schulz. With
TPLA_TRACE_NS=N, the N-th tpla_ns_execute[_out] of every rank (thread) records
CUDA events before and after the normalization, every op of the X iteration
or the Gram iteration (products, mirrors, axpby, update), every block row of the
Gram (its GEMM on the stream, its all-reduce and placement on the side
stream), then waits for the call and prints the events' times from its start
to stderr: "TRACE_NS rank R: <us> <label>". Not part of the library."""
import sys

from patch_util import patch

root = sys.argv[1]

open(root + "/src/cuda/run37_trace.c", "w").write(r'''/* run 37 experiment: per-call CUDA-event timeline of Newton-Schulz. */
#include <cuda_runtime.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#define RUN37_MAX 1024
static _Thread_local int tr_n = -1, tr_calls;
static _Thread_local cudaEvent_t tr_ev[RUN37_MAX];
static _Thread_local char tr_label[RUN37_MAX][56];

void run37_mark(void *stream, const char *fmt, ...) {
  if (tr_n < 0 || tr_n >= RUN37_MAX)
    return;
  int i = tr_n++;
  if (tr_ev[i] == NULL && cudaEventCreate(&tr_ev[i]) != cudaSuccess)
    return;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(tr_label[i], sizeof tr_label[i], fmt, ap);
  va_end(ap);
  cudaEventRecord(tr_ev[i], (cudaStream_t)stream);
}

void run37_begin(void *stream) {
  const char *v = getenv("TPLA_TRACE_NS");
  tr_calls++;
  tr_n = v != NULL && tr_calls == atoi(v) ? 0 : -1;
  run37_mark(stream, "begin");
}

void run37_end(void *stream, int rank) {
  run37_mark(stream, "end");
  if (tr_n > 0 && cudaStreamSynchronize((cudaStream_t)stream) == cudaSuccess)
    for (int i = 0; i < tr_n; i++) {
      float ms = 0.0f;
      cudaEventElapsedTime(&ms, tr_ev[0], tr_ev[i]);
      fprintf(stderr, "TRACE_NS rank %d: %9.1f us  %s\n", rank, 1000.0 * ms, tr_label[i]);
    }
  tr_n = -1;
}
''')

patch(root + "/src/core/ns.h", [
    ("tpla_status_t ns_shard_poly(",
     "void run37_mark(void *stream, const char *fmt, ...);\n"
     "void run37_begin(void *stream);\n"
     "void run37_end(void *stream, int rank);\n"
     "tpla_status_t ns_shard_poly("),
])

# the execute's end: ns_dist_run's result at 68ce933 (run 37), then ns_pull_settle since 2d5f8cb
normalize = ("  TPLA_TRY(ns_normalize(p->ctx, first, x, p->sumsq, p->nranks > 1, p->safety, p->eps,"
             " stream));\n")
settled = "ns_pull_settle" in open(root + "/src/core/ns_plan.c").read()
run_end = ("  TPLA_TRY(ns_dist_run(p, out, start, stream));\n"
           "  return ns_pull_settle(p->ctx, p->iter.pull, stream);\n" if settled else
           "  return ns_dist_run(p, out, start, stream);\n")
run_traced = ("  tpla_status_t st = ns_dist_run(p, out, start, stream);\n" +
              ("  if (st == TPLA_SUCCESS)\n"
               "    st = ns_pull_settle(p->ctx, p->iter.pull, stream);\n" if settled else ""))
patch(root + "/src/core/ns_plan.c", [
    (normalize + run_end,
     "  run37_begin(stream);\n" + normalize +
     "  run37_mark(stream, \"normalized\");\n" + run_traced +
     "  run37_end(stream, p->ctx->rank);\n"
     "  return st;\n"),
])

patch(root + "/src/core/ns_iter.c", [
    ("    TPLA_TRY(ns_gemm_tf32(ctx, plain(p), op_rows(x, i0, h), op_transpose(op_rows(y, i0, s - i0)),\n"
     "                          1.0f, 0.0f, tf32, stream));\n",
     "    TPLA_TRY(ns_gemm_tf32(ctx, plain(p), op_rows(x, i0, h), op_transpose(op_rows(y, i0, s - i0)),\n"
     "                          1.0f, 0.0f, tf32, stream));\n"
     "    run37_mark(stream, \"  gram block row %lld GEMM done\", (long long)(i0 / t));\n"),
    ("    TPLA_TRY(ns_axpby(ctx, d, p, 1.0f, 0.0f, on));\n  }\n",
     "    TPLA_TRY(ns_axpby(ctx, d, p, 1.0f, 0.0f, on));\n"
     "    run37_mark(on, \"  gram block row %lld all-reduced, placed (side)\", (long long)(i0 / t));\n  }\n"),
    ("      switch (it->ops[i]) {\n",
     "      run37_mark(stream, \"step %d op %d\", k, (int)it->ops[i]);\n"
     "      switch (it->ops[i]) {\n"),
])

# the Gram's call in the Gram iteration: ns_sym_product at 68ce933 (run 37), ns_gram since 84ec97b
gram_iter_src = open(root + "/src/core/ns_gram_iter.c").read()
gram_call = ("    TPLA_TRY(ns_gram(ctx, it, G, place[at], stream));\n"
             if "ns_gram(ctx, it, G, place[at], stream)" in gram_iter_src else
             "    TPLA_TRY(ns_sym_product(ctx, G, place[at], place[at], it->nblocks, 0,\n")
patch(root + "/src/core/ns_gram_iter.c", [
    ("  if (it->split.nranks > 0)\n"
     "    return ns_shard_product(ctx, it, d, x, y, add, alpha, beta, tf32, stream);\n"
     "  TPLA_TRY(ns_sym_product(ctx, d, plain(x), plain(y), product_blocks(it), tf32, NULL, &add, alpha,\n"
     "                          beta, stream));\n"
     "  return ctx->backend->mirror_upper(ctx, d, stream);\n",
     "  run37_mark(stream, \"  product\");\n"
     "  if (it->split.nranks > 0) {\n"
     "    TPLA_TRY(ns_shard_product(ctx, it, d, x, y, add, alpha, beta, tf32, stream));\n"
     "    run37_mark(stream, \"  sharded product + mirror done\");\n"
     "    return TPLA_SUCCESS;\n  }\n"
     "  TPLA_TRY(ns_sym_product(ctx, d, plain(x), plain(y), product_blocks(it), tf32, NULL, &add, alpha,\n"
     "                          beta, stream));\n"
     "  run37_mark(stream, \"  product done\");\n"
     "  TPLA_TRY(ctx->backend->mirror_upper(ctx, d, stream));\n"
     "  run37_mark(stream, \"  mirror done\");\n"
     "  return TPLA_SUCCESS;\n"),
    (gram_call,
     "    run37_mark(stream, \"segment %d: Gram\", k / NS_GRAM_SEGMENT);\n" + gram_call),
    ("    TPLA_TRY(ns_update_square(ctx, it, place, &at, w, alpha, stream)); /* X' = W X + alpha X */\n",
     "    run37_mark(stream, \"  update\");\n"
     "    TPLA_TRY(ns_update_square(ctx, it, place, &at, w, alpha, stream)); /* X' = W X + alpha X */\n"
     "    run37_mark(stream, \"  update done\");\n"),
])
print("patched")
