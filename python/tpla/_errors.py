"""_errors.py - the exceptions of tpla: one class per tpla_status_t.

Every failed C call raises the subclass of `tpla.Error` for its status, with
`.status` (the number), `.status_name` ("TPLA_ERROR_INVALID_ARGUMENT") and
`.detail` (tpla_last_error(): function, argument, shapes). Checks made in
Python before calling C (a tensor on the wrong device, an int dtype...)
raise the same classes, with `.detail` naming the Python function.
"""
import builtins

SUCCESS = 0
STATUS_NAMES = {
    0: "TPLA_SUCCESS", 1: "TPLA_ERROR_INVALID_ARGUMENT", 2: "TPLA_ERROR_INVALID_USAGE",
    3: "TPLA_ERROR_NOT_SUPPORTED", 4: "TPLA_ERROR_OUT_OF_MEMORY", 5: "TPLA_ERROR_CUDA",
    6: "TPLA_ERROR_NCCL", 7: "TPLA_ERROR_CUBLAS", 8: "TPLA_ERROR_REMOTE",
    9: "TPLA_ERROR_TIMEOUT", 10: "TPLA_ERROR_INTERNAL", 11: "TPLA_ERROR_ABORTED",
}


class Error(Exception):
    """A tpla failure. status: the tpla_status_t; detail: what, where, shapes."""

    status = -1

    def __init__(self, detail, status=None):
        if status is not None:
            self.status = status
        self.status_name = STATUS_NAMES.get(self.status, "TPLA_ERROR_UNKNOWN_STATUS")
        self.detail = detail
        super().__init__("%s: %s" % (self.status_name, detail))

    def __reduce__(self):  # pickles (across processes) as the same class, detail and status
        return type(self), (self.detail, self.status)


class InvalidArgumentError(Error, ValueError):
    status = 1


class InvalidUsageError(Error, RuntimeError):
    status = 2


class NotSupportedError(Error, RuntimeError):
    status = 3


class OutOfMemoryError(Error, MemoryError):
    status = 4


class CudaError(Error, RuntimeError):
    status = 5


class NcclError(Error, RuntimeError):
    status = 6


class CublasError(Error, RuntimeError):
    status = 7


class RemoteError(Error, RuntimeError):
    """Another rank failed or disagreed (or the group broke)."""
    status = 8


class TimeoutError(Error, builtins.TimeoutError):
    status = 9


class InternalError(Error, RuntimeError):
    status = 10


class AbortedError(Error, RuntimeError):
    """The context was aborted (Context.abort / tpla_ctx_abort) on this rank; its peers
    see RemoteError. Destroy its plans and the context, then build new ones."""
    status = 11


class LibraryNotFoundError(Error, ImportError):
    """libtpla could not be found or loaded (not a C status)."""
    status = -1


_BY_STATUS = {c.status: c for c in (InvalidArgumentError, InvalidUsageError, NotSupportedError,
                                    OutOfMemoryError, CudaError, NcclError, CublasError,
                                    RemoteError, TimeoutError, InternalError, AbortedError)}


def error_for(status, detail):
    """The exception for a status (an unknown status gives a plain Error)."""
    cls = _BY_STATUS.get(status)
    return cls(detail) if cls is not None else Error(detail, status)
