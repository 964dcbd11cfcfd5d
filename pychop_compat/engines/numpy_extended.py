"""The NumPy engine for specs beyond chop.m (``RoundingSpec.extended``).

* chop's range rules (a chop facade on an OCP/ML format, limited random
  bits): chop.m's algorithm by the fast bit-pattern engine
  (:mod:`.numpy_fast`, or the reference), then the format's encoding
  (:func:`pychop_compat.rules.cpfloat.apply_encoding`).
* CPFloat's range rules (the ``cpfloat`` facade, ``round_to_format``): for
  the deterministic modes (and "no rounding") on float32/float64, the
  compiled kernel :mod:`.numba_cpfloat` when the compiled CPU engine is
  wanted (:func:`.compiled.wanted`: the setting ``'auto'`` with Numba
  installed, or ``'numba'``), else the NumPy bit-pattern engine
  :mod:`.numpy_cpfloat`; the reference
  :func:`~pychop_compat.rules.cpfloat.round_cpfloat` for stochastic
  modes and bit flips (random numbers in column-major order).
"""

from __future__ import annotations

import numpy as np

from ..spec import RoundingSpec
from ..random.sources import RandomSources
from ..rules.chop import chop_vector
from ..rules.cpfloat import (ROUND_MODES, apply_encoding, effective_format, flip_bits,
                                 limited_bit_sources, round_cpfloat)
from ..kernels import compiled, numpy_cpfloat, numpy_fast

__all__ = ["chop_array"]


def chop_array(x: np.ndarray, spec: RoundingSpec, sources: RandomSources, reference: bool = False) -> np.ndarray:
    """Round ``x`` (float32 or float64, any shape; never modified) by the extended ``spec``.

    ``reference=True`` uses the readable reference algorithms throughout (same bits).
    """
    if spec.random_bits:
        sources = limited_bit_sources(sources, spec.random_bits)
    if spec.range_rules == "chop":
        return _chop_rules(x, spec, sources, reference)
    if spec.range_rules == "cpfloat":
        return _cpfloat_rules(x, spec, sources, reference)
    raise ValueError(f"Unknown range_rules {spec.range_rules!r}; allowed: 'chop', 'cpfloat'.")


def _chop_rules(x, spec: RoundingSpec, sources, reference: bool) -> np.ndarray:
    if not 1 <= spec.round <= 6:
        raise ValueError(f"Rounding mode {spec.round} needs range_rules='cpfloat' (chop's rules know modes 1-6).")
    if spec.flip_scope != "fraction":
        raise ValueError("Flips of any encoding bit need range_rules='cpfloat'.")
    fmt = spec.fmt

    def encode(c: np.ndarray, xs: np.ndarray) -> None:
        with np.errstate(invalid="ignore"):
            apply_encoding(c, xs, fmt, spec.round, spec.saturation, spec.infinity, spec.flips)

    if not spec.limits_exponent:  # explim = 0 ignores the format's range and its encoding
        encode = None
    if reference:
        out = chop_vector(x.ravel(order="F"), spec, sources).reshape(x.shape, order="F")
    elif encode is not None and fmt.encoding != "e8m0":
        # The encoding changes only Inf, -0 and (with flips) results beyond xmax, which the
        # fast engine's regular elements never give: it is applied to its special elements.
        return numpy_fast.chop_array(x, spec, sources, finish_special=encode)
    else:
        out = numpy_fast.chop_array(x, spec, sources)
    if encode is not None:
        encode(out, x)
    return out


def _cpfloat_rules(x, spec: RoundingSpec, sources, reference: bool) -> np.ndarray:
    mode = spec.round
    random = mode in (5, 6) or spec.flips
    if not reference and not random and x.dtype in (np.float32, np.float64):
        if compiled.wanted():  # Numba is imported here, on first use
            from ..kernels import numba_cpfloat

            if numba_cpfloat.handles(x, spec):
                return numba_cpfloat.round_array(x, spec)
        return numpy_cpfloat.round_array(x, spec)
    xf = x.ravel(order="F")
    c = round_cpfloat(xf, spec.fmt, mode, spec.keeps_subnormals, spec.limits_exponent,
                      spec.saturation, spec.infinity, sources)
    if spec.flips and mode in ROUND_MODES:
        c = flip_bits(c, effective_format(spec.fmt, x.dtype, spec.limits_exponent), spec.flip_scope,
                      spec.p, sources)
    return c.reshape(x.shape, order="F")
