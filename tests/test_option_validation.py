"""Every option is validated on every call (issue 18, bullet 1).

Expected values: fp16 and bfloat16 roundings of 1/3 worked out in binary in
test_api.py (1/3 = 0.010101...b), and the validation rules of docs/options.rst.
"""

from __future__ import annotations

import collections
import fractions
from dataclasses import dataclass
from types import MappingProxyType, SimpleNamespace

import numpy as np
import pytest

from pychop_compat import Chop, Options, chop, chop_options, roundit
from bits import assert_bits_equal

THIRD = 1 / 3
THIRD_FP16 = 0.333251953125      # 1.0101010101b * 2^-2, nearest
THIRD_BF16_NEAREST = 0.333984375  # 1.0101011b * 2^-2
THIRD_BF16_DOWN = 0.33203125


# --- switches: subnormal, flip, explim ----------------------------------------------------------

SWITCH_OK = [0, 1, True, False, np.bool_(True), np.int8(1), np.uint64(0), 0.0, 1.0, np.float32(1)]
SWITCH_BAD = ["0", "1", b"1", 2, -1, 0.5, float("nan"), 1 + 0j, np.complex128(1), None.__class__, [1], (0,),
              np.array([1]), {1}, fractions.Fraction(1, 2)]


@pytest.mark.parametrize("name", ["subnormal", "flip", "explim"])
@pytest.mark.parametrize("value", SWITCH_OK, ids=repr)
def test_switch_accepts_zero_one_and_booleans(name, value):
    chop(None, {name: value})
    stored = getattr(chop_options(), name)
    assert type(stored) is int and stored == int(value)


@pytest.mark.parametrize("name", ["subnormal", "flip", "explim"])
@pytest.mark.parametrize("value", SWITCH_BAD, ids=repr)
def test_switch_rejects_everything_else(name, value):
    with pytest.raises(ValueError, match=rf"options\.{name} must be 0 or 1 \(or False/True\), got"):
        chop(THIRD, {name: value})


@pytest.mark.parametrize("value", [2, -1, 3])
def test_flip_beyond_one_points_to_the_cpfloat_facade(value):
    with pytest.raises(ValueError, match=r"pychop_compat\.cpfloat"):
        chop(THIRD, {"flip": value})


def test_string_switches_no_longer_act_as_one():
    # '0' used to be read as a true switch: subnormals kept.  Now it is an error, as is
    # everything but 0/1.  With subnormal = 0 and round to nearest, 2^-20 (below fp16's
    # xmin/2 = 2^-15) goes to 0.
    assert chop(2.0**-20, {"subnormal": 0}) == 0.0
    assert chop(2.0**-20, {"subnormal": 1}) == 2.0**-20  # an fp16 subnormal (xmins = 2^-24)
    with pytest.raises(ValueError):
        chop(2.0**-20, {"subnormal": "0"})


# --- p -------------------------------------------------------------------------------------------

@pytest.mark.parametrize("value", [0, 1, 0.0, 0.25, 1.0, np.float32(0.5), np.int64(1), fractions.Fraction(1, 3)],
                         ids=repr)
def test_p_accepts_reals_in_unit_interval(value):
    chop(None, {"p": value})
    assert chop_options().p == float(value)


@pytest.mark.parametrize("value", [1.5, -0.1, float("nan"), float("inf"), -float("inf"), 2, "0.5", 0.5 + 0j,
                                   True, np.array([0.5]), [0.5]], ids=repr)
def test_p_rejects_the_rest(value):
    with pytest.raises(ValueError, match=r"options\.p must be a real number"):
        chop(THIRD, {"p": value})


# --- round ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("value, expected", [(1, 1), (2.0, 2), (np.int32(3), 3), (np.float64(4.0), 4),
                                             (np.uint8(5), 5), (fractions.Fraction(6), 6)], ids=repr)
def test_round_accepts_integer_values(value, expected):
    chop(None, {"round": value})
    assert chop_options().round == expected and type(chop_options().round) is int


@pytest.mark.parametrize("value", [1 + 0j, np.complex64(2), "1", b"1", True, np.bool_(False), 1.5,
                                   float("nan"), float("inf"), [1], np.array([1])], ids=repr)
def test_round_rejects_non_integers(value):
    with pytest.raises(ValueError, match=r"options\.round must be an integer from 1 to 6, got .*Allowed: 1 \(nearest"):
        chop(THIRD, {"round": value})


@pytest.mark.parametrize("value", [0, 7, -1, 10**30])
def test_round_out_of_range(value):
    with pytest.raises(ValueError, match=rf"Unsupported value of options\.round: {value}\. Allowed: 1"):
        chop(THIRD, {"round": value})


def test_memo_never_skips_validation():
    # 1 + 0j == 1 and hash(1 + 0j) == hash(1): a memo keyed by value alone would
    # hand back the spec resolved for {'round': 1}.
    options = {"round": 1}
    chop(THIRD, options)
    for value in (1 + 0j, np.complex128(1), True, "1"):
        with pytest.raises(ValueError, match=r"options\.round"):
            chop(THIRD, {"round": value})
    chop(None, {"format": "c", "params": [5, 3]})
    with pytest.raises(ValueError, match=r"options\.params"):
        chop(THIRD, {"format": "c", "params": [5 + 0j, 3]})
    with pytest.raises(ValueError, match=r"options\.params"):
        chop(THIRD, {"format": "c", "params": (5, True)})


# --- format, params, randfunc -------------------------------------------------------------------

@pytest.mark.parametrize("value", [16, b"h", ["h"], np.float64(1)], ids=repr)
def test_format_must_be_a_string(value):
    with pytest.raises(ValueError, match=r"options\.format must be a string"):
        chop(THIRD, {"format": value})


@pytest.mark.parametrize("params", [["5", "3"], [5, "3"], [5.5, 3], [True, 3], [5, 3 + 0j], "53", {5, 3},
                                    np.array(["5", "3"]), [5, 3, 1], [[5, 3]]], ids=repr)
def test_params_must_be_two_integers(params):
    with pytest.raises(ValueError, match=r"options\.params"):
        chop(THIRD, {"format": "c", "params": params})


@pytest.mark.parametrize("params", [[5, 3], (5, 3), np.array([5, 3]), np.array([[5.0], [3.0]]),
                                    [np.int16(5), np.float32(3)]], ids=repr)
def test_params_forms(params):
    chop(None, {"format": "c", "params": params})
    assert chop_options().params == [5, 3]


# --- the options container ----------------------------------------------------------------------

@dataclass
class _Struct:
    format: str = "b"
    round: int = 3


class _Slotted:
    __slots__ = ("format", "round")

    def __init__(self):
        self.format, self.round = "b", 3


_Named = collections.namedtuple("_Named", "format round")


class _ReadOnlyMapping(collections.abc.Mapping):
    def __init__(self, data):
        self._data = dict(data)

    def __getitem__(self, key):
        return self._data[key]

    def __iter__(self):
        return iter(self._data)

    def __len__(self):
        return len(self._data)


@pytest.mark.parametrize("options", [
    {"format": "b", "round": 3},
    MappingProxyType({"format": "b", "round": 3}),
    _ReadOnlyMapping({"format": "b", "round": 3}),
    collections.OrderedDict(format="b", round=3),
    Options(format="b", round=3),
    SimpleNamespace(format="b", round=3),
    _Struct(),
    _Slotted(),
    _Named("b", 3),
], ids=lambda o: type(o).__name__)
def test_every_container_is_read(options):
    # bfloat16 rounded down: the fields were read (the fp16 default would give THIRD_FP16).
    assert chop(THIRD, options) == THIRD_BF16_DOWN
    assert Chop(options)(THIRD) == THIRD_BF16_DOWN


@pytest.mark.parametrize("options", [{"b"}, frozenset(), b"h", 3, 3.5, True, 1j, [("format", "b")],
                                     ("format", "b"), np.array([1.0]), object(), len, lambda: None, Options,
                                     collections, iter([1])], ids=lambda o: type(o).__name__)
def test_non_containers_are_type_errors(options):
    with pytest.raises(TypeError, match="options must be a dict"):
        chop(THIRD, options)
    with pytest.raises(TypeError, match="options must be a dict"):
        Chop(options)


@pytest.mark.parametrize("options", [
    {"precision": "b"},
    MappingProxyType({"precision": "b"}),
    SimpleNamespace(precision="b"),
    SimpleNamespace(format="b", precision="b"),
], ids=["dict", "mappingproxy", "namespace", "namespace+format"])
def test_unknown_field_is_named_with_a_suggestion(options):
    with pytest.raises(ValueError, match=r"Unknown chop option\(s\) \['precision'\].*did you mean 'format'"):
        chop(THIRD, options)


def test_unknown_field_on_an_options_instance():
    o = Options(format="b")
    o.rounding = 2  # a dataclass instance takes any attribute
    with pytest.raises(ValueError, match=r"\['rounding'\].*did you mean 'round'"):
        chop(THIRD, o)


def test_private_attributes_are_not_fields():
    o = SimpleNamespace(format="b", round=3, _note="mine")
    assert chop(THIRD, o) == THIRD_BF16_DOWN


def test_mapping_proxy_is_no_longer_read_as_empty():
    # The example: used to give the fp16 value.
    assert chop(THIRD, MappingProxyType({"format": "b"})) == THIRD_BF16_NEAREST


# --- randfunc output ----------------------------------------------------------------------------

X3 = np.array([0.1, 0.2, 0.3])  # none is an fp16 number: three draws


@pytest.mark.parametrize("output, error, message", [
    (lambda n: np.full(n + 1, 0.5), ValueError, r"returned 4 numbers; it must return 3"),
    (lambda n: np.full(n, 1.0), ValueError, r"must return numbers in \[0, 1\), got 1\.0"),
    (lambda n: np.full(n, -0.25), ValueError, r"must return numbers in \[0, 1\), got -0\.25"),
    (lambda n: np.full(n, np.nan), ValueError, r"must return numbers in \[0, 1\), got nan"),
    (lambda n: np.full(n, np.inf), ValueError, r"must return numbers in \[0, 1\), got inf"),
    (lambda n: np.full(n, 0.5 + 0j), TypeError, r"must return 3 real numbers"),
    (lambda n: ["a"] * n, TypeError, r"must return 3 real numbers"),
    (lambda n: [None] * n, TypeError, r"must return 3 real numbers"),
])
def test_randfunc_output_is_checked(output, error, message):
    with pytest.raises(error, match=r"options\.randfunc\(3\) " + message):
        chop(X3, {"round": 5, "randfunc": output})


def test_randfunc_zero_is_allowed():
    # u = 0 is in [0, 1): mode 5 rounds up when u < the fraction; every fraction here is > 0.
    up = chop(X3, {"round": 5, "randfunc": lambda n: np.zeros(n)})
    assert np.array_equal(up, chop(X3, {"round": 2}))


def test_roundit_validates_like_chop():
    with pytest.raises(ValueError, match=r"options\.flip must be 0 or 1"):
        roundit([0.5], {"flip": "1"})
    with pytest.raises(ValueError, match=r"options\.p must be a real number in \[0, 1\]"):
        roundit([0.5], {"flip": 1, "p": 2, "params": [5, 3]})
    with pytest.raises(ValueError, match=r"options\.round must be an integer"):
        roundit([0.5], {"round": 1 + 0j})
    with pytest.raises(ValueError, match=r"options\.randfunc must be callable"):
        roundit([0.5], {"round": 5, "randfunc": 0.5})
    with pytest.raises(ValueError, match=r"t >= 2"):
        roundit([0.5], {"flip": 1, "params": [1, 3]})
    with pytest.raises(TypeError, match="options must be a dict"):
        roundit([0.5], {"round"})


def test_chop_object_checks_its_arguments():
    with pytest.raises(ValueError, match=r"\['precision'\]"):
        Chop(precision="b")
    with pytest.raises(ValueError, match=r"options\.flip must be 0 or 1"):
        Chop(format="h", flip="1")
    for bad in ("seed", 1.5, True, [1, 2]):
        with pytest.raises(TypeError, match="rng must be a numpy.random.Generator or an integer seed"):
            Chop(format="h", round=5, rng=bad)
    x = np.array([0.1, 0.2])
    # A NumPy integer is an integer seed (the counter-based generator, as a Python int) ...
    assert np.array_equal(Chop(format="h", round=5, rng=np.int64(3))(x), Chop(format="h", round=5, rng=3)(x))
    # ... and a SeedSequence seeds a NumPy Generator: default_rng(SeedSequence(3)) is one stream.
    a = Chop(format="h", round=5, rng=np.random.SeedSequence(3))(x)
    b = Chop(format="h", round=5, rng=np.random.default_rng(np.random.SeedSequence(3)))(x)
    assert np.array_equal(a, b)


def test_chop_with_an_object_that_is_not_options():
    # An object of another kind (here a Chop) is not an empty struct: it is refused.
    with pytest.raises(TypeError, match="options must be a dict"):
        chop(THIRD, Chop(format="b"))

    class Unrelated:
        def __init__(self):
            self._x = 1

    with pytest.raises(TypeError, match="none of the option fields"):
        chop(THIRD, Unrelated())


@pytest.mark.parametrize("name", ["h", "half", "b", "bfloat16", "s", "q43", "float8_e4m3fn", "float4_e2m1fn"])
def test_a_format_name_is_shorthand_for_its_options(name):
    """``chop(x, name)`` and ``Chop(name)`` are ``{'format': name}``: the same bits, and the
    same persistent options afterwards (chop.m stores the options it is given)."""
    x = np.linspace(-3, 3, 41) / 7
    want = chop(x, {"format": name})
    stored = chop_options()
    assert_bits_equal(chop(x, name), want, name)
    assert chop_options() == stored
    assert_bits_equal(Chop(name)(x), want, f"Chop({name!r})")


def test_an_unknown_format_name_is_a_clear_error():
    with pytest.raises(ValueError, match="fp7"):
        chop(THIRD, "fp7")
    with pytest.raises(ValueError, match="fp7"):
        Chop("fp7")


@pytest.mark.parametrize("params", [[5, 5], np.array([5, 5])], ids=["list", "array"])
def test_chop_object_copies_params_at_construction(params):
    # Fixed options: changing the caller's params afterwards reaches no dtype.  1/3 to t = 5 bits
    # is 1.0101b * 2^-2 = 0.328125 (nearest); t = 2 would give 1.1b * 2^-2 = 0.375.
    o = {"format": "c", "params": params}
    ch = Chop(o)
    o["params"][0] = 2
    assert ch(THIRD) == 0.328125
    assert ch(np.float32(THIRD)) == np.float32(0.328125)


def test_stored_options_do_not_follow_a_later_change_of_the_callers_params():
    # MATLAB copies the struct chop stores; a dict changed in place and passed again is resolved again.
    o = {"format": "c", "params": [5, 5]}
    chop(None, o)
    o["params"][0] = 2
    assert chop(THIRD) == 0.328125 and chop_options().params == [5, 5]
    assert chop(THIRD, o) == 0.375


@pytest.mark.parametrize("emax", [2**62 + 1, 2**63, 10**20])
def test_a_custom_emax_beyond_int64_exponents_is_a_value_error(emax):
    # docs/options.rst: emax at most 2**62 (exponents such as emin - t + 1 are int64).
    with pytest.raises(ValueError, match=r"options\.params .*emax <= 2\*\*62"):
        chop(THIRD, {"format": "c", "params": [11, emax]})
    # Any emax above double's 1023 leaves every double unchanged by the range: only t = 11 rounds.
    assert chop(THIRD, {"format": "c", "params": [11, 5000]}) == THIRD_FP16
    assert chop(THIRD, {"format": "c", "params": [11, 2**62]}) == THIRD_FP16


@pytest.mark.parametrize("seed", [-1, 2**64, -(2**64)])
def test_an_int_seed_outside_uint64_is_refused(seed):
    # A seed taken modulo 2**64 would give two seeds one stream; numpy.random.default_rng refuses -1.
    with pytest.raises(ValueError):
        np.random.default_rng(-1)
    with pytest.raises(ValueError, match=r"rng: .*\[0, 2\*\*64\)"):
        Chop(format="h", round=5, rng=seed)
    from pychop_compat.random.counter import seed_device

    with pytest.raises(ValueError, match=r"rng: .*\[0, 2\*\*64\)"):
        seed_device(seed)  # the GPUs' counter: the same range
    assert repr(Chop(format="h", round=5, rng=2**64 - 1)).endswith(f"rng={2**64 - 1})")
