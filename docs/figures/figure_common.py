"""Shared set-up of the figure scripts: a non-interactive backend, the package on the path, saving.

Every figure script has ``data(quick=False)``, which computes (or reads) what
the figure plots and returns it as plain lists and numbers, and
``main(out_dir=None, quick=False)``, which plots that data and saves it with
:func:`save`: ``<name>.png`` and, beside it, ``<name>.json`` holding the same
data.  The JSON is what keeps a committed figure honest: ``make_all.py
--check`` (and ``tests/test_figures.py``) recompute ``data()`` and compare it
with the committed JSON using :func:`differences`, without looking at the PNG.
"""

from __future__ import annotations

import json
import math
import os
import sys
from pathlib import Path

# OpenBLAS chooses its kernels by CPU (Haswell's on AVX2 machines, SkylakeX's on AVX-512 ones), and
# they add a product's terms in different orders: the refinement figures' errors near the rounding
# floor (randsvd's QR, SciPy's reference LU) moved in the last digits between two CI machines.  One
# kernel set and one thread for every figure, set before NumPy loads OpenBLAS (each script imports
# this module first; tests/test_figures.py runs the check in a fresh process for the same reason).
os.environ.setdefault("OPENBLAS_CORETYPE", "Haswell")
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))  # run from a source checkout without installing

import matplotlib  # noqa: E402  (the optional `docs` extra)

matplotlib.use("Agg")  # files only, no display
import matplotlib.pyplot as plt  # noqa: E402,F401

SIGNIFICANT_DIGITS = 6  # floats in the JSON files: enough to draw, short enough to read in a diff


def plain(data):
    """A JSON-ready copy of ``data``, with every float rounded to :data:`SIGNIFICANT_DIGITS` digits.

    Parameters
    ----------
    data : dict, list, tuple, str, int, float, bool or None
        Nested containers of numbers and strings; NumPy scalars and arrays
        are accepted and turned into Python numbers and lists.

    Returns
    -------
    dict, list, str, int, float, bool or None
        The same structure made of Python built-ins only (tuples and arrays
        become lists), as :func:`json.dumps` writes it and :func:`json.loads`
        reads it back.
    """
    if hasattr(data, "tolist"):  # NumPy arrays and scalars
        data = data.tolist()
    if isinstance(data, dict):
        return {str(key): plain(value) for key, value in data.items()}
    if isinstance(data, (list, tuple)):
        return [plain(value) for value in data]
    if isinstance(data, float) and math.isfinite(data) and data != 0.0:
        return float(f"{data:.{SIGNIFICANT_DIGITS}g}")
    return data


def differences(committed, recomputed, rtol: float = 1e-6, atol: float = 0.0, where: str = "data") -> list:
    """Where two plotted data sets disagree: the test of a stale figure.

    Parameters
    ----------
    committed, recomputed : dict, list, str, int, float, bool or None
        The data read from a committed ``<name>.json`` and the data the
        script's ``data()`` gives now, both passed through :func:`plain`.
    rtol, atol : float, optional
        Floats agree when ``abs(a - b) <= atol + rtol * abs(b)``; NaNs agree
        with NaNs.  Everything else (keys, lengths, strings, integers,
        booleans) must be equal.
    where : str, optional
        The name of the top-level object in the messages.

    Returns
    -------
    list of str
        One line per disagreement (at most one per list), empty when the two
        agree.
    """
    if isinstance(committed, dict) and isinstance(recomputed, dict):
        if committed.keys() != recomputed.keys():
            return [f"{where}: keys {sorted(committed)} != {sorted(recomputed)}"]
        return [line for key in committed
                for line in differences(committed[key], recomputed[key], rtol, atol, f"{where}.{key}")]
    if isinstance(committed, list) and isinstance(recomputed, list):
        if len(committed) != len(recomputed):
            return [f"{where}: {len(committed)} values committed, {len(recomputed)} now"]
        for i, (a, b) in enumerate(zip(committed, recomputed)):
            found = differences(a, b, rtol, atol, f"{where}[{i}]")
            if found:
                return found
        return []
    floats = (int, float)
    if (isinstance(committed, floats) and isinstance(recomputed, floats)
            and not isinstance(committed, bool) and not isinstance(recomputed, bool)
            and (isinstance(committed, float) or isinstance(recomputed, float))):
        if math.isnan(committed) and math.isnan(recomputed):
            return []
        if abs(committed - recomputed) <= atol + rtol * abs(recomputed):
            return []
        return [f"{where}: {committed!r} committed, {recomputed!r} now"]
    if type(committed) is not type(recomputed) or committed != recomputed:
        return [f"{where}: {committed!r} committed, {recomputed!r} now"]
    return []


def save(fig, name: str, out_dir=None, data=None) -> Path:
    """Write ``fig`` as ``<out_dir>/<name>.png`` and ``data`` as ``<name>.json`` beside it; close ``fig``.

    Parameters
    ----------
    fig : matplotlib.figure.Figure
        The figure, closed after saving.
    name : str
        The figure's name: its script is ``<name>.py``.
    out_dir : path-like, optional
        Where to write (default: this folder, where the documentation takes
        the figures from).
    data : dict, optional
        What the figure plots, as the script's ``data()`` returned it; written
        through :func:`plain`.

    Returns
    -------
    pathlib.Path
        The PNG's path.
    """
    folder = Path(out_dir or HERE)
    path = folder / f"{name}.png"
    fig.savefig(path, dpi=120, metadata={"Software": None})  # no version string: reruns give the same file
    plt.close(fig)
    if data is not None:
        record = {"figure": name, "script": f"docs/figures/{name}.py", "data": plain(data)}
        (folder / f"{name}.json").write_text(_dumps(record) + "\n")
    return path


def _dumps(value, indent: str = "") -> str:
    """JSON with one key per line and each list of numbers or strings on one line (short diffs)."""
    inner = indent + " "
    if isinstance(value, dict) and value:
        items = (f"{inner}{json.dumps(key)}: {_dumps(item, inner)}" for key, item in value.items())
        return "{\n" + ",\n".join(items) + "\n" + indent + "}"
    if isinstance(value, list) and any(isinstance(item, (dict, list)) for item in value):
        return "[\n" + ",\n".join(inner + _dumps(item, inner) for item in value) + "\n" + indent + "]"
    return json.dumps(value)


def refinement_panels(panels: list, styles: tuple, legend, title, ylabels: tuple, suptitle: str,
                      xlim=None, floor: float = 1e-18):
    """The figure of a refinement study: per panel (a column), forward errors above and backward
    errors below, one line per run, against the refinement step, with double's unit roundoff dotted.

    Parameters
    ----------
    panels : list of dict
        Each with ``runs``, a list of dicts holding ``forward_error`` and ``backward_error``.
    styles : tuple of str
        Matplotlib format strings, one per run of a panel.
    legend, title : callable
        ``legend(run, row)``: a line's label (``row`` 0 above, 1 below); ``title(panel)``: a
        column's title.
    ylabels : tuple of str
        The labels of the upper and the lower row.
    suptitle : str
        The figure's title.
    xlim : tuple of float, optional
        The step axis's limits (default: integer ticks, as far as the runs go).
    floor : float, optional
        Where errors that are exactly 0 are drawn (log axes).

    Returns
    -------
    matplotlib.figure.Figure
    """
    from matplotlib.ticker import MaxNLocator

    fig, axes = plt.subplots(2, len(panels), figsize=(3.6 * len(panels), 6), squeeze=False, sharey="row")
    for col, panel in enumerate(panels):
        for run, style in zip(panel["runs"], styles):
            for row, key in ((0, "forward_error"), (1, "backward_error")):
                errors = [max(e, floor) for e in run[key]]
                axes[row, col].semilogy(range(len(errors)), errors, style, label=legend(run, row))
        for row in (0, 1):
            axes[row, col].axhline(2.0**-53, color="k", ls=":", lw=1)
            axes[row, col].set_xlabel("refinement step")
            if xlim is not None:
                axes[row, col].set_xlim(*xlim)
            else:
                axes[row, col].xaxis.set_major_locator(MaxNLocator(integer=True))
        axes[0, col].set_title(title(panel), fontsize=9)
        axes[0, col].legend(fontsize=7)
    axes[0, 0].set_ylabel(ylabels[0])
    axes[1, 0].set_ylabel(ylabels[1])
    fig.suptitle(suptitle, fontsize=9)
    fig.tight_layout()
    return fig


def iterations_legend(name_key: str, iterations_key: str):
    """A ``legend(run, row)`` for :func:`refinement_panels`: the run's name, and above also its
    status and inner iterations per step (``run[iterations_key]``, joined by ``+``)."""

    def legend(run: dict, row: int) -> str:
        if row:
            return run[name_key]
        return f"{run[name_key]} ({run['status']}; {'+'.join(map(str, run[iterations_key]))} its)"

    return legend


def every_run(d: dict) -> list:
    """The runs of all the panels of a refinement study's data, in order."""
    return [run for panel in d["panels"] for run in panel["runs"]]


def seed_band(histories: list) -> dict:
    """A training curve over seeds: per epoch the ``mean``, ``low`` and ``high`` of the histories.

    Parameters
    ----------
    histories : list of list of float
        One list of per-epoch values per seed, all of the same length.

    Returns
    -------
    dict
        ``{'mean': [...], 'low': [...], 'high': [...]}``, one value per epoch.
    """
    import statistics

    columns = list(zip(*histories))
    return {"mean": [statistics.mean(c) for c in columns], "low": [min(c) for c in columns],
            "high": [max(c) for c in columns]}
