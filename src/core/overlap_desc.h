/*
 * overlap_desc.h - the overlap plans' descriptors as every rank announces
 * them at creation (overlap_desc.c): a fixed-size summary per rank, exchanged
 * by every rank even when its arguments are bad, so that all ranks reach the
 * same verdict (overlap_plan.c).
 */
#ifndef TPLA_OVERLAP_DESC_H
#define TPLA_OVERLAP_DESC_H

#include "overlap.h"

#define OVL_MSG_LEN 200

/* What every rank announces. int32 fields first, then int64, then chars:
 * no padding, the same layout in every process. */
typedef struct {
  int32_t status, kind, op_b, dtype, d_dtype, bias, allow_tf32, mode, transport, chunks, tail,
      window_group;
  int64_t m, rows, k, n;
  char message[OVL_MSG_LEN];
} ovl_summary_t;
_Static_assert(sizeof(ovl_summary_t) == 12 * 4 + 4 * 8 + OVL_MSG_LEN, "ovl_summary_t has padding");

extern const char *const ovl_kind_name[]; /* by ovl_kind_t */

static inline bool ovl_fp8_dtype(int t) { return t == TPLA_FLOAT8_E4M3 || t == TPLA_FLOAT8_E5M2; }

/* msg (OVL_MSG_LEN) = the formatted text; evaluates to st. */
#define ovl_bad(msg, st, ...) tpla_msg((msg), OVL_MSG_LEN, (st), __VA_ARGS__)

/* Check a descriptor and copy it into *s; on a bad one, the status, with
 * s->message saying why. */
tpla_status_t ovl_summarize_ag(ovl_summary_t *s, const tpla_ag_gemm_desc_t *d);
tpla_status_t ovl_summarize_rs(ovl_summary_t *s, const tpla_gemm_rs_desc_t *d);
tpla_status_t ovl_summarize_ar(ovl_summary_t *s, const tpla_gemm_ar_desc_t *d);

/* True if rank r's summary differs from rank 0's in a field that must
 * agree; msg (OVL_MSG_LEN) names the first such field and both values. */
bool ovl_differs(char *msg, const ovl_summary_t *s0, const ovl_summary_t *s, int r);

#endif /* TPLA_OVERLAP_DESC_H */
