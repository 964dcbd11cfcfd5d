"""Quantizer modules and quantized layers: :class:`Quantizer`, ``Quantized*`` layers, :func:`lower`."""

from __future__ import annotations

import copy
from typing import Any, Callable, Optional, Union

import torch
from torch import nn
from torch.nn import functional as F

from .quantize import GradientRule, Rounder, apply_quantizer, as_rounder, renamed_keyword, rounder_for

__all__ = ["Quantizer", "QuantizedLinear", "QuantizedConv1d", "QuantizedConv2d", "QuantizedConv3d",
           "QuantizedLayerNorm", "lower"]


class Quantizer(nn.Module):
    """Round activations in the forward pass and their gradients in the backward pass.

    The module form of :func:`~pychop_compat.nn.quantize`, with separate formats
    and modes for the two passes (as QPyTorch's ``Quantizer``).

    Parameters
    ----------
    forward : str, dict, Options, Chop, Rounder or None, default 'h'
        Format of the forward values (None: values pass unchanged).
    backward : same kinds, optional
        Format of the gradients (None: gradients pass unchanged).
    forward_round, backward_round : str or int, optional
        Rounding modes (names of :data:`~pychop_compat.spec.ROUND_NAMES` or chop's 1..6).
        ``forward_rounding=``/``backward_rounding=`` are their old spellings (deprecated: they warn).
    clip : bool
        Zero the gradient where ``|x|`` exceeds the forward format's xmax.
    forward_rng, backward_rng : default 'torch'
        Random sources for stochastic rounding (see :class:`~pychop_compat.nn.Rounder`;
        ``None`` means ``'chop'``, as in ``Chop``).

    Raises
    ------
    ValueError
        For a rounding mode or random source of a pass whose format is None
        (nothing there is rounded), or ``clip=True`` without a forward format.
    """

    def __init__(self, forward: Any = "h", backward: Any = None,
                 forward_round: Union[str, int, None] = None, backward_round: Union[str, int, None] = None,
                 *, clip: bool = False, forward_rng: Any = "torch", backward_rng: Any = "torch",
                 forward_rounding: Union[str, int, None] = None, backward_rounding: Union[str, int, None] = None):
        super().__init__()
        forward_round = renamed_keyword(forward_round, forward_rounding, "forward_round", "forward_rounding")
        backward_round = renamed_keyword(backward_round, backward_rounding, "backward_round", "backward_rounding")
        for side, fmt, mode, rng in (("forward", forward, forward_round, forward_rng),
                                     ("backward", backward, backward_round, backward_rng)):
            # a pass (format None) rounds nothing: a mode or random source for it would be silently ignored
            if fmt is None and mode is not None:
                raise ValueError(f"{side}_round needs a {side} format ({side}=None passes values unchanged).")
            if fmt is None and not (isinstance(rng, str) and rng == "torch"):
                raise ValueError(f"{side}_rng needs a {side} format ({side}=None passes values unchanged).")
        self.forward_rounder: Optional[Rounder] = (
            None if forward is None else rounder_for(forward, forward_round, None, forward_rng))
        backward_rounder = None if backward is None else rounder_for(backward, backward_round, None, backward_rng)
        clip_limit = None
        if clip:
            if self.forward_rounder is None:
                raise ValueError("clip=True needs a forward format (its xmax is the clipping limit).")
            clip_limit = self.forward_rounder.xmax
        self.rule = GradientRule(clip_limit, backward_rounder)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """``x`` rounded by the forward rule; its gradient by the backward rule."""
        if self.forward_rounder is None and self.rule.rounder is None and self.rule.clip_limit is None:
            return x
        return apply_quantizer(x, self.forward_rounder, self.rule)

    def extra_repr(self) -> str:
        forward = self.forward_rounder.options if self.forward_rounder else None
        backward = self.rule.rounder.options if self.rule.rounder else None
        return f"forward={forward}, backward={backward}, clip={self.rule.clip_limit is not None}"


class _QuantizedLayer:
    """Quantizers around a layer: input and output rounded to the activation format, weight and
    bias to the weight format; the gradients of all four to the gradient format."""

    # The torch layer each subclass extends: its parameters, and its operation (the subclass's _layer).
    weight: Any
    bias: Any
    _layer: Callable[..., torch.Tensor]

    def _init_quantizers(self, weight: Any = None, activation: Any = None, gradient: Any = None) -> None:
        activation, gradient = as_rounder(activation, "activation"), as_rounder(gradient, "gradient")
        self.weight_quantizer = Quantizer(as_rounder(weight, "weight"), gradient)
        self.input_quantizer = Quantizer(activation, gradient)
        self.output_quantizer = Quantizer(activation, gradient)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """The layer on quantized input and parameters, its output quantized."""
        weight = None if self.weight is None else self.weight_quantizer(self.weight)
        bias = None if self.bias is None else self.weight_quantizer(self.bias)
        return self.output_quantizer(self._layer(self.input_quantizer(x), weight, bias))

    @classmethod
    def from_module(cls, module: nn.Module, weight: Any = None, activation: Any = None, gradient: Any = None):
        """A quantized layer that shares ``module``'s parameters, buffers and settings; ``module`` must be
        exactly the layer class this class extends (e.g. :class:`torch.nn.Linear` for :class:`QuantizedLinear`)."""
        base = next(b for b in _QUANTIZED if _QUANTIZED[b] is cls)
        if type(module) is not base:
            raise TypeError(f"{cls.__name__}.from_module needs a {base.__name__}, not {type(module).__name__}.")
        layer: Any = cls.__new__(cls)
        layer.__dict__.update(module.__dict__)  # the same Parameter objects: optimizers keep working
        layer._modules = dict(module._modules)
        layer._init_quantizers(weight, activation, gradient)
        return layer


class QuantizedLinear(_QuantizedLayer, nn.Linear):
    """:class:`torch.nn.Linear` with quantizers (see :func:`lower` for ``weight``, ``activation``, ``gradient``).

    Examples
    --------
    >>> from pychop_compat.nn import QuantizedLinear
    >>> layer = QuantizedLinear(4, 2, weight='b', activation='h', gradient=('q52', 'stochastic'))
    """

    def __init__(self, in_features: int, out_features: int, bias: bool = True, device: Any = None,
                 dtype: Any = None, *,
                 weight: Any = None, activation: Any = None, gradient: Any = None):
        super().__init__(in_features, out_features, bias=bias, device=device, dtype=dtype)
        self._init_quantizers(weight, activation, gradient)

    def _layer(self, x: torch.Tensor, weight: torch.Tensor, bias: Optional[torch.Tensor]) -> torch.Tensor:
        return F.linear(x, weight, bias)


class _QuantizedConv(_QuantizedLayer):
    # torch's ConvNd helper (padding mode, then the convolution), from nn.Conv1d/2d/3d in the subclasses.
    _conv_forward: Callable[[torch.Tensor, torch.Tensor, Optional[torch.Tensor]], torch.Tensor]

    def __init__(self, *args, weight: Any = None, activation: Any = None, gradient: Any = None, **kwargs):
        super().__init__(*args, **kwargs)
        self._init_quantizers(weight, activation, gradient)

    def _layer(self, x: torch.Tensor, weight: torch.Tensor, bias: Optional[torch.Tensor]) -> torch.Tensor:
        return self._conv_forward(x, weight, bias)


class QuantizedConv1d(_QuantizedConv, nn.Conv1d):
    """:class:`torch.nn.Conv1d` with quantizers (arguments of Conv1d, then ``weight``, ``activation``, ``gradient``)."""


class QuantizedConv2d(_QuantizedConv, nn.Conv2d):
    """:class:`torch.nn.Conv2d` with quantizers (arguments of Conv2d, then ``weight``, ``activation``, ``gradient``)."""


class QuantizedConv3d(_QuantizedConv, nn.Conv3d):
    """:class:`torch.nn.Conv3d` with quantizers (arguments of Conv3d, then ``weight``, ``activation``, ``gradient``)."""


class QuantizedLayerNorm(_QuantizedLayer, nn.LayerNorm):
    """:class:`torch.nn.LayerNorm` with quantizers (its affine weight and bias use the weight format)."""

    def __init__(self, normalized_shape: Any, eps: float = 1e-5, elementwise_affine: bool = True, bias: bool = True,
                 device: Any = None, dtype: Any = None, *, weight: Any = None, activation: Any = None, gradient: Any = None):
        super().__init__(normalized_shape, eps=eps, elementwise_affine=elementwise_affine, bias=bias,
                         device=device, dtype=dtype)
        self._init_quantizers(weight, activation, gradient)

    def _layer(self, x: torch.Tensor, weight: Optional[torch.Tensor], bias: Optional[torch.Tensor]) -> torch.Tensor:
        return F.layer_norm(x, self.normalized_shape, weight, bias, self.eps)


_QUANTIZED: dict[type[nn.Module], type[_QuantizedLayer]] = {
    nn.Linear: QuantizedLinear, nn.Conv1d: QuantizedConv1d, nn.Conv2d: QuantizedConv2d, nn.Conv3d: QuantizedConv3d,
    nn.LayerNorm: QuantizedLayerNorm}


def lower(model: nn.Module, weight: Any = None, activation: Any = None, gradient: Any = None, *,
          layers: tuple = (nn.Linear, nn.Conv1d, nn.Conv2d, nn.Conv3d, nn.LayerNorm),
          inplace: bool = False) -> nn.Module:
    """Put quantizers around the weights, activations and gradients of a model's layers, in one call.

    Every submodule whose type is exactly one of ``layers`` is replaced by its
    quantized class (:class:`QuantizedLinear`, ...), which shares its parameters and buffers.

    Parameters
    ----------
    model : torch.nn.Module
    weight : format, Rounder or (format, rounding), optional
        Format of the weights and biases in the forward pass (None: not rounded).
    activation : same kinds, optional
        Format of each layer's input and output values (None: not rounded).
    gradient : same kinds, optional
        Format of the gradients of each layer's output, input, weight and bias
        (None: straight-through, not rounded).  E.g. ``('q52', 'stochastic')``.
    layers : tuple of module classes
        Which of the supported layer types (``Linear``, ``Conv1d``/``2d``/``3d``,
        ``LayerNorm``) to lower.
    inplace : bool, default False
        Modify ``model`` itself; otherwise a deep copy is lowered.

    Returns
    -------
    torch.nn.Module
        The lowered model (``model`` itself when ``inplace``, unless ``model`` is itself one of
        ``layers``: then its quantized replacement, which shares its parameters), in ``model``'s
        training mode.
    """
    unsupported = [cls for cls in layers if cls not in _QUANTIZED]
    if unsupported:
        raise ValueError(f"lower supports {', '.join(c.__name__ for c in _QUANTIZED)}; "
                         f"not {', '.join(c.__name__ for c in unsupported)}.")
    if not inplace:
        model = copy.deepcopy(model)
    if type(model) in tuple(layers):  # (the replacement, its quantizers included, in the layer's mode)
        return _QUANTIZED[type(model)].from_module(model, weight, activation, gradient).train(model.training)
    for name, child in list(model.named_children()):  # a child is lowered in place, or replaced by its layer
        setattr(model, name, lower(child, weight, activation, gradient, layers=layers, inplace=True))
    return model
