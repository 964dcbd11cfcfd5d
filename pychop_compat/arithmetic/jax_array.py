"""Chopped JAX arrays: every operation rounded, the numbers of chopped NumPy arrays.

``chopped(jax_array, options)`` returns a :class:`ChoppedJax`, a pytree (the
arithmetic is static data), so functions on it can be ``jax.jit``-ed.
Elementwise operations round on the device (:func:`pychop_compat.engines.dispatch.round_jax`);
matrix products call :func:`pychop_compat.linalg.matmul`; sums, products,
stacks of matrix products and :func:`einsum` run the chopped NumPy array's
code on a host copy (a ``jax.pure_callback`` under ``jit``, which must be a
pure function: deterministic rounding, or a counter offset).  ``jnp``
functions raise a ``TypeError`` on it (no ``__jax_array__``), so nothing
computes in full precision silently.  Random numbers: eagerly, the
arithmetic's sources, as a chopped NumPy array draws them; under ``jit``, a
:func:`random_draws` block (``offset=``: the arithmetic's counter, equal bit
for bit to NumPy; ``key=``: JAX's numbers).  The table of what runs where is
in the documentation page "Chopped arithmetic" (torch, CuPy and JAX).
"""

from __future__ import annotations

import functools
import threading
from typing import TYPE_CHECKING, Any, Callable, Optional, Tuple, Union, cast

import numpy as np
from numpy.typing import ArrayLike

from .. import linalg
from ..engines import dispatch, jax_engine
from ..random.counter import CounterRng
from .array import OPERATORS, ChoppedOperators, ChoppedScalar, arithmetic_of, wrap
from .context import Arithmetic, refuse_counter_in_linalg
from .libraries import round_array

if TYPE_CHECKING:
    import jax

__all__ = ["ChoppedJax", "chopped_jax", "random_draws", "RandomDraws", "einsum"]


@functools.cache
def _register() -> None:
    import jax

    jax.tree_util.register_pytree_node(ChoppedJax, lambda c: ((c._data,), _Static(c._arith)),
                                       lambda static, children: ChoppedJax(children[0], static.arith))


class _Static:
    """A chopped JAX array's static pytree data: its arithmetic, equal by value.

    ``jax.jit`` reuses a trace when the static data compare equal: an :class:`Arithmetic` compares by
    identity, so every ``chopped(a)`` or ``Arithmetic('h')`` retraced.  Equal options and settings round
    alike; an ``rng`` (a counter or generator with its own state, drawn from when a value is rounded at
    trace time) must be the same object.
    """

    __slots__ = ("arith",)

    def __init__(self, arith: Arithmetic) -> None:
        self.arith = arith

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, _Static):
            return NotImplemented
        a, b = self.arith, other.arith
        settings = ("strict", "mismatch", "method", "block_size", "hardware")
        return a is b or (a.given == b.given and a.rng is b.rng
                          and all(getattr(a, name) == getattr(b, name) for name in settings))

    def __hash__(self) -> int:
        a = self.arith  # (equal given options resolve to equal specs)
        return hash((a.spec, a.strict, a.mismatch, a.method, a.block_size))


def _is_traced(x) -> bool:
    import jax

    return isinstance(x, jax.core.Tracer)


# -- random numbers inside jit ---------------------------------------------------------------

_blocks = threading.local()


class RandomDraws:
    """Where the rounding calls of chopped JAX arrays take their random numbers inside a
    ``with`` block (create with :func:`random_draws`).

    Attributes
    ----------
    key : jax.random key or None
        The key of ``random_draws(key=...)``.
    offset : int or jax.Array or None
        The next free counter of ``random_draws(offset=...)``: after the block,
        the offset to start the next block with.
    calls : int
        Rounding calls made in the block so far.
    """

    def __init__(self, key: Any = None, offset: Any = None) -> None:
        if (key is None) == (offset is None):
            raise ValueError("random_draws needs exactly one of key= (jax.random) or offset= (the counter).")
        self.key = key
        self.offset = offset
        self.calls = 0

    def __enter__(self) -> "RandomDraws":
        vars(_blocks).setdefault("stack", []).append(self)
        return self

    def __exit__(self, *exc: Any) -> None:
        _blocks.stack.pop()

    def round(self, data: Any, arith: Arithmetic) -> Any:
        """``data`` rounded by ``arith`` with this block's numbers (one rounding call)."""
        spec = arith.spec_for(data.dtype)
        if self.key is not None:
            import jax

            key = jax.random.fold_in(self.key, self.calls)
            self.calls += 1
            return dispatch.round_jax(data, spec, key=key)
        if arith.counter is None:
            raise ValueError("random_draws(offset=...) takes the numbers of the arithmetic's counter: make "
                             "the arithmetic with rng=<seed> (or use random_draws(key=...)).")
        out = dispatch.round_jax(data, spec, seed=arith.counter.seed, offset=self.offset)
        self.offset = self.offset + int(np.prod(data.shape, dtype=np.int64))
        self.calls += 1
        return out


def random_draws(*, key: Any = None, offset: Any = None) -> RandomDraws:
    """A ``with`` block in which chopped JAX arrays draw from ``key`` or from their counter at ``offset``.

    Parameters
    ----------
    key : jax.random key, optional
        Rounding call ``c`` of the block uses ``jax.random.fold_in(key, c)``.
    offset : int or jax.Array, optional
        The counter of the first rounding call; each call advances it by its
        number of elements.  The arithmetic needs ``rng=<seed>``.

    Returns
    -------
    RandomDraws

    Examples
    --------
    >>> import jax, jax.numpy as jnp                                   # doctest: +SKIP
    >>> arith = Arithmetic({'format': 'h', 'round': 5}, rng=7)           # doctest: +SKIP
    >>> @jax.jit
    ... def step(x, y, offset):
    ...     with random_draws(offset=offset) as draws:
    ...         z = x * y + 1.0
    ...     return z, draws.offset                                       # doctest: +SKIP
    """
    return RandomDraws(key=key, offset=offset)


def _active() -> Optional[RandomDraws]:
    stack = getattr(_blocks, "stack", None)
    return stack[-1] if stack else None


def _round_jax(data: Any, arith: Arithmetic) -> Any:
    """One rounding call on a JAX array, with the numbers the module notes describe."""
    if not arith.draws:
        return dispatch.round_jax(data, arith.spec_for(data.dtype))
    block = _active()
    if block is not None:
        return block.round(data, arith)
    if _is_traced(data):
        raise TypeError("stochastic rounding of chopped JAX arrays inside jax.jit needs explicit numbers: "
                        "`with pychop_compat.arithmetic.jax_array.random_draws(key=...)` or "
                        "`(offset=...)` (with an arithmetic made with rng=<seed>).")
    return round_array(data, arith.spec_for(data.dtype), arith.sources)


# -- host computations: the chopped NumPy array's code ------------------------------------------


def _plain(value):
    return value._data if isinstance(value, ChoppedJax) else value


def _on_host(name: str, operands: Tuple, arith: Arithmetic, *args: Any, **kwargs: Any) -> "ChoppedJax":
    """``np.<name>(*args, *operands, **kwargs)`` (a NumPy function that chopped NumPy arrays implement)
    on host copies of the operands (chopped ones as chopped NumPy arrays of ``arith``), back on the
    device; inside ``jit`` only the shape and dtype of ``jnp.<name>``'s result are used (``jax.eval_shape``).
    """
    import jax
    import jax.numpy as jnp

    chopped_at = [isinstance(o, ChoppedJax) for o in operands]
    datas = [_plain(o) for o in operands]

    def host_with(arithmetic: Arithmetic, *arrays):
        chopped = [wrap(np.array(a), arithmetic) if c else np.asarray(a) for a, c in zip(arrays, chopped_at)]
        return np.asarray(getattr(np, name)(*args, *chopped, **kwargs))

    def like(*arrays):
        return getattr(jnp, name)(*args, *arrays, **kwargs)

    block = _active()
    if arith.draws and block is not None:
        return _on_host_counted(name, host_with, like, datas, arith, block)
    if any(_is_traced(d) for d in datas if d is not None):
        if arith.draws:
            raise TypeError(f"{name} of chopped JAX arrays with random rounding inside jax.jit needs "
                            "`with random_draws(offset=...)` (an arithmetic made with rng=<seed>).")
        result = jax.eval_shape(like, *datas)
        out = jax.pure_callback(lambda *a: host_with(arith, *a).astype(result.dtype), result, *datas)
        return ChoppedJax(out, arith)
    device = next(d for d in datas if isinstance(d, jax.Array))
    return ChoppedJax(jax.device_put(host_with(arith, *datas), next(iter(device.devices()))), arith)


def _on_host_counted(name, host_with, like, datas, arith: Arithmetic, block: RandomDraws) -> "ChoppedJax":
    """The host code with the counter of a ``random_draws(offset=...)`` block: a pure function of
    the operands and the offset (a counter of the arithmetic's seed starting there), so it can be a
    ``jax.pure_callback``; the block's offset moves on by the counters the host code took."""
    import jax
    import jax.numpy as jnp

    if block.key is not None or arith.counter is None:
        raise NotImplementedError(f"{name} of chopped JAX arrays with random rounding runs the host code, "
                                  "which draws from a counter: use random_draws(offset=...) with an "
                                  "arithmetic made with rng=<seed>, not random_draws(key=...).")
    seed = arith.counter.seed

    def host_counted(offset, *arrays):
        counter = CounterRng(seed)
        counter.offset = int(offset)
        out = host_with(arith.with_settings(rng=counter), *arrays)
        return out, np.uint64(counter.offset)

    offset = block.offset
    if any(_is_traced(d) for d in (offset, *datas) if d is not None):
        result = jax.eval_shape(like, *datas)
        shapes = (result, jax.ShapeDtypeStruct((), jnp.uint64))
        out, after = jax.pure_callback(
            lambda off, *a: (lambda r: (r[0].astype(result.dtype), r[1]))(host_counted(off, *a)),
            shapes, jnp.asarray(offset, jnp.uint64), *datas)
    else:
        out, after = host_counted(offset, *datas)
        device = next(d for d in datas if isinstance(d, jax.Array))
        out = jax.device_put(out, next(iter(device.devices())))
        after = int(after) if isinstance(offset, int) else jnp.asarray(after, jnp.uint64)
    block.offset = after
    block.calls += 1
    return ChoppedJax(out, arith)


def _product(name: str, a, b) -> "ChoppedJax":
    """``a @ b``: linalg.matmul on the JAX arrays for 1-D and 2-D operands (eager), else the host code."""
    import jax.numpy as jnp

    arith = cast(Arithmetic, arithmetic_of((a, b)))  # not None: ChoppedJax's methods pass themselves
    refuse_counter_in_linalg(arith, "a matrix product")
    A, B = _plain(a), _plain(b)
    dims = (jnp.ndim(A), jnp.ndim(B))
    if name == "matmul" and 0 in dims:
        raise ValueError("matmul: input operand does not have enough dimensions")
    traced = _is_traced(A) or _is_traced(B)
    if max(dims) <= 2 and not traced:
        if arith.draws and _active() is not None:
            raise NotImplementedError(f"{name} of chopped JAX arrays with random rounding draws as chop "
                                      "does, not from a random_draws block; call it outside the block.")
        if 0 in dims:  # np.dot with a scalar: elementwise
            return ChoppedJax(_round_jax(A * B, arith), arith)
    if max(dims) <= 2 and 0 not in dims and not (traced and arith.draws):
        import jax

        # Traced: linalg.matmul itself when it runs on traced JAX arrays (the device linalg of
        # issue 16); today it reads them on the host and refuses tracers, so the host callback.
        try:
            return ChoppedJax(jnp.asarray(linalg.matmul(A, B, arith.given, **arith.product_settings)), arith)
        except (jax.errors.TracerArrayConversionError, jax.errors.ConcretizationTypeError):
            pass
    return _on_host(name, (a, b), arith)


def _entering(o: Any, arith: Arithmetic, data: Any) -> Any:
    """A plain operand of a strict arithmetic as it enters an operation on ``data``: rounded in its own
    dtype, as :meth:`Arithmetic.enter` rounds NumPy's (cast to ``data``'s dtype first, it was rounded twice).

    Raises
    ------
    TypeError
        Without ``jax_enable_x64``: integer and bool operands (chop rounds them as float64), and Python
        numbers with random rounding inside a ``random_draws`` block or ``jit`` (rounded from their
        double value).
    """
    scalar = isinstance(o, (float, int)) and not isinstance(o, bool)
    if scalar and not arith.draws:
        return float(arith.chop(float(o)))  # (rounded from its double value, as NumPy's strict does)
    if scalar and _active() is None and not _is_traced(data):
        return float(arith.enter(o))  # NumPy's call, drawing from the same sources
    import jax.numpy as jnp

    if not scalar:
        work, _ = jax_engine.working_array(jnp.asarray(o))  # (float16 as float32, integers as float64: NumPy's)
        return _round_jax(work, arith)
    if not jax_engine.x64_enabled():
        raise TypeError("a strict chopped JAX array rounds a Python number from its double value, which JAX "
                        "has only with jax.config.update('jax_enable_x64', True); or pass a float32 array.")
    # NumPy keeps a Python number "weak": its rounded value enters in data's dtype
    return _round_jax(jnp.asarray(float(o), dtype=jnp.float64), arith).astype(data.dtype)


class ChoppedJax(ChoppedOperators):
    """A JAX array in a format; every operation rounds (create with :func:`~pychop_compat.arithmetic.chopped`)."""

    __slots__ = ("_data", "_arith")
    # NumPy's operators and ufuncs leave a chopped JAX array to its own reflected operators (which
    # round) instead of converting it (np.ones(2) + c is c.__radd__).
    __array_ufunc__ = None

    def __init__(self, data: jax.Array, arith: Arithmetic) -> None:
        self._data = data
        self._arith = arith

    @property
    def values(self) -> jax.Array:
        """The plain JAX array (leaves the simulation)."""
        return self._data

    @property
    def arithmetic(self) -> Arithmetic:
        """The simulated machine: format, rounding, operand rules, reduction order."""
        return self._arith

    shape = property(lambda self: self._data.shape)
    dtype = property(lambda self: self._data.dtype)
    ndim = property(lambda self: self._data.ndim)
    T = property(lambda self: ChoppedJax(self._data.T, self._arith))

    def _holding(self, data: jax.Array) -> "ChoppedJax":
        return ChoppedJax(data, self._arith)

    def _binary(self, ufunc: np.ufunc, other: Any, reflected: bool = False) -> "ChoppedJax":
        op = OPERATORS[ufunc]  # (JAX's operators: the jax.numpy functions of these ufuncs)
        arith = self._arith
        if isinstance(other, (ChoppedJax, ChoppedScalar)):
            arith = arith.combine(other._arith) if not reflected else other._arith.combine(arith)
            o = other._data if isinstance(other, ChoppedJax) else other.value  # (a Python float: weak, as NumPy's)
        else:
            o = _entering(other, arith, self._data) if arith.strict else other
        return ChoppedJax(_round_jax(op(o, self._data) if reflected else op(self._data, o), arith), arith)

    def _compare(self, ufunc: np.ufunc, other: Any) -> Any:
        return OPERATORS[ufunc](self._data, getattr(other, "_data", other))

    def __rmatmul__(self, o):
        return _product("matmul", o, self)

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        raise TypeError("a chopped JAX array does not convert to a NumPy array (NumPy's functions would compute "
                        "without its rounding); use its methods, or .values to leave the simulation.")

    def __getitem__(self, key):
        return self._holding(self._data[key])

    def reshape(self, *shape: Any) -> "ChoppedJax":
        """The same values in another shape."""
        return self._holding(self._data.reshape(*shape))

    def apply(self, func: Callable[..., jax.Array], *args: Any, **kwargs: Any) -> "ChoppedJax":
        """``fl(func(x, *args))`` for an elementwise ``func`` (e.g. ``jnp.exp``), rounded once."""
        plain = tuple(getattr(a, "_data", a) for a in args)
        return ChoppedJax(_round_jax(func(self._data, *plain, **kwargs), self._arith), self._arith)

    def sqrt(self) -> "ChoppedJax":
        """``fl(sqrt(x))``."""
        import jax.numpy as jnp

        return self.apply(jnp.sqrt)

    # -- products and reductions: linalg and the chopped NumPy array's code ------------------

    def matmul(self, other: Union["ChoppedJax", ArrayLike]) -> "ChoppedJax":
        """``self @ other`` (see the module notes)."""
        return _product("matmul", self, other)

    __matmul__ = matmul

    def dot(self, other: Union["ChoppedJax", ArrayLike]) -> "ChoppedJax":
        """:func:`numpy.dot` of chopped arrays: linalg's kernels (see the module notes)."""
        return _product("dot", self, other)

    def sum(self, axis: Any = None, keepdims: bool = False) -> "ChoppedJax":
        """Sum with every addition rounded, in the arithmetic's order (:mod:`.reductions`)."""
        return _on_host("sum", (self,), self._arith, axis=axis, keepdims=keepdims)

    def prod(self, axis: Any = None, keepdims: bool = False) -> "ChoppedJax":
        """Product with every multiplication rounded, in the arithmetic's order."""
        return _on_host("prod", (self,), self._arith, axis=axis, keepdims=keepdims)

    def cumsum(self, axis: Optional[int] = None) -> "ChoppedJax":
        """Cumulative sum, recursive, every addition rounded."""
        return _on_host("cumsum", (self,), self._arith, axis=axis)

    def cumprod(self, axis: Optional[int] = None) -> "ChoppedJax":
        """Cumulative product, recursive, every multiplication rounded."""
        return _on_host("cumprod", (self,), self._arith, axis=axis)

    def mean(self, axis: Any = None, keepdims: bool = False) -> "ChoppedJax":
        """``fl(sum / n)`` (as chopped NumPy arrays)."""
        return _on_host("mean", (self,), self._arith, axis=axis, keepdims=keepdims)

    def var(self, axis: Any = None, ddof: int = 0, keepdims: bool = False) -> "ChoppedJax":
        """Variance in the order of chopped NumPy arrays."""
        return _on_host("var", (self,), self._arith, axis=axis, ddof=ddof, keepdims=keepdims)

    def std(self, axis: Any = None, ddof: int = 0, keepdims: bool = False) -> "ChoppedJax":
        """``fl(sqrt(var))``."""
        return _on_host("std", (self,), self._arith, axis=axis, ddof=ddof, keepdims=keepdims)


def einsum(subscripts: str, *operands: Union[ChoppedJax, ArrayLike]) -> ChoppedJax:
    """:func:`numpy.einsum` on chopped JAX arrays, by the chopped NumPy array's code (linalg's
    kernels for each contraction; on the host, see the module notes)."""
    arith = arithmetic_of(operands)
    if arith is None:
        raise TypeError("einsum needs a chopped JAX array")
    if len(operands) == 2:
        refuse_counter_in_linalg(arith, "einsum")
    return _on_host("einsum", operands, arith, subscripts)


def chopped_jax(x: Union[jax.Array, ArrayLike], arith: Arithmetic) -> ChoppedJax:
    """``x`` rounded to ``arith``'s format (one rounding call) as a :class:`ChoppedJax`.

    Raises
    ------
    TypeError
        Integer and bool data without ``jax_enable_x64`` (chop rounds them as float64), and non-real data.
    """
    _register()
    import jax.numpy as jnp

    data = jnp.asarray(x)
    if data.dtype not in (jnp.float32, jnp.float64):  # integers, float16, bfloat16
        jax_engine.working_array(data)  # (refuses integers without x64, as chop does: float32 would round them)
        data = data.astype(jnp.result_type(float))
    return ChoppedJax(_round_jax(data, arith), arith)
