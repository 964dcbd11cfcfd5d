"""Low-precision training in PyTorch: differentiable quantizers, quantized layers, an optimizer wrapper.

Needs torch (``pip install pychop_compat[torch]``); ``import pychop_compat``
does not import this package.  See the "Training in low precision" page of
the documentation.
"""

from .quantize import ROUNDING_NAMES, GradientRule, Rounder, apply_quantizer, quantize
from .modules import (Quantizer, QuantizedConv1d, QuantizedConv2d, QuantizedConv3d, QuantizedLayerNorm,
                      QuantizedLinear, lower)
from .optim import OptimLP

__all__ = ["quantize", "Rounder", "GradientRule", "apply_quantizer", "ROUNDING_NAMES", "Quantizer", "OptimLP", "lower",
           "QuantizedLinear", "QuantizedConv1d", "QuantizedConv2d", "QuantizedConv3d", "QuantizedLayerNorm"]
