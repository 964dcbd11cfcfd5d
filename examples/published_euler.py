"""Euler's method in simulated low precision: published and computed errors.

The experiment of Higham & Pranesh, "Simulating Low Precision Floating-Point
Arithmetic", SIAM J. Sci. Comput. 41(5), C585-C602, 2019 (sec. 6, the
figure of Euler's method), ported line by line from ``MainScripts/euler_exp.m``
of github.com/SrikaraPranesh/LowPrecision_Simulation.  Euler's method
``y_{i+1} = y_i + h*(-y_i)`` integrates ``y' = -y``, ``y(0) = 0.01`` over
[0, 1] with ``n = round(10.^linspace(1, 5, 16))`` steps, every operation
rounded by chop, in bfloat16, fp16 with and without subnormals and fp32; the
error at ``x = 1`` is ``|y_n - 0.01*exp(-1)|``.

The published numbers are the 64 errors (and the 16 double-precision errors)
stored in ``Results/euler_exp_results.mat`` of that repository (commit
4cb5b23, 2019-01-28; the file was written on 2019-01-24 by the repository's
own pre-release chop.m).  As in the script, ``a``, ``b`` and ``y0`` are
re-chopped at the start of each format, so from the first format (bfloat16)
on ``y0 = 0.010009765625``, while the exact solution uses ``0.01``.

Run ``python examples/published_euler.py`` (about three minutes: the first
release's rules, ``chop_at('2019-03-07')``, reproduce all 64; today's
``chop`` reproduces 61: it rounds values below fp16's ``xmin`` to ``xmin``
or 0 where the 2019 chop flushed them all to 0, which changes three results
of fp16 without subnormals).  ``--quick`` stops at ``n = 2512``.
"""

from __future__ import annotations

import math
import sys
from pathlib import Path
from typing import Callable, Sequence

try:
    import pychop_compat  # noqa: F401
except ImportError:  # running from a source checkout
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from pychop_compat import chop, chop_at, clear_chop

SOURCE = ("github.com/SrikaraPranesh/LowPrecision_Simulation, Results/euler_exp_results.mat "
          "(commit 4cb5b23), variables nrange, efp(:, 1:4) and edp")

#: Columns of ``efp``: (chop format, subnormal), in the script's order.
COLUMNS = (("bfloat16", 1), ("fp16", 1), ("fp16", 0), ("single", 1))
COLUMN_NAMES = ("bfloat16", "fp16", "fp16 no subn.", "fp32")

#: ``round(10.^linspace(1, 5, 16))`` as stored in the published file.
NRANGE = (10, 18, 34, 63, 117, 215, 398, 736, 1359, 2512, 4642, 8577, 15849, 29286, 54117, 100000)

#: ``efp(:, 1:4)`` of the published file, one row per entry of NRANGE (the
#: doubles as stored; ``efp(:, 5:8)`` holds stale columns of an older run
#: that the script does not write and the paper does not show).
PUBLISHED_EFP = (
    (0.0001692729273394234, 0.0001864390650347359, 0.0001864390650347359, 0.00018860462285136053),
    (0.0001234965601519234, 9.870102792536089e-05, 9.870102792536089e-05, 0.00010113154701446364),
    (4.720261483942339e-05, 5.101731210504839e-05, 5.101731210504839e-05, 5.123314611171553e-05),
    (0.0001359028539105766, 2.6221779878485892e-05, 0.0001530689916058891, 2.5828296090710853e-05),
    (0.0004105610570355766, 1.0962990815985892e-05, 0.0034279865941449516, 1.2197691719282363e-05),
    (0.0005507426539019234, 8.110495512139108e-06, 0.006330971213285576, 4.987392346609328e-06),
    (0.006330971213285576, 4.529526620661089e-05, 0.006330971213285576, 1.0360234931595068e-06),
    (0.006330971213285576, 3.3335962847358923e-06, 0.006330971213285576, 1.0922814204805155e-06),
    (0.006330971213285576, 8.821913809026411e-05, 0.006330971213285576, 2.2385066791885157e-06),
    (0.006330971213285576, 0.005964760275785576, 0.006330971213285576, 2.8587675138824244e-06),
    (0.006330971213285576, 0.006330971213285576, 0.006330971213285576, 3.1942764713876505e-06),
    (0.006330971213285576, 0.006330971213285576, 0.006330971213285576, 3.375884373437669e-06),
    (0.006330971213285576, 0.006330971213285576, 0.006330971213285576, 3.4750702276342173e-06),
    (0.006330971213285576, 0.006330971213285576, 0.006330971213285576, 3.5244303240888376e-06),
    (0.006330971213285576, 0.006330971213285576, 0.006330971213285576, 3.582405154358651e-06),
    (0.006330971213285576, 0.006330971213285576, 0.006330971213285576, 3.6604034199826975e-06),
)

#: ``edp`` of the published file: the same method in plain double precision.
PUBLISHED_EDP = (
    0.00019201001071442268, 0.00010462204376778797, 5.477282085777522e-05, 2.9391427788751177e-05,
    1.5777571749092754e-05, 8.571954608822731e-06, 4.62644546620275e-06, 2.500596792433512e-06,
    1.3539082920586976e-06, 7.323655924983651e-07, 3.962865851537753e-07, 2.144673624717569e-07,
    1.1606067034644271e-07, 6.280896597829835e-08, 3.398952946962602e-08, 1.839404877327852e-08,
)

#: The date of chop whose rules the study's numbers follow: the first release
#: (the numbers predate it; its rounding of tiny numbers is the pre-release one).
STUDY_DATE = "2019-03-07"


def nrange() -> list[int]:
    """``round(10.^linspace(1, 5, 16))``: MATLAB's ``round`` rounds halves away from 0."""
    return [int(math.floor(10.0 ** (1 + 4 * i / 15) + 0.5)) for i in range(16)]


def double_errors(nvalues: Sequence[int] = NRANGE) -> list[float]:
    """The script's ``edp``: Euler's method in double precision."""
    a, b, y0 = 0.0, 1.0, 1e-2
    yexact = math.exp(-1) * y0
    errors = []
    for n in nvalues:
        x, h, y = a, (b - a) / n, y0
        for _ in range(n):
            y = y + h * -y
            x = x + h
        errors.append(abs(y - yexact))
    return errors


def chopped_errors(ch: Callable = chop, nvalues: Sequence[int] = NRANGE) -> list[list[float]]:
    """The script's ``efp``: one row per ``n``, one column per entry of COLUMNS.

    ``ch`` is the chop to use (``chop`` or a ``chop_at(date)`` function); its
    persistent options are set once per format, as the script does.
    """
    a, b, y0 = 0.0, 1.0, 1e-2
    yexact = math.exp(-1) * y0
    efp = [[0.0] * len(COLUMNS) for _ in nvalues]
    for k, (fmt, subnormal) in enumerate(COLUMNS):
        ch([], {"format": fmt, "subnormal": subnormal})
        a, b, y0 = ch(a), ch(b), ch(y0)  # re-chopped per format, as in the script
        for j, n in enumerate(nvalues):
            x = ch(a)
            h = ch((b - a) / n)
            y = ch(y0)
            for _ in range(n):
                y = ch(y + ch(h * -y))  # feuler(x, y) = -y
                x = ch(x + h)
            efp[j][k] = float(abs(y - yexact))
    return efp


def main(max_n: int | None = None, verbose: bool = True) -> dict:
    """Print published and computed errors side by side.

    Parameters
    ----------
    max_n : int or None
        Only the step counts up to this (None: all 16).
    verbose : bool
        Print the table.

    Returns
    -------
    dict
        ``{'nrange', 'published', 'study', 'today', 'double'}``: the step
        counts and the error tables (published, ``chop_at(STUDY_DATE)``,
        today's ``chop``, double precision).
    """
    nvalues = [n for n in NRANGE if max_n is None or n <= max_n]
    rows = len(nvalues)
    study = chopped_errors(chop_at(STUDY_DATE), nvalues)
    today = chopped_errors(chop, nvalues)
    clear_chop()  # leave today's chop with no persistent options, as found
    double = double_errors(nvalues)
    published = [list(r) for r in PUBLISHED_EFP[:rows]]
    if verbose:
        print(f"Published: {SOURCE}")
        print(f"'=' the same double as published, '!' a different one; study = chop_at('{STUDY_DATE}')")
        for k, name in enumerate(COLUMN_NAMES):
            print(f"\n{name}")
            print(f"{'n':>7}  {'published':>23}  {'study':>23}   {'today chop':>23}")
            for j, n in enumerate(nvalues):
                p, s, t = published[j][k], study[j][k], today[j][k]
                print(f"{n:>7}  {p:23.17g}  {s:23.17g} {'=' if s == p else '!'} "
                      f"{t:23.17g} {'=' if t == p else '!'}")
        print("\nfp64 (no chop)")
        for j, n in enumerate(nvalues):
            p, d = PUBLISHED_EDP[j], double[j]
            print(f"{n:>7}  {p:23.17g}  {d:23.17g} {'=' if d == p else '!'}")
        count = rows * len(COLUMNS)
        n_study = sum(s == p for rs, rp in zip(study, published) for s, p in zip(rs, rp))
        n_today = sum(t == p for rt, rp in zip(today, published) for t, p in zip(rt, rp))
        n_double = sum(d == p for d, p in zip(double, PUBLISHED_EDP))
        print(f"\nidentical to the published doubles: chop_at('{STUDY_DATE}') {n_study} of {count}, "
              f"today's chop {n_today} of {count}, double {n_double} of {rows}")
    return {"nrange": nvalues, "published": published, "study": study, "today": today,
            "double": double}


if __name__ == "__main__":
    main(max_n=2512 if "--quick" in sys.argv[1:] else None)
