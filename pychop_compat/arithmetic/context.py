"""The simulated machine of a chopped array: format and rounding, operand rules, reduction order.

An :class:`Arithmetic` is immutable.  It holds the chop options (anything
:class:`pychop_compat.Chop` accepts, resolved once), how plain operands enter
an operation (``strict``), what to do when two chopped operands of different
formats meet (``mismatch``) and the order of sums and products
(``method``, ``block_size``).  Chopped arrays and scalars carry one and ask it
to round.
"""

from __future__ import annotations

import dataclasses
import math
import numbers
from typing import TYPE_CHECKING, Any, Callable, Mapping, Optional, Union

import numpy as np
from numpy.typing import ArrayLike, DTypeLike

from ..hardware import PRESETS as HARDWARE_PRESETS, BlockFMA
from ..kernels import numpy_fast
from ..matlab.api import Chop, chop_options
from ..matlab.options import resolve
from ..random.counter import CounterRng, counter_uniform
from ..random.matlab_stream import stream_uniform, stream_uniform_one
from ..random.sources import MATLAB_STREAM, RandomSources, generator_sources, sources_for
from ..spec import RoundingSpec
from .libraries import host_rounder, is_device_array, round_array

if TYPE_CHECKING:
    from ..engines.dispatch import PreparedRounding

__all__ = ["Arithmetic", "FormatMismatchError", "NotChoppedError", "METHODS", "MISMATCH_RULES"]

#: Orders of sums and products (those of :func:`pychop_compat.linalg.matmul`).
METHODS = ("recursive", "pairwise", "blocked", "fma")
#: What to do when two chopped operands have different arithmetics.
MISMATCH_RULES = ("error", "left", "wider")


#: What :class:`pychop_compat.Chop` accepts as options: None, a format name, a dict, an
#: :class:`~pychop_compat.Options` or any object with option attributes (hence ``Any``).
OptionsLike = Union[None, str, Mapping[str, Any], Any]


class FormatMismatchError(ValueError):
    """Two chopped operands of one operation have different formats or rounding."""


class NotChoppedError(NotImplementedError):
    """A function that chopped values do not implement with per-operation rounding."""


def _given_options(options, kwargs) -> dict:
    """The complete option dict (every field filled in) for what the caller passed."""
    if options is None and not kwargs:
        options = chop_options()  # the persistent chop options, as linalg reads them
    elif isinstance(options, str):
        options = {"format": options}
    filled = Chop(options, **kwargs).options  # validates, as chop would
    given = dataclasses.asdict(filled)
    given["params"] = list(given["params"])  # (filled in: a list of two ints)
    return given


def _refuse_wide(arr: Any) -> None:
    """A TypeError for np.longdouble data: float64 first, then the format, would be two roundings
    (chop refuses it too)."""
    if arr.dtype.kind == "f" and arr.dtype.itemsize > 8:
        raise TypeError(f"chopped arrays take float64, float32 and float16 data (and integers), not "
                        f"{arr.dtype}; convert it explicitly (e.g. x.astype(numpy.float64)), which rounds it.")


class Arithmetic:
    """How a chopped array computes: a format and rounding, and the rules around them.

    Parameters
    ----------
    options : chop options, str or None, optional
        Anything :class:`pychop_compat.Chop` accepts (a dict, an
        :class:`~pychop_compat.Options`, an object with attributes) or a format
        name such as ``'h'``.  ``None`` (and no keywords): the persistent chop
        options as they are now.
    strict : bool, optional
        ``False`` (default): a plain operand (NumPy array, Python number) enters
        an operation exactly, as in hand-written ``chop(a + b)``.  ``True``: it is
        first rounded to the format, as a machine that stores it would do
        (``chop(a + chop(b))``).
    mismatch : {'error', 'left', 'wider'}, optional
        Two chopped operands with different arithmetics: raise
        :class:`FormatMismatchError` naming both (default); compute in the
        arithmetic of the first chopped operand (``'left'``); or in the wider
        one, whose precision and exponent range are both at least the other's
        (``'wider'``; an error if neither is).
    method : {'recursive', 'pairwise', 'blocked', 'fma'}, optional
        Order of sums and products in reductions and matrix products (see
        :func:`pychop_compat.linalg.matmul`).  Default ``'recursive'``.
    block_size : int, optional
        Block size for ``method='blocked'`` (default 32).
    hardware : str or hardware.BlockFMA, optional
        Matrix products (``@``, ``np.matmul``, ``np.dot``, ``np.vdot``,
        ``np.inner``, two-operand ``np.einsum``) computed
        as the matrix units of a GPU do: ``hardware=`` of
        :func:`pychop_compat.linalg.matmul` (a GPU name such as ``'H100'``, its
        model for inputs in this format and fp32 output, or a
        :class:`~pychop_compat.hardware.BlockFMA`).  ``method`` then orders the
        other reductions only; every other operation rounds as before.  Needs
        round to nearest without bit flips.
    rng : int, numpy.random.Generator or CounterRng, optional
        ``None`` (default): stochastic rounding and bit flips draw as
        :func:`pychop_compat.chop` does (MATLAB's stream on the host, or
        ``options.randfunc``).  An integer seed in ``[0, 2**64)`` (``ValueError``
        otherwise): the counter-based generator of
        ``Chop(options, rng=seed)`` (:mod:`pychop_compat.random.counter`):
        every rounding call of this arithmetic takes the next counters, element
        ``i`` of a call (row-major) getting ``u(offset + i)``, the same numbers on
        NumPy and JAX (see :doc:`/arithmetic`).  A
        :class:`numpy.random.Generator` (or a ``SeedSequence``): each rounding
        rounds as ``Chop(options, rng=generator)`` does, drawing from it in
        chop.m's order.  A :class:`~pychop_compat.random.counter.CounterRng`:
        that counter, shared (what :meth:`with_settings` passes on).  Matrix
        products and ``np.linalg.solve`` (computed by :mod:`pychop_compat.linalg`,
        which draws as ``chop`` does) refuse a drawing arithmetic with an
        ``rng`` (:class:`~pychop_compat.arithmetic.NotChoppedError`).
    **kwargs
        Options by name, merged over ``options`` (``format='b', round=5``).
    """

    __slots__ = ("given", "chop", "strict", "mismatch", "method", "block_size", "hardware",
                 "_specs", "_host_rounders", "_sources", "round_scalar", "_key", "_rng")

    def __init__(self, options: OptionsLike = None, *, strict: bool = False, mismatch: str = "error",
                 method: str = "recursive", block_size: int = 32, rng: Any = None,
                 hardware: Union[None, str, BlockFMA] = None, **kwargs: Any) -> None:
        if mismatch not in MISMATCH_RULES:
            raise ValueError(f"mismatch must be one of {MISMATCH_RULES}, not {mismatch!r}.")
        if method not in METHODS:
            raise ValueError(f"method must be one of {METHODS}, not {method!r}.")
        rng = _rng_of(rng)
        if int(block_size) != block_size or block_size < 1:
            raise ValueError(f"block_size must be a positive integer, not {block_size!r}.")
        self.given = _given_options(options, kwargs)
        self.chop = Chop(self.given)
        self.strict = bool(strict)
        self.mismatch = mismatch
        self.method = method
        self.block_size = int(block_size)
        settings = resolve(self.given, None, "double")
        spec = settings.spec
        self.hardware = _hardware_of(hardware, spec.draws or int(self.given["round"]) != 1)
        self._specs: dict[np.dtype, RoundingSpec] = {np.dtype(np.float64): spec}
        self._host_rounders: dict[np.dtype, PreparedRounding] = {}
        self._rng = rng
        if isinstance(rng, CounterRng):
            flips = RandomSources(rng.stochastic, rng.flip_uniform, rng.flip_randi, rng)
        else:
            flips = MATLAB_STREAM if rng is None else generator_sources(rng)
        self._sources = sources_for(settings.randfunc, flips)
        # The rounding spec (not the format's spelling: 'h' and 'half' round alike) and the
        # source of random numbers: counters of different seeds draw different numbers and
        # do not mix silently, nor do two randfuncs or two generators.
        self._key = (spec, settings.randfunc, rng.seed if isinstance(rng, CounterRng) else rng)
        self.round_scalar = _scalar_rounder(spec, self._sources)

    def __reduce__(self) -> tuple:  # (the cached rounders are closures: made again after unpickling)
        return _arithmetic, (self.given, self.strict, self.mismatch, self.method, self.block_size, self._rng,
                             self.hardware)

    @classmethod
    def of(cls, options: OptionsLike = None, **settings: Any) -> "Arithmetic":
        """``Arithmetic(options, **settings)``, the same object for the same hashable request.

        Operations between chopped values of one arithmetic object skip the
        comparison of formats, so :func:`chopped` hands out shared objects
        (they are immutable).  ``options=None`` (the persistent chop options,
        which may change) is never shared.
        """
        key = _request_key(options, settings)
        if key is None:
            return cls(options, **settings)
        arith = _SHARED.get(key)
        if arith is None:
            if len(_SHARED) >= 256:
                _SHARED.clear()
            arith = _SHARED[key] = cls(options, **settings)
        return arith

    # -- identity ------------------------------------------------------------------------

    @property
    def spec(self) -> RoundingSpec:
        """The resolved chop settings (for double data)."""
        return self._specs[np.dtype(np.float64)]

    @property
    def sources(self) -> RandomSources:
        """Where rounding draws its random numbers (see :mod:`pychop_compat.random.sources`)."""
        return self._sources

    @property
    def counter(self) -> Any:
        """The :class:`~pychop_compat.random.counter.CounterRng` of ``rng=``, or None."""
        return self._rng if isinstance(self._rng, CounterRng) else None

    @property
    def rng(self) -> Any:
        """The ``rng=`` source: a CounterRng, a :class:`numpy.random.Generator` or None."""
        return self._rng

    @property
    def draws(self) -> bool:
        """Whether rounding draws random numbers (stochastic rounding or bit flips)."""
        return self.spec.draws

    @property
    def t(self) -> int:
        """Significand bits of the format (hidden bit included)."""
        return self.spec.fmt.t

    @property
    def emax(self) -> int:
        """Largest exponent of the format."""
        return self.spec.fmt.emax

    def same_rounding(self, other: "Arithmetic") -> bool:
        """Whether ``self`` and ``other`` round every value identically."""
        return self is other or self._key == other._key

    def describe(self) -> str:
        """A short description for messages: format name, ``[t, emax]`` and the rounding."""
        g = self.given
        text = f"format {g['format']!r} [t={self.t}, emax={self.emax}], round={g['round']}"
        if g["subnormal"] == 0:
            text += ", no subnormals"
        if g["flip"]:
            text += f", flip p={g['p']}"
        if isinstance(self._rng, CounterRng):
            text += f", rng={self._rng.seed}"
        elif self._rng is not None:
            text += f", rng=Generator({type(self._rng.bit_generator).__name__})"
        return text

    def __repr__(self) -> str:
        extra = "".join(f", {name}={getattr(self, name)!r}" for name, default in
                        (("strict", False), ("mismatch", "error"), ("method", "recursive"),
                         ("block_size", 32), ("hardware", None)) if getattr(self, name) != default)
        return f"Arithmetic({self.describe()}{extra})"

    def with_settings(self, **changes: Any) -> "Arithmetic":
        """A copy with other ``strict``, ``mismatch``, ``method``, ``block_size`` or ``hardware``."""
        settings = dict(strict=self.strict, mismatch=self.mismatch, method=self.method,
                        block_size=self.block_size, rng=self._rng, hardware=self.hardware)
        settings.update(changes)
        return Arithmetic(self.given, **settings)

    @property
    def product_settings(self) -> dict:
        """The keywords of :func:`pychop_compat.linalg.matmul` for this arithmetic's matrix
        products: ``hardware`` when one is set, else ``method`` and ``block_size``."""
        if self.hardware is not None:
            return {"hardware": self.hardware}
        return {"method": self.method, "block_size": self.block_size}

    def combine(self, other: "Arithmetic") -> "Arithmetic":
        """The arithmetic of an operation between operands of ``self`` and ``other``."""
        if self.same_rounding(other) or self.mismatch == "left":
            return self
        if self.mismatch == "wider":
            if self.t >= other.t and self.emax >= other.emax:
                return self
            if other.t >= self.t and other.emax >= self.emax:
                return other
            raise FormatMismatchError(
                f"Chopped operands of different formats, neither wider: {self.describe()} "
                f"and {other.describe()} (mismatch='wider' needs one whose precision and "
                "exponent range are both at least the other's).")
        raise FormatMismatchError(
            f"Chopped operands of different formats: {self.describe()} and {other.describe()}. "
            "Convert one with chopped(x, ...) or choose a rule: chopped(..., mismatch='left' "
            "or 'wider').")

    # -- rounding --------------------------------------------------------------------------

    def spec_for(self, dtype: DTypeLike) -> RoundingSpec:
        """The resolved spec for data of ``dtype`` (float64: MATLAB double; else single)."""
        dtype = np.dtype(dtype)
        spec = self._specs.get(dtype)
        if spec is None:
            spec = self._specs[dtype] = resolve(self.given, None, "single").spec
        return spec

    def round(self, x: np.ndarray) -> np.ndarray:
        """Round a float32/float64 ndarray with chop's semantics (a new array).

        The same numbers, and the same random draws, as ``chop(x, options)``.
        A device array (CuPy) is rounded by its library's engine, on its device.
        """
        if type(x) is np.ndarray and x.size:
            rounder = self._host_rounders.get(x.dtype)  # (float64 and float32 in native order only)
            if rounder is not None:
                return rounder(x)
        if isinstance(x, np.generic):  # (a ufunc of 0-d arrays gives a NumPy scalar: a 0-d array stays one)
            return self.round(np.asarray(x))
        dtype = x.dtype
        if type(x) is not np.ndarray and is_device_array(x):
            return round_array(x, self.spec_for(dtype), self._sources)
        if dtype != np.float64 and dtype != np.float32:
            return np.asarray(self.chop(x))
        if x.size == 0:
            return x.copy()
        if type(x) is not np.ndarray:  # a NumPy scalar, a masked array, a matrix, ...
            return round_array(x, self.spec_for(dtype), self._sources)
        rounder = self._host_rounders[dtype] = host_rounder(self.spec_for(dtype), self._sources)
        return rounder(x)

    def round_combined(self, ufunc: np.ufunc, a: np.ndarray, b: np.ndarray) -> Optional[np.ndarray]:
        """``self.round(ufunc(a, b))`` in one compiled call for ``+ - * /`` of two small NumPy
        arrays of one float dtype and shape, once :meth:`round` has found the compiled loop for
        that dtype (``PreparedRounding.combined``); None where that does not apply: the caller
        then computes ``ufunc(a, b)`` and calls :meth:`round`."""
        rounder = self._host_rounders.get(a.dtype)
        return None if rounder is None else rounder.combined(ufunc, a, b)

    def enter(self, x: ArrayLike) -> np.ndarray:
        """A plain operand as it enters an operation: exactly, or rounded when ``strict``."""
        arr: Any = x if is_device_array(x) else np.asarray(refuse_masked(x))  # a NumPy or a device array
        if arr.dtype.kind not in "fbiu":
            raise TypeError(f"chopped arithmetic takes real numbers, not {arr.dtype}.")
        if arr.dtype != np.float64 and arr.dtype != np.float32:
            _refuse_wide(arr)
            # float16 and a byte-swapped float32 to float32, the rest float64
            single = arr.dtype.kind == "f" and arr.dtype.itemsize <= 4
            arr = arr.astype(np.float32 if single else np.float64)
        return self.round(arr) if self.strict else arr

    def store(self, x: ArrayLike) -> np.ndarray:
        """Values stored in the format: float32 data stays float32, everything else float64.

        Raises
        ------
        ValueError
            For complex data.
        TypeError
            For data that is not real numbers, ``np.longdouble`` data (float64
            first would round twice) and masked arrays.
        """
        arr: Any = x if is_device_array(x) else np.asarray(refuse_masked(x))  # a NumPy or a device array
        if arr.dtype.kind == "c":
            raise ValueError("Chop requires a real input array.")
        if arr.dtype != np.float32:
            if arr.dtype.kind not in "fbiu":
                raise TypeError(f"chopped arrays hold real numbers, not {arr.dtype}.")
            _refuse_wide(arr)
            single = arr.dtype.kind == "f" and arr.dtype.itemsize == 4  # (a byte-swapped float32)
            arr = arr.astype(np.float32 if single else np.float64)
        return self.round(arr)


_SHARED: dict = {}


def refuse_masked(value: Any) -> Any:
    """``value``, unless it is a NumPy masked array.

    Raises
    ------
    TypeError
        For a masked array: chopped arithmetic has no masks (``np.asarray`` would drop the mask
        and compute with the masked elements' values).
    """
    if type(value) is not np.ndarray and isinstance(value, np.ma.MaskedArray):
        raise TypeError("chopped arithmetic has no masks: fill the masked array first (x.filled(value), "
                        "or x.compressed() for the unmasked elements).")
    return value


def refuse_counter_in_linalg(arith: Arithmetic, name: str) -> None:
    """Refuse ``name``, computed by :mod:`pychop_compat.linalg`, for an arithmetic drawing from ``rng=``.

    linalg draws as ``chop`` does (its own ``Chop``): it cannot take an
    arithmetic's counter or generator.

    Raises
    ------
    NotChoppedError
        When ``arith`` draws random numbers and has an ``rng``.
    """
    if arith.rng is not None and arith.draws:
        source = "counter" if arith.counter is not None else "generator"
        raise NotChoppedError(
            f"{name} is computed by pychop_compat.linalg, whose rounding draws as chop does (MATLAB's "
            f"stream); it cannot draw from this arithmetic's {source} (rng=...).  Use an arithmetic "
            "without rng= for matrix products and solves with random rounding.")


def _rng_of(rng: Any) -> Union[None, CounterRng, np.random.Generator]:
    """The source of ``rng=``: None, a CounterRng (for an integer seed) or a Generator (as Chop takes it)."""
    if rng is None or isinstance(rng, (CounterRng, np.random.Generator)):
        return rng
    if isinstance(rng, numbers.Integral) and not isinstance(rng, (bool, np.bool_)):
        return CounterRng(int(rng))
    if isinstance(rng, np.random.SeedSequence):
        return np.random.default_rng(rng)
    raise TypeError("chopped arithmetic's rng must be None (chop's sources: MATLAB's stream), an integer "
                    f"seed (the counter-based generator), a numpy.random.Generator or a CounterRng, not {rng!r}.")


def _hardware_of(hardware: Any, not_nearest: bool) -> Union[None, str, BlockFMA]:
    """``hardware=`` checked: None, a known GPU name or a BlockFMA, with deterministic rounding."""
    if hardware is None:
        return None
    if isinstance(hardware, str):
        if hardware.lower() not in {gpu.lower() for gpu, _, _ in HARDWARE_PRESETS}:
            raise ValueError(f"hardware must be a GPU of hardware.PRESETS "
                             f"({sorted({gpu for gpu, _, _ in HARDWARE_PRESETS})}) or a hardware.BlockFMA, "
                             f"not {hardware!r}.")
    elif not isinstance(hardware, BlockFMA):
        raise TypeError(f"hardware must be a GPU name such as 'H100' or a hardware.BlockFMA, "
                        f"not {type(hardware).__name__}.")
    if not_nearest:
        raise ValueError("hardware= computes matrix products as the matrix units do (inputs rounded to "
                         "nearest): it needs round to nearest without bit flips.")
    return hardware


def _arithmetic(given: dict, strict: bool, mismatch: str, method: str, block_size: int, rng: Any,
                hardware: Any) -> Arithmetic:
    """An unpickled :class:`Arithmetic`."""
    return Arithmetic(given, strict=strict, mismatch=mismatch, method=method, block_size=block_size, rng=rng,
                      hardware=hardware)


def _request_key(options, settings):
    """A hashable form of ``(options, settings)``, or None (never shared: an rng is state)."""
    def items(d: Mapping[str, Any]) -> tuple:
        return tuple(sorted((k, tuple(v) if isinstance(v, list) else v) for k, v in d.items()))

    if options is None or settings.get("rng") is not None:  # (None: the persistent options, which change)
        return None
    if not (isinstance(options, (dict, str)) or options is None):
        return None
    key = (items(options) if isinstance(options, dict) else options, items(settings))
    try:
        hash(key)
    except TypeError:
        return None
    return key


# -- scalars ------------------------------------------------------------------------------------


def _scalar_rounder(spec: RoundingSpec, sources: RandomSources) -> Callable[[float], float]:
    """A function rounding one Python float exactly as chop does.

    A fast path before the kernels' scalar path (:func:`pychop_compat.kernels.numpy_fast.chop_scalar`,
    two to three times slower per chopped-scalar operation, ``benchmarks/bench_arithmetic.py``),
    held to it bit for bit by ``test_scalar_fast_path_equals_the_kernels_scalar_path``.  It takes
    a *regular* ``v``: finite, nonzero, ``2^(e-1) <= |v| < 2^e`` with ``emin <= e - 1 < emax``.
    There ``y = v * 2^(t-e)`` is exact with ``|y| < 2^t``, rounding ``y`` to an integer in the
    mode's way and scaling back are exact, and no range rule applies (``|v| < 2^emax <= xmax``).
    The stochastic modes draw the array path's uniform (MATLAB's stream or ``Chop(rng=<int>)``'s
    counter), none for an integer ``y`` (a counter still advances).  Everything else (zeros, Inf,
    NaN, subnormals, ``explim = 0``, ``t > 50``, a user's ``randfunc`` or a Generator) takes the
    kernel's path; bit flips round an array of one.  A spec beyond chop.m's semantics
    (``spec.extended``: encodings without Inf, saturation, E8M0, ``rules='correct'``) rounds those
    on chop's own path for a Python float instead (the kernel's range rules are chop.m's), and every
    value of an unsigned format (E8M0: negative values are NaN).
    """
    if spec.flips:
        def round_flipping(v: float) -> float:
            return float(round_array(np.array([v]), spec, sources)[0])

        return round_flipping

    if spec.extended:
        # chop rounds a Python float of such a spec on its array path (ChopSpec.scalar_path): the kernels'
        # scalar path knows chop.m's formats and rules only, not encodings, saturation or rules='correct'.
        def kernel(v: float) -> float:
            return float(round_array(v, spec, sources))
    else:
        def kernel(v: float) -> float:
            return numpy_fast.chop_scalar(v, spec, sources)

    fmt, mode = spec.fmt, spec.round
    t = fmt.t
    if not spec.explim or t > 50 or not -1000 < fmt.emin - t < fmt.emax + 52 - t < 1000:
        return kernel
    if not fmt.is_signed or fmt.xmax < math.ldexp(1.0, fmt.emax):  # (E8M0: negative values are NaN)
        return kernel
    counter = getattr(sources, "counter", None)
    draw: Callable[[], float] = stream_uniform_one
    if mode >= 5:
        if counter is not None:
            key = counter.keys[0]

            def draw_counter() -> float:
                return counter_uniform(key, counter.take(1).offset)

            draw = draw_counter
        elif sources.stochastic is not stream_uniform:
            return kernel  # a user's randfunc
    # frexp's exponent e of v (0.5 <= |m| < 1): v is regular when emin + 1 <= e <= emax.
    # One closure per kind of mode: a test of the mode inside one closure costs 5 to 15% of a
    # chopped-scalar operation (same benchmark, in one process against these closures).
    low, high = fmt.emin + 1, fmt.emax
    frexp = math.frexp
    if mode == 1:
        # Ties to even: adding and subtracting S = 1.5 * 2^(e - t + 52) leaves y's quantum 2^(e-t)
        # as the last bit of the sum.
        shifters = [math.ldexp(1.5, e + 52 - t) for e in range(low, high + 1)]

        def round_nearest(v: float) -> float:
            e = frexp(v)[1]
            if low <= e <= high and v:  # (frexp gives e = 0 for zeros, Inf and NaN)
                s = shifters[e - low]
                r = (v + s) - s
                if r == r:  # not Inf - Inf
                    return r
            return kernel(v)

        def round_nearest_finite(v: float) -> float:
            e = frexp(v)[1]
            if low <= e <= high and v and v - v == 0.0:  # regular, finite and nonzero
                s = shifters[e - low]
                return (v + s) - s
            return kernel(v)

        # Inf passes round_nearest's test (as a zero exponent; Inf + S - S is Inf): right only where
        # Inf rounds to itself, a test of the mode's closure, not of every call.
        return round_nearest if spec.infinity and not spec.saturation else round_nearest_finite
    scales = [math.ldexp(1.0, t - e) for e in range(low, high + 1)]
    quanta = [math.ldexp(1.0, e - t) for e in range(low, high + 1)]
    if mode <= 4:
        integers: dict[int, Callable[[float], int]] = {2: math.ceil, 3: math.floor, 4: math.trunc}
        integer = integers[mode]

        def round_directed(v: float) -> float:
            e = frexp(v)[1]
            if low <= e <= high and v and v - v == 0.0:  # regular, finite and nonzero
                k = e - low
                return integer(v * scales[k]) * quanta[k]
            return kernel(v)

        return round_directed
    threshold = None if mode == 5 else 0.5
    floor = math.floor

    def round_stochastic(v: float) -> float:
        e = frexp(v)[1]
        if low <= e <= high and v and v - v == 0.0:  # regular, finite and nonzero
            k = e - low
            y = v * scales[k]
            if v < 0.0:
                y = -y
            whole = floor(y)
            frac = y - whole
            if frac == 0.0:
                if counter is not None:
                    counter.take(1)
                return v
            if draw() <= (frac if threshold is None else threshold):
                whole += 1
            r = whole * quanta[k]
            return -r if v < 0.0 else r
        return kernel(v)

    return round_stochastic
