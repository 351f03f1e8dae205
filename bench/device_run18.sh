#!/usr/bin/env bash
# bench/device_run18.sh - GRAM_SHARDED_ROWS (the Gram polynomial in whole rows
# per rank, gathered behind the own rows' update) on 2 GPUs: (1) tpla ns -g 2
# on the DESIGN.md 2-GPU shapes with AUTO and each Gram algorithm forced, both
# Gram precisions, the 1-GPU baseline for the speed-up, and the PyTorch 2-GPU
# anchors, all in this run; (2) FP8 AG+GEMM (8192, 8192, 4096) op(B) N with
# and without --cache-b, and op(B) T (run 16 left the cached case unexplained);
# (3) the whole GPU test suite (test_gpu_ns forces GRAM_SHARDED_ROWS too);
# (4) compute-sanitizer memcheck of a small 2-GPU NS with each Gram algorithm
# forced (run 16's AUTO ran GATHER only). Steps after (1) run while the 560 s
# last.
set -u
. bench/device_lib.sh 18
left() { echo $(( 560 - ($(date +%s) - t0) )); }
B=build-gpu
cmake -S . -B $B -DCMAKE_BUILD_TYPE=Release -DTPLA_CUDA=ON > "$L/configure.log" 2>&1 &&
  cmake --build $B -j 16 --target tpla_tool > "$L/build_tool.log" 2>&1
say "build tool: exit $? ($(el))"
T=$B/tpla
SH2="16384x4096 14336x4096 4096x14336 8192x8192"
timeout 150 torchrun --standalone --nproc_per_node=2 bench/ns_torch.py --shapes ${SH2// /,} \
  --iters 10 --warmup 3 --error-max-dim 0 > "$L/torch_2gpu.log" 2>&1
say "PyTorch 2 GPUs: exit $? ($(el))"
grep -E "^ *[0-9]+x[0-9]+ " "$L/torch_2gpu.log" >> "$S"
pack
for algo in auto rows sharded gram; do
  timeout 90 $T ns -g 2 -s 1234 -n 20 -w 5 --gram=both --svd-max=0 --algo=$algo $SH2 \
    > "$L/ns_g2_$algo.log" 2>&1
  say "ns -g 2 --algo=$algo: exit $? ($(el))"
  grep -E "^ *[0-9]+x[0-9]+ " "$L/ns_g2_$algo.log" | sed "s/^/$algo /" >> "$S"
  pack
done
CUDA_VISIBLE_DEVICES=0 timeout 90 $T ns -g 1 -s 1234 -n 20 -w 5 --gram=both --svd-max=0 \
  16384x4096 14336x4096 8192x8192 > "$L/ns_g1.log" 2>&1
say "ns -g 1: exit $? ($(el))"
grep -E "^ *[0-9]+x[0-9]+ " "$L/ns_g1.log" | sed "s/^/g1 /" >> "$S"
pack
for v in "opN:" "opN_cacheb:--cache-b" "opT:-t NT"; do
  name=${v%%:*}; flags=${v#*:}
  [ "$(left)" -gt 300 ] || break
  timeout 30 $T ag-gemm -g 2 -n 20 -w 5 -s 1234 -d e4m3 $flags 8192 8192 4096 \
    > "$L/ag_e4m3_$name.log" 2>&1
  say "ag_e4m3_$name: exit $? ($(el))"
  grep -E "^  ag-gemm " "$L/ag_e4m3_$name.log" >> "$S"
done
pack
if [ "$(left)" -gt 200 ]; then
  OUT=$L/gpu-tests timeout $(( $(left) - 60 )) bash tests/gpu/run.sh > "$L/gpu_tests.log" 2>&1
  say "tests/gpu/run.sh: exit $? ($(el)): $(tail -n 1 "$L/gpu_tests.log")"
  grep -E "^== " "$L/gpu_tests.log" | tail -n 8 >> "$S"
  grep -E "GRAM_SHARDED_ROWS" "$L"/gpu-tests/*ns*.log 2>/dev/null | head -n 8 >> "$S"
  pack
fi
SAN=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
for algo in rows sharded gram redist; do
  [ "$(left)" -gt 25 ] || break
  bounded $(( $(left) - 10 < 60 ? $(left) - 10 : 60 )) "$L/memcheck_ns_$algo.log" "$SAN" \
    --tool memcheck --report-api-errors no --error-exitcode 99 $T ns -g 2 -n 1 -w 0 -c 0 --gram=both \
    --algo=$algo 1024x1024 2048x512 96x1000
  say "memcheck tpla ns -g 2 --algo=$algo: exit $? ($(el))"
  grep -E "ERROR SUMMARY|Invalid|misaligned" "$L/memcheck_ns_$algo.log" | head -n 4 >> "$S"
  grep -E "^ *[0-9]+x[0-9]+ " "$L/memcheck_ns_$algo.log" | head -n 6 >> "$S"
done
pack
cat "$S"
