#!/usr/bin/env bash
# bench/device_run22.sh - prepared, not yet run (no device time left in its session).
# An experiment (a patched copy, not the library as
# committed): FP8 AllGather+GEMM (16384, 8192, 1024) runs its GEMMs from the same
# staged B^T with --cache-b (361 us, run 21) as with op(B) N's per-call transpose
# (295 us). The transpose call also makes compute lane 1 follow every stream used
# so far (sync_lanes). This build makes every call do that sync, transpose or
# not: if the cached and op(B) T calls drop to ~295 us, the sync is what matters.
set -u
. bench/device_lib.sh 22
sed -i 's/^  p->cur_op_b = p->op_b;$/  p->cur_op_b = p->op_b;\n  TPLA_TRY(p->ops->sync_lanes(p->xp, OVL_LANE_COMPUTE1)); \/* run 22 experiment *\//' \
  src/core/overlap_exec.c
grep -c "run 22 experiment" src/core/overlap_exec.c | sed 's/^/patched lines: /' | tee -a "$S"
B=build-exp
cmake -S . -B $B -DCMAKE_BUILD_TYPE=Release -DTPLA_CUDA=ON > "$L/configure.log" 2>&1 &&
  cmake --build $B -j 16 --target tpla_tool > "$L/build.log" 2>&1
say "build: exit $? ($(el))"
run() { # name args...
  local name=$1; shift
  timeout 25 $B/tpla ag-gemm -g 2 -n 20 -w 5 -s 1234 -d e4m3 "$@" > "$L/$name.log" 2>&1
  say "$name: exit $? ($(el)) $(grep -E '^  ag-gemm ' "$L/$name.log")"
}
run sync_cacheb --cache-b 16384 8192 1024
run sync_opT -t NT 16384 8192 1024
run sync_opN 16384 8192 1024
pack
cat "$S"
