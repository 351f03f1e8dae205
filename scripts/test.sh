#!/usr/bin/env bash
# test.sh - install missing dependencies, build tpla and its tests (Release)
# into build/, and run them with CTest. GPU tests (label "gpu") report
# "Skipped" on a machine without a GPU. Extra arguments go to ctest, e.g.
#
#   scripts/test.sh                every test
#   scripts/test.sh -L unit        the CPU unit tests only
#   scripts/test.sh -R gemm -V     tests whose name has "gemm", verbose
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/deps.sh
scripts/build.sh build
# Serially: the GPU tests each use every GPU, and the CPU tests take seconds.
ctest --test-dir build --output-on-failure "$@"
