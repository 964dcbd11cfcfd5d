"""Chopped JAX arrays: elementwise arithmetic rounded by ``pychop_compat.engines.jax_engine``.

``chopped(jax_array, options)`` returns a :class:`ChoppedJax`, a pytree
(the arithmetic is static data), so functions on it can be ``jax.jit``-ed.
``+ - * / **``, unary minus and ``abs`` round like NumPy chopped arrays;
:meth:`ChoppedJax.apply` rounds the result of any elementwise ``jax.numpy``
function once (``x.apply(jnp.exp)``); :meth:`ChoppedJax.sum` sums
recursively with every addition rounded.  JAX has no dispatch protocol for
``jnp`` functions, and a chopped JAX array deliberately defines no
``__jax_array__``: ``jnp.sum(x)`` or ``x @ y`` fail with a type error instead
of computing in full precision; matrix products and the other summation
orders are not implemented for JAX.  Deterministic rounding only (modes 1
to 4, no bit flips).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, Optional, Union

from numpy.typing import ArrayLike

from ..engines import jax_engine
from .context import Arithmetic

if TYPE_CHECKING:
    import jax

__all__ = ["ChoppedJax", "chopped_jax"]

_registered = False


def _register() -> None:
    global _registered
    if not _registered:
        import jax

        jax.tree_util.register_pytree_node(
            ChoppedJax, lambda c: ((c._data,), c._arith), lambda arith, children: ChoppedJax(children[0], arith))
        _registered = True


class ChoppedJax:
    """A JAX array in a format; elementwise operations round (create with :func:`~pychop_compat.arithmetic.chopped`)."""

    __slots__ = ("_data", "_arith")

    def __init__(self, data: jax.Array, arith: Arithmetic) -> None:
        self._data = data
        self._arith = arith

    @property
    def values(self) -> jax.Array:
        """The plain JAX array (leaves the simulation)."""
        return self._data

    @property
    def arithmetic(self) -> Arithmetic:
        return self._arith

    shape = property(lambda self: self._data.shape)
    dtype = property(lambda self: self._data.dtype)
    ndim = property(lambda self: self._data.ndim)

    def __repr__(self) -> str:
        return f"chopped({self._data!r}, {self._arith.describe()})"

    def _round(self, data, arith: Arithmetic) -> "ChoppedJax":
        return ChoppedJax(jax_engine.chop_jax(data, arith.spec_for(data.dtype)), arith)

    def _binary(self, op: Callable, other, reflected: bool = False):
        arith = self._arith
        if isinstance(other, ChoppedJax):
            arith = arith.combine(other._arith) if not reflected else other._arith.combine(arith)
            o = other._data
        else:
            o = other
            if arith.strict:
                import jax.numpy as jnp

                o = jax_engine.chop_jax(jnp.asarray(o, dtype=self._data.dtype), arith.spec_for(self._data.dtype))
        return self._round(op(o, self._data) if reflected else op(self._data, o), arith)

    def __add__(self, o):
        return self._binary(lambda a, b: a + b, o)

    def __radd__(self, o):
        return self._binary(lambda a, b: a + b, o, True)

    def __sub__(self, o):
        return self._binary(lambda a, b: a - b, o)

    def __rsub__(self, o):
        return self._binary(lambda a, b: a - b, o, True)

    def __mul__(self, o):
        return self._binary(lambda a, b: a * b, o)

    def __rmul__(self, o):
        return self._binary(lambda a, b: a * b, o, True)

    def __truediv__(self, o):
        return self._binary(lambda a, b: a / b, o)

    def __rtruediv__(self, o):
        return self._binary(lambda a, b: a / b, o, True)

    def __pow__(self, o):
        return self._binary(lambda a, b: a ** b, o)

    def __neg__(self):
        return ChoppedJax(-self._data, self._arith)

    def __abs__(self):
        return ChoppedJax(abs(self._data), self._arith)

    def __getitem__(self, key):
        return ChoppedJax(self._data[key], self._arith)

    def __lt__(self, o):
        return self._data < getattr(o, "_data", o)

    def __le__(self, o):
        return self._data <= getattr(o, "_data", o)

    def __gt__(self, o):
        return self._data > getattr(o, "_data", o)

    def __ge__(self, o):
        return self._data >= getattr(o, "_data", o)

    def apply(self, func: Callable[..., jax.Array], *args: Any, **kwargs: Any) -> "ChoppedJax":
        """``fl(func(x, *args))`` for an elementwise ``func`` (e.g. ``jnp.exp``), rounded once."""
        plain = tuple(getattr(a, "_data", a) for a in args)
        return self._round(func(self._data, *plain, **kwargs), self._arith)

    def sum(self, axis: Optional[int] = None) -> "ChoppedJax":
        """Recursive sum with every addition rounded (the order of
        :func:`pychop_compat.arithmetic.reductions.reduce`, ``method='recursive'``):
        ``s = x_1``, ``s = fl(s + x_k)``, by ``lax.fori_loop`` (one rounding per step under
        ``jit``).  ``axis=None``: all elements in row-major order.  Other methods: not
        implemented for JAX (``NotImplementedError``)."""
        import jax
        import jax.numpy as jnp

        if self._arith.method not in ("recursive", "fma"):
            raise NotImplementedError(f"sum with method={self._arith.method!r} is not implemented for JAX")
        terms = self._data.ravel() if axis is None else jnp.moveaxis(self._data, axis, 0)
        n = terms.shape[0]
        if n == 0:
            return ChoppedJax(jnp.zeros(terms.shape[1:], terms.dtype), self._arith)
        spec = self._arith.spec_for(terms.dtype)

        def step(k, s):
            return jax_engine.chop_jax(s + terms[k], spec)

        return ChoppedJax(jax.lax.fori_loop(1, n, step, terms[0]), self._arith)

    def sqrt(self) -> "ChoppedJax":
        import jax.numpy as jnp

        return self.apply(jnp.sqrt)


def chopped_jax(x: Union[jax.Array, ArrayLike], arith: Arithmetic) -> ChoppedJax:
    """``x`` rounded to ``arith``'s format as a :class:`ChoppedJax` (deterministic modes only)."""
    _register()
    if not jax_engine.supports(arith.spec):
        raise NotImplementedError("chopped JAX arrays implement rounding modes 1 to 4 without bit "
                                  f"flips; got {arith.describe()}.")
    import jax.numpy as jnp

    data = jnp.asarray(x)
    if data.dtype not in (jnp.float32, jnp.float64):  # integers, float16, bfloat16
        data = data.astype(jnp.result_type(float))
    return ChoppedJax(jax_engine.chop_jax(data, arith.spec_for(data.dtype)), arith)
