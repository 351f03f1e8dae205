#!/usr/bin/env bash
# run.sh - the main job: install missing dependencies, build tpla (Release)
# into build/, then run `build/tpla run`: build and GPU information, then GEMM
# checks and benchmarks on the GPUs present, or on the host executor (with a
# notice) when there is no GPU. Extra arguments go to `tpla run`, e.g.
#
#   scripts/run.sh                 everything on all GPUs (or the host)
#   scripts/run.sh -d bf16 -g 2    one dtype, two GPUs
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/deps.sh
scripts/build.sh build --target tpla_tool
exec build/tpla run "$@"
