#!/usr/bin/env bash
# build.sh - configure and build tpla into a build directory, quietly: the
# full CMake and compiler output goes to <dir>/configure.log and
# <dir>/build.log, and their tail is shown when a step fails.
#
#   scripts/build.sh DIR [--target T] [-- cmake configure options...]
#   scripts/build.sh build                       Release, CUDA if nvcc is found
#   scripts/build.sh build-host -- -DTPLA_CUDA=OFF
# CMAKE_BUILD_TYPE defaults to Release; TPLA_CMAKE_ARGS adds configure options.
set -euo pipefail
cd "$(dirname "$0")/.."

dir=${1:?usage: scripts/build.sh DIR [--target T] [-- cmake options]}
shift
build_args=()
while [ $# -gt 0 ] && [ "$1" != "--" ]; do
  build_args+=("$1")
  shift
done
[ "${1:-}" = "--" ] && shift
mkdir -p "$dir"

show_log() {
  echo "--- last lines of $1 ---" >&2
  grep -nE 'error|Error|ERROR' "$1" | head -n 20 >&2 || true
  tail -n 40 "$1" >&2
  exit 1
}

start=$(date +%s)
# CMake looks for nvcc on PATH only: the toolkit's usual place too, when PATH lacks it
cuda_hint=()
if ! command -v nvcc >/dev/null 2>&1 && [ -x /usr/local/cuda/bin/nvcc ] &&
   ! grep -qsE '^CMAKE_CUDA_COMPILER:[A-Z]*=.*nvcc$' "$dir/CMakeCache.txt"; then
  cuda_hint=(-DCMAKE_CUDA_COMPILER=/usr/local/cuda/bin/nvcc)
fi
if grep -qs '^TPLA_CUDA:BOOL=OFF' "$dir/CMakeCache.txt" &&
   [[ " $* ${TPLA_CMAKE_ARGS:-} " != *"TPLA_CUDA=OFF"* ]] &&
   { command -v nvcc >/dev/null 2>&1 || [ -x /usr/local/cuda/bin/nvcc ]; }; then
  echo "build.sh: note: $dir was configured without the CUDA executor (TPLA_CUDA=OFF is" \
       "cached); remove $dir, or pass -DTPLA_CUDA=ON, to build it" >&2
fi
# shellcheck disable=SC2086 # TPLA_CMAKE_ARGS is a list of options
cmake -S . -B "$dir" -DCMAKE_BUILD_TYPE=Release "${cuda_hint[@]}" ${TPLA_CMAKE_ARGS:-} "$@" \
  >"$dir/configure.log" 2>&1 || show_log "$dir/configure.log"
cuda=$(sed -n 's/^TPLA_CUDA:BOOL=//p' "$dir/CMakeCache.txt")
echo "build.sh: building $dir (CUDA executor: ${cuda:-?}; log: $dir/build.log)"
cmake --build "$dir" -j "$(nproc)" "${build_args[@]}" >"$dir/build.log" 2>&1 ||
  show_log "$dir/build.log"
grep -E 'warning:' "$dir/build.log" | sort -u | head -n 20 || true
echo "build.sh: $dir built in $(($(date +%s) - start)) s"
