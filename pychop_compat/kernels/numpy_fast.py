"""A fast CPU engine for chop, bit for bit equal to :mod:`pychop_compat.rules.chop`.

*Regular* elements (finite normal, ``emin <= e < emax``) are rounded a whole block at a time
on their bit patterns or in the FPU (``_Plan``), *special* ones in batches with per-element
bit counts (:func:`_analyse`), then chop's range rules; random numbers are drawn exactly as
chop.m draws them.  See docs/engines.rst, "The NumPy engine".
"""

from __future__ import annotations

import contextlib
import functools
import math
import os
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Callable, Literal, Optional, Union

import numpy as np

from ..random.counter import CounterStream
from ..random.matlab_stream import stream_uniform
from ..random.sources import RandomSources
from ..rules.chop import apply_range_limits
from ..spec import FLIP_PRECISION_ERROR, RoundingSpec

__all__ = ["chop_array", "chop_scalar", "scalar_kernel", "chop_counter", "map_blocks", "in_memory_order", "BLOCK",
           "PARALLEL_BLOCK", "THREADS", "set_threads"]

#: Elements per block: a few arrays of this many 8-byte words fit in a core's L2 cache.
BLOCK = 16384
#: Elements per block with several threads: longer ufunc calls, fewer hand-offs of the GIL.
PARALLEL_BLOCK = 65536
#: Special elements gathered before they are rounded in one batch.
_FLUSH = 8192
#: Below this many elements one thread does everything (thread hand-off costs ~50 us).
_MIN_PARALLEL = 1 << 18
#: Up to this many special elements are rounded in plain Python (cheaper than the ufunc path).
_FEW = 16
#: Chunk size of the all-general path used with bit flips.
_FLIP_CHUNK = 1 << 16


def _default_threads() -> int:
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - not Linux
        cores = os.cpu_count() or 1
    return max(1, min(cores, 4))


#: Worker threads for large arrays (at most 4; change with :func:`set_threads`).
THREADS = _default_threads()
_pool: Optional[ThreadPoolExecutor] = None
_pool_pid = 0


def set_threads(n: int) -> None:
    """Use ``n`` worker threads for large arrays (1 disables threading)."""
    global THREADS, _pool
    if n < 1:
        raise ValueError("need at least one thread")
    if _pool is not None and _pool_pid == os.getpid():
        _pool.shutdown(wait=True)
    _pool = None
    THREADS = int(n)


def _get_pool() -> ThreadPoolExecutor:
    global _pool, _pool_pid
    # A forked child inherits the pool object but not its threads: make a new one there.
    if _pool is None or _pool_pid != os.getpid():
        _pool = ThreadPoolExecutor(max_workers=THREADS, thread_name_prefix="pychop_compat")
        _pool_pid = os.getpid()
    return _pool


def _tiling(n: int):
    """``(threads, block, n_blocks)`` for an array of ``n`` elements."""
    threads = THREADS if n >= _MIN_PARALLEL else 1
    block = PARALLEL_BLOCK if threads > 1 else BLOCK
    n_blocks = -(-n // block)
    return max(1, min(threads, n_blocks)), block, n_blocks


def _map_ranges(func, n_blocks: int, threads: int) -> list:
    """``func(first_block, stop_block)`` over contiguous block ranges, one per thread, in order."""
    if threads <= 1:
        return [func(0, n_blocks)]
    pool = _get_pool()
    edges = [n_blocks * k // threads for k in range(threads + 1)]
    futures = [pool.submit(_quietly, func, edges[k], edges[k + 1]) for k in range(threads)]
    return [f.result() for f in futures]


def map_blocks(func: Callable[[int, int, int], object], n: int) -> list:
    """``func(start, stop, block)`` over ``n`` elements split as this engine splits them (one
    contiguous range per thread, worked on in blocks of ``block``); the results in element order.
    Overflow and invalid operations are not reported."""
    threads, block, n_blocks = _tiling(n)

    def over_range(first: int, stop: int):
        return func(first * block, min(stop * block, n), block)

    with np.errstate(over="ignore", invalid="ignore"):
        return _map_ranges(over_range, n_blocks, threads)


def _quietly(func, first: int, stop: int):
    """Run ``func`` in a worker thread with the caller's error state (threads start afresh)."""
    with np.errstate(over="ignore", invalid="ignore"):
        return func(first, stop)


# --- the input classes -------------------------------------------------------------

@dataclass(frozen=True)
class _Layout:
    """Bit layout of an IEEE binary input class (float32 or float64)."""

    ftype: type[np.floating[Any]]
    utype: type[np.unsignedinteger[Any]]
    itype: type[np.signedinteger[Any]]
    width: int
    p: int  # significand bits, hidden bit included
    emin: int  # exponent of the smallest normal number

    @property
    def inf(self) -> int:
        """Bit pattern of +Inf; any larger magnitude is a NaN."""
        return ((1 << (self.width - self.p)) - 1) << (self.p - 1)

    @property
    def emax(self) -> int:
        return 1 - self.emin

    def pow2_bits(self, k: int) -> int:
        """Bit pattern of ``2^k``, or 0 below the smallest subnormal and +Inf above the largest."""
        if k > self.emax:
            return self.inf
        if k >= self.emin:
            return (k - self.emin + 1) << (self.p - 1)
        shift = k - (self.emin - self.p + 1)
        return 1 << shift if shift >= 0 else 0


#: The input classes' bit layouts, by dtype.
LAYOUTS = {
    np.dtype(np.float64): _Layout(np.float64, np.uint64, np.int64, 64, 53, -1022),
    np.dtype(np.float32): _Layout(np.float32, np.uint32, np.int32, 32, 24, -126),
}


# --- the plan: everything that depends on the options and the input class only -----------

class _Plan:
    """Constants and lookup tables for one (format, mode, subnormal, explim, input class);
    ``small_special``: every element below the regular range is special; ``special_fraction``:
    so is every element whose fraction field is at least that (see :func:`chop_array`)."""

    def __init__(self, fmt: Any, mode: int, keep_subnormals: bool, explim: bool, layout: _Layout,
                 small_special: bool = False, special_fraction: Optional[int] = None):
        L = self.layout = layout
        t, emax, xboundary = fmt.t, fmt.emax, fmt.xboundary
        self.t, self.mode, self.explim, self.keep_subnormals = t, mode, explim, keep_subnormals
        self.emin = fmt.emin
        self.emins = self.emin + 1 - t
        u = L.utype
        self.u = u
        self.SIGN, self.MAG, self.INF = u(1 << (L.width - 1)), u((1 << (L.width - 1)) - 1), u(L.inf)

        # Regular elements lose d0 bits; with t >= p nothing is rounded there.
        d0 = max(L.p - t, 0)
        self.d0 = d0
        self.LOW0 = u((1 << d0) - 1)
        self.KEEP0 = u(((1 << L.width) - 1) ^ ((1 << d0) - 1))
        self.UNIT0 = u(1 << d0)
        self.HALFM1 = u((1 << (d0 - 1)) - 1) if d0 else u(0)
        self.FRAC_SCALE = L.ftype(2.0 ** -d0)

        # Regular magnitudes are [LO, HI), both powers of two: the exponent field alone decides
        # (zero, field 0, is below LO on purpose).
        if explim:
            lo = L.pow2_bits(max(self.emin, L.emin))
            hi = L.pow2_bits(emax)
        else:
            lo, hi = L.pow2_bits(L.emin), L.inf
        # (x + S) - S with S = 1.5 * 2^(e + d0) rounds x to the grid 2^(e - t + 1), ties to
        # even, while S's binade holds x + S (d0 >= 2) and S is finite (this may lower HI).
        self.float_rn = mode == 1 and d0 >= 2
        if self.float_rn:
            hi = min(hi, L.pow2_bits(L.emax - d0 + 1))
            self.S_OFF = u((d0 << (L.p - 1)) | (1 << (L.p - 2)))
            # With subnormals kept, chop's subnormal block (grid xmins: S at e = emin) is
            # regular too, its exponent field raised to emin's.
            self.E_FLOOR = u(lo)
            if explim and keep_subnormals:
                lo = min(lo, L.pow2_bits(max(self.emins, L.emin)))
            self.raise_exponent = lo < int(self.E_FLOOR)
        self.EXP = u(L.inf)
        self.LO, self.HI, self.SPAN = u(lo), u(hi), u(hi - lo)

        # bulk_small: below xmins chop rounds to t bits, then sends results above xmins / 2 to
        # +-xmins, the rest to +0.  S at emin's rounds them once, the same except in the window
        # half < |x| <= half (1 + 2^-t) (half = xmins / 2), which chop sends to +0.  Needs half
        # normal in the input's class and t >= 2 (with t = 1 ties go up).
        # The top binade is regular too, up to xboundary (and while S is finite: t + 1 <= p).
        self.bulk_small = (self.float_rn and explim and keep_subnormals and t >= 2
                           and self.emins - 1 >= L.emin and lo == L.pow2_bits(self.emins) and t + 1 <= L.p)
        if self.bulk_small:
            half = math.ldexp(1.0, self.emins - 1)
            cut = int(np.array(half + math.ldexp(half, -t), L.ftype).view(u))
            self.WINDOW_START = u(L.pow2_bits(self.emins - 1) + 1)  # half's bits + 1
            self.WINDOW_WIDTH = u(cut + 1) - self.WINDOW_START
            boundary = int(np.array(xboundary, L.ftype).view(u)) if xboundary < 2.0 ** L.emax else L.inf
            self.XB = u(min(boundary, L.pow2_bits(L.emax - d0 + 1)))

        # small_directed: below xmin chop's rounding then underflow rule are together
        # ceil / floor / trunc of x / min_rep, times min_rep, -0 made +0.  Exact when 1 / min_rep
        # and every regular x / min_rep are finite and xmin is normal in the input's class.
        self.small_directed = False
        if mode in (2, 3, 4) and explim and lo == L.pow2_bits(self.emin) and self.emin >= L.emin:
            rep_exp = self.emins if keep_subnormals else self.emin
            self.small_directed = emax - rep_exp <= L.emax and rep_exp >= L.emin - L.p + 1
            if self.small_directed:
                self.REP = L.ftype(math.ldexp(1.0, rep_exp))
                self.INV_REP = L.ftype(math.ldexp(1.0, -rep_exp))
                self.directed = {2: np.ceil, 3: np.floor, 4: np.trunc}[mode]
                # With subnormals kept the grid below 2^emax is 2^(max(e, emin) - t + 1): the
                # grid and its inverse (exact, normal) made from x's exponent field, whole block.
                top_quantum = emax - 1 - t + 1
                self.whole_block = (keep_subnormals and -top_quantum >= L.emin and t - 1 < L.p
                                    and self.emins >= L.emin)
                if self.whole_block:
                    self.Q_FLOOR = u(lo)  # 2^emin: chop's subnormal block and below
                    self.Q_SHIFT = u((t - 1) << (L.p - 1))  # 2^e -> 2^(e - t + 1)
                    self.INV_BITS = u(2 * L.pow2_bits(0))  # 2^k -> 2^-k: subtract k's bits

        if small_special or special_fraction is not None:  # (the two ways of rounding small elements in bulk, off)
            self.bulk_small = self.small_directed = False
        # Elements whose fraction field (the stored significand bits) is at least FRACTION are
        # special too (None: none); FRAC masks the field.
        self.FRAC = u((1 << (L.p - 1)) - 1)
        self.FRACTION = None if special_fraction is None else u(special_fraction)

        # Per-exponent tables, indexed by frexp's exponent + off (frexp gives e + 1; 0 for zero,
        # Inf and NaN, i.e. e = -1).
        lowest = L.emin - L.p + 2
        self.off = -lowest
        fe = np.arange(lowest, L.emax + 2)
        e = fe - 1
        sub: np.ndarray = (e >= self.emins) & (e < self.emin) if explim else np.zeros(e.shape, bool)
        quantum = np.where(sub, self.emins, e - t + 1)  # exponent of the grid spacing
        unit_in = np.maximum(e, L.emin) - L.p + 1  # exponent of the input's last bit
        self.d_table = np.clip(quantum - unit_in, 0, L.p - 1).astype(u)
        self.sub_table = sub
        self.quantum_table = quantum.astype(np.int32)

        # Range limits: float64 thresholds, as the reference compares them.
        self.xmax, self.xboundary = np.float64(fmt.xmax), np.float64(xboundary)
        self.min_rep = np.float64(fmt.xmins if keep_subnormals else fmt.xmin)
        # (the same as Python floats, for the scalar path)
        self.limits = (float(self.xmax), float(self.xboundary), float(self.min_rep))


@lru_cache(maxsize=64)
def _plan(fmt, mode: int, keep_subnormals: bool, explim: bool, dtype_char: str, small_special: bool = False,
          special_fraction: Optional[int] = None) -> _Plan:
    return _Plan(fmt, mode, keep_subnormals, explim, LAYOUTS[np.dtype(dtype_char)], small_special, special_fraction)


_recent_plans: dict = {}


def _plan_for(spec: RoundingSpec, dtype: np.dtype, small_special: bool = False,
              special_fraction: Optional[int] = None) -> _Plan:
    """The plan for ``spec`` and ``dtype``; a repeated spec object is found by identity (fast)."""
    key = (id(spec), dtype.char, small_special, special_fraction)
    hit = _recent_plans.get(key)
    if hit is not None and hit[0] is spec:  # the stored spec keeps its id from being reused
        return hit[1]
    plan = _plan(spec.fmt, spec.round, spec.keeps_subnormals, spec.limits_exponent, dtype.char, small_special,
                 special_fraction)
    if len(_recent_plans) >= 32:
        _recent_plans.clear()
    _recent_plans[key] = (spec, plan)
    return plan


# --- special elements: per-element bit counts, then chop's range rules -------------------

class _Analysis:
    """Per-element rounding data of special elements (see :func:`_analyse`)."""

    __slots__ = ("bits", "mag", "d", "unit", "frac", "trunc", "finite", "need", "sub")
    bits: np.ndarray  # the storage words
    mag: np.ndarray
    d: np.ndarray  # bits to drop
    unit: np.ndarray  # 2^d, one step of the target grid
    frac: np.ndarray  # the dropped part, and what is kept
    trunc: np.ndarray
    finite: np.ndarray
    need: np.ndarray  # draws a number: a nonzero dropped part, Inf and NaN (inf - inf is NaN)
    sub: Optional[np.ndarray]  # chop's subnormal block (None when explim is off)


def _analyse(plan: _Plan, xs: np.ndarray) -> _Analysis:
    """Bits to drop, the dropped part and what is kept, for each element of ``xs``."""
    a = _Analysis()
    key = np.frexp(xs)[1]
    key += plan.off
    a.bits = xs.view(plan.u)
    a.mag = a.bits & plan.MAG
    a.d = plan.d_table.take(key)
    a.unit = np.left_shift(plan.u(1), a.d)
    a.frac = a.mag & (a.unit - plan.u(1))
    a.trunc = a.mag ^ a.frac
    a.finite = a.mag < plan.INF
    a.need = (a.frac != 0) | ~a.finite
    a.sub = plan.sub_table.take(key) if plan.explim else None
    return a


def _round_up(plan: _Plan, a: _Analysis, rnd: Optional[np.ndarray]) -> np.ndarray:
    """Whether each element's magnitude moves up one grid step."""
    mode = plan.mode
    inexact = a.frac != 0
    if mode == 1:
        # The last kept bit decides ties; with p - 1 bits dropped (t = 1) it is the hidden bit.
        lsb = np.right_shift(a.trunc, a.d) | (a.d == plan.layout.p - 1)
        lsb &= plan.u(1)
        return inexact & (a.frac + lsb > (a.unit >> plan.u(1)))
    if mode == 2:
        return inexact & (a.bits < plan.SIGN)
    if mode == 3:
        return inexact & (a.bits >= plan.SIGN)
    if mode == 4:
        return np.zeros(a.frac.shape, bool)
    if mode == 5:
        # The fraction, exact in the input's class; chop compares in that class.
        frac = np.ldexp(a.frac.view(plan.layout.itype).astype(plan.layout.ftype),
                        -a.d.astype(np.int32))
        return a.need & (rnd <= frac)
    return a.need & (rnd <= plan.layout.ftype(0.5))


def _finish(plan: _Plan, a: _Analysis, up: np.ndarray, plus_zero=None) -> np.ndarray:
    """The rounded values before range limits; ``plus_zero`` (mask or None): zeros made +0, as
    chop's stochastic branch does with ``sign(y) + (y == 0)``."""
    res = a.trunc + up * a.unit
    np.copyto(res, a.mag, where=~a.finite)  # Inf stays Inf, NaN stays NaN
    res |= a.bits & plan.SIGN
    c = res.view(plan.layout.ftype)
    if plus_zero is not None:
        c[plus_zero & (a.mag == 0)] = 0.0
    return c


def _limit_range(plan: _Plan, c: np.ndarray, x: np.ndarray) -> None:
    """chop's overflow and underflow rules (when explim = 1), in place on ``c`` (x: the inputs)."""
    if plan.explim:
        apply_range_limits(c, x, plan.mode, plan.xmax, plan.xboundary, plan.min_rep, plan.keep_subnormals)


def _draw_nothing(*args: int) -> np.ndarray:
    raise ValueError("Deterministic rounding (modes 1 to 4) draws no random numbers.")


#: The sources of the deterministic modes, which never draw.
_NO_DRAWS = RandomSources(_draw_nothing, _draw_nothing, _draw_nothing)


def _round_general(plan: _Plan, xs: np.ndarray) -> np.ndarray:
    """Deterministic modes: round the (special) elements ``xs`` one by one, range limits included."""
    if xs.size <= _FEW:
        # A few elements: plain Python beats a dozen ufunc calls (same results, tested).
        return np.array([_chop_scalar(plan, v, _NO_DRAWS) for v in xs.tolist()], plan.layout.ftype)
    a = _analyse(plan, xs)
    c = _finish(plan, a, _round_up(plan, a, None))
    _limit_range(plan, c, xs)
    return c


# --- regular elements: whole blocks, one constant shift --------------------------------------

class _Scratch:
    """Block buffers for one thread; see :func:`_scratch`."""

    def __init__(self, plan: _Plan, m: int):
        self.a = np.empty(m, plan.u)
        self.b = np.empty(m, plan.u)
        self.flags = np.empty(m, bool)
        self.up = np.empty(m, bool)
        self.f = np.empty(m, plan.layout.ftype)
        self.rnd = np.empty(m, plan.layout.ftype)
        self.busy = False


_local = threading.local()


class _scratch:
    """``with _scratch(plan, block) as s``: this thread's buffers, kept between calls (cheaper
    than allocating); a nested call (a ``randfunc`` that calls chop) gets fresh ones."""

    __slots__ = ("s",)

    def __init__(self, plan: _Plan, block: int):
        pool = getattr(_local, "scratch", None)
        if pool is None:
            pool = _local.scratch = {}
        s = pool.get((plan.u, block))
        if s is None:
            s = pool[(plan.u, block)] = _Scratch(plan, block)
        self.s = _Scratch(plan, block) if s.busy else s

    def __enter__(self) -> _Scratch:
        self.s.busy = True
        return self.s

    def __exit__(self, *exc) -> None:
        self.s.busy = False


def _find_special(plan: _Plan, ub: np.ndarray, ebits: np.ndarray, tmp: np.ndarray, flags: np.ndarray,
                  more: Optional[np.ndarray] = None):
    """Local indices of the special elements of a block, or None, and the smallest exponent
    field; leaves the exponent fields in ``ebits`` (``tmp``, ``flags``, ``more``: scratch;
    ``more`` for plans with FRACTION)."""
    np.bitwise_and(ub, plan.EXP, out=ebits)
    # Two reductions (reads only) settle the common case of a block without special elements.
    lowest = np.minimum.reduce(ebits)
    regular = lowest >= plan.LO and np.maximum.reduce(ebits) < plan.HI
    fractions = None
    if plan.FRACTION is not None:
        np.bitwise_and(ub, plan.FRAC, out=tmp)
        if np.maximum.reduce(tmp) >= plan.FRACTION:
            fractions = np.greater_equal(tmp, plan.FRACTION, out=more)
    if regular:
        return None if fractions is None else np.flatnonzero(fractions), lowest
    # One unsigned comparison tests LO <= field < HI: below LO the subtraction wraps around.
    np.subtract(ebits, plan.LO, out=tmp)
    np.greater_equal(tmp, plan.SPAN, out=flags)
    if fractions is not None:
        flags |= fractions
    return np.flatnonzero(flags), lowest


def _round_regular_bits(plan: _Plan, ub: np.ndarray, ob: np.ndarray, tmp: np.ndarray) -> None:
    """Round the bit patterns ``ub`` into ``ob`` as if every element were regular (integer ops)."""
    if plan.d0 == 0:
        np.copyto(ob, ub)
        return
    u = plan.u
    round_regular(ub, ob, plan.mode, plan.d0, plan.t, plan.LOW0, plan.KEEP0, plan.UNIT0, plan.HALFM1 + u(1),
                  u(plan.layout.width - 1), tmp)


def round_regular(ub: np.ndarray, ob: np.ndarray, mode: int, d: int, t: int, low: Any, keep: Any, unit: Any,
                  half: Any, top: Any, tmp: np.ndarray) -> None:
    """Round the bit patterns ``ub`` into ``ob`` dropping ``d >= 1`` bits, as if all were regular
    (sign bit untouched; ``tmp``: scratch like ``ub``).  chop's modes 1-4 and CPFloat's -1, 0, 7.
    (Arithmetic on the sign bit, not a masked ufunc: ``where=`` is ten times slower.)"""
    u = ub.dtype.type
    if mode == 1:
        if t == 1:
            np.add(ub, half, out=ob)  # the kept significand is the hidden bit, odd: ties go up
        else:
            np.right_shift(ub, u(d), out=ob)
            ob &= u(1)
            ob += half - u(1)  # half an ulp minus one, plus the last kept bit: ties to even
            ob += ub
    elif mode == -1:
        np.add(ub, half, out=ob)  # ties away from zero
    elif mode == 0:
        np.add(ub, half - u(1), out=ob)  # ties toward zero
    elif mode in (2, 3):
        np.right_shift(ub, top, out=ob)  # 1 for negative
        if mode == 2:
            ob -= u(1)  # all ones for positive: they go up; negative ones are cut
            ob &= low
        else:
            ob *= low  # ulp - 1 for negative
        ob += ub
    elif mode == 7 and t > 1:
        # Round to odd: cut, then set the last kept bit when anything was cut.  The dropped
        # bits plus (ulp - 1) carry into the last kept bit exactly when they are not all zero.
        np.bitwise_and(ub, low, out=tmp)
        tmp += low
        tmp &= unit
        np.bitwise_and(ub, keep, out=ob)
        ob |= tmp
        return
    else:  # toward zero (and round to odd with t = 1: the significand 1 is odd already)
        np.bitwise_and(ub, keep, out=ob)
        return
    ob &= keep


def _add_sub(xb: np.ndarray, big_f: np.ndarray, of: np.ndarray, quiet: bool) -> None:
    """``of = (xb + S) - S``: round to nearest in the FPU; ``quiet`` when the block holds special
    elements (Inf, NaN, huge: redone later) whose warnings are not chop's."""
    with np.errstate(over="ignore", invalid="ignore") if quiet else contextlib.nullcontext():
        np.add(xb, big_f, out=of)
        np.subtract(of, big_f, out=of)


def _round_block_bulk(plan: _Plan, ub: np.ndarray, ob: np.ndarray, s: _Scratch):
    """:func:`_round_block` for ``bulk_small`` plans: special from xboundary up; the window below
    xmins (see ``_Plan``) set to +0."""
    m = ub.size
    a = s.a[:m]
    np.bitwise_and(ub, plan.MAG, out=a)
    smallest = np.minimum.reduce(a)
    special = np.flatnonzero(a >= plan.XB) if np.maximum.reduce(a) >= plan.XB else None
    window = None
    if smallest < plan.LO:  # some below xmins: one unsigned comparison (below the window wraps)
        tmp, flags = s.b[:m], s.flags[:m]
        np.subtract(a, plan.WINDOW_START, out=tmp)
        np.less(tmp, plan.WINDOW_WIDTH, out=flags)
        window = np.flatnonzero(flags)
    if smallest < plan.E_FLOOR:
        np.maximum(a, plan.E_FLOOR, out=a)  # chop's subnormal block and below: e = emin
    a &= plan.EXP
    a += plan.S_OFF  # S = 1.5 * 2^(e + d0), from x's exponent field
    ftype = plan.layout.ftype
    _add_sub(ub.view(ftype), a.view(ftype), ob.view(ftype), special is not None)
    if window is not None and window.size:
        ob[window] = 0  # +0: chop's underflow rule after its first rounding (to half)
    return special


def _round_block_small_directed(plan: _Plan, ub: np.ndarray, ob: np.ndarray, s: _Scratch):
    """:func:`_round_block` for ``small_directed`` plans: below xmin on the grid of min_rep
    (see ``_Plan``); special from the top binade up."""
    m = ub.size
    ebits = s.a[:m]
    np.bitwise_and(ub, plan.EXP, out=ebits)
    lowest, highest = np.minimum.reduce(ebits), np.maximum.reduce(ebits)
    special = np.flatnonzero(ebits >= plan.HI) if highest >= plan.HI else None
    if lowest < plan.LO and plan.whole_block:
        ftype = plan.layout.ftype
        quantum, inverse, f = ebits, s.b[:m], s.f[:m]
        np.maximum(ebits, plan.Q_FLOOR, out=quantum)
        np.subtract(quantum, plan.Q_SHIFT, out=quantum)
        np.subtract(plan.INV_BITS, quantum, out=inverse)
        with np.errstate(over="ignore", invalid="ignore"):  # special elements: redone later
            np.multiply(ub.view(ftype), inverse.view(ftype), out=f)  # exact: a power of two
            plan.directed(f, out=f)
            np.multiply(f, quantum.view(ftype), out=f)
        np.add(f, ftype(0.0), out=ob.view(ftype))  # -0 (from +-0 and from -xmins < x <= 0) -> +0
        return special
    small = None
    if lowest < plan.LO:
        small, f = s.flags[:m], s.f[:m]
        np.less(ebits, plan.LO, out=small)
        with np.errstate(over="ignore", invalid="ignore"):  # special elements: redone later
            np.multiply(ub.view(plan.layout.ftype), plan.INV_REP, out=f)
            plan.directed(f, out=f)
            np.multiply(f, plan.REP, out=f)
        np.add(f, plan.layout.ftype(0.0), out=f)  # -0 (from +-0 and from -min_rep < x <= 0) -> +0
    _round_regular_bits(plan, ub, ob, s.b[:m])
    if small is not None:
        np.copyto(ob.view(plan.layout.ftype), f, where=small)
    return special


def _round_block(plan: _Plan, ub: np.ndarray, ob: np.ndarray, s: _Scratch):
    """Round a block as if regular; return the local indices of its special elements (or None)."""
    if plan.bulk_small:
        return _round_block_bulk(plan, ub, ob, s)
    if plan.small_directed:
        return _round_block_small_directed(plan, ub, ob, s)
    m = ub.size
    special, lowest = _find_special(plan, ub, s.a[:m], s.b[:m], s.flags[:m], s.up[:m])
    if plan.float_rn:
        ftype = plan.layout.ftype
        big = s.a[:m]
        if plan.raise_exponent and lowest < plan.E_FLOOR:
            np.maximum(big, plan.E_FLOOR, out=big)  # chop's subnormal block: e = emin
        np.add(big, plan.S_OFF, out=big)  # S = 1.5 * 2^(e + d0), from x's exponent field
        _add_sub(ub.view(ftype), big.view(ftype), ob.view(ftype), special is not None)
    else:
        _round_regular_bits(plan, ub, ob, s.a[:m])
    return special


def _chop_deterministic(plan: _Plan, xu: np.ndarray, ou: np.ndarray, finish_special=None) -> None:
    """Modes 1-4 without flips on flat bit views (any element order); see :func:`chop_array`."""
    n = xu.size
    threads, block, n_blocks = _tiling(n)

    def fix(pending):
        idx = np.concatenate(pending)
        xs = xu.take(idx).view(plan.layout.ftype)
        with np.errstate(over="ignore", invalid="ignore"):  # overflow to Inf is chop's rule
            c = _round_general(plan, xs)
            if finish_special is not None:
                finish_special(c, xs)
            ou[idx] = c.view(plan.u)

    def work(first, stop):
        pending, count = [], 0
        with _scratch(plan, block) as s:
            for b in range(first, stop):
                i = b * block
                j = min(i + block, n)
                special = _round_block(plan, xu[i:j], ou[i:j], s)
                if special is not None:
                    pending.append(special + i)
                    count += special.size
                    if count >= _FLUSH:
                        fix(pending)
                        pending, count = [], 0
        if pending:
            fix(pending)

    _map_ranges(work, n_blocks, threads)


# --- stochastic rounding: draw exactly as chop.m, round in blocks ------------------------------

def _round_stochastic_regular(plan: _Plan, ub, ob, low, rnd, s: _Scratch) -> None:
    """Stochastic rounding of a block as if regular; ``low`` holds the dropped bits (clobbered)."""
    m = ub.size
    up = s.up[:m]
    if plan.mode == 5:
        f = s.f[:m]
        np.copyto(f, low.view(plan.layout.itype), casting="unsafe")  # exact: below 2^(p-1)
        np.multiply(f, plan.FRAC_SCALE, out=f)  # chop's fraction of the scaled value
        np.less_equal(rnd, f, out=up)
    else:
        np.less_equal(rnd, plan.layout.ftype(0.5), out=up)
    np.bitwise_and(ub, plan.KEEP0, out=ob)
    # (A masked add, out=ob, where=up, is ten times slower on a random mask.)
    np.multiply(up, plan.UNIT0, out=low)
    np.add(ob, low, out=ob)


def _normal_need(plan: _Plan, xs: np.ndarray) -> np.ndarray:
    """Which of the (special) elements ``xs`` draw a number in chop's normal block."""
    if xs.size <= _FEW:
        return np.array([_draws_in_normal_block(plan, v) for v in xs.tolist()], bool)
    a = _analyse(plan, xs)
    return a.need & ~a.sub if a.sub is not None else a.need


def _draws_in_normal_block(plan: _Plan, v: float) -> bool:
    """:func:`_normal_need` for one value, in plain Python."""
    e = math.frexp(v)[1] - 1
    if plan.explim and plan.emins <= e < plan.emin:
        return False  # chop's subnormal block
    if not math.isfinite(v):
        return True  # inf - inf is NaN, not 0: Inf and NaN draw
    y = math.ldexp(v, plan.t - 1 - e)
    return y != math.floor(y)


def _finish_special(plan: _Plan, out, special, xs, rnd, k_normal, draw) -> None:
    """Round the special elements (normal-block numbers in ``rnd``) into ``out``; draws the
    subnormal block's numbers with ``draw`` (chop's second call)."""
    a = _analyse(plan, xs)
    plus_zero = np.full(xs.shape, k_normal > 0)
    if a.sub is not None:
        sub_need = a.need & a.sub
        k_sub = int(np.count_nonzero(sub_need))
        if k_sub:
            rnd[sub_need] = draw(k_sub)
        plus_zero[a.sub] = k_sub > 0
    c = _finish(plan, a, _round_up(plan, a, rnd), plus_zero)
    _limit_range(plan, c, xs)
    out[special] = c


def _block_numbers(plan: _Plan, low, special, need_special, k: Union[int, np.integer], block_draws,
                   s: _Scratch):
    """The block's numbers aligned with its elements (2, never up, where none); ``low``: the
    dropped bits; ``special``/``need_special``: special elements' local indices, whether they draw."""
    m = low.size
    if k == m:
        return block_draws  # every element draws: the numbers are already in place
    rnd = s.rnd[:m]
    if k == 0:
        rnd.fill(2.0)
        return rnd
    holes = s.flags[:m]
    np.equal(low, 0, out=holes)
    if special is not None:
        holes[special] = ~need_special
    if m - k <= _FEW:
        # A few elements without a number: copy the numbers around them (cheaper than a mask).
        start = taken = 0
        for h in np.flatnonzero(holes).tolist():
            rnd[start:h] = block_draws[taken:taken + h - start]
            taken += h - start
            rnd[h] = 2.0
            start = h + 1
        rnd[start:] = block_draws[taken:]
    else:
        rnd.fill(2.0)
        np.logical_not(holes, out=holes)
        np.place(rnd, holes, block_draws)
    return rnd


def _chop_stochastic_streamed(plan: _Plan, xf: np.ndarray, draw) -> np.ndarray:
    """Modes 5 and 6 without flips, drawing block by block from a sequential stream in one pass
    (special elements last, after chop's call for the subnormal block); one thread (measured)."""
    n = xf.size
    xu = xf.view(plan.u)
    out = np.empty_like(xf)
    ou = out.view(plan.u)
    block = BLOCK
    special_parts, rnd_parts = [], []
    k_normal = 0
    with _scratch(plan, block) as s:
        for i in range(0, n, block):
            j = min(i + block, n)
            ub, ob, m = xu[i:j], ou[i:j], j - i
            low = s.b[:m]
            special, _ = _find_special(plan, ub, s.a[:m], low, s.flags[:m])
            np.bitwise_and(ub, plan.LOW0, out=low)
            k = np.count_nonzero(low)
            need_special = None
            if special is not None:
                need_special = _normal_need(plan, xf[i + special])
                k += np.count_nonzero(need_special) - np.count_nonzero(low[special])
            rnd = _block_numbers(plan, low, special, need_special, k, draw(k) if k else None, s)
            k_normal += k
            if special is not None:
                special_parts.append(special + i)
                rnd_parts.append(rnd[special])
            _round_stochastic_regular(plan, ub, ob, low, rnd, s)
    if special_parts:
        special = np.concatenate(special_parts)
        _finish_special(plan, out, special, xf[special], np.concatenate(rnd_parts), k_normal, draw)
    return out


def _chop_stochastic(plan: _Plan, xf: np.ndarray, draw) -> np.ndarray:
    """Modes 5 and 6 without flips on ``xf`` (column-major), calling a user's ``randfunc`` as
    chop.m does (once per block of chop.m): a pass counts the draws per block, the draws are made,
    and a second pass rounds, each element taking its number in order."""
    n = xf.size
    xu = xf.view(plan.u)
    out = np.empty_like(xf)
    ou = out.view(plan.u)
    threads, block, n_blocks = _tiling(n)

    # Pass 1: per block, the elements whose low d0 bits are not zero, and the special elements.
    regular_counts = np.empty(n_blocks, np.int64)

    def count(first, stop):
        found = []
        with _scratch(plan, block) as s:
            for b in range(first, stop):
                i = b * block
                j = min(i + block, n)
                ub, m = xu[i:j], j - i
                special, _ = _find_special(plan, ub, s.a[:m], s.b[:m], s.flags[:m])
                np.bitwise_and(ub, plan.LOW0, out=s.a[:m])
                regular_counts[b] = np.count_nonzero(s.a[:m])
                if special is not None:
                    found.append(special + i)
        return found

    parts = [p for found in _map_ranges(count, n_blocks, threads) for p in found]
    special = np.concatenate(parts) if parts else np.zeros(0, np.intp)
    xs = xf[special]
    need_special = _normal_need(plan, xs)
    block_of = special // block
    counted = (xs.view(plan.u) & plan.LOW0) != 0  # what pass 1 counted for them
    normal_counts = (regular_counts
                     - np.bincount(block_of, counted, n_blocks).astype(np.int64)
                     + np.bincount(block_of, need_special, n_blocks).astype(np.int64))
    k_normal = int(normal_counts.sum())
    draws = draw(k_normal) if k_normal else None
    starts = np.zeros(n_blocks + 1, np.int64)
    np.cumsum(normal_counts, out=starts[1:])
    special_starts = np.searchsorted(special, np.arange(n_blocks + 1) * block)
    special_rnd = np.empty(xs.shape, plan.layout.ftype)

    # Pass 2: round the regular elements with their numbers; collect those of the special ones.
    def round_blocks(first, stop):
        with _scratch(plan, block) as s:
            for b in range(first, stop):
                i = b * block
                j = min(i + block, n)
                ub, ob, m = xu[i:j], ou[i:j], j - i
                s0, s1 = special_starts[b], special_starts[b + 1]
                local = special[s0:s1] - i if s1 > s0 else None
                low = s.a[:m]
                np.bitwise_and(ub, plan.LOW0, out=low)
                k = int(normal_counts[b])
                block_draws = draws[starts[b]:starts[b] + k] if k else None
                rnd = _block_numbers(plan, low, local, need_special[s0:s1], k, block_draws, s)
                if local is not None:
                    special_rnd[s0:s1] = rnd[local]
                _round_stochastic_regular(plan, ub, ob, low, rnd, s)

    _map_ranges(round_blocks, n_blocks, threads)
    if special.size:
        _finish_special(plan, out, special, xs, special_rnd, k_normal, draw)
    return out


# --- bit flips: every element through the per-element path --------------------------------------

def _chop_with_flips(plan: _Plan, xf: np.ndarray, spec: RoundingSpec, sources: RandomSources) -> np.ndarray:
    """Any mode with ``flip = 1`` on ``xf`` (column-major), every element by the per-element
    path.  chop.m's order per block (normal, then subnormal if not empty): ``randfunc``
    (stochastic modes), ``rand`` for every element, ``randi(t-1)`` for the chosen ones."""
    L = plan.layout
    n = xf.size
    stochastic = plan.mode >= 5
    chunks = [(i, min(i + _FLIP_CHUNK, n)) for i in range(0, n, _FLIP_CHUNK)]

    counts = np.zeros(4, np.int64)  # draws normal, draws sub, elements normal, elements sub
    for i, j in chunks:
        a = _analyse(plan, xf[i:j])
        sub = a.sub if a.sub is not None else np.zeros(j - i, bool)
        n_sub = int(np.count_nonzero(sub))
        k_sub = int(np.count_nonzero(a.need & sub))
        counts += (int(np.count_nonzero(a.need)) - k_sub, k_sub, j - i - n_sub, n_sub)
    k_normal, k_sub, n_normal, n_sub = (int(v) for v in counts)

    def draw_block(k: int, count: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """One block's draws: uniforms for stochastic rounding, flip choices, flipped bits."""
        rnd = sources.stochastic(k).astype(L.ftype, copy=False) if stochastic and k else np.zeros(0, L.ftype)
        if plan.t < 2:
            raise ValueError(FLIP_PRECISION_ERROR)
        chosen = sources.flip_uniform(count) <= spec.p
        m = int(np.count_nonzero(chosen))
        bits = sources.flip_randi(plan.t - 1, m) if m else np.zeros(0, np.int64)
        return rnd, chosen, np.asarray(bits, np.int64)

    normal = draw_block(k_normal, n_normal)
    no_draws = (np.zeros(0, L.ftype), np.zeros(0, bool), np.zeros(0, np.int64))
    sub_draws = draw_block(k_sub, n_sub) if n_sub else no_draws

    out = np.empty_like(xf)
    pos = np.zeros((2, 3), np.int64)  # per kind: next draw, next flip choice, next bit
    for i, j in chunks:
        xs = xf[i:j]
        a = _analyse(plan, xs)
        kind = a.sub if a.sub is not None else np.zeros(j - i, bool)
        rnd = np.full(j - i, 2.0, L.ftype) if stochastic else None
        chosen = np.empty(j - i, bool)
        bits = np.zeros(j - i, np.int64)
        for s, drawn in ((0, normal), (1, sub_draws)):
            members = kind if s else ~kind
            block_rnd, block_chosen, block_bits = drawn
            if rnd is not None:  # stochastic
                wanted = a.need & members
                k = int(np.count_nonzero(wanted))
                if k:
                    rnd[wanted] = block_rnd[pos[s, 0]:pos[s, 0] + k]
                pos[s, 0] += k
            m = int(np.count_nonzero(members))
            chosen[members] = block_chosen[pos[s, 1]:pos[s, 1] + m]
            pos[s, 1] += m
            picked = chosen & members
            k = int(np.count_nonzero(picked))
            bits[picked] = block_bits[pos[s, 2]:pos[s, 2] + k]
            pos[s, 2] += k
        plus_zero = None
        if stochastic:
            plus_zero = np.where(kind, k_sub > 0, k_normal > 0)
        c = _finish(plan, a, _round_up(plan, a, rnd), plus_zero)
        _flip(plan, c, xs, chosen, bits)
        _limit_range(plan, c, xs)
        out[i:j] = c
    return out


def _flip(plan: _Plan, c: np.ndarray, xs: np.ndarray, chosen: np.ndarray, bits: np.ndarray) -> None:
    """Flip bit ``bits - 1`` of the scaled integer of the chosen elements, in place on ``c``."""
    idx = np.flatnonzero(chosen)
    if idx.size == 0:
        return
    key = np.frexp(xs[idx])[1] + plan.off
    quantum = plan.quantum_table.take(key)
    y = np.ldexp(c[idx], -quantum)  # the rounded integer (exact: c is on its grid)
    finite = np.isfinite(y)
    yf = y[finite]
    magnitude = np.abs(yf).astype(np.int64) ^ np.left_shift(1, bits[idx][finite] - 1)
    # As chop.m: sign (1 at zero) times the new integer, stored back in the input's class.
    y[finite] = (np.sign(yf) + (yf == 0)) * magnitude
    c[idx] = np.ldexp(y, quantum)


# --- one element: plain Python -----------------------------------------------------------------

def _chop_scalar(plan: _Plan, v: float, sources: RandomSources) -> float:
    """chop of one value, in Python floats (exact: every step is a scaling or an integer)."""
    mode, t = plan.mode, plan.t
    e = math.frexp(v)[1] - 1
    quantum = plan.emins if plan.explim and plan.emins <= e < plan.emin else e - t + 1
    y = math.ldexp(v, -quantum)  # |y| < 2^t: no overflow, and exact
    if y == 0.0 or not math.isfinite(y):
        r = y
        if mode >= 5 and y != 0.0:  # Inf and NaN draw a number and stay as they are
            sources.stochastic(1)
    elif mode == 1:
        r = float(round(y))  # ties to even
    elif mode == 2:
        r = float(math.ceil(y))
    elif mode == 3:
        r = float(math.floor(y))
    elif mode == 4:
        r = float(math.trunc(y))
    else:
        magnitude = abs(y)
        low = math.floor(magnitude)
        frac = magnitude - low
        if frac == 0.0:
            r = y
        else:
            rnd = float(np.asarray(sources.stochastic(1), np.float64).reshape(-1)[0])
            if plan.layout.ftype is np.float32:
                rnd = float(np.float32(rnd))  # chop compares in single precision
            up = rnd <= (frac if mode == 5 else 0.5)
            r = math.copysign(float(low + 1 if up else low), y)
    try:
        c = math.ldexp(r, quantum)
    except OverflowError:
        c = math.copysign(math.inf, r)
    if plan.explim:
        xmax, xboundary, min_rep = plan.limits
        if not (abs(v) <= xmax and abs(c) >= min_rep):  # (else limit_value returns c: xboundary > xmax)
            c = limit_value(c, v, plan.mode, xmax, xboundary, min_rep, plan.keep_subnormals)
    return c


def limit_value(c: float, x: float, mode: float, xmax: float, xboundary: float, min_rep: float,
                keep_subnormals: bool) -> float:
    """chop.m's overflow and underflow rules (``explim`` on) on the result ``c`` of the input ``x``
    in mode ``mode`` (1-6); ``min_rep``: ``xmins`` with subnormals, else ``xmin``.  Plain scalar
    code on purpose: the compiled engine compiles this very function with Numba."""
    if mode == 1 or mode == 6:
        if x >= xboundary:
            return math.inf
        if x <= -xboundary:
            return -math.inf
    elif mode == 2:
        if x > xmax:
            return math.inf
        if x < -xmax and x != -math.inf:
            return -xmax
    elif mode == 3:
        if x > xmax and x != math.inf:
            return xmax
        if x < -xmax:
            return -math.inf
    else:
        if x > xmax and x != math.inf:
            return xmax
        if x < -xmax and x != -math.inf:
            return -xmax
    magnitude = abs(c)
    if not magnitude < min_rep:
        return c
    if mode == 1:
        half = min_rep / 2
        if magnitude > half or (magnitude == half and not keep_subnormals):
            return math.copysign(min_rep, c)
    elif mode == 2 and c > 0:
        return min_rep
    elif mode == 3 and c < 0:
        return -min_rep
    return 0.0


# --- entry point -----------------------------------------------------------------------------------

def is_sequential_stream(func) -> bool:
    """Whether ``func(a)`` then ``func(b)`` gives the numbers of ``func(a + b)``: MATLAB's stream
    and a NumPy Generator's ``random`` (False for a user's ``randfunc``: called as chop.m calls it)."""
    if func is stream_uniform:
        return True
    owner = getattr(func, "__self__", None)
    return isinstance(owner, np.random.Generator) and getattr(func, "__name__", "") == "random"


def chop_scalar(value: float, spec: RoundingSpec, sources: RandomSources, single: bool = False) -> float:
    """chop of one Python float, no array involved (for a facade's scalar fast path).

    ``single``: the value is a float32; the caller rounds the result to single (exact there,
    or Inf).  Bit flips are not handled here: use :func:`chop_array`.
    """
    if spec.flips:
        raise ValueError("chop_scalar does not flip bits; use chop_array")
    if spec.round >= 5 and getattr(sources, "counter", None) is not None:
        return float(chop_array(np.array(value, np.float32 if single else np.float64), spec, sources))
    return _chop_scalar(_plan_for(spec, _SINGLE if single else _DOUBLE), value, sources)


def scalar_kernel(spec: RoundingSpec, sources: RandomSources) -> Callable[[float], float]:
    """:func:`chop_scalar` of a Python float (double) by ``spec``, as a function of the value with
    its plan found once (for a caller that rounds many floats with one spec: no lookup per call).
    Deterministic modes (1-4) without flips only."""
    if spec.flips or spec.round >= 5:
        raise ValueError("scalar_kernel serves the deterministic modes 1-4 without flips; use chop_scalar")
    return functools.partial(_chop_scalar, _plan_for(spec, _DOUBLE), sources=sources)


_SINGLE, _DOUBLE = np.dtype(np.float32), np.dtype(np.float64)


def chop_array(x: np.ndarray, spec: RoundingSpec, sources: RandomSources,
               finish_special: Optional[Callable[[np.ndarray, np.ndarray], None]] = None,
               small_special: bool = False, special_fraction: Optional[int] = None) -> np.ndarray:
    """Round ``x`` (float32 or float64 ndarray, any shape and layout) by ``spec``.

    Returns a new array of ``x``'s shape and dtype, bit for bit
    :func:`pychop_compat.rules.chop.chop_vector` on ``x`` in column-major order with the same
    random numbers in the same calls.  ``finish_special(c, xs)`` (an encoding's rules)
    post-processes results in place and must leave finite nonzero results and +0 as they are:
    in modes 1-4 without flips it sees the special elements only.  With ``small_special``
    every element below the regular range is special, down to the smallest (a rule on small
    elements, ``chop_at``'s old tiny-number rule, may then change their results too).
    ``special_fraction`` (modes 1-4 without flips only; implies ``small_special``'s plans):
    every element whose fraction field (the stored significand bits of ``x``'s class, as an
    unsigned integer) is at least ``special_fraction`` is special too, whatever its exponent
    (``chop_at``'s old exponent ``floor(log2(|x|))`` differs from frexp's just below powers of
    two: ``finish_special`` rounds those again).
    """
    if special_fraction is not None and (spec.flips or spec.round >= 5):
        raise ValueError("special_fraction serves the deterministic modes 1-4 without flips only")
    out = _chop_array(x, spec, sources, finish_special, small_special, special_fraction)
    if finish_special is not None and (spec.flips or spec.round >= 5 or x.size <= 1):
        with np.errstate(over="ignore", invalid="ignore"):
            finish_special(out, x)
    return out


def _chop_array(x: np.ndarray, spec: RoundingSpec, sources: RandomSources, finish_special,
                small_special: bool = False, special_fraction: Optional[int] = None) -> np.ndarray:
    dtype = x.dtype
    if dtype not in LAYOUTS:
        if dtype.kind == "f" and not dtype.isnative and dtype.newbyteorder("=") in LAYOUTS:
            x = x.astype(dtype.newbyteorder("="))  # the bit views below need native order
            dtype = x.dtype
        else:
            raise TypeError(f"chop_array needs float32 or float64, not {dtype}")
    plan = _plan_for(spec, dtype, small_special, special_fraction)
    given = getattr(sources, "given", None)
    if given is not None and plan.mode >= 5 and not spec.flips:
        # Numbers given per element (row-major), as the counter's: nn's uniforms.
        with np.errstate(over="ignore", invalid="ignore"):
            return chop_counter(x, spec, given)
    counter = getattr(sources, "counter", None)
    if counter is not None and (spec.flips or plan.mode >= 5):
        # Chop(rng=<int>): every element its own numbers, a function of its row-major index.
        if spec.flips and plan.t < 2:
            raise ValueError(FLIP_PRECISION_ERROR)
        with np.errstate(over="ignore", invalid="ignore"):
            return chop_counter(x, spec, counter.take(x.size))
    if x.size == 1 and not spec.flips:
        c = _chop_scalar(plan, x.item(), sources)
        if dtype == np.float32 and abs(c) > _FLOAT32_MAX:
            c = math.copysign(math.inf, c)  # beyond single's range: Inf, without a warning
        return np.array(c, dtype).reshape(x.shape)
    if x.size == 0 and not spec.flips:  # (with flips chop.m still calls rand(0) and checks t)
        return x.copy()
    if spec.flips or plan.mode >= 5:
        # Overflow to Inf and NaN comparisons are part of chop's semantics, not accidents.
        with np.errstate(over="ignore", invalid="ignore"):
            return _chop_random(x, plan, spec, sources)
    out, x_flat, out_flat = in_memory_order(x)  # the element order is free: keep the caller's
    _chop_deterministic(plan, x_flat.view(plan.u), out_flat.view(plan.u), finish_special)
    return out


_FLOAT32_MAX = float(np.finfo(np.float32).max)


def _chop_random(x: np.ndarray, plan: _Plan, spec: RoundingSpec, sources: RandomSources) -> np.ndarray:
    """Stochastic modes and bit flips: random numbers go to elements in column-major order."""
    xf = x.ravel(order="F")
    if spec.flips:
        return _chop_with_flips(plan, xf, spec, sources).reshape(x.shape, order="F")
    stochastic, ftype = sources.stochastic, plan.layout.ftype

    def draw(k):  # with single input chop compares in single precision
        return np.asarray(stochastic(k), np.float64).reshape(-1).astype(ftype, copy=False)

    chop = _chop_stochastic_streamed if is_sequential_stream(stochastic) else _chop_stochastic
    return chop(plan, xf, draw).reshape(x.shape, order="F")


def chop_counter(x: np.ndarray, spec: RoundingSpec, stream: Any) -> np.ndarray:
    """Stochastic modes and bit flips with the numbers of a counter-based stream, or given.

    ``stream`` (a :class:`~pychop_compat.random.counter.CounterStream`) gives element ``i``
    (row-major) the numbers ``u_s(offset + i)``: ``u_ROUND`` for stochastic rounding; with flips
    bit ``1 + floor((t - 1) u_FLIP_BIT)`` of the rounded integer where ``u_FLIP_CHOICE <= p``.
    An array broadcastable to ``x`` instead gives each element's stochastic number (no flips).
    Elements are independent (zeros come back +0 in stochastic modes, as in a block that drew).
    """
    from ..random.counter import uniform
    from .xp import library_namespace

    xp = library_namespace("numpy").xp

    plan = _plan_for(spec, x.dtype)
    ftype = plan.layout.ftype
    xc = np.ascontiguousarray(x).reshape(-1)
    out = np.empty_like(xc)
    stochastic = plan.mode >= 5
    given = None
    if not isinstance(stream, CounterStream):
        if spec.flips:
            raise ValueError("chop_counter: numbers given per element serve stochastic rounding only.")
        given = np.broadcast_to(np.asarray(stream), x.shape).reshape(-1)
    n = xc.size
    for i in range(0, n, _FLIP_CHUNK):
        j = min(i + _FLIP_CHUNK, n)
        xs = xc[i:j]
        a = _analyse(plan, xs)
        rnd: Optional[np.ndarray]
        if given is not None:
            rnd = given[i:j].astype(ftype)
        else:
            keys, offset = stream.keys, stream.offset
            index = np.arange(i, j, dtype=np.int64)
            rnd = uniform(xp, keys[0], offset, index).astype(ftype) if stochastic else None
        c = _finish(plan, a, _round_up(plan, a, rnd), np.True_ if stochastic else None)
        if spec.flips:
            chosen = uniform(xp, keys[1], offset, index) <= spec.p
            bits = 1 + np.floor((plan.t - 1) * uniform(xp, keys[2], offset, index)).astype(np.int64)
            _flip(plan, c, xs, chosen, bits)
        _limit_range(plan, c, xs)
        out[i:j] = c
    return out.reshape(x.shape)


def in_memory_order(x: np.ndarray) -> tuple:
    """``(out, x_flat, out_flat)`` for elementwise work whose element order is free: ``out`` new,
    in ``x``'s memory order (C or Fortran; C for other layouts, copied first), and 1-D views of
    ``x`` and ``out`` in that order (sequential passes; the result keeps the caller's layout)."""
    order: Literal["C", "F"]
    if x.flags.c_contiguous:
        order = "C"
    elif x.flags.f_contiguous:
        order = "F"
    else:
        x, order = np.ascontiguousarray(x), "C"
    out = np.empty(x.shape, x.dtype, order=order)
    return out, x.reshape(-1, order=order), out.reshape(-1, order=order)
