#!/usr/bin/env bash
# bench/device_run198.sh - one GPU (nvidia-h200), session 30: run 197's one failed case (under
# memcheck: ns1 318x2 fp16, fp32 Gram, Polar Express, Gram iteration, in a workspace group after
# a neighbour plan, 6.97e-2 against float64) replayed: five times as drawn, five times with
# TPLA_FUZZ_SHARE=0 (the same case without the group), once under memcheck.
# Run in the repository root (no carry): bash bench/device_run198.sh
set -u
. bench/device_lib.sh 198
gpu_build test_gpu_fuzz
seed=0xb7efd663e797828e
for share in 1 0; do
  for i in 1 2 3 4 5; do
    CUDA_VISIBLE_DEVICES=0 TPLA_FUZZ_SHARE=$share TPLA_FUZZ_SEED=$seed bounded 60 \
      "$L/replay_share${share}_$i.log" build-gpu/tests/test_gpu_fuzz
    say "replay share=$share #$i: exit $? $(grep -hoE 'relative error [0-9.e+-]+ against float64|worst relative Frobenius error [0-9.e+-]+' "$L/replay_share${share}_$i.log" | head -n 1)"
  done
done
pack
CUDA_VISIBLE_DEVICES=0 TPLA_FUZZ_SEED=$seed TPLA_TEST_NO_WATCHDOG=1 TPLA_TEST_SANITIZER=1 \
  bounded 120 "$L/replay_memcheck.log" compute-sanitizer --tool memcheck --report-api-errors no \
  build-gpu/tests/test_gpu_fuzz
say "replay under memcheck: exit $? $(grep -E 'ERROR SUMMARY' "$L/replay_memcheck.log") $(grep -hoE 'relative error [0-9.e+-]+ against float64|worst relative Frobenius error [0-9.e+-]+' "$L/replay_memcheck.log" | head -n 1)"
pack
cat "$S"
