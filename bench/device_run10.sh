#!/usr/bin/env bash
# bench/device_run10.sh - GPU session 10 (the last ~4 device minutes): Newton-
# Schulz GRAM_SHARDED vs GRAM_ALLREDUCE on 2 GPUs, the PyTorch 2-GPU anchors
# and the 1-GPU baseline, in that order of priority; each result lands in
# $OUT as soon as it exists (the call may be cut short).
set -u
export NCCL_NVLS_ENABLE=0 NVSHMEM_DISABLE_NVLS=1 TORCH_SYMM_MEM_DISABLE_MULTICAST=1
export PYTHONUNBUFFERED=1
OUT=${OUT:-$PWD/bench/out}; mkdir -p "$OUT"
t0=$(date +%s)
(cmake -S . -B build-gpu -DCMAKE_BUILD_TYPE=Release -DTPLA_CUDA=ON > /dev/null 2>&1 &&
  cmake --build build-gpu -j 32 --target tpla_tool > /dev/null 2>&1)
echo "build: exit $? ($(( $(date +%s) - t0 )) s)"
T=build-gpu/tpla
SH="8192x8192 16384x4096 14336x4096 4096x14336"
timeout 50 $T ns -g 2 -s 1234 -n 10 -w 3 --gram=both --svd-max=0 --algo=sharded $SH > "$OUT/ns_2gpu_sharded.log" 2>&1
echo "sharded: exit $? ($(( $(date +%s) - t0 )) s)"
timeout 70 torchrun --standalone --nproc_per_node=2 bench/ns_torch.py --shapes ${SH// /,} \
  --iters 10 --warmup 3 --error-max-dim 0 > "$OUT/ns_torch_2gpu.log" 2>&1
echo "torch 2 GPUs: exit $? ($(( $(date +%s) - t0 )) s)"
timeout 50 $T ns -g 2 -s 1234 -n 10 -w 3 --gram=both --svd-max=0 --algo=gram $SH > "$OUT/ns_2gpu_gram.log" 2>&1
echo "gram: exit $? ($(( $(date +%s) - t0 )) s)"
CUDA_VISIBLE_DEVICES=0 timeout 40 $T ns -g 1 -s 1234 -n 10 -w 3 --gram=both --svd-max=0 8192x8192 16384x4096 > "$OUT/ns_1gpu.log" 2>&1
echo "1 GPU: exit $? ($(( $(date +%s) - t0 )) s)"
