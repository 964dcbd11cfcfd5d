"""Bit-for-bit comparison of arrays from any engine: the one helper every test uses.

``assert_bits_equal(actual, expected)`` takes NumPy arrays and scalars, torch tensors on any
device (bfloat16 included), CuPy arrays and JAX arrays, on either side: each is copied to
the host as it is (no conversion of its values), then the dtypes, the shapes and every
element's bit pattern are compared.  ``same_bits`` is the elementwise form (a boolean NumPy
array), for tests that count or locate differences, or assert that two results differ.

NaN: by default any NaN equals any NaN (NaN payloads and signs are not compared: MATLAB's
isequal ignores them too, and the engines need not agree on them); ``nan_payloads=True``
compares NaNs bit for bit as well.  Zeros are compared by their bits: -0 and +0 differ.
"""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["to_host", "same_bits", "assert_bits_equal"]


def to_host(a: Any) -> np.ndarray:
    """A NumPy array with the values (and the dtype) of ``a``, wherever ``a`` lives."""
    module = type(a).__module__.split(".")[0]
    if module == "torch":
        import torch

        t = a.detach().cpu()
        if t.dtype == torch.bfloat16:  # no NumPy dtype: its bits, read as ml_dtypes' bfloat16
            import ml_dtypes

            return t.contiguous().view(torch.int16).numpy().view(ml_dtypes.bfloat16)
        return t.numpy()
    if module == "cupy":
        return a.get()
    return np.asarray(a)  # NumPy arrays and scalars, JAX arrays (copied to the host), lists


def _bits(a: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(a).view(f"u{a.dtype.itemsize}") if a.dtype.itemsize else a


def _nan(a: np.ndarray) -> np.ndarray:
    if a.dtype.kind in "biu":
        return np.zeros(a.shape, dtype=bool)
    if a.dtype.kind in "fc":
        return np.isnan(a)
    with np.errstate(invalid="ignore"):  # bfloat16 and the other ml_dtypes formats, through float64
        return np.isnan(a.astype(np.float64))


def same_bits(actual: Any, expected: Any, *, nan_payloads: bool = False) -> np.ndarray:
    """Elementwise (shapes broadcast as NumPy's): the same bit pattern, or (unless
    ``nan_payloads``) NaN in both.  The arrays must have the same dtype."""
    a, e = to_host(actual), to_host(expected)
    assert a.dtype == e.dtype, f"dtype {a.dtype} != {e.dtype}"
    equal = _bits(a) == _bits(e)
    if nan_payloads:
        return equal
    nan_a, nan_e = _nan(a), _nan(e)
    return (nan_a & nan_e) | (~nan_a & ~nan_e & equal)


def assert_bits_equal(actual: Any, expected: Any, context: str = "", *, nan_payloads: bool = False) -> None:
    """Same dtype and shape, and every element the same bit pattern (so -0 and +0 differ);
    NaN in the same places (their payloads compared only if ``nan_payloads``).  Either side may
    be a NumPy, torch (any device), CuPy or JAX array; the message lists the first differences."""
    a, e = to_host(actual), to_host(expected)
    assert a.dtype == e.dtype, f"{context}: dtype {a.dtype} != {e.dtype}"
    assert a.shape == e.shape, f"{context}: shape {a.shape} != {e.shape}"
    a, e = a.ravel(order="F"), e.ravel(order="F")
    differ = ~same_bits(a, e, nan_payloads=nan_payloads)
    if differ.any():
        bad = np.flatnonzero(differ)
        sample = ", ".join(f"[{i}] got {a[i]!r} want {e[i]!r}" for i in bad[:5])
        raise AssertionError(f"{context}: {bad.size} of {a.size} elements differ: {sample}")
