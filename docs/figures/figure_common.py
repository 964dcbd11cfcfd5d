"""Shared set-up of the figure scripts: a non-interactive backend, the package on the path, saving."""

from __future__ import annotations

import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))  # run from a source checkout without installing

import matplotlib  # noqa: E402  (the optional `docs` extra)

matplotlib.use("Agg")  # files only, no display
import matplotlib.pyplot as plt  # noqa: E402,F401


def save(fig, name: str, out_dir=None) -> Path:
    """Write ``fig`` as ``<out_dir>/<name>.png`` (default: this folder) and close it."""
    path = Path(out_dir or HERE) / f"{name}.png"
    fig.savefig(path, dpi=120, metadata={"Software": None})  # no version string: reruns give the same file
    plt.close(fig)
    return path
