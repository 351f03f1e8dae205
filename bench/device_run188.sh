#!/usr/bin/env bash
# bench/device_run188.sh - one GPU (nvidia-h200), session 28: Newton-Schulz's symmetric
# products with every other block row on side stream 0 and its own cuBLASLt workspace
# (49fddad), against 17a5182's library (one stream; snap/lib_17a5182.tar). In order of value,
# each part packed as it ends:
#  1. the GPU tests that touch it on one GPU: test_gpu_ns, test_gpu_ns_api, test_gpu_ns_batch,
#     test_gpu_graphs (captured NS: the fork to the side stream inside a capture), test_gpu_gemm
#     (two workspaces), test_gpu_fp8, test_gpu_overlap (the transport's lanes split gemm[0]);
#     memcheck of test_gpu_graphs;
#  2. `tpla ns -g 1` new / old / new / old at 2048^2 .. 8192^2 and the rectangular issue shapes;
#  3. the Muon step at 2048 x 8 and 1024 x 8, new / old;
#  4. the Python checks on one rank.
# Run in the repository root, carry ["snap"]: bash bench/device_run188.sh
set -u
. bench/device_lib.sh 188
T="test_gpu_ns test_gpu_ns_api test_gpu_ns_batch test_gpu_graphs test_gpu_gemm test_gpu_fp8 test_gpu_overlap"
gpu_build $T tpla_tool tpla
export CUDA_VISIBLE_DEVICES=0
for t in $T; do
  bounded 150 "$L/$t.log" "build-gpu/tests/$t"
  say "$t: exit $? ($(el)) $(tail -n 1 "$L/$t.log")"
done
SAN=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
TPLA_TEST_NO_WATCHDOG=1 TPLA_TEST_SANITIZER=1 bounded 120 "$L/memcheck_graphs.log" "$SAN" \
  --tool memcheck --report-api-errors no --error-exitcode 99 build-gpu/tests/test_gpu_graphs
say "memcheck test_gpu_graphs: exit $? ($(el)) $(grep -E 'passed|ERROR SUMMARY' "$L/memcheck_graphs.log" | tr '\n' ' ')"
pack
tar_build /tmp/old188 snap/lib_17a5182.tar old tpla_tool tpla
for round in 1 2; do
  for lib in new old; do
    bin=$PWD/build-gpu/tpla; [ $lib = old ] && bin=/tmp/old188/build-gpu/tpla
    log="$L/ns_${lib}_$round.log"
    bounded 120 "$log" "$bin" ns -g 1 -n 30 -w 8 --gram=both --svd-max=0 \
      2048x2048 4096x4096 8192x8192 4096x14336 16384x4096
    say "ns $lib round $round: exit $? ($(el))"
    grep -E "^ *[0-9]+x[0-9]+ " "$log" | sed "s/^/$lib$round /" >> "$S"
    pack
  done
done
for spec in "2048 8" "1024 8"; do
  set -- $spec
  for lib in new old; do
    so=$PWD/build-gpu/libtpla.so; [ $lib = old ] && so=/tmp/old188/build-gpu/libtpla.so
    log="$L/muon_${1}x${2}_$lib.log"
    TPLA_LIBRARY=$so bounded 150 "$log" python3 bench/muon_graph_bench.py --hidden $1 \
      --layers $2 --adamw --rounds 3
    say "muon $lib width $1 x $2: exit $? ($(el))"
    grep -E "^  |^# tpla" "$log" | sed "s/^/$lib /" >> "$S"
    pack
  done
done
TPLA_LIBRARY=$PWD/build-gpu/libtpla.so bounded 120 "$L/python_1gpu.log" \
  torchrun --standalone --nproc_per_node=1 tests/python/gpu/run_checks.py
say "python checks (1 rank): exit $? ($(el)) $(grep -E 'passed|FAIL' "$L/python_1gpu.log" | tr '\n' ' ')"
pack
cat "$S"
