"""The JAX engine: chop on ``jax.Array`` (CPU, GPU), inside and outside ``jax.jit`` and ``jax.vmap``.

Imported only when a JAX array reaches :func:`pychop_compat.chop` (jax is found
through ``sys.modules``, never imported by ``import pychop_compat``).

* JAX arrays in, JAX arrays out: same shape, dtype (float16/bfloat16 are
  computed in single and cast back; integers and bool give float64), device and
  sharding.
* Formats: chop's, and chop's rules on the signed formats of the catalogue
  (``'float8_e4m3fn'``, ``'float4_e2m1fn'``, the ``fnuz`` formats, ...; their
  encoding applied on bit patterns); CPFloat's rules (the ``cpfloat`` facade,
  ``round_to_format``) in its deterministic modes by
  :func:`.elementwise_cpfloat.round_cpfloat_elementwise`, integer operations on
  bit patterns; other extended specs (E8M0 under chop's rules, bit flips and
  stochastic rounding under CPFloat's rules, whose numbers follow
  column-major order) go through the host as below.
* Deterministic modes (1 to 4) and the random modes with numbers made by JAX
  run :func:`.elementwise.chop_elementwise`: pure elementwise ``jax.numpy``
  operations on bit patterns, no Python branch on data, so they trace under
  ``jax.jit``/``jax.vmap`` and equal the NumPy engine bit for bit.
* Random numbers, three ways:

  - ``chop_jax(x, options, key=key)``: a ``jax.random`` key; element ``i``
    (row-major) gets ``jax.random.uniform(fold_in(key, s))[i]`` for the
    streams ``s`` = 1 (stochastic rounding), 2 (which elements flip), 3 (which
    bit).  Pure: works under ``jit``, the same key gives the same result.
  - ``chop_jax(x, options, seed=seed, offset=offset)``: the package's
    counter-based generator (:mod:`pychop_compat.random.counter`): element ``i`` gets
    ``u_s(offset + i)``, the numbers that ``Chop(options, rng=seed)`` gives
    the NumPy engine on its first call (``offset=0``), bit for bit.  ``offset``
    may be traced.  Needs ``jax_enable_x64`` (64-bit integer arithmetic).
  - ``chop(x)``/``Chop(...)(x)`` on a concrete array: the facade's sources
    (MATLAB's stream in chop.m's order, ``randfunc``, a NumPy Generator, or
    ``Chop(rng=<int>)``'s counter): the array is copied to the host, rounded by
    the NumPy engine and put back on its device with its sharding (exactly
    chop.m's numbers; a host round trip).  Inside ``jit`` the values are
    traced, so this raises a ``TypeError`` that points to ``key=``.

* Precision: JAX uses float32 unless ``jax.config.update("jax_enable_x64",
  True)``.  Without it there are no float64 arrays (so integer input cannot be
  rounded as MATLAB's double: ``TypeError``) and the ``key`` numbers are float32.
* Subnormals: XLA on the CPU keeps subnormal numbers (tested); GPUs may flush
  float32 subnormals in some fused kernels, which would change results in
  chop's subnormal range: run ``validate --engines jax`` on the device.
"""

from __future__ import annotations

import functools
import sys
from typing import Any, Optional

import numpy as np

from ..matlab.options import resolve
from ..spec import RoundingSpec
from ..random.sources import RandomSources
from ..kernels.device_plan import elementwise_covers
from ..kernels.elementwise import Namespace, chop_elementwise
from ..random.counter import stream_keys, uniform
from ..kernels.elementwise_cpfloat import cpfloat_covers, round_cpfloat_elementwise

__all__ = ["chop_jax", "chop_jax_array", "supports", "x64_enabled"]

_SINGLE_NAMES = ("float32", "float16", "bfloat16")


def _jax():
    return sys.modules.get("jax") or __import__("jax")


def supports(spec: RoundingSpec) -> bool:
    """Whether :func:`chop_jax` rounds ``spec`` without random numbers, on the device and under
    ``jit``: rounding modes 1 to 4, no bit flips, chop.m's semantics or chop's rules on a signed
    format of the catalogue (:func:`.device_plan.elementwise_covers`: the OCP/ML formats); or
    CPFloat's rules in a deterministic mode (:func:`.elementwise_cpfloat.cpfloat_covers`)."""
    return (spec.round <= 4 and not spec.flips and elementwise_covers(spec)) or cpfloat_covers(spec)


def x64_enabled() -> bool:
    """True when JAX has 64-bit types (``jax_enable_x64``)."""
    return bool(_jax().config.read("jax_enable_x64"))


def _namespace() -> Namespace:
    jax = _jax()
    return Namespace(jax.numpy, jax.lax.bitcast_convert_type, wide=x64_enabled())


def _is_traced(x) -> bool:
    return isinstance(x, _jax().core.Tracer)


def _working(x):
    """``(array, dtype to give back)``: float32/float64 to compute on (chop's classes)."""
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


#: Eager calls with a spec seen this many times (or on large arrays) use a compiled function.
_COMPILE_AFTER, _COMPILE_SIZE = 2, 1 << 16
_uses: dict = {}


def _rounding(namespace: Namespace, work, spec: RoundingSpec, u_round=None, u_choice=None, u_bit=None):
    """The elementwise rounding of ``spec``: CPFloat's rules or chop's."""
    if cpfloat_covers(spec):
        return round_cpfloat_elementwise(namespace, work, spec)
    return chop_elementwise(namespace, work, spec, u_round, u_choice, u_bit)


def _elementwise(work, spec: RoundingSpec, numbers=(None, None, None)):
    # Traced (inside the user's jit/vmap): the operations join the user's computation.  Eager:
    # op by op for a spec's first calls on small arrays (no compilation), then one compiled
    # function per spec, which costs one dispatch instead of ~80 (loops of small calls, big arrays).
    key = (spec, x64_enabled())
    if _is_traced(work) or any(_is_traced(u) for u in numbers if u is not None):
        return _rounding(_namespace(), work, spec, *numbers)
    uses = _uses.get(key, 0)
    if uses < _COMPILE_AFTER and work.size < _COMPILE_SIZE:
        if len(_uses) > 4096:
            _uses.clear()
        _uses[key] = uses + 1
        return _rounding(_namespace(), work, spec, *numbers)
    return _compiled(*key)(work, *numbers)


@functools.lru_cache(maxsize=256)
def _compiled(spec: RoundingSpec, wide: bool):
    jax = _jax()
    namespace = Namespace(jax.numpy, jax.lax.bitcast_convert_type, wide=wide)
    return jax.jit(lambda work, u_round, u_choice, u_bit: _rounding(namespace, work, spec, u_round, u_choice,
                                                                      u_bit))


def _fits_32_bits(spec: RoundingSpec) -> bool:
    """Without x64 the integers of :func:`chop_elementwise` are int32: enough for t <= 24.
    CPFloat's rules work on the storage's own bit patterns (float32: int32)."""
    return x64_enabled() or spec.fmt.t <= 24 or cpfloat_covers(spec)


def _key_numbers(key, shape, spec: RoundingSpec):
    jax = _jax()
    dtype = jax.numpy.float64 if x64_enabled() else jax.numpy.float32
    return tuple(jax.random.uniform(jax.random.fold_in(key, s), shape, dtype) if wanted else None
                 for s, wanted in ((1, spec.stochastic), (2, spec.flips), (3, spec.flips)))


def _counter_numbers(keys, offset, shape):
    if not x64_enabled():
        raise TypeError("the counter-based generator on JAX arrays needs 64-bit integers: "
                        "jax.config.update('jax_enable_x64', True).")
    jnp = _jax().numpy
    index = jnp.arange(int(np.prod(shape, dtype=np.int64)), dtype=jnp.int64).reshape(shape)
    return tuple(uniform(jnp, key, offset, index) for key in keys)


def _on_host(x, work, spec: RoundingSpec, sources: RandomSources):
    """The NumPy engine on a copy of ``work``, put back where ``x`` lives."""
    if _is_traced(work):
        raise TypeError(
            "chop inside jax.jit/vmap cannot draw from MATLAB's stream, a randfunc or a NumPy generator "
            "(they live on the host); pass the numbers explicitly: "
            "pychop_compat.engines.jax_engine.chop_jax(x, options, key=jax_key) or seed=<int>.")
    from .numpy_engine import chop_array

    host = np.array(work)  # a copy on the host
    with np.errstate(over="ignore", invalid="ignore"):
        out = chop_array(host, spec, sources) if host.size or spec.flips else host
    sharding = getattr(x, "sharding", None)
    return _jax().device_put(out, sharding)


def _extended(spec: RoundingSpec) -> bool:
    """Whether ``spec`` needs the NumPy engine (beyond what the elementwise rounding covers)."""
    return not (elementwise_covers(spec) or cpfloat_covers(spec))


def chop_jax_array(x: Any, spec: RoundingSpec, sources: RandomSources) -> Any:
    """Round the JAX array ``x`` by ``spec`` (the engine behind :func:`pychop_compat.chop`).

    Deterministic modes run on the device (and trace under ``jit``); the random
    modes draw from ``sources`` as the NumPy engine does, on the host (see the
    module notes), except ``Chop(rng=<int>)``'s counter, computed on the device
    when 64-bit types are on.
    """
    work, give_back = _working(x)
    counter = getattr(sources, "counter", None)
    if _extended(spec) or not _fits_32_bits(spec) or (
            spec.draws and (counter is None or not x64_enabled())):
        out = _on_host(x, work, spec, sources)
    elif spec.draws:
        if _is_traced(work):
            raise TypeError("Chop(rng=<int>) counts its calls in Python, which jax.jit would freeze; "
                            "inside jit use chop_jax(x, options, seed=seed, offset=offset) or key=.")
        stream = counter.take(work.size)
        out = _elementwise(work, spec, _counter_numbers(stream.keys, stream.offset, work.shape))
    else:
        out = _elementwise(work, spec)
    return out.astype(give_back) if give_back is not None else out


def chop_jax(x: Any, options: Any = None, *, key: Any = None, seed: Optional[int] = None, offset: Any = 0) -> Any:
    """Round a JAX array, stateless and traceable: ``jax.jit``/``jax.vmap`` friendly.

    Parameters
    ----------
    x : jax.Array
        Real values (float64, float32, float16, bfloat16; integers with x64).
    options : dict, Options, object with attributes, Chop or RoundingSpec, optional
        chop's options (MATLAB names); the defaults when omitted; or a
        resolved :class:`~pychop_compat.spec.RoundingSpec`, used as it is.  The
        persistent options of :func:`pychop_compat.chop` are neither read nor set.
    key : jax.random key, optional
        The numbers of stochastic rounding and bit flips: element ``i``
        (row-major) gets ``jax.random.uniform(jax.random.fold_in(key, s))[i]``,
        ``s = 1`` for rounding, ``2`` and ``3`` for flips.  Split the key
        between calls to get new numbers.
    seed, offset : int, optional
        Instead of ``key``: the counter-based generator of
        :mod:`pychop_compat.random.counter`, element ``i`` getting the
        numbers of counter ``offset + i`` (``offset`` may be traced).  Equal to
        ``Chop(options, rng=seed)`` on NumPy (first call: ``offset = 0``).

    Returns
    -------
    jax.Array
        Same shape, dtype (float64 for integers), device and sharding as ``x``.

    Raises
    ------
    ValueError
        Stochastic rounding or flips without ``key`` or ``seed``; both given;
        ``options.randfunc`` (host code; use :func:`pychop_compat.chop` outside jit).
    TypeError
        ``x`` is not a JAX array, or needs 64-bit types that are off.

    Examples
    --------
    >>> import jax, jax.numpy as jnp                      # doctest: +SKIP
    >>> f = jax.jit(lambda x, k: chop_jax(x, {'format': 'h', 'round': 5}, key=k))  # doctest: +SKIP
    >>> f(jnp.linspace(0, 1, 5), jax.random.key(0))        # doctest: +SKIP
    """
    jax = _jax()
    if not isinstance(x, jax.Array):
        raise TypeError(f"chop_jax needs a jax.Array, not {type(x).__name__}; use pychop_compat.chop for others.")
    if key is not None and seed is not None:
        raise ValueError("chop_jax: give key or seed, not both.")
    work, give_back = _working(x)
    if isinstance(options, RoundingSpec):
        spec = options
    else:
        x_class = "single" if str(x.dtype) in _SINGLE_NAMES else "double"
        options = getattr(options, "options", options)  # a Chop object: its resolved options
        settings = resolve(options if options is not None else {}, None, x_class)
        from ..random.matlab_stream import default_randfunc

        if settings.randfunc is not default_randfunc:
            raise ValueError("chop_jax does not call options.randfunc (host code); pass key= or seed=.")
        spec = settings.spec
    if _extended(spec):
        raise ValueError("chop_jax: this format or option is only supported by the NumPy engine "
                         "(pychop_compat.chop outside jit).")
    if not _fits_32_bits(spec):
        raise TypeError("chop_jax: a precision t > 24 needs 64-bit integers: "
                        "jax.config.update('jax_enable_x64', True).")
    numbers = (None, None, None)
    if spec.draws:
        if key is not None:
            numbers = _key_numbers(key, work.shape, spec)
        elif seed is not None:
            numbers = _counter_numbers(stream_keys(seed), offset, work.shape)
        else:
            raise ValueError("stochastic rounding (round = 5, 6) and bit flips need key=<jax.random key> "
                             "or seed=<int> in chop_jax.")
    out = _elementwise(work, spec, numbers)
    return out.astype(give_back) if give_back is not None else out
