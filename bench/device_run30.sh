#!/usr/bin/env bash
# bench/device_run30.sh - prepared, not yet run: per-call timelines of the
# overlapped operations whose efficiency misses 0.90, from a patched copy
# (bench/run30_trace_patch.py, compile-checked on the CPU; not the library as
# committed): the 8th call of every plan records CUDA events around each push,
# pull, lane release, GEMM and fold and prints them (TRACE lines, us from the
# call's start, per rank). Shapes: GEMM+AR bf16 (8192, 4096, 8192) (eff
# 0.83-0.85: where is the tail?), GEMM+RS e4m3 op T and bf16 (8192, 4096,
# 8192), FP8 AG+GEMM (16384, 8192, 1024) op T and op N (the ~60 us gap).
# The traced call itself is not timed separately (it syncs). About 3 minutes.
set -u
. bench/device_lib.sh 30
patched_build /tmp/s30x "$PWD/bench/run30_trace_patch.py"
run() { # name op args...
  local name=$1 op=$2; shift 2
  TPLA_TRACE=8 timeout 40 build-exp/tpla $op -g 2 -n 10 -w 5 -s 1234 "$@" > "$L/$name.log" 2>&1
  say "$name: exit $? ($(el)) $(grep -E "^  $op " "$L/$name.log"), $(grep -c '^TRACE' "$L/$name.log") trace lines"
}
run ar_bf16 gemm-ar -d bf16 8192 4096 8192
run rs_e4m3_opT gemm-rs -d e4m3 -t NT 8192 4096 8192
run rs_bf16 gemm-rs -d bf16 8192 4096 8192
run ag_e4m3_opT ag-gemm -d e4m3 -t NT 16384 8192 1024
run ag_e4m3_opN ag-gemm -d e4m3 16384 8192 1024
pack
cat "$S"
