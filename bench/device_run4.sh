#!/usr/bin/env bash
# bench/device_run4.sh - GPU session 4 (the last of 2026-11-29's budget):
# the whole test suite on 1 and 2 GPUs + MPI, the overlap benchmark, the
# Python package's GPU checks under torchrun, and compute-sanitizer on one
# NS run and one overlapped run. Every step is bounded by `timeout`.
#   bash bench/device_run4.sh        (on the device machine; logs under $OUT)
set -u
export NCCL_NVLS_ENABLE=0 NVSHMEM_DISABLE_NVLS=1 TORCH_SYMM_MEM_DISABLE_MULTICAST=1
export PYTHONUNBUFFERED=1
OUT=${OUT:-$PWD/bench/out}; mkdir -p "$OUT"
L=/tmp/run4-logs; mkdir -p "$L"   # packed into $OUT/logs.tgz after every step
pack() { tar czf "$OUT/logs.tgz" -C "$(dirname "$L")" "$(basename "$L")"; }
t0=$(date +%s)
el() { echo "$(( $(date +%s) - t0 )) s"; }
OUT=$L timeout 300 bash tests/gpu/run.sh > "$L/gpu_tests.log" 2>&1
echo "tests/gpu/run.sh: exit $? ($(el)): $(tail -n 1 "$L/gpu_tests.log")" | tee "$OUT/summary.txt"
grep -E "^== |^   " "$L/gpu_tests.log" | tail -n 14 >> "$OUT/summary.txt"
pack
ITERS=10 WARMUP=3 OUT=$L/overlap timeout 120 bash bench/run_overlap.sh > "$L/run_overlap.log" 2>&1
echo "run_overlap: exit $? ($(el))" >> "$OUT/summary.txt"
cp "$L/overlap/compare.txt" "$OUT/overlap_compare.txt" 2>/dev/null
pack
export PYTHONPATH=$PWD/python TPLA_LIBRARY=$PWD/build-gpu/libtpla.so
for n in 1 2; do
  timeout 60 torchrun --standalone --nproc_per_node=$n tests/python/gpu/run_checks.py \
    > "$L/py_checks_$n.log" 2>&1
  echo "python run_checks, $n GPU(s): exit $? ($(el)) $(grep -E 'passed|failed' "$L/py_checks_$n.log" | tail -n 1)" >> "$OUT/summary.txt"
done
timeout 90 torchrun --standalone --nproc_per_node=2 tests/python/gpu/train_mlp.py --steps 300 \
  > "$L/py_train_mlp.log" 2>&1
echo "python train_mlp (TP=2 vs 1 GPU, 300 steps): exit $? ($(el)) $(tail -n 2 "$L/py_train_mlp.log" | tr '\n' ' ')" >> "$OUT/summary.txt"
pack
SAN=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
san() { # san NAME tool command...
  local name=$1 tool=$2; shift 2
  TPLA_TEST_NO_WATCHDOG=1 TPLA_TEST_QUICK=1 timeout 60 "$SAN" --tool "$tool" \
    --report-api-errors no --error-exitcode 99 "$@" > "$L/san_$name.log" 2>&1
  echo "compute-sanitizer $tool $name: exit $? ($(el)) $(grep -m1 'ERROR SUMMARY' "$L/san_$name.log")" >> "$OUT/summary.txt"
}
san ns memcheck build-gpu/tpla ns -g 2 -n 2 -w 1 -c 0 1024x1024 2048x512
san overlap memcheck build-gpu/tpla ag-gemm -g 2 -n 2 -w 1 -c 1 2048 1024 1024
san overlap_race racecheck build-gpu/tpla gemm-rs -g 2 -n 2 -w 1 -c 1 2048 1024 1024
pack
cat "$OUT/summary.txt"; cat "$OUT/overlap_compare.txt" 2>/dev/null | tail -n 30
