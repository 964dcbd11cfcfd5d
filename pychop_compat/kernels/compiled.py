"""The compiled CPU engine: chop in one fused, multi-threaded pass per array (Numba).

The loops live in ``numba_kernels``; random numbers come in chop.m's order or per element
(docs/engines.rst, "The compiled CPU engine").  What :func:`handles` refuses goes to
:mod:`.numpy_fast`, with the same results.
"""

from __future__ import annotations

import contextlib
import contextvars
import functools
import importlib.util
import math
import os
from functools import lru_cache
from types import ModuleType
from typing import Any, Callable, Iterator, Literal, Optional

import numpy as np

from ..random.matlab_stream import on_stream_state, stream_uniform
from ..spec import RoundingSpec
from ..random.sources import RandomSources
from ..rules.cpfloat import limited_bit_sources
from .numpy_fast import LAYOUTS, in_memory_order

__all__ = ["available", "combined_call", "set_cpu_engine", "cpu_engine", "get_cpu_engine", "chop_array", "warm_up",
           "wanted", "handles", "rounding_constants", "packed_constants", "kernels", "loaded", "small_call",
           "when_loaded", "SERIAL_BELOW", "CHUNK", "flush_tiny_constants", "round_deterministic", "history_kernels",
           "log2_thresholds", "round_old_rules", "round_old_rules_stochastic"]

#: Below this many elements one thread does everything (a parallel launch costs up to a time slice).
SERIAL_BELOW = 1 << 20
#: Elements per chunk of the parallel loops (and of the per-chunk counts in chop.m's order).
CHUNK = 1 << 14

_ENGINES = ("auto", "numba", "numpy")
_default = os.environ.get("PYCHOP_COMPAT_CPU_ENGINE", "auto")
if _default not in _ENGINES:  # pragma: no cover - a typo in the environment
    raise ValueError(f"PYCHOP_COMPAT_CPU_ENGINE must be one of {_ENGINES}, not {_default!r}")
#: The setting of a ``with cpu_engine(...)`` block (None: the process default).
_scoped: contextvars.ContextVar = contextvars.ContextVar("pychop_compat_cpu_engine", default=None)
_available: Optional[bool] = None


def available() -> bool:
    """Whether Numba is installed (the compiled engine can run; cached)."""
    global _available
    if _available is None:
        _available = importlib.util.find_spec("numba") is not None
    return _available


def get_cpu_engine() -> str:
    """The CPU engine setting in force here: ``'auto'``, ``'numba'`` or ``'numpy'``."""
    scoped = _scoped.get()
    return _default if scoped is None else scoped


_NO_NUMBA = ("the compiled CPU engine needs numba, which is not installed: python -m pip install "
             "numba, or from the root of a pychop_compat checkout python -m pip install -e \".[fast]\"")


def _checked(name: str) -> str:
    if name not in _ENGINES:
        raise ValueError(f"cpu engine must be one of {_ENGINES}, not {name!r}")
    if name == "numba" and not available():
        raise ImportError(_NO_NUMBA)
    return name


def set_cpu_engine(name: str) -> None:
    """Set the process default of the CPU engine (at import ``$PYCHOP_COMPAT_CPU_ENGINE`` or
    ``'auto'``): ``'auto'``, ``'numba'`` (ImportError without Numba) or ``'numpy'``, same bits."""
    global _default
    _default = _checked(name)


@contextlib.contextmanager
def cpu_engine(name: str) -> Iterator[None]:
    """``with cpu_engine('numpy'): ...``: the CPU engine for the calls in the block.

    The setting belongs to the calling thread (and asyncio task), a ``contextvars`` variable; a
    Dask array takes the setting in force when ``chop`` is called, for all its blocks.
    """
    token = _scoped.set(_checked(name))
    try:
        yield
    finally:
        _scoped.reset(token)


def wanted() -> bool:
    """Whether NumPy arrays go to this engine under the setting in force.

    Raises
    ------
    ImportError
        Under ``PYCHOP_COMPAT_CPU_ENGINE=numba`` without Numba (the variable is read at import,
        unchecked so that the import works; the first call that would use the engine says why).
    """
    choice = get_cpu_engine()
    if choice == "numba":
        if not available():  # (only the environment's default gets here: set_cpu_engine, cpu_engine check)
            raise ImportError("PYCHOP_COMPAT_CPU_ENGINE=numba: " + _NO_NUMBA)
        return True
    return choice == "auto" and available()


#: Called once the kernels load, however it happens (see :func:`when_loaded`).
_on_load: list = []


@functools.cache
def kernels() -> ModuleType:
    """The module of Numba kernels (imports Numba on first use; cached: an import statement
    costs about a microsecond per call, much of a small array's chop)."""
    from . import numba_kernels

    # Here, where every load passes (warm_up(), cpu_engine('numba'), small_call, 'auto''s own load),
    # and once: the router forgets the plans it made while the kernels waited, without a check per call.
    for callback in _on_load:
        callback()
    return numba_kernels


def when_loaded(callback: Callable[[], None]) -> None:
    """Call ``callback()`` when :func:`kernels` loads the compiled kernels (at once if they are
    loaded): the router (:mod:`pychop_compat.engines.dispatch`) then routes to them under ``'auto'``."""
    if loaded():
        callback()
    else:
        _on_load.append(callback)


def loaded() -> bool:
    """Whether :func:`kernels` has loaded the compiled kernels in this process.

    Loading them costs a new process about a second (Numba's import, then its first
    dispatch); under ``'auto'`` the router waits until the calls would pay for it
    (:mod:`pychop_compat.engines.dispatch`, docs/engines.rst).
    """
    return kernels.cache_info().currsize > 0


# --- constants of one (spec, dtype) --------------------------------------------------------------

@lru_cache(maxsize=128)
def _constants(fmt, mode: int, keep_subnormals: bool, explim: bool, char: str, p_flip: float,
               encoding: tuple = (0, 0, 0, 0, 0)):
    layout = LAYOUTS[np.dtype(char)]
    width, p, carrier_emin, pow2_bits = layout.width, layout.p, layout.emin, layout.pow2_bits
    t = fmt.t
    d0 = max(p - t, 0)
    full = (1 << width) - 1
    inf = ((1 << (width - p)) - 1) << (p - 1)
    if explim:
        lo, hi = pow2_bits(max(fmt.emin, carrier_emin)), pow2_bits(fmt.emax)
    else:
        lo, hi = pow2_bits(carrier_emin), inf
    ip = np.array([mode, t, fmt.emin, fmt.emins, int(explim), int(keep_subnormals), d0, p, width,
                   *encoding, int(any(encoding))], np.int64)
    low0 = (1 << d0) - 1
    up = np.array([lo, hi, inf, 1 << (width - 1), (1 << (width - 1)) - 1, low0, full ^ low0,
                   (1 << (d0 - 1)) - 1 if d0 else 0, 1 << d0], np.uint64)
    min_rep = fmt.xmins if keep_subnormals else fmt.xmin
    with np.errstate(over="ignore"):  # (a format beyond the carrier's range: Inf, as NumPy compares)
        xboundary_class = float(np.array(fmt.xboundary, char))
    fp = np.array([fmt.xmax, fmt.xboundary, min_rep, p_flip, 2.0 ** -d0, xboundary_class], np.float64)
    # rp[:5]: numba_kernels.fast_bits's constants ODD, RN, HALF, UP, DOWN (a fixed d0).
    rp = np.zeros(18, np.uint64)
    if d0:
        if mode == 1:
            rp[:3] = (1 if d0 == p - 1 else 0, 1, (1 << (d0 - 1)) - 1)  # t = 1: the kept bit is odd
        elif mode == 2:
            rp[3] = low0
        elif mode == 3:
            rp[4] = low0
    # rp[5:]: the deterministic loops' constants (numba_kernels.det_serial): D0, DTOP, DMAX, LO,
    # HIDDEN, FULL, MAG, the exponent's shift, the sign's shift, SMALL_LO, SPAN, THRESHOLD, MIN_REP.
    # With subnormals kept and explim, their range takes in chop.m's subnormal block (p - t + emin - e
    # bits dropped there) where it is normal in the carrier.
    if explim and keep_subnormals and fmt.emin > carrier_emin:
        lo_det = pow2_bits(max(fmt.emins, carrier_emin))
        # p - t, not d0: the block's grid is 2^emins with the format's own t, also for t > p (d0 = 0)
        dtop = p - t + fmt.emin + (1 - carrier_emin)  # p - t + the biased exponent of emin
    else:
        lo_det, dtop = lo, 0
    small = _small_rule(fmt, mode, keep_subnormals, char) if explim else None
    small_lo, threshold, min_rep_bits = (lo_det, 0, 0) if small is None else (0,) + small
    rp[5:] = (d0, dtop, p - 1, lo_det, 1 << (p - 1), full, (1 << (width - 1)) - 1, p - 1, width - 1,
              small_lo, hi - small_lo, threshold, min_rep_bits)
    for a in (ip, up, fp, rp):
        a.setflags(write=False)
    return ip, up, fp, rp


def _exact_bits(value: float, char: str) -> Optional[int]:
    """The bit pattern of ``value`` in the carrier when it is a normal number there, else None."""
    carried = np.array(value, dtype=char)
    if float(carried) != value or not abs(value) >= np.finfo(char).tiny:
        return None
    return int(carried.view(_UINT[char]))


def _small_rule(fmt, mode: int, keep_subnormals: bool, char: str) -> Optional[tuple]:
    """chop.m's result below ``min_rep`` (explim = 1) as a rule on the magnitude's bits:
    ``(threshold, bits of min_rep)``: ``min_rep`` (signed in modes 1, 3) when the bits exceed
    ``threshold`` and the sign suits the mode, else +0; None when these are not normal carrier
    numbers (the general path then rounds those elements).

    chop.m rounds ``x`` to ``c``, then gives ``min_rep`` for ``|c| > min_rep / 2`` (to nearest;
    ``=`` too without subnormals), ``c > 0`` (up), ``c < 0`` (down), else 0.  To nearest that is
    ``|x| > 2^(emins-1) (1 + 2^-t)`` with subnormals (t = 1: the tie at 1.5 2^(emins-1) goes up),
    ``|x| >= 2^(emin-1) - 2^(q-1)`` without (``2^q`` the grid of the binade below the half)."""
    min_rep = fmt.xmins if keep_subnormals else fmt.xmin
    min_rep_bits = _exact_bits(min_rep, char)
    if min_rep_bits is None:
        return None
    if mode == 1:
        if keep_subnormals:
            half = math.ldexp(1.0, fmt.emins - 1)
            exact = _exact_bits(half + math.ldexp(half, -fmt.t), char) if fmt.t > 1 else _exact_bits(1.5 * half, char)
            threshold = None if exact is None else exact - (fmt.t == 1)
        else:
            # The binade below the half: chop.m's subnormal block (grid 2^emins) when t >= 3.
            grid = fmt.emins if fmt.t >= 3 else fmt.emin - 1 - fmt.t
            exact = _exact_bits(math.ldexp(1.0, fmt.emin - 1) - math.ldexp(1.0, grid - 1), char)
            threshold = None if exact is None else exact - 1
        if threshold is None:
            return None
    elif mode in (2, 3):
        threshold = 0  # any non-zero magnitude of the mode's sign
    else:
        threshold = (1 << LAYOUTS[np.dtype(char)].width) - 1  # never: towards zero gives 0
    return threshold, min_rep_bits


def rounding_constants(spec: RoundingSpec, dtype: Any) -> tuple:
    """The constant arrays ``(ip, up, fp, rp)`` of ``numba_kernels`` for ``spec`` and ``dtype``."""
    return _spec_constants(spec, np.dtype(dtype).char)


def packed_constants(constants: tuple) -> np.ndarray:
    """The four arrays of :func:`rounding_constants` as one array of 48 words, the small loops'
    constants (``numba_kernels.det_small`` and its siblings): a call through Numba's
    dispatcher costs about 70 ns per argument, as much as rounding ten elements."""
    ip, up, fp, rp = constants
    return np.concatenate((ip.astype(np.int64).view(np.uint64), up, fp.view(np.uint64), rp))


def flush_tiny_constants(spec: RoundingSpec, dtype: Any) -> Optional[tuple]:
    """:func:`rounding_constants` for the deterministic loops with chop.m's tiny-number rule of
    before 2020-06-16 (``chop_at``): every ``|x|`` below ``min_rep`` becomes +0, whatever the mode.

    The loops' rule below their range (``min_rep`` or +0 by a threshold, see :func:`_small_rule`)
    then never gives ``min_rep``.  None unless the range starts at ``min_rep`` exactly (a
    carrier-normal number) for a deterministic spec of chop.m's own semantics with explim = 1.
    """
    char = np.dtype(dtype).char
    if spec.draws or not spec.limits_exponent or spec.extended:
        return None
    ip, up, fp, rp = _spec_constants(spec, char)
    if _exact_bits(spec.min_rep, char) != int(rp[8]):  # rp[8]: the loops' LO
        return None
    rp = rp.copy()
    rp[14:] = (0, up[1], (1 << 64) - 1, 0)  # SMALL_LO, SPAN (up to HI), THRESHOLD (never), MIN_REP
    rp.setflags(write=False)
    return ip, up, fp, rp


def round_deterministic(constants: tuple, dtype: Any) -> Callable[[np.ndarray], np.ndarray]:
    """The deterministic loops as a function of ``x`` (arrays of ``dtype`` that :func:`handles`
    takes; a new array), with ``constants`` from :func:`rounding_constants` or
    :func:`flush_tiny_constants` for ``dtype``: what :func:`small_call` gives for a
    deterministic spec (the loop of small calls on a C-contiguous vector)."""
    k = kernels()
    ip, up, fp, rp = constants
    char = np.dtype(dtype).char
    single = char == "f"
    packed = packed_constants(constants)
    other = functools.partial(_deterministic, k, ip, up, fp, rp, single, _UINT[char])

    def deterministic(x: np.ndarray) -> np.ndarray:
        if x.ndim == 1 and x.flags.c_contiguous and x.size < SERIAL_BELOW:  # (a small call: no copy, no reshape)
            out = np.empty(x.shape, x.dtype)
            k.det_small(x, out, packed)  # (looked up here: tests spy)
            return out
        return other(x)

    return deterministic


def combined_call(spec: RoundingSpec, dtype: Any) -> Optional[Callable[[int, np.ndarray, np.ndarray],
                                                                        Optional[np.ndarray]]]:
    """``combined(code, a, b)``: :func:`small_call`'s deterministic loop applied to ``a + b``,
    ``a - b``, ``a * b`` or ``a / b`` (``code`` 0 to 3) in one compiled call
    (``numba_kernels.det_combined``), for two arrays of ``dtype`` and one shape below
    :data:`SERIAL_BELOW` elements (vectors, or C-contiguous arrays); it returns None, having
    rounded nothing, where a result may raise a floating-point flag (NumPy's ufunc then computes
    the operation, with its warnings).  None where :func:`small_call` would not take the
    deterministic loop for ``spec``."""
    if spec.draws or spec.random_bits or _e8m0_rules_apply(spec):
        return None
    k = kernels()
    packed = packed_constants(_spec_constants(spec, np.dtype(dtype).char))

    def combined(code: int, a: np.ndarray, b: np.ndarray) -> Optional[np.ndarray]:
        out = np.empty(a.shape, a.dtype)
        if a.ndim == 1:  # (any strides: the loop indexes)
            done = k.det_combined(code, a, b, out, packed)
        elif a.flags.c_contiguous and b.flags.c_contiguous:
            done = k.det_combined(code, a.ravel(), b.ravel(), out.ravel(), packed)  # (views)
        else:
            return None
        return out if done else None

    return combined


# --- chop.m's rules before 2020-05-14 (chop_at): numba_history's loops ----------------------------

@functools.cache
def history_kernels() -> ModuleType:
    """The module of Numba loops of chop.m's old rules (a module of its own: its changes leave
    :func:`kernels`'s cache valid)."""
    from . import numba_history

    return numba_history


#: Bit patterns searched below each power of two for NumPy's log2 rounding up to it (relative
#: distance 2^-8 in float32, 2^-33 in float64; why that suffices: :func:`log2_thresholds`).
_LOG2_BAND = {"f": 1 << 16, "d": 1 << 20}
#: Patterns checked one by one around each threshold and above each power of two.
_LOG2_CHECKED = {"f": 1 << 10, "d": 1 << 6}


@functools.cache
def log2_thresholds(char: str) -> Optional[np.ndarray]:
    """Per exponent ``k`` of the class ``char`` (``'f'``, ``'d'``; from its smallest subnormal's
    up), the smallest ``a`` in ``[2^k, 2^(k+1))`` with ``np.floor(np.log2(a)) == k + 1`` (as
    float64; Inf for none): chop.m's exponent before 2020-05-14 is ``k`` below it, ``k + 1``
    from it.  None when NumPy's log2 does not fit that picture on this machine (then the
    step-by-step rules compute those dates).

    Why a band below ``2^(k+1)`` suffices: for ``a = 2^(k+1) (1 - d)``, ``log2(a) = k + 1 +
    log2(1 - d) <= k + 1 - d / ln 2``.  The searched band reaches ``d = 2^-8`` (float32: 2^16
    patterns of a 24-bit significand) or ``2^-33`` (float64: 2^20 of 53 bits); beyond it
    ``log2(a)`` lies more than ``2^-8 / ln 2`` (``2^-33 / ln 2``) below ``k + 1``, which is
    more than 360 units in the last place of any float32 exponent up to 150 (2^-16 each), or
    more than 700 of any float64 exponent up to 1075 (2^-42), far beyond the few units
    NumPy's log2 may err by (its SIMD loops as libm's), so ``floor`` gives ``k``.  Above
    ``2^k`` the same argument holds with ``log2(a) >= k``; only the log2 of exact powers of two
    and their next neighbours up, which are exact or a few units above ``k``, are checked here.
    Inside the band the threshold is found by bisection (log2 is monotonic there) and the
    patterns around it are checked one by one.  tests/test_history_compiled.py compares every
    float32 within 2^12 patterns below each power of two with NumPy's log2.
    """
    dtype = np.dtype(char)
    unsigned = _UINT[char]
    info = np.finfo(dtype)
    p = info.nmant + 1
    lowest = int(info.minexp) - p + 1  # the smallest subnormal's exponent
    highest = int(info.maxexp) - 1
    k = np.arange(lowest, highest + 1)
    with np.errstate(over="ignore"):
        bottom = np.ldexp(np.ones(k.size, dtype), k).view(unsigned).astype(np.int64)
        top = np.ldexp(np.ones(k.size, dtype), k + 1).view(unsigned).astype(np.int64)  # Inf's pattern for the last

    def floors(patterns: np.ndarray) -> np.ndarray:
        return np.floor(np.log2(patterns.astype(unsigned).view(dtype))).astype(np.float64)

    band = low = np.maximum(bottom, top - _LOG2_BAND[char])
    high = top  # the threshold's pattern lies in [low, high]; high = top: none
    for _ in range(int(_LOG2_BAND[char]).bit_length() + 1):
        middle = low + (high - low) // 2  # (low + high overflows int64)
        up = floors(np.minimum(middle, top - 1)) >= k + 1
        searching = low < high
        high = np.where(searching & up, middle, high)
        low = np.where(searching & ~up, middle + 1, low)
    threshold = high
    offsets = np.arange(-_LOG2_CHECKED[char], _LOG2_CHECKED[char])
    near = np.clip(threshold[:, None] + offsets, band[:, None], (top - 1)[:, None])
    above_power = np.minimum(bottom[:, None] + np.arange(_LOG2_CHECKED[char]), (top - 1)[:, None])
    for patterns in (near, above_power):
        if not np.array_equal(floors(patterns), k[:, None] + (patterns >= threshold[:, None])):
            return None
    if np.any((threshold == band) & (band > bottom)):  # (rounding up already below the band)
        return None
    values = np.where(threshold < top, np.minimum(threshold, top - 1), 0).astype(unsigned).view(dtype)
    out = np.where(threshold < top, values.astype(np.float64), np.inf)
    out.setflags(write=False)
    return out


@lru_cache(maxsize=64)
def _old_rules_parameters(fmt, mode: int, keep_subnormals: bool, limits: bool, block: bool,
                          overflow_by_mode: bool, char: str) -> tuple:
    lowest = int(np.finfo(np.dtype(char)).minexp) - np.finfo(np.dtype(char)).nmant
    # The fast loops' range (numba_history._fast_block): float64 exponents k with t bits in chop's
    # normal block and both scalings 2^(t-1-k), 2^(k-t+1) normal; significands below the lowest
    # threshold of log2_thresholds; magnitudes below the overflow rule's.
    t = fmt.t
    low_k = max(fmt.emin if limits else -1022, t - 1023)
    high_k = min(1023, t + 1021)
    thresholds = log2_thresholds(char)
    covered = np.ones(0) if thresholds is None else thresholds[max(low_k - lowest, 0):max(high_k - lowest + 1, 0)]
    rounding_up = covered[np.isfinite(covered)]
    fraction_band = int((rounding_up.view(np.uint64) & ((1 << 52) - 1)).min()) if rounding_up.size else 1 << 52
    if not limits:
        over = np.inf
    elif overflow_by_mode and mode != 1:
        with np.errstate(over="ignore"):  # (Inf above the largest double)
            over = float(np.nextafter(fmt.xmax, np.inf))
    else:
        over = fmt.xboundary
    ip = np.array([t, fmt.emin, fmt.emins, mode, int(limits), int(keep_subnormals), int(block),
                   int(overflow_by_mode), lowest, low_k + 1023, max(high_k - low_k + 1, 0), fraction_band], np.int64)
    with np.errstate(invalid="ignore"):
        default_nan = float(np.zeros(1, char)[0] * np.array(np.inf, char))  # (the NaN that 0 * Inf gives)
    fp = np.array([fmt.xmax, fmt.xboundary, fmt.xmins, default_nan, over], np.float64)
    for a in (ip, fp):
        a.setflags(write=False)
    return ip, fp


def round_old_rules(spec: RoundingSpec, dtype: Any, limits: bool, block: bool,
                    overflow_by_mode: bool) -> Optional[Callable[[Any], Any]]:
    """chop.m's deterministic rounding (modes 1-4, no flips) with its rules before 2020-05-14
    as a function of ``x`` (float32 or float64 arrays of ``dtype``, native: a new array of
    ``x``'s shape; for float64, also a Python float: a float): ``history.chop_vector_at``'s
    results (with its ``limits``, mode 4's truncation by ``block``, overflow by mode of
    2020-05-13 or else to Inf) on the loops of ``kernels/numba_history.py``.  None where those
    loops do not apply (a spec beyond chop.m's, a random or flipping one, or
    :func:`log2_thresholds` None).
    """
    char = np.dtype(dtype).char
    if (char not in _UINT or spec.draws or spec.flips or spec.round not in (1, 2, 3, 4)
            or getattr(spec, "extended", False)):
        return None
    thresholds = log2_thresholds(char)
    if thresholds is None:
        return None
    k = history_kernels()
    ip, fp = _old_rules_parameters(spec.fmt, spec.round, spec.keeps_subnormals, limits, block, overflow_by_mode,
                                   char)
    packed = np.concatenate((ip.astype(np.float64), fp, thresholds))  # (integers below 2^53: exact)

    def old_rules(x: Any) -> Any:
        if type(x) is float:
            return k.old_scalar(x, packed)
        if x.ndim == 1 and x.flags.c_contiguous and x.size < SERIAL_BELOW:  # (a small call: no copy)
            out = np.empty(x.shape, x.dtype)
            k.old_serial(x, out, ip, fp, thresholds)
            return out
        out, xf, of = in_memory_order(x)
        if xf.size < SERIAL_BELOW:
            k.old_serial(xf, of, ip, fp, thresholds)
        else:
            k.old_parallel(xf, of, ip, fp, thresholds, CHUNK)
        return out

    return old_rules


def round_old_rules_stochastic(spec: RoundingSpec, dtype: Any, limits: bool,
                               overflow_by_mode: bool) -> Optional[Callable[[Any], Any]]:
    """chop.m's stochastic rounding (modes 5 and 6, no flips) with its rules before 2020-05-14,
    drawing MATLAB's stream (``rand``, the only source of those dates), as a function of ``x``
    (as for :func:`round_old_rules`): ``history.chop_vector_at``'s results and stream state
    afterwards, on ``numba_history.old_stochastic`` (MATLAB's column-major element order);
    the function returns None, with the stream untouched, for an ``x`` of which a result would
    be NaN (the step-by-step rules set its sign).  None where that loop does not apply (a spec
    beyond chop.m's, a deterministic or flipping one, or :func:`log2_thresholds` None).
    """
    char = np.dtype(dtype).char
    if char not in _UINT or not spec.stochastic or spec.flips or getattr(spec, "extended", False):
        return None
    thresholds = log2_thresholds(char)
    if thresholds is None:
        return None
    k = history_kernels()
    # (mode 6 overflowed as round to nearest on 2020-05-13, as today: at the rounding boundary)
    ip, fp = _old_rules_parameters(spec.fmt, spec.round, spec.keeps_subnormals, limits, False,
                                   overflow_by_mode and spec.round != 6, char)

    def old_stochastic(x: Any) -> Any:
        if type(x) is float:
            out = np.empty(1)
            declined = on_stream_state(k.old_stochastic, np.array([x]), out, ip, fp, thresholds)[0] < 0
            return None if declined else float(out[0])
        flat = x if x.ndim == 1 and x.flags.c_contiguous else x.ravel(order="F")  # MATLAB's element order
        out = np.empty(flat.shape, x.dtype)
        if on_stream_state(k.old_stochastic, flat, out, ip, fp, thresholds)[0] < 0:
            return None
        return out if x.ndim == 1 else out.reshape(x.shape, order="F")

    return old_stochastic


def _spec_constants(spec: RoundingSpec, char: str):
    return _constants(spec.fmt, spec.round, spec.keeps_subnormals, spec.limits_exponent, char,
                      float(spec.p) if spec.flips else -1.0, _encoding(spec))


def _encoding(spec: RoundingSpec) -> tuple:
    """The switches of ``numba_kernels._encode`` (TIE_TO_XMAX, SATURATE, INF_TO_NAN,
    NO_NEGATIVE_ZERO, FLIP_NAN); all off for chop.m's own specs and with explim = 0."""
    if not getattr(spec, "extended", False) or not spec.limits_exponent:
        return (0, 0, 0, 0, 0)
    fmt = spec.fmt
    return (int(fmt.encoding == "fn" and spec.round == 1), int(bool(spec.saturation)), int(not spec.infinity),
            int(fmt.encoding == "fnuz"), int(spec.flips and fmt.encoding == "fn"))


_UINT = {"d": np.uint64, "f": np.uint32}


def handles(x: np.ndarray, spec: RoundingSpec) -> bool:
    """Whether this engine rounds ``x`` by ``spec`` (else the NumPy engine does)."""
    return (x.dtype.char in _UINT and x.dtype.isnative and x.size > 1
            and not (spec.flips and spec.fmt.t < 2)
            and (not getattr(spec, "extended", False) or _handles_extended(spec, x.dtype.char)))


def _handles_extended(spec: RoundingSpec, char: str) -> bool:
    """Whether a spec beyond chop.m (``spec.extended``) is chop.m's algorithm with the format's
    own t, emin, emax, then its encoding (``numba_kernels._encode``, and E8M0's rules on every
    element), its stochastic draws limited to ``random_bits`` bits or not.  Not: CPFloat's
    rules (:mod:`.numba_cpfloat`), modes outside 1..6, flips of any encoding bit (both errors of
    chop's rules, which the NumPy engine raises), and formats whose top binade lies beyond the
    carrier's (a regular element could round to Inf)."""
    fmt = getattr(spec, "fmt", None)  # (a spec object without these fields: refused)
    return (getattr(spec, "range_rules", None) == "chop" and getattr(spec, "round", 0) in range(1, 7)
            and getattr(spec, "flip_scope", None) == "fraction" and fmt is not None and fmt.emax <= LAYOUTS[np.dtype(char)].emax)


# --- entry point ----------------------------------------------------------------------------------

def chop_array(x: np.ndarray, spec: RoundingSpec, sources: RandomSources) -> np.ndarray:
    """Round ``x`` (float32 or float64, native byte order, more than one element) by ``spec``:
    bit for bit :func:`.numpy_fast.chop_array` with the same sources (check :func:`handles` first)."""
    k = kernels()
    char = x.dtype.char
    ip, up, fp, rp = _spec_constants(spec, char)
    single = char == "f"
    utype = _UINT[char]
    stochastic = spec.round >= 5
    if spec.random_bits:  # the NumPy engine's sources, whose stochastic draws rules.cpfloat limits
        sources = limited_bit_sources(sources, spec.random_bits)
    counter = getattr(sources, "counter", None)
    given = getattr(sources, "given", None)
    if not stochastic and not spec.flips:
        out = _deterministic(k, ip, up, fp, rp, single, utype, x)
    elif given is not None and not spec.flips:  # numbers given per element, in row-major order
        numbers = np.ascontiguousarray(np.broadcast_to(np.asarray(given, np.float64), x.shape)).reshape(-1)
        out = _per_element(k, x, ip, up, fp, single, utype, _NO_KEYS, np.uint64(0), numbers)
    elif counter is not None:
        stream = counter.take(x.size)
        out = _per_element(k, x, ip, up, fp, single, utype, np.array(stream.keys, np.uint64),
                           np.uint64(stream.offset), None)
    else:
        out = _in_chop_order(k, x, spec, sources, ip, up, fp, single, utype)
    if _e8m0_rules_apply(spec):
        # E8M0 has no sign and no zero: every element's result depends on its input's sign (a
        # pass over all of them, in the result's memory order).
        order: Literal["C", "F"] = "C" if out.flags.c_contiguous else "F"
        k.e8m0_rules(x.ravel(order=order), out.reshape(-1, order=order), spec.fmt.xmin)
    return out


def _e8m0_rules_apply(spec: RoundingSpec) -> bool:
    """Whether chop's result takes E8M0's rules (chop's rules apply the encoding with explim = 1)."""
    return spec.fmt.encoding == "e8m0" and spec.limits_exponent


def small_call(spec: RoundingSpec, sources: RandomSources, dtype: Any) -> Callable[[np.ndarray], np.ndarray]:
    """:func:`chop_array` for ``spec``, ``sources`` and ``dtype`` on arrays that :func:`handles`,
    below :data:`SERIAL_BELOW` elements, with what depends on these alone found once: the
    constants, the branch, the counter's keys (the router keeps it per spec and dtype).

    The deterministic loop (on C-contiguous input), the counter's loop (``Chop(rng=<int>)``) and
    MATLAB's stream drawn inside the loop (stochastic rounding without flips) are called here
    directly, on the arrays :func:`chop_array` makes; every other call is :func:`chop_array`'s.
    """
    dtype = np.dtype(dtype)
    k = kernels()
    ip, up, fp, rp = _spec_constants(spec, dtype.char)
    unsigned = _UINT[dtype.char]
    single = dtype.char == "f"
    packed = packed_constants((ip, up, fp, rp))

    def by_chop_array(x: np.ndarray) -> np.ndarray:
        return chop_array(x, spec, sources)

    def per_element(counter: Any) -> Callable[[np.ndarray], np.ndarray]:
        keys = np.array(counter.keys, np.uint64)

        def call(x: np.ndarray) -> np.ndarray:
            offset = counter.advance(x.size)
            if offset >> 63:  # as int64 (the kernel wraps it back): one compiled type for every offset
                offset -= 1 << 64
            out = np.empty(x.shape, dtype)
            # row-major: the counters follow C order
            flat = x if x.ndim == 1 and x.flags.c_contiguous else np.ascontiguousarray(x).reshape(-1)
            k.counter_small(flat, out if out.ndim == 1 else out.reshape(-1), packed, keys, offset)  # (tests spy on k)
            return out

        return call

    if _e8m0_rules_apply(spec) or spec.random_bits:
        return by_chop_array  # (the encoding's pass, the limited bits' sources: chop_array's)
    if not spec.draws:
        return round_deterministic((ip, up, fp, rp), dtype)
    if sources.given is None and sources.counter is not None:
        return per_element(sources.counter)
    if sources.given is None and sources.stochastic is stream_uniform and spec.stochastic and not spec.flips:

        def streamed(x: np.ndarray) -> np.ndarray:
            # MATLAB's element order: column-major (a vector's is its own)
            flat = x if x.ndim == 1 and x.flags.c_contiguous else x.ravel(order="F")
            out = np.empty(flat.shape, dtype)
            on_stream_state(k.stream_small, flat, out, packed)  # (looked up here: tests spy)
            return out if x.ndim == 1 else out.reshape(x.shape, order="F")

        # every number in one loan of the stream (the caller need not hold it around the call)
        streamed.draws_at_once = True  # type: ignore[attr-defined]
        return streamed
    return by_chop_array


def _deterministic(k, ip, up, fp, rp, single, utype, x):
    if x.flags.c_contiguous and x.size < SERIAL_BELOW:  # (no copy)
        out = np.empty(x.shape, x.dtype)
        flat, out_flat = (x, out) if x.ndim == 1 else (x.reshape(-1), out.reshape(-1))
        k.det_serial(flat, flat.view(utype), out_flat, out_flat.view(utype), ip, up, fp, rp, single)
        return out
    # The element order is free: keep the caller's memory order.
    out, xf, of = in_memory_order(x)
    if xf.size < SERIAL_BELOW:
        k.det_serial(xf, xf.view(utype), of, of.view(utype), ip, up, fp, rp, single)
    else:
        k.det_parallel(xf, xf.view(utype), of, of.view(utype), ip, up, fp, rp, single, CHUNK)
    return out


def _per_element(k, x, ip, up, fp, single, utype, keys, offset, given):
    """Each element its own numbers: the counter's (keys, offset), or ``given`` (not None)."""
    xf = np.ascontiguousarray(x).reshape(-1)  # row-major: the counters follow C order
    of = np.empty_like(xf)
    if xf.size < SERIAL_BELOW:
        k.counter_serial(xf, xf.view(utype), of, of.view(utype), ip, up, fp, single, keys, offset, given)
    else:
        k.counter_parallel(xf, xf.view(utype), of, of.view(utype), ip, up, fp, single, keys, offset, CHUNK,
                           given)
    return of.reshape(x.shape)


_NO_FLOATS = np.zeros(1, np.float64)
_NO_INTS = np.zeros(1, np.int64)
_NO_KEYS = np.zeros(3, np.uint64)


def _streamed(k, ip, up, fp, single, utype, x):
    """Stochastic rounding with MATLAB's stream, drawn inside the loop (in MATLAB's element order)."""
    xf = x.ravel(order="F")
    of = np.empty_like(xf)
    on_stream_state(k.round_stream, xf, xf.view(utype), of, of.view(utype), ip, up, fp, single)
    return of.reshape(x.shape, order="F")


def _in_chop_order(k, x, spec, sources, ip, up, fp, single, utype):
    """Stochastic modes and bit flips with chop.m's calls: count, draw in bulk, round."""
    if sources.stochastic is stream_uniform and not spec.flips:  # the kernel draws as it goes
        return _streamed(k, ip, up, fp, single, utype, x)
    xf = x.ravel(order="F")  # MATLAB's element order
    n = xf.size
    xu = xf.view(utype)
    of = np.empty_like(xf)
    stochastic = spec.round >= 5
    chunk = CHUNK
    counts = k.count_draws(xf, xu, ip, up, fp, chunk, stochastic)
    k_normal, k_sub, n_sub = (int(v) for v in counts.sum(axis=0))
    n_normal = n - n_sub
    ftype = np.float32 if single else np.float64

    def draw(count):
        values = np.asarray(sources.stochastic(count), np.float64).reshape(-1)
        return values.astype(ftype, copy=False).astype(np.float64, copy=False)  # compared in x's class

    rnd = [_NO_FLOATS, _NO_FLOATS]
    choice = [_NO_FLOATS, _NO_FLOATS]
    bits = [_NO_INTS, _NO_INTS]
    chosen_before = [np.zeros(1, np.int64), np.zeros(1, np.int64)]
    for block, (k_draws, members) in enumerate(((k_normal, n_normal), (k_sub, n_sub))):
        if block == 1 and members == 0:
            break  # chop.m skips an empty subnormal block
        if stochastic and k_draws:
            rnd[block] = draw(k_draws)
        if spec.flips:
            u = np.asarray(sources.flip_uniform(members), np.float64).reshape(-1)
            chosen = u <= spec.p
            m = int(np.count_nonzero(chosen))
            choice[block] = u if members else _NO_FLOATS
            if m:
                bits[block] = np.asarray(sources.flip_randi(spec.fmt.t - 1, m), np.int64).reshape(-1)
            chosen_before[block] = np.concatenate(([0], np.cumsum(chosen, dtype=np.int64)))

    chunk_sizes = np.full(counts.shape[0], chunk, np.int64)
    chunk_sizes[-1] = n - chunk * (counts.shape[0] - 1)
    starts = np.zeros((counts.shape[0], 6), np.int64)
    columns = np.stack((counts[:, 0], counts[:, 1], chunk_sizes - counts[:, 2], counts[:, 2]), axis=1)
    np.cumsum(columns[:-1], axis=0, out=starts[1:, :4])  # exclusive sums: where each chunk starts
    if spec.flips:
        starts[:, 4] = chosen_before[0][starts[:, 2]]
        if n_sub:
            starts[:, 5] = chosen_before[1][starts[:, 3]]
    round_drawn = k.round_drawn if n >= SERIAL_BELOW else k.round_drawn_serial
    round_drawn(xf, xu, of, of.view(utype), ip, up, fp, single, chunk, starts, rnd[0], rnd[1],
                  stochastic and k_normal > 0, stochastic and k_sub > 0, bool(spec.flips),
                  choice[0], choice[1], bits[0], bits[1])
    return of.reshape(x.shape, order="F")


def warm_up() -> float:
    """Compile (or load from Numba's cache) every kernel; returns the seconds it took."""
    import time

    from ..formats import lookup_format
    from ..random.sources import counter_sources, sources_for

    start = time.perf_counter()
    for dtype in (np.float64, np.float32):
        for size in (8, SERIAL_BELOW + 8):
            x = np.linspace(-3, 3, size).astype(dtype)
            for mode, flip in ((1, 0), (5, 0), (1, 1)):
                spec = RoundingSpec(lookup_format("h"), round=mode, flip=flip)
                chop_array(x, spec, sources_for(lambda m: np.full(m, 0.5), counter_sources(0)))
                chop_array(x, spec, counter_sources(0))
                if spec.round >= 5 and not spec.flips:  # MATLAB's stream, on a state of its own
                    ip, up, fp, _ = _spec_constants(spec, x.dtype.char)
                    out, utype = np.empty_like(x), _UINT[x.dtype.char]
                    kernels().round_stream(x, x.view(utype), out, out.view(utype), ip, up, fp, dtype is np.float32,
                                         np.arange(624, dtype=np.uint32), np.array([624], np.intc))
                    if size < SERIAL_BELOW:  # the small calls' loop
                        kernels().stream_small(x, out, packed_constants(_spec_constants(spec, x.dtype.char)),
                                               np.arange(624, dtype=np.uint32), np.array([624], np.intc))
                if size < SERIAL_BELOW and not spec.flips:  # the small calls' loops (deterministic, counter)
                    small_call(spec, counter_sources(0), x.dtype)(x)
                    combined = combined_call(spec, x.dtype)  # (chopped arrays' + - * /)
                    if combined is not None:
                        combined(0, x, x)
    return time.perf_counter() - start
