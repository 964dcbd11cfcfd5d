"""The handful of array operations the device kernels need, for NumPy, torch, CuPy and JAX.

:mod:`pychop_compat.linalg.device` writes each chopped kernel once against an
:class:`ArrayNamespace`; this module says how each library spells the few
operations that differ between them (creating arrays on a given device,
casting with a copy, writing into a slice, swapping rows, reading one scalar
back).  Everything else the kernels use (``+``, ``-``, ``*``, ``/``, slicing,
indexing with an integer array, ``.T``, ``[:, None]``) is spelled the same in
the four libraries.  Operations keep the array on its device: nothing here
copies array data to the host except :meth:`ArrayNamespace.scalar`, which reads
one number (a pivot, a norm) that steers the Python loop.

JAX arrays are immutable: :meth:`ArrayNamespace.put` returns the updated array
(``x.at[index].set(value)``) and the kernels always use its return value;
for the mutable libraries it writes in place and returns the same array.
"""

from __future__ import annotations

import sys
from typing import Any

import numpy as np

__all__ = ["ArrayNamespace", "namespace_for", "LIBRARIES"]

#: Array libraries the device kernels run on (the keys of :func:`namespace_for`).
LIBRARIES = ("numpy", "torch", "cupy", "jax")


class ArrayNamespace:
    """Operations on the arrays of one library, on the device of a reference array.

    Parameters
    ----------
    library : {'numpy', 'torch', 'cupy', 'jax'}
        The array library.
    like : array
        An array of that library; new arrays are created on its device.
    """

    def __init__(self, library: str, like: Any) -> None:
        if library not in LIBRARIES:
            raise ValueError(f"library must be one of {LIBRARIES}, got {library!r}")
        self.library = library
        if library == "torch":
            self.xp = sys.modules["torch"]
            self.device = like.device
        elif library == "cupy":
            self.xp = sys.modules["cupy"]
            self.device = like.device
        elif library == "jax":
            import jax.numpy as jnp

            self.xp = jnp
            self.device = next(iter(like.devices()))
        else:
            self.xp = np
            self.device = None

    @property
    def static_shapes(self) -> bool:
        """Whether every new array shape costs a compilation (JAX: each eager operation is
        compiled once per shape), so loops should keep their shapes fixed."""
        return self.library == "jax"

    def where(self, mask: Any, a: Any, b: Any) -> Any:
        """``a`` where ``mask``, else ``b`` (broadcasting)."""
        return self.xp.where(mask, a, b)

    # -- dtypes -------------------------------------------------------------
    def dtype(self, name: str) -> Any:
        """The library's dtype ``'float32'``, ``'float64'`` or ``'int64'``."""
        if self.library == "jax" and name.endswith("64"):
            import jax

            if not jax.config.read("jax_enable_x64"):
                raise ValueError(f"linalg on JAX arrays needs {name}: enable "
                                 "jax.config.update('jax_enable_x64', True) first.")
        return getattr(self.xp, name)

    def is_single(self, x: Any) -> bool:
        """Whether ``x`` holds float32 numbers."""
        return self.library_of(x) == self.library and x.dtype == self.xp.float32

    def library_of(self, x: Any) -> str:
        from ..engines import array_library

        return array_library(x)

    # -- moving and casting -------------------------------------------------
    def asarray(self, x: Any) -> Any:
        """``x`` (an array of this library, or NumPy data) as an array of this library on
        the device, without a copy when it already is one (torch: detached from autograd)."""
        if self.library_of(x) == self.library and not isinstance(x, (list, tuple, float, int)):
            if self.library == "torch":
                return x.detach() if x.device == self.device else x.detach().to(self.device)
            if self.library == "jax" and next(iter(x.devices())) != self.device:
                import jax

                return jax.device_put(x, self.device)
            if self.library == "cupy" and x.device != self.device:
                with self.device:
                    return self.xp.asarray(x)
            return x
        host = np.asarray(x)
        if self.library == "torch":
            return self.xp.from_numpy(np.array(host, order="C")).to(self.device)
        if self.library == "cupy":
            with self.device:
                return self.xp.asarray(host)
        if self.library == "jax":
            import jax

            if host.dtype.itemsize == 8:
                self.dtype("float64")  # refuses 64-bit data when JAX's x64 is off
            return jax.device_put(host, self.device)
        return host

    def float_copy(self, x: Any, single: bool) -> Any:
        """A copy of ``x`` in float32 (``single``) or float64, on the device."""
        x = self.asarray(x)
        dtype = self.dtype("float32" if single else "float64")
        if self.library == "torch":
            return x.to(dtype=dtype, copy=True)
        if self.library == "jax":
            return self.xp.array(x, dtype=dtype, copy=True)
        return x.astype(dtype, copy=True)

    def to_numpy(self, x: Any) -> np.ndarray:
        """A host copy of ``x`` (used only outside the kernels' loops)."""
        from ..engines import to_numpy

        return np.asarray(to_numpy(x))

    def scalar(self, x: Any) -> float:
        """The value of a one-element array as a Python float (one number read back)."""
        return float(x.item()) if self.library != "jax" else float(x)

    def index(self, x: Any) -> int:
        """The value of a one-element integer array as a Python int."""
        return int(x.item()) if self.library != "jax" else int(x)

    # -- creation on the device ---------------------------------------------
    def zeros(self, shape: tuple, dtype: Any) -> Any:
        """Zeros of ``shape`` and ``dtype`` on the device."""
        if self.library == "torch":
            return self.xp.zeros(shape, dtype=dtype, device=self.device)
        if self.library == "cupy":
            with self.device:
                return self.xp.zeros(shape, dtype=dtype)
        if self.library == "jax":
            return self.xp.zeros(shape, dtype=dtype, device=self.device)
        return np.zeros(shape, dtype=dtype)

    def arange(self, n: int) -> Any:
        """``0, 1, ..., n-1`` as int64 (int32 for JAX without x64) on the device."""
        if self.library == "jax":
            import jax

            dtype = self.xp.int64 if jax.config.read("jax_enable_x64") else self.xp.int32
            return self.xp.arange(n, dtype=dtype, device=self.device)
        if self.library == "torch":
            return self.xp.arange(n, dtype=self.xp.int64, device=self.device)
        if self.library == "cupy":
            with self.device:
                return self.xp.arange(n, dtype=self.xp.int64)
        return np.arange(n)

    # -- whole-array operations ---------------------------------------------
    def concat(self, arrays: list) -> Any:
        """Arrays joined along the first axis."""
        if self.library == "torch":
            return self.xp.cat(arrays)
        return self.xp.concatenate(arrays)

    def abs(self, x: Any) -> Any:
        return self.xp.abs(x)

    def sqrt(self, x: Any) -> Any:
        return self.xp.sqrt(x)

    def tril(self, x: Any, k: int = 0) -> Any:
        return self.xp.tril(x, k) if self.library != "torch" else self.xp.tril(x, diagonal=k)

    def triu(self, x: Any, k: int = 0) -> Any:
        return self.xp.triu(x, k) if self.library != "torch" else self.xp.triu(x, diagonal=k)

    def argmax(self, x: Any, axis: Any = None) -> Any:
        """Index of the first largest entry (along ``axis``), as every library documents."""
        if self.library == "torch":
            return self.xp.argmax(x) if axis is None else self.xp.argmax(x, dim=axis)
        return self.xp.argmax(x, axis=axis)

    def max_abs(self, x: Any) -> float:
        """``max |x|`` as a float (0 for an empty array; NaN if an entry is NaN)."""
        if any(d == 0 for d in x.shape):
            return 0.0
        return self.scalar(self.xp.max(self.xp.abs(x)))

    def divide(self, a: Any, b: Any) -> Any:
        """``a / b``, correctly rounded elementwise (IEEE division).

        XLA on the CPU turns a division by a broadcast scalar into something
        else (measured: a few percent of the float32 and float64 quotients differ
        in the last bit from IEEE division); dividing arrays of equal shapes is
        IEEE division, so for JAX both operands are broadcast first.
        """
        if self.library != "jax":
            return a / b
        xp = self.xp
        b = xp.asarray(b, dtype=xp.result_type(a, b))
        shape = xp.broadcast_shapes(xp.shape(a), xp.shape(b))
        return xp.broadcast_to(a, shape) / xp.broadcast_to(b, shape)

    def all_finite(self, x: Any) -> bool:
        """Whether every entry of ``x`` is finite."""
        return bool(self.xp.all(self.xp.isfinite(x)))

    def row_sums_abs(self, x: Any) -> Any:
        """``sum(|x|, axis=1)``."""
        if self.library == "torch":
            return self.xp.sum(self.xp.abs(x), dim=1)
        return self.xp.sum(self.xp.abs(x), axis=1)

    # -- updates ------------------------------------------------------------
    def put(self, x: Any, index: Any, value: Any) -> Any:
        """``x[index] = value``; returns the updated array (a new one for JAX)."""
        if self.library == "jax":
            return x.at[index].set(value)
        x[index] = value
        return x

    def swap_rows(self, x: Any, i: int, j: int) -> Any:
        """Rows (or entries) ``i`` and ``j`` of ``x`` exchanged; returns the updated array."""
        if self.library == "jax":
            return x.at[np.array([i, j])].set(x[np.array([j, i])])
        rows = [j, i]
        if self.library == "torch":
            x[[i, j]] = x[rows].clone()
        else:
            x[[i, j]] = x[rows].copy()
        return x


def namespace_for(library: str, like: Any) -> ArrayNamespace:
    """The :class:`ArrayNamespace` of ``library`` on the device of ``like``."""
    return ArrayNamespace(library, like)
