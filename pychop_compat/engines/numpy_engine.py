"""The NumPy engine: float32/float64 ndarrays on the CPU."""

from __future__ import annotations

import numpy as np

from ..options import ChopSpec
from ..randomness import RandomSources
from ..reference import chop_vector, roundit_vector


def _in_matlab_order(x: np.ndarray) -> np.ndarray:
    return x.ravel(order="F")


def _from_matlab_order(v: np.ndarray, shape) -> np.ndarray:
    return v.reshape(shape, order="F")


def chop_array(x: np.ndarray, spec: ChopSpec, sources: RandomSources) -> np.ndarray:
    """Round ``x`` (float32 or float64, any shape) by ``spec``; a new array of the same shape."""
    return _from_matlab_order(chop_vector(_in_matlab_order(x), spec, sources), x.shape)


def roundit_array(x: np.ndarray, mode: int, sources: RandomSources, flip: bool, p: float, t: int) -> np.ndarray:
    """roundit.m on an array of any shape (random numbers assigned in column-major order)."""
    y = roundit_vector(_in_matlab_order(x), mode, sources, flip, p, t)
    return _from_matlab_order(y, x.shape)
