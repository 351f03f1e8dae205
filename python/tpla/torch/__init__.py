"""tpla.torch - tpla for PyTorch tensors.

    comm = tpla.torch.Communicator()            # over torch.distributed's world group
    y = tpla.torch.newton_schulz(x, comm)       # x: this rank's rows of the global matrix
    opt = tpla.torch.Muon(muon_params, comm=comm, adamw_params=rest)

CUDA tensors use tpla's CUDA executor (its own NCCL communicator, work on
the current stream); CPU tensors the host executor (ranks on one machine,
through shared memory) - so the same code runs under torchrun on GPUs and
with gloo on a CPU. PyTorch's public API is used, and the multi-tensor
torch._foreach_* ops in Muon.
"""
from ._comm import Communicator, local_communicator  # noqa: F401
from ._layers import (ColumnParallelLinear, RowParallelLinear, even_split,  # noqa: F401
                      mark_tensor_parallel)
from ._muon import Muon, split_params  # noqa: F401
from ._ns import newton_schulz  # noqa: F401
from ._overlap import (ag_gemm, allgather_rows, gathered, gathered_scales, gemm_ar,  # noqa: F401
                       gemm_rs, local_gemm)

__all__ = ["Communicator", "local_communicator", "newton_schulz", "ag_gemm", "gemm_rs",
           "gemm_ar", "allgather_rows", "gathered", "gathered_scales", "local_gemm",
           "ColumnParallelLinear",
           "RowParallelLinear", "mark_tensor_parallel", "even_split", "Muon", "split_params"]
