#!/usr/bin/env bash
# bench/device_run11.sh - GPU session 11: (1) the tail-tapered chunk schedule
# (TPLA_OVERLAP_TAIL) against equal chunks, for GEMM+AllReduce and GEMM+RS
# (bf16 and FP8) at (8192, 4096, 8192), with chunk counts around the
# automatic ones; (2) what run 9 could not finish for issue #5: FP8
# AllGather+GEMM (32768, 8192, 4096) and (16384, 8192, 1024), split and fast,
# FP8 GEMM+RS with fast accumulation, PyTorch's fused FP8 all-gather. Every
# step is bounded by `timeout`; logs in $OUT/logs.tgz, summary last.
set -u
. bench/device_lib.sh 11
export CUDA_MODULE_LOADING=EAGER
(cmake -S . -B build-gpu -DCMAKE_BUILD_TYPE=Release -DTPLA_CUDA=ON > "$L/configure.log" 2>&1 &&
  cmake --build build-gpu -j 16 --target tpla_tool > "$L/build.log" 2>&1)
say "build: exit $? ($(el))"
T=build-gpu/tpla
row() { grep -E "^  (ag-gemm|gemm-rs|gemm-ar) " "$1" | sed "s/^/$2 /" >> "$S"; }

# (1) tail sweep: op dtype chunks tail
sweep() {
  local op=$1 dt=$2 ch=$3 tail=$4 f="$L/sweep_${1}_${2}_c${3}_t${4}.log"
  TPLA_OVERLAP_TAIL=$tail timeout 60 $T "$op" -g 2 -d "$dt" --chunks="$ch" -n 20 -w 5 -s 1234 \
    8192 4096 8192 > "$f" 2>&1
  say "sweep $op $dt chunks=$ch tail=$tail: exit $? ($(el))"
  row "$f" "c$ch/t$tail"
}
for ch in 4 6; do for tail in 1 2 4; do sweep gemm-ar bf16 $ch $tail; done; done
for tail in 1 4; do sweep gemm-rs bf16 4 $tail; done
for ch in 2 4 8; do for tail in 1 4; do sweep gemm-rs e4m3 $ch $tail; done; done
pack

# (2) issue #5's missing FP8 figures
for acc in split fast; do
  for shape in "32768 8192 4096" "16384 8192 1024"; do
    f="$L/ag_e4m3_${acc}_${shape// /x}.log"
    timeout 150 $T ag-gemm -g 2 -d e4m3 --accum=$acc -n 20 -w 5 -s 1234 $shape > "$f" 2>&1
    say "ag-gemm e4m3 $acc $shape: exit $? ($(el))"
    row "$f" "$acc"
  done
  pack
done
timeout 150 $T gemm-rs -g 2 -d e4m3 --accum=fast -n 20 -w 5 -s 1234 > "$L/rs_e4m3_fast.log" 2>&1
say "gemm-rs e4m3 fast (DESIGN shapes): exit $? ($(el))"
row "$L/rs_e4m3_fast.log" fast
pack
timeout 150 torchrun --standalone --nproc_per_node=2 bench/overlap_torch.py --ops ag --fp8 \
  --accum split --iters 20 --warmup 5 --json "$L/torch_fp8_ag.jsonl" > "$L/torch_fp8_ag.log" 2>&1
say "PyTorch FP8 AG anchors (split): exit $? ($(el))"
grep -vE "^#   " "$L/torch_fp8_ag.log" | grep -E "^ |^#" | tail -n 6 >> "$S"
pack
cat "$S"
