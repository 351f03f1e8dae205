#!/usr/bin/env bash
# bench/device_run22.sh - prepared, not yet run: an experiment on patched
# copies (not the library as committed). FP8 AllGather+GEMM (16384, 8192, 1024)
# runs its GEMMs from the same staged B^T with --cache-b (361 us, run 21) as
# with op(B) N's per-call transpose (295 us); op(B) T takes 358-378 us whatever
# the chunk count. What the transpose path adds: a ~5 us kernel on compute lane
# 0 before the own rows' GEMM, and compute lane 1 following every stream used so
# far (sync_lanes). Builds, timed in one run: base (as committed); A: every call
# does that sync, transpose or not; B: the own rows' GEMM waits until the first
# chunk has been pushed. If A or B bring op T and the cached call to ~295 us, it
# names the cause. About 3.5 minutes.
set -u
. bench/device_lib.sh 22
SRC=$PWD
for v in base A B; do
  rm -rf /tmp/s22$v && cp -r "$SRC" /tmp/s22$v
done
sed -i 's/^  p->cur_op_b = p->op_b;$/  p->cur_op_b = p->op_b;\n  TPLA_TRY(p->ops->sync_lanes(p->xp, OVL_LANE_COMPUTE1)); \/* run 22 A *\//' \
  /tmp/s22A/src/core/overlap_exec.c
sed -i '0,/^      TPLA_TRY(x->step(p->xp, &st, p->seq));$/s//      TPLA_TRY(x->step(p->xp, \&st, p->seq));\n      if (ci == 0 \&\& i == P - 1) \/* run 22 B *\/\n        TPLA_TRY(x->sync_lanes(p->xp, OVL_LANE_COMPUTE0));/' \
  /tmp/s22B/src/core/overlap_exec.c
say "patched: A $(grep -c 'run 22 A' /tmp/s22A/src/core/overlap_exec.c), B $(grep -c 'run 22 B' /tmp/s22B/src/core/overlap_exec.c)"
for v in base A B; do
  (cd /tmp/s22$v && cmake -S . -B build-exp -DCMAKE_BUILD_TYPE=Release -DTPLA_CUDA=ON \
     > "$L/configure_$v.log" 2>&1 && cmake --build build-exp -j 16 --target tpla_tool \
     > "$L/build_$v.log" 2>&1)
  say "build $v: exit $? ($(el))"
done
run() { # variant name args...
  local v=$1 name=$2; shift 2
  timeout 25 /tmp/s22$v/build-exp/tpla ag-gemm -g 2 -n 20 -w 5 -s 1234 -d e4m3 "$@" \
    > "$L/${v}_$name.log" 2>&1
  say "$v $name: exit $? ($(el)) $(grep -E '^  ag-gemm ' "$L/${v}_$name.log")"
}
for v in base A B; do
  run $v cacheb --cache-b 16384 8192 1024
  run $v opT -t NT 16384 8192 1024
  run $v opN 16384 8192 1024
  pack
done
cat "$S"
