#!/usr/bin/env bash
# bench/device_run15.sh - GPU session 15 (the last device minutes of the day):
# one compute lane for every GEMM of a call (TPLA_OVERLAP_LANES=1) against the
# two-lane default, each pair in the same run, on the shapes that miss the
# 0.90 efficiency target; the overlap GPU tests with one lane; tpla_ce_bench
# --quick (after its split into files); then the whole test suite on the final
# tree (tests/gpu/run.sh). Logs in $OUT/logs.tgz, summary last.
set -u
. bench/device_lib.sh 15
(cmake -S . -B build-gpu -DCMAKE_BUILD_TYPE=Release -DTPLA_CUDA=ON > "$L/configure.log" 2>&1 &&
  cmake --build build-gpu -j 16 > "$L/build.log" 2>&1)
say "build: exit $? ($(el))"
T=build-gpu/tpla
lanes() { # name lanes op args...
  local name=$1 n=$2 op=$3; shift 3
  TPLA_OVERLAP_LANES=$n timeout 30 $T "$op" -g 2 -n 20 -w 5 -s 1234 "$@" > "$L/${name}_l$n.log" 2>&1
  say "$name lanes=$n: exit $? ($(el))"
  grep -E "^  (ag-gemm|gemm-rs|gemm-ar) " "$L/${name}_l$n.log" >> "$S"
}
for n in 2 1; do lanes ar_bf16 $n gemm-ar -d bf16 8192 4096 8192; done
for n in 2 1; do lanes rs_e4m3 $n gemm-rs -d e4m3 8192 4096 8192; done
for n in 2 1; do lanes rs_bf16 $n gemm-rs -d bf16 8192 4096 8192; done
for n in 2 1; do lanes ag_bf16 $n ag-gemm -d bf16 16384 8192 1024; done
pack
(cd build-gpu && TPLA_OVERLAP_LANES=1 timeout 60 ctest -R "test_gpu_overlap" \
  --output-on-failure > "$L/ctest_overlap_lanes1.log" 2>&1)
say "overlap GPU tests, one lane, 2 GPUs: exit $? ($(el)): $(grep 'tests passed' "$L/ctest_overlap_lanes1.log")"
bounded 30 "$L/ce_bench.log" build-gpu/tpla_ce_bench --quick
say "tpla_ce_bench --quick: exit $? ($(el))"
grep -vE "^#  " "$L/ce_bench.log" | tail -n 8 >> "$S"
pack
left=$(( 280 - ($(date +%s) - t0) ))
OUT=$L/gpu-tests timeout $left bash tests/gpu/run.sh > "$L/gpu_tests.log" 2>&1
say "tests/gpu/run.sh: exit $? ($(el)): $(tail -n 1 "$L/gpu_tests.log")"
grep -E "^== " "$L/gpu_tests.log" | tail -n 8 >> "$S"
pack
cat "$S"
