#!/usr/bin/env bash
# bench/device_run7.sh - GPU session 7: the whole test suite on 1 and 2 GPUs
# + MPI (tests/gpu/run.sh: FP8 GEMM and FP8 overlap tests included), the
# FP8 vs bf16 local GEMM (fast and split accumulation), the main job
# (`tpla run`), the Python package's GPU checks, and compute-sanitizer
# memcheck on FP8 runs. Every step is bounded by `timeout`; logs in
# $OUT/logs.tgz, summary last.
set -u
export NCCL_NVLS_ENABLE=0 NVSHMEM_DISABLE_NVLS=1 TORCH_SYMM_MEM_DISABLE_MULTICAST=1
export PYTHONUNBUFFERED=1
OUT=${OUT:-$PWD/bench/out}; mkdir -p "$OUT"
L=/tmp/run7-logs; mkdir -p "$L"
pack() { tar czf "$OUT/logs.tgz" -C "$(dirname "$L")" "$(basename "$L")"; }
S=$OUT/summary.txt; : > "$S"
t0=$(date +%s)
el() { echo "$(( $(date +%s) - t0 )) s"; }
say() { echo "$*" | tee -a "$S"; }
command -v gdb > /dev/null && say "gdb: present" || say "gdb: absent"
OUT=$L timeout 330 bash tests/gpu/run.sh > "$L/gpu_tests.log" 2>&1
say "tests/gpu/run.sh: exit $? ($(el)): $(tail -n 1 "$L/gpu_tests.log")"
grep -E "^== |^   " "$L/gpu_tests.log" | tail -n 14 >> "$S"
pack
B=build-gpu/tpla
for d in "bf16" "e4m3 --accum=split" "e4m3 --accum=fast" "e5m2 --accum=split"; do
  timeout 60 $B gemm -g 1 -n 20 -w 5 -d $d 8192 8192 8192 > "$L/gemm_${d// /_}.log" 2>&1
  say "tpla gemm -d $d 8192^3: exit $? $(grep -E 'wrong|^ +[0-9]+ +(bf16|e4m3|e5m2)' "$L/gemm_${d// /_}.log" | tr -s ' ' | tr '\n' '|')"
done
pack
timeout 90 $B run -g 2 > "$L/tpla_run.log" 2>&1
say "tpla run -g 2: exit $? ($(el)) $(tail -n 2 "$L/tpla_run.log" | tr '\n' ' ')"
export PYTHONPATH=$PWD/python TPLA_LIBRARY=$PWD/build-gpu/libtpla.so
timeout 60 torchrun --standalone --nproc_per_node=2 tests/python/gpu/run_checks.py > "$L/py_checks_2.log" 2>&1
say "python run_checks, 2 GPUs: exit $? ($(el)) $(grep -E 'passed|failed' "$L/py_checks_2.log" | tail -n 1)"
pack
SAN=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
san() { # san NAME tool command...
  local name=$1 tool=$2; shift 2
  TPLA_TEST_NO_WATCHDOG=1 TPLA_TEST_QUICK=1 timeout 75 "$SAN" --tool "$tool" \
    --report-api-errors no --error-exitcode 99 "$@" > "$L/san_$name.log" 2>&1
  say "compute-sanitizer $tool $name: exit $? ($(el)) $(grep -m1 'ERROR SUMMARY' "$L/san_$name.log")"
}
san fp8_gemm memcheck $B gemm -g 1 -n 2 -w 1 -d e4m3 -t NN 1000 520 264
san fp8_ag memcheck $B ag-gemm -g 2 -n 2 -w 1 -d e4m3 -t NN 2048 1024 1024
san fp8_rs memcheck $B gemm-rs -g 2 -n 2 -w 1 -d e5m2 2048 1024 1024
pack
cat "$S"
