"""conftest.py - the tpla Python tests: use the package from this repository
(python/) unless TPLA_TEST_INSTALLED=1, and report which libtpla is loaded.
The library is found as tpla/_lib.py says (TPLA_LIBRARY first)."""
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
if os.environ.get("TPLA_TEST_INSTALLED") != "1":
    sys.path.insert(0, os.path.join(REPO, "python"))
    os.environ["PYTHONPATH"] = os.path.join(REPO, "python") + os.pathsep + os.environ.get(
        "PYTHONPATH", "")
sys.path.insert(0, HERE)


def pytest_report_header(config):
    try:
        import tpla
        return "tpla %s from %s, libtpla %s at %s" % (tpla.__version__, tpla.__file__,
                                                       ".".join(map(str, tpla.version())),
                                                       tpla.library_path())
    except Exception as e:  # reported, and the tests then fail with the reason
        return "tpla: cannot load: %s" % e
