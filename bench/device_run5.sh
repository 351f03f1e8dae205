#!/usr/bin/env bash
# bench/device_run5.sh - GPU session 5: verify the thread-per-GPU overlap fix
# (kernels preloaded + plan rehearsal) on 2 GPUs, then the overlap benchmark
# with the PyTorch anchors. If the overlap tests hang again, they and the
# benchmark are retried once with CUDA_MODULE_LOADING=EAGER to confirm the
# diagnosis. Every step is bounded by `timeout`; logs packed into $OUT/logs.tgz.
set -u
export NCCL_NVLS_ENABLE=0 NVSHMEM_DISABLE_NVLS=1 TORCH_SYMM_MEM_DISABLE_MULTICAST=1
export PYTHONUNBUFFERED=1
OUT=${OUT:-$PWD/bench/out}; mkdir -p "$OUT"
L=/tmp/run5-logs; mkdir -p "$L"
pack() { tar czf "$OUT/logs.tgz" -C "$(dirname "$L")" "$(basename "$L")"; }
S=$OUT/summary.txt; : > "$S"
t0=$(date +%s)
el() { echo "$(( $(date +%s) - t0 )) s"; }
say() { echo "$*" | tee -a "$S"; }
git log -1 --format='commit %h %s' > "$L/commit.txt" 2>/dev/null
nvidia-smi -L > "$L/machine.log" 2>&1
B=build-gpu
timeout 300 cmake -S . -B $B -DCMAKE_BUILD_TYPE=Release -DTPLA_CUDA=ON > "$L/configure.log" 2>&1 &&
  timeout 300 cmake --build $B -j 16 > "$L/build.log" 2>&1
say "build: exit $? ($(el)), $(grep -c 'warning:' "$L/build.log") warnings"
pack
ovl_tests() { # ovl_tests TAG [env...]
  local tag=$1; shift
  (cd $B && env "$@" timeout 240 ctest --output-on-failure -R 'test_gpu_overlap' ) > "$L/ctest_overlap_$tag.log" 2>&1
  say "ctest overlap ($tag): exit $? ($(el)): $(grep -E 'tests passed' "$L/ctest_overlap_$tag.log")"
  grep -E 'Test +#' "$L/ctest_overlap_$tag.log" | tee -a "$S"
}
ovl_tests lazy
pack
if grep -q 'tests failed' "$L/ctest_overlap_lazy.log"; then
  ovl_tests eager CUDA_MODULE_LOADING=EAGER
  export CUDA_MODULE_LOADING=EAGER
  say "benchmark below runs with CUDA_MODULE_LOADING=EAGER"
fi
pack
ITERS=${ITERS:-20} WARMUP=5 OUT=$L/overlap BUILD=$PWD/$B timeout 330 bash bench/run_overlap.sh > "$L/run_overlap.log" 2>&1
say "run_overlap: exit $? ($(el))"
grep -E '^== |timed out|exit [1-9]' "$L/run_overlap.log" >> "$S"
cp "$L/overlap/compare.txt" "$OUT/overlap_compare.txt" 2>/dev/null
pack
cat "$OUT/overlap_compare.txt" 2>/dev/null | tail -n 40
