#!/usr/bin/env bash
# bench/device_run223.sh - one GPU (nvidia-h200), session 35:
#  1. bench/nccl_poll_bench.c (review 100): host time per 1-KiB all-reduce on one rank, blocking
#     NCCL (the anchor) vs a non-blocking communicator polled by sleeping or spinning, and
#     tpla_allreduce, against this library (spin) and a copy with the old sleeping poll, three
#     rounds alternating;
#  2. every CTest test with CUDA_VISIBLE_DEVICES=0 TPLA_TEST_REQUIRE_GPUS=1 (the NCCL poll is
#     under every collective);
#  3. racecheck of test_gpu_fp8_kernels with TPLA_TEST_QUICK=1 (20 calls in its loop).
# Run in the repository root (no carry): bash bench/device_run223.sh
set -u
. bench/device_lib.sh 223
export CUDA_VISIBLE_DEVICES=0 TPLA_TEST_REQUIRE_GPUS=1
gpu_build all
old=/tmp/run223-old
rm -rf $old && cp -r "$PWD" $old && rm -rf $old/build-gpu
python3 - "$old/src/cuda/nccl_comm.c" > "$L/old_patch.log" 2>&1 <<'PY'
import sys
p = sys.argv[1]
s = open(p).read()
new = """    if (tpla_now_us() < spin_until)
      sched_yield();
    else
      tpla_poll_sleep(round++);
"""
assert new in s
open(p, "w").write(s.replace(new, "    tpla_poll_sleep(round++);\n"))
print("patched: the old sleeping poll")
PY
(cd $old && cmake -S . -B build-gpu -DCMAKE_BUILD_TYPE=Release -DTPLA_CUDA=ON > "$L/old_configure.log" 2>&1 &&
  cmake --build build-gpu -j "$(nproc)" --target tpla > "$L/old_build.log" 2>&1)
say "old poll library: exit $? ($(el)) $(cat "$L/old_patch.log")"
gcc -O2 -std=c11 -Iinclude -I/usr/local/cuda/include bench/nccl_poll_bench.c -Lbuild-gpu -ltpla \
  -L/usr/local/cuda/lib64 -lnccl -lcudart -o /tmp/nccl_poll_bench > "$L/bench_build.log" 2>&1
say "bench build: exit $?"
for round in 1 2 3; do
  for lib in build-gpu $old/build-gpu; do
    tag=$([ $lib = build-gpu ] && echo new || echo old)
    LD_LIBRARY_PATH=$lib bounded 60 "$L/poll_${tag}_$round.log" /tmp/nccl_poll_bench 2000
    say "poll bench, library $tag, round $round: exit $? ($(el))"
    grep -vE "^#" "$L/poll_${tag}_$round.log" | grep -v "^mode" | sed "s/^/  $tag: /" >> "$S"
  done
done
pack
(cd build-gpu && bounded 330 "$L/ctest.log" ctest --output-on-failure --no-tests=error)
say "ctest: exit $? ($(el)) $(grep -E 'tests passed' "$L/ctest.log")"
grep -E "Failed|\*\*\*" "$L/ctest.log" >> "$S"
pack
SAN=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
TPLA_TEST_NO_WATCHDOG=1 TPLA_TEST_SANITIZER=1 TPLA_TEST_QUICK=1 bounded 150 "$L/racecheck.log" \
  "$SAN" --tool racecheck --report-api-errors no --error-exitcode 99 build-gpu/tests/test_gpu_fp8_kernels
say "racecheck test_gpu_fp8_kernels (quick): exit $? ($(el)) $(grep -E 'passed|SUMMARY' "$L/racecheck.log" | tr '\n' ' ')"
pack
cat "$S"
