"""setup.py - build hook of the tpla Python package (metadata: pyproject.toml).

`pip install ./python` puts libtpla.so inside the package, taken from the
first of:
  1. TPLA_LIBRARY=/path/to/libtpla.so      (a library you built)
  2. TPLA_BUILD_DIR=/path/to/build          (its libtpla.so)
  3. a CMake build of the source tree beside this directory (../CMakeLists.txt),
     in the build's temporary directory; extra configure arguments from
     TPLA_CMAKE_ARGS (e.g. "-DTPLA_CUDA=OFF"), parallel jobs from TPLA_BUILD_JOBS.
With TPLA_SKIP_BUILD=1 nothing is bundled: the package then finds the library
at import time (see tpla/_lib.py). If none of this works the install stops with
a message that says what to do.
"""
import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py
from setuptools.dist import Distribution

HERE = Path(__file__).resolve().parent
SOURCE = HERE.parent


def _fail(msg):
    sys.stderr.write("\ntpla setup: " + msg + "\n\n")
    raise SystemExit(1)


def _built_library(build_dir):
    for name in ("libtpla.so", "libtpla.so.0"):
        p = Path(build_dir) / name
        if p.exists():
            return p.resolve()
    return None


def _cmake_build(build_temp):
    if not (SOURCE / "CMakeLists.txt").exists() or not (SOURCE / "include" / "tpla.h").exists():
        return None
    cmake = shutil.which("cmake")
    if cmake is None:
        _fail("cmake is not on PATH, so libtpla cannot be built from %s. Install CMake >= 3.25, "
              "or build the library yourself and set TPLA_LIBRARY=/path/to/libtpla.so "
              "(or TPLA_SKIP_BUILD=1 to install without it)." % SOURCE)
    build = Path(build_temp) / "libtpla"
    args = [cmake, "-S", str(SOURCE), "-B", str(build), "-DTPLA_BUILD_TESTS=OFF",
            "-DCMAKE_BUILD_TYPE=Release"] + shlex.split(os.environ.get("TPLA_CMAKE_ARGS", ""))
    jobs = os.environ.get("TPLA_BUILD_JOBS", str(os.cpu_count() or 2))
    try:
        subprocess.check_call(args)
        subprocess.check_call([cmake, "--build", str(build), "--target", "tpla", "-j", jobs])
    except subprocess.CalledProcessError as e:
        _fail("building libtpla with CMake failed (%s). Fix the build, or build it yourself "
              "and set TPLA_LIBRARY=/path/to/libtpla.so." % e)
    return _built_library(build)


class BuildPyWithLibrary(build_py):
    """build_py that also places libtpla.so into the package."""

    def run(self):
        super().run()
        if os.environ.get("TPLA_SKIP_BUILD") == "1":
            return
        lib = None
        if os.environ.get("TPLA_LIBRARY"):
            lib = Path(os.environ["TPLA_LIBRARY"]).resolve()
            if not lib.is_file():
                _fail("TPLA_LIBRARY=%s is not a file." % lib)
        elif os.environ.get("TPLA_BUILD_DIR"):
            lib = _built_library(os.environ["TPLA_BUILD_DIR"])
            if lib is None:
                _fail("TPLA_BUILD_DIR=%s holds no libtpla.so." % os.environ["TPLA_BUILD_DIR"])
        else:
            lib = _cmake_build(self.get_finalized_command("build").build_temp)
            if lib is None:
                _fail("no libtpla.so to bundle: there is no tpla source tree beside %s, and "
                      "neither TPLA_LIBRARY nor TPLA_BUILD_DIR is set. Set one of them, or "
                      "TPLA_SKIP_BUILD=1 to install a package that finds the library at import "
                      "time." % HERE)
        dest = Path(self.build_lib) / "tpla" / "libtpla.so"
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(lib, dest)
        print("tpla setup: bundled %s" % lib)


class BinaryDistribution(Distribution):
    """The wheel carries a native library: tag it for this platform."""

    def has_ext_modules(self):
        return os.environ.get("TPLA_SKIP_BUILD") != "1"


setup(cmdclass={"build_py": BuildPyWithLibrary}, distclass=BinaryDistribution)
