"""Summing sum 1/k^2 in fp16, with and without subnormals: published and computed.

The experiment of Higham & Pranesh, "Simulating Low Precision Floating-Point
Arithmetic", SIAM J. Sci. Comput. 41(5), C585-C602, 2019 (sec. 6, the table
of the series sum), ported line by line from ``MainScripts/sum_series.m`` of
github.com/SrikaraPranesh/LowPrecision_Simulation: for ``nmax = 1e2 .. 1e5``
the sum ``sum_{k=1}^{nmax} 1/k^2`` is accumulated in fp16 from the smallest
term up, ``s1 = chop(s1 + chop(1/(nmax-k+1))^2)``, once with subnormals
(``subnormal = 1``) and once without (``subnormal = 0``).  (The script also
sums from the largest term up, into ``s2``, but prints only ``s1``; ``s2``
is left out here.)

The published numbers are the table the script wrote,
``Results/sum_series.txt`` of that repository (commit 4cb5b23, 2019-01-28,
made by the repository's own pre-release chop.m), printed as
``'%7.0f & %12.6e & %12.6e & %9.2e'``: nmax, the sum with subnormals, the sum
without, and their difference.  Computed sums are compared after the same
formatting; seven significant digits identify an fp16 number uniquely.

Run ``python examples/published_series.py`` (about two minutes: the first
release's rules, ``chop_at('2019-03-07')``, reproduce all 12 printed numbers;
today's ``chop`` reproduces the sums with subnormals and only the first sum
without, because it rounds terms below fp16's ``xmin`` to ``xmin`` or 0
where the 2019 chop flushed them to 0).  ``--quick`` stops at ``nmax = 1e3``.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Callable, Sequence

try:
    import pychop_compat  # noqa: F401
except ImportError:  # running from a source checkout
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from pychop_compat import chop, chop_at, clear_chop

SOURCE = "github.com/SrikaraPranesh/LowPrecision_Simulation, Results/sum_series.txt (commit 4cb5b23)"

#: The published table: nmax -> (sum with subnormals, sum without, difference),
#: as printed ('%12.6e', '%12.6e', '%9.2e', leading blanks removed).
PUBLISHED = {
    100: ("1.634766e+00", "1.634766e+00", "0.00e+00"),
    1000: ("1.643555e+00", "1.636719e+00", "6.84e-03"),
    10000: ("1.644531e+00", "1.636719e+00", "7.81e-03"),
    100000: ("1.644531e+00", "1.636719e+00", "7.81e-03"),
}

#: The date of chop whose rules the study's numbers follow (see published_euler.py).
STUDY_DATE = "2019-03-07"


def series_sums(ch: Callable = chop, nmaxes: Sequence[int] = tuple(PUBLISHED)) -> dict:
    """``{nmax: (s1 with subnormals, s1 without)}``, summed from the smallest term."""
    sums = {}
    for nmax in nmaxes:
        mysum = {}
        for subnormal in (0, 1):
            ch([], {"format": "h", "subnormal": subnormal})
            s1 = 0.0
            for k in range(1, nmax + 1):
                s1 = ch(s1 + ch(1 / (nmax - k + 1)) ** 2)
            mysum[subnormal] = float(s1)
        sums[nmax] = (mysum[1], mysum[0])
    return sums


def printed(with_subnormals: float, without: float) -> tuple[str, str, str]:
    """The script's ``fprintf`` of one row, blanks removed."""
    return (f"{with_subnormals:12.6e}".strip(), f"{without:12.6e}".strip(),
            f"{with_subnormals - without:9.2e}".strip())


def main(max_nmax: int | None = None, verbose: bool = True) -> dict:
    """Print the published and computed tables side by side.

    Parameters
    ----------
    max_nmax : int or None
        Only the rows up to this ``nmax`` (None: all four).
    verbose : bool
        Print the table.

    Returns
    -------
    dict
        ``{'study': {nmax: row}, 'today': {nmax: row}}`` with each row as
        printed (three strings), for ``chop_at(STUDY_DATE)`` and today's ``chop``.
    """
    nmaxes = [n for n in PUBLISHED if max_nmax is None or n <= max_nmax]
    study = {n: printed(*s) for n, s in series_sums(chop_at(STUDY_DATE), nmaxes).items()}
    today = {n: printed(*s) for n, s in series_sums(chop, nmaxes).items()}
    clear_chop()  # leave today's chop with no persistent options, as found
    if verbose:
        print(f"Published: {SOURCE}")
        print(f"study = chop_at('{STUDY_DATE}'); '!' marks a number that differs from the published one")
        for label, table in (("published", PUBLISHED), ("study", study), ("today chop", today)):
            print(f"\n{label}\n{'nmax':>7}  {'subnormals':>13}  {'no subnormals':>13}  {'difference':>10}")
            for n in nmaxes:
                marks = ["" if label == "published" or v == p else "!" for v, p in zip(table[n], PUBLISHED[n])]
                print(f"{n:>7}  " + "  ".join(f"{v + m:>13}" for v, m in zip(table[n], marks)))
        count = 3 * len(nmaxes)
        for label, table in (("chop_at('" + STUDY_DATE + "')", study), ("today's chop", today)):
            same = sum(v == p for n in nmaxes for v, p in zip(table[n], PUBLISHED[n]))
            print(f"{label}: {same} of {count} printed numbers as published")
    return {"study": study, "today": today}


if __name__ == "__main__":
    main(max_nmax=1000 if "--quick" in sys.argv[1:] else None)
