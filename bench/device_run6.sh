#!/usr/bin/env bash
# bench/device_run6.sh - GPU session 6: the committed tree of snapshot.tar
# (other engineers' uncommitted edits stay out): the one-process overlap
# tests after the host-side plan exchange (EAGER loading, then the MLP test
# once more with lazy loading as a diagnostic), then the overlap benchmark
# (GEMM+AllReduce pulls on their own copy stream). Logs in $OUT/logs.tgz.
#   git archive HEAD -o /tmp/snap.tar && ... (see the run's command line)
set -u
export NCCL_NVLS_ENABLE=0 NVSHMEM_DISABLE_NVLS=1 TORCH_SYMM_MEM_DISABLE_MULTICAST=1
export PYTHONUNBUFFERED=1
OUT=${OUT:-$PWD/bench/out}; mkdir -p "$OUT"
L=/tmp/run6-logs; mkdir -p "$L"
pack() { tar czf "$OUT/logs.tgz" -C "$(dirname "$L")" "$(basename "$L")"; }
S=$OUT/summary.txt; : > "$S"
t0=$(date +%s)
el() { echo "$(( $(date +%s) - t0 )) s"; }
say() { echo "$*" | tee -a "$S"; }
B=build-gpu
timeout 300 cmake -S . -B $B -DCMAKE_BUILD_TYPE=Release -DTPLA_CUDA=ON > "$L/configure.log" 2>&1 &&
  timeout 300 cmake --build $B -j 16 > "$L/build.log" 2>&1
say "build: exit $? ($(el)), $(grep -c 'warning:' "$L/build.log") warnings"
pack
(cd $B && timeout 300 ctest --output-on-failure -R 'test_gpu_overlap|test_gpu_nccl|test_gpu_ns_api') > "$L/ctest_overlap.log" 2>&1
say "ctest overlap+nccl+ns_api (2 GPUs): exit $? ($(el)): $(grep -E 'tests passed' "$L/ctest_overlap.log")"
grep -E 'Test +#' "$L/ctest_overlap.log" | tee -a "$S"
pack
TPLA_TEST_LAZY=1 timeout 60 $B/tests/test_gpu_overlap_mlp > "$L/mlp_lazy.log" 2>&1
say "diagnostic: test_gpu_overlap_mlp with lazy loading: exit $? ($(el)) $(grep -m1 -E 'HANG|FAIL' "$L/mlp_lazy.log")"
pack
ITERS=${ITERS:-20} WARMUP=5 OUT=$L/overlap BUILD=$PWD/$B timeout 330 bash bench/run_overlap.sh > "$L/run_overlap.log" 2>&1
say "run_overlap: exit $? ($(el))"
grep -E '^== |timed out|exit [1-9]' "$L/run_overlap.log" >> "$S"
cp "$L/overlap/compare.txt" "$OUT/overlap_compare.txt" 2>/dev/null
pack
cat "$OUT/overlap_compare.txt" 2>/dev/null | tail -n 16
