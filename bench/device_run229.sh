#!/usr/bin/env bash
# bench/device_run229.sh - one GPU (nvidia-h200), session 36, after review 104: libtpla.a now
# localizes only strong hidden symbols (weak COMDAT copies stay, so a user's copies merge), and
# test_static_gpu links a user's unoptimized kernel beside the library's:
#  1. ctest -R test_static (TPLA_TEST_REQUIRE_GPUS=1): test_static_gpu, _interpose, _symbols;
#  2. tests/install/run.sh build-gpu: the installed CUDA archive and .so linked by consumers.
# Run in the repository root (no carry): bash bench/device_run229.sh
set -u
. bench/device_lib.sh 229
export CUDA_VISIBLE_DEVICES=0 TPLA_TEST_REQUIRE_GPUS=1
gpu_build tpla tpla_static test_static_gpu test_static_interpose
(cd build-gpu && bounded 120 "$L/ctest_static.log" ctest -R test_static --output-on-failure)
say "ctest -R test_static: exit $? ($(el)) $(grep -E 'tests passed' "$L/ctest_static.log")"
grep -E "Test +#|global symbols" "$L/ctest_static.log" >> "$S"
pack
gpu_build all
bounded 150 "$L/install.log" bash tests/install/run.sh build-gpu
say "install test on build-gpu: exit $? ($(el)) $(tail -n 1 "$L/install.log")"
pack
cat "$S"
