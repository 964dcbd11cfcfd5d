"""Bit-pattern engine for CPFloat's deterministic modes (filled in below)."""

from __future__ import annotations

import numpy as np

from ..options import ChopSpec
from ..randomness import MATLAB_STREAM
from ..rounding.extended import round_cpfloat

__all__ = ["round_array"]


def round_array(x: np.ndarray, spec: ChopSpec) -> np.ndarray:
    """CPFloat's rounding of ``x`` by ``spec`` (deterministic modes), a new array of x's shape."""
    xf = x.reshape(-1)
    c = round_cpfloat(xf, spec.fmt, spec.round, spec.keeps_subnormals, spec.limits_exponent,
                      spec.saturation, spec.infinity, MATLAB_STREAM)
    return c.reshape(x.shape)
