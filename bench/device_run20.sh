#!/usr/bin/env bash
# bench/device_run20.sh - FP8 AllGather+GEMM with at least 4 chunks (automatic),
# after run 19: the two DESIGN.md FP8 AG shapes with op(B) T, op(B) N and op(B) N
# with --cache-b, automatic chunks, plus (16384, 8192, 1024) (4 chunks before
# too); and the overlap GPU tests on 2 GPUs. About 4 minutes.
set -u
. bench/device_lib.sh 20
B=build-gpu
cmake -S . -B $B -DCMAKE_BUILD_TYPE=Release -DTPLA_CUDA=ON > "$L/configure.log" 2>&1 &&
  cmake --build $B -j 16 --target tpla_tool test_gpu_overlap test_gpu_overlap_fp8_reuse \
    > "$L/build.log" 2>&1
say "build: exit $? ($(el))"
(cd $B && timeout 150 ctest -R "test_gpu_overlap$|test_gpu_overlap_fp8_reuse" \
   --output-on-failure > "$L/ctest_overlap.log" 2>&1)
say "ctest overlap (2 GPUs): exit $? ($(el)): $(grep -E 'tests passed|tests failed' "$L/ctest_overlap.log")"
T=$B/tpla
run() { # name args...
  local name=$1; shift
  timeout 45 $T ag-gemm -g 2 -n 30 -w 5 -s 1234 -d e4m3 "$@" > "$L/$name.log" 2>&1
  say "$name: exit $? ($(el)) $(grep -E '^  ag-gemm ' "$L/$name.log")"
}
for shape in "8192 8192 4096" "32768 8192 4096" "16384 8192 1024"; do
  tag=${shape// /_}
  run opT_$tag -t NT $shape
  run opN_$tag $shape
  run opN_cacheb_$tag --cache-b $shape
done
pack
cat "$S"
