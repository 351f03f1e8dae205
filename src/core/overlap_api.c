/*
 * overlap_api.c - the calls of the tensor-parallel plans (tpla_ag_gemm,
 * tpla_gemm_rs, tpla_gemm_ar): complete validation of every view and
 * argument against the plan before anything is enqueued (a rejected call
 * writes nothing and does not count), then the schedule (overlap_exec.c).
 * Also the gathered-operand view, the plain row gather that is its
 * fallback, and the context counters.
 */
#include "overlap.h"

#include <inttypes.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>

static bool fp8_dtype(tpla_dtype_t t) { return t == TPLA_FLOAT8_E4M3 || t == TPLA_FLOAT8_E5M2; }

/* B of a call: the plan's dtype, or for an FP8 plan any FP8 type but E5M2
 * with E5M2 (no such tensor-core product). */
static tpla_status_t check_b(const char *fn, const ovl_plan_t *p, const tpla_matrix_t *b) {
  TPLA_TRY(tpla_check_matrix(fn, "b", b));
  if (!p->fp8 && b->dtype != p->dtype)
    return tpla_fail(TPLA_ERROR_INVALID_ARGUMENT, fn, "argument 'b': dtype %s, the plan's is %s",
                     tpla_dtype_name(b->dtype), tpla_dtype_name(p->dtype));
  if (p->fp8 && (!fp8_dtype(b->dtype) ||
                 (b->dtype == TPLA_FLOAT8_E5M2 && p->dtype == TPLA_FLOAT8_E5M2)))
    return tpla_fail(TPLA_ERROR_INVALID_ARGUMENT, fn, "argument 'b': dtype %s with an %s plan: "
                     "B must be e4m3 or e5m2, and not e5m2 with e5m2 A",
                     tpla_dtype_name(b->dtype), tpla_dtype_name(p->dtype));
  int64_t rows = p->op_b == TPLA_OP_N ? p->k : p->n, cols = p->op_b == TPLA_OP_N ? p->n : p->k;
  if (b->rows != rows || b->cols != cols)
    return tpla_fail(TPLA_ERROR_INVALID_ARGUMENT, fn,
                     "argument 'b': %" PRId64 "x%" PRId64 ", the plan expects %" PRId64
                     "x%" PRId64, b->rows, b->cols, rows, cols);
  return TPLA_SUCCESS;
}

/* FP8 on CUDA: rows start at 16-byte boundaries (data and ld * size). */
static tpla_status_t check_fp8_aligned(const char *fn, const char *arg, const tpla_matrix_t *v) {
  size_t row = (size_t)v->ld * tpla_dtype_size(v->dtype);
  if (v->rows > 0 && v->cols > 0 && ((uintptr_t)v->data % 16 || row % 16))
    return tpla_fail(TPLA_ERROR_INVALID_ARGUMENT, fn, "argument '%s': an FP8 plan on the CUDA "
                     "executor needs 16-byte aligned rows (data %p, ld %" PRId64 " x %zu "
                     "bytes)", arg, v->data, v->ld, tpla_dtype_size(v->dtype));
  return TPLA_SUCCESS;
}

/* args->fp8: only on FP8 plans; no d_scale (the outputs are not FP8). */
static tpla_status_t check_fp8(const char *fn, const ovl_plan_t *p, const tpla_fp8_scaling_t *f) {
  const tpla_fp8_scaling_t none = TPLA_FP8_SCALING_INIT;
  if (!p->fp8) {
    if (f->a_scale || f->b_scale || f->d_scale || f->d_amax || f->accum != none.accum ||
        f->scale_mode != none.scale_mode)
      return tpla_fail(TPLA_ERROR_INVALID_ARGUMENT, fn, "argument 'args': fp8 fields set for "
                       "a %s plan (they are for FP8 plans only)", tpla_dtype_name(p->dtype));
    return TPLA_SUCCESS;
  }
  if (f->accum != TPLA_FP8_ACCUM_SPLIT && f->accum != TPLA_FP8_ACCUM_FAST)
    return tpla_fail(TPLA_ERROR_INVALID_ARGUMENT, fn, "argument 'args': fp8.accum %d is "
                     "neither SPLIT nor FAST", (int)f->accum);
  if (f->scale_mode == TPLA_FP8_SCALE_MXFP8)
    return tpla_fail(TPLA_ERROR_NOT_SUPPORTED, fn, "argument 'args': fp8.scale_mode MXFP8: "
                     "block scaling is a Blackwell (compute capability >= 100) cuBLASLt "
                     "feature that tpla does not provide on Hopper or the host executor");
  if (f->scale_mode != TPLA_FP8_SCALE_TENSOR)
    return tpla_fail(TPLA_ERROR_INVALID_ARGUMENT, fn, "argument 'args': unknown fp8.scale_mode "
                     "%d", (int)f->scale_mode);
  if (f->d_scale != NULL)
    return tpla_fail(TPLA_ERROR_INVALID_ARGUMENT, fn, "argument 'args': fp8.d_scale must be "
                     "NULL: the plan outputs %s, not FP8", tpla_dtype_name(p->d_dtype));
  if (p->ctx->executor == TPLA_EXECUTOR_CUDA)
    return tpla_check_fp8_pointers(fn, f);
  return TPLA_SUCCESS;
}

/* A view of the plan's shape and dtype. */
static tpla_status_t check_view(const char *fn, const char *arg, const tpla_matrix_t *v,
                                int64_t rows, int64_t cols, tpla_dtype_t dtype) {
  TPLA_TRY(tpla_check_matrix(fn, arg, v));
  if (v->dtype != dtype)
    return tpla_fail(TPLA_ERROR_INVALID_ARGUMENT, fn, "argument '%s': dtype %s, the plan's is %s",
                     arg, tpla_dtype_name(v->dtype), tpla_dtype_name(dtype));
  if (v->rows != rows || v->cols != cols)
    return tpla_fail(TPLA_ERROR_INVALID_ARGUMENT, fn,
                     "argument '%s': %" PRId64 "x%" PRId64 ", the plan expects %" PRId64
                     "x%" PRId64, arg, v->rows, v->cols, rows, cols);
  return TPLA_SUCCESS;
}

/* Everything of one call, checked; fills *call. `a_rows` is the rows of the
 * plan's A on this rank, (d_rows x p->n) D's shape. */
static tpla_status_t check_call(const char *fn, ovl_plan_t *p, ovl_call_t *call,
                                const tpla_matrix_t *d, const char *d_name,
                                const tpla_matrix_t *a, const char *a_name, int64_t a_rows,
                                int64_t d_rows, const tpla_matrix_t *b,
                                const tpla_overlap_args_t *args, void *stream) {
  if (p->broken) {
    TPLA_TRY(tpla_ctx_check(p->ctx, fn)); /* a failed context's status comes first */
    return tpla_fail(TPLA_ERROR_INVALID_USAGE, fn,
                     "the plan failed in an earlier call (rank %d of %d, call %" PRIu32 "); "
                     "destroy it on every rank and create a new one",
                     p->rank, p->nranks, p->seq);
  }
  TPLA_TRY(check_view(fn, d_name, d, d_rows, p->n, p->d_dtype));
  TPLA_TRY(check_view(fn, a_name, a, a_rows, p->k, p->dtype));
  TPLA_TRY(check_b(fn, p, b));
  if (p->fp8 && p->ctx->executor == TPLA_EXECUTOR_CUDA) { /* what the GEMMs read directly */
    TPLA_TRY(check_fp8_aligned(fn, a_name, a));
    TPLA_TRY(check_fp8_aligned(fn, d_name, d));
    if (p->op_b == TPLA_OP_T) /* op N: B is transposed into the plan's staging first */
      TPLA_TRY(check_fp8_aligned(fn, "b", b));
  }
  tpla_overlap_args_t def = TPLA_OVERLAP_ARGS_INIT;
  if (args != NULL && args->size == offsetof(tpla_overlap_args_t, fp8)) { /* pre-FP8 callers */
    def.alpha = args->alpha, def.beta = args->beta, def.bias = args->bias;
    args = &def;
  } else if (args != NULL && args->size == offsetof(tpla_overlap_args_t, b_version)) {
    def.alpha = args->alpha, def.beta = args->beta, def.bias = args->bias; /* no b_version */
    def.fp8 = args->fp8;
    args = &def;
  }
  if (args == NULL)
    args = &def;
  else if (args->size != sizeof *args)
    return tpla_fail(TPLA_ERROR_INVALID_ARGUMENT, fn,
                     "argument 'args': size field is %zu, expected %zu (initialize with "
                     "TPLA_OVERLAP_ARGS_INIT)", args->size, sizeof *args);
  TPLA_TRY(check_fp8(fn, p, &args->fp8));
  if (!isfinite(args->alpha) || !isfinite(args->beta))
    return tpla_fail(TPLA_ERROR_INVALID_ARGUMENT, fn,
                     "argument 'args': alpha (%g) and beta (%g) must be finite",
                     (double)args->alpha, (double)args->beta);
  if (p->bias && args->bias == NULL && p->n > 0)
    return tpla_fail(TPLA_ERROR_INVALID_ARGUMENT, fn,
                     "argument 'args': bias is NULL but the plan was created with bias = 1 "
                     "(a vector of %" PRId64 " %s elements)", p->n, tpla_dtype_name(p->d_dtype));
  if (!p->bias && args->bias != NULL)
    return tpla_fail(TPLA_ERROR_INVALID_ARGUMENT, fn,
                     "argument 'args': bias given but the plan was created with bias = 0");
  if (tpla_matrices_overlap(d, a) || tpla_matrices_overlap(d, b))
    return tpla_fail(TPLA_ERROR_INVALID_ARGUMENT, fn, "argument '%s': output memory overlaps "
                     "argument '%s' or 'b'", d_name, a_name);
  tpla_matrix_t bias = {(void *)args->bias, 1, p->n, p->n > 0 ? p->n : 1, p->d_dtype};
  if (p->bias && tpla_matrices_overlap(d, &bias))
    return tpla_fail(TPLA_ERROR_INVALID_ARGUMENT, fn,
                     "argument 'args': bias overlaps the output '%s'", d_name);
  /* the plan's (group's) own buffers, which the call writes: a gathered
   * view passed back in would be overwritten while it is read */
  tpla_matrix_t own[2];
  ovl_plan_memory(p, &own[0], &own[1]);
  const tpla_fp8_scaling_t *f = &args->fp8; /* the FP8 scalars: a gathered scale, say */
  tpla_matrix_t scalar[4] = {{(void *)f->a_scale, 1, 1, 1, TPLA_FLOAT32},
                             {(void *)f->b_scale, 1, 1, 1, TPLA_FLOAT32},
                             {(void *)f->d_scale, 1, 1, 1, TPLA_FLOAT32},
                             {f->d_amax, 1, 1, 1, TPLA_FLOAT32}};
  const tpla_matrix_t *views[8] = {d, a, b, p->bias ? &bias : NULL};
  const char *names[8] = {d_name, a_name, "b", "args->bias", "args->fp8.a_scale",
                          "args->fp8.b_scale", "args->fp8.d_scale", "args->fp8.d_amax"};
  for (int i = 0; i < 4; i++)
    views[4 + i] = scalar[i].data != NULL ? &scalar[i] : NULL;
  for (int i = 0; i < 8; i++)
    for (int j = 0; j < 2 && views[i] != NULL; j++)
      if (tpla_matrices_overlap(views[i], &own[j]))
        return tpla_fail(TPLA_ERROR_INVALID_ARGUMENT, fn,
                         "argument '%s' lies in the plan's own %s (a gathered view, say), "
                         "which this call overwrites: copy it out first",
                         names[i], j == 0 ? "transfer window" : "staging memory");
  if (p->ops->cannot_capture != NULL && p->ops->cannot_capture(ovl_group_xport(p), stream))
    return tpla_fail(TPLA_ERROR_INVALID_USAGE, fn,
                     "argument 'stream' is being captured into a CUDA graph, but the plan's "
                     "PEER transport numbers its calls and a graph would replay one number; "
                     "capture plans with transport SENDRECV or mode SERIAL (docs/API.md, "
                     "\"CUDA graphs\")");
  *call = (ovl_call_t){*d,     *a,         *b, args->alpha, args->beta,
                       p->bias ? args->bias : NULL, stream, args->fp8, args->b_version};
  return TPLA_SUCCESS;
}

/* One validated call; a plan of a window group takes the group's buffers and count. */
static tpla_status_t run(ovl_plan_t *p, const ovl_call_t *call, const char *fn) {
  TPLA_TRY(tpla_call_begin(p->ctx, fn, true, call->stream));
  tpla_status_t st = ovl_group_enter(p, fn);
  if (st == TPLA_SUCCESS) {
    st = ovl_run(p, call, fn);
    ovl_group_exit(p, st != TPLA_SUCCESS);
    /* The peers' calls wait for this one's steps: stop them now (REMOTE), as a timeout
     * would, not at their timeout. A failed capture ran nothing: only the plan is broken. */
    if (st != TPLA_SUCCESS && p->nranks > 1 &&
        !(p->ops->capturing != NULL && p->ops->capturing(call->stream))) {
      char why[sizeof p->ctx->failure.why];
      snprintf(why, sizeof why, "%s", tpla_last_error());
      tpla_ctx_fail(p->ctx, st, "rank %d: a call of an overlap plan failed after it began: %s",
                    p->rank, why);
      st = tpla_fail_again(st, why); /* the abort may have set a message of its own */
    }
  }
  tpla_call_end(p->ctx, true, call->stream);
  return st;
}

tpla_status_t tpla_ag_gemm(tpla_ag_gemm_plan_t plan, tpla_matrix_t d, tpla_matrix_t a_local,
                           tpla_matrix_t b, const tpla_overlap_args_t *args, void *stream) {
  static const char fn[] = "tpla_ag_gemm";
  tpla_clear_error();
  if (plan == NULL)
    return tpla_fail(TPLA_ERROR_INVALID_ARGUMENT, fn, "argument 'plan' is NULL");
  ovl_plan_t *p = &plan->p;
  ovl_call_t call;
  TPLA_TRY(check_call(fn, p, &call, &d, "d", &a_local, "a_local", ovl_rows(p, p->rank), p->m, &b,
                      args, stream));
  TPLA_TRY(run(p, &call, fn));
  p->ctx->counters.allgathers++;
  p->ctx->counters.overlap_calls++;
  return TPLA_SUCCESS;
}

tpla_status_t tpla_gemm_rs(tpla_gemm_rs_plan_t plan, tpla_matrix_t d_local, tpla_matrix_t a,
                           tpla_matrix_t b, const tpla_overlap_args_t *args, void *stream) {
  static const char fn[] = "tpla_gemm_rs";
  tpla_clear_error();
  if (plan == NULL)
    return tpla_fail(TPLA_ERROR_INVALID_ARGUMENT, fn, "argument 'plan' is NULL");
  ovl_plan_t *p = &plan->p;
  ovl_call_t call;
  TPLA_TRY(check_call(fn, p, &call, &d_local, "d_local", &a, "a", p->m, ovl_rows(p, p->rank), &b,
                      args, stream));
  TPLA_TRY(run(p, &call, fn));
  p->ctx->counters.reduce_scatters++;
  p->ctx->counters.overlap_calls++;
  return TPLA_SUCCESS;
}

tpla_status_t tpla_gemm_ar(tpla_gemm_ar_plan_t plan, tpla_matrix_t d, tpla_matrix_t a,
                           tpla_matrix_t b, const tpla_overlap_args_t *args, void *stream) {
  static const char fn[] = "tpla_gemm_ar";
  tpla_clear_error();
  if (plan == NULL)
    return tpla_fail(TPLA_ERROR_INVALID_ARGUMENT, fn, "argument 'plan' is NULL");
  ovl_plan_t *p = &plan->p;
  ovl_call_t call;
  TPLA_TRY(check_call(fn, p, &call, &d, "d", &a, "a", p->m, p->m, &b, args, stream));
  TPLA_TRY(run(p, &call, fn));
  p->ctx->counters.allreduces++;
  p->ctx->counters.overlap_calls++;
  return TPLA_SUCCESS;
}

/* ---- the gathered operand ---------------------------------------------------------- */

static const char *no_gathered_why(const ovl_plan_t *p) {
  if (p->broken)
    return "its last call failed";
  if (p->has_gathered)
    return "another plan of its window group has run or was created since";
  return "no call has run yet";
}

tpla_status_t tpla_ag_gemm_plan_has_gathered(tpla_ag_gemm_plan_t plan, int *available) {
  static const char fn[] = "tpla_ag_gemm_plan_has_gathered";
  tpla_clear_error();
  if (plan == NULL || available == NULL)
    return tpla_fail(TPLA_ERROR_INVALID_ARGUMENT, fn, "argument '%s' is NULL",
                     plan == NULL ? "plan" : "available");
  *available = plan->p.has_gathered && ovl_group_holds(&plan->p) && !tpla_ctx_failed(plan->p.ctx);
  return TPLA_SUCCESS;
}

tpla_status_t tpla_ag_gemm_gathered(tpla_ag_gemm_plan_t plan, tpla_matrix_t *gathered) {
  static const char fn[] = "tpla_ag_gemm_gathered";
  tpla_clear_error();
  if (plan == NULL || gathered == NULL)
    return tpla_fail(TPLA_ERROR_INVALID_ARGUMENT, fn, "argument '%s' is NULL",
                     plan == NULL ? "plan" : "gathered");
  ovl_plan_t *p = &plan->p;
  TPLA_TRY(tpla_ctx_check(p->ctx, fn));
  if (!p->has_gathered || !ovl_group_holds(p))
    return tpla_fail(TPLA_ERROR_INVALID_USAGE, fn,
                     "the plan holds no gathered operand (%s); check "
                     "tpla_ag_gemm_plan_has_gathered and fall back to tpla_allgather_rows",
                     no_gathered_why(p));
  *gathered = ovl_dense(p->ops->window(p->xp), 0, p->m, p->k, p->dtype);
  p->ctx->counters.gathered_views++;
  return TPLA_SUCCESS;
}

tpla_status_t tpla_ag_gemm_gathered_scales(tpla_ag_gemm_plan_t plan, const float **scales) {
  static const char fn[] = "tpla_ag_gemm_gathered_scales";
  tpla_clear_error();
  if (plan == NULL || scales == NULL)
    return tpla_fail(TPLA_ERROR_INVALID_ARGUMENT, fn, "argument '%s' is NULL",
                     plan == NULL ? "plan" : "scales");
  ovl_plan_t *p = &plan->p;
  TPLA_TRY(tpla_ctx_check(p->ctx, fn));
  if (!p->fp8)
    return tpla_fail(TPLA_ERROR_INVALID_USAGE, fn, "a %s plan has no scales (FP8 plans only)",
                     tpla_dtype_name(p->dtype));
  if (!p->has_gathered || !ovl_group_holds(p))
    return tpla_fail(TPLA_ERROR_INVALID_USAGE, fn, "the plan holds no gathered operand (%s)",
                     no_gathered_why(p));
  *scales = (const float *)((const char *)p->ops->window(p->xp) + p->scales_off);
  return TPLA_SUCCESS;
}

/* ---- the plain row gather ------------------------------------------------------------ */

tpla_status_t tpla_allgather_rows(tpla_ctx_t ctx, tpla_matrix_t gathered, tpla_matrix_t a_local,
                                  const int64_t *rows, void *stream) {
  static const char fn[] = "tpla_allgather_rows";
  tpla_clear_error();
  if (ctx == NULL)
    return tpla_fail(TPLA_ERROR_INVALID_ARGUMENT, fn, "argument 'ctx' is NULL");
  if (rows == NULL)
    return tpla_fail(TPLA_ERROR_INVALID_ARGUMENT, fn, "argument 'rows' is NULL");
  TPLA_TRY(tpla_check_matrix(fn, "gathered", &gathered));
  TPLA_TRY(tpla_check_matrix(fn, "a_local", &a_local));
  tpla_dtype_t t = gathered.dtype;
  if (t != TPLA_FLOAT32 && t != TPLA_FLOAT16 && t != TPLA_BFLOAT16)
    return tpla_fail(TPLA_ERROR_INVALID_ARGUMENT, fn,
                     "argument 'gathered': dtype %s is not fp32, fp16 or bf16",
                     tpla_dtype_name(t));
  if (a_local.dtype != t)
    return tpla_fail(TPLA_ERROR_INVALID_ARGUMENT, fn,
                     "argument 'a_local': dtype %s differs from gathered's %s",
                     tpla_dtype_name(a_local.dtype), tpla_dtype_name(t));
  if (a_local.cols != gathered.cols)
    return tpla_fail(TPLA_ERROR_INVALID_ARGUMENT, fn,
                     "argument 'a_local': %" PRId64 " columns, gathered has %" PRId64,
                     a_local.cols, gathered.cols);
  if (gathered.rows > 0 && gathered.cols > 0 && gathered.ld != gathered.cols)
    return tpla_fail(TPLA_ERROR_INVALID_ARGUMENT, fn,
                     "argument 'gathered': ld %" PRId64 " must equal cols %" PRId64
                     " (a dense buffer)", gathered.ld, gathered.cols);
  int64_t total = 0, offset = 0;
  for (int q = 0; q < ctx->nranks; q++) {
    if (rows[q] < 0 || rows[q] > INT32_MAX)
      return tpla_fail(TPLA_ERROR_INVALID_ARGUMENT, fn, "argument 'rows': rows[%d] = %" PRId64
                       " is out of range", q, rows[q]);
    if (q == ctx->rank)
      offset = total;
    total += rows[q];
  }
  if (rows[ctx->rank] != a_local.rows || total != gathered.rows)
    return tpla_fail(TPLA_ERROR_INVALID_ARGUMENT, fn,
                     "argument 'rows': rows[%d] = %" PRId64 " (a_local has %" PRId64
                     "), sum %" PRId64 " (gathered has %" PRId64 ")", ctx->rank, rows[ctx->rank],
                     a_local.rows, total, gathered.rows);
  tpla_matrix_t place = ovl_rows_of(gathered, offset, a_local.rows);
  bool in_place = place.data == a_local.data && (a_local.ld == place.ld || a_local.rows <= 1);
  if (!in_place && tpla_matrices_overlap(&gathered, &a_local))
    return tpla_fail(TPLA_ERROR_INVALID_ARGUMENT, fn,
                     "argument 'a_local' overlaps 'gathered' away from its place (row %" PRId64
                     ")", offset);
  size_t *counts = malloc(sizeof *counts * (size_t)ctx->nranks);
  if (counts == NULL)
    return tpla_fail(TPLA_ERROR_OUT_OF_MEMORY, fn, "out of host memory");
  for (int q = 0; q < ctx->nranks; q++)
    counts[q] = (size_t)rows[q] * (size_t)gathered.cols;
  tpla_status_t st = tpla_call_begin(ctx, fn, true, stream);
  if (st == TPLA_SUCCESS) {
    if (!in_place && place.rows > 0 && place.cols > 0)
      st = ctx->backend->axpby(ctx, place, a_local, 1.0f, 0.0f, (tpla_batch_t){0}, stream);
    if (st == TPLA_SUCCESS && total > 0 && gathered.cols > 0) {
      char *send = (char *)gathered.data +
                   (size_t)offset * (size_t)gathered.cols * tpla_dtype_size(t);
      st = ctx->backend->allgatherv(ctx, gathered.data, send, counts, t, stream);
    }
    tpla_call_end(ctx, true, stream);
  }
  free(counts);
  if (st == TPLA_SUCCESS)
    ctx->counters.allgathers++;
  return st;
}

tpla_status_t tpla_ctx_get_counters(tpla_ctx_t ctx, tpla_counters_t *counters) {
  static const char fn[] = "tpla_ctx_get_counters";
  tpla_clear_error();
  if (ctx == NULL || counters == NULL)
    return tpla_fail(TPLA_ERROR_INVALID_ARGUMENT, fn, "argument '%s' is NULL",
                     ctx == NULL ? "ctx" : "counters");
  if (counters->size != sizeof *counters)
    return tpla_fail(TPLA_ERROR_INVALID_ARGUMENT, fn,
                     "argument 'counters': size field is %zu, expected %zu (initialize with "
                     "TPLA_COUNTERS_INIT)", counters->size, sizeof *counters);
  const tpla_ctx_counters_t *c = &ctx->counters;
  *counters = (tpla_counters_t){sizeof *counters, c->allgathers, c->reduce_scatters,
                                c->allreduces, c->overlap_calls, c->gathered_views};
  return TPLA_SUCCESS;
}
