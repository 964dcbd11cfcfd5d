"""Low-precision training in PyTorch: differentiable quantizers, quantized layers, an optimizer wrapper.

Needs torch (the ``torch`` extra); ``import pychop_compat`` does not import this package.
See :doc:`/training`."""

try:
    import torch as _torch  # noqa: F401
except ModuleNotFoundError as error:
    if error.name != "torch":  # torch is there but broken: its own error says more
        raise
    raise ModuleNotFoundError(
        "pychop_compat.nn needs torch, which is not installed: python -m pip install torch, or from the "
        "root of a pychop_compat checkout python -m pip install -e \".[torch]\"", name="torch") from error

from .quantize import ROUND_NAMES, GradientRule, Rounder, apply_quantizer, quantize
from .modules import (Quantizer, QuantizedConv1d, QuantizedConv2d, QuantizedConv3d, QuantizedLayerNorm,
                      QuantizedLinear, lower)
from .optim import OptimLP
from .simulate import Simulation, simulate

__all__ = ["quantize", "Rounder", "GradientRule", "apply_quantizer", "ROUND_NAMES", "Quantizer", "OptimLP", "lower",
           "QuantizedLinear", "QuantizedConv1d", "QuantizedConv2d", "QuantizedConv3d", "QuantizedLayerNorm", "simulate", "Simulation"]


def __getattr__(name: str) -> object:
    if name == "ROUNDING_NAMES":  # the old name, one release
        import warnings

        warnings.warn("pychop_compat.nn.ROUNDING_NAMES is deprecated: use ROUND_NAMES "
                      "(pychop_compat.spec.ROUND_NAMES).", DeprecationWarning, stacklevel=2)
        return ROUND_NAMES
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
