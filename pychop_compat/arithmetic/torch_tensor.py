"""Chopped torch tensors: a ``torch.Tensor`` subclass whose elementwise operations round.

``chopped(tensor, options)`` returns a tensor of a subclass of
:data:`ChoppedTensor` made for that :class:`~.context.Arithmetic` (a class
attribute, so every tensor torch derives from it, views and autograd results
included, knows its format).  ``__torch_function__`` rounds the functions of
:data:`ROUNDED` once (chop's torch engine, on the tensor's device), keeps the
values of :data:`EXACT` and :data:`MOVES`, computes :data:`REDUCTIONS` by the
chopped NumPy array's code (on the host) and refuses every other function
with a float result (:class:`~pychop_compat.arithmetic.NotChoppedError`; an
in-place one before it runs).
Autograd passes gradients straight through each rounding.  See the
documentation page "Chopped arithmetic" (torch, CuPy and JAX); torch is
imported only when a tensor is chopped.
"""

from __future__ import annotations

import copy
import functools
import weakref
from typing import TYPE_CHECKING, Any, Callable, Dict, Optional

import numpy as np

from ..libraries import ChoppedValue
from .array import ChoppedScalar, wrap
from .context import Arithmetic, NotChoppedError

if TYPE_CHECKING:
    import torch

    class _ChoppedBase(torch.Tensor):
        """What the type checker knows of the classes :func:`_tensor_base` and :func:`_class_for` make."""

        arithmetic: Optional[Arithmetic]

__all__ = ["ChoppedTensor", "chopped_tensor", "ROUNDED", "EXACT", "MOVES", "REDUCTIONS"]

#: Elementwise functions computed by torch and rounded once.
ROUNDED = frozenset("""
add sub subtract mul multiply div divide true_divide pow float_power square sqrt rsqrt reciprocal
exp exp2 expm1 log log2 log10 log1p sin cos tan asin acos atan atan2 arctan2 sinh cosh tanh
asinh acosh atanh sigmoid erf erfc hypot fmod remainder lerp addcmul addcdiv outer ger xlogy
softplus gelu silu elu selu mish logit floor_divide cbrt
__add__ __radd__ __iadd__ __sub__ __rsub__ __isub__ __mul__ __rmul__ __imul__ __truediv__
__rtruediv__ __rdiv__ rsub __itruediv__ __pow__ __rpow__ __ipow__ __floordiv__ __rfloordiv__ __mod__ __rmod__
add_ sub_ mul_ div_ pow_ sqrt_ exp_ log_ tanh_ sigmoid_
""".split())
#: In-place arithmetic: computed out of place by the function named, rounded, copied back (recording
#: the autograd graph as torch's own in-place operations do).
INPLACE = {"add_": "add", "sub_": "sub", "mul_": "mul", "div_": "div", "pow_": "pow",
           "sqrt_": "sqrt", "exp_": "exp", "log_": "log", "tanh_": "tanh", "sigmoid_": "sigmoid",
           "__iadd__": "add", "__isub__": "sub", "__imul__": "mul", "__itruediv__": "div",
           "__ipow__": "pow", "clamp_": "clamp", "clamp_min_": "clamp_min", "clamp_max_": "clamp_max"}
#: Elementwise functions whose result is one of the operands (or its negation): nothing to round.
EXACT = frozenset("""
neg negative abs absolute relu maximum minimum fmax fmin clamp clip clamp_min clamp_max copysign
sign sgn floor ceil trunc round fix max min amax amin sort topk msort cummax cummin median
__neg__ __abs__ __pos__ positive relu_ neg_ abs_ clamp_ where
""".split())
#: Functions that move values without computing.
MOVES = frozenset("""
view view_as reshape reshape_as transpose t permute __getitem__ clone detach detach_ to cpu cuda
contiguous flatten unflatten squeeze unsqueeze expand expand_as cat concat concatenate stack hstack
vstack narrow select split chunk unbind flip fliplr flipud roll repeat tile movedim moveaxis
swapaxes swapdims gather index_select masked_select take take_along_dim zeros_like ones_like
empty_like requires_grad_ retain_grad backward float double half bfloat16 type type_as __get__
__set__ __setitem__ __deepcopy__ __reduce_ex__ numpy tolist item diag diagonal tril triu mT T H
real data new_zeros new_ones new_empty __format__ __len__ __iter__ __bool__ __float__ __int__
__index__ register_hook share_memory_ pin_memory storage untyped_storage data_ptr dim size numel
""".split())

#: Functions of :data:`EXACT` whose operands after the first are all values (no dimension, no count):
#: a Python int among them brings a value as a float does.
VALUE_OPERANDS = frozenset("clamp clip clamp_min clamp_max where".split())

#: Functions of :data:`MOVES` that join tensors: plain operands are rounded first (as ``np.concatenate``).
CONCATENATIONS = frozenset("cat concat concatenate stack hstack vstack".split())

#: Sums and products, computed by the NumPy chopped-array code (see the module notes).
REDUCTIONS = frozenset("""
sum mean prod cumsum cumprod matmul mm mv dot inner __matmul__ __rmatmul__
""".split())

#: Everything handled: an in-place function (``name_``) not among these is refused before it runs.
_KNOWN = ROUNDED | EXACT | MOVES | REDUCTIONS | frozenset(INPLACE)

#: The class made for each arithmetic, by ``id``: held weakly (a class, holding its arithmetic, goes with the
#: last tensor of it), as every deep copy, unpickling and ``chopped(t)`` makes another arithmetic object.
_CLASSES: "weakref.WeakValueDictionary[int, type]" = weakref.WeakValueDictionary()


@functools.cache
def _ste() -> Any:
    """The rounding as an autograd function: chop forward, identity backward."""
    import torch

    class RoundStraightThrough(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x, arith):
            return arith.chop(x)

        @staticmethod
        def backward(ctx, grad):
            return grad, None

    return RoundStraightThrough


def _tensor_base() -> Any:
    import torch

    global ChoppedTensor
    if ChoppedTensor is None:

        class _ChoppedTensor(torch.Tensor):
            """A torch tensor whose elementwise operations round (see the module notes)."""

            arithmetic: Optional[Arithmetic] = None  # set on the subclass made for each arithmetic

            def __repr__(self, *, tensor_contents=None):
                return f"chopped({_plain(self)!r}, {type(self).arithmetic.describe()})"

            @property
            def values(self):
                """A plain, detached copy."""
                return _plain(self).detach().clone()

            def __reduce_ex__(self, protocol):
                # The class is made at run time (one per arithmetic): pickle the plain values and the arithmetic
                return _rebuild_chopped_tensor, (_plain(self).detach(), type(self).arithmetic, self.requires_grad)

            def __deepcopy__(self, memo):
                if id(self) not in memo:  # (torch's own needs new_empty to give the subclass)
                    memo[id(self)] = _rebuild_chopped_tensor(_plain(self).detach().clone(),
                                                             copy.deepcopy(type(self).arithmetic, memo),
                                                             self.requires_grad)
                return memo[id(self)]

            @classmethod
            def __torch_function__(cls, func, types, args=(), kwargs=None):
                return _dispatch(cls, func, types, args, kwargs or {})

            # torch hands s + t and s * t (t.__radd__(s)) to __torch_function__ as add(t, s): a chopped
            # scalar s would lose its place (its mismatch rule applies, as the first chopped operand's)
            def __radd__(self, other):
                return _reflected(self, other, torch.Tensor.__radd__)

            def __rmul__(self, other):
                return _reflected(self, other, torch.Tensor.__rmul__)

        _ChoppedTensor.__name__ = _ChoppedTensor.__qualname__ = "ChoppedTensor"
        ChoppedValue.register(_ChoppedTensor)
        ChoppedTensor = _ChoppedTensor
    return ChoppedTensor


ChoppedTensor: Any = None  # the base class, made when torch is first used


def _class_for(arith: Arithmetic) -> type:
    cls = _CLASSES.get(id(arith))  # (a live class holds its arithmetic: the id is not another's)
    if cls is None:
        base = _tensor_base()
        cls = _CLASSES[id(arith)] = type("ChoppedTensor", (base,), {"arithmetic": arith,
                                                                     "__module__": __name__})
    return cls


def _reflected(tensor, other, func):
    """``func(tensor, other)`` (``other + tensor`` or ``other * tensor``), dispatched under the reflected name
    when ``other`` is a chopped scalar, so that its arithmetic is combined first."""
    if type(other) is ChoppedScalar:
        cls = type(tensor)
        return _dispatch(cls, func, (cls,), (tensor, other), {})
    return func(tensor, other)


def _rebuild_chopped_tensor(plain, arith: Arithmetic, requires_grad: bool):
    """An unpickled (or deep-copied) chopped tensor: ``plain`` holds values of ``arith``'s format, not rounded
    again (a stochastic rounding would draw)."""
    import torch

    with torch._C.DisableTorchFunctionSubclass():
        return torch.Tensor.as_subclass(plain, _class_for(arith)).requires_grad_(requires_grad)


def _arith_of(types) -> Optional[Arithmetic]:
    """The arithmetic of the chopped tensor types, combined; None when none is chopped."""
    base: type[_ChoppedBase] = _tensor_base()
    arith: Optional[Arithmetic] = None
    for t in types:
        if isinstance(t, type) and issubclass(t, base) and t.arithmetic is not None:
            arith = t.arithmetic if arith is None else arith.combine(t.arithmetic)
    return arith


def _plain(value):
    import torch

    if isinstance(value, _tensor_base()):
        with torch._C.DisableTorchFunctionSubclass():
            return torch.Tensor.as_subclass(value, torch.Tensor)
    if isinstance(value, (list, tuple)) and not hasattr(value, "_fields"):
        return type(value)(_plain(v) for v in value)
    return value


def _strict_operand(value, arith: Arithmetic, dtype):
    """A plain operand rounded as it enters under ``strict``; an integer tensor rounded as float64 (as NumPy's
    and a Python int) and held in ``dtype``, the float dtype of the operation's tensors (keeping the result's)."""
    import torch

    if isinstance(value, torch.Tensor) and not isinstance(value, _tensor_base()) and value.dtype != torch.bool:
        if value.is_floating_point():
            return arith.chop(value)
        if not value.is_complex():
            return arith.chop(value.to(torch.float64)).to(dtype)
    if isinstance(value, float):
        return float(arith.chop(value))
    if isinstance(value, int) and not isinstance(value, bool):
        rounded = float(arith.chop(float(value)))
        return value if rounded == value else rounded  # (an int torch takes as one where it is in the format)
    return value


def _other_rounding(value, arith: Arithmetic) -> bool:
    """Whether ``value`` is a chopped tensor of another rounding than ``arith`` (met under a mismatch rule)."""
    other = getattr(type(value), "arithmetic", None) if isinstance(value, _tensor_base()) else None
    return other is not None and not other.same_rounding(arith)


def _stored_value(value, arith: Arithmetic):
    """A plain value assigned into a chopped tensor, rounded as the chopped array's ``c[i] = v`` stores it."""
    import numbers

    import torch

    if isinstance(value, _tensor_base()):
        if not _other_rounding(value, arith):
            return value
        value = _plain(value)  # values of another format (met under a mismatch rule): rounded as plain ones
    if isinstance(value, torch.Tensor):
        return _ste().apply(value if value.is_floating_point() else value.to(torch.float64), arith)
    if isinstance(value, numbers.Real):
        return float(arith.chop(float(value)))
    return value


def _stored_operands(tensors, arith: Arithmetic):
    """Tensors to join with the plain ones rounded (in the float dtype torch joins them in), as
    ``np.concatenate`` stores plain values; chopped ones of ``arith``'s rounding as they are (nothing drawn)."""
    import torch

    floats = [t.dtype for t in tensors if t.is_floating_point()]
    dtype = functools.reduce(torch.promote_types, floats) if floats else torch.float64
    return type(tensors)(t if isinstance(t, _tensor_base()) and not _other_rounding(t, arith)
                         else _stored_value(t, arith).to(dtype) for t in tensors)


def _as_chopped_tensor(value, cls, rounded: bool):
    import torch

    if isinstance(value, torch.Tensor):
        if type(value) is cls and not rounded:
            # the operand itself (requires_grad_, relu_, to() of its own dtype return self, as torch's do):
            # a new object would be an autograd alias of it, not a leaf, and its .grad would stay None
            return value
        if not value.is_floating_point():
            return _plain(value)
        with torch._C.DisableTorchFunctionSubclass():
            plain = torch.Tensor.as_subclass(value, torch.Tensor)
            if rounded:
                plain = _ste().apply(plain, cls.arithmetic)
            return torch.Tensor.as_subclass(plain, cls)
    if isinstance(value, tuple):
        items = [_as_chopped_tensor(v, cls, rounded) for v in value]
        if hasattr(value, "_fields"):  # a namedtuple
            return type(value)(*items)
        return tuple(items) if type(value) is tuple else type(value)(items)  # (torch.return_types: a structseq)
    if isinstance(value, list):
        return [_as_chopped_tensor(v, cls, rounded) for v in value]
    return value


def _dispatch(cls, func, types, args, kwargs):
    import torch

    name = getattr(func, "__name__", "")
    arith = _arith_of(types)
    if arith is not None and any(type(v) is ChoppedScalar for v in (*args, *kwargs.values())):
        args, kwargs, arith = _scalar_operands(name, args, kwargs, arith)
    if arith is not None and name in INPLACE:
        # In-place arithmetic: compute out of place, round, copy the values back.  copy_ with autograd on
        # records the graph as torch's own in-place operations do (the rounding's straight-through function
        # is in the result); the operation reads a copy of the target, so what its backward saves is not
        # the tensor copy_ overwrites.
        target, operands = args[0], args
        if not isinstance(target, _tensor_base()):  # (before it runs: nothing is written)
            raise NotChoppedError(f"in-place {name!r} needs a chopped target for a chopped result "
                                  "(a plain target would leave the simulation silently).")
        if torch.is_grad_enabled() and any(isinstance(a, torch.Tensor) and a.requires_grad for a in args):
            with torch._C.DisableTorchFunctionSubclass():
                operands = (torch.Tensor.as_subclass(_plain(target).clone(), type(target)),) + tuple(args[1:])
        result = _dispatch(cls, getattr(torch, INPLACE[name]), types, operands, kwargs)
        target_arith = type(target).arithmetic
        if target_arith is not None and _other_rounding(result, target_arith):
            # a result in another format (a mismatch rule chose it): stored in the target's, as NumPy's += does
            result = _stored_value(result, target_arith)
        with torch._C.DisableTorchFunctionSubclass():
            torch.Tensor.copy_(target, _plain(result))
        return target
    if arith is not None and name.endswith("_") and not name.startswith("_") and name not in _KNOWN:
        # refused before it runs: an in-place function (fill_, copy_, masked_fill_ ...) would have written
        # its unrounded values into the tensor by the time its float result is refused below
        raise _not_chopped(f"torch function {name!r} (in place)")
    if arith is not None and kwargs.get("out") is not None:
        # Computed (and rounded) without out=, then stored there, as the chopped array's out= does:
        # torch would write its unrounded result into out and hand back another tensor.
        out = kwargs["out"]
        result = _dispatch(cls, func, types, args, {k: v for k, v in kwargs.items() if k != "out"})
        return _write_out(result, out, arith)
    if arith is not None and name in REDUCTIONS:
        return _reduction(name, _class_for(arith), args, kwargs)
    if arith is not None and arith.strict and name in ROUNDED:
        floats = [v.dtype for v in (*args, *kwargs.values()) if isinstance(v, torch.Tensor) and v.is_floating_point()]
        dtype = functools.reduce(torch.promote_types, floats) if floats else torch.float64
        args = tuple(_strict_operand(a, arith, dtype) for a in args)
        kwargs = {k: v if k == "out" else _strict_operand(v, arith, dtype) for k, v in kwargs.items()}
    if arith is not None and name == "__setitem__" and len(args) == 3:
        args = (args[0], args[1], _stored_value(args[2], arith))
    if arith is not None and name in CONCATENATIONS:
        if args and isinstance(args[0], (list, tuple)):
            args = (_stored_operands(args[0], arith),) + tuple(args[1:])
        elif isinstance(kwargs.get("tensors"), (list, tuple)):
            kwargs = {**kwargs, "tensors": _stored_operands(kwargs["tensors"], arith)}
    if arith is not None and _host_square_root(name, args, kwargs):
        # torch's CPU square roots are not correctly rounded (float32 and float64): NumPy's are.
        with torch._C.DisableTorchFunctionSubclass():
            root = _via_numpy().apply(_numpy_sqrt, torch.sqrt, _plain(args[0]))
        return _as_chopped_tensor(root, _class_for(arith), True)
    with torch._C.DisableTorchFunctionSubclass():
        result = func(*args, **kwargs)
    if arith is None:  # only the base class involved
        return result
    if name in EXACT:  # rounded when a plain operand (also by keyword) may have brought new values
        operands = list(args) + [v for k, v in kwargs.items() if k != "out"]
        # a plain tensor of numbers (an int one too: torch.clamp(t, min=torch.tensor(2049))), a float, or an
        # int where every later operand is a value (clamp's bounds, where's; elsewhere ints are dimensions)
        scalars = (int, float) if name in VALUE_OPERANDS else (float,)
        rounded = (any(isinstance(a, torch.Tensor) and not isinstance(a, _tensor_base()) and a.dtype != torch.bool
                       for a in operands)
                   or any(isinstance(a, scalars) and not isinstance(a, bool) for a in operands[1:]))
        # round(decimals=d) is not exact: the chopped array's np.round rounds its result to the format
        rounded = rounded or (name == "round" and kwargs.get("decimals", 0) != 0)
        # a chopped operand of another format (met under a mismatch rule) brings values to round too
        rounded = rounded or any(_other_rounding(a, arith) for a in operands)
        return _as_chopped_tensor(result, _class_for(arith), rounded)
    if name in ROUNDED or name in MOVES:
        return _as_chopped_tensor(result, _class_for(arith), name in ROUNDED)
    if _has_float_tensor(result):
        raise NotChoppedError(
            f"torch function {name!r} is not implemented for chopped tensors with per-operation "
            "rounding; call .values to leave the simulation explicitly.")
    return result


def _scalar_operands(name: str, args, kwargs, arith: Arithmetic):
    """Chopped scalars among the operands as their values (Python floats, entering as a plain float does) and
    their arithmetic combined with the tensors' (first in a reflected operator, where the scalar is on the left),
    as chopped NumPy and JAX arrays take them."""
    for v in (*args, *kwargs.values()):
        if type(v) is ChoppedScalar:
            arith = v.arithmetic.combine(arith) if name.startswith("__r") else arith.combine(v.arithmetic)
    args = tuple(v.value if type(v) is ChoppedScalar else v for v in args)
    return args, {k: v.value if type(v) is ChoppedScalar else v for k, v in kwargs.items()}, arith


def _host_square_root(name: str, args, kwargs) -> bool:
    """Whether the call is the square root of a float CPU tensor: ``sqrt(t)``, ``pow(t, 0.5)``, ``t ** 0.5``
    (NumPy's power computes ``x ** 0.5`` as ``sqrt(x)``, signed zeros and Inf included)."""
    import torch

    if kwargs or not args or not isinstance(args[0], torch.Tensor):
        return False
    if name == "sqrt":
        root = len(args) == 1
    else:
        root = name in ("pow", "__pow__") and len(args) == 2 and type(args[1]) is float and args[1] == 0.5
    return root and args[0].is_floating_point() and args[0].device.type == "cpu"


def _numpy_sqrt(x: np.ndarray) -> np.ndarray:
    with np.errstate(invalid="ignore"):  # (NaN for negative x, silently, as torch's sqrt)
        return np.sqrt(x)


def _write_out(result, out, arith: Arithmetic):
    """``result`` (rounded in ``arith``) stored into ``out`` (a tensor or a tuple of them), which is
    returned: a float result into a chopped tensor only (rounded again in its format where that
    differs), as the chopped NumPy array's ``out=``."""
    import torch

    outs = tuple(out) if isinstance(out, (tuple, list)) else (out,)
    results = tuple(result) if isinstance(result, (tuple, list)) else (result,)
    if len(outs) != len(results):
        raise ValueError(f"out= needs {len(results)} tensors, got {len(outs)}.")
    for target, value in zip(outs, results):
        if _has_float_tensor(value) and not isinstance(target, _tensor_base()):
            raise NotChoppedError("out= must be a chopped tensor for a chopped result "
                                  "(a plain out tensor would leave the simulation silently).")
    for target, value in zip(outs, results):
        value = _plain(value)
        if isinstance(target, _tensor_base()) and not type(target).arithmetic.same_rounding(arith):
            value = _ste().apply(value, type(target).arithmetic)  # (met under a mismatch rule)
        with torch._C.DisableTorchFunctionSubclass():
            if target.shape != value.shape:
                torch.Tensor.resize_(target, value.shape)  # (as torch's out= resizes)
            torch.Tensor.copy_(target, value)
    return out


@functools.cache
def _via_numpy() -> Any:
    """An autograd function: forward by chopped NumPy code, backward by the exact torch operation."""
    import numpy as np
    import torch

    class ChoppedViaNumPy(torch.autograd.Function):
        @staticmethod
        def forward(ctx, numpy_func, exact_func, *tensors):
            ctx.exact_func = exact_func
            ctx.save_for_backward(*tensors)
            carrier = tensors[0].dtype if tensors[0].dtype in (torch.float32, torch.float64) else torch.float32
            arrays = [t.detach().to(device="cpu", dtype=carrier).numpy() for t in tensors]
            out = np.array(numpy_func(*arrays), order="C")  # (keeps 0-d results 0-d)
            return torch.from_numpy(out).to(device=tensors[0].device, dtype=tensors[0].dtype)

        @staticmethod
        def backward(ctx, grad):
            inputs = [t.detach().requires_grad_(t.requires_grad) for t in ctx.saved_tensors]
            wanted = [t for t in inputs if t.requires_grad]
            with torch.enable_grad():
                y = ctx.exact_func(*inputs)
            found = iter(torch.autograd.grad(y, wanted, grad, allow_unused=True) if wanted else ())
            return (None, None) + tuple(next(found) if t.requires_grad else None for t in inputs)

    return ChoppedViaNumPy


def _reduction(name: str, cls, args, kwargs):
    """Sums and products of chopped tensors by the chopped NumPy code, straight-through autograd."""
    import numpy as np
    import torch

    arith = cls.arithmetic
    if name == "__rmatmul__":
        args = (args[1], args[0])
    tensors = [a for a in args if isinstance(a, torch.Tensor)]
    options = {k: v for k, v in kwargs.items() if v is not None}
    numpy_kwargs: Dict[str, Any] = {}
    exact: Callable[..., Any]
    if name in ("sum", "mean", "prod", "cumsum", "cumprod"):
        dim = args[1] if len(args) > 1 else options.pop("dim", options.pop("axis", None))
        keepdim = args[2] if len(args) > 2 else options.pop("keepdim", False)
        if options:
            raise _not_chopped(f"torch.{name} with {sorted(options)}")
        cumulative = name in ("cumsum", "cumprod")
        numpy_kwargs["axis"] = tuple(dim) if isinstance(dim, (list, tuple)) else dim
        if not cumulative:
            numpy_kwargs["keepdims"] = bool(keepdim)

        def exact(t):
            if cumulative:
                return getattr(torch, name)(t, dim=dim)
            return getattr(torch, name)(t) if dim is None else getattr(torch, name)(t, dim, keepdim=keepdim)
        tensors = tensors[:1]
    else:
        if options or len(tensors) != 2:
            raise _not_chopped(f"torch.{name} with these arguments")
        # torch.inner contracts the last axes of both operands (np.inner); mm, mv, dot and the
        # matmul operators are what np.matmul computes on their operands.
        exact = torch.inner if name == "inner" else torch.matmul
        name = "inner" if name == "inner" else "matmul"

    def numpy_func(*arrays):
        return np.asarray(getattr(np, name)(*(wrap(a, arith) for a in arrays), **numpy_kwargs))

    plain = [_plain(t) for t in tensors]
    with torch._C.DisableTorchFunctionSubclass():
        out = _via_numpy().apply(numpy_func, exact, *plain)
        return torch.Tensor.as_subclass(out, cls)


def _not_chopped(what: str):
    return NotChoppedError(f"{what} is not implemented for chopped tensors with per-operation rounding.")


def _has_float_tensor(value) -> bool:
    import torch

    if isinstance(value, torch.Tensor):
        return value.is_floating_point()
    if isinstance(value, (list, tuple)):
        return any(_has_float_tensor(v) for v in value)
    return False


def chopped_tensor(x: torch.Tensor, arith: Arithmetic) -> torch.Tensor:
    """``x`` (a torch tensor) rounded to ``arith``'s format, as a chopped tensor on its device.

    The rounding keeps ``x``'s autograd graph (straight-through); ``x`` is not modified.
    """
    import torch

    if x.is_complex():
        raise ValueError("Chop requires a real input array.")
    if not x.is_floating_point():
        x = x.to(torch.float64)
    return _as_chopped_tensor(x, _class_for(arith), True)
