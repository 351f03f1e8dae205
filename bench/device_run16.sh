#!/usr/bin/env bash
# bench/device_run16.sh - prepared for the next GPU session (not yet run):
# verify what landed after run 15 and measure the FP8 transpose changes.
# (1) the whole test suite (tests/gpu/run.sh: the MLP warm-up, the new
# transpose kernel's test, b_version); (2) the Python checks on the CUDA
# executor under torchrun, 2 GPUs (incl. the FP8 overlap check); (3) FP8
# tpla gemm 8192^3 NN (run 7: 880.2 us split) and GEMM+RS (8192, 4096, 8192)
# with op(B) N, with and without --cache-b, and op(B) T (run 15: 534.9 /
# run 14: 456.7 us); (4) compute-sanitizer memcheck of a small 2-GPU
# Newton-Schulz (the C-operand GEMMs and the ping-pong). Every step after
# the tests runs only while the run's 560 s last.
set -u
. bench/device_lib.sh 16
left() { echo $(( 560 - ($(date +%s) - t0) )); }
OUT=$L/gpu-tests timeout 260 bash tests/gpu/run.sh > "$L/gpu_tests.log" 2>&1
say "tests/gpu/run.sh: exit $? ($(el)): $(tail -n 1 "$L/gpu_tests.log")"
grep -E "^== " "$L/gpu_tests.log" | tail -n 8 >> "$S"
pack
if [ "$(left)" -gt 90 ]; then
  TPLA_LIBRARY=$PWD/build-gpu/libtpla.so timeout 90 torchrun --standalone --nproc_per_node=2 \
    tests/python/gpu/run_checks.py > "$L/python_gpu.log" 2>&1
  say "Python checks, CUDA executor, 2 GPUs: exit $? ($(el))"
  tail -n 12 "$L/python_gpu.log" >> "$S"
  pack
fi
T=build-gpu/tpla
step() { # name limit args...
  local name=$1 limit=$2; shift 2
  [ "$(left)" -gt "$limit" ] || return 0
  timeout "$limit" $T "$@" > "$L/$name.log" 2>&1
  say "$name: exit $? ($(el))"
  grep -E "^  (gemm|ag-gemm|gemm-rs|gemm-ar) |wrong" "$L/$name.log" >> "$S"
}
step gemm_e4m3_nn 40 gemm -g 1 -n 20 -w 5 -d e4m3 8192 8192 8192
step rs_e4m3_opN 30 gemm-rs -g 2 -n 20 -w 5 -s 1234 -d e4m3 8192 4096 8192
step rs_e4m3_opN_cacheb 30 gemm-rs -g 2 -n 20 -w 5 -s 1234 -d e4m3 --cache-b 8192 4096 8192
step rs_e4m3_opT 30 gemm-rs -g 2 -n 20 -w 5 -s 1234 -d e4m3 -t NT 8192 4096 8192
step ag_e4m3_opN_cacheb 30 ag-gemm -g 2 -n 20 -w 5 -s 1234 -d e4m3 --cache-b 8192 8192 4096
pack
SAN=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
if [ "$(left)" -gt 60 ]; then
  bounded 90 "$L/memcheck_ns.log" "$SAN" --tool memcheck --report-api-errors no \
    --error-exitcode 99 $T ns -g 2 -n 1 -w 0 -c 0 --gram=both 1024x1024 2048x512 96x1000
  say "memcheck tpla ns -g 2: exit $? ($(el))"
  grep -E "ERROR SUMMARY|Invalid|misaligned" "$L/memcheck_ns.log" | head -n 6 >> "$S"
fi
pack
cat "$S"
