"""run33_rs_patch.py - the experiment patch of bench/device_run33.sh, applied to a
copy of the tree (argv[1]): GEMM+ReduceScatter's own rows without the fused
epilogue. TPLA_RUN33=lagL computes own chunk c (beta 0) and then, L chunks
later, waits for chunk c - L's partials and folds them in (L >= chunks: every
GEMM first, then the folds), all on compute lane 1; altL does the same with the
own chunks alternating between the two compute lanes (lane 0 after its
partials). Unset: the library's fused schedule. Not part of the library."""
import sys

root = sys.argv[1]
path = root + "/src/core/overlap_exec.c"
s = open(path).read()
s = s.replace('#include "overlap.h"\n', '#include "overlap.h"\n#include <stdlib.h>\n#include <string.h>\n', 1)
anchor = "static tpla_status_t rs_overlap(ovl_plan_t *p, const ovl_call_t *c) {\n"
assert s.count(anchor) == 1
variant = r'''static tpla_status_t run33_own_rows(ovl_plan_t *p, const ovl_call_t *c, int lag, bool alt) {
  const int64_t rows = ovl_rows(p, p->rank);
  const size_t es = tpla_dtype_size(p->d_dtype), stride = (size_t)rows * (size_t)p->n;
  tpla_matrix_t a = ovl_rows_of(c->a, p->offs[p->rank], rows);
  const char *slots = (const char *)slot(p, 1).data;
  const int C = p->chunks;
  for (int ci = 0; ci < C + lag; ci++) {
    int64_t m0, mn;
    if (ci < C) {
      ovl_chunk(rows, C, p->tail, ci, &m0, &mn);
      int lane = alt && ci % 2 ? OVL_LANE_COMPUTE0 : OVL_LANE_COMPUTE1;
      if (mn > 0)
        TPLA_TRY(gemm(p, lane, ovl_rows_of(c->d, m0, mn), ovl_rows_of(a, m0, mn), c->b, c->alpha,
                      0.0f, c->bias));
    }
    int fi = ci - lag;
    if (fi < 0 || fi >= C)
      continue;
    ovl_chunk(rows, C, p->tail, fi, &m0, &mn);
    if (mn == 0)
      continue;
    int lane = alt && fi % 2 ? OVL_LANE_COMPUTE0 : OVL_LANE_COMPUTE1;
    for (int i = 1; i < p->nranks; i++)
      TPLA_TRY(p->ops->arrival(p->xp, lane, ovl_flag(p, 0, i, fi), p->seq));
    TPLA_TRY(fold(p, lane, ovl_rows_of(c->d, m0, mn), 1.0f, slots + (size_t)m0 * (size_t)p->n * es,
                  stride, p->nranks - 1, NULL, no_view));
  }
  return TPLA_SUCCESS;
}

'''
s = s.replace(anchor, variant + anchor, 1)
old = """  if (p->nranks > 1 && c->beta == 0.0f) /* D's old values are not needed: fuse */
    return own_rows_fused(p, c, lane, c->d, c->bias, NULL);
"""
assert s.count(old) == 1
new = """  const char *v33 = getenv("TPLA_RUN33");
  if (p->nranks > 1 && c->beta == 0.0f && v33 != NULL && v33[0] != '\\0')
    return run33_own_rows(p, c, atoi(v33 + 3), strncmp(v33, "alt", 3) == 0);
""" + old
s = s.replace(old, new, 1)
open(path, "w").write(s)
print("patched")
