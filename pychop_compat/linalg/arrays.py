"""linalg's shim over the package's array namespace: which library computes a call, and the few
operations that the array API standard lacks or that linalg needs spelled one way.

Every algorithm of :mod:`pychop_compat.linalg` is written once against an :class:`Arrays`: the
library's namespace from :mod:`pychop_compat.kernels.xp` plus the device of the call's arrays,
which :func:`arrays_for` picks from the arguments (torch, CuPy and JAX arrays on their device,
anything else with NumPy, :data:`HOST`).  The shim adds moving data, writes that also work on
immutable JAX arrays, IEEE division on JAX, the rows of a triangular loop (:class:`Window`) and
the host route (:func:`on_host`).
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Any, Callable, TypeVar, cast

import numpy as np

from ..kernels.xp import Namespace, exact_float32, exact_float64, library_namespace

__all__ = ["Arrays", "HOST", "DEVICE_LIBRARIES", "arrays_for", "on_host", "host_computed", "ieee", "Window"]

_Function = TypeVar("_Function", bound=Callable[..., Any])

#: Array libraries whose arrays linalg computes on their own device.
DEVICE_LIBRARIES = ("torch", "cupy", "jax")


@dataclasses.dataclass(frozen=True)
class Arrays:
    """The arrays of one library on one device, as linalg's algorithms use them: ``namespace``
    (:func:`pychop_compat.kernels.xp.library_namespace`) and ``device`` (None for NumPy)."""

    namespace: Namespace
    device: Any = None

    @property
    def name(self) -> str:
        """The library: ``'numpy'``, ``'torch'``, ``'cupy'`` or ``'jax'``."""
        return self.namespace.name

    @property
    def xp(self) -> Any:
        """The library's array API namespace."""
        return self.namespace.xp

    @property
    def fixed_shapes(self) -> bool:
        """Whether each new array shape costs a compilation (JAX), so loops keep shapes fixed."""
        return self.name == "jax"

    # -- moving and casting ------------------------------------------------------------------
    def asarray(self, x: Any) -> Any:
        """``x`` as an array of this library on the device: an array of it as it is (torch:
        detached from autograd; moved if on another device), other data copied there."""
        if self.name == "numpy":
            return np.asarray(x)
        from ..engines import array_library

        if array_library(x) == self.name:
            if self.name == "torch":
                return x.detach() if x.device == self.device else x.detach().to(self.device)
            if self.name == "jax":
                if next(iter(x.devices())) != self.device:
                    import jax

                    return jax.device_put(x, self.device)
                return x
            if x.device != self.device:
                with self.device:
                    return self.xp.asarray(x)
            return x
        host = np.asarray(x)
        if self.name == "jax" and host.dtype.itemsize == 8:
            self._needs_wide()
        return self.from_host(host)

    def from_host(self, host: Any) -> Any:
        """A copy of NumPy data on the device (dtype kept)."""
        if self.name == "numpy":
            return host
        if self.name == "torch":
            import torch

            return torch.from_numpy(np.array(host, order="C")).to(self.device)
        if self.name == "jax":
            import jax

            return jax.device_put(np.asarray(host), self.device)
        with self.device:
            return self.xp.asarray(host)

    def _needs_wide(self) -> None:
        if not self.namespace.wide:
            raise ValueError("linalg on JAX arrays needs float64: enable "
                             "jax.config.update('jax_enable_x64', True) first.")

    def float_copy(self, x: Any, single: bool) -> Any:
        """A copy of ``x`` in float32 (``single``) or float64, on the device."""
        x = self.asarray(x)
        if not single and self.name == "jax":
            self._needs_wide()
        if self.name == "numpy":
            return x.astype(np.float32 if single else np.float64, copy=True)
        if self.name in ("cupy", "jax"):  # (their conversions flush float32 subnormals)
            if single and str(x.dtype) == "float64":
                return exact_float32(self.namespace, x)
            if not single and str(x.dtype) == "float32":
                return exact_float64(self.namespace, x)
        return self.xp.astype(x, self.xp.float32 if single else self.xp.float64, copy=True)

    def to_host(self, x: Any) -> np.ndarray:
        """A NumPy copy of ``x`` (outside the loops only; NumPy arrays as they are)."""
        from ..engines import to_numpy

        return np.asarray(to_numpy(x))

    # -- creation ----------------------------------------------------------------------------
    def zeros(self, shape: tuple, dtype: Any) -> Any:
        """Zeros of ``shape`` and ``dtype`` on the device."""
        if self.name == "numpy":
            return np.zeros(shape, dtype)
        if self.name == "cupy":
            with self.device:
                return self.xp.zeros(shape, dtype=dtype)
        return self.xp.zeros(shape, dtype=dtype, device=self.device)

    def arange(self, n: int) -> Any:
        """``0, 1, ..., n-1`` as int64 (int32 for JAX without 64-bit types) on the device."""
        if self.name == "numpy":
            return np.arange(n)
        dtype = self.xp.int64 if self.namespace.wide else self.xp.int32
        if self.name == "cupy":
            with self.device:
                return self.xp.arange(n, dtype=dtype)
        return self.xp.arange(n, dtype=dtype, device=self.device)

    # -- operations --------------------------------------------------------------------------
    def where(self, mask: Any, a: Any, b: Any) -> Any:
        """``a`` where ``mask``, else ``b`` (broadcasting)."""
        return self.xp.where(mask, a, b)

    def divide(self, a: Any, b: Any) -> Any:
        """``a / b``, correctly rounded elementwise (IEEE division).

        XLA on the CPU rewrites a division by a broadcast scalar (measured: a few percent of the
        quotients differ in the last bit); equal shapes divide exactly, so for JAX both operands
        are broadcast first."""
        if self.name != "jax":
            return a / b
        xp = self.xp
        b = xp.asarray(b, dtype=xp.result_type(a, b))
        shape = xp.broadcast_shapes(xp.shape(a), xp.shape(b))
        return xp.broadcast_to(a, shape) / xp.broadcast_to(b, shape)

    def max_abs(self, x: Any) -> float:
        """``max |x|`` as a float (0 for an empty array; NaN if an entry is NaN)."""
        if any(d == 0 for d in x.shape):
            return 0.0
        return float(self.xp.max(self.xp.abs(x)))

    def all_finite(self, x: Any) -> bool:
        """Whether every entry of ``x`` is finite."""
        return bool(self.xp.all(self.xp.isfinite(x)))

    def put(self, x: Any, index: Any, value: Any) -> Any:
        """``x[index] = value``; returns the updated array (a new one for JAX)."""
        if self.name == "jax":
            return x.at[index].set(value)
        x[index] = value
        return x

    def swap_rows(self, x: Any, i: int, j: int) -> Any:
        """Rows (or entries) ``i`` and ``j`` of ``x`` exchanged; returns the updated array."""
        if self.name == "jax":
            return x.at[np.array([i, j])].set(x[np.array([j, i])])
        x[[i, j]] = x[[j, i]]  # the right-hand side is a copy (advanced indexing)
        return x


#: NumPy on the host.
HOST = Arrays(library_namespace("numpy"))


class Window:
    """The rows a step of a triangular loop (LU, substitutions) reads and writes.

    By slices (``x[k:]``, shrinking with the loop), or, with ``whole`` (JAX and deterministic
    rounding), on whole arrays, keeping only the window's rows (``where``): the same bits, and
    JAX compiles each operation once, not once per step.  Stochastic rounding keeps the slices
    (its draws depend on the shapes)."""

    def __init__(self, arrays: Arrays, n: int, whole: bool) -> None:
        self.arrays, self.whole = arrays, whole
        self.rows: Any = arrays.arange(n) if whole else None

    def tail(self, k: int) -> slice:
        """The rows to compute on for rows ``k, k+1, ...``."""
        return slice(None) if self.whole else slice(k, None)

    def head(self, k: int) -> slice:
        """The rows to compute on for rows ``0 .. k-1``."""
        return slice(None) if self.whole else slice(0, k)

    def first_max(self, column: Any, k: int) -> int:
        """The index of the first largest entry of ``column[k:]`` (``column`` as :meth:`tail`
        gave it; a NaN counts as largest, as :func:`numpy.argmax` finds it first)."""
        xp = self.arrays.xp
        if self.whole:
            return int(xp.argmax(xp.where(self.rows >= k, column, -1.0)))
        return k + int(xp.argmax(column))

    def set_tail(self, x: Any, k: int, value: Any, ops: Any = None) -> Any:
        """``x[k:] = value`` (``value`` computed on :meth:`tail`'s rows)."""
        return self._set(x, slice(k, None), self.rows >= k if self.whole else None, value, ops)

    def set_head(self, x: Any, k: int, value: Any, ops: Any = None) -> Any:
        """``x[:k] = value`` (``value`` computed on :meth:`head`'s rows)."""
        return self._set(x, slice(0, k), self.rows < k if self.whole else None, value, ops)

    def set_row(self, x: Any, k: int, value: Any, ops: Any = None) -> Any:
        """``x[k:k+1] = value``."""
        return self._set(x, slice(k, k + 1), self.rows == k if self.whole else None, value, ops)

    def set_column_tail(self, a: Any, k: int, column: int, value: Any) -> Any:
        """``a[k:, column] = value`` for a matrix ``a``."""
        if not self.whole:
            return self.arrays.put(a, (slice(k, None), column), value)
        mask = (self.rows >= k)[:, None] & (self.rows == column)[None, :]
        return self.arrays.xp.where(mask, value[:, None], a)

    def set_block_tail(self, a: Any, k: int, value: Any) -> Any:
        """``a[k:, k:] = value`` for a matrix ``a``."""
        if not self.whole:
            return self.arrays.put(a, (slice(k, None), slice(k, None)), value)
        inside = self.rows >= k
        return self.arrays.xp.where(inside[:, None] & inside[None, :], value, a)

    def _set(self, x: Any, rows: slice, mask: Any, value: Any, ops: Any) -> Any:
        ops = ops or self.arrays
        if mask is None:
            return ops.put(x, rows, value)
        ndim = len(value[0].shape) if isinstance(value, tuple) else len(value.shape)  # (hi, lo): of hi
        return ops.where(mask.reshape((-1,) + (1,) * (ndim - 1)), value, x)


# -- which library computes a call ---------------------------------------------------------------


def _members(value: Any) -> list:
    """``value``, the fields of a result dataclass (an :class:`LUResult` passed to ``solve``), or
    the members of a tuple (factors ``(L, U, p)``)."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return [getattr(value, f.name) for f in dataclasses.fields(value)]
    if isinstance(value, tuple):
        return list(value)
    return [value]


def arrays_for(*values: Any) -> Arrays:
    """The :class:`Arrays` that compute a call with these arguments: those of the torch, CuPy or
    JAX arrays among them, on the first one's device (NumPy data joins them), else :data:`HOST`.

    Raises
    ------
    TypeError
        When the arguments hold arrays of two of these libraries.
    """
    from ..engines import array_library

    found = [(library, m) for v in values for m in _members(v)
             if (library := array_library(m)) in DEVICE_LIBRARIES]
    libraries = {library for library, _ in found}
    if len(libraries) > 1:
        raise TypeError(f"linalg: arguments mix {' and '.join(sorted(libraries))} arrays; "
                        "convert them to one library.")
    if not found:
        return HOST
    library, like = found[0]
    device = next(iter(like.devices())) if library == "jax" else like.device
    return Arrays(library_namespace(library), device)


def on_host(func: Callable, arrays: Arrays, *args: Any, **kwargs: Any) -> Any:
    """``func(*args, **kwargs)`` (a public linalg function) on NumPy copies of ``arrays``'s
    arrays, the arrays of its result (a bare array, the members of a tuple, the fields of a result
    dataclass) given back
    on ``arrays``'s device, dtype kept.  The computation is NumPy's, bit for bit."""
    from ..engines import array_library

    def host(v: Any) -> Any:
        if dataclasses.is_dataclass(v) and not isinstance(v, type):
            return dataclasses.replace(v, **{f.name: host(getattr(v, f.name)) for f in dataclasses.fields(v)})
        return arrays.to_host(v) if array_library(v) == arrays.name else v

    def back(out: Any) -> Any:
        if isinstance(out, (np.ndarray, np.generic)):
            return arrays.from_host(out)
        if isinstance(out, tuple):  # MATLAB's several outputs
            return tuple(back(v) for v in out)
        if dataclasses.is_dataclass(out) and not isinstance(out, type):
            return dataclasses.replace(out, **{f.name: back(getattr(out, f.name)) for f in dataclasses.fields(out)
                                               if isinstance(getattr(out, f.name), np.ndarray)
                                               or dataclasses.is_dataclass(getattr(out, f.name))})
        return out

    return back(func(*(host(a) for a in args), **{k: host(v) for k, v in kwargs.items()}))


def host_computed(func: _Function) -> _Function:
    """Let ``func`` (a NumPy-only public linalg function) take torch, CuPy and JAX arrays too: a
    call whose arguments hold them (:func:`arrays_for`) is computed by NumPy on host copies
    (:func:`on_host`) and the outputs given back on their library, bit for bit the NumPy results."""

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        arrays = arrays_for(*args, *kwargs.values())
        if arrays is not HOST:
            return on_host(func, arrays, *args, **kwargs)
        return func(*args, **kwargs)

    return cast(_Function, wrapper)


def ieee(func: Callable) -> Callable:
    """Run ``func`` with NumPy's floating-point warnings off: overflow to infinity and NaN are
    part of the simulated arithmetic, as in MATLAB."""

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        with np.errstate(all="ignore"):
            return func(*args, **kwargs)

    return wrapper

