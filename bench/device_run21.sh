#!/usr/bin/env bash
# bench/device_run21.sh - run 20 left FP8 AllGather+GEMM (16384, 8192, 1024) at
# 358 us (op(B) T) and 361 us (cached B^T) against 295 us for op(B) N with its
# per-call transpose, all with 4 chunks. Here: 2 and 8 chunks for each layout,
# and op(B) T over NCCL send/recv instead of copy-engine pushes; also op(B) T
# (8192, 8192, 4096) with 8 chunks. About 2 minutes.
set -u
. bench/device_lib.sh 21
B=build-gpu
cmake -S . -B $B -DCMAKE_BUILD_TYPE=Release -DTPLA_CUDA=ON > "$L/configure.log" 2>&1 &&
  cmake --build $B -j 16 --target tpla_tool > "$L/build.log" 2>&1
say "build: exit $? ($(el))"
T=$B/tpla
run() { # name args...
  local name=$1; shift
  timeout 30 $T ag-gemm -g 2 -n 30 -w 5 -s 1234 -d e4m3 "$@" > "$L/$name.log" 2>&1
  say "$name: exit $? ($(el)) $(grep -E '^  ag-gemm ' "$L/$name.log")"
}
S1="16384 8192 1024"
for c in 2 8; do
  run opT_c$c -t NT --chunks=$c $S1
  run opN_c$c --chunks=$c $S1
  run opN_cacheb_c$c --cache-b --chunks=$c $S1
done
run opT_sendrecv -t NT --transport=sendrecv $S1
run opN_sendrecv --transport=sendrecv $S1
run opT_c8_8192 -t NT --chunks=8 8192 8192 4096
pack
cat "$S"
