"""The reference algorithm: chop.m and roundit.m, step by step, on NumPy vectors.

The executable specification (one-to-one with chop.m, not fast), against which the
engines are tested bit for bit.  Every function takes a 1-D array in MATLAB's
column-major element order and returns a new array.
"""

from __future__ import annotations

import numpy as np

from ..spec import FLIP_PRECISION_ERROR, RoundingSpec
from ..random.sources import RandomSources

__all__ = ["chop_vector", "roundit_vector", "apply_range_limits"]


def _mysign(y: np.ndarray) -> np.ndarray:
    """roundit.m's ``mysign``: ``sign(y)``, but 1 at zero."""
    return np.sign(y) + (y == 0)


# roundit.m's deterministic modes; np.rint ties to even, as its round(y - (rem(y,2) == 0.5)).
_DETERMINISTIC = {1: np.rint, 2: np.ceil, 3: np.floor, 4: np.trunc}


def _round_integers(y: np.ndarray, mode: int, stochastic) -> np.ndarray:
    if mode in _DETERMINISTIC:
        return _DETERMINISTIC[mode](y)
    magnitude = np.abs(y)
    frac = magnitude - np.floor(magnitude)
    k = np.flatnonzero(frac != 0)  # NaN != 0, so +-Inf and NaN draw a number too
    if k.size == 0:
        return y.copy()
    # With single input MATLAB compares in single precision.
    rnd = stochastic(k.size).astype(y.dtype)
    up = rnd <= (frac[k] if mode == 5 else y.dtype.type(0.5))
    magnitude[k] = np.where(up, np.ceil(magnitude[k]), np.floor(magnitude[k]))
    return _mysign(y) * magnitude


def _flip_bits(y: np.ndarray, t: int, p: float, sources: RandomSources) -> np.ndarray:
    """Flip, with probability p, one of the t-1 bits below the leading one of each integer."""
    chosen = np.flatnonzero(sources.flip_uniform(y.size) <= p)
    if chosen.size == 0:
        return y
    bits = sources.flip_randi(t - 1, chosen.size)
    values = y[chosen]
    # MATLAB's bitxor rejects Inf and NaN; here they are left unchanged (their draws still count).
    finite = np.isfinite(values)
    magnitude = np.abs(values[finite]).astype(np.int64) ^ np.left_shift(1, bits[finite] - 1)
    values[finite] = _mysign(values[finite]) * magnitude
    y[chosen] = values
    return y


def roundit_vector(y: np.ndarray, mode: int, sources: RandomSources,
                   flip: bool = False, p: float = 0.5, t: int = 0) -> np.ndarray:
    """roundit.m on a vector: round to integers by ``mode``, then optionally flip bits."""
    with np.errstate(invalid="ignore"):  # inf - inf = NaN: Inf and NaN draw like chop.m
        rounded = _round_integers(y, mode, sources.stochastic)
    if flip:
        if t < 2:
            raise ValueError(FLIP_PRECISION_ERROR)
        rounded = _flip_bits(rounded, t, p, sources)
    return rounded


def apply_range_limits(c: np.ndarray, x: np.ndarray, mode: int, xmax: float, xboundary: float, min_rep: float,
                       keeps_subnormals: bool) -> None:
    """chop.m's overflow and underflow rules (explim = 1), in place on ``c``; ``x`` holds the inputs.

    ``min_rep`` is xmins with subnormals, else xmin.  Pass the thresholds as
    float64 scalars so that float32 data are compared exactly.
    """
    inf = np.inf
    if mode in (1, 6):
        c[x >= xboundary] = inf
        c[x <= -xboundary] = -inf
    elif mode == 2:
        c[x > xmax] = inf
        c[(x < -xmax) & (x != -inf)] = -xmax
    elif mode == 3:
        c[(x > xmax) & (x != inf)] = xmax
        c[x < -xmax] = -inf
    else:
        c[(x > xmax) & (x != inf)] = xmax
        c[(x < -xmax) & (x != -inf)] = -xmax

    magnitude = np.abs(c)
    small = magnitude < min_rep
    if not small.any():
        return
    if mode == 1:
        half = min_rep / 2
        to_min = small & ((magnitude > half) if keeps_subnormals else (magnitude >= half))
        c[to_min] = np.sign(c[to_min]) * min_rep
    elif mode == 2:
        to_min = small & (c > 0)
        c[to_min] = min_rep
    elif mode == 3:
        to_min = small & (c < 0)
        c[to_min] = -min_rep
    else:
        to_min = np.zeros_like(small)
    c[small & ~to_min] = 0


def chop_vector(x: np.ndarray, spec: RoundingSpec, sources: RandomSources) -> np.ndarray:
    """chop.m's rounding of the vector ``x`` (float32 or float64) under ``spec``."""
    # Overflow to inf and inf - inf = NaN are part of the semantics, not accidents.
    with np.errstate(over="ignore", invalid="ignore"):
        fmt = spec.fmt
        t, emin, emins = fmt.t, fmt.emin, fmt.emins
        _, e = np.frexp(np.abs(x))
        e = e - 1  # x = 2^e * 1.f

        if spec.limits_exponent:
            in_subnormal_range = (e < emin) & (e >= emins)
        else:
            in_subnormal_range = np.zeros(x.shape, dtype=bool)

        def round_block(index: np.ndarray, precision) -> np.ndarray:
            scaled = np.ldexp(x[index], precision - 1 - e[index])
            rounded = roundit_vector(scaled, spec.round, sources, spec.flips, spec.p, t)
            return np.ldexp(rounded, e[index] - (precision - 1))

        c = x.copy()
        normal = np.flatnonzero(~in_subnormal_range)
        c[normal] = round_block(normal, t)
        subnormal = np.flatnonzero(in_subnormal_range)
        if subnormal.size:
            # Fewer significant bits the further below emin.
            c[subnormal] = round_block(subnormal, t - np.maximum(emin - e[subnormal], 0))

        if spec.limits_exponent:
            apply_range_limits(c, x, spec.round, np.float64(fmt.xmax), np.float64(fmt.xboundary),
                               np.float64(spec.min_rep), spec.keeps_subnormals)
        return c
