#!/usr/bin/env bash
# scripts/test_python.sh - the CPU tests of the tpla Python package
# (tests/python: 1 process, and 2 and 3 processes joined by gloo on the host
# executor's cross-process group). Builds libtpla into build-python/ (host
# executor only) unless TPLA_LIBRARY names one, installs torch (PyPI), numpy and pytest if they are
# missing, then runs pytest and prints its summary. Extra arguments go to
# pytest, e.g. scripts/test_python.sh -k muon.
#   Run: scripts/test_python.sh        (about 2 minutes on 2 cores)
set -euo pipefail
cd "$(dirname "$0")/.."
python=${PYTHON:-python3}

if [ -z "${TPLA_LIBRARY:-}" ]; then
  build=${TPLA_PY_BUILD:-build-python}
  echo "test_python: building libtpla (host executor) in $build/"
  mkdir -p "$build"
  cmake -S . -B "$build" -DTPLA_CUDA=OFF -DTPLA_BUILD_TESTS=OFF >"$build/build.log" 2>&1 ||
    { cat "$build/build.log"; exit 1; }
  cmake --build "$build" -j "$(nproc)" --target tpla >>"$build/build.log" 2>&1 ||
    { cat "$build/build.log"; exit 1; }
  TPLA_LIBRARY=$(cd "$build" && pwd)/libtpla.so # $build may be absolute
  export TPLA_LIBRARY
fi
echo "test_python: TPLA_LIBRARY=$TPLA_LIBRARY"

missing=$("$python" -c 'import importlib.util as u
print(" ".join(m for m in ("torch", "numpy", "pytest") if u.find_spec(m) is None))')
if [[ " $missing " == *" torch "* ]]; then
  echo "test_python: installing torch from PyPI"
  "$python" -m pip install -q torch
fi
for m in numpy pytest; do
  if [[ " $missing " == *" $m "* ]]; then
    echo "test_python: installing $m"
    "$python" -m pip install -q "$m"
  fi
done

"$python" -m pytest tests/python -q -rfEs -p no:cacheprovider "$@"
