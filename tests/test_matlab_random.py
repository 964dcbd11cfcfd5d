"""MATLAB's random stream: published MATLAB outputs and MATLAB's calling conventions."""

from __future__ import annotations

import numpy as np
import pytest

from pychop_compat import chop, rand, randi, rng

# Published MATLAB outputs (MathWorks documentation; 15 significant digits as printed there).
DEFAULT_RAND_1x5 = [0.814723686393179, 0.905791937075619, 0.126986816293506, 0.913375856139019, 0.632359246225410]


def test_default_rand_1x5():
    rng("default")
    np.testing.assert_allclose(rand(1, 5).ravel(), DEFAULT_RAND_1x5, rtol=0, atol=5e-16)


def test_state_at_import_is_default():
    import subprocess
    import sys

    code = "from pychop_compat import rand; print(repr(float(rand())))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert abs(float(out) - DEFAULT_RAND_1x5[0]) < 5e-16


def test_randi_published_examples():
    rng("default")
    assert randi([-5, 5], 10, 1).ravel().tolist() == [3, 4, -4, 5, 1, -4, -2, 1, 5, 5]
    rng("default")
    assert randi([10, 50], 1, 5).ravel().tolist() == [43, 47, 15, 47, 35]
    rng("default")  # [10 50] as a MAT-file holds it: a 1 x 2 matrix
    assert randi(np.array([[10.0, 50.0]]), 1, 5).ravel().tolist() == [43, 47, 15, 47, 35]


def test_rng_1():
    rng(1)
    assert abs(rand() - 0.417022004702574) < 5e-16


def test_seed_zero_is_default():
    rng(0)
    a = rand(3, 1)
    rng("default")
    assert np.array_equal(a, rand(3, 1))
    rng(0, "twister")
    assert np.array_equal(a, rand(3, 1))


def test_save_and_restore_settings():
    rng(7)
    rand(5, 1)
    saved = rng()
    first = rand(4, 4)
    rand(3, 1)
    previous = rng(saved)
    assert previous != saved
    assert np.array_equal(rand(4, 4), first)
    assert rng().Type == "twister" and rng().Seed == 7


def test_rng_returns_previous_settings():
    rng(3)
    before = rng()
    assert rng(4) == before


def test_shapes_and_column_major_fill():
    rng(5)
    column = rand(6, 1).ravel()
    rng(5)
    matrix = rand(2, 3)
    assert matrix.shape == (2, 3)
    assert np.array_equal(matrix.ravel(order="F"), column)  # MATLAB fills column by column
    rng(5)
    assert rand(3).shape == (3, 3) and rand([2, 4]).shape == (2, 4) and rand(2, 3, 4).shape == (2, 3, 4)
    assert rand(0, 3).shape == (0, 3)
    assert isinstance(rand(), np.floating)


def test_single_class():
    rng(5)
    d = rand(2, 2)
    rng(5)
    s = rand(2, 2, "single")
    assert s.dtype == np.float32 and np.array_equal(s, d.astype(np.float32))


def test_randi_range_and_rule():
    rng(9)
    u = rand(1000, 1)
    rng(9)
    r = randi(6, 1000, 1)
    assert np.array_equal(r, 1 + np.floor(6 * u))  # one uniform per integer
    assert r.min() == 1 and r.max() == 6


@pytest.mark.parametrize("bad", [-1, 2**32, 1.5, "twist"])
def test_bad_seeds(bad):
    with pytest.raises(ValueError):
        rng(bad)


def test_bad_generator():
    with pytest.raises(ValueError, match="twister"):
        rng(1, "philox")


def test_bad_randi_bounds():
    with pytest.raises(ValueError):
        randi([5, 1])
    with pytest.raises(ValueError):
        randi([1, 2, 3])


def test_stochastic_chop_is_reproducible_after_rng():
    x = np.linspace(0.1, 0.9, 50).reshape(5, 10)
    rng(2026)
    a = chop(x, {"format": "b", "round": 5})
    rng(2026)
    b = chop(x, {"format": "b", "round": 5})
    c = chop(x, {"format": "b", "round": 5})
    assert np.array_equal(a, b) and not np.array_equal(b, c)


def test_stochastic_chop_draws_one_uniform_per_inexact_element():
    # Every element of x is inexact in fp16, so chop.m draws numel(x) numbers with rand(n, 1).
    x = np.full((4, 3), 0.1)
    rng(11)
    chop(x, {"format": "h", "round": 5})
    after = rand()
    rng(11)
    rand(12, 1)
    assert after == rand()


def test_settings_print_in_one_line():
    """``rng(42)`` at a prompt echoes the previous settings: one short line, not 625 words (MATLAB
    prints nothing for ``rng(42)`` and shows a struct's array field as its size)."""
    from pychop_compat import rng as set_rng

    shown = repr(set_rng(42))
    assert "\n" not in shown and len(shown) < 100, shown
    assert shown.startswith("RngSettings(Type='twister', Seed=") and "625 uint32 words" in shown


def test_size_arguments_as_matlab_reads_them():
    # MATLAB: rand([2]) is rand(2), 2-by-2 ([2] is the scalar 2); trailing singleton dimensions
    # beyond the second are dropped (size(rand(2,3,1)) is [2 3], rand(1,1,1) a scalar).
    rng("default")
    assert rand([2]).shape == (2, 2) and randi(10, [2]).shape == (2, 2)
    assert rand(2, 3, 1).shape == (2, 3) and rand(2, 1, 3).shape == (2, 1, 3)
    assert np.ndim(rand(1, 1, 1)) == 0


@pytest.mark.parametrize("draw", [lambda: rand([]), lambda: rand(np.array([]), "single"), lambda: randi(10, []),
                                  lambda: randi([-3, 3], np.zeros(0))],
                         ids=["rand", "rand-single", "randi", "randi-lo"])
def test_an_empty_size_vector_is_a_0x0_array_and_draws_nothing(draw):
    # MATLAB: rand([]) and randi(10, []) are 0-by-0, as zeros([]) is; the stream does not move
    # (the next draw after rng(0) is still MATLAB's first, 0.8147236863931789).
    rng(0)
    out = draw()
    assert isinstance(out, np.ndarray) and out.shape == (0, 0)
    assert rand() == 0.8147236863931789


@pytest.mark.parametrize("bounds", [np.inf, [0, np.inf], [-np.inf, 0], [-np.inf, np.inf], np.nan])
def test_randi_refuses_bounds_that_are_not_finite(bounds):
    # MATLAB errors for a non-finite imax or imin; nothing is drawn first.
    rng(0)
    with pytest.raises(ValueError, match="randi"):
        randi(bounds, 1, 2)
    assert rand() == 0.8147236863931789


def test_rng_with_a_generator_name_alone_is_seed_zero():
    # MathWorks, rng (https://uk.mathworks.com/help/matlab/ref/rng.html): "rng(generator) ... with a
    # seed of 0. This syntax is equivalent to rng(0,generator). (since R2023b)"
    rng(5)
    rng("twister")
    np.testing.assert_allclose(rand(1, 5).ravel(), DEFAULT_RAND_1x5, rtol=0, atol=5e-16)
    assert rng().Seed == 0 and rng().Type == "twister"
    with pytest.raises(ValueError, match="twister"):  # MATLAB's other generators stay refused, by name
        rng("philox")


@pytest.mark.parametrize("bounds", [2**53 + 1, 2**60, np.uint64(2**53 + 1), 2.0**60, [-2**52, 2**52],
                                    [2**60, 2**60 + 1], [-2**53 - 1, 0]])
def test_randi_refuses_ranges_beyond_flintmax(bounds):
    # Octave's randi doc: randi uses class double, "This limits the maximum integer (imax) and range
    # (imax - imin) to the value returned by the flintmax function"; MATLAB's randi errors for a too
    # large imax too (MATLAB Answers 550083).  Beyond 2^53 doubles skip integers: randi(2^60) gave
    # only multiples of 128.  Nothing is drawn first.
    rng(0)
    with pytest.raises(ValueError, match="randi.*flintmax"):
        randi(bounds, 1, 20)
    assert rand() == 0.8147236863931789


def test_randi_reaches_flintmax():
    # 2^53 integers are the most one double u = k / 2^53 reaches: randi(2^53) is 1 + k, every one reachable.
    rng(0)
    u = rand(1, 4)
    rng(0)
    assert np.array_equal(randi(2**53, 1, 4), 1 + u * 2.0**53)
    rng(0)
    assert np.array_equal(randi([-2**53, -1], 1, 4), -(2.0**53) + u * 2.0**53)


def test_rng_refuses_settings_that_are_not_a_twister_state():
    # MathWorks, rng: "rng(s) restores the settings of the random number generator ... [to] the values
    # contained in s" and s.Type names the generator: as rng(1, 'philox') is refused, so is a philox s.
    # s.State is MATLAB's "625x1 uint32" twister state; an all-zero Mersenne Twister key is not a state
    # (it yields 0 forever, outside rand's (0, 1)).
    from pychop_compat import RngSettings

    rng(7)
    rand(5, 1)
    saved = rng()
    zeros = np.zeros(625, np.uint32)
    past_the_key = saved.State.copy()
    past_the_key[624] = 625
    for bad in [RngSettings("philox", 3, saved.State), RngSettings("twister", 3, zeros),
                RngSettings("twister", 3, zeros[:10]), RngSettings("twister", 3, saved.State.astype(np.int64)),
                RngSettings("twister", 3, past_the_key), RngSettings("twister", -1, saved.State)]:
        with pytest.raises(ValueError, match=r"rng\(s\)"):
            rng(bad)
        assert rng() == saved  # the stream is untouched
    # every state rng() returns still restores, mid-stream too; a 625x1 State (as a MAT-file holds it) as well
    expected = rand(3, 1)
    rng(RngSettings("twister", 7, saved.State.reshape(625, 1)))
    assert np.array_equal(rand(3, 1), expected)
