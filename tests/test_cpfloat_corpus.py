"""The cpfloat facade against CPFloat's own outputs (pychop_compat/data/cpfloat_reference, see its README).

* Untagged cases: the facade reproduces CPFloat bit for bit (NaN = NaN) on
  every engine, and raises where the MEX raises (then the values are checked
  with ``drcheck = 0``, or, for an exponent range the MEX refuses, through the
  rounding function with CPFloat's clamped range).
* Tagged cases (CPFloat defects): the facade follows the documented rules,
  checked against an exact rational model of those rules written here
  (independently of the package), and the differences from CPFloat exist.
"""

from __future__ import annotations

import gzip
import json
import math
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest

from bits import same_bits
from conftest import engine_rows

from pychop_compat.cpfloat import CpfloatError, clear_cpfloat, cpfloat
from pychop_compat.validation.corpora import corpus_path
from pychop_compat.formats import Format
from pychop_compat.random.sources import MATLAB_STREAM
from pychop_compat.rules.cpfloat import round_cpfloat

HERE = corpus_path("cpfloat_reference")
MANIFEST = json.loads(gzip.open(HERE / "manifest.json.gz").read())
ARRAYS = np.load(HERE / "cases.npz")
UNTAGGED = [c for c in MANIFEST if not c["tags"]]
TAGGED = [c for c in MANIFEST if c["tags"] and c["precision"] > 0]


bits_equal = same_bits  # elementwise: same bit pattern (so -0 != +0), or both NaN (bits.py)


def fpopts(case, drcheck=None) -> dict:
    opts = {k: case[k] for k in ("round", "subnormal", "explim", "saturation", "infinity")}
    if case["format"] is None:
        opts.update(format="c", params=[case["precision"], case["emin"], case["emax"]])
    else:
        opts["format"] = case["format"]
    if drcheck is not None:
        opts["drcheck"] = drcheck
    return opts


def run_facade(case, engine, drcheck=None):
    x = ARRAYS[case["input"]]
    y = cpfloat(engine.to(x), fpopts(case, drcheck))
    return engine.back(y, engine.to(x))


def test_corpus_is_complete():
    assert len(MANIFEST) == 2132
    assert sum(int(np.prod(c["shape"])) for c in MANIFEST) == 948934
    assert sum(1 for c in UNTAGGED) == 1925  # README: array2d 120, grid 768, invalid 7, quirk 20, star 1008, unknown_round 2


# Every untagged case on the rows whose kernels differ (the NumPy engine's, the compiled
# engine's, and on a GPU torch-cuda's and CuPy's).  The CPU wrapper rows (torch CPU tensors,
# JAX arrays) hand their arrays to those kernels or to the namespace kernel: a sample of the cases in
# the default profile, the rest under -m slow, and the route of every case asserted.
FULL_ROWS = engine_rows("numpy", "numba", "torch-cuda", "cupy")
WRAPPER_ROWS = engine_rows("torch", "jax")


def check_untagged_cases(engine, cases) -> tuple:
    """The facade on ``cases``: CPFloat's bits, or the MEX's error; (raised, checked)."""
    failures, raised, checked = [], 0, 0
    for case in cases:
        clear_cpfloat()
        want = ARRAYS[case["output"]]
        mex_error = case["mex_error"]
        if mex_error is not None:
            with pytest.raises(CpfloatError) as info:
                run_facade(case, engine)
            assert str(info.value) == mex_error, case["id"]
            raised += 1
            if "double rounding" not in mex_error:
                continue
            got = run_facade(case, engine, drcheck=0)
        else:
            got = run_facade(case, engine)
        checked += 1
        assert got.dtype == want.dtype and got.shape == want.shape, case["id"]
        if not bits_equal(got, want).all():
            failures.append(case["id"])
    assert not failures, f"{len(failures)} cases differ: {failures[:10]}"
    return raised, checked


@pytest.mark.parametrize("engine", FULL_ROWS, indirect=True)
def test_untagged_cases_bit_for_bit(engine):
    raised, checked = check_untagged_cases(engine, UNTAGGED)
    assert raised >= 3 and checked > 1900


@pytest.mark.parametrize("part", ["sample", pytest.param("rest", marks=[pytest.mark.slow, pytest.mark.heavy])])
@pytest.mark.parametrize("engine", WRAPPER_ROWS, indirect=True)
def test_untagged_cases_on_wrapper_rows(engine, part):
    """Every 8th untagged case on torch, every 256th on JAX (each option set a compilation by
    XLA; the namespace kernel a JAX array reaches runs every case on torch tensors in
    test_elementwise_cpfloat.py)
    (``sample``), or the others (``rest``, under -m slow)."""
    stride = 8 if engine.name == "torch" else 256
    cases = [case for k, case in enumerate(UNTAGGED) if (k % stride == 0) == (part == "sample")]
    raised, checked = check_untagged_cases(engine, cases)
    assert raised + checked >= len(cases) and checked > 0.98 * len(cases)


@pytest.mark.parametrize("engine", WRAPPER_ROWS, indirect=True)
def test_wrapper_rows_route_every_untagged_case(engine, monkeypatch):
    """The kernel each untagged case's array would reach (asked of the router where the facade
    hands it over; nothing is rounded).  The untagged cases are in deterministic modes: a CPU
    tensor reaches the NumPy engine's CPFloat kernel (the row's cpu_engine('numpy')), a JAX
    array the namespace kernel (kernels/elementwise_cpfloat.py, checked against the rules on
    NumPy and torch in test_elementwise_cpfloat.py)."""
    from pychop_compat.engines import dispatch

    routes = []

    def route_only(x, spec, sources, **kwargs):
        routes.append(dispatch.route(x, spec, sources).kernel.name)
        return x

    monkeypatch.setattr(dispatch, "round_array", route_only)
    for case in UNTAGGED:
        clear_cpfloat()
        try:
            run_facade(case, engine, drcheck=0 if case["mex_error"] else None)
        except CpfloatError:
            continue  # refused before any kernel (checked on every row above)
    assert len(routes) > 1900
    assert set(routes) == ({"numpy-cpfloat"} if engine.name == "torch" else {"namespace"})


def test_mex_range_errors_still_round_like_cpfloat_inside_the_engine():
    """Cases the MEX refuses for their exponent range: CPFloat's C function clamps the range
    to the storage format's; the rounding function does the same."""
    cases = [c for c in UNTAGGED if c["mex_error"] and "exponent range" in c["mex_error"]]
    assert cases
    for case in cases:
        x, want = ARRAYS[case["input"]], ARRAYS[case["output"]]
        fmt = Format(case["precision"], case["emax"], emin=case["emin"])
        got = round_cpfloat(x.ravel(), fmt, case["round"], bool(case["subnormal"]), bool(case["explim"]),
                            bool(case["saturation"]), bool(case["infinity"]), MATLAB_STREAM)
        assert bits_equal(got.reshape(want.shape), want).all(), case["id"]


# --- an exact model of CPFloat's documented rules (pychop_compat/data/cpfloat_reference/README.md) -------------

STORAGE = {"float64": (53, -1022, 1023), "float32": (24, -126, 127)}


def documented_rule(x: float, case) -> float:
    """CPFloat's documented semantics for one value, in rational arithmetic."""
    mode = case["round"]
    if mode not in (-1, 0, 1, 2, 3, 4, 7):
        return x
    if math.isnan(x):
        return math.nan
    ps, emin_s, emax_s = STORAGE[case["dtype"]]
    p = min(case["precision"], ps)
    if case["explim"]:
        emin, emax = max(case["emin"], emin_s), min(case["emax"], emax_s)
    else:
        emin, emax = emin_s, emax_s
    xmax = Fraction(2 ** p - 1) * Fraction(2) ** (emax - p + 1)
    xmin = Fraction(2) ** emin
    negative = math.copysign(1.0, x) < 0
    sat, inf_on = case["saturation"], case["infinity"]
    fast_path = emax == emax_s and not sat and inf_on

    def signed(v):
        if v == math.inf:
            return -math.inf if negative else math.inf
        value = float(v)
        return -value if negative else value

    if math.isinf(x):
        if sat:
            return signed(xmax)
        if inf_on:
            return x
        keeps = mode in (4, 7) or (mode == 2 and negative) or (mode == 3 and not negative)
        return signed(xmax) if keeps else math.nan
    a = Fraction(abs(x))
    if a >= xmin:
        e = a.numerator.bit_length() - a.denominator.bit_length()
        if Fraction(2) ** e > a:
            e -= 1
        unit = Fraction(2) ** (e - p + 1)
    else:
        unit = Fraction(2) ** (emin - p + 1) if case["subnormal"] else xmin
    n = a / unit
    low = n.numerator // n.denominator
    rest = n - low
    toward_plus = not negative
    if mode == -1:
        up = rest >= Fraction(1, 2)
    elif mode == 0:
        up = rest > Fraction(1, 2)
    elif mode == 1:
        up = rest > Fraction(1, 2) or (rest == Fraction(1, 2) and low % 2 == 1)
    elif mode == 2:
        up = rest > 0 and toward_plus
    elif mode == 3:
        up = rest > 0 and not toward_plus
    elif mode == 4:
        up = False
    else:
        up = rest > 0 and low % 2 == 0
    value = (low + up) * unit
    if value > xmax:
        if sat:
            value = xmax
        elif mode in (-1, 0, 1) or (mode == 2 and not negative) or (mode == 3 and negative):
            value = math.inf if inf_on else None
        else:
            value = xmax
    if value is None:
        return math.nan
    if value == 0:
        if mode in (2, 3) and not fast_path:
            return 0.0
        return -0.0 if negative else 0.0
    return signed(value)


def test_documented_model_agrees_with_cpfloat_on_untagged_cases():
    """The model above is itself checked on CPFloat's defect-free cases (a sample of them)."""
    sample = [c for c in UNTAGGED if c["round"] in (-1, 0, 1, 2, 3, 4, 7) and c["mex_error"] is None][::25]
    assert len(sample) > 40
    for case in sample:
        x, want = ARRAYS[case["input"]].ravel(), ARRAYS[case["output"]].ravel()
        got = np.array([documented_rule(v, case) for v in x.tolist()], dtype=want.dtype)
        assert bits_equal(got, want).all(), case["id"]


@pytest.mark.parametrize("tag", ["p_eq_storage", "p_eq_1", "emax_eq_storage", "storage_subnormal_overlap"])
def test_tagged_cases_follow_the_documented_rules(tag):
    cases = [c for c in TAGGED if tag in c["tags"]]
    assert cases
    differs_from_cpfloat = 0
    for case in cases:
        clear_cpfloat()
        x, cp = ARRAYS[case["input"]], ARRAYS[case["output"]]
        if case["mex_error"] is not None:
            with pytest.raises(CpfloatError):
                cpfloat(x, fpopts(case))
            if "double rounding" not in case["mex_error"]:
                continue
            got = cpfloat(x, fpopts(case, drcheck=0))
        else:
            got = cpfloat(x, fpopts(case))
        want = np.array([documented_rule(v, case) for v in x.ravel().tolist()], dtype=cp.dtype)
        assert bits_equal(got.ravel(), want).all(), case["id"]
        differs_from_cpfloat += not bits_equal(got, cp).all()
    assert differs_from_cpfloat > 0  # the defect is real (listed in docs/differences.rst)


def test_precision_zero_is_refused():
    case = next(c for c in MANIFEST if "p_eq_0" in c["tags"])
    with pytest.raises(ValueError, match="precision"):
        cpfloat(ARRAYS[case["input"]], fpopts(case))
