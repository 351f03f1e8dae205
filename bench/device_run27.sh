#!/usr/bin/env bash
# bench/device_run27.sh - the FP8 amax kernel with one atomic per block over
# a bounded grid (run 26 found an 8 MiB amax costing ~125 us in atomics):
# test_gpu_fp8_kernels (incl. the new striding test), test_gpu_fp8 and
# test_gpu_overlap_fp8_reuse, then run 26's experiment build (an amax of B
# before the own rows' GEMM, TPLA_RUN26_TOUCH=b) against none, FP8 AG+GEMM
# (16384, 8192, 1024) op(B) T and cached B^T. About 2 minutes.
set -u
. bench/device_lib.sh 27
rm -rf /tmp/s27x && cp -r "$PWD" /tmp/s27x
python3 - /tmp/s27x/src/core/overlap_exec.c <<'PY'
import sys
p = sys.argv[1]; s = open(p).read()
s = s.replace('#include "overlap.h"\n', '#include "overlap.h"\n#include <stdlib.h>\n', 1)
anchor = "  int lane = OVL_LANE_COMPUTE0;\n  TPLA_TRY(gemm(p, lane, ovl_rows_of(c->d, p->offs[r], own.rows)"
assert s.count(anchor) == 1
s = s.replace(anchor, """  if (p->fp8 && getenv("TPLA_RUN26_TOUCH") != NULL) /* run 26/27 experiment */
    TPLA_TRY(x->amax(p->xp, OVL_LANE_COMPUTE0, c->b, scale_of(p, r) + 1));
""" + anchor, 1)
open(p, "w").write(s)
print("patched")
PY
cd /tmp/s27x
cmake -S . -B build-exp -DCMAKE_BUILD_TYPE=Release -DTPLA_CUDA=ON > "$L/configure.log" 2>&1
cmake --build build-exp -j "$(nproc)" --target tpla_tool test_gpu_fp8_kernels test_gpu_fp8 \
  test_gpu_overlap_fp8_reuse > "$L/build.log" 2>&1
say "build: exit $? ($(el)), warnings: $(grep -c warning "$L/build.log")"
for t in test_gpu_fp8_kernels test_gpu_fp8 test_gpu_overlap_fp8_reuse; do
  bounded 60 "$L/$t.log" build-exp/tests/$t
  say "$t: exit $? ($(el)): $(tail -n 1 "$L/$t.log")"
done
pack
for touch in none b; do
  for lay in "opT -t NT" "cacheb --cache-b"; do
    name=${lay%% *}; args=${lay#"$name"}
    if [ $touch = none ]; then unset TPLA_RUN26_TOUCH; else export TPLA_RUN26_TOUCH=b; fi
    timeout 20 build-exp/tpla ag-gemm -g 2 -n 20 -w 5 -s 1234 -d e4m3 $args 16384 8192 1024 \
      > "$L/fp8_${touch}_${name}.log" 2>&1
    say "touch=$touch $name: exit $? $(grep -E '^  ag-gemm ' "$L/fp8_${touch}_${name}.log")"
  done
done
pack
cat "$S"
