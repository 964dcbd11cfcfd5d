"""Low-precision training in PyTorch: differentiable quantizers, quantized layers, an optimizer wrapper.

Needs torch (``pip install pychop_compat[torch]``); ``import pychop_compat``
does not import this package.  See the "Training in low precision" page of
the documentation.
"""

from .quantize import ROUND_NAMES, GradientRule, Rounder, apply_quantizer, quantize
from .modules import (Quantizer, QuantizedConv1d, QuantizedConv2d, QuantizedConv3d, QuantizedLayerNorm,
                      QuantizedLinear, lower)
from .optim import OptimLP

__all__ = ["quantize", "Rounder", "GradientRule", "apply_quantizer", "ROUND_NAMES", "Quantizer", "OptimLP", "lower",
           "QuantizedLinear", "QuantizedConv1d", "QuantizedConv2d", "QuantizedConv3d", "QuantizedLayerNorm"]


def __getattr__(name: str) -> object:
    if name == "ROUNDING_NAMES":  # the old name, one release (it warns)
        import importlib

        return getattr(importlib.import_module(".quantize", __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
