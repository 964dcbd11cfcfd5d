"""``chopped(x, options)``: the entry point, above the chopped types it picks from by x's library
(:mod:`.array` for NumPy and CuPy, :mod:`.torch_tensor`, :mod:`.jax_array`)."""

from __future__ import annotations

import numbers
from typing import TYPE_CHECKING, Any, Union

import array_api_compat
import numpy as np

from .array import ChoppedArray, ChoppedOperand, ChoppedScalar, chopped_result, plain_values, wrap
from ..hardware import BlockFMA
from .context import Arithmetic, OptionsLike
from .jax_array import ChoppedJax, chopped_jax
from .torch_tensor import chopped_tensor

if TYPE_CHECKING:
    import jax
    import torch

__all__ = ["chopped"]


def chopped(x: Union[ChoppedOperand, torch.Tensor, jax.Array],
            options: Union[OptionsLike, Arithmetic] = None, *, strict: bool = False,
            mismatch: str = "error", method: str = "recursive", block_size: int = 32,
            rng: Any = None, hardware: Union[None, str, BlockFMA] = None,
            **kwargs: Any) -> Union[ChoppedArray, ChoppedScalar, torch.Tensor, ChoppedJax]:
    """Values in a low-precision format whose every arithmetic operation rounds.

    Parameters
    ----------
    x : array_like, float, ChoppedArray or ChoppedScalar
        The values; they are rounded to the format (one chop call).  A Python
        number (not a bool) or a NumPy integer, float16 or float64 scalar gives
        a :class:`ChoppedScalar`, anything else a :class:`ChoppedArray`
        (float32 data stays float32, the rest float64).  So a NumPy float32
        scalar gives a 0-d ChoppedArray: a ChoppedScalar holds a Python float
        and computes in float64, the 0-d array keeps float32 storage and
        arithmetic, as ``chop`` keeps float32.  A bool (Python or NumPy) is
        taken as data, as ``np.asarray`` takes it, not as a number: a 0-d
        float64 ChoppedArray.  ``np.longdouble`` data is refused, as ``chop``
        refuses it (converting it to float64 first would round twice).
    options : chop options, str, Arithmetic or None, optional
        Anything :class:`pychop_compat.Chop` accepts, or a format name
        (``'h'``, ``'bfloat16'``, ``'q43'``, ...), or an :class:`Arithmetic`.
        ``None``: the persistent chop options as they are now.
    strict, mismatch, method, block_size, rng, hardware, **kwargs
        See :class:`Arithmetic` (``hardware='H100'``: matrix products as
        that GPU's matrix units compute them; ``rng``: an integer seed for the
        counter-based generator, a new counter at each call, or a NumPy ``Generator``; pass one
        :class:`Arithmetic` around to share one counter).

    Returns
    -------
    ChoppedArray, ChoppedScalar, chopped torch tensor or ChoppedJax
        A :class:`ChoppedArray` for NumPy and CuPy data (CuPy arrays stay on
        their device), a chopped tensor for torch
        (:mod:`~pychop_compat.arithmetic.torch_tensor`), a
        :class:`~pychop_compat.arithmetic.jax_array.ChoppedJax` for JAX.

    Raises
    ------
    TypeError
        For data that is not real numbers, ``np.longdouble`` data (arrays and
        scalars) and NumPy masked arrays.

    Examples
    --------
    >>> import numpy as np
    >>> from pychop_compat import chopped
    >>> x = chopped(np.array([1.0, 2.0, 3.0]), 'h')
    >>> y = x / 3 + 1e-3           # each operation rounded to fp16
    >>> y.values.tolist()
    [0.334228515625, 0.66748046875, 1.0009765625]
    >>> float(chopped(np.ones(4096), 'h').sum())   # recursive summation stagnates
    2048.0
    """
    if isinstance(options, Arithmetic):
        if kwargs:
            raise TypeError("give options either as an Arithmetic or as chop options, not both")
        arith = options
        if rng is not None:
            raise TypeError("give rng= to the Arithmetic, not with one")
        if (strict, mismatch, method, block_size, hardware) != (False, "error", "recursive", 32, None):
            arith = arith.with_settings(strict=strict, mismatch=mismatch, method=method,
                                        block_size=block_size, hardware=hardware)
    else:
        arith = Arithmetic.of(options, strict=strict, mismatch=mismatch, method=method,
                              block_size=block_size, rng=rng, hardware=hardware, **kwargs)
    if isinstance(x, (ChoppedArray, ChoppedScalar)):
        x = plain_values(x)
    elif isinstance(x, ChoppedJax):
        x = x.values  # (rounded again to the new format, as a chopped NumPy array's values are)
    if array_api_compat.is_torch_array(x):
        if arith.rng is not None:
            raise NotImplementedError("chopped torch tensors draw as chop does; rng= (a counter or a "
                                      "generator) is implemented for NumPy and JAX chopped arrays.")

        return chopped_tensor(x, arith)
    if array_api_compat.is_jax_array(x):
        return chopped_jax(x, arith)
    if isinstance(x, (numbers.Real, np.floating, np.integer)) and not isinstance(x, (bool, np.bool_)) \
            and not (isinstance(x, np.generic) and x.dtype == np.float32):
        # A NumPy scalar goes in as it is (store refuses np.longdouble, which float() would round first).
        return chopped_result(arith.store(x if isinstance(x, np.generic) else float(x)), arith, True)
    return wrap(arith.store(x), arith)
