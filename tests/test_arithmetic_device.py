"""Chopped arrays holding device arrays: the generic code with a stand-in library on the CPU,
and CuPy itself where a CUDA device exists (marked gpu: deselected otherwise).

The stand-in (``FakeDeviceArray``) behaves as CuPy does where it matters: NumPy's ufuncs and
functions reach it through ``__array_ufunc__``/``__array_function__`` and give back its own
arrays, and it refuses implicit conversion to NumPy (``__array__`` raises), so any place of
the generic code that would move data to the host silently fails these tests.  Expected
values: explicit chop calls on the same operation sequence, and the chopped NumPy array
(itself checked against chop in test_arithmetic.py).
"""

from __future__ import annotations

import types

import numpy as np
import pytest

import pychop_compat
from pychop_compat import Chop, chopped, linalg
from pychop_compat.arithmetic import ChoppedArray, NotChoppedError
from pychop_compat.arithmetic.libraries import holding
from pychop_compat.engines import dispatch
from pychop_compat.kernels.xp import Namespace


class FakeDeviceArray:
    """A NumPy array behind the protocols a CuPy array offers, with no implicit host conversion."""

    __array_priority__ = 50

    def __init__(self, data):
        self.data = np.asarray(data)

    def __array__(self, dtype=None, copy=None):
        raise TypeError("implicit conversion of a device array to NumPy")

    @staticmethod
    def _in(v):
        if isinstance(v, FakeDeviceArray):
            return v.data
        if isinstance(v, (list, tuple)):
            return type(v)(FakeDeviceArray._in(e) for e in v)
        return v

    @staticmethod
    def _out(v):
        if isinstance(v, np.ndarray):
            return FakeDeviceArray(v)
        if isinstance(v, tuple):
            return tuple(FakeDeviceArray._out(e) for e in v)
        if isinstance(v, np.generic):
            return FakeDeviceArray(np.asarray(v))  # CuPy gives 0-d arrays, not scalars
        return v

    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        if any(isinstance(v, np.ndarray) for v in inputs):
            raise TypeError("a device array does not mix with NumPy arrays")
        return self._out(getattr(ufunc, method)(*self._in(inputs), **self._in(kwargs)))

    def __array_function__(self, func, types_, args, kwargs):
        return self._out(func(*self._in(args), **self._in(kwargs)))

    shape = property(lambda self: self.data.shape)
    dtype = property(lambda self: self.data.dtype)
    ndim = property(lambda self: self.data.ndim)
    size = property(lambda self: self.data.size)
    T = property(lambda self: FakeDeviceArray(self.data.T))

    def __getitem__(self, key):
        return self._out(self.data[self._in(key)])

    def __setitem__(self, key, value):
        if isinstance(value, np.ndarray) and value.ndim:
            raise TypeError("a device array does not take NumPy arrays")
        self.data[self._in(key)] = self._in(value)

    def __len__(self):
        return len(self.data)

    def __float__(self):
        return float(self.data)

    def reshape(self, *shape):
        return FakeDeviceArray(self.data.reshape(*shape))

    def ravel(self, order="C"):
        return FakeDeviceArray(self.data.ravel(order))

    def transpose(self, *axes):
        return FakeDeviceArray(self.data.transpose(*axes))

    def copy(self):
        return FakeDeviceArray(self.data.copy())

    device = "fake-device"

    def to_device(self, device, stream=None):
        """The array API's copy to another device: only to the host (``'cpu'``) here."""
        assert device == "cpu"
        return self.data.copy()

    def astype(self, dtype, copy=True):
        return FakeDeviceArray(self.data.astype(dtype))


def _wrapped(func):
    return lambda *args, **kwargs: FakeDeviceArray._out(func(*FakeDeviceArray._in(args),
                                                                **FakeDeviceArray._in(kwargs)))


def _fake_asarray(obj, dtype=None, device=None):
    assert device in (None, FakeDeviceArray.device)
    return FakeDeviceArray(np.asarray(FakeDeviceArray._in(obj), dtype=dtype))


FAKE_MODULE = types.SimpleNamespace(asarray=_fake_asarray, **{name: _wrapped(getattr(np, name)) for name in (
    "empty", "full", "concatenate", "moveaxis", "transpose", "broadcast_to")})
FAKE_NAMESPACE = Namespace("fake-device", FAKE_MODULE, lambda a, dtype: FakeDeviceArray(a.data.view(dtype)))


def fake_round(x, spec, sources):
    """Rounds as CuPy's engine would: the values rounded by chop, on "the device"."""
    return FakeDeviceArray(dispatch.round_array(x.data, spec, sources))


@pytest.fixture
def fake_device():
    with holding(FakeDeviceArray, FAKE_NAMESPACE, fake_round):
        yield


def on_device(c) -> np.ndarray:
    """The values of a chopped array that must hold a device array (checked)."""
    assert isinstance(c, ChoppedArray)
    assert isinstance(c.values, FakeDeviceArray), type(c.values)
    return c.to_numpy()


@pytest.mark.parametrize("method", ["recursive", "pairwise", "blocked"])
def test_generic_code_keeps_device_arrays_and_rounds_as_chop(fake_device, method):
    o = {"format": "b", "round": 1}
    ch = Chop(o)
    rng = np.random.default_rng(2)
    x, y = rng.standard_normal((6, 37)), rng.standard_normal((37, 5))
    X = chopped(FakeDeviceArray(x), o, method=method, block_size=8)
    Y = chopped(FakeDeviceArray(y), o, method=method, block_size=8)
    Xn = chopped(x, o, method=method, block_size=8)
    a, b = ch(x), ch(y)
    np.testing.assert_array_equal(on_device(X), a)
    np.testing.assert_array_equal(on_device((X * 3 + 1) / 7), ch(ch(ch(a * 3) + 1) / 7))
    np.testing.assert_array_equal(on_device(np.sqrt(abs(X))), ch(np.sqrt(np.abs(a))))
    np.testing.assert_array_equal(on_device(X @ Y), linalg.matmul(a, b, o, method=method, block_size=8))
    np.testing.assert_array_equal(on_device(X[0].dot(Y[:, 1])),
                                  linalg.matmul(a[0], b[:, 1], o, method=method, block_size=8))
    for f in (lambda c: c.sum(axis=1), lambda c: c.sum(), lambda c: c.prod(axis=0),
              lambda c: c.cumsum(axis=1), lambda c: np.mean(c, axis=0), lambda c: c.var(axis=1),
              lambda c: np.std(c), lambda c: np.add.reduce(c, axis=0), lambda c: c.T.reshape(-1)):
        np.testing.assert_array_equal(on_device(f(X)), np.asarray(f(Xn)))


def test_generic_code_with_stochastic_rounding_draws_as_chop(fake_device):
    """The device namespace's rounding gets the arithmetic's sources (here MATLAB's stream)."""
    o = {"format": "h", "round": 5}
    x = np.random.default_rng(3).standard_normal((30, 4))
    pychop_compat.rng(5)
    ch = Chop(o)
    a = ch(x)
    s = ch(a * 3)
    total = s[0].copy()
    for k in range(1, s.shape[0]):
        total = ch(total + s[k])
    pychop_compat.rng(5)
    X = chopped(FakeDeviceArray(x), o)
    np.testing.assert_array_equal(on_device((X * 3).sum(axis=0)), total)


def test_generic_code_refuses_what_it_would_compute_on_the_host(fake_device):
    X = chopped(FakeDeviceArray(np.ones((3, 3))), "h")
    with pytest.raises(NotChoppedError, match="fake-device"):
        np.linalg.solve(X, X)
    with pytest.raises(NotChoppedError, match="fake-device"):
        np.einsum("ij,jk->ik", X, X)
    with pytest.raises(TypeError, match="to_numpy"):
        np.asarray(X)  # no implicit move to the host
    with pytest.raises(NotChoppedError, match="CuPy"):
        S = chopped(FakeDeviceArray(np.ones((3, 3))), {"format": "h", "round": 5})
        S @ S


# --- CuPy on a CUDA device (marked gpu: deselected without one) ------------------------------------------------


def _cupy_with_device():
    cupy = pytest.importorskip("cupy")
    try:
        if cupy.cuda.runtime.getDeviceCount() < 1:
            pytest.skip("no CUDA device")
    except Exception as exc:  # CUDA driver missing
        pytest.skip(f"no CUDA device ({exc})")
    return cupy


@pytest.mark.gpu
def test_chopped_cupy_arrays_keep_the_device_and_round_as_chop():
    cupy = _cupy_with_device()
    o = {"format": "h", "round": 1}
    ch = Chop(o)
    rng = np.random.default_rng(4)
    x, y = rng.standard_normal((20, 33)), rng.standard_normal((33, 6))
    X, Y = chopped(cupy.asarray(x), o), chopped(cupy.asarray(y), o)
    a, b = ch(x), ch(y)
    for got, want in (((X * 3 + 1) / 7, ch(ch(ch(a * 3) + 1) / 7)), (X @ Y, linalg.matmul(a, b, o)),
                      (X.sum(axis=0), chopped(x, o).sum(axis=0).values), (np.exp(X), ch(np.exp(a)))):
        assert isinstance(got.values, cupy.ndarray)
        assert got.values.device == X.values.device
        np.testing.assert_array_equal(got.to_numpy(), want)


@pytest.mark.gpu
def test_chopped_cupy_counter_rounding_equals_chop_with_seed():
    cupy = _cupy_with_device()
    from pychop_compat.arithmetic import Arithmetic

    o = {"format": "b", "round": 5}
    x = np.random.default_rng(6).standard_normal((50, 3))
    ch = Chop(o, rng=11)
    want = ch(ch(x) * 3)
    X = chopped(cupy.asarray(x), Arithmetic(o, rng=11))
    np.testing.assert_array_equal((X * 3).to_numpy(), want)


@pytest.mark.gpu
def test_chopped_cupy_stochastic_rounding_draws_from_the_device_counter_as_chop():
    """No rng: GPU arrays draw from the device's counter (seed_device), as chop on CuPy arrays."""
    cupy = _cupy_with_device()
    from pychop_compat.random.counter import seed_device

    o = {"format": "h", "round": 5}
    x = cupy.asarray(np.random.default_rng(7).standard_normal((64, 5)))
    seed_device(3)
    ch = Chop(o)
    a = ch(x)
    want = ch(ch(a * 3) + 1)
    seed_device(3)
    X = chopped(x, o)
    got = X * 3 + 1
    assert isinstance(got.values, cupy.ndarray)
    np.testing.assert_array_equal(got.to_numpy(), cupy.asnumpy(want))
