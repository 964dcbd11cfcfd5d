"""A JAX engine for chop's deterministic rounding (modes 1 to 4, no bit flips), traceable by ``jit``.

The algorithm is the reference one (:mod:`pychop_compat.reference`) written
with ``jax.numpy``: ``x = 2^e * 1.f`` (``frexp``), the quantum is
``2^(e - t + 1)``, or ``2^emins`` in chop's subnormal range when the
exponent is limited; the value is scaled by ``ldexp`` (exact), rounded to an
integer by the mode, scaled back, and chop's overflow and underflow rules are
applied with ``where``.  Every step is exact or a single rounding to an
integer, so the result is bit for bit the NumPy engine's (tested), on float32
and (with ``jax_enable_x64``) float64 arrays.

Stochastic rounding and bit flips need chop's random numbers (MATLAB's
stream, in column-major order), which a traced function cannot draw: they
raise ``NotImplementedError``.  jax is imported only by the functions here.
"""

from __future__ import annotations

from typing import Any

from ..options import ChopSpec

__all__ = ["chop_jax", "supports"]


def supports(spec: ChopSpec) -> bool:
    """Whether :func:`chop_jax` implements ``spec`` (deterministic, no flips, chop.m semantics)."""
    return spec.round <= 4 and not spec.flips and not getattr(spec, "extended", False)


def chop_jax(x: Any, spec: ChopSpec) -> Any:
    """Round the JAX array ``x`` (float32 or float64) by ``spec``; same dtype and shape.

    Raises
    ------
    NotImplementedError
        For stochastic rounding, bit flips or extended specs.
    """
    import jax.numpy as jnp
    import numpy as np

    if not supports(spec):
        raise NotImplementedError("the JAX engine implements rounding modes 1 to 4 without bit flips; "
                                  f"got round={spec.round}, flip={spec.flip}.")
    fmt = spec.fmt
    t, emin, emins = fmt.t, fmt.emin, fmt.emins
    _, e = jnp.frexp(jnp.abs(x))
    e = e - 1  # x = 2^e * 1.f
    quantum = e - (t - 1)
    if spec.limits_exponent:
        quantum = jnp.where((e < emin) & (e >= emins), emins, quantum)
    scaled = jnp.ldexp(x, -quantum)
    mode = spec.round
    if mode == 1:
        rounded = jnp.round(scaled)  # half to even
    elif mode == 2:
        rounded = jnp.ceil(scaled)
    elif mode == 3:
        rounded = jnp.floor(scaled)
    else:
        rounded = jnp.trunc(scaled)
    c = jnp.where(jnp.isfinite(x), jnp.ldexp(rounded, quantum), x)
    if spec.limits_exponent:
        with np.errstate(over="ignore"):  # format limits beyond float32's range become inf constants
            c = _limits(c, x, spec)
    return c.astype(x.dtype)


def _limits(c, x, spec: ChopSpec):
    """:func:`pychop_compat.reference.apply_range_limits` with ``where``."""
    import jax.numpy as jnp

    fmt, mode, inf = spec.fmt, spec.round, jnp.inf
    xmax, xb = fmt.xmax, fmt.xboundary
    if mode == 1:
        c = jnp.where(x >= xb, inf, jnp.where(x <= -xb, -inf, c))
    elif mode == 2:
        c = jnp.where(x > xmax, inf, jnp.where((x < -xmax) & (x != -inf), -xmax, c))
    elif mode == 3:
        c = jnp.where((x > xmax) & (x != inf), xmax, jnp.where(x < -xmax, -inf, c))
    else:
        c = jnp.where((x > xmax) & (x != inf), xmax, jnp.where((x < -xmax) & (x != -inf), -xmax, c))
    min_rep = fmt.xmins if spec.keeps_subnormals else fmt.xmin
    magnitude = jnp.abs(c)
    small = magnitude < min_rep
    if mode == 1:
        half = min_rep / 2
        to_min = small & ((magnitude > half) if spec.keeps_subnormals else (magnitude >= half))
        return jnp.where(to_min, jnp.sign(c) * min_rep, jnp.where(small, 0.0, c))
    if mode == 2:
        return jnp.where(small & (c > 0), min_rep, jnp.where(small, 0.0, c))
    if mode == 3:
        return jnp.where(small & (c < 0), -min_rep, jnp.where(small, 0.0, c))
    return jnp.where(small, 0.0, c)
