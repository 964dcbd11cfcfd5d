"""Masked arrays, matrices and other ndarray subclasses (issue 18, bullet 4; linalg's parts are issue 20's).

Expected values: fp16 roundings worked out in binary (1/3 -> 0.333251953125,
2/3 -> 0.66650390625), and MATLAB's rule for masked work, ``c(~m) = chop(x(~m))``,
with the draws of ``rng(seed)`` in column-major order.
"""

from __future__ import annotations

import numpy as np
import pytest

pytestmark = pytest.mark.filterwarnings("ignore:the matrix subclass:PendingDeprecationWarning")

from pychop_compat import Chop, chop, rand, rng, roundit

THIRD_FP16 = 0.333251953125   # 1.0101010101b * 2^-2
TWO_THIRDS_FP16 = 0.66650390625  # 1.0101010101b * 2^-1


def test_masked_array_keeps_its_mask_and_masked_values():
    data = np.array([[1 / 3, 1e300], [np.nan, 2 / 3]])
    x = np.ma.masked_array(data, mask=[[False, True], [True, False]], fill_value=-7.0)
    before = (x.data.copy(), x.mask.copy())
    c = chop(x, {"format": "h"})
    assert isinstance(c, np.ma.MaskedArray)
    assert np.array_equal(c.mask, x.mask)
    assert c.data[0, 0] == THIRD_FP16 and c.data[1, 1] == TWO_THIRDS_FP16
    assert c.data[0, 1] == 1e300 and np.isnan(c.data[1, 0])  # masked: untouched (1e300 would overflow)
    assert c.fill_value == -7.0 and c.dtype == np.float64
    assert np.array_equal(x.data, before[0], equal_nan=True) and np.array_equal(x.mask, before[1])
    assert c.mask is not x.mask


def test_masked_stochastic_draws_only_for_unmasked_in_column_major_order():
    x = np.ma.masked_array(np.arange(1, 13).reshape(3, 4) / 7.0, mask=np.eye(3, 4, dtype=bool))
    rng(5)
    c = chop(x, {"format": "h", "round": 5})
    after = rand()
    keep = ~x.mask.ravel(order="F")
    rng(5)
    vector = chop(x.data.ravel(order="F")[keep], {"format": "h", "round": 5})  # MATLAB: chop(x(~m))
    assert after == rand()  # the same number of draws: 9, one per unmasked element
    assert np.array_equal(c.data.ravel(order="F")[keep], vector)
    assert np.array_equal(c.data[x.mask], x.data[x.mask])


@pytest.mark.parametrize("dtype, out_dtype", [(np.float32, np.float32), (np.float16, np.float16),
                                              (np.int64, np.float64)])
def test_masked_dtypes(dtype, out_dtype):
    x = np.ma.masked_array(np.array([1, 3, 5, 7]).astype(dtype), mask=[0, 1, 0, 0])
    c = chop(x, {"format": "q52"})  # 3 significant bits: 1, 3, 5 = 101b and 7 = 111b are exact
    assert c.dtype == out_dtype and isinstance(c, np.ma.MaskedArray)
    assert c.data.tolist() == [1, 3, 5, 7] and c.mask.tolist() == [False, True, False, False]


def test_masked_without_mask_and_hard_mask():
    x = np.ma.masked_array([1 / 3, 2 / 3])
    c = chop(x, {"format": "h"})
    assert isinstance(c, np.ma.MaskedArray) and not np.ma.getmaskarray(c).any()
    assert c.tolist() == [THIRD_FP16, TWO_THIRDS_FP16]
    hard = np.ma.masked_array([1 / 3, 2 / 3], mask=[1, 0], hard_mask=True)
    assert chop(hard, {"format": "h"}).hardmask


def test_masked_subclass_is_kept():
    class Labelled(np.ma.MaskedArray):
        pass

    x = np.ma.masked_array([1 / 3, 2.0], mask=[0, 1]).view(Labelled)
    c = chop(x, {"format": "h"})
    assert type(c) is Labelled and c.data.tolist() == [THIRD_FP16, 2.0]


def test_masked_with_chop_object_and_roundit():
    x = np.ma.masked_array([0.5, 1.5, 2.5], mask=[0, 1, 0])
    r = roundit(x)
    assert isinstance(r, np.ma.MaskedArray) and r.data.tolist() == [0.0, 1.5, 2.0]
    c = Chop(format="h")(np.ma.masked_array([1 / 3, 5.0], mask=[0, 1]))
    assert c.data.tolist() == [THIRD_FP16, 5.0] and c.mask.tolist() == [False, True]


def test_matrix_comes_back_as_matrix():
    m = np.matrix([[1 / 3, 2 / 3], [1.0, 3.0]])
    c = chop(m, {"format": "h"})
    assert type(c) is np.matrix and c.shape == (2, 2)
    assert c.tolist() == [[THIRD_FP16, TWO_THIRDS_FP16], [1.0, 3.0]]
    row = chop(np.matrix([1 / 3, 2 / 3], dtype=np.float32), {"format": "h"})
    assert type(row) is np.matrix and row.shape == (1, 2) and row.dtype == np.float32
    assert type(roundit(np.matrix([[0.5, 1.5]]))) is np.matrix


def test_matrix_stochastic_uses_column_major_order_like_an_ndarray():
    m = np.matrix(np.arange(1, 7).reshape(2, 3) / 7.0)
    rng(2)
    c = chop(m, {"format": "h", "round": 5})
    rng(2)
    assert np.array_equal(np.asarray(c), chop(np.asarray(m), {"format": "h", "round": 5}))


def test_memmap_gives_an_ndarray(tmp_path):
    mm = np.memmap(tmp_path / "x.dat", dtype=np.float64, mode="w+", shape=(3,))
    mm[:] = 1 / 3
    c = chop(mm, {"format": "h"})
    assert type(c) is np.ndarray and c.tolist() == [THIRD_FP16] * 3
    assert mm[0] == 1 / 3


class _Tagged(np.ndarray):
    """A subclass with metadata that a plain result would lose."""


def test_unknown_subclass_is_refused_clearly():
    x = np.array([1 / 3]).view(_Tagged)
    with pytest.raises(TypeError, match=r"chop cannot give back a .*_Tagged.*numpy\.asarray"):
        chop(x, {"format": "h"})
    with pytest.raises(TypeError, match="chop cannot give back"):
        Chop(format="h")(x)
    assert chop(np.asarray(x), {"format": "h"}).tolist() == [THIRD_FP16]
