#!/usr/bin/env bash
# bench/device_run226.sh - one GPU (nvidia-h200), session 36: the static archive whose objects are
# merged (ld -r) and whose internal symbols are made local (review 101's fix, applied this
# session), on a GPU:
#  1. test_static_gpu (the CUDA executor from the localized libtpla.a: its kernels must still
#     register and run), test_static_interpose, test_static_symbols, then test_static_gpu
#     under compute-sanitizer memcheck (API errors not reported: NCCL's own kernel probes);
#  2. every CTest test (unit + gpu) with CUDA_VISIBLE_DEVICES=0 TPLA_TEST_REQUIRE_GPUS=1: the
#     tests, the tool and the benches now link the unlocalized tpla_internal;
#  3. tests/install/run.sh build-gpu: the installed CUDA archive linked by a CMake and a
#     pkg-config consumer;
#  4. the tool: tpla ns -g 1 on a small shape.
# Run in the repository root (no carry): bash bench/device_run226.sh
set -u
. bench/device_lib.sh 226
export CUDA_VISIBLE_DEVICES=0 TPLA_TEST_REQUIRE_GPUS=1
gpu_build all
(cd build-gpu && bounded 120 "$L/ctest_static.log" ctest -R test_static --output-on-failure)
say "ctest -R test_static: exit $? ($(el)) $(grep -E 'tests passed' "$L/ctest_static.log")"
grep -E "Test +#" "$L/ctest_static.log" >> "$S"
SAN=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
bounded 200 "$L/static_gpu_memcheck.log" "$SAN" --tool memcheck --report-api-errors no \
  --error-exitcode 9 build-gpu/tests/test_static_gpu
say "test_static_gpu under memcheck: exit $? ($(el)) $(grep -E 'ERROR SUMMARY' "$L/static_gpu_memcheck.log")"
pack
(cd build-gpu && bounded 400 "$L/ctest_all.log" ctest --output-on-failure --no-tests=error)
say "ctest (unit + gpu): exit $? ($(el)) $(grep -E 'tests passed' "$L/ctest_all.log")"
grep -E "Failed|\*\*\*" "$L/ctest_all.log" >> "$S"
pack
bounded 200 "$L/install.log" bash tests/install/run.sh build-gpu
say "install test on build-gpu: exit $? ($(el)) $(tail -n 1 "$L/install.log")"
bounded 60 "$L/tool_ns.log" build-gpu/tpla ns -g 1 -n 5 -w 2 512x1024
say "tpla ns -g 1 512x1024: exit $? ($(el))"
grep -E "^ *[0-9]+x[0-9]+ " "$L/tool_ns.log" >> "$S"
pack
cat "$S"
