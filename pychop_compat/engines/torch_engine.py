"""The torch engine: chop.m's rounding on ``torch.Tensor`` (CPU, CUDA and other devices).

Results are bit-identical to the NumPy engine (:mod:`pychop_compat.rules.chop`):

* deterministic rounding (modes 1 to 4, no flips) takes a fast path that works
  on the bit patterns (``view(int64)``/``view(int32)``) of cache-sized chunks,
  shared out over ``torch.get_num_threads()`` threads on the CPU (round to
  nearest with subnormals kept adds ``S = 1.5 * 2^(e + shift)`` and takes it
  away, which also rounds chop.m's subnormal block); elements below xmin take
  a short exact path (chop.m's subnormal grid is a fixed-point rounding), and
  the few it cannot handle (huge, Inf, NaN, the carrier's subnormals) the
  general path;
* CPU tensors of more than one element run the compiled CPU engine on the
  tensor's memory (zero copy) when Numba is installed and
  ``set_cpu_engine`` allows it, every mode (the same bits, several times
  faster than the torch operations of the fast path on the CPU);
* stochastic rounding and bit flips on other CPU tensors run the NumPy engine on the
  tensor's memory (zero copy); on other devices they take the general path: a
  port of ``reference.py`` with torch operations, drawing the same random numbers
  (``sources``) in chop.m's order: column-major, the normal block first and
  then the subnormal block, one uniform per element whose scaled value is not
  an integer (Inf and NaN included);
* on GPUs, stochastic rounding with numbers made on the device (see below)
  rounds the bit patterns like the deterministic fast path, each element with
  its own number, and leaves the rest (and bit flips) to the general path.

Random numbers on a GPU
-----------------------
On a CPU tensor the numbers always come from ``sources`` (MATLAB's stream by
default), as for NumPy.  On any other device, when no ``randfunc`` is given and
``sources`` is MATLAB's stream, they are drawn on the device instead (no host
round trip) by the counter-based generator of
:mod:`pychop_compat.random.counter`, computed with int64 tensor
operations:

* each element gets its own numbers, a function of the seed, the device's
  counter and its index in row-major (C) order;
* :func:`seed_device` (the same function for torch and CuPy) sets the seed,
  so the same seed, the same sequence of calls, the same shapes, options and
  values give the same results on any GPU, with or without CuPy;
* these are not MATLAB's numbers.  :func:`matlab_stream_on_device` switches
  GPU inputs (torch and CuPy) back to the host stream, bit-identical to NumPy
  and MATLAB, at the cost of host-device transfers.

With ``randfunc`` (or ``Chop(..., rng=...)``) the draws always come from the
host and the results are bit-identical to NumPy on every device.

Autograd: when ``x`` requires grad and grad mode is on, the result is part
of the graph, with the straight-through estimator as its derivative: the
gradient passes through chop unchanged (the rounding's derivative taken as 1),
so that a training loop that calls chop keeps learning.  The values are chop's,
bit for bit.  For clipping or rounding the gradient, or for different formats
in the two passes, use :func:`pychop_compat.nn.quantize`.  Otherwise (no grad
needed, or under ``torch.no_grad()``) the result is a plain tensor.

What every device engine derives from a spec (the random-number policy, host
draws, carriers, limits) lives in :mod:`pychop_compat.kernels.device_plan`;
CUDA tensors with CuPy installed run the kernel of
:mod:`pychop_compat.kernels.cuda` on their own memory.  torch is imported lazily.
"""

from __future__ import annotations

import contextlib
import functools
import importlib.util
from dataclasses import dataclass
from typing import Any, Iterator, Optional

import numpy as np

from ..spec import RoundingSpec
from ..random.sources import RandomSources
from ..random import counter as device_counter
from ..kernels.device_plan import (CARRIERS as _CARRIERS, Carrier as _Carrier, at_least as _at_least,
                                   at_most as _at_most, clamp_exponent as _clamp_exponent, Limits,
                                   range_limits as _limits, regular_range)
from ..random.sources import draws_on_device, host_draw_plan, matlab_stream_on_device
from ..spec import FLIP_PRECISION_ERROR as _FLIP_PRECISION_ERROR
from ..random.counter import seed_device
from ..kernels import torch_elementwise
from ..kernels.elementwise import Namespace
from ..kernels.elementwise_cpfloat import cpfloat_covers, cpfloat_inexact, host_numbers, round_cpfloat_elementwise
from ..kernels.torch_elementwise import apply_overflow, apply_underflow

__all__ = ["chop_tensor", "seed_device", "matlab_stream_on_device", "host_draw_plan", "cuda_route"]

# Elements per chunk of the fast path on the CPU.  The ten or so passes over a
# chunk stay in the L2 cache instead of streaming memory, and a chunk is below
# torch's parallel grain size (32768), so each op runs on the calling thread:
# an OpenMP barrier per op costs a scheduler time slice whenever another
# process holds a core.  The chunks are shared out by _cpu_pool() instead.
_CPU_CHUNK = 32000

# CPU tensors take paths tuned for the host: random modes run the NumPy engine on the
# tensor's own memory (the same bits by construction, with its batched draws), the fast
# path works in cache-sized chunks on a thread pool, and indices come from NumPy.
# Tests set this flag to send CPU tensors down the paths every other device takes (the
# torch port, whole-tensor passes, the counter-based numbers): what CUDA runs without CuPy.
_DEVICE_PATHS_ON_CPU = False


def _host_tuned(t) -> bool:
    """True for a CPU tensor, which takes the host-tuned paths (see above)."""
    return t.device.type == "cpu" and not _DEVICE_PATHS_ON_CPU


# --- the general path: reference.py with torch operations -----------------------------------

def _torch_int(torch, carrier: _Carrier):
    return torch.int64 if carrier.np_int == np.int64 else torch.int32


def _pow2(k, carrier: _Carrier, float_dtype):
    """2**k for an integer tensor k in the carrier's normal range, built from its bits (exact)."""
    return ((k + carrier.bias) << carrier.mant).view(float_dtype)


def _exponents(v, carrier: _Carrier):
    """e with |v| = 2^e * 1.f, exact for subnormals; -1 for 0, Inf and NaN (as np.frexp gives)."""
    import torch

    bits = v.view(_torch_int(torch, carrier))
    magnitude = bits & carrier.abs_mask
    biased = magnitude >> carrier.mant
    e = biased - carrier.bias
    tiny = (biased == 0) & (magnitude != 0)
    # torch.frexp returns exponent 0 for subnormals on the CPU, so read the leading
    # bit of a subnormal from its significand converted (exactly) to a float.
    if not _host_tuned(v) or bool(tiny.any()):
        lead = (magnitude.to(v.dtype).view(bits.dtype) >> carrier.mant) - carrier.bias
        e = torch.where(tiny, lead + (1 - carrier.bias - carrier.mant), e)
    special = (magnitude == 0) | (biased == carrier.field)
    return torch.where(special, torch.full_like(e, -1), e)


def _apply_limits(c, v, spec: RoundingSpec, lim: Limits):
    """chop.m's overflow and underflow rules on the rounded values ``c`` of the inputs ``v``."""
    return apply_underflow(apply_overflow(c, v, spec.round, lim), spec.round, lim, spec.keeps_subnormals)


def _counter_uniform(key: int, offset: int, n: int, device, indices=None):
    """``u(offset + i)`` of :mod:`~pychop_compat.random.counter` as float64, for
    i < n, or for i in the int64 tensor ``indices``."""
    import torch

    from ..kernels.xp import library_namespace

    if indices is None:
        indices = torch.arange(n, dtype=torch.int64, device=device)
    return device_counter.uniform(library_namespace("torch").xp, key, offset, indices)


class _CounterDraws:
    """The numbers of a :class:`~pychop_compat.random.counter.CounterStream` for some
    elements of a call: those at ``indices`` (an int64 tensor), or all of them (None)."""

    def __init__(self, stream, indices=None):
        self.stream, self.indices = stream, indices

    def uniform(self, stream_number: int, n: int, device):
        return _counter_uniform(self.stream.keys[stream_number - 1], self.stream.offset, n, device, self.indices)


def _per_element_draws(y_need, sub, spec: RoundingSpec, sources, device_draws, n: int, device):
    """``(draws, flip_bits, has_normal, has_sub)`` for each element of the vector.

    ``draws`` (float64, 0 where unused) feeds stochastic rounding; ``flip_bits``
    (int64) holds ``2**(bit-1)`` for elements whose bit is flipped, else 0.
    ``has_normal``/``has_sub`` tell whether a block drew at all (chop.m leaves a
    block without draws untouched, which keeps the sign of its zeros).
    """
    import torch

    stochastic = spec.stochastic
    if device_draws is not None:
        if spec.flips and spec.fmt.t < 2:
            raise ValueError(_FLIP_PRECISION_ERROR)
        draws = device_draws.uniform(device_counter.ROUND, n, device) if stochastic else None
        flip_bits = None
        if spec.flips:
            chosen = device_draws.uniform(device_counter.FLIP_CHOICE, n, device) <= spec.p
            shift = device_draws.uniform(device_counter.FLIP_BIT, n, device).mul_(spec.fmt.t - 1).floor_()
            shift = shift.to(torch.int64)
            flip_bits = torch.where(chosen, torch.ones_like(shift) << shift, 0)  # bit 1 + shift
        return draws, flip_bits, True, True

    normal = ~sub if sub is not None else None
    n_sub = int(sub.sum()) if sub is not None else 0
    counts = (0, 0)
    if stochastic:
        k_normal = int((y_need & normal).sum()) if normal is not None else int(y_need.sum())
        counts = (k_normal, int((y_need & sub).sum()) if sub is not None else 0)
    plan = host_draw_plan(spec, sources, (n - n_sub, n_sub), counts)

    def scatter(values, mask, dtype):
        out = torch.zeros(n, dtype=dtype, device=device)
        for block_values, block_mask in zip(values, mask):
            if block_values is not None and block_values.size:
                tensor = torch.from_numpy(block_values).to(device)
                if block_mask is None:
                    out.copy_(tensor)
                else:
                    out[block_mask] = tensor
        return out

    draws = flip_bits = None
    if stochastic:
        masks = (y_need if normal is None else y_need & normal, None if sub is None else y_need & sub)
        draws = scatter([p[0] for p in plan], masks, torch.float64)
    if spec.flips:
        flip_bits = scatter([p[1] for p in plan], (normal, sub), torch.int64)
    return draws, flip_bits, counts[0] > 0, counts[1] > 0


def _chop_vector(v, spec: RoundingSpec, sources: Optional[RandomSources], device_draws=None):
    """chop.m on the 1-D float32/float64 tensor ``v``: a new tensor.

    ``v`` must be in MATLAB's column-major order when ``sources`` feeds the draws;
    any order will do for deterministic modes and for ``device_draws``.
    """
    import torch

    carrier = _CARRIERS[str(v.dtype).rpartition(".")[2]]
    fmt, mode, t = spec.fmt, spec.round, spec.fmt.t
    emin, emins = _clamp_exponent(fmt.emin), _clamp_exponent(fmt.emins)
    e = _exponents(v, carrier)
    sub = ((e < emin) & (e >= emins)) if spec.limits_exponent else None
    if sub is not None and not bool(sub.any()) and device_draws is None:
        sub = None  # no subnormal block (saves work; chop.m then skips it)
    # Scale to integers: the normal block keeps t bits, the subnormal block the
    # grid of xmins.  Two exact power-of-two factors, since 2^s alone can
    # overflow (s reaches 1126 for double subnormals).
    s = (t - 1) - (torch.where(sub, emin, e) if sub is not None else e)
    s1 = s >> 1
    s2 = s - s1
    y = v * _pow2(s1, carrier, v.dtype) * _pow2(s2, carrier, v.dtype)

    need = None
    if mode >= 5:
        magnitude = y.abs()
        floor = magnitude.floor()
        fraction = magnitude - floor
        need = fraction != 0  # NaN != 0: Inf and NaN draw too, as in chop.m
    draws = flip_bits = None
    has_normal = has_sub = True
    if mode >= 5 or spec.flips:
        draws, flip_bits, has_normal, has_sub = _per_element_draws(
            need, sub, spec, sources, device_draws, v.numel(), v.device)

    if mode == 1:
        r = y.round()  # half to even
    elif mode == 2:
        r = y.ceil()
    elif mode == 3:
        r = y.floor()
    elif mode == 4:
        r = y.trunc()
    else:
        threshold = fraction if mode == 5 else 0.5
        up = need & (draws.to(v.dtype) <= threshold)  # compared in the input's class
        rounded = torch.where(up, magnitude.ceil(), floor)
        r = torch.where(y < 0, -rounded, rounded)
        # A block that drew nothing is returned as it was (chop.m copies it).
        if not has_normal:
            r = torch.where(sub, r, y) if sub is not None else y
        if not has_sub and sub is not None:
            r = torch.where(sub, y, r)

    if flip_bits is not None:
        chosen = (flip_bits != 0) & torch.isfinite(r)
        magnitude_bits = torch.where(chosen, r.abs(), 0).to(torch.int64) ^ flip_bits
        flipped = torch.where(r < 0, -magnitude_bits.to(torch.float64), magnitude_bits.to(torch.float64))
        r = torch.where(chosen, flipped.to(v.dtype), r)

    # Back to the input's scale: the first factor keeps the value normal (exact),
    # so the second one rounds once, as ldexp does.
    c = r * _pow2(-s1, carrier, v.dtype) * _pow2(-s2, carrier, v.dtype)
    if spec.limits_exponent:
        c = _apply_limits(c, v, spec, _limits(spec, carrier))
    return c


# --- the fast path: deterministic rounding on bit patterns, chunk by chunk ------------------

@dataclass(frozen=True)
class _FastPlan:
    """Constants of the fast path for one spec and dtype."""

    shift: int     # significand bits dropped by rounding to t bits (0: nothing to round)
    low: int       # nonzero magnitudes (as bits) below this are "tiny"
    high: int      # magnitudes above this go to the general path
    mode: int
    plus_zero: bool  # chop.m's range limits turn -0 into +0
    tiny_path: bool  # tiny elements take _chop_tiny (else the general path)
    up: tuple = ()     # 2^-emins as two exact factors
    down: tuple = ()   # 2^emins as two exact factors, the larger first
    xmins_ge: float = 0.0  # |x| >= xmins <=> |x| >= xmins_ge: chop.m's subnormal block
    xmin_ge: float = 0.0   # |x| >= xmin <=> |x| >= xmin_ge
    # Round to nearest by (x + S) - S, S = 1.5 * 2^(max(e, floor) + shift) from the
    # exponent field (see _round_nearest); 0: integer rounding of the bits instead.
    s_offset: int = 0
    exponent_floor: int = 0  # exponent field of 2^emin: chop.m's subnormal block is regular


def _fast_plan(spec: RoundingSpec, carrier: _Carrier) -> _FastPlan:
    fmt, dt = spec.fmt, carrier.np_float
    shift = max(carrier.mant - fmt.t + 1, 0)
    low = carrier.min_normal_bits
    high = carrier.max_finite_bits
    if not spec.limits_exponent:
        return _FastPlan(shift, low, high, spec.round, False, False)
    # Zeros are "small" (and set to +0) unless min_rep itself is 0 in double (huge emax).
    plus_zero = (fmt.xmins if spec.keeps_subnormals else fmt.xmin) > 0
    # Below xmin: subnormal grid or flush; above: overflow rules.
    low = max(low, carrier.bits(_at_least(fmt.xmin, dt)))
    if spec.round == 1:
        top = _at_least(fmt.xboundary, dt)  # |x| < xboundary rounds to at most xmax
        high = min(high, carrier.bits(top) - 1)
    else:
        high = min(high, carrier.bits(_at_most(fmt.xmax, dt)))
    # The tiny path scales by 2^-emins with two factors that must be normal numbers.
    a = fmt.emins // 2
    b = fmt.emins - a
    tiny = 1 - carrier.bias <= a and -b <= carrier.bias and fmt.emins < fmt.emin
    if not tiny:
        return _FastPlan(shift, low, high, spec.round, plus_zero, False)
    s_offset = exponent_floor = 0
    if spec.round == 1 and shift >= 2 and spec.keeps_subnormals:
        # S's binade holds x + S (shift >= 2); S must stay finite.  With subnormals kept,
        # chop.m's subnormal block (the grid of xmins, no underflow rule there) is S's
        # grid at e = emin: those elements are regular, their exponent field raised.
        s_offset = (shift << carrier.mant) | (1 << (carrier.mant - 1))
        high = min(high, ((carrier.bias - shift + 1 + carrier.bias) << carrier.mant) - 1)
        exponent_floor = low & (carrier.field << carrier.mant)
        low = max(carrier.min_normal_bits, carrier.bits(_at_least(fmt.xmins, dt)))
    return _FastPlan(shift, low, high, spec.round, plus_zero, True,
                     up=(2.0 ** -a, 2.0 ** -b), down=(2.0 ** b, 2.0 ** a),
                     xmins_ge=_at_least(fmt.xmins, dt), xmin_ge=_at_least(fmt.xmin, dt),
                     s_offset=s_offset, exponent_floor=exponent_floor)


def _round_nearest(values, bits, plan: _FastPlan, carrier: _Carrier, scratch, target):
    """Round to nearest, ties to even, by the FPU: ``(x + S) - S`` into ``target`` (a float view).

    S = 1.5 * 2^(e + shift), built from the exponent field (raised to chop.m's emin,
    for its subnormal block), lies in a binade whose spacing is the grid of x; x + S
    stays in that binade, so one rounding there is the rounding of x.
    """
    import torch

    torch.bitwise_and(bits, carrier.field << carrier.mant, out=scratch)
    scratch.clamp_(min=plan.exponent_floor).add_(plan.s_offset)
    big = scratch.view(values.dtype)
    return torch.add(values, big, out=target).sub_(big)


def _round_bits(bits, plan: _FastPlan, carrier: _Carrier, scratch, target):
    """Round the bit patterns ``bits`` to multiples of 2**shift, into ``target``.

    In a normal number's pattern this rounds the value to ``t`` bits (a carry
    out of the significand correctly bumps the exponent, up to Inf).  The sign
    bit is left alone: sign-magnitude makes nearest, truncation and the two
    directed modes act on the magnitude bits only, and no carry reaches the sign.
    """
    import torch

    shift = plan.shift
    if shift == 0:
        return target.copy_(bits)
    mask = (1 << shift) - 1
    if plan.mode == 1 and shift == carrier.mant:
        # t = 1: the kept significand is the hidden bit, always odd, so ties round up.
        torch.add(bits, (mask >> 1) + 1, out=target)
    elif plan.mode == 1:
        # Nearest, ties to even: add half an ulp, minus one unless the kept lsb is odd.
        torch.bitwise_right_shift(bits, shift, out=scratch)
        scratch.bitwise_and_(1)
        torch.add(bits, scratch, out=target)
        target.add_(mask >> 1)
    elif plan.mode in (2, 3):
        # Up in magnitude for the sign the mode rounds towards, truncation for the other.
        towards = bits >= 0 if plan.mode == 2 else bits < 0
        torch.add(bits, towards.to(bits.dtype).mul_(mask), out=target)
    else:
        target.copy_(bits)
    return target.bitwise_and_(~mask)


def _chop_tiny(values, rounded, spec: RoundingSpec, plan: _FastPlan, carrier: _Carrier, dense=False):
    """chop.m on carrier-normal ``values`` below xmin (explim on), given their t-bit roundings ``rounded``.

    chop.m rounds an element with exponent in [emins, emin) on the fixed grid
    of xmins (a constant scale, exact in two factors) and an element below
    xmins to t bits at its own exponent (the bit rounding, ``rounded``); then
    its underflow rules apply (tiny values never overflow).  ``dense``: the
    values may also hold regular elements (left as ``rounded``, which the
    underflow rules do not change) and zeros.
    """
    import torch

    scaled = values * plan.up[0] * plan.up[1]
    if plan.mode == 1:
        scaled.round_()
    elif plan.mode == 2:
        scaled.ceil_()
    elif plan.mode == 3:
        scaled.floor_()
    else:
        scaled.trunc_()
    magnitude = values.abs()
    on_grid = magnitude >= plan.xmins_ge
    if dense:
        on_grid &= magnitude < plan.xmin_ge
    c = torch.where(on_grid, scaled.mul_(plan.down[0]).mul_(plan.down[1]), rounded)
    return apply_underflow(c, spec.round, _limits(spec, carrier), spec.keeps_subnormals)


def _flat_nonzero(mask):
    """Indices of the True elements of a 1-D mask (NumPy's is several times faster on the CPU)."""
    import torch

    if _host_tuned(mask):
        return torch.from_numpy(np.flatnonzero(mask.numpy()))
    return torch.nonzero(mask).view(-1)


def _bit_rounded(values, rounded, plan: _FastPlan, carrier: _Carrier):
    """The t-bit roundings of ``values`` that :func:`_chop_tiny` needs: ``rounded`` itself,
    unless it came from :func:`_round_nearest`, which rounds below xmin on chop.m's grid."""
    import torch

    if not plan.s_offset:
        return rounded
    bits = values.view(_torch_int(torch, carrier))
    target = torch.empty_like(bits)
    return _round_bits(bits, plan, carrier, torch.empty_like(bits), target).view(values.dtype)


def _scan(flat, out, spec: RoundingSpec, plan: _FastPlan, carrier: _Carrier, start: int, stop: int, chunk: int):
    """The fast path on ``flat[start:stop]``, chunk by chunk, into ``out``."""
    import torch

    bits_in = flat.view(_torch_int(torch, carrier))
    bits_out = out.view(bits_in.dtype)
    magnitude_buf = torch.empty(min(chunk, stop - start), dtype=bits_in.dtype, device=flat.device)
    scratch_buf = torch.empty_like(magnitude_buf)
    general, tiny = [], []
    for begin in range(start, stop, chunk):
        end = min(begin + chunk, stop)
        bits = bits_in[begin:end]
        magnitude = torch.bitwise_and(bits, carrier.abs_mask, out=magnitude_buf[:end - begin])
        smallest, largest = (int(v) for v in torch.aminmax(magnitude))
        if plan.s_offset:
            _round_nearest(flat[begin:end], bits, plan, carrier, scratch_buf[:end - begin], out[begin:end])
        else:
            _round_bits(bits, plan, carrier, scratch_buf[:end - begin], bits_out[begin:end])
        if plan.plus_zero and smallest == 0:
            out[begin:end].add_(0.0)  # -0 + 0 = +0, as chop.m's underflow rule assigns 0
        if smallest < plan.low:  # zeros, or values the shift alone cannot round
            mask = magnitude < plan.low
            if smallest == 0:
                mask &= magnitude != 0
            found = _flat_nonzero(mask)
            if not plan.tiny_path:
                general.append(found + begin)
            elif 8 * found.numel() > end - begin:
                # Mostly tiny: the tiny path on the whole chunk beats gathering.
                out[begin:end] = _chop_tiny(flat[begin:end], _bit_rounded(flat[begin:end], out[begin:end], plan, carrier),
                                            spec, plan, carrier, dense=True)
            elif found.numel():
                tiny.append(found + begin)
            if plan.tiny_path and smallest < carrier.min_normal_bits:
                # Subnormals of the carrier need their exact exponent: general path.
                general.append(_flat_nonzero((magnitude < carrier.min_normal_bits) & (magnitude != 0)) + begin)
        if largest > plan.high:
            general.append(_flat_nonzero(magnitude > plan.high) + begin)
    # The elements left over, in cache-sized pieces: far fewer calls than one per
    # chunk.  The general path goes last: it overrides the tiny path for subnormals.
    for indices, path in ((tiny, _chop_tiny), (general, None)):
        indices = [i for i in indices if i.numel()]
        if not indices:
            continue
        indices = torch.cat(indices)
        for begin in range(0, indices.numel(), chunk):
            piece = indices[begin:begin + chunk]
            if path is None:
                out[piece] = _chop_vector(flat[piece], spec, None)
            else:
                out[piece] = _chop_tiny(flat[piece], _bit_rounded(flat[piece], out[piece], plan, carrier),
                                        spec, plan, carrier)


_pool = None  # (process id, executor, size)


def _cpu_pool(n: int, chunk: int):
    """``(executor, workers)`` for n elements: torch's thread count, if there is enough work."""
    import concurrent.futures
    import os

    import torch

    global _pool
    workers = min(torch.get_num_threads(), n // (4 * chunk))
    if workers < 2:
        return None, 1
    # A forked child (e.g. a DataLoader worker) inherits the pool but not its threads.
    if _pool is None or _pool[0] != os.getpid() or _pool[2] < workers:
        _pool = (os.getpid(), concurrent.futures.ThreadPoolExecutor(workers, thread_name_prefix="pychop"), workers)
    return _pool[1], workers


def _chop_fast(x, spec: RoundingSpec):
    """Modes 1 to 4 without flips on any tensor: a new contiguous tensor of the same shape."""
    import torch

    carrier = _CARRIERS[str(x.dtype).rpartition(".")[2]]
    plan = _fast_plan(spec, carrier)
    flat = x.contiguous().view(-1)
    out = torch.empty_like(flat)
    n = flat.numel()
    # On a GPU one pass over the whole tensor is best; on the CPU, chunks stay in cache.
    chunk = _CPU_CHUNK if _host_tuned(x) else n
    pool, workers = _cpu_pool(n, chunk) if _host_tuned(x) else (None, 1)
    if pool is None:
        _scan(flat, out, spec, plan, carrier, 0, n, chunk)
    else:
        # Contiguous ranges of whole chunks, one per worker (torch ops release the GIL).
        per_worker = -(-n // (workers * chunk)) * chunk
        futures = [pool.submit(_scan, flat, out, spec, plan, carrier, begin, min(begin + per_worker, n), chunk)
                   for begin in range(0, n, per_worker)]
        for future in futures:
            future.result()
    return out.view(x.shape)


def _chop_fast_stochastic(x, spec: RoundingSpec, stream):
    """Modes 5 and 6 without flips, numbers made on the device: a new contiguous tensor.

    An element's result depends only on its value and its number, so the
    regular elements (those the bit rounding of :func:`_chop_fast` handles)
    round on their bit patterns: the dropped bits are the scaled value's
    fraction (exact as a float), and the kept bits go up one unit when the
    number is at most that fraction (mode 5) or 1/2 (mode 6).  The others go
    to the general path with their own numbers.
    """
    import torch

    carrier = _CARRIERS[str(x.dtype).rpartition(".")[2]]
    plan = _fast_plan(spec, carrier)
    flat = x.contiguous().view(-1)
    bits = flat.view(_torch_int(torch, carrier))
    n = flat.numel()
    if plan.shift:
        mask = (1 << plan.shift) - 1
        dropped = bits & mask
        u = _CounterDraws(stream).uniform(device_counter.ROUND, n, flat.device)
        u = u.to(flat.dtype)  # compared in the input's class, as chop.m
        if spec.round == 5:
            up = u <= dropped.to(flat.dtype).mul_(2.0 ** -plan.shift)  # 0 < u: no fraction, no step
        else:
            up = (u <= 0.5).logical_and_(dropped != 0)
        out_bits = (bits & ~mask).add_(up.to(bits.dtype).mul_(mask + 1))
    else:
        out_bits = bits.clone()
    out = out_bits.view(flat.dtype)
    magnitude = bits & carrier.abs_mask
    indices = _flat_nonzero((magnitude < plan.low).logical_or_(magnitude > plan.high))
    if indices.numel():
        out[indices] = _chop_vector(flat[indices], spec, None, _CounterDraws(stream, indices))
    return out.view(x.shape)


# --- orchestration ---------------------------------------------------------------------------

_CUDA_ROUTES = ("auto", "cupy", "triton", "torch")
_cuda_route = "auto"


@contextlib.contextmanager
def cuda_route(route: str) -> Iterator[None]:
    """Pick how CUDA tensors are rounded within ``with`` (for checks and benchmarks).

    Parameters
    ----------
    route : {'auto', 'cupy', 'triton', 'torch'}
        ``'auto'`` (the default): CuPy's kernel when CuPy is installed and can
        use the GPU, else the Triton kernel where it applies (modes 1 to 4,
        and 5 and 6 with numbers made on the device, without flips) and
        Triton is installed, else pure torch.  ``'cupy'``: CuPy's kernel (an
        error without CuPy).  ``'triton'``: the Triton kernel where it
        applies, pure torch for the rest (an error without Triton).
        ``'torch'``: pure torch operations.  Every route gives the same bits.
    """
    global _cuda_route
    if route not in _CUDA_ROUTES:
        raise ValueError(f"cuda_route: route must be one of {', '.join(map(repr, _CUDA_ROUTES))}, not {route!r}.")
    previous, _cuda_route = _cuda_route, route
    try:
        yield
    finally:
        _cuda_route = previous


def _device_key(device) -> str:
    """The counter of :mod:`~pychop_compat.random.counter` that a device uses."""
    return f"{device.type}:{device.index or 0}"


_cupy = None


def _cupy_for(x):
    """CuPy, when it is installed and can run on the tensor's CUDA device; else None."""
    global _cupy
    if x.device.type != "cuda":
        return None
    if _cupy is None:
        _cupy = False
        if importlib.util.find_spec("cupy") is not None:
            try:
                import cupy

                if cupy.cuda.runtime.getDeviceCount() > 0:
                    _cupy = cupy
            except Exception:  # a CuPy without a usable CUDA runtime: use torch alone
                _cupy = False
    return _cupy or None


_triton = None


def _triton_for(x):
    """The Triton kernel module for a CUDA tensor when Triton is installed; else None.

    Triton itself is imported only when the kernel is first launched.
    """
    global _triton
    if x.device.type != "cuda":
        return None
    if _triton is None:
        from ..kernels import triton_kernel

        _triton = triton_kernel if triton_kernel.available() else False
    return _triton or None


def _chop_with_triton(kernel_module, x, spec: RoundingSpec, stream, strict: bool = False):
    """Regular elements in the Triton kernel (one pass), the others by the general path.

    Returns None when Triton cannot compile or launch here (then, unless
    ``strict``, with a warning, and the caller takes the pure-torch path).
    """
    import torch

    global _triton
    carrier = _CARRIERS[str(x.dtype).rpartition(".")[2]]
    regular = regular_range(spec, carrier)
    flat = x.contiguous().view(-1)
    out = torch.empty_like(flat)
    try:
        specials = kernel_module.chop_regular(flat, out, spec, regular, stream)
    except Exception as exc:  # Triton's compiler or driver, not the rounding: fall back
        if strict:
            raise
        import warnings

        warnings.warn(f"pychop_compat: Triton kernel unusable here ({type(exc).__name__}: {exc}); "
                      "CUDA tensors use pure torch operations.", RuntimeWarning, stacklevel=4)
        _triton = False
        return None
    if specials:
        magnitude = flat.view(_torch_int(torch, carrier)) & carrier.abs_mask
        indices = _flat_nonzero((magnitude < regular.low).logical_or_(magnitude > regular.high))
        draws = _CounterDraws(stream, indices) if stream is not None else None
        out[indices] = _chop_vector(flat[indices], spec, None, draws)
    return out.view(x.shape)


def _column_major(x):
    """The elements of x in MATLAB's order (x's reversed dims, flattened)."""
    if x.dim() < 2:
        return x.reshape(-1)
    return x.permute(*reversed(range(x.dim()))).reshape(-1)


def _from_column_major(v, shape):
    if len(shape) < 2:
        return v.reshape(shape)
    dims = tuple(reversed(range(len(shape))))
    return v.reshape(tuple(reversed(shape))).permute(*dims).contiguous()


def _working_tensor(x):
    """``(tensor, dtype to give back)``: float32/float64 to compute on, chop's classes."""
    import torch

    if x.dtype in (torch.float64, torch.float32):
        return x, None
    if x.dtype in (torch.float16, torch.bfloat16):
        return x.to(torch.float32), x.dtype  # no MATLAB class is half: compute in single
    if not x.is_floating_point():
        return x.to(torch.float64), None  # integers and bool, as NumPy
    raise TypeError(f"chop supports float64, float32, float16 and bfloat16 tensors (and integers), not {x.dtype}.")


def chop_tensor(x: Any, spec: RoundingSpec, sources: RandomSources) -> Any:
    """Round the tensor ``x`` by ``spec``, like :func:`pychop_compat.chop`.

    Parameters
    ----------
    x : torch.Tensor
        float64 and float32 are rounded in their own precision; float16 and
        bfloat16 in float32 and cast back; integers and bool as float64.  Any
        shape (0-d, empty, non-contiguous), any device.
    spec : RoundingSpec
    sources : RandomSources
        Where stochastic rounding and bit flips draw from (see the module notes
        for GPU tensors).

    Returns
    -------
    torch.Tensor
        A new contiguous tensor with the shape, device and dtype of ``x``
        (float64 for integer and bool input).  ``x`` is not modified.  When
        ``x`` requires grad (and grad mode is on) the result carries the
        straight-through gradient (see the module notes); else it is detached.
    """
    import torch

    if x.requires_grad and torch.is_grad_enabled():
        return _straight_through().apply(x, spec, sources)
    return _chop_detached(x, spec, sources)


_STRAIGHT_THROUGH = None


def _straight_through():
    """The autograd rule of chop (built on first use: torch is imported lazily)."""
    global _STRAIGHT_THROUGH
    if _STRAIGHT_THROUGH is None:
        import torch

        class ChopStraightThrough(torch.autograd.Function):
            """chop's values forward; the gradient passes through unchanged backward."""

            @staticmethod
            def forward(ctx, x, spec, sources):
                return _chop_detached(x, spec, sources)

            @staticmethod
            def backward(ctx, grad):
                return grad, None, None

        _STRAIGHT_THROUGH = ChopStraightThrough
    return _STRAIGHT_THROUGH


def _chop_detached(x, spec: RoundingSpec, sources: RandomSources):
    import torch

    with torch.no_grad():
        work, give_back = _working_tensor(x.detach())
        out = _chop_work(work, spec, sources)
        return out.to(give_back) if give_back is not None else out


def _chop_work(x, spec: RoundingSpec, sources: RandomSources):
    if x.numel() == 0:
        return x.clone()
    if getattr(spec, "extended", False):
        return _chop_extended(x, spec, sources)
    if _host_tuned(x):
        # The tensor's memory as a NumPy array (no copy).  Random modes: the NumPy engine's
        # dispatch (the compiled engine, or the NumPy engine where it streams its draws
        # faster), as for NumPy arrays.  Modes 1 to 4: the compiled engine (Numba), several
        # times faster than the torch operations of _chop_fast on the CPU.  The same bits.
        array = x.numpy()
        out = None
        if spec.draws:
            from .numpy_engine import chop_array

            out = chop_array(array, spec, sources)
        elif _compiled_engine_takes(array, spec):
            from ..kernels import compiled

            out = compiled.chop_array(array, spec, sources)
        if out is not None:
            import torch

            return torch.from_numpy(out if out.flags.c_contiguous else out.copy(order="C"))
    stream = _device_stream(x, spec, sources)
    route = _cuda_route
    cupy = _cupy_for(x) if route in ("auto", "cupy") else None
    if route == "cupy" and cupy is None and x.device.type == "cuda":
        raise RuntimeError("cuda_route('cupy'): CuPy is not installed or cannot use this GPU.")
    if cupy is not None:
        return _chop_with_cupy(cupy, x, spec, sources, stream)
    if route in ("auto", "triton") and not spec.flips and (spec.round <= 4 or stream is not None):
        triton_kernel = _triton_for(x)
        if triton_kernel is None and route == "triton" and x.device.type == "cuda":
            raise RuntimeError("cuda_route('triton'): Triton is not installed.")
        if triton_kernel is not None:
            out = _chop_with_triton(triton_kernel, x, spec, stream, strict=route == "triton")
            if out is not None:
                return out
    if spec.round <= 4 and not spec.flips:
        return _chop_fast(x, spec)
    if stream is not None and not spec.flips:
        return _chop_fast_stochastic(x, spec, stream)
    if stream is not None:
        return _chop_vector(x.contiguous().view(-1), spec, None, _CounterDraws(stream)).view(x.shape)
    return _from_column_major(_chop_vector(_column_major(x), spec, sources), x.shape)


def _device_stream(x, spec: RoundingSpec, sources: RandomSources):
    """The counter numbers for the random modes of a tensor off the CPU: ``Chop(rng=<int>)``'s
    counter (every engine), or the device's generator where chop's numbers are drawn on the
    device (:func:`.device_plan.draws_on_device`); None otherwise (host sources, CPU tensors,
    deterministic modes)."""
    if _host_tuned(x) or not spec.draws:
        return None
    counter = getattr(sources, "counter", None)  # Chop(rng=<int>): the counter generator, every engine
    if counter is not None:
        if spec.flips and spec.fmt.t < 2:
            raise ValueError(_FLIP_PRECISION_ERROR)
        return counter.take(x.numel())
    if draws_on_device(sources):
        return device_counter.take(_device_key(x.device), x.numel())
    return None


@functools.lru_cache(maxsize=64)
def _elementwise_plan(spec: RoundingSpec, carrier: str):
    return torch_elementwise.ElementwisePlan.from_spec(spec, carrier)


def _compiled_engine_takes(array: np.ndarray, spec: RoundingSpec) -> bool:
    """Whether a CPU tensor's memory ``array`` (float32/float64) goes to the compiled CPU engine
    (:mod:`.compiled`: Numba installed and allowed by ``set_cpu_engine``); then its modes
    1 to 4 take it too instead of the torch operations of :func:`_chop_fast`."""
    from ..kernels import compiled

    return compiled.wanted() and compiled.handles(array, spec)


@functools.lru_cache(maxsize=1)
def _torch_namespace() -> Namespace:
    """torch as the array library of the namespace-generic elementwise code."""
    import torch

    return Namespace(torch, lambda a, dtype: a.view(dtype))


def _chop_extended(x, spec: RoundingSpec, sources: RandomSources):
    """Specs beyond chop.m (``spec.extended``): the NumPy engine, on the tensor's memory for CPU
    tensors.  On a GPU, chop.m's rules on an OCP/ML format are elementwise torch operations on
    the device (:mod:`.torch_elementwise`, the format's encoding included), stochastic rounding
    too: with numbers made on the device as for chop's formats, or drawn by the host in chop.m's
    order (the general path, then the encoding); so are CPFloat's rules
    (:func:`.elementwise_cpfloat.round_cpfloat_elementwise`), in its stochastic modes with numbers
    drawn by the host in column-major order.  The rest (bit flips, limited random bits under
    chop's rules, E8M0 under chop's rules) make a round trip through the host."""
    import torch

    if not _host_tuned(x):
        out = _extended_on_device(x, spec, sources)
        if out is not None:
            return out
    from .numpy_engine import chop_array

    out = np.array(chop_array(x.cpu().numpy(), spec, sources), order="C")  # (not ascontiguousarray: 0-d)
    return torch.from_numpy(out).to(x.device)


def _extended_on_device(x, spec: RoundingSpec, sources: RandomSources):
    """:func:`_chop_extended`'s device paths; None for the specs they do not cover."""
    import torch

    if torch_elementwise.supports(spec):
        plan = _elementwise_plan(spec, "float64" if x.dtype == torch.float64 else "float32")
        if spec.round <= 4:
            return torch_elementwise.round_elementwise(x, plan)
        stream = _device_stream(x, spec, sources)
        if stream is not None:  # numbers made on the device, element i (row-major) its own
            u = _CounterDraws(stream).uniform(device_counter.ROUND, x.numel(), x.device).view(x.shape)
            return torch_elementwise.round_elementwise(x.contiguous(), plan, u)
        # Numbers from the host in chop.m's order (MATLAB's stream, randfunc): chop.m's
        # algorithm on the device, then the format's encoding.
        rounded = _from_column_major(_chop_vector(_column_major(x), spec, sources), x.shape)
        return torch_elementwise.apply_encoding(rounded, x, plan)
    if cpfloat_covers(spec):
        # CPFloat's rules in a deterministic mode: integer torch operations on the bit patterns.
        return round_cpfloat_elementwise(_torch_namespace(), x, spec).contiguous()
    if cpfloat_covers(spec, stochastic=True):
        # CPFloat's stochastic modes: the inexact elements found on the device, their numbers
        # drawn by the host in column-major order (as the NumPy engine draws them), the rounding
        # on the device.
        namespace = _torch_namespace()
        order = _flat_nonzero(_column_major(cpfloat_inexact(namespace, x, spec)))
        u = torch.full((x.numel(),), 2.0, dtype=torch.float64, device=x.device)
        if order.numel():
            u[order] = torch.from_numpy(host_numbers(sources, spec, order.numel())).to(x.device)
        return round_cpfloat_elementwise(namespace, x, spec, _from_column_major(u, x.shape)).contiguous()
    return None


def _chop_with_cupy(cupy, x, spec: RoundingSpec, sources, stream):
    """CUDA tensors with CuPy installed: CuPy's fused kernel on the same memory (DLPack)."""
    import torch

    from ..kernels.cuda import chop_device_array

    with cupy.cuda.Device(x.device.index or 0):
        array = cupy.from_dlpack(x.contiguous())
        result = chop_device_array(array, spec, sources, stream)
        return torch.from_dlpack(result)
