"""Write the packed MATLAB reference corpus back out as MAT-files, for the MATLAB/Octave drivers.

Usage (from the repository root)::

    python tests/matlab_reference/export_corpus.py OUT_FOLDER

The corpus shipped with the package (``pychop_compat/data/matlab_reference``:
``manifest.json`` and ``arrays.npz``) is written in the MAT-file layout that it
was packed from by ``tools/pack_matlab_reference.py`` (the layout its README
describes), which ``run_reference.m`` reads and writes:

* ``chop/<id>.mat``: ``x``, ``format``, ``round``, ``subnormal``, ``explim``,
  ``params``, ``stream`` and the stored results ``c``, ``err``,
  ``n_consumed``, ``ret_params``; ``manifest.json`` lists the cases;
* ``roundit/roundit_r<mode>.mat``: ``x``, ``mode``, ``stream`` and ``y``,
  ``n_consumed``;
* ``float_params.mat``: ``names`` (one name per row, padded with blanks),
  ``vals``, ``columns``;
* ``matlab_native/verified_data.mat`` (``array``) and
  ``matlab_native/<format>_rmode_<round>_subnormal_<s>.mat`` (``emu_vals``,
  MATLAB's output for ``array``, times 1e-3 where s = 1);
* ``matlab_stream/chop/<id>.mat``: ``x``, ``seed``, ``format``, ``round``,
  ``subnormal``, ``flip``, ``p``, ``params`` and the stored ``c``, ``after``,
  ``state``; ``matlab_stream/manifest.json`` lists the cases;
* ``README.md``: the corpus's description.

Every value is written in the class and shape it has in the corpus (MATLAB's),
so the inputs are bit for bit the ones the stored outputs came from.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import scipy.io

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from pychop_compat.validation.corpora import load_corpus  # noqa: E402


def _matlab(value):
    """A corpus field as savemat should write it: None -> [], numbers -> 1x1 double."""
    if value is None:
        return np.zeros((0, 0))
    if isinstance(value, bool):
        return np.array([[float(value)]])
    if isinstance(value, (int, float)):
        return np.array([[float(value)]])
    if isinstance(value, list):
        return np.array([value], dtype=float)
    return value  # str and arrays as they are


def _case_fields(case, skip=("id", "t", "emax", "dtype", "shape")) -> dict:
    return {name: _matlab(case[name]) for name in case if name not in skip}


CHOP_MANIFEST = ("id", "format", "t", "emax", "dtype", "round", "subnormal", "explim", "shape")
STREAM_MANIFEST = ("id", "seed", "format", "round", "flip", "p", "subnormal", "shape")


def export(out: Path) -> dict:
    corpus = load_corpus("matlab_reference")
    out.mkdir(parents=True, exist_ok=True)
    counts: dict[str, int] = {}

    (out / "chop").mkdir(exist_ok=True)
    manifest = []
    for case in corpus.cases("chop"):
        scipy.io.savemat(out / "chop" / f"{case.id}.mat", _case_fields(case), oned_as="column")
        manifest.append({name: case[name] for name in CHOP_MANIFEST})
    (out / "manifest.json").write_text(json.dumps(manifest, indent=1) + "\n")
    counts["chop"] = len(manifest)

    (out / "matlab_stream" / "chop").mkdir(parents=True, exist_ok=True)
    manifest = []
    for case in corpus.cases("matlab_stream"):
        scipy.io.savemat(out / "matlab_stream" / "chop" / f"{case.id}.mat", _case_fields(case), oned_as="column")
        manifest.append({name: case[name] for name in STREAM_MANIFEST})
    (out / "matlab_stream" / "manifest.json").write_text(json.dumps(manifest, indent=1) + "\n")
    counts["matlab_stream"] = len(manifest)

    (out / "roundit").mkdir(exist_ok=True)
    for case in corpus.cases("roundit"):
        scipy.io.savemat(out / "roundit" / f"{case.id}.mat", _case_fields(case), oned_as="column")
    counts["roundit"] = len(corpus.cases("roundit"))

    (out / "matlab_native").mkdir(exist_ok=True)
    native = corpus.cases("matlab_native")
    scipy.io.savemat(out / "matlab_native" / "verified_data.mat", {"array": native[0]["array"]})
    for case in native:
        scipy.io.savemat(out / "matlab_native" / f"{case.id}.mat", {"emu_vals": case["emu_vals"]})
    counts["matlab_native"] = len(native)

    rows = corpus.cases("float_params")
    width = max(len(case.id) for case in rows)
    scipy.io.savemat(out / "float_params.mat", {
        "names": np.array([case.id.ljust(width) for case in rows]),
        "vals": np.array([case["vals"] for case in rows]),
        "columns": " ".join(rows[0]["columns"]),
    })
    counts["float_params"] = len(rows)

    # The packed README is the packing note followed by the corpus's own README.
    readme = (corpus.folder / "README.md").read_text()
    (out / "README.md").write_text(readme[readme.index("# MATLAB `chop` reference corpus"):])
    return counts


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    written = export(Path(sys.argv[1]))
    print(", ".join(f"{group}: {n}" for group, n in written.items()), "cases ->", sys.argv[1])
