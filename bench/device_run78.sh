#!/usr/bin/env bash
# bench/device_run78.sh - 1. the whole GPU suite at main with the row split's one chunk per
# published product (dff92ca; run 76 ran the suite at two chunks, run 77 test_gpu_ns at one);
# 2. GEMM+AllReduce with the last chunk half the others (TPLA_OVERLAP_TAIL=2) against equal
# chunks (the automatic 1): runs 11 and 71 read 833.4 / 826.2 us against 851.1 / 842.8 at
# (8192, 4096, 8192), one sample each; here tpla gemm-ar on the three DESIGN.md shapes, tail 1
# and 2 alternating, three rounds; and test_gpu_overlap on 2 GPUs with TPLA_OVERLAP_TAIL=2
# (correctness of the tapered schedules on the GPU). About 6 minutes.
# Run in the repository root of main: bash bench/device_run78.sh
set -u
. bench/device_lib.sh 78
OUT=$L/gpu-tests timeout 330 bash tests/gpu/run.sh --no-clean > "$L/gpu_tests.log" 2>&1
say "suite: exit $? ($(el)) $(tail -n 1 "$L/gpu_tests.log")"
grep -E "FAIL|HANG|Failed|not checked" "$L/gpu_tests.log" | head -10 >> "$S"
pack
TPLA_OVERLAP_TAIL=2 CUDA_VISIBLE_DEVICES=0,1 bounded 200 "$L/overlap_tail2.log" \
  build-gpu/tests/test_gpu_overlap
say "test_gpu_overlap, tail 2, 2 GPUs: exit $? ($(el)) $(tail -n 1 "$L/overlap_tail2.log")"
pack
for rep in 1 2 3; do
  for t in 1 2; do
    [ "$(( $(date +%s) - t0 ))" -lt 520 ] || { say "ar t$t round $rep: not run (time)"; continue; }
    TPLA_OVERLAP_TAIL=$t CUDA_VISIBLE_DEVICES=0,1 bounded 60 "$L/ar_t${t}_$rep.log" \
      build-gpu/tpla gemm-ar -g 2 -d bf16 -n 20 -w 5 -s 1234
    say "ar tail $t round $rep: exit $? ($(el))"
    grep -E "^  gemm-ar " "$L/ar_t${t}_$rep.log" | sed "s/^/ar_t${t}_$rep /" >> "$S"
  done
  pack
done
cat "$S"
