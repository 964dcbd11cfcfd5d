"""Sums and products along an axis with every addition (multiplication) rounded.

The reductions ``pychop_compat.linalg.kernels`` lacks (a plain sum,
cumulative sum, product), in the orders of its inner products and with the
same sequence of rounding calls, so ``reduce(x, rnd, 'add', method=m)``
equals ``linalg.dot(x, ones, method=m)`` bit for bit.  ``fl`` is one call of
``rnd`` on a whole array (random numbers drawn call by call, column-major
inside a call); the reduction of ``x_1, ..., x_n``, for every position of
the other axes at once, is:

``'recursive'`` (and ``'fma'``: a sum has no product to fuse)
    ``s = fl(s op x_k)``, ``k = 2..n``: one call per ``k``, shaped like the result.
``'pairwise'``
    ``y_i = fl(x_{2i-1} op x_{2i})``, an odd last term carried, until one is
    left: one call per level, shaped ``(pairs, *result_shape)``.
``'blocked'``
    blocks of ``block_size`` terms reduced recursively, all blocks at once
    (one call per position ``j`` on the blocks having a ``j``-th term), then
    the block results recursively.

An empty reduction is the identity, a single term itself; ``axis=None`` and
tuples of axes reduce in row-major order.  NumPy and CuPy arrays share the
code: array creation goes through the data's namespace
(:mod:`pychop_compat.arithmetic.libraries`), so CuPy data stays on its device.
"""

from __future__ import annotations

import operator
from typing import Callable, Optional, Union

import numpy as np

from .libraries import device_namespace

__all__ = ["reduce", "accumulate"]

Rounder = Callable[[np.ndarray], np.ndarray]
ScalarRounder = Callable[[float], float]
Axis = Union[None, int, tuple[int, ...], list[int]]

_IDENTITY = {"add": 0.0, "multiply": 1.0}
_PYTHON_OP = {np.add: operator.add, np.multiply: operator.mul}  # IEEE double, like the ufunc


def _module(x):
    """``(array module, x as an array of it)``: NumPy for anything that is not a device array."""
    namespace = device_namespace(x)
    if namespace is None:
        return np, np.asarray(x)
    return namespace.xp, x


def _to_front(x: np.ndarray, axis: Axis, xp=np):
    """``(terms, result_shape_keepdims)``: the reduced axes flattened (C order) to the front."""
    if axis is None:
        axes = tuple(range(x.ndim))
    elif isinstance(axis, (tuple, list)):
        axes = tuple(int(a) for a in axis)
    elif x.ndim == 0 and int(axis) in (0, -1):  # (NumPy's sum and prod of a 0-d array take axis 0 and -1)
        axes = ()
    else:
        axes = (int(axis),)
    for a in axes:
        if not -x.ndim <= a < x.ndim:
            raise getattr(np, "exceptions", np).AxisError(a, x.ndim)  # (np.AxisError before NumPy 1.25)
    # (a set of axes, as NumPy reads it: the terms in row-major order whatever the order given)
    axes = tuple(sorted(a % max(x.ndim, 1) for a in axes))
    if len(set(axes)) != len(axes):
        raise ValueError("repeated axis")
    rest = tuple(a for a in range(x.ndim) if a not in axes)
    moved = xp.transpose(x, axes + rest)
    n = int(np.prod([x.shape[a] for a in axes], dtype=np.int64))
    terms = moved.reshape((n,) + tuple(x.shape[a] for a in rest))
    keep = tuple(1 if a in axes else x.shape[a] for a in range(x.ndim))
    return terms, keep


def _recursive(terms, ufunc, rnd, scalar_rnd):
    n = terms.shape[0]
    if terms.ndim == 1 and scalar_rnd is not None and terms.dtype == np.float64:
        values = terms.tolist()
        s, py_op = values[0], _PYTHON_OP[ufunc]
        for v in values[1:]:
            s = scalar_rnd(py_op(s, v))
        return np.array(s)
    s = terms[0].copy()
    for k in range(1, n):
        s = rnd(ufunc(s, terms[k]))
    return s


def _pairwise(terms, ufunc, rnd, xp=np):
    while terms.shape[0] > 1:
        h = terms.shape[0] // 2
        pairs = rnd(ufunc(terms[0 : 2 * h : 2], terms[1 : 2 * h : 2]))
        terms = xp.concatenate([pairs, terms[2 * h :]]) if terms.shape[0] % 2 else pairs
    return terms[0]


def _blocked(terms, ufunc, rnd, block_size, xp=np):
    n, b = terms.shape[0], int(block_size)
    blocks = -(-n // b)
    partial = None
    for j in range(min(b, n)):
        count = -(-(n - j) // b)  # the blocks having a j-th term: a prefix
        t = terms[j : j + (count - 1) * b + 1 : b]  # terms j, j + b, ..., of the first count blocks
        if j == 0:
            partial = t.copy()
        else:
            partial[:count] = rnd(ufunc(partial[:count], t))
    s = partial[0]
    for i in range(1, blocks):
        s = rnd(ufunc(s, partial[i]))
    return s


def reduce(x: np.ndarray, rnd: Rounder, op: str = "add", axis: Axis = None, *,
           method: str = "recursive", block_size: int = 32, keepdims: bool = False,
           scalar_rnd: Optional[ScalarRounder] = None, draws: bool = False) -> np.ndarray:
    """Sum or product of ``x`` along ``axis`` with every operation rounded by ``rnd``.

    Parameters
    ----------
    x : ndarray
        float32 or float64 terms (already in the format: they enter as they are).
    rnd : callable
        Rounds a float ndarray (one chop call).
    op : {'add', 'multiply'}
        The operation.
    axis : None, int or tuple of int
        Axes reduced (``None``: all, in row-major order).
    method : {'recursive', 'fma', 'pairwise', 'blocked'}
        Order of the operations (see the module notes).
    block_size : int
        Block size for ``'blocked'``.
    keepdims : bool
        Keep the reduced axes with length one.
    scalar_rnd : callable, optional
        Rounds one Python float exactly as ``rnd`` rounds a one-element array;
        used for the recursive reduction of a vector (same numbers, faster).
    draws : bool
        Whether ``rnd`` draws random numbers (stochastic rounding, bit flips).
        Then ``'pairwise'`` and ``'blocked'`` reduce one output element at a
        time, in row-major order, as :func:`pychop_compat.linalg.matmul` does
        column by column, so that the random numbers go to the same operations.

    Returns
    -------
    ndarray
        The reduction (0-d for a full reduction without ``keepdims``).
    """
    ufunc = getattr(np, op)
    xp, x = _module(x)
    if xp is not np:
        scalar_rnd = None  # (a Python float path would leave the device)
    terms, keep = _to_front(x, axis, xp)
    n = terms.shape[0]
    if n == 0:
        out = xp.full(terms.shape[1:], _IDENTITY[op], dtype=terms.dtype)
    elif n == 1:
        out = terms[0].copy()
    elif method in ("recursive", "fma"):
        out = _recursive(terms, ufunc, rnd, scalar_rnd)
    elif method in ("pairwise", "blocked"):
        if method == "blocked" and int(block_size) < 1:
            raise ValueError("block_size must be a positive integer")
        tree = (lambda t, f, r: _pairwise(t, f, r, xp)) if method == "pairwise" else (
            lambda t, f, r: _blocked(t, f, r, block_size, xp))
        if draws and terms[0].size > 1:
            flat = terms.reshape(n, -1)
            out = xp.empty(flat.shape[1], terms.dtype)
            for j in range(flat.shape[1]):
                out[j] = tree(flat[:, j:j + 1], ufunc, rnd)[0]
            out = out.reshape(terms.shape[1:])
        else:
            out = tree(terms, ufunc, rnd)
    else:
        raise ValueError(f"method must be 'recursive', 'fma', 'pairwise' or 'blocked', not {method!r}")
    out = xp.asarray(out, dtype=terms.dtype)
    return out.reshape(keep) if keepdims else out


def accumulate(x: np.ndarray, rnd: Rounder, op: str = "add", axis: Optional[int] = None, *,
               scalar_rnd: Optional[ScalarRounder] = None) -> np.ndarray:
    """Cumulative sum or product along ``axis``, recursive order, every operation rounded.

    ``c_1 = x_1``; ``c_k = fl(c_{k-1} op x_k)``: one call of ``rnd`` per ``k``
    on an array shaped like one slice.  ``axis=None`` works on ``x`` flattened
    in row-major order, as :func:`numpy.cumsum` does.
    """
    ufunc = getattr(np, op)
    xp, x = _module(x)
    if xp is not np:
        scalar_rnd = None
    if axis is None:
        x, axis = x.ravel(), 0
    elif x.ndim == 0:  # (as NumPy: a 0-d array accumulates as one element)
        x = x.reshape(1)
    if not -x.ndim <= int(axis) < x.ndim:
        raise getattr(np, "exceptions", np).AxisError(int(axis), x.ndim)
    axis = int(axis) % x.ndim
    terms = xp.moveaxis(x, axis, 0)
    out = xp.empty(terms.shape, dtype=terms.dtype)
    n = terms.shape[0]
    if n:
        if terms.ndim == 1 and scalar_rnd is not None and terms.dtype == np.float64:
            values = terms.tolist()
            s, py_op = values[0], _PYTHON_OP[ufunc]
            sums = [s]
            for v in values[1:]:
                s = scalar_rnd(py_op(s, v))
                sums.append(s)
            out[:] = sums
        else:
            out[0] = terms[0]
            for k in range(1, n):
                out[k] = rnd(ufunc(out[k - 1], terms[k]))
    return xp.moveaxis(out, 0, axis)
