"""A reproducible parallel study with stochastic rounding.

Each task is one trial: add ``0.001`` to a running sum ``n`` times in fp16,
rounding after every addition.  Round to nearest stagnates (near 4, half an
fp16 ulp is 2^-9 > 0.001, so every addition rounds back); stochastic rounding
(``round = 5``) is unbiased, so the trials scatter around the exact sum.

The rule that makes it reproducible: **every task seeds its own generator
from (base seed, task number)**, never from the process it happens to run
in.  Then the results are the same with 1 or 8 processes, in any scheduling
order, with ``fork``, ``spawn`` or ``forkserver``, and each trial can be
rerun alone.  Two ways:

* ``source='matlab'``: ``rng(seed)`` in the task, then ``chop`` draws from
  MATLAB's stream, so a MATLAB script with the same ``rng(seed)`` reproduces
  the trial bit for bit;
* ``source='generator'``: a ``Chop(options, rng=Generator)`` per task, with
  seeds from :class:`numpy.random.SeedSequence` (independent streams, faster).

Without the per-task seed, a process started by ``fork`` would inherit the
parent's MATLAB stream and repeat its numbers; pychop_compat refuses that
draw (``ForkedStreamError``) instead of returning correlated results.

Run: ``python examples/parallel_study.py``.
"""

from __future__ import annotations

import multiprocessing
import statistics

import numpy as np

from pychop_compat import Chop, chop, rng

OPTIONS = {"format": "h", "round": 5}


def task_seed(base_seed: int, task: int) -> int:
    """A 32-bit seed for MATLAB's ``rng``, a function of (base seed, task) only."""
    return int(np.random.SeedSequence(base_seed, spawn_key=(task,)).generate_state(1)[0])


def trial(args) -> float:
    """One trial: the fp16 sum of ``n`` copies of 0.001 with stochastic rounding."""
    base_seed, task, n, source = args
    if source == "matlab":
        rng(task_seed(base_seed, task))           # this process's stream, seeded for this task
        add = lambda s: chop(s, OPTIONS)          # noqa: E731
    else:
        generator = np.random.default_rng(np.random.SeedSequence(base_seed, spawn_key=(task,)))
        add = Chop(OPTIONS, rng=generator)
    s = 0.0
    for _ in range(n):
        s = add(s + 0.001)
    return float(s)


def main(tasks: int = 8, processes: int = 2, n: int = 4096, base_seed: int = 2026,
         source: str = "matlab", start_method: str | None = None, verbose: bool = True) -> list:
    """Run the trials; the returned list depends on (tasks, n, base_seed, source) only."""
    work = [(base_seed, k, n, source) for k in range(tasks)]
    if processes == 1:
        sums = [trial(w) for w in work]
    else:
        with multiprocessing.get_context(start_method).Pool(processes) as pool:
            sums = pool.map(trial, work)
    if verbose:
        nearest = 0.0
        for _ in range(n):
            nearest = Chop(format="h")(nearest + 0.001)
        print(f"exact sum {n * 0.001:.4f}; round to nearest gives {nearest:.4f}")
        print(f"stochastic rounding, {tasks} trials ({source}): mean {statistics.fmean(sums):.4f}, "
              f"spread {statistics.pstdev(sums):.4f}")
        print("trials:", " ".join(f"{s:.4f}" for s in sums))
    return sums


if __name__ == "__main__":
    main()
