#!/usr/bin/env bash
# run.sh - the install test: `cmake --install` a built tree into a temporary
# prefix, then build and run consumer programs against it, as users would:
#   1. CMake: find_package(tpla) -> tpla::tpla (shared), tpla::tpla_static, and
#      a C++ program (the header compiles as C++);
#   2. pkg-config: `pkg-config --libs tpla` (shared) and `--static --libs`
#      (static: Libs.private must bring CUDA/NCCL/BLAS);
#   3. the installed `tpla info`.
# A static consumer must not need libtpla.so at run time (checked with
# readelf). Prints "install test: OK" and exits 0, or exits 1.
#
#   tests/install/run.sh BUILD_DIR          (called by .ci/run)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
build=$(cd "${1:?usage: tests/install/run.sh BUILD_DIR}" && pwd)
work=$(mktemp -d "${TMPDIR:-/tmp}/tpla-install.XXXXXX")
trap 'rm -rf "$work"' EXIT
prefix=$work/prefix

step() { echo "install test: $*"; }
quiet() { # run a command, showing its output only when it fails
  local log=$work/step.log
  if ! "$@" >"$log" 2>&1; then
    echo "install test: FAILED: $*" >&2
    tail -n 40 "$log" >&2
    exit 1
  fi
}
run_consumer() { # run a consumer, which prints "consumer: OK" on success
  local out
  if ! out=$("$@" 2>&1); then
    echo "install test: FAILED: $* exited non-zero:" >&2
    echo "$out" >&2
    exit 1
  fi
  echo "  $(basename "$1"): $(echo "$out" | tail -n 1)"
}
no_libtpla_needed() { # a static consumer must not load libtpla.so
  if readelf -d "$1" | grep -q 'NEEDED.*libtpla'; then
    echo "install test: FAILED: $1 needs libtpla.so; it should link libtpla.a" >&2
    exit 1
  fi
}

step "cmake --install $build --prefix <tmp>"
quiet cmake --install "$build" --prefix "$prefix"
pc=$(find "$prefix" -name tpla.pc -print -quit)
[ -n "$pc" ] || { echo "install test: FAILED: no tpla.pc installed" >&2; exit 1; }
libdir=$(dirname "$(dirname "$pc")")
for f in "$prefix/include/tpla.h" "$libdir/libtpla.a" "$libdir/libtpla.so" \
         "$libdir/cmake/tpla/tplaConfig.cmake" "$prefix/bin/tpla"; do
  [ -e "$f" ] || { echo "install test: FAILED: $f was not installed" >&2; exit 1; }
done

step "find_package(tpla): shared, static and C++ consumers"
quiet cmake -S "$here" -B "$work/cmake-build" -DCMAKE_PREFIX_PATH="$prefix" \
  -DCMAKE_BUILD_TYPE=Release
quiet cmake --build "$work/cmake-build" -j "$(nproc)"
no_libtpla_needed "$work/cmake-build/consumer_static"
for exe in consumer_shared consumer_static consumer_cxx; do
  run_consumer "$work/cmake-build/$exe"
done

if command -v pkg-config >/dev/null 2>&1; then
  step "pkg-config: shared and static consumers"
  export PKG_CONFIG_PATH=$libdir/pkgconfig
  read -r -a cflags <<<"$(pkg-config --cflags tpla)"
  read -r -a libs <<<"$(pkg-config --libs tpla)"
  read -r -a static_libs <<<"$(pkg-config --static --libs tpla)"
  # -l:libtpla.a makes the linker take the archive although the .so is there.
  static_libs=("${static_libs[@]/#-ltpla/-l:libtpla.a}")
  cc=${CC:-cc}
  quiet "$cc" "$here/consumer.c" "${cflags[@]}" "${libs[@]}" -Wl,-rpath,"$libdir" -pthread -lm \
    -o "$work/pc_shared"
  quiet "$cc" "$here/consumer.c" "${cflags[@]}" "${static_libs[@]}" -pthread -lm \
    -o "$work/pc_static"
  no_libtpla_needed "$work/pc_static"
  run_consumer "$work/pc_shared"
  run_consumer "$work/pc_static"
else
  step "pkg-config not found: pkg-config consumers SKIPPED"
fi

step "installed tpla info"
quiet "$prefix/bin/tpla" info
echo "  $(grep -m1 '^# tpla' "$work/step.log")"
echo "install test: OK"
