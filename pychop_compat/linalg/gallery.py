"""Test matrices."""

from __future__ import annotations

import math
from typing import Union

import numpy as np


def _haar(n: int, rng: np.random.Generator) -> np.ndarray:
    Q, R = np.linalg.qr(rng.standard_normal((n, n)))
    return Q * np.where(np.diag(R) < 0, -1.0, 1.0)


def randsvd(
    n: int, kappa: float, mode: int = 3, rng: Union[None, int, np.random.Generator] = None
) -> np.ndarray:
    """Random ``n x n`` matrix with 2-norm condition number ``kappa``.

    ``A = Q1 diag(sigma) Q2^T`` with Haar-distributed orthogonal ``Q1, Q2`` and
    ``max sigma = 1``, as MATLAB's ``gallery('randsvd', n, kappa, mode)``:
    mode 1, one large singular value; 2, one small singular value; 3 (default),
    geometrically distributed; 4, arithmetically distributed; 5, random with
    uniformly distributed logarithm.

    Examples
    --------
    >>> import numpy as np
    >>> from pychop_compat import linalg
    >>> A = linalg.randsvd(20, 1e6, rng=0)
    >>> bool(abs(np.linalg.cond(A) / 1e6 - 1) < 1e-6)
    True
    """
    rng = np.random.default_rng(rng)
    n = int(n)
    k = float(kappa)
    if n == 1:
        sigma = np.ones(1)
    elif mode == 1:
        sigma = np.r_[1.0, np.full(n - 1, 1 / k)]
    elif mode == 2:
        sigma = np.r_[np.ones(n - 1), 1 / k]
    elif mode == 3:
        sigma = k ** (-np.arange(n) / (n - 1))
    elif mode == 4:
        sigma = 1 - (1 - 1 / k) * np.arange(n) / (n - 1)
    elif mode == 5:
        sigma = np.exp(-rng.random(n) * math.log(k))
        sigma[np.argmax(sigma)], sigma[np.argmin(sigma)] = 1.0, 1 / k
    else:
        raise ValueError("mode must be 1, 2, 3, 4 or 5")
    return (_haar(n, rng) * sigma) @ _haar(n, rng).T
