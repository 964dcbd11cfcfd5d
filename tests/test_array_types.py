"""Which inputs chop accepts, and what it gives back (issue 16).

Documented array-likes (NumPy arrays and subclasses, NumPy scalars, Python
real numbers, lists, tuples) are converted by NumPy; torch, CuPy, JAX and Dask
arrays go to their own engines; pandas and xarray objects keep their labels;
everything else is refused with a TypeError, never converted silently.
Expected values come from NumPy's float16 cast (a single correct rounding to
nearest, chop's format 'h' for values in its normal range).
"""

from __future__ import annotations

import array
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from pychop_compat import Chop, chop

VALUES = np.array([[0.1, -1 / 3, 2.0 / 7], [1000.1, -0.0009765, 3.14159]])
HALF = VALUES.astype(np.float16).astype(np.float64)  # the oracle: IEEE half, round to nearest


class WithArrayInterface:
    def __array__(self, dtype=None, copy=None):
        return VALUES.copy()


class WithDLPack:
    def __dlpack__(self, stream=None):
        return VALUES.__dlpack__()

    def __dlpack_device__(self):
        return VALUES.__dlpack_device__()


@pytest.mark.parametrize("value", [memoryview(b"ab"), array.array("d", [0.1]), "0.1", {"a": 0.1}, {0.1},
                                   WithArrayInterface(), WithDLPack(), range(3)],
                         ids=["memoryview", "array.array", "str", "dict", "set", "__array__", "__dlpack__", "range"])
def test_unknown_types_are_refused(value):
    with pytest.raises(TypeError, match="does not support"):
        chop(value, {"format": "h"})
    with pytest.raises(TypeError, match="does not support"):
        Chop(format="h")(value)


def test_refusals_say_how_to_convert():
    with pytest.raises(TypeError, match=r"numpy\.asarray\(x\)"):
        chop(WithArrayInterface(), {"format": "h"})
    with pytest.raises(TypeError, match=r"from_dlpack"):
        chop(WithDLPack(), {"format": "h"})
    # the explicit path works
    np.testing.assert_array_equal(chop(np.from_dlpack(WithDLPack()), {"format": "h"}), HALF)


def test_chopped_values_are_refused_naming_their_values():
    from pychop_compat import chopped, cpfloat

    for value in (chopped(VALUES, "s"), chopped(0.1, "s")):
        for call in (lambda: chop(value, {"format": "h"}), lambda: Chop(format="h")(value),
                     lambda: cpfloat(value, "binary16")):
            with pytest.raises(TypeError, match=r"does not support .* chopped value.*x\.values"):
                call()
    np.testing.assert_array_equal(chop(chopped(VALUES, "d").values, {"format": "h"}), HALF)  # the way out


def test_documented_array_likes():
    np.testing.assert_array_equal(chop(VALUES.tolist(), {"format": "h"}), HALF)
    np.testing.assert_array_equal(chop(tuple(VALUES[0]), {"format": "h"}), HALF[0])
    assert chop(0.1, {"format": "h"}) == HALF[0, 0] and type(chop(0.1)) is float
    assert chop(np.float32(0.1), {"format": "h"}) == np.float32(HALF[0, 0])
    assert chop(3, {"format": "h"}) == 3.0


@pytest.mark.filterwarnings("ignore::PendingDeprecationWarning")
def test_numpy_subclasses_keep_their_type():
    m = np.matrix(VALUES)
    out = chop(m, {"format": "h"})
    assert type(out) is np.matrix
    np.testing.assert_array_equal(np.asarray(out), HALF)
    masked = np.ma.array(VALUES, mask=[[0, 1, 0], [1, 0, 0]])
    out = chop(masked, {"format": "h"})
    assert isinstance(out, np.ma.MaskedArray)
    np.testing.assert_array_equal(out.mask, masked.mask)
    np.testing.assert_array_equal(out.data, np.where(masked.mask, VALUES, HALF))  # masked ones kept
    assert out.mask is not masked.mask  # a copy of the mask


def test_e8m0_of_byte_swapped_and_lazy_float32_is_rounded_in_float64():
    # E8M0's smallest number 2^-127 lies below float32's normal range: float32 input is rounded in
    # float64 whatever its byte order or container (big-endian input and xarray over Dask gave
    # 2^-126).  Oracle: ml_dtypes' cast; byte-swapped input gives a native result.
    ml_dtypes = pytest.importorskip("ml_dtypes")
    x = np.array([6.4e-40, 1e-42, 3e-39, 1.0, 0.3, -5.0], np.float32)
    want = x.astype(ml_dtypes.float8_e8m0fnu).astype(np.float32)
    assert want[0] == 2.0 ** -127
    swapped = x.astype(">f4")
    out = chop(swapped, {"format": "float8_e8m0fnu"})
    assert out.dtype == np.float32 and out.dtype.isnative
    np.testing.assert_array_equal(out.view(np.uint32), want.view(np.uint32))
    np.testing.assert_array_equal(swapped, x)  # the caller's array is not modified
    xr = pytest.importorskip("xarray")
    pytest.importorskip("dask.array")
    lazy = chop(xr.DataArray(x).chunk(2), {"format": "float8_e8m0fnu"})
    np.testing.assert_array_equal(lazy.values.view(np.uint32), want.view(np.uint32))


def test_masked_array_counter_numbers_follow_row_major_positions():
    # Chop(rng=<int>) gives element i of the whole array (row-major, masked or not) counter offset + i
    # and advances by the array's size, as on Dask (the unmasked elements were numbered 0..k-1 in
    # column-major order).  Oracle: the counter's definition, and stochastic rounding to fp16 stated
    # here: |v| rounds up from the fp16 number below it when u <= its fraction of the gap.
    from pychop_compat.random.counter import GOLDEN, ROUND, counter_uniform, mix64

    mask = np.array([[0, 1, 0], [1, 0, 0]], bool)
    key = mix64(7 + ROUND * GOLDEN)
    chopper = Chop({"format": "h", "round": 5}, rng=7)
    for call in range(2):
        masked = np.ma.array(VALUES, mask=mask)
        out = chopper(masked)
        assert isinstance(out, np.ma.MaskedArray) and out.mask.tolist() == mask.tolist()
        for i, (v, hidden) in enumerate(zip(VALUES.flat, mask.flat)):
            if hidden:
                assert out.data.flat[i] == v
                continue
            near = np.float16(abs(v))
            down = np.nextafter(near, np.float16(0)) if float(near) > abs(v) else near
            up = np.nextafter(down, np.float16(np.inf))
            frac = (abs(v) - float(down)) / (float(up) - float(down))  # exact: a gap is a power of two
            u = counter_uniform(key, call * VALUES.size + i)
            assert out.data.flat[i] == np.copysign(float(up if u <= frac else down), v), (call, i)
        np.testing.assert_array_equal(masked.data, VALUES)  # the caller's array is not modified


def test_memmap_gives_a_plain_array(tmp_path):
    mm = np.memmap(tmp_path / "x.bin", dtype=np.float64, mode="w+", shape=VALUES.shape)
    mm[:] = VALUES
    out = chop(mm, {"format": "h"})
    assert type(out) is np.ndarray
    np.testing.assert_array_equal(out, HALF)
    np.testing.assert_array_equal(mm, VALUES)  # the file is not modified


def test_pandas_series_and_frames_keep_labels():
    pd = pytest.importorskip("pandas")
    s = pd.Series(VALUES[0], index=["a", "b", "c"], name="v")
    s.attrs["units"] = "m"
    out = chop(s, {"format": "h"})
    assert isinstance(out, pd.Series) and out.name == "v" and list(out.index) == ["a", "b", "c"]
    assert out.attrs == {"units": "m"}
    np.testing.assert_array_equal(out.to_numpy(), HALF[0])
    np.testing.assert_array_equal(s.to_numpy(), VALUES[0])
    frame = pd.DataFrame(VALUES, index=pd.Index([10, 20], name="row"), columns=["x", "y", "z"])
    out = chop(frame, {"format": "h"})
    assert isinstance(out, pd.DataFrame)
    assert out.index.equals(frame.index) and list(out.columns) == ["x", "y", "z"]
    np.testing.assert_array_equal(out.to_numpy(), HALF)
    single = chop(frame.astype(np.float32), {"format": "h"})
    assert (single.dtypes == np.float32).all()


def test_pandas_refusals():
    pd = pytest.importorskip("pandas")
    mixed = pd.DataFrame({"a": [0.1], "b": np.array([0.1], np.float32)})
    with pytest.raises(TypeError, match="one dtype"):
        chop(mixed, {"format": "h"})
    with pytest.raises(TypeError, match="Float64"):
        chop(pd.Series([0.1, None], dtype="Float64"), {"format": "h"})
    with pytest.raises(TypeError, match="real NumPy dtypes"):
        chop(pd.Series(["a"]), {"format": "h"})


def test_xarray_keeps_coordinates_and_laziness():
    xr = pytest.importorskip("xarray")
    da = pytest.importorskip("dask.array")
    arr = xr.DataArray(VALUES, dims=("r", "c"), coords={"r": [1, 2], "c": list("xyz")}, name="v",
                       attrs={"units": "m"})
    out = chop(arr, {"format": "h"})
    assert isinstance(out, xr.DataArray) and out.name == "v" and out.attrs == {"units": "m"}
    assert out.coords.equals(arr.coords) and out.dims == ("r", "c")
    np.testing.assert_array_equal(out.values, HALF)
    lazy = arr.chunk({"r": 1})
    out = chop(lazy, {"format": "h"})
    assert isinstance(out.data, da.Array)  # still lazy
    np.testing.assert_array_equal(out.values, HALF)


def test_optional_libraries_are_not_imported():
    code = textwrap.dedent("""
        import sys
        import numpy as np
        import pychop_compat
        from pychop_compat.engines import dask_engine, jax_engine, labelled
        from pychop_compat.kernels import elementwise
        pychop_compat.chop(np.linspace(-3, 3, 50), {'format': 'b', 'round': 5})
        pychop_compat.chop([0.1, 0.2], {'format': 'h'})
        print(sorted(m for m in ('torch', 'cupy', 'jax', 'dask', 'pandas', 'xarray') if m in sys.modules))
    """)
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]"


def test_number_formats_refuse_other_array_types():
    from pychop_compat import fixed_point

    with pytest.raises(TypeError, match="convert it explicitly"):
        fixed_point(WithArrayInterface(), 8, 4)
    jnp = pytest.importorskip("jax.numpy")
    with pytest.raises(TypeError, match="convert it explicitly"):
        fixed_point(jnp.ones(2), 8, 4)
