"""Make every figure of the documentation: ``python docs/figures/make_all.py [--quick]``.

Each script beside this one has ``main(out_dir=None, quick=False)`` and
writes its PNG here.  ``--quick`` uses small sizes (for the test suite; the
committed PNGs are made without it).  Needs matplotlib (the ``docs`` extra).

There is no GPU figure yet: the GPU measurements of 2026-11-26 (one H100) are
stored in ``benchmarks/results/gpu_2026-11-26_h100`` and tabulated in
``docs/performance.rst``; no script draws them yet.
"""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

SCRIPTS = ["cpu_speed", "harmonic_sr", "ir_convergence", "numbers_error"]


def main(out_dir=None, quick: bool = False) -> list:
    made = []
    for name in SCRIPTS:
        made += importlib.import_module(name).main(out_dir=out_dir, quick=quick)
    return made


if __name__ == "__main__":
    print(*main(quick="--quick" in sys.argv[1:]), sep="\n")
