#!/usr/bin/env bash
# bench/device_run217.sh - one GPU (nvidia-h200), session 34: the session's library and tests.
#  1. every CTest test (unit + gpu) with CUDA_VISIBLE_DEVICES=0 TPLA_TEST_REQUIRE_GPUS=1;
#  2. the Python checks on one rank (torchrun);
#  3. A/B: test_gpu_overlap_order against a copy whose calls on another stream do not wait
#     for the plan's last call (review 93's race), which should fail it;
#  4. the survivors of mutation runs 215/216 (M20, M27, M32, M35) again, against the new tests.
# Run in the repository root (no carry): bash bench/device_run217.sh
set -u
. bench/device_lib.sh 217
export CUDA_VISIBLE_DEVICES=0 TPLA_TEST_REQUIRE_GPUS=1
gpu_build all
(cd build-gpu && bounded 330 "$L/ctest.log" ctest --output-on-failure --no-tests=error)
say "ctest: exit $? ($(el)) $(grep -E 'tests passed' "$L/ctest.log")"
grep -E "Failed|\*\*\*" "$L/ctest.log" >> "$S"
bounded 120 "$L/ns.log" build-gpu/tests/test_gpu_ns # its figures (ctest shows failures only)
say "test_gpu_ns again for its figures: exit $? ($(el))"
grep -hE "rank , " "$L/ns.log" >> "$S"
TPLA_LIBRARY=$PWD/build-gpu/libtpla.so bounded 120 "$L/python_1gpu.log" \
  torchrun --standalone --nproc_per_node=1 tests/python/gpu/run_checks.py
say "python checks, 1 rank: exit $? ($(el)) $(tail -n 1 "$L/python_1gpu.log")"
pack
ab=/tmp/run217-ab
rm -rf $ab && cp -r "$PWD" $ab && rm -rf $ab/build-gpu
sed -i 's/bool after_other = xp->joined_valid/bool after_other = false \&\& xp->joined_valid/' \
  $ab/src/cuda/transport.c
(cd $ab && cmake -S . -B build-gpu -DCMAKE_BUILD_TYPE=Release -DTPLA_CUDA=ON > "$L/ab_configure.log" 2>&1 &&
  cmake --build build-gpu -j "$(nproc)" --target test_gpu_overlap_order > "$L/ab_build.log" 2>&1)
say "build without the wait: exit $? ($(el)) $(grep -c 'after_other = false' $ab/src/cuda/transport.c) patched"
bounded 120 "$L/ab_order.log" $ab/build-gpu/tests/test_gpu_overlap_order
say "test_gpu_overlap_order without the wait: exit $? (should fail) $(tail -n 1 "$L/ab_order.log")"
grep -E "differ|FAIL" "$L/ab_order.log" | head -n 8 >> "$S"
pack
RUN=217m LIMIT=${LIMIT:-150} ONLY=M20,M27,M32,M35 bash bench/device_run215.sh > "$L/mutants.txt" 2>&1
say "survivors again: exit $? ($(el))"
grep -E "^baseline|^M[0-9]+ |^totals" "$L/mutants.txt" >> "$S"
cp -r /tmp/run217m-logs "$L/mutants" 2> /dev/null
pack
cat "$S"
