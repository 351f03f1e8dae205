#!/usr/bin/env bash
# bench/device_run224.sh - one GPU (nvidia-h200), session 35, the session's last device call:
#  1. bench/xg_cache_bench.c (review 100): host time per overlapped call of a window group of
#     16 and 48 one-rank AG+GEMM plans, against tpla_gemm (the anchor), with this library's
#     overlap GEMM plan cache and with the old one (bench/old_xg_cache.py), three rounds;
#  2. every GPU CTest test (-L gpu) with CUDA_VISIBLE_DEVICES=0 TPLA_TEST_REQUIRE_GPUS=1: the
#     new cache under every overlapped call, test_gpu_overlap_graph_bt's refused member.
# Run in the repository root (no carry): bash bench/device_run224.sh
set -u
. bench/device_lib.sh 224
export CUDA_VISIBLE_DEVICES=0 TPLA_TEST_REQUIRE_GPUS=1
gpu_build all
old=/tmp/run224-old
rm -rf $old && cp -r "$PWD" $old && rm -rf $old/build-gpu
python3 bench/old_xg_cache.py $old > "$L/old_patch.log" 2>&1
(cd $old && cmake -S . -B build-gpu -DCMAKE_BUILD_TYPE=Release -DTPLA_CUDA=ON > "$L/old_configure.log" 2>&1 &&
  cmake --build build-gpu -j "$(nproc)" --target tpla > "$L/old_build.log" 2>&1)
say "old cache library: exit $? ($(el)) $(tail -n 1 "$L/old_patch.log")"
gcc -O2 -std=c11 -Iinclude -I/usr/local/cuda/include bench/xg_cache_bench.c -Lbuild-gpu -ltpla \
  -L/usr/local/cuda/lib64 -lcudart -o /tmp/xg_cache_bench > "$L/bench_build.log" 2>&1
say "bench build: exit $?"
for round in 1 2 3; do
  for lib in build-gpu $old/build-gpu; do
    tag=$([ $lib = build-gpu ] && echo new || echo old)
    LD_LIBRARY_PATH=$lib bounded 60 "$L/xg_${tag}_$round.log" /tmp/xg_cache_bench
    say "cache bench, library $tag, round $round: exit $? ($(el))"
    grep -vE "^#" "$L/xg_${tag}_$round.log" | grep -v "^ *N " | sed "s/^/  $tag: /" >> "$S"
  done
done
pack
(cd build-gpu && bounded 200 "$L/ctest_gpu.log" ctest -L gpu --output-on-failure --no-tests=error)
say "ctest -L gpu: exit $? ($(el)) $(grep -E 'tests passed' "$L/ctest_gpu.log")"
grep -E "Failed|\*\*\*" "$L/ctest_gpu.log" >> "$S"
pack
cat "$S"
