#!/usr/bin/env bash
# bench/device_run12.sh - GPU session 12: (1) why FP8 GEMM+RS with fast
# accumulation never finished its first shape (runs 9 and 11): short bounded
# variants, with the threads' kernel wait channels when one hangs; (2) the
# Newton-Schulz benchmark after the fused polynomial and ping-pong update
# (bench/run_ns.sh, PyTorch anchors in the same run); (3) tpla_ce_bench (copy
# engines vs NCCL zero-CTA collectives). Logs in $OUT/logs.tgz, summary last.
set -u
. bench/device_lib.sh 12
(cmake -S . -B build-gpu -DCMAKE_BUILD_TYPE=Release -DTPLA_CUDA=ON > "$L/configure.log" 2>&1 &&
  cmake --build build-gpu -j 16 > "$L/build.log" 2>&1)
say "build: exit $? ($(el))"
T=build-gpu/tpla

diag() {
  local name=$1; shift
  bounded 20 "$L/diag_$name.log" "$@"
  say "diag $name: exit $? ($(el))"
  grep -E "^  gemm-|rank|error|TIMEOUT|wchan" "$L/diag_$name.log" | head -n 8 >> "$S"
}
# the GPU tests of what changed since run 9 (NS fused polynomial / ping-pong,
# the FP8 gathered-view reuse), 1 and 2 GPUs
(cd build-gpu && CUDA_VISIBLE_DEVICES=0 timeout 150 ctest -R "test_gpu_(ns|overlap_fp8_reuse)" \
  --output-on-failure > "$L/ctest_1gpu.log" 2>&1)
say "ctest NS + FP8 reuse, 1 GPU: exit $? ($(el)): $(grep 'tests passed' "$L/ctest_1gpu.log")"
(cd build-gpu && timeout 150 ctest -R "test_gpu_(ns|overlap_fp8_reuse)" \
  --output-on-failure > "$L/ctest_2gpu.log" 2>&1)
say "ctest NS + FP8 reuse, 2 GPUs: exit $? ($(el)): $(grep 'tests passed' "$L/ctest_2gpu.log")"
pack
R="-d e4m3 -n 3 -w 1 -s 1234"
diag rs_fast_1gpu $T gemm-rs -g 1 $R --accum=fast 8192 4096 8192
diag rs_fast_small $T gemm-rs -g 2 $R --accum=fast 1024 512 1024
diag rs_fast_nocheck $T gemm-rs -g 2 $R -c 0 --accum=fast 8192 4096 8192
diag rs_fast_c1 $T gemm-rs -g 2 $R --accum=fast --chunks=1 8192 4096 8192
diag rs_fast_fp32 $T gemm-rs -g 2 $R -o fp32 --accum=fast 8192 4096 8192
diag rs_fast_opT $T gemm-rs -g 2 $R -t NT --accum=fast 8192 4096 8192
diag rs_split $T gemm-rs -g 2 $R --accum=split 8192 4096 8192
diag ar_fast $T gemm-ar -g 2 $R --accum=fast 8192 4096 8192
CUBLASLT_LOG_LEVEL=5 CUBLASLT_LOG_FILE=$L/cublaslt_%i.log bounded 20 "$L/diag_lt.log" \
  $T gemm-rs -g 2 $R -c 0 --accum=fast 1024 512 1024
say "diag cublaslt log: exit $? ($(el))"
pack

# (3) copy engines vs NCCL zero-CTA
bounded 90 "$L/ce_bench.log" build-gpu/tpla_ce_bench
say "tpla_ce_bench: exit $? ($(el))"
grep -vE "^#  " "$L/ce_bench.log" | tail -n 24 >> "$S"
pack

# (2) Newton-Schulz
OUT=$L/ns SHAPES_1GPU="4096x14336 8192x8192" SHAPES_BIG="" CHECK_SHAPE="2048x2048" \
  NS_CHECK_TIMEOUT=60 timeout 330 bash bench/run_ns.sh > "$L/run_ns.log" 2>&1
say "run_ns.sh: exit $? ($(el))"
tail -n 40 "$L/ns/compare.txt" >> "$S" 2> /dev/null
pack
cat "$S"
