"""Every figure of the documentation is made by a script in docs/figures, and the scripts run."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
FIGURES = ROOT / "docs" / "figures"
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def _scripts():
    sys.path.insert(0, str(FIGURES))
    try:
        import importlib

        return importlib.import_module("make_all").SCRIPTS
    finally:
        sys.path.remove(str(FIGURES))


def test_every_figure_in_the_docs_has_its_script_and_committed_png():
    used = set()
    for page in (ROOT / "docs").rglob("*.rst"):
        used |= set(re.findall(r"figures/(\w+)\.png", page.read_text()))
    scripts = set(_scripts())
    assert used, "the docs include no figure"
    assert used <= scripts, f"figures without a script: {used - scripts}"
    assert scripts <= used, f"scripts whose figure no page shows: {scripts - used}"
    for name in scripts:
        assert (FIGURES / f"{name}.py").is_file()
        assert (FIGURES / f"{name}.png").read_bytes().startswith(PNG_SIGNATURE)


def test_figure_scripts_run(tmp_path):
    pytest.importorskip("matplotlib")
    code = ("import sys; sys.path.insert(0, sys.argv[1]); import make_all; "
            "print('\\n'.join(map(str, make_all.main(out_dir=sys.argv[2], quick=True))))")
    out = subprocess.run([sys.executable, "-c", code, str(FIGURES), str(tmp_path)],
                         capture_output=True, text=True, env={**os.environ, "MPLBACKEND": "Agg"}, cwd=tmp_path)
    assert out.returncode == 0, out.stderr[-3000:]
    made = sorted(Path(line).name for line in out.stdout.split())
    assert made == sorted(f"{name}.png" for name in _scripts())
    for name in made:
        data = (tmp_path / name).read_bytes()
        assert data.startswith(PNG_SIGNATURE) and len(data) > 10_000, name
