#!/usr/bin/env bash
# bench/device_run32.sh - (1) the FP8 AG+GEMM fix: the own rows' scale is set on
# compute lane 0 before the own GEMM instead of on the copy lane, where it waited
# behind that GEMM (runs 29/30: a 5 us spin before the GEMM gave op(B) T 354 ->
# 294 us at (16384, 8192, 1024)); the committed library, every layout at the
# comm- and GEMM-bound shapes, then the FP8 and overlap tests on 2 GPUs.
# (2) experiment (bench/run32_algo_patch.py, a patched copy): the chunk GEMMs
# of FP8 GEMM+RS and bf16 GEMM+AR (8192, 4096, 8192) with cuBLASLt heuristic
# results 0-4 (runs 30: a 1024-row FP8 chunk takes 57 us where 1/8 of the
# unchunked GEMM is 49). About 6 minutes.
set -u
. bench/device_lib.sh 32
ROOT=$PWD
(patched_build /tmp/s32x "$ROOT/bench/run32_algo_patch.py") &
cmake -S . -B build-gpu -DCMAKE_BUILD_TYPE=Release -DTPLA_CUDA=ON > "$L/configure.log" 2>&1
cmake --build build-gpu -j "$(nproc)" > "$L/build.log" 2>&1
say "build: exit $? ($(el)), warnings: $(grep -c warning "$L/build.log")"
wait
ag() { # name args...
  local name=$1; shift
  timeout 40 build-gpu/tpla ag-gemm -g 2 -n 20 -w 5 -s 1234 -d e4m3 "$@" > "$L/ag_$name.log" 2>&1
  say "ag $name: exit $? $(grep -E '^  ag-gemm ' "$L/ag_$name.log")"
}
ag comm_opT -t NT 16384 8192 1024
ag comm_cached --cache-b 16384 8192 1024
ag comm_opN 16384 8192 1024
ag gemm_opT -t NT 8192 8192 4096
ag gemm_cached --cache-b 8192 8192 4096
ag gemm_opN 8192 8192 4096
ag big_opT -t NT 32768 8192 4096
ag comm_opT_fast -t NT --accum=fast 16384 8192 1024
(cd build-gpu && timeout 150 ctest -R "fp8|overlap" --output-on-failure > "$L/ctest.log" 2>&1)
say "ctest fp8|overlap, 2 GPUs: exit $? ($(el)) $(grep -E 'tests passed|tests failed' "$L/ctest.log")"
pack
cd /tmp/s32x
for a in 0 1 2 3 4; do
  for spec in "gemm-rs e4m3 -t NT" "gemm-ar bf16"; do
    set -- $spec
    op=$1 dt=$2; shift 2
    log="$L/algo${a}_${op}_$dt.log"
    TPLA_RUN32_ALGO=$a timeout 40 build-exp/tpla $op -g 2 -n 20 -w 5 -s 1234 -d $dt "$@" \
      8192 4096 8192 > "$log" 2>&1
    say "algo $a $op $dt: exit $? $(grep -E "^  $op " "$log") | $(grep -m1 RUN32 "$log")"
  done
  pack
done
cat "$S"
