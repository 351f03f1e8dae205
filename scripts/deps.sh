#!/usr/bin/env bash
# deps.sh - install what tpla needs on a Debian/Ubuntu machine, and only what
# is missing: cmake (>= 3.25; an older one is an error saying what to do), a
# C/C++ toolchain, BLAS and LAPACK (with their link-time .so); under CI
# (CI=true) also valgrind and pkg-config, which only .ci/run uses.
# Non-interactive and quiet; works as root (no sudo needed) or through
# `sudo -n`. Does nothing when everything is present (the GPU
# machines, which cannot install anything). A missing required package that
# cannot be installed is an error; a missing optional one is a warning.
#
#   scripts/deps.sh            (called by scripts/run.sh, scripts/test.sh, .ci/run)
#   TPLA_DEPS_ALL=1 scripts/deps.sh    also valgrind and pkg-config outside CI
set -euo pipefail

have_cmd() { command -v "$1" >/dev/null 2>&1; }
# A library the linker can find by -l<name> (names separated by '|'): its
# unversioned .so, which the -dev package installs, is known to ldconfig or
# lies in a standard directory.
have_lib() {
  local cache # not piped into grep -q: under pipefail its early exit fails the pipe
  cache=$({ /sbin/ldconfig -p || ldconfig -p; } 2>/dev/null || true)
  grep -Eq "[[:space:]]lib($1)\.so[[:space:]]" <<<"$cache" && return 0
  local dir name
  for dir in /usr/lib/x86_64-linux-gnu /usr/lib/aarch64-linux-gnu /usr/lib64 /usr/lib \
             /usr/local/lib; do
    for name in ${1//|/ }; do
      [ -e "$dir/lib$name.so" ] && return 0
    done
  done
  return 1
}

# cmake 3.25 or later (CMakeLists.txt's minimum): the distribution's package where it is new
# enough (Debian 12, Ubuntu 24.04); older ones (Ubuntu 22.04: 3.22) need a newer cmake by hand.
cmake_new_enough() {
  local v
  v=$(cmake --version 2>/dev/null | sed -n 's/^cmake version \([0-9]*\)\.\([0-9]*\).*/\1 \2/p')
  [ -n "$v" ] && set -- $v && { [ "$1" -gt 3 ] || { [ "$1" -eq 3 ] && [ "$2" -ge 25 ]; }; }
}

required=() # packages without which nothing builds
optional=() # packages only some checks need (valgrind, install test)
have_cmd cmake || required+=(cmake)
{ { have_cmd cc || have_cmd gcc; } && { have_cmd c++ || have_cmd g++; } && have_cmd make; } ||
  required+=(build-essential)
have_lib 'openblas|blas' || required+=(libblas-dev)
have_lib lapack || required+=(liblapack-dev)
if [ "${CI:-}" = true ] || [ "${TPLA_DEPS_ALL:-0}" = 1 ]; then
  have_cmd pkg-config || optional+=(pkg-config)
  have_cmd valgrind || optional+=(valgrind)
fi

check_cmake() {
  cmake_new_enough && return 0
  echo "deps.sh: $(cmake --version 2>/dev/null | head -n 1 || echo 'no cmake'): tpla needs" \
       "cmake 3.25 or later (e.g. python3 -m pip install 'cmake>=3.25', or Kitware's apt" \
       "repository)" >&2
  exit 1
}

missing=("${required[@]}" "${optional[@]}")
if [ ${#missing[@]} -eq 0 ]; then
  check_cmake
  exit 0
fi

echo "deps.sh: installing ${missing[*]}"
sudo_cmd=()
if [ "$(id -u)" -ne 0 ]; then
  if have_cmd sudo && sudo -n true 2>/dev/null; then
    sudo_cmd=(sudo -n)
  else
    sudo_cmd=(false) # not root and no password-less sudo: cannot install
  fi
fi

log=$(mktemp "${TMPDIR:-/tmp}/tpla-deps.XXXXXX")
trap 'rm -f "$log"' EXIT
apt_ok=0
if have_cmd apt-get && [ "${sudo_cmd[0]:-}" != false ]; then
  export DEBIAN_FRONTEND=noninteractive
  timeout 300 "${sudo_cmd[@]}" apt-get update -qq >"$log" 2>&1 && apt_ok=1
fi
# Install the required packages, then the optional ones, so a missing
# optional package cannot stop the required ones.
install() {
  [ "$apt_ok" -eq 1 ] && [ $# -gt 0 ] &&
    timeout 1200 "${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends "$@" \
      >>"$log" 2>&1
}
if [ ${#required[@]} -gt 0 ] && ! install "${required[@]}"; then
  echo "deps.sh: could not install ${required[*]} (needed to build tpla); install" \
       "by hand (Debian: apt-get install ${required[*]})" >&2
  tail -n 20 "$log" >&2
  exit 1
fi
if [ ${#optional[@]} -gt 0 ] && ! install "${optional[@]}"; then
  echo "deps.sh: warning: could not install ${optional[*]}; the checks that use them" \
       "will be skipped" >&2
fi
check_cmake
exit 0
