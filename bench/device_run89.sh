#!/usr/bin/env bash
# bench/device_run89.sh - one GPU (only nvidia-h200 was lent in session 15): what the chunks of
# an overlapped GEMM+RS cost in compute alone, without transfers (bench/chunk_bench.c: rows vs
# columns cuts, one lane vs two, an SM count target), the chunk shapes' GEMMs alone through
# `tpla gemm` (E4M3 op T and bf16), and test_gpu_ops of branch exp-mirror (test_mirror_cols; the
# other checks of runs 87/88 need two GPUs). About 5 minutes.
# Run in the repository root of main with carry ["snap"]: bash bench/device_run89.sh
set -u
. bench/device_lib.sh 89
gpu_build tpla_tool tpla_chunk_bench
bounded 120 "$L/chunk_bench.log" build-gpu/tpla_chunk_bench 30
say "chunk_bench: exit $? ($(el))"
grep -vE '^#' "$L/chunk_bench.log" >> "$S"
pack
one() { # NAME ARGS...
  local name=$1; shift
  bounded 60 "$L/gemm_$name.log" build-gpu/tpla gemm -g 1 -n 30 -w 5 -s 1234 "$@"
  say "gemm $name: exit $? $(grep -E '^ +[0-9]+ +(e4m3|bf16) ' "$L/gemm_$name.log" | head -n 1)"
}
for mnk in "8192 8192 4096" "1024 8192 4096" "2048 8192 4096" "4096 2048 4096" "4096 4096 4096"; do
  one "e4m3_${mnk// /x}" -d e4m3 -t NT $mnk
  one "e4m3_${mnk// /x}_beta1" -d e4m3 -t NT -B 1 $mnk
done
for mnk in "8192 8192 4096" "1152 8192 4096" "640 8192 4096" "1024 8192 4096" "4096 2048 4096"; do
  one "bf16_${mnk// /x}" -d bf16 -t NT $mnk
done
pack
tar_build /tmp/s89mirror snap/run88_mirror.tar mirror test_gpu_ops
bounded 120 "$L/ops_mirror.log" /tmp/s89mirror/build-gpu/tests/test_gpu_ops
say "test_gpu_ops exp-mirror, 1 GPU: exit $? ($(el)) $(tail -n 1 "$L/ops_mirror.log")"
pack
cat "$S"
