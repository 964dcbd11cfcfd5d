"""The MATLAB/Octave drivers of tests/matlab_reference: the MAT-file export is the exact inverse of
tools/pack_matlab_reference.py, and (where Octave and chop.m are at hand) the drivers reproduce
every stored output."""

from __future__ import annotations

import importlib.util
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parent.parent
DRIVERS = ROOT / "tests" / "matlab_reference"
SHIPPED = ROOT / "pychop_compat" / "data" / "matlab_reference"

pytest.importorskip("scipy.io")


def _module(path: Path, name: str):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def exported(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("mat")
    counts = _module(DRIVERS / "export_corpus.py", "export_corpus").export(out)
    assert counts == {"chop": 744, "matlab_stream": 120, "roundit": 6, "matlab_native": 32, "float_params": 20}
    return out


def test_the_drivers_are_all_there():
    for name in ("README.md", "export_corpus.py", "run_reference.m", "octave/pow2.m", "octave_stream/rng.m",
                 "octave_stream/rand.m", "octave_stream/randi.m", "octave_stream/mt_words.m"):
        assert (DRIVERS / name).is_file(), name
    assert not list(DRIVERS.rglob("chop.m")), "chop.m itself is not copied here (github.com/higham/chop)"


def test_export_then_pack_gives_back_the_shipped_corpus(exported, tmp_path):
    packed = tmp_path / "packed"
    _module(ROOT / "tools" / "pack_matlab_reference.py", "pack_matlab_reference").pack(exported, packed)
    assert (packed / "manifest.json").read_bytes() == (SHIPPED / "manifest.json").read_bytes()
    with np.load(packed / "arrays.npz") as got, np.load(SHIPPED / "arrays.npz") as want:
        assert sorted(got.files) == sorted(want.files)
        for key in want.files:
            a, b = got[key], want[key]
            assert a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes(), key


@pytest.mark.slow
def test_octave_reruns_the_corpus(exported, tmp_path):
    """run_reference.m under GNU Octave, with chop.m from $CHOP_M_DIR (github.com/higham/chop at 906c31e)."""
    octave = shutil.which("octave-cli")
    chop_dir = os.environ.get("CHOP_M_DIR", "")
    if octave is None or not (Path(chop_dir) / "chop.m").is_file():
        pytest.skip("needs octave-cli and CHOP_M_DIR naming a folder with chop.m, roundit.m, float_params.m")
    fresh = tmp_path / "fresh"
    script = (f"addpath('{chop_dir}'); addpath('{DRIVERS}'); "
              f"if ~run_reference('{exported}', '{fresh}'), exit(1), end")
    run = subprocess.run([octave, "--no-gui", "--eval", script], capture_output=True, text=True, timeout=900)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    counts = dict(re.findall(r"^(\w+)\s+(\d+) of\s+\d+ cases agree", run.stdout, flags=re.M))
    assert counts == {"chop": "744", "roundit": "6", "float_params": "20", "matlab_native": "32",
                      "matlab_stream": "120"}, run.stdout
    # The fresh outputs pack into the shipped corpus (the generator's position word aside).
    packed = tmp_path / "packed"
    subprocess.run([sys.executable, str(ROOT / "tools" / "pack_matlab_reference.py"), str(fresh), str(packed)],
                   check=True, capture_output=True, env={**os.environ, "PYTHONPATH": str(ROOT)})
    from pychop_compat.validation.corpora import Corpus, load_corpus

    got, want = Corpus(packed), load_corpus("matlab_reference")
    for group in want.groups:
        cases = {case.id: case for case in got.cases(group)}
        for case in want.cases(group):
            for name in case:
                a, b = cases[case.id][name], case[name]
                if name == "state":
                    a, b = a[:624], b[:624]
                if isinstance(b, np.ndarray):
                    assert a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes(), (case.id, name)
                else:
                    assert a == b, (case.id, name)
