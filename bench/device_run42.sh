#!/usr/bin/env bash
# bench/device_run42.sh - prepared, not run (the session's device time ran out).
# 1. test_gpu_ns on both GPUs with pulled Gram sums (TPLA_NS_GRAM_SUM=pull), under
#    60 s: run 41 found its hang at the first bf16 Gram case with 2-byte aligned rows
#    (ld = cols + 3), after a plan-time rehearsal on dense rows only; plan creation now
#    also rehearses rows of every alignment below 16 bytes (ns_pull_rehearse, 66d8df8);
# 2. the whole GPU suite (default NCCL sums), which also checks the overlap plans'
#    third rehearsal pass (general alpha and beta, d58e64b; run 38's hang);
# 3. only if 1 passed: `tpla ns -g 2` pulls vs NCCL on the four 2-GPU shapes (bf16
#    Gram, AUTO, alternated twice) and run 39's memcheck of the pulls.
# About 5 minutes. If 1 and 3 pass, the pulls can become the default at P = 2.
set -u
. bench/device_lib.sh 42
gpu_build tpla_tool test_gpu_ns
CUDA_VISIBLE_DEVICES=0,1 TPLA_NS_GRAM_SUM=pull TPLA_NS_TEST_TRACE=1 bounded 60 \
  "$L/test_gpu_ns_2.log" build-gpu/tests/test_gpu_ns
pulls_ok=$?
say "test_gpu_ns, 2 GPUs (pulls): exit $pulls_ok ($(el)) $(tail -n 1 "$L/test_gpu_ns_2.log")"
grep -E "^# (2 ranks|AUTO)" "$L/test_gpu_ns_2.log" >> "$S"
grep -E "^# rank 0 starts" "$L/test_gpu_ns_2.log" | tail -n 1 >> "$S"
pack
OUT=$L/gpu-tests timeout 330 bash tests/gpu/run.sh --no-clean > "$L/gpu_tests.log" 2>&1
say "suite: exit $? ($(el)) $(tail -n 1 "$L/gpu_tests.log")"
grep -E "FAIL|HANG" "$L/gpu_tests.log" | head -10 >> "$S"
pack
if [ $pulls_ok = 0 ]; then
  SAN=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
  TPLA_NS_GRAM_SUM=pull bounded 120 "$L/memcheck_pull.log" "$SAN" --tool memcheck \
    --report-api-errors no --error-exitcode 99 build-gpu/tpla ns -g 2 -n 1 -w 0 -c 0 \
    --gram=both --algo=gram_allreduce --iterate=gram 1024x512 96x1000
  say "memcheck ns -g 2 pulls: exit $? ($(el)) $(grep 'ERROR SUMMARY' "$L/memcheck_pull.log")"
  SH2="16384x4096 14336x4096 4096x14336 8192x8192"
  for rep in 1 2; do
    for sum in pull nccl; do
      log="$L/ns_2gpu_${sum}_$rep.log"
      TPLA_NS_GRAM_SUM=$sum bounded 90 "$log" build-gpu/tpla ns -g 2 -s 1234 -n 20 -w 5 \
        --gram=input --svd-max=0 $SH2
      say "ns -g 2 ($sum) #$rep: exit $? ($(el))"
      grep -E "^ *[0-9]+x[0-9]+ " "$log" | sed "s/^/$sum /" >> "$S"
    done
  done
  pack
fi
cat "$S"
