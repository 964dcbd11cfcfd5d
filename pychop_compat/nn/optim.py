"""OptimLP: a torch.optim optimizer with its numbers kept in low precision."""

from __future__ import annotations

import functools
import inspect
import math
from collections import OrderedDict
from typing import Any, Callable, Dict, Iterable, Optional, TypeVar, Union, cast, overload

import torch

from .quantize import Rounder, as_rounder

__all__ = ["OptimLP"]

_Loss = TypeVar("_Loss")  # what a step's closure returns (the loss), given back by step
_Step = TypeVar("_Step", bound=Callable[..., Any])
_HOOKS = ("step_pre", "step_post", "state_dict_pre", "state_dict_post", "load_state_dict_pre", "load_state_dict_post")


def _with_step_hooks(step: _Step) -> _Step:
    """``step`` between the optimizer's step pre- and post-hooks, called as torch.optim.Optimizer
    calls them (``hook(optimizer, args, kwargs)``, ``args`` with the optimizer first; a pre-hook may
    return new ``(args, kwargs)``).  Not Optimizer's own wrapper, which torch installs on the whole
    class and which also runs the global hooks (already run by the wrapped optimizer's step)."""
    @functools.wraps(step)
    def hooked(*args: Any, **kwargs: Any) -> Any:
        self = args[0]
        for pre_hook in list(self._optimizer_step_pre_hooks.values()):
            result = pre_hook(self, args, kwargs)
            if result is not None:
                if not (isinstance(result, tuple) and len(result) == 2):
                    raise RuntimeError(f"A step pre-hook must return None or a tuple (new_args, new_kwargs), "
                                       f"not {result!r}.")
                args, kwargs = result
        out = step(*args, **kwargs)
        for post_hook in list(self._optimizer_step_post_hooks.values()):
            post_hook(self, args, kwargs)
        return out
    return cast(_Step, hooked)


def _rounded_gradient(rounder: Rounder, grad: torch.Tensor) -> torch.Tensor:
    """``grad`` rounded; a sparse COO gradient (``nn.Embedding(sparse=True)``) by its summed values, as
    the nonzeros of the same gradient stored dense are rounded (a rounded zero is zero)."""
    if grad.layout == torch.strided:
        return rounder(grad)
    if not grad.is_sparse:
        raise TypeError(f"OptimLP rounds dense and sparse COO gradients, not a gradient of layout {grad.layout}.")
    grad = grad.coalesce()
    return torch.sparse_coo_tensor(grad.indices(), rounder(grad.values()), grad.shape, is_coalesced=True,
                                   check_invariants=True)


def _shared(name: str) -> Any:
    """A property that reads and writes the wrapped optimizer's attribute ``name``."""
    return property(lambda self: getattr(self.optimizer, name),
                    lambda self, value: setattr(self.optimizer, name, value))


class OptimLP(torch.optim.Optimizer):
    """Wrap a torch.optim optimizer so that weights, gradients, optimizer state and
    the weight accumulator are each rounded to their own format and mode.

    One :meth:`step` rounds each gradient by ``grad`` (in scaled form), unscales
    it, runs the wrapped step (on the accumulator, if any), rounds the state
    tensors by ``state`` (when stored: QPyTorch's order), then rounds the
    accumulator and the weights; see :doc:`/training`, "OptimLP".

    Parameters
    ----------
    optimizer : torch.optim.Optimizer
        The optimizer to wrap (its parameters, groups and hyperparameters are used
        as they are; learning-rate schedulers may be attached to the wrapper).  Not
        one whose step needs a closure that it calls several times (``LBFGS``): the
        gradients are rounded once per step, after one call of the closure.
    weight, grad, accumulator : format, Rounder or (format, rounding), optional
        How to round weights, gradients and the accumulator, a master copy of the
        weights (None: not rounded; no accumulator: the optimizer updates the
        weights themselves).  E.g. ``weight=('b', 'stochastic')``.  A sparse COO
        gradient (``nn.Embedding(sparse=True)``) is rounded by its values, as
        its nonzeros stored dense would be (other sparse layouts: ``TypeError``).
    state : format, Rounder, (format, rounding) or dict, optional
        How to round the optimizer's floating-point state tensors (not ``step``):
        one rule for all, or a dict from state names (``'momentum_buffer'``,
        ``'exp_avg'``, ...) to rules (other names: not rounded).
    loss_scale : float, default 1
        The factor by which the loss was multiplied before ``backward`` (use
        :meth:`scale_loss`); gradients are rounded in scaled form and unscaled before the update.
    dynamic_loss_scale : bool, default False
        Skip steps whose (rounded) gradients are not all finite, halving
        ``loss_scale``; double it after ``growth_interval`` good steps in a row.
    growth_interval : int, default 1000

    Notes
    -----
    The accumulators (``accumulator=``) are copies of the weights taken when the wrapper is built
    (and by :meth:`add_param_group` and :meth:`load_state_dict`), as in QPyTorch:
    a change of the weights made outside :meth:`step` (the model's
    ``load_state_dict``, a re-initialisation, ``.double()`` or ``.to()``) is
    overwritten at the next step by the accumulator, in its dtype and device.
    Make such changes before building the OptimLP, or build it again after them
    (``OptimLP(opt.optimizer, ...)`` keeps the wrapped optimizer's state).
    Step, state-dict and load-state-dict hooks registered on the wrapper run
    as torch.optim.Optimizer runs them (the global step hooks run in the
    wrapped optimizer's step); a copy (``copy.deepcopy``, pickle) has no hooks,
    as a plain optimizer's.
    """

    def __init__(self, optimizer: torch.optim.Optimizer, weight: Any = None, grad: Any = None,
                 state: Any = None, accumulator: Any = None, *, loss_scale: float = 1.0,
                 dynamic_loss_scale: bool = False, growth_interval: int = 1000):
        # The wrapper shares the wrapped optimizer's groups, state and defaults (see the
        # properties below) instead of calling Optimizer.__init__, which would copy them.
        if not isinstance(optimizer, torch.optim.Optimizer):
            raise TypeError(f"OptimLP wraps a torch.optim.Optimizer, not {type(optimizer).__name__}.")
        closure = inspect.signature(optimizer.step).parameters.get("closure")
        if closure is not None and closure.default is inspect.Parameter.empty:
            raise TypeError(f"OptimLP rounds the gradients once per step, after one call of the closure; "
                            f"{type(optimizer).__name__}.step needs a closure that it calls again within the step "
                            "(as torch.optim.LBFGS does), whose gradients it could not round.")
        if not (isinstance(loss_scale, (int, float)) and math.isfinite(loss_scale) and loss_scale > 0):
            raise ValueError(f"loss_scale must be a finite positive number, got {loss_scale!r}.")
        self.optimizer = optimizer
        self.weight_rounder = as_rounder(weight, "weight")
        self.grad_rounder = as_rounder(grad, "grad")
        self.accumulator_rounder = as_rounder(accumulator, "accumulator")
        if isinstance(state, dict):
            self.state_rounders: Union[Rounder, Dict[str, Optional[Rounder]], None] = {
                key: as_rounder(value, f"state[{key!r}]") for key, value in state.items()}
        else:
            self.state_rounders = as_rounder(state, "state")
        self.loss_scale = float(loss_scale)
        self.dynamic_loss_scale = bool(dynamic_loss_scale)
        self.growth_interval = int(growth_interval)
        self.good_steps = 0
        self.skipped_steps = 0
        self.accumulators: Dict[torch.Tensor, torch.Tensor] = {}
        self._add_accumulators(self._params())
        self._new_hooks()

    def _new_hooks(self) -> None:
        # Ordered, as Optimizer.__init__ makes them: registering a hook with prepend=True moves it first.
        for hooks in _HOOKS:
            setattr(self, f"_optimizer_{hooks}_hooks", OrderedDict())

    # Copies and pickles hold everything but the hooks and a learning-rate scheduler's wrapper of
    # step (which would step the original), as a plain optimizer's.  Not Optimizer's __setstate__:
    # it expects Optimizer.__init__'s attributes and wraps step for the whole class.
    def __getstate__(self) -> dict:
        dropped = {"step", *(f"_optimizer_{name}_hooks" for name in _HOOKS)}
        return {name: value for name, value in self.__dict__.items() if name not in dropped}

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)
        self._new_hooks()

    # The wrapped optimizer's groups, state and defaults.
    param_groups = _shared("param_groups")
    state = _shared("state")
    defaults = _shared("defaults")

    def _params(self) -> Iterable[torch.Tensor]:
        for group in self.optimizer.param_groups:
            yield from group["params"]

    def __repr__(self) -> str:
        return f"OptimLP({self.optimizer!r})"

    # --- training ---------------------------------------------------------------------------
    def scale_loss(self, loss: torch.Tensor) -> torch.Tensor:
        """``loss * loss_scale``: call ``backward`` on this when using loss scaling."""
        return loss * self.loss_scale

    def zero_grad(self, set_to_none: bool = True) -> None:
        """The wrapped optimizer's ``zero_grad``."""
        self.optimizer.zero_grad(set_to_none=set_to_none)

    def add_param_group(self, param_group: dict) -> None:
        """The wrapped optimizer's ``add_param_group`` (with accumulators for the new weights)."""
        self.optimizer.add_param_group(param_group)
        self._add_accumulators(self.optimizer.param_groups[-1]["params"])

    def _add_accumulators(self, params: Iterable[torch.Tensor]) -> None:
        if self.accumulator_rounder is not None:
            with torch.no_grad():
                for p in params:
                    self.accumulators[p] = self.accumulator_rounder(p.detach().clone())

    @overload
    def step(self, closure: None = None) -> None: ...

    @overload
    def step(self, closure: Callable[[], _Loss]) -> _Loss: ...

    @_with_step_hooks
    @torch.no_grad()
    def step(self, closure: Optional[Callable[[], _Loss]] = None) -> Optional[_Loss]:
        """One optimization step (see the class notes), between the step hooks registered on this
        wrapper; returns the closure's loss, if any."""
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        with_grad = [(p, p.grad) for p in self._params() if p.grad is not None]
        params = [p for p, _ in with_grad]
        finite = True
        for p, grad in with_grad:
            g = grad if self.grad_rounder is None else _rounded_gradient(self.grad_rounder, grad)
            if self.loss_scale != 1.0:
                g = g / self.loss_scale
            grad.copy_(g)
            if self.dynamic_loss_scale and finite:
                finite = bool(torch.isfinite(g.coalesce().values() if g.is_sparse else g).all())
        if not finite:
            self.loss_scale /= 2.0
            self.good_steps = 0
            self.skipped_steps += 1
            return loss
        if self.accumulator_rounder is not None:
            for p in params:
                p.data = self.accumulators[p]  # the optimizer updates the accumulator in place
        self.optimizer.step()
        self._round_state()
        for p in params:
            if self.accumulator_rounder is not None:
                master = self.accumulator_rounder(p.data)
                self.accumulators[p] = master
                p.data = self.weight_rounder(master) if self.weight_rounder is not None else master.clone()
            elif self.weight_rounder is not None:
                p.copy_(self.weight_rounder(p))
        if self.dynamic_loss_scale:
            self.good_steps += 1
            if self.good_steps >= self.growth_interval:
                self.loss_scale *= 2.0
                self.good_steps = 0
        return loss

    def _round_state(self) -> None:
        if self.state_rounders is None:
            return
        for per_param in self.optimizer.state.values():
            for key, value in per_param.items():
                rounder = self.state_rounders.get(key) if isinstance(self.state_rounders, dict) else self.state_rounders
                # 'step' counts steps (a float tensor in Adam): a count, not a number to round.
                if rounder is not None and key != "step" and torch.is_tensor(value) and value.is_floating_point():
                    value.copy_(rounder(value))

    # --- persistence --------------------------------------------------------------------------
    def state_dict(self) -> dict:
        """The wrapped optimizer's state dict, the accumulators (in parameter order) and the loss scale
        (after this wrapper's state-dict pre-hooks, through its post-hooks, as in torch.optim.Optimizer)."""
        for pre_hook in list(self._optimizer_state_dict_pre_hooks.values()):
            pre_hook(self)
        params = list(self._params())
        state_dict = {
            "optimizer": self.optimizer.state_dict(),
            "accumulators": [self.accumulators[p].clone() for p in params] if self.accumulators else None,
            "loss_scale": self.loss_scale,
            "good_steps": self.good_steps,
            "skipped_steps": self.skipped_steps,
        }
        for post_hook in list(self._optimizer_state_dict_post_hooks.values()):
            result = post_hook(self, state_dict)
            if result is not None:
                state_dict = result
        return state_dict

    def load_state_dict(self, state_dict: dict) -> None:
        """Restore what :meth:`state_dict` saved (the same parameters in the same order), between this
        wrapper's load-state-dict pre- and post-hooks, as in torch.optim.Optimizer."""
        state_dict = state_dict.copy()  # (shallow, as torch's: a pre-hook may change its entries)
        for pre_hook in list(self._optimizer_load_state_dict_pre_hooks.values()):
            result = pre_hook(self, state_dict)
            if result is not None:
                state_dict = result
        missing = {"optimizer", "accumulators", "loss_scale"} - set(state_dict)
        if missing:
            raise ValueError(f"Not an OptimLP state dict: missing {sorted(missing)}.")
        self.optimizer.load_state_dict(state_dict["optimizer"])
        saved = state_dict["accumulators"]
        if (saved is None) != (self.accumulator_rounder is None):
            raise ValueError("The state dict and this OptimLP disagree on having an accumulator.")
        if saved is not None:
            params = list(self._params())
            if len(saved) != len(params):
                raise ValueError(f"The state dict has {len(saved)} accumulators for {len(params)} parameters.")
            self.accumulators = {p: a.to(device=p.device, dtype=p.dtype).clone() for p, a in zip(params, saved)}
        self.loss_scale = float(state_dict["loss_scale"])
        self.good_steps = int(state_dict.get("good_steps", 0))
        self.skipped_steps = int(state_dict.get("skipped_steps", 0))
        for post_hook in list(self._optimizer_load_state_dict_post_hooks.values()):
            post_hook(self)
