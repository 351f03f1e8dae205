"""run29_patch.py - the experiment patch of bench/device_run29.sh, applied to a
copy of the tree (argv[1]): a prelude before FP8 AG+GEMM's own rows' GEMM on
compute lane 0, picked by the environment variable TPLA_RUN29 (none, b, a,
s<microseconds>). Not part of the library."""
import sys

root = sys.argv[1]
ovl = root + "/src/core/overlap_exec.c"
s = open(ovl).read()
s = s.replace('#include "overlap.h"\n',
              '#include "overlap.h"\n#include <stdlib.h>\n'
              'int run29_spin(long long ns, void *stream); /* fp8_kernels.cu (patched) */\n', 1)
anchor = ("  int lane = OVL_LANE_COMPUTE0;\n"
          "  TPLA_TRY(gemm(p, lane, ovl_rows_of(c->d, p->offs[r], own.rows)")
assert s.count(anchor) == 1, "anchor in overlap_exec.c"
prelude = """  { /* run 29 experiment */
    const char *v = getenv("TPLA_RUN29");
    if (p->fp8 && v != NULL && v[0] == 'b')
      TPLA_TRY(x->amax(p->xp, OVL_LANE_COMPUTE0, c->b, scale_of(p, r) + 1));
    if (p->fp8 && v != NULL && v[0] == 'a') {
      int64_t rows = c->b.rows * c->b.cols / (c->a.cols > 0 ? c->a.cols : 1);
      rows = rows < c->a.rows ? rows : c->a.rows;
      TPLA_TRY(x->amax(p->xp, OVL_LANE_COMPUTE0, ovl_rows_of(c->a, 0, rows), scale_of(p, r) + 1));
    }
    if (p->fp8 && v != NULL && v[0] == 's' &&
        run29_spin(1000LL * atoll(v + 1), x->stream(p->xp, OVL_LANE_COMPUTE0)) != 0)
      return tpla_fail(TPLA_ERROR_INTERNAL, "run29", "spin kernel failed");
  }
"""
s = s.replace(anchor, prelude + anchor, 1)
open(ovl, "w").write(s)

fp8 = root + "/src/cuda/fp8_kernels.cu"
k = open(fp8).read()
k += """
/* run 29 experiment: one warp spins for `ns` nanoseconds (no memory traffic). */
__global__ void run29_spin_kernel(long long ns) {
  unsigned long long t0, t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
  do {
    __nanosleep(100);
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  } while ((long long)(t - t0) < ns);
}
extern "C" int run29_spin(long long ns, void *stream) {
  run29_spin_kernel<<<1, 32, 0, static_cast<cudaStream_t>(stream)>>>(ns);
  return cudaGetLastError() == cudaSuccess ? 0 : 1;
}
"""
open(fp8, "w").write(k)
print("patched")
