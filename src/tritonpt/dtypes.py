"""One table for data types: torch, Triton's config enum, the wire name and numpy.

The pytorch backend maps TYPE_BOOL..TYPE_FP64 to torch dtypes and rejects TYPE_BF16 and the unsigned
16/32/64-bit types (``unsupported datatype TYPE_UINT32 for input ...``; pytorch_backend r25.10 src/libtorch_utils.cc).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch


@dataclass(frozen=True, kw_only=True)
class DType:
    """A data type as each layer names it."""

    torch: torch.dtype
    config: str  # model_config.proto DataType name, e.g. "TYPE_FP32"
    wire: str  # KServe v2 datatype, e.g. "FP32"
    numpy: type[np.generic]

    @property
    def exact(self) -> bool:
        """Integers and bool must match exactly; floats get a tolerance."""
        return not self.torch.is_floating_point


SUPPORTED: tuple[DType, ...] = (
    DType(torch=torch.bool, config="TYPE_BOOL", wire="BOOL", numpy=np.bool_),
    DType(torch=torch.uint8, config="TYPE_UINT8", wire="UINT8", numpy=np.uint8),
    DType(torch=torch.int8, config="TYPE_INT8", wire="INT8", numpy=np.int8),
    DType(torch=torch.int16, config="TYPE_INT16", wire="INT16", numpy=np.int16),
    DType(torch=torch.int32, config="TYPE_INT32", wire="INT32", numpy=np.int32),
    DType(torch=torch.int64, config="TYPE_INT64", wire="INT64", numpy=np.int64),
    DType(torch=torch.float16, config="TYPE_FP16", wire="FP16", numpy=np.float16),
    DType(torch=torch.float32, config="TYPE_FP32", wire="FP32", numpy=np.float32),
    DType(torch=torch.float64, config="TYPE_FP64", wire="FP64", numpy=np.float64),
)

# Types model_config.proto knows but the pytorch backend refuses for TorchScript models.
REJECTED_BY_BACKEND: frozenset[str] = frozenset({"TYPE_BF16", "TYPE_UINT16", "TYPE_UINT32", "TYPE_UINT64"})


def is_known(config_name: str) -> bool:
    """A tensor type the backend maps (served), or names to refuse it (:func:`rejected_by_backend`)."""
    return is_served(config_name) or config_name in REJECTED_BY_BACKEND


def rejected_by_backend(platform: str) -> frozenset[str]:
    """What the backend refuses for a platform's models: every one of :data:`REJECTED_BY_BACKEND`, but BF16 on
    ``torch_aoti``, which Triton 26.11 on serves (validate.pt2 holds it, A013, with the release that serves it)."""
    return REJECTED_BY_BACKEND - {"TYPE_BF16"} if platform == "torch_aoti" else REJECTED_BY_BACKEND


_BY_TORCH = {d.torch: d for d in SUPPORTED}
_BY_CONFIG = {d.config: d for d in SUPPORTED}
_BY_NUMPY = {np.dtype(d.numpy): d for d in SUPPORTED}


def from_torch(dtype: torch.dtype) -> DType:
    """The row for a torch dtype; raises ``ValueError`` for dtypes the pytorch backend cannot serve."""
    try:
        return _BY_TORCH[dtype]
    except KeyError:
        names = ", ".join(str(d.torch).removeprefix("torch.") for d in SUPPORTED)
        msg = (
            f"Triton's pytorch backend cannot serve tensors of {dtype}: it accepts {names}. "
            "Cast the tensor in the model (for bfloat16, to float16 or float32) before exporting."
        )
        raise ValueError(msg) from None


def from_config(name: str) -> DType:
    """The row for a config data type name such as ``TYPE_FP32``."""
    try:
        return _BY_CONFIG[name]
    except KeyError:
        msg = f"{name} is not served by Triton's pytorch backend for TorchScript models."
        raise ValueError(msg) from None


def is_served(name: str) -> bool:
    """Whether a config data type name is one the pytorch backend maps to a torch dtype."""
    return name in _BY_CONFIG


def is_served_torch(dtype: torch.dtype) -> bool:
    """Whether a torch dtype is one the pytorch backend serves."""
    return dtype in _BY_TORCH


def from_numpy(dtype: np.dtype[np.generic]) -> DType:
    """The row for a numpy dtype."""
    try:
        return _BY_NUMPY[np.dtype(dtype)]
    except KeyError:
        msg = f"numpy dtype {dtype} has no pytorch-backend counterpart."
        raise ValueError(msg) from None
