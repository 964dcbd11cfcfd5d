"""chop's MATLAB facade: option rules, persistence, input handling and errors.

Expected values here follow from chop.m's documented rules or from arithmetic
stated next to them, never from running this package.
"""

from __future__ import annotations

from types import MappingProxyType, SimpleNamespace

import numpy as np
import pytest

from pychop_compat import Chop, Options, chop, chop_options, clear_chop, roundit

THIRD = 1 / 3
# 1/3 = 0.010101...b.  To 8 bits (bfloat16): 1.0101010b * 2^-2 = 0.33203125 (down),
# 1.0101011b * 2^-2 = 0.333984375 (up; also nearest, since the next bits are 0101... > 0100...).
THIRD_BF16_DOWN, THIRD_BF16_UP = 0.33203125, 0.333984375
# To 11 bits (fp16): 1.0101010101b * 2^-2 = 0.333251953125 (down and nearest).
THIRD_FP16_NEAREST = 0.333251953125


def test_defaults_on_first_use():
    o = chop_options()
    assert (o.format, o.subnormal, o.round, o.flip, o.p, o.explim, o.params) == ("h", 1, 1, 0, 0.5, 1, [11, 15])
    assert callable(o.randfunc)
    assert chop(THIRD) == THIRD_FP16_NEAREST


def test_given_options_rederive_every_field():
    chop(THIRD, {"format": "b", "round": 2, "explim": 0})
    o = chop_options()
    assert (o.format, o.subnormal, o.round, o.explim, o.params) == ("b", 0, 2, 0, [8, 127])
    chop(THIRD, {"format": "h"})  # missing fields take defaults, not previous values
    o = chop_options()
    assert (o.format, o.subnormal, o.round, o.explim) == ("h", 1, 1, 1)


@pytest.mark.parametrize("name", ["b", "bfloat16"])
def test_bfloat16_defaults_to_no_subnormals(name):
    chop(None, {"format": name})
    assert chop_options().subnormal == 0


def test_missing_format_means_fp16():
    chop(None, {"round": 3})
    assert chop_options().format == "h"
    chop(None, {"format": "", "round": 3})
    assert chop_options().format == "h"


@pytest.mark.parametrize("empty", [None, [], (), ""])
def test_matlab_empty_options_reuse_stored(empty):
    # MATLAB's chop(x, []): isempty(options), so the stored options are used.
    chop(THIRD, {"format": "b", "round": 3})
    assert chop(THIRD, empty) == THIRD_BF16_DOWN
    assert chop(THIRD) == THIRD_BF16_DOWN


@pytest.mark.parametrize("struct", [{}, MappingProxyType({}), SimpleNamespace(), Options()],
                         ids=["dict", "mappingproxy", "namespace", "Options"])
def test_empty_struct_means_every_default(struct):
    # MATLAB's chop(x, struct()): a struct is not empty, so chop.m gives every field its default.
    chop(THIRD, {"format": "b", "round": 3})
    assert chop(THIRD, struct) == THIRD_FP16_NEAREST
    o = chop_options()
    assert (o.format, o.round, o.subnormal) == ("h", 1, 1)


def test_options_object_is_a_struct_not_empty():
    # MATLAB: a struct with no (or only empty) fields is not empty, so all defaults apply.
    chop(None, {"format": "b", "round": 3})
    chop(None, Options())
    assert chop_options().format == "h" and chop_options().round == 1


@pytest.mark.parametrize("kind", ["dict", "Options", "SimpleNamespace"])
def test_option_containers(kind):
    fields = {"format": "bfloat16", "round": 2}
    options = {"dict": fields, "Options": Options(**fields), "SimpleNamespace": SimpleNamespace(**fields)}[kind]
    assert chop(THIRD, options) == THIRD_BF16_UP


def test_none_and_empty_list_values_mean_default():
    chop(None, {"format": "b", "round": None, "subnormal": [], "p": np.array([])})
    o = chop_options()
    assert (o.round, o.subnormal, o.p) == (1, 0, 0.5)


def test_custom_params_persist():
    chop(None, {"format": "c", "params": [5, 3]})
    chop(None, {"format": "c", "round": 2})  # no params: keep the stored [t, emax]
    assert chop_options().params == [5, 3]
    chop(None, {"format": "h"})
    chop(None, {"format": "custom"})  # even params stored by a built-in format
    assert chop_options().params == [11, 15]


def test_custom_without_params_and_nothing_stored():
    with pytest.raises(ValueError, match=r"Must specify options\.params with options\.format = 'c'"):
        chop(1.0, {"format": "c"})


def test_builtin_format_ignores_and_returns_params():
    chop(None, {"format": "q43", "params": [3, 3]})
    assert chop_options().params == [4, 7]


@pytest.mark.parametrize(
    "x, round_mode, t, ok",
    [
        (np.float32(1), 1, 11, True), (np.float32(1), 1, 12, False),
        (np.float32(1), 2, 23, True), (np.float32(1), 2, 24, False),
        (1.0, 1, 25, True), (1.0, 1, 26, False),
        (1.0, 5, 52, True), (1.0, 5, 53, False),
        (None, 1, 25, True), (None, 1, 26, False),  # chop([], options): class double
    ],
)
def test_custom_precision_limits(x, round_mode, t, ok):
    options = {"format": "c", "params": [t, 10], "round": round_mode}
    if ok:
        chop(x, options)
    else:
        cls = "single" if isinstance(x, np.float32) else "double"
        with pytest.raises(ValueError, match=f"at most {t - 1} if working in {cls}"):
            chop(x, options)


def test_state_unchanged_when_options_are_rejected():
    chop(None, {"format": "b", "round": 4})
    with pytest.raises(ValueError):
        chop(1.0, {"format": "zz"})
    o = chop_options()
    assert (o.format, o.round) == ("b", 4)


def test_set_options_only():
    assert chop(None, {"format": "b", "round": 2}) is None
    empty = chop([], {"format": "h"})
    assert isinstance(empty, np.ndarray) and empty.size == 0
    assert chop_options().format == "h"


def test_clear_chop_restores_defaults():
    chop(None, {"format": "b", "round": 2})
    clear_chop()
    assert chop_options().format == "h"
    assert chop(THIRD) == THIRD_FP16_NEAREST


@pytest.mark.parametrize(
    "options, message",
    [
        ({"format": "fp17"}, "Unrecognized format 'fp17'"),
        ({"format": "H"}, "Unrecognized format"),
        ({"round": 0}, "Unsupported value of options.round: 0"),
        ({"round": 7}, "Unsupported value of options.round: 7"),
        ({"round": 1.5}, "options.round must be an integer"),
        ({"rounding": 1}, "Unknown chop option"),
        ({"format": "c", "params": [5]}, r"options.params must be \[t, emax\]"),
        ({"format": "c", "params": [0, 3]}, "t >= 1 and emax >= 1"),
        ({"format": "c", "params": [5.5, 3]}, "must be an integer"),
        ({"randfunc": 3}, "randfunc must be callable"),
        ({"p": "half"}, "options.p must be a real number"),
        ({"format": 16}, "options.format must be a string"),
    ],
)
def test_bad_options(options, message):
    with pytest.raises(ValueError, match=message):
        chop(1.0, options)


@pytest.mark.parametrize("options", [3, b"h", [1, 2]])
def test_options_of_wrong_type(options):
    with pytest.raises(TypeError, match="options must be a dict"):
        chop(1.0, options)


@pytest.mark.parametrize("x", [1 + 2j, np.array([1.0, 2.0], dtype=complex), np.complex64(1)])
def test_complex_input_rejected(x):
    with pytest.raises(ValueError, match="Chop requires a real input array"):
        chop(x, {"format": "h"})


def _complex_inputs():
    yield 1j
    yield [1j, 2.0]
    yield np.array([1.0, 2.0], dtype=complex)
    yield np.complex64(1)
    try:
        import torch
    except ImportError:
        return
    yield torch.tensor([1 + 1j])


@pytest.mark.parametrize("x", list(_complex_inputs()), ids=lambda x: type(x).__name__)
def test_complex_rejected_before_options_are_stored(x):
    chop(None, {"format": "b"})
    with pytest.raises(ValueError, match="Chop requires a real input array"):
        chop(x, {"format": "h"})
    assert chop_options().format == "b"
    with pytest.raises(ValueError, match="Chop requires a real input array"):
        Chop(format="h")(x)


def test_unsupported_dtype():
    with pytest.raises(TypeError, match="float64, float32 and float16"):
        chop(np.array(["a"]), {"format": "h"})


def test_randfunc_must_return_n_numbers():
    with pytest.raises(ValueError, match="returned 1 numbers; it must return 3"):
        chop(np.array([0.1, 0.2, 0.3]), {"round": 5, "randfunc": lambda n: np.array([0.5])})


def test_randfunc_gets_only_non_integers():
    # Scaled by 2^(t-1-e), 1.0 and 0.5 are exact fp16 numbers: they draw nothing; 0.1 draws one.
    asked = []

    def randfunc(n):
        asked.append(n)
        return np.full(n, 0.5)

    chop(np.array([1.0, 0.1, 0.5, 0.0]), {"round": 5, "randfunc": randfunc})
    assert asked == [1]


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("options", [
    {"format": "h"}, {"format": "b", "round": 5}, {"format": "q43", "round": 6, "flip": 1, "p": 0.5},
    {"format": "c", "params": [5, 3], "round": 2, "explim": 0},
])
def test_input_never_modified(dtype, options):
    rng = np.random.default_rng(1)
    base = (rng.standard_normal((7, 5)) * 10.0 ** rng.integers(-8, 8, (7, 5))).astype(dtype)
    base[0, :3] = [np.inf, -np.nan, -0.0]
    for x in (base, np.asfortranarray(base), base[::2, 1:], base.T):
        before = x.copy()
        chop(x, options)
        # bit for bit, -0 and NaN payloads too
        assert np.array_equal(np.ascontiguousarray(x).view(np.uint8), before.view(np.uint8))


def test_result_types_follow_input():
    opts = {"format": "h"}
    r = chop(THIRD, opts)
    assert type(r) is float and r == THIRD_FP16_NEAREST
    r = chop(np.float32(THIRD), opts)
    assert type(r) is np.float32 and r == np.float32(THIRD_FP16_NEAREST)
    r = chop(np.float64(THIRD), opts)
    assert type(r) is np.float64
    r = chop([THIRD, 1], opts)
    assert isinstance(r, np.ndarray) and r.dtype == np.float64 and r.tolist() == [THIRD_FP16_NEAREST, 1.0]
    r = chop(np.arange(3), opts)
    assert r.dtype == np.float64 and r.tolist() == [0.0, 1.0, 2.0]
    r = chop(np.array([True, False]), opts)
    assert r.dtype == np.float64 and r.tolist() == [1.0, 0.0]
    r = chop(np.array(THIRD), opts)
    assert isinstance(r, np.ndarray) and r.shape == () and r == THIRD_FP16_NEAREST
    r = chop(np.zeros((0, 3), np.float32), opts)
    assert r.shape == (0, 3) and r.dtype == np.float32
    r = chop(7, opts)
    assert type(r) is float and r == 7.0


def test_float16_input_returns_float16():
    codes = np.arange(0, 0x7C00, 7, dtype=np.uint16).view(np.float16)  # finite fp16 numbers
    r = chop(codes, {"format": "h"})
    assert r.dtype == np.float16 and np.array_equal(r, codes)  # fp16 numbers are fixed points


def test_shape_is_kept():
    x = np.linspace(-3, 3, 24).reshape(2, 3, 4)
    assert chop(x, {"format": "h"}).shape == (2, 3, 4)


def test_chop_object_is_stateless():
    chop(None, {"format": "b", "round": 3})
    to_fp16_up = Chop(format="h", round=2)
    assert to_fp16_up(THIRD) == THIRD_FP16_NEAREST + 2.0**-12  # one fp16 ulp (2^(-2-10)) above
    o = chop_options()
    assert (o.format, o.round) == ("b", 3)
    assert chop(THIRD) == THIRD_BF16_DOWN


def test_chop_object_options():
    ch = Chop({"format": "b"}, round=2)
    o = ch.options
    assert (o.format, o.round, o.subnormal, o.params) == ("b", 2, 0, [8, 127])
    assert ch(THIRD) == THIRD_BF16_UP
    assert "format='b'" in repr(ch)


def test_chop_object_checks_precision_per_class():
    ch = Chop(format="c", params=[16, 100])
    ch(1.0)  # double: t <= 25 with round to nearest
    with pytest.raises(ValueError, match="at most 11 if working in single"):
        ch(np.float32(1))


def test_chop_object_generator_is_reproducible():
    x = np.random.default_rng(3).standard_normal(1000)
    a = Chop(format="h", round=5, rng=np.random.default_rng(42))(x)
    b = Chop(format="h", round=5, rng=np.random.default_rng(42))(x)
    c = Chop(format="h", round=5, rng=np.random.default_rng(43))(x)
    assert np.array_equal(a, b)
    assert not np.array_equal(a, c)
    # An int seed: the counter-based generator (tests/test_compiled_engine.py), also reproducible.
    assert np.array_equal(Chop(format="h", round=5, rng=42)(x), Chop(format="h", round=5, rng=42)(x))
    assert not np.array_equal(Chop(format="h", round=5, rng=42)(x), Chop(format="h", round=5, rng=43)(x))


def test_roundit_defaults_and_modes():
    x = np.array([-2.5, -1.5, -0.5, 0.5, 1.5, 2.5, 2.7, -2.7])
    assert roundit(x).tolist() == [-2, -2, 0, 0, 2, 2, 3, -3]  # ties to even
    assert roundit(x, {"round": 2}).tolist() == [-2, -1, 0, 1, 2, 3, 3, -2]
    assert roundit(x, {"round": 3}).tolist() == [-3, -2, -1, 0, 1, 2, 2, -3]
    assert roundit(x, {"round": 4}).tolist() == [-2, -1, 0, 0, 1, 2, 2, -2]


def test_roundit_flip_needs_params():
    with pytest.raises(ValueError, match="needs options.params"):
        roundit([1.0], {"flip": 1})
    with pytest.raises(ValueError, match="Unsupported value of options.round"):
        roundit([1.0], {"round": 9})


def test_flip_leaves_inf_and_nan_alone():
    x = np.array([np.inf, -np.inf, np.nan])
    c = chop(x, {"format": "h", "flip": 1, "p": 1.0})
    assert np.isposinf(c[0]) and np.isneginf(c[1]) and np.isnan(c[2])


def test_flip_changes_one_significand_bit():
    # p = 1: every element of 1.0 (scaled significand 2^10) gets exactly one of the 10 bits below
    # the leading one flipped: 1 + 2^(b-11) for some b in 1..10.
    c = chop(np.ones(500), {"format": "h", "flip": 1, "p": 1.0})
    offsets = np.log2(c - 1.0)
    assert set(offsets.tolist()) == set(range(-10, 0))


def test_integer_tensors_count_as_double():
    torch = pytest.importorskip("torch")
    # t = 20 > 11 is allowed for double input with round to nearest (limit 25), as for NumPy integers.
    options = {"format": "c", "params": [20, 15]}
    assert chop(np.array([3]), options).tolist() == [3.0]
    assert chop(torch.tensor([3]), options).tolist() == [3.0]


def test_reused_options_dict_sees_its_changes():
    options = {"format": "h"}
    assert chop(THIRD, options) == THIRD_FP16_NEAREST
    options["format"] = "b"
    assert chop(THIRD, options) == THIRD_BF16_UP
    options["round"] = 3
    assert chop(THIRD, options) == THIRD_BF16_DOWN


def test_reused_custom_options_inherit_the_current_params():
    inherit = {"format": "c"}
    chop(None, {"format": "c", "params": [5, 3]})
    chop(None, inherit)
    assert chop_options().params == [5, 3]
    chop(None, {"format": "c", "params": [4, 7]})
    chop(None, inherit)
    assert chop_options().params == [4, 7]


def test_scalar_fast_path_matches_array_path():
    x = np.random.default_rng(5).standard_normal(200) * 10.0 ** np.random.default_rng(6).integers(-9, 9, 200)
    for options in ({"format": "h"}, {"format": "q43", "round": 2}, {"format": "b", "round": 4, "subnormal": 1}):
        assert [chop(float(v), options) for v in x] == chop(x, options).tolist()


def test_chop_repr_names_what_changes_the_bits_and_options_compare_arrays():
    assert "rules='correct'" in repr(Chop(format="h", rules="correct")) and "rules" not in repr(Chop(format="h"))
    assert repr(Chop("h", rng=5)).endswith("rng=5)")
    # params may be an array (docs/options.rst): == compares values (0.6.0 raised)
    assert Options(format="c", params=np.array([5, 5])) == Options(format="c", params=np.array([5, 5]))
    assert Options(format="c", params=[5, 5]) != Options(format="c", params=np.array([5, 6]))
