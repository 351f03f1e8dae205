#!/usr/bin/env bash
# bench/device_run209.sh - one GPU (nvidia-h200), session 32: the overlap tool's float64
# check with its tightened bound (tools/overlap_data.c: D's roundings on |ref| and the
# partials, the accumulation's as a random walk; the old bound passed results 25-50% off):
# must still read 0 wrong on real cuBLASLt results, DESIGN.md's shapes, every dtype and
# accumulation, one GPU (-g 1: one rank; the partials' term of 2+ ranks is not exercised).
# Run in the repository root (no carry): bash bench/device_run209.sh
set -u
. bench/device_lib.sh 209
gpu_build tpla_tool
for spec in "ag-gemm 8192 8192 4096" "ag-gemm 16384 8192 1024" "gemm-rs 8192 4096 8192" \
            "gemm-rs 16384 1024 8192" "gemm-ar 8192 4096 8192"; do
  set -- $spec
  for dt in "-d bf16" "-d fp16" "-d fp32" "-d fp32 -T 1" "-d e4m3" "-d e4m3 --accum=fast" \
            "-d e5m2"; do
    log="$L/$1_$2_$3_$4_$(echo $dt | tr -d ' =-').log"
    CUDA_VISIBLE_DEVICES=0 bounded 60 "$log" build-gpu/tpla $1 -g 1 $dt -c 1 -n 1 -w 0 -s 1234 $2 $3 $4
    echo "$1 $2 $3 $4 [$dt] exit $?: $(grep -vE '^#' "$log" | awk 'NF > 5 {print "wrong", $NF}' | tr '\n' ' ')" >> "$L/table.txt"
  done
done
say "checks: $(grep -c . "$L/table.txt") invocations, $(grep -cE 'exit [^0]|wrong [1-9]' "$L/table.txt") with a nonzero exit or wrong elements ($(el))"
grep -E 'exit [^0]|wrong [1-9]' "$L/table.txt" | head -n 20 >> "$S"
pack
cat "$S"
