#!/usr/bin/env bash
# bench/device_run15.sh - GPU session 15 (the last device minutes of the day):
# the whole test suite on the final tree (tests/gpu/run.sh), then one compute
# lane for every GEMM of a call (TPLA_OVERLAP_LANES=1) against the two-lane
# default, each pair in the same run, on shapes that miss the 0.90 efficiency
# target; the overlap GPU tests with one lane; tpla_ce_bench --quick (after
# its split into files). Every step after the tests runs only while the
# run's 280 s last. Logs in $OUT/logs.tgz, summary last.
set -u
. bench/device_lib.sh 15
left() { echo $(( 280 - ($(date +%s) - t0) )); }
OUT=$L/gpu-tests timeout 220 bash tests/gpu/run.sh > "$L/gpu_tests.log" 2>&1
say "tests/gpu/run.sh: exit $? ($(el)): $(tail -n 1 "$L/gpu_tests.log")"
grep -E "^== " "$L/gpu_tests.log" | tail -n 8 >> "$S"
pack
T=build-gpu/tpla
lanes() { # name lanes op args...
  local name=$1 n=$2 op=$3; shift 3
  [ "$(left)" -gt 15 ] || return 0
  TPLA_OVERLAP_LANES=$n timeout 15 $T "$op" -g 2 -n 20 -w 5 -s 1234 -c $((2 - n)) "$@" \
    > "$L/${name}_l$n.log" 2>&1
  say "$name lanes=$n: exit $? ($(el))"
  grep -E "^  (ag-gemm|gemm-rs|gemm-ar) " "$L/${name}_l$n.log" >> "$S"
}
for n in 2 1; do lanes ar_bf16 $n gemm-ar -d bf16 8192 4096 8192; done
for n in 2 1; do lanes rs_e4m3 $n gemm-rs -d e4m3 8192 4096 8192; done
for n in 2 1; do lanes rs_bf16 $n gemm-rs -d bf16 8192 4096 8192; done
pack
if [ "$(left)" -gt 25 ]; then
  (cd build-gpu && TPLA_OVERLAP_LANES=1 timeout 25 ctest -R "test_gpu_overlap$" \
    --output-on-failure > "$L/ctest_overlap_lanes1.log" 2>&1)
  say "test_gpu_overlap, one lane, 2 GPUs: exit $? ($(el)): $(grep 'tests passed' "$L/ctest_overlap_lanes1.log")"
fi
if [ "$(left)" -gt 12 ]; then
  bounded 12 "$L/ce_bench.log" build-gpu/tpla_ce_bench --quick
  say "tpla_ce_bench --quick: exit $? ($(el))"
  grep -vE "^#  " "$L/ce_bench.log" | tail -n 8 >> "$S"
fi
pack
cat "$S"
