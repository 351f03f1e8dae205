#!/usr/bin/env bash
# bench/device_run9.sh - GPU session 9 (after run 7's FP8 failures): the whole
# test suite on 1 and 2 GPUs + MPI, FP8 AllGather+GEMM and GEMM+RS on 2 GPUs
# (split accumulation with the PyTorch torch._scaled_mm anchors in the same
# run, fast accumulation tpla-only), the bf16 GEMM+AllReduce after its chunk
# change. Logs in $OUT/logs.tgz, summary last.
set -u
export NCCL_NVLS_ENABLE=0 NVSHMEM_DISABLE_NVLS=1 TORCH_SYMM_MEM_DISABLE_MULTICAST=1
export PYTHONUNBUFFERED=1
OUT=${OUT:-$PWD/bench/out}; mkdir -p "$OUT"
L=/tmp/run9-logs; mkdir -p "$L"
pack() { tar czf "$OUT/logs.tgz" -C "$(dirname "$L")" "$(basename "$L")"; }
S=$OUT/summary.txt; : > "$S"
t0=$(date +%s)
el() { echo "$(( $(date +%s) - t0 )) s"; }
say() { echo "$*" | tee -a "$S"; }
OUT=$L timeout 280 bash tests/gpu/run.sh > "$L/gpu_tests.log" 2>&1
say "tests/gpu/run.sh: exit $? ($(el)): $(tail -n 1 "$L/gpu_tests.log")"
grep -E "^== |^   " "$L/gpu_tests.log" | tail -n 12 >> "$S"
pack
B=build-gpu/tpla
for acc in split fast; do
  for op in ag-gemm gemm-rs; do
    timeout 70 $B $op -g 2 -d e4m3 --accum=$acc -n 20 -w 5 -s 1234 > "$L/tpla_${op}_e4m3_$acc.log" 2>&1
    say "tpla $op -d e4m3 --accum=$acc: exit $? ($(el))"
    grep -E "^  (ag-gemm|gemm-rs) |wrong|FAILED" "$L/tpla_${op}_e4m3_$acc.log" >> "$S"
  done
  pack
done
timeout 100 torchrun --standalone --nproc_per_node=2 bench/overlap_torch.py --ops ag,rs --fp8 \
  --accum split --iters 20 --warmup 5 --json "$L/torch_fp8.jsonl" > "$L/torch_fp8.log" 2>&1
say "PyTorch FP8 anchors (split): exit $? ($(el))"
grep -vE "^#   " "$L/torch_fp8.log" | grep -E "^ |^#" | tail -n 9 >> "$S"
python3 bench/overlap_compare.py --tpla "$L/tpla_ag-gemm_e4m3_split.log" \
  "$L/tpla_gemm-rs_e4m3_split.log" --torch "$L/torch_fp8.jsonl" > "$L/compare_fp8.txt" 2>&1
cat "$L/compare_fp8.txt" >> "$S"
timeout 60 $B gemm-ar -g 2 -d bf16 -n 20 -w 5 -s 1234 > "$L/tpla_gemm-ar_bf16.log" 2>&1
say "tpla gemm-ar bf16 (8 chunks): exit $? ($(el))"
grep -E "^  gemm-ar |wrong" "$L/tpla_gemm-ar_bf16.log" >> "$S"
pack
cat "$S"
