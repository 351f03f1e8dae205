#!/usr/bin/env bash
# bench/device_run34.sh - after the FP8 AG+GEMM scale fix (9f91276, run 32):
# FP8 (E4M3, split) AG+GEMM with op(B) N and T and GEMM+RS on all of
# DESIGN.md's shapes, bf16 of the same shapes and PyTorch's FP8 anchors in the
# same run (the FP8 table of docs/PERFORMANCE.md was runs 9-13's); then
# compute-sanitizer memcheck of a small overlapped FP8 AG+GEMM (op T, the
# changed schedule) and the Python checks on the CUDA executor. ~6 minutes.
set -u
. bench/device_lib.sh 34
left() { echo $(( 480 - ($(date +%s) - t0) )); }
cmake -S . -B build-gpu -DCMAKE_BUILD_TYPE=Release -DTPLA_CUDA=ON > "$L/configure.log" 2>&1
cmake --build build-gpu -j "$(nproc)" --target tpla_tool tpla > "$L/build.log" 2>&1
say "build: exit $? ($(el)), warnings: $(grep -c warning "$L/build.log")"
B=build-gpu/tpla
tool() { # log op args...
  local log=$1 op=$2; shift 2
  [ "$(left)" -gt 40 ] || { say "$log: skipped (time)"; return 0; }
  bounded 90 "$L/$log.log" $B $op -g 2 -n 20 -w 5 -s 1234 "$@"
  say "$log: exit $? ($(el))"
  grep -E "^  $op " "$L/$log.log" | tee -a "$S"
}
tool ag_e4m3_opN ag-gemm -d e4m3 --accum=split
tool ag_e4m3_opT ag-gemm -d e4m3 --accum=split -t NT
tool rs_e4m3 gemm-rs -d e4m3 --accum=split
tool ag_bf16 ag-gemm -d bf16
tool rs_bf16 gemm-rs -d bf16
pack
bounded 110 "$L/torch_fp8.log" torchrun --standalone --nproc_per_node=2 bench/overlap_torch.py \
  --ops ag,rs --fp8 --accum split --iters 20 --warmup 5 --json "$L/torch_fp8.jsonl"
say "PyTorch FP8 anchors (split): exit $? ($(el))"
python3 bench/overlap_compare.py --tpla "$L/ag_e4m3_opN.log" "$L/rs_e4m3.log" \
  --torch "$L/torch_fp8.jsonl" > "$L/compare_fp8.txt" 2>&1
cat "$L/compare_fp8.txt" >> "$S"
pack
SAN=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
bounded 60 "$L/memcheck_fp8_ag.log" "$SAN" --tool memcheck --error-exitcode 99 \
  $B ag-gemm -g 2 -n 2 -w 1 -d e4m3 -t NT 1024 512 256
say "memcheck tpla ag-gemm -d e4m3 -t NT 1024 512 256: exit $? ($(el)) $(grep -E 'ERROR SUMMARY' "$L/memcheck_fp8_ag.log" | sort | uniq -c | tr '\n' ' ')"
pack
[ "$(left)" -gt 45 ] && { TPLA_LIBRARY=$PWD/build-gpu/libtpla.so bounded 60 "$L/python_gpu.log" \
  torchrun --standalone --nproc_per_node=2 tests/python/gpu/run_checks.py
  say "Python checks, CUDA executor, 2 GPUs: exit $? ($(el))"; tail -n 3 "$L/python_gpu.log" >> "$S"; }
pack
cat "$S"
