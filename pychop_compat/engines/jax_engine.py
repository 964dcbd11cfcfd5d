"""The JAX adapter: what chop needs to know about ``jax.Array``, and no rounding.

Imported only when a JAX array reaches the router (jax is found through
``sys.modules``).  It supplies JAX's side of a call: dtypes (float16/bfloat16
computed in single; integers as float64, which needs ``jax_enable_x64``),
execution (traced inside the user's ``jit``/``vmap``; eager calls op by op, then
one compiled function per spec), the host round trip, and the numbers of
``chop_jax(..., key=k)`` (:func:`key_numbers`).  ``docs/engines.rst`` says the
rest (subnormals on GPUs included).  ``jax_engine.chop_jax`` is a deprecated
alias of :func:`pychop_compat.chop_jax` (one release).
"""

from __future__ import annotations

import sys
from typing import Any, Callable

import numpy as np

from .. import _moved
from ..kernels.xp import exact_float32, exact_float64, library_namespace

__all__ = ["working_array", "x64_enabled", "is_traced", "run", "key_numbers", "to_host", "from_host",
           "widen_float32", "narrow_to_float32"]

__getattr__ = _moved.attribute_getter(__name__)


def _jax() -> Any:
    return sys.modules.get("jax") or __import__("jax")


def x64_enabled() -> bool:
    """True when JAX has 64-bit types (``jax_enable_x64``)."""
    return bool(_jax().config.read("jax_enable_x64"))


def is_traced(x: Any) -> bool:
    """Whether ``x`` is a tracer (inside ``jax.jit``, ``jax.vmap``, ...)."""
    return isinstance(x, _jax().core.Tracer)


def working_array(x: Any) -> tuple:
    """``(array to compute on, dtype to give back or None)``: float32/float64 (chop's classes).

    Raises
    ------
    TypeError
        Integer input without 64-bit types, or an unsupported dtype.
    """
    jnp = _jax().numpy
    name = str(x.dtype)
    if name in ("float32", "float64"):
        return x, None
    if name in ("float16", "bfloat16"):
        return x.astype(jnp.float32), x.dtype
    if jnp.issubdtype(x.dtype, jnp.integer) or x.dtype == jnp.bool_:
        if not x64_enabled():
            raise TypeError("chop rounds integer input as float64 (MATLAB's double), which JAX has only with "
                            "jax.config.update('jax_enable_x64', True); or pass x.astype(jnp.float32).")
        return x.astype(jnp.float64), None
    raise TypeError(f"chop supports float64, float32, float16 and bfloat16 JAX arrays (and integers), not {x.dtype}.")


def widen_float32(x: Any) -> Any:
    """``x`` (float32) as float64, exactly: XLA's conversion flushes float32 subnormals to zero,
    so they are rebuilt from their bits (:func:`~pychop_compat.kernels.xp.exact_float64`)."""
    return exact_float64(library_namespace("jax"), x)


def narrow_to_float32(w: Any) -> Any:
    """``w`` (float64 holding float32 numbers) as float32, exactly: numbers below float32's normal
    range are written as subnormal bit patterns (XLA's conversion would flush them to zero; see
    :func:`~pychop_compat.kernels.xp.exact_float32`)."""
    return exact_float32(library_namespace("jax"), w)


#: Eager calls with a key seen this many times (or on large arrays) use a compiled function.
_COMPILE_AFTER, _COMPILE_SIZE = 2, 1 << 16
_uses: dict = {}
_jitted: dict = {}


def run(function: Callable[..., Any], key: Any, work: Any, *arrays: Any) -> Any:
    """``function(work, *arrays)``, a pure function of JAX arrays (``None`` allowed among
    ``arrays``): traced as it is inside the caller's transformation; eagerly op by op for the
    first calls of ``key`` on small arrays, then through ``jax.jit`` (one compiled function per
    ``key``, which must determine ``function``)."""
    if is_traced(work) or any(is_traced(a) for a in arrays if a is not None):
        return function(work, *arrays)
    uses = _uses.get(key, 0)
    if uses < _COMPILE_AFTER and work.size < _COMPILE_SIZE:
        if len(_uses) > 4096:
            _uses.clear()
        _uses[key] = uses + 1
        return function(work, *arrays)
    compiled = _jitted.get(key)
    if compiled is None:
        if len(_jitted) > 256:
            _jitted.clear()
        compiled = _jitted[key] = _jax().jit(function)
    return compiled(work, *arrays)


def key_numbers(key: Any, shape: tuple, stochastic: bool, flips: bool) -> tuple:
    """``(u_round, u_choice, u_bit)`` from a ``jax.random`` key (None where not needed): float64
    with 64-bit types, else float32."""
    jax = _jax()
    dtype = jax.numpy.float64 if x64_enabled() else jax.numpy.float32
    return tuple(jax.random.uniform(jax.random.fold_in(key, s), shape, dtype) if wanted else None
                 for s, wanted in ((1, stochastic), (2, flips), (3, flips)))


def to_host(x: Any) -> np.ndarray:
    """A copy of the array in host memory.

    Raises
    ------
    TypeError
        Inside ``jax.jit``/``vmap``: traced values have no host copy.
    """
    if is_traced(x):
        raise TypeError(
            "chop inside jax.jit/vmap cannot draw from MATLAB's stream, a randfunc or a NumPy generator "
            "(they live on the host); pass the numbers explicitly: "
            "pychop_compat.chop_jax(x, options, key=jax_key) or seed=<int>.")
    return np.array(x)


def from_host(array: np.ndarray, like: Any) -> Any:
    """A NumPy result put where ``like`` lives, with its sharding."""
    return _jax().device_put(array, getattr(like, "sharding", None))
