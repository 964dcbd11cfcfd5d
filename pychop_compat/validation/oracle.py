"""Independent, exact rounding oracles (mpmath) and the inputs they are checked on.

Nothing here uses :mod:`pychop_compat`.  Each input is decomposed exactly
(:func:`mpmath.libmp.from_float`) into ``(-1)**sign * man * 2**exp`` and
rounded by integer arithmetic on ``man``; thresholds are exact mpmath values
(see :func:`double_bound`).  :func:`ieee_round` is correct IEEE 754 rounding,
:func:`chop_rule_round` the documented rules of MATLAB ``chop.m`` (commit
906c31e: double rounding below ``emins``, the subnormal grid even without
subnormals, overflow decided on the input), and :func:`scalar_grid_round` a
slow cross-check with mpmath's own rounding.

Notation (as in ``chop.m``): ``emin = 1 - emax``, ``emins = emin + 1 - t``,
``xmin = 2**emin``, ``xmins = 2**emins``, ``xmax = 2**emax * (2 - 2**(1-t))``,
``xboundary = 2**emax * (2 - 2**-t)``; ``x = f * 2**e`` with ``1 <= |f| < 2``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import ArrayLike
from mpmath import libmp

__all__ = [
    "ORACLE_CASES", "DATASETS", "case_spec", "case_options", "oracle_inputs",
    "FormatSpec", "FORMATS", "ExactValues", "double_bound", "grid_neighbours",
    "ieee_round", "chop_rule_round", "neighbours", "is_representable",
    "scalar_grid_round",
]

#: Classes of the discarded part ``r`` of ``|x| = A * 2**q + r`` (``0 <= r < 2**q``).
EXACT, BELOW, TIE, ABOVE = 0, 1, 2, 3


@dataclass(frozen=True)
class FormatSpec:
    """A binary floating-point format ``(t, emax)`` and its exact thresholds.

    Parameters
    ----------
    t : int
        Precision in bits, including the hidden bit.
    emax : int
        Largest exponent; ``emin = 1 - emax``.

    Notes
    -----
    The ``*_mpf`` attributes are exact raw mpmath values (``libmp`` tuples);
    the float ones are exact too (``xboundary`` of double is not a double,
    hence :func:`double_bound`).
    """

    t: int
    emax: int

    @property
    def emin(self) -> int:
        return 1 - self.emax

    @property
    def emins(self) -> int:
        return self.emin + 1 - self.t

    @property
    def xmin_mpf(self):
        return libmp.from_man_exp(1, self.emin)

    @property
    def xmins_mpf(self):
        return libmp.from_man_exp(1, self.emins)

    @property
    def xmax_mpf(self):
        # 2**emax * (2 - 2**(1-t)) = (2**t - 1) * 2**(emax + 1 - t)
        return libmp.from_man_exp(2**self.t - 1, self.emax + 1 - self.t)

    @property
    def xboundary_mpf(self):
        # 2**emax * (2 - 2**-t) = (2**(t+1) - 1) * 2**(emax - t)
        return libmp.from_man_exp(2 ** (self.t + 1) - 1, self.emax - self.t)

    @property
    def xmin(self) -> float:
        return double_bound(self.xmin_mpf, "nearest")

    @property
    def xmins(self) -> float:
        return double_bound(self.xmins_mpf, "nearest")

    @property
    def xmax(self) -> float:
        return double_bound(self.xmax_mpf, "nearest")


#: Built-in formats of ``chop.m`` as ``(t, emax)``.
FORMATS = {
    "q43": FormatSpec(4, 7), "fp8-e4m3": FormatSpec(4, 7),
    "q52": FormatSpec(3, 15), "fp8-e5m2": FormatSpec(3, 15),
    "b": FormatSpec(8, 127), "bfloat16": FormatSpec(8, 127),
    "h": FormatSpec(11, 15), "half": FormatSpec(11, 15), "fp16": FormatSpec(11, 15),
    "s": FormatSpec(24, 127), "single": FormatSpec(24, 127), "fp32": FormatSpec(24, 127),
    "d": FormatSpec(53, 1023), "double": FormatSpec(53, 1023), "fp64": FormatSpec(53, 1023),
}


def double_bound(value: Any, direction: str) -> float:
    """Convert an exact mpmath value to a double, rounding in a given direction.

    Parameters
    ----------
    value : tuple
        A raw mpmath value (``libmp`` tuple), e.g. ``FormatSpec.xboundary_mpf``.
    direction : {'floor', 'ceil', 'nearest'}
        ``'floor'``: largest double ``<= value``; ``'ceil'``: smallest double
        ``>= value`` (``inf`` beyond the double range); ``'nearest'``: the value
        itself, which must then be exactly representable.

    Returns
    -------
    float

    Notes
    -----
    For a double ``x``: ``x >= v  <=>  x >= double_bound(v, 'ceil')`` and
    ``x > v  <=>  x > double_bound(v, 'floor')`` (exact vectorised comparisons).
    ``to_float``'s candidate is corrected by exact comparisons: it is not
    reliable with directed rounding near underflow and overflow.
    """
    r = libmp.to_float(value, rnd=libmp.round_nearest)
    down = lambda v: float(np.nextafter(v, -np.inf))    # noqa: E731
    if direction == "nearest":
        if libmp.mpf_cmp(libmp.from_float(r), value) != 0:
            raise ValueError("value is not a double")
        return r
    if direction == "ceil":
        with np.errstate(over="ignore"):
            while libmp.mpf_cmp(libmp.from_float(r), value) < 0:
                r = float(np.nextafter(r, np.inf))
            while r != -np.inf and libmp.mpf_cmp(libmp.from_float(down(r)), value) >= 0:
                r = down(r)
        return r
    if direction == "floor":
        return -double_bound(libmp.mpf_neg(value), "ceil")
    raise ValueError(direction)


class ExactValues:
    """Exact decomposition of an array of doubles (or floats) via mpmath.

    Parameters
    ----------
    values : array_like
        float64 or float32 values (float32 is widened to float64 exactly).

    Attributes
    ----------
    x : ndarray of float64
        The flattened values.
    dtype : numpy.dtype
        The dtype of the input (float32 or float64).
    neg, finite, nonzero : ndarray of bool
        Sign bit, ``isfinite`` and ``finite & (x != 0)``.
    man, exp : ndarray of int64
        For finite nonzero values ``|x| = man * 2**exp`` with ``man`` odd
        (from :func:`mpmath.libmp.from_float`); zero elsewhere.
    e : ndarray of int64
        Exponent with ``|x| = f * 2**e``, ``1 <= f < 2`` (finite nonzero only).
    """

    def __init__(self, values: ArrayLike) -> None:
        arr = np.asarray(values)
        if arr.dtype not in (np.float32, np.float64):
            raise TypeError(f"float32 or float64 expected, got {arr.dtype}")
        self.dtype = arr.dtype
        self.shape = arr.shape
        self.x = arr.astype(np.float64).ravel()
        self.neg = np.signbit(self.x)
        self.finite = np.isfinite(self.x)
        self.nonzero = self.finite & (self.x != 0)
        self.man, self.exp, self.e = (np.zeros(self.x.size, np.int64) for _ in range(3))
        idx = np.flatnonzero(self.nonzero)
        if idx.size:
            parts = [libmp.from_float(v) for v in self.x[idx].tolist()]
            _, man, exp, bc = (np.array(col, dtype=np.int64) for col in zip(*parts))
            self.man[idx], self.exp[idx], self.e[idx] = man, exp, exp + bc - 1

    def __len__(self):
        return self.x.size


def _as_exact(values) -> ExactValues:
    return values if isinstance(values, ExactValues) else ExactValues(values)


@dataclass
class GridNeighbours:
    """Both neighbours of ``|x|`` on a grid ``A * 2**q`` and the rounding class.

    Attributes
    ----------
    A : ndarray of int64
        ``floor(|x| / 2**q)``.
    cls : ndarray of int8
        ``EXACT`` (``|x| = A * 2**q``), ``BELOW``/``TIE``/``ABOVE``: the
        discarded part is below/equal to/above half of ``2**q``.
    down, up : ndarray of float64
        ``A * 2**q`` and ``(A + (cls != EXACT)) * 2**q`` (magnitudes; ``inf``
        when the double range is exceeded).
    """

    A: np.ndarray
    cls: np.ndarray
    down: np.ndarray
    up: np.ndarray


def grid_neighbours(ev: ExactValues, q: np.ndarray) -> GridNeighbours:
    """Exact neighbours of ``|x|`` on the grid with spacing ``2**q``.

    Parameters
    ----------
    ev : ExactValues
        Decomposed inputs.
    q : ndarray of int
        Per-value exponent of the grid spacing, with ``|x| < 2**(q + 53)`` (``A`` fits in int64).

    Returns
    -------
    GridNeighbours
        Entries for non-finite or zero inputs are meaningless (zero).
    """
    q = np.broadcast_to(np.asarray(q, dtype=np.int64), ev.x.shape)
    man, exp = ev.man, ev.exp
    shift = q - exp                                   # > 0: bits are discarded
    left = np.clip(-shift, 0, 62)
    if np.any(ev.nonzero & (shift < 0) & (ev.e - q >= 53)):
        raise ValueError("grid too fine for an int64 significand")
    right = np.clip(shift, 0, 62)
    A = np.where(shift <= 0, np.left_shift(man, left), np.right_shift(man, right))
    A = np.where(shift > 62, 0, A)                    # man < 2**53 <= 2**(shift-1): below half
    rem = man - np.left_shift(A, right)
    rem = np.where(shift > 62, man, rem)
    half = np.left_shift(np.int64(1), np.clip(right - 1, 0, 61))
    cls = np.select(
        [(shift <= 0) | (rem == 0), shift > 62, rem < half, rem == half],
        [EXACT, BELOW, BELOW, TIE], ABOVE).astype(np.int8)
    cls[~ev.nonzero] = EXACT
    qi = q.astype(np.int32)
    with np.errstate(over="ignore"):
        down = np.ldexp(A.astype(np.float64), qi)     # exact: A < 2**53 (or A + 1 <= 2**53)
        up = np.ldexp((A + (cls != EXACT)).astype(np.float64), qi)
    return GridNeighbours(A, cls, down, up)


def _select(ev: ExactValues, nb: GridNeighbours, mode: int) -> np.ndarray:
    """Signed result of rounding mode 1-4 from the neighbours (float64)."""
    if mode not in (1, 2, 3, 4):
        raise ValueError(f"deterministic mode 1-4 expected, got {mode}")
    inexact = nb.cls != EXACT
    go_up = {1: (nb.cls == ABOVE) | ((nb.cls == TIE) & (nb.A % 2 == 1)),  # nearest, ties to even A
             2: inexact & ~ev.neg,  # towards +inf: magnitude up for positive values
             3: inexact & ev.neg,  # towards -inf: magnitude up for negative values
             4: np.zeros_like(inexact)}[mode]  # towards zero
    mag = np.where(go_up, nb.up, nb.down)
    out = np.where(ev.neg, -mag, mag)
    return np.where(ev.nonzero, out, ev.x)           # 0, +-inf, NaN pass through


def _grid_exponent(ev: ExactValues, spec: FormatSpec, kind: str) -> np.ndarray:
    """Per-value grid exponent ``q`` for the rounding rule ``kind``.

    ``'own'``: ``t`` bits at the value's own exponent (unbounded exponent);
    ``'ieee1'``: IEEE with subnormals (``q = max(e + 1 - t, emins)``);
    ``'ieee0'``: no subnormals: below ``xmin`` the grid is ``{0, xmin}``;
    ``'chop'``: chop.m with explim = 1: own exponent below ``emins``, the
    subnormal grid for ``emins <= e < emin``, own exponent above.
    """
    own = ev.e + 1 - spec.t
    return {"own": own, "ieee1": np.maximum(own, spec.emins), "ieee0": np.where(ev.e < spec.emin, spec.emin, own),
            "chop": np.where(ev.e < spec.emins, own, np.maximum(own, spec.emins))}[kind]


def _finish(ev: ExactValues, c: np.ndarray, dtype) -> np.ndarray:
    """Cast to the output dtype (exact for representable results, overflow -> inf)."""
    dtype = ev.dtype if dtype is None else np.dtype(dtype)
    with np.errstate(over="ignore"):
        out = c.astype(dtype)
    fin = np.isfinite(out)
    if not np.array_equal(out[fin].astype(np.float64), c[fin]):
        raise AssertionError("oracle result not representable in the output dtype")
    return out.reshape(ev.shape)


def ieee_round(values: Any, t: int, emax: int, subnormal: int = 1, mode: int = 1, overflow: bool = True,
               dtype: Any = None) -> np.ndarray:
    """Correct IEEE 754 style rounding to the format ``(t, emax)``.

    Parameters
    ----------
    values : array_like or ExactValues
        float64 or float32 inputs.
    t, emax : int
        Precision (with hidden bit) and maximum exponent, ``emin = 1 - emax``.
    subnormal : {1, 0}
        1: gradual underflow onto the subnormal grid (spacing ``xmins``).
        0: no subnormals; values below ``xmin`` round within ``{0, xmin}``
        (ties, i.e. ``|x| = xmin/2``, go to 0: ``A = 0`` is even).
    mode : {1, 2, 3, 4}
        Nearest-even, towards +inf, towards -inf, towards zero.
    overflow : bool
        True: IEEE 754 overflow (clause 7.4) on the result rounded with an
        unbounded exponent: beyond ``xmax``, +-inf in mode 1, +-inf or +-xmax by
        direction in the others.  False: results may exceed ``xmax``.
    dtype : dtype, optional
        Output dtype; default the input dtype.

    Returns
    -------
    ndarray
        Rounded values, NaN and +-inf unchanged.
    """
    ev = _as_exact(values)
    spec = FormatSpec(t, emax)
    c = _select(ev, grid_neighbours(ev, _grid_exponent(ev, spec, "ieee1" if subnormal else "ieee0")), mode)
    if overflow:
        xmax = spec.xmax
        over = ev.finite & (np.abs(c) > xmax)
        c[over & ~ev.neg] = np.inf if mode in (1, 2) else xmax  # towards +inf: nearest and up
        c[over & ev.neg] = -np.inf if mode in (1, 3) else -xmax  # towards -inf: nearest and down
    return _finish(ev, c, dtype)


def neighbours(values: Any, t: int, emax: int, subnormal: int = 1,
               dtype: Any = None) -> tuple[np.ndarray, np.ndarray]:
    """The two candidates of stochastic rounding: round down and round up.

    Parameters
    ----------
    values, t, emax, subnormal, dtype
        As in :func:`ieee_round` (without overflow).

    Returns
    -------
    (lower, upper) : tuple of ndarray
        ``ieee_round`` with modes 3 and 2 (equal when ``x`` is representable).
    """
    ev = _as_exact(values)
    return (ieee_round(ev, t, emax, subnormal, 3, overflow=False, dtype=dtype),
            ieee_round(ev, t, emax, subnormal, 2, overflow=False, dtype=dtype))


def chop_rule_round(values: Any, t: int, emax: int, subnormal: int = 1, mode: int = 1, explim: int = 1,
                    dtype: Any = None) -> np.ndarray:
    """The rounding rules documented for MATLAB ``chop.m`` (deterministic modes).

    Parameters
    ----------
    values, t, emax, mode, dtype
        As in :func:`ieee_round`.
    subnormal : {1, 0}
        Selects ``min_rep = xmins`` (1) or ``xmin`` (0) in the underflow step.
    explim : {1, 0}
        0: every value is rounded to ``t`` bits at its own exponent, nothing
        else (overflow to inf only where the output dtype overflows).

    Returns
    -------
    ndarray

    Notes
    -----
    With ``explim = 1``:

    1. Rounding: ``e < emins``: ``t`` bits at the own exponent;
       ``emins <= e < emin``: the subnormal grid (spacing ``xmins``), for both
       values of ``subnormal``; ``e >= emin``: ``t`` bits.
    2. Overflow, decided on the *input* ``x``: mode 1: ``|x| >= xboundary``
       -> +-inf; mode 2: ``x > xmax`` -> inf, finite ``x < -xmax`` -> -xmax;
       mode 3: finite ``x > xmax`` -> xmax, ``x < -xmax`` -> -inf; mode 4:
       finite ``|x| > xmax`` -> +-xmax.
    3. Underflow, on the rounded ``c`` with ``|c| < min_rep``: mode 1:
       ``|c| > min_rep/2`` (subnormal = 1) or ``|c| >= min_rep/2``
       (subnormal = 0) -> ``sign(c) * min_rep``, else 0; mode 2:
       ``c > 0`` -> ``min_rep`` else 0; mode 3: ``c < 0`` -> ``-min_rep``
       else 0; mode 4: 0.
    """
    ev = _as_exact(values)
    spec = FormatSpec(t, emax)
    if not explim:
        return _finish(ev, _select(ev, grid_neighbours(ev, _grid_exponent(ev, spec, "own")), mode), dtype)
    c = _select(ev, grid_neighbours(ev, _grid_exponent(ev, spec, "chop")), mode)
    # 2. overflow, exact comparisons with the thresholds (see double_bound)
    xb = double_bound(spec.xboundary_mpf, "ceil")      # x >= xboundary  <=>  x >= xb
    xm = double_bound(spec.xmax_mpf, "floor")          # x > xmax        <=>  x > xm
    # beyond: +-inf to nearest and towards that side, else +-xmax; an infinite x keeps its value (c holds it)
    for sign, to_inf in ((1.0, mode in (1, 2)), (-1.0, mode in (1, 3))):
        beyond = (sign * ev.x >= xb) if mode == 1 else (sign * ev.x > xm) & ev.finite
        c[beyond] = sign * (np.inf if to_inf else spec.xmax)
    # 3. underflow of the rounded value
    min_rep_mpf = spec.xmins_mpf if subnormal else spec.xmin_mpf
    min_rep = double_bound(min_rep_mpf, "nearest")
    half_mpf = libmp.mpf_shift(min_rep_mpf, -1)
    ac = np.abs(c)
    small = ac < min_rep
    nearest = (ac > double_bound(half_mpf, "floor")) if subnormal else (ac >= double_bound(half_mpf, "ceil"))
    to_min = small & {1: nearest, 2: c > 0, 3: c < 0, 4: np.zeros_like(small)}[mode]
    c[to_min] = np.copysign(min_rep, c[to_min])      # sign(c) * min_rep
    c[small & ~to_min] = 0.0
    return _finish(ev, c, dtype)


def is_representable(values: Any, t: int, emax: int, subnormal: int = 1) -> np.ndarray:
    """Whether each value is a member of the format ``(t, emax)``.

    Parameters
    ----------
    values, t, emax : as in :func:`ieee_round`
    subnormal : {1, 0}
        Whether the multiples of ``xmins`` below ``xmin`` belong to the format.

    Returns
    -------
    ndarray of bool
        True for 0, +-inf, NaN and the format's numbers.
    """
    ev = _as_exact(values)
    spec = FormatSpec(t, emax)
    e, exp = ev.e, ev.exp
    normal = (e >= spec.emin) & (e <= spec.emax) & (exp >= e + 1 - spec.t)
    sub = (subnormal != 0) & (e < spec.emin) & (exp >= spec.emins)
    return np.where(ev.nonzero, normal | sub, True).reshape(ev.shape)


# --- a slow scalar cross-check on mpmath's own rounding (it tests the oracle itself) ---

_MP_RND = {1: libmp.round_nearest, 2: libmp.round_ceiling, 3: libmp.round_floor,
           4: libmp.round_down}


def scalar_grid_round(x: float, q: int, mode: int) -> float:
    """Round a double to an integer multiple of ``2**q`` with mpmath.

    Parameters
    ----------
    x : float
        Finite value.
    q : int
        Exponent of the grid spacing.
    mode : {1, 2, 3, 4}
        Nearest-even, ceiling, floor, towards zero.

    Returns
    -------
    float
        ``round(x / 2**q) * 2**q`` by :func:`mpmath.libmp.normalize` (below
        ``2**q`` in magnitude: by exact comparison with half).
    """
    v = libmp.mpf_shift(libmp.from_float(x), -q)    # exact: x / 2**q
    sign, man, exp, bc = v
    if not man:
        return x
    ey = exp + bc - 1                               # |v| = f * 2**ey
    rnd = _MP_RND[mode]
    if ey >= 0:
        r = libmp.normalize(sign, man, exp, bc, ey + 1, rnd)   # keep integer bits only
    else:                                           # |v| < 1: result 0 or +-1
        # mode 1: a tie (|v| = 1/2) goes to the even 0
        up = {1: libmp.mpf_cmp(libmp.mpf_abs(v), libmp.from_man_exp(1, -1)) > 0, 2: not sign, 3: bool(sign)}
        r = libmp.from_man_exp((-1 if sign else 1) * int(up.get(mode, False)), 0)
    return libmp.to_float(libmp.mpf_shift(r, q), strict=True)


# --- the datasets and their inputs ---

SEED = 20240906

#: Oracle datasets: case id -> (chop's options format, its params or None).
ORACLE_CASES = {
    "q43": ("q43", None), "q52": ("q52", None), "b": ("b", None), "h": ("h", None),
    "s": ("s", None), "d": ("d", None),
    "c5_3": ("c", (5, 3)), "c10_30": ("c", (10, 30)), "c20_300": ("c", (20, 300)),
}
# float32 inputs for the formats narrower than single (chop.m allows custom t <= 11
# for single inputs with round-to-nearest, so c20_300 is double-only).
FLOAT32_CASES = ["q43", "q52", "b", "h", "c5_3", "c10_30"]
DATASETS = [(c, "float64") for c in ORACLE_CASES] + [(c, "float32") for c in FLOAT32_CASES]
DATASET_IDS = [f"{c}-{d}" for c, d in DATASETS]


def case_spec(case: str) -> FormatSpec:
    """The :class:`FormatSpec` (t, emax) of the oracle dataset ``case`` (a key of :data:`ORACLE_CASES`)."""
    fmt, params = ORACLE_CASES[case]
    return FormatSpec(*params) if params else FORMATS[fmt]


def case_options(case: str, mode: int, subnormal: int, explim: int) -> dict:
    """chop's options for the oracle dataset ``case`` with rounding ``mode``, ``subnormal`` and ``explim``."""
    fmt, params = ORACLE_CASES[case]
    opts = {"format": fmt, "round": mode, "subnormal": subnormal, "explim": explim}
    if params:
        opts["params"] = list(params)
    return opts


def _dtype_limits(dtype):
    """(exponent of the smallest subnormal, largest exponent, precision) of a dtype."""
    info = np.finfo(dtype)
    return int(np.log2(float(info.smallest_subnormal))), int(info.maxexp) - 1, int(info.nmant) + 1


def _exact_points(spec: FormatSpec):
    """Exact critical magnitudes (raw mpmath values) of a format."""
    t, emin, emins, emax = spec.t, spec.emin, spec.emins, spec.emax
    m = libmp.from_man_exp
    return [
        m(1, emins - 2),                      # xmins/4
        m(2**t - 1, emins - 1 - t),           # xmins/2 - (t-bit ulp at emins-2)
        m(1, emins - 1),                      # xmins/2
        m(2**t + 1, emins - 1 - t),           # xmins/2 * (1 + 2**-t): end of the band
        m(3, emins - 2),                      # 3/4 xmins
        m(1, emins),                          # xmins
        m(3, emins - 1),                      # 3/2 xmins (tie on the subnormal grid)
        m(2**(t - 1) - 1, emins - 1),         # xmin/2 - xmins/2
        m(1, emin - 1),                       # xmin/2
        m(2**(t - 1) + 1, emins - 1),         # xmin/2 + xmins/2
        m(2**t - 3, emins - 1),               # xmin - 3/2 xmins
        m(2**t - 1, emins - 1),               # xmin - xmins/2
        m(1, emin),                           # xmin
        m(2**t + 1, emin - t),                # xmin + (t-bit ulp at emin)/2
        spec.xmax_mpf,                        # xmax
        m(2**(t + 1) - 3, emax - t),          # xmax - ulp/2
        spec.xboundary_mpf,                   # xboundary = xmax + ulp/2
        m(1, emax + 1),                       # 2**(emax+1)
        m(2**(t + 1) - 1, emax + 2 - t),      # 4 * xboundary
    ]


def _walk(values: np.ndarray, k: int) -> list:
    """values and their k nearest neighbours on each side in their own dtype."""
    out, up, down = [values], values, values
    with np.errstate(over="ignore"):
        for _ in range(k):
            up = np.nextafter(up, np.inf)
            down = np.nextafter(down, -np.inf)
            out += [up, down]
    return out


def oracle_inputs(case: str, dtype_name: str) -> np.ndarray:
    """At least 10**5 inputs for one format, fixed seed, signs random.

    Random values over ``[xmins/4, 4 * xboundary]``; ties of the ``t``-bit and
    the subnormal grids with their neighbours; values in the subnormal range
    and around the two double-rounding bands; every critical point of
    :func:`_exact_points` (both signs) with its 4 nearest inputs on each side;
    and the dtype's special values.
    """
    dtype = np.dtype(dtype_name)
    spec = case_spec(case)
    t, emin, emins, emax = spec.t, spec.emin, spec.emins, spec.emax
    lsb_min, e_max, prec = _dtype_limits(dtype)
    rng = np.random.default_rng([SEED, sum(map(ord, case)), dtype.itemsize])
    parts = []

    def signs(n):
        return rng.choice(np.array([-1.0, 1.0]), n)

    # random values over the whole range (more of them when ties are not inputs, e.g. 'd')
    n = 50000 if t + 1 <= prec else 100000
    E = rng.integers(max(emins - 3, lsb_min), min(emax + 3, e_max) + 1, n)
    with np.errstate(over="ignore"):
        r = signs(n) * np.ldexp(1.0 + rng.random(n), E)
    parts.append(r.astype(dtype))          # rounding to dtype is fine: any value will do

    # ties of the t-bit grid: (2A + 1) * 2**(E - t), A in [2**(t-1), 2**t)
    if t + 1 <= prec:
        n1, n2 = 30000, 6000
        E = np.concatenate([
            rng.integers(emins - 3, emax + 2, n1),
            rng.choice(np.r_[emins - 3:emins + 2, emin - 2:emin + 2, emax - 1:emax + 2], n2)])
        E = E[(E - t >= lsb_min) & (E <= e_max)]
        A = rng.integers(2**(t - 1), 2**t, E.size, dtype=np.int64)
        ties = (signs(E.size) * np.ldexp((2 * A + 1).astype(np.float64), E - t)).astype(dtype)
        parts += _walk(ties, 1)
        # ties of the subnormal grid: (2A + 1) * xmins / 2, A in [0, 2**(t-1))
        if emins - 1 >= lsb_min:
            A = rng.integers(0, 2**(t - 1), 4000, dtype=np.int64)
            ties = (signs(A.size) * np.ldexp((2 * A + 1).astype(np.float64), emins - 1)).astype(dtype)
            parts += _walk(ties, 1)
    # random subnormal-range values, multiples of xmins, and the band below xmins
    parts.append((signs(8000) * spec.xmin * rng.random(8000)).astype(dtype))
    v = signs(4000) * spec.xmins * rng.integers(0, 2**(t - 1), 4000)
    d = v.astype(dtype)
    parts.append(d[d == v])  # (those exactly representable in dtype)
    if emins - 2 >= lsb_min:
        parts.append((signs(8000) * np.ldexp(1.0 + 3.0 * rng.random(8000), emins - 2)).astype(dtype))
    # around both double-rounding bands: xmins/2 * (1 + [0, 2) * 2**-t) and
    # xmin/2 + [-1, 1/2) * xmins
    band1 = np.ldexp(1.0 + rng.random(3000) * 2.0**(1 - t), emins - 1)
    band0 = spec.xmin / 2 + (rng.random(3000) * 1.5 - 1.0) * spec.xmins
    parts.append((signs(6000) * np.concatenate([band1, band0])).astype(dtype))
    # critical points and their neighbourhoods (both signs, both roundings to double)
    bounds = [sign * double_bound(p, direction) for p in _exact_points(spec)
              for direction in ("floor", "ceil") for sign in (1.0, -1.0)]
    with np.errstate(over="ignore"):
        crit = np.array(bounds).astype(dtype)
    parts += _walk(crit[np.isfinite(crit)], 4)
    info = np.finfo(dtype)
    special = [0.0, -0.0, np.inf, -np.inf, np.nan, info.smallest_subnormal, info.tiny, info.max]
    parts.append(np.array(special + [-s for s in special[5:]], dtype=dtype))
    x = np.concatenate(parts).astype(dtype)
    return x[rng.permutation(x.size)]
