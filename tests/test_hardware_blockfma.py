"""The block-FMA model of matrix units: the behaviours of Fasi, Higham, Mikaitis and Pranesh's
test suite (2021), the anchor's exceptional cases, and the API of pychop_compat.hardware."""

from __future__ import annotations

import math

import numpy as np
import pytest

from pychop_compat import hardware
from pychop_compat.formats import catalogue_format

V100 = hardware.model("V100", "fp16", "fp32")
H100 = hardware.model("H100", "fp16", "fp32")


def dot(a, b, c, spec):
    return float(hardware.block_dot(np.array(a, dtype=float), np.array(b, dtype=float), c, spec))


def test_products_are_exact():
    x = 1 + 2.0**-10  # x * x needs 21 bits: not an fp16, exactly an fp32
    assert dot([x], [x], 0.0, V100) == x * x
    assert float(np.float16(x) * np.float16(x)) != x * x  # what rounding the product would give


def test_alignment_truncates_and_extra_bits_keep_what_rounding_needs():
    # 1 + 2**-11 + 2**-24 rounds up to fp16's 1 + 2**-10, but without the 2**-24 it is a tie.
    a, b = [1.0, 2.0**-11, 2.0**-12], [1.0, 1.0, 2.0**-12]
    assert dot(a, b, 0.0, hardware.model("V100", "fp16", "fp16")) == 1.0  # 2**-24 truncated in alignment
    assert dot(a, b, 0.0, hardware.model("H100", "fp16", "fp16")) == 1 + 2.0**-10  # two extra bits keep it


def test_no_normalisation_by_left_shift_before_alignment():
    # 1 - 1 + 2**-24: the small product is aligned to the exponent of the large ones first.
    a, b = [1.0, -1.0, 2.0**-12], [1.0, 1.0, 2.0**-12]
    assert dot(a, b, 0.0, V100) == 0.0
    assert dot(a, b, 0.0, H100) == 2.0**-24


def test_carry_out_bits_lose_nothing():
    x = 1 + 2.0**-10
    exact = 4 * x * x  # 4 + 2**-7 + 2**-18: two exponents above the products', every bit kept
    assert dot([x] * 4, [x] * 4, 0.0, V100) == exact


def test_non_monotonic():
    # Increasing the addend raises the alignment exponent and truncates the three products away.
    a, b = [2.0**-12] * 3, [1.5 * 2.0**-12] * 3
    smaller_c, larger_c = 1 - 2.0**-24, 1.0
    assert dot(a, b, smaller_c, V100) == 1 + 2.0**-23
    assert dot(a, b, larger_c, V100) == 1.0


def test_blocks_accumulate_with_a_rounding_between_them():
    rng = np.random.default_rng(5)
    a = np.float16(rng.standard_normal(8)).astype(float)
    b = np.float16(rng.standard_normal(8)).astype(float)
    first = hardware.block_dot(a[:4], b[:4], 0.25, V100)
    assert hardware.block_dot(a, b, 0.25, V100) == hardware.block_dot(a[4:], b[4:], first, V100)


@pytest.mark.parametrize("a, b, c, expected", [
    ([np.nan, 1.0], [1.0, 1.0], 0.0, np.nan),
    ([np.inf, 1.0], [0.0, 1.0], 0.0, np.nan),  # Inf * 0
    ([np.inf, np.inf], [1.0, -1.0], 0.0, np.nan),  # Inf - Inf
    ([np.inf, 1.0], [1.0, 1.0], -1.0, np.inf),
    ([1.0, 1.0], [1.0, 1.0], -np.inf, -np.inf),
    ([1.0, 1.0], [1.0, 1.0], np.nan, np.nan),
])
def test_nan_and_infinity(a, b, c, expected):
    np.testing.assert_array_equal(dot(a, b, c, H100), expected)


def test_overflow_in_the_accumulator_is_infinity():
    assert dot([2.0**15], [2.0], 0.0, hardware.model("H100", "fp16", "fp16")) == np.inf
    assert dot([-(2.0**127)], [2.0], 0.0, hardware.model("H100", "bf16", "fp32")) == -np.inf
    # toward zero, as the anchor's model: infinity once the exponent passes emax
    assert dot([2.0**127 * 1.5, 2.0**127 * 0.25], [1.0, 1.0], 0.0, hardware.model("H100", "bf16", "fp32")) == \
        float(np.float32(2.0**127 * 1.75))


def test_subnormal_inputs_and_outputs():
    assert dot([2.0**-24], [2.0**-24], 0.0, H100) == 2.0**-48  # fp16 subnormals, exact product
    assert dot([2.0**-126], [2.0**-10], 0.0, hardware.model("H100", "bf16", "fp32")) == 2.0**-136
    fp16_out = hardware.model("H100", "fp16", "fp16")
    assert dot([2.0**-14], [2.0**-10], 0.0, fp16_out) == 2.0**-24  # fp16's smallest subnormal
    assert dot([2.0**-14], [2.0**-12], 0.0, fp16_out) == 0.0  # a quarter of it rounds to zero
    assert dot([2.0**-14], [3 * 2.0**-12], 0.0, fp16_out) == 2.0**-24
    flushed = H100.replace(input_subnormals=False, output_subnormals=False)
    assert dot([2.0**-24, 1.0], [1.0, 2.0**-10], 0.0, flushed) == 2.0**-10
    assert dot([2.0**-14], [2.0**-14], 0.0, flushed.replace(output_format="fp16")) == 0.0


@pytest.mark.parametrize("rounding, positive, negative", [
    ("rz", 1.0, -1.0), ("rd", 1.0, -1 - 2.0**-23), ("ru", 1 + 2.0**-23, -1.0), ("rne", 1.0, -1.0)])
def test_rounding_modes_of_the_block_result(rounding, positive, negative):
    spec = H100.replace(rounding=rounding)  # 1 + 2**-24: below half an ulp of fp32
    assert dot([1.0, 2.0**-12], [1.0, 2.0**-12], 0.0, spec) == positive
    assert dot([-1.0, -(2.0**-12)], [1.0, 2.0**-12], 0.0, spec) == negative


def test_exact_cancellation_is_positive_zero():
    assert np.signbit(dot([1.0, -1.0], [1.0, 1.0], 0.0, H100)) == np.False_


def test_matmul_of_small_integers_is_exact_and_typed():
    rng = np.random.default_rng(1)
    A = rng.integers(-8, 8, (5, 37)).astype(float)
    B = rng.integers(-8, 8, (37, 3)).astype(float)
    C = rng.integers(-8, 8, (5, 3)).astype(float)
    for name in ("V100", "A100", "H100", "B200"):
        D = hardware.matmul(A, B, C, alpha=2.0, beta=-1.0, model=name)
        assert D.dtype == np.float32
        np.testing.assert_array_equal(D, 2 * A @ B - C)
    D16 = hardware.matmul(A, B, model="H100", inputs="fp16", output="fp16")
    assert D16.dtype == np.float16
    np.testing.assert_array_equal(D16, A @ B)


def test_matmul_rounds_its_inputs_as_the_anchor_does():
    x = 1 + 2.0**-12  # not an fp16: to nearest gives 1; not a tf32: toward zero gives 1
    assert hardware.matmul([[x]], [[1.0]], model="H100")[0, 0] == 1.0
    assert hardware.matmul([[1 + 2.0**-10 - 2.0**-14]], [[1.0]], model="H100", inputs="tf32")[0, 0] == 1.0
    # C in fp32 is rounded toward zero, in fp16 to nearest
    assert hardware.matmul([[0.0]], [[0.0]], [[1 + 2.0**-24 * 3]], beta=1.0, model="H100")[0, 0] == 1 + 2.0**-23
    assert hardware.matmul([[0.0]], [[0.0]], [[1 + 2.0**-11 * 1.5]], beta=1.0, model="H100",
                           output="fp16")[0, 0] == 1 + 2.0**-10


def test_a_model_object_and_its_formats():
    spec = hardware.BlockFMA("bf16", "fp32", fma_size=2, extra_alignment_bits=3, name="mine")
    assert hardware.matmul([[1.0, 2.0]], [[3.0], [4.0]], model=spec)[0, 0] == 11.0
    with pytest.raises(ValueError, match="model's formats"):
        hardware.matmul([[1.0]], [[1.0]], model=spec, inputs="fp16")


@pytest.mark.parametrize("changes, message", [
    ({"input_format": "fp64"}, "input_format"), ({"output_format": "bf16"}, "output_format"),
    ({"rounding": "rn"}, "rounding"), ({"fma_size": 0}, "fma_size"),
    ({"late_addend_bits": -1}, "late_addend_bits"), ({"late_addend_bits": 7, "extra_alignment_bits": -10}, "nonnegative"),
    ({"late_addend_bits": 40}, "overflow int64"), ({"block_sum": "kulisch"}, "block_sum"),
    ({"block_sum": "exact", "late_addend_bits": 7}, "needs block_sum='aligned'"),
    ({"block_sum": "pairwise", "fma_size": 6}, "power of two"),
    ({"odd_even_groups": True}, "odd_even_groups needs"),
    ({"odd_even_groups": True, "late_addend_bits": 7, "fma_size": 1}, "odd_even_groups needs")])
def test_block_fma_checks_its_parameters(changes, message):
    with pytest.raises(ValueError, match=message):
        hardware.BlockFMA(**changes)


def test_model_names_and_errors():
    assert hardware.model("h100", "FP16", "FP32") is hardware.PRESETS["H100", "fp16", "fp32"]
    assert hardware.model("H200", "e4m3").extra_alignment_bits == -10
    with pytest.raises(ValueError, match="No model for GPU 'V100' with 'bf16'"):
        hardware.model("V100", "bf16")
    with pytest.raises(ValueError, match="No model"):
        hardware.model("H100", "e4m3", "fp16")
    with pytest.raises(ValueError, match="No model"):
        hardware.model("MI300X", "fp16", "fp16")
    assert hardware.model("mi300x", "tf32").fma_size == 4
    with pytest.raises(ValueError, match="A.shape"):
        hardware.matmul(np.ones((2, 3)), np.ones((2, 3)))


MI300X = hardware.model("MI300X", "fp16", "fp32")


def test_mi300x_adds_the_addend_after_the_products_rounding_the_smaller_down():
    # Values that the anchor's CDNA3 model (MI300MC.m under Octave) returns for the same inputs.
    assert (MI300X.fma_size, MI300X.extra_alignment_bits, MI300X.rounding, MI300X.late_addend_bits) == (8, 1, "rne", 7)
    # c smaller: -2**-30 rounded down to the products' last bit (2**-24): 1 - 2**-24, not RNE(1 - 2**-30) = 1
    assert dot([1.0], [1.0], -(2.0**-30), MI300X) == 1 - 2.0**-24
    assert dot([1.0], [1.0], 2.0**-30, MI300X) == 1.0
    # products smaller: -2**-24 + 2**-40 rounded down to 2**-31 (7 more bits than c's): -2**-24; the
    # sum 1 + 2**-24 is then a tie, to even 1 (the exact 1 + 2**-24 + 2**-40 rounds up to 1 + 2**-23)
    assert dot([-(2.0**-12), 2.0**-20], [2.0**-12, 2.0**-20], 1 + 2.0**-23, MI300X) == 1.0
    assert dot([-(2.0**-12), 2.0**-20], [2.0**-12, 2.0**-20], 1 + 2.0**-23, MI300X.replace(late_addend_bits=20)) \
        == 1 + 2.0**-23
    # the addend alone passes unchanged; with the addend aligned with the products (NVIDIA) it differs
    assert dot([0.0], [0.0], 2.0**-140, MI300X) == 2.0**-140
    assert dot([1.0], [1.0], -(2.0**-30), MI300X.replace(late_addend_bits=None)) == 1.0


MI300X_E4M3 = hardware.model("MI300X", "e4m3fnuz", "fp32")


def test_mi300x_fp8_adds_odd_and_even_products_apart():
    # Values that the anchor's CDNA3 model (MI300MC.m under Octave) returns for the same inputs
    # (the oracle's "small products" and "addend ... binades below" cases).
    assert (MI300X_E4M3.fma_size, MI300X_E4M3.extra_alignment_bits, MI300X_E4M3.rounding,
            MI300X_E4M3.late_addend_bits, MI300X_E4M3.odd_even_groups) == (16, 1, "rne", 7, True)
    assert hardware.model("mi300x", "e5m2fnuz").input_format == "e5m2fnuz"
    small = 3 * 2.0**-17  # 3/8 of the last bit (2**-14) of 2**10 with 24 bits after the leading one
    a, b = [small / 2.0**-7] * 8, [2.0**-7] * 8  # eight such products at even positions, 2**10 at an odd one
    a = [x for pair in zip(a, [32.0] + [0.0] * 7) for x in pair]
    b = [x for pair in zip(b, [32.0] + [0.0] * 7) for x in pair]
    # the even group keeps them (its own largest exponent): 3 units, then 1024 + 3 * 2**-14 rounds
    # to nearest even 1024 + 2**-12; aligned with 2**10 each would be truncated to 0
    assert dot(a, b, 0.0, MI300X_E4M3) == 1024 + 2.0**-12
    assert dot(a, b, 0.0, MI300X_E4M3.replace(odd_even_groups=False)) == 1024.0
    # a negative group sum below the other's last bit (seven: -2.625 units) is rounded toward minus infinity
    negative = [-x if index % 2 == 0 else x for index, x in enumerate(a[:14])]
    assert dot(negative, b[:14], 0.0, MI300X_E4M3) == 1024 - 3 * 2.0**-14
    # an addend 25 binades below the products is rounded down to minus one unit, 26 or more: dropped
    assert dot([32.0], [32.0], -(2.0**-15), MI300X_E4M3) == 1024 - 2.0**-14
    assert dot([32.0], [32.0], -1.5 * 2.0**-16, MI300X_E4M3) == 1024.0
    assert dot([8.0, -8.0], [8.0, 8.0], -(2.0**-40), MI300X_E4M3) == 0.0


def test_mi300x_fp8_inputs_are_fnuz_and_saturate():
    # GEMM.m rounds to the FNUZ formats (largest 240 and 57344) with saturation: Inf and 300 are 240
    d = hardware.matmul([[np.inf, 300.0, 1.0]], [[1.0], [1.0], [2.0**-10]], model="MI300X", inputs="e4m3fnuz")
    assert d.dtype == np.float32 and d[0, 0] == 480 + 2.0**-10
    assert hardware.matmul([[1e9]], [[-1.0]], model="MI300X", inputs="e5m2fnuz")[0, 0] == -57344.0
    # t and emax alone name no FNUZ format: chop's 'q43' (t=4, emax=7) is not e4m3fnuz
    with pytest.raises(ValueError, match="not an input format of matrix units"):
        hardware.model_for_format("MI300X", 4, 7, "format 'q43'")


def test_fp8_on_hopper_keeps_thirteen_fraction_bits():
    spec = hardware.model("H100", "e4m3", "fp32")
    # 1 + 2**-13 is kept; 2**-14 after the largest exponent is truncated in alignment.
    assert dot([1.0, 2.0**-6], [1.0, 2.0**-7], 0.0, spec) == 1 + 2.0**-13
    assert dot([1.0, 2.0**-7], [1.0, 2.0**-7], 0.0, spec) == 1.0


def test_fp8_with_fp16_output_on_ada_aligns_to_thirteen_bits_and_rounds_to_fp16():
    spec = hardware.model("Ada", "e4m3", "fp16")
    # 1 + 2**-11 + 2**-13: kept in alignment, then to nearest in fp16: up to 1 + 2**-10
    assert dot([1.0, 2.0**-5, 2.0**-6], [1.0, 2.0**-6, 2.0**-7], 0.0, spec) == 1 + 2.0**-10
    # 1 + 2**-11 + 2**-14: the 2**-14 is truncated in alignment, the tie goes to even
    assert dot([1.0, 2.0**-5, 2.0**-7], [1.0, 2.0**-6, 2.0**-7], 0.0, spec) == 1.0


@pytest.mark.parametrize("operands, message", [
    ((np.eye(2), np.eye(2), "H100"), "give the GPU by keyword"),  # a GPU name where C goes
    ((np.eye(2) * 1j, np.eye(2)), "real numbers, got dtype complex128"),  # NumPy would drop 1j
    ((np.eye(2), [[1, "a"], [2, 3]]), "B must hold real numbers"),
])
def test_matmul_refuses_what_a_tensor_core_cannot_take(operands, message):
    with pytest.raises(TypeError, match=message):
        hardware.matmul(*operands)


MI100 = hardware.model("MI100", "fp16", "fp32")
MI250 = hardware.model("MI250", "fp16", "fp32")


def test_mi100_adds_a_block_exactly_and_rounds_once():
    # Values that the anchor's CDNA1 model (MI100MC.m under Octave) returns for the same inputs.
    assert (MI100.fma_size, MI100.rounding, MI100.block_sum) == (4, "rne", "exact")
    assert hardware.model("MI100", "bf16").fma_size == 2
    # 1 + 3 * 2**-24: a tie, to even 1 + 2**-22 (the H100 truncates to 1 + 2**-23)
    assert dot([1.0, 2.0**-12, 2.0**-12, 2.0**-12], [1.0, 2.0**-12, 2.0**-12, 2.0**-12], 0.0, MI100) == 1 + 2.0**-22
    # 1 + 2**-24 + 2**-48: no tie, up (alignment would drop 2**-48 and tie to 1)
    assert dot([1.0, 2.0**-12, 2.0**-24, 0.0], [1.0, 2.0**-12, 2.0**-24, 0.0], 0.0, MI100) == 1 + 2.0**-23
    assert dot([1.0, 2.0**-12, 2.0**-24, 0.0], [1.0, 2.0**-12, 2.0**-24, 0.0], 0.0, H100) == 1.0
    # cancellation of 2**30 leaves the smallest fp16 product exactly; an addend far above absorbs
    assert dot([2.0**15, -(2.0**15), 2.0**-24, 0.0], [2.0**15, 2.0**15, 2.0**-24, 0.0], 0.0, MI100) == 2.0**-48
    assert dot([1.0, -1.0, 2.0**-12, 0.0], [1.0, 1.0, 2.0**-12, 0.0], 2.0**100, MI100) == 2.0**100
    assert dot([1.0, 2.0**-12, 2.0**-12, 2.0**-12], [1.0, -(2.0**-12), -(2.0**-12), -(2.0**-12)], 0.0, MI100) \
        == 1 - 3 * 2.0**-24
    # bf16: fp32 subnormal results, and the addend in the exact sum
    bf16 = hardware.model("MI100", "bf16")
    assert dot([2.0**-60, 2.0**-70], [2.0**-70, 2.0**-70], 0.0, bf16) == 2.0**-130 + 2.0**-140
    assert dot([1.0, 2.0**-12], [1.0, 2.0**-12], -1.0, bf16) == 2.0**-24


def test_mi100_exact_sums_in_every_rounding_mode():
    # 1 + 2**-24 + 2**-48: just above a tie; 2**-48 decides in every mode
    a, b = [1.0, 2.0**-12, 2.0**-24, 0.0], [1.0, 2.0**-12, 2.0**-24, 0.0]
    expected = {"rne": 1 + 2.0**-23, "ru": 1 + 2.0**-23, "rz": 1.0, "rd": 1.0}
    for rounding, value in expected.items():
        assert dot(a, b, 0.0, MI100.replace(rounding=rounding)) == value
        assert dot([-x for x in a], b, 0.0, MI100.replace(rounding=rounding)) == \
            -expected[{"ru": "rd", "rd": "ru"}.get(rounding, rounding)]


def test_mi250_rounds_every_product_and_every_sum_of_a_pairwise_tree():
    # Values that the anchor's CDNA2 model (MI250MC.m, MI210MC.m, under Octave with matlab_compat/fma.cc).
    assert (MI250.fma_size, MI250.rounding, MI250.block_sum) == (4, "rne", "pairwise")
    assert hardware.model("MI210", "bf16") == hardware.model("MI250", "bf16").replace(name="MI210")
    # ((1 + 2**-24) + (2**-24 + 0)): two ties to even, 1; the other order keeps 2**-23
    assert dot([1.0, 2.0**-12, 2.0**-12, 0.0], [1.0, 2.0**-12, 2.0**-12, 0.0], 0.0, MI250) == 1.0
    assert dot([1.0, 0.0, 2.0**-12, 2.0**-12], [1.0, 0.0, 2.0**-12, 2.0**-12], 0.0, MI250) == 1 + 2.0**-23
    # the addend last: 1 + (2**-24 + 2**-24)
    assert dot([2.0**-12, 2.0**-12, 0.0, 0.0], [2.0**-12, 2.0**-12, 0.0, 0.0], 1.0, MI250) == 1 + 2.0**-23
    # bf16: a product below 2**-126 is flushed to +0, a subnormal sum to a zero of its sign
    bf16 = hardware.model("MI250", "bf16")
    assert dot([2.0**-65, 1.0, 0.0, 0.0], [2.0**-65, 2.0**-126, 0.0, 0.0], 0.0, bf16) == 2.0**-126
    assert dot([2.0**-63, 1.0, 0.0, 0.0], [2.0**-63, -(2.0**-126), 0.0, 0.0], 0.0, bf16) == 0.0
    flushed = dot([2.0**-126, 0.0, 0.0, 0.0], [1.0, 0.0, 0.0, 0.0], -3 * 2.0**-127, bf16)
    assert flushed == 0.0 and np.signbit(flushed)
    # a product beyond binary32 is an infinity of its sign (the anchor's prd_limit: +Inf whatever
    # its sign), and the next block adds to it as IEEE arithmetic does
    assert dot([2.0**127, 0.0, 0.0, 0.0], [-4.0, 0.0, 0.0, 0.0], 0.0, bf16) == -np.inf
    assert np.isnan(dot([2.0**127, 0.0, 0.0, 0.0, 2.0**127], [-4.0, 0.0, 0.0, 0.0, 4.0], 0.0, bf16))


def _fp32_rounded(exact, rounding, fraction_bits=23):
    """An exact rational rounded to binary32 with subnormals (``rounding``: the BlockFMA modes),
    keeping ``fraction_bits`` bits after the leading one (the quantum at least 2**(-126 - that));
    2**128 or more in magnitude is an infinity in every mode (as the models)."""
    from fractions import Fraction

    if exact == 0:
        return 0.0
    magnitude = abs(exact)
    exponent = magnitude.numerator.bit_length() - magnitude.denominator.bit_length()
    exponent -= magnitude < Fraction(2) ** exponent  # floor(log2(magnitude))
    quantum = Fraction(2) ** (max(exponent, -126) - fraction_bits)
    units = magnitude / quantum
    kept, rest = units.numerator // units.denominator, units - units.numerator // units.denominator
    up = {"rz": False, "rne": rest > Fraction(1, 2) or (rest == Fraction(1, 2) and kept % 2 == 1),
          "ru": rest > 0 and exact > 0, "rd": rest > 0 and exact < 0}[rounding]
    value = (kept + up) * quantum
    result = float("inf") if value >= 2**128 else float(value)
    return -result if exact < 0 else result


def _format_values(rng, size, inputs):
    """Random values of an input format over its whole range (subnormals included), some exact
    negatives of others for cancellation."""
    from pychop_compat.rounding import round_to_format

    low, high = (-26, 16) if inputs == "fp16" else (-135, 128)
    values = rng.standard_normal(size) * 2.0 ** rng.integers(low, high, size)
    values = round_to_format(values, hardware.INPUT_FORMATS[inputs])
    values[~np.isfinite(values)] = 0.0  # beyond the format's range
    values[..., 1] = np.where(rng.random(size[0]) < 0.3, -values[..., 0], values[..., 1])
    return values


ENGINES = ["numpy", "auto"]  # the NumPy implementation, and the compiled kernel where Numba is installed


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("inputs", ["fp16", "bf16"])
@pytest.mark.parametrize("rounding", hardware.ROUNDING_MODES)
def test_exact_block_sums_are_the_exact_sum_rounded_once(inputs, rounding, engine):
    # Against rational arithmetic: 400 blocks over the formats' whole ranges, with cancellation,
    # fp32 addends large, tiny, subnormal or cancelling the products.
    from fractions import Fraction

    from pychop_compat.kernels.compiled import cpu_engine

    rng = np.random.default_rng([5, len(inputs), len(rounding)])
    spec = hardware.model("MI100", inputs).replace(rounding=rounding)
    a, b = _format_values(rng, (400, spec.fma_size), inputs), _format_values(rng, (400, spec.fma_size), inputs)
    c = (rng.standard_normal(400) * 2.0 ** rng.integers(-150, 100, 400)).astype(np.float32).astype(np.float64)
    with np.errstate(over="ignore"):
        cancelling = -np.sum(a * b, axis=1).astype(np.float32)
    c = np.where(rng.random(400) < 0.2, cancelling, c).astype(np.float64)
    finite = np.isfinite(c)
    with cpu_engine(engine):
        got = hardware.block_dot(a, b, np.where(finite, c, 0.0), spec)
    for i in range(400):
        exact = sum(Fraction(x) * Fraction(y) for x, y in zip(a[i], b[i])) + Fraction(c[i] if finite[i] else 0.0)
        assert np.float64(got[i]).tobytes() == np.float64(_fp32_rounded(exact, rounding)).tobytes(), i


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("inputs", ["fp16", "bf16"])
def test_pairwise_block_sums_are_binary32_arithmetic(inputs, engine):
    # Against NumPy's float32 arithmetic: products rounded to float32, ((p1 + p2) + (p3 + p4)) and
    # the addend last, each a float32 addition, subnormal inputs, products and sums flushed.
    from pychop_compat.kernels.compiled import cpu_engine

    rng = np.random.default_rng([6, len(inputs)])
    spec = hardware.model("MI250", inputs)
    a, b = _format_values(rng, (2000, 4), inputs), _format_values(rng, (2000, 4), inputs)
    c = (rng.standard_normal(2000) * 2.0 ** rng.integers(-130, 100, 2000)).astype(np.float32)
    with cpu_engine(engine):
        got = hardware.block_dot(a, b, c.astype(np.float64), spec)
    tiny = 2.0**-126
    emin = -14 if inputs == "fp16" else -126
    with np.errstate(over="ignore", invalid="ignore"):
        products = np.where((np.abs(a) < 2.0**emin) | (np.abs(b) < 2.0**emin), 0.0, a * b).astype(np.float32)
        products = np.where(np.abs(products) < tiny, np.float32(0.0), products)

        def flushed(x):
            return np.where(np.abs(x) < tiny, x * np.float32(0.0), x)
        left = flushed(products[:, 0] + products[:, 1])
        right = flushed(products[:, 2] + products[:, 3])
        expected = flushed(np.where(np.abs(c) < tiny, np.float32(0.0), c) + flushed(left + right))
    same = (got.astype(np.float32).view(np.uint32) == expected.view(np.uint32)) | (np.isnan(got) & np.isnan(expected))
    assert same.all(), (np.flatnonzero(~same)[:5], got[~same][:5], expected[~same][:5])


def test_models_whose_block_sums_would_overflow_int64_are_refused():
    # 0.6.0 wrapped the int64 sums round: 1 + 1 + 3 * 0.5 gave -0.5 with 39 extra bits
    from pychop_compat import hardware as hw

    A, B = np.array([[1.0, 1.0, 3.0]]), np.array([[1.0], [1.0], [0.5]])
    assert hw.matmul(A, B, model=hw.BlockFMA(extra_alignment_bits=30)).item() == 3.5  # exact
    for bad in ({"extra_alignment_bits": 39}, {"fma_size": 4.0}, {"late_addend_bits": 2.5},
                {"input_subnormals": "no"}):
        with pytest.raises(ValueError):
            hw.BlockFMA(**bad)


def _binade(value, floor):
    """floor(log2(|value|)) of a nonzero rational, at least ``floor``."""
    from fractions import Fraction

    magnitude = abs(Fraction(value))
    exponent = magnitude.numerator.bit_length() - magnitude.denominator.bit_length()
    return max(exponent - (magnitude < Fraction(2) ** exponent), floor)


def _aligned_block(a, b, c, spec):
    """The module's rule for one block of fp16 inputs, fp32 output, in rational arithmetic: E the
    largest exponent of the nonzero products (factors' exponents clamped at -14) and of the
    addend (clamped at accumulator_emin), at least min_alignment_exponent; every term truncated
    toward zero to a multiple of 2**(E - f - x); the exact sum rounded keeping min(23, f + x)
    fraction bits."""
    from fractions import Fraction

    terms = [(Fraction(x) * Fraction(y), _binade(x, -14) + _binade(y, -14)) for x, y in zip(a, b) if x * y != 0]
    if c != 0:
        terms.append((Fraction(c), _binade(c, spec.accumulator_emin)))
    largest = max([exponent for _, exponent in terms] + [spec.min_alignment_exponent])
    kept = spec.accumulator_fraction_bits + spec.extra_alignment_bits
    unit = Fraction(2) ** (largest - kept)
    total = sum((int(term / unit) * unit for term, _ in terms), Fraction(0))  # int(): toward zero
    return _fp32_rounded(total, spec.rounding, min(23, kept))


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("rounding", hardware.ROUNDING_MODES)
def test_the_addend_is_truncated_with_the_products_not_at_its_own_exponent(engine, rounding):
    # With fewer accumulator fraction bits than fp32 has, the addend is aligned as a product is:
    # 0.8.0 truncated it to 10 bits at its own exponent first, so that a zero appended to the
    # inputs (a second block, the first's result its addend) lost 1 + 2**-12's last bit.
    from pychop_compat.kernels.compiled import cpu_engine

    spec = hardware.BlockFMA("fp16", "fp32", fma_size=4, extra_alignment_bits=3, accumulator_fraction_bits=10,
                             rounding=rounding)
    a, b = np.array([1.0, 2.0**-12, 0.0, 0.0]), np.ones(4)
    rng = np.random.default_rng(11)
    rows_a, rows_b = _format_values(rng, (150, 4), "fp16"), _format_values(rng, (150, 4), "fp16")
    addends = (rng.standard_normal(150) * 2.0 ** rng.integers(-12, 12, 150)).astype(np.float32).astype(np.float64)
    with cpu_engine(engine):
        assert hardware.block_dot(a, b, 0.0, spec) == 1 + 2.0**-12
        assert hardware.block_dot(np.r_[a, 0.0], np.r_[b, 0.0], 0.0, spec) == 1 + 2.0**-12
        assert hardware.block_dot(np.zeros(4), np.zeros(4), 1 + 2.0**-12, spec) == 1 + 2.0**-12
        assert hardware.matmul(np.zeros((1, 4)), np.zeros((4, 1)), [[1 + 2.0**-12]], beta=1.0,
                               model=spec)[0, 0] == 1 + 2.0**-12
        got = hardware.block_dot(rows_a, rows_b, addends, spec)
    for i in range(150):
        expected = _aligned_block(rows_a[i], rows_b[i], addends[i], spec)
        assert np.float64(got[i]).tobytes() == np.float64(expected).tobytes(), (i, got[i], expected)


def _floored(value, unit):
    """The rational ``value`` rounded toward minus infinity to a multiple of ``unit``."""
    from fractions import Fraction

    return math.floor(Fraction(value) / unit) * unit


def _late_block(a, b, c, spec):
    """The late addition of ``spec.late_addend_bits`` (L) for one block of fp32 output, in rational
    arithmetic (BlockFMA's description): the nonzero products (factors' exponents clamped at the
    input format's emin) truncated toward zero to multiples of 2**(E - f - x), E their largest
    exponent and at least min_alignment_exponent (with odd_even_groups per group, each group sum
    then floored to the larger E's unit); the addend c (its exponent clamped at accumulator_emin;
    with groups 0 if more than f + x + 1 binades below E) and the products' sum each floored to
    2**(E - f - x), or 2**(e_c - L - f - x) if c's exponent is the larger; the exact sum rounded
    keeping min(23, f + x) fraction bits."""
    from fractions import Fraction

    emin = catalogue_format(hardware.INPUT_FORMATS[spec.input_format]).emin
    kept = spec.accumulator_fraction_bits + spec.extra_alignment_bits
    terms = [(k, Fraction(x) * Fraction(y), _binade(x, emin) + _binade(y, emin))
             for k, (x, y) in enumerate(zip(a, b)) if x * y != 0]
    groups = [[t for t in terms if t[0] % 2 == g] for g in (0, 1)] if spec.odd_even_groups else [terms]
    sums = []
    for group in groups:
        largest = max([exponent for _, _, exponent in group] + [spec.min_alignment_exponent])
        unit = Fraction(2) ** (largest - kept)
        sums.append((largest, sum((int(term / unit) * unit for _, term, _ in group), Fraction(0))))
    largest = max(exponent for exponent, _ in sums)
    products = sum((_floored(total, Fraction(2) ** (largest - kept)) for _, total in sums), Fraction(0))
    exponent_c = _binade(c, spec.accumulator_emin) if c != 0 else spec.accumulator_emin
    if spec.odd_even_groups and exponent_c < largest - (kept + 1):
        c = 0.0
    unit = Fraction(2) ** ((exponent_c - spec.late_addend_bits if largest < exponent_c else largest) - kept)
    return _fp32_rounded(_floored(products, unit) + _floored(c, unit), spec.rounding, min(23, kept))


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("rounding", hardware.ROUNDING_MODES)
def test_the_late_addend_keeps_its_bits_with_fewer_accumulator_bits_than_fp32(engine, rounding):
    # With late_addend_bits and fewer accumulator fraction bits (f) than fp32's 23, 0.8.0 truncated the
    # addend toward zero to f bits at its own exponent before the late addition: a block result's
    # extra bits were lost in the next block (zeros appended changed the result) and a negative
    # addend's low bits were rounded up, not down.  The anchor (23 bits) never cuts an addend.
    from pychop_compat.kernels.compiled import cpu_engine
    from pychop_compat.rounding import round_to_format

    spec = hardware.BlockFMA("fp16", "fp32", fma_size=4, extra_alignment_bits=1, rounding=rounding,
                             accumulator_fraction_bits=16, late_addend_bits=7)
    models = [spec, spec.replace(input_format="bf16", extra_alignment_bits=2, accumulator_fraction_bits=10,
                                 late_addend_bits=3, min_alignment_exponent=-20),
              spec.replace(input_format="e5m2fnuz", accumulator_fraction_bits=5, late_addend_bits=4,
                           odd_even_groups=True)]
    rng = np.random.default_rng([12, len(rounding)])
    with cpu_engine(engine):
        # 17 = f + x bits: the addend alone passes unchanged, also after a block whose result it is
        assert hardware.block_dot(np.zeros(4), np.zeros(4), 1 + 2.0**-17, spec) == 1 + 2.0**-17
        assert hardware.block_dot([1.0, 2.0**-9, 0.0, 0.0, 0.0], [1.0, 2.0**-8, 0.0, 0.0, 0.0], 0.0, spec) \
            == 1 + 2.0**-17
        assert hardware.matmul(np.zeros((1, 4)), np.zeros((4, 1)), [[1 + 2.0**-17]], model=spec)[0, 0] \
            == np.float32(1 + 2.0**-17)
        # products 2 larger: -(1 + 2**-20) floored to their last bit 2**-16, then 1 - 2**-16 is exact
        assert hardware.block_dot([1.0, 0.0, 0.0, 0.0], [2.0, 0.0, 0.0, 0.0], -(1 + 2.0**-20), spec) == 1 - 2.0**-16
        for model in models:
            informat = hardware.INPUT_FORMATS[model.input_format]
            a, b = (round_to_format(rng.standard_normal((150, 8)) * 2.0 ** rng.integers(-8, 4, (150, 8)), informat)
                    for _ in range(2))
            c = (rng.standard_normal(150) * 2.0 ** rng.integers(-20, 10, 150)).astype(np.float32).astype(np.float64)
            c[::7] = 0.0
            got = hardware.block_dot(a, b, c, model)
            for i in range(150):
                expected = _late_block(a[i, 4:], b[i, 4:], _late_block(a[i, :4], b[i, :4], c[i], model), model)
                assert np.float64(got[i]).tobytes() == np.float64(expected).tobytes(), (model, i, got[i], expected)


@pytest.mark.parametrize("rounding", hardware.ROUNDING_MODES)
@pytest.mark.parametrize("sign", [1.0, -1.0])
def test_a_sum_far_below_the_smallest_subnormal_rounds_as_its_mode_says(rounding, sign):
    # 16 products (1.9921875 * 2**-100)**2, exact after alignment (each a multiple of 2**-214, the
    # terms truncated to multiples of 2**(-200 - 23 - 32)): their sum, about 2**-194, is far below
    # fp32's 2**-149.  0.8.0 capped the bits dropped in rounding at 60 and kept a subnormal.
    from fractions import Fraction

    spec = hardware.BlockFMA("bf16", "fp32", fma_size=16, extra_alignment_bits=32, rounding=rounding)
    a = np.full(16, 1.9921875 * 2.0**-100)
    got = hardware.block_dot(a, sign * a, 0.0, spec)
    expected = _fp32_rounded(16 * Fraction(a[0]) ** 2 * Fraction(sign), rounding)
    assert np.float64(got).tobytes() == np.float64(expected).tobytes()


def test_a_given_c_is_added_without_beta_and_zero_beta_keeps_nan():
    # D = A @ B + C for small integers (exact in every step); GEMM.m's beta * C with beta = 0 and an
    # infinite C is NaN; 0.8.0 dropped a C given without beta.
    A, B = np.array([[1.0, 2.0], [3.0, 4.0]]), np.array([[5.0, 6.0], [7.0, 8.0]])
    C = np.array([[1.0, -2.0], [3.0, 4.0]])
    np.testing.assert_array_equal(hardware.matmul(A, B, C), np.array([[20.0, 20.0], [46.0, 54.0]]))
    np.testing.assert_array_equal(hardware.matmul(A, B, C[0], 2.0, model="A100"), np.array([[39.0, 42.0],
                                                                                          [87.0, 98.0]]))
    np.testing.assert_array_equal(hardware.matmul(A, B), np.array([[19.0, 22.0], [43.0, 50.0]]))
    with np.errstate(invalid="ignore"):  # (0 * Inf)
        assert np.isnan(hardware.matmul(A, B, [[np.inf, 0.0], [0.0, 0.0]], beta=0.0)[0, 0])


@pytest.mark.parametrize("call, error, message", [
    (lambda: hardware.matmul(np.eye(2), np.eye(2), model=None), TypeError, "model must be a GPU name .* NoneType"),
    (lambda: hardware.matmul(np.eye(2), np.eye(2), model=3), TypeError, "model must be a GPU name .* int"),
    (lambda: hardware.block_dot(np.ones(2), np.ones(2), 0.0, None), TypeError, "spec must be a GPU name"),
    (lambda: hardware.block_dot(1.0, 2.0, 0.0, H100), ValueError, "a and b must have at least one axis"),
    (lambda: hardware.model(None), TypeError, "gpu must be a string"),
    (lambda: hardware.model("H100", 16), TypeError, "inputs must be a string"),
    (lambda: hardware.BlockFMA(accumulator_fraction_bits=10**6), ValueError, "accumulator_fraction_bits"),
    (lambda: hardware.BlockFMA(accumulator_fraction_bits=-5), ValueError, "accumulator_fraction_bits must be at"),
    (lambda: hardware.BlockFMA(accumulator_fraction_bits=8, extra_alignment_bits=-9), ValueError,
     r"accumulator_fraction_bits \+ extra_alignment_bits must be at least 0"),
])
def test_bad_models_and_operands_are_refused_by_name(call, error, message):
    with pytest.raises(error, match=message):
        call()


def test_block_dot_takes_a_gpu_name_and_every_preset_stays_valid():
    # a GPU name is its fp16 -> fp32 model, as matmul's: 1 + 3 * 2**-24 kept by H100's two extra bits
    assert hardware.block_dot([1.0, 2.0**-12, 2.0**-12, 2.0**-12], [1.0, 2.0**-12, 2.0**-12, 2.0**-12], 0.0,
                              "H100") == 1 + 2.0**-23
    for preset in hardware.PRESETS.values():  # (fp8 on Ada and Hopper: 23 - 10 bits)
        assert hardware.BlockFMA(**{f: getattr(preset, f) for f in preset.__dataclass_fields__}) == preset


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("rounding", ["rz", "ru", "rd"])
def test_block_sums_past_2_to_the_53_round_from_their_exact_bit_length(engine, rounding):
    # 1024 - 2**-44 (a sum of 54 bits and more at 2**(10 - 23 - 31)): 0.9 read its bit length from
    # its float64 conversion, which rounds it up to 2**64 units: one binade too many, one bit lost
    # (RZ gave 1024 - 2**-13, not 1024 - 2**-14).  Models of f + x from 52 to 59 are accepted.
    # (To nearest such a sum, just below a power of two, rounds to that power either way.)
    from pychop_compat.kernels.compiled import cpu_engine

    models = [hardware.BlockFMA("fp16", "fp32", fma_size=16, extra_alignment_bits=31, rounding=rounding),
              hardware.BlockFMA("fp16", "fp32", fma_size=1, extra_alignment_bits=35, rounding=rounding),
              hardware.BlockFMA("fp16", "fp32", fma_size=4, extra_alignment_bits=34, rounding=rounding)]
    rng = np.random.default_rng([13, len(rounding)])
    with cpu_engine(engine):
        for spec in models:
            k = spec.fma_size
            a, b = np.zeros(k), np.zeros(k)
            a[0], b[0] = -2.0**-22, 2.0**-22
            for sign in (1.0, -1.0):
                expected = _aligned_block(sign * a, b, sign * 1024.0, spec)
                got = hardware.block_dot(sign * a, b, sign * 1024.0, spec)
                assert np.float64(got).tobytes() == np.float64(expected).tobytes(), (spec, sign, got, expected)
            rows_a, rows_b = (_format_values(rng, (100, max(k, 2)), "fp16")[:, :k] for _ in range(2))
            addends = (rng.standard_normal(100) * 2.0 ** rng.integers(-20, 12, 100)).astype(np.float32)
            addends = addends.astype(np.float64)
            got = hardware.block_dot(rows_a, rows_b, addends, spec)
            for i in range(100):
                expected = _aligned_block(rows_a[i], rows_b[i], addends[i], spec)
                assert np.float64(got[i]).tobytes() == np.float64(expected).tobytes(), (spec, i, got[i], expected)


def test_numpy_integer_parameters_are_checked_and_stored_as_python_ints():
    # 0.9 computed the int64 overflow check in np.int64 for np.int64 fields: (16 + 1) << 62 wrapped
    # round, 60 accumulator bits were accepted and 16 * 1.5 * 1.5 came out 4, not 36.
    with pytest.raises(ValueError, match="overflow int64"):
        hardware.BlockFMA(fma_size=16, accumulator_fraction_bits=np.int64(60))
    spec = hardware.BlockFMA(fma_size=np.int32(16), accumulator_fraction_bits=np.int64(30),
                             extra_alignment_bits=np.int16(2), min_alignment_exponent=np.int64(-133),
                             accumulator_emin=np.int64(-126), late_addend_bits=np.int64(1))
    for name in ("fma_size", "accumulator_fraction_bits", "extra_alignment_bits", "min_alignment_exponent",
                 "accumulator_emin", "late_addend_bits"):
        assert type(getattr(spec, name)) is int, name
    a = np.full(16, 1.5)
    assert dot(a, a, 0.0, spec) == 16 * 1.5 * 1.5  # exact: 36 needs 4 bits


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("rounding", hardware.ROUNDING_MODES)
def test_accumulator_emin_places_the_addend_without_cutting_its_bits(engine, rounding):
    # accumulator_emin above the output format's emin: the addend's exponent counts as at least -14
    # in the alignment, but its bits are cut only with the products, at 2**(E - f - x).  0.9 cut
    # them at 2**(-14 - 23) first: 2**-38 (a multiple of 2**(-14 - 25)) became 0, and with a late
    # addend a tiny negative addend was truncated to 0 instead of rounded down to minus one unit.
    from pychop_compat.kernels.compiled import cpu_engine

    spec = hardware.BlockFMA("fp16", "fp32", fma_size=1, extra_alignment_bits=2, rounding=rounding,
                             accumulator_emin=-14)
    late = hardware.BlockFMA("fp16", "fp32", fma_size=2, extra_alignment_bits=1, rounding=rounding,
                             accumulator_emin=-20, late_addend_bits=3)
    rng = np.random.default_rng([14, len(rounding)])
    rows = _format_values(rng, (150, 2), "fp16"), _format_values(rng, (150, 2), "fp16")
    addends = (rng.standard_normal(150) * 2.0 ** rng.integers(-60, 0, 150)).astype(np.float32).astype(np.float64)
    addends[::5] = -2.0 ** rng.integers(-149, -30, 30)
    with cpu_engine(engine):
        assert hardware.block_dot(np.zeros(1), np.zeros(1), 2.0**-38, spec) == 2.0**-38
        assert hardware.block_dot([2.0**-24], [2.0**-24], 2.0**-38, spec) == 2.0**-38  # the product: cut
        got = hardware.block_dot(rows[0][:, :1], rows[1][:, :1], addends, spec)
        got_late = hardware.block_dot(rows[0], rows[1], addends, late)
    for i in range(150):
        expected = _aligned_block(rows[0][i, :1], rows[1][i, :1], addends[i], spec)
        assert np.float64(got[i]).tobytes() == np.float64(expected).tobytes(), (i, got[i], expected)
        expected = _late_block(rows[0][i], rows[1][i], addends[i], late)
        assert np.float64(got_late[i]).tobytes() == np.float64(expected).tobytes(), (i, got_late[i], expected)


def test_alpha_and_beta_must_be_real_numbers():
    # 0.9 let a 0-d torch tensor take over the NumPy path's arithmetic: "max() got an unexpected
    # keyword argument 'axis'"
    torch = pytest.importorskip("torch")
    A = np.ones((2, 3))
    for kwargs in ({"alpha": torch.tensor(2.0)}, {"beta": torch.tensor(2.0)}, {"alpha": "2"}, {"beta": 1j}):
        name = next(iter(kwargs))
        with pytest.raises(TypeError, match=f"{name} must be a real number"):
            hardware.matmul(A, A.T, A @ A.T, **kwargs)
    for alpha in (2, 2.0, np.float32(2.0), np.int64(2), np.array(2.0)):  # 2 * 3 + 3, exact
        np.testing.assert_array_equal(hardware.matmul(A, A.T, A @ A.T, alpha=alpha), np.full((2, 2), 9.0))
    At = torch.ones(2, 3, dtype=torch.float64)
    assert torch.equal(hardware.matmul(At, At.T, alpha=torch.tensor(2.0)), torch.full((2, 2), 6.0))
