#!/usr/bin/env bash
# bench/device_run45.sh - pulled Gram sums are now the default at P = 2 (run 42: test_gpu_ns
# passed with them; run 44: 8192^2 6% faster than NCCL's all-reduce). Checks:
# 1. the whole GPU suite with the new default (test_gpu_ns's 2-rank cases now pull);
# 2. at the same time, three compute-sanitizer memchecks of `tpla ns -g 2` on one small
#    shape (runs 42/44: the memcheck with pulls ran past 120 and 150 s, where run 39's,
#    with a one-execute rehearsal, took ~45 s for four plans): pulls (the default) and
#    TPLA_NS_GRAM_SUM=nccl under 420 s each, and pulls with cuBLASLt's nvjet kernels
#    excluded from checking (our kernels and copies only). Their times tell whether the
#    plan-time rehearsal's new kernels (every row alignment) make memcheck slow or hang.
# About 8 minutes.
set -u
. bench/device_lib.sh 45
gpu_build tpla_tool
SAN=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
memcheck() { # name [VAR=value]: runs in the background, writes memcheck_NAME.result
  local name=$1 t=$(date +%s)
  ( [ $# -gt 1 ] && export "$2"
    bounded 420 "$L/memcheck_$name.log" "$SAN" --tool memcheck ${MC_EXTRA:-} \
      --report-api-errors no --error-exitcode 99 build-gpu/tpla ns -g 2 -n 1 -w 0 -c 0 \
      --gram=input --algo=gram_allreduce --iterate=gram 96x1000
    echo "memcheck $name: exit $? in $(( $(date +%s) - t )) s $(grep 'ERROR SUMMARY' \
      "$L/memcheck_$name.log")" > "$L/memcheck_$name.result" ) &
}
unset TPLA_NS_GRAM_SUM
memcheck pull
memcheck nccl TPLA_NS_GRAM_SUM=nccl
MC_EXTRA="--kernel-name-exclude kns=nvjet" memcheck pull_no_nvjet
OUT=$L/gpu-tests timeout 400 bash tests/gpu/run.sh --no-clean > "$L/gpu_tests.log" 2>&1
say "suite: exit $? ($(el)) $(tail -n 1 "$L/gpu_tests.log")"
grep -E "FAIL|HANG|Failed|passed" "$L/gpu_tests.log" | head -12 >> "$S"
pack
wait
cat "$L"/memcheck_*.result >> "$S"
pack
cat "$S"
