"""Quantizer modules and quantized layers: :class:`Quantizer`, ``Quantized*`` layers, :func:`lower`."""

from __future__ import annotations

import copy
from typing import Any, Optional, Union

import torch
from torch import nn
from torch.nn import functional as F

from .quantize import GradientRule, Rounder, _rounder_for, apply_quantizer

__all__ = ["Quantizer", "QuantizedLinear", "QuantizedConv1d", "QuantizedConv2d", "QuantizedConv3d",
           "QuantizedLayerNorm", "lower"]


class Quantizer(nn.Module):
    """Round activations in the forward pass and their gradients in the backward pass.

    The module form of :func:`~pychop_compat.nn.quantize`, with separate formats
    and modes for the two passes (as QPyTorch's ``Quantizer``): e.g. activations
    in bfloat16 with round to nearest, gradients in fp8 with stochastic rounding.

    Parameters
    ----------
    forward : str, dict, Options, Chop, Rounder or None, default 'h'
        Format of the forward values (None: values pass unchanged).
    backward : same kinds, optional
        Format of the gradients (None: gradients pass unchanged).
    forward_rounding, backward_rounding : str or int, optional
        Rounding modes (names of :data:`~pychop_compat.nn.ROUNDING_NAMES` or chop's 1..6).
    clip : bool
        Zero the gradient where ``|x|`` exceeds the forward format's xmax.
    forward_rng, backward_rng : optional
        Random sources for stochastic rounding (see :class:`~pychop_compat.nn.Rounder`).

    Examples
    --------
    >>> import torch
    >>> q = Quantizer('b', 'q52', backward_rounding='stochastic')
    >>> x = torch.tensor([1/3], requires_grad=True)
    >>> q(x)
    tensor([0.3340], grad_fn=<_QuantizeBackward>)
    """

    def __init__(self, forward: Any = "h", backward: Any = None,
                 forward_rounding: Union[str, int, None] = None, backward_rounding: Union[str, int, None] = None,
                 *, clip: bool = False, forward_rng: Any = None, backward_rng: Any = None):
        super().__init__()
        self.forward_rounder: Optional[Rounder] = (
            None if forward is None else _rounder_for(forward, forward_rounding, None, forward_rng))
        backward_rounder = None if backward is None else _rounder_for(backward, backward_rounding, None, backward_rng)
        if clip and self.forward_rounder is None:
            raise ValueError("clip=True needs a forward format (its xmax is the clipping limit).")
        self.rule = GradientRule(self.forward_rounder.xmax if clip else None, backward_rounder)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.forward_rounder is None and self.rule.rounder is None and self.rule.clip_limit is None:
            return x
        return apply_quantizer(x, self.forward_rounder, self.rule)

    def extra_repr(self) -> str:
        forward = self.forward_rounder.options if self.forward_rounder else None
        backward = self.rule.rounder.options if self.rule.rounder else None
        return f"forward={forward}, backward={backward}, clip={self.rule.clip_limit is not None}"
