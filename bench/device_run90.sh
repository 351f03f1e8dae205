#!/usr/bin/env bash
# bench/device_run90.sh - one GPU (session 15 is lent nvidia-h200 only):
#  1. bench/chunk_bench.c again, its schedules now interleaved round by round (run 89's version
#     timed each back to back and its last `full` read 16% above its first: clock drift), with
#     the own chunks waiting for a later partial chunk by an event or by a stream memory value;
#  2. the new FP8 transpose kernel (transpose128, 128-byte tiles): test_gpu_fp8_kernels plain and
#     under compute-sanitizer memcheck, test_gpu_fp8 on one GPU;
#  3. A/B of `tpla gemm -d e4m3 -t NN` (B transposed on every call) old (snap/run90_old.tar =
#     git archive of e0939ad, the 64-byte transpose4) against new, three rounds alternating, with
#     the transpose-free `-t NT` of the new build once as the floor. About 5 minutes.
# Run in the repository root of main with carry ["snap"]: bash bench/device_run90.sh
set -u
. bench/device_lib.sh 90
gpu_build tpla_tool tpla_chunk_bench test_gpu_fp8_kernels test_gpu_fp8
bounded 120 "$L/chunk_bench.log" build-gpu/tpla_chunk_bench 30
say "chunk_bench: exit $? ($(el))"
grep -vE '^#' "$L/chunk_bench.log" >> "$S"
pack
bounded 120 "$L/fp8_kernels.log" build-gpu/tests/test_gpu_fp8_kernels
say "test_gpu_fp8_kernels: exit $? $(tail -n 1 "$L/fp8_kernels.log")"
SAN=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
bounded 300 "$L/fp8_kernels_memcheck.log" "$SAN" --tool memcheck --error-exitcode 3 \
  build-gpu/tests/test_gpu_fp8_kernels
say "memcheck test_gpu_fp8_kernels: exit $? $(grep -E 'ERROR SUMMARY' "$L/fp8_kernels_memcheck.log")"
bounded 300 "$L/fp8.log" build-gpu/tests/test_gpu_fp8
say "test_gpu_fp8, 1 GPU: exit $? ($(el)) $(tail -n 1 "$L/fp8.log")"
pack
tar_build /tmp/s90old snap/run90_old.tar old tpla_tool
one() { # NAME TPLA ARGS...
  local name=$1 tpla=$2; shift 2
  bounded 60 "$L/gemm_$name.log" "$tpla" gemm -g 1 -n 30 -w 5 -s 1234 -d e4m3 "$@"
  say "$name: exit $? $(grep -E '^ +[0-9]+ +e4m3 ' "$L/gemm_$name.log" | head -n 1)"
}
for mnk in "8192 8192 4096" "8192 4096 8192" "8192 8192 8192"; do
  one "nt_${mnk// /x}" build-gpu/tpla -t NT $mnk
  for rep in 1 2 3; do
    one "old_${mnk// /x}_$rep" /tmp/s90old/build-gpu/tpla -t NN $mnk
    one "new_${mnk// /x}_$rep" build-gpu/tpla -t NN $mnk
  done
done
pack
cat "$S"
