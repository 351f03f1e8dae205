#!/usr/bin/env bash
# bench/device_run46.sh - run 45's suite failed 4 tests while memchecks loaded the GPUs
# (test_gpu_fp8_kernels, test_gpu_nccl_threads x2, test_gpu_mpi): their buffers were
# filled or uploaded by cudaMemset/cudaMemcpy on the legacy stream, which the tests'
# non-blocking streams do not wait for (tests/gpu/gpu_util.h's gpu_upload/gpu_fill
# now wait). Same load again:
# 1. the whole GPU suite (pulled Gram sums are the default at P = 2) while
# 2. two memchecks of `tpla ns -g 2` with pulls run beside it, under 240 s each
#    (runs 42/44/45: past 120-424 s; NCCL sums ~50 s): (a) a copy without the pulls'
#    plan-time rehearsal (bench/run46_no_rehearsal_patch.py), (b) the library with
#    CUDA_MODULE_LOADING=EAGER. About 6 minutes.
set -u
. bench/device_lib.sh 46
ROOT=$PWD
gpu_build tpla_tool
patched_build /tmp/s46x "$ROOT/bench/run46_no_rehearsal_patch.py"
cd "$ROOT" || exit 1
SAN=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
unset TPLA_NS_GRAM_SUM
memcheck() { # name tpla-binary [VAR=value]: in the background, writes memcheck_NAME.result
  local name=$1 bin=$2 t=$(date +%s)
  ( [ $# -gt 2 ] && export "$3"
    bounded 240 "$L/memcheck_$name.log" "$SAN" --tool memcheck --report-api-errors no \
      --error-exitcode 99 "$bin" ns -g 2 -n 1 -w 0 -c 0 --gram=input --algo=gram_allreduce \
      --iterate=gram 96x1000
    echo "memcheck $name: exit $? in $(( $(date +%s) - t )) s $(grep 'ERROR SUMMARY' \
      "$L/memcheck_$name.log")" > "$L/memcheck_$name.result" ) &
}
memcheck pull_no_rehearsal /tmp/s46x/build-exp/tpla
memcheck pull_eager build-gpu/tpla CUDA_MODULE_LOADING=EAGER
OUT=$L/gpu-tests timeout 330 bash tests/gpu/run.sh --no-clean > "$L/gpu_tests.log" 2>&1
say "suite: exit $? ($(el)) $(tail -n 1 "$L/gpu_tests.log")"
grep -E "FAIL|HANG|Failed|passed" "$L/gpu_tests.log" | head -12 >> "$S"
pack
wait
cat "$L"/memcheck_*.result >> "$S"
pack
cat "$S"
