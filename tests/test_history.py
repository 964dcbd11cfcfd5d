"""chop_at(date): chop.m as it was on master at the end of a day.

Expected values: tests/chop_history (what every historical chop.m on master
returned under GNU Octave on a common input set, errors included; made from
github.com/higham/chop), MATLAB's stream through today's chop for the
stochastic modes, and rules stated in chop.m's change history.
"""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path

import numpy as np
import pytest

import pychop_compat
from pychop_compat import chop, chop_at, clear_chop, rng
from pychop_compat.matlab.history import HISTORY, rules_at

DATA = Path(__file__).parent / "chop_history"
INDEX = json.loads((DATA / "index.json").read_text())
ARRAYS = np.load(DATA / "outputs.npz")
VERSIONS = INDEX["versions"]
CASES = INDEX["cases"]


def same(a, b):
    """Equal values (NaN equal to NaN; the sign of zero is not compared) and dtype."""
    a, b = np.asarray(a), np.asarray(b)
    return a.dtype == b.dtype and a.shape == b.shape and bool(np.all((a == b) | (np.isnan(a) & np.isnan(b))))


def case_options(c):
    o = {"format": c["format"], "round": c["round"], "subnormal": c["subnormal"], "explim": c["explim"]}
    if c["params"]:
        o["params"] = c["params"]
    return o


def check_date(date, version):
    f = chop_at(date)
    errors = set(version["errors"])
    mismatches = []
    for c in CASES:
        f.clear()
        x = ARRAYS["x/" + c["input"]]
        if c["id"] in errors:
            with pytest.raises(ValueError):
                f(x, case_options(c))
            continue
        out = f(x, case_options(c))
        expected = ARRAYS[f"y/{c['id']}/{c['outputs'][str(version['behaviour'])]}"]
        if not same(out, expected):
            mismatches.append(c["id"])
    assert mismatches == []


@pytest.mark.parametrize("version", VERSIONS, ids=[v["date"] for v in VERSIONS])
def test_corpus_every_version(version):
    check_date(version["date"], version)


def test_corpus_days_between_versions_keep_the_last_behaviour():
    days = [dt.date.fromisoformat(v["date"]) for v in VERSIONS]
    for i, v in enumerate(VERSIONS[:-1]):
        later = days[i] + dt.timedelta(days=1)
        if later < days[i + 1]:
            check_date(later.isoformat(), v)
    check_date("2026-01-01", VERSIONS[-1])  # after the last change: today's chop


def test_corpus_is_not_trivial():
    # the behaviours really differ, so agreeing on every date is a real check
    behaviours = {v["behaviour"] for v in VERSIONS}
    assert len(behaviours) == 9
    c = next(c for c in CASES if c["id"] == "h_double_r1_s0_e1")
    assert len(set(c["outputs"].values())) >= 2
    # each behaviour differs from the one before it in some case
    for b in range(1, 9):
        assert any(c["outputs"].get(str(b)) != c["outputs"].get(str(b - 1)) for c in CASES)


def test_dates_before_first_release_are_errors():
    with pytest.raises(ValueError, match="2019-03-07"):
        chop_at("2019-03-06")
    with pytest.raises(ValueError):
        chop_at("2020-13-01")
    with pytest.raises(TypeError):
        chop_at(20200601)
    assert chop_at("2019-03-07").rules.commit == "f056228"
    assert chop_at(dt.date(2020, 6, 16)).rules.commit == "c213288"
    assert chop_at("2020-06-15").rules.tiny == "flush"  # in force at the end of that day


def test_history_table_is_ordered_and_complete():
    dates = [d for d, _, _ in HISTORY]
    assert dates == sorted(dates)
    # every date where the corpus shows a new behaviour or new errors is a documented change
    changes = [v["date"] for i, v in enumerate(VERSIONS)
               if i == 0 or v["behaviour"] != VERSIONS[i - 1]["behaviour"]
               or v["errors"] != VERSIONS[i - 1]["errors"]]
    assert changes and set(changes) <= set(dates)


def test_issue_example_tiny_values_rule_of_2020_06_16():
    x = 2.0**-25 * 1.5  # between xmins/2 and xmins of fp16
    assert chop_at("2020-06-15")(x, {"format": "h"}) == 0.0
    assert chop_at("2020-06-16")(x, {"format": "h"}) == 2.0**-24
    # subnormal = 0: before, the whole subnormal range was flushed
    y = 2.0**-15  # half of fp16's xmin
    assert chop_at("2020-06-15")(y, {"format": "h", "subnormal": 0}) == 0.0
    assert chop_at("2020-06-16")(y, {"format": "h", "subnormal": 0}) == 2.0**-14


def test_persistent_options_are_its_own():
    clear_chop()
    old = chop_at("2020-01-01")
    old(None, {"format": "b"})
    assert chop(1 / 3) == 0.333251953125  # today's chop: still the fp16 default
    assert old(1 / 3) == 0.333984375  # bfloat16 kept by the historical chop
    other = chop_at("2020-01-01")
    assert other(1 / 3) == 0.333251953125  # a new one starts from the defaults
    assert old.options().format == "b"
    old.clear()
    assert old(1 / 3) == 0.333251953125


def test_custom_params_inherited_and_failed_calls_store_nothing():
    f = chop_at("2019-12-01")
    f(None, {"format": "c", "params": [5, 7]})
    assert f(1 / 3, {"format": "c"}) == chop(1 / 3, {"format": "c", "params": [5, 7]})
    with pytest.raises(ValueError):  # 2019: limit t <= 25 for every rounding mode
        f(1 / 3, {"format": "c", "params": [30, 20], "round": 2})
    assert f.options().params == [5, 7]
    assert chop_at("2020-10-03")(1 / 3, {"format": "c", "params": [30, 20], "round": 2}) == chop(
        1 / 3, {"format": "c", "params": [30, 20], "round": 2})


def test_fp8_names_only_from_2022_04_15():
    with pytest.raises(ValueError, match="2022-04-15"):
        chop_at("2022-04-14")(0.3, {"format": "q43"})
    assert chop_at("2022-04-15")(0.3, {"format": "q43"}) == 0.3125


def test_explim_ignored_before_2019_07_11():
    big = 1e6
    assert chop_at("2019-07-10")(big, {"format": "h", "explim": 0}) == np.inf
    assert chop_at("2019-07-11")(big, {"format": "h", "explim": 0}) == 999936.0  # 1e6 to 11 bits: 1953 * 2**9


def test_explim0_matrix_bug_2019_07_11_to_2020_04_30():
    # chop.m rounded only elements 1:length(x) = 1:max(size(x)) of a matrix without explim
    x = np.full((3, 2), 1 / 3)
    rounded = 0.333251953125
    out = chop_at("2020-04-30")(x, {"format": "h", "explim": 0})
    assert np.array_equal(out, np.array([[rounded, 1 / 3], [rounded, 1 / 3], [rounded, 1 / 3]]))
    out = chop_at("2020-05-01")(x, {"format": "h", "explim": 0})
    assert np.all(out == rounded)


def test_truncation_before_2020_05_01_rounds_blocks_by_sign():
    # roundit.m: ``if x >= 0, floor, else ceil`` on the whole block
    x = np.array([1.3, -1.3])
    opts = {"format": "c", "params": [1, 7], "round": 4}  # one bit: truncation to powers of 2
    assert np.array_equal(chop_at("2020-04-30")(x, opts), np.array([2.0, -1.0]))
    assert np.array_equal(chop_at("2020-05-01")(x, opts), np.array([1.0, -1.0]))


def test_bit_flips_fail_between_2019_07_11_and_2020_05_30():
    opts = {"format": "h", "flip": 1, "p": 1.0}
    with pytest.raises(ValueError, match="flip"):
        chop_at("2020-01-01")(np.array([0.5]), opts)
    rng(3)
    a = chop_at("2020-05-31")(np.array([0.3, 0.7]), opts)
    rng(3)
    b = chop(np.array([0.3, 0.7]), opts)
    assert np.array_equal(a, b)  # today's draws, same order


def test_stochastic_rounding_draws_like_todays_chop():
    x = np.array([1.3, 2.7, -0.11, 5.5, 100.01])
    for date in ("2019-03-07", "2020-01-01", "2021-01-01"):
        opts = {"format": "b", "round": 5}
        rng(7)
        a = chop_at(date)(x, opts)
        rng(7)
        b = chop(x, opts)
        assert np.array_equal(a, b)


@pytest.mark.parametrize("date", ["2020-10-03", "2022-06-14", "2024-01-01"])
def test_stochastic_rounding_of_python_floats_is_todays_chop_and_leaves_the_stream_as_it(date):
    """A Python float on today's rules with random numbers (chop's scalar path takes none):
    chop's results, a float each, and the stream's state after the calls; randfunc from
    2022-06-14 only."""
    values = [float(v) for v in np.random.default_rng(1).standard_normal(40) * np.logspace(-9, 6, 40)]
    values += [0.0, -0.0, np.inf, -np.inf, np.nan, 1e-300, 7e4]
    for opts in ({"format": "h", "round": 5}, {"format": "b", "round": 6},
                 {"format": "h", "round": 5, "subnormal": 0}, {"format": "c", "params": [5, 7], "round": 6},
                 {"format": "h", "round": 5, "randfunc": lambda n: np.full(n, 0.25)}):
        dated = chop_at(date)
        rng(3)
        got = [dated(v, opts) for v in values]
        state = rng().State.copy()
        today = {k: v for k, v in opts.items() if k != "randfunc" or date >= "2022-06-14"}
        rng(3)
        expected = [chop(v, today) for v in values]
        assert all(type(v) is float for v in got)
        assert np.array_equal(got, expected, equal_nan=True) and np.array_equal(rng().State, state)


def test_stochastic_rounding_of_python_floats_with_the_old_tiny_rule_is_the_array_route():
    """2020-05-14 .. 2020-06-15 ('flush tiny'): a Python float gives what a one-element array
    gives (the array route is checked against the step-by-step rules above), stream included."""
    values = [float(v) for v in np.random.default_rng(2).standard_normal(40) * np.logspace(-12, 6, 40)]
    values += [0.0, -0.0, np.inf, -np.inf, np.nan, 1e-300, 3e-8, -3e-8, 7e4]
    # a quarter of the grid below xmin, which the subnormal block (subnormal = 0) often rounds up to
    # xmin; the old rule makes it 0
    values += [2.0**-14 * (1 - 2.0**-12), -(2.0**-14) * (1 - 2.0**-12)] * 8
    for opts in ({"format": "h", "round": 5}, {"format": "h", "round": 6, "subnormal": 0},
                 {"format": "b", "round": 5}):
        dated = chop_at("2020-06-01")
        assert history.route_at(dated.rules, history.resolve(opts, None, "double").spec) == "flush tiny"
        rng(4)
        got = [dated(v, opts) for v in values]
        state = rng().State.copy()
        rng(4)
        expected = [float(dated(np.array([v]), opts)[0]) for v in values]
        assert all(type(v) is float for v in got)
        assert np.array_equal(got, expected, equal_nan=True) and np.array_equal(rng().State, state)


def test_randfunc_read_only_from_2022_06_14():
    calls = []

    def half(n):
        calls.append(n)
        return np.full(n, 0.5)

    x = np.array([1 + 2.0**-9])  # bfloat16: between 1 and 1 + 2**-7, fraction 1/4
    opts = {"format": "b", "round": 5, "randfunc": half}
    assert chop_at("2022-06-14")(x, opts)[0] == 1.0 and calls == [1]  # 0.5 > 1/4: down
    rng(1)
    chop_at("2022-06-13")(x, opts)
    assert calls == [1]  # not called before


def test_complex_and_default_today():
    with pytest.raises(ValueError, match="real"):
        chop_at("2021-01-01")(np.array([1j]))
    # today's rules on random data of every format
    r = np.random.default_rng(0)
    x = r.standard_normal(500) * 2.0 ** r.integers(-30, 30, 500)
    today = chop_at(dt.date.today())
    for fmt in ("h", "b", "s", "q43", "q52"):
        for mode in (1, 2, 3, 4):
            o = {"format": fmt, "round": mode}
            assert same(today(x, o), chop(x, o))


def test_a_format_name_alone_is_shorthand_for_a_format_field():
    # chop_at has chop's signature, and chop takes a bare format name (docs/options.rst); 0.6.x refused it.
    f = chop_at("2024-01-01")
    assert f(0.1, "h") == float(np.float16(0.1)) and f.options().format == "h"  # NumPy's cast
    assert f(1 / 3) == float(np.float16(1 / 3))  # stored, as a dict's would be
    assert chop_at("2020-06-01")(3e-8, "h") == 0.0  # below xmins = 2**-24: flushed before 2020-06-16
    with pytest.raises(ValueError, match="2022-04-15"):  # the dated error, as for {'format': 'q43'}
        chop_at("2020-01-01")(0.1, "q43")


def test_exported():
    assert pychop_compat.chop_at is chop_at
    assert rules_at("2020-05-14").exponent == "frexp"
    assert rules_at("2020-05-13").exponent == "floor log2"


def test_other_array_types_refused_not_converted():
    torch = pytest.importorskip("torch")
    with pytest.raises(TypeError, match="chop_at"):
        chop_at("2021-01-01")(torch.ones(2), {"format": "h"})
    f = chop_at("2021-01-01")
    assert isinstance(f(0.1, {"format": "h"}), float)
    out = f(np.float32(0.1))
    assert isinstance(out, np.float32) and out == np.float32(chop(np.float32(0.1), {"format": "h"}))
    # as chop: a tensor that requires grad gets chop_at's TypeError (0.6.0: torch's own error), a
    # NumPy double stays one (0.6.0: a float), bools and Fractions are real numbers
    with pytest.raises(TypeError, match="chop_at"):
        f(torch.ones(2, requires_grad=True), {"format": "h"})
    out = f(np.float64(1 / 3))
    assert type(out) is np.float64 and out == np.float16(1 / 3)
    from fractions import Fraction

    assert f(True) == 1.0 and f(Fraction(1, 3)) == float(np.float16(1 / 3))


# --- chop_at on today's engines (issue 29 item 2) ---

from pychop_compat.kernels.compiled import available as numba_available, cpu_engine  # noqa: E402
from pychop_compat.matlab import history  # noqa: E402

ENGINES = ["numpy"] + (["numba"] if numba_available() else [])


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("version", VERSIONS, ids=lambda v: v["date"])
def test_corpus_on_each_engine(engine, version):
    # every date on each engine (before 2020-05-14: the compiled loops of the old rules, or step by step)
    with cpu_engine(engine):
        check_date(version["date"], version)


def test_routes_by_date():
    h = {"format": "h"}
    spec = history.resolve(h, None).spec
    assert history.route_at(rules_at("2020-06-16"), spec) == "today"
    assert history.route_at(rules_at("2020-06-15"), spec) == "flush tiny"
    assert history.route_at(rules_at("2020-05-14"), spec) == "flush tiny"
    assert history.route_at(rules_at("2020-05-13"), spec) == "old rules"
    assert history.route_at(rules_at("2019-03-07"), spec) == "old rules"
    stochastic = history.resolve(dict(h, round=5), None).spec
    assert history.route_at(rules_at("2020-05-13"), stochastic) == "old rules"
    assert history.route_at(rules_at("2019-03-07"), history.resolve(dict(h, flip=1), None).spec) == "step by step"
    no_range = history.resolve(dict(h, explim=0), None).spec
    assert history.route_at(rules_at("2020-06-01"), no_range) == "today"
    flips = history.resolve(dict(h, flip=1), None).spec
    assert history.route_at(rules_at("2020-06-01"), flips) == "step by step"
    assert history.route_at(rules_at("2020-06-16"), flips) == "today"
    assert set(history.ROUTES) == {"today", "flush tiny", "old rules", "step by step"}


def _inputs():
    r = np.random.default_rng(11)
    wide = r.standard_normal(400) * 2.0 ** r.integers(-160, 140, 400)
    tiny = np.concatenate([r.uniform(-1, 1, 200) * 2.0 ** r.integers(-155, -5, 200),
                           [0.0, -0.0, np.inf, -np.inf, np.nan, 2.0**-24, -2.0**-24, 2.0**-25, 3 * 2.0**-26,
                            2.0**-14, -2.0**-15, 2.0**-126, 2.0**-149, -2.0**-133, 65504.0, 65520.0, 7e4]])
    with np.errstate(over="ignore"):
        narrow = [tiny.astype(np.float32), wide.astype(np.float32), tiny.astype(np.float16)]
    return [wide, tiny, *narrow, np.asfortranarray(wide[:399].reshape(21, 19)), wide[::3],
            tiny[:216].reshape(-1, 6)[:, ::2], np.float64(3e-8), np.float32(2.0**-25), 3e-8, -3e-8, 1 / 3,
            np.arange(-3, 4), [1e-9, 0.5, -2e-8]]


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("date", ["2020-05-14", pytest.param("2020-06-01", marks=pytest.mark.slow), "2020-06-15",
                                  pytest.param("2020-06-16", marks=pytest.mark.slow), "2022-06-14"])
def test_engines_equal_step_by_step(engine, date, monkeypatch):
    # bit for bit (signs of zeros and dtypes included) against the step-by-step rules of the date
    options = [{"format": f, "round": m, "subnormal": s, "explim": e}
               for f in ("h", "b", "s", "q43") for m in (1, 2, 3, 4, 5, 6) for s in (0, 1) for e in (0, 1)]
    options += [{"format": "c", "params": [t, emax], "round": m, "subnormal": s}
                for t, emax in ((1, 7), (2, 3), (5, 7), (11, 100), (20, 127)) for m in (1, 2, 3, 4, 5) for s in (0, 1)]
    options += [{"format": "h", "flip": 1, "p": 0.3, "round": m} for m in (1, 5)]
    fast, slow = chop_at(date), chop_at(date)
    with cpu_engine(engine):
        for o in options:
            if (o["format"] == "q43" and date < "2022-04-15") or (o.get("flip") and date < "2020-05-31"):
                continue
            for x in _inputs():
                if o["format"] == "c" and o["params"][0] > 11 and np.asarray(x).dtype != np.float64:
                    continue
                rng(5)
                a = fast(x, o)
                monkeypatch.setattr(history, "route_at", lambda rules, spec: "step by step")
                slow._routes.clear()
                rng(5)
                b = slow(x, o)
                monkeypatch.undo()
                assert type(a) is type(b), (o, x)
                a_arr, b_arr = np.asarray(a), np.asarray(b)
                assert a_arr.dtype == b_arr.dtype and a_arr.shape == b_arr.shape, (o, x)
                assert a_arr.tobytes(order="F") == b_arr.tobytes(order="F"), (o, x, a, b)


def test_small_calls_resolve_once_and_follow_changed_options():
    f = chop_at("2020-06-01")
    o = {"format": "h"}
    x = np.array([1 / 3, 3e-8])
    assert np.array_equal(f(x, o), [0.333251953125, 0.0])
    o["format"] = "b"  # changed in place: resolved afresh
    assert f(x, o)[0] == 0.333984375
    assert f(1 / 3) == 0.333984375  # stored
    o["round"] = 3
    assert f(1 / 3, o) == chop(1 / 3, {"format": "b", "round": 3}) == 0.33203125
    g = chop_at("2020-06-01")
    g(None, {"format": "c", "params": [5, 7]})
    custom = {"format": "c"}  # takes the stored params: never remembered by content
    assert g(1 / 3, custom) == chop(1 / 3, {"format": "c", "params": [5, 7]})
    g(None, {"format": "c", "params": [3, 7]})
    assert g(1 / 3, custom) == chop(1 / 3, {"format": "c", "params": [3, 7]})


@pytest.mark.parametrize("engine", ENGINES)
def test_engines_equal_step_by_step_on_large_arrays(engine, monkeypatch):
    # the compiled engine's parallel loops and the NumPy engine's threads (2**20 + 7 elements)
    r = np.random.default_rng(3)
    x = r.standard_normal(2**20 + 7) * 2.0 ** r.integers(-30, 17, 2**20 + 7)
    x[::1001] = 0.0
    fast, slow = chop_at("2020-06-01"), chop_at("2020-06-01")
    with cpu_engine(engine):
        for o in ({"format": "h"}, {"format": "h", "round": 3, "subnormal": 0}, {"format": "b", "round": 2}):
            a = fast(x, o)
            monkeypatch.setattr(history, "route_at", lambda rules, spec: "step by step")
            slow._routes.clear()
            b = slow(x, o)
            monkeypatch.undo()
            assert a.tobytes() == b.tobytes(), o


@pytest.mark.filterwarnings("ignore:the matrix subclass:PendingDeprecationWarning")
def test_masked_arrays_and_matrices_come_back_as_chop_gives_them():
    """chop's input kinds: a masked array comes back masked (only unmasked elements rounded, the
    old rules of the date on them), np.matrix as a matrix, an unknown subclass is refused."""
    half = float(np.float16(1 / 3))  # NumPy's cast: 1/3 to nearest fp16
    x = np.ma.masked_array([1 / 3, 3e-8, 2 / 3], mask=[0, 0, 1])
    y = chop_at("2020-06-01")(x, {"format": "h"})  # 3e-8 < xmins = 2**-24: 0 before 2020-06-16
    assert type(y) is np.ma.MaskedArray and list(y.mask) == [False, False, True]
    assert list(y.data) == [half, 0.0, 2 / 3]  # masked: untouched
    m = chop_at("2020-06-01")(np.matrix([[1 / 3]]), {"format": "h"})
    assert type(m) is np.matrix and m[0, 0] == half

    class Tagged(np.ndarray):
        pass

    with pytest.raises(TypeError, match="ndarray subclass"):
        chop_at("2020-06-01")(np.array([1 / 3]).view(Tagged), {"format": "h"})
    # stochastic rounding: the draws of chop, one per unmasked element (column-major order)
    x = np.ma.masked_array(np.arange(1, 13).reshape(3, 4) / 7.0, mask=np.eye(3, 4, dtype=bool))
    for date in ("2020-01-01", "2021-01-01"):
        rng(7)
        a = chop_at(date)(x, {"format": "b", "round": 5})
        state = rng().State.copy()
        rng(7)
        b = chop(x, {"format": "b", "round": 5})
        assert type(a) is np.ma.MaskedArray and np.array_equal(a.mask, x.mask)
        assert np.array_equal(a.data, b.data) and np.array_equal(rng().State, state)


@pytest.mark.parametrize("dtype", [">f8", ">f4"])
def test_byte_swapped_arrays_are_accepted_with_a_native_result(dtype):
    x = np.array([1 / 3, -2 / 3], dtype=dtype)
    native = np.dtype(dtype).newbyteorder("=")
    for date in ("2019-06-01", "2020-06-01", "2024-01-01"):
        y = chop_at(date)(x, {"format": "h"})
        assert y.dtype == native and np.array_equal(y, x.astype(np.float16).astype(native))  # NumPy's cast
    if dtype == ">f4":  # single's custom precision limit (11 bits), as for a native float32 array
        with pytest.raises(ValueError, match="at most 11"):
            chop_at("2020-01-01")(x, {"format": "c", "params": [20, 10]})


def test_stored_options_and_empty_values_as_chop_m_reads_them():
    # [~, o] = chop; chop(x, o) works with chop_at's own options and chop_options() (their rules is
    # chop.m's own); [] reuses the stored options and an empty field takes the stored value or the
    # default, as chop.m's isempty tests do (0.6.0 refused all three).
    f = chop_at("2021-01-01")
    f(None, {"format": "b"})
    bf16 = float(chop(1 / 3, {"format": "b"}))
    assert f(1 / 3, f.options()) == bf16
    for empty in ([], (), np.array([])):
        assert f(1 / 3, empty) == bf16
    f(None, {"format": "c", "params": [5, 7]})
    assert f(1 / 3, {"format": "c", "params": []}) == float(chop(1 / 3, {"format": "c", "params": [5, 7]}))
    with pytest.raises(ValueError, match="rules"):
        f(1 / 3, {"format": "h", "rules": "correct"})


# --- Review of 2019-07-11 .. 2020-05-30 bit flips, empty formats and big integers ---

# GNU Octave, the dated chop.m/roundit.m of each date, with a rand.m that replays MATLAB's stream after
# rng(42) (the reviewer's /tmp/review_history/oct.py driver): chop(FLIP_X, struct('format', 'h', 'flip', 1,
# 'p', p, 'round', mode)) gave these values (None: "structure has no member 't'") after drawing this many numbers;
# single(FLIP_X) gave the same numbers in single (and drew as many).
FLIP_X = np.array([1 + 2**-11, 1 + 3 * 2**-11, -(2 + 2**-10), 3e-6, -(1 + 2**-11), -5e-7])
_NEAREST = [1.0, 1.001953125, -2.0, 2.9802322387695312e-06, -1.0, -4.76837158203125e-07]
_STOCHASTIC = [1.0009765625, 1.0009765625, -2.0, 2.9802322387695312e-06, -1.0, -4.76837158203125e-07]
BROKEN_FLIPS = [  # (date, round, p, values or None, numbers drawn)
    ("2019-07-11", 1, 0.0, _NEAREST, 6),
    ("2019-07-11", 5, 0.0, _STOCHASTIC, 12),
    ("2019-07-11", 5, 0.01, _STOCHASTIC, 12),
    ("2019-07-11", 5, 0.5, None, 8),  # fails in the normal block: its 4 + 4 draws, none for the subnormal one
    ("2019-07-11", 4, 0.01, [1.0009765625, 1.001953125, -2.0, 3.039836883544922e-06, -1.0, -4.76837158203125e-07],
     6),  # (mode 4 by blocks: ceil for the normal block, which holds negative numbers)
    ("2019-10-14", 1, 0.01, _NEAREST, 6),
    ("2019-10-14", 1, 0.16, None, 6),  # the normal block's 4 draws > 0.16, the subnormal block's 2 are not
    ("2019-10-14", 6, 0.01, _STOCHASTIC, 12),
    ("2020-05-30", 4, 0.0, [1.0, 1.0009765625, -2.0, 2.9802322387695312e-06, -1.0, -4.76837158203125e-07], 6),
    ("2020-05-30", 4, 0.5, None, 4),
    ("2020-05-30", 1, 0.01, _NEAREST, 6),
]


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("date, mode, p, expected, drawn", BROKEN_FLIPS)
def test_broken_bit_flips_fail_only_once_an_element_is_chosen(engine, dtype, date, mode, p, expected, drawn):
    # roundit.m of those dates draws rand(size(y)) and reads the missing options.t only if some draw <= p
    rng(42)
    following = pychop_compat.rand(drawn + 1, 1)[drawn, 0]  # the number after the call's draws
    f = chop_at(date)
    f(None, {"format": "b"})
    x = FLIP_X.astype(dtype)
    rng(42)
    with cpu_engine(engine):
        if expected is None:
            with pytest.raises(ValueError, match="once an element is chosen"):
                f(x, {"format": "h", "flip": 1, "p": p, "round": mode})
            assert f.options().format == "b"  # nothing stored
        else:
            y = f(x, {"format": "h", "flip": 1, "p": p, "round": mode})
            assert y.dtype == dtype and np.array_equal(y, np.array(expected, dtype))
    assert pychop_compat.rand() == following


# Octave, chop.m of 2019-03-07 and 2019-03-08: chop([1/3; 2; -0.1; 3e-6], struct('format', F, 'round', 3))
# gives these values for F = [] and F = '' ('h' rounded down), and "structure has no member 'format'" without
# the field; with 'round', 2, 'subnormal', 0 and F = '': [0.33349609375, 2, -0.0999755859375, 0].
@pytest.mark.parametrize("date", ["2019-03-07", "2019-03-13"])
def test_empty_format_before_2019_03_14_means_half(date):
    from types import SimpleNamespace

    x = np.array([1 / 3, 2.0, -0.1, 3e-6])
    down = [0.333251953125, 2.0, -0.10003662109375, 2.9802322387695312e-06]
    f = chop_at(date)
    for o in ({"format": None, "round": 3}, {"format": "", "round": 3}, {"format": [], "round": 3},
              SimpleNamespace(format=None, round=3), SimpleNamespace(format="", round=3)):
        assert np.array_equal(f(x, o), down), o
    assert np.array_equal(f(x, {"format": "", "round": 2, "subnormal": 0}), [0.33349609375, 2.0, -0.0999755859375, 0])
    for missing in ({"round": 3}, SimpleNamespace(round=3)):
        with pytest.raises(ValueError, match="needs options.format"):
            f(x, missing)


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("date", ["2019-03-07", "2020-06-01", "2024-01-01"])
def test_python_ints_beyond_int64_are_taken_as_chop_takes_them(engine, date):
    # 2**70 and 2**64 lie far beyond fp16's xmax = 65504 (round to nearest: +-Inf), as for chop
    f = chop_at(date)
    with cpu_engine(engine):
        y = f(2**70, {"format": "h"})
        assert type(y) is float and y == np.inf
        assert f(-(2**64)) == -np.inf
        z = f([2**70, 1, -(2**64)])
        assert type(z) is np.ndarray and z.dtype == np.float64 and np.array_equal(z, [np.inf, 1.0, -np.inf])


# GNU Octave, chop.m of 2019-03-20 (f29e260) with its roundit.m and a rand.m replaying MATLAB's stream after rng(0)
# (randi(imax, ...) as 1 + floor(imax * rand(...))): with struct('format', 'h', 'flip', 1, 'p', p),
# chop([1/3 2/3 0.1 0.7]) with p = 1 fails in bitxor ("size of X and Y must match") after 8 numbers; with p = 0.3
# it gives ROW_ONE_FLIP (5 numbers); chop([1/3 2/3 0.1 0.7]') and chop([1/3 0.1; 2/3 0.7]) with p = 1 give
# FLIPPED (column-major; 8 numbers).
FLIP_ROW = np.array([[1 / 3, 2 / 3, 0.1, 0.7]])
ROW_ONE_FLIP = [0.333251953125, 0.66650390625, 0.0960693359375, 0.7001953125]
FLIPPED = [0.317626953125, 0.666015625, 0.0997314453125, 0.7158203125]


@pytest.mark.parametrize("date", ["2019-03-07", "2019-03-20", "2019-07-10"])
def test_bit_flips_on_a_row_fail_before_2019_07_11_once_two_elements_are_chosen(date):
    def following(drawn):
        rng(0)
        return pychop_compat.rand(drawn + 1, 1)[drawn, 0]

    opts = {"format": "h", "flip": 1, "p": 1}
    after = following(8)
    rng(0)
    with pytest.raises(ValueError, match="row vector"):
        chop_at(date)(FLIP_ROW, opts)
    assert pychop_compat.rand() == after  # roundit's rand(size(y)) and randi drew before bitxor failed
    for x in (FLIP_ROW.T, FLIP_ROW.reshape(2, 2, order="F"), FLIP_ROW.ravel()):  # columns for chop.m
        rng(0)
        assert np.array_equal(chop_at(date)(x, opts).ravel(order="F"), FLIPPED), x.shape
        assert pychop_compat.rand() == after
    after = following(5)
    rng(0)
    assert np.array_equal(chop_at(date)(FLIP_ROW, dict(opts, p=0.3)), [ROW_ONE_FLIP])  # one chosen: no failure
    assert pychop_compat.rand() == after


# Octave, chop.m of 2019-03-14 (dc590c4): chop([], struct('format', 'zz')) returned [] (its
# "if nargin == 0 || isempty(x)" return comes before the format is read) and stored the format; then
# chop([0.1 0.2]) failed ("'emax' undefined"), chop([]) still returned [], and new options worked again.
@pytest.mark.parametrize("date", ["2019-03-07", "2019-03-14", "2019-03-19"])
def test_empty_input_with_an_unknown_format_before_2019_03_20(date):
    f = chop_at(date)
    f(None, {"format": "b"})
    for empty in ([], np.zeros((0, 3), np.float32), None):
        y = f(empty, {"format": "zz"})
        assert y is None if empty is None else (y.size == 0 and y.shape == np.shape(empty))
    assert f.options().format == "zz"
    with pytest.raises(ValueError, match="'emax' undefined"):
        f(np.array([0.1, 0.2]))
    assert f([]).size == 0
    assert np.array_equal(f(np.array([0.1, 0.2]), {"format": "h"}), [0.0999755859375, 0.199951171875])
    assert f(0.1) == 0.0999755859375
    with pytest.raises(ValueError, match="Unrecognized format"):
        f(np.array([0.1]), {"format": "zz"})  # a nonempty input fails at once
    with pytest.raises(ValueError, match="Unrecognized format"):
        chop_at("2019-03-20")([], {"format": "zz"})  # the explicit check comes first from 2019-03-20
