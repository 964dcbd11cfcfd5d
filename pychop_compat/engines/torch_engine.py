"""The torch adapter: what chop needs to know about ``torch.Tensor``, and no rounding.

It supplies the tensor's side of a call: dtypes (float16 and bfloat16 in
float32, integers and bool as float64), memory (a CPU tensor read in place by
the host kernels, CUDA memory handed to CuPy through DLPack) and autograd (the
straight-through estimator: the gradient passes through chop unchanged; for
other rules use :func:`pychop_compat.nn.quantize`).  :func:`seed_device` and
:func:`matlab_stream_on_device` are re-exported for old imports.
"""

from __future__ import annotations

import functools
from typing import Any, Callable, Optional

import numpy as np

from ..random.counter import seed_device
from ..random.sources import host_draw_plan, matlab_stream_on_device

__all__ = ["working_tensor", "with_autograd", "host_view", "from_host", "to_host", "contiguous", "device_key",
           "on_cupy", "flat_nonzero", "from_numbers", "seed_device", "matlab_stream_on_device", "host_draw_plan"]


def working_tensor(x: Any) -> tuple:
    """``(tensor to compute on, dtype to give back or None)``: float32/float64, chop's classes.

    Raises
    ------
    TypeError
        For complex and other unsupported dtypes.
    """
    import torch

    if x.dtype in (torch.float64, torch.float32):
        return x, None
    if x.dtype in (torch.float16, torch.bfloat16):
        return x.to(torch.float32), x.dtype
    if not x.is_floating_point() and not x.is_complex():
        return x.to(torch.float64), None  # integers and bool, as NumPy
    raise TypeError(f"chop supports float64, float32, float16 and bfloat16 tensors (and integers), not {x.dtype}.")


def with_autograd(x: Any, compute: Callable[[Any], Any]) -> Any:
    """``compute(x.detach())`` under ``no_grad``; when ``x`` requires grad (and grad mode is on),
    as a node of the graph whose backward passes the gradient through unchanged."""
    import torch

    if x.requires_grad and torch.is_grad_enabled():
        return _straight_through().apply(x, compute)
    with torch.no_grad():
        return compute(x.detach())


@functools.lru_cache(maxsize=1)
def _straight_through() -> Any:
    """The autograd rule of chop (built on first use: torch is imported lazily)."""
    import torch

    class ChopStraightThrough(torch.autograd.Function):
        """chop's values forward; the gradient passes through unchanged backward."""

        @staticmethod
        def forward(ctx, x, compute):
            return compute(x.detach())

        @staticmethod
        def backward(ctx, grad):
            return grad, None

    return ChopStraightThrough


def host_view(t: Any) -> np.ndarray:
    """A CPU tensor's memory as a NumPy array (no copy)."""
    return t.numpy()


def to_host(t: Any) -> np.ndarray:
    """A copy of a tensor of any device in host memory, as a NumPy array."""
    return np.array(t.detach().cpu().numpy())


def from_host(array: np.ndarray, like: Any) -> Any:
    """A NumPy result as a new C-contiguous tensor on ``like``'s device (no copy on the CPU when
    the array is C-contiguous)."""
    import torch

    array = array if array.flags.c_contiguous else np.array(array, order="C")  # (not ascontiguousarray: 0-d)
    out = torch.from_numpy(array)
    return out if like.device.type == "cpu" else out.to(like.device)


def contiguous(t: Any) -> Any:
    """``t`` in C order (elementwise torch operations keep the input's strides)."""
    return t.contiguous()


def device_key(t: Any) -> str:
    """The counter of :mod:`~pychop_compat.random.counter` that a tensor's device uses."""
    return f"{t.device.type}:{t.device.index or 0}"


def on_cupy(cupy: Any, t: Any, compute: Callable[[Any], Any]) -> Any:
    """``compute`` on the CuPy view of the CUDA tensor ``t`` (DLPack, no copy), back as a tensor."""
    import torch

    with cupy.cuda.Device(t.device.index or 0):
        return torch.from_dlpack(compute(cupy.from_dlpack(t.contiguous())))


def flat_nonzero(mask: Any) -> Any:
    """The indices of the True elements of a 1-D boolean tensor (int64)."""
    import torch

    return torch.nonzero(mask).view(-1)


def from_numbers(values: Optional[Any], like: Any) -> Optional[Any]:
    """Per-element numbers given as a tensor (broadcastable to ``like``), as a NumPy array of
    ``like``'s shape in row-major order (for the host kernels)."""
    if values is None:
        return None
    return values.detach().expand(like.shape).contiguous().cpu().numpy()

