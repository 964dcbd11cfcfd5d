"""Run an unmodified torch model in simulated arithmetic: :func:`simulate`, a context in the spirit
of ``torch.autocast`` that rounds the operands of matrix products and convolutions to a format and
computes the products through a hardware model of a GPU's matrix units, or in float64 with one
rounding, or as torch computes them."""

from __future__ import annotations

import functools
import inspect
import math
from typing import Any, Callable, Optional, Sequence, Tuple, Union

import torch
from torch.nn import functional as F
from torch.overrides import TorchFunctionMode

from .. import hardware as matrix_units
from .quantize import GradientRule, Rounder, apply_quantizer, rounder_for

__all__ = ["simulate", "Simulation"]

#: Straight-through: the gradient of a rounding is 1 (nothing clipped, nothing rounded).
_STRAIGHT_THROUGH = GradientRule()

#: A product ``alpha * A @ B + beta * C`` of 2-D tensors (``C`` None or broadcastable).
Product = Callable[..., torch.Tensor]


def _matmul(a: torch.Tensor, b: torch.Tensor, *, product: Product) -> torch.Tensor:
    """``torch.matmul`` (vectors, matrices, broadcast batches) one 2-D product per batch element."""
    a2 = a[None, :] if a.dim() == 1 else a
    b2 = b[:, None] if b.dim() == 1 else b
    batch = torch.broadcast_shapes(a2.shape[:-2], b2.shape[:-2])
    count = math.prod(batch)
    left = a2.expand(*batch, *a2.shape[-2:]).reshape(count, *a2.shape[-2:])
    right = b2.expand(*batch, *b2.shape[-2:]).reshape(count, *b2.shape[-2:])
    if count:
        out = torch.stack([product(left[i], right[i]) for i in range(count)])
    else:  # an empty batch: no product to compute (torch.stack refuses an empty list)
        out = torch.matmul(left, right)
    out = out.reshape(*batch, a2.shape[-2], b2.shape[-1])
    if a.dim() == 1:
        out = out.squeeze(-2)
    if b.dim() == 1:
        out = out.squeeze(-1)
    return out


def _addmm(input: torch.Tensor, mat1: torch.Tensor, mat2: torch.Tensor, *, beta: float = 1, alpha: float = 1,
           product: Product) -> torch.Tensor:
    """``beta * input + alpha * mat1 @ mat2``: ``input`` is the addend of the first block (GEMM's C)."""
    if beta == 0:  # torch ignores input then (NaN included)
        return product(mat1, mat2, None, alpha, 0.0)
    return product(mat1, mat2, input, alpha, beta)


def _baddbmm(input: torch.Tensor, batch1: torch.Tensor, batch2: torch.Tensor, *, beta: float = 1, alpha: float = 1,
             product: Product) -> torch.Tensor:
    """:func:`_addmm` per matrix of the batch (``input`` broadcast to the result's shape)."""
    addends = input.expand(batch1.shape[0], batch1.shape[1], batch2.shape[2])
    if batch1.shape[0] == 0:  # (torch.stack refuses an empty list)
        return torch.baddbmm(input, batch1, batch2, beta=beta, alpha=alpha)
    return torch.stack([_addmm(addends[i], batch1[i], batch2[i], beta=beta, alpha=alpha, product=product)
                        for i in range(batch1.shape[0])])


def _linear(input: torch.Tensor, weight: torch.Tensor, bias: Optional[torch.Tensor] = None, *,
            product: Product) -> torch.Tensor:
    """``input @ weight.T + bias``, the bias the addend of the first block; a 1-D ``input`` or
    ``weight`` (one row, one output feature) has no axis in the result, as torch's."""
    # (explicit row counts: reshape(-1, 0) is ambiguous for no input features)
    rows = input.reshape(math.prod(input.shape[:-1]), input.shape[-1])
    out = product(rows, weight.reshape(math.prod(weight.shape[:-1]), weight.shape[-1]).T, bias)
    return out.reshape(input.shape[:-1] + weight.shape[:-1])


def _paddings(padding: Any, kernel: Sequence[int], dilation: Sequence[int]) -> list:
    """``(before, after)`` per spatial axis for ``padding`` (ints, or ``'valid'``/``'same'`` as torch
    reads them: ``'same'`` pads ``dilation * (kernel - 1)``, the odd one after)."""
    if padding == "valid":
        return [(0, 0)] * len(kernel)
    if padding == "same":
        totals = [d * (k - 1) for k, d in zip(kernel, dilation)]
        return [(total // 2, total - total // 2) for total in totals]
    if isinstance(padding, int):
        padding = [padding] * len(kernel)
    return [(p, p) for p in padding]


def _axes(value: Any, count: int) -> Tuple[int, ...]:
    return (value,) * count if isinstance(value, int) else tuple(value)


def _conv2d(input: torch.Tensor, weight: torch.Tensor, bias: Optional[torch.Tensor] = None, stride: Any = 1,
            padding: Any = 0, dilation: Any = 1, groups: int = 1, *, product: Product) -> torch.Tensor:
    """The convolution as one product per group: the weight ``(out, in * kh * kw)`` times the
    unfolded input ``(in * kh * kw, batch * positions)``, its inner dimension in
    ``torch.nn.functional.unfold``'s order (input channel, kernel row, kernel column); the bias
    the addend of the first block."""
    batched = input.dim() == 4
    x = input if batched else input[None]
    kernel, dilation, stride = tuple(weight.shape[-2:]), _axes(dilation, 2), _axes(stride, 2)
    (top, bottom), (left, right) = _paddings(padding, kernel, dilation)
    x = F.pad(x, (left, right, top, bottom))
    columns = F.unfold(x, kernel, dilation=dilation, stride=stride)
    images = x.shape[0]
    rows, cols = ((size - d * (k - 1) - 1) // s + 1 for size, k, d, s in zip(x.shape[2:], kernel, dilation, stride))
    positions = columns.shape[-1]
    inner = weight[0].numel()
    columns = columns.reshape(images, groups, inner, positions)
    per_group = weight.shape[0] // groups
    outs = []
    for g in range(groups):
        channels = slice(g * per_group, (g + 1) * per_group)
        right_operand = columns[:, g].permute(1, 0, 2).reshape(inner, images * positions)
        addend = None if bias is None else bias[channels, None]
        outs.append(product(weight[channels].reshape(per_group, inner), right_operand, addend))
    out = torch.cat(outs).reshape(weight.shape[0], images, rows, cols).permute(1, 0, 2, 3)
    return out if batched else out[0]


def _conv1d(input: torch.Tensor, weight: torch.Tensor, bias: Optional[torch.Tensor] = None, stride: Any = 1,
            padding: Any = 0, dilation: Any = 1, groups: int = 1, *, product: Product) -> torch.Tensor:
    """:func:`_conv2d` on a height of one."""
    if not isinstance(padding, str):
        padding = (0, _axes(padding, 1)[0])
    out = _conv2d(input.unsqueeze(-2), weight.unsqueeze(-2), bias, (1, _axes(stride, 1)[0]), padding,
                  (1, _axes(dilation, 1)[0]), groups, product=product)
    return out.squeeze(-2)


#: The functions the context simulates, and how each becomes 2-D products.
_SIMULATED: dict = {
    torch.matmul: _matmul, torch.Tensor.matmul: _matmul, torch.Tensor.__matmul__: _matmul,
    torch.Tensor.__rmatmul__: lambda b, a, *, product: _matmul(a, b, product=product),
    torch.mm: _matmul, torch.Tensor.mm: _matmul, torch.bmm: _matmul, torch.Tensor.bmm: _matmul,
    torch.mv: _matmul, torch.Tensor.mv: _matmul, torch.dot: _matmul, torch.Tensor.dot: _matmul,
    torch.addmm: _addmm, torch.Tensor.addmm: _addmm, torch.baddbmm: _baddbmm, torch.Tensor.baddbmm: _baddbmm,
    F.linear: _linear, torch.conv1d: _conv1d, torch.conv2d: _conv2d, torch.linalg.matmul: _matmul,
    torch.Tensor.addmm_: _addmm, torch.Tensor.baddbmm_: _baddbmm,
}

#: In-place methods whose result is written into their first operand (as out= is).
_WRITE_INTO_SELF = (torch.Tensor.addmm_, torch.Tensor.baddbmm_)

#: Tensor methods ending in ``_`` that change no value (flags, storage, shape or strides):
#: round_outputs does not round their tensor.
_KEEP_VALUES = frozenset({
    "requires_grad_", "share_memory_", "detach_", "set_", "resize_", "resize_as_", "resize_as_sparse_",
    "sparse_resize_", "sparse_resize_and_clear_", "as_strided_", "squeeze_", "unsqueeze_", "t_", "transpose_",
    "swapaxes_", "swapdims_", "_coalesced_"})


@functools.lru_cache(maxsize=None)
def _inplace_position(func: Any) -> Optional[int]:
    """The position of ``func``'s ``inplace`` parameter (``torch.nn.functional.silu`` ...), or None."""
    try:
        names = list(inspect.signature(func).parameters)
    except (TypeError, ValueError):  # builtins without a signature have no inplace parameter
        return None
    return names.index("inplace") if "inplace" in names else None


def _inplace_flag(func: Any, args: Sequence, kwargs: dict) -> bool:
    """Whether a call such as ``F.silu(x, inplace=True)`` writes its result into its operand."""
    if "inplace" in kwargs:
        return bool(kwargs["inplace"])
    try:
        position = _inplace_position(func)
    except TypeError:  # an unhashable callable
        return False
    return position is not None and position < len(args) and bool(args[position])


def _autocast_dtype(func: Any, args: Sequence, kwargs: dict) -> Optional[torch.dtype]:
    """Under ``torch.autocast`` (for an operand's device), the dtype of torch's own result, which only
    computing it tells (meta tensors are not autocast); otherwise None."""
    tensors = [a for a in [*args, *kwargs.values()] if isinstance(a, torch.Tensor)]
    if not any(t.device.type in ("cpu", "cuda", "xpu", "mps") and torch.is_autocast_enabled(t.device.type)
               for t in tensors):
        return None
    with torch.no_grad():
        return func(*[a.detach() if isinstance(a, torch.Tensor) else a for a in args],
                    **{name: value.detach() if isinstance(value, torch.Tensor) else value
                       for name, value in kwargs.items()}).dtype


def _meta(value: Any) -> Any:
    """A tensor's shape and dtype on the meta device (other values as they are)."""
    return torch.empty(value.shape, dtype=value.dtype, device="meta") if isinstance(value, torch.Tensor) else value


class _SimulatedValues(torch.autograd.Function):
    """Forward: the simulated values; backward: the gradient goes to ``reference`` (the operation as
    torch computes it on the same rounded operands), as the straight-through estimator of a rounding."""

    @staticmethod
    def forward(reference: torch.Tensor, simulated: torch.Tensor) -> torch.Tensor:
        return simulated.clone()

    @staticmethod
    def setup_context(ctx: Any, inputs: Any, output: Any) -> None:
        pass

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> Tuple[torch.Tensor, None]:
        return grad, None


class Simulation(TorchFunctionMode):
    """The mode :func:`simulate` returns (see there); use it as a context manager."""

    def __init__(self, format: Any = "h", round: Union[str, int, None] = None, *,
                 hardware: Union[None, str, matrix_units.BlockFMA] = None, accumulate: Any = None,
                 round_outputs: bool = False):
        super().__init__()
        if hardware is not None and accumulate is not None:
            raise ValueError("give hardware= (the products of a GPU's matrix units) or accumulate= (float64 "
                             "accumulation, one rounding to a format), not both.")
        self.rounder = rounder_for(format, round)
        fmt = self.rounder.spec.fmt
        self.model = None if hardware is None else \
            matrix_units.model_for_format(hardware, fmt.t, fmt.emax, f"format {self.rounder.options}",
                                          emin=fmt.emin, encoding=fmt.encoding)
        self.accumulator = None if accumulate is None else rounder_for(accumulate)
        self.round_outputs = bool(round_outputs)

    def __torch_function__(self, func: Any, types: Any, args: Sequence = (), kwargs: Optional[dict] = None) -> Any:
        kwargs = kwargs or {}
        name = getattr(func, "__name__", "")
        written = kwargs.get("out")
        in_place = self.round_outputs and (
            name.endswith("_") and not name.endswith("__") and name not in _KEEP_VALUES
            or name.startswith("__i") and name != "__index__" or _inplace_flag(func, args, kwargs))
        target = args[0] if args else None
        if (in_place and written is None and isinstance(target, torch.Tensor)
                and target.is_floating_point() and torch.is_grad_enabled()
                and any(isinstance(t, torch.Tensor) and t.requires_grad for t in [*args, *kwargs.values()])):
            return self._rounded_in_place(func, target, args, kwargs)
        simulated = _SIMULATED.get(func)
        out = func(*args, **kwargs) if simulated is None else self._simulated(func, simulated, args, kwargs)
        if self.round_outputs and name == "__setitem__":  # x[key] = value: the elements written, in place
            target, key = args[0], args[1]
            if isinstance(target, torch.Tensor) and target.is_floating_point():
                with torch.no_grad():
                    target[key] = self.rounder(target[key])
        elif self.round_outputs and name != "__get__":  # attributes are no results
            in_place = in_place or written is not None
            inputs = [*args, *kwargs.values(), *(written if isinstance(written, (tuple, list)) else ())]
            out = self._rounded_results(out, inputs, in_place)
        return out

    def _rounded_in_place(self, func: Any, target: torch.Tensor, args: Sequence, kwargs: dict) -> Any:
        """An in-place operation on a tensor in an autograd graph, its result rounded: the operation
        runs on a copy, so the tensors it saves for backward keep its unrounded values (as the same
        operation out of place would save them); the rounded result is then copied into ``target``
        with autograd (straight-through), one version bump as the operation itself makes."""
        copy = target.clone()
        simulated = _SIMULATED.get(func)
        args = [copy, *args[1:]]
        result = func(*args, **kwargs) if simulated is None else self._simulated(func, simulated, args, kwargs)
        if result is not copy:  # not written into the operand after all: a new result
            return self._rounded_results(result, [target, *args, *kwargs.values()], False)
        return target.copy_(apply_quantizer(copy, self.rounder, _STRAIGHT_THROUGH))

    def _round(self, value: Any) -> Any:
        if isinstance(value, torch.Tensor) and value.is_floating_point():
            return apply_quantizer(value, self.rounder, _STRAIGHT_THROUGH)
        return value

    def _simulated(self, func: Any, simulated: Callable, args: Sequence, kwargs: dict) -> Any:
        if not any(isinstance(a, torch.Tensor) and a.is_floating_point() for a in [*args, *kwargs.values()]):
            return func(*args, **kwargs)  # integer products: exact, as torch computes them
        kwargs = dict(kwargs)
        out = args[0] if func in _WRITE_INTO_SELF else kwargs.pop("out", None)
        result = self._simulated_values(func, simulated, args, kwargs)
        if out is None:
            return result
        out.copy_(result)  # (torch's out= and addmm_: the result written into out, which is returned)
        return out

    def _simulated_values(self, func: Any, simulated: Callable, args: Sequence, kwargs: dict) -> Any:
        args = [self._round(a) for a in args]
        kwargs = {name: self._round(value) for name, value in kwargs.items()}
        if self.accumulator is not None or self.model is not None:
            # these paths compute in double or through the model, which would take floating operands of
            # two dtypes; torch's products refuse them (its meta kernels do not check dtypes)
            dtypes = {str(a.dtype) for a in [*args, *kwargs.values()] if isinstance(a, torch.Tensor)
                      and a.is_floating_point()}
            if len(dtypes) > 1:
                raise RuntimeError(f"{getattr(func, '__name__', func)}: expected the operands to have the same "
                                   f"dtype, but got {' and '.join(sorted(dtypes))}")
        if self.accumulator is not None:
            wide = [a.double() if isinstance(a, torch.Tensor) and a.is_floating_point() else a for a in args]
            out = func(*wide, **{name: value.double() if isinstance(value, torch.Tensor) and value.is_floating_point()
                                 else value for name, value in kwargs.items()})
            dtype = _autocast_dtype(func, args, kwargs) or next(
                a.dtype for a in [*args, *kwargs.values()] if isinstance(a, torch.Tensor))
            return apply_quantizer(out, self.accumulator, _STRAIGHT_THROUGH).to(dtype)
        if self.model is None:
            return func(*args, **kwargs)
        # torch's own checks of the shapes first, on meta tensors (no data, no computation): the products
        # below would also compute what torch refuses (torch.mm of 3-D tensors, torch.dot of matrices ...)
        func(*[_meta(a) for a in args], **{name: _meta(value) for name, value in kwargs.items()})
        values = simulated(*[a.detach() if isinstance(a, torch.Tensor) else a for a in args],
                           **{name: value.detach() if isinstance(value, torch.Tensor) else value
                              for name, value in kwargs.items()}, product=self._product)
        tensors = [a for a in [*args, *kwargs.values()] if isinstance(a, torch.Tensor)]
        if torch.is_grad_enabled() and any(t.requires_grad for t in tensors):
            reference = func(*args, **kwargs)
            return _SimulatedValues.apply(reference, values.to(reference.dtype))
        autocast = _autocast_dtype(func, args, kwargs)
        return values if autocast is None else values.to(autocast)

    def _product(self, A: torch.Tensor, B: torch.Tensor, C: Optional[torch.Tensor] = None, alpha: float = 1.0,
                 beta: float = 1.0) -> torch.Tensor:
        """``alpha * A @ B + beta * C`` by :func:`pychop_compat.hardware.matmul` on ``A``'s device,
        in ``A``'s dtype."""
        assert self.model is not None  # the product of the hardware= path only
        D = matrix_units.matmul(A.detach(), B.detach(), None if C is None else C.detach(), alpha,
                                beta if C is not None else 0.0, model=self.model)
        return D.to(dtype=A.dtype)

    def _rounded_results(self, out: Any, inputs: list, in_place: bool) -> Any:
        """Floating tensors ``out`` rounded: new ones by a quantizer; the operand of an in-place
        operation (``add_``, ``+=``, ``out=``) in place (no autograd: its gradient passes straight through);
        an operand itself (``x.float()`` of a float tensor) or a view of one kept."""
        if isinstance(out, (tuple, list)):
            return type(out)(self._rounded_results(o, inputs, in_place) for o in out)
        if not (isinstance(out, torch.Tensor) and out.is_floating_point()):
            return out
        if any(out is t for t in inputs):
            if in_place:
                with torch.no_grad():
                    out.copy_(self.rounder(out))
            return out
        storage = out.untyped_storage().data_ptr()
        if any(isinstance(t, torch.Tensor) and t.untyped_storage().data_ptr() == storage for t in inputs):
            return out
        return apply_quantizer(out, self.rounder, _STRAIGHT_THROUGH)


def simulate(format: Any = "h", round: Union[str, int, None] = None, *,
             hardware: Union[None, str, matrix_units.BlockFMA] = None, accumulate: Any = None,
             round_outputs: bool = False) -> Simulation:
    """Run torch code, an unmodified model included, in simulated low-precision arithmetic.

    A context manager in the spirit of ``torch.autocast``: inside it, the
    operands of every matrix product and convolution (the operations listed
    under Notes) are rounded to ``format`` (a differentiable rounding, as
    :func:`~pychop_compat.nn.quantize`), and the product is computed

    * with ``hardware=``: as the matrix units of that GPU compute it, by
      :func:`pychop_compat.hardware.matmul` (fp32 values);
    * with ``accumulate=``: by torch in float64 on the rounded operands (their
      products exact), the result rounded once to the format ``accumulate``;
    * with neither: by torch on the rounded operands, in their dtype.

    Parameters
    ----------
    format : str, dict, Options, Chop or Rounder, default 'h'
        The operands' format (see :class:`~pychop_compat.nn.Rounder`); with
        ``hardware=``, the model's input format (``'h'``: fp16, ``'bf16'``,
        ``'tf32'``, ``'float8_e4m3fn'``, ``'float8_e5m2'``).
    round : str or int, optional
        The operands' rounding mode (default: to nearest).
    hardware : str or pychop_compat.hardware.BlockFMA, optional
        A GPU name of :func:`pychop_compat.hardware.model` (its model for
        inputs in ``format`` and fp32 output) or a model with that input format.
    accumulate : str, dict, Options, Chop or Rounder, optional
        The format the float64 result is rounded to (to nearest).
    round_outputs : bool, default False
        Also round the floating-point result of every torch operation in the
        context to ``format`` (an operand updated in place, by a method such as
        ``sigmoid_`` or a function such as ``F.silu(x, inplace=True)``, a tensor
        given as ``out=`` and the elements written by ``x[key] = value``: in
        place, the gradient of an in-place operation that of the same operation
        out of place, straight through the rounding; a
        view of an operand, and a tensor whose method changes no value
        (``requires_grad_``, ``share_memory_``, ``detach_``, ``t_``, ...): not
        rounded).

    Returns
    -------
    Simulation
        A ``torch.overrides.TorchFunctionMode``: ``with simulate(...):``.

    Raises
    ------
    ValueError
        For both ``hardware`` and ``accumulate``, or a format that is not the
        model's input format.

    Notes
    -----
    Simulated: ``torch.matmul``, the ``@`` operator, ``Tensor.matmul``,
    ``torch.mm``, ``torch.bmm``, ``torch.mv``, ``torch.dot``, ``torch.addmm``,
    ``torch.baddbmm`` (and their ``Tensor`` methods, ``addmm_`` and
    ``baddbmm_`` included: the result written into the tensor),
    ``torch.nn.functional.linear`` (so ``nn.Linear``), and
    ``torch.conv1d``/``torch.conv2d`` (``torch.nn.functional.conv1d``/
    ``conv2d``, so ``nn.Conv1d``/``nn.Conv2d``). Every other operation runs as
    torch computes it, including those that compute products inside one call
    (``scaled_dot_product_attention``, ``multi_head_attention_forward`` and so
    ``nn.MultiheadAttention``, ``einsum``, ``conv3d``, the transposed
    convolutions). With ``hardware=``, a bias (the ``input`` of ``addmm`` and
    ``baddbmm``) is the addend ``C`` of the first block, a batched product is
    one product per matrix, a convolution one product per group of the weight
    and the unfolded input (its inner dimension in
    ``torch.nn.functional.unfold``'s order: input channel, kernel row, kernel
    column); the result, fp32 values, is returned in the operands' dtype and
    device (computed on a host copy; under ``torch.autocast``, in the dtype
    torch's own result has there, as with ``accumulate=``). Its gradient is that of the operation
    computed by torch on the same rounded operands (the straight-through
    estimator: a simulated product has no derivative of its own). Eager only:
    under ``torch.compile`` the hardware path breaks the graph.

    Examples
    --------
    >>> import torch
    >>> from pychop_compat.nn import simulate
    >>> a = torch.tensor([[1.0, 2.0**-12, 2.0**-12, 2.0**-12]])
    >>> with simulate('h', hardware='V100'):
    ...     print((a @ a.T).item() == 1.0)  # three times 2**-24 truncated at alignment
    True
    >>> with simulate('h', hardware='H100'):
    ...     print((a @ a.T).item() == 1 + 2.0**-23)  # two extra bits keep them, truncated
    True
    """
    return Simulation(format, round, hardware=hardware, accumulate=accumulate, round_outputs=round_outputs)
