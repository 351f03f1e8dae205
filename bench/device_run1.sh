#!/usr/bin/env bash
# bench/device_run1.sh - first GPU session: the whole test suite (1 and 2
# GPUs, MPI, memcheck), the GEMM ceiling and the PyTorch NS anchors.
#   bash bench/device_run1.sh        (on the device machine; logs under $OUT)
set -u
export NCCL_NVLS_ENABLE=0 NVSHMEM_DISABLE_NVLS=1 TORCH_SYMM_MEM_DISABLE_MULTICAST=1
OUT=${OUT:-$PWD/bench/out}; mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
start=$(date +%s)
bash tests/gpu/run.sh --memcheck > "$OUT/gpu_tests.log" 2>&1
echo "tests: $(tail -n 1 "$OUT/gpu_tests.log") ($(( $(date +%s) - start )) s)"
build-gpu/tpla info > "$OUT/info.log" 2>&1
build-gpu/tpla gemm -g 1 -n 20 -w 5 8192 8192 8192 > "$OUT/gemm.log" 2>&1
python3 bench/ns_torch.py --json "$OUT/ns_torch.jsonl" > "$OUT/ns_torch_1gpu.log" 2>&1
CUDA_VISIBLE_DEVICES=0 python3 bench/ns_torch.py --shapes 16384x4096,14336x4096 --json "$OUT/ns_torch.jsonl" >> "$OUT/ns_torch_1gpu.log" 2>&1
torchrun --nproc_per_node=2 bench/ns_torch.py --shapes 8192x8192,16384x4096,4096x14336,14336x4096 \
  --json "$OUT/ns_torch.jsonl" > "$OUT/ns_torch_2gpu.log" 2>&1
echo "total $(( $(date +%s) - start )) s"
grep -E "passed|failed|FAIL|Failed" "$OUT/gpu_tests.log" | tail -n 25
cat "$OUT/info.log" | head -40; cat "$OUT/gemm.log"
cat "$OUT/ns_torch_1gpu.log" "$OUT/ns_torch_2gpu.log" | grep -v Warning | tail -n 30
