#!/usr/bin/env bash
# bench/device_run191.sh - for the first two-GPU call (nvidia-h200-x2) after session 28: the
# whole GPU suite on 1 and 2 GPUs, with memcheck of the NS tests. The two-rank Newton-Schulz
# paths have not run on GPUs since session 25 (runs 167-169); since then the X iteration's
# mirror of an all-reduced or pulled Gram skips its whole diagonal blocks (32bf0e0, 52fdfae;
# host-tested in CI), and Muon's batched plans changed (sessions 26-27). Then the 2-GPU
# speed-ups of issue #3 (1 GPU and 2 GPUs alternated, as run 124) while time remains.
# Next calls: bench/device_run172.sh (Python checks and Muon on 2 ranks, the direct-partials
# A/B of issues #4/#5), then bench/device_run123.sh (the NS table with PyTorch's anchors).
# Run in the repository root (no carry), kind nvidia-h200-x2: bash bench/device_run191.sh
set -u
. bench/device_lib.sh 191
MEMCHECK_TESTS="test_gpu_ns test_gpu_ns_batch" OUT=$L/gpu-tests bounded 480 "$L/gpu_tests.log" \
  bash tests/gpu/run.sh --memcheck
say "tests/gpu/run.sh --memcheck: exit $? ($(el)) $(tail -n 1 "$L/gpu_tests.log")"
grep -E "^== memcheck|FAIL|failed:" "$L/gpu_tests.log" | head -n 20 >> "$S"
pack
for round in 1 2 3; do
  [ "$(( $(date +%s) - t0 ))" -lt 540 ] || { say "speed-up round $round: not run (time)"; break; }
  for g in 1 2; do
    log="$L/ns_g${g}_$round.log"
    CUDA_VISIBLE_DEVICES=$([ $g = 1 ] && echo 0 || echo 0,1) bounded 40 "$log" build-gpu/tpla ns \
      -g $g -n 20 -w 5 --gram=input --svd-max=0 8192x8192 16384x4096
    say "ns -g $g round $round: exit $? ($(el))"
    grep -E "^ *[0-9]+x[0-9]+ " "$log" | sed "s/^/g$g r$round /" >> "$S"
  done
  pack
done
cat "$S"
