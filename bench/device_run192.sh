#!/usr/bin/env bash
# bench/device_run192.sh - one GPU (nvidia-h200), session 29: the Gram iteration's update
# operand rounded as M = W + alpha I (the new backend op add_diagonal) instead of W.
#  1. build (new tree) and e44727d's library (snap/lib_e44727d.tar, carried: the old operand);
#  2. test_gpu_ops (add_diagonal against the host), test_gpu_ns, test_gpu_ns_batch,
#     test_gpu_fuzz (its default 20 s: the session's new fuzz test, first run at this tree);
#  3. accuracy: bench/ns_update_operand_gpu.py with each library (distance from the float64
#     iteration, bf16 Gaussian inputs, X and Gram iteration, fp32 Gram);
#  4. speed: tpla ns -g 1 --gram=both on the two Gram-iteration shapes, old / new alternated,
#     two rounds; 5. memcheck of test_gpu_ops if time is left.
# Run in the repository root: bash bench/device_run192.sh (carry snap/lib_e44727d.tar)
set -u
. bench/device_lib.sh 192
gpu_build tpla_tool tpla test_gpu_ops test_gpu_ns test_gpu_ns_batch test_gpu_fuzz
tar_build /tmp/old snap/lib_e44727d.tar old tpla_tool tpla
export CUDA_VISIBLE_DEVICES=0
for t in test_gpu_ops test_gpu_ns test_gpu_ns_batch test_gpu_fuzz; do
  bounded 150 "$L/$t.log" build-gpu/tests/$t
  say "$t: exit $? ($(el)) $(tail -n 1 "$L/$t.log")"
done
grep -E "^# |worst" "$L/test_gpu_fuzz.log" | head -n 60 >> "$S"
pack
for lib in new old; do
  so=$PWD/build-gpu/libtpla.so; [ $lib = old ] && so=/tmp/old/build-gpu/libtpla.so
  PYTHONPATH=$PWD/python TPLA_LIBRARY=$so bounded 120 "$L/acc_$lib.log" \
    python3 bench/ns_update_operand_gpu.py
  say "accuracy $lib: exit $? ($(el))"
  grep '^{' "$L/acc_$lib.log" | sed "s/^/  /" >> "$S"
done
pack
for r in 1 2; do
  for lib in old new; do
    bin=build-gpu/tpla; [ $lib = old ] && bin=/tmp/old/build-gpu/tpla
    bounded 120 "$L/ns_${lib}_r$r.log" $bin ns -g 1 -s 1234 -n 20 -w 5 --gram=both \
      --svd-max=0 -c 1 4096x14336 16384x4096
    say "ns $lib round $r: exit $? ($(el))"
    grep -vE "^#" "$L/ns_${lib}_r$r.log" | grep -E "[0-9]x[0-9]" | sed "s/^/  /" >> "$S"
  done
done
pack
if [ "$(( $(date +%s) - t0 ))" -lt 380 ]; then
  TPLA_TEST_NO_WATCHDOG=1 TPLA_TEST_SANITIZER=1 bounded 120 "$L/memcheck_ops.log" \
    compute-sanitizer --tool memcheck --report-api-errors no build-gpu/tests/test_gpu_ops
  say "memcheck test_gpu_ops: exit $? ($(el)) $(grep -E 'ERROR SUMMARY' "$L/memcheck_ops.log")"
fi
pack
cat "$S"
