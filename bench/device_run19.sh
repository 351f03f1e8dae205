#!/usr/bin/env bash
# bench/device_run19.sh - why FP8 AllGather+GEMM (8192, 8192, 4096) is slower
# without the per-call transpose of B (run 18, same run: op(B) N 449.6 us,
# eff 0.94; op(B) N with --cache-b 499.2 us, 0.84; op(B) T 493.2 us, 0.80):
# each layout with 1, 2 and 4 chunks (automatic: 1; the serial plan is a column),
# and the DESIGN.md shape (32768, 8192, 4096) with op(B) T. About 3 minutes.
set -u
. bench/device_lib.sh 19
B=build-gpu
cmake -S . -B $B -DCMAKE_BUILD_TYPE=Release -DTPLA_CUDA=ON > "$L/configure.log" 2>&1 &&
  cmake --build $B -j 16 --target tpla_tool > "$L/build_tool.log" 2>&1
say "build tool: exit $? ($(el))"
T=$B/tpla
run() { # name args...
  local name=$1; shift
  timeout 40 $T ag-gemm -g 2 -n 30 -w 5 -s 1234 -d e4m3 "$@" > "$L/$name.log" 2>&1
  say "$name: exit $? ($(el)) $(grep -E '^  ag-gemm ' "$L/$name.log")"
}
for c in 1 2 4; do
  run opT_c$c -t NT --chunks=$c 8192 8192 4096
  run opN_c$c --chunks=$c 8192 8192 4096
  run opN_cacheb_c$c --cache-b --chunks=$c 8192 8192 4096
done
run opT_big -t NT 32768 8192 4096
run opN_big 32768 8192 4096
pack
cat "$S"
