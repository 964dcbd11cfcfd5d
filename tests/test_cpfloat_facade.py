"""The cpfloat facade's interface: CPFloat's MEX field names, defaults, persistence and errors
(mex/cpfloat.c of CPFloat at commit 3583976, as documented in docs/migration.rst)."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest

from pychop_compat import chop, clear_cpfloat, cpfloat, cpfloat_options
from pychop_compat.cpfloat import CpfloatError, CpfloatOptions


@pytest.fixture(autouse=True)
def _fresh():
    clear_cpfloat()
    yield
    clear_cpfloat()


def test_defaults():
    o = cpfloat()
    assert o == CpfloatOptions("h", [11, -14, 15], 1, 1, 1, 0, 1, 0, 0.5)
    assert cpfloat(1 / 3) == chop(1 / 3, {"format": "h"})


def test_named_formats_and_their_defaults():
    assert cpfloat(None, {"format": "E4M3"}).params == [4, -6, 8]
    assert cpfloat_options().infinity == 0  # CPFloat's E4M3: no infinity by default
    assert cpfloat(1000.0) != cpfloat(1000.0) and cpfloat(470.0) == 480.0  # largest 480, overflow NaN
    assert cpfloat(None, {"format": "bfloat16"}).subnormal == 0
    assert cpfloat(None, {"format": "q52"}).params == [3, -14, 15]
    assert cpfloat(None, {"format": "t"}).params == [11, -126, 127]
    assert cpfloat(None, {"format": "float8_e4m3fn"}).params == [4, -6, 8]
    assert cpfloat(470.0) != cpfloat(470.0)  # OCP E4M3: largest 448


def test_three_e4m3s():
    assert chop(300.0, {"format": "q43"}) == np.inf  # chop's q43: [4, 7], largest 240
    assert cpfloat(300.0, {"format": "q43", "infinity": 1}) == 288.0  # CPFloat's: largest 480
    assert cpfloat(500.0, {"format": "q43", "infinity": 1}) == np.inf
    assert cpfloat(460.0, {"format": "float8_e4m3fn"}) == 448.0  # OCP: largest 448


def test_persistence_rules():
    cpfloat(None, {"format": "c", "params": [5, -10, 10], "round": 7, "saturation": 1, "subnormal": 0,
                   "infinity": 0, "explim": 0, "flip": 0, "p": 0.25})
    with pytest.raises(CpfloatError, match="cpfloat:invalidparams"):
        cpfloat(None, {"round": 2})  # the stored format is custom: the MEX wants params again
    o = cpfloat(None, {"round": 2, "params": [5, -10, 10]})  # left out: kept, but subnormal and infinity
    assert (o.format, o.params, o.round, o.saturation, o.explim, o.p) == ("c", [5, -10, 10], 2, 1, 0, 0.25)
    assert (o.subnormal, o.infinity) == (1, 1)
    o = cpfloat(None, {"format": "h", "round": []})  # empty: the default
    assert (o.format, o.params, o.round, o.saturation) == ("h", [11, -14, 15], 1, 1)
    before = cpfloat_options()
    assert cpfloat(None, {}) == before and cpfloat(None, None) == before
    with pytest.raises(CpfloatError, match="cpfloat:invalidparams"):
        cpfloat(None, {"format": "c"})  # custom needs params on every call that names it
    assert cpfloat_options() == before  # nothing stored on a parse error


def test_params_ignored_for_named_formats_with_a_warning():
    with pytest.warns(UserWarning, match="ignoredparams"):
        o = cpfloat(None, {"format": "h", "params": [3, -2, 3]})
    assert o.params == [11, -14, 15]


def test_errors_the_mex_raises():
    with pytest.raises(CpfloatError, match="invalidstruct"):
        cpfloat(1.0, 3)
    with pytest.raises(CpfloatError, match="invalidformat: Invalid floating-point format"):
        cpfloat(1.0, {"format": "fp7"})
    with pytest.raises(CpfloatError, match="Target format is too large"):
        cpfloat(np.float32(1.0), {"format": "d"})
    with pytest.raises(CpfloatError, match="invalidmatrix"):
        cpfloat(np.array([1 + 2j]))
    with pytest.raises(CpfloatError, match="invalidmatrix"):
        cpfloat(np.array([1, 2], dtype=np.int32))
    with pytest.raises(CpfloatError, match="Invalid exponent range"):
        cpfloat(1.0, {"format": "c", "params": [5, -1023, 10]})
    with pytest.raises(CpfloatError, match="double rounding"):
        cpfloat(np.float32(1.0), {"format": "c", "params": [12, -10, 10]})
    assert cpfloat(np.float32(1.0), {"format": "c", "params": [12, -10, 10], "round": 2}) == 1.0  # limit 23
    with pytest.raises(CpfloatError, match="double rounding"):
        cpfloat(1.0, {"format": "c", "params": [26, -10, 10], "round": 1})
    cpfloat(None, {"format": "h", "drcheck": 0})
    y = cpfloat(1 / 3, {"format": "c", "params": [26, -10, 10]})  # drcheck = 0 was kept
    assert y != 1 / 3 and abs(y - 1 / 3) <= 2.0 ** -28


def test_values_the_mex_misreads_are_refused():
    with pytest.raises(ValueError, match="fpopts.round"):
        cpfloat(1.0, {"round": 1.5})
    with pytest.raises(ValueError, match="fpopts.flip"):
        cpfloat(1.0, {"flip": 3})
    with pytest.raises(ValueError, match="probability"):
        cpfloat(1.0, {"flip": 1, "p": 2})
    with pytest.raises(ValueError, match="fpopts.format"):
        cpfloat(1.0, {"format": 3})
    with pytest.raises(ValueError, match="Unknown cpfloat field"):
        cpfloat(1.0, {"fromat": "h"})


def test_no_rounding_codes_return_the_input():
    x = np.array([1 / 3, 1e300, np.inf, -0.0])
    for code in (8, 9, -2, 100):
        y = cpfloat(x, {"format": "h", "round": code, "saturation": 1})
        assert y.tobytes() == x.tobytes()


def test_types_shapes_and_the_input_are_kept():
    x = np.arange(12.0).reshape(3, 4) / 7
    before = x.copy()
    y = cpfloat(x, {"format": "b"})
    assert y.shape == (3, 4) and y.dtype == np.float64 and np.array_equal(x, before)
    assert isinstance(cpfloat(np.float32(0.1)), np.float32)
    assert isinstance(cpfloat(0.1), float)
    assert cpfloat([0.1, 0.2]).dtype == np.float64
    torch = pytest.importorskip("torch")
    t = torch.tensor([0.1, 0.2], dtype=torch.bfloat16)
    assert cpfloat(t, {"format": "q52"}).dtype == torch.bfloat16


def test_chop_is_unchanged_by_cpfloat():
    chop(None, {"format": "b", "round": 2})
    cpfloat(1.0, {"format": "h", "round": 7})
    o = __import__("pychop_compat").chop_options()
    assert (o.format, o.round) == ("b", 2)


@pytest.mark.parametrize("name", ["binary16", "h", "bfloat16", "E4M3", "binary32"])
def test_a_format_name_is_shorthand_for_a_struct(name):
    """``cpfloat(x, name)`` is ``cpfloat(x, struct('format', name))`` (a Python shorthand; the MEX
    interface wants a struct)."""
    x = np.linspace(-3, 3, 41) / 7
    assert np.array_equal(cpfloat(x.copy(), name), cpfloat(x.copy(), {"format": name}), equal_nan=True)


# --- input kinds and option containers as chop takes them ---

THIRD_H = float(np.float16(1 / 3))  # 1/3 to nearest fp16 (NumPy's cast): 0.333251953125


@pytest.mark.filterwarnings("ignore:the matrix subclass:PendingDeprecationWarning")
def test_masked_arrays_and_matrices_come_back_as_chop_gives_them():
    """A masked array comes back masked, only its unmasked elements rounded; np.matrix as a matrix;
    an unknown ndarray subclass is refused (the MEX's plain array would drop the mask silently)."""
    from pychop_compat import cpfloat_at, rand, rng

    x = np.ma.masked_array([1 / 3, 2 / 3], mask=[0, 1])
    for f in (cpfloat, cpfloat_at("2025-01-01")):
        y = f(x, {"format": "h"})
        assert type(y) is np.ma.MaskedArray and list(y.mask) == [False, True]
        assert y.data[0] == THIRD_H and y.data[1] == 2 / 3  # masked: untouched
    # before 2022-02-17 (subnormal 0, ties to even) +-xmin/2 went to +-xmin: also on a masked array
    y = cpfloat_at("2021-06-01")(np.ma.masked_array([2.0**-15, 1 / 3], mask=[0, 1]), {"format": "h", "subnormal": 0})
    assert type(y) is np.ma.MaskedArray and y.data[0] == 2.0**-14 and y.data[1] == 1 / 3
    m = cpfloat(np.matrix([[1 / 3, 2 / 3]]), "h")
    assert type(m) is np.matrix and np.array_equal(m, [[THIRD_H, float(np.float16(2 / 3))]])

    class Tagged(np.ndarray):
        pass

    with pytest.raises(TypeError, match="ndarray subclass"):
        cpfloat(np.array([1 / 3]).view(Tagged), "h")
    # stochastic rounding: MATLAB's c(~m) = cpfloat(x(~m)), one draw per unmasked element
    x = np.ma.masked_array(np.arange(1, 13).reshape(3, 4) / 7.0, mask=np.eye(3, 4, dtype=bool))
    keep = ~x.mask.ravel(order="F")
    rng(5)
    y = cpfloat(x, {"format": "h", "round": 5})
    after = rand()
    rng(5)
    vector = cpfloat(x.data.ravel(order="F")[keep], {"format": "h", "round": 5})
    assert after == rand() and np.array_equal(y.data.ravel(order="F")[keep], vector)
    assert np.array_equal(y.data[x.mask], x.data[x.mask])


def test_options_from_any_mapping_and_attribute_objects_are_checked():
    """A non-dict Mapping is read like a dict (it was ignored); an attribute object's unknown field
    raises as the dict's does; chop's Options with params unset gives no ignoredparams warning."""
    import math
    import types
    import warnings
    from fractions import Fraction

    from pychop_compat import Options

    # round 2 (up) to bfloat16: -1/3 on the grid of spacing 2**-9 in [1/4, 1/2)
    up = float(Fraction(math.ceil(Fraction(-1, 3) * 2**9), 2**9))
    assert cpfloat(np.array([-1 / 3]), types.MappingProxyType({"format": "b", "round": 2}))[0] == up == -0.33203125
    with pytest.raises(ValueError, match="Unknown cpfloat field"):
        cpfloat(np.array([1 / 3]), types.SimpleNamespace(format="h", rouond=2))
    assert cpfloat(np.array([-1 / 3]), types.SimpleNamespace(format="b", round=2))[0] == up
    clear_cpfloat()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert cpfloat(np.array([1 / 3]), Options(format="h"))[0] == THIRD_H


def test_pandas_input_gets_a_cpfloat_error():
    pd = pytest.importorskip("pandas")
    with pytest.raises(TypeError, match=r"^cpfloat does not support pandas\.") as caught:
        cpfloat(pd.Series([1 / 3]), "h")
    assert "pandas" not in str(caught.value).partition("input")[2]  # not listed among what it takes


@pytest.mark.parametrize("dtype", [">f8", ">f4"])
def test_byte_swapped_arrays_are_accepted_with_a_native_result(dtype):
    x = np.array([1 / 3, -2 / 3, 1e-6], dtype=dtype)
    before = x.copy()
    y = cpfloat(x, "h")
    native = np.dtype(dtype).newbyteorder("=")
    assert y.dtype == native and y.dtype.isnative
    assert np.array_equal(y, x.astype(np.float16).astype(native))  # NumPy's cast to fp16, round to nearest
    assert np.array_equal(x, before) and x.dtype == np.dtype(dtype)


def test_bf16_subnormals_cpfloat_flushes_chop_keeps():
    # CPFloat's MEX (mex/cpfloat.c) sets subnormal = 0 for 'b', 'bfloat16' and 'bf16' alike; chop's
    # 'bf16' is a catalogue name beyond chop.m (bfloat16 as hardware has it: subnormals kept).
    # 1e-39 is below bfloat16's xmin = 2^-126: on the subnormal grid 2^-133 it is 10.89 steps, so 11.
    spacing = Fraction(1, 2**133)
    assert round(Fraction(1e-39) / spacing) == 11
    assert cpfloat(1e-39, "bf16") == 0.0
    assert cpfloat_options().subnormal == 0
    assert chop(1e-39, "bf16") == float(11 * spacing)
    assert chop(1e-39, "bfloat16") == 0.0


@pytest.mark.parametrize("name", ["subnormal", "explim", "saturation", "infinity"])
@pytest.mark.parametrize("value", [2, -1, 2.0, np.int64(2)])
def test_switches_other_than_0_and_1_are_refused(name, value):
    """mex/cpfloat.c passes the double on and the C library turns each switch on only when it equals 1:
    CPFloat's C results (reviewer, 3583976) for 'h' with value 2: subnormal 3e-8 -> 0.0, explim 1e5 -> 99968,
    saturation 1e5 -> Inf, infinity 1e5 -> NaN; the facade read 2 as 1 (5.96e-8, Inf, 65504, Inf)."""
    cpfloat(None, {"format": "h", "round": 2})
    before = cpfloat_options()
    with pytest.raises(ValueError, match=rf"fpopts\.{name} must be 0, 1, False or True"):
        cpfloat(3e-8, {"format": "h", name: value})
    assert cpfloat_options() == before  # nothing stored


@pytest.mark.parametrize("value, stored", [(0, 0), (1, 1), (False, 0), (True, 1), (0.0, 0), (1.0, 1),
                                           (np.float64(1.0), 1), (np.bool_(False), 0)])
def test_switches_0_and_1_are_accepted(value, stored):
    o = cpfloat(None, {"format": "h", "subnormal": value, "explim": value, "saturation": value,
                       "infinity": value})
    assert (o.subnormal, o.explim, o.saturation, o.infinity) == (stored,) * 4


def test_an_empty_mapping_is_matlabs_struct():
    """The MEX parses struct() like any struct (mxIsEmpty(struct()) is false): format and round kept,
    subnormal and infinity back to the format's defaults (bfloat16: 0 and 1), params from the format;
    a stored custom format without params is 'cpfloat:invalidparams'.  {} was read as [] (no change)."""
    import types

    cpfloat(None, {"format": "b", "round": 2, "subnormal": 1, "infinity": 0})
    o = cpfloat(None, {})
    assert (o.format, o.params, o.round, o.subnormal, o.infinity) == ("b", [8, -126, 127], 2, 0, 1)
    cpfloat(None, {"format": "b", "round": 2, "infinity": 0})
    # bfloat16's largest is (2 - 2**-7) * 2**127 < 1e39: round up overflows, to Inf with infinity back at 1
    assert float(Fraction(2**8 - 1, 2**7) * 2**127) < 1e39
    assert cpfloat(1e39, {}) == np.inf
    for empty in ({}, types.MappingProxyType({})):
        cpfloat(None, {"format": "c", "params": [5, -10, 10]})
        with pytest.raises(CpfloatError, match="cpfloat:invalidparams"):
            cpfloat(None, empty)
        with pytest.raises(CpfloatError, match="cpfloat:invalidparams"):
            cpfloat(1.0, empty)
    assert cpfloat(None, None).params == [5, -10, 10]  # [] changes nothing, checks a valid format


def test_none_as_x_runs_the_checks_for_a_double_as_the_mex_does_for_an_empty_matrix():
    """cpfloat([], fpopts): [] is a 0x0 double, and mex/cpfloat.c runs its checks for every first argument
    (limits for doubles: emin >= -1022, emax <= 1023, precision <= 25 for round <= 1), after storing the
    options; cpfloat() (no arguments) checks nothing.  The facade skipped the checks for None."""
    from pychop_compat import cpfloat_at

    with pytest.raises(CpfloatError, match="cpfloat:invalidexponent: Selected precision may cause double rounding"):
        cpfloat(None, {"format": "c", "params": [30, -14, 15]})
    assert cpfloat().params == [30, -14, 15]  # stored before the check, as the MEX stores them
    with pytest.raises(CpfloatError, match="cpfloat:invalidexponent: Invalid exponent range selected"):
        cpfloat(None, {"format": "c", "params": [11, -2000, 4]})
    with pytest.raises(CpfloatError, match="Invalid exponent range"):
        cpfloat(None, [])  # cpfloat([], []): the stored options, checked
    assert cpfloat(None, {"format": "c", "params": [30, -14, 15], "round": 2}).params == [30, -14, 15]  # <= 52
    assert cpfloat(None, {"format": "c", "params": [30, -14, 15], "drcheck": 0}).params == [30, -14, 15]
    old = cpfloat_at("2023-01-01")  # then params = [t, emax] and one error, 'invalidparams'
    with pytest.raises(CpfloatError, match="cpfloat:invalidparams"):
        old(None, {"format": "c", "params": [30, 15]})
    assert old().params == [30, 15]


@pytest.mark.parametrize("name", ["float64", "binary128", "q"])
def test_every_target_wider_than_single_is_too_large_for_single_input(name):
    # The MEX refuses 'd' (and its aliases) on single input: "Target format is too large."  The
    # catalogue's names for double and wider formats are the same target: refused the same way.
    clear_cpfloat()
    with pytest.raises(CpfloatError, match="Target format is too large"):
        cpfloat(np.float32([1 / 3]), name)
    clear_cpfloat()
    assert cpfloat(np.float32([1 / 3]), "float32")[0] == np.float32(1 / 3)  # single itself is not


def test_params_beyond_the_third_are_ignored_as_the_mex_ignores_them():
    # mex/cpfloat.c (3583976) reads params[0], [1] and [2] and never counts the elements: [5, -3, 4, 0]
    # is [5, -3, 4].  1/3 with 5 bits: 0.0101010101... rounds to 0.010101 = 21/64 = 0.328125.
    clear_cpfloat()
    assert cpfloat(1 / 3, {"format": "c", "params": [5, -3, 4, 0]}) == Fraction(21, 64)
    clear_cpfloat()
    with pytest.raises(CpfloatError, match="invalidparams"):  # fewer: read past the array's end
        cpfloat(1 / 3, {"format": "c", "params": [5, -3]})


def test_an_empty_exponent_range_is_refused():
    # emin > emax has no numbers: CPFloat's C code gives values past its own xmax (64 for [5, 10, 2]).
    clear_cpfloat()
    with pytest.raises(ValueError, match="exponent range is empty"):
        cpfloat(np.array([512.0, 3.0]), {"format": "c", "params": [5, 10, 2]})
    clear_cpfloat()
