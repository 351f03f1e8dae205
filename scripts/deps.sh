#!/usr/bin/env bash
# deps.sh - install what tpla needs to build and test on a Debian/Ubuntu
# machine, and only what is missing: cmake (>= 3.25), a C/C++ toolchain,
# BLAS and LAPACK (with their link-time .so), pkg-config and valgrind.
# Non-interactive and quiet; works as root (no sudo needed) or through
# `sudo -n`. Does nothing when everything is present (the GPU machines, which
# cannot install anything). If an optional tool (valgrind, pkg-config) is
# missing and cannot be installed, it warns and succeeds; a missing required
# one is an error.
#
#   scripts/deps.sh            (called by scripts/run.sh, scripts/test.sh, .ci/run)
set -euo pipefail

have_cmd() { command -v "$1" >/dev/null 2>&1; }
# A library the linker can find by -l<name>: its unversioned .so is known to
# ldconfig (the -dev package installs that link).
have_lib() { /sbin/ldconfig -p 2>/dev/null | grep -Eq "[[:space:]]lib($1)\.so[[:space:]]"; }

required=() # packages without which nothing builds
optional=() # packages only some checks need (valgrind, install test)
have_cmd cmake || required+=(cmake)
{ have_cmd cc && have_cmd c++ && have_cmd make; } || required+=(build-essential)
have_lib 'openblas|blas' || required+=(libblas-dev)
have_lib lapack || required+=(liblapack-dev)
have_cmd pkg-config || optional+=(pkg-config)
have_cmd valgrind || optional+=(valgrind)

missing=("${required[@]}" "${optional[@]}")
if [ ${#missing[@]} -eq 0 ]; then
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
  timeout 600 "${sudo_cmd[@]}" apt-get update -qq >"$log" 2>&1 && apt_ok=1
fi
# Install the required packages, then the optional ones, so a missing
# optional package cannot stop the required ones.
install() {
  [ "$apt_ok" -eq 1 ] && [ $# -gt 0 ] &&
    timeout 1200 "${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends "$@" \
      >>"$log" 2>&1
}
if [ ${#required[@]} -gt 0 ] && ! install "${required[@]}"; then
  echo "deps.sh: could not install ${required[*]} (needed to build tpla); install them" \
       "by hand (Debian: apt-get install ${required[*]})" >&2
  tail -n 20 "$log" >&2
  exit 1
fi
if [ ${#optional[@]} -gt 0 ] && ! install "${optional[@]}"; then
  echo "deps.sh: warning: could not install ${optional[*]}; the checks that use them" \
       "will be skipped" >&2
fi
exit 0
