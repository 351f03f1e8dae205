"""tpla - tensor-parallel linear algebra: Python bindings of libtpla.

    import tpla                 # no third-party dependency
    import tpla.torch           # the PyTorch layer (needs torch and numpy)

The C library is loaded on first use (see tpla/_lib.py for where it is
looked for; TPLA_LIBRARY overrides). Every failure raises a subclass of
`tpla.Error` carrying the C status and tpla_last_error()'s message.
"""
from ._errors import (  # noqa: F401
    AbortedError, CublasError, CudaError, Error, InternalError, InvalidArgumentError,
    InvalidUsageError, LibraryNotFoundError, NcclError, NotSupportedError, OutOfMemoryError,
    RemoteError, TimeoutError)

__version__ = "0.1.0"
__all__ = ["Error", "InvalidArgumentError", "InvalidUsageError", "NotSupportedError",
           "OutOfMemoryError", "CudaError", "NcclError", "CublasError", "RemoteError",
           "TimeoutError", "InternalError", "AbortedError", "LibraryNotFoundError",
           "library_path", "version",
           "features", "Context", "NsPlan", "NsBatchPlan", "AgGemmPlan", "GemmRsPlan",
           "GemmArPlan"]


def library_path():
    """Path of the libtpla that was loaded (loads it if needed)."""
    from . import _lib
    return _lib.library().path


def version():
    """(major, minor, patch) of the loaded libtpla."""
    from . import _lib
    return _lib.library().version


def features(device=-1):
    """Build and device features (tpla_get_features) as a dict."""
    from . import _core
    return _core.features(device)


def __getattr__(name):
    # the core objects, without importing ctypes machinery at `import tpla`
    if name in ("Context", "NsPlan", "NsBatchPlan", "AgGemmPlan", "GemmRsPlan", "GemmArPlan"):
        from . import _core
        return getattr(_core, name)
    raise AttributeError("module 'tpla' has no attribute %r" % name)
