"""Make every figure of the documentation, or check the committed ones.

``python docs/figures/make_all.py [--quick]`` runs each script beside this
one: each has ``data(quick=False)`` (what the figure plots, as plain numbers)
and ``main(out_dir=None, quick=False)``, which writes ``<name>.png`` and the
data as ``<name>.json`` here.  ``--quick`` uses small sizes (for the test
suite; the committed files are made without it).  Needs matplotlib (the
``docs`` extra).

``python docs/figures/make_all.py --check`` draws nothing: it recomputes each
script's data and compares it with the committed JSON (see :func:`check`),
and exits with status 1 when a figure is stale.

There is no GPU figure yet: the GPU measurements of 2026-11-26 (one H100) are
stored in ``benchmarks/results/gpu_2026-11-26_h100`` and tabulated in
``docs/performance.rst``; no script draws them yet.
"""

from __future__ import annotations

import importlib
import json
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from figure_common import differences, plain  # noqa: E402

SCRIPTS = ["cpu_speed", "gemm_error", "harmonic_sr", "ir_convergence", "numbers_error", "cg_ir_convergence",
           "ls_ir_convergence", "digits_training", "digits_hardware"]


def main(out_dir=None, quick: bool = False) -> list:
    made = []
    for name in SCRIPTS:
        made += importlib.import_module(name).main(out_dir=out_dir, quick=quick)
    return made


def check(name: str) -> list:
    """Compare a committed figure's data with what its script computes now.

    Parameters
    ----------
    name : str
        A figure of :data:`SCRIPTS`.

    Returns
    -------
    list of str
        The disagreements (empty: the committed ``<name>.png`` shows what the
        script gives).  Floats are compared with the script's ``RTOL`` and
        ``ATOL`` where it sets them, else to about six digits.
    """
    path = HERE / f"{name}.json"
    if not path.is_file():
        return [f"{path.name} is missing: run python docs/figures/{name}.py"]
    module = importlib.import_module(name)
    committed = json.loads(path.read_text())["data"]
    return differences(committed, plain(module.data()), rtol=getattr(module, "RTOL", 1e-5),
                       atol=getattr(module, "ATOL", 0.0), where=name)


if __name__ == "__main__":
    if "--check" in sys.argv[1:]:
        stale = {name: found for name in SCRIPTS if (found := check(name))}
        for name, found in stale.items():
            print(f"{name}: stale (rerun python docs/figures/{name}.py)", *found[:5], sep="\n  ")
        print("every figure matches its script" if not stale else f"{len(stale)} stale figure(s)")
        sys.exit(1 if stale else 0)
    print(*main(quick="--quick" in sys.argv[1:]), sep="\n")
