"""run30_trace_patch.py - the experiment patch of bench/device_run30.sh, applied
to a copy of the tree (argv[1]): a per-call timeline of the CUDA overlap
transport. With TPLA_TRACE=N, the N-th call of every transport (plan) records
CUDA events around each push/pull, lane release, GEMM and fold, then waits for
the call and prints the events' times from the call's start to stderr:
"TRACE rank R call N: <us> <label>". Not part of the library."""
import sys

from patch_util import patch

root = sys.argv[1]

patch(root + "/src/cuda/transport.h", [
    ("  int rehearsal;              /* plan-time rehearsal: no peer is announced, written or waited */\n};\n",
     "  int rehearsal;              /* plan-time rehearsal: no peer is announced, written or waited */\n"
     "  int tr_n, tr_calls;         /* run 30 trace */\n"
     "  cudaEvent_t tr_ev[256];\n"
     "  char tr_label[256][64];\n};\n"
     "void run30_mark(tpla_xport_t *xp, cudaStream_t st, const char *fmt, ...);\n"),
])

patch(root + "/src/cuda/transport.c", [
    ("#include <stdio.h>\n#include <string.h>\n",
     "#include <stdarg.h>\n#include <stdio.h>\n#include <stdlib.h>\n#include <string.h>\n\n"
     "void run30_mark(tpla_xport_t *xp, cudaStream_t st, const char *fmt, ...) {\n"
     "  if (xp->tr_n < 0 || xp->tr_n >= 256)\n    return;\n"
     "  int i = xp->tr_n++;\n"
     "  if (xp->tr_ev[i] == NULL && cudaEventCreate(&xp->tr_ev[i]) != cudaSuccess)\n    return;\n"
     "  va_list ap;\n  va_start(ap, fmt);\n"
     "  vsnprintf(xp->tr_label[i], sizeof xp->tr_label[i], fmt, ap);\n  va_end(ap);\n"
     "  cudaEventRecord(xp->tr_ev[i], st);\n}\n"),
    ("  TPLA_TRY(tpla_device_guard_enter(&xp->guard, xp->device, fn));\n",
     "  TPLA_TRY(tpla_device_guard_enter(&xp->guard, xp->device, fn));\n"
     "  const char *tv = getenv(\"TPLA_TRACE\");\n"
     "  xp->tr_calls += !xp->rehearsal;\n"
     "  xp->tr_n = tv != NULL && !xp->rehearsal && xp->tr_calls == atoi(tv) ? 0 : -1;\n"
     "  run30_mark(xp, (cudaStream_t)stream, \"begin (%s)\", fn);\n"),
    ("  cudaStream_t caller = (cudaStream_t)stream;\n  tpla_status_t first = TPLA_SUCCESS;\n",
     "  cudaStream_t caller = (cudaStream_t)stream;\n  tpla_status_t first = TPLA_SUCCESS;\n"
     "  for (int s = 0; s < XP_STREAMS; s++)\n"
     "    if (streams_used(xp, s))\n"
     "      run30_mark(xp, xp->streams[s], \"stream %d done\", s);\n"),
    ("  tpla_device_guard_exit(&xp->guard);\n  return first;\n}\n",
     "  if (xp->tr_n > 0 && cudaStreamSynchronize(caller) == cudaSuccess) {\n"
     "    for (int i = 0; i < xp->tr_n; i++) {\n"
     "      float ms = 0.0f;\n"
     "      cudaEventElapsedTime(&ms, xp->tr_ev[0], xp->tr_ev[i]);\n"
     "      fprintf(stderr, \"TRACE rank %d call %d: %9.1f us  %s\\n\", xp->rank, xp->tr_calls,\n"
     "              1000.0 * ms, xp->tr_label[i]);\n"
     "    }\n"
     "    xp->tr_n = -1;\n  }\n"
     "  tpla_device_guard_exit(&xp->guard);\n  return first;\n}\n"),
    ("    TPLA_TRY(xp_wait(xp, st, xp_ready_word(xp, r, s->to), seq, \"wait for a peer's ready\"));\n",
     "    TPLA_TRY(xp_wait(xp, st, xp_ready_word(xp, r, s->to), seq, \"wait for a peer's ready\"));\n"
     "    run30_mark(xp, st, \"push->%d flag %d: peer ready\", s->to, s->flag);\n"),
    ("    return xp_write(xp, st, xp_step_word(xp, s->to, s->flag), seq, \"signal a pushed chunk\");\n",
     "    run30_mark(xp, st, \"push->%d flag %d: copied %lldx%lld\", s->to, s->flag,\n"
     "               (long long)v->rows, (long long)v->cols);\n"
     "    return xp_write(xp, st, xp_step_word(xp, s->to, s->flag), seq, \"signal a pushed chunk\");\n"),
    ("    TPLA_TRY(xp_wait(xp, st, xp_step_word(xp, r, s->flag), seq, \"wait for a published slice\"));\n",
     "    TPLA_TRY(xp_wait(xp, st, xp_step_word(xp, r, s->flag), seq, \"wait for a published slice\"));\n"
     "    run30_mark(xp, st, \"pull<-%d flag %d: published\", s->from, s->flag);\n"),
    ("  CUDA_TRY(xp->fn, cudaEventRecord(xp->flag_events[s->flag], st));\n  return TPLA_SUCCESS;\n}\n\nstatic tpla_status_t xp_arrival",
     "  run30_mark(xp, st, \"pull/step flag %d: done\", s->flag);\n"
     "  CUDA_TRY(xp->fn, cudaEventRecord(xp->flag_events[s->flag], st));\n  return TPLA_SUCCESS;\n}\n\nstatic tpla_status_t xp_arrival"),
    ("  return xp_wait(xp, st, xp_step_word(xp, xp->rank, flag), seq, \"wait for a chunk\");\n",
     "  tpla_status_t w = xp_wait(xp, st, xp_step_word(xp, xp->rank, flag), seq, \"wait for a chunk\");\n"
     "  run30_mark(xp, st, \"lane %d: flag %d arrived\", lane, flag);\n  return w;\n"),
])

patch(root + "/src/cuda/transport_gemm.c", [
    ("tpla_status_t xp_fold(tpla_xport_t *xp, int lane, const ovl_fold_t *f) {",
     "static tpla_status_t xp_fold_inner(tpla_xport_t *xp, int lane, const ovl_fold_t *f) {"),
    ("tpla_status_t xp_gemm(tpla_xport_t *xp, int lane, const tpla_gemm_call_t *g, const void *bias,\n"
     "                      const tpla_matrix_t *c) {",
     "static tpla_status_t xp_gemm_inner(tpla_xport_t *xp, int lane, const tpla_gemm_call_t *g,\n"
     "                                   const void *bias, const tpla_matrix_t *c) {"),
])
g = open(root + "/src/cuda/transport_gemm.c").read()
g = g.replace("    TPLA_TRY(xp_fold(xp, lane, &f));", "    TPLA_TRY(xp_fold_inner(xp, lane, &f));")
g += """
tpla_status_t xp_fold(tpla_xport_t *xp, int lane, const ovl_fold_t *f) {
  run30_mark(xp, xp_lane_stream(xp, lane), "lane %d: fold %lldx%lld starts", lane,
             (long long)f->y.rows, (long long)f->y.cols);
  tpla_status_t s = xp_fold_inner(xp, lane, f);
  run30_mark(xp, xp_lane_stream(xp, lane), "lane %d: fold ends", lane);
  return s;
}

tpla_status_t xp_gemm(tpla_xport_t *xp, int lane, const tpla_gemm_call_t *g, const void *bias,
                      const tpla_matrix_t *c) {
  run30_mark(xp, xp_lane_stream(xp, lane), "lane %d: GEMM %lldx%lldx%lld starts", lane,
             (long long)g->m, (long long)g->n, (long long)g->k);
  tpla_status_t s = xp_gemm_inner(xp, lane, g, bias, c);
  run30_mark(xp, xp_lane_stream(xp, lane), "lane %d: GEMM ends", lane);
  return s;
}
"""
open(root + "/src/cuda/transport_gemm.c", "w").write(g)
print("patched")
