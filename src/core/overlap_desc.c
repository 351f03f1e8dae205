/*
 * overlap_desc.c - the overlap plans' descriptors as every rank announces
 * them (overlap_desc.h): each public descriptor checked and copied into a
 * fixed-size summary, and the first field in which two ranks' summaries
 * disagree. overlap_plan.c builds a plan from the agreed summaries.
 */
#include "overlap_desc.h"

#include <inttypes.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *const ovl_kind_name[] = {"AllGather+GEMM", "GEMM+ReduceScatter", "GEMM+AllReduce"};

static bool input_dtype(int t) {
  return t == TPLA_FLOAT32 || t == TPLA_FLOAT16 || t == TPLA_BFLOAT16;
}

/* Checks shared by the three descriptors (already copied into s). */
static tpla_status_t check_common(ovl_summary_t *s) {
  const tpla_status_t IA = TPLA_ERROR_INVALID_ARGUMENT;
  char *msg = s->message;
  /* tuning: the last chunk's size as 1/tail of the others (the ranks must agree) */
  const char *tail = getenv("TPLA_OVERLAP_TAIL");
  if (tail != NULL && *tail != '\0') {
    char *end;
    long v = strtol(tail, &end, 10);
    if (*end != '\0' || v < 0 || v > 16)
      return ovl_bad(msg, IA, "environment TPLA_OVERLAP_TAIL=%s is not an integer in 0..16 (0: "
                     "automatic)", tail);
    s->tail = (int32_t)v;
  }
  /* experiments: overlap_plan.c's direct partials, the CUDA transport's GEMM tuning */
  static const char *const switches[] = {"TPLA_OVERLAP_DIRECT", "TPLA_OVERLAP_TUNE"};
  for (int i = 0; i < 2; i++) {
    const char *v = getenv(switches[i]);
    if (v != NULL && *v != '\0' && strcmp(v, "0") != 0 && strcmp(v, "1") != 0)
      return ovl_bad(msg, IA, "environment %s=%s is not 0 or 1", switches[i], v);
  }
  if (s->op_b != TPLA_OP_N && s->op_b != TPLA_OP_T)
    return ovl_bad(msg, IA, "argument 'desc': op_b %d is neither TPLA_OP_N nor TPLA_OP_T", s->op_b);
  if (!input_dtype(s->dtype) && !ovl_fp8_dtype(s->dtype))
    return ovl_bad(msg, IA, "argument 'desc': dtype %s (%d) is not fp32, fp16, bf16, e4m3 or e5m2",
                   tpla_dtype_name((tpla_dtype_t)s->dtype), s->dtype);
  if (ovl_fp8_dtype(s->dtype) && !input_dtype(s->d_dtype))
    return ovl_bad(msg, IA, "argument 'desc': d_dtype %s: an FP8 plan outputs bf16, fp16 or fp32 "
                   "(its reductions never run in FP8)", tpla_dtype_name((tpla_dtype_t)s->d_dtype));
  if (!ovl_fp8_dtype(s->dtype) && s->d_dtype != s->dtype && s->d_dtype != TPLA_FLOAT32)
    return ovl_bad(msg, IA, "argument 'desc': d_dtype %s must be dtype (%s) or fp32",
               tpla_dtype_name((tpla_dtype_t)s->d_dtype), tpla_dtype_name((tpla_dtype_t)s->dtype));
  if (s->bias != 0 && s->bias != 1)
    return ovl_bad(msg, IA, "argument 'desc': bias %d is not 0 or 1", s->bias);
  if (s->allow_tf32 != 0 && s->allow_tf32 != 1)
    return ovl_bad(msg, IA, "argument 'desc': allow_tf32 %d is not 0 or 1", s->allow_tf32);
  if (s->mode < TPLA_OVERLAP_AUTO || s->mode > TPLA_OVERLAP_SERIAL)
    return ovl_bad(msg, IA, "argument 'desc': unknown mode %d", s->mode);
  if (s->transport < TPLA_TRANSPORT_AUTO || s->transport > TPLA_TRANSPORT_SENDRECV)
    return ovl_bad(msg, IA, "argument 'desc': transport %d is not AUTO, PEER or SENDRECV",
                   s->transport);
  if (s->chunks < 0 || s->chunks > OVL_MAX_CHUNKS)
    return ovl_bad(msg, IA, "argument 'desc': chunks %d is not in [0, %d] (0: automatic)",
                   s->chunks, OVL_MAX_CHUNKS);
  if (s->window_group < 0)
    return ovl_bad(msg, IA, "argument 'desc': window_group %d is negative (0: buffers of the "
                   "plan's own)", s->window_group);
  int64_t big = s->m > s->rows ? s->m : s->rows;
  big = big > s->k ? big : s->k;
  big = big > s->n ? big : s->n;
  if (big > INT32_MAX)
    return ovl_bad(msg, TPLA_ERROR_NOT_SUPPORTED,
                   "argument 'desc': sizes m=%" PRId64 " rows=%" PRId64 " k=%" PRId64 " n=%" PRId64
                   " exceed 2^31-1", s->m, s->rows, s->k, s->n);
  return TPLA_SUCCESS;
}

/* What the three descriptors share: rejects a NULL descriptor or a wrong
 * size field (returning from the caller), then copies the common fields,
 * k and n. A descriptor from a caller built before window_group (its size
 * ends there) has no group. */
#define SUMMARIZE_COMMON(s, d, type, init)                                                 \
  do {                                                                                     \
    if ((d) == NULL)                                                                       \
      return ovl_bad((s)->message, TPLA_ERROR_INVALID_ARGUMENT, "argument 'desc' is NULL");\
    if ((d)->size != sizeof(type) && (d)->size != offsetof(type, window_group))           \
      return ovl_bad((s)->message, TPLA_ERROR_INVALID_ARGUMENT,                            \
                     "argument 'desc': size field is %zu, expected %zu (initialize with "  \
                     init ")", (d)->size, sizeof(type));                                   \
    (s)->op_b = (int32_t)(d)->op_b;                                                        \
    (s)->dtype = (int32_t)(d)->dtype;                                                      \
    (s)->d_dtype = (int32_t)(d)->d_dtype;                                                  \
    (s)->bias = (d)->bias;                                                                 \
    (s)->allow_tf32 = (d)->allow_tf32;                                                     \
    (s)->mode = (int32_t)(d)->mode;                                                        \
    (s)->transport = (int32_t)(d)->transport;                                              \
    (s)->chunks = (d)->chunks;                                                             \
    (s)->window_group = (d)->size == sizeof(type) ? (d)->window_group : 0;                 \
    (s)->k = (d)->k;                                                                       \
    (s)->n = (d)->n;                                                                       \
  } while (0)

tpla_status_t ovl_summarize_ag(ovl_summary_t *s, const tpla_ag_gemm_desc_t *d) {
  SUMMARIZE_COMMON(s, d, tpla_ag_gemm_desc_t, "TPLA_AG_GEMM_DESC_INIT");
  s->rows = d->local_rows;
  if (d->local_rows < 0 || d->k <= 0 || d->n < 0)
    return ovl_bad(s->message, TPLA_ERROR_INVALID_ARGUMENT,
                   "argument 'desc': local_rows %" PRId64 " (>= 0), k %" PRId64 " (> 0), n %"
                   PRId64 " (>= 0) out of range", d->local_rows, d->k, d->n);
  return check_common(s);
}

tpla_status_t ovl_summarize_rs(ovl_summary_t *s, const tpla_gemm_rs_desc_t *d) {
  SUMMARIZE_COMMON(s, d, tpla_gemm_rs_desc_t, "TPLA_GEMM_RS_DESC_INIT");
  s->m = d->m;
  s->rows = d->local_rows;
  if (d->m <= 0 || d->local_rows < -1 || d->local_rows > d->m || d->k < 0 || d->n <= 0)
    return ovl_bad(s->message, TPLA_ERROR_INVALID_ARGUMENT,
                   "argument 'desc': m %" PRId64 " (> 0), local_rows %" PRId64 " (-1 or 0..m), k %"
                   PRId64 " (>= 0), n %" PRId64 " (> 0) out of range", d->m, d->local_rows, d->k,
                   d->n);
  return check_common(s);
}

tpla_status_t ovl_summarize_ar(ovl_summary_t *s, const tpla_gemm_ar_desc_t *d) {
  SUMMARIZE_COMMON(s, d, tpla_gemm_ar_desc_t, "TPLA_GEMM_AR_DESC_INIT");
  s->m = d->m;
  s->rows = -1;
  if (d->m <= 0 || d->k < 0 || d->n <= 0)
    return ovl_bad(s->message, TPLA_ERROR_INVALID_ARGUMENT,
                   "argument 'desc': m %" PRId64 " (> 0), k %" PRId64 " (>= 0), n %" PRId64
                   " (> 0) out of range", d->m, d->k, d->n);
  return check_common(s);
}

/* ---- agreement ---------------------------------------------------------------- */

/* The first field that must agree and in which rank r differs from rank 0. */
bool ovl_differs(char *msg, const ovl_summary_t *s0, const ovl_summary_t *s, int r) {
  const char *what = NULL;
  int64_t v = 0, v0 = 0;
  bool dtype = false;
  ovl_kind_t kind = (ovl_kind_t)s0->kind;
#define FIELD(name, cond, is_dtype)                                        \
  if (what == NULL && (cond) && s->name != s0->name) {                     \
    what = #name;                                                          \
    v = s->name;                                                           \
    v0 = s0->name;                                                         \
    dtype = is_dtype;                                                      \
  }
  FIELD(kind, true, false)
  FIELD(m, kind != OVL_AG, false)
  FIELD(k, kind == OVL_AG, false)
  FIELD(n, kind != OVL_AG, false)
  FIELD(dtype, true, true)
  FIELD(d_dtype, kind != OVL_AG, true)
  FIELD(bias, kind == OVL_AR, false)
  FIELD(mode, true, false)
  FIELD(transport, true, false)
  FIELD(chunks, true, false)
  FIELD(tail, true, false)
  FIELD(window_group, true, false)
#undef FIELD
  if (what == NULL)
    return false;
  if (dtype)
    snprintf(msg, OVL_MSG_LEN, "ranks disagree: rank %d has %s = %s, rank 0 has %s", r, what,
             tpla_dtype_name((tpla_dtype_t)v), tpla_dtype_name((tpla_dtype_t)v0));
  else
    snprintf(msg, OVL_MSG_LEN, "ranks disagree: rank %d has %s = %" PRId64 ", rank 0 has %" PRId64,
             r, what, v, v0);
  return true;
}
