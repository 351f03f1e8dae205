#!/usr/bin/env bash
# bench/device_run52.sh - run 51 ran out of time: its suite under load ended "65 passed,
# 1 failed" after 241 s, then the script waited past the call's limit for its load loop,
# whose `tpla ns -g 2` never ended, and no log came back. Short rerun (about 3 minutes):
# the four tests with no-growth checks (test_gpu_ns_api, test_gpu_gemm,
# test_gpu_fp8_kernels, test_gpu_overlap) on all GPUs and on one, under the same load;
# every load invocation bounded to 60 s (stacks dumped on a timeout, its log kept); the
# loop killed at the end; logs packed after every step.
set -u
. bench/device_lib.sh 52
TESTS="test_gpu_ns_api test_gpu_gemm test_gpu_fp8_kernels test_gpu_overlap"
gpu_build tpla_tool $TESTS
pack
export L
setsid bash -c '. bench/device_lib.sh 52x > /dev/null; i=0
  while [ ! -e "'"$L"'/suite.done" ]; do i=$((i + 1))
    bounded 60 "'"$L"'/load_$i.log" build-gpu/tpla ns -g 2 -n 300 -w 0 -c 0 4096x4096 8192x2048
    rc=$?; echo "load $i: exit $rc" >> "'"$L"'/load.log"
    [ $rc = 0 ] && rm -f "'"$L"'/load_$i.log"
  done' > /dev/null 2>&1 &
LOAD=$!
sleep 3
for t in $TESTS; do
  for gpus in 0,1 0; do
    CUDA_VISIBLE_DEVICES=$gpus bounded 90 "$L/${t}_$gpus.log" build-gpu/tests/$t
    say "$t on GPUs $gpus: exit $? ($(el)) $(tail -n 1 "$L/${t}_$gpus.log")"
    grep -E "FAIL|CHECK|window|not checked|grew" "$L/${t}_$gpus.log" | head -8 >> "$S"
    pack
  done
done
touch "$L/suite.done"
for i in $(seq 1 65); do kill -0 $LOAD 2> /dev/null || break; sleep 1; done
kill -0 $LOAD 2> /dev/null && { say "load loop still running after 65 s: killed"; kill -9 -- -$LOAD; }
say "load: $(grep -c 'exit 0' "$L/load.log") invocations OK; not OK: $(grep -v 'exit 0' "$L/load.log" | tr '\n' ' ')"
pack
cat "$S"
