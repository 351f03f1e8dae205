#!/usr/bin/env bash
# bench/device_run84.sh - (1) FP8 e4m3 on the transfer-bound shapes, the automatic chunks
# against 8 equal chunks: ovl_auto_chunks' model counts an FP8 plan's transfer at 1 byte an
# element and its GEMM at the bf16 rate, where GEMM+RS/AR move bf16 partials and FP8 GEMMs run
# ~1.8x faster, so it picks 4 chunks (GEMM+AR: with a half tail) where bf16 gets 8; the corrected
# model would pick 8 for AG (16384, 8192, 1024), RS and AR (16384, 1024, 8192). Two rounds,
# alternating, 2 GPUs. (2) The whole GPU suite (tests/gpu/run.sh: 1 GPU, then both, then MPI)
# at 9ddab76's library (the overlap and NS code of 6c7b1a7; the suite last ran at dff92ca's, run
# 78). About 7 minutes. Run in the repository root of main: bash bench/device_run84.sh
set -u
. bench/device_lib.sh 84
gpu_build tpla_tool
one() { # NAME ENV ARGS...: one invocation, its table line into the summary
  local name=$1 envs=$2; shift 2
  local tail=${envs#TPLA_OVERLAP_TAIL=}
  [ "$tail" != "$envs" ] || tail=
  TPLA_OVERLAP_TAIL=$tail CUDA_VISIBLE_DEVICES=0,1 bounded 60 "$L/$name.log" build-gpu/tpla "$@"
  say "$name: exit $? $(grep -E '^  (ag-gemm|gemm-rs|gemm-ar) ' "$L/$name.log")"
}
F="-g 2 -d e4m3 --accum=split -n 20 -w 5 -s 1234"
for rep in 1 2; do
  one "ag_auto_$rep" X=0 ag-gemm $F 16384 8192 1024
  one "ag_c8_$rep" X=0 ag-gemm $F --chunks=8 16384 8192 1024
  one "rs_auto_$rep" X=0 gemm-rs $F 16384 1024 8192
  one "rs_c8_$rep" X=0 gemm-rs $F --chunks=8 16384 1024 8192
  one "ar_auto_$rep" X=0 gemm-ar $F 16384 1024 8192
  one "ar_c8_$rep" TPLA_OVERLAP_TAIL=1 gemm-ar $F --chunks=8 16384 1024 8192
  pack
done
[ "${SUITE:-1}" = 1 ] || { cat "$S"; exit 0; }
left=$(( 580 - ($(date +%s) - t0) ))
OUT=$L/gpu-tests timeout $left bash tests/gpu/run.sh --no-clean > "$L/gpu_tests.log" 2>&1
say "suite: exit $? ($(el)) $(tail -n 1 "$L/gpu_tests.log")"
grep -E "FAIL|HANG|Failed|not checked" "$L/gpu_tests.log" | head -10 >> "$S"
pack
cat "$S"
