"""Differentiable rounding: :class:`Rounder` (tensors rounded exactly as :func:`pychop_compat.chop`
rounds them) and :func:`quantize` (a rounder forward, the straight-through estimator backward)."""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from typing import Any, Optional, Union, cast

import numpy as np
import torch

from ..matlab.api import Chop
from ..matlab.options import OPTION_NAMES, resolve
from ..engines.dispatch import round_array
from ..kernels.device_plan import at_most, elementwise_covers
from ..kernels.elementwise import ElementDraws, chop_elementwise, plan_for
from ..kernels.elementwise_cpfloat import constants_for, round_cpfloat_elementwise
from ..kernels.xp import library_namespace
from ..libraries import ChoppedValue
from ..random.counter import CounterRng, uniform
from ..random.matlab_stream import default_randfunc
from ..random.sources import RandomSources, counter_sources, given_sources
from ..spec import FLIP_PRECISION_ERROR, ROUND_NAMES, round_mode

__all__ = ["Rounder", "quantize", "rounder_for", "as_rounder", "ROUND_NAMES"]

_TORCH = library_namespace("torch")
_MASK64 = (1 << 64) - 1


def renamed_keyword(new: Any, old: Any, new_name: str, old_name: str) -> Any:
    """The value of keyword ``new_name``, or of its deprecated spelling ``old_name`` (which warns).

    Raises
    ------
    TypeError
        When both are given.
    """
    if old is None:
        return new
    if new is not None:
        raise TypeError(f"{old_name}= is the old spelling of {new_name}=: give one of them.")
    warnings.warn(f"{old_name}= is deprecated: use {new_name}= (the same values).", DeprecationWarning,
                  stacklevel=3)
    return old


def torch_rng(rng: Any) -> Any:
    """``rng``, with ``None`` read as ``'chop'``: chop's sources, as ``rng=None`` means in ``Chop``
    (since 0.4; in 0.3 it was a deprecated spelling of ``'torch'``, announced with a FutureWarning)."""
    return "chop" if rng is None else rng


def _require_tensor(x: Any) -> None:
    """Refuse anything but a torch tensor with a TypeError that names the way out, rather than an
    AttributeError from inside the rounding (autograd passes a NumPy array or a list through)."""
    if not isinstance(x, torch.Tensor):
        kind = type(x).__qualname__
        if type(x).__module__ != "builtins":
            kind = f"{type(x).__module__}.{kind}"
        raise TypeError(f"quantize needs a torch.Tensor, got {kind}; round NumPy arrays and other data with "
                        "pychop_compat.chop or pychop_compat.rounding.round_to_format, or convert with "
                        "torch.as_tensor(x).")


def _given_options(format) -> dict:
    """chop options (a dict of the fields given) for a format name or an options object."""
    if isinstance(format, str):
        return {"format": format}
    if isinstance(format, Chop):
        format = format.options  # its fields, read below
    if isinstance(format, dict):
        return dict(format)
    if format is None or isinstance(format, (int, float, list, tuple)):
        raise TypeError(f"format must be a format name (e.g. 'h', 'b', 'q43'), chop options "
                        f"(a dict or an Options) or a Chop, not {format!r}.")
    return {name: getattr(format, name) for name in OPTION_NAMES if getattr(format, name, None) is not None}


class Rounder:
    """Round tensors to a low-precision format, exactly as :func:`pychop_compat.chop` does.

    Parameters
    ----------
    format : str, dict, Options or Chop, default 'h'
        Anything :class:`pychop_compat.Chop` accepts: a format name (``'h'``,
        ``'b'``, ``'q43'``, ...) or chop options (``{'format': 'c', 'params': [5, 15]}``).
    round : str or int, optional
        ``'nearest'`` (1), ``'up'`` (2), ``'down'`` (3), ``'zero'`` (4),
        ``'stochastic'`` (5) or ``'stochastic_equal'`` (6) (:data:`ROUND_NAMES`);
        default: the options' ``round`` (round to nearest).  ``rounding=`` is its
        old spelling (deprecated: it warns).
    subnormal : bool, optional
        Keep subnormal numbers; default: the options' (chop's default for the format).
    rng : 'torch', torch.Generator, 'chop', int or numpy.random.Generator, default 'torch'
        Where stochastic rounding gets its random numbers.  ``'torch'``:
        torch's default generator (``torch.rand``; seed it with
        ``torch.manual_seed``), one number per element; a
        ``torch.Generator``: that generator.  A rounder that rounds through
        chop (bit flips, ``'float8_e8m0fnu'``) draws every number chop draws,
        in chop's order (float64 ``torch.rand``, and ``torch.randint`` for the
        flipped bits), from that generator.
        ``'chop'`` (or ``None``, as in :class:`pychop_compat.Chop`; before
        0.4 ``None`` meant ``'torch'``): chop's own numbers, so that the result is
        ``chop(x, options)``; an int (a seed in ``[0, 2**64)``, ``ValueError``
        otherwise) or a NumPy ``Generator``: as
        ``Chop(options, rng=rng)``, call after call, eager and compiled
        mixed (an int seed: the fast choice on the CPU; see :doc:`/training`).
        Options with a ``randfunc`` and stochastic rounding need ``'chop'``
        (which calls it, as chop does), and so does a ``Chop`` made with its own
        ``rng`` given as ``format`` (``'chop'``: that ``Chop`` rounds, its
        ``rng`` and ``randfunc`` honoured); other ``rng`` raise ``ValueError``.

    Notes
    -----
    Which kernel rounds which tensor, eager and under ``torch.compile``, is
    described in :doc:`/training`; the results are chop's (with ``explim = 0``
    and stochastic rounding, the namespace kernel may give ``+0`` for ``-0``).
    A rounder's counter is not guarded by a lock: share one rounder between
    threads only eagerly.

    Examples
    --------
    >>> import torch
    >>> from pychop_compat.nn import Rounder
    >>> Rounder('b')(torch.tensor([1/3]))
    tensor([0.3340])
    """

    def __init__(self, format: Any = "h", round: Union[str, int, None] = None, *,
                 subnormal: Optional[bool] = None, rng: Any = "torch", rounding: Union[str, int, None] = None):
        given = _given_options(format)
        round = renamed_keyword(round, rounding, "round", "rounding")
        if round is not None:
            given["round"] = round_mode(round)
        rng = torch_rng(rng)
        if subnormal is not None:
            given["subnormal"] = int(bool(subnormal))
        self._given = given
        self.rng = rng
        chop_seed = isinstance(rng, (int, np.integer, np.random.Generator)) and not isinstance(rng, bool)
        self._host_random = chop_seed or (isinstance(rng, str) and rng == "chop")
        # An int seed: Chop(given, rng=seed)'s counter-based numbers.  The counter is a 0-d
        # int64 tensor (compiled code reads and advances it without recompiling); eager calls
        # hand it to chop's engines through these sources.
        self._counter_sources: Optional[RandomSources] = None
        if isinstance(rng, (int, np.integer)) and not isinstance(rng, bool):
            self._counter_sources = counter_sources(int(rng))
            # The ROUND stream's key, as a tensor: Dynamo may trace an int attribute symbolically.
            key = cast(CounterRng, self._counter_sources.counter).keys[0]
            self._counter_key = torch.tensor(key - (1 << 64) if key >= 1 << 63 else key, dtype=torch.int64)
            self._counter_offset = torch.zeros((), dtype=torch.int64)
        if not (isinstance(rng, str) and rng == "torch" or self._host_random or isinstance(rng, torch.Generator)):
            raise TypeError(f"rng must be None, 'torch', a torch.Generator, 'chop', an int or a "
                            f"numpy.random.Generator, not {rng!r}.")
        # chop's own machinery: for bit flips, extended formats and chop's random numbers; rng 'chop'
        # with a Chop given as the format: that Chop itself (its own rng and randfunc).
        own_chop = isinstance(format, Chop) and isinstance(rng, str) and rng == "chop"
        self._chop = format if own_chop else Chop(given, rng=rng) if chop_seed else Chop(given)
        self.spec = resolve(given, None, "double").spec  # raises here for bad options
        # Only chop's own sources ('chop') honour a randfunc or a Chop's own rng: refused with any other
        # rng rather than silently replaced by other numbers. (A Chop made with rng= records when.)
        if not own_chop and isinstance(format, Chop) and format.owns_rng:
            raise ValueError("format is a Chop with its own rng, which only rng='chop' takes (its numbers); "
                             "pass rng='chop', or the options and rng=seed.")
        randfunc = given.get("randfunc")
        if (self.spec.round >= 5 and randfunc is not None and randfunc is not default_randfunc
                and not (isinstance(rng, str) and rng == "chop")):
            raise ValueError(f"the options' randfunc is only honoured with rng='chop' (chop's own numbers), "
                             f"not with rng={rng!r}; pass rng='chop' or drop randfunc.")
        # Resolved once, so that a call does no option parsing (torch.compile traces calls).
        self._plans = {}
        self._errors = {}
        self._specs = {}
        for carrier, x_class in (("float64", "double"), ("float32", "single")):
            try:
                spec = resolve(given, None, x_class).spec
            except ValueError as error:  # e.g. a custom precision over chop's limit for single
                self._errors[carrier] = error
                continue
            self._specs[carrier] = spec
            correct = spec.range_rules == "correct" and spec.fmt.encoding != "e8m0"  # E8M0: via chop
            if (not spec.flips and (elementwise_covers(spec) or correct)
                    and (not self._host_random or self._counter_sources is not None)):
                # chop's rules: the elementwise plan; correct rounding (a format name beyond
                # chop.m's): the spec, for CPFloat's elementwise rounding with these numbers.
                self._plans[carrier] = ((spec, constants_for(spec, carrier)) if spec.range_rules == "correct"
                                        else plan_for(spec, carrier))
        self._cast = _hardware_cast(self._specs.get("float32")) if "float32" in self._plans else None
        self.mode = self.spec.round
        self.stochastic = self.mode >= 5

    @property
    def xmax(self) -> float:
        """The format's largest finite number."""
        return self.spec.fmt.xmax

    @property
    def options(self) -> dict:
        """The chop options this rounder was built from (the given fields)."""
        return dict(self._given)

    def __call__(self, x: torch.Tensor, uniforms: Optional[torch.Tensor] = None) -> torch.Tensor:
        """Round ``x`` (no autograd): a new tensor of the same shape, dtype and device.

        Parameters
        ----------
        x : torch.Tensor
            float64, float32, float16 or bfloat16 (the last two are rounded in
            float32 and cast back, as chop does).
        uniforms : torch.Tensor, optional
            For stochastic modes: one number in [0, 1) per element (broadcastable),
            used instead of ``rng``; the result is chop's with these numbers.

        Raises
        ------
        TypeError
            For input that is not a torch tensor (NumPy arrays and other data:
            :func:`pychop_compat.chop`), a tensor that is not floating point, and a chopped tensor
            (:func:`pychop_compat.chopped`: the two simulations do not compose).
        ValueError
            For ``uniforms`` with a rounder that rounds through chop.
        """
        if type(x) is not torch.Tensor:  # (a plain tensor, the usual input, skips both checks)
            if isinstance(x, ChoppedValue):
                raise TypeError("quantize takes plain tensors, not a chopped tensor (whose operations round to "
                                "its own arithmetic); pass x.values to round its values.")
            _require_tensor(x)
        if not x.is_floating_point():
            raise TypeError(f"quantize needs a floating-point tensor, not {x.dtype}.")
        give_back = None
        work = x.detach()
        if work.dtype in (torch.float16, torch.bfloat16):
            give_back = work.dtype
            work = work.to(torch.float32)
        elif work.dtype not in (torch.float32, torch.float64):
            raise TypeError(f"quantize supports float64, float32, float16 and bfloat16 tensors, not {x.dtype}.")
        carrier = "float64" if work.dtype == torch.float64 else "float32"
        if carrier in self._errors:
            raise self._errors[carrier]
        plan = self._plans.get(carrier)
        if plan is None or self._counter_sources is not None:
            if uniforms is not None:
                raise ValueError("uniforms can only be given to a rounder that rounds elementwise "
                                 "(no bit flips, no extended format, rng 'torch' or a torch.Generator).")
            if plan is not None and torch.compiler.is_compiling():
                out = self._elementwise(work, plan, self._counter_numbers(work) if self.stochastic else None)
            elif plan is not None and self.stochastic:
                out = self._chop_from_counter(work, carrier)
            elif not self._host_random and self._specs[carrier].draws:
                # rng 'torch' or a torch.Generator through chop's engines (bit flips, E8M0, ...): every
                # number chop draws, in chop's order, comes from that generator (not MATLAB's stream).
                spec = self._specs[carrier]
                if spec.flips and spec.fmt.t < 2:
                    raise ValueError(FLIP_PRECISION_ERROR)  # chop's refusal, whatever the generator
                out = round_array(work, spec, _TorchDraws(self.rng, work.device).sources())
            else:
                out = self._chop(work)
        elif self._cast is not None and carrier == "float32" and not torch.compiler.is_compiling():
            # Eager, float32 to fp16 or bfloat16 with subnormals, round to nearest: the hardware
            # cast down and back up, after hardshrink gives +0 where chop.m gives 0 (zeros, and
            # its double-rounding band xmins/2 < |x| <= xmins/2 (1 + 2^-t)).  The fastest CPU path
            # (benchmarks/bench_nn.py: 0.43 ns per element, chop's compiled engine 0.61); Inductor
            # drops the casts, so compiled code takes the namespace kernel.
            dtype, to_zero = self._cast
            if to_zero is not None:  # chop's rules (for correct rounding the cast alone is exact)
                work = torch.nn.functional.hardshrink(work, to_zero)
            out = work.to(dtype).to(work.dtype)
        elif torch.compiler.is_compiling() or work.device.type != "cpu":
            # Compiled code and tensors on GPUs: the namespace kernel, elementwise operations only
            # (traced into one graph; no value read back by the host, no synchronisation).
            out = self._elementwise(work, plan, self._uniforms(work, uniforms))
        elif not self.stochastic:
            # Eager on the CPU: chop's router (the compiled CPU engine on the tensor's memory).
            out = self._chop(work)
        else:
            # Eager on the CPU with a number per element: the host kernels on the tensor's memory
            # (the compiled CPU engine's counter loop takes them as its numbers).
            out = round_array(work, self._specs[carrier], given_sources(self._uniforms(work, uniforms)))
        return out.to(give_back) if give_back is not None else out

    def _elementwise(self, work: torch.Tensor, plan: Any, u: Optional[torch.Tensor]) -> torch.Tensor:
        """The namespace kernels, elementwise torch operations only: chop's (an elementwise plan)
        or CPFloat's rounding for a spec of correct rounding, with each element's number ``u``."""
        if isinstance(plan, tuple):
            spec, constants = plan
            return round_cpfloat_elementwise(_TORCH, work, spec, None if u is None else u.to(torch.float64),
                                             constants)
        return chop_elementwise(_TORCH, work, plan, ElementDraws(u) if self.stochastic else None)

    def _counter_numbers(self, work: torch.Tensor) -> torch.Tensor:
        """The counter-based numbers of this call (float64, shaped like ``work``); advances the counter."""
        n = work.numel()
        counters = torch.arange(n, dtype=torch.int64, device=work.device)
        numbers = uniform(_TORCH.xp, self._counter_key.to(work.device), self._counter_offset.to(work.device),
                          counters)
        self._counter_offset.add_(n)
        return numbers.view(work.shape)

    def _chop_from_counter(self, work: torch.Tensor, carrier: str) -> torch.Tensor:
        """Eager: chop's engine for tensors with the counter's sources, at this rounder's counter."""
        sources = cast(RandomSources, self._counter_sources)  # set: an int seed
        counter = cast(CounterRng, sources.counter)
        counter.offset = int(self._counter_offset) & _MASK64
        out = round_array(work, self._specs[carrier], sources)
        self._counter_offset.fill_(counter.offset - (1 << 64) if counter.offset >= 1 << 63 else counter.offset)
        return out

    def _uniforms(self, work: torch.Tensor, uniforms: Optional[torch.Tensor]) -> Optional[torch.Tensor]:
        if not self.stochastic or uniforms is not None:
            return uniforms
        if isinstance(self.rng, torch.Generator):
            return torch.rand(work.shape, dtype=work.dtype, device=work.device, generator=self.rng)
        # rand_like in contiguous format: the same numbers as torch.rand(shape) at the same indices
        # whatever the strides of work (rand_like keeps them), and it traces with dynamic shapes.
        return torch.rand_like(work, memory_format=torch.contiguous_format)

    def __repr__(self) -> str:
        return f"Rounder({self._given!r}, rng={self.rng!r})"


class _TorchDraws:
    """chop's three draws from torch's generator: ``rng`` a ``torch.Generator``, or ``'torch'`` for
    torch's default generator of ``device`` (seeded by ``torch.manual_seed``)."""

    def __init__(self, rng: Any, device: torch.device):
        self.generator = rng if isinstance(rng, torch.Generator) else None
        self.device = rng.device if isinstance(rng, torch.Generator) else device

    def uniform(self, n: int) -> np.ndarray:
        """``n`` float64 numbers in [0, 1): ``torch.rand``."""
        return torch.rand(n, dtype=torch.float64, device=self.device, generator=self.generator).cpu().numpy()

    def integers(self, imax: int, n: int) -> np.ndarray:
        """``n`` integers in ``1..imax``: ``torch.randint``."""
        return torch.randint(1, imax + 1, (n,), device=self.device, generator=self.generator).cpu().numpy()

    def sources(self) -> RandomSources:
        return RandomSources(self.uniform, self.uniform, self.integers)


#: (t, emax) of the formats whose float32 cast in torch is chop's round to nearest (full range).
_CASTS = {(11, 15): torch.float16, (8, 127): torch.bfloat16}


def _hardware_cast(spec: Any) -> Optional[tuple]:
    """``(torch dtype, threshold)`` when casting float32 to that dtype and back is chop's round to
    nearest up to the sign of zero and chop.m's double-rounding band (|x| at most the threshold
    gives +0); else None.  A float32 -> float16/bfloat16 cast rounds to nearest, ties to even,
    with gradual underflow and overflow to Inf at chop.m's threshold (xboundary).  Only from
    float32: torch casts float64 through float32 (two roundings)."""
    if spec is None or spec.round != 1 or not spec.limits_exponent or not spec.keeps_subnormals or spec.flips:
        return None
    correct = spec.range_rules == "correct" and spec.fmt.is_chop_compatible and not spec.saturation
    if spec.extended and not correct:
        return None
    dtype = _CASTS.get((spec.fmt.t, spec.fmt.emax))
    if dtype is None:
        return None
    if correct:  # the cast is the one correct rounding itself
        return dtype, None
    return dtype, at_most(spec.fmt.xmins / 2 * (1 + 2.0 ** -spec.fmt.t), np.dtype(np.float32))


@dataclass(frozen=True, eq=False)
class GradientRule:
    """What the backward pass of :func:`quantize` does with the incoming gradient: set to 0 where
    ``|x| > clip_limit`` (None: no clipping), then rounded by ``rounder`` (None: kept)."""

    clip_limit: Optional[float] = None
    rounder: Optional[Rounder] = None


class _Quantize(torch.autograd.Function):
    """Forward: round; backward: the straight-through estimator, optionally clipped and rounded."""

    @staticmethod
    def forward(x, uniforms, rounder, rule):
        if rounder is None:
            _require_tensor(x)  # (a rounder checks its input itself)
            return x.clone()
        return rounder(x, uniforms)

    @staticmethod
    def setup_context(ctx, inputs, output):
        x, _, _, rule = inputs
        ctx.rule = rule
        if rule.clip_limit is not None:
            ctx.save_for_backward(x)

    @staticmethod
    def backward(ctx, grad):
        rule = ctx.rule
        if rule.clip_limit is not None:
            (x,) = ctx.saved_tensors
            grad = torch.where(x.abs() <= rule.clip_limit, grad, torch.zeros_like(grad))
        if rule.rounder is not None:
            # a rounding with autograd itself (straight-through): under create_graph the rounded
            # gradient keeps its graph, for a second derivative
            grad = _Quantize.apply(grad, None, rule.rounder, _PLAIN_RULE)
        return grad, None, None, None


#: Straight-through, nothing clipped, the gradient not rounded.
_PLAIN_RULE = GradientRule()


def apply_quantizer(x: torch.Tensor, rounder: Optional[Rounder], rule: GradientRule,
                    uniforms: Optional[torch.Tensor] = None) -> torch.Tensor:
    """:func:`quantize` with a prebuilt :class:`Rounder` (None: values unchanged) and
    :class:`GradientRule`: no option parsing, for compiled code."""
    return _Quantize.apply(x, uniforms, rounder, rule)


class _NamedRounders:
    """The rounders of format names with torch's generator, one attribute each, shared by every
    layer and call that names the same format (the oldest dropped past 128).  Attributes of an
    object, not items of a dict: Dynamo reads each attribute when it is asked for, while it
    reads a dict's items once per trace (a rounder added later in the same trace is missed)."""


_NAMED_ROUNDERS = _NamedRounders()
_NAMED_ROUNDERS_KEPT = 128


@torch.compiler.assume_constant_result
def _named_rounder_attribute(format: str, round: Union[str, int, None], subnormal: Optional[bool]) -> str:
    """The attribute of ``_NAMED_ROUNDERS`` that holds this rounder, built there first if missing.

    Dynamo runs this call while tracing (its result a constant of the graph), then reads the
    rounder as any attribute of a global: building a Rounder (a Chop, with a lock) inside the
    traced code broke the graph, so ``quantize(t, 'h')`` failed under
    ``torch.compile(fullgraph=True)``."""
    attribute = repr((format, round, subnormal))
    held = vars(_NAMED_ROUNDERS)
    if attribute not in held:
        rounder = Rounder(format, round, subnormal=subnormal)  # raises for bad options: nothing stored
        if len(held) >= _NAMED_ROUNDERS_KEPT:
            del held[next(iter(held))]
        held[attribute] = rounder
    return attribute


def rounder_for(format: Any, round: Union[str, int, None] = None, subnormal: Optional[bool] = None,
                rng: Any = "torch") -> Rounder:
    """A :class:`Rounder` for ``format`` (a Rounder itself, with its own ``rng``, when nothing
    else is given); rounders of a format name with torch's generator are cached, so that a
    layer's quantizers share them.  ``rng=None``: ``'chop'``, as in :class:`Rounder`."""
    rng = torch_rng(rng)
    default_rng = isinstance(rng, str) and rng == "torch"
    if isinstance(format, Rounder) and round is None and subnormal is None and default_rng:
        return format
    if isinstance(format, Rounder):
        if default_rng:  # a mode given with a Rounder keeps its own generator or seed
            rng, default_rng = format.rng, isinstance(format.rng, str) and format.rng == "torch"
        format = format.options
    if isinstance(format, str) and default_rng:
        return getattr(_NAMED_ROUNDERS, _named_rounder_attribute(format, round, subnormal))
    return Rounder(format, round, subnormal=subnormal, rng=rng)


def as_rounder(spec: Any, what: str) -> Optional[Rounder]:
    """A :class:`Rounder` (with torch's generator) for a format, a Rounder or a ``(format, round)``
    pair, as layers and :class:`~pychop_compat.nn.OptimLP` take them; None stays None.  ``what``
    names the argument in the error for a tuple that is not a pair (a ValueError)."""
    if spec is None or isinstance(spec, Rounder):
        return spec
    if isinstance(spec, tuple):
        if len(spec) != 2:
            raise ValueError(f"{what} as a tuple must be (format, rounding), got {spec!r}.")
        return rounder_for(spec[0], spec[1])
    return rounder_for(spec)


def quantize(x: torch.Tensor, format: Any = "h", round: Union[str, int, None] = None, *,
             subnormal: Optional[bool] = None, rng: Any = "torch", uniforms: Optional[torch.Tensor] = None,
             clip: bool = False, grad_format: Any = None, grad_round: Union[str, int, None] = None,
             grad_rng: Any = "torch", rounding: Union[str, int, None] = None,
             grad_rounding: Union[str, int, None] = None) -> torch.Tensor:
    """Round ``x`` to a low-precision format, differentiably.

    Forward: ``x`` rounded as :func:`pychop_compat.chop` rounds it (bit for bit,
    given the same random numbers).  Backward: the straight-through estimator,
    the gradient zeroed where ``|x| > xmax`` with ``clip=True``, then rounded to
    ``grad_format`` if given (see :doc:`/training`).

    Parameters
    ----------
    x : torch.Tensor
        float64, float32, float16 or bfloat16, any shape and device.
    format : str, dict, Options, Chop or Rounder, default 'h'
        The forward format (see :class:`Rounder`).
    round, subnormal, rng
        The forward rounding mode, subnormal switch and random source (see
        :class:`Rounder`; ``rng='torch'`` by default; ``None`` means ``'chop'``, as in ``Chop``).
    uniforms : torch.Tensor, optional
        The forward pass's numbers for stochastic rounding, one per element.
    clip : bool
        Zero the gradient outside the representable range.
    grad_format, grad_round, grad_rng : optional
        Round the gradient (``grad_format=None``: not rounded).
    rounding, grad_rounding
        The old spellings of ``round`` and ``grad_round`` (deprecated: they warn).

    Returns
    -------
    torch.Tensor
        Same shape, dtype and device as ``x``; part of the autograd graph when
        ``x`` requires grad.

    Examples
    --------
    >>> import torch
    >>> from pychop_compat.nn import quantize
    >>> x = torch.tensor([1/3, 100000.0], requires_grad=True)
    >>> y = quantize(x, 'h', clip=True)
    >>> y
    tensor([0.3333,    inf], grad_fn=<_QuantizeBackward>)
    >>> y.backward(torch.ones(2)); x.grad
    tensor([1., 0.])

    Under ``torch.compile`` (``fullgraph=True`` included), give the format
    by name or as a prebuilt :class:`Rounder` (or use
    :class:`~pychop_compat.nn.Quantizer`): the rounder of a name is built
    once, outside the traced code; options given as a dict are parsed on
    every call.
    """
    round = renamed_keyword(round, rounding, "round", "rounding")
    grad_round = renamed_keyword(grad_round, grad_rounding, "grad_round", "grad_rounding")
    rounder = rounder_for(format, round, subnormal, rng)
    grad_rng = torch_rng(grad_rng)
    grad_rounder = None
    if grad_format is not None:
        grad_rounder = rounder_for(grad_format, grad_round, None, grad_rng)
    elif grad_round is not None or not (isinstance(grad_rng, str) and grad_rng == "torch"):
        raise ValueError("grad_round and grad_rng need grad_format (the format of the gradient).")
    rule = GradientRule(rounder.xmax if clip else None, grad_rounder)
    return _Quantize.apply(x, uniforms, rounder, rule)
