"""Reference corpora shipped inside the package: stored outputs of other implementations.

A corpus is a folder ``pychop_compat/data/<name>/`` (package data) with a
``README.md`` and two files read with NumPy and the standard library alone:

``manifest.json``
    ``{"name", "title", "source", "format_version": 1, "arrays": "arrays.npz",
    "groups": {group: {"description", "cases": [case, ...]}}}``; a case holds
    its ``id``, its scalar fields and ``"arrays": {field: key}`` naming its
    arrays in ``arrays.npz`` (identical arrays are stored once).
``arrays.npz``
    The arrays (``numpy.savez_compressed``, no pickles), with the dtype and
    shape the original implementation produced.

To add a corpus, convert the original files with a script in ``tools/``
(``tools/pack_matlab_reference.py`` is the model: it checks every array bit
for bit), name it in :data:`CORPORA`, ship it as package data and give it a
validation group.

>>> from pychop_compat.validation.corpora import load_corpus
>>> corpus = load_corpus("matlab_reference")
>>> len(corpus.cases("chop"))
744
>>> case = corpus.case("chop", "h_double_r1_s0_e0")
>>> case["format"], case["round"], case["x"].shape, case["x"].dtype
('h', 1, (32, 20), dtype('float64'))
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Any, Optional, Union

import numpy as np

__all__ = ["CORPORA", "OTHER_DATA", "Corpus", "CorpusCase", "corpus_path", "load_corpus"]

#: The corpora shipped in ``pychop_compat/data``: name -> what it holds.
CORPORA: dict[str, str] = {
    "matlab_reference": "outputs of MATLAB's chop.m, roundit.m and float_params.m (chop commit 906c31e)",
}

#: Other data shipped in ``pychop_compat/data`` in a layout of its own (read by
#: :mod:`pychop_compat.validation` and the tests): name -> what it holds.
OTHER_DATA: dict[str, str] = {
    "cpfloat_reference": "outputs of the CPFloat C library (commit 3583976), deterministic modes",
}

#: The layout version a reader of this module understands.
FORMAT_VERSION = 1


class CorpusCase(Mapping):
    """One stored case: a read-only mapping from field names to scalars and arrays.

    Array fields are a fresh copy on every access (a test that checks that an
    input is left unchanged cannot be fooled by a shared buffer).
    """

    def __init__(self, corpus: "Corpus", record: dict):
        self._corpus = corpus
        self._scalars = {k: v for k, v in record.items() if k != "arrays"}
        self._arrays = dict(record.get("arrays", {}))

    @property
    def id(self) -> str:
        """The case's id, unique within its group."""
        return self._scalars["id"]

    @property
    def array_fields(self) -> tuple[str, ...]:
        """The names of the fields held as arrays."""
        return tuple(self._arrays)

    def __getitem__(self, name: str) -> Any:
        if name in self._arrays:
            return self._corpus.array(self._arrays[name])
        return self._scalars[name]

    def __iter__(self) -> Iterator[str]:
        yield from self._scalars
        yield from self._arrays

    def __len__(self) -> int:
        return len(self._scalars) + len(self._arrays)

    def __repr__(self) -> str:
        return f"CorpusCase({self.id!r}, arrays={list(self._arrays)})"


class Corpus:
    """A reference corpus read from a folder holding ``manifest.json`` and its arrays.

    Parameters
    ----------
    folder : str or pathlib.Path
        The folder (see the module's description of the layout).

    Raises
    ------
    FileNotFoundError
        When the folder has no ``manifest.json``, or not the arrays file it names.
    ValueError
        When the manifest is not valid JSON, lacks ``name``, ``arrays`` or ``groups`` (each
        with a list of ``cases``), or its ``format_version`` is not one this module reads.
    """

    def __init__(self, folder: Union[str, Path]):
        self.folder = Path(folder)
        manifest_path = self.folder / "manifest.json"
        if not manifest_path.is_file():
            raise FileNotFoundError(f"reference corpus not found: no manifest.json in {self.folder}")
        try:
            self.manifest: dict = json.loads(manifest_path.read_text(encoding="utf-8"))
        except ValueError as exc:  # (JSONDecodeError, UnicodeDecodeError)
            raise ValueError(f"corpus {self.folder}: manifest.json is not valid JSON ({exc})") from None
        if not isinstance(self.manifest, dict):
            raise ValueError(f"corpus {self.folder}: manifest.json holds no JSON object")
        version = self.manifest.get("format_version")
        if version != FORMAT_VERSION:
            raise ValueError(f"corpus {self.folder}: format_version {version!r}, this reader knows {FORMAT_VERSION}")
        # checked here, not case by case in a run of thousands of cases
        missing = [key for key in ("name", "arrays", "groups") if key not in self.manifest]
        groups = self.manifest.get("groups")
        if missing or not isinstance(groups, dict) or not all(
                isinstance(group, dict) and isinstance(group.get("cases"), list) for group in groups.values()):
            raise ValueError(f"corpus {self.folder}: manifest.json lacks "
                             + (", ".join(missing) if missing else "a list of cases in each group"))
        self.name: str = self.manifest["name"]
        self._arrays_path = self.folder / self.manifest["arrays"]
        if not self._arrays_path.is_file():
            raise FileNotFoundError(f"corpus {self.folder}: no {self.manifest['arrays']}, which its manifest names")
        self._cache: dict[str, np.ndarray] = {}
        self._npz: Optional[np.lib.npyio.NpzFile] = None

    @property
    def groups(self) -> list[str]:
        """The group names, in the manifest's order."""
        return list(self.manifest["groups"])

    def description(self, group: str) -> str:
        """What the cases of ``group`` check."""
        return self.manifest["groups"][group].get("description", "")

    def cases(self, group: str) -> list[CorpusCase]:
        """Every case of ``group``, in the manifest's order."""
        return [CorpusCase(self, record) for record in self.manifest["groups"][group]["cases"]]

    def case(self, group: str, case_id: str) -> CorpusCase:
        """The case of ``group`` with id ``case_id``."""
        for record in self.manifest["groups"][group]["cases"]:
            if record["id"] == case_id:
                return CorpusCase(self, record)
        raise KeyError(f"no case {case_id!r} in group {group!r} of corpus {self.name!r}")

    def array(self, key: str) -> np.ndarray:
        """A copy of the stored array ``key`` (decompressed once, then kept)."""
        if key not in self._cache:
            if self._npz is None:
                self._npz = np.load(self._arrays_path, allow_pickle=False)
            self._cache[key] = self._npz[key]
        return self._cache[key].copy()

    def __repr__(self) -> str:
        return f"Corpus({self.name!r}, groups={self.groups})"


def corpus_path(name: str) -> Path:
    """The folder of the shipped corpus ``name`` (one of :data:`CORPORA` or :data:`OTHER_DATA`).

    Raises
    ------
    ValueError
        When ``name`` is not a shipped corpus; the message lists those that are.
    """
    if name not in CORPORA and name not in OTHER_DATA:
        known = ", ".join(sorted({**CORPORA, **OTHER_DATA}))
        raise ValueError(f"unknown corpus {name!r}; shipped corpora: {known}")
    # The package is installed as files (setuptools does not zip it), so the
    # resource is a real folder that np.load can open by path.
    return Path(str(resources.files("pychop_compat") / "data" / name))


@lru_cache(maxsize=None)
def _shipped(name: str) -> Corpus:
    return Corpus(corpus_path(name))


def load_corpus(name_or_folder: Union[str, Path] = "matlab_reference") -> Corpus:
    """A shipped corpus by name, or a corpus in the same layout from a folder.

    Parameters
    ----------
    name_or_folder : str or pathlib.Path
        A name of :data:`CORPORA` (loaded once per process and shared), or the
        path of a folder holding ``manifest.json`` and its arrays.

    Returns
    -------
    Corpus
    """
    if isinstance(name_or_folder, str) and name_or_folder in CORPORA:
        return _shipped(name_or_folder)
    return Corpus(name_or_folder)
