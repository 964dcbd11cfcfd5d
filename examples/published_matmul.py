"""Matrix multiplication in simulated fp16: published and computed error bounds.

The experiment of Higham & Pranesh, "Simulating Low Precision Floating-Point
Arithmetic", SIAM J. Sci. Comput. 41(5), C585-C602, 2019 (sec. 6, matrix
multiplication), ported line by line from ``MainScripts/matmult.m`` of
github.com/SrikaraPranesh/LowPrecision_Simulation.  After ``rng(1)``, for
``n = 500:500:2500``, ``A = chop(rand(n))`` and ``B = chop(rand(n))`` in fp16;
``C = A*B`` in double; ``C64 = chop(A*B)`` (one rounding of the double
product) and ``C16`` accumulated in fp16 as a sum of chopped outer products,
``C16 = chop(C16 + chop(A(:,i)*B(i,:)))``.  The published quantities are the
componentwise errors ``cbe = max(max(|C - Cx| ./ (|A|*|B|)))``.

The published numbers are those that the script's authors pasted, as MATLAB
displayed them (five significant digits), into the comment block at the end
of ``matmult.m`` (commit 126f8cd, 2019-03-20), under "rpts = 1, A =
chop(rand(n)); B = chop(rand(n))"; computed values are compared after
formatting them the same way.  ``rand`` is MATLAB's Mersenne Twister stream
(``pychop_compat.rng``/``rand``), so the matrices are the same as in MATLAB.
``C = A*B`` is a double-precision BLAS product whose summation order differs
from MATLAB's; its rounding errors (about 1e-16 relative) are far below the
printed digits.

The study used chop as of 2019-03-20.  With round to nearest and
subnormals kept, that chop and today's agree on every number here
(``chop_at('2019-03-20')`` is checked against today's ``chop`` at ``n = 500``
in the tests); today's ``chop`` is used for speed.

Run ``python examples/published_matmul.py`` (a few minutes; the ``n = 2500``
accumulation rounds 2500 matrices of 6.25 million entries twice each) or
``--quick`` for ``n = 500`` and 1000 only.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Callable, Sequence

import numpy as np

try:
    import pychop_compat  # noqa: F401
except ImportError:  # running from a source checkout
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from pychop_compat import chop, clear_chop, rand, rng

SOURCE = ("github.com/SrikaraPranesh/LowPrecision_Simulation, MainScripts/matmult.m "
          "(commit 126f8cd), closing comment block, case rpts = 1 with rand")

NVALS = (500, 1000, 1500, 2000, 2500)

#: ``cbe64`` as displayed in the published comment (C64 = chop(A*B)).
PUBLISHED_CBE64 = ("4.8759e-04", "4.8799e-04", "3.6660e-04", "4.8803e-04", "4.2930e-04")
#: ``cbe16`` as displayed in the published comment (fp16 accumulation).
PUBLISHED_CBE16 = ("1.1945e-02", "2.3047e-02", "4.0701e-02", "4.5976e-02", "6.8770e-02")

#: The date of chop the study used (the commit that added the numbers).
STUDY_DATE = "2019-03-20"


def displayed(x: float) -> str:
    """MATLAB's ``format short e`` display of a positive double: five significant digits."""
    return f"{x:.4e}"


def errors(ch: Callable = chop, nvals: Sequence[int] = NVALS, accumulate_upto: int = max(NVALS),
           seed: int = 1) -> dict:
    """``{n: (cbe64, cbe16 or None)}``, drawing the matrices for every n in order.

    ``cbe16`` (the fp16 accumulation) is computed only for ``n <= accumulate_upto``;
    the matrices are drawn for every ``n`` in ``nvals`` so that later ones are
    the script's.
    """
    rng(seed)
    ch([], {"format": "h"})
    out = {}
    for n in nvals:
        A = ch(rand(n))
        B = ch(rand(n))
        C = A @ B
        C64 = ch(A @ B)
        scale = np.abs(A) @ np.abs(B)
        cbe64 = float(np.max(np.abs(C - C64) / scale))
        cbe16 = None
        if n <= accumulate_upto:
            C16 = np.zeros((n, n))
            for i in range(n):
                C16 = ch(C16 + ch(np.outer(A[:, i], B[i, :])))
            cbe16 = float(np.max(np.abs(C - C16) / scale))
        out[n] = (cbe64, cbe16)
    return out


def main(nvals: Sequence[int] = NVALS, verbose: bool = True) -> dict:
    """Print published and computed errors side by side.

    Parameters
    ----------
    nvals : sequence of int
        A leading part of NVALS (the random matrices are drawn in order).
    verbose : bool
        Print the table.

    Returns
    -------
    dict
        ``{n: (cbe64, cbe16)}`` as displayed (strings), computed with today's chop.
    """
    nvals = list(nvals)
    if nvals != list(NVALS[:len(nvals)]):
        raise ValueError(f"nvals must be a leading part of {NVALS}, got {nvals}")
    computed = {n: (displayed(a), displayed(b)) for n, (a, b) in errors(chop, nvals).items()}
    clear_chop()  # leave today's chop with no persistent options, as found
    if verbose:
        print(f"Published: {SOURCE}")
        print("'!' marks a number that differs from the published one")
        print(f"{'n':>5}  {'cbe64 publ.':>11}  {'computed':>11}   {'cbe16 publ.':>11}  {'computed':>11}")
        same = 0
        for j, n in enumerate(nvals):
            c64, c16 = computed[n]
            p64, p16 = PUBLISHED_CBE64[j], PUBLISHED_CBE16[j]
            same += (c64 == p64) + (c16 == p16)
            print(f"{n:>5}  {p64:>11}  {c64:>11}{'' if c64 == p64 else '!':1}  "
                  f"{p16:>11}  {c16:>11}{'' if c16 == p16 else '!':1}")
        print(f"{same} of {2 * len(nvals)} displayed numbers as published")
    return computed


if __name__ == "__main__":
    main(NVALS[:2] if "--quick" in sys.argv[1:] else NVALS)
