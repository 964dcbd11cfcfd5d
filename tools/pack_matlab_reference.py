"""Pack the MATLAB reference corpus (MAT-files) into the package's compact layout.

Usage::

    python tools/pack_matlab_reference.py SOURCE_FOLDER [DEST_FOLDER]

SOURCE_FOLDER is the MAT-file corpus (``chop/``, ``matlab_native/``,
``matlab_stream/``, ``roundit/``, ``float_params.mat``, ``manifest.json``,
``README.md``; see that README).  DEST_FOLDER defaults to
``pychop_compat/data/matlab_reference``.  The layout written is the one
:mod:`pychop_compat.validation.corpora` reads.  After writing, every case is read back
through :class:`pychop_compat.validation.corpora.Corpus` and compared with the MAT-file
it came from, field by field, array by array (dtype, shape and bits), so a
packed corpus is the original in another container.

Field conversions (each stated in the packed README):

* MATLAB 1-by-1 numbers become JSON numbers (integers where integral; every
  such value is an integer or a binary fraction that JSON keeps exactly);
* character arrays become strings (an empty one ``''``);
* ``params`` and ``ret_params`` become ``[t, emax]`` lists, or ``null`` where
  MATLAB had ``[]``;
* everything else stays an array with its class and MATLAB shape.
"""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path

import numpy as np
import scipy.io

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

SCALARS = {"round", "subnormal", "explim", "n_consumed", "flip", "p", "seed", "mode"}
STRINGS = {"format", "err"}
PAIRS = {"params", "ret_params"}

DESCRIPTIONS = {
    "chop": "chop(x, options) on 32-by-20 double and single inputs: every format name and alias, "
            "custom [t, emax], rounding modes 1-6, subnormal 0/1, explim 0/1; randfunc replays `stream`.",
    "matlab_native": "MATLAB's own outputs (emu_vals) for 10,000 normal values `array` "
                     "(times `scale`), formats q43, q52, bfloat16, half; modes 1-4; subnormal 0/1.",
    "matlab_stream": "rng(seed); c = chop(x, options); after = rand(4, 1) with MATLAB's own stream.",
    "roundit": "y = roundit(x, options) in each rounding mode; randfunc replays `stream`.",
    "float_params": "float_params(name): the row [u xmins xmin xmax p emins emin emax].",
}


PACKED_README = """\
# This folder: the corpus below, packed for the Python package

`manifest.json` and `arrays.npz` hold every MAT-file described below, packed by
`tools/pack_matlab_reference.py` of the source repository and read by
`pychop_compat.validation.corpora.load_corpus("matlab_reference")` (NumPy alone: see that
module for the layout).  Groups: `chop`, `matlab_native`, `matlab_stream`,
`roundit`, `float_params`; one case per MAT-file (for `float_params`, one per
row of its table), with the MAT-file's variables as fields.  MATLAB 1-by-1
numbers are JSON numbers, character arrays strings, `params`/`ret_params`
`[t, emax]` lists or `null` for `[]`; other variables are arrays with their
MATLAB class and shape.  `matlab_native` cases name the shared input `array`
and its `scale` (1 or 1e-3, as explained below).  The packing tool checks that
every field equals the MAT-file bit for bit.

"""


def _load(path: Path) -> dict:
    return {k: v for k, v in scipy.io.loadmat(path).items() if not k.startswith("__")}


def _number(value: np.ndarray):
    v = value.item()
    return int(v) if float(v).is_integer() else float(v)


class _Packer:
    def __init__(self):
        self.arrays: dict[str, np.ndarray] = {}
        self.by_digest: dict[tuple, str] = {}

    def key(self, array: np.ndarray) -> str:
        array = np.ascontiguousarray(array)
        digest = (array.dtype.str, array.shape, hashlib.sha256(array.tobytes()).hexdigest())
        if digest not in self.by_digest:
            self.by_digest[digest] = f"a{len(self.arrays)}"
            self.arrays[self.by_digest[digest]] = array
        return self.by_digest[digest]

    def record(self, mat: dict, **fields) -> dict:
        record, arrays = dict(fields), {}
        for name, value in mat.items():
            if name in STRINGS:
                text = str(value[0]) if value.size else ""
                record.setdefault(name, text)
                assert record[name] == text, (name, record[name], text)
            elif name in SCALARS:
                number = _number(value)
                record.setdefault(name, number)
                assert record[name] == number, (name, record[name], number)
            elif name in PAIRS:
                record[name] = [_number(v) for v in value.ravel()] if value.size else None
            else:
                arrays[name] = self.key(value)
        record["arrays"] = arrays
        return record


def pack(source: Path, dest: Path) -> None:
    packer = _Packer()
    groups: dict[str, list] = {}
    groups["chop"] = [packer.record(_load(source / "chop" / f"{c['id']}.mat"), **c)
                      for c in json.loads((source / "manifest.json").read_text())]
    verified = _load(source / "matlab_native" / "verified_data.mat")["array"]
    native = []
    for path in sorted((source / "matlab_native").glob("*_rmode_*.mat")):
        fmt, _, mode, _, subnormal = path.stem.split("_")
        native.append(packer.record({**_load(path), "array": verified}, id=path.stem,
                                    format="h" if fmt == "half" else fmt, round=int(mode),
                                    subnormal=int(subnormal), scale=1.0 if subnormal == "0" else 1e-3))
    groups["matlab_native"] = native
    groups["matlab_stream"] = [packer.record(_load(source / "matlab_stream" / "chop" / f"{c['id']}.mat"), **c)
                               for c in json.loads((source / "matlab_stream" / "manifest.json").read_text())]
    groups["roundit"] = [packer.record(_load(path), id=path.stem)
                         for path in sorted((source / "roundit").glob("*.mat"))]
    table = _load(source / "float_params.mat")
    columns = str(table["columns"][0]).split()
    groups["float_params"] = [packer.record({"vals": row.copy()}, id=str(name).strip(), columns=columns)
                              for name, row in zip(table["names"], table["vals"])]

    dest.mkdir(parents=True, exist_ok=True)
    np.savez_compressed(dest / "arrays.npz", **packer.arrays)
    manifest = {
        "name": "matlab_reference",
        "title": "Outputs of MATLAB's chop.m, roundit.m and float_params.m",
        "source": "github.com/higham/chop, commit 906c31e (N. J. Higham and S. Pranesh); see README.md",
        "format_version": 1,
        "arrays": "arrays.npz",
        "groups": {name: {"description": DESCRIPTIONS[name], "cases": cases} for name, cases in groups.items()},
    }
    (dest / "manifest.json").write_text(json.dumps(manifest, indent=0, separators=(",", ":")) + "\n")
    (dest / "README.md").write_text(PACKED_README + (source / "README.md").read_text())
    _check(source, dest)


def _check(source: Path, dest: Path) -> None:
    """Every packed case equals its MAT-file, bit for bit."""
    from pychop_compat.validation.corpora import Corpus

    corpus = Corpus(dest)

    def same(a, b, what):
        assert a.dtype == b.dtype and a.shape == b.shape, what
        assert a.tobytes() == b.tobytes(), what

    def compare(case, mat, what):
        for name, value in mat.items():
            got = case[name]
            if name in STRINGS:
                assert got == (str(value[0]) if value.size else ""), (what, name)
            elif name in SCALARS:
                assert got == value.item(), (what, name)
            elif name in PAIRS:
                assert (got or []) == value.ravel().tolist(), (what, name)
            else:
                same(got, value, (what, name))

    n = 0
    for case in corpus.cases("chop"):
        compare(case, _load(source / "chop" / f"{case.id}.mat"), case.id)
        n += 1
    verified = _load(source / "matlab_native" / "verified_data.mat")["array"]
    for case in corpus.cases("matlab_native"):
        compare(case, {**_load(source / "matlab_native" / f"{case.id}.mat"), "array": verified}, case.id)
        n += 1
    for case in corpus.cases("matlab_stream"):
        compare(case, _load(source / "matlab_stream" / "chop" / f"{case.id}.mat"), case.id)
        n += 1
    for case in corpus.cases("roundit"):
        compare(case, _load(source / "roundit" / f"{case.id}.mat"), case.id)
        n += 1
    table = _load(source / "float_params.mat")
    for case, row in zip(corpus.cases("float_params"), table["vals"]):
        same(case["vals"], row, case.id)
        n += 1
    print(f"packed {n} cases into {dest}: every field equals the MAT-files bit for bit")


if __name__ == "__main__":
    if len(sys.argv) not in (2, 3):
        sys.exit(__doc__)
    pack(Path(sys.argv[1]), Path(sys.argv[2]) if len(sys.argv) == 3 else ROOT / "pychop_compat" / "data" / "matlab_reference")
