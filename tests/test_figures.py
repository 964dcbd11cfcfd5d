"""Every figure of the documentation is made by a script in docs/figures, the scripts run, and the
committed figures show what their scripts compute now (compared through the plotted data each
script writes beside its PNG, never through the PNG's bytes)."""

from __future__ import annotations

import importlib
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
FIGURES = ROOT / "docs" / "figures"
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def _make_all():
    sys.path.insert(0, str(FIGURES))
    try:
        return importlib.import_module("make_all")
    finally:
        sys.path.remove(str(FIGURES))


def _scripts():
    return _make_all().SCRIPTS


SCRIPTS = _scripts()


def _caption(name: str) -> str:
    """The caption of the figure ``figures/<name>.png`` in the docs, on one line."""
    for page in (ROOT / "docs").rglob("*.rst"):
        lines = page.read_text().splitlines()
        for i, line in enumerate(lines):
            if line.strip() == f".. figure:: figures/{name}.png":
                body = []
                for text in lines[i + 1:]:
                    if text.strip() and not text.startswith(" "):
                        break
                    if not text.strip().startswith(":"):
                        body.append(text.strip())
                return " ".join(" ".join(body).split())
    raise AssertionError(f"no page shows figures/{name}.png")


def test_every_figure_in_the_docs_has_its_script_and_committed_png():
    used = set()
    for page in (ROOT / "docs").rglob("*.rst"):
        used |= set(re.findall(r"figures/(\w+)\.png", page.read_text()))
    scripts = set(SCRIPTS)
    assert used, "the docs include no figure"
    assert used <= scripts, f"figures without a script: {used - scripts}"
    assert scripts <= used, f"scripts whose figure no page shows: {scripts - used}"
    for name in scripts:
        assert (FIGURES / f"{name}.py").is_file()
        assert (FIGURES / f"{name}.png").read_bytes().startswith(PNG_SIGNATURE)
        assert json.loads((FIGURES / f"{name}.json").read_text())["figure"] == name


@pytest.mark.slow  # runs every figure script (matplotlib, the studies behind the figures): CI's slow step
def test_figure_scripts_run(tmp_path):
    pytest.importorskip("matplotlib")
    code = ("import sys; sys.path.insert(0, sys.argv[1]); import make_all; "
            "print('\\n'.join(map(str, make_all.main(out_dir=sys.argv[2], quick=True))))")
    out = subprocess.run([sys.executable, "-c", code, str(FIGURES), str(tmp_path)],
                         capture_output=True, text=True, env={**os.environ, "MPLBACKEND": "Agg"}, cwd=tmp_path)
    assert out.returncode == 0, out.stderr[-3000:]
    made = sorted(Path(line).name for line in out.stdout.split())
    assert made == sorted(f"{name}.png" for name in SCRIPTS)
    for name in made:
        data = (tmp_path / name).read_bytes()
        assert data.startswith(PNG_SIGNATURE) and len(data) > 10_000, name
        assert json.loads((tmp_path / name).with_suffix(".json").read_text())["data"], name


@pytest.mark.slow  # reruns each figure's study: CI's slow step
@pytest.mark.parametrize("name", SCRIPTS)
def test_committed_figure_shows_what_its_script_computes(name):
    """A stale figure fails here: its script's data now differ from the JSON committed with the PNG
    (rerun ``python docs/figures/<name>.py`` and commit both files).  A few seconds per figure.

    In a fresh process: the scripts pin OpenBLAS's kernels (``figure_common``), which works only
    before NumPy is loaded; this process loaded it long ago."""
    pytest.importorskip("matplotlib")
    code = ("import json, sys; sys.path.insert(0, sys.argv[1]); import make_all; "
            "print(json.dumps(make_all.check(sys.argv[2])))")
    out = subprocess.run([sys.executable, "-c", code, str(FIGURES), name], capture_output=True, text=True,
                         env={**os.environ, "MPLBACKEND": "Agg"}, cwd=ROOT)
    assert out.returncode == 0, out.stderr[-3000:]
    found = json.loads(out.stdout.strip().splitlines()[-1])
    assert not found, "\n".join(found[:10])


@pytest.mark.parametrize("name", SCRIPTS)
def test_caption_states_what_the_figure_shows(name):
    """The caption in the docs contains the facts the script reads off its committed data
    (e.g. the step counts of ir_convergence)."""
    pytest.importorskip("matplotlib")
    _make_all()
    sys.path.insert(0, str(FIGURES))
    try:
        module = importlib.import_module(name)
    finally:
        sys.path.remove(str(FIGURES))
    committed = json.loads((FIGURES / f"{name}.json").read_text())["data"]
    caption = _caption(name)
    missing = [fact for fact in module.caption_facts(committed) if fact not in caption]
    assert not missing, f"the caption of figures/{name}.png should say {missing}; it reads: {caption}"
