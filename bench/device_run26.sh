#!/usr/bin/env bash
# bench/device_run26.sh - (1) the whole GPU suite (tests/gpu/run.sh) and the
# Python checks on the CUDA executor under torchrun (2 GPUs) at the session's
# final library code (NS AUTO iteration default); (2) an FP8 AG+GEMM
# experiment on a patched copy (not the library as committed): at (16384,
# 8192, 1024) op(B) N (a per-call transpose of B on compute lane 0 before the
# own rows' GEMM) ran at 297 us, op T and the cached B^T at 353-355 (run 22).
# The patch reads an 8 MiB operand with the amax kernel on lane 0 just before
# the own rows' GEMM (TPLA_RUN26_TOUCH=b: B itself, as the transpose does;
# =a: 8 MiB of A instead): if "b" brings op T to ~297 us and "a" does not,
# B's presence in L2 is what the transpose gives; if both do, the delay.
set -u
. bench/device_lib.sh 26
left() { echo $(( 560 - ($(date +%s) - t0) )); }
SRC=$PWD
rm -rf /tmp/s26x && cp -r "$SRC" /tmp/s26x
python3 - /tmp/s26x/src/core/overlap_exec.c <<'PY'
import sys
p = sys.argv[1]; s = open(p).read()
s = s.replace('#include "overlap.h"\n', '#include "overlap.h"\n#include <stdlib.h>\n', 1)
anchor = "  int lane = OVL_LANE_COMPUTE0;\n  TPLA_TRY(gemm(p, lane, ovl_rows_of(c->d, p->offs[r], own.rows)"
assert s.count(anchor) == 1
s = s.replace(anchor, """  { /* run 26 experiment */
    const char *touch = getenv("TPLA_RUN26_TOUCH");
    if (p->fp8 && touch != NULL && touch[0] == 'b')
      TPLA_TRY(x->amax(p->xp, OVL_LANE_COMPUTE0, c->b, scale_of(p, r) + 1));
    else if (p->fp8 && touch != NULL && touch[0] == 'a')
      TPLA_TRY(x->amax(p->xp, OVL_LANE_COMPUTE0, ovl_rows_of(c->a, 0, c->b.rows),
                       scale_of(p, r) + 1));
  }
""" + anchor, 1)
open(p, "w").write(s)
print("patched")
PY
(cd /tmp/s26x && cmake -S . -B build-exp -DCMAKE_BUILD_TYPE=Release -DTPLA_CUDA=ON \
   > "$L/configure_exp.log" 2>&1 && cmake --build build-exp -j "$(nproc)" --target tpla_tool \
   > "$L/build_exp.log" 2>&1) &
BUILD_PID=$!
OUT=$L/gpu-tests timeout 260 bash tests/gpu/run.sh > "$L/gpu_tests.log" 2>&1
say "tests/gpu/run.sh: exit $? ($(el)): $(tail -n 1 "$L/gpu_tests.log")"
grep -E "^== " "$L/gpu_tests.log" | tail -n 8 >> "$S"
pack
TPLA_LIBRARY=$PWD/build-gpu/libtpla.so timeout 120 torchrun --standalone --nproc_per_node=2 \
  tests/python/gpu/run_checks.py > "$L/python_gpu.log" 2>&1
say "Python checks, CUDA executor, 2 GPUs: exit $? ($(el))"
tail -n 12 "$L/python_gpu.log" >> "$S"
pack
wait $BUILD_PID
say "experiment build: exit $? ($(el))"
for rep in 1 2; do
  for touch in none b a; do
    for lay in "opT -t NT" "cacheb --cache-b" "opN"; do
      [ "$(left)" -gt 20 ] || break
      name=${lay%% *}; args=${lay#"$name"}
      TPLA_RUN26_TOUCH=$touch timeout 20 /tmp/s26x/build-exp/tpla ag-gemm -g 2 -n 20 -w 5 \
        -s 1234 -d e4m3 $args 16384 8192 1024 > "$L/fp8_${touch}_${name}_$rep.log" 2>&1
      say "touch=$touch $name #$rep: exit $? $(grep -E '^  ag-gemm ' "$L/fp8_${touch}_${name}_$rep.log")"
    done
  done
  pack
done
cat "$S"
